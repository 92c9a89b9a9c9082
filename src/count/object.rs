//! What a limiter object does with one call, decided without I/O
//! (the object's glue only loads, applies and answers).
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
//! and [`ObjectAnswer::alarm_pending`] whether the reply's `alarm_pending` must
//! be read from storage.

use crate::count::controls::{self, AlarmPlan, Change, ControlError, Controls, Effective, Keep};
use crate::count::algorithm::CorruptRow;
use crate::count::counter;
use crate::count::penalty;
use crate::count::limit::horizon_ms;
use crate::count::protocol::{Call, Op};
use crate::count::tally::Tally;

/// What the object must delete, after storing (if anything is stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delete {
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
pub(crate) enum Alarm {
    /// One pending at all: arm it for this time (Unix ms) if none is.
    Pending(i64),
    /// One that fires by this time: re-armed when none is pending or the
    /// pending one is later.
    By(i64),
}

impl Alarm {
    /// The time to arm the alarm for, when it must be set.
    pub(crate) fn at(self) -> i64 {
        match self {
            Alarm::Pending(at) | Alarm::By(at) => at,
        }
    }

    /// Whether the alarm `pending` (its time; `None`: none) already does:
    /// then nothing is set. `Pending` takes any; `By` one due by its time.
    pub(crate) fn kept_by(self, pending: Option<i64>) -> bool {
        match self {
            Alarm::Pending(_) => pending.is_some(),
            Alarm::By(at) => pending.is_some_and(|pending| pending <= at),
        }
    }

    /// Whether making sure of this alarm reads the pending alarm's time
    /// (`By`: it may be a control's end, later than the row's expiry);
    /// `Pending` needs only to know whether one is pending.
    pub(crate) fn reads_time(self) -> bool {
        matches!(self, Alarm::By(_))
    }
}

/// One call's answer and effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectAnswer {
    /// What the call is answered: allowed or blocked, the retry-after, the
    /// windows (a banned call: blocked for the ban's time).
    pub(crate) tally: Tally,
    /// Entries in the count after the call (0 after a reset).
    pub(crate) stored_hits: u64,
    /// Live reservations after the call.
    pub(crate) held: u64,
    /// The reservation a `reserve` made, or the lease a `lease` granted.
    pub(crate) reservation: Option<u64>,
    /// The units a `lease` granted (0 when blocked or banned).
    pub(crate) granted: Option<u64>,
    /// Banned: the glue answers from what it knows of the alarm, asking
    /// storage nothing.
    pub(crate) banned: bool,
    /// A `status`: its reply reads the alarm from storage, never from what
    /// the instance remembers.
    pub(crate) reads_alarm: bool,
    /// The row to store in place, and the horizon it was written under.
    pub(crate) store: Option<(String, u64)>,
    /// What to delete after storing (a reset).
    pub(crate) delete: Option<Delete>,
    /// The alarm to make sure of, once stored and deleted.
    pub(crate) alarm: Option<Alarm>,
    /// For a call carrying a penalty: when the penalty in force after it
    /// ends (Unix ms); the reply's `penalty_until_ms`.
    pub(crate) penalty_until_ms: Option<i64>,
}

impl ObjectAnswer {
    /// The reply's `alarm_pending`, given what the instance knows of the
    /// alarm after applying the effects (`None`: never asked); `None`
    /// when storage must be asked. A banned call asks storage nothing (an
    /// unknown alarm reads as pending: a ban keeps its storage); a
    /// `status` always asks.
    pub(crate) fn alarm_pending(&self, known: Option<bool>) -> Option<bool> {
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
pub(crate) struct Refused {
    /// Why the row cannot be read (the 500's message).
    pub(crate) corrupt: CorruptRow,
    /// The alarm that deletes the row: one horizon from now.
    pub(crate) alarm: Alarm,
}

/// Applies `call` at `now_ms` to the object's stored `row` (empty when
/// none) under the key's `controls`: the reply's fields and the effects to
/// apply, in order (store, delete, make sure of the alarm); or, for a
/// corrupt row, the refusal and the alarm that deletes it. Pure: the same
/// inputs always give the same answer, and nothing is read but them.
///
/// A penalty ([`crate::count::penalty`]) is read from the row's prefix and
/// decided here, after a ban: a call carrying one is refused while one is
/// in force, and starts one when the count refuses it; every row written
/// keeps a penalty in force, and its alarm keeps the row until it ends.
pub(crate) fn answer(row: &str, controls: &Controls, now_ms: i64, call: &Call) -> Result<ObjectAnswer, Refused> {
    let corrupt = |corrupt| refused(corrupt, now_ms, &call.limits);
    let (rest, stored) = penalty::split(row).map_err(corrupt)?;
    let kept = penalty::in_force(stored, now_ms);
    let banned = controls.banned_until(now_ms).is_some();
    let refused_by = kept.filter(|_| call.penalty_ms.is_some() && !banned && penalty::refuses(call.op));
    // Refused by the penalty in force: the count is only looked at.
    let mut answered = count(rest, controls, now_ms, call, refused_by.is_some())?;
    if let Some(until) = refused_by {
        return Ok(penalised(answered, call.op, now_ms, until));
    }
    // A blocked count writes nothing: the refusal that starts a penalty
    // writes the row as it is, marked.
    let tally = &answered.tally;
    let starts = !answered.banned && !tally.allowed && kept.is_none() && penalty::starts(call.op, tally.in_flight);
    let until = match call.penalty_ms {
        Some(ms) if starts => Some(penalty::until(now_ms, ms)),
        _ => kept,
    };
    if let (Some(until), None) = (until, answered.delete) {
        if kept.is_none() {
            let left = penalty::left_ms(until, now_ms);
            let t = &mut answered.tally;
            t.retry_after_ms = t.retry_after_ms.max(left);
            penalty::windows(&mut t.windows, left);
            answered.store = Some((rest.to_string(), horizon_ms(&call.limits)));
        }
        if let Some((row, _)) = answered.store.as_mut() {
            *row = penalty::join(row, Some(until));
            // With controls (live or ended: `By` only reads the pending
            // alarm's time), one that fires by the row's expiry.
            let at = answered.alarm.map_or(until, |a| a.at().max(until));
            answered.alarm = Some(if controls.is_empty() { Alarm::Pending(at) } else { Alarm::By(at) });
        }
    }
    // A ban's refusal is the ban's, not the penalty's.
    answered.penalty_until_ms = call.penalty_ms.and(until).filter(|_| answered.delete.is_none() && !answered.banned);
    Ok(answered)
}

/// A call of `op` refused by the penalty in force until `until`, from
/// what a status of the count (`seen`) found: blocked for the time left,
/// the windows as they are with nothing remaining, nothing stored (a
/// corrupt count was still refused as such).
fn penalised(mut seen: ObjectAnswer, op: Op, now_ms: i64, until: i64) -> ObjectAnswer {
    let left = penalty::left_ms(until, now_ms);
    let mut windows = std::mem::take(&mut seen.tally.windows);
    penalty::windows(&mut windows, left);
    ObjectAnswer {
        tally: Tally { allowed: false, retry_after_ms: left, windows, binding: Some(0), in_flight: false },
        reservation: None,
        granted: (op == Op::Lease).then_some(0),
        reads_alarm: false,
        penalty_until_ms: Some(until),
        ..seen
    }
}

/// The refusal of a corrupt row, with an alarm one horizon ahead.
fn refused(corrupt: CorruptRow, now_ms: i64, limits: &[crate::count::limit::Limit]) -> Refused {
    let horizon = horizon_ms(limits);
    Refused { corrupt, alarm: Alarm::Pending(now_ms.saturating_add(i64::try_from(horizon).unwrap_or(i64::MAX))) }
}

/// [`answer`] for the count's own row (the penalty's prefix removed); a
/// status of it when `look` (the call is refused by a penalty).
fn count(row: &str, controls: &Controls, now_ms: i64, call: &Call, look: bool) -> Result<ObjectAnswer, Refused> {
    let asked_lease = call.op == Op::Lease;
    let (call, banned) = match controls::effective(controls, call, now_ms) {
        Effective::Count(call) if look => (call.with_op(Op::Status), None),
        Effective::Count(call) => (call, None),
        Effective::Banned { retry_after_ms, call } => (call.with_op(Op::Status), Some(retry_after_ms)),
    };
    let horizon = horizon_ms(&call.limits);
    let step = counter::step(row, now_ms, &call).map_err(|corrupt| refused(corrupt, now_ms, &call.limits))?;
    if let Some(retry_after_ms) = banned {
        // A ban binds no window (`binding` absent): how the Worker tells a
        // ban from a full window in its block lines (`Refusal::of`); an
        // older Worker reads the absent binding as window 0, as before.
        let tally = Tally { allowed: false, retry_after_ms, windows: step.tally.windows, binding: None, in_flight: false };
        return Ok(ObjectAnswer {
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
            penalty_until_ms: None,
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
    Ok(ObjectAnswer {
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
        penalty_until_ms: None,
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
pub(crate) fn on_alarm(row: &str, horizon_ms: u64, controls: &Controls, now_ms: i64) -> AlarmPlan {
    // A corrupt penalty reads as a corrupt row: deleted.
    let count = match penalty::split(row) {
        Ok((rest, until)) => penalty::alarm(counter::on_alarm(rest, horizon_ms, now_ms), until, now_ms),
        Err(_) => counter::AlarmAction::DeleteAll,
    };
    match controls::alarm(count, controls, now_ms) {
        AlarmPlan::DeleteCount { rearm_at } => AlarmPlan::DeleteCount { rearm_at: rearm_at.map(|at| at.max(now_ms + 1)) },
        plan => plan,
    }
}

/// What an admin change does to the object's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlEffect {
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
pub(crate) struct Controlled {
    /// The key's controls after the change (ended ones dropped).
    pub(crate) controls: Controls,
    /// What the object must store, delete and arm.
    pub(crate) effect: ControlEffect,
}

/// Applies the admin `change` at `now_ms` to the key's `kept` controls, or
/// refuses it (limits no call could carry, an end not in the future).
pub(crate) fn control(kept: &Controls, change: &Change, now_ms: i64) -> Result<Controlled, ControlError> {
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
pub(crate) fn after_clearing(row: &str) -> Delete {
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
        Call::new(op, Algorithm::SlidingLog, limits_of(&[(2, 1_000)]).unwrap()).with_hold_ms(hold_ms)
    }

    fn banned_until(until_ms: i64) -> Controls {
        Controls::default().apply(&Change::Ban { until_ms }, NOW).unwrap()
    }

    fn overridden() -> Controls {
        Controls::default().apply(&Change::Override { limits: limits_of(&[(5, 1_000)]).unwrap(), until_ms: None }, NOW).unwrap()
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
            assert!(a.banned && !a.tally.allowed && a.tally.binding.is_none(), "{op:?}: a ban binds no window");
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
        let forever = control(&none, &Change::Override { limits: limits_of(&[(5, 1_000)]).unwrap(), until_ms: None }, NOW).unwrap();
        assert_eq!(forever.effect, ControlEffect::Store { alarm: None }, "kept until cleared: no alarm");
        let both = control(&ban.controls, &Change::Override { limits: limits_of(&[(5, 1_000)]).unwrap(), until_ms: Some(NOW + 9_000) }, NOW).unwrap();
        assert_eq!(both.effect, ControlEffect::Store { alarm: Some(Alarm::Pending(NOW + 9_000)) }, "the later end");
        assert_eq!(control(&ban.controls, &Change::Get, NOW).unwrap().effect, ControlEffect::Unchanged);
        assert_eq!(control(&ban.controls, &Change::Ban { until_ms: NOW + 4_000 }, NOW).unwrap().effect, ControlEffect::Unchanged);
        assert_eq!(control(&none, &Change::ClearBan, NOW).unwrap().effect, ControlEffect::Unchanged, "nothing to clear");
        let cleared = control(&ban.controls, &Change::ClearBan, NOW).unwrap();
        assert_eq!((cleared.controls.is_empty(), cleared.effect), (true, ControlEffect::Cleared));
        let kept = control(&both.controls, &Change::ClearBan, NOW).unwrap();
        assert_eq!(kept.effect, ControlEffect::Store { alarm: Some(Alarm::Pending(NOW + 9_000)) }, "the override stays");
        assert!(control(&none, &Change::Ban { until_ms: NOW }, NOW).is_err(), "an end not in the future");
        assert!(control(&none, &Change::Override { limits: Vec::new(), until_ms: None }, NOW).is_err());
    }

    /// The row after two hits at `NOW`: the 2 per second full.
    fn full() -> String {
        let once = answer("", &Controls::default(), NOW, &call(Op::Hit)).unwrap().store.unwrap().0;
        answer(&once, &Controls::default(), NOW, &call(Op::Hit)).unwrap().store.unwrap().0
    }

    /// A penalty of 10 s on 2 per second: one refusal keeps the key
    /// refused after its window has emptied, never extended, until its
    /// end; then the row is counted as before.
    #[test]
    fn a_penalty_outlives_the_window_from_its_first_refusal() {
        let none = Controls::default();
        let hit = call(Op::Hit).with_penalty_ms(10_000);
        let full = full();
        let first = answer(&full, &none, NOW + 10, &hit).unwrap();
        assert!(!first.tally.allowed);
        assert_eq!((first.tally.retry_after_ms, first.penalty_until_ms), (10_000, Some(NOW + 10_010)));
        assert!(first.tally.windows.iter().all(|w| w.remaining == 0 && w.reset_ms == 10_000));
        let (row, _) = first.store.clone().expect("the refusal that starts it writes the row");
        assert_eq!(row, format!("!{}|{full}", NOW + 10_010));
        assert_eq!(first.alarm, Some(Alarm::Pending(NOW + 10_010)), "the alarm keeps the row to the penalty's end");
        // The window has long emptied: still refused, for the time left, writing nothing.
        let later = answer(&row, &none, NOW + 5_010, &hit).unwrap();
        assert_eq!((later.tally.allowed, later.tally.retry_after_ms, later.penalty_until_ms), (false, 5_000, Some(NOW + 10_010)));
        assert_eq!((later.store, later.alarm), (None, None), "a refusal during the penalty does not extend it");
        assert_eq!(later.tally.windows[0].used, 0, "the windows as they are");
        let after = answer(&row, &none, NOW + 10_010, &hit).unwrap();
        assert!(after.tally.allowed && after.penalty_until_ms.is_none(), "ended at its time");
        assert_eq!(after.store.map(|(row, _)| row), Some((NOW + 10_010).to_string()), "the ended penalty is dropped");
        for op in [Op::Reserve, Op::Lease, Op::Check] {
            let c = call(op).with_penalty_ms(10_000);
            let a = answer(&row, &none, NOW + 20, &c).unwrap();
            assert!(!a.tally.allowed && a.store.is_none(), "{op:?}");
            assert_eq!(a.granted, (op == Op::Lease).then_some(0), "{op:?}");
        }
    }

    #[test]
    fn a_call_without_a_penalty_is_answered_as_before() {
        let none = Controls::default();
        let full = full();
        let plain = answer(&full, &none, NOW + 10, &call(Op::Hit)).unwrap();
        assert_eq!((plain.tally.retry_after_ms, plain.store, plain.penalty_until_ms), (990, None, None));
        let row = format!("!{}|{NOW}", NOW + 9_000);
        let old = answer(&row, &none, NOW + 10, &call(Op::Hit)).unwrap();
        assert!(old.tally.allowed && old.penalty_until_ms.is_none(), "an older Worker (or a rule whose penalty was removed)");
        assert!(old.store.is_some_and(|(r, _)| r.starts_with(&format!("!{}|", NOW + 9_000))), "every write keeps the penalty");
        let commit = answer(&row, &none, NOW + 10, &call(Op::Commit)).unwrap();
        assert!(commit.store.is_some_and(|(r, _)| r.starts_with(&format!("!{}|", NOW + 9_000))));
        assert_eq!(commit.alarm, Some(Alarm::Pending(NOW + 9_000)));
        let status = answer(&row, &none, NOW + 10, &call(Op::Status).with_penalty_ms(10_000)).unwrap();
        assert!(status.tally.allowed, "a status is never refused");
        assert_eq!(status.penalty_until_ms, Some(NOW + 9_000), "and shows the penalty");
        let probe = answer(&row, &none, NOW + 10, &call(Op::Probe).with_penalty_ms(10_000)).unwrap();
        assert!(probe.tally.allowed, "a trusted device's probe does not see the account's penalty");
    }

    #[test]
    fn a_refusal_owed_to_slots_in_flight_or_a_ban_starts_no_penalty() {
        let none = Controls::default();
        let reserve = call(Op::Reserve).with_penalty_ms(10_000);
        let held = format!("{NOW};1@{}", NOW + 5_000);
        let in_flight = answer(&held, &none, NOW + 10, &reserve).unwrap();
        assert!(!in_flight.tally.allowed && in_flight.tally.in_flight);
        assert_eq!((in_flight.store, in_flight.penalty_until_ms), (None, None));
        let committed = answer(&full(), &none, NOW + 10, &reserve).unwrap();
        assert_eq!(committed.penalty_until_ms, Some(NOW + 10_010), "refused by the committed count: it starts");
        let banned = answer(&full(), &banned_until(NOW + 4_000), NOW + 10, &call(Op::Hit).with_penalty_ms(10_000)).unwrap();
        assert!(banned.banned && banned.store.is_none() && banned.penalty_until_ms.is_none());
        let penalised = format!("!{}|", NOW + 9_000);
        let both = answer(&penalised, &banned_until(NOW + 4_000), NOW + 10, &call(Op::Hit).with_penalty_ms(10_000)).unwrap();
        assert_eq!((both.banned, both.tally.retry_after_ms, both.penalty_until_ms), (true, 3_990, None), "a ban answers first, as a ban");
        let five = (0..5).fold(String::new(), |row, _| answer(&row, &Controls::default(), NOW, &call(Op::Hit).with_limits(limits_of(&[(5, 1_000)]).unwrap())).unwrap().store.unwrap().0);
        let controlled = answer(&five, &overridden(), NOW + 10, &call(Op::Hit).with_penalty_ms(10_000)).unwrap();
        assert_eq!(controlled.penalty_until_ms, Some(NOW + 10_010), "refused under the override's 5");
        assert_eq!(controlled.alarm, Some(Alarm::By(NOW + 10_010)), "with controls, an alarm that fires by its end");
    }

    #[test]
    fn a_reset_lifts_a_penalty_and_the_alarm_keeps_it_to_its_end() {
        let none = Controls::default();
        let row = format!("!{}|{NOW}", NOW + 9_000);
        let reset = answer(&row, &none, NOW + 10, &call(Op::Reset)).unwrap();
        assert_eq!((reset.delete, reset.store, reset.penalty_until_ms), (Some(Delete::Everything), None, None));
        assert_eq!(on_alarm(&row, 1_000, &none, NOW + 1_000), AlarmPlan::RearmAt(NOW + 9_000), "the count expired, the penalty not");
        assert_eq!(on_alarm(&row, 1_000, &none, NOW + 9_000), AlarmPlan::DeleteAll, "ended: deleted");
        let ban = banned_until(NOW + 20_000);
        assert_eq!(on_alarm(&row, 1_000, &ban, NOW + 1_000), AlarmPlan::RearmAt(NOW + 9_000));
        assert_eq!(on_alarm("!x|", 1_000, &none, NOW), AlarmPlan::DeleteAll, "corrupt: deleted");
        let corrupt = answer("!x|", &none, NOW, &call(Op::Hit)).unwrap_err();
        assert_eq!(corrupt.alarm, Alarm::Pending(NOW + 1_000));
    }

    #[test]
    fn clearing_the_last_control_deletes_everything_only_with_no_count_left() {
        assert_eq!(after_clearing(""), Delete::Everything);
        assert_eq!(after_clearing(&NOW.to_string()), Delete::Controls, "the count and its alarm stay");
    }
}
