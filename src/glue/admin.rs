//! The admin Worker's glue, all of it (the `admin` feature): the admin
//! request served ([`crate::glue::admin::serve`]: the admin plane's plan, then its flow's
//! calls to the lockout counter, the objects' controls, the controls
//! registry and the Traffic page's queries), and Cloudflare Access's I/O
//! (the team's signing keys fetched, an RS256 signature verified with
//! WebCrypto, `crypto.subtle`, so no RSA code is in the Wasm). Decides
//! nothing: the admin plane ([`crate::admin`]) does, and the core's
//! [`Keys::step`](crate::admin::access::Keys::step) says which key, or to
//! fetch.

use crate::admin::access::{AccessCheck, KeyStep, Keys, Proof, AccessRefusal};
use crate::admin::api::{self, AdminRoute};
use crate::admin::console::traffic::{self as queries, Dialect, Range, ACCOUNT_VAR, DATASET_VAR, TOKEN_SECRET};
use crate::admin::flow::{AdminFlow, AdminResponse, AdminStep};
use crate::admin::plan::{self, AdminPlan};
use crate::config::headers::OwnResponse;
use crate::config::Config;
use crate::count::classes::{self, METRICS_SINK};
use crate::count::controls::{Change, Controls, CONTROL_PATH};
use crate::count::protocol::CallFailure;
use crate::count::registry::{RegistryCall, REGISTRY_OBJECT, REGISTRY_PATH};
use crate::glue::isolate::{load_secrets, now_ms, respond, with_isolate, write_logs};
use crate::glue::objects::{self, call_with_timeout, check};
use crate::glue::origin::{read_body, BudgetHold};
use crate::glue::traffic;
use crate::pipeline::applied::Applied;
use crate::pipeline::machine::Machine;
use crate::pipeline::metrics::{SINK_OBJECT, SINK_PATH};
use crate::pipeline::plan::Body;
use crate::pipeline::upload::{self, BodyRead};
use futures_util::future::join_all;
use std::cell::RefCell;
use worker::js_sys;
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Env};

/// Serves an admin request the request machine handed over
/// ([`crate::pipeline::machine::Next::Admin`]): the admin plane plans it
/// (reading a console form's body when the plan asks, as the machine reads
/// one: capped by `body_limit`, held in the isolate's memory budget until
/// the answer), then its flow runs. `None`: the plan refused it before
/// serving (no client IP for the lockout), and the machine decides it.
pub(crate) async fn serve(
    req: &web_sys::Request,
    env: &Env,
    config: &'static Config,
    machine: &mut Machine<'static, '_>,
    holds: &mut Vec<BudgetHold>,
) -> worker::Result<Option<web_sys::Response>> {
    let mut planned = machine.admin(Body::Unread, |parts| plan::plan(config, parts));
    if let AdminPlan::NeedsBody = planned {
        let client = machine.admin(Body::Unread, |parts| (parts.header)("cf-connecting-ip"));
        let client = upload::client_of(client.as_deref(), config.ipv6_prefix);
        let (body, held, note) = read_body(req, config.memory_budget, &client, config.body_limit, config.body_timeout_ms, now_ms()).await;
        write_logs(note.as_slice());
        holds.extend(held);
        // A body still arriving at `body_timeout` is planned as unusable.
        let body = match &body {
            BodyRead::Read(bytes) => Body::Read(bytes),
            BodyRead::Unusable | BodyRead::Stalled => Body::Unusable,
        };
        planned = machine.admin(body, |parts| plan::plan(config, parts));
    }
    match planned {
        AdminPlan::Serve { lockout, route, lockout_binds, access } => {
            admin_request(env, config, (&lockout, &route, lockout_binds), access.as_ref()).await.map(Some)
        }
        AdminPlan::Refused(route) => {
            machine.admin_refused(route);
            Ok(None)
        }
        // Never for a plan given the body (read or unusable).
        AdminPlan::NeedsBody => respond(&crate::pipeline::plane::not_here()).map(Some),
    }
}

thread_local! {
    /// The Cloudflare Access team's signing keys, the admin plane's one
    /// piece of isolate state ([`crate::admin::access::Keys`]), kept beside
    /// the request machine's ([`crate::glue::isolate`]) and borrowed the
    /// same way: for one step at a time, never across an `await`.
    static ACCESS_KEYS: RefCell<Keys> = RefCell::new(Keys::default());
}

/// Runs `f` with the isolate's Access keys.
fn with_keys<T>(f: impl FnOnce(&mut Keys) -> T) -> T {
    ACCESS_KEYS.with(|keys| f(&mut keys.borrow_mut()))
}

/// How long fetching the keys may take.
const FETCH_TIMEOUT_MS: u32 = 3_000;

/// Verifies `proof`'s signature with the team's key of its `kid`,
/// fetching the keys first when the isolate's copy says so (at most one
/// fetch per request).
pub(crate) async fn verify(config: &Config, proof: &Proof) -> Result<(), AccessRefusal> {
    let Some(access) = config.admin_access.as_ref() else { return Err(AccessRefusal::KeysUnavailable) };
    let mut step = with_keys(|keys| keys.step(&proof.kid, now_ms()));
    if step == KeyStep::Fetch {
        let answer = JsFuture::from(fetch_text(&access.certs_url(), FETCH_TIMEOUT_MS)).await.ok().and_then(|v| v.as_string());
        step = with_keys(|keys| {
            keys.fetched(answer.as_deref(), now_ms());
            keys.step(&proof.kid, now_ms())
        });
    }
    match step {
        KeyStep::Verify(key) => {
            let (signed, signature) = (js_sys::Uint8Array::from(proof.signed.as_slice()), js_sys::Uint8Array::from(proof.signature.as_slice()));
            let valid = JsFuture::from(verify_rs256(&key.n, &key.e, &signed, &signature)).await;
            if valid.ok().and_then(|v| v.as_bool()) == Some(true) {
                Ok(())
            } else {
                Err(AccessRefusal::Signature)
            }
        }
        KeyStep::Refuse(refusal) => Err(refusal),
        KeyStep::Fetch => Err(AccessRefusal::KeysUnavailable),
    }
}

#[wasm_bindgen(inline_js = r#"
export async function fetchText(url, ms) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(ms), headers: { accept: "application/json" } });
    if (!res.ok) return undefined;
    const text = await res.text();
    return text.length <= 65536 ? text : undefined;
  } catch {
    return undefined;
  }
}
export async function verifyRs256(n, e, signed, signature) {
  try {
    const alg = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    const key = await crypto.subtle.importKey("jwk", { kty: "RSA", n, e, alg: "RS256", ext: true }, alg, false, ["verify"]);
    return await crypto.subtle.verify(alg, key, signature, signed);
  } catch {
    return false;
  }
}
"#)]
extern "C" {
    /// `GET url` within `ms`: the body's text (at most 64 KiB) of a 2xx
    /// answer, else `undefined`.
    #[wasm_bindgen(js_name = fetchText)]
    fn fetch_text(url: &str, ms: u32) -> js_sys::Promise;
    /// Whether `signature` is the RSASSA-PKCS1-v1_5 SHA-256 signature of
    /// `signed` under the RSA key (`n`, `e`, base64url); `false` for a key
    /// WebCrypto refuses.
    #[wasm_bindgen(js_name = verifyRs256)]
    fn verify_rs256(n: &str, e: &str, signed: &js_sys::Uint8Array, signature: &js_sys::Uint8Array) -> js_sys::Promise;
}

/// Serves the admin API (the token secret exists): drives the
/// [admin flow](crate::admin::flow): its counter and object calls,
/// then its answer, log lines and cache effects. The token is never logged.
async fn admin_request(
    env: &Env,
    config: &Config,
    (lockout, route, lockout_binds): (&Applied<'_>, &AdminRoute<'_>, bool),
    access: Option<&AccessCheck>,
) -> worker::Result<web_sys::Response> {
    if with_isolate(|isolate| isolate.first_admin()) {
        // Once per isolate, at its first admin request: no deploy-time check sees the secret.
        if let Some(token) = load_secrets(env, config).admin_token.clone() {
            write_logs(api::short_token_event(&token).as_slice());
        }
    }
    let (mut flow, mut step) = AdminFlow::start(config, lockout, route, lockout_binds, access, now_ms());
    let answer = loop {
        step = match step {
            AdminStep::VerifyAccess(proof) => flow.verified(proof, verify(config, proof).await),
            AdminStep::Lockout(applied, op) => flow.locked(check(env, applied, op).await),
            AdminStep::Control { id, change, timeout_ms } => {
                let result = control(env, &id, &change, timeout_ms).await;
                flow.changed(&change, result)
            }
            AdminStep::Call { id, call, timeout_ms } => flow.called(call_with_timeout(env, &id, &call, timeout_ms).await),
            AdminStep::ReadControls { id, timeout_ms } => flow.controls(control(env, &id, &Change::Get, timeout_ms).await),
            AdminStep::Register { call, timeout_ms } => flow.registered(registry(env, &call, timeout_ms).await),
            AdminStep::ListRegistry { timeout_ms } => flow.listed(registry(env, &RegistryCall::List, timeout_ms).await),
            AdminStep::Sessions { call, timeout_ms } => flow.sessions(registry(env, &call, timeout_ms).await),
            AdminStep::Traffic(range) => flow.traffic(answers(env, range).await),
            AdminStep::KeySpend { rule, key_hash, span_s } => {
                flow.key_spend(answer(env, &|dialect, dataset| queries::key_spend_query(dialect, dataset, &rule, &key_hash, span_s)).await)
            }
            AdminStep::ReadEach { ids, timeout_ms } => {
                flow.read_each(join_all(ids.iter().map(|id| control(env, id, &Change::Get, timeout_ms))).await)
            }
            AdminStep::Done(answer) => break answer,
        };
    };
    write_logs(&answer.logs);
    let now = now_ms();
    with_isolate(|isolate| answer.cache.iter().for_each(|effect| isolate.cache_effect(effect, now)));
    match answer.response {
        AdminResponse::Own(own) => respond(&own),
        // As workers-rs `Response::from_json` would answer, without its builder (code size).
        AdminResponse::Json(body) => respond(&OwnResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }),
    }
}

/// Sends an admin change of a key's runtime override or ban to its object
/// (`POST /v1/control`, [`crate::count::controls`]) within `timeout_ms`; the
/// controls in force after it. A refused change is
/// [`CallFailure::Refused`] with status 400.
pub(crate) async fn control(env: &Env, id: &str, change: &Change, timeout_ms: u32) -> Result<Controls, CallFailure> {
    objects::within(timeout_ms, send_control(env, id, change)).await
}

async fn send_control(env: &Env, id: &str, change: &Change) -> Result<Controls, CallFailure> {
    let text = post_line(env, id, CONTROL_PATH, &change.encode()).await?;
    Controls::decode(&text).map_err(|e| CallFailure::Unreadable(e.to_string()))
}

/// Asks the controls registry ([`crate::count::registry`], its own object)
/// within `timeout_ms`: the answer's text (a listing, or empty).
pub(crate) async fn registry(env: &Env, call: &RegistryCall, timeout_ms: u32) -> Result<String, CallFailure> {
    objects::within(timeout_ms, objects::post_to(env, classes::REGISTRY, REGISTRY_OBJECT, REGISTRY_PATH, call.encode())).await
}

/// `POST`s `body` to the limiter object `id` on `path`: the answer's text
/// when 200, else `Refused`.
pub(crate) async fn post_line(env: &Env, id: &str, path: &str, body: &str) -> Result<String, CallFailure> {
    objects::post_to(env, classes::LIMITER, id, path, body.to_string()).await
}


/// The range's answers ([`queries::queries`]; the admin Worker's: the
/// console reads them), one query after another (a console view, not a
/// request's path, and no join of futures in the Wasm).
pub(crate) async fn answers(env: &Env, range: Range) -> Result<queries::Answers, String> {
    let mut out: queries::Answers = Default::default();
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = answer(env, &|dialect, dataset| queries::queries(dialect, dataset, range).into_iter().nth(i)).await?;
    }
    Ok(out)
}

/// The answer to the query `query` makes for the traffic's source (its
/// dialect and dataset): the SQL API when the account id and token are
/// set, else the local sink when it is on; else why not (also when
/// `query` makes none).
pub(crate) async fn answer(env: &Env, query: &dyn Fn(Dialect, &str) -> Option<String>) -> Result<String, String> {
    let (account, token) = (traffic::text_binding(env, ACCOUNT_VAR), traffic::text_binding(env, TOKEN_SECRET));
    let dataset = queries::dataset(traffic::text_binding(env, DATASET_VAR).as_deref());
    let no_query = || "no query can be made of these names".to_string();
    match (account, token) {
        (Some(account), Some(token)) => sql_api(&account, &token, &query(Dialect::AnalyticsEngine, &dataset).ok_or_else(no_query)?).await,
        _ if traffic::sink_on(env) => {
            let q = query(Dialect::Sqlite, &dataset).ok_or_else(no_query)?;
            objects::post_to(env, METRICS_SINK, SINK_OBJECT, SINK_PATH, format!("query\n{q}")).await.map_err(|e: CallFailure| e.to_string())
        }
        _ => Err(format!("Analytics Engine is not set up: {ACCOUNT_VAR} or {TOKEN_SECRET} is missing.")),
    }
}

/// One query to the SQL API: its answer's text when 200, else the status.
async fn sql_api(account: &str, token: &str, query: &str) -> Result<String, String> {
    let failed = |e: JsValue| e.as_string().unwrap_or_else(|| "the SQL API cannot be reached".to_string());
    let headers = web_sys::Headers::new().map_err(failed)?;
    headers.set("authorization", &format!("Bearer {}", token.trim())).map_err(failed)?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&JsValue::from(query));
    let url = format!("https://api.cloudflare.com/client/v4/accounts/{}/analytics_engine/sql", account.trim());
    let request = web_sys::Request::new_with_str_and_init(&url, &init).map_err(failed)?;
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response: web_sys::Response = JsFuture::from(global.fetch_with_request(&request)).await.map_err(failed)?.unchecked_into();
    let text = JsFuture::from(response.text().map_err(failed)?).await.map_err(failed)?.as_string().unwrap_or_default();
    match response.status() {
        200 => Ok(text),
        status => Err(format!("the SQL API answered {status}")),
    }
}
