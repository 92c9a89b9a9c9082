//! The sliding-log decision: `(stored log, now, limits, cost)` → outcome and
//! new log. Pure: time is a parameter, never read here (governor's habit).
//!
//! A hit recorded at `t` counts in a window of length `w` while
//! `now - t < w`, i.e. it expires exactly at `t + w`. A calendar window
//! is a fixed window read from the same log: a hit counts from
//! its period's start on and every one leaves at the period's end, so the
//! count is exact and resets at the boundary (`Limit::reach`). Every window of a rule
//! is checked at once and a request is allowed only if all of them have room
//! for its cost; a blocked request records nothing, so the log (and the
//! retry-after computed from it) stays exact.
//!
//! A log past [`crate::count::coalesce::EXACT_ENTRIES`] entries (a limit
//! above 10,000) is coalesced as it is stored ([`decide`], [`record`],
//! [`lease`]): entries merged at their newest time, never admitting more
//! than the exact log, each unit freed at most `window / 1000` late
//! ([`crate::count::coalesce`] proves both).

use crate::count::algorithm::{excerpt, push_i64, push_u64, CorruptRow, Counter, Admission};
use crate::count::coalesce::bounded;
use crate::count::limit::Reach;
use crate::count::tally::Tally;
use crate::request::canon::{split_ascii, split_once_ascii};
/// The vocabulary of limits, where callers have always found it.
pub use crate::count::limit::{horizon_ms, Hit, Limit, WindowState};

/// Decides whether a request of `cost` is allowed at `now_ms` given `log`
/// (sorted oldest first, as this function always returns it).
///
/// `retry_after_ms` is exact: the wait until enough of the oldest hits
/// leave the window; if the cost exceeds a window's limit outright, that
/// window's whole length. The log to store (`next`) is pruned of expired
/// hits, with this request appended.
///
/// Hits dated in the future (a clock stepped back, or the tokens of a
/// lease, dated at its expiry: [`crate::count::lease`]) count in every window
/// until they are a window old, and the windows are read at `now_ms`
/// itself: reading them at a later time would drop hits still in the real
/// window. The new hit is dated at the newest hit if that is later than
/// `now_ms`, so the log stays sorted; a hit dated late only stays counted
/// longer. Both make the answer conservative (a client never gains room
/// from a clock step or a lease).
pub fn decide(log: &[Hit], now_ms: i64, limits: &[Limit], cost: u32) -> Admission<Vec<Hit>> {
    let newest = log.last().map(|h| h.at_ms).unwrap_or(i64::MIN);
    let now = now_ms;
    let horizon = horizon_ms(limits);
    let live: Vec<Hit> = log
        .iter()
        .copied()
        .filter(|h| age(now, h.at_ms) < horizon)
        .collect();

    let mut allowed = true;
    let mut retry_after_ms = 0u64;
    let mut binding = None;
    for (index, limit) in limits.iter().enumerate() {
        let reach = limit.reach(now);
        let used: u64 = in_window(&live, now, &reach).map(|h| u64::from(h.cost)).sum();
        let cap = u64::from(limit.requests.get());
        if used + u64::from(cost) <= cap {
            continue;
        }
        allowed = false;
        let wait = if u64::from(cost) > cap {
            reach.whole(now)
        } else {
            // Expire oldest hits until the cost fits; the hit that makes room
            // leaves the window at `at + w` (a period's: at its end).
            let mut freed = 0u64;
            let mut wait = reach.whole(now);
            for hit in in_window(&live, now, &reach) {
                freed += u64::from(hit.cost);
                if used - freed + u64::from(cost) <= cap {
                    wait = reach.leaves_in(now, hit.at_ms);
                    break;
                }
            }
            wait
        };
        if binding.is_none() || wait > retry_after_ms {
            retry_after_ms = wait;
            binding = Some(index);
        }
    }

    let mut stored = live;
    if allowed {
        stored.push(Hit { at_ms: now.max(newest), cost });
        stored = bounded(stored, now, limits);
    }
    let windows = limits
        .iter()
        .map(|limit| window_state(&stored, now, *limit))
        .collect();
    Admission {
        tally: Tally { allowed, retry_after_ms, windows, binding, in_flight: false },
        next: allowed.then_some(stored),
    }
}

/// Appends a hit of `cost` at `now_ms` whatever the limits say, pruning
/// expired hits: the record step of a failures-only rule, taken after the
/// origin answered. Returns the new log (sorted) and the windows' state.
pub(crate) fn record(log: &[Hit], now_ms: i64, limits: &[Limit], cost: u32) -> (Vec<Hit>, Vec<WindowState>) {
    let newest = log.last().map(|h| h.at_ms).unwrap_or(i64::MIN);
    let mut live = prune(log, now_ms, horizon_ms(limits));
    live.push(Hit { at_ms: now_ms.max(newest), cost });
    let live = bounded(live, now_ms, limits);
    let windows = limits.iter().map(|l| window_state(&live, now_ms, *l)).collect();
    (live, windows)
}

/// Takes back `cost` units from the newest live hits (a success on a
/// `decrement` rule forgives one failure), never below an empty log;
/// expired hits are pruned. The log stays sorted.
pub(crate) fn forgive(log: &[Hit], now_ms: i64, limits: &[Limit], cost: u32) -> Vec<Hit> {
    let mut live = prune(log, now_ms, horizon_ms(limits));
    let mut owed = cost;
    while owed > 0 {
        let Some(last) = live.last_mut() else { break };
        if last.cost > owed {
            last.cost -= owed;
            break;
        }
        owed -= last.cost;
        live.pop();
    }
    live
}

/// The windows' state without recording anything (for status queries).
pub(crate) fn peek(log: &[Hit], now_ms: i64, limits: &[Limit]) -> Vec<WindowState> {
    limits.iter().map(|l| window_state(log, now_ms, *l)).collect()
}

/// The most units a request could take at `now_ms`: the least room of any
/// window (hits dated in the future count).
pub(crate) fn room(log: &[Hit], now_ms: i64, limits: &[Limit]) -> u64 {
    limits.iter().map(|l| window_state(log, now_ms, *l).remaining).min().unwrap_or(0)
}

/// The log, pruned at `now_ms`, with `units` leased dated at the lease's
/// expiry `expires_at`, sorted in: the latest moment they can be spent, so
/// a token spent late still counts in every window it belongs to
/// ([`crate::count::lease`] proves it).
pub(crate) fn lease(log: &[Hit], now_ms: i64, limits: &[Limit], units: u32, expires_at: i64) -> Vec<Hit> {
    let mut live = prune(log, now_ms, horizon_ms(limits));
    let at = live.partition_point(|h| h.at_ms <= expires_at);
    live.insert(at, Hit { at_ms: expires_at, cost: units });
    bounded(live, now_ms, limits)
}

/// Takes back up to `units` from the hits dated exactly `lease_id` (a
/// lease's expiry), the last of them first; the log stays sorted. Hits at
/// that time that were not leased could be taken too, but the Worker
/// refunds only what it leased and never spent, at most what the lease
/// debited.
pub(crate) fn refund(log: &[Hit], now_ms: i64, limits: &[Limit], units: u32, lease_id: i64) -> Vec<Hit> {
    let mut live = prune(log, now_ms, horizon_ms(limits));
    let mut owed = units;
    let mut i = live.partition_point(|h| h.at_ms <= lease_id);
    while owed > 0 && i > 0 && live[i - 1].at_ms == lease_id {
        let hit = &mut live[i - 1];
        let taken = hit.cost.min(owed);
        hit.cost -= taken;
        owed -= taken;
        if hit.cost == 0 {
            live.remove(i - 1);
        }
        i -= 1;
    }
    live
}

/// Milliseconds until the last hit of `log` leaves a window of `horizon_ms`,
/// i.e. when the whole log has expired; `None` for an empty log.
pub(crate) fn expires_at(log: &[Hit], horizon_ms: u64) -> Option<i64> {
    log.last()
        .map(|h| h.at_ms.saturating_add(i64::try_from(horizon_ms).unwrap_or(i64::MAX)))
}

/// Drops every hit that has left a window of `horizon_ms` at `now_ms`.
pub(crate) fn prune(log: &[Hit], now_ms: i64, horizon_ms: u64) -> Vec<Hit> {
    log.iter()
        .copied()
        .filter(|h| age(now_ms, h.at_ms) < horizon_ms)
        .collect()
}

fn window_state(log: &[Hit], now: i64, limit: Limit) -> WindowState {
    let reach = limit.reach(now);
    let mut counted = in_window(log, now, &reach).peekable();
    let reset_ms = counted
        .peek()
        .map(|oldest| reach.leaves_in(now, oldest.at_ms))
        .unwrap_or(0);
    let used: u64 = counted.map(|h| u64::from(h.cost)).sum();
    WindowState {
        limit,
        used,
        remaining: u64::from(limit.requests.get()).saturating_sub(used),
        reset_ms,
    }
}

fn in_window<'a>(log: &'a [Hit], now: i64, reach: &'a Reach) -> impl Iterator<Item = &'a Hit> {
    log.iter().filter(move |h| reach.counts(now, h.at_ms))
}

/// `now - at` in ms, 0 for hits in the future (clock stepped back).
fn age(now: i64, at: i64) -> u64 {
    u64::try_from(now.saturating_sub(at)).unwrap_or(0)
}

/// Serializes a log as compact text, one row's worth: `at` or `at*cost`,
/// comma-separated, each `at` after the first stored as a delta from the
/// previous one (`1700000000000,15,3*2`). About 3-14 bytes per hit.
pub(crate) fn encode_log(log: &[Hit]) -> String {
    let mut out = String::with_capacity(log.len() * 6 + 14);
    let mut previous = 0i64;
    for (i, hit) in log.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let value = if i == 0 { hit.at_ms } else { hit.at_ms - previous };
        push_i64(&mut out, value);
        if hit.cost != 1 {
            out.push('*');
            push_u64(&mut out, u64::from(hit.cost));
        }
        previous = hit.at_ms;
    }
    out
}

/// Reads back what [`encode_log`] wrote. Rejects anything else, including
/// an unsorted log, naming the first entry it cannot take.
pub(crate) fn decode_log(text: &str) -> Result<Vec<Hit>, CorruptRow> {
    let mut log = Vec::new();
    if text.is_empty() {
        return Ok(log);
    }
    let mut previous = 0i64;
    for (index, entry) in split_ascii(text, b',').enumerate() {
        let unreadable = || CorruptRow::UnreadableHit { index, entry: excerpt(entry) };
        let (at, cost) = match split_once_ascii(entry, b'*') {
            Some((at, cost)) => (at, cost.parse::<u32>().map_err(|_| unreadable())?),
            None => (entry, 1),
        };
        let value: i64 = at.parse().map_err(|_| unreadable())?;
        if index > 0 && value < 0 {
            return Err(CorruptRow::HitOutOfOrder { index, entry: excerpt(entry) });
        }
        let at_ms = if index == 0 { value } else { previous.checked_add(value).ok_or_else(unreadable)? };
        log.push(Hit { at_ms, cost });
        previous = at_ms;
    }
    Ok(log)
}

/// The sliding log as a limiter object runs it: the state is the log,
/// oldest hit first; its row is [`encode_log`]'s text.
pub(crate) struct SlidingLog;

impl Counter for SlidingLog {
    type State = Vec<Hit>;

    fn decode(row: &str) -> Result<Vec<Hit>, CorruptRow> {
        decode_log(row)
    }

    fn encode(log: &Vec<Hit>) -> String {
        encode_log(log)
    }

    fn decide(log: &Vec<Hit>, now_ms: i64, limits: &[Limit], cost: u32) -> Admission<Vec<Hit>> {
        decide(log, now_ms, limits, cost)
    }

    fn record(log: &Vec<Hit>, now_ms: i64, limits: &[Limit], cost: u32) -> (Vec<Hit>, Vec<WindowState>) {
        record(log, now_ms, limits, cost)
    }

    fn forgive(log: &Vec<Hit>, now_ms: i64, limits: &[Limit], cost: u32) -> Vec<Hit> {
        forgive(log, now_ms, limits, cost)
    }

    fn peek(log: &Vec<Hit>, now_ms: i64, limits: &[Limit]) -> Vec<WindowState> {
        peek(log, now_ms, limits)
    }

    fn expires_at(log: &Vec<Hit>, horizon_ms: u64) -> Option<i64> {
        expires_at(log, horizon_ms)
    }

    fn room(log: &Vec<Hit>, now_ms: i64, limits: &[Limit]) -> u64 {
        room(log, now_ms, limits)
    }
    fn lease(log: &Vec<Hit>, now_ms: i64, limits: &[Limit], units: u32, expires_at: i64) -> Vec<Hit> {
        lease(log, now_ms, limits, units, expires_at)
    }
    fn refund(log: &Vec<Hit>, now_ms: i64, limits: &[Limit], units: u32, lease_id: i64) -> Vec<Hit> {
        refund(log, now_ms, limits, units, lease_id)
    }
    fn entries(log: &Vec<Hit>) -> u64 {
        log.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(requests: u32, window_ms: u64) -> Limit {
        Limit::new(requests, window_ms).unwrap()
    }

    /// Drives `decide` like the object does: store the new log if any.
    fn run(log: &mut Vec<Hit>, now: i64, limits: &[Limit], cost: u32) -> Tally {
        let d = decide(log, now, limits, cost);
        if let Some(next) = d.next {
            *log = next;
        }
        d.tally
    }

    #[test]
    fn single_window_allows_exactly_the_limit() {
        let limits = [limit(10, 60_000)];
        let mut log = Vec::new();
        for i in 0..10 {
            let d = run(&mut log, 1_000 + i, &limits, 1);
            assert!(d.allowed, "request {i}");
            assert_eq!(d.windows[0].remaining, 9 - i as u64);
        }
        assert_eq!(decide(&log, 1_010, &limits, 1).next, None, "a blocked request writes nothing");
        let d = run(&mut log, 1_010, &limits, 1);
        assert!(!d.allowed);
        // Oldest hit at 1_000 expires at 61_000.
        assert_eq!(d.retry_after_ms, 61_000 - 1_010);
        assert_eq!(d.windows[0].remaining, 0);
    }

    #[test]
    fn hit_exactly_one_window_old_has_expired() {
        let limits = [limit(1, 1_000)];
        let mut log = Vec::new();
        assert!(run(&mut log, 5_000, &limits, 1).allowed);
        assert!(!run(&mut log, 5_999, &limits, 1).allowed);
        let d = run(&mut log, 6_000, &limits, 1);
        assert!(d.allowed);
        assert_eq!(log, vec![Hit { at_ms: 6_000, cost: 1 }], "expired hit pruned");
    }

    #[test]
    fn multiple_windows_bind_together() {
        let limits = [limit(3, 2_000), limit(5, 10_000)];
        let mut log = Vec::new();
        for t in [0, 1, 2] {
            assert!(run(&mut log, t, &limits, 1).allowed);
        }
        let d = run(&mut log, 3, &limits, 1);
        assert!(!d.allowed, "short window binds");
        assert_eq!(d.binding, Some(0));
        assert_eq!(d.retry_after_ms, 2_000 - 3);
        assert_eq!(d.windows[1].remaining, 2);
        for t in [2_000, 2_001] {
            assert!(run(&mut log, t, &limits, 1).allowed);
        }
        let d = run(&mut log, 4_100, &limits, 1);
        assert!(!d.allowed, "long window binds though the short one has room");
        assert_eq!(d.binding, Some(1));
        assert_eq!(d.windows[0].remaining, 3, "hits at 2000/2001 left the 2 s window");
        assert_eq!(d.retry_after_ms, 10_000 - 4_100, "until the hit at 0 leaves the 10 s window");
    }

    #[test]
    fn costs_above_one() {
        let limits = [limit(10, 1_000)];
        let mut log = Vec::new();
        assert!(run(&mut log, 0, &limits, 4).allowed);
        assert!(run(&mut log, 10, &limits, 4).allowed);
        let d = run(&mut log, 20, &limits, 4);
        assert!(!d.allowed);
        assert_eq!(d.windows[0].remaining, 2);
        // Freeing the first hit (4 units) at t=1000 is enough.
        assert_eq!(d.retry_after_ms, 980);
        assert!(run(&mut log, 20, &limits, 2).allowed, "a smaller cost still fits");
        let d = decide(&log, 30, &limits, 11).tally;
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 1_000, "a cost above the limit waits a whole window");
    }

    #[test]
    fn clock_stepping_backwards_is_conservative() {
        let limits = [limit(2, 1_000)];
        let mut log = Vec::new();
        assert!(run(&mut log, 10_000, &limits, 1).allowed);
        let d = run(&mut log, 9_000, &limits, 1);
        assert!(d.allowed);
        assert_eq!(log.last().map(|h| h.at_ms), Some(10_000), "now clamped to the newest hit");
        assert!(log.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        let d = run(&mut log, 9_500, &limits, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 1_500, "until the hits dated 10 000 are a window old, read at 9 500");
    }

    #[test]
    fn record_appends_even_over_the_limit() {
        let limits = [limit(1, 1_000)];
        let (log, w) = record(&[], 0, &limits, 1);
        assert_eq!(w[0].remaining, 0);
        let (log, w) = record(&log, 10, &limits, 1);
        assert_eq!(log.len(), 2, "failures counted even past the limit");
        assert_eq!(w[0].used, 2);
        let (log, _) = record(&log, 1_005, &limits, 1);
        assert_eq!(log, vec![Hit { at_ms: 10, cost: 1 }, Hit { at_ms: 1_005, cost: 1 }], "pruned");
        let d = decide(&log, 1_006, &limits, 1).tally;
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 2_005 - 1_006, "both hits must leave the window");
    }

    #[test]
    fn forgive_takes_back_the_newest_units_never_below_zero() {
        let limits = [limit(10, 1_000)];
        let log = vec![Hit { at_ms: 0, cost: 1 }, Hit { at_ms: 10, cost: 1 }, Hit { at_ms: 20, cost: 3 }];
        assert_eq!(forgive(&log, 30, &limits, 1), vec![log[0], log[1], Hit { at_ms: 20, cost: 2 }], "one unit of the newest hit");
        assert_eq!(forgive(&log, 30, &limits, 4), vec![log[0]], "the newest hits first");
        assert_eq!(forgive(&log, 30, &limits, 99), vec![], "never below an empty log");
        assert_eq!(forgive(&[], 30, &limits, 1), vec![]);
        assert_eq!(forgive(&log, 1_015, &limits, 1), vec![Hit { at_ms: 20, cost: 2 }], "expired hits pruned");
        let before = decide(&log, 30, &limits, 6).tally;
        let after = decide(&forgive(&log, 30, &limits, 1), 30, &limits, 6).tally;
        assert!(!before.allowed && after.allowed, "a forgiven unit is room again");
    }

    #[test]
    fn log_round_trips_through_text() {
        let log = vec![
            Hit { at_ms: 1_700_000_000_000, cost: 1 },
            Hit { at_ms: 1_700_000_000_015, cost: 3 },
            Hit { at_ms: 1_700_000_000_015, cost: 1 },
        ];
        let text = encode_log(&log);
        assert_eq!(text, "1700000000000,15*3,0");
        assert_eq!(decode_log(&text), Ok(log));
        assert_eq!(decode_log(""), Ok(vec![]));
        assert_eq!(decode_log("1,x"), Err(CorruptRow::UnreadableHit { index: 1, entry: "x".into() }));
        assert_eq!(decode_log("10,-1"), Err(CorruptRow::HitOutOfOrder { index: 1, entry: "-1".into() }));
        assert_eq!(decode_log("1*"), Err(CorruptRow::UnreadableHit { index: 0, entry: "1*".into() }));
        assert!(decode_log("9223372036854775807,1").is_err(), "overflow");
        assert!(decode_log("g:2/1000").is_err(), "a GCRA row is no log");
    }

    #[test]
    fn expiry_and_prune() {
        let log = vec![Hit { at_ms: 100, cost: 1 }, Hit { at_ms: 500, cost: 1 }];
        assert_eq!(expires_at(&log, 1_000), Some(1_500));
        assert_eq!(expires_at(&[], 1_000), None);
        assert_eq!(prune(&log, 1_100, 1_000), vec![Hit { at_ms: 500, cost: 1 }]);
        assert!(prune(&log, 1_500, 1_000).is_empty());
    }
}
