//! The Worker entry: canonical view → matching rules → keys → blocked-until
//! cache → limiter objects → forward, 429, or the rule's fail policy.
//!
//! Glue only: every decision is made by the pure modules; this file reads
//! the clock, the request and the environment, and talks to the platform.

use crate::blocked::{Block, BlockedUntilCache, DEFAULT_CAPACITY};
use crate::canon::{canonical_path, CanonicalQuery};
use crate::config::{Action, Config, ConfigError, FailPolicy, MissingKey};
use crate::headers;
use crate::key::{derive_key, KeyInputs};
use crate::protocol::{encode_call, Call, Op, Reply};
use crate::rules::{RequestView, Rule};
use futures_util::future::{join_all, select, Either};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::{
    console_log, event, wasm_bindgen::JsValue, Context, Date, Delay, Env, Fetch, Headers, Method,
    Request, RequestInit, Response,
};

/// The Durable Object namespace binding of the limiter objects.
pub(crate) const LIMITER_BINDING: &str = "LIMITER";
/// The structured var holding the config.
const CONFIG_VAR: &str = "TOLLGATE";
/// Optional var naming a local origin (`http://127.0.0.1:8788`) to forward
/// to instead of the zone's origin; unset in production.
const UPSTREAM_VAR: &str = "UPSTREAM";

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
        let loaded = Rc::new(parsed);
        *cell.borrow_mut() = Some(loaded.clone());
        loaded
    })
}

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

#[event(fetch)]
pub async fn fetch(req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    let config = load_config(&env);
    let config = match config.as_ref() {
        Ok(config) => config,
        Err(errors) => {
            // An invalid config never silently disables limiting: fail closed.
            let detail: Vec<String> = errors.iter().map(ToString::to_string).collect();
            log_line("config_error", &[("errors", detail.join("; ").into())]);
            return problem(503, "Service Unavailable", "The rate limiter's configuration is invalid.", Some(1));
        }
    };
    match limit(req, &env, config).await {
        Ok(response) => Ok(response),
        Err(e) => {
            log_line("edge_error", &[("error", e.to_string().into())]);
            problem(502, "Bad Gateway", "The origin could not be reached.", None)
        }
    }
}

/// One matched rule, its key and the object that counts for it.
struct Applied<'c> {
    rule: &'c Rule,
    /// `rule name` + `\n` + key: the object's name and the cache key.
    id: String,
    key_hash: String,
}

enum Outcome {
    Allowed,
    Blocked { retry_after_ms: u64, window: usize, reply: Option<Reply> },
    Failed(String),
}

async fn limit(req: Request, env: &Env, config: &Config) -> worker::Result<Response> {
    let url = req.url()?;
    let path = match canonical_path(url.path()) {
        Ok(path) => path,
        Err(e) => return problem(400, "Bad Request", &e.to_string(), None),
    };
    let query = CanonicalQuery::parse(url.query().unwrap_or(""));
    let method = req.method().to_string();
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    let view = RequestView { method: &method, host: &host, path: &path, query: &query };

    let header = |name: &str| req.headers().get(name).ok().flatten();
    let client_ip = header("cf-connecting-ip");
    let mut applied = Vec::new();
    for rule in &config.rules {
        let Ok(matched) = rule.evaluate(&view) else { continue };
        let inputs = KeyInputs {
            client_ip: client_ip.as_deref(),
            header: &header,
            query: &query,
            path_groups: &matched.groups,
            ipv6_prefix: config.ipv6_prefix,
        };
        match derive_key(&rule.key, &inputs) {
            Ok(key) => applied.push(Applied {
                rule,
                key_hash: short_hash(&key),
                id: format!("{}\n{}", rule.name, key),
            }),
            Err(missing) => match rule.on_missing_key {
                MissingKey::Skip => continue,
                MissingKey::Reject => {
                    log_line("missing_key", &[("rule", rule.name.as_str().into())]);
                    return problem(400, "Bad Request", &format!("Rule `{}`: {missing}.", rule.name), None);
                }
            },
        }
    }
    if applied.is_empty() {
        return forward(req, &url, env).await;
    }

    let outcomes = join_all(applied.iter().map(|a| check(env, a))).await;
    let mut block: Option<(&Applied, u64, usize, Option<Reply>)> = None;
    for (a, outcome) in applied.iter().zip(outcomes) {
        match outcome {
            Outcome::Allowed => {}
            Outcome::Blocked { retry_after_ms, window, reply } => {
                let shadow = a.rule.action == Action::Log;
                log_line(
                    if shadow { "shadow_block" } else { "block" },
                    &[
                        ("rule", a.rule.name.as_str().into()),
                        ("key_hash", a.key_hash.as_str().into()),
                        ("retry_after_ms", retry_after_ms.into()),
                        ("remaining", 0.into()),
                    ],
                );
                if !shadow && block.as_ref().is_none_or(|(_, ms, _, _)| retry_after_ms > *ms) {
                    block = Some((a, retry_after_ms, window, reply));
                }
            }
            Outcome::Failed(error) => {
                log_line(
                    "counter_error",
                    &[
                        ("rule", a.rule.name.as_str().into()),
                        ("key_hash", a.key_hash.as_str().into()),
                        ("error", error.into()),
                        ("on_error", format!("{:?}", a.rule.on_error).to_lowercase().into()),
                    ],
                );
                if a.rule.on_error == FailPolicy::Deny {
                    return problem(
                        503,
                        "Service Unavailable",
                        &format!("Rule `{}` cannot be checked right now.", a.rule.name),
                        Some(1),
                    );
                }
            }
        }
    }
    if let Some((a, retry_after_ms, window, reply)) = block {
        return too_many_requests(a.rule, retry_after_ms, window, reply.as_ref());
    }
    forward(req, &url, env).await
}

/// Asks the blocked-until cache, then the rule's object, bounded by the
/// rule's timeout.
async fn check(env: &Env, applied: &Applied<'_>) -> Outcome {
    let now = now_ms();
    if applied.rule.action == Action::Block {
        if let Some(block) = BLOCKED.with(|b| b.borrow_mut().blocked_until(&applied.id, now)) {
            return Outcome::Blocked {
                retry_after_ms: (block.until_ms - now).max(1) as u64,
                window: block.window,
                reply: None,
            };
        }
    }
    let call = Call { op: Op::Hit, limits: applied.rule.limits.clone(), cost: applied.rule.cost };
    let timeout = Delay::from(Duration::from_millis(u64::from(applied.rule.timeout_ms)));
    let request = Box::pin(call_limiter(env, &applied.id, &call));
    let reply = match select(request, timeout).await {
        Either::Left((Ok(reply), _)) => reply,
        Either::Left((Err(e), _)) => return Outcome::Failed(e),
        Either::Right(_) => return Outcome::Failed(format!("no answer within {} ms", applied.rule.timeout_ms)),
    };
    if reply.allowed {
        return Outcome::Allowed;
    }
    let window = reply.binding_window.unwrap_or(0);
    if applied.rule.action == Action::Block {
        let block = Block { until_ms: now + reply.retry_after_ms as i64, window };
        BLOCKED.with(|b| b.borrow_mut().insert(&applied.id, block, now));
    }
    Outcome::Blocked { retry_after_ms: reply.retry_after_ms, window, reply: Some(reply) }
}

/// Sends one call to the object named `id`.
pub(crate) async fn call_limiter(env: &Env, id: &str, call: &Call) -> Result<Reply, String> {
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

/// Forwards the original request, unchanged, to the zone's origin, or to
/// `UPSTREAM` (scheme, host and port replaced; path, query, method, headers
/// and body kept) when that var is set.
async fn forward(req: Request, url: &worker::Url, env: &Env) -> worker::Result<Response> {
    let upstream = env
        .var(UPSTREAM_VAR)
        .map(|v| v.to_string())
        .ok()
        .filter(|v| !v.trim().is_empty());
    let outbound = match upstream {
        None => req,
        Some(origin) => {
            let mut target = format!("{}{}", origin.trim_end_matches('/'), url.path());
            if let Some(q) = url.query() {
                target.push('?');
                target.push_str(q);
            }
            let original = req.inner();
            let init = worker::web_sys::RequestInit::new();
            init.set_method(&original.method());
            init.set_headers(&original.headers());
            init.set_redirect(worker::web_sys::RequestRedirect::Manual);
            if let Some(body) = original.body() {
                init.set_body(&body);
            }
            let copy = worker::web_sys::Request::new_with_str_and_init(&target, &init)
                .map_err(worker::Error::from)?;
            Request::from(copy)
        }
    };
    Fetch::Request(outbound).send().await
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
    let windows: Vec<crate::protocol::WireWindow> = match reply {
        Some(r) => r.windows.clone(),
        None => rule
            .limits
            .iter()
            .map(|l| crate::protocol::WireWindow {
                limit: l.requests.get(),
                window_ms: l.window_ms.get(),
                used: u64::from(l.requests.get()),
                remaining: 0,
                reset_ms: retry_after_ms,
            })
            .collect(),
    };
    out.set("ratelimit-policy", &headers::ratelimit_policy(&rule.name, &windows).join(", "))?;
    if let Some(value) = headers::ratelimit(&rule.name, &windows, Some((window, retry_after_ms))) {
        out.set("ratelimit", &value)?;
    }
    Ok(Response::ok(headers::too_many_requests_body(&rule.name, retry_after_s))?
        .with_status(429)
        .with_headers(out))
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

/// One structured JSON log line (Workers Logs indexes its fields).
fn log_line(event: &str, fields: &[(&str, serde_json::Value)]) {
    let mut line = serde_json::Map::new();
    line.insert("tollgate".into(), event.into());
    for (k, v) in fields {
        line.insert((*k).into(), v.clone());
    }
    console_log!("{}", serde_json::Value::Object(line));
}

/// A short, non-reversible label for a key in logs (never the raw key).
fn short_hash(key: &str) -> String {
    crate::key::key_hash(key)
}
