//! One step of a limiter object, pure: (stored row, now, call) → tally
//! and the row to write. The Durable Object only loads, stores and keeps
//! its alarm; everything it decides is decided here, once for both
//! algorithms: each is a `Counter` (a state kept in one text row, and
//! pure functions of state, now and limits), and [`step`] and [`on_alarm`]
//! are written over that trait.
//!
//! The stored row is a sliding log ([`crate::window::encode_log`]) or a
//! GCRA state (`g:...`, [`crate::gcra::encode`]); its prefix says which
//! algorithm wrote it. A row of the other kind (the rule's algorithm was
//! changed in the config) reads as empty. Rows written by earlier versions
//! read unchanged: both formats are as they were.
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

use crate::gcra::{self, Gcra};
use crate::protocol::{Algorithm, Call, Op};
use crate::window::{horizon_ms, Limit, SlidingLog, WindowState};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What both algorithms are to a limiter object: a state kept in one text
/// row, and pure functions of (state, now, limits) that never read the
/// clock. [`step`] and [`on_alarm`] are written once over this.
pub(crate) trait Counter {
    /// The call's `alg` that selects this algorithm.
    const ALGORITHM: Algorithm;
    /// What one row holds; `Default` is the empty row.
    type State: Default;

    /// Reads a row this algorithm wrote (its [`writer`]).
    fn decode(row: &str) -> Result<Self::State, CorruptRow>;
    /// The row to store; [`Counter::decode`] reads it back unchanged.
    fn encode(state: &Self::State) -> String;
    /// Check-and-record: the tally for a request of `cost`, and the state
    /// to store when it is allowed.
    fn decide(state: &Self::State, now_ms: i64, limits: &[Limit], cost: u32) -> Decision<Self::State>;
    /// Records `cost` whatever the limits say (the second half of a
    /// failures-only rule): the state to store and the windows after it.
    fn record(state: &Self::State, now_ms: i64, limits: &[Limit], cost: u32) -> (Self::State, Vec<WindowState>);
    /// The windows, recording nothing.
    fn peek(state: &Self::State, now_ms: i64, limits: &[Limit]) -> Vec<WindowState>;
    /// When everything in `state` has expired (Unix ms), given the longest
    /// window `horizon_ms`; `None` when it holds nothing.
    fn expires_at(state: &Self::State, horizon_ms: u64) -> Option<i64>;
    /// Entries held (hits of a log, windows of a GCRA state): the reply's
    /// `stored_hits`.
    fn entries(state: &Self::State) -> u64;
}

/// What a limiter decided for one request, whichever algorithm decided it;
/// a [`crate::protocol::Reply`] carries it to the Worker, with the windows
/// in their wire form (`W` = [`crate::protocol::WireWindow`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally<W = WindowState> {
    pub allowed: bool,
    /// Exact milliseconds (rounded up) until a request of the same cost
    /// would be allowed; 0 when allowed.
    pub retry_after_ms: u64,
    /// One entry per limit of the call, in its order.
    pub windows: Vec<W>,
    /// When blocked, the index in `windows` of the window that sets
    /// `retry_after_ms` (the first of the longest waits).
    #[serde(rename = "binding_window", default)]
    pub binding: Option<usize>,
}

impl<W> Tally<W> {
    /// Allowed, nothing to wait for: what a record or a status reports.
    pub fn allowing(windows: Vec<W>) -> Tally<W> {
        Tally { allowed: true, retry_after_ms: 0, windows, binding: None }
    }

    /// The same tally with each window converted (to its wire form, say).
    pub fn map_windows<V>(self, convert: impl FnMut(W) -> V) -> Tally<V> {
        Tally {
            allowed: self.allowed,
            retry_after_ms: self.retry_after_ms,
            windows: self.windows.into_iter().map(convert).collect(),
            binding: self.binding,
        }
    }
}

/// An algorithm's decision: the tally and, when allowed, the state `S` to
/// store. A blocked request changes nothing, so its `next` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision<S> {
    pub tally: Tally,
    pub next: Option<S>,
}

/// Why a stored row cannot be read back. See the module doc for what the
/// object does then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorruptRow {
    /// Sliding-log entry `index` is not `at` or `at*cost` in whole numbers,
    /// or its time overflows.
    UnreadableHit { index: usize, entry: String },
    /// Sliding-log entry `index` is dated before the one before it.
    HitOutOfOrder { index: usize, entry: String },
    /// GCRA cell `index` is not `N/tat` in whole numbers.
    UnreadableCell { index: usize, cell: String },
    /// Read as a GCRA state, but the row does not start with `g:`.
    NotGcra(String),
}

impl fmt::Display for CorruptRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stored row is corrupt: ")?;
        match self {
            CorruptRow::UnreadableHit { index, entry } => {
                write!(f, "hit {index} (`{entry}`) is not `at` or `at*cost` in whole numbers")
            }
            CorruptRow::HitOutOfOrder { index, entry } => write!(f, "hit {index} (`{entry}`) goes back in time"),
            CorruptRow::UnreadableCell { index, cell } => write!(f, "GCRA cell {index} (`{cell}`) is not `N/tat`"),
            CorruptRow::NotGcra(row) => write!(f, "`{row}` does not start with `g:`"),
        }
    }
}

impl std::error::Error for CorruptRow {}

/// At most the first 32 characters of `text`: enough to recognise a bad
/// entry in an error, never a whole row.
pub(crate) fn excerpt(text: &str) -> String {
    text.chars().take(32).collect()
}

/// What one call decided, and what to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub tally: Tally,
    /// The row to write, if anything changes (never for a blocked hit).
    pub write: Option<Write>,
    /// Entries (hits, or GCRA windows) in the row after this step.
    pub stored: u64,
}

/// A row to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub row: String,
    /// When everything in `row` will have expired (Unix ms): the time the
    /// TTL alarm is armed for.
    pub expires_at: i64,
}

/// Applies `call` at `now_ms` to the stored `row` (empty when none).
/// `Op::Reset` is the object's business (it deletes its storage); here it
/// reads as a status of an empty row, and does not read `row`, so that a
/// corrupt row can be reset. Any other call on a corrupt row is refused.
pub fn step(row: &str, now_ms: i64, call: &Call) -> Result<Step, CorruptRow> {
    match call.algorithm {
        Algorithm::SlidingLog => run::<SlidingLog>(row, now_ms, call),
        Algorithm::Gcra => run::<Gcra>(row, now_ms, call),
    }
}

fn run<C: Counter>(row: &str, now_ms: i64, call: &Call) -> Result<Step, CorruptRow> {
    let limits = &call.limits;
    let state = if call.op == Op::Reset { C::State::default() } else { load::<C>(row)? };
    let stored = C::entries(&state);
    Ok(match call.op {
        Op::Hit => {
            let Decision { tally, next } = C::decide(&state, now_ms, limits, call.cost);
            match next {
                Some(next) => written::<C>(tally, &next, now_ms, limits),
                None => Step { tally, write: None, stored },
            }
        }
        Op::Check => {
            let tally = C::decide(&state, now_ms, limits, call.cost).tally;
            let windows = C::peek(&state, now_ms, limits);
            Step { tally: Tally { windows, ..tally }, write: None, stored }
        }
        Op::Record => {
            let (next, windows) = C::record(&state, now_ms, limits, call.cost);
            written::<C>(Tally::allowing(windows), &next, now_ms, limits)
        }
        Op::Status | Op::Reset => {
            Step { tally: Tally::allowing(C::peek(&state, now_ms, limits)), write: None, stored }
        }
    })
}

fn written<C: Counter>(tally: Tally, next: &C::State, now_ms: i64, limits: &[Limit]) -> Step {
    let expires_at = C::expires_at(next, horizon_ms(limits)).unwrap_or(now_ms);
    Step {
        tally,
        write: Some(Write { row: C::encode(next), expires_at }),
        stored: C::entries(next),
    }
}

/// `row` as `C`'s state. A row of the other algorithm reads as empty, but
/// is still refused if that algorithm cannot read it.
fn load<C: Counter>(row: &str) -> Result<C::State, CorruptRow> {
    if writer(row) == C::ALGORITHM {
        C::decode(row)
    } else {
        expiry(row, 0).map(|_| C::State::default())
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

/// When everything in `row` has expired, read by the algorithm that wrote
/// it, given the longest window `horizon_ms`; `None` for an empty row.
fn expiry(row: &str, horizon_ms: u64) -> Result<Option<i64>, CorruptRow> {
    fn read<C: Counter>(row: &str, horizon_ms: u64) -> Result<Option<i64>, CorruptRow> {
        Ok(C::expires_at(&C::decode(row)?, horizon_ms))
    }
    match writer(row) {
        Algorithm::SlidingLog => read::<SlidingLog>(row, horizon_ms),
        Algorithm::Gcra => read::<Gcra>(row, horizon_ms),
    }
}

/// What the TTL alarm does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmAction {
    /// Delete all storage (the alarm goes with it): the row is empty,
    /// expired, or corrupt.
    DeleteAll,
    /// Set the alarm again for this time (Unix ms), strictly after now:
    /// something in the row is still live.
    RearmAt(i64),
}

/// What the alarm firing at `now_ms` does with the stored `row` (empty when
/// none), whose longest window was `horizon_ms` when it was written.
pub fn on_alarm(row: &str, horizon_ms: u64, now_ms: i64) -> AlarmAction {
    match expiry(row, horizon_ms) {
        Ok(Some(at)) if at > now_ms => AlarmAction::RearmAt(at),
        // Empty, expired, or corrupt (see the module doc).
        _ => AlarmAction::DeleteAll,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BOTH: [Algorithm; 2] = [Algorithm::SlidingLog, Algorithm::Gcra];
    const OPS: [Op; 5] = [Op::Hit, Op::Check, Op::Record, Op::Status, Op::Reset];

    fn call(op: Op, algorithm: Algorithm) -> Call {
        Call {
            op,
            algorithm,
            limits: vec![Limit::new(2, 1_000).unwrap()],
            cost: 1,
        }
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
        // A log row read by a GCRA rule (or the reverse) starts afresh.
        let switched = step("0,10", 20, &hit).unwrap();
        assert!(switched.tally.allowed);
        assert_eq!(row(&switched), Some("g:2/1040"));
        let switched = step("g:2/99999", 20, &call(Op::Hit, Algorithm::SlidingLog)).unwrap();
        assert!(switched.tally.allowed);
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

    fn any_op() -> impl Strategy<Value = Op> {
        prop::sample::select(OPS.to_vec())
    }

    proptest! {
        /// Every row `step` writes reads back as the same state (so this
        /// code never writes a corrupt row), and its `expires_at` is what
        /// the alarm finds in it.
        #[test]
        fn written_rows_read_back(
            gcra in any::<bool>(),
            calls in prop::collection::vec((any_op(), -50i64..400, 1u32..4), 1..40),
        ) {
            let algorithm = if gcra { Algorithm::Gcra } else { Algorithm::SlidingLog };
            let limits = vec![Limit::new(5, 1_000).unwrap(), Limit::new(9, 3_000).unwrap()];
            let mut stored = String::new();
            let mut now = 1_700_000_000_000i64;
            for (op, dt, cost) in calls {
                now += dt;
                let call = Call { op, algorithm, limits: limits.clone(), cost };
                let step = step(&stored, now, &call).unwrap();
                if op == Op::Reset {
                    stored.clear();
                }
                if let Some(write) = step.write {
                    prop_assert_eq!(expiry(&write.row, horizon_ms(&limits)), Ok(Some(write.expires_at)));
                    let reread = match algorithm {
                        Algorithm::SlidingLog => SlidingLog::decode(&write.row).map(|s| SlidingLog::encode(&s)),
                        Algorithm::Gcra => Gcra::decode(&write.row).map(|s| Gcra::encode(&s)),
                    };
                    prop_assert_eq!(reread.as_deref(), Ok(write.row.as_str()));
                    stored = write.row;
                }
            }
        }
    }
}
