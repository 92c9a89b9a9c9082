//! What a rule allows and what a window holds: the vocabulary every
//! counting algorithm, the protocol and the config share. It depends on
//! nothing else in the crate but the calendar it may be read on.

use std::num::{NonZeroU32, NonZeroU64};

use crate::count::calendar::{Calendar, Period};

/// One window of a rule: at most `requests` units of cost per `window_ms`,
/// rolling; or, with a `calendar`, per period of it (a fixed window: every
/// unit comes back at the period's end), `window_ms` then being the
/// longest a period lasts ([`crate::count::calendar::Unit::longest_ms`]),
/// the horizon its hits are kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub requests: NonZeroU32,
    pub window_ms: NonZeroU64,
    pub(crate) calendar: Option<Calendar>,
}

impl Limit {
    /// A limit of `requests` per `window_ms`; `None` if either is zero.
    pub fn new(requests: u32, window_ms: u64) -> Option<Limit> {
        Some(Limit { requests: NonZeroU32::new(requests)?, window_ms: NonZeroU64::new(window_ms)?, calendar: None })
    }

    /// A limit of `requests` per period of `calendar`; `None` for 0.
    pub(crate) fn per_period(requests: u32, calendar: Calendar) -> Option<Limit> {
        let window_ms = NonZeroU64::new(calendar.unit.longest_ms())?;
        Some(Limit { requests: NonZeroU32::new(requests)?, window_ms, calendar: Some(calendar) })
    }

    /// Which hits the window counts at `now_ms`.
    pub(crate) fn reach(&self, now_ms: i64) -> Reach {
        match self.calendar {
            None => Reach::Rolling(self.window_ms.get()),
            Some(calendar) => Reach::Period(calendar, calendar.period(now_ms)),
        }
    }
}

/// A window as read at one instant: the last `window_ms` (a hit counts
/// while `now - at < window_ms`, leaving at `at + window_ms`), or the
/// calendar period holding that instant (a hit counts from the period's
/// start on, hits dated later included, and leaves at the end of the
/// period it is dated in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    Rolling(u64),
    Period(Calendar, Period),
}

impl Reach {
    /// Whether a hit dated `at` counts at `now`.
    pub(crate) fn counts(&self, now: i64, at: i64) -> bool {
        match self {
            Reach::Rolling(w) => u64::try_from(now.saturating_sub(at)).unwrap_or(0) < *w,
            Reach::Period(_, period) => at >= period.start_ms,
        }
    }

    /// Milliseconds from `now` until a hit dated `at` leaves the window:
    /// more than the window for a hit dated in the future; for a period,
    /// the end of the period the hit is dated in (this one, or a later one
    /// for a lease's hit dated past the boundary).
    pub(crate) fn leaves_in(&self, now: i64, at: i64) -> u64 {
        let leaves = match self {
            Reach::Rolling(w) => at.saturating_add(i64::try_from(*w).unwrap_or(i64::MAX)),
            Reach::Period(_, period) if at < period.end_ms => period.end_ms,
            Reach::Period(calendar, _) => calendar.period(at).end_ms,
        };
        u64::try_from(leaves.saturating_sub(now)).unwrap_or(0)
    }

    /// The wait for a cost the window can never hold: the window's length,
    /// or the rest of the period.
    pub(crate) fn whole(&self, now: i64) -> u64 {
        match self {
            Reach::Rolling(w) => *w,
            Reach::Period(_, period) => u64::try_from(period.end_ms.saturating_sub(now)).unwrap_or(0),
        }
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

