//! The admin API, pure parts: routing, token check, key derivation.
//!
//! Active only when the secret `TOLLGATE_ADMIN_TOKEN` exists; otherwise the
//! admin prefix is not special and requests under it go to the origin like
//! any other. With a token:
//!
//! - `GET  {prefix}/status?rule=NAME&ip=203.0.113.7` — count per window,
//!   remaining, reset, whether an alarm is pending;
//! - `POST {prefix}/reset?rule=NAME&ip=203.0.113.7` — forget the key's hits;
//! - `PUT {prefix}/override?rule=NAME&ip=…&limit=1000/1d[&limit=…][&until=UNIX_S | &for=1h]`
//!   — the key's own limits, until a time (Unix seconds) or for a while, or
//!   for good; `DELETE` removes it;
//! - `POST {prefix}/ban?rule=NAME&ip=…&until=UNIX_S | &for=1h` — block the
//!   key until then; `DELETE` lifts it.
//!
//! Overrides and bans are kept in the key's own object
//! ([`crate::count::controls`]); `GET status` reports the limits in force and
//! where they come from (`config`, `config_override`, `override`, `ban`).
//!
//! The key is given raw, one query parameter per key part of the rule
//! (`ip`, `header:NAME`, `cookie:NAME`, `query:NAME`, `path:GROUP`,
//! `body:FIELD`, `country`, `asn`), and derived exactly as the rule would
//! (IPv6 grouped, body fields hashed, ...), percent-decoded once; a literal
//! `+` anywhere in the query is refused as ambiguous ([`refuse_plus`]). A
//! missing or wrong bearer token gets 401 with no detail about which part
//! was wrong.
//!
//! **Lockout.** Failed authentications are counted per client by
//! tollgate's own limiter: the built-in rule [`LOCKOUT_RULE`](crate::config::lockout::LOCKOUT_RULE) (10 per 15
//! minutes, keyed by `ip` as any rule is, IPv6 by `ipv6_prefix`, counted in
//! the `LIMITER` namespace). Every admin request first asks that counter
//! ([`lockout_op`]): a failed authentication is a check-and-record `hit`
//! (exact under concurrency, like any counting rule), an authorized request
//! only a `check`, so a right token never lowers or resets the count. A
//! client over the limit gets 429 with `Retry-After`, right token or not
//! ([`gate`]). Every admin log line carries `client_hash`, the client's key
//! hashed like any `key_hash`.
//!
//! **A right token that outlasts the lockout**: the client is
//! its IP, which a neighbour can share (one IPv4 behind NAT, one IPv6
//! /64), and ten wrong tokens from it would lock the admin out too. When
//! the configured token is at least [`TOKEN_PASSES_LOCKOUT_CHARS`] long,
//! a request with the right token does not ask the lockout counter at all
//! ([`token_passes_lockout`]): wrong tokens are counted and locked out
//! exactly as before, the right one is served. This makes every request
//! of a locked-out client an answered guess (200 for the right token, 429
//! for a wrong one), so it is done only where guessing is hopeless
//! anyway; a shorter token keeps the lockout's full force (the right
//! token gets 429 too, so a locked-out guesser learns nothing), because
//! then the ten guesses per 15 minutes are what protects it. No design
//! keyed only by the client and the token can have both: if wrong tokens
//! from an address can never shut out the right one, the right one is
//! told apart at any rate from that address.

use crate::request::canon::CanonicalQuery;
use crate::config::policy::{FailPolicy, Named};
use crate::config::Config;
use crate::config::headers::OwnResponse;
use crate::request::key::MissingPart;
use crate::pipeline::applied::Applied;
pub(crate) use crate::pipeline::credentials::token_matches;
use crate::count::protocol::{CallFailure, Op, Reply};
use crate::config::rules::Rule;
use crate::pipeline::verdict::{self, LogEvent, Outcome};
use crate::admin::console::{Auth, ConsoleRoute};
use crate::admin::console::traffic::Range;
use crate::count::controls::Controls;
use crate::count::limit::Limit;
use crate::config::cost::Priced;
use crate::count::registry::{Entry, Kind, RegistryCall};
use serde_json::Value;
use std::fmt;

/// What an admin request asks, once its token is compared.
#[derive(Debug)]
pub(crate) enum AdminRoute<'c> {
    /// Missing or wrong bearer token: a failed authentication (401, no
    /// detail).
    Unauthorized,
    /// Authorized but not a valid admin request: its 4xx.
    Invalid(AdminError),
    /// Call the object `id` for `request`; logs name its key by `key_hash`.
    Call { request: AdminRequest<'c>, id: String, key_hash: String },
    /// List the rules (`GET {prefix}/rules`).
    Rules,
    /// List the runtime controls in force (`GET {prefix}/controls`).
    Controls,
    /// The traffic over a range (`GET {prefix}/traffic?range=hour|day|week`).
    Traffic(Range),
    /// A console page ([`crate::admin::console`]), with the admin route
    /// it shows.
    Console(Box<ConsoleRoute<AdminRoute<'c>>>),
    /// A console ask of a key known by its hash: found in the controls
    /// registry, then served as [`AdminRoute::Call`] is.
    ByHash(ByHash<'c>),
}

/// An ask of the key of `rule` whose hash is `key_hash` (as the Traffic,
/// Events and Controls pages show keys). The raw key is only in the
/// registry's entry of a key with a ban or an override, whose object name
/// holds it: a key with neither is not found (404), and is looked up by
/// its parts instead.
#[derive(Debug)]
pub(crate) struct ByHash<'c> {
    pub(crate) action: AdminAction,
    pub(crate) rule: &'c Rule,
    pub(crate) key_hash: String,
    pub(crate) control: Option<ControlAsk>,
}

/// The longest key hash asked by ([`ByHash`]): a hash is 16 hex digits.
const KEY_HASH_CHARS: usize = 64;

/// Parses a console ask by key hash: `rule`, `key_hash`, and what the
/// `action` sets (as [`parse`] reads it).
pub(crate) fn parse_by_hash<'c>(config: &'c Config, action: AdminAction, query: &CanonicalQuery) -> Result<ByHash<'c>, AdminError> {
    let name = query.values("rule").next().ok_or(AdminError::MissingRule)?;
    let rule = config.rules.iter().find(|r| r.name == name).ok_or_else(|| AdminError::UnknownRule(name.to_string()))?;
    let key_hash: String = query.values("key_hash").next().unwrap_or_default().chars().take(KEY_HASH_CHARS).collect();
    let control = control_ask(action, rule, query)?;
    Ok(ByHash { action, rule, key_hash, control })
}

impl ByHash<'_> {
    /// The registry's entry of the key, if it holds one (a ban or an
    /// override of `rule` whose hash is `key_hash`).
    pub(crate) fn find<'e>(&self, listed: &'e [Entry]) -> Option<&'e Entry> {
        listed.iter().find(|e| e.rule == self.rule.name && !self.key_hash.is_empty() && e.key_hash == self.key_hash)
    }

    /// The request it asks of the key of `entry` (`rule \n key`).
    pub(crate) fn request(&self, entry: &Entry) -> Option<AdminRequest<'_>> {
        let key = entry.id.strip_prefix(&format!("{}\n", self.rule.name))?;
        Some(AdminRequest { action: self.action, rule: self.rule, key: key.to_string(), control: self.control.clone() })
    }
}

/// The 404 of a key hash the registry holds no entry of.
pub(crate) fn not_in_registry(ask: &ByHash<'_>) -> OwnResponse {
    let detail = format!(
        "Rule `{}`: no ban or override holds the key {}, so its page cannot be found by its hash (the raw key is kept only where a control is). Look the key up by its parts.",
        ask.rule.name, ask.key_hash
    );
    OwnResponse::problem(404, "Not Found", &detail, None)
}


/// The length (in characters, trimmed) from which the right token is
/// served past a lockout ([`token_passes_lockout`]). 32 random hex digits
/// are 128 bits (`openssl rand -hex 32`, as the guide says, makes 64): at
/// a million guesses a second that is ~10^25 years, so the lockout's bound
/// on guesses no longer protects the token and a neighbour's lockout would
/// only deny its owner. A shorter token keeps the lockout for the right
/// token too.
pub(crate) const TOKEN_PASSES_LOCKOUT_CHARS: usize = 32;

/// Whether the configured admin token (`expected`, the secret) is long
/// enough that a request presenting it skips the lockout counter
/// ([`TOKEN_PASSES_LOCKOUT_CHARS`]). Only ever asked after
/// [`token_matches`] said the presented token is this one.
pub(crate) fn token_passes_lockout(expected: &str) -> bool {
    expected.trim().chars().count() >= TOKEN_PASSES_LOCKOUT_CHARS
}

/// The op an admin request asks its client's lockout counter: a failed
/// authentication is counted (`hit`: checked and recorded at once), an
/// authorized request only checked (`check`: recorded never). This relies
/// on `check` being a pure peek that writes nothing (`counter::step`); were
/// it to reserve a slot, a right token would spend one.
pub(crate) fn lockout_op(route: &AdminRoute<'_>) -> Op {
    match route {
        AdminRoute::Unauthorized => Op::Hit,
        AdminRoute::Console(console) if console.auth == Auth::WrongToken => Op::Hit,
        AdminRoute::Invalid(_)
        | AdminRoute::Call { .. }
        | AdminRoute::Rules
        | AdminRoute::Controls
        | AdminRoute::Traffic(_)
        | AdminRoute::Console(_)
        | AdminRoute::ByHash(_) => Op::Check,
    }
}

/// What an admin request gets once its lockout counter answered.
#[derive(Debug)]
pub(crate) enum Gate<'r, 'c> {
    /// Answer `response` (429 locked out, 401, 503, or an invalid request's
    /// 4xx) and write `events`; nothing else is asked.
    Refuse { response: OwnResponse, events: Vec<LogEvent> },
    /// Authorized, not locked out, a valid request: ask the object `id`.
    Serve { request: &'r AdminRequest<'c>, id: &'r str, key_hash: &'r str },
    /// Authorized, not locked out: answer the rules ([`rules_body`]).
    Rules,
    /// Authorized, not locked out: list the controls.
    Controls,
    /// Authorized, not locked out: read the traffic.
    Traffic(Range),
    /// Not locked out: a console page, which the admin flow serves.
    Console(&'r ConsoleRoute<AdminRoute<'c>>),
    /// Authorized, not locked out: find the key in the registry, then serve.
    ByHash(&'r ByHash<'c>),
}

/// Acts on `route` given what the client's lockout counter (`lockout`,
/// asked with [`lockout_op`]) said, `None` when it was not asked (a right
/// token that [passes the lockout](token_passes_lockout)):
/// - over the limit: 429 with `Retry-After`, whatever the token (logged
///   `admin_locked`, with whether the token was right);
/// - the counter failed: an authorized request gets 503 (the lockout fails
///   closed), an unauthorized one its 401 (logged `counter_error`);
/// - otherwise (or not asked): 401 for a failed authentication (logged
///   `admin_denied`), the 4xx of an invalid request, or serve it.
pub(crate) fn gate<'r, 'c>(lockout: &Applied<'_>, route: &'r AdminRoute<'c>, outcome: Option<&Outcome>) -> Gate<'r, 'c> {
    let client = || ("client_hash", Value::from(lockout.key_hash.as_str()));
    let authorized = match route {
        AdminRoute::Unauthorized => false,
        AdminRoute::Console(console) => console.auth.authorized(),
        _ => true,
    };
    let not_asked = Outcome::Allowed { windows: Vec::new(), reservation: None };
    match (outcome.unwrap_or(&not_asked), route) {
        (Outcome::Blocked { retry_after_ms, window, windows, .. }, _) => Gate::Refuse {
            response: verdict::too_many_requests(lockout.rule, *retry_after_ms, *window, windows.as_deref()),
            events: vec![LogEvent::new(
                "admin_locked",
                vec![client(), ("authorized", authorized.into()), ("retry_after_ms", (*retry_after_ms).into())],
            )],
        },
        (Outcome::Failed(error), _) if !authorized => Gate::Refuse {
            response: unauthorized(),
            events: vec![
                verdict::counter_error(&lockout.rule.name, &lockout.key_hash, error, "not_recorded"),
                LogEvent::new("admin_denied", vec![client()]),
            ],
        },
        (Outcome::Failed(error), _) => Gate::Refuse {
            response: OwnResponse::problem(
                503,
                "Service Unavailable",
                "The admin lockout counter cannot be reached.",
                Some(1),
            ),
            events: vec![verdict::counter_error(&lockout.rule.name, &lockout.key_hash, error, FailPolicy::Deny.name())],
        },
        (Outcome::Allowed { .. }, AdminRoute::Unauthorized) => {
            Gate::Refuse { response: unauthorized(), events: vec![LogEvent::new("admin_denied", vec![client()])] }
        }
        (Outcome::Allowed { .. }, AdminRoute::Invalid(e)) => Gate::Refuse {
            response: OwnResponse::problem(e.status(), e.title(), &e.to_string(), None),
            events: Vec::new(),
        },
        (Outcome::Allowed { .. }, AdminRoute::Call { request, id, key_hash }) => Gate::Serve { request, id, key_hash },
        (Outcome::Allowed { .. }, AdminRoute::Rules) => Gate::Rules,
        (Outcome::Allowed { .. }, AdminRoute::Controls) => Gate::Controls,
        (Outcome::Allowed { .. }, AdminRoute::Traffic(range)) => Gate::Traffic(*range),
        (Outcome::Allowed { .. }, AdminRoute::Console(console)) => Gate::Console(console),
        (Outcome::Allowed { .. }, AdminRoute::ByHash(ask)) => Gate::ByHash(ask),
    }
}

/// The 401 of a missing or wrong token: the same whichever it was.
pub(crate) fn unauthorized() -> OwnResponse {
    let mut own = OwnResponse::problem(401, "Unauthorized", "A valid bearer token is required.", None);
    own.headers.push(("www-authenticate".into(), "Bearer realm=\"tollgate\"".into()));
    own
}

/// The 503 of an admin call whose counter could not be asked.
pub(crate) fn unreachable(failure: &CallFailure) -> OwnResponse {
    OwnResponse::problem(503, "Service Unavailable", &format!("The counter cannot be reached: {failure}"), Some(1))
}

/// The answer to a control change that failed: 400 with the object's
/// reason when it refused the change, else [`unreachable()`].
pub(crate) fn control_failure(failure: &CallFailure) -> OwnResponse {
    match failure {
        CallFailure::Refused { status: 400, body } => {
            let why = serde_json::from_str::<Value>(body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_default();
            OwnResponse::problem(400, "Bad Request", &why, None)
        }
        other => unreachable(other),
    }
}

/// What an admin request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdminAction {
    Status,
    Reset,
    SetOverride,
    ClearOverride,
    Ban,
    ClearBan,
}

/// When a runtime override or ban ends, as the admin request says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// No end (an override only).
    Never,
    /// `until=`: Unix seconds.
    At(i64),
    /// `for=`: a duration from when the Worker serves the request.
    For(u64),
}

impl Until {
    /// The end in Unix ms, given now; `None` for no end.
    pub(crate) fn resolve(self, now_ms: i64) -> Option<i64> {
        match self {
            Until::Never => None,
            Until::At(s) => Some(s.saturating_mul(1000)),
            Until::For(ms) => Some(now_ms.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))),
        }
    }
}

/// What an override or ban request sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ControlAsk {
    /// An override's limits (rolling, or on a calendar).
    pub(crate) limits: Vec<Limit>,
    pub(crate) until: Until,
    /// `reason=`: why (kept in the controls registry, at most 200 characters).
    pub(crate) reason: String,
    /// Who set it: `by=` (at most 32 characters), else `api`; the console
    /// sets `console`, the CLI `cli`.
    pub(crate) by: String,
}

impl AdminRequest<'_> {
    /// The change to send the key's object, at `now_ms`; `None` for status
    /// and reset.
    pub(crate) fn change(&self, now_ms: i64) -> Option<crate::count::controls::Change> {
        use crate::count::controls::Change;
        let ask = self.control.as_ref();
        let until = ask.and_then(|a| a.until.resolve(now_ms));
        match self.action {
            AdminAction::Status | AdminAction::Reset => None,
            AdminAction::SetOverride => Some(Change::Override { limits: ask.map(|a| a.limits.clone()).unwrap_or_default(), until_ms: until }),
            AdminAction::Ban => Some(Change::Ban { until_ms: until.unwrap_or(now_ms) }),
            AdminAction::ClearOverride => Some(Change::ClearOverride),
            AdminAction::ClearBan => Some(Change::ClearBan),
        }
    }
}

/// Why an admin request cannot be served (answered 4xx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AdminError {
    NotFound,
    MethodNotAllowed { allowed: &'static str },
    MissingRule,
    UnknownRule(String),
    MissingKeyPart(MissingPart),
    /// `bucket` is neither `key` nor `fallback`, or `fallback` for a rule
    /// without a `fallback_key`.
    UnknownBucket { rule: String, bucket: String },
    /// An override or ban that cannot be set as given.
    InvalidControl(String),
    /// The query string holds a literal `+` (in this parameter's name or
    /// value): see [`refuse_plus`].
    AmbiguousPlus(String),
    /// The raw path enters the admin prefix and its dot segments lead out
    /// of it ([`crate::request::canon::canonical_path_entering`]): answered
    /// 400 by tollgate, never forwarded.
    LeavesPrefix,
    /// A request another site's page made (`Sec-Fetch-Site` other than
    /// `same-origin` or `none`, or a foreign `Origin`): 403, before any
    /// token is compared or counted.
    CrossSite,
}

impl AdminError {
    /// The status phrase (RFC 9457 §4.2.1: the title of an `about:blank`
    /// problem is the status phrase).
    pub(crate) fn title(&self) -> &'static str {
        match self.status() {
            404 => "Not Found",
            405 => "Method Not Allowed",
            _ => "Bad Request",
        }
    }

    /// The HTTP status this error is answered with.
    pub(crate) fn status(&self) -> u16 {
        match self {
            AdminError::NotFound | AdminError::UnknownRule(_) => 404,
            AdminError::MethodNotAllowed { .. } => 405,
            AdminError::MissingRule
            | AdminError::MissingKeyPart(_)
            | AdminError::UnknownBucket { .. }
            | AdminError::InvalidControl(_)
            | AdminError::AmbiguousPlus(_)
            | AdminError::LeavesPrefix => 400,
            AdminError::CrossSite => 403,
        }
    }
}

impl fmt::Display for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminError::LeavesPrefix => f.write_str("the path enters the admin prefix and leaves it again (dot segments): tollgate answers it, never the origin"),
            AdminError::CrossSite => f.write_str("the admin API takes no request from another site (Sec-Fetch-Site or Origin)"),
            AdminError::NotFound => write!(f, "unknown admin endpoint (use /status, /reset, /override, /ban, /rules, /controls or /traffic)"),
            AdminError::InvalidControl(why) => f.write_str(why),
            AdminError::AmbiguousPlus(name) => write!(
                f,
                "`{name}` holds a `+`, which a query string may mean as a space (form encoding) or as a plus: \
                 write `%2B` for a plus sign and `%20` for a space"
            ),
            AdminError::MethodNotAllowed { allowed } => write!(f, "use {allowed}"),
            AdminError::MissingRule => write!(f, "missing query parameter `rule`"),
            AdminError::UnknownRule(r) => write!(f, "no rule named `{r}`"),
            AdminError::MissingKeyPart(m) => {
                let param = m.0.param_name().unwrap_or_else(|| m.0.to_string());
                write!(f, "{m}: give it as the query parameter `{param}`")
            }
            AdminError::UnknownBucket { rule, bucket } if bucket == "fallback" => {
                write!(f, "rule `{rule}` has no fallback_key, so no fallback bucket")
            }
            AdminError::UnknownBucket { bucket, .. } => {
                write!(f, "bucket `{bucket}`: use `key` (the default) or `fallback` (the rule's fallback_key)")
            }
        }
    }
}

/// The missing key part is named in the message, so it is not also a
/// [`source`](std::error::Error::source).
impl std::error::Error for AdminError {}

/// A parsed admin request: the action, the rule, and the key it targets.
#[derive(Debug, Clone)]
pub(crate) struct AdminRequest<'c> {
    pub(crate) action: AdminAction,
    pub(crate) rule: &'c Rule,
    pub(crate) key: String,
    /// For `override` and `ban`: what to set.
    pub(crate) control: Option<ControlAsk>,
}

/// Refuses an admin query string with a literal `+` anywhere in it.
/// The key is given raw, and `+` is ambiguous there: form decoding
/// (which [`CanonicalQuery`] follows, as origins read a query) makes it a
/// space, while an operator typing `body:email=eve+1@example.com` means a
/// plus; read as a space, the ban answered 200 and `eve+1` still got
/// through. Refusing is the one reading that cannot ban the wrong key;
/// `%2B` (a plus) and `%20` (a space) are unambiguous and accepted. No rule
/// name, limit, duration or end holds a `+`, so nothing else is lost. The
/// error names the parameter (as written, up to its `=`).
pub(crate) fn refuse_plus(raw_query: &str) -> Result<(), AdminError> {
    match raw_query.split(['&', ';']).find(|pair| pair.contains('+')) {
        Some(pair) => Err(AdminError::AmbiguousPlus(pair.split('=').next().unwrap_or(pair).to_string())),
        None => Ok(()),
    }
}

/// Whether `canonical_path` is under `prefix` (the prefix itself or below),
/// the prefix compared in any ASCII case: `/.TOLLGATE/status` is tollgate's
/// as `/.tollgate/status` is (an origin may route paths case-insensitively,
/// and a bearer token sent there must not reach it).
pub(crate) fn is_admin_path(prefix: &str, canonical_path: &str) -> bool {
    admin_rest(prefix, canonical_path).is_some()
}

/// What follows the admin prefix in `canonical_path` (`""` or `/...`), the
/// prefix compared in any ASCII case; `None` when the path is not under it.
pub(crate) fn admin_rest<'p>(prefix: &str, canonical_path: &'p str) -> Option<&'p str> {
    crate::request::canon::under_prefix(prefix, canonical_path)
}

/// Whether an admin request comes from another site's page, as its fetch
/// metadata says: `Sec-Fetch-Site` (when sent) other than `same-origin` or
/// `none` (typed, bookmarked), or an `Origin` (when sent) other than the
/// request's own. What a page elsewhere makes a browser send (`<img>`,
/// a form, a `fetch`) says so; a script or `curl` sends neither.
pub(crate) fn cross_site(sec_fetch_site: Option<&str>, origin: Option<&str>, own_origin: &str) -> bool {
    !crate::admin::console::session::same_site(sec_fetch_site, origin, own_origin)
}

/// Whether an `Authorization` field presents a credential (any non-blank
/// value): only such a request is counted by the lockout when wrong. A
/// request with none cannot be a guess, and counting it let ten `<img>`
/// tags on any site lock the operator out.
pub(crate) fn presents_credential(authorization: Option<&str>) -> bool {
    authorization.is_some_and(|a| !a.trim().is_empty())
}

/// The log line written once per isolate, at its first admin request, when
/// the admin token is shorter than [`TOKEN_PASSES_LOCKOUT_CHARS`]: such a
/// token keeps the lockout's full force (ten wrong tokens from a client's
/// address, or its IPv6 /64, shut the right one out there for 15 minutes)
/// and is the one a guess could find. `None` for a long token. No
/// deploy-time check can see a secret, so this (and the console's banner)
/// is where the operator is told.
pub(crate) fn short_token_event(token: &str) -> Option<LogEvent> {
    (!token_passes_lockout(token)).then(|| {
        LogEvent::new(
            "admin_token_short",
            vec![
                ("chars", token.trim().chars().count().into()),
                ("advice", format!("use at least {TOKEN_PASSES_LOCKOUT_CHARS} random characters: openssl rand -hex 32").into()),
            ],
        )
    })
}

/// What an authorized admin request asks for.
#[derive(Debug)]
pub(crate) enum AdminAsk<'c> {
    /// A status or reset of one (rule, key) object.
    Object(AdminRequest<'c>),
    /// `GET {prefix}/rules`: the rules and their limits, no object call.
    Rules,
    /// `GET {prefix}/controls`: the controls in force, from the registry.
    Controls,
    /// `GET {prefix}/traffic`: the traffic charts' data.
    Traffic(Range),
}

/// Parses an admin request (already known to be under the prefix):
/// `GET /status` and `POST /reset` with `rule=NAME`, the raw value of each
/// key part, and optionally `bucket=fallback` to address the bucket of the
/// rule's `fallback_key` (the anonymous clients of a rule keyed by a user,
/// say); `GET /rules`.
pub(crate) fn parse<'c>(
    config: &'c Config,
    canonical_path: &str,
    method: &str,
    query: &CanonicalQuery,
) -> Result<AdminAsk<'c>, AdminError> {
    let endpoint = admin_rest(&config.admin_prefix, canonical_path).unwrap_or("");
    let action = match (endpoint, method.to_ascii_uppercase().as_str()) {
        ("/status", "GET") => AdminAction::Status,
        ("/reset", "POST") => AdminAction::Reset,
        ("/rules", "GET") => return Ok(AdminAsk::Rules),
        ("/controls", "GET") => return Ok(AdminAsk::Controls),
        ("/traffic", "GET") => return Ok(AdminAsk::Traffic(Range::parse(query.values("range").next()))),
        ("/override", "PUT") => AdminAction::SetOverride,
        ("/override", "DELETE") => AdminAction::ClearOverride,
        ("/ban", "POST") => AdminAction::Ban,
        ("/ban", "DELETE") => AdminAction::ClearBan,
        ("/status" | "/rules" | "/controls" | "/traffic", _) => return Err(AdminError::MethodNotAllowed { allowed: "GET" }),
        ("/reset", _) => return Err(AdminError::MethodNotAllowed { allowed: "POST" }),
        ("/override", _) => return Err(AdminError::MethodNotAllowed { allowed: "PUT or DELETE" }),
        ("/ban", _) => return Err(AdminError::MethodNotAllowed { allowed: "POST or DELETE" }),
        _ => return Err(AdminError::NotFound),
    };
    let name = query.values("rule").next().ok_or(AdminError::MissingRule)?;
    let rule = config
        .rules
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| AdminError::UnknownRule(name.to_string()))?;
    let parts = match query.values("bucket").next().unwrap_or("key") {
        "key" => rule.key.as_slice(),
        "fallback" if !rule.on_missing_key.fallback_parts().is_empty() => rule.on_missing_key.fallback_parts(),
        other => return Err(AdminError::UnknownBucket { rule: rule.name.clone(), bucket: other.to_string() }),
    };
    let key = admin_key(parts, query, config.ipv6_prefix).map_err(AdminError::MissingKeyPart)?;
    let control = control_ask(action, rule, query)?;
    Ok(AdminAsk::Object(AdminRequest { action, rule, key, control }))
}

/// What an override (`limit=N/DURATION`, repeatable, held to the rule's
/// checks) or a ban (an end required) sets; the end: `until` (Unix
/// seconds) or `for` (a duration), not both.
fn control_ask(action: AdminAction, rule: &Rule, query: &CanonicalQuery) -> Result<Option<ControlAsk>, AdminError> {
    let invalid = |why: String| AdminError::InvalidControl(why);
    if !matches!(action, AdminAction::SetOverride | AdminAction::Ban) {
        return Ok(None);
    }
    let until = match (query.values("until").next(), query.values("for").next()) {
        (Some(_), Some(_)) => return Err(invalid("give `until` or `for`, not both".into())),
        (Some(at), None) => Until::At(at.trim().parse::<i64>().map_err(|_| invalid(format!("`until={at}`: give Unix seconds")))?),
        (None, Some(d)) => Until::For(crate::count::duration::parse_duration_ms(d).map_err(|e| invalid(format!("`for={d}`: {e}")))?.get()),
        (None, None) if action == AdminAction::Ban => return Err(invalid("a ban needs an end: `until=UNIX_SECONDS` or `for=1h`".into())),
        (None, None) => Until::Never,
    };
    let limits = query.values("limit").map(|text| override_limit(rule, text)).collect::<Result<Vec<_>, _>>()?;
    if action == AdminAction::SetOverride {
        crate::count::controls::check_limits(&limits).map_err(|e| invalid(format!("{e} (limit=REQUESTS/WINDOW)")))?;
        if let Some(smallest) = limits.iter().map(|l| l.requests.get()).min().filter(|s| *s < rule.cost) {
            return Err(invalid(format!("a limit of {smallest} is below the rule's cost ({})", rule.cost)));
        }
    }
    let text = |name: &str, max: usize| query.values(name).next().map(|t| crate::count::registry::clean_text(t, max));
    let reason = text("reason", 200).unwrap_or_default();
    let by = text("by", 32).filter(|b| !b.is_empty()).unwrap_or_else(|| "api".into());
    Ok(Some(ControlAsk { limits, until, reason, by }))
}

/// One `limit=REQUESTS/WINDOW` of an override: a rolling window (`1000/1d`)
/// or a calendar one: `300/day@Asia/Tokyo`, or `300/day` (also
/// `week`, `month`) in the zone of the rule's own calendar window. A
/// calendar window is refused on a GCRA rule, which has no period.
fn override_limit(rule: &Rule, text: &str) -> Result<Limit, AdminError> {
    let invalid = |why: String| AdminError::InvalidControl(format!("`limit={text}`: {why}"));
    let bad = || invalid("give REQUESTS/WINDOW, such as 1000/1d, or 300/day for a calendar day".into());
    let zero = || invalid("a limit needs requests above 0".into());
    let (requests, window) = text.split_once('/').ok_or_else(bad)?;
    let requests = match rule.money_step() {
        Some(step) => override_spend(requests.trim(), step).map_err(invalid)?,
        None => requests.trim().parse().map_err(|_| bad())?,
    };
    let window = window.trim();
    let (unit, zone) = window.split_once('@').map_or((window, None), |(u, z)| (u, Some(z)));
    let Some(unit) = crate::count::calendar::Unit::from_name(unit) else {
        let ms = crate::count::duration::parse_duration_ms(window).map_err(|_| bad())?;
        return Limit::new(requests, ms.get()).ok_or_else(zero);
    };
    if rule.algorithm == crate::count::algorithm::Algorithm::Gcra {
        return Err(invalid("a calendar window is counted by the sliding log; this rule counts with gcra (give a rolling window such as 1000/1d)".into()));
    }
    let zone = match zone {
        Some(name) => crate::count::calendar::Zone::named(name).ok_or_else(|| invalid(format!("unknown time zone `{name}` (an IANA name, such as Asia/Tokyo)")))?,
        None => rule.limits.iter().find_map(|l| l.calendar).map(|c| c.zone).ok_or_else(|| {
            invalid(format!("this rule has no calendar window to take the zone from: give it, such as {requests}/{}@Asia/Tokyo", unit.name()))
        })?,
    };
    Limit::per_period(requests, crate::count::calendar::Calendar { unit, zone }).ok_or_else(zero)
}

/// An override's amount on a money rule (`metering.price`): money in the
/// rule's currency, as its `spend` limits are written (`200`, `0.5`), in
/// the units its counters hold (micro-units, or milli-units when a spend
/// passes 4294.967295: [`crate::config::price::step_for`]). Never the
/// counted units themselves: `limit=200/day` on a yen rule is 200 yen.
fn override_spend(amount: &str, step: u64) -> Result<u32, String> {
    let decimals = if step == 1 { 6 } else { 3 };
    let micro = crate::config::price::millionths_of_text(amount)
        .ok_or_else(|| format!("give an amount of the rule's currency with at most {decimals} decimals, such as 200/day or 0.5/1h (a money rule's limits are spend)"))?;
    if !micro.is_multiple_of(step) {
        return Err(format!("at most {decimals} decimals: this rule counts in milli-units (a spend passes 4294.967295)"));
    }
    u32::try_from(micro / step).map_err(|_| "more than this rule's counters hold: its limits' largest spend decides its unit (raise a spend in the config to count in milli-units)".to_string())
}

/// The body of `GET {prefix}/rules`: every rule in the config's own
/// vocabulary ([`crate::config::describe::rules_listing`]).
pub(crate) fn rules_body(config: &Config) -> serde_json::Value {
    crate::config::describe::rules_listing(&config.rules)
}

pub(crate) use crate::config::overrides::admin_key;

impl AdminAction {
    /// `status`, `reset`, `override`, `clear_override`, `ban` or `clear_ban`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AdminAction::Status => "status",
            AdminAction::Reset => "reset",
            AdminAction::SetOverride => "override",
            AdminAction::ClearOverride => "clear_override",
            AdminAction::Ban => "ban",
            AdminAction::ClearBan => "clear_ban",
        }
    }
}

/// The `admin` log line of a served request: the key only as its hash
/// (`key_hash`, from the plan), the client as its own (`client_hash`).
pub(crate) fn log_event(request: &AdminRequest<'_>, key_hash: &str, client_hash: &str) -> LogEvent {
    LogEvent::new(
        "admin",
        vec![
            ("action", request.action.name().into()),
            ("rule", request.rule.name.as_str().into()),
            ("key_hash", key_hash.into()),
            ("client_hash", client_hash.into()),
        ],
    )
}

/// The JSON body answering a served request: the key's windows as its
/// object reported them, the key as `key_hash` (from the plan).
pub(crate) fn status_body(request: &AdminRequest<'_>, key_hash: &str, reply: &Reply) -> serde_json::Value {
    serde_json::json!({
        "rule": request.rule.name,
        "key_hash": key_hash,
        "action": request.action.name(),
        "windows": reply.tally.windows,
        "alarm_pending": reply.alarm_pending,
        "stored_hits": reply.stored_hits,
        // The rule's penalty in force (`POST /reset` lifts it).
        "penalty_until_ms": reply.penalty_until_ms,
    })
}

/// [`status_body`] with the key's controls at `now_ms`: `limits` (in force,
/// as `[requests, window_ms]`), `limits_source` (`config`,
/// `config_override`, `override` or `ban`), and the `override` and `ban`
/// set at runtime, if any (ends in Unix ms).
pub(crate) fn status_with_controls(
    request: &AdminRequest<'_>,
    key_hash: &str,
    reply: &Reply,
    controls: &crate::count::controls::Controls,
    now_ms: i64,
) -> serde_json::Value {
    let mut body = status_body(request, key_hash, reply);
    let live = controls.live(now_ms);
    let limits = controls.limits(now_ms).unwrap_or_else(|| request.rule.limits_for(&request.key).to_vec());
    let static_override = request.rule.overrides.limits_for(&request.key).is_some();
    body["limits"] = limits.iter().map(crate::count::protocol::limit_json).collect();
    let money = request.rule.usage.as_ref().and_then(|u| u.price.as_ref());
    body["limits_text"] = limits.iter().map(|l| limit_text(l, money, now_ms)).collect();
    if let Some(priced) = money {
        spend_fields(&mut body, priced);
    }
    body["periods"] = limits.iter().filter_map(|l| period_json(l, now_ms)).collect();
    body["limits_source"] = crate::count::controls::source(controls, static_override, now_ms).into();
    let live = live.to_json();
    body["override"] = live["override"].clone();
    body["ban"] = live["ban"].clone();
    if let Some(ask) = &request.control {
        body["reason"] = ask.reason.as_str().into();
        body["by"] = ask.by.as_str().into();
    }
    body
}

/// A limit in force for a person: `10 per 1m`, or on a calendar
/// `300 a day (Asia/Tokyo), resets at 2026-12-07T00:00+09:00` (the end
/// of the period holding `now_ms`, in the zone's local time). A money
/// rule's (`money`: its pricing) in its currency: `200 JPY a day
/// (Asia/Tokyo), resets at …`, `0.5 JPY per 1m` ([`spent_text`]).
pub(crate) fn limit_text(limit: &Limit, money: Option<&Priced>, now_ms: i64) -> String {
    let amount = spent_text(u64::from(limit.requests.get()), money);
    match limit.calendar {
        None => format!("{amount} per {}", crate::config::written::duration(limit.window_ms.get())),
        Some(c) => format!("{amount} a {} ({}), resets at {}", c.unit.name(), c.zone.name(), c.local_text(c.period(now_ms).end_ms)),
    }
}

/// `units` as counted, for a person: a money rule's (`money`) in its
/// currency, exactly (`12.345678 JPY`: micro- or milli-units times their
/// step, [`crate::config::price::money_text`]); any other rule's as the
/// bare number. The one wording of a count for status and the console.
pub(crate) fn spent_text(units: u64, money: Option<&Priced>) -> String {
    match money {
        Some(priced) => crate::config::price::money_text(units.saturating_mul(priced.step), &priced.table.currency),
        None => units.to_string(),
    }
}

/// A money rule's status in its currency, beside the counts in its unit:
/// `currency`, `unit` (`micro-JPY`, what `limit`, `used` and `remaining`
/// count), each window's `spent`, `remaining_spend` and `spend_limit`
/// as text, and `spent`: what the key spent in its longest window (its
/// budget's), as text.
fn spend_fields(body: &mut Value, priced: &Priced) {
    let said = |units: Option<u64>| units.map(|u| spent_text(u, Some(priced)));
    let mut longest: Option<(u64, String)> = None;
    for w in body["windows"].as_array_mut().into_iter().flatten() {
        let spent = said(w["used"].as_u64());
        if let (Some(ms), Some(text)) = (w["window_ms"].as_u64(), &spent) {
            if longest.as_ref().is_none_or(|(most, _)| ms > *most) {
                longest = Some((ms, text.clone()));
            }
        }
        w["spent"] = spent.into();
        w["remaining_spend"] = said(w["remaining"].as_u64()).into();
        w["spend_limit"] = said(w["limit"].as_u64()).into();
    }
    body["currency"] = priced.table.currency.as_str().into();
    body["unit"] = priced.unit.as_str().into();
    body["spent"] = longest.map(|(_, text)| text).into();
}

/// How far back `rule`'s longest window reaches at `now_ms`, in ms: a
/// rolling window's length, a calendar one's time since its period began.
pub(crate) fn longest_window_ms(rule: &Rule, now_ms: i64) -> u64 {
    let back = |l: &Limit| match l.calendar {
        Some(c) => u64::try_from(now_ms.saturating_sub(c.period(now_ms).start_ms)).unwrap_or(0),
        None => l.window_ms.get(),
    };
    rule.limits.iter().map(back).max().unwrap_or(0)
}

/// A calendar limit's period holding `now_ms`, as JSON: `{"limit": 300,
/// "calendar": "day", "time_zone": "Asia/Tokyo", "start_ms", "end_ms",
/// "resets_at": "2026-12-07T00:00+09:00"}`; `None` for a rolling limit.
fn period_json(limit: &Limit, now_ms: i64) -> Option<Value> {
    let c = limit.calendar?;
    let period = c.period(now_ms);
    Some(serde_json::json!({
        "limit": limit.requests.get(),
        "calendar": c.unit.name(),
        "time_zone": c.zone.name(),
        "start_ms": period.start_ms,
        "end_ms": period.end_ms,
        "resets_at": c.local_text(period.end_ms),
    }))
}

impl AdminRequest<'_> {
    /// What the controls registry ([`crate::count::registry`]) learns once
    /// the key's object `id` took this request's change at `now_ms`: an
    /// entry put for a ban or an override, removed for a lift; `None` for
    /// status and reset.
    pub(crate) fn registry_call(&self, id: &str, key_hash: &str, now_ms: i64) -> Option<RegistryCall> {
        let entry = |kind, ask: &ControlAsk, until_ms: Option<i64>, limits: Vec<Limit>| Entry {
            id: id.to_string(),
            kind,
            rule: self.rule.name.clone(),
            key_hash: key_hash.to_string(),
            until_ms,
            limits,
            reason: ask.reason.clone(),
            by: ask.by.clone(),
            set_ms: now_ms,
        };
        let ask = self.control.as_ref();
        Some(match (self.action, ask) {
            (AdminAction::SetOverride, Some(ask)) => RegistryCall::Put(entry(Kind::Override, ask, ask.until.resolve(now_ms), ask.limits.clone())),
            (AdminAction::Ban, Some(ask)) => RegistryCall::Put(entry(Kind::Ban, ask, Some(ask.until.resolve(now_ms).unwrap_or(now_ms)), Vec::new())),
            (AdminAction::ClearOverride, _) => RegistryCall::Remove { id: id.to_string(), kind: Kind::Override },
            (AdminAction::ClearBan, _) => RegistryCall::Remove { id: id.to_string(), kind: Kind::Ban },
            _ => return None,
        })
    }
}

/// The body of `GET {prefix}/controls`: each registry entry whose key's
/// object holds that kind of control at `now_ms` (its end and limits as
/// the object says; the reason and who set it as the registry says), in
/// the registry's order; an entry whose object could not be read
/// (`None`) is listed as the registry has it, with `"checked": false`.
/// Keys only as their hashes. Each entry's `limits_text` says its
/// limits as status does ([`limit_text`]: a money rule's in its currency,
/// `money` giving a rule's pricing by name).
pub(crate) fn controls_body(listed: &[(Entry, Option<Controls>)], money: &dyn Fn(&str) -> Option<Priced>, now_ms: i64) -> Value {
    let mut out = Vec::new();
    for (entry, controls) in listed {
        let (until_ms, limits, checked) = match controls.as_ref().map(|c| c.live(now_ms)) {
            None => (entry.until_ms, entry.limits.clone(), false),
            Some(live) => match (entry.kind, live.ban, live.runtime_override) {
                (Kind::Ban, Some(ban), _) => (Some(ban.until_ms), Vec::new(), true),
                (Kind::Override, _, Some(o)) => (o.until_ms, o.limits, true),
                _ => continue,
            },
        };
        let priced = money(&entry.rule);
        let said: Vec<String> = limits.iter().map(|l| limit_text(l, priced.as_ref(), now_ms)).collect();
        let limits: Vec<Value> = limits.iter().map(crate::count::protocol::limit_json).collect();
        out.push(serde_json::json!({
            "rule": entry.rule,
            "key_hash": entry.key_hash,
            "kind": entry.kind.name(),
            "until_ms": until_ms,
            "limits": limits,
            "limits_text": said,
            "reason": entry.reason,
            "by": entry.by,
            "set_ms": entry.set_ms,
            "checked": checked,
        }));
    }
    serde_json::json!({ "controls": out })
}

#[cfg(test)]
mod tests {
    use crate::config::lockout::LOCKOUT_RULE;
    use super::*;
    use crate::config::policy::FailPolicy;
    use crate::count::window::Limit;
    use crate::request::key::KeyPart;

    fn object<'c>(ask: Result<AdminAsk<'c>, AdminError>) -> AdminRequest<'c> {
        match ask {
            Ok(AdminAsk::Object(request)) => request,
            other => panic!("{other:?}"),
        }
    }
    use serde_json::json;

    fn config() -> Config {
        crate::testing::config(json!([
            {"name": "heavy", "path": "/api/example", "limits": [{"requests": 10, "window": "60s"}]},
            {"name": "login", "path": "/login", "key": ["body:email"], "count_statuses": [401],
             "limits": [{"requests": 10, "window": "15m"}]},
            {"name": "tenant", "path": "/t/:school/*", "key": ["path:school", "header:x-api-key", "cookie:sid", "query:plan"],
             "limits": [{"requests": 300, "window": "1d"}]},
        ]))
    }

    #[test]
    fn routes_and_methods() {
        let c = config();
        let q = CanonicalQuery::parse("rule=heavy&ip=203.0.113.7");
        let r = object(parse(&c, "/.tollgate/status", "GET", &q));
        assert_eq!((r.action, r.rule.name.as_str(), r.key.as_str()), (AdminAction::Status, "heavy", "ip=203.0.113.7"));
        assert_eq!(object(parse(&c, "/.tollgate/reset", "POST", &q)).action, AdminAction::Reset);
        assert_eq!(parse(&c, "/.tollgate/reset", "GET", &q).unwrap_err().status(), 405);
        assert_eq!(parse(&c, "/.tollgate/nope", "GET", &q).unwrap_err(), AdminError::NotFound);
        let no_rule = CanonicalQuery::parse("ip=1.2.3.4");
        assert_eq!(parse(&c, "/.tollgate/status", "GET", &no_rule).unwrap_err(), AdminError::MissingRule);
        let unknown = CanonicalQuery::parse("rule=x");
        assert_eq!(parse(&c, "/.tollgate/status", "GET", &unknown).unwrap_err().status(), 404);
        let no_ip = CanonicalQuery::parse("rule=heavy");
        assert!(parse(&c, "/.tollgate/status", "GET", &no_ip).unwrap_err().to_string().contains("`ip`"));
        assert!(is_admin_path("/.tollgate", "/.tollgate/status"));
        assert!(!is_admin_path("/.tollgate", "/.tollgatex/status"));
    }

    #[test]
    fn keys_are_derived_as_the_rule_would() {
        let c = config();
        let v6 = CanonicalQuery::parse("rule=heavy&ip=2001:DB8:0:0:1::5");
        assert_eq!(object(parse(&c, "/.tollgate/status", "GET", &v6)).key, "ip=2001:db8::/64");
        let login = CanonicalQuery::parse("rule=login&body:email=%20User@Example.com");
        assert_eq!(
            object(parse(&c, "/.tollgate/status", "GET", &login)).key,
            format!("body:email={}", crate::request::key::tests::hash_identity("user@example.com").unwrap())
        );
        let tenant = CanonicalQuery::parse("rule=tenant&path:school=s1&header:x-api-key=k&cookie:sid=c&query:plan=gold");
        assert_eq!(
            object(parse(&c, "/.tollgate/status", "GET", &tenant)).key,
            "path:school=s1|header:x-api-key=k|cookie:sid=c|query:plan=gold"
        );
    }

    /// Round 3 item 4: a typed key part (`header:x-user-id:int`)
    /// is given as `header:x-user-id=9`, and the error for a missing one
    /// names that parameter, not the part as the rule writes it (which was
    /// what had been sent); the written spelling names the same value.
    #[test]
    fn a_typed_key_part_is_given_without_its_type_or_as_written() {
        let c = Config::from_json(&json!({"rules": [
            {"name": "users", "path": "/api/*", "key": ["header:x-user-id:int"], "limits": [{"requests": 10, "window": "60s"}]},
        ]}))
        .unwrap_or_else(|e| panic!("{e:?}"));
        let status = |query: &str| parse(&c, "/.tollgate/status", "GET", &CanonicalQuery::parse(query));
        let plain = object(status("rule=users&header:x-user-id=009")).key;
        assert_eq!(plain, "header:x-user-id:int=9");
        assert_eq!(object(status("rule=users&header:x-user-id:int=9")).key, plain, "the rule's own spelling of the part");
        let said = status("rule=users&header:x-user-id:int=abc").unwrap_err().to_string();
        assert_eq!(said, "the request has no usable `header:x-user-id:int`: give it as the query parameter `header:x-user-id`");
        let said = status("rule=users").unwrap_err().to_string();
        assert!(said.ends_with("give it as the query parameter `header:x-user-id`"), "{said}");
    }

    #[test]
    fn bearer_token_comparison() {
        assert!(token_matches("s3cret", Some("Bearer s3cret")));
        assert!(token_matches("s3cret", Some("bearer   s3cret ")));
        assert!(!token_matches("s3cret", Some("Bearer s3cre")));
        assert!(!token_matches("s3cret", Some("Bearer s3cretx")));
        assert!(!token_matches("s3cret", Some("Basic s3cret")));
        assert!(!token_matches("s3cret", Some("s3cret")));
        assert!(!token_matches("s3cret", None));
        assert!(!token_matches("", Some("Bearer ")));
        assert!(token_matches("s3cret\n", Some("Bearer s3cret")), "a stored trailing newline is ignored");
    }

    fn lockout<'c>(config: &'c Config) -> Applied<'c> {
        let rule = &config.admin_lockout;
        let key = "ip=192.0.2.1".to_string();
        Applied { rule, id: crate::pipeline::applied::object_name(rule, &key), key_hash: "c11e47".into(), key, fell_back: false, own_method: false, device: None, spelling: None }
    }

    fn blocked(ms: u64) -> Outcome {
        Outcome::Blocked { retry_after_ms: ms, window: 0, windows: None, by: crate::count::blocked::Refusal::Limit }
    }

    /// The response and the log lines, parsed back (fields unordered).
    fn refused(gate: Gate<'_, '_>) -> (OwnResponse, Vec<Value>) {
        match gate {
            Gate::Refuse { response, events } => {
                (response, events.iter().map(|e| serde_json::from_str(&e.line()).unwrap()).collect())
            }
            Gate::Serve { .. } | Gate::Rules | Gate::Controls | Gate::Traffic(_) | Gate::Console(_) | Gate::ByHash(_) => panic!("served"),
        }
    }

    #[test]
    fn the_lockout_is_a_built_in_rule_no_config_rule_can_shadow() {
        let c = config();
        let rule = &c.admin_lockout;
        assert_eq!(rule.name, LOCKOUT_RULE);
        assert_eq!(rule.key, [KeyPart::Ip]);
        assert_eq!(rule.limits, [Limit::new(10, 900_000).unwrap()]);
        assert_eq!(rule.on_error, FailPolicy::Deny);
        assert!(c.rules.iter().all(|r| r.name != LOCKOUT_RULE), "not matched against requests");
        let taken = Config::from_json(&json!({"rules": [
            {"name": LOCKOUT_RULE, "path": "/x", "limits": [{"requests": 1, "window": "1m"}]},
        ]}));
        assert!(taken.unwrap_err()[0].to_string().contains("field `name`"), "no config rule can take the name");
    }

    #[test]
    fn a_failed_authentication_is_counted_an_authorized_request_only_checked() {
        assert_eq!(lockout_op(&AdminRoute::Unauthorized), Op::Hit);
        assert_eq!(lockout_op(&AdminRoute::Invalid(AdminError::NotFound)), Op::Check);
        let c = config();
        let q = CanonicalQuery::parse("rule=heavy&ip=203.0.113.7");
        let request = object(parse(&c, "/.tollgate/status", "GET", &q));
        let call = AdminRoute::Call { request, id: "heavy\nip=203.0.113.7".into(), key_hash: "k".into() };
        assert_eq!(lockout_op(&call), Op::Check, "a right token never lowers or resets the count");
    }

    #[test]
    fn a_locked_out_client_gets_429_even_with_the_right_token() {
        let c = config();
        let q = CanonicalQuery::parse("rule=heavy&ip=203.0.113.7");
        let request = object(parse(&c, "/.tollgate/reset", "POST", &q));
        let call = AdminRoute::Call { request, id: "heavy\nip=203.0.113.7".into(), key_hash: "k".into() };
        for (route, authorized) in [(&call, true), (&AdminRoute::Unauthorized, false)] {
            let (response, events) = refused(gate(&lockout(&c), route, Some(&blocked(61_500))));
            assert_eq!(response.status, 429);
            assert_eq!(response.header("retry-after"), Some("62"));
            assert_eq!(response.header("ratelimit-policy"), Some("\"tollgate:admin-auth\";q=10;w=900"));
            assert_eq!(
                events,
                [json!({"tollgate": "admin_locked", "client_hash": "c11e47", "authorized": authorized, "retry_after_ms": 61_500})]
            );
        }
    }

    #[test]
    fn under_the_limit_the_token_decides() {
        let c = config();
        let allowed = Outcome::Allowed { windows: Vec::new(), reservation: None };
        let (response, events) = refused(gate(&lockout(&c), &AdminRoute::Unauthorized, Some(&allowed)));
        assert_eq!(response, unauthorized());
        assert_eq!(response.header("www-authenticate"), Some("Bearer realm=\"tollgate\""));
        assert_eq!(events, [json!({"tollgate": "admin_denied", "client_hash": "c11e47"})]);
        let (response, events) = refused(gate(&lockout(&c), &AdminRoute::Invalid(AdminError::MissingRule), Some(&allowed)));
        assert_eq!(response.status, 400);
        assert!(events.is_empty());
        let q = CanonicalQuery::parse("rule=heavy&ip=203.0.113.7");
        let request = object(parse(&c, "/.tollgate/status", "GET", &q));
        let call = AdminRoute::Call { request, id: "heavy\nip=203.0.113.7".into(), key_hash: "k".into() };
        match gate(&lockout(&c), &call, Some(&allowed)) {
            Gate::Serve { request, id, key_hash } => {
                assert_eq!((request.rule.name.as_str(), id, key_hash), ("heavy", "heavy\nip=203.0.113.7", "k"));
                let line: Value = serde_json::from_str(&log_event(request, key_hash, "c11e47").line()).unwrap();
                assert_eq!(
                    line,
                    json!({"tollgate": "admin", "action": "status", "rule": "heavy", "key_hash": "k", "client_hash": "c11e47"})
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_long_right_token_is_served_without_the_lockout_a_short_one_is_not() {
        assert!(token_passes_lockout(&"a".repeat(32)));
        assert!(token_passes_lockout(&format!(" {}\n", "0f".repeat(32))), "trimmed as token_matches trims");
        assert!(!token_passes_lockout(&"a".repeat(31)));
        assert!(!token_passes_lockout("s3cret-admin-token-for-tests"));
        let c = config();
        let q = CanonicalQuery::parse("rule=heavy&ip=203.0.113.7");
        let request = object(parse(&c, "/.tollgate/status", "GET", &q));
        let call = AdminRoute::Call { request, id: "heavy\nip=203.0.113.7".into(), key_hash: "k".into() };
        assert!(matches!(gate(&lockout(&c), &call, None), Gate::Serve { .. }), "not asked: served");
        assert!(matches!(gate(&lockout(&c), &AdminRoute::Rules, None), Gate::Rules));
        let (response, _) = refused(gate(&lockout(&c), &AdminRoute::Invalid(AdminError::MissingRule), None));
        assert_eq!(response.status, 400);
    }

    #[test]
    fn the_lockout_fails_closed_for_an_authorized_request() {
        let c = config();
        let down = Outcome::Failed("timeout".into());
        let q = CanonicalQuery::parse("rule=heavy&ip=203.0.113.7");
        let request = object(parse(&c, "/.tollgate/status", "GET", &q));
        let call = AdminRoute::Call { request, id: "heavy\nip=203.0.113.7".into(), key_hash: "k".into() };
        let (response, events) = refused(gate(&lockout(&c), &call, Some(&down)));
        assert_eq!((response.status, response.header("retry-after")), (503, Some("1")));
        assert_eq!((events[0]["tollgate"].as_str(), events[0]["decision"].as_str()), (Some("counter_error"), Some("deny")));
        assert_eq!(events[0]["key_hash"], "c11e47");
        let (response, events) = refused(gate(&lockout(&c), &AdminRoute::Unauthorized, Some(&down)));
        assert_eq!(response.status, 401, "a wrong token is refused all the same");
        assert_eq!(events[0]["decision"], "not_recorded");
        assert_eq!(events[1], json!({"tollgate": "admin_denied", "client_hash": "c11e47"}));
    }
}

#[cfg(test)]
mod credential_tests {
    use super::*;

    #[test]
    fn only_a_presented_credential_is_counted_and_a_short_token_is_told() {
        assert!(!presents_credential(None));
        assert!(!presents_credential(Some("  ")));
        assert!(presents_credential(Some("Bearer x")));
        assert!(presents_credential(Some("Basic eA==")));
        assert!(short_token_event(&"a".repeat(32)).is_none());
        let line: Value = serde_json::from_str(&short_token_event("short").unwrap().line()).unwrap();
        assert_eq!((line["tollgate"].as_str(), line["chars"].as_u64()), (Some("admin_token_short"), Some(5)));
        assert!(cross_site(Some("cross-site"), None, "https://example.com"));
        assert!(!cross_site(Some("none"), None, "https://example.com"));
        assert!(!cross_site(None, None, "https://example.com"));
    }
}


#[cfg(test)]
mod plus_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_literal_plus_is_refused_and_naming_the_parameter_and_2b_is_a_plus() {
        let e = refuse_plus("rule=login&body:email=eve+1@example.com&for=1h").unwrap_err();
        assert_eq!((e.status(), e.title()), (400, "Bad Request"));
        assert!(e.to_string().starts_with("`body:email` holds a `+`"), "{e}");
        assert!(e.to_string().contains("`%2B` for a plus sign and `%20` for a space"), "{e}");
        assert_eq!(refuse_plus("rule=a&ip+=1").unwrap_err(), AdminError::AmbiguousPlus("ip+".into()));
        assert_eq!(refuse_plus("rule=a;x=+"), Err(AdminError::AmbiguousPlus("x".into())));
        for fine in ["", "rule=login&body:email=eve%2B1@example.com", "rule=a&header:x-name=a%20b", "rule=a&ip=1.2.3.4"] {
            assert_eq!(refuse_plus(fine), Ok(()), "{fine}");
        }
        let c = crate::testing::config(json!([
            {"name": "login", "path": "/login", "key": ["body:email"], "limits": [{"requests": 10, "window": "15m"}]},
        ]));
        match parse(&c, "/.tollgate/status", "GET", &CanonicalQuery::parse("rule=login&body:email=eve%2B1@example.com")) {
            Ok(AdminAsk::Object(r)) => assert_eq!(r.key, format!("body:email={}", crate::request::key::tests::hash_identity("eve+1@example.com").unwrap())),
            other => panic!("{other:?}"),
        }
    }
}

#[cfg(test)]
mod failure_tests {
    use super::*;

    #[test]
    fn a_refused_change_says_why_and_anything_else_is_unreachable() {
        let refused = CallFailure::Refused { status: 400, body: r#"{"error":"an end is required"}"#.into() };
        let own = control_failure(&refused);
        assert_eq!(own.status, 400);
        assert!(own.body.contains("an end is required"), "{}", own.body);
        let timeout = CallFailure::Timeout { ms: 2_000 };
        for own in [control_failure(&timeout), unreachable(&timeout)] {
            assert_eq!(own.status, 503);
            assert!(own.body.contains("The counter cannot be reached"), "{}", own.body);
            assert!(own.headers.contains(&("retry-after".to_string(), "1".to_string())), "{:?}", own.headers);
        }
        assert_eq!(control_failure(&CallFailure::Refused { status: 500, body: String::new() }).status, 503);
    }
}

#[cfg(test)]
mod bucket_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fallback_bucket_and_the_rules_list() {
        let c = crate::testing::config(json!([
            { "name": "api", "path": "/api/*", "key": ["header:x-user"], "fallback_key": ["ip"],
              "limits": [{ "requests": 120, "window": "1m" }] },
            { "name": "plain", "path": "/p", "limits": [{ "requests": 1, "window": "1s" }] },
        ]));
        let ask = |q: &str| parse(&c, "/.tollgate/status", "GET", &CanonicalQuery::parse(q));
        match ask("rule=api&bucket=fallback&ip=2001:db8::7") {
            Ok(AdminAsk::Object(r)) => assert_eq!(r.key, "ip=2001:db8::/64", "derived as the fallback key is"),
            other => panic!("{other:?}"),
        }
        match ask("rule=api&header:x-user=ann") {
            Ok(AdminAsk::Object(r)) => assert_eq!(r.key, "header:x-user=ann"),
            other => panic!("{other:?}"),
        }
        let no_fallback = ask("rule=plain&bucket=fallback&ip=1.2.3.4").unwrap_err();
        assert_eq!((no_fallback.status(), no_fallback.to_string()), (400, "rule `plain` has no fallback_key, so no fallback bucket".into()));
        assert!(ask("rule=api&bucket=nope").unwrap_err().to_string().contains("use `key` (the default) or `fallback`"));
        assert!(matches!(parse(&c, "/.tollgate/rules", "GET", &CanonicalQuery::parse("")), Ok(AdminAsk::Rules)));
        assert_eq!(parse(&c, "/.tollgate/rules", "POST", &CanonicalQuery::parse("")).unwrap_err().status(), 405);
        let body = rules_body(&c);
        assert_eq!(body["rules"][0]["fallback_key"], json!(["ip"]));
        assert_eq!(body["rules"][0]["limits"], json!([{ "requests": 120, "window_ms": 60_000 }]));
        assert_eq!(body["rules"][1]["key"], json!(["ip"]));
    }
}

#[cfg(test)]
mod control_tests {
    use super::*;
    use crate::count::controls::{limits_of, Change};
    use serde_json::json;

    #[test]
    fn overrides_and_bans_parse_with_their_ends_and_are_refused_when_malformed() {
        let c = crate::testing::config(json!([
            { "name": "api", "path": "/api/*", "cost": 2, "limits": [{ "requests": 10, "window": "1m" }] },
        ]));
        let ask = |path: &str, method: &str, q: &str| parse(&c, path, method, &CanonicalQuery::parse(q));
        let request = |path: &str, method: &str, q: &str| match ask(path, method, q) {
            Ok(AdminAsk::Object(r)) => r,
            other => panic!("{other:?}"),
        };
        let o = request("/.tollgate/override", "PUT", "rule=api&ip=203.0.113.7&limit=100/1m&limit=1000/1h&for=2h");
        assert_eq!(o.action, AdminAction::SetOverride);
        assert_eq!(o.change(1_000), Some(Change::Override { limits: limits_of(&[(100, 60_000), (1000, 3_600_000)]).unwrap(), until_ms: Some(1_000 + 7_200_000) }));
        let forever = request("/.tollgate/override", "PUT", "rule=api&ip=203.0.113.7&limit=100/1m");
        assert_eq!(forever.change(0), Some(Change::Override { limits: limits_of(&[(100, 60_000)]).unwrap(), until_ms: None }));
        let ban = request("/.tollgate/ban", "POST", "rule=api&ip=203.0.113.7&until=1800000000");
        assert_eq!(ban.change(0), Some(Change::Ban { until_ms: 1_800_000_000_000 }));
        assert_eq!(request("/.tollgate/ban", "DELETE", "rule=api&ip=203.0.113.7").change(0), Some(Change::ClearBan));
        assert_eq!(request("/.tollgate/override", "DELETE", "rule=api&ip=203.0.113.7").change(0), Some(Change::ClearOverride));
        assert_eq!(request("/.tollgate/status", "GET", "rule=api&ip=203.0.113.7").change(0), None);
        for (path, method, q, says) in [
            ("/.tollgate/ban", "POST", "rule=api&ip=1.2.3.4", "needs an end"),
            ("/.tollgate/ban", "POST", "rule=api&ip=1.2.3.4&until=1&for=1h", "not both"),
            ("/.tollgate/ban", "POST", "rule=api&ip=1.2.3.4&until=tomorrow", "Unix seconds"),
            ("/.tollgate/override", "PUT", "rule=api&ip=1.2.3.4", "limits"),
            ("/.tollgate/override", "PUT", "rule=api&ip=1.2.3.4&limit=100", "REQUESTS/WINDOW"),
            ("/.tollgate/override", "PUT", "rule=api&ip=1.2.3.4&limit=0/1m", "above 0"),
            ("/.tollgate/override", "PUT", "rule=api&ip=1.2.3.4&limit=1/1m", "below the rule's cost"),
        ] {
            let e = ask(path, method, q).unwrap_err();
            assert_eq!(e.status(), 400, "{q}");
            assert!(e.to_string().contains(says), "{q}: {e}");
        }
        assert!(ask("/.tollgate/override", "PUT", "rule=api&ip=1.2.3.4&limit=1000000000/1d").is_ok(), "a sliding log takes an override of any size");
        assert_eq!(ask("/.tollgate/override", "POST", "rule=api&ip=1.2.3.4").unwrap_err().status(), 405);
        assert_eq!(ask("/.tollgate/ban", "PUT", "rule=api&ip=1.2.3.4").unwrap_err().status(), 405);
        let tokyo = request("/.tollgate/override", "PUT", "rule=api&ip=1.2.3.4&limit=500/day@Asia/Tokyo&limit=20/1m");
        let day = crate::count::calendar::Calendar::parse("day@Asia/Tokyo").unwrap();
        assert_eq!(tokyo.change(0), Some(Change::Override { limits: vec![Limit::per_period(500, day).unwrap(), Limit::new(20, 60_000).unwrap()], until_ms: None }));
        for (q, says) in [
            ("limit=500/day", "no calendar window to take the zone from: give it, such as 500/day@Asia/Tokyo"),
            ("limit=500/day@Mars/Olympus", "unknown time zone `Mars/Olympus`"),
            ("limit=0/day@UTC", "above 0"),
        ] {
            let e = ask("/.tollgate/override", "PUT", &format!("rule=api&ip=1.2.3.4&{q}")).unwrap_err();
            assert!(e.to_string().contains(says), "{q}: {e}");
        }
    }

    #[test]
    fn a_calendar_rule_s_override_takes_its_zone_and_gcra_refuses_one() {
        let c = crate::testing::config(json!([
            { "name": "school", "path": "/q/*", "key": ["ip"], "limits": [{ "requests": 300, "window": "day", "time_zone": "Asia/Tokyo" }] },
            { "name": "burst", "path": "/b/*", "key": ["ip"], "algorithm": "gcra", "limits": [{ "requests": 10, "window": "1m" }] },
        ]));
        let ask = |q: &str| parse(&c, "/.tollgate/override", "PUT", &CanonicalQuery::parse(q));
        let Ok(AdminAsk::Object(school)) = ask("rule=school&ip=1.2.3.4&limit=1000/month") else { panic!() };
        let month = crate::count::calendar::Calendar::parse("month@Asia/Tokyo").unwrap();
        assert_eq!(school.control.as_ref().unwrap().limits, vec![Limit::per_period(1000, month).unwrap()], "the rule's zone");
        let e = ask("rule=burst&ip=1.2.3.4&limit=5/day@UTC").unwrap_err();
        assert!(e.to_string().contains("counted by the sliding log; this rule counts with gcra"), "{e}");
        assert!(ask("rule=burst&ip=1.2.3.4&limit=5/1d").is_ok());
    }

    #[test]
    fn a_calendar_limit_says_its_zone_and_when_it_resets() {
        let day = Limit::per_period(300, crate::count::calendar::Calendar::parse("day@Asia/Tokyo").unwrap()).unwrap();
        // 2026-12-06 05:00 UTC is 14:00 in Tokyo: back at Tokyo's midnight, 15:00 UTC.
        let now = 1_796_533_200_000;
        assert_eq!(limit_text(&day, None, now), "300 a day (Asia/Tokyo), resets at 2026-12-07T00:00+09:00");
        assert_eq!(limit_text(&Limit::new(10, 60_000).unwrap(), None, now), "10 per 1m");
        let period = period_json(&day, now).unwrap();
        assert_eq!(period, json!({ "limit": 300, "calendar": "day", "time_zone": "Asia/Tokyo", "start_ms": 1_796_569_200_000i64 - 86_400_000, "end_ms": 1_796_569_200_000i64, "resets_at": "2026-12-07T00:00+09:00" }));
        assert_eq!(period_json(&Limit::new(10, 60_000).unwrap(), now), None);
        assert_eq!(crate::count::protocol::limit_json(&day), json!([300, "day@Asia/Tokyo"]));
    }
}

#[cfg(test)]
mod money_tests {
    use super::*;
    use crate::count::protocol::{WireWindow, VERSION};
    use crate::count::tally::Tally;
    use serde_json::json;

    fn school(spend: Value) -> Config {
        crate::testing::config(json!([{ "name": "yen", "path": "/v1/*", "key": ["header:x-school"], "limits": spend,
            "counting": { "mode": "response", "reservation_ttl": "10m" },
            "metering": { "usage": "openai", "reserve": 1000, "max": 1000, "price": { "currency": "JPY", "models": { "*": { "input": 75, "output": 370 } } } } }]))
    }

    fn reply(windows: Vec<WireWindow>) -> Reply {
        Reply {
            v: VERSION,
            tally: Tally { allowed: true, retry_after_ms: 0, windows, binding: None, in_flight: false },
            alarm_pending: true,
            alarm_set: false,
            stored_hits: 1,
            rows_read: 1,
            rows_written: 0,
            reservation: None,
            held: 0,
            granted: None,
            penalty_until_ms: None,
        }
    }

    /// An override on a money rule is written in money, as its `spend`
    /// limits are: `limit=150/day` is 150 yen (150,000,000 micro-yen
    /// counted), `0.5/1h` half a yen; more decimals than the unit
    /// holds, a sign or an exponent are refused, named; on a rule counting
    /// in milli-units (a spend above 4294.967295) 3 decimals at most.
    #[test]
    fn a_money_rule_s_override_is_written_in_its_currency() {
        let limits_of = |c: &Config, query: &str| match parse(c, "/.tollgate/override", "PUT", &CanonicalQuery::parse(query)) {
            Ok(AdminAsk::Object(AdminRequest { control: Some(ask), .. })) => Ok(ask.limits.iter().map(|l| l.requests.get()).collect::<Vec<_>>()),
            Ok(_) => Err("no control".to_string()),
            Err(e) => Err(e.to_string()),
        };
        let micro = school(json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }]));
        assert_eq!(limits_of(&micro, "rule=yen&header:x-school=north&limit=150/day&limit=0.5/1h"), Ok(vec![150_000_000, 500_000]));
        for (bad, says) in [("1.0000001/day", "at most 6 decimals"), ("-1/day", "at most 6 decimals"), ("1e3/day", "at most 6 decimals"), ("5000/day", "counters hold")] {
            let e = limits_of(&micro, &format!("rule=yen&header:x-school=north&limit={bad}")).unwrap_err();
            assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
        }
        let milli = school(json!([{ "spend": 10_000, "window": "month", "time_zone": "America/New_York" }]));
        assert_eq!(limits_of(&milli, "rule=yen&header:x-school=north&limit=8000.5/month"), Ok(vec![8_000_500]));
        let e = limits_of(&milli, "rule=yen&header:x-school=north&limit=0.0005/month").unwrap_err();
        assert!(e.contains("milli-units"), "{e}");
    }

    /// The controls listing says each override's limits as status does:
    /// a money rule's in its currency, a calendar window with its zone
    /// (the console's Controls page shows these words).
    #[test]
    fn the_controls_listing_says_limits_in_words() {
        let c = school(json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }]));
        let Ok(AdminAsk::Object(ask)) = parse(&c, "/.tollgate/override", "PUT", &CanonicalQuery::parse("rule=yen&header:x-school=north&limit=150/day&limit=0.5/1h")) else { panic!() };
        let limits = ask.control.map(|c| c.limits).unwrap_or_default();
        let entry = Entry { id: "i".into(), kind: crate::count::registry::Kind::Override, rule: "yen".into(), key_hash: "h".into(), until_ms: None, limits: limits.clone(), reason: String::new(), by: "api".into(), set_ms: 0 };
        let controls = Controls { runtime_override: Some(crate::count::controls::RuntimeOverride { limits, until_ms: None }), ban: None };
        let money = |name: &str| c.rules.iter().find(|r| r.name == name)?.usage.as_ref()?.price.clone();
        let body = controls_body(&[(entry, Some(controls))], &money, 1_796_533_200_000);
        assert_eq!(body["controls"][0]["limits_text"], json!(["150 JPY a day (Asia/Tokyo), resets at 2026-12-07T00:00+09:00", "0.5 JPY per 1h"]));
    }

    /// A money rule's status says its limits and what the key spent in
    /// its currency (micro- or milli-units converted exactly), keeping the
    /// counts in its unit beside them; a rule counting requests is said
    /// as before.
    #[test]
    fn a_money_rule_s_status_says_limits_and_spend_in_its_currency() {
        let c = school(json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }, { "spend": 0.5, "window": "1m" }]));
        let q = CanonicalQuery::parse("rule=yen&header:x-school=north");
        let Ok(AdminAsk::Object(request)) = parse(&c, "/.tollgate/status", "GET", &q) else { panic!() };
        let now = 1_796_533_200_000; // 14:00 in Tokyo
        let day = WireWindow { limit: 200_000_000, window_ms: 93_600_000, used: 12_345_678, remaining: 187_654_322, reset_ms: 1, calendar: Some(crate::count::calendar::Unit::Day) };
        let minute = WireWindow { limit: 500_000, window_ms: 60_000, used: 370_000, remaining: 130_000, reset_ms: 1, calendar: None };
        let body = status_with_controls(&request, "h", &reply(vec![day, minute]), &Controls::default(), now);
        assert_eq!(body["limits_text"], json!(["200 JPY a day (Asia/Tokyo), resets at 2026-12-07T00:00+09:00", "0.5 JPY per 1m"]));
        assert_eq!((&body["spent"], &body["currency"], &body["unit"]), (&json!("12.345678 JPY"), &json!("JPY"), &json!("micro-JPY")), "the day's (longest) spend");
        let w = &body["windows"];
        assert_eq!((&w[0]["spent"], &w[0]["remaining_spend"], &w[0]["spend_limit"]), (&json!("12.345678 JPY"), &json!("187.654322 JPY"), &json!("200 JPY")));
        assert_eq!((&w[1]["spent"], &w[1]["used"]), (&json!("0.37 JPY"), &json!(370_000)), "the count kept in its unit");

        let big = school(json!([{ "spend": 10_000, "window": "1d" }]));
        let Ok(AdminAsk::Object(request)) = parse(&big, "/.tollgate/status", "GET", &q) else { panic!() };
        let window = WireWindow { limit: 10_000_000, window_ms: 86_400_000, used: 9_620_285, remaining: 379_715, reset_ms: 1, calendar: None };
        let body = status_with_controls(&request, "h", &reply(vec![window]), &Controls::default(), now);
        assert_eq!((&body["limits_text"][0], &body["spent"], &body["unit"]), (&json!("10000 JPY per 1d"), &json!("9620.285 JPY"), &json!("milli-JPY")), "milli-units");

        let plain = crate::testing::config(json!([{ "name": "p", "path": "/p", "limits": [{ "requests": 10, "window": "1m" }] }]));
        let Ok(AdminAsk::Object(request)) = parse(&plain, "/.tollgate/status", "GET", &CanonicalQuery::parse("rule=p&ip=1.2.3.4")) else { panic!() };
        let window = WireWindow { limit: 10, window_ms: 60_000, used: 3, remaining: 7, reset_ms: 1, calendar: None };
        let body = status_with_controls(&request, "h", &reply(vec![window]), &Controls::default(), now);
        assert_eq!(body["limits_text"], json!(["10 per 1m"]));
        assert!(body.get("spent").is_none() && body["windows"][0].get("spent").is_none(), "{body}");
    }
}
