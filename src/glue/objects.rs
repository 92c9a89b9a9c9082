//! Calls to the limiter objects (glue, `wasm32` only): the isolate's
//! blocked-until cache in front of them, its lease book ([`crate::count::lease`]:
//! tokens held, one call in flight per key, refunds), one call with the
//! rule's timeout in the compact form ([`crate::count::protocol`]), and the calls
//! that settle failures-only rules after the request.

use crate::count::blocked::{Block, BlockedUntilCache, DEFAULT_CAPACITY};
use crate::glue::isolate::{now_ms, write_logs};
use crate::pipeline::machine::Settled;
use crate::pipeline::applied::{object_name, Applied};
use crate::count::older;
use crate::count::protocol::{decode_reply_line, decode_rpc_answer, encode_call_url, Call, CallFailure, Op, Reply};
use crate::pipeline::verdict::{self, Outcome};
use crate::count::lease::{self, Admit, LeaseSettings, Leases};
use crate::count::hold::{self, Holds};
use futures_util::future::{join_all, select, Either};
use std::cell::{Cell, RefCell};
use std::time::Duration;
use crate::count::controls::{Change, Controls, CONTROL_PATH};
use crate::count::registry::{RegistryCall, REGISTRY_OBJECT, REGISTRY_PATH};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{js_sys, web_sys, Context, Delay, Env};

use crate::count::classes::{self, ObjectClass};

thread_local! {
    static BLOCKED: RefCell<BlockedUntilCache> = RefCell::new(BlockedUntilCache::new(DEFAULT_CAPACITY));
    static LEASES: RefCell<Leases> = RefCell::new(Leases::new(lease::DEFAULT_CAPACITY));
    /// How long this isolate's reservations were held, per rule: the
    /// `Retry-After` of a refusal owed to slots in flight ([`crate::count::hold`]).
    static HOLDS: RefCell<Holds> = RefCell::new(Holds::default());
    /// The cache was sized to the config's capacity.
    static SIZED: Cell<bool> = const { Cell::new(false) };
}

/// How long a request waiting on its key's call in flight sleeps before it
/// looks again. It polls on a timer of its own: a request woken from
/// another request's handler would run (and do its I/O) in that request's
/// context, which workerd refuses ("Cannot perform I/O on behalf of a
/// different request").
const POLL_MS: u64 = 5;

/// Sizes the isolate's blocked-until cache (the config's
/// `blocked_cache_capacity`).
pub(crate) fn set_cache_capacity(capacity: usize, now_ms: i64) {
    BLOCKED.with(|b| b.borrow_mut().set_capacity(capacity, now_ms));
}

/// Sizes the cache to the config's capacity, once per isolate.
pub(crate) fn size_cache(capacity: usize) {
    if !SIZED.replace(true) {
        set_cache_capacity(capacity, now_ms());
    }
}

/// Runs `f` with the isolate's blocked-until cache, read only.
pub(crate) fn with_cache<T>(f: impl FnOnce(&BlockedUntilCache) -> T) -> T {
    BLOCKED.with(|b| f(&b.borrow()))
}

/// Drops a cached block (an admin reset, a success that clears a count).
pub(crate) fn forget_block(id: &str) {
    BLOCKED.with(|b| b.borrow_mut().remove(id));
}

/// Applies what settling decided ([`crate::pipeline::machine::Settle::after`])
/// under `waitUntil` (so the calls complete even if the client disconnects
/// and the request is cancelled), and awaits it here too.
pub(crate) async fn settle(ctx: &Context, env: &Env, settled: Settled) {
    if settled.calls.is_empty() {
        return;
    }
    let env = env.clone();
    let (done, finished) = futures_channel::oneshot::channel::<()>();
    ctx.wait_until(async move {
        apply_settled(&env, settled).await;
        let _ = done.send(());
    });
    let _ = finished.await;
}

/// Applies what settling decided: the holds recorded, the stale cached
/// blocks dropped, every call sent concurrently (a failed one is logged as
/// a `counter_error` with decision `not_recorded`).
pub(crate) async fn apply_settled(env: &Env, settled: Settled) {
    write_logs(&settled.events);
    let now = now_ms();
    HOLDS.with(|h| {
        let mut holds = h.borrow_mut();
        for (rule, reserved_at) in &settled.holds {
            holds.record(rule, *reserved_at, now);
        }
    });
    for id in &settled.forget {
        forget_block(id);
    }
    let sends = settled.calls.into_iter().map(|s| async move {
        if let Err(error) = call_any_release(env, &s.id, &s.call, s.timeout_ms, (&s.rule, &s.key_hash)).await {
            write_logs(&[verdict::counter_error(&s.rule, &s.key_hash, &error.to_string(), "not_recorded")]);
        }
    });
    join_all(sends).await;
}

/// Asks the blocked-until cache, then the rule's object (`op`: what
/// [`verdict::check_op`] or [`admin::lockout_op`] says: a hit, a reserve for
/// failures-only rules, a read-only check), bounded by the rule's timeout.
pub(crate) async fn check(env: &Env, applied: &Applied<'_>, op: Op) -> Outcome {
    if applied.device.is_some() {
        if let Some(ban) = account_ban(env, applied).await {
            return ban;
        }
    }
    let now = now_ms();
    if let Some(block) = BLOCKED.with(|b| b.borrow_mut().blocked_until(&applied.id, now)) {
        return Outcome::from_cache(block, now);
    }
    if let (Op::Hit, Some(settings)) = (op, applied.rule.lease.settings().filter(|s| s.can_lease())) {
        return leased(env, applied, *settings).await;
    }
    let call = applied.rule.call_for(op, &applied.key);
    let who = (applied.rule.name.as_str(), applied.key_hash.as_str());
    let (outcome, cacheable) = match call_any_release(env, &applied.id, &call, applied.rule.timeout_ms, who).await {
        Ok(reply) => {
            let cacheable = !reply.tally.in_flight;
            let mut outcome = Outcome::from_reply(reply);
            // Owed to slots in flight: the object can only say when the
            // first lapses; the holds seen say when one is likely back.
            if let (Outcome::Blocked { retry_after_ms, by, .. }, false) = (&mut outcome, cacheable) {
                let longest = HOLDS.with(|h| h.borrow().longest(&applied.rule.name));
                *retry_after_ms = hold::in_flight_retry_ms(*retry_after_ms, longest, hold::unseen_wait_ms(*by, applied.rule.upload.timeout_ms));
            }
            (outcome, cacheable)
        }
        Err(e) => (Outcome::Failed(older::failure_text(&call, &e)), false),
    };
    // Exact for the sliding log: a blocked request records nothing, so the
    // object would answer "blocked" until then. Shadow rules are cached too:
    // they would block until then just the same. A block owed to requests
    // in flight is not: it lifts as soon as one of them is released.
    if let Some(block) = outcome.block_to_cache(!cacheable, now) {
        BLOCKED.with(|b| b.borrow_mut().insert(&applied.id, block, now));
    }
    outcome
}

/// A trusted device counts in a bucket of its own, but a ban of its
/// account covers it (issue 25): the account's object is asked first,
/// with `probe` (nothing recorded, never cached). Blocked for the ban's
/// time when banned; the rule's fail policy when the object cannot say;
/// `None` otherwise. One more object call per request of a trusted device.
async fn account_ban(env: &Env, applied: &Applied<'_>) -> Option<Outcome> {
    let account = object_name(applied.rule, &applied.key);
    let call = applied.rule.call_for(Op::Probe, &applied.key);
    match call_with_timeout(env, &account, &call, applied.rule.timeout_ms).await {
        Ok(reply) if reply.tally.allowed => None,
        Ok(reply) => Some(Outcome::from_reply(reply)),
        Err(e) => Some(Outcome::Failed(e.to_string())),
    }
}

/// A rule that leases: spend a token this isolate holds, or wait for the
/// key's call in flight, or ask (a `hit`, or a `lease` once the key's rate
/// calls for one); the lease book decides ([`Leases::admit`]).
async fn leased(env: &Env, applied: &Applied<'_>, settings: LeaseSettings) -> Outcome {
    let cost = applied.rule.cost;
    let id = &applied.id;
    // A call in flight ends within the rule's timeout; polling twice that
    // long is a safety net, after which the request asks on its own.
    let max_waits = (2 * u64::from(applied.rule.timeout_ms)).div_ceil(POLL_MS).max(1);
    let mut waits = 0;
    loop {
        let now = now_ms();
        if waits > 0 {
            if let Some(block) = BLOCKED.with(|b| b.borrow_mut().blocked_until(id, now)) {
                return Outcome::from_cache(block, now);
            }
        }
        let admit = if waits >= max_waits {
            Admit::Ask { want: cost }
        } else {
            LEASES.with(|l| l.borrow_mut().admit(id, &settings, cost, now, waits == 0))
        };
        match admit {
            Admit::Local { windows } => return Outcome::Allowed { windows, reservation: None },
            Admit::Unavailable => return Outcome::Failed("backing off after failed calls; no tokens held".into()),
            Admit::Scarce { retry_after_ms, windows } => {
                return Outcome::Blocked { retry_after_ms, window: 0, windows: Some(windows), by: crate::count::blocked::Refusal::Limit }
            }
            Admit::Wait => {
                waits += 1;
                Delay::from(Duration::from_millis(POLL_MS)).await;
            }
            Admit::Ask { want } => return ask(env, applied, &settings, want, now).await,
        }
    }
}

/// The one call in flight for a key: a `hit`, or a `lease` of `want`.
/// Dropped with a cancelled request, it tells the lease book ([`Flight`]).
async fn ask(env: &Env, applied: &Applied<'_>, settings: &LeaseSettings, want: u32, sent_at: i64) -> Outcome {
    let cost = applied.rule.cost;
    let mut flight = Flight { id: applied.id.clone(), finished: false };
    let call = if want > cost {
        Call { op: Op::Lease, want: Some(want), hold_ms: Some(settings.ttl_ms), ..applied.rule.call_for(Op::Hit, &applied.key) }
    } else {
        applied.rule.call_for(Op::Hit, &applied.key)
    };
    let who = (applied.rule.name.as_str(), applied.key_hash.as_str());
    let result = call_any_release(env, &applied.id, &call, applied.rule.timeout_ms, who).await;
    flight.finished = true;
    match result {
        Ok(reply) => {
            let granted = reply.granted.unwrap_or(if reply.tally.allowed { u64::from(cost) } else { 0 });
            LEASES.with(|l| {
                l.borrow_mut().granted(&applied.id, settings, sent_at, cost, granted, reply.reservation, &reply.tally.windows)
            });
            let mut outcome = Outcome::from_reply(reply.clone());
            if let Outcome::Allowed { windows, .. } = &mut outcome {
                // The rest of the grant is this isolate's: remaining to it.
                let held = u32::try_from(granted.saturating_sub(u64::from(cost))).unwrap_or(u32::MAX);
                *windows = lease::with_held(windows, held);
            }
            let now = now_ms();
            if let Some(block) = outcome.block_to_cache(reply.tally.in_flight, now) {
                BLOCKED.with(|b| b.borrow_mut().insert(&applied.id, block, now));
            }
            outcome
        }
        Err(e) => {
            LEASES.with(|l| l.borrow_mut().failed(&applied.id, now_ms()));
            Outcome::Failed(older::failure_text(&call, &e))
        }
    }
}

/// A key's call in flight. Dropped before it finished (cancelled with its
/// request), it tells the lease book, so the next request asks again.
struct Flight {
    id: String,
    finished: bool,
}

impl Drop for Flight {
    fn drop(&mut self) {
        if !self.finished {
            LEASES.with(|l| l.borrow_mut().abandon(&self.id));
        }
    }
}

/// Gives back, under `waitUntil`, the unspent tokens of the leases that
/// expired (lazily: when the isolate next runs). A refund that fails is
/// not retried: its tokens lapse with their window.
pub(crate) fn send_refunds(ctx: &Context, env: &Env, config: &'static crate::config::Config) {
    if let Some(refunds) = refunds(env, config) {
        ctx.wait_until(refunds);
    }
}

/// The refunds due now (see [`send_refunds`]) as one future, for a caller
/// without a `Context` to run them under (the embedded check awaits it);
/// `None` when none is due.
pub(crate) fn refunds(env: &Env, config: &'static crate::config::Config) -> Option<impl std::future::Future<Output = ()> + 'static> {
    let due = LEASES.with(|l| l.borrow_mut().due_refunds(now_ms(), lease::DEFAULT_LEASE_TTL_MS));
    if due.is_empty() {
        return None;
    }
    let env = env.clone();
    Some(async move {
        let sends = due.into_iter().filter_map(|refund| {
            let (rule_name, key) = refund.id.split_once('\n')?;
            let rule = config.rules.iter().find(|r| r.name == rule_name)?;
            let call = Call {
                op: Op::Refund,
                cost: refund.units,
                reservation: Some(refund.lease_id),
                hold_ms: None,
                want: None,
                penalty_ms: None,
                ..rule.call_for(Op::Hit, key)
            };
            let (env, timeout_ms) = (env.clone(), rule.timeout_ms);
            Some(async move {
                let _ = call_with_timeout(&env, &refund.id, &call, timeout_ms).await;
            })
        });
        join_all(sends).await;
    })
}

/// One call to the object named `id`, as [`call_with_timeout`], that an
/// object of the release before may refuse for a field it does not know
/// ([`older`], issue 35): then the calls it takes instead are sent, in
/// order, each within `timeout_ms`, and the refusal is logged once per
/// episode (`counter_error`, decision `older_form`; `who`: the rule and
/// the key hash). The last call's result, or the first failure; a call
/// with no older form fails with the older object's refusal. Bounded: each
/// refusal drops one of the three newer fields, so at most five calls.
async fn call_any_release(env: &Env, id: &str, call: &Call, timeout_ms: u32, who: (&str, &str)) -> Result<Reply, CallFailure> {
    let mut queue = std::collections::VecDeque::from([call.clone()]);
    let mut result = Err(CallFailure::Transport("no call sent".into()));
    for _ in 0..5 {
        let Some(next) = queue.pop_front() else { break };
        result = call_with_timeout(env, id, &next, timeout_ms).await;
        let Err(failure) = &result else { continue };
        let Some(field) = older::refused_field(&next, failure) else { return result };
        let Some(calls) = older::instead(&next, field) else { return result };
        write_logs(&[verdict::counter_error(who.0, who.1, &failure.to_string(), "older_form")]);
        for c in calls.into_iter().rev() {
            queue.push_front(c);
        }
    }
    result
}

/// One call to the object named `id`, in the compact form
/// ([`crate::count::protocol`]), within `timeout_ms`: as an RPC, `stub.answer(url)`
/// raced against a timer in one crossing into JavaScript
/// ([`answer_within`]); or, where the class takes no RPC, as a fetch of the
/// call's URL ([`fetch_call`]) within what is left of the time.
pub(crate) async fn call_with_timeout(env: &Env, id: &str, call: &Call, timeout_ms: u32) -> Result<Reply, CallFailure> {
    let url = encode_call_url(call);
    let mut budget_ms = timeout_ms;
    if RPC.get() {
        let sent_at = now_ms();
        match rpc(stub(env, id)?, &url, timeout_ms).await {
            Ok(Some(answer)) => return decode_rpc_answer(&answer),
            Ok(None) => return Err(CallFailure::Timeout { ms: timeout_ms }),
            Err(e) if refused_as_rpc(&e) => RPC.set(false),
            Err(e) => return Err(CallFailure::Transport(e)),
        }
        // Refused before it reached the object: the fetch gets what is
        // left of the rule's timeout.
        let spent = u32::try_from(now_ms().saturating_sub(sent_at)).unwrap_or(u32::MAX);
        budget_ms = timeout_ms.saturating_sub(spent);
    }
    within(budget_ms, fetch_call(env, id, &url)).await.map_err(|e| match e {
        CallFailure::Timeout { .. } => CallFailure::Timeout { ms: timeout_ms },
        other => other,
    })
}

/// `request`'s result, or [`CallFailure::Timeout`] once `timeout_ms` pass.
async fn within<T>(timeout_ms: u32, request: impl std::future::Future<Output = Result<T, CallFailure>>) -> Result<T, CallFailure> {
    let timeout = Delay::from(Duration::from_millis(u64::from(timeout_ms)));
    match select(Box::pin(request), timeout).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(CallFailure::Timeout { ms: timeout_ms }),
    }
}

/// The stub of the limiter object named `id`.
fn stub(env: &Env, id: &str) -> Result<worker::Stub, CallFailure> {
    stub_of(env, classes::LIMITER, id)
}

/// The stub of the object of `class` named `id` (`getByName`: the object
/// `get(idFromName(id))` names, in one call, without an id object). A
/// binding missing from the config is named, with its class.
fn stub_of(env: &Env, class: ObjectClass, id: &str) -> Result<worker::Stub, CallFailure> {
    let missing = |e: worker::Error| CallFailure::NoBinding(format!("{} (class {}, {}): {e}", class.binding, class.class, class.role));
    env.durable_object(class.binding).and_then(|ns| ns.get_by_name(id)).map_err(missing)
}

/// Sends one call to the object named `id` as a `GET` of the call's URL
/// (the compact form, [`crate::count::protocol`]), answered by a reply line: for
/// a limiter class that takes no RPC.
async fn fetch_call(env: &Env, id: &str, url: &str) -> Result<Reply, CallFailure> {
    let transport = |e: JsValue| CallFailure::Transport(js_error(e));
    let response = stub(env, id)?.fetch_with_str(url).await.map_err(|e| CallFailure::Transport(e.to_string()))?;
    // The body read in one call (`Response::text` in workers-rs reads it
    // chunk by chunk through a stream reader, several calls into JS).
    let raw: web_sys::Response = response.into();
    let status = raw.status();
    let body = JsFuture::from(raw.text().map_err(transport)?).await.map_err(transport)?;
    decode_reply_line(status, &body.as_string().unwrap_or_default())
}

thread_local! {
    /// Whether this isolate's limiter class takes RPC calls: true until one
    /// is refused as such (an app that exports the Rust class as it is,
    /// without `src/entry.mjs`'s wrapper), then every call is a fetch.
    static RPC: Cell<bool> = const { Cell::new(true) };
}

#[wasm_bindgen(inline_js = r#"
export function answerWithin(stub, url, ms) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms, null);
    stub.answer(url).then(
      (answer) => { clearTimeout(timer); resolve(answer); },
      (error) => { clearTimeout(timer); reject(error); },
    );
  });
}
"#)]
extern "C" {
    /// `stub.answer(url)` raced against a timer of `ms` (which answers
    /// `null`), the timer cleared either way: the whole call in one
    /// crossing into JavaScript.
    #[wasm_bindgen(catch, js_name = answerWithin)]
    fn answer_within(stub: &JsValue, url: &str, ms: u32) -> Result<js_sys::Promise, JsValue>;
}

/// `stub.answer(url)` within `timeout_ms`: the object's answer, `None`
/// once the time is up, or the error's message.
async fn rpc(stub: worker::Stub, url: &str, timeout_ms: u32) -> Result<Option<String>, String> {
    let stub: JsValue = stub.into_rpc();
    let pending = answer_within(&stub, url, timeout_ms).map_err(js_error)?;
    let answer: JsValue = JsFuture::from(pending).await.map_err(js_error)?;
    if answer.is_null() {
        return Ok(None);
    }
    answer.as_string().map(Some).ok_or_else(|| "the limiter's RPC answer is not a string".to_string())
}

/// Whether an RPC call failed because the class takes none (workerd's
/// words for a class not declared `extends DurableObject`, or one without
/// an `answer` method): nothing reached the object's code, so the call is
/// sent again as a fetch.
fn refused_as_rpc(message: &str) -> bool {
    message.contains("does not support RPC") || message.contains("does not implement the method")
}

/// A JavaScript error's text, as workers-rs renders it (`worker::Error`).
fn js_error(e: JsValue) -> String {
    worker::Error::from(e).to_string()
}

/// Sends an admin change of a key's runtime override or ban to its object
/// (`POST /v1/control`, [`crate::count::controls`]) within `timeout_ms`; the
/// controls in force after it. A refused change is
/// [`CallFailure::Refused`] with status 400.
pub(crate) async fn control(env: &Env, id: &str, change: &Change, timeout_ms: u32) -> Result<Controls, CallFailure> {
    within(timeout_ms, send_control(env, id, change)).await
}

async fn send_control(env: &Env, id: &str, change: &Change) -> Result<Controls, CallFailure> {
    let text = post_line(env, id, CONTROL_PATH, &change.encode()).await?;
    Controls::decode(&text).map_err(|e| CallFailure::Unreadable(e.to_string()))
}

/// Asks the controls registry ([`crate::count::registry`], its own object)
/// within `timeout_ms`: the answer's text (a listing, or empty).
pub(crate) async fn registry(env: &Env, call: &RegistryCall, timeout_ms: u32) -> Result<String, CallFailure> {
    within(timeout_ms, post_to(env, classes::REGISTRY, REGISTRY_OBJECT, REGISTRY_PATH, call.encode())).await
}

/// `POST`s `body` to the limiter object `id` on `path`: the answer's text
/// when 200, else `Refused`.
pub(crate) async fn post_line(env: &Env, id: &str, path: &str, body: &str) -> Result<String, CallFailure> {
    post_to(env, classes::LIMITER, id, path, body.to_string()).await
}

/// `POST`s `body` to the object of `class` named `id` on `path`: the
/// answer's text when 200, else `Refused`.
pub(crate) async fn post_to(env: &Env, class: ObjectClass, id: &str, path: &str, body: String) -> Result<String, CallFailure> {
    let stub = stub_of(env, class, id)?;
    let transport = |e: JsValue| CallFailure::Transport(js_error(e));
    // Built and read through web_sys, as `fetch_call` does: workers-rs's
    // `RequestInit` conversion and its `Response::text` (a stream read
    // chunk by chunk) cost Wasm size for the same request and text.
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_redirect(web_sys::RequestRedirect::Follow);
    init.set_body(&JsValue::from(body.as_str()));
    let request = web_sys::Request::new_with_str_and_init(&format!("https://limiter{path}"), &init).map_err(|e| {
        CallFailure::Transport(e.as_string().unwrap_or_else(|| "invalid URL or options for Request".to_string()))
    })?;
    let response = stub.fetch_with_request(request.into()).await.map_err(|e| CallFailure::Transport(e.to_string()))?;
    let raw: web_sys::Response = response.into();
    let status = raw.status();
    let text = JsFuture::from(raw.text().map_err(transport)?).await.map_err(transport)?.as_string().unwrap_or_default();
    match status {
        200 => Ok(text),
        status => Err(CallFailure::Refused { status, body: text }),
    }
}

/// Caches a ban in this isolate at once (other isolates see it at their
/// next call to the object, or once their cached block ends).
pub(crate) fn cache_ban(id: &str, until_ms: i64) {
    let now = now_ms();
    if until_ms > now {
        BLOCKED.with(|b| b.borrow_mut().insert(id, Block { until_ms, window: 0, limits: Vec::new(), by: crate::count::blocked::Refusal::Ban }, now));
    }
}
