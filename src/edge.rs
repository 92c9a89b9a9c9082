//! The Worker entry: [`plan`](crate::plan::plan) the request, do the I/O
//! the plan asks for (read the body, ask the blocked-until cache and the
//! limiter objects), fold their outcomes with
//! [`verdict`](crate::verdict::verdict), then forward or answer, and write
//! the verdict's log lines.
//!
//! Glue only: every decision is made by the pure modules; this file reads
//! the clock, the request and the environment, and talks to the platform
//! (the origin side is in [`crate::origin`]).
//!
//! Several rules may match one request. All are checked (concurrently), and
//! any `block` rule that is over its limit blocks the request. Each rule
//! counts independently: a request blocked by one rule is still recorded by
//! the other rules that allowed it (as separate WAF rate-limiting rules
//! would), so a client hammering a blocked endpoint also uses up its
//! broader allowance.

use crate::admin::{self, AdminAction, Gate};
use crate::blocked::{Block, BlockedUntilCache, DEFAULT_CAPACITY};
use crate::config::{self, Config, ConfigError};
use crate::episodes::{self, Episodes};
use crate::policy::FailPolicy;
use crate::headers::OwnResponse;
use crate::key::log_key;
use crate::plan::{self, AdminRoute, Applied, Body, RequestParts, Route};
use crate::protocol::{decode_reply_line, encode_call_url, Call, CallFailure, Op, Reply};
use crate::origin::{forward, read_body, with_fields};
use crate::verdict::{self, Answer, Answered, LogEvent, Outcome};
use futures_util::future::{join_all, select, Either};
use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use worker::{
    console_log, event, web_sys, Context, Date, Delay, Env, Headers, Request, Response,
};

/// The Durable Object namespace binding of the limiter objects.
const LIMITER_BINDING: &str = "LIMITER";
/// The structured var holding the config.
const CONFIG_VAR: &str = "TOLLGATE";
/// The secret that turns the admin API on.
const ADMIN_TOKEN_SECRET: &str = "TOLLGATE_ADMIN_TOKEN";
/// The secret that keys every `key_hash` in logs and admin output.
const LOG_KEY_SECRET: &str = "TOLLGATE_LOG_KEY";

/// Parsed once per isolate and kept for its life (leaked once, so that the
/// plan's rules can move into a `waitUntil` task, which must be `'static`):
/// the config, or its errors with the policy for requests.
type LoadedConfig = &'static Result<Config, (Vec<ConfigError>, FailPolicy)>;

/// An invalid config is logged at most once per isolate per this period.
const CONFIG_ERROR_LOG_PERIOD_MS: i64 = 60_000;

thread_local! {
    /// Parsed once per isolate: URLPatterns are compiled here, not per request.
    static CONFIG: RefCell<Option<LoadedConfig>> = const { RefCell::new(None) };
    static BLOCKED: RefCell<BlockedUntilCache> = RefCell::new(BlockedUntilCache::new(DEFAULT_CAPACITY));
    /// One log line per block or counter-error episode of a (rule, key).
    static EPISODES: RefCell<Episodes> =
        RefCell::new(Episodes::new(episodes::DEFAULT_CAPACITY, episodes::PERIOD_MS));
    /// When the invalid config was last logged (Unix ms).
    static CONFIG_ERROR_LOGGED: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
    /// Read once per isolate, like the config (a changed secret is a new
    /// deployment, hence new isolates); `None`: hashes are unkeyed.
    static LOG_KEY: OnceCell<Option<Rc<[u8]>>> = const { OnceCell::new() };
}

fn load_log_key(env: &Env) -> Option<Rc<[u8]>> {
    LOG_KEY.with(|cell| {
        cell.get_or_init(|| env.secret(LOG_KEY_SECRET).ok().and_then(|s| log_key(&s.to_string())).map(Rc::from))
            .clone()
    })
}

fn load_config(env: &Env) -> LoadedConfig {
    CONFIG.with(|cell| {
        if let Some(config) = *cell.borrow() {
            return config;
        }
        let parsed = match env.object_var::<serde_json::Value>(CONFIG_VAR) {
            Ok(value) => Config::from_json(&value).map_err(|errors| (errors, config::on_invalid_config(&value))),
            Err(e) => Err((
                vec![ConfigError { rule: None, field: CONFIG_VAR.into(), message: format!("cannot read the var: {e}") }],
                FailPolicy::Deny,
            )),
        };
        if let Ok(config) = &parsed {
            BLOCKED.with(|b| b.borrow_mut().set_capacity(config.blocked_cache_capacity, now_ms()));
        }
        let loaded: LoadedConfig = Box::leak(Box::new(parsed));
        *cell.borrow_mut() = Some(loaded);
        loaded
    })
}

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

/// Returns the raw `web_sys::Response`: the origin's response goes back to
/// the client as the very object `fetch` produced, never rebuilt.
#[event(fetch)]
pub async fn fetch(req: Request, env: Env, ctx: Context) -> worker::Result<web_sys::Response> {
    let config = load_config(&env);
    let config = match config.as_ref() {
        Ok(config) => config,
        Err((errors, policy)) => return invalid_config(req, &env, errors, *policy).await,
    };
    match limit(req, &env, &ctx, config).await {
        Ok(response) => Ok(response),
        Err(e) => {
            write_logs(&[LogEvent::new("edge_error", vec![("error", e.to_string().into())])]);
            respond(&OwnResponse::problem(502, "Bad Gateway", "The origin could not be reached.", None))
        }
    }
}

/// The config is invalid: `on_invalid_config` forwards every request
/// unlimited (`allow`) or answers 503 (`deny`, the default). The errors
/// are logged at most once a minute per isolate, never shown to clients.
async fn invalid_config(
    req: Request,
    env: &Env,
    errors: &[ConfigError],
    policy: FailPolicy,
) -> worker::Result<web_sys::Response> {
    let now = now_ms();
    let due = CONFIG_ERROR_LOGGED.with(|last| {
        let due = last.get().is_none_or(|at| now - at >= CONFIG_ERROR_LOG_PERIOD_MS);
        if due {
            last.set(Some(now));
        }
        due
    });
    if due {
        let detail: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let decision = if policy == FailPolicy::Allow { "allow" } else { "deny" };
        write_logs(&[LogEvent::new(
            "config_error",
            vec![("errors", detail.join("; ").into()), ("decision", decision.into())],
        )]);
    }
    if policy == FailPolicy::Allow {
        let url = req.url()?;
        return forward(req, &url, env).await;
    }
    respond(&OwnResponse::problem(503, "Service Unavailable", "The rate limiter's configuration is invalid.", Some(1)))
}

/// One of tollgate's own responses, as the raw response the runtime takes.
fn respond(own: &OwnResponse) -> worker::Result<web_sys::Response> {
    let out = Headers::new();
    for (name, value) in &own.headers {
        out.append(name, value)?;
    }
    Ok(Response::ok(own.body.clone())?.with_status(own.status).with_headers(out).into())
}

/// Writes `events`, one line each, except the repeats of a block or
/// counter-error episode ([`crate::episodes`]), which are counted instead.
fn write_logs(events: &[LogEvent]) {
    if events.is_empty() {
        return;
    }
    let lines = EPISODES.with(|e| e.borrow_mut().filter(events, now_ms()));
    for event in &lines {
        console_log!("{}", event.line());
    }
}

/// The request flow: plan (pure), the I/O the plan asks for, verdict (pure).
async fn limit(req: Request, env: &Env, ctx: &Context, config: &'static Config) -> worker::Result<web_sys::Response> {
    let url = req.url()?;
    // The method as sent (workers-rs maps methods it does not know to GET).
    let method = req.inner().method();
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let admin_token = || env.secret(ADMIN_TOKEN_SECRET).ok().map(|s| s.to_string());
    let cf = req.cf();
    let country = cf.and_then(|cf| cf.country());
    let log_key = load_log_key(env);
    let secret = |name: &str| env.secret(name).ok().map(|s| s.to_string());
    let parts = |body| RequestParts {
        method: &method,
        url: &url,
        header: &header,
        body,
        country: country.as_deref(),
        asn: cf.and_then(|cf| cf.asn()),
        admin_token: &admin_token,
        log_key: log_key.as_deref(),
        secret: &secret,
        now_ms: now_ms(),
    };
    let mut plan = plan::plan(config, &parts(Body::Unread));
    let body;
    if let Route::NeedsBody = plan.route {
        body = read_body(&req, config.body_limit).await;
        plan = plan::plan(config, &parts(body.as_deref().map_or(Body::Unusable, Body::Read)));
    }
    let mut outcomes = Vec::new();
    let verdict = match &plan.route {
        Route::Admin { lockout, route } => return admin_request(env, config, lockout, route).await,
        Route::Check(applied) if !applied.is_empty() => {
            outcomes = join_all(applied.iter().map(|a| check(env, a, verdict::check_op(a.rule)))).await;
            verdict::verdict(applied, &outcomes)
        }
        _ => match verdict::early(&plan) {
            Some(verdict) => verdict,
            None => return respond(&OwnResponse::problem(500, "Internal Server Error", "No verdict.", None)),
        },
    };
    write_logs(&verdict.events);
    let applied = match plan.route {
        Route::Check(applied) => applied,
        _ => Vec::new(),
    };
    let fields = match verdict.answer {
        Answer::Respond(own) => {
            // Not forwarded: every reservation made is released.
            settle(ctx, env, settlements(&applied, &outcomes, None)).await;
            return respond(&own);
        }
        Answer::Forward { fields } => fields,
    };
    let mut fields = fields;
    let response = if applied.iter().any(|a| verdict::check_op(a.rule) == Op::Reserve) {
        let (response, cookies) = forward_and_settle(ctx, env, req, url, applied, outcomes).await?;
        fields.extend(cookies);
        response
    } else {
        forward(req, &url, env).await?
    };
    // A WebSocket upgrade (101) cannot be rebuilt with extra fields.
    if fields.is_empty() || response.status() == 101 {
        Ok(response)
    } else {
        with_fields(response, &fields)
    }
}

/// One call that settles a failures-only rule after the request.
struct Settlement {
    id: String,
    call: Call,
    timeout_ms: u32,
    rule: String,
    key_hash: String,
}

/// The calls that settle the failures-only rules ([`verdict::settle`]),
/// given the origin's answer (`None`: not forwarded, or the origin could
/// not be reached). A success that clears or forgives a count also drops
/// the key's block from this isolate's cache.
fn settlements(applied: &[Applied<'_>], outcomes: &[Outcome], origin: Option<&Answered<'_>>) -> Vec<Settlement> {
    let mut calls = Vec::new();
    for (a, outcome) in applied.iter().zip(outcomes) {
        let Some(call) = verdict::settle(a, outcome, origin) else { continue };
        if matches!(call.op, Op::Clear | Op::Forgive) {
            BLOCKED.with(|b| b.borrow_mut().remove(&a.id));
        }
        let (id, timeout_ms, rule, key_hash) = (a.id.clone(), a.rule.timeout_ms, a.rule.name.clone(), a.key_hash.clone());
        calls.push(Settlement { id, call, timeout_ms, rule, key_hash });
    }
    calls
}

/// Forwards the request and settles the failures-only rules, all under
/// `waitUntil`: a client that disconnects while the origin works would
/// otherwise cancel the request before it is settled, leaving its
/// reservation to hold the slot until it expires (and, without two-phase
/// counting, its failure uncounted). The response is handed back once
/// settled, so the next request of the same client sees the count, with
/// the `Set-Cookie` fields of the devices a success made trusted
/// ([`verdict::device_cookie`]).
async fn forward_and_settle(
    ctx: &Context,
    env: &Env,
    req: Request,
    url: worker::Url,
    applied: Vec<Applied<'static>>,
    outcomes: Vec<Outcome>,
) -> worker::Result<(web_sys::Response, Vec<(String, String)>)> {
    let env = env.clone();
    let (done, answered) = futures_channel::oneshot::channel();
    ctx.wait_until(async move {
        let response = forward(req, &url, &env).await;
        let mut cookies = Vec::new();
        let calls = match &response {
            Ok(r) => {
                let headers = r.headers();
                let header = |name: &str| headers.get(name).ok().flatten();
                let answered = Answered { status: r.status(), header: &header };
                let secret = |name: &str| env.secret(name).ok().map(|s| s.to_string());
                let now = now_ms();
                // One cookie per name: a rule charged to several identities
                // trusts the device for the first it proved.
                for cookie in applied.iter().filter_map(|a| verdict::device_cookie(a, &answered, &secret, now)) {
                    let name = cookie.1.split('=').next().unwrap_or_default().to_string();
                    if !cookies.iter().any(|(_, v): &(String, String)| v.split('=').next() == Some(name.as_str())) {
                        cookies.push(cookie);
                    }
                }
                settlements(&applied, &outcomes, Some(&answered))
            }
            Err(_) => settlements(&applied, &outcomes, None),
        };
        send_settlements(&env, calls).await;
        let _ = done.send(response.map(|r| (r, cookies)));
    });
    match answered.await {
        Ok(answer) => answer,
        Err(_) => Err(worker::Error::RustError("the forwarding task ended without a response".into())),
    }
}

/// Sends `calls` under `waitUntil` (so they complete even if the client
/// disconnects and the request is cancelled), and awaits them here too.
async fn settle(ctx: &Context, env: &Env, calls: Vec<Settlement>) {
    if calls.is_empty() {
        return;
    }
    let env = env.clone();
    let (done, settled) = futures_channel::oneshot::channel::<()>();
    ctx.wait_until(async move {
        send_settlements(&env, calls).await;
        let _ = done.send(());
    });
    let _ = settled.await;
}

/// Sends every settlement concurrently; a failed one is logged as a
/// `counter_error` with decision `not_recorded`.
async fn send_settlements(env: &Env, calls: Vec<Settlement>) {
    let sends = calls.into_iter().map(|s| async move {
        if let Err(error) = call_with_timeout(env, &s.id, &s.call, s.timeout_ms).await {
            write_logs(&[verdict::counter_error(&s.rule, &s.key_hash, &error.to_string(), "not_recorded")]);
        }
    });
    join_all(sends).await;
}

/// Asks the blocked-until cache, then the rule's object (`op`: what
/// [`verdict::check_op`] or [`admin::lockout_op`] says: a hit, a reserve for
/// failures-only rules, a read-only check), bounded by the rule's timeout.
async fn check(env: &Env, applied: &Applied<'_>, op: Op) -> Outcome {
    let now = now_ms();
    if let Some(block) = BLOCKED.with(|b| b.borrow_mut().blocked_until(&applied.id, now)) {
        return Outcome::from_cache(block, now);
    }
    let call = applied.rule.call(op);
    let (outcome, cacheable) = match call_with_timeout(env, &applied.id, &call, applied.rule.timeout_ms).await {
        Ok(reply) => {
            let cacheable = !reply.tally.in_flight;
            (Outcome::from_reply(reply), cacheable)
        }
        Err(e) => (Outcome::Failed(e.to_string()), false),
    };
    // Exact for the sliding log: a blocked request records nothing, so the
    // object would answer "blocked" until then. Shadow rules are cached too:
    // they would block until then just the same. A block owed to requests
    // in flight is not: it lifts as soon as one of them is released.
    if let (Outcome::Blocked { retry_after_ms, window, .. }, true) = (&outcome, cacheable) {
        let block = Block { until_ms: now + *retry_after_ms as i64, window: *window };
        BLOCKED.with(|b| b.borrow_mut().insert(&applied.id, block, now));
    }
    outcome
}

async fn call_with_timeout(env: &Env, id: &str, call: &Call, timeout_ms: u32) -> Result<Reply, CallFailure> {
    let timeout = Delay::from(Duration::from_millis(u64::from(timeout_ms)));
    let request = Box::pin(call_limiter(env, id, call));
    match select(request, timeout).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(CallFailure::Timeout { ms: timeout_ms }),
    }
}

/// Sends one call to the object named `id`, in the compact form: a `GET`
/// of the call's URL, answered by a reply line ([`crate::protocol`]).
async fn call_limiter(env: &Env, id: &str, call: &Call) -> Result<Reply, CallFailure> {
    let stub = env
        .durable_object(LIMITER_BINDING)
        .and_then(|ns| ns.id_from_name(id)?.get_stub())
        .map_err(|e| CallFailure::NoBinding(e.to_string()))?;
    let transport = |e: worker::Error| CallFailure::Transport(e.to_string());
    let mut response = stub.fetch_with_str(&encode_call_url(call)).await.map_err(transport)?;
    let body = response.text().await.map_err(transport)?;
    decode_reply_line(response.status_code(), &body)
}

/// Serves the admin API (the token secret exists): first the client's
/// lockout counter, then what [`admin::gate`] says. The token is never
/// logged.
async fn admin_request(
    env: &Env,
    config: &Config,
    lockout: &Applied<'_>,
    route: &AdminRoute<'_>,
) -> worker::Result<web_sys::Response> {
    let outcome = check(env, lockout, admin::lockout_op(route)).await;
    let (request, id, key_hash) = match admin::gate(lockout, route, &outcome) {
        Gate::Refuse { response, events } => {
            write_logs(&events);
            return respond(&response);
        }
        Gate::Serve { request, id, key_hash } => (request, id, key_hash),
        Gate::Rules => {
            write_logs(&[LogEvent::new("admin", vec![("action", "rules".into()), ("client_hash", lockout.key_hash.as_str().into())])]);
            return Ok(Response::from_json(&admin::rules_body(config))?.into());
        }
    };
    let op = match request.action {
        AdminAction::Status => Op::Status,
        AdminAction::Reset => {
            BLOCKED.with(|b| b.borrow_mut().remove(id));
            Op::Reset
        }
    };
    let call = request.rule.call(op);
    match call_with_timeout(env, id, &call, request.rule.timeout_ms).await {
        Ok(reply) => {
            write_logs(&[admin::log_event(request, key_hash, &lockout.key_hash)]);
            Ok(Response::from_json(&admin::status_body(request, key_hash, &reply))?.into())
        }
        Err(e) => respond(&OwnResponse::problem(
            503,
            "Service Unavailable",
            &format!("The counter cannot be reached: {e}"),
            Some(1),
        )),
    }
}
