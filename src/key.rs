//! Client keys: what a rule counts by.
//!
//! Keys come only from values a client cannot forge cheaply. `ip` reads
//! `CF-Connecting-IP`, which Cloudflare sets on every request it proxies;
//! `X-Forwarded-For`, `True-Client-IP` and the like are client-controlled and
//! never read. A key is a short string such as `ip=203.0.113.7` or
//! `ip=2001:db8:1:2::/64|header:x-api-key=k1`; the Durable Object that counts
//! for it is named after `(rule, key)`.

use crate::canon::CanonicalQuery;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One part of a rule's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The client IP from `CF-Connecting-IP`, IPv6 grouped by prefix.
    Ip,
    /// A request header, by lowercased name.
    Header(String),
    /// A cookie, by exact name.
    Cookie(String),
    /// A query parameter, by name (normalized as in [`CanonicalQuery`]).
    Query(String),
    /// A named group of the rule's URLPattern (`:tenant` in `/t/:tenant/*`).
    PathGroup(String),
    /// A JSON or form field of the body (`email`, or `user.email` in JSON),
    /// trimmed, lowercased and hashed with SHA-256: no raw value is stored
    /// or logged.
    Body(String),
    /// `request.cf.country`.
    Country,
    /// `request.cf.asn`.
    Asn,
    /// One bucket for every client.
    Global,
}

impl KeyPart {
    /// Whether the part identifies the client (as opposed to the target of
    /// the request). Clearing a count on success must never touch these, or
    /// a client could reset its own count by succeeding on its own account.
    pub fn identifies_client(&self) -> bool {
        matches!(self, KeyPart::Ip | KeyPart::Global | KeyPart::Country | KeyPart::Asn)
    }
}

impl KeyPart {
    /// Parses `ip`, `global`, `country`, `asn`, `header:NAME`,
    /// `cookie:NAME`, `query:NAME`, `path:GROUP` or `body:FIELD`.
    pub fn parse(text: &str) -> Result<KeyPart, KeyPartError> {
        let (kind, name) = match text.split_once(':') {
            Some((kind, name)) => (kind, Some(name)),
            None => (text, None),
        };
        let named = |make: fn(String) -> KeyPart| match name {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()) => Ok(make(n.to_string())),
            _ => Err(KeyPartError::MissingName { text: text.to_string(), kind: kind.to_string() }),
        };
        match (kind, name) {
            ("ip", None) => Ok(KeyPart::Ip),
            ("global", None) => Ok(KeyPart::Global),
            ("country", None) => Ok(KeyPart::Country),
            ("asn", None) => Ok(KeyPart::Asn),
            ("body", _) => named(KeyPart::Body),
            ("header", _) => named(|n| KeyPart::Header(n.to_ascii_lowercase())),
            ("cookie", _) => named(KeyPart::Cookie),
            ("query", _) => named(KeyPart::Query),
            ("path", _) => named(KeyPart::PathGroup),
            _ => Err(KeyPartError::Unknown(text.to_string())),
        }
    }
}

/// Why a key part written in the config was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPartError {
    /// `header:`, `cookie:`, `query:`, `path:` or `body:` without a name
    /// of visible ASCII after the colon (`text` is the whole part).
    MissingName { text: String, kind: String },
    /// Not a known kind of part (`colour`), or a kind that takes no name
    /// given one (`ip:x`).
    Unknown(String),
}

impl fmt::Display for KeyPartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPartError::MissingName { text, kind } => write!(f, "`{text}` needs a name after `{kind}:`"),
            KeyPartError::Unknown(text) => write!(
                f,
                "unknown key part `{text}` (use ip, global, country, asn, header:NAME, cookie:NAME, query:NAME, path:GROUP or body:FIELD)"
            ),
        }
    }
}

impl std::error::Error for KeyPartError {}

/// The message, for collectors that keep errors as text (the config's
/// per-rule error list).
impl From<KeyPartError> for String {
    fn from(error: KeyPartError) -> String {
        error.to_string()
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPart::Ip => write!(f, "ip"),
            KeyPart::Global => write!(f, "global"),
            KeyPart::Country => write!(f, "country"),
            KeyPart::Asn => write!(f, "asn"),
            KeyPart::Body(n) => write!(f, "body:{n}"),
            KeyPart::Header(n) => write!(f, "header:{n}"),
            KeyPart::Cookie(n) => write!(f, "cookie:{n}"),
            KeyPart::Query(n) => write!(f, "query:{n}"),
            KeyPart::PathGroup(n) => write!(f, "path:{n}"),
        }
    }
}

/// The request values a key can be built from.
pub struct KeyInputs<'a> {
    /// The raw `CF-Connecting-IP` header, if any.
    pub client_ip: Option<&'a str>,
    /// Looks up a request header by lowercased name.
    pub header: &'a dyn Fn(&str) -> Option<String>,
    pub query: &'a CanonicalQuery,
    /// Groups captured by the rule's URLPattern.
    pub path_groups: &'a [(String, String)],
    /// Looks up a body field's raw value (see [`body_field`]).
    pub body: &'a dyn Fn(&str) -> Option<String>,
    /// `request.cf.country` and `request.cf.asn`.
    pub country: Option<&'a str>,
    pub asn: Option<u32>,
    pub ipv6_prefix: u8,
}


/// A key part the request does not carry (or carries unusably).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingPart(pub KeyPart);

impl fmt::Display for MissingPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the request has no usable `{}`", self.0)
    }
}

impl std::error::Error for MissingPart {}

/// Builds the key for `parts`. A part that is absent or empty is an error:
/// the caller applies the rule's missing-key policy, so absent values never
/// share one empty-key bucket by accident.
pub fn derive_key(parts: &[KeyPart], inputs: &KeyInputs<'_>) -> Result<String, MissingPart> {
    let mut key = String::new();
    for part in parts {
        let value = part_value(part, inputs)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| MissingPart(part.clone()))?;
        if !key.is_empty() {
            key.push('|');
        }
        key.push_str(&part.to_string());
        key.push('=');
        key.push_str(&value);
    }
    Ok(key)
}

fn part_value(part: &KeyPart, inputs: &KeyInputs<'_>) -> Option<String> {
    match part {
        KeyPart::Ip => client_ip_key(inputs.client_ip?, inputs.ipv6_prefix),
        KeyPart::Global => Some("*".to_string()),
        // Repeated headers arrive joined by ", ": several different items
        // are ambiguous (origins read the first or the last) and so missing.
        KeyPart::Header(name) => (inputs.header)(name).and_then(|v| single_value(v.split(',').map(str::trim))),
        KeyPart::Cookie(name) => (inputs.header)("cookie").and_then(|c| cookie_value(&c, name)),
        KeyPart::Query(name) => single_value(inputs.query.values(name)),
        KeyPart::PathGroup(name) => inputs
            .path_groups
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone()),
        KeyPart::Body(field) => (inputs.body)(field).and_then(|v| hash_identity(&v)),
        KeyPart::Country => inputs.country.map(|c| c.trim().to_ascii_uppercase()),
        KeyPart::Asn => inputs.asn.map(|a| a.to_string()),
    }
}

/// The key a one-part key of `part` would be for a request carrying
/// `value` for it, derived exactly as [`derive_key`] derives it: a `body:`
/// value trimmed, lowercased and hashed; a header's one item (several
/// different items are missing); other parts as given. `None` for a value
/// that would be missing, and for `ip`, `global`, `country` and `asn`,
/// which no request value names.
pub fn identity_key(part: &KeyPart, value: &str) -> Option<String> {
    let derived = match part {
        KeyPart::Body(_) => hash_identity(value),
        KeyPart::Header(_) => single_value(value.split(',').map(str::trim)),
        KeyPart::Cookie(_) | KeyPart::Query(_) | KeyPart::PathGroup(_) => Some(value.to_string()),
        KeyPart::Ip | KeyPart::Global | KeyPart::Country | KeyPart::Asn => None,
    };
    derived.filter(|v| !v.is_empty()).map(|v| format!("{part}={v}"))
}

/// The one value of a repeated parameter. Several *different* values read
/// as missing: origins disagree on which one counts (PHP and Rack take the
/// last, others the first), and a client could otherwise get a fresh counter
/// per request by varying the one tollgate does not read.
fn single_value<'v>(mut values: impl Iterator<Item = &'v str>) -> Option<String> {
    let first = values.next()?;
    values.all(|v| v == first).then(|| first.to_string())
}

/// Normalizes an identity such as an email (trimmed, lowercased) and hashes
/// it with SHA-256 (hex). `None` for a value that is empty once trimmed.
pub fn hash_identity(raw: &str) -> Option<String> {
    use sha2::{Digest, Sha256};
    let normalized = raw.trim().to_lowercase();
    if normalized.is_empty() {
        return None;
    }
    Some(Sha256::digest(normalized.as_bytes()).iter().map(|b| format!("{b:02x}")).collect())
}

/// The raw value of `field` in a request body, by content type:
/// - `application/json` (and `+json`): a top-level member, or a dotted path
///   (`user.email`); strings, numbers and booleans are read, anything else
///   is absent;
/// - `application/x-www-form-urlencoded`: the field's value (names
///   normalized as query keys are, see [`CanonicalQuery`]); a field given
///   several different values is absent.
///
/// Anything else (multipart, text, malformed JSON, invalid UTF-8) is absent:
/// the rule's missing-key policy then applies.
pub fn body_field(content_type: &str, body: &[u8], field: &str) -> Option<String> {
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if media == "application/json" || media.ends_with("+json") {
        let value: serde_json::Value = serde_json::from_slice(body).ok()?;
        let mut current = &value;
        for part in field.split('.') {
            current = current.get(part)?;
        }
        match current {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    } else if media == "application/x-www-form-urlencoded" {
        let text = std::str::from_utf8(body).ok()?;
        single_value(CanonicalQuery::parse(text).values(field))
    } else {
        None
    }
}

/// A short label for a key in logs and admin output: 16 hex digits, the
/// first 8 bytes of HMAC-SHA256(`log_key`, key) when the Worker has the
/// secret `TOLLGATE_LOG_KEY`, else of the key's plain SHA-256. The raw key
/// (an IP, an account) is never logged.
///
/// Without a log key the label is unkeyed: anyone with the logs can test a
/// guess against it, and all 2^32 IPv4 addresses are a few seconds of
/// hashing, so an unkeyed `ip=` hash is as good as the address. With one,
/// only a holder of the secret can compute or test a label (`tollgate
/// hash`). Both have the same length, so log queries and dashboards do not
/// change when the secret is added; the labels themselves do.
pub fn key_hash(key: &str, log_key: Option<&[u8]>) -> String {
    use sha2::{Digest, Sha256};
    let digest: [u8; 32] = match log_key {
        Some(secret) => crate::hmac::hmac_sha256(secret, key.as_bytes()),
        None => Sha256::digest(key.as_bytes()).into(),
    };
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The log key a `TOLLGATE_LOG_KEY` secret stands for: its bytes with
/// surrounding whitespace trimmed (a secret stored with a trailing newline,
/// `echo key | wrangler secret put`, or read from a file, is the same key).
/// `None` for a blank secret, which keys nothing.
pub fn log_key(secret: &str) -> Option<Vec<u8>> {
    let trimmed = secret.trim();
    (!trimmed.is_empty()).then(|| trimmed.as_bytes().to_vec())
}

/// The value of cookie `name` in a `Cookie` header (RFC 6265 §5.4):
/// surrounding quotes removed and percent-decoded to a fixpoint, as
/// Express, PHP and Rack decode it (`sid=%61bc` is `sid=abc`). The cookie
/// given several times with different values is missing: Django reads the
/// last, most others the first, so either could be the real one.
pub fn cookie_value(header: &str, name: &str) -> Option<String> {
    let values = header.split(';').filter_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        let v = v.trim().trim_matches('"');
        (k.trim() == name).then(|| String::from_utf8_lossy(&crate::canon::decode_fully(v.as_bytes())).into_owned())
    });
    let values: Vec<String> = values.collect();
    single_value(values.iter().map(String::as_str))
}

/// The counting identity of a client address.
///
/// - IPv4 as dotted quad.
/// - IPv4-mapped IPv6 (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2), NAT64
///   well-known-prefix addresses (`64:ff9b::/96`, RFC 6052) and 6to4
///   addresses (`2002:V4ADDR::/48`, RFC 3056 §2) count as their IPv4
///   address: the same client reached over another stack. A 6to4 host owns
///   a whole /48 (65,536 /64s), so grouping it by `prefix` would hand it
///   that many buckets.
/// - Teredo addresses (`2001:0::/32`, RFC 4380 §4) count as the client's
///   public IPv4 address and UDP port (`teredo:192.0.2.45:40000`): the
///   first 64 bits name only the Teredo server, which every client of that
///   server shares.
/// - Other IPv6 is masked to `prefix` bits and written as `network/prefix`,
///   so that spelling variants (case, zero compression) are one key and a
///   client cannot rotate through the addresses of its own subnet.
///
/// `None` when `raw` is not an IP address.
pub fn client_ip_key(raw: &str, ipv6_prefix: u8) -> Option<String> {
    match raw.trim().parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => Some(v4.to_string()),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(&v6) {
                return Some(v4.to_string());
            }
            if let Some((v4, port)) = teredo_client(&v6) {
                return Some(format!("teredo:{v4}:{port}"));
            }
            let prefix = u32::from(ipv6_prefix.min(128));
            let bits = u128::from(v6);
            let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
            Some(format!("{}/{}", Ipv6Addr::from(bits & mask), prefix))
        }
    }
}

/// The IPv4 address a mapped, NAT64 or 6to4 address stands for.
fn embedded_ipv4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let bits = u128::from(*v6);
    let s = v6.segments();
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::from(bits as u32));
    }
    // 6to4: the IPv4 address is bits 16..48 (RFC 3056 §2).
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::from((bits >> 80) as u32));
    }
    None
}

/// The client's public IPv4 address and UDP port of a Teredo address
/// (RFC 4380 §4): prefix `2001:0000::/32`, server IPv4 (32 bits), flags
/// (16), the port XOR `0xFFFF` (16), the address XOR `0xFFFFFFFF` (32).
fn teredo_client(v6: &Ipv6Addr) -> Option<(Ipv4Addr, u16)> {
    let s = v6.segments();
    if s[..2] != [0x2001, 0] {
        return None;
    }
    let bits = u128::from(*v6);
    Some((Ipv4Addr::from(!(bits as u32)), !s[5]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hash_is_short_and_stable() {
        assert_eq!(key_hash("ip=203.0.113.7", None), key_hash("ip=203.0.113.7", None));
        assert_eq!(key_hash("abc", None), "ba7816bf8f01cfea", "unkeyed: the SHA-256 prefix");
    }

    #[test]
    fn a_log_key_makes_the_hash_an_hmac() {
        assert_eq!(key_hash("abc", Some(b"k")), "342e519ce0ad6c03", "HMAC-SHA256(k, abc), first 8 bytes");
        let a = key_hash("ip=203.0.113.7", Some(b"first secret"));
        let b = key_hash("ip=203.0.113.7", Some(b"second secret"));
        assert_ne!(a, b);
        assert_ne!(a, key_hash("ip=203.0.113.7", None));
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_eq!(log_key(" s3cret\n").as_deref(), Some(&b"s3cret"[..]));
        assert_eq!(log_key(" \n"), None, "a blank secret keys nothing");
    }

    #[test]
    fn ipv4_and_ipv6_prefixes() {
        assert_eq!(client_ip_key("203.0.113.7", 64).as_deref(), Some("203.0.113.7"));
        assert_eq!(
            client_ip_key("2001:db8:1:2:aaaa::1", 64).as_deref(),
            Some("2001:db8:1:2::/64")
        );
        assert_eq!(
            client_ip_key("2001:db8:1:2ff:aaaa::1", 56).as_deref(),
            Some("2001:db8:1:200::/56")
        );
        assert_eq!(client_ip_key("not an ip", 64), None);
    }

    #[test]
    fn spelling_variants_are_one_key() {
        let a = client_ip_key("2001:DB8:0:0:1::1", 64);
        let b = client_ip_key("2001:db8::1:0:0:2", 64);
        assert_eq!(a, b);
        assert_eq!(a.as_deref(), Some("2001:db8::/64"));
    }

    #[test]
    fn mapped_and_nat64_count_as_ipv4() {
        assert_eq!(client_ip_key("::ffff:203.0.113.7", 64).as_deref(), Some("203.0.113.7"));
        assert_eq!(client_ip_key("64:ff9b::203.0.113.7", 64).as_deref(), Some("203.0.113.7"));
        assert_eq!(client_ip_key("64:ff9b::cb00:7107", 64).as_deref(), Some("203.0.113.7"));
    }

    #[test]
    fn a_6to4_host_is_its_ipv4_address() {
        // 2002:c000:022d::/48 is the 6to4 prefix of 192.0.2.45 (RFC 3056 §2):
        // every /64 of it is one client, the IPv4 host itself.
        for raw in ["2002:c000:022d::1", "2002:c000:22d:1::1", "2002:C000:022D:ffff:1:2:3:4"] {
            assert_eq!(client_ip_key(raw, 64).as_deref(), Some("192.0.2.45"), "{raw}");
        }
        assert_eq!(client_ip_key("2002:cb00:7107::1", 48).as_deref(), Some("203.0.113.7"));
        assert_eq!(client_ip_key("2003:c000:022d::1", 64).as_deref(), Some("2003:c000:22d::/64"), "not 6to4");
    }

    #[test]
    fn a_teredo_client_is_its_public_address_and_port() {
        // RFC 4380 §4's example: server 65.54.227.120, cone NAT, client seen
        // as 192.0.2.45 port 40000.
        let rfc = "2001:0000:4136:e378:8000:63bf:3fff:fdd2";
        assert_eq!(client_ip_key(rfc, 64).as_deref(), Some("teredo:192.0.2.45:40000"));
        // Another client of the same server (same /64): another key.
        let other = "2001:0:4136:e378:8000:63bf:3fff:fdd1";
        assert_eq!(client_ip_key(other, 64).as_deref(), Some("teredo:192.0.2.46:40000"));
        // The same NAT, another port: another client behind it.
        assert_eq!(client_ip_key("2001:0:4136:e378:8000:ff3f:3fff:fdd2", 64).as_deref(), Some("teredo:192.0.2.45:192"));
        // The flags and server do not matter, only what identifies the client.
        assert_eq!(client_ip_key("2001:0:c633:6401:0:63bf:3fff:fdd2", 64), client_ip_key(rfc, 64));
        assert_eq!(client_ip_key("2001:1::1", 64).as_deref(), Some("2001:1::/64"), "not Teredo");
        assert_eq!(client_ip_key("2001:db8::1", 64).as_deref(), Some("2001:db8::/64"), "not Teredo");
    }

    #[test]
    fn key_parts_parse_and_combine() {
        assert_eq!(KeyPart::parse("header:X-Api-Key"), Ok(KeyPart::Header("x-api-key".into())));
        assert_eq!(
            KeyPart::parse("header:").map_err(|e| e.to_string()),
            Err("`header:` needs a name after `header:`".to_string())
        );
        assert_eq!(KeyPart::parse("ip:x"), Err(KeyPartError::Unknown("ip:x".into())));
        assert!(KeyPart::parse("colour").unwrap_err().to_string().starts_with("unknown key part `colour` (use ip,"));
        let query = CanonicalQuery::parse("tenant=t1");
        let header = |name: &str| match name {
            "x-api-key" => Some(" k1 ".to_string()),
            "cookie" => Some("a=1; sid=\"s2\"".to_string()),
            "x-forwarded-for" => Some("198.51.100.1".to_string()),
            _ => None,
        };
        let groups = [("school".to_string(), "s9".to_string())];
        let body = |field: &str| (field == "email").then(|| " User@Example.COM ".to_string());
        let inputs = KeyInputs {
            client_ip: Some("203.0.113.7"),
            header: &header,
            query: &query,
            path_groups: &groups,
            body: &body,
            country: Some("de"),
            asn: Some(64_500),
            ipv6_prefix: 64,
        };
        let parts: Vec<KeyPart> = ["ip", "header:x-api-key", "cookie:sid", "query:tenant", "path:school", "global", "country", "asn"]
            .iter()
            .map(|p| KeyPart::parse(p).unwrap())
            .collect();
        assert_eq!(
            derive_key(&parts, &inputs).unwrap(),
            "ip=203.0.113.7|header:x-api-key=k1|cookie:sid=s2|query:tenant=t1|path:school=s9|global=*|country=DE|asn=64500"
        );
        let email = derive_key(&[KeyPart::Body("email".into())], &inputs).unwrap();
        assert_eq!(email, format!("body:email={}", hash_identity("user@example.com").unwrap()));
        assert!(!email.contains('@'), "no raw value in the key");
        assert_eq!(
            derive_key(&[KeyPart::Header("x-missing".into())], &inputs),
            Err(MissingPart(KeyPart::Header("x-missing".into())))
        );
        let no_ip = KeyInputs { client_ip: None, ..inputs };
        assert_eq!(derive_key(&[KeyPart::Ip], &no_ip), Err(MissingPart(KeyPart::Ip)), "X-Forwarded-For is never read");
        assert_eq!(derive_key(&[KeyPart::Body("password".into())], &no_ip), Err(MissingPart(KeyPart::Body("password".into()))));
        let rotating = CanonicalQuery::parse("token=random&token=real");
        let with_rotation = KeyInputs { query: &rotating, ..no_ip };
        assert_eq!(
            derive_key(&[KeyPart::Query("token".into())], &with_rotation),
            Err(MissingPart(KeyPart::Query("token".into()))),
            "several different values are missing, never a fresh counter per request"
        );
    }

    #[test]
    fn cookies_and_headers_cannot_be_rotated() {
        assert_eq!(cookie_value("sid=abc", "sid").as_deref(), Some("abc"));
        assert_eq!(cookie_value("sid=%61bc", "sid").as_deref(), Some("abc"), "decoded as origins do");
        assert_eq!(cookie_value("a=1; sid=\"a%62c\"", "sid").as_deref(), Some("abc"));
        assert_eq!(cookie_value("sid=x; sid=abc", "sid"), None, "which one would the origin read?");
        assert_eq!(cookie_value("sid=abc; sid=%61bc", "sid").as_deref(), Some("abc"));
        let query = CanonicalQuery::parse("");
        let joined = |name: &str| (name == "x-api-key").then(|| "real, random".to_string());
        let inputs = KeyInputs {
            client_ip: None,
            header: &joined,
            query: &query,
            path_groups: &[],
            body: &|_: &str| None,
            country: None,
            asn: None,
            ipv6_prefix: 64,
        };
        assert!(derive_key(&[KeyPart::Header("x-api-key".into())], &inputs).is_err());
        let same = |name: &str| (name == "x-api-key").then(|| "k1, k1".to_string());
        let inputs = KeyInputs { header: &same, ..inputs };
        assert_eq!(derive_key(&[KeyPart::Header("x-api-key".into())], &inputs).unwrap(), "header:x-api-key=k1");
    }

    #[test]
    fn body_fields_from_json_and_forms() {
        let json = br#"{"email":" A@B.io ","user":{"id":42},"list":[1]}"#;
        assert_eq!(body_field("application/json; charset=utf-8", json, "email").as_deref(), Some(" A@B.io "));
        assert_eq!(body_field("application/vnd.api+json", json, "user.id").as_deref(), Some("42"));
        assert_eq!(body_field("application/json", json, "list"), None);
        assert_eq!(body_field("application/json", b"{not json", "email"), None);
        let form = b"email=a%40b.io&password=x+y";
        assert_eq!(body_field("application/x-www-form-urlencoded", form, "email").as_deref(), Some("a@b.io"));
        assert_eq!(body_field("text/plain", form, "email"), None);
        let twice = b"email=a%40b.io&email=c%40d.io";
        assert_eq!(body_field("application/x-www-form-urlencoded", twice, "email"), None, "which one would the origin read?");
        let same = b"email=a%40b.io&email=a%40b.io";
        assert_eq!(body_field("application/x-www-form-urlencoded", same, "email").as_deref(), Some("a@b.io"));
        assert_eq!(body_field("multipart/form-data; boundary=x", form, "email"), None);
        assert_eq!(body_field("application/x-www-form-urlencoded", &[0xff, 0xfe], "email"), None);
        assert_eq!(hash_identity("  "), None);
        assert_eq!(hash_identity(" A@B.io "), hash_identity("a@b.io"));
    }

    /// An identity the origin names (a success's `success_identity_header`)
    /// gives the very key the request's own value gives.
    #[test]
    fn identity_keys_derive_as_request_keys_do() {
        let body = KeyPart::Body("email".into());
        let from_body = derive_key(std::slice::from_ref(&body), &KeyInputs {
            client_ip: None,
            header: &|_| None,
            query: &CanonicalQuery::parse(""),
            path_groups: &[],
            body: &|_| Some(" Ann@Example.com".to_string()),
            country: None,
            asn: None,
            ipv6_prefix: 64,
        });
        assert_eq!(identity_key(&body, "ann@example.com").as_deref(), from_body.as_deref().ok());
        assert_ne!(identity_key(&body, "ann@example.org"), identity_key(&body, "ann@example.com"));
        let header = KeyPart::Header("x-user".into());
        assert_eq!(identity_key(&header, " u1 ").as_deref(), Some("header:x-user=u1"));
        assert_eq!(identity_key(&header, "u1, u2"), None, "two identities are none");
        assert_eq!(identity_key(&KeyPart::PathGroup("school".into()), "s9").as_deref(), Some("path:school=s9"));
        assert_eq!(identity_key(&body, "  "), None);
        assert_eq!(identity_key(&KeyPart::Ip, "203.0.113.7"), None, "no response header names the client");
    }
}
