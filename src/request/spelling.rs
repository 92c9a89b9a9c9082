//! The exact spelling of an identity: relief is bound to it.
//!
//! A rule's key *folds* what an origin might read as one account
//! (`Victim@Example.com`, `victim@example.com` and `ｖictim@example.com`
//! are one key under `:email`), so that no spelling dodges the count. That
//! fold is conservative for counting and generous for relief: on an origin
//! whose accounts are case-sensitive (a PostgreSQL `text` unique column),
//! `Victim@example.com` is another account, which an attacker can own. A
//! success of that account, or a trusted-device cookie it earned, must not
//! relieve the victim's count.
//!
//! So relief is bound to the identity exactly as the request spelled it:
//! - [`Spelling::of`] is the raw values of a key's named parts, as sent
//!   (before any type is read, nothing trimmed or folded). A request that
//!   names an identity in two spellings (a JSON member given twice, a form
//!   field and a cookie that differ) has [`Spelling::Several`]: it earns no
//!   relief at all, since tollgate cannot tell which one the origin read.
//! - A trusted-device cookie is signed for the spelling
//!   ([`crate::request::device`]) and verifies only for a request of that spelling.
//! - With `success_identity_header`, the header must name exactly the
//!   request's spelling ([`Spelling::names`]).
//! - The limiter object keeps a [`Mark`] beside a relief rule's count: the
//!   one spelling every failure in it was committed under, or
//!   [`Mark::Mixed`]. A clear or forgive applies only to a count whose mark
//!   is the success's own spelling ([`relieves`]), so a success of `A`
//!   never takes back a failure committed under `B`. A count that mixes
//!   spellings is relieved by nobody until it expires: the fold errs
//!   towards blocking.
//!
//! A spelling is carried as a tag: the first 64 bits of SHA-256 over the
//! parts and values (16 hex digits), never the raw value.

use crate::request::key::KeyPart;
use sha2::{Digest, Sha256};

/// Hex digits of a spelling's tag.
pub(crate) const TAG_HEX: usize = 16;

/// How a request spelled the identity a relief rule keys on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spelling {
    /// One spelling: its tag.
    One(u64),
    /// Several (or none that a value carries): no relief.
    Several,
}

impl Spelling {
    /// The spelling of a request whose named key parts carry `values`
    /// (each part with every raw value the request holds for it, in the
    /// order found): [`Spelling::One`] when every named part has exactly
    /// one distinct raw value. Unnamed parts (`ip`, `global`, `country`,
    /// `asn`) are not spellings and are left out.
    pub(crate) fn of(values: &[(&KeyPart, Vec<String>)]) -> Spelling {
        let mut hasher = Sha256::new();
        hasher.update(b"tollgate-spelling");
        for (part, raw) in values.iter().filter(|(part, _)| part.named().is_some()) {
            let Some(first) = raw.first() else { return Spelling::Several };
            if raw.iter().any(|other| other != first) {
                return Spelling::Several;
            }
            hasher.update(format!("\n{part}\n{}:", first.len()).as_bytes());
            hasher.update(first.as_bytes());
        }
        let digest = hasher.finalize();
        let mut tag = [0u8; 8];
        tag.copy_from_slice(&digest[..8]);
        Spelling::One(u64::from_be_bytes(tag))
    }

    /// Whether `value` (what the origin named in `success_identity_header`)
    /// is exactly this spelling of the one-part key `part`. The value is
    /// trimmed first, as HTTP field values are (RFC 9110 §5.5): a header
    /// cannot name surrounding spaces, so a request spelled with them is
    /// never named.
    pub(crate) fn names(&self, part: &KeyPart, value: &str) -> bool {
        matches!(self, Spelling::One(_)) && *self == Spelling::of(&[(part, vec![value.trim().to_string()])])
    }

    /// The tag as [`TAG_HEX`] lowercase hex digits, for one spelling.
    pub(crate) fn tag(&self) -> Option<String> {
        match self {
            Spelling::One(tag) => Some(format!("{tag:016x}")),
            Spelling::Several => None,
        }
    }

    /// The wire form: the tag, or `-` for several.
    pub(crate) fn encode(&self) -> String {
        self.tag().unwrap_or_else(|| "-".to_string())
    }

    /// Reads [`Spelling::encode`]'s form; `None` for anything else.
    pub(crate) fn decode(text: &str) -> Option<Spelling> {
        if text == "-" {
            return Some(Spelling::Several);
        }
        let tag = text.len() == TAG_HEX && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        tag.then(|| u64::from_str_radix(text, 16).ok()).flatten().map(Spelling::One)
    }
}

/// What a limiter object knows of the spellings its count was committed
/// under (kept in the row only for relief rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Every failure in the count was committed under this tag.
    One(u64),
    /// Under several, or under one the object was not told.
    Mixed,
}

impl Mark {
    /// The row's form: the tag, or `*`.
    pub(crate) fn encode(&self) -> String {
        match self {
            Mark::One(tag) => Spelling::One(*tag).encode(),
            Mark::Mixed => "*".to_string(),
        }
    }

    /// Reads [`Mark::encode`]'s form; anything else reads as
    /// [`Mark::Mixed`] (never as a spelling that could earn relief).
    pub(crate) fn decode(text: &str) -> Mark {
        match Spelling::decode(text) {
            Some(Spelling::One(tag)) => Mark::One(tag),
            _ => Mark::Mixed,
        }
    }
}

/// The mark after a failure is committed under `spelling` (`None`: the
/// call named none) to a count that was `empty` before it.
/// - an empty count takes the failure's spelling (or none, untold);
/// - a count of one spelling keeps it for the same spelling;
/// - anything else mixes; a count that held failures without a mark (an
///   older row, a rule given `on_success` since) mixes too.
pub(crate) fn after_commit(mark: Option<&Mark>, empty: bool, spelling: Option<&Spelling>) -> Option<Mark> {
    let told = spelling.map(|s| match s {
        Spelling::One(tag) => Mark::One(*tag),
        Spelling::Several => Mark::Mixed,
    });
    if empty {
        return told;
    }
    match (mark, told) {
        (Some(Mark::One(kept)), Some(Mark::One(tag))) if *kept == tag => Some(Mark::One(tag)),
        (None, None) => None,
        _ => Some(Mark::Mixed),
    }
}

/// Whether a success under `spelling` may clear or forgive a count marked
/// `mark` that is `empty` or not: only a count every failure of which was
/// committed under that very spelling (an empty count has nothing to
/// give back either way).
pub(crate) fn relieves(mark: Option<&Mark>, empty: bool, spelling: Option<&Spelling>) -> bool {
    match (mark, spelling) {
        _ if empty => true,
        (Some(Mark::One(kept)), Some(Spelling::One(tag))) => kept == tag,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn email() -> KeyPart {
        KeyPart::parse("body:email:email").unwrap()
    }

    fn one(part: &KeyPart, value: &str) -> Spelling {
        Spelling::of(&[(part, vec![value.to_string()])])
    }

    #[test]
    fn a_spelling_is_the_raw_value_exactly() {
        let part = email();
        let victim = one(&part, "victim@example.com");
        assert_eq!(victim.tag().map(|t| t.len()), Some(TAG_HEX));
        assert_eq!(victim, one(&part, "victim@example.com"));
        for other in ["Victim@example.com", " victim@example.com", "victim@example.com ", "ｖictim@example.com"] {
            assert_ne!(one(&part, other), victim, "{other:?} folds alike but is spelled otherwise");
        }
        assert_ne!(one(&KeyPart::parse("body:user").unwrap(), "victim@example.com"), victim, "another part");
    }

    #[test]
    fn two_spellings_of_a_part_are_several() {
        let part = email();
        let twice = vec!["victim@example.com".to_string(), "attacker@example.com".to_string()];
        assert_eq!(Spelling::of(&[(&part, twice)]), Spelling::Several);
        let same = vec!["a@x".to_string(), "a@x".to_string()];
        assert_eq!(Spelling::of(&[(&part, same)]), one(&part, "a@x"), "the same value twice is one spelling");
        assert_eq!(Spelling::of(&[(&part, vec![])]), Spelling::Several);
        let ip = KeyPart::Ip;
        assert_eq!(Spelling::of(&[(&part, vec!["a@x".into()]), (&ip, vec!["1.2.3.4".into(), "5.6.7.8".into()])]), one(&part, "a@x"));
    }

    #[test]
    fn the_origin_must_name_the_exact_spelling() {
        let part = email();
        let victim = one(&part, "victim@example.com");
        assert!(victim.names(&part, "victim@example.com"));
        assert!(victim.names(&part, " victim@example.com "), "a field value's own spaces are not part of it");
        assert!(!victim.names(&part, "Victim@example.com"));
        assert!(!one(&part, " victim@example.com").names(&part, " victim@example.com"), "a header cannot name spaces");
        assert!(!Spelling::Several.names(&part, "victim@example.com"));
    }

    #[test]
    fn wire_forms_round_trip_and_refuse_the_rest() {
        let s = one(&email(), "a@x");
        assert_eq!(Spelling::decode(&s.encode()), Some(s));
        assert_eq!(Spelling::decode("-"), Some(Spelling::Several));
        for bad in ["", "*", "0123456789ABCDEF", "0123", "0123456789abcdefg", "g123456789abcdef"] {
            assert_eq!(Spelling::decode(bad), None, "{bad}");
        }
        assert_eq!(Mark::decode("*"), Mark::Mixed);
        assert_eq!(Mark::decode("junk"), Mark::Mixed);
        let Spelling::One(tag) = s else { panic!() };
        assert_eq!(Mark::decode(&s.encode()), Mark::One(tag));
        assert_eq!(Mark::One(tag).encode(), s.encode());
    }

    #[test]
    fn a_success_relieves_only_a_count_of_its_own_spelling() {
        let part = email();
        let (a, b) = (one(&part, "victim@example.com"), one(&part, "Victim@example.com"));
        let mark = after_commit(None, true, Some(&a));
        assert_eq!(mark, Some(Mark::One(match a { Spelling::One(t) => t, Spelling::Several => 0 })));
        let mark = after_commit(mark.as_ref(), false, Some(&a));
        assert!(relieves(mark.as_ref(), false, Some(&a)), "the owner's own failures");
        assert!(!relieves(mark.as_ref(), false, Some(&b)), "a look-alike's success");
        assert!(!relieves(mark.as_ref(), false, Some(&Spelling::Several)));
        assert!(!relieves(mark.as_ref(), false, None));
        let mixed = after_commit(mark.as_ref(), false, Some(&b));
        assert_eq!(mixed, Some(Mark::Mixed));
        assert!(!relieves(mixed.as_ref(), false, Some(&a)) && !relieves(mixed.as_ref(), false, Some(&b)), "nobody");
        assert_eq!(after_commit(mixed.as_ref(), false, Some(&a)), Some(Mark::Mixed), "mixed stays mixed");
        assert_eq!(after_commit(mixed.as_ref(), true, Some(&a)), mark, "until the count is empty again");
        assert_eq!(after_commit(None, false, Some(&a)), Some(Mark::Mixed), "failures of unknown spelling");
        assert_eq!(after_commit(mark.as_ref(), false, None), Some(Mark::Mixed), "an untold commit");
        assert_eq!(after_commit(None, false, None), None, "a rule without relief keeps no mark");
        assert!(relieves(None, true, None), "nothing to give back");
    }
}
