//! The admin API, pure parts: routing, token check, key derivation.
//!
//! Active only when the secret `TOLLGATE_ADMIN_TOKEN` exists; otherwise the
//! admin prefix is not special and requests under it go to the origin like
//! any other. With a token:
//!
//! - `GET  {prefix}/status?rule=NAME&ip=203.0.113.7` — count per window,
//!   remaining, reset, whether an alarm is pending;
//! - `POST {prefix}/reset?rule=NAME&ip=203.0.113.7` — forget the key's hits.
//!
//! The key is given raw, one query parameter per key part of the rule
//! (`ip`, `header:NAME`, `cookie:NAME`, `query:NAME`, `path:GROUP`,
//! `body:FIELD`, `country`, `asn`), and derived exactly as the rule would
//! (IPv6 grouped, body fields hashed, ...). A missing or wrong bearer token
//! gets 401 with no detail about which part was wrong.

use crate::canon::CanonicalQuery;
use crate::config::Config;
use crate::key::{derive_key, KeyInputs, MissingPart};
use crate::protocol::Reply;
use crate::verdict::LogEvent;
use crate::rules::Rule;
use sha2::{Digest, Sha256};
use std::fmt;

/// What an admin request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    Status,
    Reset,
}

/// Why an admin request cannot be served (answered 4xx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminError {
    NotFound,
    MethodNotAllowed { allowed: &'static str },
    MissingRule,
    UnknownRule(String),
    MissingKeyPart(MissingPart),
}

impl AdminError {
    /// The status phrase (RFC 9457 §4.2.1: the title of an `about:blank`
    /// problem is the status phrase).
    pub fn title(&self) -> &'static str {
        match self.status() {
            404 => "Not Found",
            405 => "Method Not Allowed",
            _ => "Bad Request",
        }
    }

    /// The HTTP status this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            AdminError::NotFound | AdminError::UnknownRule(_) => 404,
            AdminError::MethodNotAllowed { .. } => 405,
            AdminError::MissingRule | AdminError::MissingKeyPart(_) => 400,
        }
    }
}

impl fmt::Display for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminError::NotFound => write!(f, "unknown admin endpoint (use /status or /reset)"),
            AdminError::MethodNotAllowed { allowed } => write!(f, "use {allowed}"),
            AdminError::MissingRule => write!(f, "missing query parameter `rule`"),
            AdminError::UnknownRule(r) => write!(f, "no rule named `{r}`"),
            AdminError::MissingKeyPart(m) => {
                write!(f, "{m}: give it as the query parameter `{}`", m.0)
            }
        }
    }
}

/// The missing key part is named in the message, so it is not also a
/// [`source`](std::error::Error::source).
impl std::error::Error for AdminError {}

/// A parsed admin request: the action, the rule, and the key it targets.
#[derive(Debug)]
pub struct AdminRequest<'c> {
    pub action: AdminAction,
    pub rule: &'c Rule,
    pub key: String,
}

/// Whether `canonical_path` is under `prefix` (the prefix itself or below).
pub fn is_admin_path(prefix: &str, canonical_path: &str) -> bool {
    canonical_path == prefix
        || canonical_path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Parses an admin request (already known to be under the prefix).
pub fn parse<'c>(
    config: &'c Config,
    canonical_path: &str,
    method: &str,
    query: &CanonicalQuery,
) -> Result<AdminRequest<'c>, AdminError> {
    let endpoint = canonical_path
        .strip_prefix(config.admin_prefix.as_str())
        .unwrap_or("");
    let action = match (endpoint, method.to_ascii_uppercase().as_str()) {
        ("/status", "GET") => AdminAction::Status,
        ("/reset", "POST") => AdminAction::Reset,
        ("/status", _) => return Err(AdminError::MethodNotAllowed { allowed: "GET" }),
        ("/reset", _) => return Err(AdminError::MethodNotAllowed { allowed: "POST" }),
        _ => return Err(AdminError::NotFound),
    };
    let name = query.values("rule").next().ok_or(AdminError::MissingRule)?;
    let rule = config
        .rules
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| AdminError::UnknownRule(name.to_string()))?;
    let key = admin_key(rule, query, config.ipv6_prefix).map_err(AdminError::MissingKeyPart)?;
    Ok(AdminRequest { action, rule, key })
}

/// Derives `rule`'s key from raw values given as query parameters named
/// after the key parts, exactly as the rule derives it from a request.
pub fn admin_key(rule: &Rule, params: &CanonicalQuery, ipv6_prefix: u8) -> Result<String, MissingPart> {
    let param = |name: String| params.values(&name).next().map(str::to_string);
    let client_ip = param("ip".into());
    let country = param("country".into());
    let asn = param("asn".into()).and_then(|a| a.trim().parse::<u32>().ok());
    let header = |name: &str| param(format!("header:{name}"));
    let body = |field: &str| param(format!("body:{field}"));
    let query_value = |name: &str| param(format!("query:{name}"));
    // Cookie and query parts are looked up through the same maps a request
    // would use, rebuilt from the admin parameters.
    let mut cookies = String::new();
    let mut query_pairs = String::new();
    let mut groups = Vec::new();
    for part in &rule.key {
        match part {
            crate::key::KeyPart::Cookie(name) => {
                if let Some(v) = param(format!("cookie:{name}")) {
                    cookies.push_str(&format!("{name}={v}; "));
                }
            }
            crate::key::KeyPart::Query(name) => {
                if let Some(v) = query_value(name) {
                    query_pairs.push_str(&format!(
                        "{}={}&",
                        percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC),
                        percent_encoding::utf8_percent_encode(&v, percent_encoding::NON_ALPHANUMERIC)
                    ));
                }
            }
            crate::key::KeyPart::PathGroup(name) => {
                if let Some(v) = param(format!("path:{name}")) {
                    groups.push((name.clone(), v));
                }
            }
            _ => {}
        }
    }
    let headers = |name: &str| {
        if name == "cookie" && !cookies.is_empty() {
            Some(cookies.clone())
        } else {
            header(name)
        }
    };
    let query = CanonicalQuery::parse(&query_pairs);
    let inputs = KeyInputs {
        client_ip: client_ip.as_deref(),
        header: &headers,
        query: &query,
        path_groups: &groups,
        body: &body,
        country: country.as_deref(),
        asn,
        ipv6_prefix,
    };
    derive_key(&rule.key, &inputs)
}

impl AdminAction {
    /// `status` or `reset`.
    pub fn name(self) -> &'static str {
        match self {
            AdminAction::Status => "status",
            AdminAction::Reset => "reset",
        }
    }
}

/// The `admin` log line of a served request: the key only as its hash
/// (`key_hash`, from the plan).
pub fn log_event(request: &AdminRequest<'_>, key_hash: &str) -> LogEvent {
    LogEvent::new(
        "admin",
        vec![
            ("action", request.action.name().into()),
            ("rule", request.rule.name.as_str().into()),
            ("key_hash", key_hash.into()),
        ],
    )
}

/// The JSON body answering a served request: the key's windows as its
/// object reported them, the key as `key_hash` (from the plan).
pub fn status_body(request: &AdminRequest<'_>, key_hash: &str, reply: &Reply) -> serde_json::Value {
    serde_json::json!({
        "rule": request.rule.name,
        "key_hash": key_hash,
        "action": request.action.name(),
        "windows": reply.tally.windows,
        "alarm_pending": reply.alarm_pending,
        "stored_hits": reply.stored_hits,
    })
}

/// Whether `authorization` is `Bearer <expected>`, compared in constant
/// time: both sides are hashed with SHA-256 first, so neither the length nor
/// the position of the first difference leaks through timing.
pub fn token_matches(expected: &str, authorization: Option<&str>) -> bool {
    let presented = authorization
        .and_then(|h| {
            let h = h.trim();
            h.get(..7)
                .filter(|scheme| scheme.eq_ignore_ascii_case("bearer "))
                .map(|_| h[7..].trim())
        })
        .unwrap_or("");
    // A secret stored with a trailing newline (`echo token | wrangler secret
    // put`) is the same token.
    let expected = expected.trim();
    let a = Sha256::digest(expected.as_bytes());
    let b = Sha256::digest(presented.as_bytes());
    let difference = a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    difference == 0 && !expected.is_empty() && !presented.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> Config {
        Config::from_json(&json!({"rules": [
            {"name": "heavy", "path": "/api/example", "limits": [{"requests": 10, "window": "60s"}]},
            {"name": "login", "path": "/login", "key": ["body:email"], "count_statuses": [401],
             "limits": [{"requests": 10, "window": "15m"}]},
            {"name": "tenant", "path": "/t/:school/*", "key": ["path:school", "header:x-api-key", "cookie:sid", "query:plan"],
             "limits": [{"requests": 300, "window": "1d"}]},
        ]}))
        .unwrap()
    }

    #[test]
    fn routes_and_methods() {
        let c = config();
        let q = CanonicalQuery::parse("rule=heavy&ip=203.0.113.7");
        let r = parse(&c, "/.tollgate/status", "GET", &q).unwrap();
        assert_eq!((r.action, r.rule.name.as_str(), r.key.as_str()), (AdminAction::Status, "heavy", "ip=203.0.113.7"));
        assert_eq!(parse(&c, "/.tollgate/reset", "POST", &q).unwrap().action, AdminAction::Reset);
        assert_eq!(parse(&c, "/.tollgate/reset", "GET", &q).unwrap_err().status(), 405);
        assert_eq!(parse(&c, "/.tollgate/nope", "GET", &q).unwrap_err(), AdminError::NotFound);
        let no_rule = CanonicalQuery::parse("ip=1.2.3.4");
        assert_eq!(parse(&c, "/.tollgate/status", "GET", &no_rule).unwrap_err(), AdminError::MissingRule);
        let unknown = CanonicalQuery::parse("rule=x");
        assert_eq!(parse(&c, "/.tollgate/status", "GET", &unknown).unwrap_err().status(), 404);
        let no_ip = CanonicalQuery::parse("rule=heavy");
        assert!(parse(&c, "/.tollgate/status", "GET", &no_ip).unwrap_err().to_string().contains("`ip`"));
        assert!(is_admin_path("/.tollgate", "/.tollgate/status"));
        assert!(!is_admin_path("/.tollgate", "/.tollgatex/status"));
    }

    #[test]
    fn keys_are_derived_as_the_rule_would() {
        let c = config();
        let v6 = CanonicalQuery::parse("rule=heavy&ip=2001:DB8:0:0:1::5");
        assert_eq!(parse(&c, "/.tollgate/status", "GET", &v6).unwrap().key, "ip=2001:db8::/64");
        let login = CanonicalQuery::parse("rule=login&body:email=%20User@Example.com");
        assert_eq!(
            parse(&c, "/.tollgate/status", "GET", &login).unwrap().key,
            format!("body:email={}", crate::key::hash_identity("user@example.com").unwrap())
        );
        let tenant = CanonicalQuery::parse("rule=tenant&path:school=s1&header:x-api-key=k&cookie:sid=c&query:plan=gold");
        assert_eq!(
            parse(&c, "/.tollgate/status", "GET", &tenant).unwrap().key,
            "path:school=s1|header:x-api-key=k|cookie:sid=c|query:plan=gold"
        );
    }

    #[test]
    fn bearer_token_comparison() {
        assert!(token_matches("s3cret", Some("Bearer s3cret")));
        assert!(token_matches("s3cret", Some("bearer   s3cret ")));
        assert!(!token_matches("s3cret", Some("Bearer s3cre")));
        assert!(!token_matches("s3cret", Some("Bearer s3cretx")));
        assert!(!token_matches("s3cret", Some("Basic s3cret")));
        assert!(!token_matches("s3cret", Some("s3cret")));
        assert!(!token_matches("s3cret", None));
        assert!(!token_matches("", Some("Bearer ")));
        assert!(token_matches("s3cret\n", Some("Bearer s3cret")), "a stored trailing newline is ignored");
    }
}
