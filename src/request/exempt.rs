//! Exemptions, pure: requests a rule (or the whole config) neither counts
//! nor limits.
//!
//! An exemption is decided by what a client cannot forge cheaply:
//! - its address (`CF-Connecting-IP`, set by Cloudflare) in an IPv4 or
//!   IPv6 CIDR range;
//! - its network (`request.cf.asn`);
//! - Cloudflare's verdict that it is a verified bot
//!   (`request.cf.verifiedBotCategory`, or `request.cf.botManagement.verifiedBot`
//!   with Bot Management), optionally of listed categories;
//! - a header carrying a shared secret, compared in constant time against a
//!   Workers secret named in the config (health checks, internal callers).
//!   A header without a secret is not an exemption anyone can configure:
//!   every client can send any header.
//!
//! The decision belongs to `pipeline::plan` (so `tollgate explain` shows it);
//! an exempt rule is logged (`exempt`) and asks no counter.

use sha2::{Digest, Sha256};
use std::fmt;
use std::net::IpAddr;

/// An IPv4 or IPv6 CIDR range, its address masked to the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IpRange {
    /// The network, as a 128-bit number (IPv4 in the low 32 bits).
    network: u128,
    prefix: u8,
    v4: bool,
}

impl IpRange {
    /// `"10.0.0.0/8"`, `"2001:db8::/32"`, or a single address (`/32`,
    /// `/128`). Bits set past the prefix are refused: `10.1.0.0/8` is
    /// likely a typo for a narrower range.
    pub(crate) fn parse(text: &str) -> Result<IpRange, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| format!("`{text}` is not an IP address or CIDR range"))?;
        let (bits, width, v4) = match addr {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32u8, true),
            IpAddr::V6(v6) => (u128::from(v6), 128u8, false),
        };
        let prefix = match prefix {
            None => width,
            Some(p) => Some(p)
                .filter(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse::<u8>().ok())
                .filter(|p| *p <= width)
                .ok_or_else(|| format!("`{text}`: the prefix must be 0 to {width}"))?,
        };
        let range = IpRange { network: bits & mask(prefix, width), prefix, v4 };
        if range.network != bits {
            return Err(format!("`{text}` has bits set past /{prefix}: write {range}"));
        }
        Ok(range)
    }

    /// Whether `addr` is in the range. An IPv4-mapped IPv6 address
    /// (`::ffff:a.b.c.d`) is its IPv4 address; nothing else crosses families.
    pub(crate) fn contains(&self, addr: IpAddr) -> bool {
        let (bits, v4) = match addr {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), true),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => (u128::from(u32::from(v4)), true),
                None => (u128::from(v6), false),
            },
        };
        let width = if v4 { 32 } else { 128 };
        v4 == self.v4 && bits & mask(self.prefix, width) == self.network
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.v4 {
            write!(f, "{}/{}", std::net::Ipv4Addr::from(self.network as u32), self.prefix)
        } else {
            write!(f, "{}/{}", std::net::Ipv6Addr::from(self.network), self.prefix)
        }
    }
}

/// The mask of the first `prefix` of `width` bits.
fn mask(prefix: u8, width: u8) -> u128 {
    let all = if width == 32 { u128::from(u32::MAX) } else { u128::MAX };
    if prefix == 0 {
        0
    } else {
        all & (all << (width - prefix))
    }
}

/// Which verified bots are exempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Bots {
    #[default]
    None,
    /// Every verified bot (`verified_bots = true`).
    Any,
    /// Verified bots of these categories (`verified_bots = ["Search Engine
    /// Crawler"]`), compared ignoring case.
    Categories(Vec<String>),
}

/// `exempt_header = { name, secret }`: requests whose header `name` holds
/// the value of the Workers secret `secret`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SecretHeader {
    /// Lowercased.
    pub(crate) name: String,
    /// The Workers secret's name (never its value).
    pub(crate) secret: String,
}

/// An `exempt` table (top level or per rule). Empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Exemptions {
    pub(crate) ips: Vec<IpRange>,
    pub(crate) asns: Vec<u32>,
    pub(crate) bots: Bots,
    pub(crate) header: Option<SecretHeader>,
}

/// What a request shows that exemptions look at.
pub(crate) struct ExemptInputs<'a> {
    /// The raw `CF-Connecting-IP`.
    pub(crate) client_ip: Option<&'a str>,
    pub(crate) asn: Option<u32>,
    /// `Some(category)` when Cloudflare says the client is a verified bot
    /// (the category empty when only `botManagement.verifiedBot` said so).
    pub(crate) verified_bot: Option<&'a str>,
    pub(crate) header: &'a dyn Fn(&str) -> Option<String>,
    /// A Workers secret by name.
    pub(crate) secret: &'a dyn Fn(&str) -> Option<String>,
}

/// Why a request is exempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Exemption {
    Ip(IpRange),
    Asn(u32),
    VerifiedBot(String),
    /// The secret header (its name).
    Header(String),
}

impl Exemption {
    /// `ip`, `asn`, `verified_bot` or `header`: the `by` of the log line.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Exemption::Ip(_) => "ip",
            Exemption::Asn(_) => "asn",
            Exemption::VerifiedBot(_) => "verified_bot",
            Exemption::Header(_) => "header",
        }
    }

    /// What matched: the range, the ASN, the bot category, the header's
    /// name (never its value).
    pub(crate) fn detail(&self) -> String {
        match self {
            Exemption::Ip(range) => range.to_string(),
            Exemption::Asn(asn) => asn.to_string(),
            Exemption::VerifiedBot(category) => category.clone(),
            Exemption::Header(name) => name.clone(),
        }
    }
}

impl fmt::Display for Exemption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.detail())
    }
}

impl Exemptions {
    pub(crate) fn is_empty(&self) -> bool {
        self.ips.is_empty() && self.asns.is_empty() && self.bots == Bots::None && self.header.is_none()
    }

    /// Whether deciding them reads `request.cf` (the ASN, verified bots).
    pub(crate) fn reads_cf(&self) -> bool {
        !self.asns.is_empty() || self.bots != Bots::None
    }

    /// The first exemption the request meets, checked in this order: IP
    /// range, ASN, verified bot, secret header. A secret that is unset or
    /// blank exempts nobody.
    pub(crate) fn exempts(&self, inputs: &ExemptInputs<'_>) -> Option<Exemption> {
        if self.is_empty() {
            return None;
        }
        if !self.ips.is_empty() {
            if let Some(addr) = inputs.client_ip.and_then(|ip| ip.trim().parse::<IpAddr>().ok()) {
                if let Some(range) = self.ips.iter().find(|r| r.contains(addr)) {
                    return Some(Exemption::Ip(range.clone()));
                }
            }
        }
        if let Some(asn) = inputs.asn.filter(|a| self.asns.contains(a)) {
            return Some(Exemption::Asn(asn));
        }
        if let Some(category) = inputs.verified_bot {
            let listed = match &self.bots {
                Bots::None => false,
                Bots::Any => true,
                Bots::Categories(list) => list.iter().any(|c| c.eq_ignore_ascii_case(category.trim())),
            };
            if listed {
                return Some(Exemption::VerifiedBot(category.to_string()));
            }
        }
        let header = self.header.as_ref()?;
        let presented = (inputs.header)(&header.name)?;
        let expected = (inputs.secret)(&header.secret)?;
        secret_matches(&expected, &presented).then(|| Exemption::Header(header.name.clone()))
    }
}

/// Constant-time comparison of a presented value with the secret: both
/// sides hashed first (so neither length nor a common prefix shows in the
/// time taken), surrounding whitespace ignored (a secret stored with a
/// trailing newline), an empty secret matching nothing.
pub(crate) fn secret_matches(expected: &str, presented: &str) -> bool {
    let (expected, presented) = (expected.trim(), presented.trim());
    crate::request::hmac::same_bytes(&Sha256::digest(expected.as_bytes()), &Sha256::digest(presented.as_bytes())) && !expected.is_empty()
}

/// Whether Cloudflare says the client is a verified bot, from what
/// `request.cf` holds: `Some(category)` for a non-blank
/// `verifiedBotCategory`; else `Some("")` when Bot Management's
/// `botManagement.verifiedBot` is `true` (asked only then); else `None`.
pub(crate) fn verified_bot(category: Option<String>, bot_management_verified: impl FnOnce() -> Option<bool>) -> Option<String> {
    match category.filter(|c| !c.trim().is_empty()) {
        Some(category) => Some(category),
        None => (bot_management_verified() == Some(true)).then(String::new),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn verified_bot_takes_the_category_then_bot_managements_flag() {
        use super::verified_bot;
        let some = |c: &str| Some(c.to_string());
        let unasked = || -> Option<bool> { panic!("the flag is read only without a category") };
        assert_eq!(verified_bot(some("Search Engine Crawler"), unasked), some("Search Engine Crawler"));
        assert_eq!(verified_bot(some("  "), || Some(true)), some(""), "a blank category: the flag decides");
        assert_eq!(verified_bot(None, || Some(true)), some(""));
        assert_eq!(verified_bot(some(""), || Some(false)), None);
        assert_eq!(verified_bot(None, || None), None);
    }

    use super::*;

    fn inputs<'a>(
        ip: Option<&'a str>,
        asn: Option<u32>,
        bot: Option<&'a str>,
        header: &'a dyn Fn(&str) -> Option<String>,
        secret: &'a dyn Fn(&str) -> Option<String>,
    ) -> ExemptInputs<'a> {
        ExemptInputs { client_ip: ip, asn, verified_bot: bot, header, secret }
    }

    const NO: &dyn Fn(&str) -> Option<String> = &|_| None;

    #[test]
    fn ranges_parse_mask_and_contain() {
        let r = IpRange::parse("10.0.0.0/8").unwrap();
        assert!(r.contains("10.255.3.4".parse().unwrap()));
        assert!(!r.contains("11.0.0.1".parse().unwrap()));
        assert!(r.contains("::ffff:10.1.2.3".parse().unwrap()), "IPv4-mapped");
        assert!(!r.contains("a00::1".parse().unwrap()), "no other family crossing");
        let one = IpRange::parse("192.0.2.7").unwrap();
        assert_eq!(one.to_string(), "192.0.2.7/32");
        assert!(one.contains("192.0.2.7".parse().unwrap()) && !one.contains("192.0.2.8".parse().unwrap()));
        let v6 = IpRange::parse("2001:DB8::/32").unwrap();
        assert_eq!(v6.to_string(), "2001:db8::/32");
        assert!(v6.contains("2001:db8:ffff::1".parse().unwrap()));
        assert!(!v6.contains("2001:db9::1".parse().unwrap()));
        assert!(IpRange::parse("0.0.0.0/0").unwrap().contains("203.0.113.1".parse().unwrap()));
        assert!(!IpRange::parse("0.0.0.0/0").unwrap().contains("2001:db8::1".parse().unwrap()));
        assert!(IpRange::parse("::/0").unwrap().contains("2001:db8::1".parse().unwrap()));
        for bad in ["10.1.0.0/8", "10.0.0.0/33", "2001:db8::/129", "10.0.0.0/", "10.0.0/8", "example.com", "10.0.0.0/-1", "10.0.0.0/+8"] {
            assert!(IpRange::parse(bad).is_err(), "{bad}");
        }
        assert!(IpRange::parse("10.1.0.0/8").unwrap_err().contains("10.0.0.0/8"), "suggests the masked range");
    }

    #[test]
    fn each_kind_exempts_only_what_it_names() {
        let e = Exemptions {
            ips: vec![IpRange::parse("198.51.100.0/24").unwrap()],
            asns: vec![13335],
            bots: Bots::Categories(vec!["Search Engine Crawler".into()]),
            header: Some(SecretHeader { name: "x-health".into(), secret: "HEALTH_KEY".into() }),
        };
        assert_eq!(e.exempts(&inputs(Some("198.51.100.9"), None, None, NO, NO)).unwrap().kind(), "ip");
        assert_eq!(e.exempts(&inputs(Some("198.51.101.9"), None, None, NO, NO)), None, "the neighbour");
        assert_eq!(e.exempts(&inputs(Some("junk"), Some(13335), None, NO, NO)), Some(Exemption::Asn(13335)));
        assert_eq!(e.exempts(&inputs(None, Some(64500), None, NO, NO)), None);
        assert!(e.exempts(&inputs(None, None, Some("search engine crawler"), NO, NO)).is_some());
        assert_eq!(e.exempts(&inputs(None, None, Some("AI Crawler"), NO, NO)), None, "an unlisted category");
        let header = |n: &str| (n == "x-health").then(|| "s3cret".to_string());
        let secret = |n: &str| (n == "HEALTH_KEY").then(|| "s3cret\n".to_string());
        assert_eq!(e.exempts(&inputs(None, None, None, &header, &secret)), Some(Exemption::Header("x-health".into())));
        let wrong = |n: &str| (n == "x-health").then(|| "s3cre".to_string());
        assert_eq!(e.exempts(&inputs(None, None, None, &wrong, &secret)), None);
        assert_eq!(e.exempts(&inputs(None, None, None, &header, NO)), None, "secret unset: nobody");
        let blank = |_: &str| Some(" ".to_string());
        assert_eq!(e.exempts(&inputs(None, None, None, &blank, &blank)), None, "blank secret: nobody");
        let any = Exemptions { bots: Bots::Any, ..Exemptions::default() };
        assert!(any.exempts(&inputs(None, None, Some(""), NO, NO)).is_some());
        assert_eq!(Exemptions::default().exempts(&inputs(Some("198.51.100.9"), Some(13335), Some(""), NO, NO)), None);
    }
}
