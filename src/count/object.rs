//! What a limiter object does with one call, decided without I/O (issue
//! 26: the object's glue only loads, applies and answers).
//!
//! [`answer`] takes what the object holds (its count's row and the key's
//! runtime controls), the time and the call, and returns the reply's
//! fields and every effect the Durable Object must apply, in order: the
//! row to store, what to delete, and the alarm to make sure of. The glue
//! (`glue::limiter`) runs them, and adds what only storage knows
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
//!
//! The object's two other entry points are decided here too: [`on_alarm`]
//! (what the TTL alarm deletes or re-arms, given the row and the controls)
//! and [`control`] (an admin change to the key's controls: what to store,
//! delete and arm). [`Alarm::kept_by`] says whether a pending alarm will do,
//! and [`Answered::alarm_pending`] whether the reply's `alarm_pending` must
//! be read from storage.

use crate::count::controls::{self, AlarmPlan, Change, ControlError, Controls, Effective, Keep};
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
    /// The controls' row only: the last control was cleared, the count
    /// stays.
    Controls,
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

impl Alarm {
    /// The time to arm the alarm for, when it must be set.
    pub fn at(self) -> i64 {
        match self {
            Alarm::Pending(at) | Alarm::By(at) => at,
        }
    }

    /// Whether the alarm `pending` (its time; `None`: none) already does:
    /// then nothing is set. `Pending` takes any; `By` one due by its time.
    pub fn kept_by(self, pending: Option<i64>) -> bool {
        match self {
            Alarm::Pending(_) => pending.is_some(),
            Alarm::By(at) => pending.is_some_and(|pending| pending <= at),
        }
    }

    /// Whether making sure of this alarm reads the pending alarm's time
    /// (`By`: it may be a control's end, later than the row's expiry);
    /// `Pending` needs only to know whether one is pending.
    pub fn reads_time(self) -> bool {
        matches!(self, Alarm::By(_))
    }
}

/// One call's answer and effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// What the call is answered: allowed or blocked, the retry-after, the
    /// windows (a banned call: blocked for the ban's time).
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
    /// A `status`: its reply reads the alarm from storage, never from what
    /// the instance remembers.
    pub reads_alarm: bool,
    /// The row to store in place, and the horizon it was written under.
    pub store: Option<(String, u64)>,
    /// What to delete after storing (a reset).
    pub delete: Option<Delete>,
    /// The alarm to make sure of, once stored and deleted.
    pub alarm: Option<Alarm>,
}

impl Answered {
    /// The reply's `alarm_pending`, given what the instance knows of the
    /// alarm after applying the effects (`None`: never asked); `None`
    /// when storage must be asked. A banned call asks storage nothing (an
    /// unknown alarm reads as pending: a ban keeps its storage); a
    /// `status` always asks.
    pub fn alarm_pending(&self, known: Option<bool>) -> Option<bool> {
        match (self.banned, self.reads_alarm, known) {
            (true, _, known) => Some(known.unwrap_or(true)),
            (false, true, _) | (false, _, None) => None,
            (false, false, Some(pending)) => Some(pending),
        }
    }
}

/// A call refused because the stored row is corrupt, and the alarm that
/// must be pending so that the row does not outlive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Why the row cannot be read (the 500's message).
    pub corrupt: CorruptRow,
    /// The alarm that deletes the row: one horizon from now.
    pub alarm: Alarm,
}

/// Applies `call` at `now_ms` to the object's stored `row` (empty when
/// none) under the key's `controls`: the reply's fields and the effects to
/// apply, in order (store, delete, make sure of the alarm); or, for a
/// corrupt row, the refusal and the alarm that deletes it. Pure: the same
/// inputs always give the same answer, and nothing is read but them.
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
            reads_alarm: false,
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
        reads_alarm: call.op == Op::Status,
        store: step.write.map(|w| (w.row, horizon)),
        delete,
        alarm,
        tally: step.tally,
    })
}

/// What the TTL alarm firing at `now_ms` does with the stored `row`
/// (empty when none, written under the longest window `horizon_ms`) and
/// the key's `controls`: delete everything once nothing is left; delete the
/// count only once it has expired while a control has not, re-armed for
/// the control's end; else re-arm for when the row expires. Every time to
/// re-arm for is strictly in the future: workerd drops an alarm set for
/// "now" from inside the alarm handler. Idempotent: alarms are
/// at-least-once.
pub fn on_alarm(row: &str, horizon_ms: u64, controls: &Controls, now_ms: i64) -> AlarmPlan {
    match controls::alarm(counter::on_alarm(row, horizon_ms, now_ms), controls, now_ms) {
        AlarmPlan::DeleteCount { rearm_at } => AlarmPlan::DeleteCount { rearm_at: rearm_at.map(|at| at.max(now_ms + 1)) },
        plan => plan,
    }
}

/// What an admin change does to the object's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlEffect {
    /// The controls are as they were: nothing written.
    Unchanged,
    /// The last control is gone: [`after_clearing`] says what to delete,
    /// once the count's row is known.
    Cleared,
    /// Store the controls, and make sure of the alarm for their end
    /// (`None`: an override for good, kept until cleared).
    Store {
        /// The alarm for the controls' end.
        alarm: Option<Alarm>,
    },
}

/// An admin change applied: the controls after it and its effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controlled {
    /// The key's controls after the change (ended ones dropped).
    pub controls: Controls,
    /// What the object must store, delete and arm.
    pub effect: ControlEffect,
}

/// Applies the admin `change` at `now_ms` to the key's `kept` controls, or
/// refuses it (limits no call could carry, an end not in the future).
pub fn control(kept: &Controls, change: &Change, now_ms: i64) -> Result<Controlled, ControlError> {
    let next = kept.apply(change, now_ms)?;
    let effect = if next == *kept {
        ControlEffect::Unchanged
    } else if next.is_empty() {
        ControlEffect::Cleared
    } else {
        let alarm = match next.keep(now_ms) {
            Keep::Until(at) => Some(Alarm::Pending(at)),
            Keep::Forever | Keep::Nothing => None,
        };
        ControlEffect::Store { alarm }
    };
    Ok(Controlled { controls: next, effect })
}

/// What clearing the last control deletes, given the count's stored `row`
/// (empty when none): everything when no count is left, else the controls'
/// row only (the count and its alarm stay).
pub fn after_clearing(row: &str) -> Delete {
    if row.is_empty() {
        Delete::Everything
    } else {
        Delete::Controls
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::controls::{limits_of, Change};
    use crate::count::protocol::Algorithm;

    const NOW: i64 = 1_000_000;

    fn call(op: Op) -> Call {
        let hold_ms = matches!(op, Op::Reserve | Op::Lease).then_some(500);
        Call { op, algorithm: Algorithm::SlidingLog, limits: limits_of(&[(2, 1_000)]).unwrap(), cost: 1, hold_ms, want: None, reservation: None, spelling: None, used: None, concurrency: None }
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

    #[test]
    fn the_reply_reads_the_alarm_from_storage_only_when_it_must() {
        let hit = answer("", &Controls::default(), NOW, &call(Op::Hit)).unwrap();
        assert_eq!(hit.alarm_pending(Some(false)), Some(false), "known: storage is not asked");
        assert_eq!(hit.alarm_pending(Some(true)), Some(true));
        assert_eq!(hit.alarm_pending(None), None, "unknown: asked");
        let status = answer("", &Controls::default(), NOW, &call(Op::Status)).unwrap();
        assert_eq!(status.alarm_pending(Some(false)), None, "a status always asks");
        let banned = answer("", &banned_until(NOW + 4_000), NOW, &call(Op::Hit)).unwrap();
        assert_eq!(banned.alarm_pending(None), Some(true), "a ban asks nothing; its storage is kept");
        assert_eq!(banned.alarm_pending(Some(false)), Some(false));
        let banned_status = answer("", &banned_until(NOW + 4_000), NOW, &call(Op::Status)).unwrap();
        assert!(!banned_status.banned, "a status is not refused by a ban");
        assert_eq!(banned_status.alarm_pending(Some(true)), None);
    }

    #[test]
    fn a_pending_alarm_will_do_unless_it_fires_after_the_rows_expiry_under_controls() {
        assert!(Alarm::Pending(5).kept_by(Some(100)), "any pending alarm re-arms itself");
        assert!(!Alarm::Pending(5).kept_by(None));
        assert!(Alarm::By(5).kept_by(Some(5)) && Alarm::By(5).kept_by(Some(4)));
        assert!(!Alarm::By(5).kept_by(Some(6)), "a control's later end would outlive the row");
        assert!(!Alarm::By(5).kept_by(None));
        assert!(Alarm::By(5).reads_time() && !Alarm::Pending(5).reads_time());
        assert_eq!((Alarm::By(7).at(), Alarm::Pending(8).at()), (7, 8));
    }

    #[test]
    fn the_alarm_deletes_what_nothing_keeps_and_rearms_for_what_is_live() {
        let none = Controls::default();
        let live = NOW.to_string();
        let expired = (NOW - 5_000).to_string();
        assert_eq!(on_alarm("", 1_000, &none, NOW), AlarmPlan::DeleteAll, "empty");
        assert_eq!(on_alarm(&expired, 1_000, &none, NOW), AlarmPlan::DeleteAll, "expired");
        assert_eq!(on_alarm("x,y", 1_000, &none, NOW), AlarmPlan::DeleteAll, "corrupt: counting starts afresh");
        assert_eq!(on_alarm(&live, 1_000, &none, NOW + 10), AlarmPlan::RearmAt(NOW + 1_000), "live until its expiry");
        assert_eq!(on_alarm(&live, 1_000, &banned_until(NOW + 4_000), NOW + 10), AlarmPlan::RearmAt(NOW + 1_000));
        let ban = banned_until(NOW + 4_000);
        assert_eq!(on_alarm(&expired, 1_000, &ban, NOW), AlarmPlan::DeleteCount { rearm_at: Some(NOW + 4_000) }, "the ban stays to its end");
        assert_eq!(on_alarm(&expired, 1_000, &overridden(), NOW), AlarmPlan::DeleteCount { rearm_at: None }, "an override for good: no end to re-arm for");
        assert_eq!(on_alarm(&expired, 1_000, &ban, NOW + 4_000), AlarmPlan::DeleteAll, "an ended ban keeps nothing");
        for now in [NOW, NOW + 999, NOW + 3_999] {
            match on_alarm(&live, 1_000, &ban, now) {
                AlarmPlan::RearmAt(at) | AlarmPlan::DeleteCount { rearm_at: Some(at) } => assert!(at > now, "{now}: {at}"),
                plan => panic!("{now}: {plan:?}"),
            }
        }
    }

    #[test]
    fn an_admin_change_stores_its_controls_with_an_alarm_for_their_end() {
        let none = Controls::default();
        let ban = control(&none, &Change::Ban { until_ms: NOW + 4_000 }, NOW).unwrap();
        assert_eq!(ban.controls, banned_until(NOW + 4_000));
        assert_eq!(ban.effect, ControlEffect::Store { alarm: Some(Alarm::Pending(NOW + 4_000)) });
        let forever = control(&none, &Change::Override { limits: vec![(5, 1_000)], until_ms: None }, NOW).unwrap();
        assert_eq!(forever.effect, ControlEffect::Store { alarm: None }, "kept until cleared: no alarm");
        let both = control(&ban.controls, &Change::Override { limits: vec![(5, 1_000)], until_ms: Some(NOW + 9_000) }, NOW).unwrap();
        assert_eq!(both.effect, ControlEffect::Store { alarm: Some(Alarm::Pending(NOW + 9_000)) }, "the later end");
        assert_eq!(control(&ban.controls, &Change::Get, NOW).unwrap().effect, ControlEffect::Unchanged);
        assert_eq!(control(&ban.controls, &Change::Ban { until_ms: NOW + 4_000 }, NOW).unwrap().effect, ControlEffect::Unchanged);
        assert_eq!(control(&none, &Change::ClearBan, NOW).unwrap().effect, ControlEffect::Unchanged, "nothing to clear");
        let cleared = control(&ban.controls, &Change::ClearBan, NOW).unwrap();
        assert_eq!((cleared.controls.is_empty(), cleared.effect), (true, ControlEffect::Cleared));
        let kept = control(&both.controls, &Change::ClearBan, NOW).unwrap();
        assert_eq!(kept.effect, ControlEffect::Store { alarm: Some(Alarm::Pending(NOW + 9_000)) }, "the override stays");
        assert!(control(&none, &Change::Ban { until_ms: NOW }, NOW).is_err(), "an end not in the future");
        assert!(control(&none, &Change::Override { limits: vec![(0, 1_000)], until_ms: None }, NOW).is_err());
    }

    #[test]
    fn clearing_the_last_control_deletes_everything_only_with_no_count_left() {
        assert_eq!(after_clearing(""), Delete::Everything);
        assert_eq!(after_clearing(&NOW.to_string()), Delete::Controls, "the count and its alarm stay");
    }
}
