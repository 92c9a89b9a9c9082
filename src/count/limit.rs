//! What a rule allows and what a window holds: the vocabulary every
//! counting algorithm, the protocol and the config share. It depends on
//! nothing else in the crate.

use std::num::{NonZeroU32, NonZeroU64};

/// One window of a rule: at most `requests` units of cost per `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub requests: NonZeroU32,
    pub window_ms: NonZeroU64,
}

impl Limit {
    /// A limit of `requests` per `window_ms`; `None` if either is zero.
    pub fn new(requests: u32, window_ms: u64) -> Option<Limit> {
        Some(Limit { requests: NonZeroU32::new(requests)?, window_ms: NonZeroU64::new(window_ms)? })
    }
}

/// One recorded request of a sliding log: when it happened (Unix ms) and
/// the cost it used (a coalesced entry: the newest member's time, the
/// members' summed cost, [`crate::count::coalesce`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub at_ms: i64,
    pub cost: u32,
}

/// The state of one window after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    pub(crate) limit: Limit,
    /// Units used in the window, including this request if it was allowed.
    pub(crate) used: u64,
    /// Units still available in the window (never negative).
    pub(crate) remaining: u64,
    /// Milliseconds until the oldest counted hit leaves the window, i.e.
    /// until `remaining` next grows; 0 when the window is empty.
    pub(crate) reset_ms: u64,
}

/// Length of the longest window, the horizon beyond which hits are dropped.
pub fn horizon_ms(limits: &[Limit]) -> u64 {
    limits.iter().map(|l| l.window_ms.get()).max().unwrap_or(0)
}

