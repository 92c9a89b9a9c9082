//! Penalties, pure: a key refused by one of its rule's limits
//! stays refused for the rule's `penalty`, measured from that first
//! refusal, in the key's own object (so every isolate sees it).
//!
//! The contract:
//! - **Who carries it**: the Worker sends the rule's penalty with the calls
//!   that count or look (`p=` on `hit`, `check`, `reserve`, `lease` and
//!   `status`; [`crate::count::protocol`]). A call without it is answered
//!   as before, a stored penalty or not: limits travel with every call, so
//!   a rule whose `penalty` was removed stops penalising at its next
//!   request, and an older Worker (which never sends one) is answered
//!   exactly as before.
//! - **What starts it** ([`starts`]): a `hit`, `reserve` or `lease` the
//!   count refuses by its own windows. A refusal owed to slots in flight
//!   ([`crate::count::tally::Tally::in_flight`]) starts none: it lifts as
//!   soon as one of them is released, and says nothing of what the key
//!   committed. A ban's refusal starts none either (the ban is the
//!   operator's own penalty).
//! - **What it refuses** ([`refuses`]): `hit`, `check`, `reserve` and
//!   `lease` carrying a penalty, until its end, recording nothing and
//!   writing nothing; `Retry-After` is the time left, every window reported
//!   with nothing remaining until then. A refusal during the penalty does
//!   not extend it. `probe` (a trusted device asking whether its account is
//!   banned) does not see it: a device counts in its own bucket, which has
//!   a penalty of its own; settlements (commit, release, forgive, clear)
//!   go through, as under a ban.
//! - **Where it is kept**: in the count's row, as a prefix
//!   `!{until_ms}|` ([`crate::count::row`]'s codec; [`split`], [`join`]), written once, by the refusal that
//!   starts it (a blocked call that otherwise writes nothing), and kept by
//!   every later write until it ends. A row without the prefix is read as
//!   always (rows of rules without a penalty never hold one). An object of
//!   an earlier build reads a prefixed row as corrupt: it refuses the call
//!   (the Worker applies `on_error`) and its alarm deletes the row.
//! - **How long the row stays**: the alarm keeps it until the penalty ends
//!   ([`alarm`]), then deletes it as it deletes an expired count.
//! - **Lifting**: an admin `reset` deletes the row, penalty and count
//!   together (lifting the penalty while keeping a full window would only
//!   start a new one at the next request).
//! - **Isolates**: a penalty's refusal is cached by the isolate that got it
//!   to the penalty's end (exact: nothing but a reset lifts it earlier;
//!   other isolates' caches outlive a reset, as for any block). An isolate
//!   holding leased tokens ([`crate::count::lease`]) spends them until its
//!   lease ends, at most `lease_ttl` into a penalty another isolate
//!   started: they were debited before the refusal, so this never admits
//!   past the limit.

use crate::count::algorithm::CorruptRow;
use crate::count::counter::AlarmAction;
use crate::count::limit::WindowState;
use crate::count::protocol::Op;
use crate::count::row;

/// The count's row without its penalty, and the penalty's end (Unix ms),
/// ended or not; a prefix that does not read as one is a corrupt row
/// ([`row::split_penalty`]).
pub(crate) fn split(text: &str) -> Result<(&str, Option<i64>), CorruptRow> {
    row::split_penalty(text)
}

/// The row holding `rest` (the count's own row) and the penalty ending at
/// `until` (none: `rest` as it is; [`row::join_penalty`]).
pub(crate) fn join(rest: &str, until: Option<i64>) -> String {
    row::join_penalty(rest, until)
}

/// The penalty's end when it is still in force at `now_ms`.
pub(crate) fn in_force(until: Option<i64>, now_ms: i64) -> Option<i64> {
    until.filter(|until| *until > now_ms)
}

/// Whether the Worker sends a rule's penalty with `op`: the calls that
/// count or look (a `status` carrying one is answered with it).
pub(crate) fn carried_by(op: Op) -> bool {
    matches!(op, Op::Hit | Op::Check | Op::Reserve | Op::Lease | Op::Status)
}

/// Whether a penalty in force refuses `op` (when the call carries one).
pub(crate) fn refuses(op: Op) -> bool {
    matches!(op, Op::Hit | Op::Check | Op::Reserve | Op::Lease)
}

/// Whether the count's refusal of `op` (not owed to slots in flight)
/// starts a penalty (when the call carries one).
pub(crate) fn starts(op: Op, in_flight: bool) -> bool {
    matches!(op, Op::Hit | Op::Reserve | Op::Lease) && !in_flight
}

/// The end of a penalty of `penalty_ms` starting at `now_ms`.
pub(crate) fn until(now_ms: i64, penalty_ms: u64) -> i64 {
    now_ms.saturating_add(i64::try_from(penalty_ms).unwrap_or(i64::MAX))
}

/// Milliseconds left of a penalty ending at `until` (at least 1).
pub(crate) fn left_ms(until: i64, now_ms: i64) -> u64 {
    u64::try_from(until.saturating_sub(now_ms)).unwrap_or(0).max(1)
}

/// The windows a penalised answer reports: as they are, but with nothing
/// remaining until the penalty's end, `left_ms` from now.
pub(crate) fn windows(windows: &mut [WindowState], left_ms: u64) {
    for w in windows {
        (w.remaining, w.reset_ms) = (0, w.reset_ms.max(left_ms));
    }
}

/// What the TTL alarm does with a row whose count alone calls for `count`
/// and whose penalty ends at `until`: kept (re-armed) until both have
/// ended.
pub(crate) fn alarm(count: AlarmAction, until: Option<i64>, now_ms: i64) -> AlarmAction {
    match (count, in_force(until, now_ms)) {
        (count, None) => count,
        (AlarmAction::DeleteAll, Some(until)) => AlarmAction::RearmAt(until),
        (AlarmAction::RearmAt(at), Some(until)) => AlarmAction::RearmAt(at.max(until)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::limit::Limit;

    #[test]
    fn the_prefix_round_trips_and_a_row_without_one_reads_as_always() {
        for rest in ["", "10,20", "g:2/1000", "5;7@9~*"] {
            assert_eq!(split(&join(rest, Some(1_234))), Ok((rest, Some(1_234))), "{rest:?}");
            assert_eq!(split(&join(rest, None)), Ok((rest, None)), "{rest:?}");
        }
        assert_eq!(join("10,20", Some(99)), "!99|10,20");
        for corrupt in ["!", "!x|1", "!12", "!-|"] {
            assert!(matches!(split(corrupt), Err(CorruptRow::UnreadablePenalty(_))), "{corrupt:?}");
        }
        assert!(split("!x|1").unwrap_err().to_string().contains("penalty"));
    }

    #[test]
    fn only_a_counting_refusal_starts_one_and_only_counting_calls_are_refused() {
        for op in [Op::Hit, Op::Reserve, Op::Lease] {
            assert!(starts(op, false) && !starts(op, true), "{op:?}: a refusal owed to slots in flight starts none");
        }
        for op in [Op::Check, Op::Status, Op::Probe, Op::Commit, Op::Record] {
            assert!(!starts(op, false), "{op:?}");
        }
        for op in [Op::Hit, Op::Check, Op::Reserve, Op::Lease] {
            assert!(refuses(op), "{op:?}");
        }
        for op in [Op::Status, Op::Probe, Op::Commit, Op::Release, Op::Forgive, Op::Clear, Op::Record, Op::Refund, Op::Reset] {
            assert!(!refuses(op), "{op:?}");
        }
    }

    #[test]
    fn time_left_windows_and_the_alarm() {
        assert_eq!(until(1_000, 600_000), 601_000);
        assert_eq!(until(1, u64::MAX), i64::MAX);
        assert_eq!(in_force(Some(601_000), 600_999), Some(601_000));
        assert_eq!(in_force(Some(601_000), 601_000), None, "ended at its time");
        assert_eq!((left_ms(601_000, 1_000), left_ms(5, 5)), (600_000, 1));
        let limit = Limit::new(2, 2_000).unwrap();
        let w = WindowState { limit, used: 1, remaining: 1, reset_ms: 1_500 };
        let mut ws = [w];
        windows(&mut ws, 9_000);
        assert_eq!(ws, [WindowState { remaining: 0, reset_ms: 9_000, ..w }]);
        assert_eq!(alarm(AlarmAction::DeleteAll, Some(9_000), 1_000), AlarmAction::RearmAt(9_000), "kept to its end");
        assert_eq!(alarm(AlarmAction::RearmAt(3_000), Some(9_000), 1_000), AlarmAction::RearmAt(9_000));
        assert_eq!(alarm(AlarmAction::RearmAt(12_000), Some(9_000), 1_000), AlarmAction::RearmAt(12_000));
        assert_eq!(alarm(AlarmAction::DeleteAll, Some(9_000), 9_000), AlarmAction::DeleteAll, "ended: deleted");
        assert_eq!(alarm(AlarmAction::RearmAt(3_000), None, 1_000), AlarmAction::RearmAt(3_000));
    }
}
