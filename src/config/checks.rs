//! The checks that span a rule's fields, run once its table is read
//! ([`crate::config::rule_fields::RuleDraft::finish`]): fields that only
//! together say what to do (a missing key part, a success, an upload, a
//! reservation, a lease) and fields that need another (`on_success` needs
//! `counting.statuses`; `query_sources` needs query conditions). Each
//! resolves the fields into the spec's value, or reports under the field
//! that is wrong. Then what `tollgate check` says of a valid config:
//! [`warnings`] (works as written, but probably not what was meant) and
//! [`relief_note`] (a trade-off left in).

use crate::config::limits::cost_error;
use crate::config::policy::{
    Action, Counting, CountingMode, FailPolicy, MissingKey, OnMissingKey, OnSuccess, SuccessAction, UploadLimits, DEFAULT_SUCCESS_STATUSES,
};
use crate::config::reader::{is_standard_method, Errors};
use crate::config::rules::{Rule, RuleSpec, Target};
use crate::config::{ConfigWarning, DEFAULT_IPV6_PREFIX, ORIGIN_ALLOWANCE_MS};
use crate::count::lease::{LeaseMode, LeaseSettings, DEFAULT_LEASE_MAX, DEFAULT_LEASE_TTL_MS, OFF_ON_SUCCESS, OFF_TWO_PHASE};
use crate::count::limit::Limit;
use crate::count::protocol::{Algorithm, MAX_HOLD_MS};
use crate::request::canon::Sources;
use crate::request::key::KeyPart;

/// An override's limits obey the rule's: cost within the smallest.
pub(super) fn check_overrides(spec: &mut RuleSpec, errors: &mut Errors) {
    // Resolved here so that their errors come with the rule's others; again
    // once the whole config is read, under its `ipv6_prefix`.
    let key = spec.key.clone();
    for e in spec.overrides.resolve(&key, spec.case_insensitive, DEFAULT_IPV6_PREFIX) {
        errors.push(if e.value.is_empty() { "overrides".to_string() } else { format!("overrides.{}", e.value) }, e.message);
    }
    for entry in spec.overrides.entries() {
        let field = format!("overrides.{}", entry.value);
        if let Some(message) = cost_error(&entry.limits, spec.cost) {
            errors.push(field, message);
        }
    }
}

/// A calendar window is a fixed period counted from the log: GCRA drains
/// continuously and has no period to reset at.
pub(super) fn check_calendar(spec: &RuleSpec, errors: &mut Errors) {
    let overrides = spec.overrides.entries().iter().flat_map(|e| e.limits.iter());
    let calendar = spec.limits.iter().chain(overrides).any(|l| l.calendar.is_some());
    if calendar && spec.algorithm == Algorithm::Gcra {
        errors.push("algorithm", "gcra has no calendar: a calendar window (\"day\", \"week\", \"month\") is counted exactly under sliding_log, the default");
    }
}

/// A device cookie is handed out on a proven success and names an account:
/// the rule must settle successes and be keyed by the account alone.
pub(super) fn check_trusted_device(spec: &RuleSpec, errors: &mut Errors) {
    if spec.trusted_device.is_none() {
        return;
    }
    if spec.on_success.is_none() {
        errors.push("trusted_device", "needs on_success: a device earns its cookie by a success that settles the count");
    }
    if let Some(part) = spec.key.iter().find(|p| p.identifies_client()) {
        errors.push(
            "trusted_device",
            format!("the key part `{part}` identifies the client; a device cookie is for a limit per account (e.g. key = [\"body:email\"])"),
        );
    }
}

/// What to do when a key part is missing, from `on_missing_key` and
/// `fallback_key` together: a fallback key alone means "fallback".
pub(super) fn missing_key(chosen: Option<OnMissingKey>, fallback: Option<Vec<KeyPart>>, errors: &mut Errors) -> MissingKey {
    match (chosen, fallback) {
        (None | Some(OnMissingKey::Reject), None) => MissingKey::Reject,
        (Some(OnMissingKey::Skip), None) => MissingKey::Skip,
        (None | Some(OnMissingKey::Fallback), Some(parts)) => MissingKey::Fallback(parts),
        (Some(OnMissingKey::Fallback), None) => {
            errors.push("fallback_key", "missing: on_missing_key = \"fallback\" needs a fallback_key such as [\"ip\"]");
            MissingKey::Reject
        }
        (Some(OnMissingKey::Reject | OnMissingKey::Skip), Some(_)) => {
            errors.push("fallback_key", "only used with on_missing_key = \"fallback\"");
            MissingKey::Reject
        }
    }
}

/// The counting mode as written agrees with the fields that count in two
/// phases: `counting.statuses`, `metering` and `concurrency` each need
/// `mode = "response"`, and that mode needs one of them (alone it would
/// reserve and settle what counting on arrival counts the same).
pub(super) fn counting_mode(spec: &RuleSpec, mode: Option<CountingMode>, two_phase_given: bool, errors: &mut Errors) {
    let two_phase = [
        ("counting.statuses", spec.counting != Counting::All),
        ("metering", spec.usage.is_some()),
        ("concurrency", spec.concurrency.is_some()),
    ];
    match mode {
        Some(CountingMode::Response) if !two_phase_given => errors.push(
            "counting.mode",
            "\"response\" reserves as a request arrives and settles once the origin answered: give counting.statuses, metering or concurrency (else mode = \"request\")",
        ),
        Some(CountingMode::Response) => {}
        _ => {
            for (field, _) in two_phase.into_iter().filter(|(_, given)| *given) {
                errors.push(field, "counts in two phases (reserved as the request arrives, settled once the origin answered): needs counting = { mode = \"response\" }");
            }
        }
    }
}

/// What a success does, from `on_success` and the fields that refine it
/// (`success_statuses`, `success_identity_header`), which need it.
pub(super) fn on_success(
    spec: &RuleSpec,
    action: Option<SuccessAction>,
    statuses: Option<Vec<u16>>,
    identity_header: Option<String>,
    errors: &mut Errors,
) -> Option<OnSuccess> {
    let Some(action) = action else {
        for (field, given) in [("success_statuses", statuses.is_some()), ("success_identity_header", identity_header.is_some())] {
            if given {
                errors.push(field, "only used with on_success");
            }
        }
        return None;
    };
    let statuses = statuses.unwrap_or_else(|| DEFAULT_SUCCESS_STATUSES.to_vec());
    if statuses.iter().any(|s| *s >= 400) {
        errors.push("success_statuses", "a success is a status below 400");
    }
    if let Counting::Statuses(counted) = &spec.counting {
        if let Some(both) = statuses.iter().find(|s| counted.contains(s)) {
            errors.push("success_statuses", format!("{both} is also in counting.statuses: a status either counts or is a success"));
        }
    }
    if identity_header.is_some() && spec.key.len() != 1 {
        errors.push(
            "success_identity_header",
            "compares the identity the origin names with the key: use a key of one part, the account (e.g. [\"body:email\"])",
        );
    }
    Some(OnSuccess { action, statuses, identity_header })
}

/// `on_success` only for a failures-only rule keyed by the target of the
/// attempts, never by the client (who could clear its own count).
pub(super) fn check_on_success(spec: &RuleSpec, errors: &mut Errors) {
    if spec.on_success.is_none() {
        return;
    }
    let field = "on_success";
    if spec.counting == Counting::All {
        errors.push(field, "only for rules that count failures (set counting = { mode = \"response\", statuses = [...] })");
    }
    let fallback = spec.on_missing_key.fallback_parts();
    if let Some(part) = spec.key.iter().chain(fallback).find(|p| p.identifies_client()) {
        errors.push(
            field,
            format!("the key part `{part}` (in key or fallback_key) identifies the client: a client could clear its own count by succeeding on its own account; clear only a rule keyed by the target (e.g. body:email) with on_missing_key = \"reject\""),
        );
    }
}

/// `limits` is required, but for a `concurrency` rule, which then limits
/// only what is in flight: its calls (which always carry a window) carry
/// [`UNBOUND_WINDOW`] under GCRA, whose exact arithmetic admits its
/// 4,294,967,295 per second, so it never refuses (and costs one O(1)
/// state). `algorithm` is then refused: there is no window to count by.
pub(super) fn windowless(spec: &mut RuleSpec, limits_given: bool, algorithm_given: bool, errors: &mut Errors) {
    if limits_given {
        return;
    }
    if spec.concurrency.is_none() {
        return errors.push("limits", "missing: give the windows, e.g. [{ requests = 10, window = \"60s\" }] (a concurrency rule may leave them out)");
    }
    if algorithm_given {
        errors.push("algorithm", "only with limits (this concurrency rule counts no window)");
    }
    spec.limits = Limit::new(UNBOUND_WINDOW.0, UNBOUND_WINDOW.1).into_iter().collect();
    spec.algorithm = Algorithm::Gcra;
    spec.windowless = true;
}

/// The window a `concurrency` rule without `limits` carries: `u32::MAX`
/// requests per second, more than one key could send.
pub(crate) const UNBOUND_WINDOW: (u32, u64) = (u32::MAX, 1_000);

/// What a two-phase setting given to a rule that counts on arrival is told.
const ONLY_TWO_PHASE: &str = "only for rules that count in two phases (mode = \"response\" with statuses, metering or concurrency)";

/// How a failures-only rule receives a body before it reserves
/// ([`crate::pipeline::upload`]): as given, or the defaults; both fields only for
/// rules that count statuses.
pub(super) fn upload_limits(spec: &RuleSpec, buffer: Option<u32>, timeout_ms: Option<u32>, errors: &mut Errors) -> UploadLimits {
    let mut limits = UploadLimits::default();
    for (field, given) in [("counting.upload_buffer", buffer.is_some()), ("counting.upload_timeout", timeout_ms.is_some())] {
        if given && !spec.reserves() {
            errors.push(field, ONLY_TWO_PHASE);
        }
    }
    limits.buffer = buffer.unwrap_or(limits.buffer);
    limits.timeout_ms = timeout_ms.unwrap_or(limits.timeout_ms);
    limits
}

/// How long a failures-only rule's reservation holds its slot: as given
/// (longer than the reserve and commit calls' timeouts together, at most
/// [`MAX_HOLD_MS`]), or `2 × timeout` + `upload_timeout` (the longest the
/// rest of a body over `upload_buffer` streams after the reserve) +
/// [`ORIGIN_ALLOWANCE_MS`].
pub(super) fn reservation_ttl(spec: &RuleSpec, given: Option<u64>, errors: &mut Errors) -> u64 {
    let calls = 2 * u64::from(spec.timeout_ms);
    let Some(ms) = given else { return calls + u64::from(spec.upload.timeout_ms) + ORIGIN_ALLOWANCE_MS };
    if !spec.reserves() {
        errors.push("counting.reservation_ttl", ONLY_TWO_PHASE);
    } else if ms <= calls || ms > MAX_HOLD_MS {
        errors.push(
            "counting.reservation_ttl",
            format!("must be longer than twice the timeout ({calls} ms: the reserve and the commit calls) and at most 1h"),
        );
    }
    ms
}

/// A custom method is matched exactly as written: likely a typo.
pub(super) fn custom_methods(rule: &Rule) -> Vec<ConfigWarning> {
    rule.methods
        .iter()
        .filter(|m| !is_standard_method(m))
        .map(|custom| ConfigWarning {
            rule: rule.name.clone(),
            field: "methods",
            message: format!(
                "`{custom}` is not a standard method (a typo?); the rule matches only requests sent with exactly this method"
            ),
        })
        .collect()
}

/// An id-like key part without a type counts `042` and `42` apart, though
/// `parseInt`, Werkzeug's `<int:>` and PHP's `(int)` read them as one.
pub(super) fn untyped_ids(rule: &Rule) -> Vec<ConfigWarning> {
    rule.key
        .iter()
        .chain(rule.on_missing_key.fallback_parts())
        .filter(|p| p.untyped_id())
        .map(|p| ConfigWarning {
            rule: rule.name.clone(),
            field: "key",
            message: format!(
                "`{p}` names an id but has no type: spellings the origin reads as one id (`042`, `+42`, `42 `) would each get a bucket; add `:int`, `:uuid` or `:raw` (`{p}:int`)"
            ),
        })
        .collect()
}

/// A rule keyed only by an id the client claims for itself (a header,
/// cookie or query parameter named `id`, `*_id`, `*-id` or `*Id`, such as
/// `header:x-user-id`; not Cloudflare's own `cf-` headers): any client can
/// send a made-up one and get a fresh bucket. Said when no rule keyed by
/// the client's address (`ip`) covers its path beside it. A path segment or body field (a resource, the account a login
/// targets) is what the rule protects, and is not said.
pub(super) fn client_chosen(rules: &[Rule]) -> Vec<ConfigWarning> {
    let claimed = |p: &KeyPart| match p {
        KeyPart::Header(name, _) | KeyPart::Cookie(name, _) | KeyPart::Query(name, _) => {
            let lower = name.to_ascii_lowercase();
            !lower.starts_with("cf-") && (lower == "id" || lower.ends_with("_id") || lower.ends_with("-id") || name.ends_with("Id"))
        }
        _ => false,
    };
    let covers = |wide: &str, path: &str| wide == path || wide.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix));
    let by_ip = |rule: &Rule| rules.iter().any(|r| r.key.contains(&KeyPart::Ip) && covers(&r.path, &rule.path));
    rules
        .iter()
        .filter(|rule| !rule.key.is_empty() && rule.key.iter().all(claimed) && !by_ip(rule))
        .map(|rule| {
            let parts = rule.key.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ");
            ConfigWarning {
                rule: rule.name.clone(),
                field: "key",
                message: format!(
                    "{parts}: a value any client can set, so a made-up one gets a fresh bucket; add a rule keyed by [\"ip\"] on `{}` beside this one, or key on what the origin authenticates",
                    rule.path
                ),
            }
        })
        .collect()
}

/// The default `on_missing_key = "reject"` on a broad path (a wildcard,
/// such as `/api/*`) with a key part a request may lack (a header, cookie,
/// query parameter or body field): every request without it is answered
/// 400, public pages and health checks included. Said only when
/// the policy was left to its default.
pub(super) fn broad_rejection(rule: &Rule) -> Option<ConfigWarning> {
    let missable = |p: &&KeyPart| matches!(p, KeyPart::Header(..) | KeyPart::Cookie(..) | KeyPart::Query(..) | KeyPart::Body(..) | KeyPart::Credential);
    let part = rule.key.iter().find(missable)?;
    let broad = rule.path.contains('*');
    (broad && !rule.missing_key_given && rule.on_missing_key == MissingKey::Reject).then(|| ConfigWarning {
        rule: rule.name.clone(),
        field: "on_missing_key",
        message: format!(
            "not set, so \"reject\": every request to `{}` without `{part}` is answered 400 and never reaches the \
             origin (a public page, a health check, a client before it signs in); set fallback_key = [\"ip\"] to \
             count those by address, on_missing_key = \"skip\" to leave them to other rules, or \"reject\" to keep it",
            rule.path
        ),
    })
}

/// Shadow mode never blocks, so a fail-closed policy on it does nothing.
pub(super) fn shadow_fail_closed(rule: &Rule) -> Option<ConfigWarning> {
    (rule.action == Action::Log && rule.on_error == FailPolicy::Deny).then(|| ConfigWarning {
        rule: rule.name.clone(),
        field: "on_error",
        message: "action = \"log\" never blocks, so on_error = \"deny\" is ignored (shadow mode forwards even when the counter is down)".into(),
    })
}

/// A success that settles a count without `success_identity_header`:
/// tollgate cannot tell whom the origin authenticated, so a success for
/// any request naming the account settles it.
pub(super) fn forgeable_success(rule: &Rule) -> Option<ConfigWarning> {
    let on = rule.on_success.as_ref().filter(|on| on.identity_header.is_none())?;
    let effect = match on.action {
        SuccessAction::Clear => "clears the whole count (a whole limit of new guesses per forged success)",
        SuccessAction::Decrement => "forgives one failure (one more guess per forged success)",
    };
    Some(ConfigWarning {
        rule: rule.name.clone(),
        field: "success_identity_header",
        message: format!(
            "not set: a success {effect} for the account the request names, spelled as it names it, whoever \
             the origin logged in (the attacker's own account, named in a field the origin reads and tollgate \
             does not). Have the origin name the account it authenticated in a response header and set \
             success_identity_header to it"
        ),
    })
}

/// `tollgate check`'s one line on the trade-off left in a rule whose
/// success relieves: relief is bound to the exact spelling, the
/// count to the folded key.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) fn relief_note(rule: &Rule) -> Option<String> {
    rule.on_success.as_ref()?;
    Some(format!(
        "rule `{}`: a success or device cookie relieves only the account exactly as the request spelled it \
         (`Victim@example.com` never relieves `victim@example.com`), but spellings the key folds together share \
         one count: a look-alike's failures count against the account, and a count holding failures of two \
         spellings is relieved by no success until it expires",
        rule.name
    ))
}

/// What `tollgate check` says of a rule counted in a unit coarser than
/// the micro-unit (its bound): `None` for any other rule.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) fn unit_note(rule: &crate::config::rules::Rule) -> Option<String> {
    let priced = rule.usage.as_ref()?.price.as_ref().filter(|p| p.step > 1)?;
    Some(format!("rule `{}`: counts in {}", rule.name, priced.unit_words()))
}

/// `query_sources` says where query conditions look: set without one, it
/// does nothing.
pub(super) fn check_query_sources(spec: &RuleSpec, errors: &mut Errors) {
    if spec.query_sources != Sources::DEFAULT && !spec.conditions.iter().any(|c| c.target == Target::Query) {
        errors.push("query_sources", "only used with query conditions (set query)");
    }
}

/// What `tollgate check` points out in a valid rule: combinations that
/// work as written but are likely not what the operator means.
pub(super) fn warnings(rule: &Rule) -> Vec<ConfigWarning> {
    let mut out = custom_methods(rule);
    out.extend(untyped_ids(rule));
    out.extend(shadow_fail_closed(rule));
    out.extend(forgeable_success(rule));
    out.extend(broad_rejection(rule));
    out.extend(body_usage(rule));
    out
}

/// A usage read from the body: `cut` on OpenAI's usage, which
/// arrives only at the stream's end, or on Anthropic's output, which only
/// its last `message_delta` reports, never cuts (a report that
/// ends the answer is not cut); a `reservation_ttl` under 5 minutes cuts
/// LLM answers that run longer (charged `max`).
pub(super) fn body_usage(rule: &Rule) -> Vec<ConfigWarning> {
    use crate::config::cost::{Provider, Reading, UsageSource};
    let Some(UsageSource::Body(reading)) = rule.usage.as_ref().map(|u| &u.source) else { return Vec::new() };
    let warn = |field: &'static str, message: String| ConfigWarning { rule: rule.name.clone(), field, message };
    let mut out = Vec::new();
    if rule.usage.as_ref().is_some_and(|u| u.cut) {
        let why = match reading {
            Reading::Provider(Provider::OpenAi) => Some("OpenAI streams report usage only in their last chunk"),
            Reading::Provider(Provider::Anthropic) => Some("Anthropic streams report their output only in their last message_delta"),
            _ => None,
        };
        if let Some(why) = why {
            out.push(warn("metering.cut", format!("{why}: there is nothing to cut on before the end (an answer that ended is never cut); cut acts on Gemini's usageMetadata and on json paths reported as a stream goes")));
        }
    }
    if rule.reservation_ttl_ms < 300_000 {
        let ttl = rule.reservation_ttl_ms / 1000;
        out.push(warn("counting.reservation_ttl", format!("{ttl} s: an answer streaming longer is cut 1 s before its reservation lapses (and charged max); LLM answers can take minutes: set it above the longest (at most 1h)")));
    }
    if let Some(p) = rule.key.iter().find(|p| matches!(p, KeyPart::Header(n, _) if API_KEY_HEADERS.contains(&n.as_str()))) {
        out.push(warn("key", format!("`{p}`: LLM clients send their API key in more than one header (Anthropic's SDKs since TS 1.17 and Python 2.17 send `Authorization: Bearer`, older ones `x-api-key`; Gemini's `x-goog-api-key` or `?key=`), and a request without this one is answered 400 (on_missing_key); key on `credential`, which reads whichever are present")));
    }
    out
}

/// The headers an LLM client may carry its API key in, which a
/// `credential` key part reads together.
const API_KEY_HEADERS: [&str; 3] = ["authorization", "x-api-key", "x-goog-api-key"];

/// A cost above the smallest limit would block every request. With
/// `metering`, what a request spends is its `reserve` (a `cost` beside it
/// is refused: which one is meant?).
pub(super) fn check_cost(spec: &mut RuleSpec, cost_given: bool, errors: &mut Errors) {
    if let Some(reserve) = spec.usage.as_ref().map(|u| u.reserve) {
        if cost_given {
            errors.push("cost", "beside metering: a request spends metering.reserve; leave cost out");
        }
        spec.cost = reserve;
    }
    let field = if spec.usage.is_some() { "metering" } else { "cost" };
    if let Some(message) = cost_error(&spec.limits, spec.cost) {
        errors.push(field, message);
    }
}

/// The rule's lease mode: `auto` unless `lease = "off"`, forced off where
/// leasing cannot be exact (two-phase counting; a success that clears or
/// forgives). `lease_ttl` must be shorter than the shortest window.
pub(super) fn lease_mode(spec: &RuleSpec, auto: Option<bool>, ttl_ms: Option<u64>, max: Option<u32>, errors: &mut Errors) -> LeaseMode {
    let smallest = spec.limits.iter().map(|l| l.requests.get()).min().unwrap_or(1);
    let shortest = spec.limits.iter().map(|l| l.window_ms.get()).min().unwrap_or(u64::MAX);
    if auto == Some(false) {
        for (field, given) in [("lease_ttl", ttl_ms.is_some()), ("lease_max", max.is_some())] {
            if given {
                errors.push(field, "only used with lease = \"auto\" (this rule has lease = \"off\")");
            }
        }
        return LeaseMode::Off;
    }
    if ttl_ms.is_some_and(|ttl| ttl >= shortest) {
        errors.push("lease_ttl", format!("must be shorter than the rule's shortest window ({shortest} ms)"));
    }
    // By default one second, or half the shortest window if that is less.
    let ttl_ms = ttl_ms.unwrap_or(DEFAULT_LEASE_TTL_MS.min(shortest / 2).max(1));
    if spec.reserves() {
        return LeaseMode::ForcedOff(OFF_TWO_PHASE);
    }
    if spec.on_success.is_some() {
        return LeaseMode::ForcedOff(OFF_ON_SUCCESS);
    }
    LeaseMode::Auto(LeaseSettings::new(ttl_ms, max.unwrap_or(DEFAULT_LEASE_MAX), smallest))
}

/// A `penalty` must last at least the rule's longest window (its
/// overrides' included): shorter, it would end while the window that
/// refused is still full, and mean nothing.
pub(super) fn check_penalty(spec: &RuleSpec, errors: &mut Errors) {
    let Some(penalty) = spec.penalty_ms else { return };
    // A calendar window by its nominal length (a month: 31 days), not its
    // horizon: its refusal lasts at most to the period's end.
    let length = |l: &Limit| l.calendar.map_or(l.window_ms.get(), |c| c.unit.nominal_ms());
    let overrides = spec.overrides.entries().iter().flat_map(|o| o.limits.iter());
    let longest = spec.limits.iter().chain(overrides).map(length).max().unwrap_or(0);
    if penalty < longest {
        errors.push("penalty", format!("must be at least the rule's longest window ({longest} ms)"));
    }
}


#[cfg(test)]
mod tests {
    use serde_json::json;

    fn said(rules: serde_json::Value) -> Vec<String> {
        crate::testing::config(rules).warnings().iter().map(|w| w.to_string()).filter(|w| w.contains("any client can set")).collect()
    }

    #[test]
    fn a_claimed_id_alone_is_said_once_and_an_ip_rule_beside_it_silences_it() {
        let user = json!({ "name": "api", "path": "/api/*", "key": ["header:x-user-id:int"], "on_missing_key": "skip", "limits": [{ "requests": 10, "window": "1m" }] });
        let alone = said(json!([user]));
        assert_eq!(alone.len(), 1, "{alone:?}");
        assert!(alone[0].contains("rule `api`, field `key`: `header:x-user-id:int`: a value any client can set"), "{}", alone[0]);
        assert!(alone[0].contains("add a rule keyed by [\"ip\"] on `/api/*`"), "{}", alone[0]);
        let net = json!({ "name": "net", "path": "/*", "key": ["ip"], "limits": [{ "requests": 100, "window": "1m" }] });
        assert!(said(json!([user, net])).is_empty(), "a per-network rule covers /api/*");
        let elsewhere = json!({ "name": "net", "path": "/login", "key": ["ip"], "limits": [{ "requests": 100, "window": "1m" }] });
        assert_eq!(said(json!([user, elsewhere])).len(), 1, "an ip rule on another path does not");
        for key in [json!(["header:cf-access-authenticated-user-email"]), json!(["path:tenant:int"]), json!(["body:email"]), json!(["header:x-user-id", "ip"]), json!(["credential"])] {
            let rule = json!({ "name": "r", "path": "/r/*", "key": key, "on_missing_key": "skip", "limits": [{ "requests": 10, "window": "1m" }] });
            assert!(said(json!([rule])).is_empty(), "{key}");
        }
    }
}
