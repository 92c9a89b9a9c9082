//! One rule as JSON, in the config's own vocabulary: every field a rule
//! accepts (`RULE_FIELDS`), spelled as the config spells it, its defaults
//! resolved (`timeout = "2s"`, `key = ["ip"]`, `on_error = "allow"`...). Read
//! back by [`crate::config::Config::from_json`], [`rule_json`]'s output is
//! the same rule: a unit test parses it again.
//!
//! A field is left out only where no value means what its absence means
//! (no `host`, no `fallback_key`, no `counting.statuses`, no `on_success`, no
//! `trusted_device`, no `response`, no `penalty`, no `metering`), or where the
//! rule's other fields make it refused (the reservation and upload fields
//! under `counting = { mode = "request" }`, `lease_ttl` and `lease_max`
//! where the rule does not lease, `cost` beside `metering`). Names of enum
//! values come from their [`crate::config::policy::Named`] tables. A rule read from the 0.2.0
//! spelling ([`crate::config::spelling`]) is written in the current one.
//!
//! `GET {admin_prefix}/rules` lists rules with it ([`rules_listing`]);
//! `tollgate explain --json` describes a rule with it.
//!
//! Each field writes itself: `RULE_FIELDS` holds, beside each field's
//! reader, its writer (`.writes(...)`, in the vocabulary of
//! [`crate::config::written`]), so a new rule field is read and described
//! in one entry.

use crate::config::policy::Counting;
use crate::config::rule_fields::RULE_FIELDS;
use crate::config::rules::{Rule, RuleSpec};
use crate::config::written::{numbers, parts, put, table, text, texts};
use crate::count::window::Limit;
use serde_json::{Map, Value};

/// Every field of `rule`, as the config would write it: each field of
/// `RULE_FIELDS` that its writer gives a value.
pub(crate) fn rule_json(rule: &RuleSpec) -> Value {
    let mut out = Map::new();
    for field in RULE_FIELDS {
        if let Some(value) = field.write.and_then(|write| write(rule)) {
            put(&mut out, field.name, value);
        }
    }
    Value::Object(out)
}

#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) use crate::config::written::{duration, window_text};

/// The body of `GET {admin_prefix}/rules`: `{ "rules": [...] }`, each rule
/// as [`rule_json`] writes it, but for the keys the listing had before it
/// (`host`, `methods`, `fallback_key`, `count_statuses`, `limits`), kept as
/// they were so that its readers keep working: `null` or `[]` when unset,
/// and each limit as `{ requests, window_ms }`.
pub(crate) fn rules_listing(rules: &[Rule]) -> Value {
    let listed = rules.iter().map(|rule| {
        let mut out = rule_json(rule);
        if let Value::Object(fields) = &mut out {
            put(fields, "host", rule.host.as_deref().map_or(Value::Null, text));
            put(fields, "methods", texts(&rule.methods));
            put(fields, "fallback_key", parts(rule.on_missing_key.fallback_parts()));
            let counted = match &rule.counting {
                Counting::All => Value::Null,
                Counting::Statuses(statuses) => numbers(statuses),
            };
            put(fields, "count_statuses", counted);
            // A calendar window adds its unit and zone; its
            // `window_ms` is the longest period, the horizon it is kept for.
            let window_ms = |l: &Limit| match l.calendar {
                None => table([("requests", l.requests.get().into()), ("window_ms", l.window_ms.get().into())]),
                Some(c) => table([
                    ("requests", l.requests.get().into()),
                    ("window_ms", l.window_ms.get().into()),
                    ("calendar", c.unit.name().into()),
                    ("time_zone", c.zone.name().into()),
                ]),
            };
            put(fields, "limits", rule.limits.iter().map(window_ms).collect());
        }
        out
    });
    table([("rules", listed.collect())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use crate::config::rule_fields::rule_infos;
    use crate::config::Config;

    /// `tests/schema/every_rule_field.json`: rules that set every field
    /// between them (a failures-only rule cannot lease; a leasing one
    /// cannot settle successes; `cost` and `metering` exclude each other).
    /// A data file, so a new rule field adds its line there, not here
    /// (`tests/schema` also validates it against the schema).
    fn full_rules() -> Value {
        serde_json::from_str(include_str!("../../tests/schema/every_rule_field.json")).unwrap()
    }

    fn parse(rules: Value) -> Config {
        Config::from_json(&json!({ "rules": rules })).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn every_field_a_rule_sets_is_described() {
        let rules = full_rules();
        let config = parse(rules.clone());
        let mut seen = std::collections::BTreeSet::new();
        for (given, rule) in rules.as_array().unwrap().iter().zip(&config.rules) {
            let described = rule_json(rule);
            for field in given.as_object().unwrap().keys() {
                assert!(described.get(field).is_some(), "{field} of {} is in {described}", rule.name);
                seen.insert(field.clone());
            }
        }
        for field in rule_infos() {
            assert!(seen.contains(field.name), "the test rules set {}", field.name);
        }
        let api = rule_json(&config.rules[1]);
        assert_eq!(api["on_success"], Value::Null, "not a failures-only rule");
        assert_eq!(api["methods"], json!(["GET", "PSOT"]));
        assert_eq!(api["suffixes"], json!(["json", "xml"]));
        assert_eq!(api["header"], json!({ "x-plan": "free" }));
        assert_eq!(api["limits"], json!([{ "requests": 100, "window": "1m" }, { "requests": 20000, "window": "1d" }]));
        assert_eq!(api["lease_ttl"], "500ms");
        let login = rule_json(&config.rules[0]);
        assert_eq!(login["on_success"], "clear");
        assert_eq!(login["lease"], "auto", "forced off by the two-phase mode, written as asked");
        assert_eq!(login["counting"], json!({ "mode": "response", "statuses": [401, 403], "reservation_ttl": "2m", "upload_buffer": 1024, "upload_timeout": "5s" }));
        assert_eq!(api["counting"], json!({ "mode": "request" }), "the mode is written, and nothing it does not use");
        assert_eq!(login["response"]["body"], "wait {retry_after} s ({rule}) {x}");
    }

    #[test]
    fn what_it_writes_reads_back_as_the_same_rule() {
        let mut rules = full_rules();
        rules.as_array_mut().unwrap().push(json!({ "name": "plain", "path": "/", "limits": [{ "requests": 1, "window": "1s" }] }));
        rules.as_array_mut().unwrap().push(json!({ "name": "off", "path": "/x", "lease": "off", "on_missing_key": "skip",
            "limits": [{ "requests": 1, "window": "1s" }], "exempt": { "verified_bots": true } }));
        let config = parse(rules);
        let described: Vec<Value> = config.rules.iter().map(|r| rule_json(r)).collect();
        let again = parse(json!(described));
        assert_eq!(again.rules.len(), described.len());
        for (first, second) in described.iter().zip(&again.rules) {
            assert_eq!(first, &rule_json(second), "{}", second.name);
        }
        // What rule_json cannot show: the parsed values behind it.
        let (a, b) = (&config.rules[1], &again.rules[1]);
        assert_eq!((&a.key, &a.on_missing_key, &a.conditions, &a.limits, &a.exempt), (&b.key, &b.on_missing_key, &b.conditions, &b.limits, &b.exempt));
        assert_eq!((a.lease, &a.response, a.upload), (b.lease, &b.response, b.upload));
        let (a, b) = (&config.rules[0], &again.rules[0]);
        assert_eq!((&a.on_success, &a.trusted_device, a.lease, a.reservation_ttl_ms), (&b.on_success, &b.trusted_device, b.lease, b.reservation_ttl_ms));
        assert_eq!((a.penalty_ms, b.penalty_ms), (Some(3_600_000), Some(3_600_000)));
    }

    /// The table is the one place a rule field is declared: each has its
    /// writer beside its reader, so none can be read and never described.
    #[test]
    fn every_rule_field_has_its_writer() {
        for field in RULE_FIELDS {
            assert!(field.write.is_some(), "{} writes itself back", field.name);
        }
    }

    #[test]
    fn defaults_are_written_out() {
        let config = parse(json!([{ "name": "plain", "path": "/", "limits": [{ "requests": 1, "window": "1s" }] }]));
        let plain = rule_json(&config.rules[0]);
        let expect = [
            ("key", json!(["ip"])), ("on_missing_key", json!("reject")), ("on_error", json!("allow")), ("action", json!("block")),
            ("timeout", json!("2s")), ("algorithm", json!("sliding_log")), ("metrics", json!("limited")), ("lease", json!("auto")),
            ("lease_ttl", json!("500ms")), ("cost", json!(1)), ("counting", json!({ "mode": "request" })), ("case_insensitive", json!(true)), ("query_sources", json!(["query", "body"])),
        ];
        for (field, value) in expect {
            assert_eq!(plain[field], value, "{field}");
        }
        assert_eq!(plain.get("host"), None, "no host: left out, as a config leaves it out");
    }

    #[test]
    fn the_rules_listing_keeps_its_earlier_keys() {
        let config = parse(json!([{ "name": "r", "path": "/", "limits": [{ "requests": 2, "window": "1m" }] }]));
        let body = rules_listing(&config.rules);
        let r = &body["rules"][0];
        assert_eq!((&r["host"], &r["fallback_key"], &r["count_statuses"]), (&Value::Null, &json!([]), &Value::Null));
        assert_eq!(r["limits"], json!([{ "requests": 2, "window_ms": 60_000 }]));
        assert_eq!(r["methods"], json!([]));
        assert_eq!(r["on_error"], "allow");
        assert_eq!(r["timeout"], "2s", "and every other field, as rule_json writes it");
    }

    #[test]
    fn durations_use_the_largest_exact_unit() {
        let cases = [(1, "1ms"), (1_500, "1500ms"), (2_000, "2s"), (90_000, "90s"), (60_000, "1m"), (3_600_000, "1h"), (86_400_000, "1d")];
        for (ms, text) in cases {
            assert_eq!(duration(ms), text);
        }
    }
}
