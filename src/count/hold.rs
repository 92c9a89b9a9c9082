//! How long requests in flight hold their slots, as this isolate has seen
//! them, pure: the `Retry-After` of a refusal owed to slots in flight.
//!
//! A failures-only rule refuses a request when the committed hits and the
//! live reservations fill the limit ([`crate::count::reservation`]). The object
//! can only bound such a wait by when the first reservation *lapses*
//! (`reservation_ttl`, 114 s by default), but a reservation ends as soon as
//! its request is settled: after the origin's answer, or after
//! `upload_timeout` for an upload that stalls (`pipeline::upload`). Without the
//! holds an 8 s hold was answered `Retry-After: 103`.
//!
//! So the Worker records how long each reservation it settles was held
//! (from the reservation's id, which is its reserve time × 1000, to the
//! settle), keeps the last [`SAMPLES`] per rule, and answers a refusal owed
//! to slots in flight with the longest of them: a slot taken now is
//! expected back within that (those in flight are older, so sooner).
//! With nothing seen yet (a fresh isolate), it answers `upload_timeout`,
//! the longest a slot waits on a client's upload. Never more than the
//! object's own bound, never under 1 s. It is an estimate, not a promise:
//! an origin slower than before holds longer; the refusal is never cached,
//! so an earlier retry is simply answered again.

use std::collections::HashMap;

/// Holds kept per rule: the last eight.
pub(crate) const SAMPLES: usize = 8;

/// The shortest estimate: `Retry-After` counts whole seconds.
const MIN_ESTIMATE_MS: u64 = 1_000;

/// The rules (by name) a config has are few; each keeps [`SAMPLES`] holds.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    by_rule: HashMap<String, Recent>,
}

/// The last [`SAMPLES`] holds of a rule, in ms (a ring).
#[derive(Debug, Default)]
struct Recent {
    held_ms: [u64; SAMPLES],
    /// Where the next hold goes.
    next: usize,
    /// How many of `held_ms` are holds (at most [`SAMPLES`]).
    filled: usize,
}

impl Holds {
    /// Records that a reservation of `rule` made at `reserved_ms` was
    /// settled at `now_ms` (a clock step back counts as 0).
    pub(crate) fn record(&mut self, rule: &str, reserved_ms: i64, now_ms: i64) {
        let held = u64::try_from(now_ms.saturating_sub(reserved_ms)).unwrap_or(0);
        let recent = match self.by_rule.get_mut(rule) {
            Some(recent) => recent,
            None => self.by_rule.entry(rule.to_string()).or_default(),
        };
        recent.held_ms[recent.next] = held;
        recent.next = (recent.next + 1) % SAMPLES;
        recent.filled = (recent.filled + 1).min(SAMPLES);
    }

    /// The longest of `rule`'s recent holds; `None` before the first.
    pub(crate) fn longest(&self, rule: &str) -> Option<u64> {
        let recent = self.by_rule.get(rule)?;
        recent.held_ms[..recent.filled].iter().copied().max()
    }
}

/// What [`in_flight_retry_ms`] answers before this isolate has seen a
/// hold of the rule: for a refusal by a window the reservations fill,
/// `upload_timeout_ms` (the longest a slot waits on a client's upload);
/// for one by `concurrency`'s slots, nothing ([`MIN_ESTIMATE_MS`]): a slot
/// is back when any request in flight ends, which is not known, and the
/// refusal is never cached, so a retry costs one object call and writes
/// nothing (`Retry-After: 10` for a slot back after 1.5 s).
pub(crate) fn unseen_wait_ms(by: crate::count::blocked::Refusal, upload_timeout_ms: u32) -> u32 {
    match by {
        crate::count::blocked::Refusal::Concurrency => 0,
        _ => upload_timeout_ms,
    }
}

/// The wait to answer for a refusal owed to slots in flight: the
/// longest recent hold (`longest`), else `upload_timeout_ms`; at least 1 s,
/// at most the object's bound (`object_ms`: until the first reservation
/// lapses, or the algorithm's own wait).
pub(crate) fn in_flight_retry_ms(object_ms: u64, longest: Option<u64>, upload_timeout_ms: u32) -> u64 {
    let estimate = longest.unwrap_or(u64::from(upload_timeout_ms)).max(MIN_ESTIMATE_MS);
    object_ms.min(estimate).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_of_the_last_eight_holds() {
        let mut holds = Holds::default();
        assert_eq!(holds.longest("quota"), None, "nothing seen");
        holds.record("quota", 1_000, 4_000);
        assert_eq!(holds.longest("quota"), Some(3_000));
        holds.record("quota", 5_000, 5_200);
        assert_eq!(holds.longest("quota"), Some(3_000), "the longest");
        for i in 0..SAMPLES as i64 {
            holds.record("quota", 10_000 + i, 10_100 + i);
        }
        assert_eq!(holds.longest("quota"), Some(100), "the 3 s hold is out of the last eight");
        holds.record("quota", 20_000, 19_000);
        assert_eq!(holds.longest("quota"), Some(100), "a clock step back counts as 0");
        assert_eq!(holds.longest("login"), None, "per rule");
        for i in 0..100 {
            holds.record("login", 0, i);
        }
        assert_eq!(holds.longest("login"), Some(99), "the ring wraps without loss");
    }

    #[test]
    fn an_honest_wait_for_slots_in_flight() {
        // An 8 s hold answered 103 s (the reservation's lapse).
        assert_eq!(in_flight_retry_ms(103_000, Some(8_000), 10_000), 8_000, "the longest hold seen");
        assert_eq!(in_flight_retry_ms(103_000, None, 10_000), 10_000, "nothing seen: upload_timeout");
        assert_eq!(in_flight_retry_ms(103_000, Some(40), 10_000), 1_000, "at least 1 s");
        assert_eq!(in_flight_retry_ms(2_500, Some(8_000), 10_000), 2_500, "never past the object's bound");
        assert_eq!(in_flight_retry_ms(0, None, 0), 1);
    }

    /// A fresh isolate answered a full set of slots with
    /// `upload_timeout` (10 s) for a slot back after 1.5 s.
    #[test]
    fn a_refusal_by_the_slots_claims_no_wait_it_has_not_seen() {
        use crate::count::blocked::Refusal;
        let unseen = |by| in_flight_retry_ms(103_000, None, unseen_wait_ms(by, 10_000));
        assert_eq!(unseen(Refusal::Concurrency), 1_000, "nothing seen: the shortest wait");
        assert_eq!(unseen(Refusal::Limit), 10_000, "a window full of reservations: upload_timeout, as before");
        assert_eq!(in_flight_retry_ms(103_000, Some(1_500), unseen_wait_ms(Refusal::Concurrency, 10_000)), 1_500, "seen: the longest hold");
    }
}
