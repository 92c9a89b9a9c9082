//! One step of a limiter object, pure: (stored row, now, call) → reply
//! fields and the row to write. The Durable Object only loads, stores and
//! keeps its alarm; everything it decides is decided here.
//!
//! The stored row is text: a sliding log ([`crate::window::encode_log`]) or
//! a GCRA state (`g:...`, [`crate::gcra::encode`]). A row of the other kind
//! (the rule's algorithm was changed in the config) reads as empty.

use crate::gcra;
use crate::protocol::{Algorithm, Call, Op};
use crate::window::{self, LogFormatError, WindowState};
use serde::{Deserialize, Serialize};

/// What a limiter decided for one request, whichever algorithm decided it;
/// a [`crate::protocol::Reply`] carries it to the Worker, with the windows
/// in their wire form (`W` = [`crate::protocol::WireWindow`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict<W = WindowState> {
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

impl<W> Verdict<W> {
    /// Allowed, nothing to wait for: what a record or a status reports.
    pub fn allowing(windows: Vec<W>) -> Verdict<W> {
        Verdict { allowed: true, retry_after_ms: 0, windows, binding: None }
    }

    /// The same verdict with each window converted (to its wire form, say).
    pub fn map_windows<V>(self, convert: impl FnMut(W) -> V) -> Verdict<V> {
        Verdict {
            allowed: self.allowed,
            retry_after_ms: self.retry_after_ms,
            windows: self.windows.into_iter().map(convert).collect(),
            binding: self.binding,
        }
    }
}

/// An algorithm's decision: the verdict and, when allowed, the state `S` to
/// store. A blocked request changes nothing, so its `next` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision<S> {
    pub verdict: Verdict,
    pub next: Option<S>,
}

/// What one call decided, and what to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub verdict: Verdict,
    /// The row to write, if anything changes (never for a blocked hit).
    pub write: Option<String>,
    /// Entries (hits, or GCRA windows) in the row after this step.
    pub stored: u64,
}

/// Applies `call` at `now_ms` to the `stored` row (empty when none).
/// `Op::Reset` is the object's business (it deletes its storage); here it
/// reads as a status of an empty row.
pub fn step(stored: &str, now_ms: i64, call: &Call) -> Result<Step, LogFormatError> {
    match call.algorithm {
        Algorithm::SlidingLog => {
            let log = if stored.starts_with("g:") { Vec::new() } else { window::decode_log(stored)? };
            let stored_len = log.len() as u64;
            Ok(match call.op {
                Op::Hit => {
                    let d = window::decide(&log, now_ms, &call.limits, call.cost);
                    Step {
                        verdict: d.verdict,
                        stored: d.next.as_ref().map_or(stored_len, |l| l.len() as u64),
                        write: d.next.map(|l| window::encode_log(&l)),
                    }
                }
                Op::Check => {
                    let d = window::decide(&log, now_ms, &call.limits, call.cost);
                    Step {
                        verdict: Verdict { windows: window::peek(&log, now_ms, &call.limits), ..d.verdict },
                        write: None,
                        stored: stored_len,
                    }
                }
                Op::Record => {
                    let (new_log, windows) = window::record(&log, now_ms, &call.limits, call.cost);
                    Step {
                        verdict: Verdict::allowing(windows),
                        stored: new_log.len() as u64,
                        write: Some(window::encode_log(&new_log)),
                    }
                }
                Op::Status => idle(window::peek(&log, now_ms, &call.limits), stored_len),
                Op::Reset => idle(window::peek(&[], now_ms, &call.limits), 0),
            })
        }
        Algorithm::Gcra => {
            let state = gcra::decode(stored).unwrap_or_default();
            let stored_len = state.len() as u64;
            Ok(match call.op {
                Op::Hit | Op::Check => {
                    let d = gcra::decide(&state, now_ms, &call.limits, call.cost);
                    let write = (call.op == Op::Hit).then_some(d.next.as_ref()).flatten();
                    let windows = if call.op == Op::Hit { d.verdict.windows } else { gcra::peek(&state, now_ms, &call.limits) };
                    Step {
                        verdict: Verdict { windows, ..d.verdict },
                        stored: write.map_or(stored_len, |s| s.len() as u64),
                        write: write.map(|s| gcra::encode(s)),
                    }
                }
                Op::Record => {
                    let (next, windows) = gcra::record(&state, now_ms, &call.limits, call.cost);
                    Step {
                        verdict: Verdict::allowing(windows),
                        stored: next.len() as u64,
                        write: Some(gcra::encode(&next)),
                    }
                }
                Op::Status => idle(gcra::peek(&state, now_ms, &call.limits), stored_len),
                Op::Reset => idle(gcra::peek(&[], now_ms, &call.limits), 0),
            })
        }
    }
}

fn idle(windows: Vec<WindowState>, stored: u64) -> Step {
    Step { verdict: Verdict::allowing(windows), write: None, stored }
}

/// When everything in the `stored` row has expired, given the longest
/// window `horizon_ms`: the moment the object may delete its storage.
/// `None` for an empty or unreadable row (delete at once).
pub fn expiry(stored: &str, horizon_ms: u64) -> Option<i64> {
    if stored.starts_with("g:") {
        return gcra::decode(stored).and_then(|s| gcra::expires_at(&s));
    }
    let log = window::decode_log(stored).ok()?;
    window::expires_at(&log, horizon_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Limit;

    fn call(op: Op, algorithm: Algorithm) -> Call {
        Call {
            op,
            algorithm,
            limits: vec![Limit::new(2, 1_000).unwrap()],
            cost: 1,
        }
    }

    #[test]
    fn sliding_log_steps() {
        let hit = call(Op::Hit, Algorithm::SlidingLog);
        let a = step("", 0, &hit).unwrap();
        assert_eq!(a.write.as_deref(), Some("0"));
        let b = step("0", 10, &hit).unwrap();
        assert_eq!(b.write.as_deref(), Some("0,10"));
        let c = step("0,10", 20, &hit).unwrap();
        assert!(!c.verdict.allowed);
        assert_eq!(c.write, None);
        assert_eq!(c.verdict.retry_after_ms, 980);
        let check = step("0,10", 20, &call(Op::Check, Algorithm::SlidingLog)).unwrap();
        assert!(!check.verdict.allowed && check.write.is_none());
        let rec = step("0,10", 20, &call(Op::Record, Algorithm::SlidingLog)).unwrap();
        assert_eq!(rec.write.as_deref(), Some("0,10,10"));
        assert_eq!(rec.stored, 3);
        assert_eq!(expiry("0,10", 1_000), Some(1_010));
        assert!(step("x", 0, &hit).is_err(), "a corrupt row is an error, never a silent reset");
    }

    #[test]
    fn gcra_steps_and_algorithm_switch() {
        let hit = call(Op::Hit, Algorithm::Gcra);
        let a = step("", 0, &hit).unwrap();
        assert_eq!(a.write.as_deref(), Some("g:2/1000"), "tat in units of 1/N ms");
        let b = step("g:2/1000", 0, &hit).unwrap();
        assert_eq!(b.write.as_deref(), Some("g:2/2000"));
        let c = step("g:2/2000", 0, &hit).unwrap();
        assert!(!c.verdict.allowed);
        assert_eq!(c.verdict.retry_after_ms, 500);
        assert_eq!(expiry("g:2/2000", 1_000), Some(1_000));
        // A log row read by a GCRA rule (or the reverse) starts afresh.
        assert!(step("0,10", 20, &hit).unwrap().verdict.allowed);
        assert!(step("g:2/99999", 20, &call(Op::Hit, Algorithm::SlidingLog)).unwrap().verdict.allowed);
    }
}
