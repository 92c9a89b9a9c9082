//! The Rust floor: the least a workers-rs Worker does for a request, which
//! is to hand the very request object it was given to `fetch` and return the
//! origin's response object unchanged (the same raw `web_sys` forward as
//! tollgate's `origin::forward` with no `UPSTREAM`). It takes the raw
//! `web_sys::Request`, as tollgate's entry does (a `worker::Request` would
//! read `request.cf` up front).
//!
//! The load generator marks the requests an exact limiter counts or
//! refuses (`x-bench-floor`; the other systems ignore the header), and the
//! floor then pays the least such a limiter must:
//! - `count` (an allowed request): one RPC call to the key's counter object
//!   (`COUNTER`, bench/workers/floor-counter.mjs: one SQLite row written in
//!   place, one alarm per key), keyed by `CF-Connecting-IP`, then the
//!   forward;
//! - `429` (a refused one): the answer tollgate gives a block, status 429
//!   with `content-type`, `retry-after`, `ratelimit-policy` and `ratelimit`
//!   and a problem+json body of the same size, built in one
//!   `new Response(text, init)`, with nothing asked of any object.

use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{event, js_sys, web_sys, Context, Env};

const BODY: &str = r#"{"detail":"Rate limit `heavy-example` exceeded; retry in 60 s.","retry_after":60,"rule":"heavy-example","status":429,"title":"Too Many Requests","type":"about:blank"}"#;

#[event(fetch)]
pub async fn fetch(req: web_sys::Request, env: Env, _ctx: Context) -> worker::Result<web_sys::Response> {
    match req.headers().get("x-bench-floor")?.as_deref() {
        Some("429") => return refuse(),
        Some("count") => count(&req, &env).await?,
        _ => {}
    }
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response = JsFuture::from(global.fetch_with_request(&req)).await?;
    Ok(response.unchecked_into())
}

fn refuse() -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new()?;
    headers.append("content-type", "application/problem+json")?;
    headers.append("retry-after", "60")?;
    headers.append("ratelimit-policy", "\"heavy-example\";q=10;w=60")?;
    headers.append("ratelimit", "\"heavy-example\";r=0;t=60")?;
    let init = web_sys::ResponseInit::new();
    init.set_status(429);
    init.set_headers(&headers);
    Ok(web_sys::Response::new_with_opt_str_and_init(Some(BODY), &init)?)
}

/// `COUNTER.get(idFromName(ip)).hit()`, awaited.
async fn count(req: &web_sys::Request, env: &Env) -> worker::Result<()> {
    let ip = req.headers().get("cf-connecting-ip")?.unwrap_or_default();
    let stub: JsValue = env.durable_object("COUNTER")?.id_from_name(&ip)?.get_stub()?.into_rpc();
    let hit = js_sys::Reflect::get(&stub, &JsValue::from_str("hit"))?;
    let hit: &js_sys::Function = hit.unchecked_ref();
    let pending: JsValue = js_sys::Reflect::apply(hit, &stub, &js_sys::Array::new())?;
    JsFuture::from(js_sys::Promise::<JsValue>::resolve(&pending)).await?;
    Ok(())
}
