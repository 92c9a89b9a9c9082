//! What the decision machine is told about a request and its deployment:
//! plain data, filled by a driver (the Worker from the live request, the
//! embedded check from the app's, `tollgate explain` from its command line).
//! Nothing in here calls back into a driver.

use crate::config::Config;
use std::ops::Range;

/// A request's (or a response's) header fields, as the Fetch `Headers`
/// object lists them: lowercased names, each once, several values of one
/// name joined by `", "`. Held as one text with the fields' places in it
/// (one allocation, however many fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeaderMap {
    text: String,
    /// Each field's name and value, as ranges of `text`.
    fields: Vec<(Range<usize>, Range<usize>)>,
}

impl HeaderMap {
    /// From `(name, value)` pairs in any case; a name given several times
    /// reads as its values joined by `", "` (`Headers.get`).
    pub(crate) fn from_pairs<N: AsRef<str>, V: AsRef<str>>(pairs: &[(N, V)]) -> HeaderMap {
        let mut joined: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let name = name.as_ref().to_ascii_lowercase();
            match joined.iter_mut().find(|(n, _)| *n == name) {
                Some((_, values)) => {
                    values.push_str(", ");
                    values.push_str(value.as_ref());
                }
                None => joined.push((name, value.as_ref().to_string())),
            }
        }
        let lines: Vec<&str> = joined.iter().flat_map(|(n, v)| [n.as_str(), v.as_str()]).collect();
        HeaderMap::from_lines(lines.join("\n"))
    }

    /// From the lines `name`, `value`, `name`, `value`, ... joined by `\n`,
    /// as a `Headers` object iterates (names lowercased, each once): how the
    /// glue takes one over in a single call (a field's name and value never
    /// hold a line break).
    pub(crate) fn from_lines(text: String) -> HeaderMap {
        // Room for as many fields as the text can hold (`n` need `2n - 1`
        // bytes), up to 16, more than most requests carry: no regrowth.
        let mut fields = Vec::with_capacity(text.len().div_ceil(2).min(16));
        {
            let mut at = 0;
            let mut lines = crate::request::canon::split_ascii(&text, b'\n').map(|line| {
                let range = at..at + line.len();
                at = range.end + 1;
                range
            });
            while let (Some(name), Some(value)) = (lines.next(), lines.next()) {
                fields.push((name, value));
            }
        }
        HeaderMap { text, fields }
    }

    /// The fields `names`, each as `lookup` reads it (a field it does not
    /// find is left out): how a driver hands over the few a step names.
    pub(crate) fn of(names: &[&str], lookup: &dyn Fn(&str) -> Option<String>) -> HeaderMap {
        let pairs: Vec<(&str, String)> = names.iter().filter_map(|&name| Some((name, lookup(name)?))).collect();
        HeaderMap::from_pairs(&pairs)
    }

    /// The field `name` (any case), as `Headers.get` reads it.
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.get_str(name).map(str::to_string)
    }

    /// [`HeaderMap::get`], borrowed from the map.
    pub(crate) fn get_str(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(n, _)| self.text[n.clone()].eq_ignore_ascii_case(name)).map(|(_, v)| &self.text[v.clone()])
    }
}

/// The deployment's secrets the pipeline reads, by name: read once per
/// isolate (a changed secret is a new deployment, hence new isolates).
#[derive(Debug, Clone, Default)]
pub(crate) struct Secrets {
    /// `TOLLGATE_ADMIN_TOKEN`: `None`, the admin API is off.
    pub(crate) admin_token: Option<String>,
    /// The key of every `key_hash` ([`crate::request::key::log_key`] of
    /// `TOLLGATE_LOG_KEY`); `None`: hashes are unkeyed.
    pub(crate) log_key: Option<Vec<u8>>,
    /// The secrets the config names ([`Secrets::names`]), those that are set.
    pub(crate) named: Vec<(String, String)>,
}

/// The secret that turns the admin API on.
pub(crate) const ADMIN_TOKEN_SECRET: &str = "TOLLGATE_ADMIN_TOKEN";
/// The secret that keys every `key_hash` in logs and admin output.
pub(crate) const LOG_KEY_SECRET: &str = "TOLLGATE_LOG_KEY";

impl Secrets {
    /// The names of the secrets `config` reads besides the two above:
    /// each `trusted_device` rule's signing key and each exemption's
    /// secret header value, in config order, each once.
    pub(crate) fn names(config: &Config) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let exempts = std::iter::once(&config.exempt).chain(config.rules.iter().map(|r| &r.exempt));
        let headers = exempts.filter_map(|e| e.header.as_ref().map(|h| h.secret.clone()));
        let devices = config.rules.iter().filter_map(|r| r.trusted_device.as_ref().map(|d| d.secret.clone()));
        for name in devices.chain(headers) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// A named secret's value.
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.named.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }

    /// The `trusted_device` secrets that are set, in config order (what
    /// RPC tickets are signed with, beside the log key).
    pub(crate) fn device_secrets(&self, config: &Config) -> Vec<String> {
        config.rules.iter().filter_map(|r| self.get(&r.trusted_device.as_ref()?.secret)).filter(|s| !s.trim().is_empty()).collect()
    }
}

/// What `request.cf` says of the client, as far as the pipeline reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientFacts {
    /// `cf.country`.
    pub(crate) country: Option<String>,
    /// `cf.asn`.
    pub(crate) asn: Option<u32>,
    /// `Some(category)` when Cloudflare says the client is a verified bot
    /// ([`crate::request::exempt::verified_bot`]).
    pub(crate) verified_bot: Option<String>,
    /// `cf.colo`: where the request was served, for metric points only.
    pub(crate) colo: Option<String>,
}

/// Everything the machine is told about one request.
#[derive(Debug, Clone)]
pub(crate) struct Facts<'a> {
    /// The method as sent (not normalized).
    pub(crate) method: &'a str,
    /// The URL as the runtime serialized it (WHATWG): split, never parsed.
    pub(crate) url: &'a str,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) client: &'a ClientFacts,
    pub(crate) secrets: &'a Secrets,
    /// Now, Unix ms: device cookies expire, reservations are timed.
    pub(crate) now_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_as_the_fetch_headers_object_reads_them() {
        let map = HeaderMap::from_pairs(&[("X-User", "ann"), ("x-user", "bob"), ("Accept", "*/*")]);
        assert_eq!(map.get("x-user").as_deref(), Some("ann, bob"));
        assert_eq!(map.get("X-USER").as_deref(), Some("ann, bob"));
        assert_eq!(map.get("accept").as_deref(), Some("*/*"));
        assert_eq!(map.get("cookie"), None);
        let lines = HeaderMap::from_lines("cookie\na=1; b=2\nx-empty\n\nhost\nexample.com\n".to_string());
        assert_eq!(lines.get("cookie").as_deref(), Some("a=1; b=2"));
        assert_eq!(lines.get("x-empty").as_deref(), Some(""), "an empty value is a value");
        assert_eq!(lines.get("host").as_deref(), Some("example.com"));
        assert_eq!(HeaderMap::from_lines(String::new()).get(""), None, "no field");
    }

    #[test]
    fn the_config_names_the_secrets_it_reads() {
        let config = Config::from_json(&serde_json::json!({
            "exempt": { "header": { "name": "x-health", "secret": "HEALTH_KEY" } },
            "rules": [
                { "name": "login", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
                  "on_success": "clear", "trusted_device": { "secret": "DEVICE_KEY" },
                  "exempt": { "header": { "name": "x-health", "secret": "HEALTH_KEY" } },
                  "limits": [{ "requests": 3, "window": "15m" }] },
            ],
        }))
        .unwrap();
        assert_eq!(Secrets::names(&config), vec!["DEVICE_KEY".to_string(), "HEALTH_KEY".to_string()]);
        let secrets = Secrets { named: vec![("DEVICE_KEY".into(), "k".into())], ..Secrets::default() };
        assert_eq!(secrets.get("DEVICE_KEY").as_deref(), Some("k"));
        assert_eq!(secrets.get("HEALTH_KEY"), None);
        assert_eq!(secrets.device_secrets(&config), vec!["k".to_string()]);
    }
}
