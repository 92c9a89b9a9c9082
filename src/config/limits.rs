//! A rule's limits: `limits` (1 to [`MAX_LIMITS`] windows of
//! `{ requests, window, time_zone }`, [`LIMIT_FIELDS`]: a duration is a
//! rolling window, `"day"`, `"week"` or `"month"` a calendar one in
//! `time_zone`), `overrides` (a key value's
//! own limits, read as `limits` is), and what any list of limits must obey
//! with the rule's other fields: a cost within the smallest limit
//! ([`cost_error`]). Either algorithm takes a limit of any size (the
//! sliding log coalesces past 10,000 entries, [`crate::count::coalesce`]).

use crate::config::overrides::{Override, Overrides};
use crate::config::reader::{read_table, Field, Input, Shape};
use crate::count::calendar::{Calendar, Unit, Zone};
use crate::count::duration::parse_duration_ms;
use crate::count::protocol::MAX_LIMITS;
use crate::count::window::Limit;
use std::num::{NonZeroU32, NonZeroU64};

/// One `limits` entry while its table is read.
#[derive(Default)]
pub(super) struct LimitDraft {
    pub(super) requests: Option<NonZeroU32>,
    /// `spend`, in micro-units, before the rule's unit divides it.
    pub(super) spend: Option<u64>,
    pub(super) window: Option<Window>,
    pub(super) time_zone: Option<Zone>,
}

/// What `window` says: a rolling length or a calendar unit.
#[derive(Clone, Copy)]
pub(super) enum Window {
    Rolling(NonZeroU64),
    Calendar(Unit),
}

fn unit_names() -> Vec<&'static str> {
    Unit::NAMES.iter().map(|(_, name)| *name).collect()
}

fn zone_names() -> Vec<&'static str> {
    crate::count::calendar::zone_names().collect()
}

/// `spend`, in micro-units.
#[inline(never)]
fn read_spend(i: &mut Input<'_>) -> Option<u64> {
    let spend = crate::config::price::millionths(i.value).filter(|&n| n > 0);
    spend.or_else(|| i.fail("must be an amount from 0.000001 to 1000000, with at most 6 decimals (3 when a limit of the rule passes 4294.967295), e.g. 200"))
}

fn spend_schema() -> serde_json::Value {
    serde_json::json!({ "type": "number", "exclusiveMinimum": 0, "maximum": crate::config::price::MOST })
}

/// The micro-units a priced rule counts in, from the largest `spend` of
/// its `limits` and `overrides` as written ([`crate::config::price::step_for`]):
/// read before the rule's fields, which are read in any order.
pub(super) fn money_step(rule: &serde_json::Map<String, serde_json::Value>) -> u64 {
    let spends = |list: &serde_json::Value| -> Vec<u64> { list.as_array().into_iter().flatten().filter_map(|l| l.get("spend")).filter_map(crate::config::price::millionths).collect() };
    let mut all = rule.get("limits").map(spends).unwrap_or_default();
    for lists in rule.get("overrides").and_then(serde_json::Value::as_object).into_iter().flat_map(|o| o.values()) {
        all.extend(spends(lists));
    }
    crate::config::price::step_for(all.into_iter().max().unwrap_or(0))
}

const WINDOW_SHAPES: &[Shape] = &[Shape::Duration, Shape::Names(unit_names)];

/// The fields of one `limits` entry.
pub(super) const LIMIT_FIELDS: &[Field<LimitDraft>] = &[
    Field::optional("requests", Shape::Integer(1, u32::MAX as u64), "Requests (units) allowed per window (required, or spend).", |d, i| {
        d.requests = i.number(1..=u64::from(u32::MAX), "whole number").and_then(NonZeroU32::new);
    }),
    Field::optional("spend", Shape::Custom(spend_schema), "Money allowed per window, in the currency of the rule's metering.price, instead of requests: counted in micro-units (at most 6 decimals) while every spend of the rule is at most 4294.967295, else in milli-units (at most 3 decimals, up to 1000000; each answer's charge rounded up to the milli-unit).", |d, i| d.spend = read_spend(i)),
    Field::required(
        "window",
        "missing",
        Shape::AnyOf(WINDOW_SHAPES),
        "A rolling window, e.g. \"60s\", \"1m\", \"1h\", \"1d\" (at most 31 days), or a calendar one: \"day\", \"week\" (Monday first) or \"month\", in time_zone.",
        |d, i| {
            d.window = match i.value.as_str() {
                Some(name) if Unit::from_name(name).is_some() => Unit::from_name(name).map(Window::Calendar),
                Some(text) => match parse_duration_ms(text) {
                    Ok(ms) => Some(Window::Rolling(ms)),
                    Err(e) => i.fail(format!("{e}; or \"day\", \"week\" or \"month\" for a calendar window")),
                },
                None => i.fail("must be a duration such as \"60s\", \"1h\", or \"day\", \"week\" or \"month\""),
            };
        },
    ),
    Field::optional(
        "time_zone",
        Shape::Names(zone_names),
        "The IANA time zone a calendar window's day, week or month follows, e.g. \"Europe/Paris\", \"UTC\" (DST included).",
        |d, i| {
            d.time_zone = i.text(|_| true, "must be an IANA time zone name such as \"Europe/Paris\"").and_then(|name| match Zone::named(&name) {
                Some(zone) => Some(zone),
                None => i.fail(format!("unknown time zone `{name}`: an IANA name as the tz database spells it, such as \"Europe/Paris\", \"America/New_York\" or \"UTC\"")),
            });
        },
    ),
];

/// `overrides = { "42" = [{ requests = 1000, window = "1d" }] }`: each
/// key value's own limits, read as `limits` is. Keys are resolved once the
/// whole config is read ([`Overrides::resolve`]: the IPv6 prefix is a
/// top-level field).
pub(super) fn read_overrides(input: &mut Input<'_>, units: &mut (bool, bool), step: u64) -> Overrides {
    let Some(table) = input.value.as_object() else {
        input.report("must be a table of key value = limits, such as { \"42\" = [{ requests = 1000, window = \"1d\" }] }");
        return Overrides::default();
    };
    let mut entries = Vec::new();
    for (value, limits) in table {
        let field = format!("{}.{value}", input.field);
        if let Some(limits) = read_limits(&mut Input { field: &field, value: limits, errors: input.errors }, units, step) {
            entries.push(Override { value: value.clone(), key: None, limits });
        }
    }
    Overrides::new(entries)
}

/// A rule's `limits`: 1 to [`MAX_LIMITS`] windows; `units` records
/// which were written (some `spend`, some `requests` without it); a
/// `spend` is counted in units of `step` micro-units ([`money_step`]).
pub(super) fn read_limits(input: &mut Input<'_>, units: &mut (bool, bool), step: u64) -> Option<Vec<Limit>> {
    let list = match input.value.as_array() {
        Some(list) if list.len() > MAX_LIMITS => {
            return input.fail(format!("at most {MAX_LIMITS} windows per rule ({} given)", list.len()));
        }
        Some(list) if !list.is_empty() => list,
        _ => return input.fail("must be a non-empty list of { requests, window }"),
    };
    let mut limits = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let field = format!("{}[{i}]", input.field);
        let Some(table) = item.as_object() else {
            input.errors.push(field, "must be a table { requests, window }");
            continue;
        };
        let mut draft = LimitDraft::default();
        read_table(table, LIMIT_FIELDS, &mut draft, input.errors, &format!("{field}."));
        // One of `requests` and `spend` (which stands for it).
        let (spend, requests) = (table.contains_key("spend"), table.contains_key("requests"));
        *units = (units.0 || spend, units.1 || (requests && !spend));
        match (spend, requests) {
            (false, false) => input.errors.push(format!("{field}.requests"), "missing"),
            (true, true) => {
                input.errors.push(format!("{field}.spend"), "beside requests: a limit counts requests or money, not both");
                draft.requests = None;
            }
            (true, false) => draft.requests = draft.spend.and_then(|micro| counted_spend(input, &field, micro, step)),
            (false, true) => {}
        }
        let limit = match (draft.window, draft.time_zone) {
            (Some(Window::Rolling(window_ms)), None) => draft.requests.map(|requests| Limit { requests, window_ms, calendar: None }),
            (Some(Window::Rolling(_)), Some(_)) => {
                let why = "only a calendar window (\"day\", \"week\" or \"month\") has a time zone; this window is rolling";
                input.errors.push(format!("{field}.time_zone"), why);
                None
            }
            (Some(Window::Calendar(unit)), Some(zone)) => draft.requests.and_then(|r| Limit::per_period(r.get(), Calendar { unit, zone })),
            (Some(Window::Calendar(unit)), None) if !table.contains_key("time_zone") => {
                let why = format!("a calendar window (\"{}\") needs time_zone: the IANA zone whose midnight starts it, such as \"Europe/Paris\" or \"UTC\"", unit.name());
                input.errors.push(format!("{field}.time_zone"), why);
                None
            }
            _ => None,
        };
        limits.extend(limit);
    }
    Some(limits)
}

/// A `spend` of `micro` micro-units in the rule's unit of `step`: whole
/// units only (a milli-unit rule takes 3 decimals), within a counter.
fn counted_spend(input: &mut Input<'_>, field: &str, micro: u64, step: u64) -> Option<NonZeroU32> {
    let units = micro.is_multiple_of(step).then(|| u32::try_from(micro / step).ok()).flatten().and_then(NonZeroU32::new);
    if units.is_none() {
        input.errors.push(format!("{field}.spend"), "at most 3 decimals: a rule with a spend above 4294.967295 counts in milli-units (its counters hold at most 4294967295 of a unit)");
    }
    units
}

/// Money limits (`spend`) in a rule that prices its usage, and only there
///: a priced rule counts micro-units, in which `requests`
/// would mean a millionth of the currency.
pub(super) fn money_error(priced: bool, (spend, requests): (bool, bool)) -> Option<&'static str> {
    match (priced, spend, requests) {
        (true, _, true) => Some("a rule whose metering has a price counts money: write its limits as { spend = 200, window = \"day\", time_zone }, not requests"),
        (false, true, _) => Some("spend (a limit in money) needs metering.price, which says what each answer costs"),
        _ => None,
    }
}

pub(super) fn cost_error(limits: &[Limit], cost: u32) -> Option<String> {
    let smallest = limits.iter().map(|l| l.requests.get()).min()?;
    (cost > smallest).then(|| format!("{cost} is above the smallest limit ({smallest}): every request would be blocked"))
}
