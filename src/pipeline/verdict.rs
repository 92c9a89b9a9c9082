//! The back half of the decision pipeline, pure: from what each rule's
//! counter said to what the request gets.
//!
//! [`verdict_for`] folds the [`Outcome`] of every checked rule (in plan order)
//! into one [`Verdict`]: forward (with the `RateLimit` fields to add) or one
//! of tollgate's own responses, and the log events to write. [`settle`]
//! says what failures-only rules tell their objects once the request is
//! done (commit, release, or a success's clear). The Worker performs these;
//! `tollgate explain` prints them.
//!
//! The fold, in plan order:
//! - a counter that failed on a `deny` rule answers 503 at once (events of
//!   later rules are not written);
//! - a counter that failed on an `allow` rule, or on a shadow (`log`) rule
//!   whatever its `on_error`, is logged and ignored: shadow mode never
//!   blocks;
//! - of the `block` rules over their limit, the one with the longest wait
//!   answers 429 (the first of equals);
//! - `log` (shadow) rules over their limit only log `shadow_block`;
//! - otherwise the request is forwarded.

use crate::config::policy::{Action, FailPolicy, Named, SuccessAction};
use crate::config::headers::{rate_fields, OwnResponse, Policies, RateReport};
use crate::count::blocked::Refusal;
use crate::pipeline::applied::{Applied, Matched};
use crate::count::protocol::{Call, CallFailure, Op, Reply, WireWindow};
use crate::config::rules::Rule;
use crate::config::cost::Usage;
use crate::request::spelling::Spelling;
use crate::config::response::Prefers;
use crate::count::window::Limit;
use serde_json::Value;
use std::borrow::{Borrow, Cow};

/// What one rule's counter said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Under the limit (and recorded, for rules that count every request;
    /// holding `reservation`, for rules that count some statuses).
    Allowed { windows: Vec<WireWindow>, reservation: Option<u64> },
    /// Over the limit: wait `retry_after_ms`; `window` is the index of the
    /// binding window; `windows` is `None` when the isolate's blocked-until
    /// cache answered (no object call); `penalty`: the key is refused by its
    /// rule's penalty ([`crate::count::penalty`]), until `retry_after_ms`
    /// from now.
    Blocked { retry_after_ms: u64, window: usize, windows: Option<Vec<WireWindow>>, by: crate::count::blocked::Refusal },
    /// The counter could not be asked in time: the rule's fail policy.
    Failed(Failure),
}

/// Why a rule's counter could not say: the typed failure of its
/// call, so logs name a timeout, a refusal or an unreachable object apart
/// (`counter_error`'s `failure` field, [`Failure::kind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The call to the object failed.
    Call(CallFailure),
    /// An object of an older release refused the call's concurrency slot
    /// ([`crate::count::older`]): no limit would bound the requests in
    /// flight, so the rule refuses whatever its `on_error` says.
    NoSlot(CallFailure),
    /// A leased key backing off after failed calls, with no tokens held
    /// ([`crate::count::lease::Admit::Unavailable`]): no call was sent.
    BackingOff,
}

impl Failure {
    /// The failure of `call`: [`Failure::NoSlot`] when an older object
    /// refused its concurrency field, else [`Failure::Call`].
    pub(crate) fn of(call: &Call, failure: CallFailure) -> Failure {
        match crate::count::older::refused_field(call, &failure) {
            Some(crate::count::older::NewerField::Concurrency) => Failure::NoSlot(failure),
            _ => Failure::Call(failure),
        }
    }

    /// One word for logs: `timeout`, `refused`, `unreachable`,
    /// `unreadable`, `no_binding`, `older_release` or `backoff`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Failure::Call(CallFailure::Timeout { .. }) => "timeout",
            Failure::Call(CallFailure::Refused { .. }) => "refused",
            Failure::Call(CallFailure::Transport(_)) => "unreachable",
            Failure::Call(CallFailure::Unreadable(_)) => "unreadable",
            Failure::Call(CallFailure::NoBinding(_)) => "no_binding",
            Failure::NoSlot(_) => "older_release",
            Failure::BackingOff => "backoff",
        }
    }

    /// Whether the object is too old to hold the rule's concurrency slot.
    pub(crate) fn cannot_hold_slot(&self) -> bool {
        matches!(self, Failure::NoSlot(_))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Call(e) => write!(f, "{e}"),
            Failure::NoSlot(e) => write!(f, "{}: {e}", crate::count::older::NO_SLOT),
            Failure::BackingOff => write!(f, "backing off after failed calls; no tokens held"),
        }
    }
}

/// A failure told in words (`explain`'s assumed outage): unreachable.
impl From<&str> for Failure {
    fn from(text: &str) -> Failure {
        Failure::Call(CallFailure::Transport(text.to_string()))
    }
}

impl Outcome {
    /// The outcome an object's reply stands for.
    pub(crate) fn from_reply(reply: Reply) -> Outcome {
        let tally = reply.tally;
        if tally.allowed {
            Outcome::Allowed { windows: tally.windows, reservation: reply.reservation }
        } else {
            Outcome::Blocked {
                retry_after_ms: tally.retry_after_ms,
                window: tally.binding.unwrap_or(0),
                windows: Some(tally.windows),
                by: Refusal::of(tally.binding, reply.penalty_until_ms, tally.in_flight),
            }
        }
    }

    /// What the isolate's blocked-until cache keeps of this outcome, told
    /// at `now_ms`: a block, unless it is owed to slots in flight
    /// (`in_flight`: it may lift as soon as one is released, so its wait is
    /// no promise), with the limits the object decided by (the
    /// cached answers state a runtime override as the first did).
    pub(crate) fn block_to_cache(&self, in_flight: bool, now_ms: i64) -> Option<crate::count::blocked::Block> {
        match self {
            Outcome::Blocked { retry_after_ms, window, by, windows } if !in_flight => {
                let until_ms = now_ms.saturating_add(i64::try_from(*retry_after_ms).unwrap_or(i64::MAX));
                let limits = windows.iter().flatten().map(|w| (w.limit, w.window_ms, w.calendar)).collect();
                Some(crate::count::blocked::Block { until_ms, window: *window, limits, by: *by })
            }
            _ => None,
        }
    }

    /// The outcome of a block found in the isolate's cache at `now_ms`:
    /// the cached limits with nothing remaining until the block ends (the
    /// rule's own, [`windows_of`], when the cache kept none).
    pub(crate) fn from_cache(block: impl Borrow<crate::count::blocked::Block>, now_ms: i64) -> Outcome {
        let block = block.borrow();
        let retry_after_ms = (block.until_ms - now_ms).max(1) as u64;
        let windows = (!block.limits.is_empty()).then(|| {
            block
                .limits
                .iter()
                .map(|&(limit, window_ms, calendar)| WireWindow { limit, window_ms, used: u64::from(limit), remaining: 0, reset_ms: retry_after_ms, calendar })
                .collect()
        });
        Outcome::Blocked { retry_after_ms, window: block.window, windows, by: block.by }
    }
}

/// One structured log line: `{"tollgate": event, ...fields}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LogEvent {
    pub(crate) event: &'static str,
    pub(crate) fields: Vec<(&'static str, Value)>,
}

impl LogEvent {
    pub(crate) fn new(event: &'static str, fields: Vec<(&'static str, Value)>) -> LogEvent {
        LogEvent { event, fields }
    }

    /// The JSON line (Workers Logs indexes its fields).
    pub(crate) fn line(&self) -> String {
        let mut line = serde_json::Map::new();
        line.insert("tollgate".into(), self.event.into());
        for (k, v) in &self.fields {
            line.insert((*k).into(), v.clone());
        }
        Value::Object(line).to_string()
    }
}

/// What the request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Forward the original request; add these fields to the origin's
    /// response (none for a WebSocket upgrade, which cannot be rebuilt).
    Forward { fields: Vec<(String, String)> },
    /// Answer this, never reaching the origin.
    Respond(OwnResponse),
}

/// The answer and the log events of one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) answer: Answer,
    pub(crate) events: Vec<LogEvent>,
}

/// The 503 answered to every request while the config is invalid and
/// `on_invalid_config = "deny"`.
pub(crate) fn invalid_config() -> OwnResponse {
    OwnResponse::problem(503, "Service Unavailable", "The rate limiter's configuration is invalid.", Some(1))
}

/// The verdict for a client that `prefers` (its `Accept`,
/// [`Prefers::from_accept`]) JSON or not: the block response negotiated as
/// [`crate::config::response`] says.
pub(crate) fn verdict_for(applied: &[Applied<'_>], outcomes: &[Outcome], prefers: Prefers) -> Verdict {
    let mut events = Vec::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut block: Option<(&Applied<'_>, u64, RateReport, &Option<Vec<WireWindow>>)> = None;
    // A rule charged to several identities reports the fields of the first
    // (one `RateLimit` item per policy name).
    let mut reported: Vec<&str> = Vec::new();
    for (a, outcome) in applied.iter().zip(outcomes) {
        let report = a.rule.ratelimit_headers && !reported.contains(&a.rule.name.as_str());
        if report {
            reported.push(&a.rule.name);
        }
        match outcome {
            Outcome::Allowed { windows, .. } => {
                if report {
                    fields.extend(rate_fields(&policies(a.rule), windows, RateReport::Allowed));
                }
            }
            Outcome::Blocked { retry_after_ms, window, windows, by } => {
                let shadow = a.rule.action == Action::Log;
                events.push(block_event(a, shadow, *retry_after_ms, *by));
                if shadow {
                    if report {
                        let windows = windows_of(a.rule.limits_for(&a.key), *retry_after_ms, windows.as_deref());
                        fields.extend(rate_fields(&policies(a.rule), &windows, refused(*by, *window, *retry_after_ms)));
                    }
                } else if block.is_none_or(|(_, ms, _, _)| *retry_after_ms > ms) {
                    block = Some((a, *retry_after_ms, refused(*by, *window, *retry_after_ms), windows));
                }
            }
            Outcome::Failed(error) => {
                // Shadow mode never blocks, whatever `on_error` says. An
                // object too old to hold a concurrency slot refuses: no limit would bound the requests in flight.
                let deny = denies(a.rule, error);
                let decision = if deny { FailPolicy::Deny } else { FailPolicy::Allow }.name();
                events.push(counter_error(&a.rule.name, &a.key_hash, error, decision));
                if deny {
                    let detail = format!("Rule `{}` cannot be checked right now.", a.rule.name);
                    let answer = Answer::Respond(OwnResponse::problem(503, "Service Unavailable", &detail, Some(1)));
                    return Verdict { answer, events };
                }
            }
        }
    }
    let answer = match block {
        Some((a, retry_after_ms, report, windows)) => {
            let windows = windows_of(a.rule.limits_for(&a.key), retry_after_ms, windows.as_deref());
            let fields = rate_fields(&policies(a.rule), &windows, report);
            Answer::Respond(crate::config::response::blocked(&a.rule.name, a.rule.response.as_ref(), &a.rule.problems, prefers, retry_after_ms, fields))
        }
        None => Answer::Forward { fields },
    };
    Verdict { answer, events }
}

/// The origin's answer, as [`settle`] reads it.
pub(crate) struct Answered<'a> {
    pub(crate) status: u16,
    /// A response header by lowercased name.
    pub(crate) header: &'a dyn Fn(&str) -> Option<String>,
    /// The tokens a rule's usage read from the body (by rule name;
    /// [`crate::pipeline::usage`]): `None` when none was read (or the
    /// body was not read).
    pub(crate) body: &'a dyn Fn(&str) -> Option<u64>,
}

/// What a failures-only rule tells its object once the request is done,
/// given its `outcome` before forwarding and the origin's answer (`None`:
/// not forwarded, because tollgate answered itself, or the origin could
/// not be reached):
/// - a counted status commits the reservation (or records a hit when
///   there is none: a failed reserve failing open, a shadow rule over its
///   limit; the counter may be back);
/// - a success ([`success_settles`]) clears or forgives, and releases;
/// - anything else releases the reservation, if one was made.
///
/// Rules counting every request have nothing to settle.
///
/// A rule whose origin reports usage ([`crate::config::cost`]) counts every
/// answer (or those of `counting.statuses`) the same way, its commit carrying
/// the units the header reports ([`usage`]).
pub(crate) fn settle(applied: &Applied<'_>, outcome: &Outcome, origin: Option<&Answered<'_>>) -> Option<Call> {
    if !applied.rule.reserves() {
        return None;
    }
    let reservation = match outcome {
        Outcome::Allowed { reservation, .. } => *reservation,
        Outcome::Blocked { .. } | Outcome::Failed(_) => None,
    };
    let op = match (origin, &applied.rule.on_success) {
        (Some(answered), _) if applied.rule.counting.counts(answered.status) => Op::Commit,
        (Some(answered), Some(on)) if success_settles(applied, answered) => match on.action {
            SuccessAction::Clear => Op::Clear,
            SuccessAction::Decrement => Op::Forgive,
        },
        _ => {
            reservation?;
            Op::Release
        }
    };
    let call = applied.rule.call_for(op, &applied.key).settling(reservation);
    // A relief rule's count is marked with each failure's spelling, and
    // relieved only by a success of the same ([`crate::request::spelling`]).
    let marks = matches!(op, Op::Commit | Op::Clear | Op::Forgive) && applied.rule.settles_successes();
    let spelling = marks.then(|| applied.spelling.unwrap_or(Spelling::Several));
    let used = match (op, origin) {
        (Op::Commit, Some(answered)) => committed_units(applied, answered),
        _ => None,
    };
    Some(call.with_spelling(spelling).with_used(used))
}

/// The units the origin reported for a usage rule ([`crate::config::cost`]):
/// `None` for another rule; `Some(None)` when the header is missing or
/// malformed (the reservation is then committed at `reserve`, and
/// [`usage_missing`] logged).
pub(crate) fn usage(applied: &Applied<'_>, answered: &Answered<'_>) -> Option<Option<u32>> {
    let usage = applied.rule.usage.as_ref()?;
    Some(match usage.header() {
        Some(header) => usage.units((answered.header)(header).as_deref()),
        None => (answered.body)(&applied.rule.name).map(Usage::recorded),
    })
}

/// The units a usage rule's commit carries: what was reported; with none,
/// nothing for a header (the object commits `reserve`, as before usage could be read from the body)
/// and `max` for a body ([`crate::config::cost::Usage::missing_units`]).
fn committed_units(applied: &Applied<'_>, answered: &Answered<'_>) -> Option<u32> {
    let usage = applied.rule.usage.as_ref()?;
    let reported = self::usage(applied, answered).flatten();
    match usage.header() {
        Some(_) => reported,
        None => Some(reported.unwrap_or(usage.max)),
    }
}

/// The warning a usage rule's missing or malformed header makes: one per
/// (rule, key) episode ([`crate::pipeline::episodes`]).
pub(crate) fn usage_missing(applied: &Applied<'_>, status: u16) -> LogEvent {
    let header = applied.rule.usage.as_ref().map_or("", |u| u.unit());
    let committed = applied.rule.usage.as_ref().map_or(applied.rule.cost, |u| u.missing_units());
    LogEvent::new(
        "usage_missing",
        vec![
            ("rule", applied.rule.name.as_str().into()),
            ("key_hash", applied.key_hash.as_str().into()),
            ("header", header.into()),
            ("status", status.into()),
            ("committed", committed.into()),
        ],
    )
}

/// Whether the origin's answer is a success that settles the rule's count
/// (a forged success must not clear an account's failures):
/// - its status is one of `success_statuses` (not any status below 400: a
///   redirect to HTTPS or a page served for another method is no login);
/// - the rule matched the request by its own method ([`Applied::own_method`]:
///   no override, no HEAD for GET, never OPTIONS);
/// - the key is the rule's own, not its fallback;
/// - the request spelled its identity one way ([`Spelling::One`]): a body
///   naming two accounts (a member given twice) relieves neither;
/// - with `success_identity_header`, the origin names in that header the
///   very account the key is for, spelled exactly as the request spelled
///   it (a look-alike the fold would take for it is another account).
///   Without it, a success for any account the request's spelling reaches
///   settles it (a field the origin reads otherwise): `tollgate check`
///   warns.
///
/// What a settling success relieves is bound to the spelling too: the
/// object relieves only a count all of whose failures were spelled so.
pub(crate) fn success_settles(applied: &Applied<'_>, answered: &Answered<'_>) -> bool {
    let Some(on) = &applied.rule.on_success else { return false };
    let Some(spelling @ Spelling::One(_)) = &applied.spelling else { return false };
    let authenticated = match &on.identity_header {
        None => true,
        Some(name) => (answered.header)(name).is_some_and(|value| {
            applied.rule.identity_key(&value).is_some_and(|key| key == applied.key)
                && applied.rule.key.first().is_some_and(|part| spelling.names(part, &value))
        }),
    };
    on.statuses.contains(&answered.status) && applied.own_method && !applied.fell_back && authenticated
}

/// The `Set-Cookie` field that makes the device a trusted one for a
/// `trusted_device` rule's account, on a success that settles the rule
/// ([`success_settles`]): a cookie signed under the rule's secret (`secret`
/// looks it up), good for the rule's `ttl` from `now_ms`. `None` without the
/// secret, for another answer, or a rule without `trusted_device`.
pub(crate) fn device_cookie(
    applied: &Applied<'_>,
    answered: &Answered<'_>,
    secret: &dyn Fn(&str) -> Option<String>,
    now_ms: i64,
) -> Option<(String, String)> {
    let device = applied.rule.trusted_device.as_ref()?;
    if !success_settles(applied, answered) {
        return None;
    }
    let spelling = applied.spelling.as_ref()?.tag()?;
    let secret = secret(&device.secret).filter(|s| !s.trim().is_empty())?;
    let expires_s = now_ms.div_euclid(1000).saturating_add(i64::try_from(device.ttl_s).unwrap_or(i64::MAX));
    let token = crate::request::device::token(secret.trim().as_bytes(), &applied.rule.name, &applied.key, &spelling, expires_s);
    Some(("set-cookie".to_string(), crate::request::device::set_cookie(&device.cookie, &token, device.ttl_s)))
}

/// Every [`device_cookie`] the answer earns, one per cookie name: a rule
/// charged to several identities trusts the device for the first it
/// proved (a browser keeps only the last `Set-Cookie` of a name).
pub(crate) fn device_cookies(
    applied: &[Applied<'_>],
    answered: &Answered<'_>,
    secret: &dyn Fn(&str) -> Option<String>,
    now_ms: i64,
) -> Vec<(String, String)> {
    let mut names: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for a in applied {
        let Some(device) = &a.rule.trusted_device else { continue };
        if names.contains(&device.cookie.as_str()) {
            continue;
        }
        if let Some(cookie) = device_cookie(a, answered, secret, now_ms) {
            names.push(&device.cookie);
            out.push(cookie);
        }
    }
    out
}

/// The op that checks a rule: rules counting every request check and
/// record at once; failures-only rules reserve a slot before forwarding.
pub(crate) fn check_op(rule: &Rule) -> Op {
    if rule.reserves() {
        Op::Reserve
    } else {
        Op::Hit
    }
}

/// The 429: problem+json, `Retry-After` in whole seconds (at least 1), and
/// the rule's `RateLimit` fields with the binding window.
pub(crate) fn too_many_requests(rule: &Rule, retry_after_ms: u64, window: usize, windows: Option<&[WireWindow]>) -> OwnResponse {
    let windows = windows_of(&rule.limits, retry_after_ms, windows);
    let fields = rate_fields(&policies(rule), &windows, RateReport::Window { index: window, retry_after_ms });
    crate::config::response::blocked(&rule.name, None, &rule.problems, Prefers::Json, retry_after_ms, fields)
}

/// The `RateLimit` policies of `rule` ([`crate::config::headers`]): its
/// name, a usage rule's unit, its slots.
fn policies(rule: &Rule) -> Policies<'_> {
    Policies { rule: &rule.name, unit: rule.usage.as_ref().map(|u| u.unit()), concurrency: rule.concurrency, windowless: rule.windowless }
}

/// What the `RateLimit` item of a refusal `by` reports: the slots for a
/// refusal owed to them, else the binding `window` and the wait.
fn refused(by: Refusal, window: usize, retry_after_ms: u64) -> RateReport {
    match by {
        Refusal::Concurrency => RateReport::NoSlot,
        Refusal::Limit | Refusal::Ban | Refusal::Penalty => RateReport::Window { index: window, retry_after_ms },
    }
}

/// The windows to report: the object's, or (answered from the cache) the
/// rule's limits with nothing remaining.
fn windows_of<'w>(limits: &[Limit], retry_after_ms: u64, windows: Option<&'w [WireWindow]>) -> Cow<'w, [WireWindow]> {
    match windows {
        Some(w) => Cow::Borrowed(w),
        None => Cow::Owned(limits
            .iter()
            .map(|l| WireWindow {
                limit: l.requests.get(),
                window_ms: l.window_ms.get(),
                used: u64::from(l.requests.get()),
                remaining: 0,
                reset_ms: retry_after_ms,
                calendar: l.calendar.map(|c| c.unit),
            })
            .collect()),
    }
}

/// A `block` or `shadow_block` line; `reason` is `limit` (a window of the
/// rule is full), `ban` (an operator's), `concurrency` (every slot taken;
/// It was logged as `ban`), or `penalty` when the
/// rule's penalty refused it (a shadow rule's: the penalty it would apply,
/// `retry_after_ms` its time left).
fn block_event(a: &Applied<'_>, shadow: bool, retry_after_ms: u64, by: Refusal) -> LogEvent {
    LogEvent::new(
        if shadow { "shadow_block" } else { "block" },
        vec![
            ("rule", a.rule.name.as_str().into()),
            ("key_hash", a.key_hash.as_str().into()),
            ("decision", if shadow { "would_block" } else { "block" }.into()),
            ("retry_after_ms", retry_after_ms.into()),
            ("remaining", 0.into()),
            ("reason", by.name().into()),
        ],
    )
}

/// One `exempt` line per matching rule the request is exempt from: the
/// rule, the key hash, and what exempted it (`by`: `ip`, `asn`,
/// `verified_bot`, `header`; `detail`: the range, ASN, category or header
/// name, never a secret). Written before the verdict's own events, by the
/// Worker and by `explain` alike; repeats of a (rule, key) are counted as
/// block episodes are ([`crate::pipeline::episodes`]).
pub(crate) fn exempt_events(matched: &[Matched<'_>]) -> Vec<LogEvent> {
    matched
        .iter()
        .filter_map(|m| {
            let e = m.exempt.as_ref()?;
            Some(LogEvent::new(
                "exempt",
                vec![
                    ("rule", m.rule.name.as_str().into()),
                    ("key_hash", e.key_hash.as_str().into()),
                    ("by", e.by.kind().into()),
                    ("detail", e.by.detail().into()),
                ],
            ))
        })
        .collect()
}

/// Whether `rule` refuses a request whose counter failed with `error`:
/// fail closed (`on_error = "deny"`), or an object too old to hold its
/// concurrency slot; never a shadow rule.
pub(crate) fn denies(rule: &Rule, error: &Failure) -> bool {
    (rule.on_error == FailPolicy::Deny || error.cannot_hold_slot()) && rule.action == Action::Block
}

/// A `counter_error` line: `decision` is `allow`, `deny` or `not_recorded`;
/// a `deny` says why it refused (`reason: fail_closed`).
pub(crate) fn counter_error(rule: &str, key_hash: &str, failure: &Failure, decision: &str) -> LogEvent {
    let mut fields = vec![
        ("rule", rule.into()),
        ("key_hash", key_hash.into()),
        ("error", failure.to_string().into()),
        ("failure", failure.kind().into()),
        ("decision", decision.into()),
    ];
    if decision == "deny" {
        fields.push(("reason", "fail_closed".into()));
    }
    LogEvent::new("counter_error", fields)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use super::*;
    use crate::pipeline::applied::object_name;
    use serde_json::json;

    fn config() -> Config {
        let l = json!([{ "requests": 10, "window": "1m" }]);
        crate::testing::config(json!([
            { "name": "short", "path": "/p", "limits": l, "ratelimit_headers": true },
            { "name": "long", "path": "/p", "limits": [{ "requests": 5, "window": "1h" }] },
            { "name": "shadow", "path": "/p", "action": "log", "limits": l, "ratelimit_headers": true },
            { "name": "open", "path": "/p", "limits": l },
            { "name": "closed", "path": "/p", "on_error": "deny", "limits": l },
            { "name": "failures", "path": "/p", "key": ["header:x-user"], "count_statuses": [401],
              "clear_on_success": true, "fallback_key": ["header:x-account"], "limits": l },
            { "name": "login", "path": "/p", "key": ["body:email"], "count_statuses": [401],
              "on_success": "decrement", "success_statuses": [200], "success_identity_header": "X-Authenticated-User",
              "limits": l },
            { "name": "quota", "path": "/p", "count_statuses": [200], "limits": l },
        ]))
    }

    fn applied<'c>(config: &'c Config, name: &str) -> Applied<'c> {
        let rule = config.rules.iter().find(|r| r.name == name).unwrap();
        Applied { rule, key: "k".into(), id: object_name(rule, "k"), key_hash: "h".into(), fell_back: false, own_method: true, device: None, spelling: None }
    }

    fn window(limit: u32, remaining: u64) -> WireWindow {
        WireWindow { limit, window_ms: 60_000, used: u64::from(limit) - remaining, remaining, reset_ms: 30_000, calendar: None }
    }

    fn blocked(ms: u64) -> Outcome {
        Outcome::Blocked { retry_after_ms: ms, window: 0, windows: Some(vec![window(10, 0)]), by: crate::count::blocked::Refusal::Limit }
    }

    #[test]
    fn allowed_forwards_with_the_fields_of_rules_that_ask() {
        let c = config();
        let v = verdict(
            &[applied(&c, "short"), applied(&c, "long")],
            &[
                Outcome::Allowed { windows: vec![window(10, 9)], reservation: None },
                Outcome::Allowed { windows: vec![window(5, 4)], reservation: None },
            ],
        );
        assert_eq!(
            v.answer,
            Answer::Forward {
                fields: vec![
                    ("ratelimit-policy".into(), "\"short\";q=10;w=60".into()),
                    ("ratelimit".into(), "\"short\";r=9;t=30".into()),
                ]
            }
        );
        assert!(v.events.is_empty());
    }

    /// A refusal by the rule's penalty is logged with its reason, cached
    /// as one, and answered from the cache as one.
    #[test]
    fn a_penalty_is_the_reason_of_its_block_lines_and_survives_the_cache() {
        let c = config();
        let penalty = Outcome::Blocked { retry_after_ms: 600_000, window: 0, windows: Some(vec![window(10, 0)]), by: crate::count::blocked::Refusal::Penalty };
        let v = verdict(&[applied(&c, "short"), applied(&c, "shadow")], &[penalty.clone(), penalty.clone()]);
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.header("retry-after"), Some("600"));
        assert_eq!(v.events.len(), 2);
        for (event, name) in v.events.iter().zip(["block", "shadow_block"]) {
            assert_eq!(event.event, name);
            assert!(event.line().contains(r#""reason":"penalty""#), "{}", event.line());
            assert!(event.line().contains(r#""retry_after_ms":600000"#), "{}", event.line());
        }
        let plain = verdict(&[applied(&c, "short")], &[blocked(5_000)]);
        assert!(plain.events[0].line().contains(r#""reason":"limit""#), "a plain block's reason is its limit");
        let cached = penalty.block_to_cache(false, 10_000).unwrap();
        assert!(cached.by == crate::count::blocked::Refusal::Penalty && cached.until_ms == 610_000);
        let windows = Some(vec![WireWindow { limit: 10, window_ms: 60_000, used: 10, remaining: 0, reset_ms: 300_000, calendar: None }]);
        assert_eq!(Outcome::from_cache(cached, 310_000), Outcome::Blocked { retry_after_ms: 300_000, window: 0, windows, by: crate::count::blocked::Refusal::Penalty });
        let reply = crate::count::protocol::decode_reply_line(200, "1 b 600000 0 0 1 0 2 0 1 - 0 10/60000/2/0/600000 p=1700000600000").unwrap();
        assert!(matches!(Outcome::from_reply(reply), Outcome::Blocked { by: crate::count::blocked::Refusal::Penalty, retry_after_ms: 600_000, .. }));
    }

    #[test]
    fn the_longest_block_wins_and_every_block_is_logged() {
        let c = config();
        let v = verdict(
            &[applied(&c, "short"), applied(&c, "long"), applied(&c, "open")],
            &[blocked(5_000), blocked(9_000), blocked(9_000)],
        );
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after"), Some("9"));
        assert!(r.body.contains("`long`"), "the first of the longest waits: {}", r.body);
        assert_eq!(v.events.len(), 3);
        assert!(v.events.iter().all(|e| e.event == "block"));
    }

    #[test]
    fn shadow_rules_log_and_never_block() {
        let c = config();
        let v = verdict(&[applied(&c, "shadow")], &[blocked(5_000)]);
        let Answer::Forward { fields } = &v.answer else { panic!("{v:?}") };
        assert_eq!(fields[1], ("ratelimit".into(), "\"shadow\";r=0;t=5".into()));
        assert_eq!(v.events[0].event, "shadow_block");
        assert!(v.events[0].line().contains(r#""decision":"would_block""#));
    }

    #[test]
    fn fail_policies() {
        let c = config();
        let down = || Outcome::Failed("down".into());
        let v = verdict(&[applied(&c, "open")], &[down()]);
        assert_eq!(v.answer, Answer::Forward { fields: vec![] }, "fail open");
        assert!(v.events[0].line().contains(r#""decision":"allow""#));
        // Fail closed answers 503 at once: the blocks before it are logged,
        // the rules after it are not looked at.
        let v = verdict(
            &[applied(&c, "long"), applied(&c, "closed"), applied(&c, "short")],
            &[blocked(9_000), down(), blocked(1_000)],
        );
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!((r.status, r.header("retry-after")), (503, Some("1")));
        let events: Vec<&str> = v.events.iter().map(|e| e.event).collect();
        assert_eq!(events, ["block", "counter_error"]);
        // An object too old to hold a concurrency slot refuses
        // an `on_error = "allow"` rule too.
        let old = Outcome::Failed(Failure::NoSlot(CallFailure::Refused { status: 400, body: String::new() }));
        let v = verdict(&[applied(&c, "open")], &[old]);
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.status, 503);
        assert!(v.events[0].line().contains(r#""decision":"deny""#), "{:?}", v.events);
    }

    #[test]
    fn shadow_rules_never_answer_503() {
        let c = crate::testing::config(json!([
            { "name": "shadow-closed", "path": "/p", "action": "log", "on_error": "deny",
              "limits": [{ "requests": 1, "window": "1m" }] },
        ]));
        let v = verdict(&[applied(&c, "shadow-closed")], &[Outcome::Failed("down".into())]);
        assert_eq!(v.answer, Answer::Forward { fields: vec![] });
        assert!(v.events[0].line().contains(r#""decision":"allow""#), "{}", v.events[0].line());
    }

    #[test]
    fn a_cached_block_without_limits_reports_the_rules() {
        let c = config();
        let ban = crate::count::blocked::Block { until_ms: 10_400, window: 0, limits: Vec::new(), by: Refusal::Ban };
        let from_cache = Outcome::from_cache(ban.clone(), 10_000);
        assert_eq!(from_cache, Outcome::Blocked { retry_after_ms: 400, window: 0, windows: None, by: Refusal::Ban });
        let v = verdict(&[applied(&c, "long")], &[from_cache]);
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.header("ratelimit"), Some("\"long\";r=0;t=1"));
        assert_eq!(r.header("ratelimit-policy"), Some("\"long\";q=5;w=3600"));
        let expired = Outcome::from_cache(crate::count::blocked::Block { until_ms: 10_000, ..ban }, 10_000);
        assert!(matches!(expired, Outcome::Blocked { retry_after_ms: 1, .. }), "at least 1 ms");
    }

    /// After `PUT override` of 2 per 30 s on a 10 per 1 m rule,
    /// the first 429 stated the override and every cached one the rule's
    /// limits. The cache keeps the limits that decided.
    #[test]
    fn a_cached_block_states_the_limits_that_decided() {
        let c = config();
        let overridden = WireWindow { limit: 2, window_ms: 30_000, used: 2, remaining: 0, reset_ms: 25_000, calendar: None };
        let first = Outcome::Blocked { retry_after_ms: 25_000, window: 0, windows: Some(vec![overridden]), by: Refusal::Limit };
        let answer = |outcome: &Outcome| match verdict(&[applied(&c, "short")], std::slice::from_ref(outcome)).answer {
            Answer::Respond(r) => (r.header("ratelimit-policy").map(str::to_string), r.header("ratelimit").map(str::to_string)),
            other => panic!("{other:?}"),
        };
        assert_eq!(answer(&first).0.as_deref(), Some("\"short\";q=2;w=30"), "from the object");
        let cached = first.block_to_cache(false, 100_000).unwrap();
        assert_eq!(cached.limits, [(2, 30_000, None)]);
        let later = Outcome::from_cache(cached, 110_000);
        assert_eq!(answer(&later), (Some("\"short\";q=2;w=30".into()), Some("\"short\";r=0;t=15".into())), "from the cache: the override still");
    }

    /// A refusal by the slots sent `"conc";r=98;t=10` (a window
    /// with room) and was logged as a ban.
    #[test]
    fn a_refusal_by_the_slots_states_the_slots() {
        let c = crate::testing::config(json!([
            { "name": "conc", "path": "/p", "key": ["header:x-tenant"], "limits": [{ "requests": 100, "window": "1m" }], "concurrency": 2, "ratelimit_headers": true },
        ]));
        let reply = crate::count::protocol::decode_reply_line(200, "1 b 10000 - 1 0 0 2 1 0 - 2 100/60000/2/98/60000").unwrap();
        let outcome = Outcome::from_reply(reply);
        assert!(matches!(outcome, Outcome::Blocked { by: Refusal::Concurrency, .. }), "{outcome:?}");
        assert_eq!(outcome.block_to_cache(true, 0), None, "never cached");
        let v = verdict(&[applied(&c, "conc")], std::slice::from_ref(&outcome));
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.header("ratelimit-policy"), Some("\"conc\";q=100;w=60, \"conc/concurrency\";q=2;qu=\"concurrent-requests\""));
        assert_eq!(r.header("ratelimit"), Some("\"conc/concurrency\";r=0"));
        assert_eq!(r.header("retry-after"), Some("10"), "the wait the Worker set (glue: hold::unseen_wait_ms)");
        assert!(v.events[0].line().contains(r#""reason":"concurrency""#), "{}", v.events[0].line());
        let allowed = Outcome::Allowed { windows: vec![WireWindow { limit: 100, window_ms: 60_000, used: 1, remaining: 99, reset_ms: 60_000, calendar: None }], reservation: Some(1) };
        let Answer::Forward { fields } = verdict(&[applied(&c, "conc")], &[allowed]).answer else { panic!() };
        assert_eq!(fields[0].1, "\"conc\";q=100;w=60, \"conc/concurrency\";q=2;qu=\"concurrent-requests\"", "the same policies on every answer");
        assert_eq!(fields[1].1, "\"conc\";r=99;t=60");
    }

    #[test]
    fn only_a_block_not_owed_to_slots_in_flight_is_cached() {
        let blocked = Outcome::Blocked { retry_after_ms: 1_500, window: 1, windows: None, by: crate::count::blocked::Refusal::Limit };
        assert_eq!(blocked.block_to_cache(false, 10_000), Some(crate::count::blocked::Block { until_ms: 11_500, window: 1, limits: Vec::new(), by: crate::count::blocked::Refusal::Limit }));
        assert_eq!(blocked.block_to_cache(true, 10_000), None, "a slot in flight may be released any time");
        let allowed = Outcome::Allowed { windows: Vec::new(), reservation: None };
        assert_eq!(allowed.block_to_cache(false, 10_000), None);
        assert_eq!(Outcome::Failed("down".into()).block_to_cache(false, 10_000), None);
    }

    #[test]
    fn early_answers() {
        let c = config();
        let url = url::Url::parse("https://example.com/p%00").unwrap();
        let parts = crate::pipeline::plan::RequestParts::plain("GET", url.as_str(), &|_| None, crate::pipeline::plan::Body::Unusable);
        let p = crate::pipeline::plan::plan(&c, &parts);
        let v = crate::pipeline::machine::early(&p).unwrap();
        assert!(matches!(&v.answer, Answer::Respond(r) if r.status == 400));
        let url = url::Url::parse("https://example.com/p").unwrap();
        let p = crate::pipeline::plan::plan(&c, &crate::pipeline::plan::RequestParts { url: url.as_str(), ..parts });
        let v = crate::pipeline::machine::early(&p).unwrap();
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.status, 400);
        assert!(r.body.contains("Rule `short`: the request has no usable `ip`."), "{}", r.body);
        assert_eq!(v.events[0].event, "missing_key");
    }

    /// What `settle` sends, as (op, reservation); `None` for nothing.
    fn settled(a: &Applied<'_>, outcome: &Outcome, origin: Option<(u16, &[(&str, &str)])>) -> Option<(Op, Option<u64>)> {
        let call = match origin {
            None => settle(a, outcome, None),
            Some((status, headers)) => {
                let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
                settle(a, outcome, Some(&Answered { status, header: &header, body: &|_| None }))
            }
        }?;
        assert_eq!(call.limits, a.rule.limits, "the rule's call");
        Some((call.op, call.reservation))
    }

    fn reserved(id: u64) -> Outcome {
        Outcome::Allowed { windows: vec![], reservation: Some(id) }
    }

    #[test]
    fn failures_only_rules_commit_or_release_their_reservation() {
        let c = config();
        let a = applied(&c, "quota");
        assert_eq!(check_op(a.rule), Op::Reserve);
        assert_eq!(check_op(applied(&c, "short").rule), Op::Hit);
        assert_eq!(a.rule.call(Op::Reserve).hold_ms, Some(2 * 2_000 + 10_000 + 100_000), "2 × timeout + upload_timeout + 100 s by default");
        assert_eq!(a.rule.call(Op::Commit).hold_ms, None);
        let none: &[(&str, &str)] = &[];
        assert_eq!(settled(&a, &reserved(7), Some((200, none))), Some((Op::Commit, Some(7))), "counted: committed");
        assert_eq!(settled(&a, &reserved(7), Some((401, none))), Some((Op::Release, Some(7))), "not counted: released");
        assert_eq!(settled(&a, &reserved(7), None), Some((Op::Release, Some(7))), "not forwarded, or no answer");
        let failed = Outcome::Failed("down".into());
        assert_eq!(settled(&a, &failed, Some((200, none))), Some((Op::Commit, None)), "failed open: recorded all the same");
        assert_eq!(settled(&a, &failed, Some((401, none))), None, "nothing to release");
        assert_eq!(settled(&a, &failed, None), None);
        assert_eq!(settled(&a, &blocked(1_000), Some((200, none))), Some((Op::Commit, None)), "a shadow block still counts");
        assert_eq!(settled(&applied(&c, "short"), &reserved(7), Some((401, none))), None, "counted when checked");
    }

    /// A forged success must not clear an account's failures.
    #[test]
    fn only_a_real_success_clears() {
        let c = config();
        let a = Applied { spelling: Some(Spelling::One(0x0123_4567_89ab_cdef)), ..applied(&c, "failures") };
        let none: &[(&str, &str)] = &[];
        assert_eq!(settled(&a, &reserved(3), Some((401, none))), Some((Op::Commit, Some(3))));
        assert_eq!(settled(&a, &reserved(3), Some((200, none))), Some((Op::Clear, Some(3))), "200 is a success");
        assert_eq!(settled(&a, &reserved(3), Some((204, none))), Some((Op::Clear, Some(3))), "so is 204");
        for status in [201, 301, 302, 304] {
            assert_eq!(settled(&a, &reserved(3), Some((status, none))), Some((Op::Release, Some(3))), "{status} is no success");
        }
        assert_eq!(settled(&a, &failed_open(), Some((200, none))), Some((Op::Clear, None)), "no reservation to release");
        let other_method = Applied { own_method: false, ..a.clone() };
        assert_eq!(settled(&other_method, &reserved(3), Some((200, none))), Some((Op::Release, Some(3))), "override, HEAD or OPTIONS");
        let fell_back = Applied { fell_back: true, ..a.clone() };
        assert_eq!(settled(&fell_back, &reserved(3), Some((200, none))), Some((Op::Release, Some(3))), "never a fallback key");
        assert_eq!(settled(&fell_back, &reserved(3), Some((401, none))), Some((Op::Commit, Some(3))));
        assert_eq!(settled(&a, &reserved(3), None), Some((Op::Release, Some(3))));
        let two_names = Applied { spelling: Some(Spelling::Several), ..a.clone() };
        assert_eq!(settled(&two_names, &reserved(3), Some((200, none))), Some((Op::Release, Some(3))), "which account succeeded?");
    }

    /// The calls of a relief rule carry the request's spelling.
    #[test]
    fn a_relief_rules_calls_carry_the_spelling() {
        let c = config();
        let spelled = Spelling::One(0x0123_4567_89ab_cdef);
        let a = Applied { spelling: Some(spelled), ..applied(&c, "failures") };
        let none: &[(&str, &str)] = &[];
        let call = |a: &Applied<'_>, status| settle(a, &reserved(3), Some(&Answered { status, header: &|_| None, body: &|_| None })).unwrap();
        assert_eq!(call(&a, 401).spelling, Some(spelled), "a commit marks the count");
        assert_eq!(call(&a, 200).spelling, Some(spelled), "a clear names whose failures it clears");
        assert_eq!(call(&a, 500).spelling, None, "a release needs none");
        let untold = Applied { spelling: None, ..a.clone() };
        assert_eq!(call(&untold, 401).spelling, Some(Spelling::Several), "no spelling known: the count mixes");
        let quota = applied(&c, "quota");
        assert_eq!(settled(&quota, &reserved(3), Some((200, none))), Some((Op::Commit, Some(3))));
        assert_eq!(call(&quota, 200).spelling, None, "a rule without relief keeps no mark");
    }

    fn failed_open() -> Outcome {
        Outcome::Failed("down".into())
    }

    #[test]
    fn a_success_clears_only_the_identity_the_origin_authenticated() {
        let c = config();
        let rule = c.rules.iter().find(|r| r.name == "login").unwrap();
        let key = crate::request::key::identity_key(&rule.key[0], "Ann@Example.com").unwrap();
        let spelling = Some(Spelling::of(&[(&rule.key[0], vec!["ann@example.com".into()])]));
        let a = Applied { key: key.clone(), id: object_name(rule, &key), spelling, ..applied(&c, "login") };
        let as_ann: &[(&str, &str)] = &[("x-authenticated-user", " ann@example.com")];
        assert_eq!(settled(&a, &reserved(9), Some((200, as_ann))), Some((Op::Forgive, Some(9))), "decrement: forgive one");
        let look_alike: &[(&str, &str)] = &[("x-authenticated-user", "Ann@Example.com")];
        assert_eq!(settled(&a, &reserved(9), Some((200, look_alike))), Some((Op::Release, Some(9))), "keyed alike, spelled otherwise");
        let as_mallory: &[(&str, &str)] = &[("x-authenticated-user", "mallory@example.com")];
        assert_eq!(settled(&a, &reserved(9), Some((200, as_mallory))), Some((Op::Release, Some(9))), "another account");
        let none: &[(&str, &str)] = &[];
        assert_eq!(settled(&a, &reserved(9), Some((200, none))), Some((Op::Release, Some(9))), "nobody authenticated");
        let two: &[(&str, &str)] = &[("x-authenticated-user", "ann@example.com, mallory@example.com")];
        assert_eq!(settled(&a, &reserved(9), Some((200, two))), Some((Op::Release, Some(9))), "a list names no one account");
        assert_eq!(settled(&a, &reserved(9), Some((204, as_ann))), Some((Op::Release, Some(9))), "success_statuses = [200]");
    }

    /// Folds each checked rule's outcome (`outcomes[i]` for `applied[i]`) into
    /// the answer, as the module documentation describes, for a client that
    /// sent no `Accept` (a blocking rule's own response body, if it has one).
    pub(crate) fn verdict(applied: &[Applied<'_>], outcomes: &[Outcome]) -> Verdict {
        verdict_for(applied, outcomes, Prefers::Other)
    }
}

#[cfg(test)]
mod device_cookie_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_device_earns_its_cookie_by_a_settling_success_only() {
        let config = crate::testing::config(json!([{
            "name": "login", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
            "on_success": "clear", "trusted_device": { "secret": "DEVICE_KEY", "ttl": "1d" },
            "limits": [{ "requests": 3, "window": "15m" }],
        }]));
        let rule = &config.rules[0];
        let applied = Applied {
            rule,
            key: "header:x-user=ann".into(),
            id: "x".into(),
            key_hash: "h".into(),
            fell_back: false,
            own_method: true,
            device: None,
            spelling: Some(Spelling::of(&[(&rule.key[0], vec!["ann".into()])])),
        };
        let tag = applied.spelling.as_ref().and_then(Spelling::tag).unwrap().to_string();
        let secret = |name: &str| (name == "DEVICE_KEY").then(|| "k".to_string());
        let answered = |status| Answered { status, header: &|_| None, body: &|_| None };
        let (name, value) = device_cookie(&applied, &answered(200), &secret, 1_000_000).unwrap();
        assert_eq!(name, "set-cookie");
        let token = value.split(';').next().unwrap().strip_prefix("tollgate_device=").unwrap();
        assert!(crate::request::device::verify(b"k", "login", "header:x-user=ann", &tag, token, 1_000_000).is_some());
        for (spelling, why) in [(Some(Spelling::Several), "two spellings"), (None, "no spelling")] {
            let unbound = Applied { spelling, ..applied.clone() };
            assert_eq!(device_cookie(&unbound, &answered(200), &secret, 0), None, "{why}");
        }
        assert!(value.contains("Max-Age=86400"), "{value}");
        assert_eq!(device_cookie(&applied, &answered(401), &secret, 0), None, "a failure");
        assert_eq!(device_cookie(&applied, &answered(302), &secret, 0), None, "not a success status");
        let overridden = Applied { own_method: false, ..applied.clone() };
        assert_eq!(device_cookie(&overridden, &answered(200), &secret, 0), None, "a forged success");
        let fell_back = Applied { fell_back: true, ..applied.clone() };
        assert_eq!(device_cookie(&fell_back, &answered(200), &secret, 0), None);
        assert_eq!(device_cookie(&applied, &answered(200), &|_| None, 0), None, "no secret");
        let other = Applied { key: "header:x-user=bob".into(), ..applied.clone() };
        let both = device_cookies(&[applied.clone(), other], &answered(200), &secret, 1_000_000);
        assert_eq!(both.len(), 1, "one cookie per name: the first identity proved");
        assert_eq!(both[0], device_cookie(&applied, &answered(200), &secret, 1_000_000).unwrap());
    }

}

#[cfg(test)]
mod usage_tests {
    use super::*;
    use crate::config::Config;
    use crate::pipeline::applied::object_name;
    use serde_json::json;

    fn applied<'c>(config: &'c Config, name: &str) -> Applied<'c> {
        let rule = config.rules.iter().find(|r| r.name == name).unwrap();
        Applied { rule, key: "k".into(), id: object_name(rule, "k"), key_hash: "h".into(), fell_back: false, own_method: true, device: None, spelling: None }
    }

    fn reserved(id: u64) -> Outcome {
        Outcome::Allowed { windows: vec![], reservation: Some(id) }
    }

    /// A usage rule reserves `reserve` and commits what the
    /// origin reports, clamped; a missing header commits `reserve`.
    #[test]
    fn a_usage_rule_commits_the_units_the_origin_reports() {
        let l = json!([{ "requests": 10_000, "window": "1d" }]);
        let cost = json!({ "header": "X-Tokens", "reserve": 500, "max": 3_000 });
        let c = crate::testing::config(json!([
            { "name": "tokens", "path": "/p", "limits": l, "cost": cost },
            { "name": "billed", "path": "/p", "limits": l, "cost": cost, "count_statuses": [200] },
        ]));
        let (a, billed) = (applied(&c, "tokens"), applied(&c, "billed"));
        let a = &a;
        assert_eq!((check_op(a.rule), a.rule.call(Op::Reserve).cost), (Op::Reserve, 500), "reserves `reserve`");
        let used = |a: &Applied<'_>, status: u16, headers: &[(&str, &str)]| {
            let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
            settle(a, &reserved(7), Some(&Answered { status, header: &header, body: &|_| None })).map(|call| (call.op, call.used))
        };
        assert_eq!(used(a, 200, &[("x-tokens", "1234")]), Some((Op::Commit, Some(1_234))));
        assert_eq!(used(a, 500, &[("x-tokens", "99999")]), Some((Op::Commit, Some(99_999))), "every answer counts; as reported, never clamped to max");
        assert_eq!(used(a, 200, &[("x-tokens", "-3")]), Some((Op::Commit, Some(0))), "clamped to 0");
        assert_eq!(used(a, 200, &[]), Some((Op::Commit, None)), "missing: the reservation's `reserve`");
        assert_eq!(used(&billed, 500, &[("x-tokens", "10")]), Some((Op::Release, None)), "count_statuses still selects");
        assert_eq!(used(&billed, 200, &[("x-tokens", "10")]), Some((Op::Commit, Some(10))));
        assert_eq!(settle(a, &reserved(7), None).map(|c| (c.op, c.reservation)), Some((Op::Release, Some(7))), "not answered: released");
        let header = |_: &str| None;
        let event = usage_missing(a, 200);
        assert_eq!((event.event, usage(a, &Answered { status: 200, header: &header, body: &|_| None })), ("usage_missing", Some(None)));
        assert!(event.line().contains("\"committed\":500"), "{}", event.line());
    }
}
