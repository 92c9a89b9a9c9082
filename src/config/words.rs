//! One rule in words: the lines `tollgate explain` prints for a matching
//! rule (`policy:`, `limits:`, `lease:`) and the console's Rules page shows
//! (one text for both, so that the page says what `explain` and
//! `tollgate check` say: a lease line that reads `off` where check says
//! leases are off).

use crate::config::policy::{Action, Counting, FailPolicy, Named};
use crate::config::rules::Rule;
use std::fmt::Write;

/// The rule's action, failure policy, what it counts, its penalty.
pub(crate) fn policy(rule: &Rule) -> String {
    let action = match rule.action {
        Action::Block => "",
        Action::Log => " (shadow: never blocks)",
    };
    let on_error = match rule.on_error {
        FailPolicy::Allow => " (fail open)",
        FailPolicy::Deny => " (fail closed, 503)",
    };
    let mut counting = match &rule.counting {
        Counting::All => "every request".to_string(),
        Counting::Statuses(s) => format!("responses {s:?}"),
    };
    if let Some(n) = rule.concurrency {
        counting.push_str(&format!("; at most {n} in flight per key (a slot held until the response is sent)"));
    }
    if let Some(u) = &rule.usage {
        counting.push_str(&usage_text(u));
    }
    let mut line = format!("action {}{action}; on_error {}{on_error}; counts {counting}", rule.action.name(), rule.on_error.name());
    if let Some(ms) = rule.penalty_ms {
        let _ = write!(line, "; penalty {} (a refusal keeps the key refused that long)", crate::config::written::duration(ms));
    }
    line
}

/// The rule's lease mode in one line; for GCRA rules that lease, the
/// widened bound ([`crate::count::lease`]).
pub(crate) fn lease(rule: &Rule) -> String {
    let mut line = rule.lease.describe();
    if let (Some(s), true, crate::count::protocol::Algorithm::Gcra) = (rule.lease.settings(), rule.lease.leases(), rule.algorithm) {
        let extra: Vec<String> = rule
            .limits
            .iter()
            .map(|l| (s.ttl_ms * u64::from(l.requests.get())).div_ceil(l.window_ms.get()).to_string())
            .collect();
        let _ = write!(line, "; GCRA: up to {} more per window (⌈lease_ttl × N / W⌉)", extra.join(", "));
    }
    line
}

/// Limits as `10 per 60 s, 300 per calendar day in Asia/Tokyo`.
pub(crate) fn limits(limits: &[crate::count::window::Limit]) -> String {
    let limits: Vec<String> = limits
        .iter()
        .map(|l| match l.calendar {
            None => format!("{} per {} s", l.requests, l.window_ms.get() as f64 / 1000.0),
            Some(_) => format!("{} per {}", l.requests, crate::config::written::window_text(l)),
        })
        .collect();
    limits.join(", ")
}

/// What a usage-metered rule counts, after `counts every request`.
pub(crate) fn usage_text(u: &crate::config::cost::Usage) -> String {
    if let Some(p) = &u.price {
        return format!(
            ", in {unit}: the tokens the answer reports at the price of the model it names (reserves {} = {} tokens at the table's highest price before forwarding; commits the charge once the body ended, or {} = {} tokens at that price when none was read{}); prices: {}",
            u.reserve,
            p.reserve_tokens,
            u.max,
            p.max_tokens,
            if u.cut { "; a stream whose charge passes the reserve is cut" } else { "" },
            p.table_words(),
            unit = p.unit_words(),
        );
    }
    match u.header() {
        Some(header) => format!(
            ", in units the origin reports in `{header}` (reserves {} before forwarding; commits the header's value clamped to [0, {}], or {} when it is missing)",
            u.reserve, u.max, u.reserve
        ),
        None => format!(
            ", in {} the answer's body reports (reserves {} before forwarding; commits the usage read once the body ended, clamped to [0, {}], or {} when none was read, the client went away or the origin failed{})",
            u.unit(),
            u.reserve,
            u.max,
            u.max,
            if u.cut { "; a stream whose usage passes the reserve is cut" } else { "" }
        ),
    }
}
