//! Receiving a request's body before a failures-only rule reserves its
//! slot, pure (the glue in `crate::glue::origin` reads the stream; this module
//! says what each outcome means).
//!
//! # Why (issue 25, finding 2)
//! A `count_statuses` rule reserves a slot before forwarding
//! ([`crate::count::reservation`]), and the slot stays held until the origin
//! answers. An origin waits for the whole body before it answers, so a
//! client that sends its body one byte at a time held a slot for as long
//! as it liked (up to `reservation_ttl`, then 104 s): five such connections held
//! a quota of five, the owner got 429, and the origin finally answered 401,
//! so nothing was ever spent. Repeatable at will.
//!
//! # What is done (nginx's `proxy_request_buffering on` with
//! `client_body_timeout`, HAProxy's `option http-buffer-request`)
//! Before any `block` rule that counts statuses reserves, the Worker reads
//! the body (from a clone: the original, teed, keeps every byte for the
//! origin or the app) until it ends, passes `upload_buffer` bytes, or
//! `upload_timeout` passes since it began:
//! - **ended** ([`Receipt::Complete`], or no body at all): reserve, and
//!   forward the received bytes at once. A slow upload holds **no slot**
//!   while it trickles; the slot is held only for the origin's answer time.
//! - **passed the buffer** ([`Receipt::OverBuffer`]): reserve, then
//!   forward the body as it streams in, under a deadline: if the upload is
//!   not complete `upload_timeout` after reading began, the forward is
//!   aborted, the slot released, and the client gets 408. Such a slot is
//!   held at most `upload_timeout` + the origin's answer time.
//! - **timed out** ([`Receipt::Stalled`]): 408, nothing reserved, nothing
//!   forwarded.
//! - **broken** (the client went away mid-body, [`Receipt::Broken`]): 400,
//!   nothing reserved.
//!
//! `upload_timeout` is cut to `reservation_ttl` less the two calls'
//! `timeout`s where that is shorter ([`limits_for`]): a streaming body
//! never outlasts its reservation.
//!
//! So a client that is never served holds a slot for at most
//! `upload_timeout` (10 s by default) plus the origin's answer time, and,
//! with a body within `upload_buffer` (256 KiB by default), only for the
//! origin's answer time, however many slow connections it opens.
//!
//! Shadow (`action = "log"`) rules never wait for a body: shadow mode
//! never changes what reaches the origin.

use crate::config::headers::OwnResponse;
use crate::pipeline::applied::Applied;
use crate::count::protocol::Op;
use crate::pipeline::verdict::{check_op, LogEvent};
use crate::config::policy::Action;

pub use crate::config::policy::{UploadLimits, DEFAULT_UPLOAD_BUFFER, DEFAULT_UPLOAD_TIMEOUT_MS, MAX_UPLOAD_BUFFER, MAX_UPLOAD_TIMEOUT_MS};

/// What reading the body before the reservation found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// No body (a GET, a bodiless POST).
    NoBody,
    /// The whole body arrived, within the buffer and the time.
    Complete,
    /// More than the buffer arrived in time; the rest is still coming.
    OverBuffer,
    /// The time passed before the body ended or passed the buffer.
    Stalled,
    /// The body could not be read (the client went away, a framing error).
    Broken,
}

impl Receipt {
    /// The glue's word for a receipt (`none`, `complete`, `over`,
    /// `stalled`); anything else is [`Receipt::Broken`].
    pub fn from_word(word: &str) -> Receipt {
        match word {
            "none" => Receipt::NoBody,
            "complete" => Receipt::Complete,
            "over" => Receipt::OverBuffer,
            "stalled" => Receipt::Stalled,
            _ => Receipt::Broken,
        }
    }
}

/// The limits to receive a request's body under, before its rules are
/// checked: `None` when no `block` rule that reserves applies. Several
/// such rules: the largest buffer and the shortest timeout (each rule's
/// bound holds). A rule's time is also cut to its `reservation_ttl` less
/// the reserve and settle calls' `timeout`s, so that a body streaming
/// under the deadline never outlasts its reservation (a lapsed slot would
/// admit another request while this one may still be served).
pub fn limits_for(applied: &[Applied<'_>]) -> Option<UploadLimits> {
    applied
        .iter()
        .filter(|a| a.rule.action == Action::Block && check_op(a.rule) == Op::Reserve)
        .map(|a| {
            let calls = 2 * u64::from(a.rule.timeout_ms);
            let within_hold = u32::try_from(a.rule.reservation_ttl_ms.saturating_sub(calls)).unwrap_or(u32::MAX).max(1);
            UploadLimits { timeout_ms: a.rule.upload.timeout_ms.min(within_hold), ..a.rule.upload }
        })
        .reduce(|a, b| UploadLimits { buffer: a.buffer.max(b.buffer), timeout_ms: a.timeout_ms.min(b.timeout_ms) })
}

/// What the Worker does once the body was read as far as `limits` allow.
#[derive(Debug, Clone)]
pub enum Next {
    /// Check the rules (reserve). `deadline_ms`: the Unix ms by which the
    /// rest of the body must have been forwarded, for a body over the
    /// buffer (`None`: the body is all here, or there is none).
    Check { deadline_ms: Option<i64> },
    /// Answer at once, reserving nothing, forwarding nothing.
    Answer { response: OwnResponse, event: LogEvent },
}

/// What follows `receipt`, read under `limits` from `started_ms` on.
pub fn next(receipt: Receipt, limits: UploadLimits, started_ms: i64) -> Next {
    match receipt {
        Receipt::NoBody | Receipt::Complete => Next::Check { deadline_ms: None },
        Receipt::OverBuffer => Next::Check { deadline_ms: Some(started_ms.saturating_add(i64::from(limits.timeout_ms))) },
        Receipt::Stalled => Next::Answer { response: too_slow(limits.timeout_ms), event: event("stalled", limits) },
        Receipt::Broken => Next::Answer {
            response: OwnResponse::problem(400, "Bad Request", "The request body could not be read.", None),
            event: event("broken", limits),
        },
    }
}

/// The time left until `deadline_ms` at `now_ms`, in whole ms (0 when past).
pub fn left_ms(deadline_ms: i64, now_ms: i64) -> u32 {
    u32::try_from(deadline_ms.saturating_sub(now_ms).max(0)).unwrap_or(u32::MAX)
}

/// 408: the body did not arrive within `timeout_ms`.
pub fn too_slow(timeout_ms: u32) -> OwnResponse {
    let detail = format!("The request body did not arrive within {} s.", crate::config::headers::seconds_ceil(u64::from(timeout_ms)));
    OwnResponse::problem(408, "Request Timeout", &detail, None)
}

/// The log line of a body that stalled after its slot was reserved (the
/// forward aborted, the slot released).
pub fn aborted_event(timeout_ms: u32) -> LogEvent {
    LogEvent::new("upload", vec![("outcome", "aborted".into()), ("upload_timeout_ms", timeout_ms.into())])
}

fn event(outcome: &'static str, limits: UploadLimits) -> LogEvent {
    LogEvent::new(
        "upload",
        vec![("outcome", outcome.into()), ("upload_timeout_ms", limits.timeout_ms.into()), ("upload_buffer", limits.buffer.into())],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use serde_json::json;

    fn config(rules: serde_json::Value) -> Config {
        crate::testing::config(json!(rules))
    }

    fn applied<'a>(config: &'a Config, name: &str) -> Applied<'a> {
        let rule = config.rules.iter().find(|r| r.name == name).unwrap();
        Applied { rule, key: "k".into(), id: format!("{name}\nk"), key_hash: "h".into(), fell_back: false, own_method: true, device: None, spelling: None }
    }

    #[test]
    fn only_blocking_rules_that_reserve_wait_for_the_body() {
        let c = config(json!([
            { "name": "all", "path": "/x", "limits": [{ "requests": 1, "window": "1m" }] },
            { "name": "shadow", "path": "/x", "count_statuses": [200], "action": "log", "limits": [{ "requests": 1, "window": "1m" }] },
            { "name": "quota", "path": "/x", "count_statuses": [200], "upload_buffer": 1024, "upload_timeout": "3s", "limits": [{ "requests": 1, "window": "1m" }] },
            { "name": "login", "path": "/x", "count_statuses": [401], "upload_buffer": 4096, "upload_timeout": "5s", "limits": [{ "requests": 1, "window": "1m" }] },
            { "name": "plain", "path": "/x", "count_statuses": [401], "limits": [{ "requests": 1, "window": "1m" }] },
            { "name": "short", "path": "/x", "count_statuses": [401], "timeout": "200ms", "reservation_ttl": "1500ms", "limits": [{ "requests": 1, "window": "1m" }] },
        ]));
        assert_eq!(limits_for(&[applied(&c, "all"), applied(&c, "shadow")]), None, "counting every request, or shadow: no wait");
        assert_eq!(limits_for(&[applied(&c, "quota")]), Some(UploadLimits { buffer: 1024, timeout_ms: 3_000 }));
        assert_eq!(
            limits_for(&[applied(&c, "quota"), applied(&c, "login"), applied(&c, "all")]),
            Some(UploadLimits { buffer: 4096, timeout_ms: 3_000 }),
            "the largest buffer, the shortest time"
        );
        assert_eq!(limits_for(&[applied(&c, "plain")]), Some(UploadLimits::default()), "256 KiB, 10 s by default");
        let short = limits_for(&[applied(&c, "short")]);
        assert_eq!(short, Some(UploadLimits { buffer: 262_144, timeout_ms: 1_100 }), "within the 1.5 s reservation, less two 200 ms calls");
    }

    #[test]
    fn each_receipt_says_what_follows() {
        let limits = UploadLimits { buffer: 1024, timeout_ms: 1_500 };
        let deadline = |receipt, started| match next(receipt, limits, started) {
            Next::Check { deadline_ms } => Some(deadline_ms),
            Next::Answer { .. } => None,
        };
        assert_eq!(deadline(Receipt::NoBody, 1_000), Some(None));
        assert_eq!(deadline(Receipt::Complete, 1_000), Some(None), "all here: no deadline");
        assert_eq!(deadline(Receipt::OverBuffer, 1_000), Some(Some(2_500)), "from when reading began");
        let Next::Answer { response, event } = next(Receipt::Stalled, limits, 1_000) else { panic!("stalled is answered") };
        assert_eq!(response.status, 408);
        assert!(response.body.contains("within 2 s"), "{}", response.body);
        assert!(event.line().contains(r#""outcome":"stalled""#), "{}", event.line());
        let Next::Answer { response, .. } = next(Receipt::Broken, limits, 1_000) else { panic!("broken is answered") };
        assert_eq!(response.status, 400);
        assert_eq!(deadline(Receipt::OverBuffer, i64::MAX), Some(Some(i64::MAX)), "never overflows");
    }

    #[test]
    fn words_and_time_left() {
        for (word, receipt) in [("none", Receipt::NoBody), ("complete", Receipt::Complete), ("over", Receipt::OverBuffer), ("stalled", Receipt::Stalled)] {
            assert_eq!(Receipt::from_word(word), receipt);
        }
        assert_eq!(Receipt::from_word(""), Receipt::Broken);
        assert_eq!(Receipt::from_word("error: TypeError"), Receipt::Broken);
        assert_eq!(left_ms(2_500, 1_000), 1_500);
        assert_eq!(left_ms(2_500, 9_000), 0, "past: none left");
        assert_eq!(left_ms(i64::MAX, i64::MIN), u32::MAX);
    }
}
