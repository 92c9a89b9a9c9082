//! The config's vocabulary as JSON values: how each rule field's writer
//! (`.writes(...)` in [`crate::config::rule_fields`]'s `RULE_FIELDS`)
//! spells a value, as the config writes it (`"90s"`, `["body:email"]`,
//! `{ requests, window }`). [`crate::config::describe`] puts the writers'
//! values together.
//!
//! Built from plain `Value`s, not `serde_json::json!`: the Worker carries
//! this module (for `GET /rules`), and every type `json!` serializes costs
//! its upload code of its own.

use crate::config::overrides::Overrides;
use crate::config::policy::{Counting, CountingMode, LeaseChoice, MissingKey, Named, OnMissingKey, TrustedDevice};
use crate::config::response::CustomResponse;
use crate::config::rules::{Condition, RuleSpec, Target, Test};
use crate::count::lease::LeaseMode;
use crate::count::window::Limit;
use crate::request::exempt::{Bots, Exemptions};
use crate::request::canon::{Source, Sources};
use crate::request::key::KeyPart;
use serde_json::{Map, Value};

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
pub(super) fn put(table: &mut Map<String, Value>, name: &str, value: Value) {
    table.insert(name.to_string(), value);
}

/// A JSON object of `fields`, in their order.
pub(super) fn table<const N: usize>(fields: [(&str, Value); N]) -> Value {
    // Inserted one by one: collecting into a map sorts (a stable sort's
    // code, ~7 KB of Wasm, for nothing: the map orders its keys anyway).
    let mut out = Map::new();
    for (name, value) in fields {
        out.insert(name.to_string(), value);
    }
    Value::Object(out)
}

pub(super) fn text(value: &str) -> Value {
    Value::String(value.to_string())
}

pub(super) fn texts<S: AsRef<str>>(values: &[S]) -> Value {
    values.iter().map(|v| text(v.as_ref())).collect()
}

pub(super) fn numbers(values: &[u16]) -> Value {
    values.iter().map(|v| Value::from(*v)).collect()
}

/// Key parts as the config spells them (`"body:email:lower"`).
pub(super) fn parts(parts: &[KeyPart]) -> Value {
    parts.iter().map(|p| Value::String(p.to_string())).collect()
}

/// The conditions on `target`: `name = "v"`, `["a", "b"]` or `true`.
pub(super) fn conditions(conditions: &[Condition], target: Target) -> Value {
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

/// `[{ requests, window }]` (a calendar window: `{ requests, window =
/// "day", time_zone }`).
/// A money rule's are `{ spend, window }`, in its currency.
pub(super) fn limits(limits: &[Limit], money: Option<u64>) -> Value {
    let amount = |l: &Limit| match money {
        Some(step) => ("spend", crate::config::price::decimal(u64::from(l.requests.get()) * step)),
        None => ("requests", l.requests.get().into()),
    };
    let limit = |l: &Limit| match l.calendar {
        None => table([amount(l), ("window", duration(l.window_ms.get()).into())]),
        Some(c) => table([amount(l), ("window", c.unit.name().into()), ("time_zone", c.zone.name().into())]),
    };
    limits.iter().map(limit).collect()
}

/// A limit's window in words: `60s`, or `calendar day in Asia/Tokyo`.
pub(crate) fn window_text(l: &Limit) -> String {
    match l.calendar {
        None => duration(l.window_ms.get()),
        Some(c) => format!("calendar {} in {}", c.unit.name(), c.zone.name()),
    }
}

/// `{ "42" = [{ requests, window }] }`, in config order.
pub(super) fn overrides(overrides: &Overrides, money: Option<u64>) -> Value {
    let mut out = Map::new();
    for o in overrides.entries() {
        out.insert(o.value.clone(), limits(&o.limits, money));
    }
    Value::Object(out)
}

/// `lease` as asked: a lease forced off by the rule's other fields is
/// written `"auto"` (read back, the same fields force it off again).
pub(super) fn lease(mode: LeaseMode) -> Value {
    let choice = match mode {
        LeaseMode::Off => LeaseChoice::Off,
        LeaseMode::ForcedOff(_) | LeaseMode::Auto(_) => LeaseChoice::Auto,
    };
    choice.name().into()
}

/// `{ secret, cookie, ttl }`.
pub(super) fn trusted_device(device: &TrustedDevice) -> Value {
    let ttl = duration(device.ttl_s.saturating_mul(1000));
    table([("secret", text(&device.secret)), ("cookie", text(&device.cookie)), ("ttl", ttl.into())])
}

/// `{ ips, asns, verified_bots, header }`.
pub(super) fn exempt(exempt: &Exemptions) -> Value {
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
pub(super) fn custom_response(response: &CustomResponse) -> Value {
    let status = ("status", Value::from(response.status));
    match response.template() {
        Some(body) => table([status, ("content_type", text(&response.content_type)), ("body", body.into())]),
        None => table([status]),
    }
}

/// `counting = { mode, ... }`: the two-phase settings only under the mode
/// that uses them.
pub(super) fn counting_mode(rule: &RuleSpec) -> Value {
    if !rule.reserves() {
        return table([("mode", CountingMode::Request.name().into())]);
    }
    let mut out = Map::new();
    put(&mut out, "mode", CountingMode::Response.name().into());
    if let Counting::Statuses(statuses) = &rule.counting {
        put(&mut out, "statuses", numbers(statuses));
    }
    put(&mut out, "reservation_ttl", duration(rule.reservation_ttl_ms).into());
    put(&mut out, "upload_buffer", rule.upload.buffer.into());
    put(&mut out, "upload_timeout", duration(u64::from(rule.upload.timeout_ms)).into());
    Value::Object(out)
}

/// `metering = { header, reserve, max, expose }`.
pub(super) fn metering(u: &crate::config::cost::Usage, refusal: crate::config::response::OwnRefusal) -> Value {
    use crate::config::cost::{Count, Reading, UsageSource};
    use crate::config::policy::Named;
    let mut fields = Map::new();
    match &u.source {
        UsageSource::Header(name) => put(&mut fields, "header", text(name)),
        UsageSource::Body(Reading::Provider(p)) => put(&mut fields, "usage", p.name().into()),
        UsageSource::Body(Reading::Json(path)) => put(&mut fields, "usage", table([("json", text(path))])),
    }
    let (reserve, max) = u.price.as_ref().map_or((u.reserve, u.max), |p| (p.reserve_tokens, p.max_tokens));
    put(&mut fields, "reserve", reserve.into());
    put(&mut fields, "max", max.into());
    if let Some(p) = &u.price {
        put(&mut fields, "price", crate::config::price::written(&p.table));
    }
    if u.header().is_some() {
        put(&mut fields, "expose", u.expose.into());
        return Value::Object(fields);
    }
    let count = match u.count {
        Count::Weighted { input, output } => table([("input", input.into()), ("output", output.into())]),
        simple => simple.name().into(),
    };
    if !matches!(u.source, UsageSource::Body(Reading::Json(_))) && u.price.is_none() {
        put(&mut fields, "count", count);
    }
    put(&mut fields, "cut", u.cut.into());
    if matches!(u.source, UsageSource::Body(Reading::Provider(_))) {
        put(&mut fields, "refusal", refusal.name().into());
    }
    Value::Object(fields)
}

/// `on_missing_key`'s name (a fallback's key is `fallback_key`'s).
pub(super) fn on_missing_key(missing: &MissingKey) -> Value {
    let choice = match missing {
        MissingKey::Reject => OnMissingKey::Reject,
        MissingKey::Skip => OnMissingKey::Skip,
        MissingKey::Fallback(_) => OnMissingKey::Fallback,
    };
    choice.name().into()
}

/// `query_sources`, in the order the config lists them.
pub(super) fn query_sources(sources: Sources) -> Value {
    let all = [Source::Query, Source::Body, Source::Cookie];
    let named: Vec<&str> = all.iter().filter(|s| sources.contains(**s)).map(|s| s.name()).collect();
    texts(&named)
}
