//! The back half of the decision pipeline, pure: from what each rule's
//! counter said to what the request gets.
//!
//! [`verdict`] folds the [`Outcome`] of every checked rule (in plan order)
//! into one [`Verdict`]: forward (with the `RateLimit` fields to add) or one
//! of tollgate's own responses, and the log events to write. [`settle`]
//! says what failures-only rules record once the origin has answered. The
//! Worker performs these; `tollgate explain` prints them.
//!
//! The fold, in plan order:
//! - a counter that failed on a `deny` rule answers 503 at once (events of
//!   later rules are not written);
//! - a counter that failed on an `allow` rule is logged and ignored;
//! - of the `block` rules over their limit, the one with the longest wait
//!   answers 429 (the first of equals);
//! - `log` (shadow) rules over their limit only log `shadow_block`;
//! - otherwise the request is forwarded.

use crate::config::{Action, Counting, FailPolicy};
use crate::headers::{self, rate_fields, OwnResponse};
use crate::plan::{Applied, Plan, Route};
use crate::protocol::{Op, Reply, WireWindow};
use crate::rules::Rule;
use serde_json::Value;

/// What one rule's counter said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit (and recorded, for rules that count every request).
    Allowed { windows: Vec<WireWindow> },
    /// Over the limit: wait `retry_after_ms`; `window` is the index of the
    /// binding window; `windows` is `None` when the isolate's blocked-until
    /// cache answered (no object call).
    Blocked { retry_after_ms: u64, window: usize, windows: Option<Vec<WireWindow>> },
    /// The counter could not be asked in time: the rule's fail policy.
    Failed(String),
}

impl Outcome {
    /// The outcome an object's reply stands for.
    pub fn from_reply(reply: Reply) -> Outcome {
        if reply.allowed {
            Outcome::Allowed { windows: reply.windows }
        } else {
            Outcome::Blocked {
                retry_after_ms: reply.retry_after_ms,
                window: reply.binding_window.unwrap_or(0),
                windows: Some(reply.windows),
            }
        }
    }

    /// The outcome of a block found in the isolate's cache at `now_ms`.
    pub fn from_cache(block: crate::blocked::Block, now_ms: i64) -> Outcome {
        Outcome::Blocked {
            retry_after_ms: (block.until_ms - now_ms).max(1) as u64,
            window: block.window,
            windows: None,
        }
    }
}

/// One structured log line: `{"tollgate": event, ...fields}`.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEvent {
    pub event: &'static str,
    pub fields: Vec<(&'static str, Value)>,
}

impl LogEvent {
    pub fn new(event: &'static str, fields: Vec<(&'static str, Value)>) -> LogEvent {
        LogEvent { event, fields }
    }

    /// The JSON line (Workers Logs indexes its fields).
    pub fn line(&self) -> String {
        let mut line = serde_json::Map::new();
        line.insert("tollgate".into(), self.event.into());
        for (k, v) in &self.fields {
            line.insert((*k).into(), v.clone());
        }
        Value::Object(line).to_string()
    }
}

/// What the request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Forward the original request; add these fields to the origin's
    /// response (none for a WebSocket upgrade, which cannot be rebuilt).
    Forward { fields: Vec<(String, String)> },
    /// Answer this, never reaching the origin.
    Respond(OwnResponse),
}

impl Answer {
    /// `forward`, or the status answered.
    pub fn describe(&self) -> String {
        match self {
            Answer::Forward { .. } => "forward".to_string(),
            Answer::Respond(r) => r.status.to_string(),
        }
    }
}

/// The answer and the log events of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub answer: Answer,
    pub events: Vec<LogEvent>,
}

/// The verdict of a plan that needs no counter: a refused path (400), a
/// missing key (400), or nothing to check (forward). `None` for a plan that
/// has rules to check, or is admin or needs the body.
pub fn early(plan: &Plan<'_>) -> Option<Verdict> {
    match &plan.route {
        Route::Malformed(e) => Some(Verdict {
            answer: Answer::Respond(OwnResponse::problem(400, "Bad Request", &e.to_string(), None)),
            events: Vec::new(),
        }),
        Route::MissingKey { rule, missing } => {
            let why = missing.to_string();
            Some(Verdict {
                answer: Answer::Respond(OwnResponse::problem(
                    400,
                    "Bad Request",
                    &format!("Rule `{}`: {why}.", rule.name),
                    None,
                )),
                events: vec![LogEvent::new(
                    "missing_key",
                    vec![("rule", rule.name.as_str().into()), ("detail", why.into())],
                )],
            })
        }
        Route::Check(applied) if applied.is_empty() => {
            Some(Verdict { answer: Answer::Forward { fields: Vec::new() }, events: Vec::new() })
        }
        _ => None,
    }
}

/// Folds each checked rule's outcome (`outcomes[i]` for `applied[i]`) into
/// the answer, as the module documentation describes.
pub fn verdict(applied: &[Applied<'_>], outcomes: &[Outcome]) -> Verdict {
    let mut events = Vec::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut block: Option<(&Rule, u64, usize, &Option<Vec<WireWindow>>)> = None;
    for (a, outcome) in applied.iter().zip(outcomes) {
        match outcome {
            Outcome::Allowed { windows } => {
                if a.rule.ratelimit_headers {
                    fields.extend(rate_fields(&a.rule.name, windows, None));
                }
            }
            Outcome::Blocked { retry_after_ms, window, windows } => {
                let shadow = a.rule.action == Action::Log;
                events.push(block_event(a, shadow, *retry_after_ms));
                if shadow {
                    if a.rule.ratelimit_headers {
                        let windows = windows_of(a.rule, *retry_after_ms, windows.as_deref());
                        fields.extend(rate_fields(&a.rule.name, &windows, Some((*window, *retry_after_ms))));
                    }
                } else if block.is_none_or(|(_, ms, _, _)| *retry_after_ms > ms) {
                    block = Some((a.rule, *retry_after_ms, *window, windows));
                }
            }
            Outcome::Failed(error) => {
                let deny = a.rule.on_error == FailPolicy::Deny;
                let decision = if deny { "deny" } else { "allow" };
                events.push(counter_error(&a.rule.name, &a.key_hash, error, decision));
                if deny {
                    let detail = format!("Rule `{}` cannot be checked right now.", a.rule.name);
                    let answer = Answer::Respond(OwnResponse::problem(503, "Service Unavailable", &detail, Some(1)));
                    return Verdict { answer, events };
                }
            }
        }
    }
    let answer = match block {
        Some((rule, retry_after_ms, window, windows)) => {
            Answer::Respond(too_many_requests(rule, retry_after_ms, window, windows.as_deref()))
        }
        None => Answer::Forward { fields },
    };
    Verdict { answer, events }
}

/// What a failures-only rule records once the origin answered `status`:
/// `Record` for a counted status, `Reset` for a success (< 400) on a
/// `clear_on_success` rule whose key did not come from the fallback, else
/// nothing. Rules counting every request already recorded. A failed check
/// (failing open) still records: the counter may be back.
pub fn settle(applied: &Applied<'_>, status: u16) -> Option<Op> {
    let Counting::Statuses(counted) = &applied.rule.counting else { return None };
    if counted.contains(&status) {
        Some(Op::Record)
    } else if applied.rule.clear_on_success && !applied.fell_back && status < 400 {
        Some(Op::Reset)
    } else {
        None
    }
}

/// The op that checks a rule: rules counting every request check and
/// record at once; failures-only rules only check before forwarding.
pub fn check_op(rule: &Rule) -> Op {
    match rule.counting {
        Counting::All => Op::Hit,
        Counting::Statuses(_) => Op::Check,
    }
}

/// The 429: problem+json, `Retry-After` in whole seconds (at least 1), and
/// the rule's `RateLimit` fields with the binding window.
pub fn too_many_requests(rule: &Rule, retry_after_ms: u64, window: usize, windows: Option<&[WireWindow]>) -> OwnResponse {
    let retry_after_s = headers::seconds_ceil(retry_after_ms).max(1);
    let mut out = vec![
        ("content-type".to_string(), "application/problem+json".to_string()),
        ("retry-after".to_string(), retry_after_s.to_string()),
    ];
    let windows = windows_of(rule, retry_after_ms, windows);
    out.extend(rate_fields(&rule.name, &windows, Some((window, retry_after_ms))));
    OwnResponse { status: 429, headers: out, body: headers::too_many_requests_body(&rule.name, retry_after_s) }
}

/// The windows to report: the object's, or (answered from the cache) the
/// rule's limits with nothing remaining.
fn windows_of(rule: &Rule, retry_after_ms: u64, windows: Option<&[WireWindow]>) -> Vec<WireWindow> {
    match windows {
        Some(w) => w.to_vec(),
        None => rule
            .limits
            .iter()
            .map(|l| WireWindow {
                limit: l.requests.get(),
                window_ms: l.window_ms.get(),
                used: u64::from(l.requests.get()),
                remaining: 0,
                reset_ms: retry_after_ms,
            })
            .collect(),
    }
}

fn block_event(a: &Applied<'_>, shadow: bool, retry_after_ms: u64) -> LogEvent {
    LogEvent::new(
        if shadow { "shadow_block" } else { "block" },
        vec![
            ("rule", a.rule.name.as_str().into()),
            ("key_hash", a.key_hash.as_str().into()),
            ("decision", if shadow { "would_block" } else { "block" }.into()),
            ("retry_after_ms", retry_after_ms.into()),
            ("remaining", 0.into()),
        ],
    )
}

/// A `counter_error` line: `decision` is `allow`, `deny` or `not_recorded`.
pub fn counter_error(rule: &str, key_hash: &str, error: &str, decision: &str) -> LogEvent {
    LogEvent::new(
        "counter_error",
        vec![
            ("rule", rule.into()),
            ("key_hash", key_hash.into()),
            ("error", error.into()),
            ("decision", decision.into()),
        ],
    )
}
