//! What a rule does: when a request is over its limit, when its counter
//! cannot be reached, when a part of its key is missing, and which requests
//! it counts.
//!
//! These are the rule's decisions, apart from how a rule is written
//! ([`crate::config`]) and which requests it matches ([`crate::config::rules`]).
//!
//! Each enum the config spells by name has one table of names ([`Named`]),
//! the only place its names are written.

use crate::count::protocol::Algorithm;
use crate::request::key::KeyPart;

/// An enum the config spells by name, with its one table of names: the
/// reader parses by it (`Input::choice`), the rule's JSON
/// ([`crate::config::describe`]) and log lines write [`Named::name`], and
/// the schema ([`crate::config::schema`]) lists [`Named::names`]. A name is
/// spelled nowhere else.
pub(crate) trait Named: Copy + PartialEq + Sized + 'static {
    /// Every value with its config name, in the order errors list them.
    const NAMES: &'static [(&'static str, Self)];

    /// The value's name (every value is in [`Named::NAMES`]: a unit test
    /// of each enum says so).
    fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, value)| *value == self).map_or("", |(name, _)| name)
    }

    /// The value named exactly `name`.
    fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(n, _)| *n == name).map(|(_, value)| *value)
    }

    /// The names, in table order.
    fn names() -> Vec<&'static str> {
        Self::NAMES.iter().map(|(name, _)| *name).collect()
    }
}

impl Named for Action {
    const NAMES: &'static [(&'static str, Action)] = &[("block", Action::Block), ("log", Action::Log)];
}

impl Named for FailPolicy {
    const NAMES: &'static [(&'static str, FailPolicy)] = &[("allow", FailPolicy::Allow), ("deny", FailPolicy::Deny)];
}

impl Named for OnMissingKey {
    const NAMES: &'static [(&'static str, OnMissingKey)] =
        &[("reject", OnMissingKey::Reject), ("skip", OnMissingKey::Skip), ("fallback", OnMissingKey::Fallback)];
}

impl Named for SuccessAction {
    const NAMES: &'static [(&'static str, SuccessAction)] = &[("clear", SuccessAction::Clear), ("decrement", SuccessAction::Decrement)];
}

impl Named for MetricsLevel {
    const NAMES: &'static [(&'static str, MetricsLevel)] =
        &[("off", MetricsLevel::Off), ("limited", MetricsLevel::Limited), ("all", MetricsLevel::All)];
}

impl Named for CountingMode {
    const NAMES: &'static [(&'static str, CountingMode)] = &[("request", CountingMode::Request), ("response", CountingMode::Response)];
}

impl Named for LeaseChoice {
    const NAMES: &'static [(&'static str, LeaseChoice)] = &[("auto", LeaseChoice::Auto), ("off", LeaseChoice::Off)];
}

/// The counting algorithm's config names (`algorithm`); the object
/// protocol ([`crate::count::protocol`]) has its own wire spelling.
impl Named for Algorithm {
    const NAMES: &'static [(&'static str, Algorithm)] = &[("sliding_log", Algorithm::SlidingLog), ("gcra", Algorithm::Gcra)];
}

/// What a rule's `counting.mode` says: counted as the request arrives
/// (`request`, the default), or reserved as it arrives and settled once
/// the origin answered (`response`: two-phase counting,
/// [`crate::count::reservation`]). The validated mode is
/// [`crate::config::rules::RuleSpec::reserves`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CountingMode {
    Request,
    Response,
}

/// What a rule's `lease` says: leased budgets where they can be exact
/// (`auto`, the default), or never (`off`); the validated mode is a
/// [`crate::count::lease::LeaseMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseChoice {
    Auto,
    Off,
}

/// What a rule does when a request is over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Answer 429 (the default).
    Block,
    /// Shadow mode: never block, only log what would have happened.
    Log,
}

/// What a rule does when its counter cannot be reached in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailPolicy {
    /// Fail open: forward the request (resource protection; the default).
    Allow,
    /// Fail closed: answer 503 (abuse prevention: login, SMS, paid calls).
    Deny,
}

/// What a rule does when a part of its key is missing from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MissingKey {
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
    pub(crate) fn fallback_parts(&self) -> &[KeyPart] {
        match self {
            MissingKey::Fallback(parts) => parts,
            MissingKey::Reject | MissingKey::Skip => &[],
        }
    }
}

/// What `on_missing_key` says, before `fallback_key` is read with it into
/// a [`MissingKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnMissingKey {
    Reject,
    Skip,
    Fallback,
}

/// Which requests a rule counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Counting {
    /// Every request that matches (checked and recorded at once).
    All,
    /// Only requests whose origin response has one of these statuses: the
    /// limit is checked before forwarding, the hit recorded after the origin
    /// answers (e.g. `[401, 403, 422]` for failed logins).
    Statuses(Vec<u16>),
}

impl Counting {
    /// Whether an answer of `status` is counted.
    pub(crate) fn counts(&self, status: u16) -> bool {
        match self {
            Counting::All => true,
            Counting::Statuses(counted) => counted.contains(&status),
        }
    }
}

/// What a success does to a failures-only rule's count (`on_success`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SuccessAction {
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
pub(crate) const DEFAULT_SUCCESS_STATUSES: [u16; 2] = [200, 204];

/// When a success settles a failures-only rule, and how. A success counts
/// only for a request the rule matched by its own method (no override, no
/// HEAD for GET, never OPTIONS), keyed by the rule's own key (not its
/// fallback), and, with `identity_header`, only for the identity the origin
/// says it authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OnSuccess {
    pub(crate) action: SuccessAction,
    /// `success_statuses` ([`DEFAULT_SUCCESS_STATUSES`]).
    pub(crate) statuses: Vec<u16>,
    /// `success_identity_header`: a response header in which the origin
    /// names the account it authenticated; the success applies only when
    /// that value, derived as the rule's key part derives the request's
    /// (a `body:` value normalized and hashed), is the request's key.
    pub(crate) identity_header: Option<String>,
}

/// `trusted_device`: a browser that logged in to an account successfully
/// gets a signed cookie, and the rule counts its failures for that account
/// in a bucket of its own, so an attacker filling the account's bucket does
/// not lock the owner out of a device they used before
/// ([`crate::request::device`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TrustedDevice {
    /// The Workers secret that signs the cookies (e.g.
    /// `TOLLGATE_DEVICE_KEY`); without it the rule works as if unset.
    pub(crate) secret: String,
    /// The cookie's name ([`DEFAULT_DEVICE_COOKIE`]).
    pub(crate) cookie: String,
    /// How long a cookie is good for, in seconds (30 days).
    pub(crate) ttl_s: u64,
}

/// The device cookie's name unless the rule sets one.
pub(crate) const DEFAULT_DEVICE_COOKIE: &str = "tollgate_device";

/// How long a device cookie is good for unless the rule says (30 days).
pub(crate) const DEFAULT_DEVICE_TTL_S: u64 = 30 * 24 * 3600;

/// What a rule writes to Analytics Engine (`metrics`;
/// [`crate::pipeline::metrics`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum MetricsLevel {
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
pub(crate) const DEFAULT_UPLOAD_BUFFER: u32 = 262_144;

/// The largest `upload_buffer` the field takes: 16 MiB. A buffer must
/// also fit a client's share of `memory_budget` at
/// [`MEMORY_PER_UPLOAD_BYTE`] ([`MEMORY_CLIENT_SHARES`]): 4 MiB by default,
/// 8 MiB with the largest budget; `check` says so.
pub(crate) const MAX_UPLOAD_BUFFER: u32 = 16 * 1_048_576;

/// `memory_budget` by default: 32 MiB of isolate memory, what tollgate
/// may hold of request bodies (uploads received before a failures-only
/// rule's check, bodies read for `body:` keys and form parameters) across
/// all of an isolate's requests at once ([`crate::pipeline::upload`]). An
/// isolate has 128 MB for everything (code, heap, Wasm memory, every
/// request); the default keeps bodies to a quarter of it.
pub(crate) const DEFAULT_MEMORY_BUDGET: u32 = 32 * 1_048_576;

/// The largest `memory_budget`: 64 MiB, half of the isolate's 128 MB; the
/// other half is the Worker's (and, embedded, the app's).
pub(crate) const MAX_MEMORY_BUDGET: u32 = 64 * 1_048_576;

/// The smallest `memory_budget`: 2 MiB (a client's share then still holds
/// the default `upload_buffer`, at [`MEMORY_PER_UPLOAD_BYTE`]).
pub(crate) const MIN_MEMORY_BUDGET: u32 = 2 * 1_048_576;

/// One client (its address, IPv6 by `ipv6_prefix`) holds at most
/// 1/`MEMORY_CLIENT_SHARES` of the budget: a single client cannot push
/// every other client's bodies out of the budget.
pub(crate) const MEMORY_CLIENT_SHARES: u32 = 4;

/// One network (an IPv4 /[`NETWORK_V4_PREFIX`], an IPv6
/// /[`NETWORK_V6_PREFIX`]) holds at most 1/`MEMORY_NETWORK_SHARES` of the
/// budget, however many clients it has: many addresses of one network
/// cannot push every other network's bodies, relays and answers out.
pub(crate) const MEMORY_NETWORK_SHARES: u32 = 2;

/// The leading bits of an IPv4 client address that make its network for
/// [`MEMORY_NETWORK_SHARES`]: a /24, the smallest block routed on the
/// Internet.
pub(crate) const NETWORK_V4_PREFIX: u8 = 24;

/// The leading bits of an IPv6 client address that make its network for
/// [`MEMORY_NETWORK_SHARES`]: a /48, one site's allocation (an
/// `ipv6_prefix` wider than it makes the client its own network).
pub(crate) const NETWORK_V6_PREFIX: u8 = 48;

/// Bytes of isolate memory one byte of a received upload costs, as
/// measured in workerd: the body waits in the original
/// request's stream (the tee's branch for the origin) while tollgate reads
/// a clone to see it arrive. Four stalled uploads of 8 MiB (32 MiB of
/// payload) grew workerd's RSS by 67-71 MB: a budget that counted
/// payload once held twice what it said. Every upload hold is charged at
/// this rate.
pub(crate) const MEMORY_PER_UPLOAD_BYTE: u32 = 2;

/// Bytes of isolate memory one byte of a body read for `body:` keys and
/// form parameters costs, as measured in workerd: the tee's
/// branch for the origin, the copy tollgate reads (one array, sized once)
/// and the runtime's own buffers: 16 stalled reads of 1 MiB − 1 KiB grew
/// workerd by 46-49 MB, 30 by 78 MB (2.5 to 2.9 bytes per byte). Every body
/// read's hold is charged at this rate.
pub(crate) const MEMORY_PER_READ_BYTE: u32 = 3;

/// Bytes of isolate memory one byte of a message the WebSocket relay
/// passed on costs until its peer takes it, as measured in workerd:
/// `send()` copies the message into the socket's outgoing queue
/// (unbounded, native), and the `ArrayBuffer` it arrived in is soon
/// collected. Four clients' sessions each sending 8 MiB to an origin that
/// reads nothing (32 MiB waiting) grew workerd by 32 MB more than the same
/// sessions sending nothing, 4 MiB each by 16 MB (`bench/memory.mjs
/// relay`): 0.96 bytes per byte. Every relayed message is charged at this
/// rate ([`crate::pipeline::upload::MemoryBudget::relay`]).
pub(crate) const MEMORY_PER_RELAY_BYTE: u32 = 1;

/// Bytes of isolate memory each message the WebSocket relay passed on
/// costs beyond its bytes, until its peer takes it, as measured in workerd
///: its event, its place in the outgoing queue and what the
/// collector has not yet taken back. 80,000 empty messages at an origin
/// that reads nothing grew workerd by 88 MB (1.1 KB each), a million by
/// 807 MB (0.8 KB each): charged nothing (0 bytes each), one client could
/// fill the isolate at 6 bytes of wire a message. Charged 1 KiB, four
/// clients' 65,536 held grew it by 86 MB (1.3 KB each). Every relayed
/// message is charged this much besides its bytes (1.5 KiB).
pub(crate) const MEMORY_PER_RELAY_MESSAGE: u32 = 1536;

/// What the relay counts each side's peer as reading, in bytes of message
/// a second (64 KiB/s): workerd's WebSocket has no `bufferedAmount`, no
/// promise from `send()` and no way to stop reading, so what a
/// peer took is not known and this is the credit a side's hold drains at.
/// A peer that reads nothing holds its charge plus this much a second of
/// its session (its `reservation_ttl` at most) more than is charged.
pub(crate) const RELAY_DRAIN: u32 = 65_536;

/// What the relay counts each side's peer as reading, in messages a second
/// (100), beside [`RELAY_DRAIN`]'s bytes: each message is charged
/// [`MEMORY_PER_RELAY_MESSAGE`] besides its bytes, and a peer that reads
/// takes many small messages a second (a 60 Hz game's, a chat's). A peer
/// that reads nothing holds up to this many messages a second of its
/// session more than is charged (measured: about 0.4 KB each held, the
/// rest of their charge being what the collector takes back).
pub(crate) const RELAY_DRAIN_MESSAGES: u32 = 100;

/// A watched answer's read-ahead when its client's share has room: the
/// bytes of the origin's body `watchBody` reads ahead of what the client
/// took (64 KiB), and the most one batch (handed to the usage reader in
/// one call, written in one write) holds (`crate::glue::origin`).
pub(crate) const ANSWER_AHEAD: u32 = 65_536;

/// Bytes of isolate memory a byte of a watched answer's read-ahead is
/// charged: the batch being gathered and the batch in flight to the
/// client, each at most the read-ahead (one read's chunk past it, as for
/// bodies, is not charged). So an answer at the full read-ahead is
/// charged 128 KiB.
pub(crate) const MEMORY_PER_AHEAD_BYTE: u32 = 2;

/// What an answer read behind its client (a usage rule that never cuts,
/// no idle watch: the body teed, `readBehind`) is charged: the runtime's
/// tee holds what one branch read and the other did not yet take, which
/// tollgate cannot see or bound below what workerd does. Measured in
/// `tests/worker/memory.test.mjs` (an origin streaming without end to a
/// client that stopped reading): the origin got 0.1-1.5 MB further
/// through the tee than through the batched watch (two runs; loopback's
/// socket buffers vary by about 2 MB from run to run); charged 2 MiB, the
/// larger rounded up. An answer that
/// finds less than twice this room is watched in batches instead (exact
/// as well), so tees leave room for batched answers.
pub(crate) const MEMORY_PER_ANSWER_BEHIND: u32 = 2 * 1_048_576;

/// `body_timeout` by default: 10 s for the whole body read for `body:`
/// keys and form parameters (nginx's `client_body_timeout` is 60 s between
/// two reads; tollgate's is for the whole body, as `upload_timeout`).
pub(crate) const DEFAULT_BODY_TIMEOUT_MS: u32 = 10_000;

/// The longest `body_timeout`: 10 minutes.
pub(crate) const MAX_BODY_TIMEOUT_MS: u32 = 600_000;

/// `upload_timeout` by default: 10 s for the whole body, HAProxy's usual
/// `timeout http-request`. It is the longest a slot waits on a client's
/// upload (bodies over the buffer only).
pub(crate) const DEFAULT_UPLOAD_TIMEOUT_MS: u32 = 10_000;

/// The longest `upload_timeout`: 10 minutes.
pub(crate) const MAX_UPLOAD_TIMEOUT_MS: u32 = 600_000;

/// How a failures-only rule receives a body before it reserves
/// ([`crate::pipeline::upload`] states the bound these set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UploadLimits {
    /// Bytes received before the reservation (`upload_buffer`); a larger
    /// body streams under the deadline.
    pub(crate) buffer: u32,
    /// The whole body must have arrived this long after reading began
    /// (`upload_timeout`).
    pub(crate) timeout_ms: u32,
}

impl Default for UploadLimits {
    fn default() -> UploadLimits {
        UploadLimits { buffer: DEFAULT_UPLOAD_BUFFER, timeout_ms: DEFAULT_UPLOAD_TIMEOUT_MS }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T: Named + std::fmt::Debug>(every: &[T]) {
        assert_eq!(T::NAMES.len(), every.len(), "one name per value");
        for value in every {
            assert_eq!(T::from_name(value.name()), Some(*value), "{value:?} is named");
        }
    }

    #[test]
    fn every_value_has_one_name() {
        round_trips(&[Action::Block, Action::Log]);
        round_trips(&[FailPolicy::Allow, FailPolicy::Deny]);
        round_trips(&[OnMissingKey::Reject, OnMissingKey::Skip, OnMissingKey::Fallback]);
        round_trips(&[SuccessAction::Clear, SuccessAction::Decrement]);
        round_trips(&[MetricsLevel::Off, MetricsLevel::Limited, MetricsLevel::All]);
        round_trips(&[LeaseChoice::Auto, LeaseChoice::Off]);
        round_trips(&[CountingMode::Request, CountingMode::Response]);
        round_trips(&[Algorithm::SlidingLog, Algorithm::Gcra]);
        assert_eq!(FailPolicy::from_name("Deny"), None, "names are exact");
    }
}
