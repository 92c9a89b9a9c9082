//! The contract of a counting algorithm: which one counts ([`Algorithm`]),
//! what each is to a limiter object (the `Counter` trait: a state kept in
//! one text row and pure functions of state, now and limits), what it
//! decides ([`Admission`]) and why a row cannot be read back
//! ([`CorruptRow`]). The sliding log ([`crate::count::window`]) and GCRA
//! ([`crate::count::gcra`]) implement it; the object's step
//! ([`crate::count::counter`]) is written once over it.

use crate::count::limit::{Limit, WindowState};
use crate::count::tally::Tally;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How an object counts: the exact sliding log (default) or O(1) GCRA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    #[default]
    SlidingLog,
    Gcra,
}

impl Algorithm {
    pub(crate) fn is_default(&self) -> bool {
        *self == Algorithm::SlidingLog
    }
}

/// What both algorithms are to a limiter object: a state kept in one text
/// row, and pure functions of (state, now, limits) that never read the
/// clock. [`crate::count::counter::step`] and
/// [`crate::count::counter::on_alarm`] are written once over this.
pub(crate) trait Counter {
    /// What one row holds; `Default` is the empty row.
    type State: Default + PartialEq;

    /// Reads a row this algorithm wrote (its row's prefix says so).
    fn decode(row: &str) -> Result<Self::State, CorruptRow>;
    /// The row to store; [`Counter::decode`] reads it back unchanged.
    fn encode(state: &Self::State) -> String;
    /// Check-and-record: the tally for a request of `cost`, and the state
    /// to store when it is allowed.
    fn decide(state: &Self::State, now_ms: i64, limits: &[Limit], cost: u32) -> Admission<Self::State>;
    /// Records `cost` whatever the limits say (the second half of a
    /// failures-only rule): the state to store and the windows after it.
    fn record(state: &Self::State, now_ms: i64, limits: &[Limit], cost: u32) -> (Self::State, Vec<WindowState>);
    /// Takes back `cost` units of what was recorded, the newest first,
    /// never below nothing (a success on a `decrement` rule).
    fn forgive(state: &Self::State, now_ms: i64, limits: &[Limit], cost: u32) -> Self::State;
    /// The windows, recording nothing.
    fn peek(state: &Self::State, now_ms: i64, limits: &[Limit]) -> Vec<WindowState>;
    /// When everything in `state` has expired (Unix ms), given the longest
    /// window `horizon_ms`; `None` when it holds nothing.
    fn expires_at(state: &Self::State, horizon_ms: u64) -> Option<i64>;
    /// Entries held (hits of a log, windows of a GCRA state): the reply's
    /// `stored_hits`.
    fn entries(state: &Self::State) -> u64;
    /// The most units a request (or a lease) could take at `now_ms`: the
    /// least room left in any window. `decide` allows a cost iff it is at
    /// most this.
    fn room(state: &Self::State, now_ms: i64, limits: &[Limit]) -> u64;
    /// Debits `units` leased at `now_ms` that may be spent until
    /// `expires_at` (see [`crate::count::lease`]); the caller checked they fit.
    fn lease(state: &Self::State, now_ms: i64, limits: &[Limit], units: u32, expires_at: i64) -> Self::State;
    /// Gives back up to `units` unspent units of the lease that expired (or
    /// expires) at `lease_id`; never more than that lease debited.
    fn refund(state: &Self::State, now_ms: i64, limits: &[Limit], units: u32, lease_id: i64) -> Self::State;
}

/// An algorithm's decision: the tally and, when allowed, the state `S` to
/// store. A blocked request changes nothing, so its `next` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission<S> {
    pub tally: Tally,
    pub(crate) next: Option<S>,
}

/// Why a stored row cannot be read back. See the module doc for what the
/// object does then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CorruptRow {
    /// Sliding-log entry `index` is not `at` or `at*cost` in whole numbers,
    /// or its time overflows.
    UnreadableHit { index: usize, entry: String },
    /// Sliding-log entry `index` is dated before the one before it.
    HitOutOfOrder { index: usize, entry: String },
    /// GCRA cell `index` is not `N/tat` in whole numbers.
    UnreadableCell { index: usize, cell: String },
    /// Read as a GCRA state, but the row does not start with `g:`.
    NotGcra(String),
    /// Reservation `index` is not `id@expires_at` or `id@expires_at*cost`
    /// in whole numbers.
    UnreadableReservation { index: usize, entry: String },
    /// A penalty's prefix ([`crate::count::penalty`]) that is not
    /// `!{until_ms}|` (an excerpt of the row).
    UnreadablePenalty(String),
    /// A row of a spelling after version 1 (`#{version}|...`,
    /// [`crate::count::row`]), written by a later release (an excerpt).
    NewerRow(String),
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
            CorruptRow::UnreadableReservation { index, entry } => {
                write!(f, "reservation {index} (`{entry}`) is not `id@expires_at` in whole numbers")
            }
            CorruptRow::UnreadablePenalty(row) => write!(f, "the penalty of `{row}` is not `!until_ms|`"),
            CorruptRow::NewerRow(row) => write!(f, "`{row}` is of a later version than this object reads"),
        }
    }
}

impl std::error::Error for CorruptRow {}

/// `n` in decimal, appended to `out` (as `n.to_string()` writes it),
/// without the formatter: the row and reply codecs write several per call.
pub(crate) fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits: always UTF-8.
    if let Ok(text) = std::str::from_utf8(&digits[at..]) {
        out.push_str(text);
    }
}

/// `n` in decimal, appended to `out` (as `n.to_string()` writes it: a `-`
/// before a negative one).
pub(crate) fn push_i64(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    push_u64(out, n.unsigned_abs());
}

/// At most the first 32 characters of `text`: enough to recognise a bad
/// entry in an error, never a whole row.
pub(crate) fn excerpt(text: &str) -> String {
    text.chars().take(32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_as_to_string_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 1_700_000_000_000, u64::MAX - 1, u64::MAX] {
            let mut out = String::from("x");
            push_u64(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
        for n in [0, 1, -1, 10, -10, 1_700_000_000_000, -1_700_000_000_000, i64::MAX, i64::MIN] {
            let mut out = String::new();
            push_i64(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }
}
