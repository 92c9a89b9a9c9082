//! Calls to the limiter objects (glue, `wasm32` only): the isolate's
//! blocked-until cache in front of them, one call with the rule's timeout
//! in the compact form ([`crate::protocol`]), and the calls that settle
//! failures-only rules after the request.

use crate::blocked::{Block, BlockedUntilCache, DEFAULT_CAPACITY};
use crate::edge::{now_ms, write_logs};
use crate::plan::Applied;
use crate::protocol::{decode_reply_line, encode_call_url, Call, CallFailure, Op, Reply};
use crate::verdict::{self, Answered, Outcome};
use futures_util::future::{join_all, select, Either};
use std::cell::RefCell;
use std::time::Duration;
use crate::controls::{Change, Controls, CONTROL_PATH};
use worker::{Context, Delay, Env, Method, Request, RequestInit};

/// The Durable Object namespace binding of the limiter objects.
const LIMITER_BINDING: &str = "LIMITER";

thread_local! {
    static BLOCKED: RefCell<BlockedUntilCache> = RefCell::new(BlockedUntilCache::new(DEFAULT_CAPACITY));
}

/// Sizes the isolate's blocked-until cache (the config's
/// `blocked_cache_capacity`).
pub(crate) fn set_cache_capacity(capacity: usize, now_ms: i64) {
    BLOCKED.with(|b| b.borrow_mut().set_capacity(capacity, now_ms));
}

/// Drops a cached block (an admin reset, a success that clears a count).
pub(crate) fn forget_block(id: &str) {
    BLOCKED.with(|b| b.borrow_mut().remove(id));
}

/// One call that settles a failures-only rule after the request.
pub(crate) struct Settlement {
    id: String,
    call: Call,
    timeout_ms: u32,
    rule: String,
    key_hash: String,
}

/// The calls that settle the failures-only rules ([`verdict::settle`]),
/// given the origin's answer (`None`: not forwarded, or the origin could
/// not be reached). A success that clears or forgives a count also drops
/// the key's block from this isolate's cache.
pub(crate) fn settlements(applied: &[Applied<'_>], outcomes: &[Outcome], origin: Option<&Answered<'_>>) -> Vec<Settlement> {
    let mut calls = Vec::new();
    for (a, outcome) in applied.iter().zip(outcomes) {
        let Some(call) = verdict::settle(a, outcome, origin) else { continue };
        if matches!(call.op, Op::Clear | Op::Forgive) {
            forget_block(&a.id);
        }
        let (id, timeout_ms, rule, key_hash) = (a.id.clone(), a.rule.timeout_ms, a.rule.name.clone(), a.key_hash.clone());
        calls.push(Settlement { id, call, timeout_ms, rule, key_hash });
    }
    calls
}

/// Sends `calls` under `waitUntil` (so they complete even if the client
/// disconnects and the request is cancelled), and awaits them here too.
pub(crate) async fn settle(ctx: &Context, env: &Env, calls: Vec<Settlement>) {
    if calls.is_empty() {
        return;
    }
    let env = env.clone();
    let (done, settled) = futures_channel::oneshot::channel::<()>();
    ctx.wait_until(async move {
        send_settlements(&env, calls).await;
        let _ = done.send(());
    });
    let _ = settled.await;
}

/// Sends every settlement concurrently; a failed one is logged as a
/// `counter_error` with decision `not_recorded`.
pub(crate) async fn send_settlements(env: &Env, calls: Vec<Settlement>) {
    let sends = calls.into_iter().map(|s| async move {
        if let Err(error) = call_with_timeout(env, &s.id, &s.call, s.timeout_ms).await {
            write_logs(&[verdict::counter_error(&s.rule, &s.key_hash, &error.to_string(), "not_recorded")]);
        }
    });
    join_all(sends).await;
}

/// Asks the blocked-until cache, then the rule's object (`op`: what
/// [`verdict::check_op`] or [`admin::lockout_op`] says: a hit, a reserve for
/// failures-only rules, a read-only check), bounded by the rule's timeout.
pub(crate) async fn check(env: &Env, applied: &Applied<'_>, op: Op) -> Outcome {
    let now = now_ms();
    if let Some(block) = BLOCKED.with(|b| b.borrow_mut().blocked_until(&applied.id, now)) {
        return Outcome::from_cache(block, now);
    }
    let call = applied.rule.call_for(op, &applied.key);
    let (outcome, cacheable) = match call_with_timeout(env, &applied.id, &call, applied.rule.timeout_ms).await {
        Ok(reply) => {
            let cacheable = !reply.tally.in_flight;
            (Outcome::from_reply(reply), cacheable)
        }
        Err(e) => (Outcome::Failed(e.to_string()), false),
    };
    // Exact for the sliding log: a blocked request records nothing, so the
    // object would answer "blocked" until then. Shadow rules are cached too:
    // they would block until then just the same. A block owed to requests
    // in flight is not: it lifts as soon as one of them is released.
    if let (Outcome::Blocked { retry_after_ms, window, .. }, true) = (&outcome, cacheable) {
        let block = Block { until_ms: now + *retry_after_ms as i64, window: *window };
        BLOCKED.with(|b| b.borrow_mut().insert(&applied.id, block, now));
    }
    outcome
}

pub(crate) async fn call_with_timeout(env: &Env, id: &str, call: &Call, timeout_ms: u32) -> Result<Reply, CallFailure> {
    let timeout = Delay::from(Duration::from_millis(u64::from(timeout_ms)));
    let request = Box::pin(call_limiter(env, id, call));
    match select(request, timeout).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(CallFailure::Timeout { ms: timeout_ms }),
    }
}

/// Sends one call to the object named `id`, in the compact form: a `GET`
/// of the call's URL, answered by a reply line ([`crate::protocol`]).
async fn call_limiter(env: &Env, id: &str, call: &Call) -> Result<Reply, CallFailure> {
    let stub = env
        .durable_object(LIMITER_BINDING)
        .and_then(|ns| ns.id_from_name(id)?.get_stub())
        .map_err(|e| CallFailure::NoBinding(e.to_string()))?;
    let transport = |e: worker::Error| CallFailure::Transport(e.to_string());
    let mut response = stub.fetch_with_str(&encode_call_url(call)).await.map_err(transport)?;
    let body = response.text().await.map_err(transport)?;
    decode_reply_line(response.status_code(), &body)
}

/// Sends an admin change of a key's runtime override or ban to its object
/// (`POST /v1/control`, [`crate::controls`]) within `timeout_ms`; the
/// controls in force after it. A refused change is
/// [`CallFailure::Refused`] with status 400.
pub(crate) async fn control(env: &Env, id: &str, change: &Change, timeout_ms: u32) -> Result<Controls, CallFailure> {
    let timeout = Delay::from(Duration::from_millis(u64::from(timeout_ms)));
    let request = Box::pin(send_control(env, id, change));
    match select(request, timeout).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(CallFailure::Timeout { ms: timeout_ms }),
    }
}

async fn send_control(env: &Env, id: &str, change: &Change) -> Result<Controls, CallFailure> {
    let stub = env
        .durable_object(LIMITER_BINDING)
        .and_then(|ns| ns.id_from_name(id)?.get_stub())
        .map_err(|e| CallFailure::NoBinding(e.to_string()))?;
    let transport = |e: worker::Error| CallFailure::Transport(e.to_string());
    let body = change.encode();
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let request = Request::new_with_init(&format!("https://limiter{CONTROL_PATH}"), &init).map_err(transport)?;
    let mut response = stub.fetch_with_request(request).await.map_err(transport)?;
    let text = response.text().await.map_err(transport)?;
    match response.status_code() {
        200 => Controls::decode(&text).map_err(|e| CallFailure::Unreadable(e.to_string())),
        status => Err(CallFailure::Refused { status, body: text }),
    }
}

/// Caches a ban in this isolate at once (other isolates see it at their
/// next call to the object, or once their cached block ends).
pub(crate) fn cache_ban(id: &str, until_ms: i64) {
    let now = now_ms();
    if until_ms > now {
        BLOCKED.with(|b| b.borrow_mut().insert(id, Block { until_ms, window: 0 }, now));
    }
}
