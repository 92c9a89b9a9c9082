//! Concurrency limits: at most `concurrency` requests of one key
//! in flight at once, across every isolate and location. Pure.
//!
//! A request in flight is a [`Reservation`] in the key's row (two-phase
//! counting, [`crate::count::reservation`]): the `reserve` made before
//! forwarding is the slot, and the `commit` or `release` that settles the
//! request gives it back. So the slots live where the counts do, in the
//! key's object, and a rule with `limits` and `concurrency` takes both in
//! the same call: a reserve is allowed only if the request fits every window
//! *and* fewer than `concurrency` reservations are live.
//!
//! When the Worker gives a slot back, by the origin's
//! answer:
//!
//! - a status the rule does not count (`counting.statuses`): at its headers,
//!   as any failures-only rule settles: a stranger's 401 holds no slot;
//! - a counted status: once the body has been fully sent or the client
//!   went away, so a streamed answer holds its slot while it streams; but
//!   an answer the Worker has a chunk of ready that the client has not
//!   taken for `idle_release` (10 s by default) is cut and its slot given
//!   back: a client that stops reading holds the slot at most that long
//!   after its last read (plus one settling call);
//! - a WebSocket upgrade (101, whatever the statuses counted): once either
//!   side closed the session, which the Worker relays for it (the session
//!   *is* the work in flight);
//! - every hold ends [`LAPSE_MARGIN_MS`] before the first of its
//!   reservations would lapse ([`hold_left_ms`]): the answer is cut, the
//!   session closed, since the object frees the slot at `reservation_ttl`
//!   whatever the Worker does, and the origin would then have one more.
//!
//! A slot whose Worker was lost is freed when its reservation expires
//! (`reservation_ttl`): until then the key has one slot fewer, never one
//! more.
//!
//! A refusal owed to full slots is [`Tally::in_flight`]: never cached (a
//! release frees a slot at once), its wait at most until the first slot
//! lapses (the Worker shortens it from the holds it has seen,
//! [`crate::count::hold`]).

use crate::count::reservation::{self, Reservation};
use crate::count::tally::Tally;

/// Whether `held` leaves no slot for one more request under `concurrency`
/// (`None`: the rule has no concurrency limit, never full).
pub(crate) fn full(held: &[Reservation], concurrency: Option<u32>) -> bool {
    concurrency.is_some_and(|n| held.len() >= n as usize)
}

/// The refusal of a request when every slot is taken, at `now_ms`, given
/// the tally the windows would have allowed it with: blocked, owed to
/// requests in flight, until the first slot lapses at the latest.
pub(crate) fn refused(allowed: Tally, held: &[Reservation], now_ms: i64) -> Tally {
    let lapse = reservation::first_expiry(held).map_or(1, |at| u64::try_from(at.saturating_sub(now_ms)).unwrap_or(0));
    Tally { allowed: false, retry_after_ms: lapse.max(1), in_flight: true, binding: None, ..allowed }
}

/// How long before its reservation lapses (by the object's clock) the
/// Worker ends an answer holding a slot: the object frees the slot at the
/// expiry whatever the Worker does, so the origin must be done before it.
/// It covers a difference between the Worker's and the object's clocks
/// and the close reaching the origin.
pub(crate) const LAPSE_MARGIN_MS: i64 = 1_000;

/// How long an answer holding `reservations` (each: its id, which carries
/// the object's reserve time, and its `reservation_ttl`) may go on at
/// `now_ms`: until the first lapses, less [`LAPSE_MARGIN_MS`]; 0: end it
/// now. `None`: it holds none.
pub(crate) fn hold_left_ms(reservations: impl IntoIterator<Item = (u64, u64)>, now_ms: i64) -> Option<u64> {
    let first = reservations
        .into_iter()
        .map(|(id, ttl_ms)| reservation::reserved_at(id).saturating_add(i64::try_from(ttl_ms).unwrap_or(i64::MAX)))
        .min()?;
    Some(u64::try_from(first.saturating_sub(LAPSE_MARGIN_MS).saturating_sub(now_ms)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::algorithm::Algorithm;
    use crate::count::counter::step;
    use crate::count::limit::Limit;
    use crate::count::protocol::{Call, Op};

    fn call(op: Op, algorithm: Algorithm, concurrency: Option<u32>) -> Call {
        Call::new(op, algorithm, vec![Limit::new(100, 60_000).unwrap()]).with_hold_ms(5_000).with_concurrency(concurrency)
    }

    #[test]
    fn a_hold_ends_a_margin_before_its_first_reservation_lapses() {
        let at = |reserved_at: i64| reservation::next_id(&[], reserved_at);
        assert_eq!(hold_left_ms([], 0), None);
        let (a, b) = (at(10_000), at(12_000));
        assert_eq!(reservation::reserved_at(a), 10_000);
        assert_eq!(hold_left_ms([(a, 60_000), (b, 5_000)], 11_000), Some(12_000 + 5_000 - 1_000 - 11_000), "the first to lapse");
        assert_eq!(hold_left_ms([(a, 60_000)], 69_500), Some(0), "inside the margin: now");
        assert_eq!(hold_left_ms([(a, 60_000)], 99_000), Some(0), "past it");
    }

    #[test]
    fn full_counts_live_reservations() {
        let r = |id| Reservation { id, expires_at: 10, cost: 1 };
        assert!(!full(&[r(1), r(2)], None), "no limit");
        assert!(!full(&[r(1), r(2)], Some(3)));
        assert!(full(&[r(1), r(2), r(3)], Some(3)));
        assert!(full(&[], Some(0)), "a call never carries 0 (refused by the protocol)");
    }

    /// N slots per key: the N+1th reserve waits, uncached, until one is
    /// settled (committed or released) or lapses; the windows still apply.
    #[test]
    fn at_most_n_in_flight_and_a_settled_or_lapsed_slot_is_free_again() {
        for algorithm in [Algorithm::SlidingLog, Algorithm::Gcra] {
            let mut row = String::new();
            let mut apply = |now: i64, call: &Call| {
                let s = step(&row, now, call).unwrap();
                if let Some(w) = &s.write {
                    row = w.row.clone();
                }
                s
            };
            let reserve = call(Op::Reserve, algorithm, Some(3));
            let ids: Vec<_> = (0..3).map(|t| apply(t, &reserve).reservation.unwrap()).collect();
            let fourth = apply(3, &reserve);
            assert!(!fourth.tally.allowed && fourth.tally.in_flight && fourth.write.is_none(), "{algorithm:?}");
            assert_eq!(fourth.tally.retry_after_ms, 5_000 - 3, "{algorithm:?}: until the first slot lapses");
            assert!(!apply(3, &reserve.clone().with_op(Op::Check)).tally.allowed, "{algorithm:?}: check agrees");
            apply(4, &call(Op::Release, algorithm, None).with_reservation(ids[1]));
            assert!(apply(5, &reserve).tally.allowed, "{algorithm:?}: a released slot");
            assert!(!apply(6, &reserve).tally.allowed, "{algorithm:?}: full again");
            apply(7, &call(Op::Commit, algorithm, None).with_reservation(ids[0]));
            assert!(apply(8, &reserve).tally.allowed, "{algorithm:?}: a committed slot");
            let lapsed = apply(5_003, &reserve);
            assert!(lapsed.tally.allowed, "{algorithm:?}: slots of lost requests lapse at reservation_ttl");
            assert!(apply(5_003, &call(Op::Reserve, algorithm, None)).tally.allowed, "{algorithm:?}: a call without concurrency ignores slots");
        }
    }

    #[test]
    fn the_windows_still_bind_beside_the_slots() {
        let limited = call(Op::Reserve, Algorithm::SlidingLog, Some(5)).with_limits(vec![Limit::new(2, 60_000).unwrap()]);
        let mut row = String::new();
        for t in 0..2 {
            let s = step(&row, t, &limited).unwrap();
            row = s.write.unwrap().row;
        }
        let third = step(&row, 2, &limited).unwrap();
        assert!(!third.tally.allowed && third.tally.in_flight, "2 reserved fill a limit of 2, with 3 slots left");
    }
}
