//! The standalone Worker: drives the [decision machine](crate::pipeline::machine)
//! through [`crate::glue::drive`], then forwards the original request
//! untouched or answers, and settles failures-only rules with the origin's
//! answer. Glue only: it reads, calls and applies; the machine decides.
//!
//! Several rules may match one request. All are checked (concurrently), and
//! any `block` rule that is over its limit blocks the request. Each rule
//! counts independently: a request blocked by one rule is still recorded by
//! the other rules that allowed it (as separate WAF rate-limiting rules
//! would), so a client hammering a blocked endpoint also uses up its
//! broader allowance.

use crate::config::headers::OwnResponse;
use crate::config::upstream::Upstream;
use crate::config::Config;
use crate::glue::drive::{decide, Client, Decided};
use crate::glue::isolate::{load_config, load_secrets, now_ms, respond, with_isolate, write_logs};
use crate::glue::objects::{self, apply_settled, settle};
use crate::glue::answer::answering;
use crate::glue::origin::{forward, watch_upload, with_fields, UploadWatch};
use crate::pipeline::facts::Secrets;
use crate::pipeline::machine::{self, Forwarding, Settle};
use crate::pipeline::plane::Plane;
use std::rc::Rc;
use crate::pipeline::upload;
use crate::pipeline::verdict::{Answer, LogEvent};
#[cfg(feature = "standalone")]
use worker::event;
use worker::{web_sys, Context, Env};

/// Returns the raw `web_sys::Response`: the origin's response goes back to
/// the client as the very object `fetch` produced, never rebuilt.
#[cfg_attr(feature = "standalone", event(fetch))]
#[cfg_attr(not(feature = "standalone"), allow(dead_code))]
pub(crate) async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> worker::Result<web_sys::Response> {
    crate::glue::isolate::write_ended_episodes();
    let config = match load_config(&env).as_ref() {
        Ok(config) => config,
        Err((errors, policy, upstream)) => {
            // The admin Worker has no origin: it fails closed whatever the policy.
            let upstream = upstream.as_ref().filter(|_| *policy == crate::config::policy::FailPolicy::Allow && !cfg!(feature = "admin"));
            let now = now_ms();
            let (answer, log) = with_isolate(|isolate| machine::invalid_config(errors, upstream.is_some(), now, &mut isolate.config_error_logged));
            write_logs(log.as_slice());
            return match (answer, upstream) {
                // Unlimited, but never the admin prefix (the zone's own 404).
                (None, Some(_)) if crate::pipeline::plane::enters_default(&req.url()) => respond(&crate::pipeline::plane::not_here()),
                (None, Some(upstream)) => {
                    let token = env.secret(crate::pipeline::facts::ADMIN_TOKEN_SECRET).ok().map(|s| s.to_string());
                    forward(req, &env, upstream, token.as_deref()).await
                }
                (answer, _) => respond(&answer.unwrap_or_else(crate::pipeline::verdict::invalid_config)),
            };
        }
    };
    match limit(req, &env, &ctx, config).await {
        Ok(response) => Ok(response),
        Err(e) => {
            write_logs(&[LogEvent::new("edge_error", vec![("error", e.to_string().into())])]);
            respond(&OwnResponse::problem(502, "Bad Gateway", "The origin could not be reached.", None))
        }
    }
}

/// The request's flow: the machine's decision, then forward (and settle
/// failures-only rules) or answer.
async fn limit(req: web_sys::Request, env: &Env, ctx: &Context, config: &'static Config) -> worker::Result<web_sys::Response> {
    // `_holds`: the body's holds in the isolate's memory budget, given back
    // when this returns (forwarded, answered, or failed).
    let (decision, _holds) = match decide(&req, env, config, &Client::default(), plane(env, config)).await? {
        Decided::Answered(response) => return Ok(response),
        Decided::Decision(decision, hold) => (*decision, hold),
    };
    if decision.checked {
        objects::send_refunds(ctx, env, config);
    }
    let secrets = load_secrets(env, config);
    let machine::Decision { answer, settle: settlement, forwarding, .. } = decision;
    let Forwarding { settles, hidden, upload: watched_upload } = forwarding;
    let mut fields = match answer {
        Answer::Respond(own) => {
            // Not forwarded: every reservation made is released.
            settle(ctx, env, settlement.after(None, &secrets, now_ms())).await;
            return respond(&own);
        }
        Answer::Forward { fields } => fields,
    };
    let response = if settles {
        // The rest of a body over the buffer streams under the deadline.
        let watch = match watched_upload.map(|w| watch_upload(&req, upload::left_ms(w.deadline_ms, now_ms()))) {
            None => None,
            Some(Some(watch)) => Some(watch),
            Some(None) => {
                settle(ctx, env, settlement.after(None, &secrets, now_ms())).await;
                return respond(&OwnResponse::problem(400, "Bad Request", "The request body cannot be forwarded.", None));
            }
        };
        let timeout_ms = watched_upload.map_or(0, |w| w.timeout_ms);
        match forward_and_settle(ctx, env, req, &config.upstream, settlement, secrets, watch).await? {
            Forwarded::Answered(response, cookies) => {
                fields.extend(cookies);
                response
            }
            Forwarded::UploadTooSlow => {
                write_logs(&[upload::aborted_event(timeout_ms)]);
                return respond(&upload::too_slow(timeout_ms));
            }
        }
    } else {
        forward(req, env, &config.upstream, secrets.admin_token.as_deref()).await?
    };
    // A WebSocket upgrade (101) cannot be rebuilt with extra fields.
    let hides = hidden.iter().any(|name| response.headers().has(name).unwrap_or(false));
    if (fields.is_empty() && !hides) || response.status() == 101 {
        Ok(response)
    } else {
        with_fields(response, &fields, &hidden)
    }
}

/// The Worker this build is ([`crate::pipeline::plane`]): the admin
/// Worker (the `admin` feature), the admin API on when its token secret is
/// set or the config names `admin_access`; else the zone's.
fn plane(env: &Env, config: &Config) -> Plane {
    if cfg!(feature = "admin") {
        Plane::Admin { on: config.admin_access.is_some() || load_secrets(env, config).admin_token.is_some() }
    } else {
        Plane::Zone
    }
}

/// Forwards the request and settles the failures-only rules, all under
/// `waitUntil`: a client that disconnects while the origin works would
/// otherwise cancel the request before it is settled, leaving its
/// reservation to hold the slot until it expires (and, without two-phase
/// counting, its failure uncounted). The response is handed back once
/// settled, so the next request of the same client sees the count, with
/// the `Set-Cookie` fields of the devices a success made trusted. A
/// `concurrency` rule's counted answer is the exception
/// ([`crate::count::slots`], [`Settle::hold`]): its response goes first,
/// its body watched (cut when the client stops reading for
/// `idle_release`) or its WebSocket session relayed, and the settlement
/// (which gives the slot back) follows once it is done.
///
/// With `watch` (a body over the buffer), the watched request is forwarded
/// instead, and a forward the watch aborted is [`Forwarded::UploadTooSlow`]
/// (its reservations released).
async fn forward_and_settle(
    ctx: &Context,
    env: &Env,
    req: web_sys::Request,
    upstream: &'static Upstream,
    settlement: Settle<'static>,
    secrets: Rc<Secrets>,
    watch: Option<UploadWatch>,
) -> worker::Result<Forwarded> {
    let env = env.clone();
    let (done, answered) = futures_channel::oneshot::channel();
    ctx.wait_until(async move {
        let (outbound, watch) = match watch {
            Some(UploadWatch { request, stop }) => (request, Some(stop)),
            None => (req, None),
        };
        let response = forward(outbound, &env, upstream, secrets.admin_token.as_deref()).await;
        // Stopped as soon as the origin answers: a watch firing later
        // would abort the response's body.
        let too_slow = watch.is_some_and(|stop| stop.fired());
        match response {
            Ok(response) if !too_slow => {
                // A watched answer goes first, then its settlement, once
                // the body is done; any other is settled, then sent.
                let answering = answering(&env, settlement, response, secrets);
                let sent = Forwarded::Answered(answering.response, answering.cookies);
                if answering.watched {
                    let _ = done.send(Ok(sent));
                    answering.settling.await;
                } else {
                    answering.settling.await;
                    let _ = done.send(Ok(sent));
                }
            }
            failed => {
                apply_settled(&env, settlement.after(None, &secrets, now_ms())).await;
                let _ = done.send(if too_slow { Ok(Forwarded::UploadTooSlow) } else { failed.map(|r| Forwarded::Answered(r, Vec::new())) });
            }
        }
    });
    match answered.await {
        Ok(answer) => answer,
        Err(_) => Err(worker::Error::RustError("the forwarding task ended without a response".into())),
    }
}

/// What [`forward_and_settle`] got.
enum Forwarded {
    /// The upstream's response, with the `Set-Cookie` fields of the
    /// devices a success made trusted.
    Answered(web_sys::Response, Vec<(String, String)>),
    /// The upload of a body over the buffer did not finish in time: the
    /// forward was aborted, its reservations released.
    UploadTooSlow,
}
