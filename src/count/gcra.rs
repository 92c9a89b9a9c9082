//! GCRA (the generic cell rate algorithm), the O(1)-state alternative to the
//! sliding log for rules with large limits.
//!
//! Per window of `N` requests per `W` ms, the emission interval is
//! `T = W / N` and the state is one number, the theoretical arrival time
//! `tat`. A request of cost `c` at `now` is allowed iff
//! `max(tat, now) + c·T − now ≤ W`, and then `tat := max(tat, now) + c·T`.
//! Pure, with time injected, after governor's `gcra.rs`.
//!
//! Time is kept exactly: `tat` is stored in units of `1/N` ms, so `T` is the
//! integer `W` in those units and no rounding of `W / N` ever lets extra
//! requests through (rounding `T` down admitted up to 1.8× the rate for
//! limits like 600 per second).
//!
//! Accuracy, compared with the exact sliding log (the default):
//! - a burst of `N` is allowed from idle, then one request every `T`: the
//!   long-run rate is exactly `N / W`;
//! - but any interval of length `W` can see up to `2N − 1` requests (a full
//!   burst at its start, then the steady refill), where the sliding log
//!   allows at most `N`. The `gcra_error_bound` test pins this bound.
//!
//! Use it when a row of two integers per window whatever the traffic is
//! worth the `2N − 1`: the sliding log takes limits of any size, exact up
//! to 10,000 entries and coalesced past that (up to about 10,000 entries,
//! each unit freed at most `W/1000` late: [`crate::count::coalesce`]).

use crate::count::algorithm::{excerpt, CorruptRow, Counter, Admission};
use crate::count::limit::{Limit, WindowState};
use crate::count::tally::Tally;

/// The state of one window: its `N` (a changed limit carries the units
/// owed over, [`tat_of`]) and `tat` in units of `1/N` ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell {
    pub(crate) requests: u32,
    pub(crate) tat: i128,
}

fn scale(limit: &Limit) -> i128 {
    i128::from(limit.requests.get())
}

fn window(limit: &Limit) -> i128 {
    i128::from(limit.window_ms.get())
}

/// `tat` of window `i` at `now_ms`, in `1/N` ms: [`tat_of`] its cell.
fn current(state: &[Cell], i: usize, limit: &Limit, now_ms: i64) -> i128 {
    tat_of(state.get(i), limit, now_ms)
}

/// A cell's `tat` at `now_ms` for `limit`, in `1/N` ms: the stored one if
/// it is for the same `N` and in the future, else `now`. A cell kept for
/// another `N` (the limit changed in the config) carries the units it
/// still owes, read at this window's length, into this limit: a key over
/// a lowered limit stays blocked until GCRA has drained them at the new
/// rate, never counted afresh (before 0.2.0 it was).
#[inline(never)]
pub(crate) fn tat_of(cell: Option<&Cell>, limit: &Limit, now_ms: i64) -> i128 {
    let now = i128::from(now_ms) * scale(limit);
    match cell {
        Some(cell) if cell.requests == limit.requests.get() => cell.tat.max(now),
        Some(cell) => {
            let owed = (cell.tat - i128::from(now_ms) * i128::from(cell.requests)).max(0);
            now + div_ceil(owed, window(limit)) * window(limit)
        }
        None => now,
    }
}

/// `x / d` rounded up, for `x ≥ 0`, `d > 0`.
fn div_ceil(x: i128, d: i128) -> i128 {
    (x + d - 1) / d
}

/// One GCRA step over every window at once. `retry_after_ms` is exact,
/// rounded up to the ms; the state to store (`next`, one cell per limit) is
/// there only when allowed: a blocked request changes nothing.
pub(crate) fn decide(state: &[Cell], now_ms: i64, limits: &[Limit], cost: u32) -> Admission<Vec<Cell>> {
    let mut allowed = true;
    let mut retry_after_ms = 0u64;
    let mut binding = None;
    let mut next = Vec::with_capacity(limits.len());
    let mut now_tats = Vec::with_capacity(limits.len());
    for (i, limit) in limits.iter().enumerate() {
        let (n, w) = (scale(limit), window(limit));
        let tat = current(state, i, limit, now_ms);
        let candidate = tat + w * i128::from(cost);
        let over = candidate - i128::from(now_ms) * n - w * n;
        if over > 0 {
            allowed = false;
            let wait = u64::try_from(div_ceil(over, n)).unwrap_or(u64::MAX);
            if binding.is_none() || wait > retry_after_ms {
                retry_after_ms = wait;
                binding = Some(i);
            }
        }
        now_tats.push(tat);
        next.push(Cell { requests: limit.requests.get(), tat: candidate });
    }
    let shown: Vec<i128> = if allowed { next.iter().map(|c| c.tat).collect() } else { now_tats };
    let windows = limits.iter().zip(shown).map(|(l, tat)| window_state(*l, tat, now_ms)).collect();
    Admission {
        tally: Tally { allowed, retry_after_ms, windows, binding, in_flight: false },
        next: allowed.then_some(next),
    }
}

/// Records `cost` whatever the limits say (failures-only rules).
pub(crate) fn record(state: &[Cell], now_ms: i64, limits: &[Limit], cost: u32) -> (Vec<Cell>, Vec<WindowState>) {
    let next: Vec<Cell> = limits
        .iter()
        .enumerate()
        .map(|(i, l)| Cell {
            requests: l.requests.get(),
            tat: current(state, i, l, now_ms) + window(l) * i128::from(cost),
        })
        .collect();
    let windows = limits.iter().zip(&next).map(|(l, c)| window_state(*l, c.tat, now_ms)).collect();
    (next, windows)
}

/// Takes back `cost` units (a success on a `decrement` rule): each `tat`
/// moves back `cost` emission intervals, never before now (an idle cell
/// has nothing to give back, and no credit is banked).
pub(crate) fn forgive(state: &[Cell], now_ms: i64, limits: &[Limit], cost: u32) -> Vec<Cell> {
    limits
        .iter()
        .enumerate()
        .map(|(i, l)| Cell {
            requests: l.requests.get(),
            tat: (current(state, i, l, now_ms) - window(l) * i128::from(cost)).max(i128::from(now_ms) * scale(l)),
        })
        .collect()
}

/// The most units a request could take at `now_ms`: per window
/// `⌊(now·N + W·N − tat) / W⌋` (in `1/N` ms), the least of them. `decide`
/// allows a cost iff it is at most this.
pub(crate) fn room(state: &[Cell], now_ms: i64, limits: &[Limit]) -> u64 {
    limits
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let (n, w) = (scale(l), window(l));
            let slack = i128::from(now_ms) * n + w * n - current(state, i, l, now_ms);
            u64::try_from((slack / w).max(0)).unwrap_or(u64::MAX)
        })
        .min()
        .unwrap_or(0)
}

/// The windows' state without recording.
pub(crate) fn peek(state: &[Cell], now_ms: i64, limits: &[Limit]) -> Vec<WindowState> {
    limits
        .iter()
        .enumerate()
        .map(|(i, l)| window_state(*l, current(state, i, l, now_ms), now_ms))
        .collect()
}

/// When the state is idle again (every `tat` in the past), in Unix ms,
/// rounded up: the TTL.
pub(crate) fn expires_at(state: &[Cell]) -> Option<i64> {
    state
        .iter()
        .map(|c| div_ceil(c.tat.max(0), i128::from(c.requests.max(1))))
        .max()
        .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX))
}

fn window_state(limit: Limit, tat: i128, now_ms: i64) -> WindowState {
    let (n, w) = (scale(&limit), window(&limit));
    let backlog = (tat - i128::from(now_ms) * n).max(0);
    // Units in use: the backlog in emission intervals (`W` each), rounded up.
    let used = u64::try_from(div_ceil(backlog, w)).unwrap_or(u64::MAX);
    let cap = u64::from(limit.requests.get());
    WindowState {
        limit,
        used: used.min(cap),
        remaining: cap.saturating_sub(used),
        reset_ms: u64::try_from(div_ceil(backlog, n)).unwrap_or(u64::MAX),
    }
}

/// What every GCRA row starts with; a row without it is a sliding log.
pub(crate) const ROW_PREFIX: &str = "g:";

/// Serializes the state as `g:N/tat,N/tat,...`, one row's worth.
pub(crate) fn encode(state: &[Cell]) -> String {
    let cells: Vec<String> = state.iter().map(|c| format!("{}/{}", c.requests, c.tat)).collect();
    format!("{ROW_PREFIX}{}", cells.join(","))
}

/// Reads back what [`encode`] wrote. Rejects anything else, naming the
/// first cell it cannot take.
pub(crate) fn decode(text: &str) -> Result<Vec<Cell>, CorruptRow> {
    let body = text.strip_prefix(ROW_PREFIX).ok_or_else(|| CorruptRow::NotGcra(excerpt(text)))?;
    if body.is_empty() {
        return Ok(Vec::new());
    }
    body.split(',')
        .enumerate()
        .map(|(index, cell)| {
            let parsed = cell
                .split_once('/')
                .and_then(|(n, tat)| Some(Cell { requests: n.parse().ok()?, tat: tat.parse().ok()? }));
            parsed.ok_or_else(|| CorruptRow::UnreadableCell { index, cell: excerpt(cell) })
        })
        .collect()
}

/// GCRA as a limiter object runs it: one [`Cell`] per window; its row is
/// [`encode`]'s text.
pub(crate) struct Gcra;

impl Counter for Gcra {
    type State = Vec<Cell>;

    fn decode(row: &str) -> Result<Vec<Cell>, CorruptRow> {
        decode(row)
    }

    fn encode(state: &Vec<Cell>) -> String {
        encode(state)
    }

    fn decide(state: &Vec<Cell>, now_ms: i64, limits: &[Limit], cost: u32) -> Admission<Vec<Cell>> {
        decide(state, now_ms, limits, cost)
    }

    fn record(state: &Vec<Cell>, now_ms: i64, limits: &[Limit], cost: u32) -> (Vec<Cell>, Vec<WindowState>) {
        record(state, now_ms, limits, cost)
    }

    fn forgive(state: &Vec<Cell>, now_ms: i64, limits: &[Limit], cost: u32) -> Vec<Cell> {
        forgive(state, now_ms, limits, cost)
    }

    fn peek(state: &Vec<Cell>, now_ms: i64, limits: &[Limit]) -> Vec<WindowState> {
        peek(state, now_ms, limits)
    }

    /// Each cell knows its own end; the horizon is not needed.
    fn expires_at(state: &Vec<Cell>, _horizon_ms: u64) -> Option<i64> {
        expires_at(state)
    }

    /// A lease is `units` recorded now: the tokens may be spent until its
    /// expiry, which widens the bound (see [`crate::count::lease`]).
    fn lease(state: &Vec<Cell>, now_ms: i64, limits: &[Limit], units: u32, _expires_at: i64) -> Vec<Cell> {
        record(state, now_ms, limits, units).0
    }
    /// A refund moves `tat` back like a forgiven unit, never before now.
    fn refund(state: &Vec<Cell>, now_ms: i64, limits: &[Limit], units: u32, _lease_id: i64) -> Vec<Cell> {
        forgive(state, now_ms, limits, units)
    }
    fn room(state: &Vec<Cell>, now_ms: i64, limits: &[Limit]) -> u64 {
        room(state, now_ms, limits)
    }
    fn entries(state: &Vec<Cell>) -> u64 {
        state.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(requests: u32, window_ms: u64) -> Limit {
        Limit::new(requests, window_ms).unwrap()
    }

    fn run(state: &mut Vec<Cell>, now: i64, limits: &[Limit], cost: u32) -> Tally {
        let d = decide(state, now, limits, cost);
        if let Some(next) = d.next {
            *state = next;
        }
        d.tally
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
        // T = 10 s / 6 exactly; 7 units end at 70/6 s = 11 666.67 ms.
        assert_eq!(d.retry_after_ms, 667);
    }

    /// Over any interval of length W, GCRA admits at most 2N − 1, and the
    /// long-run rate is N per W. The sliding log admits at most N.
    #[test]
    fn gcra_error_bound() {
        for (n, w) in [(10u32, 1_000i64), (7, 1_000), (600, 1_000), (3, 7)] {
            let limits = [limit(n, w as u64)];
            let mut state = Vec::new();
            let mut allowed_at = Vec::new();
            // A greedy client asking every millisecond for 20 windows.
            for now in 0..20 * w {
                for _ in 0..4 {
                    if run(&mut state, now, &limits, 1).allowed {
                        allowed_at.push(now);
                    }
                }
            }
            let worst = allowed_at
                .iter()
                .map(|&start| allowed_at.iter().filter(|&&t| t >= start && t < start + w).count())
                .max()
                .unwrap();
            assert!(worst < 2 * n as usize, "n={n} w={w}: worst window {worst} (at most 2N − 1)");
            let total = allowed_at.len() as u32;
            assert!(total <= 20 * n + n, "n={n} w={w}: {total} in 20 windows");
            assert!(total >= 20 * n, "n={n} w={w}: {total} in 20 windows");
        }
    }

    #[test]
    fn forgive_moves_tat_back_never_before_now() {
        let limits = [limit(4, 1_000)];
        let mut state = Vec::new();
        for _ in 0..4 {
            assert!(run(&mut state, 0, &limits, 1).allowed);
        }
        assert!(!decide(&state, 0, &limits, 1).tally.allowed);
        let forgiven = forgive(&state, 0, &limits, 1);
        assert_eq!(forgiven[0].tat, 3 * 1_000, "one emission interval (250 ms = 1 000 units) back");
        assert!(decide(&forgiven, 0, &limits, 1).tally.allowed, "one slot again");
        assert!(!decide(&forgiven, 0, &limits, 2).tally.allowed, "only one");
        assert_eq!(forgive(&state, 0, &limits, 99)[0].tat, 0, "never before now");
        assert_eq!(forgive(&state, 900, &limits, 99)[0].tat, 900 * 4, "now moves on");
        assert_eq!(forgive(&[], 5, &limits, 1), vec![Cell { requests: 4, tat: 20 }], "an idle cell gives nothing back");
    }

    #[test]
    fn a_changed_limit_carries_the_units_owed_and_codec_round_trips() {
        let (s, w) = record(&[], 0, &[limit(2, 1_000)], 1);
        let (s, _) = record(&s, 0, &[limit(2, 1_000)], 1);
        let (s, w2) = record(&s, 0, &[limit(2, 1_000)], 1);
        assert_eq!(w[0].remaining, 1);
        assert_eq!(w2[0].remaining, 0);
        assert!(!decide(&s, 0, &[limit(2, 1_000)], 1).tally.allowed);
        // Another N: the 3 units owed carry over, never counted afresh.
        assert!(!decide(&s, 0, &[limit(3, 1_000)], 1).tally.allowed, "3 units owed fill a limit of 3");
        assert_eq!(peek(&s, 0, &[limit(3, 1_000)])[0].used, 3);
        assert!(decide(&s, 0, &[limit(4, 1_000)], 1).tally.allowed, "a raised limit has room at once");
        assert!(!decide(&s, 0, &[limit(1, 1_000)], 1).tally.allowed, "a lowered one none");
        // Until a write re-dates it, the cell drains at its own rate: at
        // 1 s it still owes 1 unit (of 2 a second), at 1.5 s none.
        assert!(!decide(&s, 1_000, &[limit(1, 1_000)], 1).tally.allowed);
        assert!(decide(&s, 1_500, &[limit(1, 1_000)], 1).tally.allowed);
        assert_eq!(decode(&encode(&s)), Ok(s));
        assert_eq!(decode("g:"), Ok(vec![]));
        assert_eq!(decode("g:1,2"), Err(CorruptRow::UnreadableCell { index: 0, cell: "1".into() }));
        assert_eq!(decode("g:2/1,x/1"), Err(CorruptRow::UnreadableCell { index: 1, cell: "x/1".into() }));
        assert_eq!(decode("2/1"), Err(CorruptRow::NotGcra("2/1".into())));
        assert_eq!(peek(&[], 5, &[limit(2, 1_000)])[0].remaining, 2);
        let huge = [Cell { requests: 1, tat: i128::MAX / 4 }];
        assert_eq!(expires_at(&huge), Some(i64::MAX), "a corrupt row saturates, never panics");
    }
}
