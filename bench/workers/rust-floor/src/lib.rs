//! The Rust floor: the least a workers-rs Worker does for a request, which
//! is to hand the very request object it was given to `fetch` and return the
//! origin's response object unchanged (the same raw `web_sys` forward as
//! tollgate's `origin::forward` with no `UPSTREAM`). It takes the raw
//! `web_sys::Request`, as tollgate's entry does (a `worker::Request` would
//! read `request.cf` up front).
//!
//! A request the load generator marks `x-bench-floor: 429` (one an exact
//! limiter refuses) is answered here instead, as tollgate answers a block:
//! status 429, `content-type`, `retry-after`, `ratelimit-policy` and
//! `ratelimit`, and a problem+json body of the same size, built in one
//! `new Response(text, init)`. That is the least a workers-rs Worker pays to
//! refuse a request, with no limiter behind it.

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{event, js_sys, web_sys, Context, Env};

const BODY: &str = r#"{"detail":"Rate limit `heavy-example` exceeded; retry in 60 s.","retry_after":60,"rule":"heavy-example","status":429,"title":"Too Many Requests","type":"about:blank"}"#;

#[event(fetch)]
pub async fn fetch(req: web_sys::Request, _env: Env, _ctx: Context) -> worker::Result<web_sys::Response> {
    if req.headers().get("x-bench-floor")?.as_deref() == Some("429") {
        let headers = web_sys::Headers::new()?;
        headers.append("content-type", "application/problem+json")?;
        headers.append("retry-after", "60")?;
        headers.append("ratelimit-policy", "\"heavy-example\";q=10;w=60")?;
        headers.append("ratelimit", "\"heavy-example\";r=0;t=60")?;
        let init = web_sys::ResponseInit::new();
        init.set_status(429);
        init.set_headers(&headers);
        return Ok(web_sys::Response::new_with_opt_str_and_init(Some(BODY), &init)?);
    }
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response = JsFuture::from(global.fetch_with_request(&req)).await?;
    Ok(response.unchecked_into())
}
