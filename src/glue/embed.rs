//! tollgate inside an app Worker written in Rust (workers-rs): the app's
//! own fetch handler asks [`check`] about each request, answers it itself
//! when allowed, and [`settle`]s failures-only rules with its status. No
//! second Worker, no extra invocation: the same pipeline as tollgate's
//! standalone Worker (the decision machine, `pipeline::machine`,
//! driven by the same glue), the same canonical
//! view of the request, keys, counters and answers (429 problem+json,
//! `Retry-After`, `RateLimit` fields). `wasm32` only.
//!
//! # Setting up
//!
//! The app depends on the crate without its default features, which are
//! the standalone Worker's own `#[event(fetch)]` and RPC entrypoint:
//!
//! ```toml
//! [dependencies]
//! tollgate = { version = "0.2.0", default-features = false }
//! worker = "0.8.7"
//! wasm-bindgen = "=0.2.129"   # the exact version tollgate is built with
//! ```
//!
//! Its `wrangler.toml` holds the rules, the `TOLLGATE` var (the schema is
//! the standalone Worker's: `tollgate check wrangler.toml` validates it
//! offline, `npx tollgate check` without Rust), and binds the
//! [`Limiter`](crate::Limiter) Durable Object as `LIMITER` and the
//! [`Registry`](crate::Registry) as `TOLLGATE_REGISTRY` (one class per
//! role; the local metrics sink is the standalone Worker's only); the app's
//! Worker exports the classes by linking the crate:
//!
//! ```toml
//! [[durable_objects.bindings]]
//! name = "LIMITER"
//! class_name = "Limiter"
//!
//! [[durable_objects.bindings]]
//! name = "TOLLGATE_REGISTRY"
//! class_name = "Registry"
//!
//! [[migrations]]
//! tag = "v1"
//! new_sqlite_classes = ["Limiter"]
//!
//! [[migrations]]
//! tag = "v2"
//! new_sqlite_classes = ["Registry"]
//!
//! [vars.TOLLGATE]
//!
//! [[vars.TOLLGATE.rules]]
//! name = "api"
//! path = "/api/*"
//! key = ["ip"]
//! limits = [{ requests = 10, window = "1m" }]
//! ratelimit_headers = true
//! ```
//!
//! `npx tollgate init my-app --preset crate` writes such a project
//! (Cargo.toml, wrangler.toml, the handler below), with a `[build]` command
//! that checks the rules before worker-build runs.
//!
//! # Example
//!
//! Send every request through [`check`], not only the routes to limit: the
//! rules match a canonical view of the request, and the app's own router
//! (case-sensitive and literal) would not send `/API/items` or
//! `/api//items` to a check mounted on `/api/`.
//!
//! ```ignore
//! use tollgate::embed::{self, Decision};
//! use worker::{event, Context, Env, Headers, Request, Response, Result};
//!
//! #[event(fetch)]
//! async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
//!     let decision = embed::check(&req, &env).await?;
//!     if let Some(answer) = decision.response {
//!         return Ok(Response::from(answer)); // tollgate's 429, 503 or 400, as is
//!     }
//!     let response = my_handler(req).await?; // the app's own work
//!     finish(&env, decision, response).await
//! }
//!
//! /// Settles the failures-only rules with the app's status, and adds the
//! /// `RateLimit` fields and any trusted-device cookie to its response.
//! async fn finish(env: &Env, decision: Decision, response: Response) -> Result<Response> {
//!     let headers = response.headers().clone();
//!     let header = |name: &str| headers.get(name).ok().flatten();
//!     let cookies = embed::settle(env, &decision.ticket, Some(response.status_code()), &header).await;
//!     let out = Headers::new();
//!     for (name, value) in response.headers().entries() {
//!         out.append(&name, &value)?;
//!     }
//!     for (name, value) in decision.headers.iter().chain(&cookies) {
//!         out.append(name, value)?;
//!     }
//!     Ok(response.with_headers(out))
//! }
//! ```
//!
//! A complete app is `examples/rust-app` in the tollgate repository (the
//! example above is its code: `tests/doc_examples.rs` checks it), and the
//! operator guide compares this pattern with tollgate in front of the app
//! (a service binding) and with a TS/JS app calling it over RPC.
//!
//! # Contract
//!
//! The config is the app's own `TOLLGATE` var, the counters its own
//! `LIMITER` Durable Object namespace. A config that does not parse is
//! handled by its `on_invalid_config`: `"deny"` (the default) makes
//! [`check`] answer 503, `"allow"` lets every request through unlimited.
//! [`check`] returns an error only where the runtime fails.
//!
//! Failures-only rules (`counting.statuses`) reserve a slot in [`check`]; the
//! app must [`settle`] the [`Ticket`] with its answer's status (or `None`
//! when it gave up), else the slot stays held until the rule's
//! `reservation_ttl` expires: towards blocking, never towards admitting.
//! Before it reserves, [`check`] receives a body within the rule's
//! `upload_buffer` (`pipeline::upload`: from a clone, so the app then reads
//! it from memory), and answers 408 for one that does not arrive within
//! `upload_timeout`; a longer body is the app's to read, and to give up on
//! (`settle` with `None`) once that takes longer than `upload_timeout`.
//!
//! The RPC entrypoint that TS/JS Workers call over a service binding
//! (`env.TOLLGATE.check(request)`) is this module too, in the standalone
//! Worker: [`check_as`] with the [`Client`] facts that RPC does not carry.

use crate::config::policy::FailPolicy;
use crate::pipeline::plane::Plane;
use crate::glue::drive::{decide, Decided};
pub use crate::glue::drive::Client;
use crate::glue::isolate::{load_config, load_secrets, now_ms, respond};
use crate::glue::objects::apply_settled;
use crate::pipeline::facts::HeaderMap;
use crate::pipeline::machine::Settle;
pub use crate::pipeline::ticket::Ticket;
use crate::pipeline::verdict::{self, Answer};
use worker::{web_sys, Env, Request};

/// What [`check`] decided about one request.
#[derive(Debug)]
pub struct Decision {
    /// tollgate's own answer (429, 503, 400, an admin reply) when the
    /// request must not reach the app's handler; `None`: allowed.
    pub response: Option<web_sys::Response>,
    /// Fields for the app to add to its response when allowed (`RateLimit`,
    /// `RateLimit-Policy` of rules with `ratelimit_headers`).
    pub headers: Vec<(String, String)>,
    /// What [`settle`] needs for failures-only rules (empty otherwise).
    pub ticket: Ticket,
    /// Whether the settlement reads the response's body (a usage rule
    /// reading an LLM's answer, a `concurrency` slot held while it is
    /// sent): settle with [`settle_response`], which watches it.
    pub needs_body: bool,
}

impl Decision {
    /// Whether the app may serve the request.
    pub fn allowed(&self) -> bool {
        self.response.is_none()
    }
}

fn allowed(headers: Vec<(String, String)>, ticket: Ticket, needs_body: bool) -> Decision {
    Decision { response: None, headers, ticket, needs_body }
}

fn answered(response: web_sys::Response) -> Decision {
    Decision { response: Some(response), headers: Vec::new(), ticket: Ticket::default(), needs_body: false }
}

/// Runs the request through the config's rules, counting it as the
/// standalone Worker would (same canonicalization, keys, body reading on a
/// clone: `req` stays readable). Errors only where the runtime fails.
pub async fn check(req: &Request, env: &Env) -> worker::Result<Decision> {
    check_as(req, env, &Client::default()).await
}

/// [`check`], with `client` standing in for `req.cf()` where it says
/// something.
pub async fn check_as(req: &Request, env: &Env, client: &Client) -> worker::Result<Decision> {
    crate::glue::isolate::write_ended_episodes();
    let config = match load_config(env).as_ref() {
        Ok(config) => config,
        // Logged by the standalone Worker's path only; here the policy.
        Err((_, FailPolicy::Allow, _)) => return Ok(allowed(Vec::new(), Ticket::default(), false)),
        Err(_) => {
            return Ok(answered(respond(&verdict::invalid_config())?));
        }
    };
    // An app's own check is the zone's: the admin API is the admin Worker's.
    let decision = match decide(req.inner(), env, config, client, Plane::Zone).await? {
        Decided::Answered(response) => return Ok(answered(response)),
        // The body's holds end here: the app reads the body from now on.
        Decided::Decision(decision, _holds) => *decision,
    };
    // No `Context` to defer them to: leased tokens past their expiry go back
    // now (rarely any; each call bounded by its rule's timeout).
    if let Some(refunds) = crate::glue::objects::refunds(env, config) {
        refunds.await;
    }
    match decision.answer {
        Answer::Respond(own) => {
            // Not served: every reservation made is released.
            let secrets = load_secrets(env, config);
            apply_settled(env, decision.settle.after(None, &secrets, now_ms())).await;
            Ok(answered(respond(&own)?))
        }
        Answer::Forward { fields } => {
            let needs_body = decision.settle.needs_body();
            Ok(allowed(fields, crate::pipeline::ticket::issue(&decision.settle.applied, &decision.settle.outcomes), needs_body))
        }
    }
}

/// Settles a [`check`]'s failures-only rules with the app's answer:
/// `status` (`None`: no answer, every reservation is released) and its
/// response header by lowercased name (`header`, read for
/// `success_identity_header` and a usage rule's header). A `concurrency`
/// rule's slot, taken by `check`, is given back here: call it once the
/// response is done, or the slot is held until `reservation_ttl`. Returns
/// the `Set-Cookie` fields of the
/// trusted devices a success made (`trusted_device` rules), for the app to
/// add. A failed counter call is logged (`counter_error`, `not_recorded`).
pub async fn settle(
    env: &Env,
    ticket: &Ticket,
    status: Option<u16>,
    header: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let Some((settle, secrets)) = ticket_settle(env, ticket) else { return Vec::new() };
    let headers = HeaderMap::of(&settle.response_headers(), header);
    let settled = settle.after(status.map(|s| (s, &headers)), &secrets, now_ms());
    let cookies = settled.cookies.clone();
    apply_settled(env, settled).await;
    cookies
}

/// What [`settle_response`] hands back: the response to send and the
/// `Set-Cookie` fields of the devices a success made trusted, for the app
/// to add (with the [`Decision`]'s `headers`).
#[derive(Debug)]
pub struct Settled {
    /// The app's response, or the same with its body watched (a usage rule
    /// reading it, a concurrency slot held until it is sent).
    pub response: web_sys::Response,
    /// `Set-Cookie` fields (`trusted_device` rules).
    pub cookies: Vec<(String, String)>,
}

/// Settles a [`check`]'s rules with the app's whole `response`, the way the
/// standalone Worker settles the origin's answer: from its status and
/// headers, and, for a rule that reads usage from the body (`metering.usage`:
/// an LLM's JSON or SSE answer) or holds a `concurrency` slot, from its body
/// as it streams to the client, unchanged. Send [`Settled::response`] (not
/// the one handed in): its body is what is read. The settlement that waits
/// for the body is kept alive with `ctx.wait_until` and runs once the body
/// ended, was cut, or the client went away; any other is done when this
/// returns. A ticket with nothing to settle gives the response back as is.
pub async fn settle_response(env: &Env, ctx: &worker::Context, ticket: &Ticket, response: web_sys::Response) -> Settled {
    let Some((settle, secrets)) = ticket_settle(env, ticket) else { return Settled { response, cookies: Vec::new() } };
    let answering = crate::glue::answer::answering(env, settle, response, secrets);
    if answering.watched {
        ctx.wait_until(answering.settling);
    } else {
        answering.settling.await;
    }
    Settled { response: answering.response, cookies: answering.cookies }
}

/// The `Settle` step `ticket` names, rebuilt from the config, with the
/// isolate's secrets; `None` for an empty ticket or without a config
/// (nothing to settle).
fn ticket_settle(env: &Env, ticket: &Ticket) -> Option<(Settle<'static>, std::rc::Rc<crate::pipeline::facts::Secrets>)> {
    if ticket.is_empty() {
        return None;
    }
    let config = load_config(env).as_ref().ok()?;
    let secrets = load_secrets(env, config);
    let (applied, outcomes) = ticket.applied(config, secrets.log_key.as_deref());
    // The ticket carries no address: an embedded app's sessions share the
    // `unknown` client's quarter of the budget.
    let charged = crate::pipeline::upload::Charged { budget: config.memory_budget, ..Default::default() };
    Some((Settle { applied, outcomes, charged }, secrets))
}
