//! The call format between the Worker and a limiter object: small, JSON,
//! versioned. Limits travel with every call, so a limit changed in
//! `wrangler.toml` takes effect on the next request, without a migration.
//!
//! ```json
//! {"v":1,"op":"hit","limits":[[10,60000]],"cost":1}
//! ```
//! `limits` holds `[requests, window_ms]` pairs. The object answers a
//! [`Reply`], or HTTP 400 with `{"v":1,"error":"..."}` for a malformed call.
//!
//! Failures-only rules count in two phases (see [`crate::reservation`]):
//!
//! ```json
//! {"v":1,"op":"reserve","limits":[[10,900000]],"cost":1,"hold_ms":104000}
//! {"v":1,"op":"commit","limits":[[10,900000]],"cost":1,"reservation":1700000000000000}
//! ```
//! The two-phase ops (`reserve`, `commit`, `release`, `forgive`, `clear`)
//! and their fields (`hold_ms`, `reservation`; in the reply `reservation`,
//! `held` and `in_flight`) were added to version 1 without changing any
//! call or reply of the ops before them: an object of this build answers
//! an older Worker's calls exactly as before, and an older object refuses
//! the new ops as malformed (400), which the Worker treats as a counter
//! failure (the rule's `on_error`).

use crate::counter::Tally;
use crate::window::{Limit, WindowState};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The only version this build speaks.
pub const VERSION: u32 = 1;

/// The most windows a call may carry.
pub const MAX_LIMITS: usize = 8;

/// The longest a reservation may be held (`hold_ms`): one hour. A lost
/// reservation keeps its slot, and its object's row, this long at most.
pub const MAX_HOLD_MS: u64 = 3_600_000;

/// What the Worker asks of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Check-and-record: decide and, if allowed, record `cost`.
    Hit,
    /// Decide without recording (the first half of a failures-only rule).
    Check,
    /// Record `cost` unconditionally (the second half, once the origin
    /// answered with a counted status).
    Record,
    /// Report the windows' state without recording.
    Status,
    /// Forget every hit of this key.
    Reset,
    /// Two-phase counting, first phase: allowed only if the committed hits,
    /// the live reservations and `cost` fit every window; then holds `cost`
    /// for `hold_ms` as a reservation, whose id the reply carries.
    Reserve,
    /// Second phase, a counted status: the reservation becomes a hit dated
    /// now. Without a reservation (or one already expired) it records
    /// `cost` all the same, like `record`: what the origin answered counts.
    Commit,
    /// Second phase, a status that does not count (or no answer): the
    /// reservation is removed; an unknown one changes nothing.
    Release,
    /// A success on a `decrement` rule: releases the reservation, if any,
    /// and forgives `cost` units of the newest hits (never below zero).
    Forgive,
    /// A success on a `clear` rule: releases the reservation, if any, and
    /// forgets every committed hit; other requests' reservations stay.
    Clear,
}

/// How an object counts: the exact sliding log (default) or O(1) GCRA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    #[default]
    SlidingLog,
    Gcra,
}

impl Algorithm {
    fn is_default(&self) -> bool {
        *self == Algorithm::SlidingLog
    }
}

/// A validated call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub op: Op,
    pub algorithm: Algorithm,
    pub limits: Vec<Limit>,
    pub cost: u32,
    /// For `reserve` (required): how long the reservation holds its slot,
    /// 1 ms to [`MAX_HOLD_MS`]. Ignored by the other ops.
    pub hold_ms: Option<u64>,
    /// For `commit` and `release` (required), `forgive` and `clear`
    /// (optional): the id `reserve` granted. Ignored by the other ops.
    pub reservation: Option<u64>,
}

impl Call {
    /// The same call, settling `reservation`.
    pub fn settling(self, reservation: Option<u64>) -> Call {
        Call { reservation, ..self }
    }
}

#[derive(Serialize, Deserialize)]
struct WireCall {
    v: u32,
    op: Op,
    #[serde(default, skip_serializing_if = "Algorithm::is_default")]
    alg: Algorithm,
    limits: Vec<(u64, u64)>,
    #[serde(default = "one")]
    cost: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hold_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reservation: Option<u64>,
}

fn one() -> u32 {
    1
}

/// Serializes a call.
pub fn encode_call(call: &Call) -> String {
    let wire = WireCall {
        v: VERSION,
        op: call.op,
        alg: call.algorithm,
        limits: call
            .limits
            .iter()
            .map(|l| (u64::from(l.requests.get()), l.window_ms.get()))
            .collect(),
        cost: call.cost,
        hold_ms: call.hold_ms,
        reservation: call.reservation,
    };
    serde_json::to_string(&wire).unwrap_or_default()
}

/// Parses and validates a call; the error says what is wrong with it.
pub fn decode_call(body: &str) -> Result<Call, CallError> {
    let wire: WireCall = serde_json::from_str(body).map_err(|e| CallError::Malformed(e.to_string()))?;
    if wire.v != VERSION {
        return Err(CallError::UnsupportedVersion(wire.v));
    }
    if wire.limits.is_empty() || wire.limits.len() > MAX_LIMITS {
        return Err(CallError::LimitCount(wire.limits.len()));
    }
    let mut limits = Vec::with_capacity(wire.limits.len());
    for (requests, window_ms) in wire.limits {
        let limit = u32::try_from(requests)
            .ok()
            .filter(|_| window_ms <= crate::duration::MAX_WINDOW_MS)
            .and_then(|requests| Limit::new(requests, window_ms));
        match limit {
            Some(limit) => limits.push(limit),
            None => return Err(CallError::InvalidLimit { requests, window_ms }),
        }
    }
    if wire.cost == 0 {
        return Err(CallError::ZeroCost);
    }
    if wire.op == Op::Reserve && !wire.hold_ms.is_some_and(|ms| (1..=MAX_HOLD_MS).contains(&ms)) {
        return Err(CallError::InvalidHold);
    }
    if wire.op == Op::Release && wire.reservation.is_none() {
        return Err(CallError::MissingReservation);
    }
    Ok(Call {
        op: wire.op,
        algorithm: wire.alg,
        limits,
        cost: wire.cost,
        hold_ms: wire.hold_ms,
        reservation: wire.reservation,
    })
}

/// Why the object refused a call (answered 400 with the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Not JSON of the call's shape; serde_json's reason.
    Malformed(String),
    /// A `v` other than [`VERSION`].
    UnsupportedVersion(u32),
    /// No limits, or more than [`MAX_LIMITS`]; how many were given.
    LimitCount(usize),
    /// A `[requests, window_ms]` pair that is zero, above `u32` requests or
    /// above [`crate::duration::MAX_WINDOW_MS`].
    InvalidLimit { requests: u64, window_ms: u64 },
    /// `cost` 0.
    ZeroCost,
    /// A `reserve` without `hold_ms`, or one outside 1 to [`MAX_HOLD_MS`].
    InvalidHold,
    /// A `release` without the `reservation` it releases.
    MissingReservation,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Malformed(reason) => write!(f, "malformed call: {reason}"),
            CallError::UnsupportedVersion(v) => {
                write!(f, "unsupported call version {v} (this object speaks {VERSION})")
            }
            CallError::LimitCount(_) => write!(f, "a call carries 1 to {MAX_LIMITS} limits"),
            CallError::InvalidLimit { requests, window_ms } => write!(f, "invalid limit [{requests}, {window_ms}]"),
            CallError::ZeroCost => write!(f, "cost must be at least 1"),
            CallError::InvalidHold => write!(f, "reserve needs hold_ms from 1 to {MAX_HOLD_MS}"),
            CallError::MissingReservation => write!(f, "release needs the reservation it releases"),
        }
    }
}

impl std::error::Error for CallError {}

/// One window in a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireWindow {
    pub limit: u32,
    pub window_ms: u64,
    pub used: u64,
    pub remaining: u64,
    pub reset_ms: u64,
}

impl From<&WindowState> for WireWindow {
    fn from(w: &WindowState) -> Self {
        WireWindow {
            limit: w.limit.requests.get(),
            window_ms: w.limit.window_ms.get(),
            used: w.used,
            remaining: w.remaining,
            reset_ms: w.reset_ms,
        }
    }
}

/// The object's answer. On the wire its tally's fields sit beside the
/// others, as they always have:
///
/// ```json
/// {"v":1,"allowed":false,"retry_after_ms":980,"windows":[...],"binding_window":0,
///  "alarm_pending":true,"alarm_set":false,"stored_hits":2,"rows_read":1,"rows_written":0}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub v: u32,
    /// `allowed`, `retry_after_ms`, `windows` and `binding_window`.
    #[serde(flatten)]
    pub tally: Tally<WireWindow>,
    /// Whether an alarm (the storage TTL) is pending after this call.
    pub alarm_pending: bool,
    /// Whether this call armed the alarm (only when none was pending).
    pub alarm_set: bool,
    /// Hits held in storage after this call (pruned or not).
    pub stored_hits: u64,
    /// SQLite rows read and written by this call, from the cursors.
    pub rows_read: u64,
    pub rows_written: u64,
    /// The id of the reservation an allowed `reserve` made; the Worker
    /// sends it back with `commit` or `release`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<u64>,
    /// Live (unexpired) reservations after this call.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a call to a limiter object got no usable reply: the Worker then
/// applies the rule's fail policy and logs this as `counter_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// The `LIMITER` binding or the object's stub is missing.
    NoBinding(String),
    /// The call could not be sent or its reply read.
    Transport(String),
    /// No reply within the rule's timeout.
    Timeout { ms: u32 },
    /// The object answered with an error status (a refused call, a corrupt
    /// row, a storage failure).
    Refused { status: u16, body: String },
    /// A 200 whose body is not a [`Reply`].
    Unreadable(String),
}

impl fmt::Display for CallFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallFailure::NoBinding(e) => write!(f, "no limiter binding: {e}"),
            CallFailure::Transport(e) => write!(f, "{e}"),
            CallFailure::Timeout { ms } => write!(f, "no answer within {ms} ms"),
            CallFailure::Refused { status, body } => write!(f, "limiter answered {status}: {body}"),
            CallFailure::Unreadable(e) => write!(f, "unreadable limiter reply: {e}"),
        }
    }
}

impl std::error::Error for CallFailure {}

/// Reads an object's answer: a 200 with a [`Reply`], or why not.
pub fn decode_reply(status: u16, body: &str) -> Result<Reply, CallFailure> {
    if status != 200 {
        return Err(CallFailure::Refused { status, body: body.to_string() });
    }
    serde_json::from_str(body).map_err(|e| CallFailure::Unreadable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let call = Call {
            op: Op::Hit,
            algorithm: Algorithm::SlidingLog,
            limits: vec![Limit::new(10, 60_000).unwrap()],
            cost: 2,
            hold_ms: None,
            reservation: None,
        };
        let text = encode_call(&call);
        assert_eq!(text, r#"{"v":1,"op":"hit","limits":[[10,60000]],"cost":2}"#, "as before two-phase counting");
        assert_eq!(decode_call(&text), Ok(call.clone()));
        let gcra = Call { algorithm: Algorithm::Gcra, ..call.clone() };
        let text = encode_call(&gcra);
        assert_eq!(text, r#"{"v":1,"op":"hit","alg":"gcra","limits":[[10,60000]],"cost":2}"#);
        assert_eq!(decode_call(&text), Ok(gcra));
        let reserve = Call { op: Op::Reserve, hold_ms: Some(104_000), ..call.clone() };
        let text = encode_call(&reserve);
        assert_eq!(text, r#"{"v":1,"op":"reserve","limits":[[10,60000]],"cost":2,"hold_ms":104000}"#);
        assert_eq!(decode_call(&text), Ok(reserve));
        let commit = Call { op: Op::Commit, ..call }.settling(Some(1_700_000_000_000_000));
        let text = encode_call(&commit);
        assert_eq!(text, r#"{"v":1,"op":"commit","limits":[[10,60000]],"cost":2,"reservation":1700000000000000}"#);
        assert_eq!(decode_call(&text), Ok(commit));
    }

    /// Calls of the ops from before two-phase counting decode as they did,
    /// whatever new fields they carry or lack.
    #[test]
    fn older_ops_are_unchanged() {
        for op in ["hit", "check", "record", "status", "reset"] {
            let call = decode_call(&format!(r#"{{"v":1,"op":"{op}","limits":[[3,1000]]}}"#)).unwrap();
            assert_eq!((call.cost, call.hold_ms, call.reservation), (1, None, None), "{op}");
        }
    }

    /// The Worker and tests/worker/*.mjs read these names; the tally's
    /// fields are flattened into the reply, in the order they always had.
    #[test]
    fn reply_wire_format() {
        let window = WireWindow { limit: 2, window_ms: 1_000, used: 2, remaining: 0, reset_ms: 980 };
        let reply = Reply {
            v: VERSION,
            tally: Tally { allowed: false, retry_after_ms: 980, windows: vec![window], binding: Some(0), in_flight: false },
            alarm_pending: true,
            alarm_set: false,
            stored_hits: 2,
            rows_read: 1,
            rows_written: 0,
            reservation: None,
            held: 0,
        };
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"v":1,"allowed":false,"retry_after_ms":980,"#,
                r#""windows":[{"limit":2,"window_ms":1000,"used":2,"remaining":0,"reset_ms":980}],"#,
                r#""binding_window":0,"alarm_pending":true,"alarm_set":false,"stored_hits":2,"rows_read":1,"rows_written":0}"#
            )
        );
        assert_eq!(serde_json::from_str::<Reply>(&text).unwrap(), reply);
        let allowed = Reply { tally: Tally::allowing(vec![]), ..reply };
        let text = serde_json::to_string(&allowed).unwrap();
        assert!(text.contains(r#""binding_window":null"#), "{text}");
        let without = text.replace(r#""binding_window":null,"#, "");
        assert_eq!(serde_json::from_str::<Reply>(&without).unwrap(), allowed, "binding_window may be absent");
        // Two-phase counting adds fields only where they say something.
        let reserved = Reply { reservation: Some(7_000), held: 1, ..allowed.clone() };
        let text = serde_json::to_string(&reserved).unwrap();
        assert!(text.ends_with(r#""rows_written":0,"reservation":7000,"held":1}"#), "{text}");
        assert_eq!(serde_json::from_str::<Reply>(&text).unwrap(), reserved);
        let in_flight = Reply { tally: Tally { allowed: false, in_flight: true, ..allowed.tally.clone() }, ..allowed };
        let text = serde_json::to_string(&in_flight).unwrap();
        assert!(text.contains(r#""binding_window":null,"in_flight":true,"alarm_pending""#), "{text}");
    }

    #[test]
    fn malformed_calls_are_refused_with_a_reason() {
        for (body, why) in [
            ("", "malformed call"),
            ("{}", "malformed call"),
            (r#"{"v":2,"op":"hit","limits":[[1,1]]}"#, "unsupported call version 2"),
            (r#"{"v":1,"op":"fly","limits":[[1,1]]}"#, "malformed call"),
            (r#"{"v":1,"op":"hit","limits":[]}"#, "1 to 8 limits"),
            (r#"{"v":1,"op":"hit","limits":[[0,1000]]}"#, "invalid limit [0, 1000]"),
            (r#"{"v":1,"op":"hit","limits":[[1,0]]}"#, "invalid limit [1, 0]"),
            (r#"{"v":1,"op":"hit","limits":[[1,1000]],"cost":0}"#, "cost must be"),
            (r#"{"v":1,"op":"reserve","limits":[[1,1000]]}"#, "reserve needs hold_ms"),
            (r#"{"v":1,"op":"reserve","limits":[[1,1000]],"hold_ms":0}"#, "reserve needs hold_ms"),
            (r#"{"v":1,"op":"reserve","limits":[[1,1000]],"hold_ms":3600001}"#, "reserve needs hold_ms"),
            (r#"{"v":1,"op":"release","limits":[[1,1000]]}"#, "release needs the reservation"),
            (r#"{"v":1,"op":"commit","limits":[[1,1000]],"reservation":-1}"#, "malformed call"),
        ] {
            let err = decode_call(body).unwrap_err().to_string();
            assert!(err.contains(why), "{body}: {err}");
        }
        assert_eq!(decode_call(r#"{"v":1,"op":"status","limits":[[1,1000]]}"#).map(|c| c.cost), Ok(1));
        assert_eq!(
            decode_call(r#"{"v":1,"op":"hit","limits":[[4294967296,1000]]}"#),
            Err(CallError::InvalidLimit { requests: 4_294_967_296, window_ms: 1_000 })
        );
        assert_eq!(decode_call(r#"{"v":1,"op":"hit","limits":[[1,1],[1,1],[1,1],[1,1],[1,1],[1,1],[1,1],[1,1],[1,1]]}"#), Err(CallError::LimitCount(9)));
    }

    #[test]
    fn replies_are_read_or_refused_with_a_reason() {
        let refused = decode_reply(500, r#"{"v":1,"error":"corrupt row"}"#).unwrap_err();
        assert_eq!(refused.to_string(), r#"limiter answered 500: {"v":1,"error":"corrupt row"}"#);
        assert!(matches!(decode_reply(200, "{}"), Err(CallFailure::Unreadable(_))));
        assert_eq!(CallFailure::Timeout { ms: 250 }.to_string(), "no answer within 250 ms");
    }
}
