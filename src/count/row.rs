//! The stored row of a limiter object: one typed value ([`CountRow`], behind
//! its penalty) and
//! its one codec. Every wrapper around the counter's state is spelled here
//! and nowhere else (they were parsed in three modules).
//!
//! # Spelling, version 1
//! ```text
//! [!{penalty_until_ms}|]{state}[;{reservations}][~{mark}]
//! ```
//! - `!{until}|`: the penalty in force until `until` (Unix ms;
//!   [`crate::count::penalty`]), first, so the object reads it before the
//!   count;
//! - `{state}`: the algorithm's own encoding (a sliding log,
//!   [`crate::count::window::encode_log`], or a GCRA state `g:...`,
//!   [`crate::count::gcra::encode`]), read by the counter, not here;
//! - `;{reservations}`: the reservations of two-phase counting
//!   ([`crate::count::reservation::encode`]);
//! - `~{mark}`: a relief rule's spelling mark ([`Mark`]), last; the last
//!   `~` separates it.
//!
//! Each wrapper is written only when it holds something, so a row of a
//! rule that uses none of them is the bare state, as rows of 0.1.0 were:
//! every row written by 0.1.0 and 0.2.0 reads as it did.
//!
//! # Versions, and why version 1 is written bare
//! A row persists across deploys, and during a gradual deploy an object of
//! the release before may read a row this release wrote (and the other way
//! round: see `DESIGN.md`, "every deploy is a version skew"). An older
//! object reads a row it does not know as corrupt: it refuses the call
//! (the Worker applies `on_error`) and its alarm deletes the row, the
//! count with it. A version byte on every row would do that to every row
//! this release writes. So version 1 is written as it always was, with no
//! version, and stays so for as long as releases that know only it may
//! run. A later spelling is marked `#{version}|` at the start of the row
//! (no version-1 row starts with `#`): this build refuses such a row as
//! [`CorruptRow::NewerRow`], as an older object would. A release may write
//! version 2 only once every release that may still run reads it: one
//! release that reads it, then one that writes it.

use crate::count::algorithm::{excerpt, CorruptRow};
use crate::count::reservation::{self, Reservation};
use crate::request::spelling::Mark;

/// What starts a penalised row.
const PENALTY: char = '!';
/// What ends the penalty's prefix.
const PENALTY_END: char = '|';
/// What separates the state from the reservations.
const RESERVATIONS: char = ';';
/// What separates the mark from the rest (the last one in the row).
const MARK: char = '~';
/// What starts a row of a spelling after version 1.
const VERSIONED: char = '#';

/// The count's part of a row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct CountRow<'a> {
    /// The algorithm's encoding of its state (empty: nothing counted).
    pub(crate) state: &'a str,
    /// Every reservation written, live or expired (the counter prunes).
    pub(crate) held: Vec<Reservation>,
    /// A relief rule's mark of the spellings its count was committed under.
    pub(crate) mark: Option<Mark>,
}

/// The row without its penalty, and the penalty's end; a prefix that does
/// not read as one is a corrupt row (as is a row of a later version).
pub(crate) fn split_penalty(text: &str) -> Result<(&str, Option<i64>), CorruptRow> {
    if text.starts_with(VERSIONED) {
        return Err(CorruptRow::NewerRow(excerpt(text)));
    }
    let Some(tail) = text.strip_prefix(PENALTY) else { return Ok((text, None)) };
    let read = tail.split_once(PENALTY_END).and_then(|(until, rest)| Some((rest, until.parse::<i64>().ok()?)));
    match read {
        Some((rest, until)) => Ok((rest, Some(until))),
        None => Err(CorruptRow::UnreadablePenalty(excerpt(text))),
    }
}

/// The row holding the count's text `rest` and the penalty ending at
/// `until` (none: `rest` as it is).
pub(crate) fn join_penalty(rest: &str, until: Option<i64>) -> String {
    match until {
        Some(until) => format!("{PENALTY}{until}{PENALTY_END}{rest}"),
        None => rest.to_string(),
    }
}

/// Reads the count's part of a row (the penalty's prefix removed).
pub(crate) fn decode_count(text: &str) -> Result<CountRow<'_>, CorruptRow> {
    let (rest, mark) = match text.rsplit_once(MARK) {
        Some((rest, mark)) => (rest, Some(Mark::decode(mark))),
        None => (text, None),
    };
    let (state, held) = rest.split_once(RESERVATIONS).unwrap_or((rest, ""));
    Ok(CountRow { state, held: reservation::decode(held)?, mark })
}

/// The count's text of `state` (the counter's encoding) and `held`, with
/// no mark: just `state` when nothing is held.
pub(crate) fn encode_count(mut state: String, held: &[Reservation]) -> String {
    if !held.is_empty() {
        state.push(RESERVATIONS);
        state.push_str(&reservation::encode(held));
    }
    state
}

/// `count` (an [`encode_count`]) with `mark` after it, if any.
pub(crate) fn with_mark(mut count: String, mark: Option<Mark>) -> String {
    if let Some(mark) = mark {
        count.push(MARK);
        count.push_str(&mark.encode());
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the three parsers before this module (`penalty::split`,
    /// `counter::split_mark`, `reservation::split_row` and `decode`) read
    /// from each row, captured by running them: `Ok((penalty,
    /// mark, state, reservations))`, or the error.
    const CAPTURED: [(&str, &str); 32] = [
        ("", "Ok((None, None, \"\", Ok([])))"),
        ("10,20", "Ok((None, None, \"10,20\", Ok([])))"),
        ("0*3,10", "Ok((None, None, \"0*3,10\", Ok([])))"),
        ("g:", "Ok((None, None, \"g:\", Ok([])))"),
        ("g:2/1000", "Ok((None, None, \"g:2/1000\", Ok([])))"),
        ("g:2/1000,5/77", "Ok((None, None, \"g:2/1000,5/77\", Ok([])))"),
        ("0,10;5000@100,5001@300*3", "Ok((None, None, \"0,10\", Ok([Reservation { id: 5000, expires_at: 100, cost: 1 }, Reservation { id: 5001, expires_at: 300, cost: 3 }])))"),
        (";5000@100", "Ok((None, None, \"\", Ok([Reservation { id: 5000, expires_at: 100, cost: 1 }])))"),
        ("g:2/1000;1@2*9", "Ok((None, None, \"g:2/1000\", Ok([Reservation { id: 1, expires_at: 2, cost: 9 }])))"),
        ("!99|10,20", "Ok((Some(99), None, \"10,20\", Ok([])))"),
        ("!99|", "Ok((Some(99), None, \"\", Ok([])))"),
        ("!-5|g:2/1000", "Ok((Some(-5), None, \"g:2/1000\", Ok([])))"),
        ("!99|0,10;5@9*2~*", "Ok((Some(99), Some(Mixed), \"0,10\", Ok([Reservation { id: 5, expires_at: 9, cost: 2 }])))"),
        ("0,10~00000000deadbeef", "Ok((None, Some(One(3735928559)), \"0,10\", Ok([])))"),
        ("g:1/2~*", "Ok((None, Some(Mixed), \"g:1/2\", Ok([])))"),
        ("0,10;5@9~junk", "Ok((None, Some(Mixed), \"0,10\", Ok([Reservation { id: 5, expires_at: 9, cost: 1 }])))"),
        ("~*", "Ok((None, Some(Mixed), \"\", Ok([])))"),
        ("0,10~", "Ok((None, Some(Mixed), \"0,10\", Ok([])))"),
        ("0,10~a;b", "Ok((None, Some(Mixed), \"0,10\", Ok([])))"),
        ("!1|!2|0", "Ok((Some(1), None, \"!2|0\", Ok([])))"),
        ("0,10;5@9~a~b", "Ok((None, Some(Mixed), \"0,10\", Err(UnreadableReservation { index: 0, entry: \"5@9~a\" })))"),
        ("0,10;x@y", "Ok((None, None, \"0,10\", Err(UnreadableReservation { index: 0, entry: \"x@y\" })))"),
        ("0,10;5@9*0", "Ok((None, None, \"0,10\", Err(UnreadableReservation { index: 0, entry: \"5@9*0\" })))"),
        ("0,10;5@9,", "Ok((None, None, \"0,10\", Err(UnreadableReservation { index: 1, entry: \"\" })))"),
        ("0,10;", "Ok((None, None, \"0,10\", Ok([])))"),
        ("!x|1", "Err(UnreadablePenalty(\"!x|1\"))"),
        ("!12", "Err(UnreadablePenalty(\"!12\"))"),
        ("!", "Err(UnreadablePenalty(\"!\"))"),
        ("!-|", "Err(UnreadablePenalty(\"!-|\"))"),
        ("!7|0,10;5@9*2,6@10~00000000000000ff", "Ok((Some(7), Some(One(255)), \"0,10\", Ok([Reservation { id: 5, expires_at: 9, cost: 2 }, Reservation { id: 6, expires_at: 10, cost: 1 }])))"),
        ("|0,10", "Ok((None, None, \"|0,10\", Ok([])))"),
        ("0|10", "Ok((None, None, \"0|10\", Ok([])))"),
    ];

    /// The codec reads each row as the parsers before it did; where they
    /// found the reservations unreadable (the row refused), it refuses the
    /// row with the same error.
    #[test]
    fn every_old_spelling_reads_as_before() {
        for (text, captured) in CAPTURED {
            let read = match decode(text) {
                Ok(row) => {
                    let parts = (row.penalty_until, row.count.mark, row.count.state.to_string(), Ok::<_, CorruptRow>(row.count.held));
                    format!("{:?}", Ok::<_, CorruptRow>(parts))
                }
                Err(e @ CorruptRow::UnreadableReservation { .. }) => {
                    assert!(captured.ends_with(&format!(", Err({e:?})))")), "{text:?}: {e:?} vs {captured}");
                    continue;
                }
                Err(e) => format!("{:?}", Err::<(), _>(e)),
            };
            assert_eq!(read, captured, "{text:?}");
        }
    }

    #[test]
    fn a_row_of_a_later_version_is_refused_as_an_older_object_refuses_it() {
        assert_eq!(decode("#2|anything"), Err(CorruptRow::NewerRow("#2|anything".into())));
        assert!(decode("#2|x").unwrap_err().to_string().contains("later version"));
        // This build never writes one: a state cannot start with `#`.
        assert!(!StoredRow { penalty_until: None, count: CountRow::default() }.encode().starts_with(VERSIONED));
    }

    fn any_mark() -> impl Strategy<Value = Option<Mark>> {
        prop_oneof![Just(None), Just(Some(Mark::Mixed)), any::<u64>().prop_map(|t| Some(Mark::One(t)))]
    }

    fn any_state() -> impl Strategy<Value = String> {
        // Both algorithms' spellings (never holding a wrapper's character).
        prop_oneof!["[0-9*,]{0,24}", "g:[0-9/,]{0,24}"]
    }

    fn any_held() -> impl Strategy<Value = Vec<Reservation>> {
        prop::collection::vec((any::<u64>(), any::<i64>(), 1..=u32::MAX), 0..4)
            .prop_map(|v| v.into_iter().map(|(id, expires_at, cost)| Reservation { id, expires_at, cost }).collect())
    }

    proptest! {
        #[test]
        fn decode_of_encode_is_the_row(until in prop::option::of(any::<i64>()), state in any_state(), held in any_held(), mark in any_mark()) {
            let row = StoredRow { penalty_until: until, count: CountRow { state: &state, held, mark } };
            let text = row.encode();
            prop_assert_eq!(decode(&text), Ok(row.clone()));
            // The parts as the object and the counter write them: the same text.
            let count = with_mark(encode_count(state.clone(), &row.count.held), mark);
            prop_assert_eq!(join_penalty(&count, until), text);
        }
    }

    /// A whole stored row, read: the penalty (the object's part) and the
    /// count (the counter's part).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct StoredRow<'a> {
        /// When the key's penalty ends (Unix ms), ended or not.
        pub(crate) penalty_until: Option<i64>,
        pub(crate) count: CountRow<'a>,
    }

    /// Reads a whole row; a wrapper that does not read as its spelling is a
    /// corrupt row (the state itself is the counter's to read).
    pub(crate) fn decode(text: &str) -> Result<StoredRow<'_>, CorruptRow> {
        let (rest, penalty_until) = split_penalty(text)?;
        Ok(StoredRow { penalty_until, count: decode_count(rest)? })
    }

    impl StoredRow<'_> {
        /// The row's text, as [`decode`] reads it back.
        pub(crate) fn encode(&self) -> String {
            join_penalty(&self.count.encode(), self.penalty_until)
        }
    }

    impl CountRow<'_> {
        /// The count's text, as [`decode_count`] reads it back: the state,
        /// then the reservations and the mark when there are any.
        pub(crate) fn encode(&self) -> String {
            with_mark(encode_count(self.state.to_string(), &self.held), self.mark)
        }
    }
}
