//! Calls to the limiter objects (glue, `wasm32` only): transport. A rule's
//! counter is driven here as the core's [`CounterRun`] asks (its calls sent,
//! its waits slept, its replies handed back); every decision about the
//! cache, the lease book and the holds is the core's
//! ([`crate::pipeline::isolate`]). One call goes with the rule's timeout in
//! the compact form ([`crate::count::protocol`]).

use crate::glue::isolate::{bindings, now_ms, with_isolate, write_logs};
use crate::pipeline::machine::SettleEffects;
use crate::pipeline::applied::Applied;
use crate::count::protocol::{decode_reply_line, decode_rpc_answer, encode_call_url, Call, CallFailure, Op, Reply};
use crate::pipeline::isolate::{CounterRun, Exchange, ObjectCall, Step};
use crate::pipeline::verdict::{self, Failure, Outcome};
use futures_util::future::{join_all, select, Either};
use std::time::Duration;
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{js_sys, web_sys, Context, Delay, Env};

use crate::count::classes::{self, ObjectClass};

/// Applies what settling decided ([`crate::pipeline::machine::Settle::after`])
/// under `waitUntil` (so the calls complete even if the client disconnects
/// and the request is cancelled), and awaits it here too.
pub(crate) async fn settle(ctx: &Context, env: &Env, settled: SettleEffects) {
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

/// Applies what settling decided: the isolate told ([`crate::pipeline::isolate::Isolate::settled`]:
/// holds, stale blocks), every call sent concurrently (a failed one is
/// logged as a `counter_error` with decision `not_recorded`).
pub(crate) async fn apply_settled(env: &Env, mut settled: SettleEffects) {
    write_logs(&settled.events);
    write_points(env, std::mem::take(&mut settled.points)).await;
    let now = now_ms();
    with_isolate(|isolate| isolate.settled(&settled, now));
    let sends = settled.calls.into_iter().map(|s| async move {
        if let Err(error) = exchange(env, &s.id, &s.call, s.timeout_ms, (&s.rule, &s.key_hash)).await {
            write_logs(&[verdict::counter_error(&s.rule, &s.key_hash, &Failure::Call(error), "not_recorded")]);
        }
    });
    join_all(sends).await;
}

/// Asks a rule's counter with `op` ([`verdict::check_op`] or the admin
/// lockout's): drives the core's [`CounterRun`] to its outcome, sending the
/// calls it asks for and sleeping the waits it asks for.
pub(crate) async fn check(env: &Env, applied: &Applied<'_>, op: Op) -> Outcome {
    let mut driving = Driving(CounterRun::new(applied, op));
    let now = now_ms();
    let mut step = with_isolate(|isolate| driving.0.start(isolate, now));
    loop {
        step = match step {
            Step::Call(ObjectCall { id, call, timeout_ms }) => {
                let result = call_with_timeout(env, &id, &call, timeout_ms).await;
                let now = now_ms();
                with_isolate(|isolate| driving.0.replied(isolate, result, now))
            }
            // A timer of this request's own (see `pipeline::isolate::POLL_MS`).
            Step::Wait { ms } => {
                Delay::from(Duration::from_millis(ms)).await;
                let now = now_ms();
                with_isolate(|isolate| driving.0.waited(isolate, now))
            }
            Step::Done(outcome) => {
                write_logs(&std::mem::take(&mut driving.0.logs));
                return outcome;
            }
        };
    }
}

/// A counter being driven. Dropped before its outcome (cancelled with its
/// request), it tells the core ([`CounterRun::cancelled`]).
struct Driving<'a, 'c>(CounterRun<'a, 'c>);

impl Drop for Driving<'_, '_> {
    fn drop(&mut self) {
        with_isolate(|isolate| self.0.cancelled(isolate));
    }
}

/// Gives back, under `waitUntil`, the unspent tokens of the leases that
/// expired ([`crate::pipeline::isolate::Isolate::refunds`]).
pub(crate) fn send_refunds(ctx: &Context, env: &Env, config: &'static crate::config::Config) {
    if let Some(refunds) = refunds(env, config) {
        ctx.wait_until(refunds);
    }
}

/// The refunds due now (see [`send_refunds`]) as one future, for a caller
/// without a `Context` to run them under (the embedded check awaits it);
/// `None` when none is due.
pub(crate) fn refunds(env: &Env, config: &'static crate::config::Config) -> Option<impl std::future::Future<Output = ()> + 'static> {
    let now = now_ms();
    let due = with_isolate(|isolate| isolate.refunds(config, now));
    if due.is_empty() {
        return None;
    }
    let env = env.clone();
    Some(async move {
        let sends = due.into_iter().map(|refund| {
            let env = env.clone();
            async move {
                let _ = call_with_timeout(&env, &refund.id, &refund.call, refund.timeout_ms).await;
            }
        });
        join_all(sends).await;
    })
}

/// One call to the object named `id` that an object of the release before
/// may refuse for a field it does not know: the core's [`Exchange`] says
/// what to send instead, and the `older_form` line to write (`who`: the
/// rule and the key hash). The last call's result, or the first failure.
async fn exchange(env: &Env, id: &str, call: &Call, timeout_ms: u32, who: (&str, &str)) -> Result<Reply, CallFailure> {
    let mut exchange = Exchange::new(call.clone());
    let mut logs = Vec::new();
    loop {
        let result = call_with_timeout(env, id, exchange.call(), timeout_ms).await;
        if let Some(result) = exchange.answered(result, who, &mut logs) {
            write_logs(&logs);
            return result;
        }
    }
}

/// One call to the object named `id`, in the compact form
/// ([`crate::count::protocol`]), within `timeout_ms`: as an RPC, `stub.answer(url)`
/// raced against a timer in one crossing into JavaScript
/// ([`answer_within`]); or, where the class takes no RPC, as a fetch of the
/// call's URL ([`fetch_call`]) within what is left of the time.
pub(crate) async fn call_with_timeout(env: &Env, id: &str, call: &Call, timeout_ms: u32) -> Result<Reply, CallFailure> {
    let url = encode_call_url(call);
    let mut budget_ms = timeout_ms;
    if !bindings(|b| b.rpc_refused.get()) {
        let sent_at = now_ms();
        match rpc(stub(env, id)?, &url, timeout_ms).await {
            Ok(Some(answer)) => return decode_rpc_answer(&answer),
            Ok(None) => return Err(CallFailure::Timeout { ms: timeout_ms }),
            Err(e) if refused_as_rpc(&e) => bindings(|b| b.rpc_refused.set(true)),
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
pub(crate) async fn within<T>(timeout_ms: u32, request: impl std::future::Future<Output = Result<T, CallFailure>>) -> Result<T, CallFailure> {
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

/// Writes points made after the request's own (settling's `spend`) where
/// those go: the local sink when it is on, else the bound dataset, if any.
async fn write_points(env: &Env, points: Vec<crate::pipeline::metrics::Point>) {
    if points.is_empty() {
        return;
    }
    if crate::glue::traffic::sink_on(env) {
        sink(env, &points).await;
    } else if let Some(dataset) = crate::glue::traffic::metrics_dataset(env) {
        crate::glue::traffic::write_metrics(&dataset, points);
    }
}

/// Writes `points` to the local sink (awaited: local development only).
/// A failed write is dropped.
pub(crate) async fn sink(env: &Env, points: &[crate::pipeline::metrics::Point]) {
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    let mut body = String::from("write\n");
    for p in points {
        let blobs: Vec<String> = p.blobs.iter().map(|b| clean(b)).collect();
        body.push_str(&format!("{}\t{}\t{}\t{}\n", clean(&p.index), blobs.join("\t"), p.doubles[0] as i64, p.doubles[1] as i64));
    }
    let _ = post_to(env, classes::METRICS_SINK, crate::pipeline::metrics::SINK_OBJECT, crate::pipeline::metrics::SINK_PATH, body).await;
}

