//! A row of the other algorithm (the rule's `algorithm` changed in the
//! config), read towards blocking: the state of the rule's algorithm that
//! counts, at every instant from now on, at least what the row's own
//! algorithm counts of it. Only what the switch carries over is bounded
//! this way; the hits after it are counted by the rule's new algorithm, as
//! configured.
//!
//! - A sliding log met by a `gcra` rule: per window of `N` per `W`, the
//!   `tat` is the latest, over the log's hits newest first, of
//!   `(at + W)·N + (C − 1)·W` (in `1/N` ms, [`crate::count::gcra`]), `C`
//!   the units of that hit and every newer one. While a hit's window holds
//!   `C` units, GCRA then admits none that the log would refuse, and the
//!   `tat` is never before the one GCRA reaches by counting the same hits
//!   itself (each term exceeds GCRA's own by `(N − 1)·W`). The price: GCRA
//!   drains linearly what the log releases at once, so a key near its
//!   limit waits up to one more window.
//! - A GCRA row met by a `sliding_log` rule: each window's `u` units still
//!   owed (`tat` ahead of now) become `u` hits of cost 1, hit `j` (counted
//!   from 1) dated to leave the window when GCRA has drained all but
//!   `j − 1` of them: at every instant the log holds at least the units
//!   GCRA still counts (up to `N`, which refuses all), so it admits nothing
//!   GCRA would refuse. A cell kept for another `requests` is read as GCRA
//!   reads it ([`crate::count::gcra::tat_of`]). Past
//!   [`crate::count::coalesce::EXACT_ENTRIES`] units (a limit above
//!   10,000), the units leaving in one granule of the window
//!   ([`crate::count::coalesce::granule_ms`]) are one hit dated to leave at
//!   the granule's end: never before GCRA frees them, at most one granule
//!   (≤ W/1000) after, at most `2 × 1000 + 1` hits per window.
//!
//! Reservations (`;`) and a relief mark (`~`) follow the state and are
//! carried over unchanged ([`crate::count::counter`]).

use crate::count::coalesce;
use crate::count::gcra::{self, Cell};
use crate::count::limit::Limit;
use crate::count::window::Hit;

/// The GCRA state counting at least what `log` counts, window by window.
pub(crate) fn gcra_from_log(log: &[Hit], limits: &[Limit]) -> Vec<Cell> {
    if log.is_empty() {
        return Vec::new();
    }
    limits
        .iter()
        .map(|limit| {
            let (n, w) = (i128::from(limit.requests.get()), i128::from(limit.window_ms.get()));
            let mut units = 0i128;
            let mut tat = i128::MIN;
            for hit in log.iter().rev() {
                units += i128::from(hit.cost);
                tat = tat.max((i128::from(hit.at_ms) + w) * n + (units - 1) * w);
            }
            Cell { requests: limit.requests.get(), tat }
        })
        .collect()
}

/// The sliding log counting at least what the GCRA `cells` still count
/// at `now_ms`, oldest hit first; coalesced past
/// [`coalesce::EXACT_ENTRIES`] entries.
pub(crate) fn log_from_gcra(cells: &[Cell], now_ms: i64, limits: &[Limit]) -> Vec<Hit> {
    let mut log: Vec<Hit> = Vec::new();
    for (cell, limit) in cells.iter().zip(limits) {
        let (n, w) = (i128::from(limit.requests.get()), i128::from(limit.window_ms.get()));
        // A cell of another limit carries its units as GCRA reads it.
        let tat = gcra::tat_of(Some(cell), limit, now_ms);
        let owed = tat - i128::from(now_ms) * n;
        // Units still owed, rounded up, at most N: a window holding N
        // refuses every request, so the units past N (the first to leave)
        // change no answer, and the row stays bounded by the limits.
        let units = ((owed.max(0) + w - 1) / w).min(n);
        let run = if units <= coalesce::EXACT_ENTRIES as i128 {
            unit_run(tat, n, w, units)
        } else {
            granule_run(tat, n, w, units, limit.window_ms.get())
        };
        log = merge(&log, run);
    }
    coalesce::bounded(log, now_ms, limits)
}

/// The `units` owed as hits of cost 1: the j-th unit leaves the window
/// once GCRA owes at most j units, at the instant ⌈(tat − j·W) / N⌉ ms;
/// oldest (largest j) first.
fn unit_run(tat: i128, n: i128, w: i128, units: i128) -> Vec<Hit> {
    (0..units)
        .rev()
        .map(|j| {
            let leaves = (tat - j * w + n - 1).div_euclid(n);
            Hit { at_ms: i64::try_from(leaves - w).unwrap_or(i64::MAX), cost: 1 }
        })
        .collect()
}

/// The `units` owed (more than [`coalesce::EXACT_ENTRIES`]) as one hit per
/// granule of the window ([`coalesce::granule_ms`]): each unit of
/// [`unit_run`] made to leave at the end of its granule (never earlier
/// than GCRA frees it, at most one granule later), at most
/// `2 × GRANULES_PER_WINDOW + 1` hits. The units leaving by `b` are those
/// `j ≥ ⌈(tat − b·N) / W⌉`.
fn granule_run(tat: i128, n: i128, w: i128, units: i128, window_ms: u64) -> Vec<Hit> {
    let g = i128::from(coalesce::granule_ms(window_ms));
    let leaves = |j: i128| (tat - j * w + n - 1).div_euclid(n);
    let left_by = |b: i128| units - ((tat - b * n + w - 1).div_euclid(w)).clamp(0, units);
    let (first, last) = (leaves(units - 1), leaves(0));
    let mut out = Vec::new();
    let mut before = 0i128;
    let mut end = (first + g - 1).div_euclid(g) * g;
    while before < units {
        let upto = if end >= last { units } else { left_by(end) };
        let cost = upto - before;
        if cost > 0 {
            let cost = u32::try_from(cost).unwrap_or(u32::MAX);
            out.push(Hit { at_ms: i64::try_from(end - w).unwrap_or(i64::MAX), cost });
        }
        before = upto;
        end += g;
    }
    out
}

/// `log` and the hits of `run` (ascending), merged in order; hits at the
/// same time are one hit.
fn merge(log: &[Hit], run: Vec<Hit>) -> Vec<Hit> {
    let mut out: Vec<Hit> = Vec::with_capacity(log.len() + run.len());
    let mut next = 0;
    for item in run.into_iter().map(Some).chain([None]) {
        // Every hit of `log` up to the run's hit (all of them after the
        // run), then the run's own.
        let upto = item.map_or(log.len(), |h| next + log[next..].partition_point(|l| l.at_ms <= h.at_ms));
        let hits = log[next..upto].iter().copied().chain(item);
        next = upto;
        for hit in hits {
            match out.last_mut() {
                Some(last) if last.at_ms == hit.at_ms => last.cost = last.cost.saturating_add(hit.cost),
                _ => out.push(hit),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::window;

    fn limits(pairs: &[(u32, u64)]) -> Vec<Limit> {
        pairs.iter().map(|&(r, w)| Limit::new(r, w).unwrap()).collect()
    }

    /// How many units of cost 1 each reading admits, one at a time, at `t`.
    fn admits_log(log: &[Hit], t: i64, limits: &[Limit]) -> u64 {
        window::room(log, t, limits)
    }

    fn admits_gcra(cells: &[Cell], t: i64, limits: &[Limit]) -> u64 {
        gcra::room(cells, t, limits)
    }

    /// GCRA's own reading of the same hits: them counted by GCRA.
    fn gcra_replay(log: &[Hit], limits: &[Limit]) -> Vec<Cell> {
        let mut cells = Vec::new();
        for hit in log {
            cells = gcra::record(&cells, hit.at_ms, limits, hit.cost).0;
        }
        cells
    }

    #[test]
    fn a_log_read_by_gcra_admits_no_more_than_either_reading_at_any_time() {
        let now = 1_000_000;
        let cases: Vec<(Vec<Limit>, Vec<Hit>)> = vec![
            (limits(&[(10, 60_000)]), (0..10).map(|i| Hit { at_ms: now - 1_000 + i, cost: 1 }).collect()),
            (limits(&[(10, 60_000)]), (0..4).map(|i| Hit { at_ms: now - 50_000 + i * 10_000, cost: 2 }).collect()),
            (limits(&[(5, 1_000), (20, 60_000)]), (0..20).map(|i| Hit { at_ms: now - 59_000 + i * 2_900, cost: 1 }).collect()),
            (limits(&[(3, 10_000)]), vec![Hit { at_ms: now + 5_000, cost: 3 }]), // a lease, dated ahead
        ];
        for (limits, log) in cases {
            let converted = gcra_from_log(&log, &limits);
            let replayed = gcra_replay(&log, &limits);
            for t in (now..now + 130_000).step_by(250) {
                let got = admits_gcra(&converted, t, &limits);
                assert!(got <= admits_log(&log, t, &limits), "{limits:?} {log:?} at {t}: {got} over the log's reading");
                assert!(got <= admits_gcra(&replayed, t, &limits), "{limits:?} {log:?} at {t}: {got} over GCRA's reading");
            }
            // Bounded: two windows after the newest hit, everything is free.
            let free = log.last().unwrap().at_ms + 2 * limits.iter().map(|l| l.window_ms.get() as i64).max().unwrap();
            assert_eq!(admits_gcra(&converted, free, &limits), admits_log(&[], free, &limits));
        }
    }

    #[test]
    fn a_gcra_row_read_as_a_log_admits_no_more_than_gcra_at_any_time() {
        let now = 1_000_000;
        for (pairs, burst) in [(vec![(10, 60_000)], 10u32), (vec![(10, 60_000)], 4), (vec![(7, 1_000), (30, 60_000)], 7), (vec![(600, 1_000)], 450)] {
            let limits = limits(&pairs);
            let mut cells = Vec::new();
            for i in 0..burst {
                cells = gcra::record(&cells, now - 900 + i64::from(i), &limits, 1).0;
            }
            let log = log_from_gcra(&cells, now, &limits);
            assert!(log.windows(2).all(|p| p[0].at_ms < p[1].at_ms), "sorted, merged");
            for t in (now..now + 70_000).step_by(97) {
                let got = admits_log(&log, t, &limits);
                assert!(got <= admits_gcra(&cells, t, &limits), "{pairs:?} burst {burst} at {t}: {got} over GCRA's reading");
            }
        }
    }

    #[test]
    fn an_idle_or_foreign_row_converts_to_nothing_and_a_huge_one_to_at_most_n_hits() {
        let l = limits(&[(10, 60_000)]);
        let owed_a_lot = [Cell { requests: 10, tat: 1_000 * 10 + 60_000 * 1_000 }];
        let log = log_from_gcra(&owed_a_lot, 1_000, &l);
        assert_eq!(log.iter().map(|h| u64::from(h.cost)).sum::<u64>(), 10);
        assert_eq!(window::room(&log, 1_000, &l), 0);
        assert!(log_from_gcra(&[Cell { requests: 10, tat: 5 }], 1_000, &l).is_empty(), "tat in the past");
        let other = log_from_gcra(&[Cell { requests: 5, tat: 1_000 * 5 + 3 * 60_000 }], 1_000, &l);
        assert_eq!(other.iter().map(|h| h.cost).sum::<u32>(), 3, "another limit's 3 units owed carry over");
        assert_eq!(gcra::room(&gcra_from_log(&[], &l), 1_000, &l), 10);
    }

    #[test]
    fn a_gcra_row_of_a_daily_billion_reads_as_a_log_of_one_hit_per_granule() {
        let day = 86_400_000i64;
        let l = limits(&[(1_000_000_000, day as u64)]);
        let now = 100 * day;
        let mut cells = Vec::new();
        for i in 0..50 {
            cells = gcra::record(&cells, now - 3_000_000 + i * 60_000, &l, 12_000_000).0;
        }
        let log = log_from_gcra(&cells, now, &l);
        assert!(log.len() <= 2 * 1_000 + 2, "{} hits", log.len());
        assert!(log.windows(2).all(|p| p[0].at_ms < p[1].at_ms), "sorted, merged");
        assert_eq!(window::room(&log, now, &l), admits_gcra(&cells, now, &l), "the units GCRA owes, now");
        let g = crate::count::coalesce::granule_ms(day as u64) as i64;
        for t in (now..now + day + 3_600_000).step_by(1_234_567) {
            let got = admits_log(&log, t, &l);
            assert!(got <= admits_gcra(&cells, t, &l), "at {t}: {got} over GCRA's reading");
            assert!(got >= admits_gcra(&cells, t - g, &l), "at {t}: {got}, freed more than a granule after GCRA");
        }
    }
}
