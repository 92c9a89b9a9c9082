//! A sliding log of bounded size for limits of any size:
//! exact while it holds at most [`EXACT_ENTRIES`] entries, coalesced past
//! that. Pure, time injected.
//!
//! # What coalescing does
//! Entries are merged into *granules*: an entry of age `a` (at `now`) whose
//! smallest window still counting it is `w` (the first window longer than
//! `a`) belongs to the aligned interval of width `g(w)`, the largest power
//! of two (ms) at most `w /` [`GRANULES_PER_WINDOW`] (at least 1 ms). The
//! entries of one interval and one *tier* (the same set of windows still
//! counting them) become one entry, dated at its **newest** member's time
//! and carrying their summed cost (a sum that would not fit a `u32` starts
//! a new entry). Entries dated after `now −` [`FRESH_MS`] (leases, and the
//! hits a refund may still name) merge only with entries of the same time.
//!
//! # Never over-admitting
//! A merged entry is dated no earlier than any member, so in every window,
//! read at any time, it counts at least what its members counted: the
//! coalesced log's *tail sums* (units dated at or after `τ`, for every `τ`)
//! are at least the exact log's. Every later step keeps that: a new hit or
//! lease adds the same units at the same time to both, pruning removes only
//! what no window reads, and taking back `c` units from the newest entries
//! (`forgive`) turns each tail sum `T` into `max(0, T − c)` in both, which
//! keeps the order. A window's count is a tail sum, so the coalesced log
//! never has more room than the exact one: it admits nothing the exact log
//! would refuse.
//!
//! # The under-admission bound
//! Widths are powers of two aligned on the epoch, so a granule of one width
//! lies inside one granule of every coarser width, and a tier only grows
//! coarser with age: an entry merged again stays inside the granule of the
//! latest merge. A unit is counted by a window `w` at most `g(w) ≤ w/1000`
//! longer than the exact log counts it (its entry is dated at most that
//! much later, and the merge that dated it was of entries `w` still
//! counted, in a tier whose width is at most `g(w)`). So the coalesced log
//! admits everything an exact log whose every window is `g(w)` longer
//! would admit: the room a unit frees comes back at most `g(w)` late
//! (65.5 s for a day, 2 s for an hour, 32 ms for a minute). A limit change in
//! the config keeps the granules already merged under the old windows.
//! A calendar window frees every unit at its period's end: an
//! entry before the current period's start never merges with one after
//! it, so a unit of the period before is never carried into this one, and
//! the calendar window counts exactly what the exact log counts.
//! Leases' unspent units are refunded by their date ([`crate::count::window::refund`]):
//! a refund that comes later than [`FRESH_MS`] after a lease expired may
//! find its entry merged, and its units then count until they leave.
//!
//! # Size
//! The exact log is kept while it has at most [`EXACT_ENTRIES`] entries, so
//! a limit of at most 10,000 (cost ≥ 1) behaves and is stored exactly as
//! before. Past that, one coalescing leaves at most `2 × 1000 + 2` entries
//! per window of the rule (`g(w) > w/2000`), plus the fresh entries (at most
//! the calls of [`FRESH_MS`]), and the log grows again to [`EXACT_ENTRIES`]
//! before the next: a row of at most about 10,000 entries (≈ 80–120 KB)
//! whatever the limit, for rules of up to four windows.

use crate::count::limit::{horizon_ms, Hit, Limit};

/// Entries a log may hold before it is coalesced: up to this many, it is
/// the exact sliding log of every release before (the former cap of a
/// sliding-log limit, 10,000 requests per window).
pub(crate) const EXACT_ENTRIES: usize = 10_000;

/// A window's granules: a unit is counted at most `window / 1000` late.
pub(crate) const GRANULES_PER_WINDOW: u64 = 1_000;

/// Entries dated within this of `now` (or later) are merged only with
/// entries of the same time: a lease's refund, sent within a second of its
/// expiry, still finds its entry.
pub(crate) const FRESH_MS: i64 = 5_000;

/// `log` (sorted, pruned at `now_ms`) as stored: unchanged while it has at
/// most [`EXACT_ENTRIES`] entries, else [`coalesce`]d.
pub(crate) fn bounded(log: Vec<Hit>, now_ms: i64, limits: &[Limit]) -> Vec<Hit> {
    bounded_at(log, now_ms, limits, EXACT_ENTRIES)
}

/// [`bounded`] with another cap (the tests coalesce small logs).
fn bounded_at(log: Vec<Hit>, now_ms: i64, limits: &[Limit], cap: usize) -> Vec<Hit> {
    if log.len() <= cap {
        return log;
    }
    coalesce(&log, now_ms, limits)
}

/// The granule width of a window: the largest power of two (ms) at most
/// `window_ms / GRANULES_PER_WINDOW`, at least 1.
pub(crate) fn granule_ms(window_ms: u64) -> u64 {
    let target = (window_ms / GRANULES_PER_WINDOW).max(1);
    1u64 << (63 - target.leading_zeros())
}

/// `log` (sorted) with the entries of each granule and tier merged (the
/// module doc): sorted, dated no earlier than before, the same units.
pub(crate) fn coalesce(log: &[Hit], now_ms: i64, limits: &[Limit]) -> Vec<Hit> {
    let mut windows: Vec<u64> = limits.iter().map(|l| l.window_ms.get()).collect();
    windows.sort_unstable();
    let horizon = horizon_ms(limits).max(1);
    // A calendar window's current period: an entry before its
    // start and one after never merge, or the merged entry, dated at the
    // newer, would carry the old period's units into the new one.
    let starts: Vec<i64> = limits.iter().filter_map(|l| Some(l.calendar?.period(now_ms).start_ms)).collect();
    let mut out: Vec<Hit> = Vec::with_capacity(log.len() / 4);
    let mut last_key = None;
    for hit in log {
        let side = starts.iter().filter(|start| hit.at_ms >= **start).count();
        let key = (group(hit.at_ms, now_ms, &windows, horizon), side);
        match out.last_mut() {
            Some(last) if last_key == Some(key) => match last.cost.checked_add(hit.cost) {
                Some(sum) => *last = Hit { at_ms: hit.at_ms.max(last.at_ms), cost: sum },
                None => out.push(*hit),
            },
            _ => out.push(*hit),
        }
        last_key = Some(key);
    }
    out
}

/// Which entries merge: `(tier, granule)`. A fresh entry is its own group
/// (by its time, tier `usize::MAX`); otherwise the tier is how many windows
/// it has left, and the granule its aligned interval of that tier's width.
fn group(at_ms: i64, now_ms: i64, windows: &[u64], horizon: u64) -> (usize, i64) {
    if at_ms > now_ms.saturating_sub(FRESH_MS) {
        return (usize::MAX, at_ms);
    }
    let age = u64::try_from(now_ms.saturating_sub(at_ms)).unwrap_or(0);
    let tier = windows.iter().take_while(|w| **w <= age).count();
    let width = granule_ms(windows.get(tier).copied().unwrap_or(horizon));
    (tier, at_ms.div_euclid(i64::try_from(width).unwrap_or(i64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(pairs: &[(u32, u64)]) -> Vec<Limit> {
        pairs.iter().map(|&(r, w)| Limit::new(r, w).unwrap()).collect()
    }

    #[test]
    fn granules_are_powers_of_two_at_most_a_thousandth() {
        assert_eq!(granule_ms(86_400_000), 65_536, "a day: 65.5 s");
        assert_eq!(granule_ms(60_000), 32, "a minute: 32 ms");
        assert_eq!(granule_ms(1_000), 1);
        assert_eq!(granule_ms(1), 1);
        for w in [1_999u64, 2_000, 3_600_000, 604_800_000] {
            let g = granule_ms(w);
            assert!(g.is_power_of_two() && g * GRANULES_PER_WINDOW <= w.max(1_000) && 2 * g * GRANULES_PER_WINDOW > w, "{w}: {g}");
        }
    }

    #[test]
    fn a_log_within_the_cap_is_kept_as_it_is() {
        let l = limits(&[(1_000_000, 86_400_000)]);
        let log: Vec<Hit> = (0..EXACT_ENTRIES as i64).map(|i| Hit { at_ms: i, cost: 3 }).collect();
        assert_eq!(bounded(log.clone(), 1_000_000, &l), log);
    }

    #[test]
    fn merged_entries_keep_their_units_at_their_newest_time() {
        let day = 86_400_000i64;
        let l = limits(&[(1_000_000_000, day as u64)]);
        let now = 10 * day;
        // One hit a second for the last day: old ones merge 65 536 ms at a
        // time, the last 5 s stay as they are.
        let log: Vec<Hit> = (0..86_400).map(|i| Hit { at_ms: now - day + 1 + i * 1_000, cost: 7 }).collect();
        let out = bounded(log.clone(), now, &l);
        assert!(out.len() <= 2 * GRANULES_PER_WINDOW as usize + 2 + 5, "{} entries", out.len());
        assert_eq!(out.iter().map(|h| u64::from(h.cost)).sum::<u64>(), 7 * 86_400, "the same units");
        assert!(out.windows(2).all(|p| p[0].at_ms <= p[1].at_ms), "sorted");
        assert_eq!(&out[out.len() - 5..], &log[log.len() - 5..], "fresh entries kept");
        for hit in &out {
            assert!(log.iter().any(|h| h.at_ms == hit.at_ms), "dated at a member's time");
        }
    }

    #[test]
    fn a_sum_past_u32_starts_a_new_entry() {
        let l = limits(&[(u32::MAX, 60_000)]);
        let log = vec![Hit { at_ms: 0, cost: u32::MAX - 1 }, Hit { at_ms: 1, cost: 1 }, Hit { at_ms: 2, cost: 5 }];
        let out = coalesce(&log, 40_000, &l);
        assert_eq!(out, vec![Hit { at_ms: 1, cost: u32::MAX }, Hit { at_ms: 2, cost: 5 }]);
    }

    #[test]
    fn entries_never_merge_across_a_calendar_periods_start() {
        use crate::count::calendar::Calendar;
        // A month in UTC: its granule is 2^21 ms (35 min). 2027-02-01T00:00Z.
        let start = 1_801_440_000_000;
        let month = vec![Limit::per_period(50_000, Calendar::parse("month@UTC").unwrap()).unwrap()];
        let log = vec![Hit { at_ms: start - 60_000, cost: 7 }, Hit { at_ms: start - 1, cost: 5 }, Hit { at_ms: start + 1, cost: 3 }, Hit { at_ms: start + 60_000, cost: 2 }];
        assert_eq!((start - 60_000).div_euclid(1 << 21), (start + 60_000).div_euclid(1 << 21), "one granule holds both sides");
        let merged = coalesce(&log, start + 3_600_000, &month);
        assert_eq!(merged, [Hit { at_ms: start - 1, cost: 12 }, Hit { at_ms: start + 60_000, cost: 5 }], "each side merged on its own");
    }

    #[test]
    fn entries_never_merge_across_a_window_edge() {
        // Windows of 1 000 and 1 001 s share a granule width; an entry that
        // left the first must not merge with one it still counts.
        let l = limits(&[(100_000, 1_000_000), (200_000, 1_001_000)]);
        let (first, second) = (10_240_010, 10_240_100);
        assert_eq!(first / 1_024, second / 1_024, "one granule of 1 024 ms");
        let now = 11_240_050;
        let log = vec![Hit { at_ms: first, cost: 1 }, Hit { at_ms: second, cost: 1 }];
        assert_eq!(coalesce(&log, now, &l), log);
        assert_eq!(coalesce(&log, now + 100, &l), vec![Hit { at_ms: second, cost: 2 }], "both out of the first window: one entry");
    }

    /// The property test's operations, applied to both logs at `now`.
    #[derive(Debug, Clone)]
    enum Op {
        Hit(u32),
        Record(u32),
        Forgive(u32),
        Lease(u32, i64),
        Wait(i64),
    }

    fn any_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (1u32..12).prop_map(Op::Hit),
            1 => (1u32..6).prop_map(Op::Record),
            1 => (1u32..8).prop_map(Op::Forgive),
            1 => ((4u32..30), (100i64..1_000)).prop_map(|(u, ttl)| Op::Lease(u, ttl)),
            6 => (0i64..400).prop_map(Op::Wait),
            1 => (0i64..200_000).prop_map(Op::Wait),
        ]
    }

    fn any_limits() -> impl Strategy<Value = Vec<Limit>> {
        let windows = prop::sample::subsequence(vec![2_000u64, 10_000, 60_000, 600_000], 1..=3);
        (windows, 20u32..200).prop_map(|(ws, base)| {
            ws.iter().enumerate().map(|(i, w)| Limit::new(base * (i as u32 + 1) * 2, *w).unwrap()).collect()
        })
    }

    /// Units `log` counts in a window of `w` read at `t` (future hits count).
    fn counted(log: &[Hit], t: i64, w: u64) -> u64 {
        log.iter().filter(|h| u64::try_from(t - h.at_ms).unwrap_or(0) < w).map(|h| u64::from(h.cost)).sum()
    }

    use crate::count::window;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The coalesced log (coalesced past 12 entries here) against the
        /// exact log of what it admitted, on random hits, records,
        /// forgives, leases and their refunds (sent within a second of the
        /// lease's expiry, as the Worker sends them): in every window, read
        /// now and later, it counts at least what the exact log counts (so
        /// it admits nothing the exact log would refuse), and at most what
        /// the exact log counts over the window lengthened by its granule
        /// (every unit freed at most `g(w)` late).
        #[test]
        fn the_coalesced_log_admits_no_more_than_the_exact_log_and_frees_units_at_most_a_granule_late(
            limits in any_limits(), ops in prop::collection::vec(any_op(), 50..400)
        ) {
            let mut now = 1_000_000_000i64;
            let (mut exact, mut merged): (Vec<Hit>, Vec<Hit>) = (Vec::new(), Vec::new());
            // The same exact log, pruned only past each window lengthened by
            // its granule: the reference of the lateness bound.
            let long: Vec<Limit> = limits.iter().map(|l| Limit::new(l.requests.get(), l.window_ms.get() + granule_ms(l.window_ms.get())).unwrap()).collect();
            let mut exact_long: Vec<Hit> = Vec::new();
            let mut refunds: Vec<(i64, u32)> = Vec::new();
            for op in ops {
                let keep = |log: Vec<Hit>, now: i64| bounded_at(log, now, &limits, 12);
                match op {
                    Op::Hit(cost) => {
                        let d = window::decide(&merged, now, &limits, cost);
                        if let Some(next) = d.next {
                            prop_assert!(window::decide(&exact, now, &limits, cost).tally.allowed, "admitted what the exact log refuses");
                            merged = keep(next, now);
                            exact = window::record(&exact, now, &limits, cost).0;
                            exact_long = window::record(&exact_long, now, &long, cost).0;
                        }
                    }
                    Op::Record(cost) => {
                        merged = keep(window::record(&merged, now, &limits, cost).0, now);
                        exact = window::record(&exact, now, &limits, cost).0;
                        exact_long = window::record(&exact_long, now, &long, cost).0;
                    }
                    Op::Forgive(cost) => {
                        merged = window::forgive(&merged, now, &limits, cost);
                        exact = window::forgive(&exact, now, &limits, cost);
                        exact_long = window::forgive(&exact_long, now, &long, cost);
                    }
                    Op::Lease(units, ttl) => {
                        if window::room(&merged, now, &limits) >= u64::from(units) {
                            prop_assert!(window::room(&exact, now, &limits) >= u64::from(units), "leased what the exact log refuses");
                            merged = keep(window::lease(&merged, now, &limits, units, now + ttl), now);
                            exact = window::lease(&exact, now, &limits, units, now + ttl);
                            exact_long = window::lease(&exact_long, now, &long, units, now + ttl);
                            refunds.push((now + ttl, units / 2));
                        }
                    }
                    Op::Wait(ms) => {
                        // Refunds of the leases that expired, within a second.
                        for (lease_id, units) in refunds.iter().filter(|(at, _)| *at <= now + ms && *at + 1_000 > now) {
                            let at = now.max(*lease_id);
                            merged = window::refund(&merged, at, &limits, *units, *lease_id);
                            exact = window::refund(&exact, at, &limits, *units, *lease_id);
                            exact_long = window::refund(&exact_long, at, &long, *units, *lease_id);
                        }
                        refunds.retain(|(at, _)| *at > now + ms);
                        now += ms;
                    }
                }
                prop_assert!(merged.len() <= 12 + 2 * (2 * GRANULES_PER_WINDOW as usize + 2) * limits.len(), "bounded");
                for limit in &limits {
                    let w = limit.window_ms.get();
                    let g = granule_ms(w);
                    for t in [now, now + 1, now + g as i64, now + (w / 3) as i64, now + w as i64 - 1] {
                        let (c, e) = (counted(&merged, t, w), counted(&exact, t, w));
                        prop_assert!(c >= e, "window {} at {}: counts {} < exact {}", w, t - now, c, e);
                        let late = counted(&exact_long, t, w + g);
                        prop_assert!(c <= late, "window {} at {}: counts {} > exact over w + {}: {}", w, t - now, c, g, late);
                    }
                }
            }
        }
    }
}
