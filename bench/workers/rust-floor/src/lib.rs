//! The Rust floor: the least a workers-rs Worker does for a request, which
//! is to hand the very request object it was given to `fetch` and return the
//! origin's response object unchanged (the same raw `web_sys` forward as
//! tollgate's `origin::forward` with no `UPSTREAM`).

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{event, js_sys, web_sys, Context, Env, Request};

#[event(fetch)]
pub async fn fetch(req: Request, _env: Env, _ctx: Context) -> worker::Result<web_sys::Response> {
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response = JsFuture::from(global.fetch_with_request(req.inner())).await?;
    Ok(response.unchecked_into())
}
