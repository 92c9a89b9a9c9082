//! GCRA (the generic cell rate algorithm), the O(1)-state alternative to the
//! sliding log for rules with large limits.
//!
//! Per window of `N` requests per `W` ms, the emission interval is
//! `T = W / N` and the state is one number, the theoretical arrival time
//! `tat`. A request of cost `c` at `now` is allowed iff
//! `max(tat, now) + c·T − now ≤ W`, and then `tat := max(tat, now) + c·T`.
//! Pure, with time injected, after governor's `gcra.rs`.
//!
//! Accuracy, compared with the exact sliding log (the default):
//! - a burst of `N` is allowed from idle, then one request every `T`: the
//!   long-run rate is exactly `N / W`;
//! - but any interval of length `W` can see up to `2N − 1` requests (a full
//!   burst at its start, then the steady refill), where the sliding log
//!   allows at most `N`. The `gcra_error_bound` test pins this bound.
//!
//! Use it when `N` is too large for a log (above
//! [`crate::config::MAX_SLIDING_LOG_REQUESTS`] per window); the state stays
//! one integer per window whatever the traffic.

use crate::window::{Limit, WindowState};

/// The outcome of one GCRA step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcraDecision {
    pub allowed: bool,
    /// Exact ms until a request of the same cost fits (0 when allowed).
    pub retry_after_ms: u64,
    pub windows: Vec<WindowState>,
    /// When blocked, the index of the window that sets `retry_after_ms`.
    pub binding: Option<usize>,
    /// The state to store (one `tat` per limit) when allowed.
    pub new_state: Option<Vec<i64>>,
}

/// Emission interval `W / N` in ms, at least 1.
fn interval(limit: &Limit) -> i64 {
    let t = limit.window_ms.get() / u64::from(limit.requests.get());
    i64::try_from(t.max(1)).unwrap_or(i64::MAX)
}

fn window_ms(limit: &Limit) -> i64 {
    i64::try_from(limit.window_ms.get()).unwrap_or(i64::MAX)
}

/// One GCRA step over every window at once; `state` holds one `tat` per
/// limit (missing entries are idle). Blocked requests change nothing.
pub fn decide(state: &[i64], now_ms: i64, limits: &[Limit], cost: u32) -> GcraDecision {
    let mut allowed = true;
    let mut retry_after_ms = 0u64;
    let mut binding = None;
    let mut next = Vec::with_capacity(limits.len());
    for (i, limit) in limits.iter().enumerate() {
        let tat = state.get(i).copied().unwrap_or(i64::MIN).max(now_ms);
        let candidate = tat.saturating_add(interval(limit).saturating_mul(i64::from(cost)));
        let over = candidate - now_ms - window_ms(limit);
        if over > 0 {
            allowed = false;
            if binding.is_none() || over as u64 > retry_after_ms {
                retry_after_ms = over as u64;
                binding = Some(i);
            }
        }
        next.push(candidate);
    }
    let current: Vec<i64> = limits
        .iter()
        .enumerate()
        .map(|(i, _)| state.get(i).copied().unwrap_or(i64::MIN).max(now_ms))
        .collect();
    let shown = if allowed { &next } else { &current };
    let windows = limits.iter().zip(shown).map(|(l, tat)| window_state(*l, *tat, now_ms)).collect();
    GcraDecision {
        allowed,
        retry_after_ms,
        windows,
        binding,
        new_state: allowed.then_some(next),
    }
}

/// Records `cost` whatever the limits say (failures-only rules).
pub fn record(state: &[i64], now_ms: i64, limits: &[Limit], cost: u32) -> (Vec<i64>, Vec<WindowState>) {
    let next: Vec<i64> = limits
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let tat = state.get(i).copied().unwrap_or(i64::MIN).max(now_ms);
            tat.saturating_add(interval(l).saturating_mul(i64::from(cost)))
        })
        .collect();
    let windows = limits.iter().zip(&next).map(|(l, tat)| window_state(*l, *tat, now_ms)).collect();
    (next, windows)
}

/// The windows' state without recording.
pub fn peek(state: &[i64], now_ms: i64, limits: &[Limit]) -> Vec<WindowState> {
    limits
        .iter()
        .enumerate()
        .map(|(i, l)| window_state(*l, state.get(i).copied().unwrap_or(i64::MIN).max(now_ms), now_ms))
        .collect()
}

/// When the state is idle again (every `tat` in the past): the TTL.
pub fn expires_at(state: &[i64]) -> Option<i64> {
    state.iter().copied().max()
}

fn window_state(limit: Limit, tat: i64, now: i64) -> WindowState {
    let t = interval(&limit);
    let backlog = (tat - now).max(0);
    // Units in use: the backlog in emission intervals, rounded up.
    let used = ((backlog + t - 1) / t) as u64;
    let cap = u64::from(limit.requests.get());
    WindowState {
        limit,
        used: used.min(cap),
        remaining: cap.saturating_sub(used),
        reset_ms: backlog as u64,
    }
}

/// Serializes the state as `g:tat,tat,...`, one row's worth.
pub fn encode(state: &[i64]) -> String {
    let tats: Vec<String> = state.iter().map(i64::to_string).collect();
    format!("g:{}", tats.join(","))
}

/// Reads back what [`encode`] wrote; `None` for anything else.
pub fn decode(text: &str) -> Option<Vec<i64>> {
    let body = text.strip_prefix("g:")?;
    if body.is_empty() {
        return Some(Vec::new());
    }
    body.split(',').map(|t| t.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::{NonZeroU32, NonZeroU64};

    fn limit(requests: u32, window_ms: u64) -> Limit {
        Limit {
            requests: NonZeroU32::new(requests).unwrap(),
            window_ms: NonZeroU64::new(window_ms).unwrap(),
        }
    }

    fn run(state: &mut Vec<i64>, now: i64, limits: &[Limit], cost: u32) -> GcraDecision {
        let d = decide(state, now, limits, cost);
        if let Some(s) = &d.new_state {
            *state = s.clone();
        }
        d
    }

    #[test]
    fn burst_then_steady_rate() {
        let limits = [limit(10, 1_000)];
        let mut state = Vec::new();
        for i in 0..10 {
            assert!(run(&mut state, 0, &limits, 1).allowed, "burst {i}");
        }
        let d = run(&mut state, 0, &limits, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 100, "one emission interval");
        assert_eq!(d.windows[0].remaining, 0);
        assert!(run(&mut state, 100, &limits, 1).allowed);
        assert!(!run(&mut state, 150, &limits, 1).allowed);
        assert_eq!(expires_at(&state), Some(1_100));
    }

    #[test]
    fn costs_and_multiple_windows() {
        let limits = [limit(4, 1_000), limit(6, 10_000)];
        let mut state = Vec::new();
        assert!(run(&mut state, 0, &limits, 3).allowed);
        let d = run(&mut state, 0, &limits, 2);
        assert!(!d.allowed);
        assert_eq!(d.binding, Some(0));
        assert_eq!(d.retry_after_ms, 250);
        assert!(run(&mut state, 1_000, &limits, 3).allowed);
        let d = run(&mut state, 1_000, &limits, 1);
        assert!(!d.allowed, "the long window binds: 6 used of 6 (less what 1 s refilled)");
        assert_eq!(d.binding, Some(1));
        // T = 10 s / 6 = 1666 ms (rounded down); 7 units end at tat = 11 662.
        assert_eq!(d.retry_after_ms, 7 * 1_666 - 1_000 - 10_000);
    }

    /// Over any interval of length W, GCRA admits at most 2N − 1, and the
    /// long-run rate is N per W. The sliding log admits at most N.
    #[test]
    fn gcra_error_bound() {
        let n = 10u32;
        let w = 1_000i64;
        let limits = [limit(n, w as u64)];
        let mut state = Vec::new();
        let mut allowed_at = Vec::new();
        // A greedy client asking every millisecond for 20 windows.
        for now in 0..20 * w {
            if run(&mut state, now, &limits, 1).allowed {
                allowed_at.push(now);
            }
        }
        let worst = allowed_at
            .iter()
            .map(|&start| allowed_at.iter().filter(|&&t| t >= start && t < start + w).count())
            .max()
            .unwrap();
        assert_eq!(worst, 2 * n as usize - 1, "worst window");
        assert!(allowed_at.len() <= (20 * n + n) as usize, "long-run rate N per W, plus one burst");
        assert!(allowed_at.len() >= (20 * n) as usize);
    }

    #[test]
    fn record_and_codec() {
        let limits = [limit(2, 1_000)];
        let (s, w) = record(&[], 0, &limits, 1);
        let (s, _) = record(&s, 0, &limits, 1);
        let (s, w2) = record(&s, 0, &limits, 1);
        assert_eq!(w[0].remaining, 1);
        assert_eq!(w2[0].remaining, 0);
        assert!(!decide(&s, 0, &limits, 1).allowed);
        assert_eq!(decode(&encode(&s)), Some(s));
        assert_eq!(decode("1,2"), None);
        assert_eq!(decode("g:x"), None);
        assert_eq!(peek(&[], 5, &limits)[0].remaining, 2);
    }
}
