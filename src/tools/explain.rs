//! `tollgate explain`: what the Worker does with one request, rule by rule.
//!
//! Pure, and a thin caller of the same pipeline as the Worker: the request
//! goes through the decision [`Machine`], and each counter's assumed answer
//! is the limiter object's own step on an in-memory row set up to the
//! assumed state ([`Assumed`]). Only the description of rules that do
//! *not* match (why not) is explain's own.
//!
//! Key hashes are the Worker's: given the Worker's `TOLLGATE_LOG_KEY`,
//! explain prints the very `key_hash` its log lines carry; [`rule_key`] and
//! [`key_hash`] serve `tollgate hash`.

use crate::config::upstream::Upstream;
use crate::admin::api;
use crate::request::canon::{CanonicalQuery, Source};
use crate::config::Config;
use crate::config::describe;
use crate::config::words::{lease, limits, policy};
use crate::config::policy::{Counting, Named};
use crate::pipeline::facts::{self, Facts, HeaderMap, Secrets};
use crate::pipeline::machine::{self, Machine, Next};
use crate::pipeline::plane::{Door, Plane};
use crate::pipeline::memo::PlanMemo;
use crate::pipeline::applied::{Applied, KeyOutcome, Matched};
use crate::pipeline::metrics::MetricsLevel;
use crate::pipeline::plan::Canonical;
use crate::pipeline::plan::Plan;
use crate::pipeline::upload::{BodyRead, Receipt};
use crate::count::limit::Limit;
use crate::count::protocol::{Call, CallFailure, Op};
use crate::count::store::Storage;
use crate::config::rules::{RequestView, Rule};
use crate::pipeline::isolate::{CounterRun, Isolate, ObjectCall};
use crate::pipeline::verdict::{Answer, Outcome, Verdict};
use serde_json::{json, Value};
use std::fmt::Write;
use url::Url;

/// The request `explain` works from: what a request carries.
pub(crate) struct ExplainRequest<'a> {
    pub(crate) method: &'a str,
    /// An absolute URL, or a path (`/api/x?y`) read against
    /// `https://example.com`.
    pub(crate) url: &'a str,
    /// Header names in any case; a name given several times reads as its
    /// values joined by `", "`, as the Fetch `Headers.get` does.
    pub(crate) headers: &'a [(String, String)],
    pub(crate) body: Option<&'a [u8]>,
    /// `request.cf.country` and `request.cf.asn`.
    pub(crate) country: Option<&'a str>,
    pub(crate) asn: Option<u32>,
    /// `request.cf.verifiedBotCategory` (`--verified-bot CATEGORY`; `""`
    /// for a verified bot of no category).
    pub(crate) verified_bot: Option<&'a str>,
    /// Workers secrets by name (`--secret NAME=VALUE`): a secret-header
    /// exemption's, a trusted device's signing key.
    pub(crate) secrets: &'a [(String, String)],
    /// The Worker's `TOLLGATE_LOG_KEY` ([`log_key`]), so that key hashes
    /// match its logs; `None`: unkeyed, as a Worker without the secret.
    pub(crate) log_key: Option<&'a [u8]>,
    /// Now (Unix ms), as the Worker's clock would read it: a trusted-device
    /// cookie is valid until its expiry (the CLI's real clock, or `--now`).
    pub(crate) now_ms: i64,
}

pub(crate) use crate::request::key::{key_hash, log_key};

/// The key `rule` derives from raw values given as the admin API takes
/// them (`("ip", "203.0.113.7")`, `("body:email", "a@b.io")`, one per key
/// part): for `tollgate hash --rule`. The error names what is missing.
pub(crate) fn rule_key(config: &Config, rule: &str, values: &[(String, String)]) -> Result<String, String> {
    let rule = config
        .rules
        .iter()
        .find(|r| r.name == rule)
        .ok_or_else(|| format!("no rule named `{rule}`"))?;
    let encode = |text: &str| percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string();
    let pairs: Vec<String> = values.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
    let params = CanonicalQuery::parse(&pairs.join("&"));
    api::admin_key(&rule.key, &params, config.ipv6_prefix)
        .map_err(|missing| {
            let param = missing.0.param_name().unwrap_or_else(|| missing.0.to_string());
            format!("rule `{}`: {missing}: give it as `{param}=VALUE`", rule.name)
        })
}

/// What each checked rule's counter is assumed to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assumed {
    /// Under the limit: the request is counted and allowed.
    Allowed,
    /// Over the limit, waiting the rule's longest window.
    Blocked,
    /// The counter cannot be reached: the rule's fail policy.
    Failed,
}

impl Assumed {
    pub(crate) fn parse(text: &str) -> Option<Assumed> {
        match text {
            "allowed" | "allow" => Some(Assumed::Allowed),
            "blocked" | "block" => Some(Assumed::Blocked),
            "failed" | "fail" => Some(Assumed::Failed),
            _ => None,
        }
    }

    /// What the rule's counter answers the machine's `op` at `now_ms`, in
    /// the state assumed: the core's own [`CounterRun`] on a fresh
    /// [`Isolate`] (the ban probe, the cache, the lease, the hold), its
    /// calls answered by the object's own step
    /// ([`crate::count::store::Storage::answer`], the Durable Object's
    /// effects on an in-memory row), so that `explain` has no model of the
    /// isolate or the object. Allowed: the key's first request (nothing
    /// stored). Blocked: the key's count full, every window's hits made
    /// just now, so the refusal waits the longest window (and, with a
    /// penalty, starts it). Failed: every call unreachable.
    fn outcome(self, applied: &Applied<'_>, op: Op, now_ms: i64) -> Outcome {
        let mut objects: std::collections::BTreeMap<String, Storage> = std::collections::BTreeMap::new();
        let mut isolate = Isolate::new();
        CounterRun::new(applied, op).run(&mut isolate, now_ms, |ObjectCall { id, call, .. }, at| {
            let object = objects.entry(id.clone()).or_insert_with(|| self.storage(call, now_ms));
            match self {
                Assumed::Failed => Err(CallFailure::Transport("assumed: the counter cannot be reached".into())),
                _ => object.answer(call, at).map_err(|corrupt| CallFailure::Refused { status: 500, body: corrupt }),
            }
        })
    }

    /// An object's storage in the state assumed, for a call like `call`:
    /// nothing stored; or, blocked, one hit of the largest limit's units
    /// over the longest window, which fills every window at once.
    fn storage(self, call: &Call, now_ms: i64) -> Storage {
        let mut object = Storage::default();
        let requests = call.limits.iter().map(|l| l.requests).max();
        let longest = call.limits.iter().max_by_key(|l| l.window_ms);
        if let (Assumed::Blocked, Some(requests), Some(longest)) = (self, requests, longest) {
            let fill = Call::new(Op::Hit, call.algorithm, vec![Limit { requests, ..*longest }]).with_cost(requests.get());
            let _ = object.answer(&fill, now_ms);
        }
        object
    }
}

/// The outcome assumed for each rule: `default`, or a per-rule choice.
pub(crate) struct Assumptions<'a> {
    pub(crate) default: Assumed,
    pub(crate) per_rule: &'a [(String, Assumed)],
}

impl Assumptions<'_> {
    fn of(&self, rule: &str) -> Assumed {
        self.per_rule.iter().rev().find(|(r, _)| r == rule).map_or(self.default, |(_, a)| *a)
    }
}

/// Everything `explain` found: the plan, and the verdict under the
/// assumptions (`None` for an admin request or an unparsable URL).
pub(crate) struct Explained<'c> {
    pub(crate) url: Result<Url, String>,
    /// No rule's host and path take the URL: the Worker forwards it with
    /// nothing else read ([`crate::pipeline::plane::walk`]'s `Door::Pass`).
    pub(crate) fast_path: bool,
    /// The Worker's plan memo would keep this plan for the client's repeats
    /// (a blocked client, nothing exempt, no body read).
    pub(crate) kept: bool,
    /// The rules whose counters were asked, with their keys.
    pub(crate) checked: Vec<Applied<'c>>,
    pub(crate) plan: Option<Plan<'c>>,
    pub(crate) verdict: Option<Verdict>,
}

/// Runs the pipeline on `request` as the Worker would, with the counters
/// answering as `assumed`.
pub(crate) fn run<'c>(config: &'c Config, request: &ExplainRequest<'_>, assumed: &Assumptions<'_>) -> Explained<'c> {
    let url = match parse_url(request.url) {
        Ok(url) => url,
        Err(e) => return Explained { url: Err(e), fast_path: false, kept: false, checked: Vec::new(), plan: None, verdict: None },
    };
    let headers = HeaderMap::from_pairs(request.headers);
    let client = facts::ClientFacts {
        country: request.country.map(str::to_string),
        asn: request.asn,
        verified_bot: request.verified_bot.map(str::to_string),
        colo: None,
    };
    let secrets = Secrets { admin_token: None, log_key: request.log_key.map(<[u8]>::to_vec), named: request.secrets.to_vec() };
    let facts = Facts { method: request.method, url: url.as_str(), headers: &headers, client: &client, secrets: &secrets, now_ms: request.now_ms };
    // This process keeps no plans: a request is planned, as the Worker plans
    // its first.
    let memo = PlanMemo::new(1);
    let (entry, walked) = machine::entry(config, &memo, url.as_str(), Plane::Zone);
    let fast_path = entry == Door::Pass;
    let mut machine = Machine::new(config, facts, &memo, walked);
    let decision = loop {
        match machine.next(None) {
            // Given up front: what the Worker reads, capped as it caps it.
            Next::Body { limit, .. } => machine.body(&match request.body {
                Some(bytes) if bytes.len() > limit as usize => BodyRead::Unusable,
                Some(bytes) => BodyRead::Read(bytes.to_vec()),
                None => BodyRead::Read(Vec::new()),
            }),
            // All here: the Worker would go on to count.
            Next::Upload(_) => machine.uploaded(Receipt::Complete, request.now_ms),
            Next::Admin => {
                let plan = Some(machine.decided().plan);
                return Explained { url: Ok(url), fast_path, kept: false, checked: Vec::new(), plan, verdict: None };
            }
            Next::Count(checks) => {
                let outcomes = checks.iter().map(|(a, op)| assumed.of(&a.rule.name).outcome(a, *op, request.now_ms)).collect();
                break machine.counted(outcomes);
            }
            Next::Decided => break machine.decided(),
        }
    };
    let verdict = Some(Verdict { answer: decision.answer, events: decision.logs });
    let kept = decision.kept.is_some();
    Explained { url: Ok(url), fast_path, kept, checked: decision.settle.applied, plan: Some(decision.plan), verdict }
}

pub fn parse_url(text: &str) -> Result<Url, String> {
    let parsed = match Url::parse(text) {
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            let slash = if text.starts_with(['/', '\\']) { "" } else { "/" };
            Url::parse(&format!("https://example.com{slash}{text}"))
        }
        other => other,
    };
    parsed.map_err(|e| format!("`{text}` is not a URL: {e}"))
}

/// Why `rule` does not apply, under the request's own method (overrides
/// are shown apart).
fn why_not(rule: &Rule, plan: &Plan<'_>, header: &dyn Fn(&str) -> Option<String>) -> String {
    let Some(c) = &plan.canonical else { return "not reached".into() };
    let method = c.methods.first().map_or("GET", String::as_str);
    let view = RequestView { method, host: &c.host, path: &c.path, query: &c.query };
    match rule.evaluate(&view).and_then(|_| rule.headers_hold(header)) {
        Err(why) => why.to_string(),
        Ok(()) => "matches under no candidate method".into(),
    }
}

/// What a success would do to the rule for this request.
fn success(on: &crate::config::policy::OnSuccess, own_method: bool) -> String {
    let action = match on.action {
        crate::config::policy::SuccessAction::Clear => "clears the count",
        crate::config::policy::SuccessAction::Decrement => "forgives one failure",
    };
    let identity = match &on.identity_header {
        Some(h) => format!(" for the account named in `{h}`"),
        None => " (no success_identity_header: forgeable)".to_string(),
    };
    if own_method {
        format!("{:?} {action}{identity}", on.statuses)
    } else {
        "never for this request: not matched by its own method (an override, HEAD for GET, or OPTIONS)".to_string()
    }
}

/// The rule's lease mode for `explain --json`, with the state it assumes
/// (no tokens held: the request asks the object).
fn lease_json(rule: &Rule) -> Value {
    let mode = match rule.lease {
        crate::count::lease::LeaseMode::Auto(_) => "auto",
        crate::count::lease::LeaseMode::Off => "off",
        crate::count::lease::LeaseMode::ForcedOff(_) => "forced_off",
    };
    let mut out = json!({ "mode": mode, "leases": rule.lease.leases(), "assumed_held": 0, "describe": lease(rule) });
    if let Some(s) = rule.lease.settings() {
        out["ttl_ms"] = json!(s.ttl_ms);
        out["max"] = json!(s.max.min(s.ceiling));
    }
    out
}

/// What `tollgate check` says about the rule's leases: only for rules that
/// lease, or that could but are forced off; `None` for the others (small
/// limits, `lease = "off"`).
pub(crate) fn lease_note(rule: &Rule) -> Option<String> {
    let smallest = rule.limits.iter().map(|l| l.requests.get()).min().unwrap_or(1);
    let could = crate::count::lease::LeaseSettings::new(1, crate::count::lease::DEFAULT_LEASE_MAX, smallest).can_lease();
    match rule.lease {
        crate::count::lease::LeaseMode::ForcedOff(_) if could => Some(format!("rule `{}`: lease {}", rule.name, lease(rule))),
        _ if rule.lease.leases() => Some(format!("rule `{}`: lease {}", rule.name, lease(rule))),
        _ => None,
    }
}

/// The report as text.
pub(crate) fn explain(config: &Config, request: &ExplainRequest<'_>, assumed: &Assumptions<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "request:    {} {}", request.method.to_ascii_uppercase(), request.url);
    let explained = run(config, request, assumed);
    let plan = match (&explained.url, &explained.plan) {
        (Err(e), _) => {
            let _ = writeln!(out, "rejected:   {e}");
            return out;
        }
        (Ok(_), None) => return out,
        (Ok(_), Some(plan)) => plan,
    };
    let Some(c) = &plan.canonical else {
        if let Some(v) = &explained.verdict {
            let _ = writeln!(out, "rejected:   {} Bad Request ({}); never reaches the origin", describe(&v.answer, &config.upstream), detail(&v.answer));
        }
        return out;
    };
    write_canonical(&mut out, config, c, &explained);
    let header = header_lookup(request.headers);
    for rule in &config.rules {
        match plan.matched.iter().find(|m| std::ptr::eq(m.rule, rule)) {
            None => {
                let _ = writeln!(out, "rule {}: no match ({})", rule.name, why_not(rule, plan, &header));
            }
            Some(m) => write_rule(&mut out, m, c, request),
        }
    }
    if let Some(v) = &explained.verdict {
        write_verdict(&mut out, config, v, assumed, explained.kept);
    }
    let _ = writeln!(out, "matching rules: {} of {}", plan.matched.len(), config.rules.len());
    out
}

/// The canonical view's lines: host, path, parameters, methods.
fn write_canonical(out: &mut String, config: &Config, c: &Canonical, explained: &Explained<'_>) {
    let _ = writeln!(out, "host:       {}", if c.host.is_empty() { "(none)" } else { &c.host });
    let _ = writeln!(out, "canonical:  {}", c.path);
    let _ = writeln!(out, "query:      {}", parameters(&c.query));
    if let Some(why) = &c.unreadable_body {
        let _ = writeln!(
            out,
            "body:       unreadable ({why}): query conditions that read the body hold, and a POST may be any method a rule lists (fail safe)"
        );
    }
    let _ = writeln!(out, "methods:    {}", c.methods.join(", "));
    if api::is_admin_path(&config.admin_prefix, &c.path) {
        let _ = writeln!(out, "admin:      with the secret TOLLGATE_ADMIN_TOKEN set, the admin API answers this path instead");
    }
    if explained.fast_path {
        let _ = writeln!(out, "fast path:  no rule's host and path take it: forwarded with nothing else read (no header, cookie, body or secret)");
    }
}

/// Each calendar window's period at `now_ms`: where it began,
/// where it ends and the quota comes back whole.
fn write_periods(out: &mut String, limits: &[crate::count::limit::Limit], now_ms: i64) {
    for (limit, calendar) in limits.iter().filter_map(|l| Some((l, l.calendar?))) {
        let period = calendar.period(now_ms);
        let left = crate::config::describe::duration(u64::try_from(period.end_ms - now_ms).unwrap_or(0).div_ceil(1000) * 1000);
        let _ = writeln!(
            out,
            "  period:   {} per calendar {} in {}: from {} to {} (the quota comes back whole in {left})",
            limit.requests,
            calendar.unit.name(),
            calendar.zone.name(),
            calendar.local_text(period.start_ms),
            calendar.local_text(period.end_ms)
        );
    }
}

/// A matching rule's lines: how it matched, policy, limits, key, success.
fn write_rule(out: &mut String, m: &Matched<'_>, c: &Canonical, request: &ExplainRequest<'_>) {
    let rule = m.rule;
    let via = how_matched(&c.path, &m.found.matched_path).map(|how| format!(" as {} ({how})", m.found.matched_path)).unwrap_or_default();
    let _ = writeln!(out, "rule {}: MATCH (path `{}`{via})", rule.name, rule.path);
    if let Some(e) = &m.exempt {
        let _ = writeln!(out, "  exempt:   by {} ({}): not counted, not limited", e.by.kind(), e.by.detail());
    }
    let _ = writeln!(out, "  policy:   {}", policy(rule));
    let _ = writeln!(out, "  limits:   {}", limits(&rule.limits));
    if let Some(priced) = rule.usage.as_ref().and_then(|u| u.price.as_ref()) {
        let spend: Vec<String> = rule.limits.iter().map(|l| format!("{} {}", crate::config::price::decimal(u64::from(l.requests.get()) * priced.step), priced.table.currency)).collect();
        let _ = writeln!(out, "  money:    {} (counted in {}; the prices are in the policy line)", spend.join(", "), priced.unit_words());
    }
    write_periods(out, &rule.limits, request.now_ms);
    let shape = rule.refusal_shape().map(|p| {
        let wait = crate::config::response::SDK_RETRY_WAIT_S;
        format!("{}'s error JSON (its SDKs' rate-limit error; x-should-retry: false past {wait} s)", p.name())
    });
    if rule.response.is_some() || shape.is_some() {
        let json = shape.unwrap_or_else(|| "problem+json".to_string());
        let body = match &rule.response {
            Some(r) if r.has_body() && r.is_json() => r.content_type.clone(),
            Some(r) if r.has_body() => format!("{} to clients not asking for JSON, else {json}", r.content_type),
            _ => json,
        };
        let _ = writeln!(out, "  response: {} when blocked, {body}", rule.response.as_ref().map_or(429, |r| r.status));
    }
    match rule.metrics {
        MetricsLevel::Off => {
            let _ = writeln!(out, "  metrics:  off");
        }
        MetricsLevel::All => {
            let _ = writeln!(out, "  metrics:  every decision (allowed too)");
        }
        MetricsLevel::Limited => {}
    }
    let _ = writeln!(out, "  lease:    {}", lease(rule));
    if rule.lease.leases() {
        let _ = writeln!(out, "            assumed: this isolate holds no tokens for the key, so this request asks the object");
    }
    write_key(out, m, request);
    if let Some(on) = &rule.on_success {
        let _ = writeln!(out, "  success:  {}", success(on, m.own_method));
    }
}

/// A matching rule's key lines: each key, its hash, its override.
fn write_key(out: &mut String, m: &Matched<'_>, request: &ExplainRequest<'_>) {
    match &m.key {
        KeyOutcome::Keys { keys, fell_back } => {
            let how = match request.log_key {
                Some(_) => "HMAC-SHA256 with the log key",
                None => "unkeyed SHA-256: give the Worker's TOLLGATE_LOG_KEY if it has one",
            };
            for (i, key) in keys.iter().enumerate() {
                let note = match (fell_back, i) {
                    (true, _) => " (fallback_key)",
                    (false, 0) => "",
                    (false, _) => " (another identity an origin could read: charged too)",
                };
                let _ = writeln!(out, "  key:      {key}{note}");
                let _ = writeln!(out, "  key hash: {} ({how})", key_hash(key, request.log_key));
                if let Some(own) = m.rule.overrides.limits_for(key) {
                    let _ = writeln!(out, "  limits:   {} (the override for this key)", limits(own));
                    write_periods(out, own, request.now_ms);
                }
            }
        }
        KeyOutcome::Skipped(missing) => {
            let _ = writeln!(out, "  key:      {missing}: rule skipped");
        }
        KeyOutcome::Rejected(missing) => {
            let _ = writeln!(out, "  key:      {missing}: answered 400");
        }
    }
}

/// The verdict's lines: what was assumed, the answer, the log lines.
fn write_verdict(out: &mut String, config: &Config, v: &Verdict, assumed: &Assumptions<'_>, kept: bool) {
    let _ = writeln!(out, "assuming:   {}", describe_assumptions(assumed));
    let _ = writeln!(out, "answer:     {}", describe(&v.answer, &config.upstream));
    if let Answer::Respond(r) = &v.answer {
        let _ = writeln!(out, "body:       {}", r.header("content-type").unwrap_or("(none)"));
    }
    for event in &v.events {
        let _ = writeln!(out, "log:        {}", event.line());
    }
    if kept {
        let _ = writeln!(out, "memo:       the Worker keeps this plan: the client's identical repeats skip planning while it is blocked");
    }
}

/// How the path a rule matched differs from the canonical path, if it
/// does: a format suffix removed, a trailing slash added, letters folded
/// (a case-insensitive rule).
pub(crate) fn how_matched(canonical: &str, matched: &str) -> Option<String> {
    if canonical == matched {
        return None;
    }
    let (c, m) = (canonical.to_lowercase(), matched.to_lowercase());
    let slash = m.len() > 1 && m.ends_with('/') && !c.starts_with(&m);
    let head = if slash { &m[..m.len() - 1] } else { &m[..] };
    let mut notes = Vec::new();
    if head.len() < c.len() {
        notes.push("format suffix removed");
    }
    if slash {
        notes.push("trailing slash added");
    }
    if c.starts_with(head) && !canonical.starts_with(&matched[..head.len()]) {
        notes.push("case-insensitive");
    }
    Some(notes.join(", "))
}

/// The parameters, each but the URL query's marked with where it came
/// from (`mode=heavy (body)`, `mode=heavy (cookie)`).
fn parameters(query: &CanonicalQuery) -> String {
    let pairs: Vec<String> = query
        .pairs()
        .iter()
        .zip(query.sources())
        .map(|((k, v), source)| match source {
            Source::Query => format!("{k}={v}"),
            other => format!("{k}={v} ({})", other.name()),
        })
        .collect();
    if pairs.is_empty() {
        "(empty)".to_string()
    } else {
        pairs.join("  ")
    }
}

fn describe_assumptions(assumed: &Assumptions<'_>) -> String {
    let name = |a: Assumed| match a {
        Assumed::Allowed => "allows",
        Assumed::Blocked => "blocks",
        Assumed::Failed => "fails",
    };
    let mut text = format!("every counter {}", name(assumed.default));
    for (rule, a) in assumed.per_rule {
        let _ = write!(text, "; `{rule}`'s {}", name(*a));
    }
    text
}

fn describe(answer: &Answer, upstream: &Upstream) -> String {
    let to = match upstream {
        Upstream::Origin => "the origin".to_string(),
        Upstream::Service(binding) => format!("service binding `{binding}` (env.{binding}.fetch)"),
    };
    match answer {
        Answer::Forward { fields } if fields.is_empty() => format!("forward to {to}"),
        Answer::Forward { fields } => {
            let names: Vec<String> = fields.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            format!("forward to {to}, adding {}", names.join("; "))
        }
        Answer::Respond(r) => {
            let retry = r.header("retry-after").map(|s| format!(" (Retry-After: {s})")).unwrap_or_default();
            format!("{}{retry}", r.status)
        }
    }
}

fn detail(answer: &Answer) -> String {
    match answer {
        Answer::Respond(r) => serde_json::from_str::<Value>(&r.body)
            .ok()
            .and_then(|b| b.get("detail").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default(),
        Answer::Forward { .. } => String::new(),
    }
}

fn header_lookup(headers: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
    move |name: &str| {
        let values: Vec<&str> = headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        (!values.is_empty()).then(|| values.join(", "))
    }
}

/// The report as JSON (`tollgate explain --json`): what the differential
/// test compares with the Worker.
pub(crate) fn explain_json(config: &Config, request: &ExplainRequest<'_>, assumed: &Assumptions<'_>) -> Value {
    let explained = run(config, request, assumed);
    let plan = match (&explained.url, &explained.plan) {
        (Err(e), _) => return json!({ "error": e }),
        (_, None) => return json!({ "error": "no plan" }),
        (Ok(_), Some(plan)) => plan,
    };
    let header = header_lookup(request.headers);
    let canonical = plan.canonical.as_ref().map(|c| {
        json!({
            "host": c.host,
            "path": c.path,
            "query": c.query.pairs(),
            "sources": c.query.sources().iter().map(|s| s.name()).collect::<Vec<_>>(),
            "unreadable_body": c.unreadable_body.as_ref().map(ToString::to_string),
            "methods": c.methods,
        })
    });
    let rules: Vec<Value> = config.rules.iter().map(|rule| rule_json(rule, plan, &header, request)).collect();
    let checked: Vec<Value> = explained.checked.iter().map(|a| checked_json(a, request.now_ms)).collect();
    let answer = explained.verdict.as_ref().map(|v| match &v.answer {
        Answer::Forward { fields } => json!({ "answer": "forward", "fields": fields }),
        Answer::Respond(r) => json!({ "answer": r.status, "headers": r.headers, "body": serde_json::from_str::<Value>(&r.body).unwrap_or(Value::Null) }),
    });
    let events: Vec<Value> = explained
        .verdict
        .as_ref()
        .map(|v| v.events.iter().filter_map(|e| serde_json::from_str(&e.line()).ok()).collect())
        .unwrap_or_default();
    json!({
        "canonical": canonical,
        "fast_path": explained.fast_path,
        "rules": rules,
        "checked": checked,
        "verdict": answer,
        "events": events,
        "memo_kept": explained.kept,
    })
}

/// One rule of the config, and what became of it for this request.
fn rule_json(rule: &Rule, plan: &Plan<'_>, header: &dyn Fn(&str) -> Option<String>, request: &ExplainRequest<'_>) -> Value {
    // The rule as the config spells it, every field (what `GET /rules`
    // lists), and the few its verdict turns on, at the top.
    let config = describe::rule_json(rule);
    let mut entry = json!({
        "name": rule.name,
        "action": rule.action.name(),
        "on_error": rule.on_error.name(),
        "count_statuses": match &rule.counting { Counting::All => Value::Null, Counting::Statuses(s) => json!(s) },
        "on_missing_key": config["on_missing_key"],
        "lease": lease_json(rule),
        "config": config,
    });
    let Some(m) = plan.matched.iter().find(|m| std::ptr::eq(m.rule, rule)) else {
        entry["matched"] = json!(false);
        entry["why_not"] = json!(why_not(rule, plan, header));
        return entry;
    };
    entry["matched"] = json!(true);
    entry["matched_path"] = json!(m.found.matched_path);
    entry["own_method"] = json!(m.own_method);
    if let Some(e) = &m.exempt {
        entry["exempt"] = json!({ "by": e.by.kind(), "detail": e.by.detail() });
    }
    match &m.key {
        KeyOutcome::Keys { keys, fell_back } => {
            entry["key"] = json!(keys.first());
            entry["key_hash"] = json!(keys.first().map(|k| key_hash(k, request.log_key)));
            entry["keys"] = json!(keys);
            entry["key_hashes"] = json!(keys.iter().map(|k| key_hash(k, request.log_key)).collect::<Vec<_>>());
            entry["fell_back"] = json!(fell_back);
        }
        KeyOutcome::Skipped(missing) => entry["skipped"] = json!(missing.to_string()),
        KeyOutcome::Rejected(missing) => entry["rejected"] = json!(missing.to_string()),
    }
    entry
}

/// A checked rule: the counter asked (its key hash: a trusted device's own
/// bucket, not the account's), and the limits it counts under.
fn checked_json(a: &Applied<'_>, now_ms: i64) -> Value {
    let limits: Vec<Value> = a.rule.limits_for(&a.key).iter().map(|l| json!([l.requests.get(), l.window_ms.get()])).collect();
    let source = if a.rule.overrides.limits_for(&a.key).is_some() { "override" } else { "config" };
    let mut out = json!({ "rule": a.rule.name, "key_hash": a.key_hash, "device": a.device.is_some(), "limits": limits, "limits_source": source });
    // A calendar window's period, in the order of `limits`.
    let periods: Vec<Value> = a
        .rule
        .limits_for(&a.key)
        .iter()
        .map(|l| match l.calendar {
            None => Value::Null,
            Some(c) => {
                let p = c.period(now_ms);
                json!({ "window": c.spelling(), "start_ms": p.start_ms, "end_ms": p.end_ms })
            }
        })
        .collect();
    if periods.iter().any(|p| !p.is_null()) {
        out["periods"] = Value::Array(periods);
    }
    out
}

/// How `explain` says a usage rule counts.
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALLOWED: Assumptions<'static> = Assumptions { default: Assumed::Allowed, per_rule: &[] };

    fn request<'a>(method: &'a str, url: &'a str, headers: &'a [(String, String)]) -> ExplainRequest<'a> {
        ExplainRequest { method, url, headers, body: None, country: None, asn: None, verified_bot: None, secrets: &[], log_key: None, now_ms: 0 }
    }

    /// The console's "Try it": for every rule of the shipped
    /// config, the presets and the examples, `explain` of the sample request
    /// matches that rule and reads its whole key (no `answered 400`).
    #[test]
    fn the_consoles_try_it_matches_its_rule_in_explain() {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut files = vec![format!("{root}/wrangler.toml")];
        for dir in ["packages/tollgate/presets", "examples"] {
            for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap().flatten() {
                let path = entry.path();
                let toml = if path.is_dir() { path.join("wrangler.toml") } else { path };
                if toml.extension().is_some_and(|e| e == "toml") && toml.exists() {
                    files.push(toml.display().to_string());
                }
            }
        }
        let mut tried = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let Ok(wrangler) = crate::tools::wrangler::parse(&file, &text) else { continue };
            let Some(rules) = wrangler.pointer("/vars/TOLLGATE").cloned() else { continue };
            let Ok(config) = Config::from_json(&rules) else { continue };
            for rule in &config.rules {
                let sample = crate::admin::console::rules::sample(rule, &config.rules).unwrap_or_else(|e| panic!("{file}: {}: {e}", rule.name));
                let mut headers = sample.headers.clone();
                headers.push(("cf-connecting-ip".into(), crate::admin::console::rules::SAMPLE_IP.into()));
                let url = format!("https://{}{}", sample.host, sample.path_and_query);
                let request = ExplainRequest { method: &sample.method, url: &url, headers: &headers, body: sample.body.as_deref().map(str::as_bytes), country: sample.country, asn: sample.asn, verified_bot: None, secrets: &[], log_key: None, now_ms: 0 };
                let text = explain(&config, &request, &ALLOWED);
                assert!(text.contains(&format!("rule {}: MATCH", rule.name)), "{file}: {}\n{}\n{text}", rule.name, sample.command());
                assert!(!text.contains("answered 400"), "{file}: {}\n{}\n{text}", rule.name, sample.command());
                tried += 1;
            }
        }
        assert!(tried >= 10, "the presets and examples were read: {tried}");
    }

    /// A money rule's limits in its currency, its prices in the policy.
    #[test]
    fn a_money_rule_shows_its_budget_in_its_currency_and_its_prices() {
        let config = crate::testing::config(json!([
            {"name": "yen", "path": "/ask", "counting": {"mode": "response", "reservation_ttl": "10m"},
             "metering": {"usage": "openai", "reserve": 1000, "max": 1000, "price": {"currency": "JPY", "models": {"gpt-4o-mini*": {"input": 22.5, "output": 90}}}},
             "limits": [{"spend": 200, "window": "day", "time_zone": "Asia/Tokyo"}, {"spend": 0.5, "window": "1m"}]},
        ]));
        let headers = vec![("cf-connecting-ip".to_string(), "203.0.113.7".to_string())];
        let text = explain(&config, &request("post", "https://example.com/ask", &headers), &ALLOWED);
        assert!(text.contains("  money:    200 JPY, 0.5 JPY (counted in micro-JPY"), "{text}");
        assert!(text.contains("reserves 90000 = 1000 tokens at the table's highest price") && text.contains("gpt-4o-mini* in 22.5 (cached 22.5, cache write 22.5) out 90"), "{text}");
    }

    /// A shared table's name beside its prices; a budget above
    /// 4294.967295 in its currency, counted in milli-units, with the bound.
    #[test]
    fn a_shared_table_and_a_milli_unit_budget_are_shown() {
        let config = Config::from_json(&json!({ "prices": { "openai": {"currency": "USD", "models": {"gpt-4o-mini*": {"input": 0.15, "output": 0.6}}} }, "rules": [
            {"name": "team", "path": "/ask", "counting": {"mode": "response", "reservation_ttl": "10m"},
             "metering": {"usage": "openai", "reserve": 1000, "max": 1000, "price": "openai"},
             "limits": [{"spend": 10000, "window": "month", "time_zone": "UTC"}]},
        ] })).unwrap();
        let headers = vec![("cf-connecting-ip".to_string(), "203.0.113.7".to_string())];
        let text = explain(&config, &request("post", "https://example.com/ask", &headers), &ALLOWED);
        assert!(text.contains("  money:    10000 USD (counted in milli-USD: a spend above 4294.967295 USD does not fit micro-units; each answer's charge is rounded up to 0.001 USD"), "{text}");
        assert!(text.contains("reserves 1 = 1000 tokens at the table's highest price") && text.contains("prices: the shared table `openai` (top-level prices), USD per million tokens: gpt-4o-mini* in 0.15"), "{text}");
    }

    #[test]
    fn a_calendar_window_shows_its_period_and_a_refusal_waits_for_its_end() {
        let config = crate::testing::config(json!([
            {"name": "school", "path": "/ask", "ratelimit_headers": true,
             "limits": [{"requests": 300, "window": "day", "time_zone": "Asia/Tokyo"}]},
        ]));
        let headers = vec![("cf-connecting-ip".to_string(), "203.0.113.7".to_string())];
        // 2027-01-15T08:00Z: 17:00 in Tokyo, seven hours before its midnight.
        let request = ExplainRequest { now_ms: 1_800_000_000_000, ..request("get", "https://example.com/ask", &headers) };
        let text = explain(&config, &request, &ALLOWED);
        assert!(text.contains("  limits:   300 per calendar day in Asia/Tokyo\n"), "{text}");
        assert!(
            text.contains("  period:   300 per calendar day in Asia/Tokyo: from 2027-01-15T00:00+09:00 to 2027-01-16T00:00+09:00 (the quota comes back whole in 7h)\n"),
            "{text}"
        );
        let blocked = explain(&config, &request, &Assumptions { default: Assumed::Blocked, per_rule: &[] });
        assert!(blocked.contains("Retry-After: 25200") || blocked.contains("retry-after: 25200"), "{blocked}");
    }

    #[test]
    fn explains_a_bypass_variant() {
        let config = crate::testing::config(json!([
            {"name": "heavy-example", "path": "/api/example", "query": {"mode": "heavy"},
             "limits": [{"requests": 10, "window": "60s"}]},
            {"name": "login", "path": "/login", "key": ["body:email"], "limits": [{"requests": 5, "window": "15m"}]},
        ]));
        let headers = vec![("cf-connecting-ip".to_string(), "2001:db8::1".to_string())];
        let text = explain(
            &config,
            &request("get", "https://example.com/api/example%2ejson?mode=normal&mode=heavy", &headers),
            &ALLOWED,
        );
        assert!(text.contains("canonical:  /api/example.json\n"), "{text}");
        assert!(text.contains("query:      mode=normal  mode=heavy\n"), "{text}");
        assert!(text.contains("rule heavy-example: MATCH (path `/api/example` as /api/example (format suffix removed))"), "{text}");
        assert!(text.contains("  key:      ip=2001:db8::/64\n"), "{text}");
        assert!(text.contains("rule login: no match (path `/api/example.json` does not match `/login`)"), "{text}");
        assert!(text.contains("answer:     forward to the origin\n"), "{text}");
        assert!(text.ends_with("matching rules: 1 of 2\n"), "{text}");

        let rejected = explain(&config, &request("GET", "/api/example%00", &[]), &ALLOWED);
        assert!(rejected.contains("rejected:   400 Bad Request"), "{rejected}");

        let no_ip = explain(&config, &request("GET", "/api/example?mode=heavy", &[]), &ALLOWED);
        assert!(no_ip.contains("no usable `ip`: answered 400"), "{no_ip}");
        assert!(no_ip.contains("answer:     400"), "{no_ip}");
    }

    #[test]
    fn names_the_service_binding_an_allowed_request_goes_to() {
        let config = Config::from_json(&json!({ "upstream": { "service": "APP" }, "rules": [
            { "name": "api", "path": "/api/*", "limits": [{ "requests": 10, "window": "60s" }] },
        ] }))
        .unwrap();
        let headers = vec![("cf-connecting-ip".to_string(), "203.0.113.7".to_string())];
        let text = explain(&config, &request("GET", "https://example.com/api/x", &headers), &ALLOWED);
        assert!(text.contains("answer:     forward to service binding `APP` (env.APP.fetch)\n"), "{text}");
    }

    #[test]
    fn says_whether_a_success_would_settle_the_rule() {
        let config = crate::testing::config(json!([
            {"name": "login", "path": "/login", "methods": ["POST"], "key": ["header:x-user"], "count_statuses": [401],
             "clear_on_success": true, "limits": [{"requests": 5, "window": "15m"}]},
        ]));
        let headers = vec![("cf-connecting-ip".to_string(), "203.0.113.7".to_string()), ("x-user".to_string(), "ann".to_string())];
        let own = explain(&config, &request("POST", "/login", &headers), &ALLOWED);
        assert!(own.contains("  success:  [200, 204] clears the count (no success_identity_header: forgeable)\n"), "{own}");
        let mut overridden = headers.clone();
        overridden.push(("x-http-method-override".to_string(), "GET".to_string()));
        let text = explain(&config, &request("POST", "/login", &overridden), &ALLOWED);
        assert!(text.contains("  success:  never for this request: not matched by its own method"), "{text}");
        let json = explain_json(&config, &request("POST", "/login", &overridden), &ALLOWED);
        assert_eq!(json["rules"][0]["own_method"], false, "{json}");
        // Every field of the rule, as `GET /rules` lists it (one function).
        assert_eq!(json["rules"][0]["config"], describe::rule_json(&config.rules[0]));
        assert_eq!(json["rules"][0]["config"]["on_success"], "clear", "{json}");
    }

    #[test]
    fn a_method_override_is_limited_as_the_worker_limits_it() {
        // The drift this module had: a POST overridden to DELETE matched no rule.
        let config = crate::testing::config(json!([
            {"name": "delete", "path": "/posts/:id", "methods": ["DELETE"], "limits": [{"requests": 3, "window": "1m"}]},
        ]));
        let headers = vec![
            ("cf-connecting-ip".to_string(), "198.51.100.1".to_string()),
            ("X-HTTP-Method-Override".to_string(), "DELETE".to_string()),
        ];
        let blocked = Assumptions { default: Assumed::Blocked, per_rule: &[] };
        let text = explain(&config, &request("POST", "/posts/7", &headers), &blocked);
        assert!(text.contains("methods:    POST, DELETE\n"), "{text}");
        assert!(text.contains("rule delete: MATCH"), "{text}");
        assert!(text.contains("answer:     429 (Retry-After: 60)"), "{text}");
        let json = explain_json(&config, &request("POST", "/posts/7", &headers), &blocked);
        assert_eq!(json["verdict"]["answer"], 429);
        assert_eq!(json["checked"][0]["rule"], "delete");
        assert_eq!(json["events"][0]["tollgate"], "block");
    }

    /// The assumed answers are the object's own step, so they
    /// say what the Worker's object says: the binding window named (the
    /// longest, whose wait it is), and a GCRA key refused for one emission
    /// interval (it refills continuously), not for the longest window.
    #[test]
    fn an_assumed_refusal_is_the_objects_own_answer() {
        let config = crate::testing::config(json!([
            {"name": "reports", "path": "/r", "ratelimit_headers": true, "limits": [{"requests": 3, "window": "1m"}, {"requests": 20, "window": "1h"}]},
            {"name": "bulk", "path": "/g", "algorithm": "gcra", "limits": [{"requests": 50_000, "window": "1m"}]},
        ]));
        let headers = vec![("cf-connecting-ip".to_string(), "198.51.100.1".to_string())];
        let blocked = Assumptions { default: Assumed::Blocked, per_rule: &[] };
        let ratelimit = |json: &Value, list: &str| json["verdict"][list].as_array().and_then(|fields| fields.iter().find(|f| f[0] == "ratelimit")).cloned();
        let json = explain_json(&config, &request("GET", "/r", &headers), &blocked);
        assert_eq!(ratelimit(&json, "headers"), Some(json!(["ratelimit", "\"reports/3600s\";r=0;t=3600"])), "{json}");
        let allowed = explain_json(&config, &request("GET", "/r", &headers), &ALLOWED);
        assert_eq!(ratelimit(&allowed, "fields"), Some(json!(["ratelimit", "\"reports/60s\";r=2;t=60"])), "{allowed}");
        let text = explain(&config, &request("GET", "/g", &headers), &blocked);
        assert!(text.contains("answer:     429 (Retry-After: 1)"), "{text}");
    }

    #[test]
    fn a_penalty_is_shown_and_a_refusal_is_assumed_to_start_it() {
        let config = crate::testing::config(json!([
            {"name": "search", "path": "/search", "limits": [{"requests": 3, "window": "1m"}], "penalty": "10m"},
        ]));
        let headers = vec![("cf-connecting-ip".to_string(), "198.51.100.1".to_string())];
        let blocked = Assumptions { default: Assumed::Blocked, per_rule: &[] };
        let text = explain(&config, &request("GET", "/search", &headers), &blocked);
        assert!(text.contains("; penalty 10m (a refusal keeps the key refused that long)"), "{text}");
        assert!(text.contains("answer:     429 (Retry-After: 600)"), "{text}");
        let json = explain_json(&config, &request("GET", "/search", &headers), &blocked);
        assert_eq!(json["rules"][0]["config"]["penalty"], "10m", "{json}");
        assert_eq!((&json["events"][0]["reason"], &json["events"][0]["retry_after_ms"]), (&json!("penalty"), &json!(600_000)));
    }

    #[test]
    fn a_form_body_joins_the_query_and_the_country_comes_from_cf() {
        let config = crate::testing::config(json!([
            {"name": "heavy", "path": "/api/example", "query": {"mode": "heavy"}, "key": ["country"],
             "limits": [{"requests": 1, "window": "1m"}]},
        ]));
        let headers = vec![("content-type".to_string(), "application/x-www-form-urlencoded".to_string())];
        let req = ExplainRequest {
            method: "POST",
            url: "/api/example",
            headers: &headers,
            body: Some(b"mode=heavy"),
            country: Some("nz"),
            asn: None,
            verified_bot: None,
            secrets: &[],
            log_key: None,
            now_ms: 0,
        };
        let json = explain_json(&config, &req, &ALLOWED);
        assert_eq!(json["rules"][0]["matched"], true, "{json}");
        assert_eq!(json["rules"][0]["key"], "country=NZ", "{json}");
        // A header cannot stand in for `cf.country`.
        let spoofed = vec![("cf-ipcountry".to_string(), "NZ".to_string())];
        let json = explain_json(&config, &request("GET", "/api/example?mode=heavy", &spoofed), &ALLOWED);
        assert_eq!(json["verdict"]["answer"], 400, "{json}");
    }

    #[test]
    fn shows_where_parameters_came_from_and_an_unreadable_body() {
        let config = crate::testing::config(json!([
            {"name": "heavy", "path": "/api/example", "query": {"mode": "heavy"}, "query_sources": ["query", "body", "cookie"],
             "limits": [{"requests": 1, "window": "1m"}]},
        ]));
        let headers = vec![
            ("cf-connecting-ip".to_string(), "203.0.113.7".to_string()),
            ("content-type".to_string(), "multipart/form-data; boundary=b".to_string()),
            ("cookie".to_string(), "mode=light".to_string()),
        ];
        let body = b"--b\r\nContent-Disposition: form-data; name=\"mode\"\r\n\r\nheavy\r\n--b--\r\n";
        let req = ExplainRequest { body: Some(body), ..request("POST", "/api/example?x=1", &headers) };
        let text = explain(&config, &req, &ALLOWED);
        assert!(text.contains("query:      x=1  mode=heavy (body)  mode=light (cookie)\n"), "{text}");
        assert!(text.contains("rule heavy: MATCH"), "{text}");
        let json = explain_json(&config, &req, &ALLOWED);
        assert_eq!(json["canonical"]["sources"], json!(["query", "body", "cookie"]), "{json}");
        assert_eq!(json["canonical"]["unreadable_body"], Value::Null);

        let mut gzip = headers.clone();
        gzip.push(("content-encoding".to_string(), "gzip".to_string()));
        let req = ExplainRequest { body: Some(b"\x1f\x8b"), ..request("POST", "/api/example", &gzip) };
        let text = explain(&config, &req, &ALLOWED);
        assert!(text.contains("body:       unreadable (Content-Encoding `gzip`): query conditions that read the body hold"), "{text}");
        assert!(text.contains("rule heavy: MATCH"), "{text}");
        let json = explain_json(&config, &req, &ALLOWED);
        assert_eq!(json["canonical"]["unreadable_body"], "Content-Encoding `gzip`");
        assert_eq!(json["checked"][0]["rule"], "heavy");
    }

    #[test]
    fn key_hashes_are_the_workers_with_or_without_its_log_key() {
        let config = crate::testing::config(json!([
            {"name": "login", "path": "/login", "key": ["body:email"], "limits": [{"requests": 5, "window": "15m"}]},
            {"name": "heavy", "path": "/heavy", "limits": [{"requests": 5, "window": "1m"}]},
        ]));
        let headers = vec![("cf-connecting-ip".to_string(), "2002:c000:22d:7::1".to_string())];
        let keyed = ExplainRequest { log_key: Some(b"log secret"), ..request("GET", "/heavy", &headers) };
        let json = explain_json(&config, &keyed, &ALLOWED);
        assert_eq!(json["rules"][1]["key"], "ip=192.0.2.45", "6to4 as its IPv4 address");
        let expected = key_hash("ip=192.0.2.45", Some(b"log secret"));
        assert_eq!(json["rules"][1]["key_hash"], expected.as_str());
        assert_eq!(json["checked"][0]["key_hash"], expected.as_str(), "the plan's hash is the same");
        let text = explain(&config, &keyed, &ALLOWED);
        assert!(text.contains(&format!("  key hash: {expected} (HMAC-SHA256 with the log key)")), "{text}");
        let unkeyed = explain_json(&config, &request("GET", "/heavy", &headers), &ALLOWED);
        assert_eq!(unkeyed["checked"][0]["key_hash"], key_hash("ip=192.0.2.45", None).as_str());

        // `tollgate hash --rule`: raw values, derived as the rule derives them.
        let values = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let email = rule_key(&config, "login", &values(&[("body:email", " Victim@Example.com")])).unwrap();
        assert_eq!(email, format!("body:email={}", crate::request::key::tests::hash_identity("victim@example.com").unwrap()));
        assert_eq!(rule_key(&config, "heavy", &values(&[("ip", "2001:DB8::1")])).unwrap(), "ip=2001:db8::/64");
        assert_eq!(
            rule_key(&config, "heavy", &values(&[("ip", "a&b=c")])).unwrap_err(),
            "rule `heavy`: the request has no usable `ip`: give it as `ip=VALUE`"
        );
        assert_eq!(rule_key(&config, "nope", &[]).unwrap_err(), "no rule named `nope`");
    }

    #[test]
    fn says_how_a_rule_matched_only_what_happened() {
        assert_eq!(how_matched("/a/b", "/a/b"), None);
        assert_eq!(how_matched("/a/b.json", "/a/b").as_deref(), Some("format suffix removed"));
        assert_eq!(how_matched("/a/b", "/a/b/").as_deref(), Some("trailing slash added"));
        assert_eq!(how_matched("/a/b.json", "/a/b/").as_deref(), Some("format suffix removed, trailing slash added"));
        assert_eq!(how_matched("/A/B", "/a/b").as_deref(), Some("case-insensitive"));
        assert_eq!(how_matched("/A/B.JSON", "/a/b").as_deref(), Some("format suffix removed, case-insensitive"));
    }

    /// `explain` judges a trusted-device cookie by the clock it is
    /// given, as the Worker does by its own: valid before its expiry (the
    /// device's bucket), the account's bucket after it.
    #[test]
    fn a_device_cookie_expires_in_explain_as_in_the_worker() {
        let config = crate::testing::config(json!([{
            "name": "login", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
            "on_success": "clear", "trusted_device": { "secret": "DEVICE_KEY", "cookie": "dev" },
            "limits": [{"requests": 3, "window": "15m"}],
        }]));
        const NOW: i64 = 1_800_000_000_000;
        let part = crate::request::key::KeyPart::parse("header:x-user").unwrap();
        let spelling = crate::request::spelling::Spelling::of(&[(&part, vec!["ann".into()])]).tag().unwrap();
        let token = crate::request::device::token(b"k", "login", "header:x-user=ann", &spelling, NOW / 1000 + 60);
        let headers = vec![
            ("cf-connecting-ip".to_string(), "203.0.113.7".to_string()),
            ("x-user".to_string(), "ann".to_string()),
            ("cookie".to_string(), format!("dev={token}")),
        ];
        let secrets = vec![("DEVICE_KEY".to_string(), "k".to_string())];
        let at = |now_ms| {
            let req = ExplainRequest { secrets: &secrets, now_ms, ..request("POST", "/login", &headers) };
            explain_json(&config, &req, &ALLOWED)["checked"][0]["key_hash"].clone()
        };
        let account = key_hash("header:x-user=ann", None);
        assert_ne!(at(NOW), account, "before its expiry: the device's own bucket");
        assert_eq!(at(NOW + 60_000), account, "expired: the account's bucket, as the Worker counts it");
    }
}

