//! Who and what, on a request's log lines: an operator reading a
//! `block` line sees the request and the client without a hash lookup.
//!
//! Every line the decision machine writes for a request (`block`,
//! `shadow_block`, `counter_error`, `exempt`, `missing_key`, `upload`) gets:
//!
//! | field | holds |
//! |---|---|
//! | `method` | the method as sent (at most 16 characters) |
//! | `route` | the rule's `path` pattern (lines of a rule): what the origin routes, never the request's own path, which may hold a raw key (a tenant id, an email) |
//! | `country`, `colo`, `asn` | `request.cf`'s, when the runtime gave them |
//!
//! and the lines that refuse say why (`reason`, set where they are made:
//! [`crate::pipeline::verdict`]): `limit`, `ban`, `penalty`, `missing_key`,
//! `fail_closed`. Never a raw key: keys appear only as `key_hash`.
//!
//! Pure: the facts in, the lines amended.

use crate::config::Config;
use crate::pipeline::facts::{ClientFacts, Facts};
use crate::pipeline::verdict::LogEvent;
use serde_json::Value;

/// The longest method written, in characters (a method is a token the
/// runtime already checked; this only bounds the line).
const METHOD_CHARS: usize = 16;

/// `method` cut at [`METHOD_CHARS`] characters, as lines and metric
/// points write it.
pub(crate) fn bounded_method(method: &str) -> &str {
    let end = method.char_indices().nth(METHOD_CHARS).map_or(method.len(), |(at, _)| at);
    &method[..end]
}

/// Adds who and what to each of `events`, one request's lines.
pub(crate) fn annotate(events: &mut [LogEvent], facts: &Facts<'_>, config: &Config) {
    let method = bounded_method(facts.method);
    for event in events.iter_mut() {
        let route = event
            .fields
            .iter()
            .find(|(name, _)| *name == "rule")
            .and_then(|(_, rule)| rule.as_str())
            .and_then(|name| config.rules.iter().find(|r| r.name == name))
            .map(|rule| rule.path.clone());
        event.fields.push(("method", method.into()));
        if let Some(route) = route {
            event.fields.push(("route", route.into()));
        }
    }
    locate(events, facts.client);
}

/// Adds where the client is (`country`, `colo`, `asn`) to each of `events`
/// that does not say it yet: the Worker reads `request.cf` for its log
/// lines only when there are some, if the rules did not read it already.
pub(crate) fn locate(events: &mut [LogEvent], client: &ClientFacts) {
    for event in events {
        let has = |fields: &[(&'static str, Value)], name: &str| fields.iter().any(|(n, _)| *n == name);
        if let Some(country) = client.country.as_deref().filter(|_| !has(&event.fields, "country")) {
            event.fields.push(("country", country.into()));
        }
        if let Some(colo) = client.colo.as_deref().filter(|_| !has(&event.fields, "colo")) {
            event.fields.push(("colo", colo.into()));
        }
        if let Some(asn) = client.asn.filter(|_| !has(&event.fields, "asn")) {
            event.fields.push(("asn", Value::from(asn)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::facts::{HeaderMap, Secrets};
    use serde_json::json;

    fn field<'a>(event: &'a LogEvent, name: &str) -> Option<&'a Value> {
        event.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    #[test]
    fn a_block_line_says_who_and_what_and_never_the_path_as_sent() {
        let config = crate::testing::config(json!([
            { "name": "tenant", "path": "/t/:tenant/export", "key": ["path:tenant"], "limits": [{ "requests": 1, "window": "1m" }] },
        ]));
        let headers = HeaderMap::from_pairs::<&str, &str>(&[]);
        let client = ClientFacts { country: Some("NL".into()), asn: Some(64_500), colo: Some("AMS".into()), verified_bot: None };
        let secrets = Secrets::default();
        let facts = Facts { method: "POSTPOSTPOSTPOSTPOST", url: "https://x.test/t/acme-secret/export", headers: &headers, client: &client, secrets: &secrets, now_ms: 0 };
        let mut events = vec![
            LogEvent::new("block", vec![("rule", "tenant".into()), ("key_hash", "abc".into()), ("reason", "limit".into())]),
            LogEvent::new("upload", vec![("outcome", "too_slow".into())]),
        ];
        annotate(&mut events, &facts, &config);
        let block = &events[0];
        assert_eq!(field(block, "route"), Some(&Value::from("/t/:tenant/export")));
        assert_eq!(field(block, "method"), Some(&Value::from("POSTPOSTPOSTPOST")), "bounded to 16 characters");
        assert_eq!(field(block, "country"), Some(&Value::from("NL")));
        assert_eq!(field(block, "colo"), Some(&Value::from("AMS")));
        assert_eq!(field(block, "asn"), Some(&Value::from(64_500)));
        assert!(!block.line().contains("acme-secret"), "the raw path (and the key in it) is never written: {}", block.line());
        assert_eq!(field(&events[1], "route"), None, "a line of no rule has no route");
        assert_eq!(field(&events[1], "colo"), Some(&Value::from("AMS")));
    }

    #[test]
    fn what_the_runtime_did_not_say_is_left_out() {
        let config = crate::testing::config(json!([{ "name": "r", "path": "/p", "limits": [{ "requests": 1, "window": "1m" }] }]));
        let headers = HeaderMap::from_pairs::<&str, &str>(&[]);
        let client = ClientFacts::default();
        let secrets = Secrets::default();
        let facts = Facts { method: "GET", url: "https://x.test/p", headers: &headers, client: &client, secrets: &secrets, now_ms: 0 };
        let mut events = vec![LogEvent::new("block", vec![("rule", "r".into())])];
        annotate(&mut events, &facts, &config);
        let names: Vec<&str> = events[0].fields.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["rule", "method", "route"]);
        // Located later (the Worker read `cf` for the lines): once each.
        let client = ClientFacts { country: Some("DE".into()), asn: Some(3_320), colo: Some("FRA".into()), verified_bot: None };
        locate(&mut events, &client);
        locate(&mut events, &client);
        let names: Vec<&str> = events[0].fields.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["rule", "method", "route", "country", "colo", "asn"]);
    }
}
