//! Static per-key limits (`overrides`), pure: a rule's key value mapped to
//! its own limits (a tenant's plan, a partner's higher quota).
//!
//! ```toml
//! key = ["path:school:int"]
//! limits = [{ requests = 300, window = "1d" }]
//! overrides = { "42" = [{ requests = 1000, window = "1d" }] }
//! ```
//!
//! An override names the value of the rule's one key part as a request
//! would carry it; it is read exactly as the request's value is (the
//! part's type: `042`, `+42` and `42` are one `:int` value; an IPv6
//! address is its /64; a `body:` value is hashed), so the comparison is on
//! the canonical key, never on a spelling. The limits travel with every
//! call to the key's object, so an override applies atomically with the
//! count and needs no propagation.

use crate::request::canon::CanonicalQuery;
use crate::request::key::{derive_key, KeyInputs, KeyPart, MissingPart};
use crate::count::window::Limit;
use std::collections::HashMap;

/// One `overrides` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Override {
    /// As written in the config (`"042"`).
    pub(crate) value: String,
    /// The key it stands for (`path:school:int=42`), once resolved.
    pub(crate) key: Option<String>,
    pub(crate) limits: Vec<Limit>,
}

/// A rule's overrides, looked up by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    entries: Vec<Override>,
    by_key: HashMap<String, usize>,
}

/// Why an override's value names no key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnresolvedOverride {
    pub(crate) value: String,
    pub(crate) message: String,
}

impl Overrides {
    /// Unresolved entries, in config order; [`Overrides::resolve`] keys them.
    pub(crate) fn new(entries: Vec<Override>) -> Overrides {
        Overrides { entries, by_key: HashMap::new() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn entries(&self) -> &[Override] {
        &self.entries
    }

    /// The limits for `key` (a key as [`crate::pipeline::applied::Applied::key`] holds
    /// it), if an override names it.
    pub(crate) fn limits_for(&self, key: &str) -> Option<&[Limit]> {
        self.by_key.get(key).and_then(|&i| self.entries.get(i)).map(|o| o.limits.as_slice())
    }

    /// Derives each entry's key as a request carrying its value would
    /// derive it, for a rule keyed by `parts` (one part), lowercasing path
    /// groups of a `case_insensitive` rule as its matcher captures them
    /// (but a `:raw` one, [`KeyPart::folds_with_match`]).
    /// Every value that names no key, or the same key as another, is an
    /// error.
    pub(crate) fn resolve(&mut self, parts: &[KeyPart], case_insensitive: bool, ipv6_prefix: u8) -> Vec<UnresolvedOverride> {
        let mut errors = Vec::new();
        self.by_key.clear();
        let [part] = parts else {
            if !self.entries.is_empty() {
                errors.push(UnresolvedOverride {
                    value: String::new(),
                    message: "only for a rule whose key has one part (e.g. key = [\"header:x-tenant\"])".into(),
                });
            }
            return errors;
        };
        for (i, entry) in self.entries.iter_mut().enumerate() {
            let value = match part {
                _ if case_insensitive && part.folds_with_match() => entry.value.to_lowercase(),
                _ => entry.value.clone(),
            };
            entry.key = key_of(part, &value, ipv6_prefix);
            let fail = |message: String| UnresolvedOverride { value: entry.value.clone(), message };
            match &entry.key {
                None => errors.push(fail(format!("`{}` is not a value `{part}` can hold", entry.value))),
                Some(key) => {
                    if self.by_key.contains_key(key) {
                        errors.push(fail(format!("names the same key as another override ({key})")));
                    } else {
                        self.by_key.insert(key.clone(), i);
                    }
                }
            }
        }
        errors
    }
}

/// The key of a one-part rule for a request carrying `value` for `part`,
/// through the admin API's derivation ([`admin_key`]),
/// which reads raw values exactly as a request's are read.
fn key_of(part: &KeyPart, value: &str, ipv6_prefix: u8) -> Option<String> {
    let name = part.param_name()?;
    let encode = |text: &str| percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string();
    let params = CanonicalQuery::parse(&format!("{}={}", encode(&name), encode(value)));
    admin_key(std::slice::from_ref(part), &params, ipv6_prefix).ok()
}

/// Derives `rule`'s key from raw values given as query parameters named
/// after the key parts, exactly as the rule derives it from a request.
///
/// A part is named without its value type (`header:x-user-id=9`), or as
/// the rule writes it (`header:x-user-id:int=9`): either names
/// the same value.
pub(crate) fn admin_key(key: &[KeyPart], params: &CanonicalQuery, ipv6_prefix: u8) -> Result<String, MissingPart> {
    let param = |name: String| {
        params.values(&name).next().or_else(|| {
            let written = key.iter().find(|part| part.param_name().as_deref() == Some(name.as_str()))?.to_string();
            params.values(&written).next()
        })
        .map(str::to_string)
    };
    let client_ip = param("ip".into());
    let country = param("country".into());
    let asn = param("asn".into()).and_then(|a| a.trim().parse::<u32>().ok());
    let header = |name: &str| param(format!("header:{name}"));
    let body = |field: &str| param(format!("body:{field}")).into_iter().collect::<Vec<_>>();
    let (cookies, query_pairs, groups) = rebuilt(key, &param);
    let headers = |name: &str| {
        if name == "cookie" && !cookies.is_empty() {
            Some(cookies.clone())
        } else if name == "x-api-key" && key.contains(&KeyPart::Credential) {
            // `credential=VALUE`: read as a request's API key is.
            param("credential".into())
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
        fold_path_groups: false,
        body: &body,
        country: country.as_deref(),
        asn,
        ipv6_prefix,
    };
    derive_key(key, &inputs)
}

/// The cookie header, query string and path groups a request would carry
/// for `key`'s cookie, query and path parts, rebuilt from the admin
/// parameters (`param` looks one up by name): looked up through the same
/// maps a request's are.
fn rebuilt(key: &[KeyPart], param: &dyn Fn(String) -> Option<String>) -> (String, String, Vec<(String, String)>) {
    let mut cookies = String::new();
    let mut query_pairs = String::new();
    let mut groups = Vec::new();
    for part in key {
        match part {
            KeyPart::Cookie(name, _) => {
                if let Some(v) = param(format!("cookie:{name}")) {
                    cookies.push_str(&format!("{name}={v}; "));
                }
            }
            KeyPart::Query(name, _) => {
                if let Some(v) = param(format!("query:{name}")) {
                    query_pairs.push_str(&format!(
                        "{}={}&",
                        percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC),
                        percent_encoding::utf8_percent_encode(&v, percent_encoding::NON_ALPHANUMERIC)
                    ));
                }
            }
            KeyPart::PathGroup(name, _) => {
                if let Some(v) = param(format!("path:{name}")) {
                    groups.push((name.clone(), v));
                }
            }
            _ => {}
        }
    }
    (cookies, query_pairs, groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::{NonZeroU32, NonZeroU64};

    fn limit(n: u32) -> Vec<Limit> {
        vec![Limit { requests: NonZeroU32::new(n).unwrap(), window_ms: NonZeroU64::new(86_400_000).unwrap(), calendar: None }]
    }

    fn overrides(values: &[&str]) -> Overrides {
        Overrides::new(values.iter().map(|v| Override { value: v.to_string(), key: None, limits: limit(1000) }).collect())
    }

    #[test]
    fn typed_values_compare_canonically() {
        let part = KeyPart::parse("path:school:int").unwrap();
        let mut o = overrides(&["042"]);
        assert!(o.resolve(std::slice::from_ref(&part), true, 64).is_empty());
        assert_eq!(o.entries()[0].key.as_deref(), Some("path:school:int=42"));
        assert!(o.limits_for("path:school:int=42").is_some(), "042 is school 42");
        assert!(o.limits_for("path:school:int=43").is_none());
        let mut twice = overrides(&["42", "+42"]);
        let errors = twice.resolve(std::slice::from_ref(&part), true, 64);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].value, "+42");
        let mut junk = overrides(&["forty-two"]);
        assert_eq!(junk.resolve(&[part], true, 64)[0].value, "forty-two");
    }

    #[test]
    fn ips_group_by_prefix_headers_and_bodies_read_as_requests_do() {
        let mut ip = overrides(&["2001:DB8:0:0:1::7", "203.0.113.7"]);
        assert!(ip.resolve(&[KeyPart::Ip], false, 64).is_empty());
        assert!(ip.limits_for("ip=2001:db8::/64").is_some());
        assert!(ip.limits_for("ip=203.0.113.7").is_some());
        let email = KeyPart::parse("body:email").unwrap();
        let mut body = overrides(&[" Ann@Example.com "]);
        assert!(body.resolve(std::slice::from_ref(&email), false, 64).is_empty());
        let key = body.entries()[0].key.clone().unwrap();
        assert!(key.starts_with("body:email=") && !key.contains("ann"), "hashed: {key}");
        let header = KeyPart::parse("header:x-tenant").unwrap();
        let mut h = overrides(&["acme"]);
        assert!(h.resolve(std::slice::from_ref(&header), false, 64).is_empty());
        assert!(h.limits_for("header:x-tenant=acme").is_some());
        let mut two = overrides(&["acme"]);
        assert_eq!(two.resolve(&[header, KeyPart::Ip], false, 64).len(), 1, "one-part keys only");
        assert_eq!(overrides(&["*"]).resolve(&[KeyPart::Global], false, 64).len(), 1);
    }
}
