//! Runtime overrides and bans, pure: what an operator set on one key
//! through the admin API, kept in the key's own limiter object.
//!
//! A key's object holds, beside its count, at most one runtime override
//! (its own limits, until a time or for good) and one ban (until a time).
//! Kept there, they apply atomically with the count (the object reads
//! them in the same synchronous step that decides) and need no
//! propagation: every isolate's next call to the object sees them.
//!
//! - A **ban** answers `hit`, `check` and `reserve` blocked until it ends,
//!   recording nothing; settlements (commit, release, forgive, clear,
//!   record) go through, so a request in flight is settled as usual.
//! - A runtime **override** replaces the limits the call carries (the
//!   rule's, or its static override's) for every op, until it ends.
//! - The TTL alarm keeps what carries a live control: once the count has
//!   expired only the count's row is deleted, and the alarm re-arms for
//!   the control's end (none for an override without one); everything is
//!   deleted once nothing is left ([`alarm`]).
//!
//! Isolates' blocked-until caches: a ban reaches a key no isolate has
//! cached as blocked at once (its next request asks the object); a key an
//! isolate has cached as blocked already waits out that block, then sees
//! the ban. Lifting a ban (or an override that lowered a limit) clears the
//! cache of the isolate that served the admin call only; others keep
//! answering 429 until their cached time (as for an admin reset).
//!
//! The object is called for them on its own path (`/v1/control`, a `POST`
//! of a [`Change`] line, answered with the resulting [`Controls`] line), so
//! the counting protocol ([`crate::count::protocol`]) is unchanged.

use crate::count::counter::AlarmAction;
use crate::count::limit::Limit;
use crate::count::algorithm::Algorithm;
use crate::count::protocol::{limit_json, push_limits, read_limits, Call, Op, MAX_LIMITS};
#[cfg(test)]
use std::num::{NonZeroU32, NonZeroU64};

/// The path of the object's control endpoint.
pub(crate) const CONTROL_PATH: &str = "/v1/control";

/// A runtime override: the key's own limits, until `until_ms` (Unix ms)
/// or for good (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuntimeOverride {
    /// Rolling or calendar windows, as calls carry them.
    pub(crate) limits: Vec<Limit>,
    pub(crate) until_ms: Option<i64>,
}

/// A ban, until `until_ms` (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ban {
    pub(crate) until_ms: i64,
}

/// What an operator set on one key.
///
/// Stored, and sent back by the object, as one line of text
/// ([`Controls::encode`]: `override 5x1000,300xday@Asia/Tokyo -` and/or
/// `ban 1767225600000`, joined by `;`), hand-written to keep serde's
/// generated code out of the Wasm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Controls {
    pub(crate) runtime_override: Option<RuntimeOverride>,
    pub(crate) ban: Option<Ban>,
}

/// What the admin API asks the object: one line of text
/// ([`Change::encode`]: `get`, `ban 1767225600000`, `override 5x1000,100x60000 -`,
/// `clear_override`, `clear_ban`; hand-written rather than a tagged serde
/// enum, whose buffering deserializer costs Wasm size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Only read them.
    Get,
    /// The limits spelled as a call's line spells them
    /// ([`crate::count::protocol::push_limits`]): a calendar window stays
    /// on its calendar (`300xday@Asia/Tokyo`); an object of a release
    /// before calendar overrides refuses such a line (400), and the admin API
    /// answers that the change was not taken.
    Override { limits: Vec<Limit>, until_ms: Option<i64> },
    Ban { until_ms: i64 },
    ClearOverride,
    ClearBan,
}

impl Change {
    /// The change as one line, the `POST /v1/control` body
    /// ([`Change::decode`] reads it back).
    pub(crate) fn encode(&self) -> String {
        match self {
            Change::Get => "get".into(),
            Change::Ban { until_ms } => format!("ban {until_ms}"),
            Change::ClearOverride => "clear_override".into(),
            Change::ClearBan => "clear_ban".into(),
            Change::Override { limits, until_ms } => {
                let mut line = String::from("override ");
                push_limits(&mut line, limits);
                line.push(' ');
                line.push_str(&until_ms.map_or_else(|| "-".to_string(), |u| u.to_string()));
                line
            }
        }
    }

    /// Reads [`Change::encode`]'s line; `None` for anything else.
    pub(crate) fn decode(text: &str) -> Option<Change> {
        let mut words = text.split_ascii_whitespace();
        let change = match (words.next()?, words.next(), words.next()) {
            ("get", None, None) => Change::Get,
            ("clear_override", None, None) => Change::ClearOverride,
            ("clear_ban", None, None) => Change::ClearBan,
            ("ban", Some(until), None) => Change::Ban { until_ms: until.parse().ok()? },
            ("override", Some(limits), Some(until)) => Change::Override {
                limits: read_limits(limits).ok()?,
                until_ms: if until == "-" { None } else { Some(until.parse().ok()?) },
            },
            _ => return None,
        };
        words.next().is_none().then_some(change)
    }
}

/// Why a control change is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ControlError(pub(crate) String);

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ControlError {}

/// How long an object must keep its storage for its controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    Nothing,
    Until(i64),
    Forever,
}

impl Controls {
    /// The controls the object's stored row holds (`None`: no row). A
    /// corrupt row reads as none: a runtime control is the operator's to
    /// set again, and never makes a limit looser than the config's by being
    /// lost.
    pub(crate) fn stored(row: Option<&str>) -> Controls {
        row.and_then(|text| Controls::decode(text).ok()).unwrap_or_default()
    }

    /// Reads [`Controls::encode`]'s text; empty is none.
    pub(crate) fn decode(text: &str) -> Result<Controls, ControlError> {
        let mut controls = Controls::default();
        for part in text.split(';').filter(|p| !p.trim().is_empty()) {
            match Change::decode(part) {
                Some(Change::Override { limits, until_ms }) if controls.runtime_override.is_none() => {
                    controls.runtime_override = Some(RuntimeOverride { limits, until_ms })
                }
                Some(Change::Ban { until_ms }) if controls.ban.is_none() => controls.ban = Some(Ban { until_ms }),
                _ => return Err(ControlError(format!("corrupt controls: `{part}`"))),
            }
        }
        Ok(controls)
    }

    /// The controls as one line, `;`-separated [`Change::encode`] lines
    /// (the object's `controls` row; [`Controls::decode`] reads it back).
    pub(crate) fn encode(&self) -> String {
        let over = self.runtime_override.as_ref().map(|o| Change::Override { limits: o.limits.clone(), until_ms: o.until_ms });
        let ban = self.ban.map(|b| Change::Ban { until_ms: b.until_ms });
        over.into_iter().chain(ban).map(|c| c.encode()).collect::<Vec<_>>().join(";")
    }

    /// As JSON, for the admin API: `{"override": {"limits": [[5, 1000]],
    /// "until_ms": …} | null, "ban": {"until_ms": …} | null}` (a calendar
    /// window's limit: `[300, "day@Asia/Tokyo"]`).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let over = self.runtime_override.as_ref().map(|o| {
            let limits: Vec<serde_json::Value> = o.limits.iter().map(limit_json).collect();
            serde_json::json!({ "limits": limits, "until_ms": o.until_ms })
        });
        let ban = self.ban.map(|b| serde_json::json!({ "until_ms": b.until_ms }));
        serde_json::json!({ "override": over, "ban": ban })
    }

    /// The controls still in force at `now_ms` (those ended dropped).
    pub(crate) fn live(&self, now_ms: i64) -> Controls {
        Controls {
            runtime_override: self.runtime_override.clone().filter(|o| o.until_ms.is_none_or(|u| u > now_ms)),
            ban: self.ban.filter(|b| b.until_ms > now_ms),
        }
    }

    /// No override and no ban, ended or not.
    pub(crate) fn is_empty(&self) -> bool {
        self.runtime_override.is_none() && self.ban.is_none()
    }

    /// The override's limits in force at `now_ms`.
    pub(crate) fn limits(&self, now_ms: i64) -> Option<Vec<Limit>> {
        self.live(now_ms).runtime_override.map(|o| o.limits).filter(|l| check_limits(l).is_ok())
    }

    /// When the ban in force at `now_ms` ends.
    pub(crate) fn banned_until(&self, now_ms: i64) -> Option<i64> {
        self.live(now_ms).ban.map(|b| b.until_ms)
    }

    /// How long the storage must stay for the controls in force.
    pub(crate) fn keep(&self, now_ms: i64) -> Keep {
        let live = self.live(now_ms);
        match (&live.runtime_override, live.ban) {
            (Some(RuntimeOverride { until_ms: None, .. }), _) => Keep::Forever,
            (o, b) => match o.as_ref().and_then(|o| o.until_ms).into_iter().chain(b.map(|b| b.until_ms)).max() {
                Some(at) => Keep::Until(at),
                None => Keep::Nothing,
            },
        }
    }

    /// The controls after `change` at `now_ms` (ended ones dropped), or why
    /// it is refused: limits that are no valid call's, a time not in the
    /// future.
    pub(crate) fn apply(&self, change: &Change, now_ms: i64) -> Result<Controls, ControlError> {
        let mut next = self.live(now_ms);
        match change {
            Change::Get => {}
            Change::Override { limits, until_ms } => {
                check_limits(limits)?;
                if let Some(until) = until_ms {
                    future(*until, now_ms)?;
                }
                next.runtime_override = Some(RuntimeOverride { limits: limits.clone(), until_ms: *until_ms });
            }
            Change::Ban { until_ms } => {
                future(*until_ms, now_ms)?;
                next.ban = Some(Ban { until_ms: *until_ms });
            }
            Change::ClearOverride => next.runtime_override = None,
            Change::ClearBan => next.ban = None,
        }
        Ok(next)
    }
}

fn future(until_ms: i64, now_ms: i64) -> Result<(), ControlError> {
    if until_ms > now_ms {
        Ok(())
    } else {
        Err(ControlError("the end time is not in the future".into()))
    }
}

/// An override holds 1 to [`MAX_LIMITS`] limits.
pub(crate) fn check_limits(limits: &[Limit]) -> Result<(), ControlError> {
    if limits.is_empty() || limits.len() > MAX_LIMITS {
        return Err(ControlError(format!("give 1 to {MAX_LIMITS} limits")));
    }
    Ok(())
}

/// Validated rolling limits from `[requests, window_ms]` pairs: 1 to
/// [`MAX_LIMITS`], each non-zero (tests' shorthand).
#[cfg(test)]
pub(crate) fn limits_of(pairs: &[(u32, u64)]) -> Result<Vec<Limit>, ControlError> {
    if pairs.is_empty() || pairs.len() > MAX_LIMITS {
        return Err(ControlError(format!("give 1 to {MAX_LIMITS} limits")));
    }
    pairs
        .iter()
        .map(|&(requests, window_ms)| match (NonZeroU32::new(requests), NonZeroU64::new(window_ms)) {
            (Some(requests), Some(window_ms)) => Ok(Limit { requests, window_ms, calendar: None }),
            _ => Err(ControlError("a limit needs requests and a window above 0".into())),
        })
        .collect()
}

/// What the object does with a call, given its controls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effective {
    /// Count as the call says, with these limits (the runtime override's,
    /// or the call's own).
    Count(Call),
    /// Banned: answer blocked for `retry_after_ms`, recording nothing.
    Banned { retry_after_ms: u64, call: Call },
}

/// The call the object counts, under the controls in force at `now_ms`.
///
/// A calendar override reaches a GCRA call only if the rule's algorithm
/// changed after it was set (the admin API refuses one on a GCRA rule):
/// its windows are then counted rolling over the period's longest length
/// ([`crate::count::calendar::Unit::longest_ms`], their `window_ms`),
/// which never admits more in any period than the calendar would.
pub(crate) fn effective(controls: &Controls, call: &Call, now_ms: i64) -> Effective {
    let mut call = call.clone();
    if let Some(mut limits) = controls.limits(now_ms) {
        if call.algorithm == Algorithm::Gcra {
            limits.iter_mut().for_each(|l| l.calendar = None);
        }
        call.limits = limits;
    }
    match (controls.banned_until(now_ms), call.op) {
        (Some(until), Op::Hit | Op::Check | Op::Reserve | Op::Lease | Op::Probe) => {
            Effective::Banned { retry_after_ms: u64::try_from(until - now_ms).unwrap_or(1).max(1), call }
        }
        _ => Effective::Count(call),
    }
}

/// What the TTL alarm does, given what the count alone would
/// ([`crate::count::counter::on_alarm`]) and the controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlarmPlan {
    /// Nothing left: delete all storage (which clears the alarm).
    DeleteAll,
    /// The count has expired, a control has not: delete the count's row
    /// only, and re-arm for the control's end (`None`: it has none).
    DeleteCount { rearm_at: Option<i64> },
    /// Keep everything; re-arm then.
    RearmAt(i64),
}

/// Whether the TTL alarm deletes everything, the count only or nothing,
/// given what the count alone calls for (`count`) and the controls in force
/// at `now_ms`.
pub(crate) fn alarm(count: AlarmAction, controls: &Controls, now_ms: i64) -> AlarmPlan {
    match (count, controls.keep(now_ms)) {
        (AlarmAction::DeleteAll, Keep::Nothing) => AlarmPlan::DeleteAll,
        (AlarmAction::DeleteAll, Keep::Until(at)) => AlarmPlan::DeleteCount { rearm_at: Some(at) },
        (AlarmAction::DeleteAll, Keep::Forever) => AlarmPlan::DeleteCount { rearm_at: None },
        (AlarmAction::RearmAt(at), _) => AlarmPlan::RearmAt(at),
    }
}

/// Where a key's limits come from, for `GET status`.
pub(crate) fn source(controls: &Controls, static_override: bool, now_ms: i64) -> &'static str {
    let live = controls.live(now_ms);
    if live.ban.is_some() {
        "ban"
    } else if live.runtime_override.is_some() {
        "override"
    } else if static_override {
        "config_override"
    } else {
        "config"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::protocol::Algorithm;

    fn call(op: Op) -> Call {
        Call::new(op, Algorithm::SlidingLog, limits_of(&[(2, 1_000)]).unwrap())
    }

    #[test]
    fn an_override_replaces_the_limits_until_it_ends() {
        let c = Controls::default().apply(&Change::Override { limits: limits_of(&[(5, 1_000)]).unwrap(), until_ms: Some(10_000) }, 0).unwrap();
        match effective(&c, &call(Op::Hit), 9_999) {
            Effective::Count(call) => assert_eq!(call.limits[0].requests.get(), 5),
            other => panic!("{other:?}"),
        }
        match effective(&c, &call(Op::Hit), 10_000) {
            Effective::Count(call) => assert_eq!(call.limits[0].requests.get(), 2, "ended: the call's own"),
            other => panic!("{other:?}"),
        }
        assert_eq!(source(&c, false, 0), "override");
        assert_eq!(source(&c, true, 10_000), "config_override");
        assert_eq!(Controls::decode(&c.encode()).unwrap(), c);
        assert_eq!(c.encode(), "override 5x1000 10000");
        let both = c.apply(&Change::Ban { until_ms: 9 }, 0).unwrap();
        assert_eq!(both.encode(), "override 5x1000 10000;ban 9");
        assert_eq!(Controls::decode(&both.encode()).unwrap(), both);
        assert_eq!(Controls::decode("").unwrap(), Controls::default());
        assert!(Controls::decode("ban 1;ban 2").is_err());
        assert_eq!(both.to_json(), serde_json::json!({ "override": { "limits": [[5, 1000]], "until_ms": 10000 }, "ban": { "until_ms": 9 } }));
    }

    #[test]
    fn a_ban_blocks_counting_ops_only_and_lifts_at_its_time() {
        let c = Controls::default().apply(&Change::Ban { until_ms: 5_000 }, 0).unwrap();
        for op in [Op::Hit, Op::Check, Op::Reserve, Op::Lease, Op::Probe] {
            assert!(matches!(effective(&c, &call(op), 1_000), Effective::Banned { retry_after_ms: 4_000, .. }), "{op:?}");
        }
        for op in [Op::Commit, Op::Release, Op::Record, Op::Status, Op::Reset, Op::Clear, Op::Forgive, Op::Refund] {
            assert!(matches!(effective(&c, &call(op), 1_000), Effective::Count(_)), "{op:?}");
        }
        assert!(matches!(effective(&c, &call(Op::Hit), 5_000), Effective::Count(_)));
        assert_eq!(source(&c, false, 4_999), "ban");
        assert_eq!(c.apply(&Change::ClearBan, 1).unwrap(), Controls::default());
    }

    #[test]
    fn refused_changes() {
        let none = Controls::default();
        assert!(none.apply(&Change::Ban { until_ms: 5 }, 5).is_err(), "not in the future");
        assert!(none.apply(&Change::Override { limits: vec![], until_ms: None }, 0).is_err());
        assert!(limits_of(&[(0, 1)]).is_err(), "a zero limit is no Limit");
        assert!(none.apply(&Change::Override { limits: vec![Limit::new(1, 1).unwrap(); 9], until_ms: None }, 0).is_err());
        assert!(Controls::decode("{").is_err());
        assert_eq!(Controls::stored(Some("{")), Controls::default(), "a corrupt row reads as none");
        assert_eq!(Controls::stored(None), Controls::default());
        let ban = Controls::default().apply(&Change::Ban { until_ms: 10 }, 0).unwrap();
        assert_eq!(Controls::stored(Some(&ban.encode())), ban);
        for change in [
            Change::Get,
            Change::Ban { until_ms: 5 },
            Change::ClearBan,
            Change::ClearOverride,
            Change::Override { limits: limits_of(&[(5, 1000), (100, 60_000)]).unwrap(), until_ms: None },
            Change::Override { limits: limits_of(&[(5, 1000)]).unwrap(), until_ms: Some(7) },
            Change::Override { limits: vec![tokyo_day(300), Limit::new(10, 60_000).unwrap()], until_ms: None },
        ] {
            assert_eq!(Change::decode(&change.encode()), Some(change.clone()), "{change:?}");
        }
        assert_eq!(Change::Override { limits: vec![tokyo_day(300)], until_ms: None }.encode(), "override 300xday@Asia/Tokyo -");
        for junk in ["", "ban", "ban x", "ban 5 6", "override 5x 1", "override 5x1000", "nope", "override 3xday@Mars/Olympus -", "override 0x1000 -"] {
            assert_eq!(Change::decode(junk), None, "{junk:?}");
        }
    }

    fn tokyo_day(n: u32) -> Limit {
        Limit::per_period(n, crate::count::calendar::Calendar::parse("day@Asia/Tokyo").unwrap()).unwrap()
    }

    #[test]
    fn a_calendar_override_stays_on_its_calendar_and_is_rolling_under_gcra() {
        let c = Controls::default().apply(&Change::Override { limits: vec![tokyo_day(3)], until_ms: None }, 0).unwrap();
        let stored = Controls::stored(Some(&c.encode()));
        assert_eq!(stored, c, "the row keeps the calendar");
        assert_eq!(stored.to_json()["override"]["limits"], serde_json::json!([[3, "day@Asia/Tokyo"]]));
        match effective(&stored, &call(Op::Hit), 0) {
            Effective::Count(call) => assert_eq!(call.limits, vec![tokyo_day(3)]),
            other => panic!("{other:?}"),
        }
        let gcra = Call::new(Op::Hit, Algorithm::Gcra, limits_of(&[(2, 1_000)]).unwrap());
        match effective(&stored, &gcra, 0) {
            Effective::Count(call) => {
                assert_eq!(call.limits[0].calendar, None, "no period under gcra");
                assert_eq!(call.limits[0].window_ms.get(), 26 * 3_600_000, "the longest day: never more in a day than the calendar");
                assert!(crate::count::protocol::decode_call(&crate::count::protocol::encode_call(&call)).is_ok(), "a call the object takes");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_alarm_keeps_what_carries_a_live_control() {
        let forever = Controls::default().apply(&Change::Override { limits: limits_of(&[(5, 1_000)]).unwrap(), until_ms: None }, 0).unwrap();
        let until = Controls::default().apply(&Change::Ban { until_ms: 9_000 }, 0).unwrap();
        assert_eq!(alarm(AlarmAction::DeleteAll, &Controls::default(), 2_000), AlarmPlan::DeleteAll);
        assert_eq!(alarm(AlarmAction::DeleteAll, &forever, 2_000), AlarmPlan::DeleteCount { rearm_at: None });
        assert_eq!(alarm(AlarmAction::DeleteAll, &until, 2_000), AlarmPlan::DeleteCount { rearm_at: Some(9_000) });
        assert_eq!(alarm(AlarmAction::DeleteAll, &until, 9_000), AlarmPlan::DeleteAll, "ended");
        assert_eq!(alarm(AlarmAction::RearmAt(3_000), &until, 2_000), AlarmPlan::RearmAt(3_000));
        let both = until.apply(&Change::Override { limits: limits_of(&[(5, 1_000)]).unwrap(), until_ms: Some(20_000) }, 0).unwrap();
        assert_eq!(both.keep(0), Keep::Until(20_000));
    }
}
