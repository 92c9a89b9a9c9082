//! The plan's vocabulary: a rule that matched a request, what became of
//! its key, and a rule to check with its key and object. Plain data, shared
//! by the plan that makes it and everything after (verdict, metrics,
//! memo, tickets, admin, the glue).

use crate::config::rules::{Match, Rule};
use crate::request::exempt::Exemption;
use crate::request::key::KeyError;
use crate::request::spelling::Spelling;

/// A rule that matched, and what became of its key.
#[derive(Debug)]
pub struct Matched<'c> {
    pub rule: &'c Rule,
    /// How it matched (read by `explain`).
    #[cfg_attr(all(target_arch = "wasm32", not(feature = "cli")), allow(dead_code))]
    pub(crate) found: Match,
    pub key: KeyOutcome,
    /// A success can settle the rule for this request: it has
    /// `on_success`, and matched the request's own method, as sent
    /// (no override). Always false for a rule without
    /// `on_success` (nothing else reads it).
    pub(crate) own_method: bool,
    /// The request is exempt from the rule (the config's or the rule's
    /// `exempt`): neither counted nor limited, whatever its key.
    pub(crate) exempt: Option<Exempted>,
    /// How the request spelled its identity, for a rule whose success
    /// relieves (`on_success`) and a key of its own (not the fallback):
    /// relief and trusted devices are bound to it ([`crate::request::spelling`]).
    pub(crate) spelling: Option<Spelling>,
}

/// Why a matching rule is not applied, and under which key hash it is
/// logged (its first key's; `-` when it has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exempted {
    pub(crate) by: Exemption,
    pub(crate) key_hash: String,
}

/// A matching rule's key, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOutcome {
    /// Every key the request is charged to ([`derive_keys`](crate::request::key::derive_keys): one per
    /// identity an origin could read, at most [`crate::request::key::MAX_IDENTITIES`]);
    /// `fell_back` when they came from `fallback_key`.
    Keys { keys: Vec<String>, fell_back: bool },
    /// A part is missing and the rule skips such requests.
    Skipped(KeyError),
    /// A part is missing (of the key, or of the fallback key too) and the
    /// rule rejects such requests with 400; or the request names too many
    /// identities (400 whatever the policy: falling back would let a client
    /// choose its bucket by sending more spellings).
    Rejected(KeyError),
}

/// A rule to check, with its key and the object that counts it.
#[derive(Debug, Clone)]
pub struct Applied<'c> {
    pub rule: &'c Rule,
    /// The raw key (never logged).
    pub key: String,
    /// The object's name and the blocked-until cache key ([`object_name`]).
    pub(crate) id: String,
    /// What logs carry instead of the key ([`key_hash`](crate::request::key::key_hash), keyed by the
    /// request's `log_key`).
    pub(crate) key_hash: String,
    /// The key came from `fallback_key`: a success never clears it.
    pub(crate) fell_back: bool,
    /// From [`Matched::own_method`].
    pub(crate) own_method: bool,
    /// The trusted device the request came from (a `trusted_device` rule's
    /// valid cookie for this very account): the request counts in the
    /// device's own bucket (`id`, `key_hash`), `key` stays the account's.
    pub(crate) device: Option<String>,
    /// From [`Matched::spelling`]: relief (a clear, a forgive, a device
    /// cookie) only for this spelling; `None` for a rule without relief.
    pub(crate) spelling: Option<Spelling>,
}

/// The name of the object counting `key` for `rule` (also its cache key):
/// the rule's name and the key, one line each.
pub(crate) fn object_name(rule: &Rule, key: &str) -> String {
    let mut name = String::with_capacity(rule.name.len() + 1 + key.len());
    name.push_str(&rule.name);
    name.push('\n');
    name.push_str(key);
    name
}

