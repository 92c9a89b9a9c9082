//! The origin side of the Worker (glue, `wasm32` only): reading a capped
//! copy of the body, forwarding the original request (to the origin or to a
//! service binding, [`crate::upstream`]), and adding fields to the
//! upstream's response.

use futures_util::StreamExt;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use crate::upstream::Upstream;
use worker::{js_sys, web_sys, Env, Request};

/// Optional var naming a local origin (`http://127.0.0.1:8788`) to forward
/// to instead of the zone's origin; unset in production.
const UPSTREAM_VAR: &str = "UPSTREAM";

thread_local! {
    /// The `UPSTREAM` var, read once per isolate (vars are fixed for its life).
    static UPSTREAM: std::cell::OnceCell<Option<std::rc::Rc<str>>> = const { std::cell::OnceCell::new() };
}

/// The `UPSTREAM` var (local development only), if set and not blank.
fn upstream_var(env: &Env) -> Option<std::rc::Rc<str>> {
    UPSTREAM.with(|cell| {
        cell.get_or_init(|| env.var(UPSTREAM_VAR).ok().map(|v| v.to_string()).filter(|v| !v.trim().is_empty()).map(Into::into))
            .clone()
    })
}

/// Reads the body, for `body:` keys and form parameters, from a clone (the
/// original still reaches the origin intact), at most `limit` bytes: a body
/// announced or found to be larger is not buffered (`None`, planned as
/// `Body::Unusable`): a `body:` key is missing and the rule's missing-key
/// policy applies; a form body is unreadable and matches (fail safe, see
/// `crate::plan`).
pub(crate) async fn read_body(req: &web_sys::Request, limit: u32) -> Option<Vec<u8>> {
    let limit = limit as usize;
    let announced = req.headers().get("content-length").ok().flatten();
    if announced.and_then(|l| l.trim().parse::<usize>().ok()).is_some_and(|l| l > limit) {
        return None;
    }
    // `Request.clone()` (the JS method: the body teed, the original left
    // readable for the origin).
    let mut copy = Request::from(req.clone().ok()?);
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

/// Forwards the original request, unchanged: to the Worker behind the
/// config's service binding (`upstream = { service = "APP" }`:
/// `env.APP.fetch(request)`, the very request object), else to the zone's
/// origin, or to `UPSTREAM` (scheme, host and port replaced; path, query,
/// method, headers and body kept) when that var is set.
pub(crate) async fn forward(
    req: web_sys::Request,
    env: &Env,
    upstream: &Upstream,
) -> worker::Result<web_sys::Response> {
    if let Upstream::Service(binding) = upstream {
        let service: worker::worker_sys::Fetcher = env.service(binding)?.into_rpc();
        let response = JsFuture::from(service.fetch(&req)?).await?;
        return Ok(response.unchecked_into());
    }
    let outbound: web_sys::Request = match upstream_var(env) {
        // The same JS object (a handle clone, not `Request.clone()`, which
        // would tee the body).
        None => req,
        Some(origin) => {
            let url = worker::Url::parse(&req.url())?;
            let mut target = format!("{}{}", origin.trim_end_matches('/'), url.path());
            if let Some(q) = url.query() {
                target.push('?');
                target.push_str(q);
            }
            let original = &req;
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
pub(crate) fn with_fields(raw: web_sys::Response, fields: &[(String, String)]) -> worker::Result<web_sys::Response> {
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
