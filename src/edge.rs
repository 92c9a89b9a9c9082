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
use crate::config::{Config, ConfigError};
use crate::headers::OwnResponse;
use crate::key::log_key;
use crate::plan::{self, AdminRoute, Applied, Body, RequestParts, Route};
use crate::protocol::{decode_reply, encode_call, Call, CallFailure, Op, Reply};
use crate::origin::{forward, read_body, with_fields};
use crate::verdict::{self, Answer, LogEvent, Outcome};
use futures_util::future::{join_all, select, Either};
use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen::JsValue;
use worker::{
    console_log, event, web_sys, Context, Date, Delay, Env, Headers, Method, Request, RequestInit, Response,
};

/// The Durable Object namespace binding of the limiter objects.
const LIMITER_BINDING: &str = "LIMITER";
/// The structured var holding the config.
const CONFIG_VAR: &str = "TOLLGATE";
/// The secret that turns the admin API on.
const ADMIN_TOKEN_SECRET: &str = "TOLLGATE_ADMIN_TOKEN";
/// The secret that keys every `key_hash` in logs and admin output.
const LOG_KEY_SECRET: &str = "TOLLGATE_LOG_KEY";

type LoadedConfig = Rc<Result<Config, Vec<ConfigError>>>;

thread_local! {
    /// Parsed once per isolate: URLPatterns are compiled here, not per request.
    static CONFIG: RefCell<Option<LoadedConfig>> = const { RefCell::new(None) };
    static BLOCKED: RefCell<BlockedUntilCache> = RefCell::new(BlockedUntilCache::new(DEFAULT_CAPACITY));
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
        if let Some(config) = cell.borrow().as_ref() {
            return config.clone();
        }
        let parsed = match env.object_var::<serde_json::Value>(CONFIG_VAR) {
            Ok(value) => Config::from_json(&value),
            Err(e) => Err(vec![ConfigError {
                rule: None,
                field: CONFIG_VAR.into(),
                message: format!("cannot read the var: {e}"),
            }]),
        };
        if let Ok(config) = &parsed {
            BLOCKED.with(|b| b.borrow_mut().set_capacity(config.blocked_cache_capacity, now_ms()));
        }
        let loaded = Rc::new(parsed);
        *cell.borrow_mut() = Some(loaded.clone());
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
        Err(errors) => {
            // An invalid config never silently disables limiting: fail closed.
            let detail: Vec<String> = errors.iter().map(ToString::to_string).collect();
            write_logs(&[LogEvent::new("config_error", vec![("errors", detail.join("; ").into())])]);
            return respond(&OwnResponse::problem(
                503,
                "Service Unavailable",
                "The rate limiter's configuration is invalid.",
                Some(1),
            ));
        }
    };
    match limit(req, &env, &ctx, config).await {
        Ok(response) => Ok(response),
        Err(e) => {
            write_logs(&[LogEvent::new("edge_error", vec![("error", e.to_string().into())])]);
            respond(&OwnResponse::problem(502, "Bad Gateway", "The origin could not be reached.", None))
        }
    }
}

/// One of tollgate's own responses, as the raw response the runtime takes.
fn respond(own: &OwnResponse) -> worker::Result<web_sys::Response> {
    let out = Headers::new();
    for (name, value) in &own.headers {
        out.append(name, value)?;
    }
    Ok(Response::ok(own.body.clone())?.with_status(own.status).with_headers(out).into())
}

fn write_logs(events: &[LogEvent]) {
    for event in events {
        console_log!("{}", event.line());
    }
}

/// The request flow: plan (pure), the I/O the plan asks for, verdict (pure).
async fn limit(req: Request, env: &Env, ctx: &Context, config: &Config) -> worker::Result<web_sys::Response> {
    let url = req.url()?;
    // The method as sent (workers-rs maps methods it does not know to GET).
    let method = req.inner().method();
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let admin_token = || env.secret(ADMIN_TOKEN_SECRET).ok().map(|s| s.to_string());
    let cf = req.cf();
    let country = cf.and_then(|cf| cf.country());
    let log_key = load_log_key(env);
    let parts = |body| RequestParts {
        method: &method,
        url: &url,
        header: &header,
        body,
        country: country.as_deref(),
        asn: cf.and_then(|cf| cf.asn()),
        admin_token: &admin_token,
        log_key: log_key.as_deref(),
    };
    let mut plan = plan::plan(config, &parts(Body::Unread));
    let body;
    if let Route::NeedsBody = plan.route {
        body = read_body(&req, config.body_limit).await;
        plan = plan::plan(config, &parts(body.as_deref().map_or(Body::Unusable, Body::Read)));
    }
    let verdict = match &plan.route {
        Route::Admin { lockout, route } => return admin_request(env, lockout, route).await,
        Route::Check(applied) if !applied.is_empty() => {
            let outcomes = join_all(applied.iter().map(|a| check(env, a, verdict::check_op(a.rule)))).await;
            verdict::verdict(applied, &outcomes)
        }
        _ => match verdict::early(&plan) {
            Some(verdict) => verdict,
            None => return respond(&OwnResponse::problem(500, "Internal Server Error", "No verdict.", None)),
        },
    };
    write_logs(&verdict.events);
    let fields = match verdict.answer {
        Answer::Respond(own) => return respond(&own),
        Answer::Forward { fields } => fields,
    };
    let response = forward(req, &url, env).await?;
    if let Route::Check(applied) = &plan.route {
        settle_after_response(ctx, env, applied, response.status()).await;
    }
    // A WebSocket upgrade (101) cannot be rebuilt with extra fields.
    if fields.is_empty() || response.status() == 101 {
        Ok(response)
    } else {
        with_fields(response, &fields)
    }
}

/// The second half of failures-only rules, once the origin has answered
/// (what to record: [`verdict::settle`]).
///
/// The calls run under `waitUntil`, so they complete even if the client
/// disconnects and the request is cancelled, and are awaited here too, so
/// the count is settled before the response leaves (the next request of the
/// same client sees it).
async fn settle_after_response(ctx: &Context, env: &Env, applied: &[Applied<'_>], status: u16) {
    let mut tasks = Vec::new();
    for a in applied {
        let Some(op) = verdict::settle(a, status) else { continue };
        if op == Op::Reset {
            BLOCKED.with(|b| b.borrow_mut().remove(&a.id));
        }
        tasks.push((a.id.clone(), a.rule.call(op), a.rule.timeout_ms, a.rule.name.clone(), a.key_hash.clone()));
    }
    if tasks.is_empty() {
        return;
    }
    let env = env.clone();
    let (done, settled) = futures_channel::oneshot::channel::<()>();
    ctx.wait_until(async move {
        let calls = tasks.into_iter().map(|(id, call, timeout_ms, rule, key_hash)| {
            let env = &env;
            async move {
                if let Err(error) = call_with_timeout(env, &id, &call, timeout_ms).await {
                    write_logs(&[verdict::counter_error(&rule, &key_hash, &error.to_string(), "not_recorded")]);
                }
            }
        });
        join_all(calls).await;
        let _ = done.send(());
    });
    let _ = settled.await;
}

/// Asks the blocked-until cache, then the rule's object (`op`: what
/// [`verdict::check_op`] or [`admin::lockout_op`] says), bounded by the
/// rule's timeout.
async fn check(env: &Env, applied: &Applied<'_>, op: Op) -> Outcome {
    let now = now_ms();
    if let Some(block) = BLOCKED.with(|b| b.borrow_mut().blocked_until(&applied.id, now)) {
        return Outcome::from_cache(block, now);
    }
    let call = applied.rule.call(op);
    let outcome = match call_with_timeout(env, &applied.id, &call, applied.rule.timeout_ms).await {
        Ok(reply) => Outcome::from_reply(reply),
        Err(e) => Outcome::Failed(e.to_string()),
    };
    // Exact for the sliding log: a blocked request records nothing, so the
    // object would answer "blocked" until then. Shadow rules are cached too:
    // they would block until then just the same.
    if let Outcome::Blocked { retry_after_ms, window, .. } = &outcome {
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

/// Sends one call to the object named `id`.
async fn call_limiter(env: &Env, id: &str, call: &Call) -> Result<Reply, CallFailure> {
    let stub = env
        .durable_object(LIMITER_BINDING)
        .and_then(|ns| ns.id_from_name(id)?.get_stub())
        .map_err(|e| CallFailure::NoBinding(e.to_string()))?;
    let transport = |e: worker::Error| CallFailure::Transport(e.to_string());
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(JsValue::from_str(&encode_call(call))));
    let request = Request::new_with_init("https://limiter.tollgate/call", &init).map_err(transport)?;
    let mut response = stub.fetch_with_request(request).await.map_err(transport)?;
    let body = response.text().await.map_err(transport)?;
    decode_reply(response.status_code(), &body)
}

/// Serves the admin API (the token secret exists): first the client's
/// lockout counter, then what [`admin::gate`] says. The token is never
/// logged.
async fn admin_request(env: &Env, lockout: &Applied<'_>, route: &AdminRoute<'_>) -> worker::Result<web_sys::Response> {
    let outcome = check(env, lockout, admin::lockout_op(route)).await;
    let (request, id, key_hash) = match admin::gate(lockout, route, &outcome) {
        Gate::Refuse { response, events } => {
            write_logs(&events);
            return respond(&response);
        }
        Gate::Serve { request, id, key_hash } => (request, id, key_hash),
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
