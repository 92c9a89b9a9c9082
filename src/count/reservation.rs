//! Reservations: the first phase of two-phase counting, pure.
//!
//! A failures-only rule (`counting.statuses`) cannot know before forwarding
//! whether a request will count: the origin's status decides. Checking
//! first and recording after the origin answers lets every request in
//! flight pass the same check, so concurrent requests overshoot the limit
//! by their number. Two phases make it exact:
//!
//! 1. **Reserve** (before forwarding): allowed only if, in every window,
//!    the committed hits + the live reservations + the request's cost fit
//!    the limit; the object then stores a [`Reservation`] holding the cost,
//!    and the Worker gets its id.
//! 2. **Commit** (a counted status) turns it into a hit, or **release**
//!    (any other status, no answer, or a request tollgate itself answered)
//!    removes it.
//!
//! # A committed hit is dated at commit time
//! Not at reservation time, for three reasons:
//! - it never over-admits across a window boundary, whichever time the
//!   window is measured by. At every moment, each window's committed hits
//!   plus the live reservations fit the limit: a reserve only succeeds if
//!   they do, and a commit swaps a reservation for a hit of the same cost
//!   dated *now*, which every window counts. So at most `N` hits have their
//!   commit time in any window, and none of those requests can have reached
//!   the origin before its window began, nor answered after it ended. Dating
//!   a hit back to its reservation would let it leave the window early: a
//!   request reserved at 0 that answered at 50 ms leaves a 1-per-minute
//!   window at 60 s, so the next one, admitted at 60 s, is answered within
//!   a minute of the first. Two counted answers in one window.
//! - the log stays sorted by construction (a hit dated in the past would
//!   have to be inserted among newer ones);
//! - the price is small and on the safe side: a slot is held from the
//!   reservation until one window after the commit, i.e. one origin round
//!   trip longer than the window.
//!
//! GCRA works the same way: a reserve is allowed if the cell's backlog,
//! the reservations and the cost together fit (`tat + (held + cost)·T ≤
//! now + W`); a commit advances `tat` from now, as a hit at commit time;
//! a release only drops the reservation, so `tat` is never wound back and
//! nothing is guessed. Each commit is then conforming at its commit time,
//! so GCRA's own bounds hold over commit times (N per W in the long run,
//! at most 2N − 1 in some window; see [`crate::count::gcra`]).
//!
//! # Expiry
//! A reservation expires `hold_ms` after it was made (the rule's
//! `reservation_ttl`; by default twice the rule's `timeout` plus 100 s, see
//! `config::ORIGIN_ALLOWANCE_MS`); it is pruned by the next call
//! after that, and never counts again. Only a request whose Worker was lost
//! between forwarding and settling (the isolate evicted, the `waitUntil`
//! budget exceeded) leaves one. Its slot stays taken until the expiry: the
//! count errs towards blocking, never towards admitting. A response slower
//! than the hold still counts when it commits (an unknown reservation is
//! committed as a plain hit), but between the expiry and the commit its
//! slot was free: the limit can then be exceeded by the requests admitted
//! in that gap.
//!
//! The row's TTL covers its reservations: the alarm never deletes a row
//! holding a live one ([`crate::count::counter::on_alarm`]). Were it deleted
//! anyway (an admin reset), the reservation's commit would still count as
//! a hit, and its release would change nothing: harmless.
//!
//! # Ids
//! An id is `now_ms × 1000`, or one more than the largest live id if that
//! is larger: unique among the live reservations and increasing with time,
//! so a late commit or release of an expired reservation never settles a
//! newer one (unless the clock stepped back while none was live).
//!
//! # Row format
//! Reservations follow the counter's state in the same row, after a `;`
//! ([`crate::count::row`] places them): `<state>;<id>@<expires_at>[*cost],...`.
//! A row without `;` (every row written before two-phase counting) holds
//! none and reads unchanged.

use crate::count::algorithm::{excerpt, CorruptRow};

/// One request in flight: the cost it holds, until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub(crate) id: u64,
    /// Unix ms after which it no longer counts.
    pub(crate) expires_at: i64,
    pub(crate) cost: u32,
}

/// `id@expires_at` or `id@expires_at*cost`, comma-separated.
pub(crate) fn encode(held: &[Reservation]) -> String {
    let entries: Vec<String> = held
        .iter()
        .map(|r| match r.cost {
            1 => format!("{}@{}", r.id, r.expires_at),
            cost => format!("{}@{}*{cost}", r.id, r.expires_at),
        })
        .collect();
    entries.join(",")
}

/// Reads back what [`encode`] wrote, naming the first entry it cannot take.
pub(crate) fn decode(text: &str) -> Result<Vec<Reservation>, CorruptRow> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .enumerate()
        .map(|(index, entry)| {
            let parsed = entry.split_once('@').and_then(|(id, rest)| {
                let (expires_at, cost) = match rest.split_once('*') {
                    Some((at, cost)) => (at, cost.parse().ok().filter(|c| *c > 0)?),
                    None => (rest, 1),
                };
                Some(Reservation { id: id.parse().ok()?, expires_at: expires_at.parse().ok()?, cost })
            });
            parsed.ok_or_else(|| CorruptRow::UnreadableReservation { index, entry: excerpt(entry) })
        })
        .collect()
}

/// The reservations still live at `now_ms`: expired ones never count again.
pub(crate) fn live(held: Vec<Reservation>, now_ms: i64) -> Vec<Reservation> {
    held.into_iter().filter(|r| r.expires_at > now_ms).collect()
}

/// The units `held` holds.
pub(crate) fn units(held: &[Reservation]) -> u64 {
    held.iter().map(|r| u64::from(r.cost)).sum()
}

/// Ids per millisecond: an id is its reserve time in ms times this, bumped
/// past a live id of the same millisecond (see the module doc).
const IDS_PER_MS: u64 = 1_000;

/// A fresh id at `now_ms` (see the module doc).
pub(crate) fn next_id(held: &[Reservation], now_ms: i64) -> u64 {
    let from_clock = u64::try_from(now_ms).unwrap_or(0).saturating_mul(IDS_PER_MS);
    held.iter().map(|r| r.id.saturating_add(1)).fold(from_clock, u64::max)
}

/// The reserve time (Unix ms) reservation `id` carries: [`next_id`]'s
/// inverse (a bumped id reads as its millisecond).
pub(crate) fn reserved_at(id: u64) -> i64 {
    i64::try_from(id / IDS_PER_MS).unwrap_or(i64::MAX)
}

/// Removes and returns reservation `id`, if it is held.
pub(crate) fn take(held: &mut Vec<Reservation>, id: Option<u64>) -> Option<Reservation> {
    let at = held.iter().position(|r| Some(r.id) == id)?;
    Some(held.remove(at))
}

/// When the last of `held` expires; `None` when nothing is held.
pub(crate) fn last_expiry(held: &[Reservation]) -> Option<i64> {
    held.iter().map(|r| r.expires_at).max()
}

/// When the first of `held` expires; `None` when nothing is held.
pub(crate) fn first_expiry(held: &[Reservation]) -> Option<i64> {
    held.iter().map(|r| r.expires_at).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Reservation = Reservation { id: 5_000, expires_at: 100, cost: 1 };
    const B: Reservation = Reservation { id: 5_001, expires_at: 300, cost: 3 };

    #[test]
    fn rows_split_and_join_and_old_rows_hold_nothing() {
        use crate::count::row::{decode_count, encode_count};
        assert!(decode_count("0,10").unwrap().held.is_empty(), "a row from before two-phase counting");
        assert_eq!(decode_count("g:2/1000").unwrap().state, "g:2/1000");
        let row = encode_count("0,10".into(), &[A, B]);
        assert_eq!(row, "0,10;5000@100,5001@300*3");
        assert_eq!(encode(&[A, B]), "5000@100,5001@300*3");
        assert_eq!((decode_count(&row).unwrap().state, decode_count(&row).unwrap().held), ("0,10", vec![A, B]));
        assert_eq!(encode_count("g:".into(), &[]), "g:", "nothing held: the state alone");
        assert_eq!(encode_count(String::new(), &[A]), ";5000@100");
        assert_eq!(decode(""), Ok(vec![]));
    }

    #[test]
    fn unreadable_entries_are_named() {
        for (text, index, entry) in [
            ("x", 0, "x"),
            ("1@2,3", 1, "3"),
            ("1@2*0", 0, "1@2*0"),
            ("1@x", 0, "1@x"),
            ("-1@2", 0, "-1@2"),
            ("1@2*", 0, "1@2*"),
        ] {
            assert_eq!(decode(text), Err(CorruptRow::UnreadableReservation { index, entry: entry.into() }), "{text}");
        }
    }

    #[test]
    fn expiry_ids_and_taking() {
        assert_eq!(live(vec![A, B], 99), vec![A, B]);
        assert_eq!(live(vec![A, B], 100), vec![B], "expired at its expiry");
        assert_eq!(units(&[A, B]), 4);
        assert_eq!((first_expiry(&[A, B]), last_expiry(&[A, B]), last_expiry(&[])), (Some(100), Some(300), None));
        assert_eq!(next_id(&[], 7), 7_000);
        assert_eq!(next_id(&[A, B], 5), 5_002, "above every live id");
        assert_eq!(next_id(&[A], 9), 9_000, "from the clock once it is ahead");
        assert_eq!(next_id(&[], -5), 0, "a clock before 1970 never panics");
        let mut held = vec![A, B];
        assert_eq!(take(&mut held, Some(5_001)), Some(B));
        assert_eq!(take(&mut held, Some(5_001)), None, "taken once");
        assert_eq!(take(&mut held, None), None);
        assert_eq!(held, vec![A]);
    }

    #[test]
    fn ids_carry_their_reserve_time() {
        assert_eq!(reserved_at(1_700_000_000_000_000), 1_700_000_000_000);
        assert_eq!(reserved_at(1_700_000_000_000_003), 1_700_000_000_000, "a bumped id: the same ms");
        assert_eq!(reserved_at(u64::MAX), i64::try_from(u64::MAX / 1_000).unwrap());
        assert_eq!(reserved_at(next_id(&[], 1_700_000_000_123)), 1_700_000_000_123, "next_id's inverse");
    }
}
