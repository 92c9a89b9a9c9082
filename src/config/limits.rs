//! A rule's limits: `limits` (1 to [`MAX_LIMITS`] windows of
//! `{ requests, window }`, [`LIMIT_FIELDS`]), `overrides` (a key value's
//! own limits, read as `limits` is), and what any list of limits must obey
//! with the rule's other fields: a cost within the smallest limit
//! ([`cost_error`]). Either algorithm takes a limit of any size (the
//! sliding log coalesces past 10,000 entries, [`crate::count::coalesce`]).

use crate::config::overrides::{Override, Overrides};
use crate::config::reader::{read_table, Field, Input, Shape};
use crate::count::protocol::MAX_LIMITS;
use crate::count::window::Limit;
use std::num::{NonZeroU32, NonZeroU64};

/// One `limits` entry while its table is read.
#[derive(Default)]
pub(super) struct LimitDraft {
    pub(super) requests: Option<NonZeroU32>,
    pub(super) window_ms: Option<NonZeroU64>,
}

/// The fields of one `limits` entry.
pub(super) const LIMIT_FIELDS: &[Field<LimitDraft>] = &[
    Field::required("requests", "missing", Shape::Integer(1, u32::MAX as u64), "Requests (units) allowed per window.", |d, i| {
        d.requests = i.number(1..=u64::from(u32::MAX), "whole number").and_then(NonZeroU32::new);
    }),
    Field::required("window", "missing", Shape::Duration, "The window, e.g. \"60s\", \"1m\", \"1h\", \"1d\" (at most 31 days).", |d, i| {
        d.window_ms = i.duration("\"60s\", \"1m\", \"1h\" or \"1d\"");
    }),
];

/// `overrides = { "42" = [{ requests = 1000, window = "1d" }] }`: each
/// key value's own limits, read as `limits` is. Keys are resolved once the
/// whole config is read ([`Overrides::resolve`]: the IPv6 prefix is a
/// top-level field).
pub(super) fn read_overrides(input: &mut Input<'_>) -> Overrides {
    let Some(table) = input.value.as_object() else {
        input.report("must be a table of key value = limits, such as { \"42\" = [{ requests = 1000, window = \"1d\" }] }");
        return Overrides::default();
    };
    let mut entries = Vec::new();
    for (value, limits) in table {
        let field = format!("{}.{value}", input.field);
        if let Some(limits) = read_limits(&mut Input { field: &field, value: limits, errors: input.errors }) {
            entries.push(Override { value: value.clone(), key: None, limits });
        }
    }
    Overrides::new(entries)
}

/// A rule's `limits`: 1 to [`MAX_LIMITS`] windows.
pub(super) fn read_limits(input: &mut Input<'_>) -> Option<Vec<Limit>> {
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
        if let (Some(requests), Some(window_ms)) = (draft.requests, draft.window_ms) {
            limits.push(Limit { requests, window_ms });
        }
    }
    Some(limits)
}

pub(super) fn cost_error(limits: &[Limit], cost: u32) -> Option<String> {
    let smallest = limits.iter().map(|l| l.requests.get()).min()?;
    (cost > smallest).then(|| format!("{cost} is above the smallest limit ({smallest}): every request would be blocked"))
}
