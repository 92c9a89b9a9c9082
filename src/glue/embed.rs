//! tollgate inside an app Worker (glue, `wasm32` only): the same pipeline
//! as the standalone Worker ([`plan`](crate::pipeline::plan::plan) → counter calls →
//! [`verdict`](crate::pipeline::verdict::verdict)), but the app answers allowed
//! requests itself instead of tollgate forwarding them.
//!
//! ```ignore
//! let decision = tollgate::embed::check(&req, &env).await?;
//! if let Some(answer) = decision.response { return Ok(answer.into()); }   // 429 / 503 / 400
//! let response = my_handler(req).await?;                                 // the app's own work
//! let cookies = tollgate::embed::settle(&env, &decision.ticket, Some(response.status_code()), &header).await;
//! // add decision.headers (RateLimit fields) and cookies to the response
//! ```
//!
//! The config is the app's own `TOLLGATE` var, the counters its own
//! `LIMITER` Durable Object namespace bound to [`crate::Limiter`] (which the
//! app's Worker exports, as any `#[durable_object]` of a linked crate).
//! The RPC entrypoint for TS/JS Workers ([`crate::glue::rpc`]) is this module
//! behind a service binding.
//!
//! Failures-only rules (`count_statuses`) reserve a slot in [`check`]; the
//! app must [`settle`] the [`Ticket`] with its answer's status (or `None`
//! when it gave up), else the slot stays held until the rule's
//! `reservation_ttl` expires: towards blocking, never towards admitting.
//! Before it reserves, [`check`] receives a body within the rule's
//! `upload_buffer` ([`crate::pipeline::upload`]: from a clone, so the app then reads
//! it from memory), and answers 408 for one that does not arrive within
//! `upload_timeout`; a longer body is the app's to read, and to give up on
//! (`settle` with `None`) once that takes longer than `upload_timeout`.

use crate::config::policy::FailPolicy;
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
}

impl Decision {
    /// Whether the app may serve the request.
    pub fn allowed(&self) -> bool {
        self.response.is_none()
    }
}

fn allowed(headers: Vec<(String, String)>, ticket: Ticket) -> Decision {
    Decision { response: None, headers, ticket }
}

fn answered(response: web_sys::Response) -> Decision {
    Decision { response: Some(response), headers: Vec::new(), ticket: Ticket::default() }
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
    let config = match load_config(env).as_ref() {
        Ok(config) => config,
        // Logged by the standalone Worker's path only; here the policy.
        Err((_, FailPolicy::Allow, _)) => return Ok(allowed(Vec::new(), Ticket::default())),
        Err(_) => {
            return Ok(answered(respond(&verdict::invalid_config())?));
        }
    };
    let decision = match decide(req.inner(), env, config, client).await? {
        Decided::Admin(response) => return Ok(answered(response)),
        Decided::Decision(decision) => *decision,
    };
    // No `Context` to defer them to: leased tokens past their expiry go back
    // now (rarely any; each call bounded by its rule's timeout).
    if let Some(refunds) = crate::glue::objects::refunds(env, config) {
        refunds.await;
    }
    match decision.answer {
        Answer::Respond(own) => {
            // Not served: every reservation made is released.
            let secrets = load_secrets(env, Some(config));
            apply_settled(env, decision.settle.after(None, &secrets, now_ms())).await;
            Ok(answered(respond(&own)?))
        }
        Answer::Forward { fields } => {
            Ok(allowed(fields, crate::pipeline::ticket::issue(&decision.settle.applied, &decision.settle.outcomes)))
        }
    }
}

/// Settles a [`check`]'s failures-only rules with the app's answer:
/// `status` (`None`: no answer, every reservation is released) and its
/// response header by lowercased name (`header`, read for
/// `success_identity_header`). Returns the `Set-Cookie` fields of the
/// trusted devices a success made (`trusted_device` rules), for the app to
/// add. A failed counter call is logged (`counter_error`, `not_recorded`).
pub async fn settle(
    env: &Env,
    ticket: &Ticket,
    status: Option<u16>,
    header: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    if ticket.is_empty() {
        return Vec::new();
    }
    let Ok(config) = load_config(env).as_ref() else { return Vec::new() };
    let secrets = load_secrets(env, Some(config));
    let (applied, outcomes) = ticket.applied(config, secrets.log_key.as_deref());
    let settle = Settle { applied, outcomes };
    let pairs: Vec<(&str, String)> = settle.response_headers().into_iter().filter_map(|n| Some((n, header(n)?))).collect();
    let headers = HeaderMap::from_pairs(&pairs);
    let settled = settle.after(status.map(|s| (s, &headers)), &secrets, now_ms());
    let cookies = settled.cookies.clone();
    apply_settled(env, settled).await;
    cookies
}
