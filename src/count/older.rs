//! Calls to an object of the release before: what to send
//! instead of a call it refused, or why nothing would do.
//!
//! An object keeps its old code until it hibernates, and a gradual
//! deployment keeps it on the old version for the whole rollout
//! ([`crate::count::protocol`]), so today's Worker meets objects of the
//! release before (0.1.0) on every deploy. Such an object refuses a compact
//! call carrying a field added to version 1 since (400, `{"v":1,"error":
//! "malformed call: unknown field `u`"}`), and a refused call changes
//! nothing. Applying the rule's `on_error` to that refusal, as to a counter
//! outage, let a usage rule charge nothing (the reserve taken, the commit
//! refused, the reservation lapsing: 15 calls of 3,000 tokens served in
//! 20 s against 10,000 a day) and an `on_error = "allow"` rule with a
//! `penalty` or `concurrency` admit without any limit. So the refusal is
//! read as what it is ([`refused_field`]), and the Worker sends instead the
//! calls the older object can take ([`instead`]), never admitting more than
//! the rule's limits:
//!
//! | refused field | sent instead | what is lost |
//! |---|---|---|
//! | `u` (usage, on a commit) | `record` of the units used (none if 0), then `release` of the reservation | nothing: exactly the units used are charged |
//! | `p` (penalty) | the same call without it | the penalty (the limit holds) |
//! | `n` (concurrency) | nothing: no op of the older object holds a slot | the request: refused (503) whatever `on_error` ([`NO_SLOT`]) |
//!
//! The `record` comes before the `release`: between the two the key holds
//! both (over-blocking for one round trip, never over-admitting); if the
//! `release` is lost, the reservation lapses at `reservation_ttl`, as any
//! lost settlement does. A field the older object took is left in the
//! calls sent instead (it named the first field it did not know, in the
//! compact form's order `s`, `p`, `u`, `n`): a call carrying both `p` and
//! `n` is refused for `p`, sent again without it, and then refused for `n`.

use crate::count::protocol::{Call, CallFailure, Op};

/// A field of version 1 that objects of release 0.1.0 do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewerField {
    /// `p`: a rule's `penalty`.
    Penalty,
    /// `u`: the usage an origin reported, on a commit.
    Used,
    /// `n`: a rule's `concurrency`.
    Concurrency,
}

impl NewerField {
    /// The field's name in the compact form.
    pub(crate) fn name(self) -> char {
        match self {
            NewerField::Penalty => 'p',
            NewerField::Used => 'u',
            NewerField::Concurrency => 'n',
        }
    }
}

/// The start of a failure's text when the object is too old to hold a
/// concurrency slot: the verdict refuses such a rule (503) whatever its
/// `on_error` says ([`crate::pipeline::verdict`]). One place for the words
/// the glue writes and the verdict reads.
pub(crate) const NO_SLOT: &str = "an object of an older release cannot hold a concurrency slot";

/// The field `call` carries that the object refused because it is of an
/// older release: a 400 whose versioned error names it as unknown. `None`
/// for any other failure (an outage, a timeout, a corrupt row, a field the
/// call does not carry).
pub(crate) fn refused_field(call: &Call, failure: &CallFailure) -> Option<NewerField> {
    let CallFailure::Refused { status: 400, body } = failure else {
        return None;
    };
    let error = serde_json::from_str::<serde_json::Value>(body).ok()?;
    let error = error.get("error")?.as_str()?;
    let named = |field: NewerField| error.ends_with(&format!("unknown field `{}`", field.name()));
    [NewerField::Penalty, NewerField::Used, NewerField::Concurrency]
        .into_iter()
        .find(|f| named(*f))
        .filter(|f| carries(call, *f))
}

fn carries(call: &Call, field: NewerField) -> bool {
    match field {
        NewerField::Penalty => call.penalty_ms.is_some(),
        NewerField::Used => call.used.is_some(),
        NewerField::Concurrency => call.concurrency.is_some(),
    }
}

/// What to send, in order, to an object of an older release instead of
/// `call`, which it refused for `field` (the module's table); `None`: no
/// call it takes does what `call` does (a concurrency slot).
pub(crate) fn instead(call: &Call, field: NewerField) -> Option<Vec<Call>> {
    match field {
        NewerField::Penalty => Some(vec![call.clone().with_penalty_ms(None)]),
        NewerField::Concurrency => None,
        NewerField::Used => {
            let used = call.used.unwrap_or(0);
            let release = call.clone().with_op(Op::Release).with_used(None);
            if used == 0 || call.op != Op::Commit {
                return Some(vec![release]);
            }
            let record = call.clone().with_op(Op::Record).with_cost(used).with_reservation(None).with_used(None);
            Some(match call.reservation {
                Some(_) => vec![record, release],
                // A commit of no reservation records its units all the same.
                None => vec![record],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::limit::Limit;
    use crate::count::protocol::{decode_call_url, encode_call_url, Algorithm};

    fn commit(used: Option<u32>, reservation: Option<u64>) -> Call {
        Call::new(Op::Commit, Algorithm::SlidingLog, vec![Limit::new(10_000, 86_400_000).unwrap()]).with_cost(3_000).with_reservation(reservation).with_used(used)
    }

    /// The refusal of release 0.1.0 (tests/worker/skew.test.mjs reads it
    /// from the real build), as today's Worker decodes it.
    fn refusal(field: char) -> CallFailure {
        CallFailure::Refused { status: 400, body: format!(r#"{{"v":1,"error":"malformed call: unknown field `{field}`"}}"#) }
    }

    #[test]
    fn only_an_older_objects_refusal_of_a_field_the_call_carries_is_read_as_one() {
        let c = commit(Some(1_234), Some(7));
        assert_eq!(refused_field(&c, &refusal('u')), Some(NewerField::Used));
        assert_eq!(refused_field(&c, &refusal('n')), None, "the call carries no n");
        assert_eq!(refused_field(&c, &refusal('z')), None);
        let other = |status, body: &str| CallFailure::Refused { status, body: body.into() };
        assert_eq!(refused_field(&c, &other(500, r#"{"v":1,"error":"malformed call: unknown field `u`"}"#)), None);
        assert_eq!(refused_field(&c, &other(400, "unknown field `u`")), None, "not a versioned error");
        assert_eq!(refused_field(&c, &other(400, r#"{"v":1,"error":"corrupt row; unknown field `u` x"}"#)), None);
        assert_eq!(refused_field(&c, &CallFailure::Timeout { ms: 50 }), None);
        let penalised = commit(None, None).with_op(Op::Hit).with_penalty_ms(600_000).with_concurrency(2);
        assert_eq!(refused_field(&penalised, &refusal('p')), Some(NewerField::Penalty));
        assert_eq!(refused_field(&penalised, &refusal('n')), Some(NewerField::Concurrency));
    }

    #[test]
    fn a_usage_commit_becomes_a_record_of_the_units_used_then_the_release() {
        let sent = instead(&commit(Some(1_234), Some(7)), NewerField::Used).unwrap();
        let urls: Vec<String> = sent.iter().map(encode_call_url).collect();
        assert_eq!(urls, ["https://limiter/v1/record?l=10000x86400000&c=1234", "https://limiter/v1/release?l=10000x86400000&c=3000&r=7"]);
        for url in &urls {
            assert!(!url.contains("&u="), "{url}: nothing the older object refuses");
            decode_call_url(url).unwrap();
        }
        // More than the reserve: all of it (the reserve's slot released).
        assert_eq!(instead(&commit(Some(9_000), Some(7)), NewerField::Used).unwrap()[0].cost, 9_000);
        // Nothing used: released, nothing counted, as today's object does.
        let none = instead(&commit(Some(0), Some(7)), NewerField::Used).unwrap();
        assert_eq!(none.iter().map(|c| c.op).collect::<Vec<_>>(), [Op::Release]);
        // No reservation (it was lost): the units recorded all the same.
        let lost = instead(&commit(Some(50), None), NewerField::Used).unwrap();
        assert_eq!(lost.iter().map(|c| (c.op, c.cost)).collect::<Vec<_>>(), [(Op::Record, 50)]);
    }

    #[test]
    fn a_penalty_is_dropped_and_a_slot_has_no_older_form() {
        let hit = commit(None, None).with_op(Op::Hit).with_penalty_ms(600_000).with_concurrency(2);
        let sent = instead(&hit, NewerField::Penalty).unwrap();
        assert_eq!(sent, [hit.clone().with_penalty_ms(None)], "only p dropped: n is refused next");
        assert_eq!(instead(&hit, NewerField::Concurrency), None);
        assert_eq!(refused_field(&hit, &refusal('n')), Some(NewerField::Concurrency));
        assert_eq!(refused_field(&hit, &refusal('p')), Some(NewerField::Penalty), "a penalty has an older form");
        assert_eq!(refused_field(&hit, &CallFailure::Timeout { ms: 50 }), None, "an outage: the rule's on_error");
    }
}
