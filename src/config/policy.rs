//! What a rule does: when a request is over its limit, when its counter
//! cannot be reached, when a part of its key is missing, and which requests
//! it counts.
//!
//! These are the rule's decisions, apart from how a rule is written
//! ([`crate::config`]) and which requests it matches ([`crate::config::rules`]).

use crate::request::key::KeyPart;

/// What a rule does when a request is over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Answer 429 (the default).
    Block,
    /// Shadow mode: never block, only log what would have happened.
    Log,
}

/// What a rule does when its counter cannot be reached in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailPolicy {
    /// Fail open: forward the request (resource protection; the default).
    Allow,
    /// Fail closed: answer 503 (abuse prevention: login, SMS, paid calls).
    Deny,
}

/// What a rule does when a part of its key is missing from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingKey {
    /// Answer 400 (the default): never a shared empty-key bucket.
    Reject,
    /// Do not apply the rule to this request.
    Skip,
    /// Count by this other key instead (which must itself be present, or
    /// the request is rejected).
    Fallback(Vec<KeyPart>),
}

impl MissingKey {
    /// The fallback key's parts; none unless [`MissingKey::Fallback`].
    pub fn fallback_parts(&self) -> &[KeyPart] {
        match self {
            MissingKey::Fallback(parts) => parts,
            MissingKey::Reject | MissingKey::Skip => &[],
        }
    }
}

/// What `on_missing_key` says, before `fallback_key` is read with it into
/// a [`MissingKey`].
#[derive(Debug, Clone, Copy)]
pub enum OnMissingKey {
    Reject,
    Skip,
    Fallback,
}

/// Which requests a rule counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counting {
    /// Every request that matches (checked and recorded at once).
    All,
    /// Only requests whose origin response has one of these statuses: the
    /// limit is checked before forwarding, the hit recorded after the origin
    /// answers (e.g. `[401, 403, 422]` for failed logins).
    Statuses(Vec<u16>),
}

/// What a success does to a failures-only rule's count (`on_success`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuccessAction {
    /// Forget every counted failure (`"clear"`, or `clear_on_success =
    /// true`): a success forged for the key buys a whole limit of guesses.
    Clear,
    /// Forgive one failure (`"decrement"`), never below zero: a forged
    /// success buys one guess.
    Decrement,
}

/// The statuses that are a success unless a rule lists its own: the
/// answers of a completed login, never a redirect (a plain-HTTP request
/// redirected to HTTPS is no login) or a page served instead.
pub const DEFAULT_SUCCESS_STATUSES: [u16; 2] = [200, 204];

/// When a success settles a failures-only rule, and how. A success counts
/// only for a request the rule matched by its own method (no override, no
/// HEAD for GET, never OPTIONS), keyed by the rule's own key (not its
/// fallback), and, with `identity_header`, only for the identity the origin
/// says it authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnSuccess {
    pub action: SuccessAction,
    /// `success_statuses` ([`DEFAULT_SUCCESS_STATUSES`]).
    pub statuses: Vec<u16>,
    /// `success_identity_header`: a response header in which the origin
    /// names the account it authenticated; the success applies only when
    /// that value, derived as the rule's key part derives the request's
    /// (a `body:` value normalized and hashed), is the request's key.
    pub identity_header: Option<String>,
}

/// `trusted_device`: a browser that logged in to an account successfully
/// gets a signed cookie, and the rule counts its failures for that account
/// in a bucket of its own, so an attacker filling the account's bucket does
/// not lock the owner out of a device they used before
/// ([`crate::request::device`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedDevice {
    /// The Workers secret that signs the cookies (e.g.
    /// `TOLLGATE_DEVICE_KEY`); without it the rule works as if unset.
    pub secret: String,
    /// The cookie's name ([`DEFAULT_DEVICE_COOKIE`]).
    pub cookie: String,
    /// How long a cookie is good for, in seconds (30 days).
    pub ttl_s: u64,
}

/// The device cookie's name unless the rule sets one.
pub const DEFAULT_DEVICE_COOKIE: &str = "tollgate_device";

/// How long a device cookie is good for unless the rule says (30 days).
pub const DEFAULT_DEVICE_TTL_S: u64 = 30 * 24 * 3600;

/// What a rule writes to Analytics Engine (`metrics`;
/// [`crate::pipeline::metrics`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MetricsLevel {
    Off,
    /// Every decision but `allowed`.
    #[default]
    Limited,
    All,
}

/// `upload_buffer` by default: 256 KiB. The bytes wait in the isolate
/// (128 MB for all its requests at once): 100 slow uploads at the cap hold
/// 25 MB. Bodies of logins, API calls and prompts fit; a file upload over
/// it streams under the deadline instead.
pub const DEFAULT_UPLOAD_BUFFER: u32 = 262_144;

/// The largest `upload_buffer`: 16 MiB.
pub const MAX_UPLOAD_BUFFER: u32 = 16 * 1_048_576;

/// `upload_timeout` by default: 10 s for the whole body, HAProxy's usual
/// `timeout http-request`. It is the longest a slot waits on a client's
/// upload (bodies over the buffer only).
pub const DEFAULT_UPLOAD_TIMEOUT_MS: u32 = 10_000;

/// The longest `upload_timeout`: 10 minutes.
pub const MAX_UPLOAD_TIMEOUT_MS: u32 = 600_000;

/// How a failures-only rule receives a body before it reserves
/// ([`crate::pipeline::upload`] states the bound these set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadLimits {
    /// Bytes received before the reservation (`upload_buffer`); a larger
    /// body streams under the deadline.
    pub buffer: u32,
    /// The whole body must have arrived this long after reading began
    /// (`upload_timeout`).
    pub timeout_ms: u32,
}

impl Default for UploadLimits {
    fn default() -> UploadLimits {
        UploadLimits { buffer: DEFAULT_UPLOAD_BUFFER, timeout_ms: DEFAULT_UPLOAD_TIMEOUT_MS }
    }
}
