//! The Worker entry: canonical view → matching rules → keys → blocked-until
//! cache → limiter objects → forward, 429, or the rule's fail policy.
//!
//! Glue only: every decision is made by the pure modules; this file reads
//! the clock, the request and the environment, and talks to the platform.
//!
//! Several rules may match one request. All are checked (concurrently), and
//! any `block` rule that is over its limit blocks the request. Each rule
//! counts independently: a request blocked by one rule is still recorded by
//! the other rules that allowed it (as separate WAF rate-limiting rules
//! would), so a client hammering a blocked endpoint also uses up its
//! broader allowance.

use crate::admin::{self, AdminAction};
use crate::blocked::{Block, BlockedUntilCache, DEFAULT_CAPACITY};
use crate::canon::{canonical_host, canonical_path, CanonicalQuery};
use crate::config::{Config, ConfigError};
use crate::headers;
use crate::key::{body_field, derive_key, key_hash, KeyInputs};
use crate::policy::{Action, Counting, FailPolicy, MissingKey};
use crate::protocol::{encode_call, Call, Op, Reply, WireWindow};
use crate::rules::{method_candidates, RequestView, Rule};
use futures_util::future::{join_all, select, Either};
use futures_util::StreamExt;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{
    console_log, event, js_sys, web_sys, Context, Date, Delay, Env, Headers, Method, Request, RequestInit,
    Response,
};

/// The Durable Object namespace binding of the limiter objects.
const LIMITER_BINDING: &str = "LIMITER";
/// The structured var holding the config.
const CONFIG_VAR: &str = "TOLLGATE";
/// Optional var naming a local origin (`http://127.0.0.1:8788`) to forward
/// to instead of the zone's origin; unset in production.
const UPSTREAM_VAR: &str = "UPSTREAM";
/// The secret that turns the admin API on.
const ADMIN_TOKEN_SECRET: &str = "TOLLGATE_ADMIN_TOKEN";

type LoadedConfig = Rc<Result<Config, Vec<ConfigError>>>;

thread_local! {
    /// Parsed once per isolate: URLPatterns are compiled here, not per request.
    static CONFIG: RefCell<Option<LoadedConfig>> = const { RefCell::new(None) };
    static BLOCKED: RefCell<BlockedUntilCache> = RefCell::new(BlockedUntilCache::new(DEFAULT_CAPACITY));
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
            log_line("config_error", &[("errors", detail.join("; ").into())]);
            return raw(problem(503, "Service Unavailable", "The rate limiter's configuration is invalid.", Some(1)));
        }
    };
    match limit(req, &env, &ctx, config).await {
        Ok(response) => Ok(response),
        Err(e) => {
            log_line("edge_error", &[("error", e.to_string().into())]);
            raw(problem(502, "Bad Gateway", "The origin could not be reached.", None))
        }
    }
}

/// The name of the object counting `key` for `rule` (also its cache key):
/// the rule's name and the key, one line each.
fn object_name(rule: &Rule, key: &str) -> String {
    format!("{}\n{}", rule.name, key)
}

/// One of tollgate's own responses, as the raw response the runtime takes.
fn raw(response: worker::Result<Response>) -> worker::Result<web_sys::Response> {
    response.map(Into::into)
}

/// One matched rule, its key and the object that counts for it.
struct Applied<'c> {
    rule: &'c Rule,
    /// `rule name` + `\n` + key: the object's name and the cache key.
    id: String,
    key_hash: String,
    /// The key came from `fallback_key`: a success never clears it.
    fell_back: bool,
}

enum Outcome {
    Allowed(Reply),
    Blocked { retry_after_ms: u64, window: usize, reply: Option<Reply> },
    Failed(String),
}

async fn limit(req: Request, env: &Env, ctx: &Context, config: &Config) -> worker::Result<web_sys::Response> {
    let url = req.url()?;
    let path = match canonical_path(url.path()) {
        Ok(path) => path,
        Err(e) => return raw(problem(400, "Bad Request", &e.to_string(), None)),
    };
    // The method as sent (workers-rs maps methods it does not know to GET).
    let method = req.inner().method();
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let bodiless = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    let content_type = if bodiless { String::new() } else { header("content-type").unwrap_or_default() };

    if admin::is_admin_path(&config.admin_prefix, &path) {
        if let Ok(token) = env.secret(ADMIN_TOKEN_SECRET) {
            let query = CanonicalQuery::parse(url.query().unwrap_or(""));
            return raw(admin_request(&req, env, config, &token.to_string(), &path, &method, &query).await);
        }
    }

    // PHP's $_REQUEST, Rails' params and Spring's @RequestParam read form
    // fields as query parameters: a urlencoded body joins the query that
    // conditions and `query:` keys see.
    let mut body: Option<Vec<u8>> = None;
    let mut body_read = false;
    let form = !bodiless && is_form(&content_type);
    if form && config.rules.iter().any(|r| r.has_query_conditions()) {
        body = read_body(&req, config.body_limit).await;
        body_read = true;
    }
    let query = match (&body, form) {
        (Some(bytes), true) => CanonicalQuery::parse(&format!(
            "{}&{}",
            url.query().unwrap_or(""),
            String::from_utf8_lossy(bytes)
        )),
        _ => CanonicalQuery::parse(url.query().unwrap_or("")),
    };

    let host = canonical_host(url.host_str().unwrap_or(""));
    // Method overrides (Laravel `_method`, X-HTTP-Method-Override in Rails
    // and others): a rule applies if the method or any override matches.
    // (Looked up only when some rule restricts methods.)
    let any_methods = config.rules.iter().any(|r| !r.methods.is_empty());
    let overrides = ["x-http-method-override", "x-http-method", "x-method-override"]
        .iter()
        .filter(|_| any_methods)
        .filter_map(|h| header(h))
        .chain(query.values("_method").filter(|_| any_methods).map(str::to_string));
    let mut matched: Vec<(&Rule, crate::rules::Match)> = Vec::new();
    for candidate in method_candidates(&method, overrides) {
        let view = RequestView { method: &candidate, host: &host, path: &path, query: &query };
        for (rule, found) in config.matching(&view) {
            if !matched.iter().any(|(seen, _)| std::ptr::eq(*seen, rule)) {
                matched.push((rule, found));
            }
        }
    }
    matched.retain(|(rule, _)| rule.headers_hold(&header).is_ok());
    if matched.is_empty() {
        return forward(req, &url, env).await;
    }

    if !body_read && matched.iter().any(|(rule, _)| rule.reads_body()) {
        body = read_body(&req, config.body_limit).await;
    }
    let body_type = match (&body, content_type.is_empty()) {
        (Some(_), true) => header("content-type").unwrap_or_default(),
        _ => content_type.clone(),
    };
    let body_lookup = |field: &str| body.as_deref().and_then(|b| body_field(&body_type, b, field));
    let client_ip = header("cf-connecting-ip");
    let cf = req.cf();
    let country = cf.and_then(|cf| cf.country());
    let asn = cf.and_then(|cf| cf.asn());

    let mut applied = Vec::new();
    for (rule, found) in &matched {
        let inputs = KeyInputs {
            client_ip: client_ip.as_deref(),
            header: &header,
            query: &query,
            path_groups: &found.groups,
            body: &body_lookup,
            country: country.as_deref(),
            asn,
            ipv6_prefix: config.ipv6_prefix,
        };
        let (key, fell_back) = match (derive_key(&rule.key, &inputs), &rule.on_missing_key) {
            (Ok(key), _) => (key, false),
            (Err(_), MissingKey::Skip) => continue,
            (Err(missing), MissingKey::Reject) => return raw(missing_key(rule, &missing.to_string())),
            (Err(_), MissingKey::Fallback(parts)) => match derive_key(parts, &inputs) {
                Ok(key) => (key, true),
                Err(missing) => return raw(missing_key(rule, &missing.to_string())),
            },
        };
        applied.push(Applied {
            rule,
            key_hash: key_hash(&key),
            id: object_name(rule, &key),
            fell_back,
        });
    }
    if applied.is_empty() {
        return forward(req, &url, env).await;
    }

    let outcomes = join_all(applied.iter().map(|a| check(env, a))).await;
    let mut block: Option<(&Applied, u64, usize, Option<Reply>)> = None;
    let mut fields: Vec<(String, String)> = Vec::new();
    for (a, outcome) in applied.iter().zip(&outcomes) {
        match outcome {
            Outcome::Allowed(reply) => {
                if a.rule.ratelimit_headers {
                    fields.extend(rate_fields(a.rule, &reply.windows, None));
                }
            }
            Outcome::Blocked { retry_after_ms, window, reply } => {
                let shadow = a.rule.action == Action::Log;
                log_line(
                    if shadow { "shadow_block" } else { "block" },
                    &[
                        ("rule", a.rule.name.as_str().into()),
                        ("key_hash", a.key_hash.as_str().into()),
                        ("decision", if shadow { "would_block" } else { "block" }.into()),
                        ("retry_after_ms", (*retry_after_ms).into()),
                        ("remaining", 0.into()),
                    ],
                );
                if shadow {
                    if a.rule.ratelimit_headers {
                        let windows = windows_of(a.rule, *retry_after_ms, reply.as_ref());
                        fields.extend(rate_fields(a.rule, &windows, Some((*window, *retry_after_ms))));
                    }
                } else if block.as_ref().is_none_or(|(_, ms, _, _)| *retry_after_ms > *ms) {
                    block = Some((a, *retry_after_ms, *window, reply.clone()));
                }
            }
            Outcome::Failed(error) => {
                log_line(
                    "counter_error",
                    &[
                        ("rule", a.rule.name.as_str().into()),
                        ("key_hash", a.key_hash.as_str().into()),
                        ("error", error.as_str().into()),
                        ("decision", if a.rule.on_error == FailPolicy::Deny { "deny" } else { "allow" }.into()),
                    ],
                );
                if a.rule.on_error == FailPolicy::Deny {
                    return raw(problem(
                        503,
                        "Service Unavailable",
                        &format!("Rule `{}` cannot be checked right now.", a.rule.name),
                        Some(1),
                    ));
                }
            }
        }
    }
    if let Some((a, retry_after_ms, window, reply)) = block {
        return raw(too_many_requests(a.rule, retry_after_ms, window, reply.as_ref()));
    }

    let response = forward(req, &url, env).await?;
    settle_after_response(ctx, env, &applied, response.status()).await;
    // A WebSocket upgrade (101) cannot be rebuilt with extra fields.
    if fields.is_empty() || response.status() == 101 {
        Ok(response)
    } else {
        with_fields(response, &fields)
    }
}

/// The second half of failures-only rules, once the origin has answered:
/// record a counted status, or clear the target's count on a success.
///
/// The calls run under `waitUntil`, so they complete even if the client
/// disconnects and the request is cancelled, and are awaited here too, so
/// the count is settled before the response leaves (the next request of the
/// same client sees it).
async fn settle_after_response(ctx: &Context, env: &Env, applied: &[Applied<'_>], status: u16) {
    let mut tasks = Vec::new();
    // A failed check (failing open) still tries to record: the counter may
    // be back, and a failure should count whenever it can.
    for a in applied {
        let Counting::Statuses(counted) = &a.rule.counting else { continue };
        let op = if counted.contains(&status) {
            Op::Record
        } else if a.rule.clear_on_success && !a.fell_back && status < 400 {
            BLOCKED.with(|b| b.borrow_mut().remove(&a.id));
            Op::Reset
        } else {
            continue;
        };
        tasks.push((a.id.clone(), a.rule.call(op), a.rule.timeout_ms, a.rule.name.clone(), a.key_hash.clone()));
    }
    if tasks.is_empty() {
        return;
    }
    let env = env.clone();
    let (done, settled) = futures_channel::oneshot::channel::<()>();
    ctx.wait_until(async move {
        let calls = tasks.iter().map(|(id, call, timeout_ms, rule, key_hash)| {
            let env = &env;
            async move {
                if let Err(error) = call_with_timeout(env, id, call, *timeout_ms).await {
                    log_line(
                        "counter_error",
                        &[
                            ("rule", rule.as_str().into()),
                            ("key_hash", key_hash.as_str().into()),
                            ("error", error.into()),
                            ("decision", "not_recorded".into()),
                        ],
                    );
                }
            }
        });
        join_all(calls).await;
        let _ = done.send(());
    });
    let _ = settled.await;
}

/// Asks the blocked-until cache, then the rule's object, bounded by the
/// rule's timeout. Rules counting every request check and record at once;
/// failures-only rules only check here.
async fn check(env: &Env, applied: &Applied<'_>) -> Outcome {
    let now = now_ms();
    if let Some(block) = BLOCKED.with(|b| b.borrow_mut().blocked_until(&applied.id, now)) {
        return Outcome::Blocked {
            retry_after_ms: (block.until_ms - now).max(1) as u64,
            window: block.window,
            reply: None,
        };
    }
    let op = match applied.rule.counting {
        Counting::All => Op::Hit,
        Counting::Statuses(_) => Op::Check,
    };
    let call = applied.rule.call(op);
    let reply = match call_with_timeout(env, &applied.id, &call, applied.rule.timeout_ms).await {
        Ok(reply) => reply,
        Err(e) => return Outcome::Failed(e),
    };
    if reply.allowed {
        return Outcome::Allowed(reply);
    }
    let window = reply.binding_window.unwrap_or(0);
    // Exact for the sliding log: a blocked request records nothing, so the
    // object would answer "blocked" until then. Shadow rules are cached too:
    // they would block until then just the same.
    let block = Block { until_ms: now + reply.retry_after_ms as i64, window };
    BLOCKED.with(|b| b.borrow_mut().insert(&applied.id, block, now));
    Outcome::Blocked { retry_after_ms: reply.retry_after_ms, window, reply: Some(reply) }
}

async fn call_with_timeout(env: &Env, id: &str, call: &Call, timeout_ms: u32) -> Result<Reply, String> {
    let timeout = Delay::from(Duration::from_millis(u64::from(timeout_ms)));
    let request = Box::pin(call_limiter(env, id, call));
    match select(request, timeout).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(format!("no answer within {timeout_ms} ms")),
    }
}

/// Sends one call to the object named `id`.
async fn call_limiter(env: &Env, id: &str, call: &Call) -> Result<Reply, String> {
    let stub = env
        .durable_object(LIMITER_BINDING)
        .and_then(|ns| ns.id_from_name(id)?.get_stub())
        .map_err(|e| format!("no limiter binding: {e}"))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(JsValue::from_str(&encode_call(call))));
    let request = Request::new_with_init("https://limiter.tollgate/call", &init).map_err(|e| e.to_string())?;
    let mut response = stub.fetch_with_request(request).await.map_err(|e| e.to_string())?;
    let body = response.text().await.map_err(|e| e.to_string())?;
    if response.status_code() != 200 {
        return Err(format!("limiter answered {}: {body}", response.status_code()));
    }
    serde_json::from_str(&body).map_err(|e| format!("unreadable limiter reply: {e}"))
}

/// Whether a content type is `application/x-www-form-urlencoded`.
fn is_form(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
}

/// Reads the body for `body:` keys from a clone (the original still reaches
/// the origin intact), at most `limit` bytes: a body announced or found to
/// be larger is not buffered, the body key is missing and the rule's
/// missing-key policy applies.
async fn read_body(req: &Request, limit: u32) -> Option<Vec<u8>> {
    let limit = limit as usize;
    let announced = req.headers().get("content-length").ok().flatten();
    if announced.and_then(|l| l.trim().parse::<usize>().ok()).is_some_and(|l| l > limit) {
        return None;
    }
    let mut copy = req.clone().ok()?;
    let mut stream = copy.stream().ok()?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk.ok()?);
        if body.len() > limit {
            return None;
        }
    }
    Some(body)
}

/// Forwards the original request, unchanged, to the zone's origin, or to
/// `UPSTREAM` (scheme, host and port replaced; path, query, method, headers
/// and body kept) when that var is set.
async fn forward(req: Request, url: &worker::Url, env: &Env) -> worker::Result<web_sys::Response> {
    let upstream = env
        .var(UPSTREAM_VAR)
        .map(|v| v.to_string())
        .ok()
        .filter(|v| !v.trim().is_empty());
    let outbound: web_sys::Request = match upstream {
        // The same JS object (a handle clone, not `Request.clone()`, which
        // would tee the body).
        None => Clone::clone(req.inner()),
        Some(origin) => {
            let mut target = format!("{}{}", origin.trim_end_matches('/'), url.path());
            if let Some(q) = url.query() {
                target.push('?');
                target.push_str(q);
            }
            let original = req.inner();
            let init = web_sys::RequestInit::new();
            init.set_method(&original.method());
            init.set_headers(&original.headers());
            init.set_redirect(web_sys::RequestRedirect::Manual);
            if let Some(body) = original.body() {
                init.set_body(&body);
            }
            web_sys::Request::new_with_str_and_init(&target, &init).map_err(worker::Error::from)?
        }
    };
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response = JsFuture::from(global.fetch_with_request(&outbound)).await?;
    Ok(response.unchecked_into())
}

/// The origin's response with `fields` added (its headers are immutable, so
/// status, headers and body stream move to a new response).
fn with_fields(raw: web_sys::Response, fields: &[(String, String)]) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new_with_headers(&raw.headers()).map_err(worker::Error::from)?;
    for (name, value) in fields {
        headers.append(name, value).map_err(worker::Error::from)?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(raw.status());
    init.set_status_text(&raw.status_text());
    init.set_headers(&headers);
    web_sys::Response::new_with_opt_readable_stream_and_init(raw.body().as_ref(), &init).map_err(worker::Error::from)
}

/// `RateLimit-Policy` and `RateLimit` for one rule.
fn rate_fields(rule: &Rule, windows: &[WireWindow], blocked: Option<(usize, u64)>) -> Vec<(String, String)> {
    let mut out = vec![("ratelimit-policy".to_string(), headers::ratelimit_policy(&rule.name, windows).join(", "))];
    if let Some(value) = headers::ratelimit(&rule.name, windows, blocked) {
        out.push(("ratelimit".to_string(), value));
    }
    out
}

/// The windows to report: the object's, or (answered from the cache) the
/// rule's limits with nothing remaining.
fn windows_of(rule: &Rule, retry_after_ms: u64, reply: Option<&Reply>) -> Vec<WireWindow> {
    match reply {
        Some(r) => r.windows.clone(),
        None => rule
            .limits
            .iter()
            .map(|l| WireWindow {
                limit: l.requests.get(),
                window_ms: l.window_ms.get(),
                used: u64::from(l.requests.get()),
                remaining: 0,
                reset_ms: retry_after_ms,
            })
            .collect(),
    }
}

fn too_many_requests(
    rule: &Rule,
    retry_after_ms: u64,
    window: usize,
    reply: Option<&Reply>,
) -> worker::Result<Response> {
    let retry_after_s = headers::seconds_ceil(retry_after_ms).max(1);
    let out = Headers::new();
    out.set("content-type", "application/problem+json")?;
    out.set("retry-after", &retry_after_s.to_string())?;
    let windows = windows_of(rule, retry_after_ms, reply);
    for (name, value) in rate_fields(rule, &windows, Some((window, retry_after_ms))) {
        out.set(&name, &value)?;
    }
    Ok(Response::ok(headers::too_many_requests_body(&rule.name, retry_after_s))?
        .with_status(429)
        .with_headers(out))
}

fn missing_key(rule: &Rule, why: &str) -> worker::Result<Response> {
    log_line("missing_key", &[("rule", rule.name.as_str().into()), ("detail", why.into())]);
    problem(400, "Bad Request", &format!("Rule `{}`: {why}.", rule.name), None)
}

fn problem(status: u16, title: &str, detail: &str, retry_after_s: Option<u64>) -> worker::Result<Response> {
    let out = Headers::new();
    out.set("content-type", "application/problem+json")?;
    if let Some(s) = retry_after_s {
        out.set("retry-after", &s.to_string())?;
    }
    Ok(Response::ok(headers::problem_body(status, title, detail))?
        .with_status(status)
        .with_headers(out))
}

/// Serves the admin API (the token secret exists). The token is never logged.
async fn admin_request(
    req: &Request,
    env: &Env,
    config: &Config,
    token: &str,
    path: &str,
    method: &str,
    query: &CanonicalQuery,
) -> worker::Result<Response> {
    let authorization = req.headers().get("authorization").ok().flatten();
    if !admin::token_matches(token, authorization.as_deref()) {
        let out = Headers::new();
        out.set("content-type", "application/problem+json")?;
        out.set("www-authenticate", "Bearer realm=\"tollgate\"")?;
        return Ok(Response::ok(headers::problem_body(401, "Unauthorized", "A valid bearer token is required."))?
            .with_status(401)
            .with_headers(out));
    }
    let request = match admin::parse(config, path, method, query) {
        Ok(request) => request,
        Err(e) => return problem(e.status(), e.title(), &e.to_string(), None),
    };
    let id = object_name(request.rule, &request.key);
    let op = match request.action {
        AdminAction::Status => Op::Status,
        AdminAction::Reset => {
            BLOCKED.with(|b| b.borrow_mut().remove(&id));
            Op::Reset
        }
    };
    let call = request.rule.call(op);
    match call_with_timeout(env, &id, &call, request.rule.timeout_ms).await {
        Ok(reply) => {
            log_line(
                "admin",
                &[
                    ("action", format!("{:?}", request.action).to_lowercase().into()),
                    ("rule", request.rule.name.as_str().into()),
                    ("key_hash", key_hash(&request.key).into()),
                ],
            );
            let body = serde_json::json!({
                "rule": request.rule.name,
                "key_hash": key_hash(&request.key),
                "action": format!("{:?}", request.action).to_lowercase(),
                "windows": reply.windows,
                "alarm_pending": reply.alarm_pending,
                "stored_hits": reply.stored_hits,
            });
            Response::from_json(&body)
        }
        Err(e) => problem(503, "Service Unavailable", &format!("The counter cannot be reached: {e}"), Some(1)),
    }
}

/// One structured JSON log line (Workers Logs indexes its fields).
fn log_line(event: &str, fields: &[(&str, serde_json::Value)]) {
    let mut line = serde_json::Map::new();
    line.insert("tollgate".into(), event.into());
    for (k, v) in fields {
        line.insert((*k).into(), v.clone());
    }
    console_log!("{}", serde_json::Value::Object(line));
}
