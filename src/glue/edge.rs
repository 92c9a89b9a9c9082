//! The Worker entry: [`plan`](crate::pipeline::plan::plan) the request, do the I/O
//! the plan asks for (read the body, ask the blocked-until cache and the
//! limiter objects), fold their outcomes with
//! [`verdict`](crate::pipeline::verdict::verdict), then forward or answer, and write
//! the verdict's log lines.
//!
//! Glue only: every decision is made by the pure modules; this file reads
//! the clock, the request and the environment, and talks to the platform
//! (the origin side is in [`crate::glue::origin`], the limiter objects and the
//! blocked-until cache in [`crate::glue::objects`]).
//!
//! Several rules may match one request. All are checked (concurrently), and
//! any `block` rule that is over its limit blocks the request. Each rule
//! counts independently: a request blocked by one rule is still recorded by
//! the other rules that allowed it (as separate WAF rate-limiting rules
//! would), so a client hammering a blocked endpoint also uses up its
//! broader allowance.

use crate::pipeline::admin::{self, AdminAction, Gate};
use crate::config::{self, Config, ConfigError};
use crate::glue::embed::Client;
use crate::pipeline::episodes::{self, Episodes};
use crate::request::exempt;
use crate::config::policy::FailPolicy;
use crate::config::headers::OwnResponse;
use crate::request::key::log_key;
use crate::pipeline::memo::{self, Fingerprint, PlanMemo, Reads};
use crate::pipeline::plan::{self, AdminRoute, Applied, Body, RequestParts, Route};
use crate::count::controls::Change;
use crate::count::protocol::Op;
use crate::pipeline::metrics;
use crate::config::response::Prefers;
use crate::glue::objects::{self, call_with_timeout, check, send_settlements, settle, settlements};
use crate::glue::origin::{forward, read_body, receive_body, watch_upload, with_fields, UploadWatch};
use crate::pipeline::upload;
use crate::config::upstream::{self, Upstream};
use crate::pipeline::verdict::{self, Answer, Answered, LogEvent, Outcome};
use futures_util::future::join_all;
use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
#[cfg(feature = "standalone")]
use worker::event;
use worker::{
    console_log, web_sys, AnalyticsEngineDataPointBuilder, Context, Env, Response,
};

/// The structured var holding the config.
const CONFIG_VAR: &str = "TOLLGATE";
/// The secret that turns the admin API on.
const ADMIN_TOKEN_SECRET: &str = "TOLLGATE_ADMIN_TOKEN";
/// The secret that keys every `key_hash` in logs and admin output.
const LOG_KEY_SECRET: &str = "TOLLGATE_LOG_KEY";

/// Parsed once per isolate and kept for its life (leaked once, so that the
/// plan's rules can move into a `waitUntil` task, which must be `'static`):
/// the config, or its errors with the policy for requests and, for
/// `allow`, where to forward them (`None`: the `upstream` field itself is
/// invalid, so requests are denied).
pub(crate) type LoadedConfig = &'static Result<Config, (Vec<ConfigError>, FailPolicy, Option<Upstream>)>;

/// An invalid config is logged at most once per isolate per this period.
const CONFIG_ERROR_LOG_PERIOD_MS: i64 = 60_000;

thread_local! {
    /// Parsed once per isolate: URLPatterns are compiled here, not per request.
    static CONFIG: RefCell<Option<LoadedConfig>> = const { RefCell::new(None) };
    /// One log line per block or counter-error episode of a (rule, key).
    static EPISODES: RefCell<Episodes> =
        RefCell::new(Episodes::new(episodes::DEFAULT_CAPACITY, episodes::PERIOD_MS));
    /// Blocked clients' plans, replayed for their repeats.
    static MEMO: RefCell<PlanMemo> = RefCell::new(PlanMemo::new(memo::DEFAULT_CAPACITY));
    /// When the invalid config was last logged (Unix ms).
    static CONFIG_ERROR_LOGGED: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
    /// Read once per isolate, like the config (a changed secret is a new
    /// deployment, hence new isolates); `None`: hashes are unkeyed.
    static LOG_KEY: OnceCell<Option<Rc<[u8]>>> = const { OnceCell::new() };
}

pub(crate) fn load_log_key(env: &Env) -> Option<Rc<[u8]>> {
    LOG_KEY.with(|cell| {
        cell.get_or_init(|| env.secret(LOG_KEY_SECRET).ok().and_then(|s| log_key(&s.to_string())).map(Rc::from))
            .clone()
    })
}

pub(crate) fn load_config(env: &Env) -> LoadedConfig {
    CONFIG.with(|cell| {
        if let Some(config) = *cell.borrow() {
            return config;
        }
        let parsed = match env.object_var::<serde_json::Value>(CONFIG_VAR) {
            Ok(value) => Config::from_json(&value).map_err(|errors| {
                (errors, config::on_invalid_config(&value), upstream::of_invalid_config(&value))
            }),
            Err(e) => Err((
                vec![ConfigError { rule: None, field: CONFIG_VAR.into(), message: format!("cannot read the var: {e}") }],
                FailPolicy::Deny,
                None,
            )),
        };
        if let Ok(config) = &parsed {
            objects::set_cache_capacity(config.blocked_cache_capacity, now_ms());
        }
        let loaded: LoadedConfig = Box::leak(Box::new(parsed));
        *cell.borrow_mut() = Some(loaded);
        loaded
    })
}

pub(crate) fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// Returns the raw `web_sys::Response`: the origin's response goes back to
/// the client as the very object `fetch` produced, never rebuilt.
#[cfg_attr(feature = "standalone", event(fetch))]
#[cfg_attr(not(feature = "standalone"), allow(dead_code))]
pub async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> worker::Result<web_sys::Response> {
    let config = load_config(&env);
    let config = match config.as_ref() {
        Ok(config) => config,
        Err((errors, policy, upstream)) => return invalid_config(req, &env, errors, *policy, upstream.as_ref()).await,
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
    req: web_sys::Request,
    env: &Env,
    errors: &[ConfigError],
    policy: FailPolicy,
    upstream: Option<&Upstream>,
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
    if let (FailPolicy::Allow, Some(upstream)) = (policy, upstream) {
        return forward(req, env, upstream).await;
    }
    respond(&verdict::invalid_config())
}

/// One of tollgate's own responses, as the raw response the runtime takes
/// (built in one `new Response(text, init)`: the body goes over as a
/// string, not copied into a byte array first).
pub(crate) fn respond(own: &OwnResponse) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new()?;
    for (name, value) in &own.headers {
        headers.append(name, value)?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(own.status);
    init.set_headers(&headers);
    Ok(web_sys::Response::new_with_opt_str_and_init(Some(&own.body), &init)?)
}

/// Writes `events`, one line each, except the repeats of a block or
/// counter-error episode ([`crate::pipeline::episodes`]), which are counted instead.
pub(crate) fn write_logs(events: &[LogEvent]) {
    if events.is_empty() {
        return;
    }
    let lines = EPISODES.with(|e| e.borrow_mut().filter(events, now_ms()));
    for event in &lines {
        console_log!("{}", event.line());
    }
}

/// What the front half of the pipeline decided about a request: an admin
/// request's answer, or the verdict on the rules it checked. Shared by the
/// standalone Worker ([`limit`]) and the embedded check
/// ([`crate::glue::embed::check_as`]), so both decide alike.
pub(crate) enum Decided {
    /// The admin API's answer: never forwarded, nothing to settle.
    Admin(web_sys::Response),
    /// The rules applied, their counters' outcomes (index for index) and
    /// the answer; the verdict's log lines are already written.
    /// `upload_deadline`: for a body over a failures-only rule's
    /// `upload_buffer`, when the rest must have been forwarded
    /// ([`crate::pipeline::upload`]; the embedded app reads the body itself).
    Verdict { applied: Vec<Applied<'static>>, outcomes: Vec<Outcome>, answer: Answer, upload_deadline: Option<i64> },
}

/// The front half, I/O included: plan (pure), the body if the plan needs
/// it, the blocked-until cache and the limiter objects, verdict (pure),
/// and its log lines. `client` stands in for `req.cf()` where it says
/// something (RPC does not carry `cf`).
pub(crate) async fn decide(req: &web_sys::Request, env: &Env, config: &'static Config, client: &Client) -> worker::Result<Decided> {
    let raw_url = req.url();
    // A URL a kept plan was made for may apply (crate::pipeline::memo): not asked again.
    if !MEMO.with(|memo| memo.borrow().holds_url(&raw_url)) && !plan::may_apply(config, &raw_url) {
        // No rule can apply: forwarded with nothing else read or parsed (no
        // URL parse, `cf`, header, secret or clock), as the plan's fast path
        // would decide.
        return Ok(Decided::Verdict { applied: Vec::new(), outcomes: Vec::new(), answer: Answer::Forward { fields: Vec::new() }, upload_deadline: None });
    }
    // The method as sent (workers-rs maps methods it does not know to GET).
    let method = req.method();
    // One `Headers` object for every lookup (`request.headers` is a getter
    // that crosses into JS each time it is read).
    let headers = req.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    let admin_token = || env.secret(ADMIN_TOKEN_SECRET).ok().map(|s| s.to_string());
    // `request.cf`, read only for a config whose keys or exemptions use it.
    let cf = if config.facts.reads_cf { cf_object(req) } else { None };
    let country = client.country.clone().or_else(|| cf_string(cf.as_ref()?, "country"));
    let asn = client.asn.or_else(|| cf_field(cf.as_ref()?, "asn")?.as_f64().and_then(|n| u32::try_from(n as u64).ok()));
    let log_key = load_log_key(env);
    let secret = |name: &str| env.secret(name).ok().map(|s| s.to_string());
    let verified_bot = cf.as_ref().and_then(verified_bot);
    // A repeat of a request whose plan was kept replays it (crate::pipeline::memo);
    // otherwise the headers the plan reads are recorded, to keep it.
    let fingerprint = (!config.facts.reads_clock)
        .then(|| Fingerprint::new(&method, &raw_url, country.as_deref(), asn, verified_bot.as_deref()));
    let replayed = fingerprint.as_ref().and_then(|fp| MEMO.with(|memo| memo.borrow().replay(fp, &header)));
    let reads = Reads::default();
    let recording = |name: &str| reads.read(&header, name);
    let recorded = fingerprint.is_some();
    let parts = |body| RequestParts {
        method: &method,
        // As the runtime serialized it: the plan splits it, never parses it.
        url: &raw_url,
        header: if recorded { &recording } else { &header },
        body,
        country: country.as_deref(),
        asn,
        verified_bot: verified_bot.as_deref(),
        admin_token: &admin_token,
        log_key: log_key.as_deref(),
        secret: &secret,
        now_ms: now_ms(),
    };
    // `fresh`: the fingerprint of a plan made here with the body unread,
    // the only kind the memo may keep.
    let (mut plan, mut fresh) = match replayed {
        Some(plan) => (plan, None),
        None => (plan::plan(config, &parts(Body::Unread)), fingerprint),
    };
    let body;
    if let Route::NeedsBody = plan.route {
        fresh = None;
        body = read_body(req, config.body_limit).await;
        plan = plan::plan(config, &parts(body.as_deref().map_or(Body::Unusable, Body::Read)));
    }
    let mut outcomes = Vec::new();
    let mut upload_deadline = None;
    let verdict = match &plan.route {
        Route::Admin { lockout, route, lockout_binds } => {
            return Ok(Decided::Admin(admin_request(env, config, lockout, route, *lockout_binds).await?))
        }
        Route::Check(applied) if !applied.is_empty() => {
            upload_deadline = match await_upload(req, applied).await {
                Ok(deadline) => deadline,
                Err(answer) => return Ok(Decided::Verdict { applied: Vec::new(), outcomes: Vec::new(), answer, upload_deadline: None }),
            };
            outcomes = join_all(applied.iter().map(|a| check(env, a, verdict::check_op(a.rule)))).await;
            // A blocked client's plan is kept, for its repeats.
            let blocked = outcomes.iter().any(|o| matches!(o, Outcome::Blocked { .. }));
            if let Some(fp) = fresh.filter(|_| memo::keeps(&plan.matched, applied, blocked)) {
                MEMO.with(|memo| memo.borrow_mut().keep(fp, reads, applied.clone()));
            }
            // The client's `Accept` shapes only a block's answer.
            let prefers = if blocked { Prefers::from_accept(header("accept").as_deref()) } else { Prefers::Other };
            verdict::verdict_for(applied, &outcomes, prefers)
        }
        _ => verdict::early(&plan).unwrap_or_else(|| verdict::Verdict {
            answer: Answer::Respond(OwnResponse::problem(500, "Internal Server Error", "No verdict.", None)),
            events: Vec::new(),
        }),
    };
    write_logs(&verdict::exempt_events(&plan.matched));
    write_logs(&verdict.events);
    if let (Route::Check(applied), Some(dataset)) = (&plan.route, metrics_dataset(env)) {
        let cf = cf.or_else(|| cf_object(req));
        let country = country.or_else(|| cf_string(cf.as_ref()?, "country"));
        let colo = cf.as_ref().and_then(|cf| cf_string(cf, "colo"));
        let place = metrics::Place { colo: colo.as_deref(), country: country.as_deref() };
        write_metrics(&dataset, metrics::points(&plan.matched, applied, &outcomes, place));
    }
    let applied = match plan.route {
        Route::Check(applied) => applied,
        _ => Vec::new(),
    };
    Ok(Decided::Verdict { applied, outcomes, answer: verdict.answer, upload_deadline })
}

/// A failures-only rule reserves only once the body is here (or past its
/// buffer): a slow upload holds no slot ([`crate::pipeline::upload`]). `Ok` to go on
/// and check, with the deadline of a body over the buffer; `Err` with
/// tollgate's own answer (408, 400: an `upload` event written), nothing
/// reserved. A request the cache already refuses is not kept waiting for
/// its body (a slot it reserves is released with the refusal).
async fn await_upload(req: &web_sys::Request, applied: &[Applied<'_>]) -> Result<Option<i64>, Answer> {
    let Some(limits) = upload::limits_for(applied).filter(|_| !objects::cached_refusal(applied)) else { return Ok(None) };
    let started = now_ms();
    match upload::next(receive_body(req, limits).await, limits, started) {
        upload::Next::Check { deadline_ms } => Ok(deadline_ms),
        upload::Next::Answer { response, event } => {
            write_logs(&[event]);
            Err(Answer::Respond(response))
        }
    }
}

/// The standalone Worker's request flow: [`decide`], then forward (and
/// settle failures-only rules) or answer.
async fn limit(req: web_sys::Request, env: &Env, ctx: &Context, config: &'static Config) -> worker::Result<web_sys::Response> {
    let (applied, outcomes, answer, upload_deadline) = match decide(&req, env, config, &Client::default()).await? {
        Decided::Admin(response) => return Ok(response),
        Decided::Verdict { applied, outcomes, answer, upload_deadline } => (applied, outcomes, answer, upload_deadline),
    };
    // Leased tokens past their expiry go back, after the response (looked
    // at only when a rule was checked: the non-matching path stays lean).
    if !applied.is_empty() {
        objects::send_refunds(ctx, env, config);
    }
    let mut fields = match answer {
        Answer::Respond(own) => {
            // Not forwarded: every reservation made is released.
            settle(ctx, env, settlements(&applied, &outcomes, None)).await;
            return respond(&own);
        }
        Answer::Forward { fields } => fields,
    };
    let response = if applied.iter().any(|a| verdict::check_op(a.rule) == Op::Reserve) {
        // The rest of a body over the buffer streams under the deadline.
        let watch = match upload_deadline {
            None => None,
            Some(deadline) => match watch_upload(&req, upload::left_ms(deadline, now_ms())) {
                Some(watch) => Some(watch),
                None => {
                    settle(ctx, env, settlements(&applied, &outcomes, None)).await;
                    return respond(&OwnResponse::problem(400, "Bad Request", "The request body cannot be forwarded.", None));
                }
            },
        };
        let timeout_ms = upload::limits_for(&applied).map_or(0, |l| l.timeout_ms);
        let (response, cookies) = match forward_and_settle(ctx, env, req, &config.upstream, applied, outcomes, watch).await? {
            Forwarded::Answered(response, cookies) => (response, cookies),
            Forwarded::UploadTooSlow => {
                write_logs(&[upload::aborted_event(timeout_ms)]);
                return respond(&upload::too_slow(timeout_ms));
            }
        };
        fields.extend(cookies);
        response
    } else {
        forward(req, env, &config.upstream).await?
    };
    // A WebSocket upgrade (101) cannot be rebuilt with extra fields.
    if fields.is_empty() || response.status() == 101 {
        Ok(response)
    } else {
        with_fields(response, &fields)
    }
}

thread_local! {
    /// Whether a dataset is bound as [`metrics::BINDING`]: looked up once
    /// per isolate (bindings are fixed for its life).
    static METRICS_BOUND: OnceCell<bool> = const { OnceCell::new() };
}

/// The Analytics Engine dataset bound as [`metrics::BINDING`], if any
/// (not looked up again once found missing).
fn metrics_dataset(env: &Env) -> Option<worker::AnalyticsEngineDataset> {
    if METRICS_BOUND.with(|bound| *bound.get_or_init(|| env.analytics_engine(metrics::BINDING).is_ok())) {
        env.analytics_engine(metrics::BINDING).ok()
    } else {
        None
    }
}

/// Writes the data points to the dataset. A failed write is dropped: a
/// metric never fails a request.
fn write_metrics(dataset: &worker::AnalyticsEngineDataset, points: Vec<metrics::Point>) {
    for p in points {
        let _ = AnalyticsEngineDataPointBuilder::new()
            .indexes([p.index.as_str()])
            .blobs(p.blobs)
            .doubles(p.doubles)
            .write_to(dataset);
    }
}

/// `request.cf`, read through `Reflect`: absent in local development,
/// where the typed getters would panic on a missing field.
fn cf_object(req: &web_sys::Request) -> Option<wasm_bindgen::JsValue> {
    js_sys::Reflect::get(req.as_ref(), &"cf".into()).ok().filter(|cf| cf.is_object())
}

/// A field of `request.cf` (or of an object in it), read through `Reflect`.
fn cf_field(target: &wasm_bindgen::JsValue, name: &str) -> Option<wasm_bindgen::JsValue> {
    js_sys::Reflect::get(target, &name.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// A string field of `request.cf` (`country`, `colo`).
fn cf_string(cf: &wasm_bindgen::JsValue, name: &str) -> Option<String> {
    cf_field(cf, name)?.as_string()
}

/// `request.cf.verifiedBotCategory` and `request.cf.botManagement.verifiedBot`,
/// read through `Reflect`, tolerant of absent fields (the typed getter for
/// `verifiedBot` assumes a boolean is there), for [`exempt::verified_bot`]
/// to decide on.
fn verified_bot(cf: &wasm_bindgen::JsValue) -> Option<String> {
    let flag = || cf_field(cf, "botManagement").filter(|m| m.is_object()).and_then(|m| cf_field(&m, "verifiedBot")?.as_bool());
    exempt::verified_bot(cf_string(cf, "verifiedBotCategory"), flag)
}

/// Forwards the request and settles the failures-only rules, all under
/// `waitUntil`: a client that disconnects while the origin works would
/// otherwise cancel the request before it is settled, leaving its
/// reservation to hold the slot until it expires (and, without two-phase
/// counting, its failure uncounted). The response is handed back once
/// settled, so the next request of the same client sees the count, with
/// the `Set-Cookie` fields of the devices a success made trusted
/// ([`verdict::device_cookie`]).
///
/// With `watch` (a body over the buffer), the watched request is forwarded
/// instead, and a forward the watch aborted is [`Forwarded::UploadTooSlow`]
/// (its reservations released).
async fn forward_and_settle(
    ctx: &Context,
    env: &Env,
    req: web_sys::Request,
    upstream: &'static Upstream,
    applied: Vec<Applied<'static>>,
    outcomes: Vec<Outcome>,
    watch: Option<UploadWatch>,
) -> worker::Result<Forwarded> {
    let env = env.clone();
    let (done, answered) = futures_channel::oneshot::channel();
    ctx.wait_until(async move {
        let (outbound, watch) = match watch {
            Some(UploadWatch { request, stop }) => (request, Some(stop)),
            None => (req, None),
        };
        let response = forward(outbound, &env, upstream).await;
        // Stopped as soon as the origin answers: a watch firing later
        // would abort the response's body.
        let too_slow = watch.is_some_and(|stop| stop.fired());
        let response = if too_slow { Err(worker::Error::RustError("the upload did not finish in time".into())) } else { response };
        let mut cookies = Vec::new();
        let calls = match &response {
            Ok(r) => {
                let headers = r.headers();
                let header = |name: &str| headers.get(name).ok().flatten();
                let answered = Answered { status: r.status(), header: &header };
                let secret = |name: &str| env.secret(name).ok().map(|s| s.to_string());
                cookies = verdict::device_cookies(&applied, &answered, &secret, now_ms());
                settlements(&applied, &outcomes, Some(&answered))
            }
            Err(_) => settlements(&applied, &outcomes, None),
        };
        send_settlements(&env, calls).await;
        let _ = done.send(if too_slow { Ok(Forwarded::UploadTooSlow) } else { response.map(|r| Forwarded::Answered(r, cookies)) });
    });
    match answered.await {
        Ok(answer) => answer,
        Err(_) => Err(worker::Error::RustError("the forwarding task ended without a response".into())),
    }
}

/// What [`forward_and_settle`] got.
enum Forwarded {
    /// The upstream's response, with the `Set-Cookie` fields of the
    /// devices a success made trusted.
    Answered(web_sys::Response, Vec<(String, String)>),
    /// The upload of a body over the buffer did not finish in time: the
    /// forward was aborted, its reservations released.
    UploadTooSlow,
}

/// Serves the admin API (the token secret exists): first the client's
/// lockout counter (unless `lockout_binds` is false: a right token that
/// passes the lockout), then what [`admin::gate`] says. The token is never
/// logged.
pub(crate) async fn admin_request(
    env: &Env,
    config: &Config,
    lockout: &Applied<'_>,
    route: &AdminRoute<'_>,
    lockout_binds: bool,
) -> worker::Result<web_sys::Response> {
    let outcome = if lockout_binds { Some(check(env, lockout, admin::lockout_op(route)).await) } else { None };
    let (request, id, key_hash) = match admin::gate(lockout, route, outcome.as_ref()) {
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
    let now = now_ms();
    // An override or a ban: set in the key's object, then reported as a
    // status is.
    if let Some(change) = request.change(now) {
        match (&change, objects::control(env, id, &change, request.rule.timeout_ms).await) {
            (_, Err(e)) => return respond(&admin::control_failure(&e)),
            (Change::Ban { until_ms }, Ok(_)) => objects::cache_ban(id, *until_ms),
            (_, Ok(_)) => objects::forget_block(id),
        }
    }
    let op = match request.action {
        AdminAction::Reset => {
            objects::forget_block(id);
            Op::Reset
        }
        _ => Op::Status,
    };
    let call = request.rule.call_for(op, &request.key);
    match call_with_timeout(env, id, &call, request.rule.timeout_ms).await {
        Ok(reply) => {
            write_logs(&[admin::log_event(request, key_hash, &lockout.key_hash)]);
            let body = match objects::control(env, id, &Change::Get, request.rule.timeout_ms).await {
                Ok(controls) => admin::status_with_controls(request, key_hash, &reply, &controls, now),
                Err(_) => admin::status_body(request, key_hash, &reply),
            };
            Ok(Response::from_json(&body)?.into())
        }
        Err(e) => respond(&admin::unreachable(&e)),
    }
}
