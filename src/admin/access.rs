//! Cloudflare Access sign-in, pure: the `Cf-Access-Jwt-Assertion`
//! token of a request under the admin prefix, read and checked here; its
//! RS256 signature verified by the driver (WebCrypto), with the key this
//! module picks from the team's keys (JWKS), which the driver fetches when
//! [`Keys::step`] says so.
//!
//! A token is accepted when all of these hold ([`check`], then the
//! signature):
//! - three base64url parts (no padding), at most [`MAX_TOKEN_BYTES`];
//! - the header's `alg` is `RS256` (`none`, `HS256` and every other
//!   algorithm refused before any key is looked at) and it names a `kid`;
//! - `iss` is exactly `https://<team domain>`;
//! - `aud` (a string or a list) holds one of the configured tags;
//! - `exp` is given and `now < exp + LEEWAY_S`; `nbf`, when given,
//!   `nbf <= now + LEEWAY_S` ([`LEEWAY_S`] for clocks apart);
//! - the signature verifies under the team's key of that `kid`
//!   (`RSASSA-PKCS1-v1_5` with SHA-256 over `header.payload`).
//!
//! Who signed in ([`Proof::identity`]): the `email` claim, else the
//! `common_name` of a service token, else `sub`.
//!
//! The keys ([`Keys`], one per isolate): fetched on first use, used for
//! [`KEYS_TTL_MS`] (an hour: Access rotates its key every 6 weeks and keeps
//! the previous one valid for 7 days), fetched again on a `kid` they do not
//! hold, but never twice within [`REFETCH_MIN_MS`]: a flood of made-up
//! `kid`s costs one fetch a minute per isolate, not one per request. While
//! a fetch fails, the keys last fetched are used up to [`MAX_STALE_MS`].

use crate::config::access::AdminAccess;
use crate::request::hmac::{hex, hmac_sha256};
use serde_json::Value;

/// The request header Access puts its token in.
pub(crate) const ASSERTION_HEADER: &str = "cf-access-jwt-assertion";

/// The leeway on `exp` and `nbf`, in seconds, for clocks apart.
pub(crate) const LEEWAY_S: i64 = 60;

/// The longest token read; a longer one is refused unread.
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// How long fetched keys are used before they are fetched again.
pub(crate) const KEYS_TTL_MS: i64 = 3_600_000;

/// The least time between two fetches of the keys.
pub(crate) const REFETCH_MIN_MS: i64 = 60_000;

/// How long keys are used past [`KEYS_TTL_MS`] while fetching them fails.
pub(crate) const MAX_STALE_MS: i64 = 24 * 3_600_000;

/// The most keys read from a JWKS document.
const MAX_KEYS: usize = 16;

/// Why a token was refused. Logged (`reason`), never shown in detail to
/// the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AccessRefusal {
    /// Not a JWT as Access writes one (the part that is wrong).
    Malformed(&'static str),
    /// An `alg` other than `RS256`.
    Algorithm,
    Issuer,
    Audience,
    Expired,
    NotYetValid,
    /// No key of that `kid` in the team's keys.
    UnknownKey,
    /// The team's keys could not be fetched.
    KeysUnavailable,
    /// The signature does not verify.
    Signature,
}

impl AccessRefusal {
    /// The word of log lines.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            AccessRefusal::Malformed(_) => "malformed",
            AccessRefusal::Algorithm => "algorithm",
            AccessRefusal::Issuer => "issuer",
            AccessRefusal::Audience => "audience",
            AccessRefusal::Expired => "expired",
            AccessRefusal::NotYetValid => "not_yet_valid",
            AccessRefusal::UnknownKey => "unknown_key",
            AccessRefusal::KeysUnavailable => "keys_unavailable",
            AccessRefusal::Signature => "signature",
        }
    }
}

/// A token whose claims hold, its signature still to verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proof {
    /// The key it names.
    pub(crate) kid: String,
    /// The signed bytes: `header.payload` as sent.
    pub(crate) signed: Vec<u8>,
    pub(crate) signature: Vec<u8>,
    /// Who signed in (`email`, `common_name` or `sub`).
    pub(crate) identity: String,
    /// The console's CSRF token for this token's pages ([`csrf_of`]).
    pub(crate) csrf: String,
}

/// What an admin request's Access token says, once read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AccessCheck {
    /// The claims hold: verify the signature.
    Pending(Box<Proof>),
    /// Refused already.
    Refused(AccessRefusal),
}

/// A part of the token as a JSON object (`serde_json::Value`, which the
/// Worker's Wasm holds already: no deserializer of its own).
fn object(part: &str) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_str(std::str::from_utf8(&decode(part)?).ok()?).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Reads the token `jwt` (the header's value) for `access` at `now_ms`:
/// [`Proof`] when every claim holds, else why not. Never panics, whatever
/// the bytes.
pub(crate) fn check(jwt: &str, access: &AdminAccess, now_ms: i64) -> Result<Proof, AccessRefusal> {
    let jwt = jwt.trim();
    if jwt.len() > MAX_TOKEN_BYTES {
        return Err(AccessRefusal::Malformed("length"));
    }
    let mut parts = jwt.split('.');
    let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(AccessRefusal::Malformed("parts"));
    };
    let header = object(h).ok_or(AccessRefusal::Malformed("header"))?;
    if header.get("alg").and_then(Value::as_str) != Some("RS256") {
        return Err(AccessRefusal::Algorithm);
    }
    let kid = header.get("kid").and_then(Value::as_str).filter(|k| (1..=256).contains(&k.len())).ok_or(AccessRefusal::Malformed("kid"))?;
    let claims = object(p).ok_or(AccessRefusal::Malformed("claims"))?;
    let identity = claims_hold(&claims, access, now_ms)?;
    let signature = decode(s).filter(|s| !s.is_empty()).ok_or(AccessRefusal::Malformed("signature"))?;
    let signed = jwt.as_bytes().get(..h.len() + 1 + p.len()).unwrap_or_default().to_vec();
    Ok(Proof { kid: kid.to_string(), signed, signature, identity, csrf: csrf_of(jwt) })
}

/// The claims' checks, in order: issuer, audience, expiry, not-before;
/// the identity.
fn claims_hold(claims: &serde_json::Map<String, Value>, access: &AdminAccess, now_ms: i64) -> Result<String, AccessRefusal> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str);
    if text("iss") != Some(access.issuer().as_str()) {
        return Err(AccessRefusal::Issuer);
    }
    let ours = |v: &Value| v.as_str().is_some_and(|tag| access.audience.iter().any(|a| a == tag));
    let held = match claims.get("aud") {
        Some(Value::Array(many)) => many.iter().any(ours),
        Some(one) => ours(one),
        None => false,
    };
    if !held {
        return Err(AccessRefusal::Audience);
    }
    let now_s = now_ms.div_euclid(1000);
    match claims.get("exp").and_then(Value::as_i64) {
        Some(exp) if now_s < exp.saturating_add(LEEWAY_S) => {}
        _ => return Err(AccessRefusal::Expired),
    }
    match claims.get("nbf") {
        None => {}
        Some(nbf) if nbf.as_i64().is_some_and(|nbf| nbf <= now_s.saturating_add(LEEWAY_S)) => {}
        Some(_) => return Err(AccessRefusal::NotYetValid),
    }
    let named = ["email", "common_name", "sub"].into_iter().filter_map(text).find(|n| !n.trim().is_empty());
    Ok(named.map(|n| crate::count::registry::clean_text(n, 254)).unwrap_or_else(|| "access".into()))
}

/// The CSRF token of the console's forms under an Access token: an HMAC
/// keyed by the token itself, which another site's page cannot read. A
/// token Access renews between a page and its form makes the form
/// refused once (reload the page).
pub(crate) fn csrf_of(jwt: &str) -> String {
    hex(&hmac_sha256(jwt.as_bytes(), b"tollgate console access csrf v1"))
}

/// base64url without padding (RFC 4648 §5) to bytes; `None` for any other
/// character, a length no encoding has, or bits left over that are not zero.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    };
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        acc = (acc << 6) | u32::from(value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (acc == 0).then_some(out)
}

/// One RSA signing key of the team (a JWK's `kid`, `n`, `e`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Jwk {
    pub(crate) kid: String,
    pub(crate) n: String,
    pub(crate) e: String,
}

/// The RSA signature keys of a JWKS document (`{ "keys": [...] }`): `kty`
/// `RSA`, `alg` (when given) `RS256`, `use` (when given) `sig`, `n` and `e`
/// base64url (`n` of 1024 bits or more); others skipped. `None`: not such
/// a document, or no such key in it.
pub(crate) fn parse_keys(text: &str) -> Option<Vec<Jwk>> {
    let doc: Value = serde_json::from_str(text).ok()?;
    let key = |k: &Value| {
        let field = |name: &str| k.get(name).and_then(Value::as_str);
        let optional = |name: &str, want: &str| k.get(name).is_none_or(|v| v.as_str() == Some(want));
        if field("kty") != Some("RSA") || !optional("alg", "RS256") || !optional("use", "sig") {
            return None;
        }
        let (kid, n, e) = (field("kid")?, field("n")?, field("e")?);
        let sound = !kid.is_empty() && decode(n).is_some_and(|b| b.len() >= 128) && decode(e).is_some_and(|b| !b.is_empty());
        sound.then(|| Jwk { kid: kid.to_string(), n: n.to_string(), e: e.to_string() })
    };
    let keys: Vec<Jwk> = doc.get("keys")?.as_array()?.iter().filter_map(key).take(MAX_KEYS).collect();
    (!keys.is_empty()).then_some(keys)
}

/// The isolate's copy of the team's keys.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    keys: Vec<Jwk>,
    /// When the keys held were fetched.
    fetched_ms: Option<i64>,
    /// When a fetch was last started.
    tried_ms: Option<i64>,
}

/// What to do for a token's `kid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyStep {
    /// Verify the signature with this key.
    Verify(Jwk),
    /// Fetch the keys (then [`Keys::fetched`], then ask again).
    Fetch,
    /// No key: refuse.
    Refuse(AccessRefusal),
}

impl Keys {
    /// The step for `kid` at `now_ms`: its key while the keys are fresh;
    /// else a fetch, unless one started within [`REFETCH_MIN_MS`]; else
    /// the key of keys fetched within [`MAX_STALE_MS`], or a refusal.
    /// A fetch asked is recorded at once, so concurrent requests of the
    /// isolate do not all fetch (one that finds no key meanwhile is refused).
    pub(crate) fn step(&mut self, kid: &str, now_ms: i64) -> KeyStep {
        let age = self.fetched_ms.map(|at| now_ms.saturating_sub(at));
        let found = self.keys.iter().find(|k| k.kid == kid);
        if let (Some(key), Some(age)) = (found, age) {
            if (0..KEYS_TTL_MS).contains(&age) {
                return KeyStep::Verify(key.clone());
            }
        }
        let may_fetch = self.tried_ms.is_none_or(|at| !(0..REFETCH_MIN_MS).contains(&now_ms.saturating_sub(at)));
        if may_fetch {
            self.tried_ms = Some(now_ms);
            return KeyStep::Fetch;
        }
        match (found, age) {
            (Some(key), Some(age)) if (0..MAX_STALE_MS).contains(&age) => KeyStep::Verify(key.clone()),
            (_, Some(_)) => KeyStep::Refuse(AccessRefusal::UnknownKey),
            (_, None) => KeyStep::Refuse(AccessRefusal::KeysUnavailable),
        }
    }

    /// The fetch's answer (`None`: it failed): keys in it replace those
    /// held; anything else keeps them. Whether keys were taken.
    pub(crate) fn fetched(&mut self, answer: Option<&str>, now_ms: i64) -> bool {
        match answer.and_then(parse_keys) {
            Some(keys) => {
                self.keys = keys;
                self.fetched_ms = Some(now_ms);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
