//! The RPC entrypoint for TS/JS Workers (glue, `wasm32`, feature
//! `standalone`): an app Worker with a service binding to tollgate calls
//! `env.TOLLGATE.check(request)` and `env.TOLLGATE.settle(ticket, status)`
//! ([`crate::glue::embed`] does the work; `clients/ts/` has the types).
//!
//! How it is served: worker-build 0.8 attaches every exported free function
//! of the Wasm module to the default `WorkerEntrypoint` class as
//! `Entrypoint.prototype.NAME = exports.NAME`, which makes it an RPC method.
//! A plain export receives only the caller's arguments, not the entrypoint's
//! `env`; `#[wasm_bindgen(this)]` (wasm-bindgen 0.2.129) hands the function
//! the JS `this`, the entrypoint instance, whose `env` holds tollgate's own
//! bindings (config, `LIMITER`, secrets). So no JS wrapper is needed.
//!
//! What crosses: RPC's structured clone carries `Request` (with its body
//! stream), `Response` (also inside a returned object), strings, numbers,
//! arrays and plain objects. The `Request` arrives without its `cf` object,
//! so the caller passes what the rules read of it (`country`, `asn`) in
//! `options.cf`. Rust-side types cross wasm-bindgen as `JsValue` and are
//! read field by field here; a malformed argument is a thrown `TypeError`-
//! like error, never a panic.

use crate::glue::embed::{self, Client, Ticket};
use worker::js_sys::{self, Array, Object, Reflect};
use worker::wasm_bindgen::prelude::*;
use worker::wasm_bindgen::JsCast;
// The `#[wasm_bindgen]` of an async fn names this crate unqualified (the
// release build's expansion does not, hence the allow).
#[allow(unused_imports)]
use worker::wasm_bindgen_futures;
use std::rc::Rc;
use worker::{web_sys, Env, Request};

fn entry_env(this: &JsValue) -> Result<Env, JsValue> {
    let env = Reflect::get(this, &"env".into())?;
    if !env.is_object() {
        return Err(js_sys::Error::new("tollgate: called without an entrypoint env").into());
    }
    Ok(env.unchecked_into())
}

/// The entrypoint's `ctx` (its `waitUntil`).
fn entry_context(this: &JsValue) -> Result<worker::Context, JsValue> {
    let ctx = Reflect::get(this, &"ctx".into())?;
    if !ctx.is_object() {
        return Err(js_sys::Error::new("tollgate: called without an entrypoint ctx").into());
    }
    Ok(worker::Context::new(ctx.unchecked_into()))
}

fn error(e: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&format!("tollgate: {e}")).into()
}

fn pairs(fields: &[(String, String)]) -> Array {
    fields.iter().map(|(n, v)| Array::of2(&n.into(), &v.into())).collect()
}

/// What `options.cf` says: `{ country?: string, asn?: number }`.
fn client(options: &JsValue) -> Client {
    let cf = if options.is_object() { Reflect::get(options, &"cf".into()).unwrap_or(JsValue::UNDEFINED) } else { JsValue::UNDEFINED };
    if !cf.is_object() {
        return Client::default();
    }
    let country = Reflect::get(&cf, &"country".into()).ok().and_then(|v| v.as_string());
    let asn = Reflect::get(&cf, &"asn".into()).ok().and_then(|v| v.as_f64()).filter(|n| *n >= 0.0 && *n <= f64::from(u32::MAX)).map(|n| n as u32);
    Client { country, asn }
}

/// `check(request, options?)` → `{ allowed, response?, headers, ticket?, settleWithResponse? }`:
/// `ticket` only when a failures-only rule applied (then `settle` it);
/// `settleWithResponse` (true) when its settlement reads the response's
/// body: settle it with the whole response, `settle(ticket, response)`.
#[wasm_bindgen(this)]
pub async fn check(this: JsValue, request: JsValue, options: JsValue) -> Result<JsValue, JsValue> {
    let env = entry_env(&this)?;
    let request: web_sys::Request = request.dyn_into().map_err(|_| error("check(request): not a Request"))?;
    let request = Request::from(request);
    let decision = embed::check_as(&request, &env, &client(&options)).await.map_err(error)?;
    let out = Object::new();
    Reflect::set(&out, &"allowed".into(), &decision.allowed().into())?;
    if let Some(response) = &decision.response {
        Reflect::set(&out, &"response".into(), response)?;
    }
    Reflect::set(&out, &"headers".into(), &pairs(&decision.headers))?;
    if !decision.ticket.is_empty() {
        let ticket = decision.ticket.encode(ticket_key(&env).as_deref(), crate::glue::isolate::now_ms());
        Reflect::set(&out, &"ticket".into(), &ticket.into())?;
        if decision.needs_body {
            Reflect::set(&out, &"settleWithResponse".into(), &true.into())?;
        }
    }
    Ok(out.into())
}

/// `settle(ticket, status?, headers?)` → `{ headers }`: `status` is the
/// app's answer (`null`/absent: none, reservations released); `headers`
/// its response headers (`Headers` or a plain object), read for
/// `success_identity_header` and a usage rule's header (the
/// units committed). A `concurrency` rule's slot, taken by `check`, is
/// given back by `settle`: the app must settle once its response is done
/// (after a streamed body, to hold the slot while it streams), or the slot
/// stays taken until the rule's `reservation_ttl`. The returned `headers` are `Set-Cookie`
/// fields of trusted devices, for the app's response.
///
/// `settle(ticket, response)` → `{ headers, response }`: with the app's
/// whole `Response` instead, tollgate settles it as the standalone Worker
/// settles the origin's answer: a usage rule reads the tokens
/// from its JSON or SSE body as it streams, a `concurrency` slot is held
/// until it is sent, and the settlement follows the body's end
/// (`waitUntil`). The app must send the `response` handed back: its body
/// is the one read (the one handed in was moved over RPC).
#[wasm_bindgen(this)]
pub async fn settle(this: JsValue, ticket: JsValue, status: JsValue, headers: JsValue) -> Result<JsValue, JsValue> {
    let env = entry_env(&this)?;
    let key = ticket_key(&env);
    let ticket = ticket
        .as_string()
        .and_then(|t| Ticket::decode(&t, key.as_deref(), crate::glue::isolate::now_ms()))
        .ok_or_else(|| error("settle(ticket): not a ticket from this deployment's check, or over an hour old"))?;
    let status = match status.dyn_into::<web_sys::Response>() {
        Ok(response) => return settle_response(&this, &env, &ticket, response).await,
        Err(status) => status,
    };
    let status = match status.as_f64() {
        Some(s) if (100.0..=599.0).contains(&s) && s.fract() == 0.0 => Some(s as u16),
        Some(_) => return Err(error("settle(ticket, status): status must be an HTTP status (100-599)")),
        None if status.is_null() || status.is_undefined() => None,
        None => return Err(error("settle(ticket, status): status must be a number")),
    };
    let read = |name: &str| -> Option<String> {
        if let Some(h) = headers.dyn_ref::<web_sys::Headers>() {
            return h.get(name).ok().flatten();
        }
        if headers.is_object() {
            return Reflect::get(&headers, &name.into()).ok().and_then(|v| v.as_string());
        }
        None
    };
    let cookies = embed::settle(&env, &ticket, status, &read).await;
    let out = Object::new();
    Reflect::set(&out, &"headers".into(), &pairs(&cookies))?;
    Ok(out.into())
}

/// `settle(ticket, response)`: the app's whole response settled
/// ([`embed::settle_response`]), handed back to be sent.
async fn settle_response(this: &JsValue, env: &Env, ticket: &Ticket, response: web_sys::Response) -> Result<JsValue, JsValue> {
    let settled = embed::settle_response(env, &entry_context(this)?, ticket, response).await;
    let out = Object::new();
    Reflect::set(&out, &"headers".into(), &pairs(&settled.cookies))?;
    Reflect::set(&out, &"response".into(), &settled.response)?;
    Ok(out.into())
}

/// The key RPC tickets are signed with ([`crate::pipeline::ticket::signing_key`]):
/// from the log key and the config's `trusted_device` secrets; `None`
/// without a config or any of them. Derived once per isolate, as the log
/// key is read (a changed secret is a new deployment, hence new isolates).
fn ticket_key(env: &Env) -> Option<Rc<[u8]>> {
    crate::glue::isolate::bindings(|b| b.ticket_key.get_or_init(|| derive_ticket_key(env).map(Rc::from)).clone())
}

fn derive_ticket_key(env: &Env) -> Option<Vec<u8>> {
    let config = crate::glue::isolate::load_config(env).as_ref().ok()?;
    let secrets = crate::glue::isolate::load_secrets(env, config);
    crate::pipeline::ticket::signing_key(secrets.log_key.as_deref(), &secrets.device_secrets(config))
}
