//! An answer and its settlement (glue, `wasm32`): the origin's response
//! the standalone Worker forwarded, or the app's response handed to the
//! embedded or RPC `settle`. One path for all three, so each settles the
//! same way: a usage rule reading the body (JSON or SSE,
//! [`crate::pipeline::usage`]) reads it as it passes, and a `concurrency`
//! rule holds its slot, until the body is done; any other answer is
//! settled at once, from its status and headers.

use crate::glue::drive::response_headers;
use crate::glue::isolate::{now_ms, write_logs};
use crate::glue::objects::apply_settled;
use crate::glue::origin::{watch_body, UsageFeed};
use crate::pipeline::facts::Secrets;
use crate::pipeline::machine::Settle;
use crate::pipeline::usage;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Env};

/// An answer on its way to the client, with what settles it.
pub(crate) struct Answering {
    /// What to send: the answer itself, or the same with its body watched
    /// (or its WebSocket session relayed).
    pub(crate) response: web_sys::Response,
    /// The `Set-Cookie` fields of the devices a success made trusted, for
    /// the response's headers.
    pub(crate) cookies: Vec<(String, String)>,
    /// Settles the answer's rules. Unwatched (`watched` false): settles at
    /// once; await it before the response is sent, so that the client's
    /// next request sees the count. Watched: resolves once the body is
    /// done (ended, cut, or the client gone) and settled; it needs the
    /// response to be sent first (it is what reads the body), so the
    /// driver keeps it alive past the response (`waitUntil`).
    pub(crate) settling: Pin<Box<dyn Future<Output = ()>>>,
    pub(crate) watched: bool,
}

/// `response` answered `settlement`'s request: the response to send, its
/// cookies, and its settlement ([`Answering`]). A body whose usage a rule
/// reads, or that holds a concurrency slot ([`Settle::hold`]), is watched
/// and settled at its end by what was read of it
/// ([`usage::BodyUsage::tokens`]: the usage; none, `max`); the cookies are
/// made once, from the headers. The runtime refusing the watch settles at
/// once from the headers (the reading rules commit their `max`).
pub(crate) fn answering(env: &Env, settlement: Settle<'static>, response: web_sys::Response, secrets: Rc<Secrets>) -> Answering {
    let status = response.status();
    let headers = response_headers(&response, &settlement.response_headers());
    let now = now_ms();
    let content_type = response.headers().get("content-type").ok().flatten();
    let reading = usage::body_usage(&settlement.applied, status, content_type.as_deref()).map(UsageFeed::new);
    let env = env.clone();
    let Some((watched, finished)) = watch_body(&response, settlement.hold(status, now), reading.as_ref()) else {
        let settled = settlement.after(Some((status, &headers)), &secrets, now);
        let cookies = settled.cookies.clone();
        let settling = Box::pin(async move { apply_settled(&env, settled).await });
        return Answering { response, cookies, settling, watched: false };
    };
    let cookies = settlement.cookies((status, &headers), &secrets, now);
    let settling = Box::pin(async move {
        let why = JsFuture::from(finished).await.ok().and_then(|word| word.as_string()).unwrap_or_default();
        write_logs(&settlement.cut_events(&why));
        let settled = match reading {
            Some(feed) => {
                let mut read = feed.usage.borrow_mut();
                read.end(usage::End::from_word(&why));
                settlement.after_reading(Some((status, &headers)), &|rule| read.tokens(rule), &|rule| read.model(rule))
            }
            None => settlement.after_reading(Some((status, &headers)), &|_| None, &|_| None),
        };
        apply_settled(&env, settled).await;
    });
    Answering { response: watched, cookies, settling, watched: true }
}
