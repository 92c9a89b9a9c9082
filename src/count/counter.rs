//! One step of a limiter object, pure: (stored row, now, call) → tally
//! and the row to write. The Durable Object only loads, stores and keeps
//! its alarm; everything it decides is decided here, once for both
//! algorithms: each is a `Counter` (a state kept in one text row, and
//! pure functions of state, now and limits), and [`step`] and [`on_alarm`]
//! are written over that trait ([`step`] once, over an enum of the two
//! states that dispatches to it, so the Wasm holds one copy).
//!
//! The stored row is a sliding log ([`crate::count::window::encode_log`]) or a
//! GCRA state (`g:...`, [`crate::count::gcra::encode`]); its prefix says which
//! algorithm wrote it. A row of the other kind (the rule's algorithm was
//! changed in the config) is read towards blocking, never as empty
//! ([`crate::count::switch`]; before 0.2.0 it read as empty). The reservations of two-phase
//! counting ([`crate::count::reservation`]) follow the state after a `;`, for
//! either algorithm, and a relief rule's mark comes last: the row's
//! wrappers are read and written by one codec, [`crate::count::row`]. Rows
//! written by earlier versions read unchanged: both formats are as they
//! were, and a row without `;` holds no reservation.
//!
//! # Corrupt rows
//! A row that the algorithm which wrote it cannot read back is corrupt
//! ([`CorruptRow`]); this code never writes one. Both algorithms treat it
//! alike, whichever of them the call asks for:
//! - every call but `reset` is refused with the reason ([`step`] returns
//!   the error). The object answers 500, so the Worker logs a
//!   `counter_error` and applies the rule's `on_error` policy. The row is
//!   never read as empty: that would forget its hits and admit past the
//!   limit without a trace.
//! - the row never outlives its alarm: the refusing call makes sure one is
//!   pending (arming it one horizon ahead, by when every hit the row could
//!   hold has expired, if none was), and the alarm deletes a corrupt row
//!   ([`on_alarm`]); counting then starts afresh.
//! - an admin `reset` does not read the row and deletes it at once.

use crate::count::algorithm::{Algorithm, CorruptRow, Counter, Admission};
use crate::count::gcra::{self, Gcra};
use crate::count::lease;
use crate::count::limit::{horizon_ms, Limit, WindowState};
use crate::count::protocol::{Call, Op};
use crate::count::slots;
use crate::count::reservation::{self, Reservation};
use crate::count::row::{self, CountRow};
use crate::count::switch;
use crate::count::tally::Tally;
use crate::count::window::SlidingLog;
use crate::request::spelling::{self, Mark};

/// What one call decided, and what to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// What the call is answered.
    pub(crate) tally: Tally,
    /// The row to write, if anything changes (never for a blocked hit).
    pub(crate) write: Option<Write>,
    /// Entries (hits, or GCRA windows) in the row after this step.
    pub(crate) stored: u64,
    /// Live reservations in the row after this step.
    pub(crate) held: u64,
    /// The reservation an allowed `reserve` made, or the id (expiry) of
    /// the lease a `lease` granted.
    pub(crate) reservation: Option<u64>,
    /// The units a `lease` granted (0 when blocked); `None` for other ops.
    pub(crate) granted: Option<u64>,
}

/// A row to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Write {
    /// The row's text, as [`step`] reads it back.
    pub(crate) row: String,
    /// When everything in `row` will have expired (Unix ms): the time the
    /// TTL alarm is armed for.
    pub(crate) expires_at: i64,
}

/// Applies `call` at `now_ms` to the stored `row` (empty when none).
/// `Op::Reset` is the object's business (it deletes its storage); here it
/// reads as a status of an empty row, and does not read `row`, so that a
/// corrupt row can be reset. Any other call on a corrupt row is refused.
pub(crate) fn step(row: &str, now_ms: i64, call: &Call) -> Result<Step, CorruptRow> {
    run(row, now_ms, call)
}

/// A row read back: the counter's state and the reservations still live.
struct Loaded<S> {
    state: S,
    held: Vec<Reservation>,
}

/// Whether `state` holds nothing live at `now_ms`.
fn is_empty(state: &State, now_ms: i64, limits: &[Limit]) -> bool {
    State::expires_at(state, horizon_ms(limits)).is_none_or(|at| at <= now_ms)
}

/// [`run_marked`], with the row's [`Mark`] read before and written after: a
/// count that held nothing live has none, a commit marks it, and a clear
/// that relieved it drops it.
/// The row is read and written by [`crate::count::row`]'s codec.
fn run(text: &str, now_ms: i64, call: &Call) -> Result<Step, CorruptRow> {
    // A reset does not read the row, so that a corrupt one can be reset.
    let stored = if call.op == Op::Reset { CountRow::default() } else { row::decode_count(text)? };
    let (mut step, mark) = run_marked(stored, now_ms, call)?;
    if let Some(write) = step.write.as_mut() {
        write.row = row::with_mark(std::mem::take(&mut write.row), mark);
    }
    Ok(step)
}

fn run_marked(stored: CountRow<'_>, now_ms: i64, call: &Call) -> Result<(Step, Option<Mark>), CorruptRow> {
    let limits = &call.limits;
    let Loaded { state, mut held } = if call.op == Op::Reset {
        Loaded { state: State::empty(call.algorithm), held: Vec::new() }
    } else {
        Loaded { state: load(stored.state, now_ms, call)?, held: reservation::live(stored.held, now_ms) }
    };
    let empty = is_empty(&state, now_ms, limits);
    let mut mark = if empty { None } else { stored.mark };
    let step = match call.op {
        Op::Hit => hit(&state, held, now_ms, call),
        Op::Check => {
            let tally = reserve_decision(&state, &held, now_ms, call).tally;
            unchanged(&state, Tally { windows: State::peek(&state, now_ms, limits), ..tally }, &held)
        }
        Op::Record => {
            let (next, windows) = State::record(&state, now_ms, limits, call.cost);
            written(Tally::allowing(windows), &next, held, now_ms, limits)
        }
        Op::Reserve => reserve(&state, held, now_ms, call),
        Op::Commit => {
            // An unknown (expired) reservation still counts: the origin
            // answered a counted status. The origin's usage, when the call
            // carries it, counts instead of the reservation's cost.
            let taken = reservation::take(&mut held, call.reservation);
            let cost = call.used.unwrap_or_else(|| taken.map_or(call.cost, |r| r.cost));
            if cost == 0 {
                // Nothing used: as a release.
                let tally = Tally::allowing(State::peek(&state, now_ms, limits));
                let step = if taken.is_some() { written(tally, &state, held, now_ms, limits) } else { unchanged(&state, tally, &held) };
                return Ok((step, mark));
            }
            mark = spelling::after_commit(mark.as_ref(), empty, call.spelling.as_ref());
            let (next, windows) = State::record(&state, now_ms, limits, cost);
            written(Tally::allowing(windows), &next, held, now_ms, limits)
        }
        Op::Release | Op::Forgive | Op::Clear => {
            // Only a count of the success's own spelling is relieved: a
            // look-alike's success releases its own slot, nothing more.
            let relief = spelling::relieves(mark.as_ref(), empty, call.spelling.as_ref());
            let (step, cleared) = settle(&state, held, now_ms, call, relief);
            if cleared {
                mark = None;
            }
            step
        }
        Op::Status | Op::Reset | Op::Probe => unchanged(&state, Tally::allowing(State::peek(&state, now_ms, limits)), &held),
        Op::Lease => lease_step(&state, held, now_ms, call),
        Op::Refund => refund(&state, held, now_ms, call),
    };
    Ok((step, mark))
}

/// `hit`: check-and-record. Rules that count every request never
/// reserve; reservations left by a rule switched from `counting.statuses`
/// are carried along.
fn hit(state: &State, held: Vec<Reservation>, now_ms: i64, call: &Call) -> Step {
    let Admission { tally, next } = State::decide(state, now_ms, &call.limits, call.cost);
    match next {
        Some(next) => written(tally, &next, held, now_ms, &call.limits),
        None => unchanged(state, tally, &held),
    }
}

/// `refund`: up to `call.cost` unspent units of the lease
/// `call.reservation` given back; written only when that changes the row.
fn refund(state: &State, held: Vec<Reservation>, now_ms: i64, call: &Call) -> Step {
    let limits = &call.limits;
    let lease_id = call.reservation.and_then(|id| i64::try_from(id).ok()).unwrap_or(i64::MIN);
    let next = State::refund(state, now_ms, limits, call.cost, lease_id);
    let tally = Tally::allowing(State::peek(&next, now_ms, limits));
    if next == *state {
        unchanged(state, tally, &held)
    } else {
        written(tally, &next, held, now_ms, limits)
    }
}

/// A step that writes nothing.
fn unchanged(state: &State, tally: Tally, held: &[Reservation]) -> Step {
    Step { tally, write: None, stored: State::entries(state), held: held.len() as u64, reservation: None, granted: None }
}

/// `reserve`: a reservation of `call.cost`, if it fits beside `held`.
fn reserve(state: &State, mut held: Vec<Reservation>, now_ms: i64, call: &Call) -> Step {
    let Admission { tally, next } = reserve_decision(state, &held, now_ms, call);
    let Some(expires_at) = next else { return unchanged(state, tally, &held) };
    let id = reservation::next_id(&held, now_ms);
    held.push(Reservation { id, expires_at, cost: call.cost });
    Step { reservation: Some(id), ..written(tally, state, held, now_ms, &call.limits) }
}

/// `release`, `forgive` and `clear`: the call's reservation released and,
/// when `relief` (the count is of the success's own spelling), one failure
/// forgiven or every one cleared. Also says whether the count was cleared.
fn settle(state: &State, mut held: Vec<Reservation>, now_ms: i64, call: &Call, relief: bool) -> (Step, bool) {
    let limits = &call.limits;
    let released = reservation::take(&mut held, call.reservation).is_some();
    let next = match call.op {
        Op::Forgive if relief => Some(State::forgive(state, now_ms, limits, call.cost)),
        Op::Clear if relief => Some(state.emptied()),
        _ => None,
    }
    .filter(|next| next != state);
    let cleared = call.op == Op::Clear && next.is_some();
    let after = next.as_ref().unwrap_or(state);
    let tally = Tally::allowing(State::peek(after, now_ms, limits));
    let step = if released || next.is_some() {
        written(tally, after, held, now_ms, limits)
    } else {
        unchanged(state, tally, &held)
    };
    (step, cleared)
}

/// `lease`: a grant of `cost` to `want` units, or none.
fn lease_step(state: &State, held: Vec<Reservation>, now_ms: i64, call: &Call) -> Step {
    let limits = &call.limits;
    // Reservations of a rule switched from `counting.statuses` take their
    // room first; blocked is the algorithm's exact answer for `cost` (with
    // them).
    let blocked = reserve_decision(state, &held, now_ms, call);
    if !blocked.tally.allowed {
        return Step { granted: Some(0), ..unchanged(state, blocked.tally, &held) };
    }
    let room = State::room(state, now_ms, limits).saturating_sub(reservation::units(&held));
    let granted = lease::grant_size(call.want.unwrap_or(call.cost), call.cost, room);
    let ttl = i64::try_from(call.hold_ms.unwrap_or(1)).unwrap_or(i64::MAX);
    let expires_at = now_ms.saturating_add(ttl);
    let next = State::lease(state, now_ms, limits, granted, expires_at);
    let tally = Tally::allowing(State::peek(&next, now_ms, limits));
    Step {
        reservation: u64::try_from(expires_at).ok(),
        granted: Some(u64::from(granted)),
        ..written(tally, &next, held, now_ms, limits)
    }
}

/// Whether a request of `call.cost` may take a slot beside the `held`
/// reservations; when it may, the expiry of its reservation (`next`).
///
/// A block the committed hits alone impose is the algorithm's own, exact
/// and cacheable. A block only the reservations impose is marked
/// [`Tally::in_flight`]: its wait is the algorithm's as if every reservation
/// were committed now, but at most until the first of them expires (by
/// then at least one has been settled or has lapsed).
fn reserve_decision(state: &State, held: &[Reservation], now_ms: i64, call: &Call) -> Admission<i64> {
    let limits = &call.limits;
    let committed = State::decide(state, now_ms, limits, call.cost);
    if !committed.tally.allowed {
        return Admission { tally: committed.tally, next: None };
    }
    let held_units = u32::try_from(reservation::units(held)).unwrap_or(u32::MAX);
    let with_held = State::decide(state, now_ms, limits, call.cost.saturating_add(held_units));
    if with_held.tally.allowed && slots::full(held, call.concurrency) {
        return Admission { tally: slots::refused(with_held.tally, held, now_ms), next: None };
    }
    if with_held.tally.allowed {
        let hold = i64::try_from(call.hold_ms.unwrap_or(0)).unwrap_or(i64::MAX);
        return Admission { tally: with_held.tally, next: Some(now_ms.saturating_add(hold)) };
    }
    let lapse = reservation::first_expiry(held).map_or(u64::MAX, |at| u64::try_from(at - now_ms).unwrap_or(0));
    let tally = Tally {
        retry_after_ms: with_held.tally.retry_after_ms.min(lapse).max(1),
        in_flight: true,
        ..with_held.tally
    };
    Admission { tally, next: None }
}

fn written(tally: Tally, next: &State, held: Vec<Reservation>, now_ms: i64, limits: &[Limit]) -> Step {
    let expires_at = State::expires_at(next, horizon_ms(limits)).max(reservation::last_expiry(&held)).unwrap_or(now_ms);
    Step {
        tally,
        write: Some(Write { row: row::encode_count(State::encode(next), &held), expires_at }),
        stored: State::entries(next),
        held: held.len() as u64,
        reservation: None,
        granted: None,
    }
}

/// `row` as the state of the call's algorithm. A row of the other
/// algorithm is read towards blocking ([`crate::count::switch`]), and
/// refused if that algorithm cannot read it.
fn load(row: &str, now_ms: i64, call: &Call) -> Result<State, CorruptRow> {
    let written = match writer(row) {
        Algorithm::SlidingLog => State::Log(SlidingLog::decode(row)?),
        Algorithm::Gcra => State::Gcra(Gcra::decode(row)?),
    };
    Ok(match (written, call.algorithm) {
        (State::Log(log), Algorithm::Gcra) => State::Gcra(switch::gcra_from_log(&log, &call.limits)),
        (State::Gcra(cells), Algorithm::SlidingLog) => State::Log(switch::log_from_gcra(&cells, now_ms, &call.limits)),
        (state, _) => state,
    })
}

/// Either algorithm's state: the step above is compiled once, not once
/// per [`Counter`] (Wasm size), each operation dispatched on the variant.
/// A state keeps its algorithm: an empty GCRA row is encoded unlike an
/// empty log.
#[derive(PartialEq)]
enum State {
    Log(<SlidingLog as Counter>::State),
    Gcra(<Gcra as Counter>::State),
}

/// `$op` of the state's own algorithm, with the state first.
macro_rules! dispatch {
    ($state:expr, $op:ident($($arg:expr),*)) => {
        match $state {
            State::Log(s) => SlidingLog::$op(s, $($arg),*),
            State::Gcra(s) => Gcra::$op(s, $($arg),*),
        }
    };
    ($state:expr, $op:ident($($arg:expr),*) => State) => {
        match $state {
            State::Log(s) => State::Log(SlidingLog::$op(s, $($arg),*)),
            State::Gcra(s) => State::Gcra(Gcra::$op(s, $($arg),*)),
        }
    };
}

impl State {
    fn empty(algorithm: Algorithm) -> State {
        match algorithm {
            Algorithm::SlidingLog => State::Log(Default::default()),
            Algorithm::Gcra => State::Gcra(Default::default()),
        }
    }

    /// The empty state of the same algorithm.
    fn emptied(&self) -> State {
        match self {
            State::Log(_) => State::Log(Default::default()),
            State::Gcra(_) => State::Gcra(Default::default()),
        }
    }

    fn encode(&self) -> String {
        dispatch!(self, encode())
    }

    fn decide(&self, now_ms: i64, limits: &[Limit], cost: u32) -> Admission<State> {
        match self {
            State::Log(s) => {
                let Admission { tally, next } = SlidingLog::decide(s, now_ms, limits, cost);
                Admission { tally, next: next.map(State::Log) }
            }
            State::Gcra(s) => {
                let Admission { tally, next } = Gcra::decide(s, now_ms, limits, cost);
                Admission { tally, next: next.map(State::Gcra) }
            }
        }
    }

    fn record(&self, now_ms: i64, limits: &[Limit], cost: u32) -> (State, Vec<WindowState>) {
        match self {
            State::Log(s) => {
                let (next, windows) = SlidingLog::record(s, now_ms, limits, cost);
                (State::Log(next), windows)
            }
            State::Gcra(s) => {
                let (next, windows) = Gcra::record(s, now_ms, limits, cost);
                (State::Gcra(next), windows)
            }
        }
    }

    fn forgive(&self, now_ms: i64, limits: &[Limit], cost: u32) -> State {
        dispatch!(self, forgive(now_ms, limits, cost) => State)
    }

    fn peek(&self, now_ms: i64, limits: &[Limit]) -> Vec<WindowState> {
        dispatch!(self, peek(now_ms, limits))
    }

    fn expires_at(&self, horizon_ms: u64) -> Option<i64> {
        dispatch!(self, expires_at(horizon_ms))
    }

    fn entries(&self) -> u64 {
        dispatch!(self, entries())
    }

    fn room(&self, now_ms: i64, limits: &[Limit]) -> u64 {
        dispatch!(self, room(now_ms, limits))
    }

    fn lease(&self, now_ms: i64, limits: &[Limit], units: u32, expires_at: i64) -> State {
        dispatch!(self, lease(now_ms, limits, units, expires_at) => State)
    }

    fn refund(&self, now_ms: i64, limits: &[Limit], units: u32, lease_id: i64) -> State {
        dispatch!(self, refund(now_ms, limits, units, lease_id) => State)
    }
}

/// Which algorithm wrote `row`: GCRA rows start with [`gcra::ROW_PREFIX`];
/// any other row, the empty one included, is a sliding log.
fn writer(row: &str) -> Algorithm {
    if row.starts_with(gcra::ROW_PREFIX) {
        Algorithm::Gcra
    } else {
        Algorithm::SlidingLog
    }
}

/// When everything in `row` has expired, its state read by the algorithm
/// that wrote it (given the longest window `horizon_ms`) and its
/// reservations; `None` for an empty row.
fn expiry(text: &str, horizon_ms: u64) -> Result<Option<i64>, CorruptRow> {
    fn read<C: Counter>(state: &str, horizon_ms: u64) -> Result<Option<i64>, CorruptRow> {
        Ok(C::expires_at(&C::decode(state)?, horizon_ms))
    }
    let count = row::decode_count(text)?;
    let state_expiry = match writer(count.state) {
        Algorithm::SlidingLog => read::<SlidingLog>(count.state, horizon_ms),
        Algorithm::Gcra => read::<Gcra>(count.state, horizon_ms),
    }?;
    Ok(state_expiry.max(reservation::last_expiry(&count.held)))
}

/// What the TTL alarm does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlarmAction {
    /// Delete all storage (the alarm goes with it): the row is empty,
    /// expired, or corrupt.
    DeleteAll,
    /// Set the alarm again for this time (Unix ms), strictly after now:
    /// something in the row is still live.
    RearmAt(i64),
}

/// What the alarm firing at `now_ms` does with the stored `row` (empty when
/// none), whose longest window was `horizon_ms` when it was written.
pub(crate) fn on_alarm(row: &str, horizon_ms: u64, now_ms: i64) -> AlarmAction {
    match expiry(row, horizon_ms) {
        Ok(Some(at)) if at > now_ms => AlarmAction::RearmAt(at),
        // Empty, expired, or corrupt (see the module doc).
        _ => AlarmAction::DeleteAll,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::spelling::Spelling;
    use proptest::prelude::*;

    const BOTH: [Algorithm; 2] = [Algorithm::SlidingLog, Algorithm::Gcra];
    const OPS: [Op; 10] = [
        Op::Hit,
        Op::Check,
        Op::Record,
        Op::Status,
        Op::Reset,
        Op::Reserve,
        Op::Commit,
        Op::Release,
        Op::Forgive,
        Op::Clear,
    ];

    fn call(op: Op, algorithm: Algorithm) -> Call {
        Call::new(op, algorithm, vec![Limit::new(2, 1_000).unwrap()]).with_hold_ms(5_000)
    }

    fn row(step: &Step) -> Option<&str> {
        step.write.as_ref().map(|w| w.row.as_str())
    }

    #[test]
    fn sliding_log_steps() {
        let hit = call(Op::Hit, Algorithm::SlidingLog);
        let a = step("", 0, &hit).unwrap();
        assert_eq!(row(&a), Some("0"));
        assert_eq!(a.write.as_ref().map(|w| w.expires_at), Some(1_000));
        let b = step("0", 10, &hit).unwrap();
        assert_eq!(row(&b), Some("0,10"));
        let c = step("0,10", 20, &hit).unwrap();
        assert!(!c.tally.allowed);
        assert_eq!(c.write, None);
        assert_eq!(c.stored, 2);
        assert_eq!(c.tally.retry_after_ms, 980);
        let check = step("0,10", 20, &call(Op::Check, Algorithm::SlidingLog)).unwrap();
        assert!(!check.tally.allowed && check.write.is_none());
        let rec = step("0,10", 20, &call(Op::Record, Algorithm::SlidingLog)).unwrap();
        assert_eq!(row(&rec), Some("0,10,10"));
        assert_eq!(rec.write.as_ref().map(|w| w.expires_at), Some(1_020), "hits at 0, 10, 20");
        assert_eq!(rec.stored, 3);
        let status = step("0,10", 20, &call(Op::Status, Algorithm::SlidingLog)).unwrap();
        assert_eq!((status.tally.windows[0].used, status.stored), (2, 2));
        let reset = step("0,10", 20, &call(Op::Reset, Algorithm::SlidingLog)).unwrap();
        assert_eq!((reset.tally.windows[0].used, reset.stored), (0, 0));
        assert_eq!(expiry("0,10", 1_000), Ok(Some(1_010)));
    }

    #[test]
    fn gcra_steps_and_algorithm_switch() {
        let hit = call(Op::Hit, Algorithm::Gcra);
        let a = step("", 0, &hit).unwrap();
        assert_eq!(row(&a), Some("g:2/1000"), "tat in units of 1/N ms");
        assert_eq!(a.write.as_ref().map(|w| w.expires_at), Some(500));
        let b = step("g:2/1000", 0, &hit).unwrap();
        assert_eq!(row(&b), Some("g:2/2000"));
        let c = step("g:2/2000", 0, &hit).unwrap();
        assert!(!c.tally.allowed);
        assert_eq!(c.tally.retry_after_ms, 500);
        assert_eq!(expiry("g:2/2000", 1_000), Ok(Some(1_000)));
        // A log row read by a GCRA rule (or the reverse) is read towards
        // blocking (count::switch), never as empty: the log's two hits
        // (at 0 and 10) fill 2 per second, and GCRA waits as the log would.
        let switched = step("0,10", 20, &hit).unwrap();
        assert!(!switched.tally.allowed);
        assert_eq!((switched.tally.retry_after_ms, switched.write), (980, None));
        assert!(step("0,10", 1_000, &hit).unwrap().tally.allowed, "free once the log's first hit left");
        let owed = step("g:2/3000", 20, &call(Op::Hit, Algorithm::SlidingLog)).unwrap();
        assert!(!owed.tally.allowed, "GCRA owes 2 units until 500 ms: the log holds 2 hits");
        // GCRA (tat 1500 ms, 500 ms a unit) admits again at 1000 ms: so does the log.
        assert!(!step("g:2/3000", 999, &call(Op::Hit, Algorithm::SlidingLog)).unwrap().tally.allowed);
        assert!(step("g:2/3000", 1_000, &call(Op::Hit, Algorithm::SlidingLog)).unwrap().tally.allowed);
        let switched = step("g:2/40", 20, &call(Op::Hit, Algorithm::SlidingLog)).unwrap();
        assert!(switched.tally.allowed, "a drained GCRA row carries nothing");
        assert_eq!(row(&switched), Some("20"));
    }

    /// Both algorithms refuse a corrupt row, whichever of them wrote it and
    /// whichever the call asks for; never read as empty, which would admit
    /// past the limit. Reset still works, and the alarm deletes the row.
    #[test]
    fn corrupt_rows_are_refused_alike_by_both_algorithms() {
        let corrupt = [
            ("x", CorruptRow::UnreadableHit { index: 0, entry: "x".into() }),
            ("0,10,x", CorruptRow::UnreadableHit { index: 2, entry: "x".into() }),
            ("10,-1", CorruptRow::HitOutOfOrder { index: 1, entry: "-1".into() }),
            ("g:1,2", CorruptRow::UnreadableCell { index: 0, cell: "1".into() }),
            ("g:2/1000,x/1", CorruptRow::UnreadableCell { index: 1, cell: "x/1".into() }),
        ];
        for (stored, why) in corrupt {
            for algorithm in BOTH {
                for op in OPS {
                    let result = step(stored, 500, &call(op, algorithm));
                    if op == Op::Reset {
                        let reset = result.unwrap();
                        assert_eq!((reset.stored, reset.write), (0, None), "{stored:?} {algorithm:?}: reset");
                    } else {
                        assert_eq!(result, Err(why.clone()), "{stored:?} {algorithm:?} {op:?}");
                    }
                }
            }
            assert_eq!(on_alarm(stored, 1_000, 500), AlarmAction::DeleteAll, "{stored:?}");
        }
        let long = "y".repeat(10_000);
        let message = step(&long, 0, &call(Op::Hit, Algorithm::Gcra)).unwrap_err().to_string();
        assert!(message.starts_with("stored row is corrupt: hit 0 (`yyy"), "{message}");
        assert!(message.contains(&format!("`{}`", "y".repeat(32))), "{message}");
        assert!(!message.contains(&"y".repeat(33)), "an excerpt, never the whole row: {message}");
    }

    #[test]
    fn alarm_rearms_while_anything_is_live() {
        assert_eq!(on_alarm("", 1_000, 0), AlarmAction::DeleteAll);
        assert_eq!(on_alarm("0,10", 1_000, 500), AlarmAction::RearmAt(1_010));
        assert_eq!(on_alarm("0,10", 1_000, 1_010), AlarmAction::DeleteAll, "strictly in the future");
        assert_eq!(on_alarm("g:2/2000", 1_000, 999), AlarmAction::RearmAt(1_000));
        assert_eq!(on_alarm("g:2/2000", 1_000, 1_000), AlarmAction::DeleteAll);
        assert_eq!(on_alarm("g:", 1_000, 0), AlarmAction::DeleteAll);
    }

    /// A call of `op` for limit 2 per 1 s, holding reservations 5 s.
    fn settle_call(op: Op, algorithm: Algorithm, reservation: Option<u64>) -> Call {
        call(op, algorithm).with_reservation(reservation)
    }

    /// Applies `call` to `row` at `now` like the object: the row written,
    /// if any, replaces it.
    fn apply(row: &mut String, now: i64, call: &Call) -> Step {
        let step = step(row, now, call).unwrap();
        if let Some(write) = &step.write {
            *row = write.row.clone();
        }
        step
    }

    #[test]
    fn two_phase_counting_is_exact_for_both_algorithms() {
        for algorithm in BOTH {
            let mut row = String::new();
            let reserve = call(Op::Reserve, algorithm);
            let a = apply(&mut row, 0, &reserve);
            let b = apply(&mut row, 1, &reserve);
            assert!(a.tally.allowed && b.tally.allowed, "{algorithm:?}");
            assert_eq!((a.reservation, b.reservation), (Some(0), Some(1_000)), "{algorithm:?}: ids from the clock");
            assert_eq!((b.held, b.write.as_ref().map(|w| w.expires_at)), (2, Some(5_001)), "{algorithm:?}");
            assert_eq!(b.tally.windows[0].used, 2, "{algorithm:?}: reservations are used");
            // Two in flight fill the limit: the third waits, uncached.
            let c = apply(&mut row, 2, &reserve);
            assert!(!c.tally.allowed && c.tally.in_flight && c.write.is_none(), "{algorithm:?}");
            assert!(c.tally.retry_after_ms <= 4_998, "{algorithm:?}: at most until the first reservation lapses");
            // A release frees its slot at once; a commit keeps it as a hit.
            let released = apply(&mut row, 3, &settle_call(Op::Release, algorithm, Some(0)));
            assert_eq!((released.held, released.stored, released.write.is_some()), (1, 0, true), "{algorithm:?}");
            assert!(apply(&mut row, 4, &reserve).tally.allowed, "{algorithm:?}: the released slot");
            let committed = apply(&mut row, 5, &settle_call(Op::Commit, algorithm, Some(1_000)));
            assert_eq!(committed.held, 1, "{algorithm:?}");
            assert_eq!(committed.tally.windows[0].used, 1, "{algorithm:?}: the committed hit");
            let blocked = apply(&mut row, 6, &reserve);
            assert!(!blocked.tally.allowed && blocked.tally.in_flight, "{algorithm:?}: one hit and one in flight");
            let last = apply(&mut row, 7, &settle_call(Op::Commit, algorithm, Some(4_000)));
            assert_eq!((last.held, last.tally.windows[0].used), (0, 2), "{algorithm:?}");
            let full = apply(&mut row, 8, &reserve);
            assert!(!full.tally.allowed && !full.tally.in_flight, "{algorithm:?}: blocked by hits: exact, cacheable");
            assert!(full.tally.retry_after_ms > 400, "{algorithm:?}: the algorithm's own wait");
            assert_eq!(step(&row, 8, &settle_call(Op::Release, algorithm, Some(4_000))).unwrap().write, None, "{algorithm:?}: settled once");
        }
    }

    /// A hit is dated when it commits: it never leaves a window before
    /// the origin's answer is a whole window old.
    #[test]
    fn a_commit_dates_its_hit_at_commit_time() {
        let one = |op| call(op, Algorithm::SlidingLog).with_limits(vec![Limit::new(1, 1_000).unwrap()]);
        let mut row = String::new();
        let id = apply(&mut row, 0, &one(Op::Reserve)).reservation;
        apply(&mut row, 900, &one(Op::Commit).with_reservation(id));
        assert_eq!(row, "900");
        let later = apply(&mut row, 1_500, &one(Op::Reserve));
        assert!(!later.tally.allowed, "reserved at 0, answered at 900: counted until 1 900");
        assert_eq!(later.tally.retry_after_ms, 400);
        assert!(apply(&mut row, 1_900, &one(Op::Reserve)).tally.allowed);
    }

    #[test]
    fn a_lost_reservation_expires_and_the_row_outlives_it() {
        for algorithm in BOTH {
            let mut row = String::new();
            let reserve = call(Op::Reserve, algorithm);
            apply(&mut row, 0, &reserve);
            apply(&mut row, 0, &reserve);
            assert!(!apply(&mut row, 4_999, &reserve).tally.allowed, "{algorithm:?}");
            assert_eq!(on_alarm(&row, 1_000, 2_000), AlarmAction::RearmAt(5_000), "{algorithm:?}: the TTL covers the reservations");
            assert_eq!(on_alarm(&row, 1_000, 5_000), AlarmAction::DeleteAll, "{algorithm:?}");
            let after = apply(&mut row, 5_000, &reserve);
            assert!(after.tally.allowed, "{algorithm:?}: expired at its expiry");
            assert_eq!(after.held, 1, "{algorithm:?}: the lapsed ones were pruned");
            // A late commit of a lapsed reservation still counts.
            let late = apply(&mut row, 5_001, &settle_call(Op::Commit, algorithm, Some(1)));
            assert_eq!((late.held, late.tally.windows[0].used), (1, 1), "{algorithm:?}");
        }
    }

    fn spelled(op: Op, algorithm: Algorithm, reservation: Option<u64>, tag: &str) -> Call {
        settle_call(op, algorithm, reservation).with_spelling(Spelling::decode(tag))
    }

    const ANN: &str = "00000000000000a1";
    const LOOK_ALIKE: &str = "00000000000000b2";

    #[test]
    fn a_success_forgives_or_clears_and_keeps_other_requests_reservations() {
        for algorithm in BOTH {
            let mut row = String::new();
            for t in [0, 1] {
                apply(&mut row, t, &spelled(Op::Commit, algorithm, None, ANN));
            }
            let own = apply(&mut row, 2, &call(Op::Reserve, algorithm).with_limits(vec![Limit::new(4, 1_000).unwrap()]));
            let other = apply(&mut row, 2, &call(Op::Reserve, algorithm).with_limits(vec![Limit::new(4, 1_000).unwrap()]));
            assert!(own.tally.allowed && other.tally.allowed, "{algorithm:?}");
            let forgiven = apply(&mut row, 3, &spelled(Op::Forgive, algorithm, own.reservation, ANN));
            assert_eq!((forgiven.held, forgiven.tally.windows[0].used), (1, 1), "{algorithm:?}: one failure forgiven");
            let cleared = apply(&mut row, 4, &spelled(Op::Clear, algorithm, None, ANN));
            assert_eq!((cleared.held, cleared.tally.windows[0].used), (1, 0), "{algorithm:?}: the other still in flight");
            let again = step(&row, 5, &spelled(Op::Clear, algorithm, None, ANN)).unwrap();
            assert_eq!(again.write, None, "{algorithm:?}: nothing left to clear, nothing written");
            let nothing = step(&row, 5, &spelled(Op::Forgive, algorithm, None, ANN)).unwrap();
            assert_eq!(nothing.tally.windows[0].used, 0, "{algorithm:?}: never below zero");
        }
    }

    /// A look-alike account's success (keyed alike, spelled
    /// otherwise) releases its own slot and relieves nothing else.
    #[test]
    fn a_success_relieves_only_failures_of_its_own_spelling() {
        for algorithm in BOTH {
            let mut row = String::new();
            for t in [0, 1] {
                apply(&mut row, t, &spelled(Op::Commit, algorithm, None, ANN));
            }
            assert!(row.ends_with(&format!("~{ANN}")), "{algorithm:?}: {row}");
            let used = |row: &str| step(row, 3, &call(Op::Status, algorithm)).unwrap().tally.windows[0].used;
            let own = apply(&mut row, 2, &call(Op::Reserve, algorithm));
            let relief = apply(&mut row, 3, &spelled(Op::Clear, algorithm, own.reservation, LOOK_ALIKE));
            assert_eq!((relief.held, used(&row)), (0, 2), "{algorithm:?}: its slot released, the failures kept");
            apply(&mut row, 3, &spelled(Op::Forgive, algorithm, None, LOOK_ALIKE));
            apply(&mut row, 3, &settle_call(Op::Clear, algorithm, None));
            apply(&mut row, 3, &spelled(Op::Clear, algorithm, None, "-"));
            assert_eq!(used(&row), 2, "{algorithm:?}: neither a look-alike, nor no spelling, nor two");
            apply(&mut row, 3, &spelled(Op::Commit, algorithm, None, LOOK_ALIKE));
            assert!(row.ends_with("~*"), "{algorithm:?}: mixed: {row}");
            let mixed = row.clone();
            apply(&mut row, 4, &spelled(Op::Clear, algorithm, None, ANN));
            apply(&mut row, 4, &spelled(Op::Forgive, algorithm, None, LOOK_ALIKE));
            assert_eq!(row, mixed, "{algorithm:?}: a count of two spellings is relieved by neither");
            let cleared = step(&row, 2_000, &spelled(Op::Commit, algorithm, None, LOOK_ALIKE)).unwrap();
            assert!(cleared.write.unwrap().row.ends_with(&format!("~{LOOK_ALIKE}")), "{algorithm:?}: once expired, a fresh mark");
            let other_rule = step("", 0, &settle_call(Op::Commit, algorithm, None)).unwrap();
            assert!(!other_rule.write.unwrap().row.contains('~'), "{algorithm:?}: no mark without relief");
        }
    }

    #[test]
    fn rows_from_before_two_phase_counting_read_unchanged() {
        let reserve = call(Op::Reserve, Algorithm::SlidingLog);
        let step_ = step("0", 10, &reserve).unwrap();
        assert_eq!(step_.write.map(|w| w.row), Some("0;10000@5010".to_string()));
        let step_ = step("g:2/1000", 0, &call(Op::Reserve, Algorithm::Gcra)).unwrap();
        assert_eq!(step_.write.map(|w| w.row), Some("g:2/1000;0@5000".to_string()), "tat untouched by a reserve");
        assert_eq!(
            step("0;x", 10, &reserve),
            Err(CorruptRow::UnreadableReservation { index: 0, entry: "x".into() }),
            "a corrupt reservation is refused like any corrupt row"
        );
        assert_eq!(on_alarm("0;x", 1_000, 10), AlarmAction::DeleteAll);
    }

    fn any_op() -> impl Strategy<Value = Op> {
        prop::sample::select(OPS.to_vec())
    }

    /// A settling op and which live reservation it settles (by index).
    #[derive(Debug, Clone)]
    enum Event {
        Reserve,
        Settle(Op, usize),
    }

    fn any_event() -> impl Strategy<Value = Event> {
        prop_oneof![
            3 => Just(Event::Reserve),
            2 => (prop::sample::select(vec![Op::Commit, Op::Release, Op::Forgive, Op::Clear]), 0usize..8)
                .prop_map(|(op, i)| Event::Settle(op, i)),
        ]
    }

    proptest! {
        /// The two-phase invariant, for both algorithms: at every moment,
        /// the committed hits and the live reservations together fit every
        /// window (a request of their total cost would be allowed), so no
        /// concurrency can admit past the limit.
        #[test]
        fn committed_and_held_never_exceed_the_limit(
            gcra in any::<bool>(),
            events in prop::collection::vec((any_event(), 0i64..300), 1..60),
        ) {
            let algorithm = if gcra { Algorithm::Gcra } else { Algorithm::SlidingLog };
            let limits = vec![Limit::new(3, 1_000).unwrap(), Limit::new(5, 4_000).unwrap()];
            let mut row = String::new();
            let mut now = 1_700_000_000_000i64;
            for (event, dt) in events {
                now += dt;
                let (op, reservation) = match event {
                    Event::Reserve => (Op::Reserve, None),
                    Event::Settle(op, i) => {
                        let held = reservation::live(row::decode_count(&row).unwrap().held, now);
                        (op, held.get(i).map(|r| r.id))
                    }
                };
                if op == Op::Commit && reservation.is_none() {
                    continue; // a commit without a live reservation records beyond the limit, by design
                }
                let call = Call::new(op, algorithm, limits.clone()).with_hold_ms(700).with_reservation(reservation);
                apply(&mut row, now, &call);
                let CountRow { state, held, .. } = row::decode_count(&row).unwrap();
                let units = reservation::units(&reservation::live(held, now));
                if units > 0 {
                    let fits = match algorithm {
                        Algorithm::SlidingLog => SlidingLog::decide(&SlidingLog::decode(state).unwrap(), now, &limits, units as u32).tally.allowed,
                        Algorithm::Gcra => Gcra::decide(&Gcra::decode(state).unwrap_or_default(), now, &limits, units as u32).tally.allowed,
                    };
                    prop_assert!(fits, "{} units held over {:?} at {}", units, row, now);
                }
            }
        }

        /// Every row `step` writes reads back as the same state (so this
        /// code never writes a corrupt row), and its `expires_at` is what
        /// the alarm finds in it.
        #[test]
        fn written_rows_read_back(
            gcra in any::<bool>(),
            calls in prop::collection::vec((any_op(), -50i64..400, 1u32..4, any::<bool>()), 1..40),
        ) {
            let algorithm = if gcra { Algorithm::Gcra } else { Algorithm::SlidingLog };
            let limits = vec![Limit::new(5, 1_000).unwrap(), Limit::new(9, 3_000).unwrap()];
            let mut stored = String::new();
            let mut now = 1_700_000_000_000i64;
            let mut last = None;
            for (op, dt, cost, settle_last) in calls {
                now += dt;
                let reservation = if settle_last { last } else { None };
                let call = Call::new(op, algorithm, limits.clone()).with_cost(cost).with_hold_ms(300).with_reservation(reservation);
                let step = step(&stored, now, &call).unwrap();
                last = step.reservation.or(last);
                if op == Op::Reset {
                    stored.clear();
                }
                if let Some(write) = step.write {
                    // A row left empty (cleared, all forgiven) expires at once.
                    let expires = expiry(&write.row, horizon_ms(&limits)).map(|at| at.unwrap_or(now));
                    prop_assert_eq!(expires, Ok(write.expires_at));
                    let CountRow { state, held, .. } = row::decode_count(&write.row).unwrap();
                    let state = match algorithm {
                        Algorithm::SlidingLog => SlidingLog::decode(state).map(|s| SlidingLog::encode(&s)),
                        Algorithm::Gcra => Gcra::decode(state).map(|s| Gcra::encode(&s)),
                    };
                    let reread = state.map(|s| row::encode_count(s, &held));
                    prop_assert_eq!(reread.as_deref(), Ok(write.row.as_str()));
                    stored = write.row;
                }
            }
        }
    }

    fn lease_call(algorithm: Algorithm, limit: u32, window_ms: u64, want: u32, ttl_ms: u64) -> Call {
        Call::new(Op::Lease, algorithm, vec![Limit::new(limit, window_ms).unwrap()]).with_hold_ms(ttl_ms).with_want(want)
    }

    fn refund_call(algorithm: Algorithm, limit: u32, window_ms: u64, units: u32, lease_id: u64) -> Call {
        lease_call(algorithm, limit, window_ms, 1, 1).with_op(Op::Refund).with_cost(units).with_hold_ms(None).with_want(None).with_reservation(lease_id)
    }

    /// A lease debits its grant at once, dated at its expiry; a refund
    /// gives unspent units back; `g = 0` carries the exact retry-after.
    #[test]
    fn sliding_log_leases_are_dated_at_their_expiry() {
        let mut row = String::new();
        let a = apply(&mut row, 10_000, &lease_call(Algorithm::SlidingLog, 100, 60_000, 40, 1_000));
        assert_eq!((a.granted, a.reservation), (Some(25), Some(11_000)), "a quarter of the room");
        assert_eq!(row, "11000*25");
        assert_eq!(a.tally.windows[0].used, 25);
        let hit = call(Op::Hit, Algorithm::SlidingLog).with_limits(vec![Limit::new(100, 60_000).unwrap()]);
        let h = apply(&mut row, 10_500, &hit);
        assert!(h.tally.allowed);
        assert_eq!(row, "11000*25,0", "a hit behind a lease is dated at it, the log stays sorted");
        let r = apply(&mut row, 12_000, &refund_call(Algorithm::SlidingLog, 100, 60_000, 10, 11_000));
        assert_eq!(r.tally.windows[0].used, 16, "25 − 10 + the hit");
        assert_eq!(row, "11000*16", "hits of the same date are alike: the refund takes 10 of the 26 units dated 11 000");
        // Fill it up: blocked, retry-after until the lease's hits leave.
        let mut now = 12_000;
        while apply(&mut row, now, &lease_call(Algorithm::SlidingLog, 100, 60_000, 40, 1_000)).granted != Some(0) {
            now += 1;
        }
        let blocked = step(&row, now, &lease_call(Algorithm::SlidingLog, 100, 60_000, 40, 1_000)).unwrap();
        assert!(!blocked.tally.allowed && blocked.write.is_none());
        assert_eq!(blocked.tally.retry_after_ms, 71_000 - now as u64, "dated 11 000: out of the window at 71 000");
        // A refund of a lease that does not exist changes nothing.
        assert_eq!(step(&row, now, &refund_call(Algorithm::SlidingLog, 100, 60_000, 5, 999)).unwrap().write, None);
    }

    #[test]
    fn gcra_leases_move_tat_and_refunds_move_it_back() {
        let mut row = String::new();
        let a = apply(&mut row, 0, &lease_call(Algorithm::Gcra, 100, 1_000, 40, 500));
        assert_eq!(a.granted, Some(25));
        assert_eq!(a.tally.windows[0].used, 25);
        let r = apply(&mut row, 0, &refund_call(Algorithm::Gcra, 100, 1_000, 5, a.reservation.unwrap()));
        assert_eq!(r.tally.windows[0].used, 20);
        for _ in 0..100 {
            apply(&mut row, 0, &lease_call(Algorithm::Gcra, 100, 1_000, 40, 500));
        }
        let blocked = step(&row, 0, &lease_call(Algorithm::Gcra, 100, 1_000, 40, 500)).unwrap();
        assert_eq!((blocked.granted, blocked.tally.allowed), (Some(0), false));
        assert_eq!(blocked.tally.retry_after_ms, 10, "T = 10 ms: the exact wait for one unit");
    }

    /// An isolate's view for the property tests: tokens held until an
    /// expiry, spent at random times no later than it.
    #[derive(Debug, Clone)]
    struct Held {
        units: u32,
        lease_id: u64,
        expires_at: i64,
    }

    #[derive(Debug, Clone)]
    enum LeaseEvent {
        /// Isolate `i` asks for `want` (1: a plain hit), the call sent
        /// `delay` ms before the object sees it.
        Ask { isolate: usize, want: u32, delay: i64 },
        /// Isolate `i` spends one held token, if it has one.
        Spend(usize),
        /// Isolate `i` refunds what it holds once expired.
        Refund(usize),
        /// Isolate `i` is evicted: its tokens lapse.
        Evict(usize),
    }

    fn any_lease_event() -> impl Strategy<Value = LeaseEvent> {
        prop_oneof![
            3 => (0usize..4, 1u32..12, 0i64..40).prop_map(|(isolate, want, delay)| LeaseEvent::Ask { isolate, want, delay }),
            6 => (0usize..4).prop_map(LeaseEvent::Spend),
            1 => (0usize..4).prop_map(LeaseEvent::Refund),
            1 => (0usize..4).prop_map(LeaseEvent::Evict),
        ]
    }

    /// Runs the events against one object, like isolates would, and
    /// returns the real times at which a unit was admitted.
    fn run_leases(algorithm: Algorithm, limits: &[Limit], ttl: u64, events: &[(LeaseEvent, i64)]) -> Vec<i64> {
        let mut row = String::new();
        let mut now = 1_700_000_000_000i64;
        let mut held: Vec<Option<Held>> = vec![None; 4];
        let mut admitted = Vec::new();
        for (event, dt) in events {
            now += dt;
            match *event {
                LeaseEvent::Ask { isolate, want, delay } => {
                    // Sent at `now`, seen by the object `delay` ms later.
                    let sent = now;
                    let call = lease_call(algorithm, 1, 1, 1, ttl).with_want(want).with_limits(limits.to_vec());
                    let call = if want == 1 { call.with_op(Op::Hit).with_want(None).with_hold_ms(None) } else { call };
                    let s = apply(&mut row, now + delay, &call);
                    if s.tally.allowed {
                        admitted.push(now + delay);
                        let extra = s.granted.unwrap_or(1).saturating_sub(1) as u32;
                        if extra > 0 {
                            held[isolate] = Some(Held { units: extra, lease_id: s.reservation.unwrap(), expires_at: sent + ttl as i64 });
                        }
                    }
                }
                LeaseEvent::Spend(i) => {
                    if let Some(h) = held[i].as_mut().filter(|h| h.units > 0 && now < h.expires_at) {
                        h.units -= 1;
                        admitted.push(now);
                    }
                }
                LeaseEvent::Refund(i) => {
                    if let Some(h) = held[i].take_if(|h| now >= h.expires_at) {
                        let call = refund_call(algorithm, 1, 1, h.units.max(1), h.lease_id).with_limits(limits.to_vec());
                        if h.units > 0 {
                            apply(&mut row, now, &call);
                        }
                    }
                }
                LeaseEvent::Evict(i) => held[i] = None,
            }
        }
        admitted
    }

    /// The most units admitted in any half-open interval of `window` ms.
    fn worst_window(admitted: &[i64], window: i64) -> usize {
        let mut sorted = admitted.to_vec();
        sorted.sort_unstable();
        let mut worst = 0;
        let mut start = 0;
        for end in 0..sorted.len() {
            while sorted[end] - sorted[start] >= window {
                start += 1;
            }
            worst = worst.max(end - start + 1);
        }
        worst
    }

    proptest! {
        /// Committed hits and leased tokens, spent whenever before their
        /// lease's expiry by isolates that ask, spend, refund and vanish
        /// in any interleaving, never exceed the limit in any real window.
        #[test]
        fn committed_and_leased_never_exceed_the_limit(
            events in prop::collection::vec((any_lease_event(), 0i64..120), 1..200),
            ttl in 1u64..900,
        ) {
            let limits = [Limit::new(12, 1_000).unwrap(), Limit::new(30, 5_000).unwrap()];
            let admitted = run_leases(Algorithm::SlidingLog, &limits, ttl, &events);
            prop_assert!(worst_window(&admitted, 1_000) <= 12, "{:?}", admitted);
            prop_assert!(worst_window(&admitted, 5_000) <= 30, "{:?}", admitted);
        }

        /// GCRA with leases: at most `2N − 1 + ⌈ttl·N/W⌉` units spent in
        /// any window of real use (see `crate::count::lease`).
        #[test]
        fn gcra_lease_bound(
            events in prop::collection::vec((any_lease_event(), 0i64..60), 1..300),
            ttl in 1u64..900,
        ) {
            let (n, w) = (12u64, 1_000u64);
            let limits = [Limit::new(n as u32, w).unwrap()];
            let admitted = run_leases(Algorithm::Gcra, &limits, ttl, &events);
            let bound = 2 * n - 1 + (ttl * n).div_ceil(w);
            prop_assert!(worst_window(&admitted, w as i64) as u64 <= bound, "{:?}", admitted);
        }
    }

    /// Usage reported by the origin: a commit counts `used`
    /// instead of the reservation's cost; 0 releases.
    #[test]
    fn a_commit_counts_the_usage_the_origin_reported() {
        for algorithm in BOTH {
            let budget = |op| call(op, algorithm).with_limits(vec![Limit::new(10, 1_000).unwrap()]).with_cost(4);
            let mut row = String::new();
            let a = apply(&mut row, 0, &budget(Op::Reserve)).reservation;
            let b = apply(&mut row, 0, &budget(Op::Reserve)).reservation;
            assert!(!apply(&mut row, 0, &budget(Op::Reserve)).tally.allowed, "{algorithm:?}: 8 held, 4 more do not fit");
            let used = apply(&mut row, 1, &budget(Op::Commit).with_reservation(a).with_used(1));
            assert_eq!((used.held, used.tally.windows[0].used), (1, 1), "{algorithm:?}: 1 committed (4 still held)");
            let nothing = apply(&mut row, 2, &budget(Op::Commit).with_reservation(b).with_used(0));
            assert_eq!((nothing.held, nothing.tally.windows[0].used), (0, 1), "{algorithm:?}: 0 used: released");
            let c = apply(&mut row, 3, &budget(Op::Reserve)).reservation;
            let missing = apply(&mut row, 3, &budget(Op::Commit).with_reservation(c));
            assert_eq!(missing.tally.windows[0].used, 5, "{algorithm:?}: no usage: the reservation's cost");
            let unknown = apply(&mut row, 4, &budget(Op::Commit).with_reservation(1).with_used(0));
            assert!(unknown.write.is_none(), "{algorithm:?}: nothing used, nothing held: nothing written");
        }
    }

    proptest! {
        /// The over-commit bound: requests admitted with `reserve` held that
        /// each commit at most `max` exceed the limit by at most (requests
        /// in flight) × (`max` − `reserve`); by nothing with `reserve = max`.
        #[test]
        fn usage_overcommits_at_most_in_flight_times_max_minus_reserve(
            reserve in 1u32..=5, extra in 0u32..=5, events in prop::collection::vec((any::<bool>(), 0u32..=10, 0usize..8), 1..60),
        ) {
            let (limit, max) = (10u64, reserve + extra);
            for algorithm in BOTH {
                let budget = |op| call(op, algorithm).with_limits(vec![Limit::new(limit as u32, 1_000_000).unwrap()]).with_cost(reserve);
                let (mut row, mut in_flight, mut committed, mut most_in_flight) = (String::new(), Vec::new(), 0u64, 0u64);
                for (t, (reserve_now, used, pick)) in events.iter().enumerate() {
                    let now = t as i64;
                    if *reserve_now || in_flight.is_empty() {
                        if let Some(id) = apply(&mut row, now, &budget(Op::Reserve)).reservation {
                            in_flight.push(id);
                            most_in_flight = most_in_flight.max(in_flight.len() as u64);
                        }
                    } else {
                        let id = in_flight.remove(pick % in_flight.len());
                        let used = (*used).min(max);
                        apply(&mut row, now, &budget(Op::Commit).with_reservation(id).with_used(used));
                        committed += u64::from(used);
                    }
                }
                let bound = limit + most_in_flight * u64::from(max - reserve);
                prop_assert!(committed <= bound, "{algorithm:?}: {committed} > {bound}");
                if extra == 0 {
                    prop_assert!(committed <= limit, "{algorithm:?}: reserve = max is exact");
                }
            }
        }
    }
}
