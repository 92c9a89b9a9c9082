//! What a limiter object does with one call, decided without I/O (issue
//! 26: the object's glue only loads, applies and answers).
//!
//! [`answer`] takes what the object holds (its count's row and the key's
//! runtime controls), the time and the call, and returns the reply's
//! fields and every effect the Durable Object must apply, in order: the
//! row to store, what to delete, and the alarm to make sure of. The glue
//! ([`crate::glue::limiter`]) runs them, and adds what only storage knows
//! (rows read and written, whether an alarm is pending).
//!
//! The choices made here:
//! - **Bans** ([`crate::count::controls::effective`]): a banned counting call is
//!   answered blocked for the ban's time, from the windows as they are;
//!   nothing is stored and no alarm is touched.
//! - **Reset**: deletes everything, unless controls are in force: then the
//!   count only (the operator's controls stay).
//! - **Alarm**: a written row must be deleted by an alarm once it expires.
//!   Without controls, any pending alarm will do (it re-arms itself,
//!   [`crate::count::counter::on_alarm`]); with controls the pending one may be
//!   for a control's end, later than the row's expiry, so it must fire by
//!   then.
//! - **A corrupt row** is refused, and never left without an alarm to
//!   delete it: one horizon from now, every hit it could hold has expired.

use crate::count::controls::{self, Controls, Effective};
use crate::count::algorithm::CorruptRow;
use crate::count::counter;
use crate::count::limit::horizon_ms;
use crate::count::protocol::{Call, Op};
use crate::count::tally::Tally;

/// What the object must delete, after storing (if anything is stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delete {
    /// The count's row only: controls are in force.
    Count,
    /// All storage (which also clears the alarm).
    Everything,
}

/// The alarm the object must make sure of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alarm {
    /// One pending at all: arm it for this time (Unix ms) if none is.
    Pending(i64),
    /// One that fires by this time: re-armed when none is pending or the
    /// pending one is later.
    By(i64),
}

/// One call's answer and effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub tally: Tally,
    /// Entries in the count after the call (0 after a reset).
    pub stored_hits: u64,
    /// Live reservations after the call.
    pub held: u64,
    /// The reservation a `reserve` made, or the lease a `lease` granted.
    pub reservation: Option<u64>,
    /// The units a `lease` granted (0 when blocked or banned).
    pub granted: Option<u64>,
    /// Banned: the glue answers from what it knows of the alarm, asking
    /// storage nothing.
    pub banned: bool,
    /// The row to store in place, and the horizon it was written under.
    pub store: Option<(String, u64)>,
    pub delete: Option<Delete>,
    pub alarm: Option<Alarm>,
}

/// A call refused because the stored row is corrupt, and the alarm that
/// must be pending so that the row does not outlive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub corrupt: CorruptRow,
    pub alarm: Alarm,
}

/// Applies `call` at `now_ms` to the object's stored `row` (empty when
/// none) under the key's `controls`.
pub fn answer(row: &str, controls: &Controls, now_ms: i64, call: &Call) -> Result<Answered, Refused> {
    let asked_lease = call.op == Op::Lease;
    let (call, banned) = match controls::effective(controls, call, now_ms) {
        Effective::Count(call) => (call, None),
        Effective::Banned { retry_after_ms, call } => (Call { op: Op::Status, ..call }, Some(retry_after_ms)),
    };
    let horizon = horizon_ms(&call.limits);
    let step = counter::step(row, now_ms, &call).map_err(|corrupt| Refused {
        corrupt,
        alarm: Alarm::Pending(now_ms.saturating_add(i64::try_from(horizon).unwrap_or(i64::MAX))),
    })?;
    if let Some(retry_after_ms) = banned {
        let tally = Tally { allowed: false, retry_after_ms, windows: step.tally.windows, binding: Some(0), in_flight: false };
        return Ok(Answered {
            tally,
            stored_hits: step.stored,
            held: step.held,
            reservation: None,
            granted: asked_lease.then_some(0),
            banned: true,
            store: None,
            delete: None,
            alarm: None,
        });
    }
    let live_controls = !controls.live(now_ms).is_empty();
    let (delete, alarm) = match (call.op, &step.write) {
        (Op::Reset, _) if live_controls => (Some(Delete::Count), None),
        (Op::Reset, _) => (Some(Delete::Everything), None),
        (_, Some(write)) if live_controls => (None, Some(Alarm::By(write.expires_at))),
        (_, Some(write)) => (None, Some(Alarm::Pending(write.expires_at))),
        (_, None) => (None, None),
    };
    Ok(Answered {
        stored_hits: if delete.is_some() { 0 } else { step.stored },
        held: step.held,
        reservation: step.reservation,
        granted: step.granted,
        banned: false,
        store: step.write.map(|w| (w.row, horizon)),
        delete,
        alarm,
        tally: step.tally,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::controls::{limits_of, Change};
    use crate::count::protocol::Algorithm;

    const NOW: i64 = 1_000_000;

    fn call(op: Op) -> Call {
        let hold_ms = matches!(op, Op::Reserve | Op::Lease).then_some(500);
        Call { op, algorithm: Algorithm::SlidingLog, limits: limits_of(&[(2, 1_000)]).unwrap(), cost: 1, hold_ms, want: None, reservation: None, spelling: None }
    }

    fn banned_until(until_ms: i64) -> Controls {
        Controls::default().apply(&Change::Ban { until_ms }, NOW).unwrap()
    }

    fn overridden() -> Controls {
        Controls::default().apply(&Change::Override { limits: vec![(5, 1_000)], until_ms: None }, NOW).unwrap()
    }

    #[test]
    fn an_allowed_hit_stores_its_row_and_makes_sure_an_alarm_deletes_it() {
        let a = answer("", &Controls::default(), NOW, &call(Op::Hit)).unwrap();
        assert!(a.tally.allowed && !a.banned);
        assert_eq!(a.store, Some((NOW.to_string(), 1_000)));
        assert_eq!((a.delete, a.alarm), (None, Some(Alarm::Pending(NOW + 1_000))));
        let full = format!("{NOW},{NOW}");
        let blocked = answer(&full, &Controls::default(), NOW, &call(Op::Hit)).unwrap();
        assert!(!blocked.tally.allowed);
        assert_eq!((blocked.store, blocked.delete, blocked.alarm), (None, None, None), "a blocked hit writes nothing");
    }

    #[test]
    fn with_controls_in_force_the_alarm_must_fire_by_the_rows_expiry() {
        let a = answer("", &overridden(), NOW, &call(Op::Hit)).unwrap();
        assert_eq!(a.alarm, Some(Alarm::By(NOW + 1_000)), "a pending alarm may be for the control's end");
        assert_eq!(a.tally.windows.len(), 1);
    }

    #[test]
    fn a_ban_blocks_counting_calls_for_its_time_and_touches_nothing() {
        let controls = banned_until(NOW + 4_000);
        for op in [Op::Hit, Op::Check, Op::Reserve, Op::Probe, Op::Lease] {
            let a = answer(&NOW.to_string(), &controls, NOW, &call(op)).unwrap();
            assert!(a.banned && !a.tally.allowed, "{op:?}");
            assert_eq!(a.tally.retry_after_ms, 4_000, "{op:?}");
            assert_eq!(a.tally.windows[0].used, 1, "{op:?}: the windows as they are");
            assert_eq!((a.store.is_some(), a.delete, a.alarm), (false, None, None), "{op:?}");
            assert_eq!(a.granted, (op == Op::Lease).then_some(0), "{op:?}");
        }
        let commit = answer("", &controls, NOW, &call(Op::Commit)).unwrap();
        assert!(!commit.banned && commit.store.is_some(), "what the origin answered still counts");
        let lifted = answer("", &controls, NOW + 4_000, &call(Op::Hit)).unwrap();
        assert!(!lifted.banned && lifted.tally.allowed, "lifted at its time");
    }

    #[test]
    fn a_reset_deletes_the_count_only_while_controls_are_in_force() {
        let row = NOW.to_string();
        let plain = answer(&row, &Controls::default(), NOW, &call(Op::Reset)).unwrap();
        assert_eq!((plain.delete, plain.store, plain.alarm, plain.stored_hits), (Some(Delete::Everything), None, None, 0));
        let kept = answer(&row, &overridden(), NOW, &call(Op::Reset)).unwrap();
        assert_eq!((kept.delete, kept.stored_hits), (Some(Delete::Count), 0));
        let ended = Controls::default().apply(&Change::Ban { until_ms: NOW + 1 }, NOW).unwrap();
        let after = answer(&row, &ended, NOW + 1, &call(Op::Reset)).unwrap();
        assert_eq!(after.delete, Some(Delete::Everything), "a control that ended keeps nothing");
        let corrupt = answer("not a row", &Controls::default(), NOW, &call(Op::Reset)).unwrap();
        assert_eq!(corrupt.delete, Some(Delete::Everything), "a reset does not read the row");
    }

    #[test]
    fn a_corrupt_row_is_refused_and_left_with_an_alarm_one_horizon_ahead() {
        let refused = answer("x,y", &Controls::default(), NOW, &call(Op::Hit)).unwrap_err();
        assert_eq!(refused.alarm, Alarm::Pending(NOW + 1_000));
        assert!(refused.corrupt.to_string().contains("corrupt"), "{}", refused.corrupt);
    }
}
