//! One rule as JSON, in the config's own vocabulary: every field a rule
//! accepts (`RULE_FIELDS`), spelled as the config spells it, its defaults
//! resolved (`timeout = "2s"`, `key = ["ip"]`, `on_error = "allow"`...). Read
//! back by [`crate::config::Config::from_json`], [`rule_json`]'s output is
//! the same rule: a unit test parses it again.
//!
//! A field is left out only where no value means what its absence means
//! (no `host`, no `fallback_key`, no `count_statuses`, no `on_success`, no
//! `trusted_device`, no `response`, no `penalty`), or where the rule's other fields make
//! it refused (the upload and reservation fields without `count_statuses`,
//! `lease_ttl` and `lease_max` where the rule does not lease). Names of
//! enum values come from their [`Named`] tables; `clear_on_success` (the
//! older spelling) is written `on_success = "clear"`.
//!
//! `GET {admin_prefix}/rules` lists rules with it ([`rules_listing`]);
//! `tollgate explain --json` describes a rule with it.
//!
//! Built from plain `Value`s, not `serde_json::json!`: the Worker carries
//! this module (for `GET /rules`), and every type `json!` serializes costs
//! its upload code of its own.

use crate::config::overrides::Overrides;
use crate::config::policy::{Counting, LeaseChoice, MissingKey, Named, OnMissingKey, TrustedDevice};
use crate::config::response::CustomResponse;
use crate::config::rules::{Condition, Rule, RuleSpec, Target, Test};
use crate::count::lease::LeaseMode;
use crate::count::window::Limit;
use crate::request::canon::Source;
use crate::request::exempt::{Bots, Exemptions};
use crate::request::key::KeyPart;
use serde_json::{Map, Value};

/// Every field of `rule`, as the config would write it.
pub(crate) fn rule_json(rule: &RuleSpec) -> Value {
    let mut out = matching(rule);
    out.extend(keying(rule));
    out.extend(counting(rule));
    out.extend(limiting(rule));
    Value::Object(out)
}

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
            let window_ms = |l: &Limit| table([("requests", l.requests.get().into()), ("window_ms", l.window_ms.get().into())]);
            put(fields, "limits", rule.limits.iter().map(window_ms).collect());
        }
        out
    });
    table([("rules", listed.collect())])
}

/// What the rule matches: name, path, host, methods, conditions, suffixes.
fn matching(rule: &RuleSpec) -> Map<String, Value> {
    let mut out = Map::new();
    put(&mut out, "name", text(&rule.name));
    put(&mut out, "path", text(&rule.path));
    if let Some(host) = &rule.host {
        put(&mut out, "host", text(host));
    }
    if !rule.methods.is_empty() {
        put(&mut out, "methods", texts(&rule.methods));
    }
    put(&mut out, "query", conditions(&rule.conditions, Target::Query));
    let sources = [Source::Query, Source::Body, Source::Cookie];
    let sources: Vec<&str> = sources.iter().filter(|s| rule.query_sources.contains(**s)).map(|s| s.name()).collect();
    put(&mut out, "query_sources", texts(&sources));
    put(&mut out, "header", conditions(&rule.conditions, Target::Header));
    put(&mut out, "case_insensitive", rule.case_insensitive.into());
    put(&mut out, "suffixes", texts(&rule.suffixes));
    out
}

/// How the rule keys a request: key, on_missing_key, fallback_key.
fn keying(rule: &RuleSpec) -> Map<String, Value> {
    let mut out = Map::new();
    put(&mut out, "key", parts(&rule.key));
    let on_missing = match &rule.on_missing_key {
        MissingKey::Reject => OnMissingKey::Reject,
        MissingKey::Skip => OnMissingKey::Skip,
        MissingKey::Fallback(fallback) => {
            put(&mut out, "fallback_key", parts(fallback));
            OnMissingKey::Fallback
        }
    };
    put(&mut out, "on_missing_key", on_missing.name().into());
    out
}

/// What the rule counts, and what settles a count: count_statuses, the
/// success fields, the reservation and upload fields, trusted_device,
/// lease.
fn counting(rule: &RuleSpec) -> Map<String, Value> {
    let mut out = Map::new();
    if let Counting::Statuses(statuses) = &rule.counting {
        put(&mut out, "count_statuses", numbers(statuses));
    }
    if rule.reserves() {
        put(&mut out, "reservation_ttl", duration(rule.reservation_ttl_ms).into());
        put(&mut out, "upload_buffer", rule.upload.buffer.into());
        put(&mut out, "upload_timeout", duration(u64::from(rule.upload.timeout_ms)).into());
    }
    if let Some(on) = &rule.on_success {
        put(&mut out, "on_success", on.action.name().into());
        put(&mut out, "success_statuses", numbers(&on.statuses));
        if let Some(header) = &on.identity_header {
            put(&mut out, "success_identity_header", text(header));
        }
    }
    if let Some(device) = &rule.trusted_device {
        put(&mut out, "trusted_device", trusted_device(device));
    }
    out.extend(lease(rule.lease));
    out
}

/// What the rule allows and does over it: algorithm, limits, cost,
/// overrides, action, on_error, timeout, ratelimit_headers, exempt,
/// response, metrics.
fn limiting(rule: &RuleSpec) -> Map<String, Value> {
    let mut out = Map::new();
    put(&mut out, "algorithm", rule.algorithm.name().into());
    put(&mut out, "limits", limits(&rule.limits));
    let cost = match &rule.usage {
        Some(u) => {
            // Three at a time: `table` of four would be one more copy of it.
            let mut cost = table([("header", text(&u.header)), ("reserve", u.reserve.into()), ("max", u.max.into())]);
            if let Value::Object(fields) = &mut cost {
                put(fields, "expose", u.expose.into());
            }
            cost
        }
        None => rule.cost.into(),
    };
    put(&mut out, "cost", cost);
    if let Some(n) = rule.concurrency {
        put(&mut out, "concurrency", n.into());
        put(&mut out, "idle_release", duration(rule.idle_release_ms).into());
    }
    put(&mut out, "overrides", overrides(&rule.overrides));
    put(&mut out, "action", rule.action.name().into());
    put(&mut out, "on_error", rule.on_error.name().into());
    put(&mut out, "timeout", duration(u64::from(rule.timeout_ms)).into());
    put(&mut out, "ratelimit_headers", rule.ratelimit_headers.into());
    put(&mut out, "exempt", exempt(&rule.exempt));
    if let Some(response) = &rule.response {
        put(&mut out, "response", custom_response(response));
    }
    put(&mut out, "metrics", rule.metrics.name().into());
    if let Some(penalty) = rule.penalty_ms {
        put(&mut out, "penalty", duration(penalty).into());
    }
    out
}

/// A duration as the config writes one: the largest unit that divides it
/// (`"1d"`, `"90s"`, `"1500ms"`).
pub(crate) fn duration(ms: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)];
    match UNITS.iter().find(|(_, size)| ms > 0 && ms.is_multiple_of(*size)) {
        Some((unit, size)) => format!("{}{unit}", ms / size),
        None => format!("{ms}ms"),
    }
}

/// Sets `name` in `table`; one call, not inlined at each field, keeps the
/// Worker's code small.
#[inline(never)]
fn put(table: &mut Map<String, Value>, name: &str, value: Value) {
    table.insert(name.to_string(), value);
}

/// A JSON object of `fields`, in their order.
fn table<const N: usize>(fields: [(&str, Value); N]) -> Value {
    // Inserted one by one: collecting into a map sorts (a stable sort's
    // code, ~7 KB of Wasm, for nothing: the map orders its keys anyway).
    let mut out = Map::new();
    for (name, value) in fields {
        out.insert(name.to_string(), value);
    }
    Value::Object(out)
}

fn text(value: &str) -> Value {
    Value::String(value.to_string())
}

fn texts<S: AsRef<str>>(values: &[S]) -> Value {
    values.iter().map(|v| text(v.as_ref())).collect()
}

fn numbers(values: &[u16]) -> Value {
    values.iter().map(|v| Value::from(*v)).collect()
}

/// Key parts as the config spells them (`"body:email:lower"`).
fn parts(parts: &[KeyPart]) -> Value {
    parts.iter().map(|p| Value::String(p.to_string())).collect()
}

/// The conditions on `target`: `name = "v"`, `["a", "b"]` or `true`.
fn conditions(conditions: &[Condition], target: Target) -> Value {
    let test = |test: &Test| match test {
        Test::Equals(value) => text(value),
        Test::AnyOf(values) => texts(values),
        Test::Present => Value::Bool(true),
    };
    let mut out = Map::new();
    for c in conditions.iter().filter(|c| c.target == target) {
        out.insert(c.name.clone(), test(&c.test));
    }
    Value::Object(out)
}

/// `[{ requests, window }]`.
fn limits(limits: &[Limit]) -> Value {
    let limit = |l: &Limit| table([("requests", l.requests.get().into()), ("window", duration(l.window_ms.get()).into())]);
    limits.iter().map(limit).collect()
}

/// `{ "42" = [{ requests, window }] }`, in config order.
fn overrides(overrides: &Overrides) -> Value {
    let mut out = Map::new();
    for o in overrides.entries() {
        out.insert(o.value.clone(), limits(&o.limits));
    }
    Value::Object(out)
}

/// `lease`, and where the rule leases, `lease_ttl` and `lease_max`. A
/// lease forced off by the rule's other fields is written as asked
/// (`"auto"`): read back, the same fields force it off again.
fn lease(mode: LeaseMode) -> Map<String, Value> {
    let mut out = Map::new();
    let choice = match mode {
        LeaseMode::Off => LeaseChoice::Off,
        LeaseMode::ForcedOff(_) => LeaseChoice::Auto,
        LeaseMode::Auto(settings) => {
            put(&mut out, "lease_ttl", duration(settings.ttl_ms).into());
            put(&mut out, "lease_max", settings.max.into());
            LeaseChoice::Auto
        }
    };
    put(&mut out, "lease", choice.name().into());
    out
}

/// `{ secret, cookie, ttl }`.
fn trusted_device(device: &TrustedDevice) -> Value {
    let ttl = duration(device.ttl_s.saturating_mul(1000));
    table([("secret", text(&device.secret)), ("cookie", text(&device.cookie)), ("ttl", ttl.into())])
}

/// `{ ips, asns, verified_bots, header }`.
fn exempt(exempt: &Exemptions) -> Value {
    let bots = match &exempt.bots {
        Bots::None => Value::Bool(false),
        Bots::Any => Value::Bool(true),
        Bots::Categories(categories) => texts(categories),
    };
    let ips = exempt.ips.iter().map(|ip| Value::String(ip.to_string())).collect();
    let asns = exempt.asns.iter().map(|asn| Value::from(*asn)).collect();
    let mut out = table([("ips", ips), ("asns", asns), ("verified_bots", bots)]);
    if let (Some(header), Value::Object(fields)) = (&exempt.header, &mut out) {
        put(fields, "header", table([("name", text(&header.name)), ("secret", text(&header.secret))]));
    }
    out
}

/// `{ status, content_type, body }` (the content type only with a body).
fn custom_response(response: &CustomResponse) -> Value {
    let status = ("status", Value::from(response.status));
    match response.template() {
        Some(body) => table([status, ("content_type", text(&response.content_type)), ("body", body.into())]),
        None => table([status]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use crate::config::rule_fields::rule_infos;
    use crate::config::Config;

    /// Rules that set every field between them (a failures-only rule
    /// cannot lease; a leasing one cannot settle successes; `on_success` and
    /// `clear_on_success` exclude each other).
    fn full_rules() -> Value {
        json!([
            {
                "name": "login", "path": "/login", "methods": ["POST"],
                "key": ["body:email:lower"], "on_missing_key": "reject",
                "count_statuses": [401, 403], "clear_on_success": true,
                "success_statuses": [200], "success_identity_header": "x-user",
                "reservation_ttl": "2m", "upload_buffer": 1024, "upload_timeout": "5s",
                "trusted_device": { "secret": "TOLLGATE_DEVICE_KEY", "cookie": "dev", "ttl": "7d" },
                "limits": [{ "requests": 5, "window": "15m" }], "on_error": "deny", "timeout": "1500ms", "penalty": "1h",
                "response": { "status": 503, "content_type": "text/plain", "body": "wait {retry_after} s ({rule}) {x}" }
            },
            {
                "name": "api", "path": "/api/:id", "host": "api.example.com", "methods": ["get", "PSOT"],
                "query": { "mode": "heavy", "kind": ["a", "b"], "flag": true }, "query_sources": ["query", "cookie"],
                "header": { "X-Plan": "free" }, "case_insensitive": false, "suffixes": [".JSON", "xml"],
                "key": ["header:x-api-key"], "on_missing_key": "fallback", "fallback_key": ["ip"],
                "lease": "auto", "lease_ttl": "500ms", "lease_max": 20, "ratelimit_headers": true,
                "algorithm": "gcra", "limits": [{ "requests": 100, "window": "60" }, { "requests": 20000, "window": "1d" }],
                "cost": 2, "action": "log",
                "exempt": { "ips": ["10.0.0.0/8"], "asns": [13335], "verified_bots": ["Search Engine Crawler"],
                            "header": { "name": "x-exempt", "secret": "TOLLGATE_EXEMPT_KEY" } },
                "overrides": { "k1": [{ "requests": 1000, "window": "1d" }] },
                "metrics": "all"
            },
            {
                "name": "otp", "path": "/otp", "key": ["body:phone"], "count_statuses": [401], "on_success": "decrement",
                "limits": [{ "requests": 3, "window": "1h" }], "concurrency": 2, "idle_release": "3s"
            }
        ])
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
                // The older spelling is written as the newer one.
                let written = if field == "clear_on_success" { "on_success" } else { field.as_str() };
                assert!(described.get(written).is_some(), "{field} of {} is in {described}", rule.name);
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
        assert_eq!(login["lease"], "auto", "forced off by count_statuses, written as asked");
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

    #[test]
    fn defaults_are_written_out() {
        let config = parse(json!([{ "name": "plain", "path": "/", "limits": [{ "requests": 1, "window": "1s" }] }]));
        let plain = rule_json(&config.rules[0]);
        let expect = [
            ("key", json!(["ip"])), ("on_missing_key", json!("reject")), ("on_error", json!("allow")), ("action", json!("block")),
            ("timeout", json!("2s")), ("algorithm", json!("sliding_log")), ("metrics", json!("limited")), ("lease", json!("auto")),
            ("lease_ttl", json!("500ms")), ("cost", json!(1)), ("case_insensitive", json!(true)), ("query_sources", json!(["query", "body"])),
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
