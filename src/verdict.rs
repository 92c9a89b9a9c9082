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

use crate::policy::{Action, Counting, FailPolicy};
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
        let tally = reply.tally;
        if tally.allowed {
            Outcome::Allowed { windows: tally.windows }
        } else {
            Outcome::Blocked {
                retry_after_ms: tally.retry_after_ms,
                window: tally.binding.unwrap_or(0),
                windows: Some(tally.windows),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::plan::object_name;
    use serde_json::json;

    fn config() -> Config {
        let l = json!([{ "requests": 10, "window": "1m" }]);
        Config::from_json(&json!({ "rules": [
            { "name": "short", "path": "/p", "limits": l, "ratelimit_headers": true },
            { "name": "long", "path": "/p", "limits": [{ "requests": 5, "window": "1h" }] },
            { "name": "shadow", "path": "/p", "action": "log", "limits": l, "ratelimit_headers": true },
            { "name": "open", "path": "/p", "limits": l },
            { "name": "closed", "path": "/p", "on_error": "deny", "limits": l },
            { "name": "failures", "path": "/p", "key": ["header:x-user"], "count_statuses": [401],
              "clear_on_success": true, "fallback_key": ["header:x-account"], "limits": l },
        ]}))
        .unwrap()
    }

    fn applied<'c>(config: &'c Config, name: &str) -> Applied<'c> {
        let rule = config.rules.iter().find(|r| r.name == name).unwrap();
        Applied { rule, key: "k".into(), id: object_name(rule, "k"), key_hash: "h".into(), fell_back: false }
    }

    fn window(limit: u32, remaining: u64) -> WireWindow {
        WireWindow { limit, window_ms: 60_000, used: u64::from(limit) - remaining, remaining, reset_ms: 30_000 }
    }

    fn blocked(ms: u64) -> Outcome {
        Outcome::Blocked { retry_after_ms: ms, window: 0, windows: Some(vec![window(10, 0)]) }
    }

    #[test]
    fn allowed_forwards_with_the_fields_of_rules_that_ask() {
        let c = config();
        let v = verdict(
            &[applied(&c, "short"), applied(&c, "long")],
            &[Outcome::Allowed { windows: vec![window(10, 9)] }, Outcome::Allowed { windows: vec![window(5, 4)] }],
        );
        assert_eq!(
            v.answer,
            Answer::Forward {
                fields: vec![
                    ("ratelimit-policy".into(), "\"short\";q=10;w=60".into()),
                    ("ratelimit".into(), "\"short\";r=9;t=30".into()),
                ]
            }
        );
        assert!(v.events.is_empty());
    }

    #[test]
    fn the_longest_block_wins_and_every_block_is_logged() {
        let c = config();
        let v = verdict(
            &[applied(&c, "short"), applied(&c, "long"), applied(&c, "open")],
            &[blocked(5_000), blocked(9_000), blocked(9_000)],
        );
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after"), Some("9"));
        assert!(r.body.contains("`long`"), "the first of the longest waits: {}", r.body);
        assert_eq!(v.events.len(), 3);
        assert!(v.events.iter().all(|e| e.event == "block"));
    }

    #[test]
    fn shadow_rules_log_and_never_block() {
        let c = config();
        let v = verdict(&[applied(&c, "shadow")], &[blocked(5_000)]);
        let Answer::Forward { fields } = &v.answer else { panic!("{v:?}") };
        assert_eq!(fields[1], ("ratelimit".into(), "\"shadow\";r=0;t=5".into()));
        assert_eq!(v.events[0].event, "shadow_block");
        assert!(v.events[0].line().contains(r#""decision":"would_block""#));
    }

    #[test]
    fn fail_policies() {
        let c = config();
        let down = || Outcome::Failed("down".into());
        let v = verdict(&[applied(&c, "open")], &[down()]);
        assert_eq!(v.answer, Answer::Forward { fields: vec![] }, "fail open");
        assert!(v.events[0].line().contains(r#""decision":"allow""#));
        // Fail closed answers 503 at once: the blocks before it are logged,
        // the rules after it are not looked at.
        let v = verdict(
            &[applied(&c, "long"), applied(&c, "closed"), applied(&c, "short")],
            &[blocked(9_000), down(), blocked(1_000)],
        );
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!((r.status, r.header("retry-after")), (503, Some("1")));
        let events: Vec<&str> = v.events.iter().map(|e| e.event).collect();
        assert_eq!(events, ["block", "counter_error"]);
    }

    #[test]
    fn a_cached_block_reports_the_rules_limits() {
        let c = config();
        let from_cache = Outcome::from_cache(crate::blocked::Block { until_ms: 10_400, window: 0 }, 10_000);
        assert_eq!(from_cache, Outcome::Blocked { retry_after_ms: 400, window: 0, windows: None });
        let v = verdict(&[applied(&c, "long")], &[from_cache]);
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.header("ratelimit"), Some("\"long\";r=0;t=1"));
        assert_eq!(r.header("ratelimit-policy"), Some("\"long\";q=5;w=3600"));
        let expired = Outcome::from_cache(crate::blocked::Block { until_ms: 10_000, window: 0 }, 10_000);
        assert!(matches!(expired, Outcome::Blocked { retry_after_ms: 1, .. }), "at least 1 ms");
    }

    #[test]
    fn early_answers() {
        let c = config();
        let url = url::Url::parse("https://example.com/p%00").unwrap();
        let parts = crate::plan::RequestParts {
            method: "GET",
            url: &url,
            header: &|_| None,
            body: crate::plan::Body::Unread,
            country: None,
            asn: None,
            admin_token: &|| None,
            log_key: None,
        };
        let p = crate::plan::plan(&c, &parts);
        let v = early(&p).unwrap();
        assert!(matches!(&v.answer, Answer::Respond(r) if r.status == 400));
        let url = url::Url::parse("https://example.com/p").unwrap();
        let p = crate::plan::plan(&c, &crate::plan::RequestParts { url: &url, ..parts });
        let v = early(&p).unwrap();
        let Answer::Respond(r) = &v.answer else { panic!("{v:?}") };
        assert_eq!(r.status, 400);
        assert!(r.body.contains("Rule `short`: the request has no usable `ip`."), "{}", r.body);
        assert_eq!(v.events[0].event, "missing_key");
    }

    #[test]
    fn what_failures_only_rules_settle() {
        let c = config();
        let a = applied(&c, "failures");
        assert_eq!(settle(&a, 401), Some(Op::Record));
        assert_eq!(settle(&a, 200), Some(Op::Reset));
        assert_eq!(settle(&a, 302), Some(Op::Reset));
        assert_eq!(settle(&a, 404), None);
        let fell_back = Applied { fell_back: true, ..a.clone() };
        assert_eq!(settle(&fell_back, 200), None, "a success never clears a fallback key");
        assert_eq!(settle(&fell_back, 401), Some(Op::Record));
        assert_eq!(settle(&applied(&c, "short"), 401), None, "counted when checked");
        assert_eq!(check_op(a.rule), Op::Check);
        assert_eq!(check_op(applied(&c, "short").rule), Op::Hit);
    }
}
