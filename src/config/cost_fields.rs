//! The metering fields of a rule: the `metering` table
//! ([`crate::config::cost::Usage`]; a `cost` table in the 0.2.0 spelling),
//! its fields and how it is read (`reserve > max` refused), and what
//! `concurrency` refuses ([`check_concurrency`]).

use crate::config::cost::{Count, Priced, Provider, Reading, UsageSource, Usage};
use crate::config::price::PriceTable;
use crate::config::price_fields::Pricing;
use crate::config::policy::Named;
use crate::config::policy::MissingKey;
use crate::config::reader::{infos, valid_header_name, Errors, Field, FieldInfo, Input, Shape, HEADER_NAME};
use crate::config::response::OwnRefusal;
use crate::config::rules::RuleSpec;

/// A `metering` table while it is read.
struct UsageDraft {
    header: Option<String>,
    body: Option<Reading>,
    reserve: Option<u32>,
    max: Option<u32>,
    expose: Option<bool>,
    count: Option<Count>,
    cut: Option<bool>,
    refusal: Option<OwnRefusal>,
    price: Option<crate::config::price_fields::PriceRef>,
}

/// `usage`: a provider's name, or `{ json = "a.b" }`.
const USAGE_SHAPE: Shape = Shape::AnyOf(&[Shape::Names(Provider::names), Shape::Table(json_infos)]);
/// `price`: a shared table's name, or the rule's own table.
const PRICE_SHAPE: Shape = Shape::AnyOf(&[Shape::Text(crate::config::price_fields::NAME_PATTERN), Shape::Table(crate::config::price_fields::table_infos)]);
/// `count`: `"total"`, `"input"`, `"output"` or `{ input = 1, output = 4 }`.
const COUNT_SHAPE: Shape = Shape::AnyOf(&[Shape::Names(Count::names), Shape::Table(weight_infos)]);

const USAGE_FIELDS: &[Field<UsageDraft>] = &[
    Field::optional("header", HEADER_NAME, "The response header in which the origin reports the units a request used, e.g. \"x-usage-units\" (or usage: the body).", |d, i| {
        let name = i.text(valid_header_name, "must be a response header name such as \"x-usage-units\"");
        d.header = name.map(|n| n.to_ascii_lowercase());
    }),
    Field::optional("usage", USAGE_SHAPE, "Usage read from the answer's body as it passes (a JSON body or an SSE stream), committed at its end: \"openai\", \"anthropic\", \"gemini\", or { json = \"usage.total_tokens\" } (a path into the body or each SSE data: event). An answer with none commits max.", |d, i| {
        d.body = read_reading(i);
    }),
    Field::required("reserve", "missing", Shape::Integer(1, u32::MAX as u64), "Units reserved before forwarding: refused (429) unless they fit every window beside the committed units and those held in flight.", |d, i| {
        d.reserve = i.number(1..=u64::from(u32::MAX), "whole number");
    }),
    Field::required("max", "missing", Shape::Integer(1, u32::MAX as u64), "The most units one answer commits (the usage is clamped to [0, max]; at least reserve).", |d, i| {
        d.max = i.number(1..=u64::from(u32::MAX), "whole number");
    }),
    Field::optional("expose", Shape::Flag, "Whether the client's response keeps the usage header (default false: removed). Only with header.", |d, i| {
        d.expose = i.flag();
    }),
    Field::optional("count", COUNT_SHAPE, "Which tokens a usage read from the body commits: \"total\" (the default), \"input\", \"output\" or { input = 1, output = 4 } (weights). Only with a provider's usage.", |d, i| {
        d.count = read_count(i);
    }),
    Field::optional("cut", Shape::Flag, "End a stream (with an error event in the provider's shape) once the usage it reports while it still runs passes reserve, committing max or what it reported when more; an answer that ended is never cut. Only with usage (default false).", |d, i| {
        d.cut = i.flag();
    }),
    Field::optional("refusal", Shape::Names(OwnRefusal::names), "How a refusal (429, or 503) is written: \"provider\" (the API's own error JSON, which its SDKs read, and x-should-retry: false when the wait is over 60 s; the default with usage = \"openai\", \"anthropic\" or \"gemini\") or \"problem\" (RFC 9457 problem+json; the default otherwise).", |d, i| {
        d.refusal = i.choice::<OwnRefusal>(None);
    }),
    Field::optional("price", PRICE_SHAPE, "Prices per model: the rule counts money, in whole micro-units of currency (milli-units when a spend passes 4294.967295), from the tokens the answer reports and the model it names; reserve and max stay in tokens and are priced at the table's highest price. Only with a provider's usage, not with count. { currency = \"JPY\", models = { \"gpt-4o-mini*\" = { input = 22.5, cached_input = 11.25, output = 90 } }, unpriced = \"highest\" }, or the name of a table in the top-level prices, e.g. \"openai\".", |d, i| {
        d.price = crate::config::price_fields::read_price(i);
    }),
];

/// `usage = { json = ... }`.
const JSON_FIELDS: &[Field<Option<String>>] = &[Field::required("json", "missing", Shape::Text("^[^.]+(\\.[^.]+)*$"), "A path of member names (or array indexes) separated by dots to a whole number, e.g. \"usage.total_tokens\".", |d, i| {
    *d = i.text(|t| !t.is_empty() && t.split('.').all(|p| !p.is_empty()), "must be a path of member names separated by dots, e.g. \"usage.total_tokens\"");
})];

/// `count = { input, output }`.
const WEIGHT_FIELDS: &[Field<(Option<u32>, Option<u32>)>] = &[
    Field::required("input", "missing", Shape::Integer(0, 1_000_000), "Units per input token.", |d, i| d.0 = i.number(0..=1_000_000, "whole number")),
    Field::required("output", "missing", Shape::Integer(0, 1_000_000), "Units per output token.", |d, i| d.1 = i.number(0..=1_000_000, "whole number")),
];

fn json_infos() -> Vec<FieldInfo> {
    infos(JSON_FIELDS)
}

fn weight_infos() -> Vec<FieldInfo> {
    infos(WEIGHT_FIELDS)
}

/// `usage`'s value.
fn read_reading(input: &mut Input<'_>) -> Option<Reading> {
    let Some(table) = input.value.as_object() else { return input.choice::<Provider>(None).map(Reading::Provider) };
    let mut path = None;
    if !input.read_fields(table, JSON_FIELDS, &mut path) {
        return None;
    }
    path.map(Reading::Json)
}

/// `count`'s value.
fn read_count(input: &mut Input<'_>) -> Option<Count> {
    let Some(table) = input.value.as_object() else { return input.choice::<Count>(None) };
    let mut weights = (None, None);
    if !input.read_fields(table, WEIGHT_FIELDS, &mut weights) {
        return None;
    }
    Some(Count::Weighted { input: weights.0?, output: weights.1? })
}

/// The schema's view of a `metering` table.
pub(super) fn usage_infos() -> Vec<FieldInfo> {
    infos(USAGE_FIELDS)
}

/// Reads a `metering` table, with how the rule's refusals are worded
/// (`refusal`: a provider's usage defaults to its API's shape); `None`
/// (reported under `metering.<field>`) when it is not one: `header` and
/// `usage` exclusive (one needed), `reserve > max` refused, `expose` only
/// with a header, `count` only with a provider's usage, `cut` only with
/// usage, `refusal = "provider"` only with a provider's usage.
pub(super) fn read_usage(input: &mut Input<'_>, pricing: &Pricing) -> Option<(Usage, OwnRefusal)> {
    let Some(table) = input.value.as_object() else {
        return input.fail("must be a table { header = \"x-usage-units\", reserve = 1000, max = 100000 } or { usage = \"openai\", reserve = 1000, max = 1000 }");
    };
    let mut draft = UsageDraft { header: None, body: None, reserve: None, max: None, expose: None, count: None, cut: None, refusal: None, price: None };
    if !input.read_fields(table, USAGE_FIELDS, &mut draft) {
        return None;
    }
    let (reserve, max) = (draft.reserve?, draft.max?);
    let source = source(input, &draft)?;
    if reserve > max {
        input.errors.push(format!("{}.reserve", input.field), format!("{reserve} is above max ({max}): every answer would commit less than it reserved"));
        return None;
    }
    let (expose, count, cut) = (draft.expose.unwrap_or(false), draft.count.unwrap_or(Count::Total), draft.cut.unwrap_or(false));
    let refusal = match (&source, draft.refusal) {
        (UsageSource::Body(Reading::Provider(_)), given) => given.unwrap_or(OwnRefusal::Provider),
        (_, Some(OwnRefusal::Provider)) => {
            input.errors.push(format!("{}.refusal", input.field), "\"provider\" only with usage = \"openai\", \"anthropic\" or \"gemini\" (a header or a JSON path names no API whose error shape to use)");
            return None;
        }
        (_, _) => OwnRefusal::Problem,
    };
    let price = match draft.price {
        Some(price) => {
            let (table, name) = pricing.resolve(price, &format!("{}.price", input.field), input.errors)?;
            Some(priced(input, (table, name, pricing.step), &source, &draft.count, reserve, max)?)
        }
        None => None,
    };
    let (reserve, max) = price.as_ref().map_or((reserve, max), |p| (p.1, p.2));
    Some((Usage { source, reserve, max, expose, count, cut, price: price.map(|p| p.0) }, refusal))
}

/// A price table beside the usage it prices: only a provider's usage
/// (whose model the answer names), not with `count` (the table says what
/// each kind costs); `reserve` and `max` priced at the table's ceiling,
/// within `u32::MAX` of the rule's unit (`step` micro-units, with the
/// table's shared name). The [`Priced`] and the two in the rule's unit.
fn priced(input: &mut Input<'_>, (table, name, step): (PriceTable, Option<String>, u64), source: &UsageSource, count: &Option<Count>, reserve: u32, max: u32) -> Option<(Priced, u32, u32)> {
    let field = input.field.to_string();
    if !matches!(source, UsageSource::Body(Reading::Provider(_))) {
        input.errors.push(format!("{field}.price"), "only with usage = \"openai\", \"anthropic\" or \"gemini\" (a header or a JSON path names no model)");
        return None;
    }
    if count.is_some() {
        input.errors.push(format!("{field}.count"), "not with price: the table prices each kind of token");
        return None;
    }
    let unit = crate::config::price::unit_name(step, &table.currency);
    let (Some(reserve_units), Some(max_units)) = (table.reserve_units(reserve, step), table.reserve_units(max, step)) else {
        let most = u64::from(u32::MAX) * 1_000_000 * step / table.ceiling().max(1);
        input.errors.push(format!("{field}.max"), format!("{max} tokens at the table's highest price pass u32::MAX {unit}; at most {most} tokens"));
        return None;
    };
    Some((Priced { table, name, reserve_tokens: reserve, max_tokens: max, step, unit }, reserve_units.max(1), max_units.max(1)))
}

/// The draft's source, its exclusive fields refused once each.
fn source(input: &mut Input<'_>, draft: &UsageDraft) -> Option<UsageSource> {
    let field = input.field.to_string();
    let wrong = match (&draft.header, &draft.body) {
        (Some(_), Some(_)) => Some(("usage", "beside header: the usage is read from a header or from the body, not both")),
        (None, None) => Some(("header", "missing: give header (a response header) or usage (read from the body)")),
        (Some(_), None) if draft.count.is_some() => Some(("count", "only with usage (a header reports one number)")),
        (Some(_), None) if draft.cut.is_some() => Some(("cut", "only with usage (a header arrives before the body)")),
        (None, Some(_)) if draft.expose.is_some() => Some(("expose", "only with header (a usage read from the body is passed as it is)")),
        (None, Some(Reading::Json(_))) if draft.count.is_some_and(|c| c != Count::Total) => Some(("count", "only with a provider's usage (a JSON path reads one number)")),
        _ => None,
    };
    if let Some((name, message)) = wrong {
        input.errors.push(format!("{field}.{name}"), message);
        return None;
    }
    match (&draft.header, &draft.body) {
        (Some(header), _) => Some(UsageSource::Header(header.clone())),
        (None, body) => body.clone().map(UsageSource::Body),
    }
}

/// `concurrency` needs a key every request holds a slot by: with
/// `on_missing_key = "skip"` a request without a key part would take no
/// slot at all, so a client escapes the limit by leaving the part out.
/// (`reject` refuses such a request; `fallback` holds a slot by the
/// fallback key.)
pub(super) fn check_concurrency(spec: &RuleSpec, errors: &mut Errors) {
    if spec.concurrency.is_some() && spec.on_missing_key == MissingKey::Skip {
        errors.push(
            "concurrency",
            "a request without the key would hold no slot (on_missing_key = \"skip\"): a client escapes the limit by leaving the key out; use \"reject\" or a fallback_key",
        );
    }
}

/// How long a `concurrency` rule's answer keeps its slot once the client
/// stops reading it: as given (only with `concurrency`, at most
/// `reservation_ttl`, which cuts the answer anyway), else
/// [`DEFAULT_IDLE_RELEASE_MS`](crate::config::DEFAULT_IDLE_RELEASE_MS),
/// at most `reservation_ttl`.
pub(super) fn idle_release(spec: &RuleSpec, given: Option<u64>, errors: &mut Errors) -> u64 {
    let Some(ms) = given else { return crate::config::DEFAULT_IDLE_RELEASE_MS.min(spec.reservation_ttl_ms) };
    if spec.concurrency.is_none() {
        errors.push("idle_release", "only for rules with concurrency (it bounds how long an unread answer holds a slot)");
    } else if ms > spec.reservation_ttl_ms {
        errors.push("idle_release", format!("must be at most reservation_ttl ({} ms), which ends every hold", spec.reservation_ttl_ms));
    }
    ms
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::count::lease::LeaseMode;
    use serde_json::{json, Value};

    fn rule(extra: Value) -> Value {
        let mut rule = json!({ "name": "r", "path": "/ai", "limits": [{ "requests": 10_000, "window": "1d" }] });
        rule.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({ "rules": [rule] })
    }

    fn errors(extra: Value) -> Vec<String> {
        Config::from_json(&rule(extra)).err().unwrap_or_default().iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_usage_cost_is_read_and_reserves_its_reserve() {
        let cost = json!({"metering": {"header": "X-Tokens", "reserve": 3000, "max": 3000}, "counting": {"mode": "response", "reservation_ttl": "2m"}});
        let config = Config::from_json(&rule(cost)).unwrap();
        let r = &config.rules[0];
        let usage = r.usage.as_ref().unwrap();
        assert_eq!((usage.header(), usage.reserve, usage.max, usage.expose), (Some("x-tokens"), 3_000, 3_000, false));
        assert_eq!((r.cost, r.reserves(), r.reservation_ttl_ms), (3_000, true, 120_000));
        assert!(matches!(r.lease, LeaseMode::ForcedOff(_)), "a usage rule never leases: it settles after the answer");
        let described = crate::config::describe::rule_json(r);
        assert_eq!((&described["cost"], &described["counting"]["mode"]), (&Value::Null, &json!("response")), "a metered rule spends its reserve");
        assert_eq!(described["metering"], json!({ "header": "x-tokens", "reserve": 3_000, "max": 3_000, "expose": false }));
        let again = Config::from_json(&json!({ "rules": [described] })).unwrap();
        assert_eq!((&again.rules[0].usage, again.rules[0].reservation_ttl_ms), (&r.usage, 120_000), "described as read");
        let plain = Config::from_json(&rule(json!({ "cost": 2 }))).unwrap();
        assert!(plain.rules[0].usage.is_none() && !plain.rules[0].reserves());
    }

    #[test]
    fn nonsense_is_refused_naming_the_field_once() {
        for (metering, field) in [
            (json!({ "header": "x-t", "reserve": 5_000, "max": 1_000 }), "metering.reserve"),
            (json!({ "reserve": 5, "max": 10 }), "metering.header"),
            (json!({ "header": "x t", "reserve": 5, "max": 10 }), "metering.header"),
            (json!({ "header": "x-t", "max": 10 }), "metering.reserve"),
            (json!({ "header": "x-t", "reserve": 0, "max": 10 }), "metering.reserve"),
            (json!({ "header": "x-t", "reserve": 5 }), "metering.max"),
            (json!({ "header": "x-t", "reserve": 5, "max": 10, "expose": "yes" }), "metering.expose"),
            (json!({ "header": "x-t", "reserve": 5, "max": 10, "colour": 1 }), "metering.colour"),
            (json!({ "header": "x-t", "reserve": 20_000, "max": 20_000 }), "metering"),
            (json!("lots"), "metering"),
        ] {
            let errs = errors(json!({ "metering": metering, "counting": { "mode": "response" } }));
            assert_eq!(errs.len(), 1, "{metering}: {errs:?}");
            assert!(errs[0].starts_with(&format!("rule `r`, field `{field}`: ")), "{metering}: {errs:?}");
        }
        let usage = json!({ "header": "x-t", "reserve": 5, "max": 10 });
        for (extra, field) in [
            (json!({ "cost": "lots" }), "cost"),
            (json!({ "metering": usage }), "metering"),
            (json!({ "metering": usage, "counting": { "mode": "request" } }), "metering"),
            (json!({ "metering": usage, "cost": 5, "counting": { "mode": "response" } }), "cost"),
            (json!({ "cost": usage, "metering": usage, "counting": { "mode": "response" } }), "cost"),
        ] {
            let errs = errors(extra.clone());
            assert_eq!(errs.len(), 1, "{extra}: {errs:?}");
            assert!(errs[0].starts_with(&format!("rule `r`, field `{field}`: ")), "{extra}: {errs:?}");
        }
        assert!(errors(json!({"metering": {"header": "x-t", "reserve": 10, "max": 10}, "counting": {"mode": "response"}}))[..].is_empty(), "reserve = max is the exact setting");
    }

    /// Usage read from the body, its count and cut, written back
    /// as read; `header` and `usage` exclusive.
    #[test]
    fn a_body_usage_is_read_described_as_read_and_its_fields_refused_where_they_mean_nothing() {
        use crate::config::cost::{Count, Provider, Reading, UsageSource};
        let read = |metering: Value| {
            let config = Config::from_json(&rule(json!({ "metering": metering, "counting": { "mode": "response" } }))).unwrap();
            let r = config.rules[0].clone();
            let described = crate::config::describe::rule_json(&r);
            let again = Config::from_json(&json!({ "rules": [described.clone()] })).unwrap();
            assert_eq!(again.rules[0].usage, r.usage, "described as read: {described}");
            (r.usage.unwrap(), described["metering"].clone())
        };
        let (u, described) = read(json!({ "usage": "anthropic", "reserve": 1000, "max": 1000 }));
        assert_eq!((&u.source, u.count, u.cut, u.header()), (&UsageSource::Body(Reading::Provider(Provider::Anthropic)), Count::Total, false, None));
        assert_eq!(described, json!({ "usage": "anthropic", "reserve": 1000, "max": 1000, "count": "total", "cut": false, "refusal": "provider" }));
        let (u, _) = read(json!({ "usage": "gemini", "reserve": 10, "max": 20, "count": { "input": 1, "output": 4 }, "cut": true }));
        assert_eq!((u.count, u.cut, u.unit(), u.missing_units()), (Count::Weighted { input: 1, output: 4 }, true, "tokens", 20));
        let (u, described) = read(json!({ "usage": { "json": "usage.total_tokens" }, "reserve": 10, "max": 20 }));
        assert_eq!((&u.source, u.unit()), (&UsageSource::Body(Reading::Json("usage.total_tokens".into())), "usage.total_tokens"));
        assert_eq!(described, json!({ "usage": { "json": "usage.total_tokens" }, "reserve": 10, "max": 20, "cut": false }));
        let (u, _) = read(json!({ "usage": "openai", "reserve": 10, "max": 20, "count": "output" }));
        assert_eq!(u.count, Count::Output);
        let warnings = |metering: Value, counting: Value| {
            let config = Config::from_json(&rule(json!({ "metering": metering, "counting": counting }))).unwrap();
            config.warnings().iter().map(|w| w.to_string()).collect::<Vec<_>>()
        };
        let short = warnings(json!({ "usage": "openai", "reserve": 10, "max": 20, "cut": true }), json!({ "mode": "response" }));
        assert_eq!(short.len(), 2, "{short:?}");
        assert!(short[0].contains("`metering.cut`") && short[1].contains("`counting.reservation_ttl`"), "{short:?}");
        assert!(warnings(json!({ "usage": "gemini", "reserve": 10, "max": 20, "cut": true }), json!({ "mode": "response", "reservation_ttl": "10m" })).is_empty());
        let anthropic = warnings(json!({ "usage": "anthropic", "reserve": 10, "max": 20, "cut": true }), json!({ "mode": "response", "reservation_ttl": "10m" }));
        assert!(anthropic.len() == 1 && anthropic[0].contains("last message_delta"), "anthropic's last message_delta: {anthropic:?}");
        let (u, _) = read(json!({ "header": "x-t", "reserve": 10, "max": 20 }));
        assert_eq!((u.unit(), u.missing_units()), ("x-t", 10), "a header's missing usage still commits reserve");
        for (metering, field) in [
            (json!({ "header": "x-t", "usage": "openai", "reserve": 5, "max": 10 }), "metering.usage"),
            (json!({ "usage": "mistral", "reserve": 5, "max": 10 }), "metering.usage"),
            (json!({ "usage": { "json": "" }, "reserve": 5, "max": 10 }), "metering.usage.json"),
            (json!({ "usage": { "json": "a..b" }, "reserve": 5, "max": 10 }), "metering.usage.json"),
            (json!({ "usage": "openai", "reserve": 5, "max": 10, "expose": true }), "metering.expose"),
            (json!({ "header": "x-t", "reserve": 5, "max": 10, "count": "output" }), "metering.count"),
            (json!({ "header": "x-t", "reserve": 5, "max": 10, "cut": true }), "metering.cut"),
            (json!({ "usage": { "json": "a.b" }, "reserve": 5, "max": 10, "count": "input" }), "metering.count"),
            (json!({ "usage": "openai", "reserve": 5, "max": 10, "count": "most" }), "metering.count"),
            (json!({ "usage": "openai", "reserve": 5, "max": 10, "count": { "input": 1 } }), "metering.count.output"),
            (json!({ "usage": "openai", "reserve": 5, "max": 10, "cut": "yes" }), "metering.cut"),
            (json!({ "usage": "openai", "reserve": 50, "max": 10 }), "metering.reserve"),
            (json!({ "reserve": 50, "max": 100 }), "metering.header"),
        ] {
            let errs = errors(json!({ "metering": metering, "counting": { "mode": "response" } }));
            assert_eq!(errs.len(), 1, "{metering}: {errs:?}");
            assert!(errs[0].starts_with(&format!("rule `r`, field `{field}`: ")), "{metering}: {errs:?}");
        }
    }

    /// A provider's usage refuses in its API's shape
    /// unless `refusal = "problem"`; a header or a JSON path has no API to
    /// take a shape from.
    #[test]
    fn the_refusal_defaults_to_the_providers_shape_and_is_the_operators_choice() {
        use crate::config::cost::Provider;
        use crate::config::response::OwnRefusal;
        let read = |metering: Value| {
            let config = Config::from_json(&rule(json!({ "metering": metering, "counting": { "mode": "response" } }))).unwrap();
            let r = config.rules[0].clone();
            let described = crate::config::describe::rule_json(&r);
            let again = Config::from_json(&json!({ "rules": [described.clone()] })).unwrap();
            assert_eq!((again.rules[0].refusal, again.rules[0].refusal_shape()), (r.refusal, r.refusal_shape()), "described as read: {described}");
            (r.refusal, r.refusal_shape(), described["metering"].get("refusal").cloned())
        };
        assert_eq!(read(json!({ "usage": "gemini", "reserve": 5, "max": 10 })), (OwnRefusal::Provider, Some(Provider::Gemini), Some(json!("provider"))));
        assert_eq!(read(json!({ "usage": "openai", "reserve": 5, "max": 10, "refusal": "problem" })), (OwnRefusal::Problem, None, Some(json!("problem"))));
        assert_eq!(read(json!({ "usage": "anthropic", "reserve": 5, "max": 10, "refusal": "provider" })).1, Some(Provider::Anthropic));
        assert_eq!(read(json!({ "usage": { "json": "usage.total_tokens" }, "reserve": 5, "max": 10 })), (OwnRefusal::Problem, None, None));
        assert_eq!(read(json!({ "header": "x-t", "reserve": 5, "max": 10, "refusal": "problem" })), (OwnRefusal::Problem, None, None));
        let plain = Config::from_json(&rule(json!({}))).unwrap();
        assert_eq!(plain.rules[0].refusal_shape(), None, "no metering: problem+json");
        for metering in [
            json!({ "usage": "openai", "reserve": 5, "max": 10, "refusal": "openai" }),
            json!({ "usage": "openai", "reserve": 5, "max": 10, "refusal": true }),
            json!({ "header": "x-t", "reserve": 5, "max": 10, "refusal": "provider" }),
            json!({ "usage": { "json": "a.b" }, "reserve": 5, "max": 10, "refusal": "provider" }),
        ] {
            let errs = errors(json!({ "metering": metering, "counting": { "mode": "response" } }));
            assert_eq!(errs.len(), 1, "{metering}: {errs:?}");
            assert!(errs[0].starts_with("rule `r`, field `metering.refusal`: "), "{metering}: {errs:?}");
        }
    }

    /// An LLM rule keyed on one API-key header answers
    /// 400 to the clients that send the key in another: check says so.
    #[test]
    fn an_llm_rule_keyed_on_one_api_key_header_is_pointed_to_credential() {
        let warnings = |key: Value| {
            let extra = json!({ "key": key, "metering": { "usage": "anthropic", "reserve": 5, "max": 10 }, "counting": { "mode": "response", "reservation_ttl": "10m" } });
            Config::from_json(&rule(extra)).unwrap().warnings().iter().map(|w| w.to_string()).collect::<Vec<_>>()
        };
        let header = warnings(json!(["header:x-api-key"]));
        assert_eq!(header.len(), 1, "{header:?}");
        assert!(header[0].starts_with("rule `r`, field `key`: `header:x-api-key`: ") && header[0].contains("`Authorization: Bearer`") && header[0].contains("key on `credential`"), "{header:?}");
        assert_eq!(warnings(json!(["header:Authorization"])).len(), 1);
        assert!(warnings(json!(["credential"])).is_empty());
        assert!(warnings(json!(["header:x-school"])).is_empty(), "a tenant header is no API key");
    }

    #[test]
    fn concurrency_is_read_reserves_and_refuses_a_key_that_may_hold_no_slot() {
        let config = Config::from_json(&rule(json!({"concurrency": 3, "key": ["header:x-api-key"], "counting": {"mode": "response"}}))).unwrap();
        let r = &config.rules[0];
        assert_eq!((r.concurrency, r.reserves()), (Some(3), true));
        assert!(matches!(r.lease, LeaseMode::ForcedOff(_)));
        use crate::count::protocol::Op;
        assert_eq!((r.call(Op::Reserve).concurrency, r.call(Op::Check).concurrency, r.call(Op::Release).concurrency), (Some(3), Some(3), None));
        assert_eq!(crate::config::describe::rule_json(r)["concurrency"], json!(3));
        for (extra, field) in [
            (json!({"concurrency": 0, "counting": {"mode": "response"}}), "concurrency"),
            (json!({"concurrency": 1001, "counting": {"mode": "response"}}), "concurrency"),
            (json!({"concurrency": 2, "key": ["header:x-api-key"], "on_missing_key": "skip", "counting": {"mode": "response"}}), "concurrency"),
        ] {
            let errs = errors(extra.clone());
            assert_eq!(errs.len(), 1, "{extra}: {errs:?}");
            assert!(errs[0].starts_with(&format!("rule `r`, field `{field}`: ")), "{extra}: {errs:?}");
        }
        let read = |extra: Value| Config::from_json(&rule(extra)).map(|c| c.rules[0].idle_release_ms).map_err(|e| e[0].to_string());
        assert_eq!(read(json!({"concurrency": 2, "key": ["header:x-api-key"], "counting": {"mode": "response"}})), Ok(10_000), "the default");
        assert_eq!(read(json!({"concurrency": 2, "key": ["header:x-api-key"], "idle_release": "1500ms", "counting": {"mode": "response"}})), Ok(1_500));
        assert_eq!(read(json!({"concurrency": 2, "key": ["header:x-api-key"], "counting": {"mode": "response", "reservation_ttl": "5s"}})), Ok(5_000), "at most reservation_ttl");
        for (extra, message) in [
            (json!({ "idle_release": "5s" }), "only for rules with concurrency"),
            (json!({"concurrency": 2, "key": ["header:x-api-key"], "idle_release": "6s", "counting": {"mode": "response", "reservation_ttl": "5s"}}), "at most reservation_ttl"),
            (json!({"concurrency": 2, "key": ["header:x-api-key"], "idle_release": "soon", "counting": {"mode": "response"}}), "idle_release"),
            (json!({"concurrency": 2, "key": ["header:x-api-key"], "idle_release": 5, "counting": {"mode": "response"}}), "idle_release"),
        ] {
            let e = read(extra.clone()).expect_err("refused");
            assert!(e.contains("rule `r`, field `idle_release`") && e.contains(message), "{extra}: {e}");
        }
        // Concurrency needs no dummy limit.
        let slots = json!({ "rules": [{ "name": "s", "path": "/s", "key": ["header:x-k"], "concurrency": 2, "counting": { "mode": "response" } }] });
        let config = Config::from_json(&slots).unwrap();
        let s = &config.rules[0];
        assert!(s.windowless && s.algorithm == crate::count::protocol::Algorithm::Gcra, "{s:?}");
        assert_eq!((s.limits.len(), s.limits[0].requests.get(), s.limits[0].window_ms.get()), (1, u32::MAX, 1_000), "a window no key could fill");
        let described = crate::config::describe::rule_json(s);
        assert_eq!((described.get("limits"), described.get("algorithm")), (None, None), "written as given: {described}");
        assert!(Config::from_json(&json!({ "rules": [described] })).unwrap().rules[0].windowless, "read back the same");
        let without = |extra: Value| {
            let mut rule = json!({ "name": "s", "path": "/s", "key": ["header:x-k"] });
            rule.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            Config::from_json(&json!({ "rules": [rule] })).err().unwrap_or_default().iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(without(json!({})), ["rule `s`, field `limits`: missing: give the windows, e.g. [{ requests = 10, window = \"60s\" }] (a concurrency rule may leave them out)"]);
        let algorithm = without(json!({ "concurrency": 2, "counting": { "mode": "response" }, "algorithm": "gcra" }));
        assert_eq!(algorithm.len(), 1, "{algorithm:?}");
        assert!(algorithm[0].starts_with("rule `s`, field `algorithm`: only with limits"), "{algorithm:?}");
        let fallback = json!({"concurrency": 2, "key": ["header:x-api-key"], "fallback_key": ["ip"], "counting": {"mode": "response", "reservation_ttl": "10m"}});
        assert!(errors(fallback).is_empty(), "a fallback key holds the slot; reservation_ttl bounds a lost one");
    }
}
