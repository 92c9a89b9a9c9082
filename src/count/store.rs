//! What the limiter object's storage does with a decision of
//! [`crate::count::object`], said once: the effects in their
//! order, and the reply built from them.
//!
//! [`object::answer`], [`object::on_alarm`] and [`object::control`] decide;
//! [`of_answer`], [`of_refusal`], [`of_alarm`] and [`of_control`] turn what
//! they decided into the [`Effect`]s a storage applies, in order; [`reply`]
//! builds the call's [`Reply`] from the answer and what applying it did.
//! Two storages apply them: the Durable Object's SQLite (`glue::limiter`)
//! and [`Storage`], the same storage in memory, on which the native
//! harness runs the object (`testing::pair`), alarms firing on simulated
//! time.

use crate::count::controls::{AlarmPlan, Controls};
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
use crate::count::controls::{Change, ControlError};
use crate::count::object::{self, Alarm, ObjectAnswer, ControlEffect, Controlled, Delete, Refused};
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
use crate::count::protocol::Call;
use crate::count::protocol::{Reply, WireWindow, VERSION};

/// One thing the object's storage does, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect<'a> {
    /// Writes the count's row in place, with the horizon (the longest
    /// window, ms) it was written under.
    Store { row: &'a str, horizon_ms: u64 },
    /// Writes the key's controls in place.
    StoreControls(&'a Controls),
    /// Deletes what [`Delete`] names ([`Delete::Everything`] clears the
    /// alarm too).
    Delete(Delete),
    /// Makes sure of the alarm: sets it unless the pending one will do
    /// ([`Alarm::kept_by`]).
    MakeSure(Alarm),
    /// Sets the alarm for this time (Unix ms), whatever is pending: the
    /// alarm handler re-arming once it fired.
    Arm(i64),
}

/// The effects of a call's answer: the row stored, what is deleted, the
/// alarm made sure of, in that order.
pub(crate) fn of_answer(answered: &ObjectAnswer) -> Vec<Effect<'_>> {
    // Pushed one by one, not an iterator chain collected (Wasm size).
    let mut effects = Vec::new();
    if let Some((row, horizon_ms)) = &answered.store {
        effects.push(Effect::Store { row, horizon_ms: *horizon_ms });
    }
    if let Some(delete) = answered.delete {
        effects.push(Effect::Delete(delete));
    }
    if let Some(alarm) = answered.alarm {
        effects.push(Effect::MakeSure(alarm));
    }
    effects
}

/// The effects of a call refused for a corrupt row: the alarm that
/// deletes the row made sure of.
pub(crate) fn of_refusal(refused: &Refused) -> Vec<Effect<'static>> {
    vec![Effect::MakeSure(refused.alarm)]
}

/// The effects of the TTL alarm's plan, once the alarm fired (no alarm is
/// pending then).
pub(crate) fn of_alarm(plan: AlarmPlan) -> Vec<Effect<'static>> {
    match plan {
        AlarmPlan::DeleteAll => vec![Effect::Delete(Delete::Everything)],
        AlarmPlan::DeleteCount { rearm_at: None } => vec![Effect::Delete(Delete::Count)],
        AlarmPlan::DeleteCount { rearm_at: Some(at) } => vec![Effect::Delete(Delete::Count), Effect::Arm(at)],
        AlarmPlan::RearmAt(at) => vec![Effect::Arm(at)],
    }
}

/// The effects of an admin change, given the count's stored `row` (empty
/// when none): nothing, the last control cleared
/// ([`object::after_clearing`]), or the controls stored and the alarm for
/// their end made sure of. `row` is read only when the change is
/// [`ControlEffect::Cleared`]: a storage that must read it to know it may
/// pass `""` for any other.
pub(crate) fn of_control<'a>(controlled: &'a Controlled, row: &str) -> Vec<Effect<'a>> {
    match controlled.effect {
        ControlEffect::Unchanged => Vec::new(),
        ControlEffect::Cleared => vec![Effect::Delete(object::after_clearing(row))],
        ControlEffect::Store { alarm: None } => vec![Effect::StoreControls(&controlled.controls)],
        ControlEffect::Store { alarm: Some(alarm) } => vec![Effect::StoreControls(&controlled.controls), Effect::MakeSure(alarm)],
    }
}

/// The reply to a call answered `answered`, once its effects were applied:
/// `alarm_pending` after them, whether they set the alarm, and the rows
/// read and written.
pub(crate) fn reply(answered: ObjectAnswer, alarm_pending: bool, alarm_set: bool, rows_read: u64, rows_written: u64) -> Reply {
    Reply {
        v: VERSION,
        tally: answered.tally.map_windows(|w| WireWindow::from(&w)),
        alarm_pending,
        alarm_set,
        stored_hits: answered.stored_hits,
        rows_read,
        rows_written,
        reservation: answered.reservation,
        held: answered.held,
        granted: answered.granted,
        penalty_until_ms: answered.penalty_until_ms,
    }
}

/// One limiter object's storage, in memory: the count's row (with its
/// horizon), the key's controls and the pending alarm. What the Durable
/// Object keeps in SQLite, for the native harness and the CLI's `explain`
/// (not in the Worker, whose object is the Durable Object).
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Storage {
    /// The count's row and the horizon it was written under.
    pub(crate) row: Option<(String, u64)>,
    pub(crate) controls: Controls,
    /// The pending alarm's time (Unix ms).
    pub(crate) alarm: Option<i64>,
    /// Rows written over the storage's life (the count's and the controls').
    pub(crate) rows_written: u64,
}

/// What applying effects did: the rows written, and whether an effect set
/// the alarm (a [`Effect::MakeSure`] that found none that would do). Both
/// storages add up their effects' with `+=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StoreApplied {
    pub(crate) rows_written: u64,
    pub(crate) alarm_set: bool,
}

impl std::ops::AddAssign for StoreApplied {
    fn add_assign(&mut self, one: StoreApplied) {
        self.rows_written += one.rows_written;
        self.alarm_set |= one.alarm_set;
    }
}

#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
impl Storage {
    /// Nothing stored and no alarm pending: what the alarm leaves once a
    /// key's count and controls have expired.
    pub(crate) fn is_empty(&self) -> bool {
        self.row.is_none() && self.controls.is_empty() && self.alarm.is_none()
    }

    /// The count's row text (empty when none).
    pub(crate) fn row_text(&self) -> &str {
        self.row.as_ref().map_or("", |(row, _)| row.as_str())
    }

    /// Applies `effects` in order, as the Durable Object does.
    pub(crate) fn apply(&mut self, effects: &[Effect<'_>]) -> StoreApplied {
        let mut applied = StoreApplied::default();
        for effect in effects {
            applied += self.apply_one(effect);
        }
        self.rows_written += applied.rows_written;
        applied
    }

    /// Applies one effect, as `glue::limiter`'s `apply` does in SQLite.
    fn apply_one(&mut self, effect: &Effect<'_>) -> StoreApplied {
        let written = StoreApplied { rows_written: 1, alarm_set: false };
        match effect {
            Effect::Store { row, horizon_ms } => {
                self.row = Some((row.to_string(), *horizon_ms));
                return written;
            }
            Effect::StoreControls(controls) => {
                self.controls = (*controls).clone();
                return written;
            }
            Effect::Delete(Delete::Count) => self.row = None,
            Effect::Delete(Delete::Controls) => self.controls = Controls::default(),
            Effect::Delete(Delete::Everything) => *self = Storage { rows_written: self.rows_written, ..Storage::default() },
            Effect::MakeSure(alarm) if alarm.kept_by(self.alarm) => {}
            Effect::MakeSure(alarm) => {
                self.alarm = Some(alarm.at());
                return StoreApplied { rows_written: 0, alarm_set: true };
            }
            Effect::Arm(at) => self.alarm = Some(*at),
        }
        StoreApplied::default()
    }

    /// Answers `call` at `now_ms` as the Durable Object does: decided by
    /// [`object::answer`], its effects applied, the reply built by
    /// [`reply`]; a corrupt row's refusal (the 500's message) after its
    /// alarm was made sure of.
    pub(crate) fn answer(&mut self, call: &Call, now_ms: i64) -> Result<Reply, String> {
        let answered = match object::answer(self.row_text(), &self.controls, now_ms, call) {
            Ok(answered) => answered,
            Err(refused) => {
                self.apply(&of_refusal(&refused));
                return Err(refused.corrupt.to_string());
            }
        };
        let applied = self.apply(&of_answer(&answered));
        let pending = self.alarm.is_some();
        Ok(reply(answered, pending, applied.alarm_set, 0, applied.rows_written))
    }

    /// The alarm firing at `now_ms`: consumed, then [`object::on_alarm`]'s
    /// plan applied.
    pub(crate) fn fire_alarm(&mut self, now_ms: i64) {
        self.alarm = None;
        let (row, horizon) = self.row.clone().unwrap_or_default();
        let plan = object::on_alarm(&row, horizon, &self.controls, now_ms);
        self.apply(&of_alarm(plan));
    }

    /// An admin change at `now_ms`, as [`object::control`] decides: the
    /// controls in force after it, or why it is refused.
    pub(crate) fn control(&mut self, change: &Change, now_ms: i64) -> Result<Controls, ControlError> {
        let controlled = object::control(&self.controls, change, now_ms)?;
        let row = self.row_text().to_string();
        self.apply(&of_control(&controlled, &row));
        Ok(controlled.controls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::controls::limits_of;
    use crate::count::protocol::{Algorithm, Op};

    const NOW: i64 = 1_000_000;

    fn call(op: Op) -> Call {
        let hold_ms = matches!(op, Op::Reserve | Op::Lease).then_some(500);
        Call::new(op, Algorithm::SlidingLog, limits_of(&[(2, 1_000)]).unwrap()).with_hold_ms(hold_ms)
    }

    #[test]
    fn an_answers_effects_come_in_order_store_delete_alarm() {
        let a = object::answer("", &Controls::default(), NOW, &call(Op::Hit)).unwrap();
        let row = NOW.to_string();
        assert_eq!(of_answer(&a), [Effect::Store { row: &row, horizon_ms: 1_000 }, Effect::MakeSure(Alarm::Pending(NOW + 1_000))]);
        let reset = object::answer(&row, &Controls::default(), NOW, &call(Op::Reset)).unwrap();
        assert_eq!(of_answer(&reset), [Effect::Delete(Delete::Everything)]);
    }

    #[test]
    fn the_alarms_and_a_controls_effects_come_in_order() {
        assert_eq!(of_alarm(AlarmPlan::DeleteCount { rearm_at: Some(NOW) }), [Effect::Delete(Delete::Count), Effect::Arm(NOW)]);
        assert_eq!(of_alarm(AlarmPlan::DeleteCount { rearm_at: None }), [Effect::Delete(Delete::Count)]);
        assert_eq!(of_alarm(AlarmPlan::RearmAt(NOW)), [Effect::Arm(NOW)]);
        let ban = object::control(&Controls::default(), &Change::Ban { until_ms: NOW + 4_000 }, NOW).unwrap();
        assert_eq!(of_control(&ban, ""), [Effect::StoreControls(&ban.controls), Effect::MakeSure(Alarm::Pending(NOW + 4_000))]);
        let cleared = object::control(&ban.controls, &Change::ClearBan, NOW).unwrap();
        assert_eq!(of_control(&cleared, "1"), [Effect::Delete(Delete::Controls)], "the count stays");
        assert_eq!(of_control(&cleared, ""), [Effect::Delete(Delete::Everything)]);
    }

    #[test]
    fn the_storage_keeps_its_row_until_the_alarm_deletes_it() {
        let mut s = Storage::default();
        let first = s.answer(&call(Op::Hit), NOW).unwrap();
        assert!(first.tally.allowed && first.alarm_set && first.alarm_pending);
        assert_eq!((first.rows_written, s.alarm), (1, Some(NOW + 1_000)));
        let second = s.answer(&call(Op::Hit), NOW + 10).unwrap();
        assert!(second.tally.allowed && !second.alarm_set, "a pending alarm will do");
        let third = s.answer(&call(Op::Hit), NOW + 20).unwrap();
        assert!(!third.tally.allowed && third.rows_written == 0, "a blocked hit writes nothing");
        s.fire_alarm(NOW + 1_000);
        assert_eq!(s.alarm, Some(NOW + 1_010), "the second hit is live: re-armed");
        s.fire_alarm(NOW + 1_010);
        assert!(s.is_empty(), "{s:?}");
        assert_eq!(s.rows_written, 2);
    }

    #[test]
    fn a_ban_is_stored_with_its_alarm_and_cleared_with_nothing_left() {
        let mut s = Storage::default();
        let ban = Change::Ban { until_ms: NOW + 4_000 };
        assert!(s.control(&ban, NOW).unwrap().banned_until(NOW).is_some());
        assert_eq!(s.alarm, Some(NOW + 4_000));
        let refused = s.answer(&call(Op::Hit), NOW + 1).unwrap();
        assert!(!refused.tally.allowed && refused.tally.retry_after_ms == 3_999);
        assert!(s.control(&Change::ClearBan, NOW + 2).unwrap().is_empty());
        assert!(s.row.is_none() && s.controls.is_empty() && s.alarm.is_none(), "no count left: everything deleted: {s:?}");
        s.answer(&call(Op::Hit), NOW + 3).unwrap();
        s.control(&ban, NOW + 4).unwrap();
        s.control(&Change::ClearBan, NOW + 5).unwrap();
        assert!(s.row.is_some() && s.controls.is_empty(), "the count and its alarm stay: {s:?}");
    }

    /// counting.test.mjs's row-cost test, natively: a reserve, a commit and a release
    /// write one row each; a blocked reserve and a stale release none.
    #[test]
    fn two_phase_calls_write_one_row_each_and_a_refusal_none() {
        let mut s = Storage::default();
        let reserve = call(Op::Reserve).with_hold_ms(60_000).with_limits(limits_of(&[(2, 60_000)]).unwrap());
        let a = s.answer(&reserve, NOW).unwrap();
        let b = s.answer(&reserve, NOW + 1).unwrap();
        assert_eq!((a.tally.allowed, a.rows_written, a.alarm_set, a.held), (true, 1, true, 1));
        assert_eq!((b.tally.allowed, b.rows_written, b.alarm_set, b.held), (true, 1, false, 2));
        assert_ne!(a.reservation, b.reservation);
        let full = s.answer(&reserve, NOW + 2).unwrap();
        assert_eq!((full.tally.allowed, full.tally.in_flight, full.rows_written), (false, true, 0), "held in flight: nothing written");
        let settle = |op, id| reserve.clone().with_op(op).with_hold_ms(None).settling(id);
        let commit = s.answer(&settle(Op::Commit, a.reservation), NOW + 3).unwrap();
        assert_eq!((commit.rows_written, commit.stored_hits, commit.held), (1, 1, 1));
        let release = s.answer(&settle(Op::Release, b.reservation), NOW + 4).unwrap();
        assert_eq!((release.rows_written, release.held), (1, 0));
        let stale = s.answer(&settle(Op::Release, b.reservation), NOW + 5).unwrap();
        assert_eq!(stale.rows_written, 0, "released once");
        assert_eq!(s.rows_written, 4);
    }

    #[test]
    fn a_corrupt_row_is_refused_and_left_with_its_alarm() {
        let mut s = Storage { row: Some(("x,y".into(), 1_000)), ..Storage::default() };
        assert!(s.answer(&call(Op::Hit), NOW).unwrap_err().contains("corrupt"));
        assert_eq!(s.alarm, Some(NOW + 1_000));
        s.fire_alarm(NOW + 1_000);
        assert!(s.is_empty());
    }
}
