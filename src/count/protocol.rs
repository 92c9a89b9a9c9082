//! The call format between the Worker and a limiter object: small,
//! versioned. Limits travel with every call, so a limit changed in
//! `wrangler.toml` takes effect on the next request, without a migration.
//!
//! Two forms of the same version 1, held to the same checks:
//! - **compact** (what the Worker sends): the call is the URL of a
//!   `GET` ([`encode_call_url`]: `https://limiter/v1/hit?l=10x60000`), sent
//!   with `Stub::fetch_with_str`, and the object answers one reply line
//!   ([`encode_reply_line`]): no `Request`/`RequestInit` to build, no JSON
//!   on either side;
//! - **JSON** (before it; still answered, for tools, tests and a Worker of
//!   the build before): a `POST` body, answered with a JSON [`Reply`].
//!   During a deploy a Worker and the objects it calls may run different
//!   releases; release N and N−1 interoperate both ways
//!   (`tests/worker/skew.test.mjs`). A call an object does not understand
//!   (a newer op or version) is refused, 400 with a versioned error, which
//!   the Worker treats as a counter failure (the rule's `on_error`).
//!
//! The JSON form:
//!
//! ```json
//! {"v":1,"op":"hit","limits":[[10,60000]],"cost":1}
//! ```
//! `limits` holds `[requests, window_ms]` pairs. The object answers a
//! [`Reply`], or HTTP 400 with `{"v":1,"error":"..."}` for a malformed call.
//!
//! Failures-only rules count in two phases (see [`crate::count::reservation`]):
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
//!
//! Leased budgets ([`crate::count::lease`]) were added the same way:
//!
//! ```json
//! {"v":1,"op":"lease","limits":[[5000,60000]],"cost":1,"want":40,"hold_ms":1000}
//! {"v":1,"op":"refund","limits":[[5000,60000]],"cost":12,"reservation":1700000001000}
//! ```
//! `lease` grants `g` units, `cost ≤ g ≤ want`, debited at once and dated
//! at the lease's expiry (`now + hold_ms`, the reply's `reservation`, which
//! is also the lease's id); `g = 0` (blocked, with the exact retry-after
//! for `cost`) when not even `cost` fits. `refund` gives back `cost` unspent
//! units of the lease `reservation`. In the reply, `granted` is `g`; in the
//! compact reply line it is a last field `g={g}`, present only in answers to
//! a lease, so every reply line of the older ops reads as before.
//!
//! Penalties ([`crate::count::penalty`]) were added the same way:
//! a rule's `penalty` travels as `penalty_ms` (`p=` in the compact form) on
//! `hit`, `check`, `reserve`, `lease` and `status`:
//!
//! ```json
//! {"v":1,"op":"hit","limits":[[2,2000]],"cost":1,"penalty_ms":600000}
//! ```
//! The answer to such a call says when the key's penalty in force ends
//! (`penalty_until_ms`, the object's Unix ms; in the reply line a last field
//! `p={until}`, after `g=`), only when one is: an answer to a call without
//! it is as before. An object of an earlier build refuses `p=` as an
//! unknown field (400), so a penalty is never silently dropped by an older
//! object in the compact form (the JSON form, which the Worker does not
//! send, would ignore it); the Worker then sends the call again without it
//! ([`crate::count::older`]): the limits counted, the penalty not held.
//!
//! Usage reported by the origin ([`crate::config::cost`]) added
//! one field the same way: `used` (compact `u`) on a `commit`, the units to
//! count instead of the reservation's cost (0: released, nothing counted):
//!
//! ```json
//! {"v":1,"op":"commit","limits":[[10000,86400000]],"cost":3000,"reservation":1700000000000000,"used":1234}
//! ```
//! A commit without it counts as before. An object of the build before
//! refuses a compact call carrying `u` (unknown field, 400; its JSON form
//! would ignore it and commit the reservation's cost): the Worker then
//! sends a `record` of the units used and a `release` of the reservation
//! ([`crate::count::older`]: letting the reservation lapse
//! would charge nothing).
//!
//! Concurrency limits added `concurrency` (compact `n`) to a
//! `reserve` (and `check`): refused while the key holds that many live
//! reservations ([`crate::count::slots`]); the slot is given back by the
//! usual `commit` or `release`. An older object refuses `n` (400), and
//! no op of it holds a slot: the rule refuses (503), whatever its
//! `on_error` ([`crate::count::older`]).
//!
//! Calendar windows spell a limit's window as its calendar:
//! `300xday@Asia/Tokyo` in the compact form, `[300,"day@Asia/Tokyo"]` in
//! JSON; the object computes the period from its own clock and the
//! embedded zone table ([`crate::count::calendar`]). A reply's window of a
//! calendar limit carries a sixth part, its unit (`300/93600000/3/297/5400000/day`;
//! `"calendar":"day"` in JSON). An object of the release before refuses
//! such a call as malformed (400): the rule's `on_error` answers.

/// Which algorithm counts, as calls name it (`alg`).
pub use crate::count::algorithm::Algorithm;
use crate::count::algorithm::{push_i64, push_u64};
use crate::count::calendar::{Calendar, Unit};
use crate::count::limit::{Limit, WindowState};
use crate::count::tally::Tally;
use crate::request::canon::{find_byte, scheme_end, split_ascii, split_once_ascii};
use crate::request::spelling::Spelling;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// The only version this build speaks.
pub(crate) const VERSION: u32 = 1;

/// The most windows a call may carry.
pub(crate) const MAX_LIMITS: usize = 8;

/// The longest a reservation may be held (`hold_ms`): one hour. A lost
/// reservation keeps its slot, and its object's row, this long at most.
pub(crate) const MAX_HOLD_MS: u64 = 3_600_000;

/// The longest a lease may last (`hold_ms` of a `lease`): one minute. Its
/// tokens stay debited this much longer than a hit's would (they are dated
/// at the lease's expiry), so a long lease under-admits for longer.
pub(crate) const MAX_LEASE_TTL_MS: u64 = 60_000;

/// The most units one lease may ask for (`want`).
pub(crate) const MAX_LEASE_UNITS: u32 = 1_000_000;

/// The most requests of one key a rule's `concurrency` may let in flight
/// (each is a reservation in the key's row).
pub(crate) const MAX_CONCURRENCY: u32 = 1_000;

/// What the Worker asks of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
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
    /// Leased budgets: grant `cost ≤ g ≤ want` units for `hold_ms`, debited
    /// at once and dated at the lease's expiry; `g = 0` when `cost` does not
    /// fit (see [`crate::count::lease`]).
    Lease,
    /// Gives back `cost` unspent units of the lease `reservation` (its
    /// expiry); never more than that lease still holds.
    Refund,
    /// Whether the key is banned, recording nothing: blocked for the ban's
    /// time, else allowed. A trusted device's requests count in a bucket of
    /// their own, and probe the account's object first, so that a ban of
    /// the account covers its devices.
    Probe,
}

/// A validated call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub(crate) op: Op,
    pub(crate) algorithm: Algorithm,
    pub(crate) limits: Vec<Limit>,
    pub(crate) cost: u32,
    /// For `reserve` (required): how long the reservation holds its slot,
    /// 1 ms to [`MAX_HOLD_MS`]. Ignored by the other ops.
    pub(crate) hold_ms: Option<u64>,
    /// For `commit` and `release` (required), `forgive` and `clear`
    /// (optional): the id `reserve` granted; for `refund` (required), the
    /// lease's id. Ignored by the other ops.
    pub(crate) reservation: Option<u64>,
    /// For `lease`: the most units wanted, `cost` to [`MAX_LEASE_UNITS`]
    /// (default `cost`). Ignored by the other ops.
    pub(crate) want: Option<u32>,
    /// For `commit`, `clear` and `forgive` of a rule whose success relieves:
    /// how the request spelled its identity. A commit marks the count with
    /// it; a clear or forgive relieves only a count marked with its own
    /// spelling ([`crate::request::spelling`]). Ignored by the other ops.
    pub(crate) spelling: Option<Spelling>,
    /// For `hit`, `check`, `reserve`, `lease` and `status` of a rule with a
    /// `penalty` ([`crate::count::penalty`]): how long a refusal keeps the
    /// key refused, 1 ms to [`crate::count::duration::MAX_WINDOW_MS`].
    /// Ignored by the other ops.
    pub(crate) penalty_ms: Option<u64>,
    /// For `commit` of a rule whose origin reports usage: the
    /// units to count instead of the reservation's cost (0: the
    /// reservation is released, nothing counted). Ignored by the other ops.
    pub(crate) used: Option<u32>,
    /// For `reserve` and `check` of a rule with `concurrency`:
    /// the most reservations the key may hold at once, 1 to
    /// [`MAX_CONCURRENCY`]; a reserve is refused while that many are live
    /// ([`crate::count::slots`]). Ignored by the other ops.
    pub(crate) concurrency: Option<u32>,
}

/// Sets one optional field of a [`Call`], builder-style: `Some(value)`,
/// a plain value, or `None` to drop it.
macro_rules! with {
    ($($(#[$doc:meta])* $with:ident: $field:ident: $t:ty;)*) => {
        $($(#[$doc])* pub(crate) fn $with(self, $field: impl Into<Option<$t>>) -> Call {
            Call { $field: $field.into(), ..self }
        })*
    };
}

impl Call {
    /// A call of `op` counting `cost` 1 against `limits` with `algorithm`,
    /// every optional field absent: the one place a new call field gets
    /// its default (add a `with_*` below for it).
    pub(crate) fn new(op: Op, algorithm: Algorithm, limits: Vec<Limit>) -> Call {
        Call {
            op,
            algorithm,
            limits,
            cost: 1,
            hold_ms: None,
            reservation: None,
            want: None,
            spelling: None,
            penalty_ms: None,
            used: None,
            concurrency: None,
        }
    }

    /// The same call as another op.
    pub(crate) fn with_op(self, op: Op) -> Call {
        Call { op, ..self }
    }

    /// The same call counting `cost`.
    pub(crate) fn with_cost(self, cost: u32) -> Call {
        Call { cost, ..self }
    }

    with! {
        /// The same call holding its reservation (or lease) `hold_ms`.
        with_hold_ms: hold_ms: u64;
        /// The same call settling (or refunding) `reservation`.
        with_reservation: reservation: u64;
        /// The same lease wanting `want` units.
        with_want: want: u32;
        /// The same call under `spelling`.
        with_spelling: spelling: Spelling;
        /// The same call carrying a penalty of `penalty_ms`.
        with_penalty_ms: penalty_ms: u64;
        /// The same commit counting `used` units.
        with_used: used: u32;
        /// The same call with at most `concurrency` reservations in flight.
        with_concurrency: concurrency: u32;
    }

    /// The same call, settling `reservation`.
    pub(crate) fn settling(self, reservation: Option<u64>) -> Call {
        self.with_reservation(reservation)
    }
}

#[derive(Serialize, Deserialize)]
struct WireCall {
    v: u32,
    op: Op,
    #[serde(default, skip_serializing_if = "Algorithm::is_default")]
    alg: Algorithm,
    limits: Vec<WireLimit>,
    #[serde(default = "one")]
    cost: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hold_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reservation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    want: Option<u32>,
    /// [`Spelling::encode`]'s form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spelling: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    penalty_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    used: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency: Option<u32>,
}

fn one() -> u32 {
    1
}

/// One limit of a call: `[requests, window_ms]`, or for a calendar window
/// `[requests, "day@Asia/Tokyo"]` (an object of the release
/// before refuses it as malformed: the rule's fail policy answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
enum WireLimit {
    Rolling(u64, u64),
    Calendar(u64, String),
}

/// Read as a pair whose second item is a number or a string: an untagged
/// derive would buffer every limit (and cost the Worker's upload ~KBs).
impl<'de> Deserialize<'de> for WireLimit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match <(u64, serde_json::Value)>::deserialize(deserializer)? {
            (requests, serde_json::Value::String(spelling)) => Ok(WireLimit::Calendar(requests, spelling)),
            (requests, window) => match window.as_u64() {
                Some(window_ms) => Ok(WireLimit::Rolling(requests, window_ms)),
                None => Err(serde::de::Error::custom("a window is a number of ms or a calendar such as \"day@UTC\"")),
            },
        }
    }
}

impl WireLimit {
    fn of(limit: &Limit) -> WireLimit {
        let requests = u64::from(limit.requests.get());
        match limit.calendar {
            None => WireLimit::Rolling(requests, limit.window_ms.get()),
            Some(calendar) => WireLimit::Calendar(requests, calendar.spelling()),
        }
    }
}

/// Serializes a call.
pub fn encode_call(call: &Call) -> String {
    let wire = WireCall {
        v: VERSION,
        op: call.op,
        alg: call.algorithm,
        limits: call.limits.iter().map(WireLimit::of).collect(),
        cost: call.cost,
        hold_ms: call.hold_ms,
        reservation: call.reservation,
        want: call.want,
        spelling: call.spelling.as_ref().map(|s| s.encode().to_string()),
        penalty_ms: call.penalty_ms,
        used: call.used,
        concurrency: call.concurrency,
    };
    serde_json::to_string(&wire).unwrap_or_default()
}

/// Parses and validates a call in its JSON form; the error says what is
/// wrong with it.
pub fn decode_call(body: &str) -> Result<Call, CallError> {
    let wire: WireCall = serde_json::from_str(body).map_err(|e| CallError::Malformed(e.to_string()))?;
    let limits = checked_limits(wire.v, wire.limits)?;
    let spelling = match wire.spelling.as_deref() {
        None => None,
        Some(text) => Some(Spelling::decode(text).ok_or(CallError::InvalidSpelling)?),
    };
    let call = Call::new(wire.op, wire.alg, limits)
        .with_cost(wire.cost)
        .with_hold_ms(wire.hold_ms)
        .with_reservation(wire.reservation)
        .with_want(wire.want)
        .with_spelling(spelling)
        .with_penalty_ms(wire.penalty_ms)
        .with_used(wire.used)
        .with_concurrency(wire.concurrency);
    checked(call)
}

/// The version and the limits of a call, checked: both forms are held to
/// the same rules (the fields' own checks are in [`FIELDS`]).
fn checked_limits(v: u32, pairs: Vec<WireLimit>) -> Result<Vec<Limit>, CallError> {
    if v != VERSION {
        return Err(CallError::UnsupportedVersion(v));
    }
    if pairs.is_empty() || pairs.len() > MAX_LIMITS {
        return Err(CallError::LimitCount(pairs.len()));
    }
    let mut limits = Vec::with_capacity(pairs.len());
    for pair in pairs {
        let limit = match &pair {
            WireLimit::Rolling(requests, window_ms) => u32::try_from(*requests)
                .ok()
                .filter(|_| *window_ms <= crate::count::duration::MAX_WINDOW_MS)
                .and_then(|requests| Limit::new(requests, *window_ms)),
            WireLimit::Calendar(requests, spelling) => {
                let calendar = Calendar::parse(spelling).ok_or_else(|| CallError::UnknownCalendar(spelling.clone()))?;
                u32::try_from(*requests).ok().and_then(|requests| Limit::per_period(requests, calendar))
            }
        };
        match (limit, pair) {
            (Some(limit), _) => limits.push(limit),
            (None, WireLimit::Rolling(requests, window_ms)) => return Err(CallError::InvalidLimit { requests, window_ms }),
            (None, WireLimit::Calendar(requests, _)) => return Err(CallError::InvalidLimit { requests, window_ms: 0 }),
        }
    }
    Ok(limits)
}

/// `call` once every field's check in [`FIELDS`] passed, in the table's
/// order (the first to fail is the error).
fn checked(call: Call) -> Result<Call, CallError> {
    if call.algorithm == Algorithm::Gcra && call.limits.iter().any(|l| l.calendar.is_some()) {
        return Err(CallError::CalendarUnderGcra);
    }
    FIELDS.iter().try_for_each(|field| (field.check)(&call))?;
    Ok(call)
}

/// The ops by their wire names (the same in both forms).
const OPS: [(Op, &str); 13] = [
    (Op::Hit, "hit"),
    (Op::Check, "check"),
    (Op::Record, "record"),
    (Op::Status, "status"),
    (Op::Reset, "reset"),
    (Op::Reserve, "reserve"),
    (Op::Commit, "commit"),
    (Op::Release, "release"),
    (Op::Forgive, "forgive"),
    (Op::Clear, "clear"),
    (Op::Lease, "lease"),
    (Op::Refund, "refund"),
    (Op::Probe, "probe"),
];

fn op_name(op: Op) -> &'static str {
    OPS.iter().find(|(o, _)| *o == op).map_or("hit", |(_, name)| name)
}

/// One field of a call after its limits, as the compact form spells it:
/// its letter, how its value is read from a call and written into one, and
/// its check. The table drives [`encode_call_url`], [`decode_call_url`] and
/// both forms' checks: a new call field is one row here (and its
/// `Call::with_*`, and its `WireCall` field for the JSON form).
struct WireField {
    letter: char,
    value: WireValue,
    /// The field's own rule, on the whole call (the op decides what is
    /// required); `Ok` for a field without one.
    check: fn(&Call) -> Result<(), CallError>,
}

/// How a field's value is spelled.
enum WireValue {
    /// A whole number of at most `max`, written only when `get` says
    /// something (a default is not written).
    Number { get: fn(&Call) -> Option<u64>, set: fn(&mut Call, u64), max: u64 },
    /// A word: `show` writes it (when it says something), `read` takes it.
    Text { show: fn(&Call) -> Option<Cow<'static, str>>, read: fn(&mut Call, &str) -> Result<(), CallError> },
}

const U32: u64 = u32::MAX as u64;

fn no_check(_: &Call) -> Result<(), CallError> {
    Ok(())
}

/// The fields in the order the compact form writes them (the order of the
/// build before the table: the wire form is byte for byte the same).
const FIELDS: [WireField; 9] = [
    WireField {
        letter: 'c',
        value: WireValue::Number { get: |c| Some(u64::from(c.cost)).filter(|n| *n != 1), set: |c, n| c.cost = n as u32, max: U32 },
        check: |c| if c.cost == 0 { Err(CallError::ZeroCost) } else { Ok(()) },
    },
    WireField {
        letter: 'a',
        value: WireValue::Text { show: |c| (c.algorithm == Algorithm::Gcra).then_some(Cow::Borrowed("gcra")), read: |c, v| algorithm(v).map(|a| c.algorithm = a) },
        check: no_check,
    },
    WireField { letter: 'h', value: WireValue::Number { get: |c| c.hold_ms, set: |c, n| c.hold_ms = Some(n), max: u64::MAX }, check: check_hold },
    WireField {
        letter: 'r',
        value: WireValue::Number { get: |c| c.reservation, set: |c, n| c.reservation = Some(n), max: u64::MAX },
        check: |c| match (c.op, c.reservation) {
            (Op::Release | Op::Refund, None) => Err(CallError::MissingReservation),
            _ => Ok(()),
        },
    },
    WireField {
        letter: 'w',
        value: WireValue::Number { get: |c| c.want.map(u64::from), set: |c, n| c.want = Some(n as u32), max: U32 },
        check: |c| match c.want {
            Some(want) if c.op == Op::Lease && (want < c.cost || want > MAX_LEASE_UNITS) => Err(CallError::InvalidWant),
            _ => Ok(()),
        },
    },
    WireField {
        letter: 's',
        value: WireValue::Text {
            show: |c| c.spelling.as_ref().map(|s| Cow::Owned(s.encode())),
            read: |c, v| Spelling::decode(v).map(|s| c.spelling = Some(s)).ok_or(CallError::InvalidSpelling),
        },
        check: no_check,
    },
    WireField {
        letter: 'p',
        value: WireValue::Number { get: |c| c.penalty_ms, set: |c, n| c.penalty_ms = Some(n), max: u64::MAX },
        check: |c| match c.penalty_ms {
            Some(ms) if ms == 0 || ms > crate::count::duration::MAX_WINDOW_MS => Err(CallError::InvalidPenalty),
            _ => Ok(()),
        },
    },
    WireField { letter: 'u', value: WireValue::Number { get: |c| c.used.map(u64::from), set: |c, n| c.used = Some(n as u32), max: U32 }, check: no_check },
    WireField {
        letter: 'n',
        value: WireValue::Number { get: |c| c.concurrency.map(u64::from), set: |c, n| c.concurrency = Some(n as u32), max: U32 },
        check: |c| match c.concurrency {
            Some(n) if !(1..=MAX_CONCURRENCY).contains(&n) => Err(CallError::InvalidConcurrency),
            _ => Ok(()),
        },
    },
];

/// `reserve` holds 1 ms to [`MAX_HOLD_MS`], `lease` 1 ms to
/// [`MAX_LEASE_TTL_MS`]; other ops ignore `hold_ms`.
fn check_hold(call: &Call) -> Result<(), CallError> {
    let within = |max: u64| call.hold_ms.is_some_and(|ms| (1..=max).contains(&ms));
    match call.op {
        Op::Reserve if !within(MAX_HOLD_MS) => Err(CallError::InvalidHold),
        Op::Lease if !within(MAX_LEASE_TTL_MS) => Err(CallError::InvalidLeaseTtl),
        _ => Ok(()),
    }
}

/// The call in its compact form: the URL of a `GET`, so the Worker sends it
/// with `Stub::fetch_with_str` (no `Request`, `RequestInit` or body to
/// build, no JSON on either side):
///
/// ```text
/// https://limiter/v1/hit?l=10x60000
/// https://limiter/v1/reserve?l=10x900000,100x86400000&c=2&a=gcra&h=104000
/// https://limiter/v1/commit?l=10x900000&r=1700000000000000
/// ```
/// The path is `/v{version}/{op}`; the query holds `l` (the limits,
/// `{requests}x{window_ms}` joined by `,`, required), and only when they say
/// something, the [`FIELDS`]: `c` (cost, default 1), `a` (`gcra`; the
/// sliding log is the default), `h` (hold_ms), `r` (reservation), `w`
/// (want), `s` (spelling), `p` (penalty_ms), `u` (used) and `n`
/// (concurrency), each at most once, in any order. The same
/// version and the same checks as the JSON form (which the object still
/// accepts, as a `POST` body).
pub fn encode_call_url(call: &Call) -> String {
    // Into one buffer, numbers without the formatter.
    let op = op_name(call.op);
    let mut url = String::with_capacity(32 + op.len() + 16 * call.limits.len());
    url.push_str("https://limiter/v");
    push_u64(&mut url, u64::from(VERSION));
    url.push('/');
    url.push_str(op);
    url.push_str("?l=");
    push_limits(&mut url, &call.limits);
    for field in &FIELDS {
        let item = |url: &mut String| {
            url.push('&');
            url.push(field.letter);
            url.push('=');
        };
        match &field.value {
            WireValue::Number { get, .. } => {
                if let Some(n) = get(call) {
                    item(&mut url);
                    push_u64(&mut url, n);
                }
            }
            WireValue::Text { show, .. } => {
                if let Some(text) = show(call) {
                    item(&mut url);
                    url.push_str(&text);
                }
            }
        }
    }
    url
}

/// Parses and validates a call in its compact form ([`encode_call_url`]),
/// given the whole URL (any scheme and host); the error says what is wrong.
pub fn decode_call_url(url: &str) -> Result<Call, CallError> {
    let malformed = |why: &str| CallError::Malformed(why.to_string());
    let after_scheme = scheme_end(url).and_then(|at| url.get(at + 3..)).unwrap_or(url);
    let path_and_query = find_byte(after_scheme, b'/').map_or("", |at| &after_scheme[at..]);
    let (path, query) = split_once_ascii(path_and_query, b'?').unwrap_or((path_and_query, ""));
    let (version, op) = path
        .strip_prefix("/v")
        .and_then(|rest| split_once_ascii(rest, b'/'))
        .ok_or_else(|| malformed("the path is not /v{version}/{op}"))?;
    let v: u32 = version.parse().map_err(|_| malformed("the version is not a number"))?;
    let op = OPS
        .iter()
        .find(|(_, name)| *name == op)
        .map(|(op, _)| *op)
        .ok_or_else(|| CallError::Malformed(format!("unknown op `{op}`")))?;
    let mut call = Call::new(op, Algorithm::default(), Vec::new());
    let mut limits = None;
    // Bit i: FIELDS[i] was given; the limits are read apart.
    let mut given = 0u16;
    for pair in split_ascii(query, b'&').filter(|p| !p.is_empty()) {
        let (name, value) = split_once_ascii(pair, b'=').ok_or_else(|| malformed("a query item without `=`"))?;
        let twice = || CallError::Malformed(format!("`{name}` given twice"));
        if name == "l" {
            if limits.replace(parse_limits(value)?).is_some() {
                return Err(twice());
            }
            continue;
        }
        let (index, field) = FIELDS
            .iter()
            .enumerate()
            .find(|(_, f)| name.len() == 1 && name.starts_with(f.letter))
            .ok_or_else(|| CallError::Malformed(format!("unknown field `{name}`")))?;
        if given & (1 << index) != 0 {
            return Err(twice());
        }
        given |= 1 << index;
        read_field(&mut call, field, value)?;
    }
    call.limits = checked_limits(v, limits.ok_or_else(|| malformed("no limits (`l`)"))?)?;
    checked(call)
}

/// Reads `value` into `call` as `field` spells it.
fn read_field(call: &mut Call, field: &WireField, value: &str) -> Result<(), CallError> {
    match &field.value {
        WireValue::Number { set, max, .. } => {
            let letter = field.letter;
            let n: u64 = value.parse().map_err(|_| CallError::Malformed(format!("{letter} is not a number")))?;
            if n > *max {
                return Err(CallError::Malformed(format!("{letter} is too large")));
            }
            set(call, n);
            Ok(())
        }
        WireValue::Text { read, .. } => read(call, value),
    }
}

fn algorithm(name: &str) -> Result<Algorithm, CallError> {
    match name {
        "gcra" => Ok(Algorithm::Gcra),
        "sliding_log" => Ok(Algorithm::SlidingLog),
        _ => Err(CallError::Malformed(format!("unknown algorithm `{name}`"))),
    }
}

/// Appends `limits` as a call's line carries them: `{requests}x{window_ms}`
/// pairs joined by `,`, a calendar window as `{requests}x{unit}@{zone}`
/// (`5x1000,300xday@Asia/Tokyo`); [`read_limits`] reads it back. The
/// runtime controls' rows and the registry's entries spell theirs so too.
pub(crate) fn push_limits(out: &mut String, limits: &[Limit]) {
    for (i, l) in limits.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_u64(out, u64::from(l.requests.get()));
        out.push('x');
        match l.calendar {
            None => push_u64(out, l.window_ms.get()),
            Some(calendar) => out.push_str(&calendar.spelling()),
        }
    }
}

/// Reads [`push_limits`]'s text with a call's checks (1 to [`MAX_LIMITS`]
/// limits, none zero, a rolling window at most 31 days, a calendar of a
/// zone this build knows).
pub(crate) fn read_limits(text: &str) -> Result<Vec<Limit>, CallError> {
    checked_limits(VERSION, parse_limits(text)?)
}

/// A limit as a call's JSON carries it: `[requests, window_ms]`, or
/// `[requests, "day@Asia/Tokyo"]` for a calendar window (the admin API's
/// `limits`).
pub(crate) fn limit_json(limit: &Limit) -> serde_json::Value {
    match limit.calendar {
        None => serde_json::json!([limit.requests.get(), limit.window_ms.get()]),
        Some(calendar) => serde_json::json!([limit.requests.get(), calendar.spelling()]),
    }
}

/// `{requests}x{window_ms}` pairs joined by `,` (a calendar window:
/// `{requests}x{unit}@{zone}`, `300xday@Asia/Tokyo`; zone names hold no
/// `,` or `&`); at most one more than [`MAX_LIMITS`] are read, so the
/// count check sees an excess without reading all of it.
fn parse_limits(value: &str) -> Result<Vec<WireLimit>, CallError> {
    let mut limits = Vec::new();
    for pair in split_ascii(value, b',').take(MAX_LIMITS + 1) {
        let parsed = split_once_ascii(pair, b'x').and_then(|(q, w)| {
            let requests = q.parse().ok()?;
            Some(match w.parse() {
                Ok(ms) => WireLimit::Rolling(requests, ms),
                Err(_) if w.contains('@') => WireLimit::Calendar(requests, w.to_string()),
                Err(_) => return None,
            })
        });
        let why = || CallError::Malformed(format!("limit `{pair}` is not {{requests}}x{{window_ms}}"));
        limits.push(parsed.ok_or_else(why)?);
    }
    Ok(limits)
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
    /// above [`crate::count::duration::MAX_WINDOW_MS`].
    InvalidLimit { requests: u64, window_ms: u64 },
    /// A calendar window whose unit or zone this build does not know.
    UnknownCalendar(String),
    /// A calendar window under GCRA, which has no period to reset at.
    CalendarUnderGcra,
    /// `cost` 0.
    ZeroCost,
    /// A `reserve` without `hold_ms`, or one outside 1 to [`MAX_HOLD_MS`].
    InvalidHold,
    /// A `release` or `refund` without the `reservation` (or lease) it
    /// settles.
    MissingReservation,
    /// A `lease` without `hold_ms`, or one outside 1 to [`MAX_LEASE_TTL_MS`].
    InvalidLeaseTtl,
    /// A `lease` whose `want` is below its `cost` or above
    /// [`MAX_LEASE_UNITS`].
    InvalidWant,
    /// A `spelling` that is neither 16 lowercase hex digits nor `-`.
    InvalidSpelling,
    /// A `penalty_ms` of 0 or above [`crate::count::duration::MAX_WINDOW_MS`].
    InvalidPenalty,
    /// A `concurrency` outside 1 to [`MAX_CONCURRENCY`].
    InvalidConcurrency,
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
            CallError::UnknownCalendar(spelling) => write!(f, "unknown calendar window `{spelling}`"),
            CallError::CalendarUnderGcra => write!(f, "a calendar window is counted by the sliding log, not gcra"),
            CallError::ZeroCost => write!(f, "cost must be at least 1"),
            CallError::InvalidHold => write!(f, "reserve needs hold_ms from 1 to {MAX_HOLD_MS}"),
            CallError::MissingReservation => write!(f, "release needs the reservation it releases, refund the lease it refunds"),
            CallError::InvalidLeaseTtl => write!(f, "lease needs hold_ms from 1 to {MAX_LEASE_TTL_MS}"),
            CallError::InvalidWant => write!(f, "lease needs want from cost to {MAX_LEASE_UNITS}"),
            CallError::InvalidSpelling => write!(f, "a spelling is 16 lowercase hex digits or `-`"),
            CallError::InvalidPenalty => write!(f, "a penalty is 1 ms to 31 days"),
            CallError::InvalidConcurrency => write!(f, "concurrency must be from 1 to {MAX_CONCURRENCY}"),
        }
    }
}

impl std::error::Error for CallError {}

/// One window in a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireWindow {
    pub(crate) limit: u32,
    pub(crate) window_ms: u64,
    pub(crate) used: u64,
    pub(crate) remaining: u64,
    pub(crate) reset_ms: u64,
    /// A calendar window's unit (its `window_ms` is then the longest
    /// period, [`Unit::longest_ms`]): the `RateLimit` fields name it and
    /// state no `w`. In the reply line, a sixth part (`/day`), only for a
    /// calendar window, which only a call of this release asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) calendar: Option<Unit>,
}

impl From<&WindowState> for WireWindow {
    fn from(w: &WindowState) -> Self {
        WireWindow {
            limit: w.limit.requests.get(),
            window_ms: w.limit.window_ms.get(),
            used: w.used,
            remaining: w.remaining,
            reset_ms: w.reset_ms,
            calendar: w.limit.calendar.map(|c| c.unit),
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
    pub(crate) v: u32,
    /// `allowed`, `retry_after_ms`, `windows` and `binding_window`.
    #[serde(flatten)]
    pub(crate) tally: Tally<WireWindow>,
    /// Whether an alarm (the storage TTL) is pending after this call.
    pub(crate) alarm_pending: bool,
    /// Whether this call armed the alarm (only when none was pending).
    pub(crate) alarm_set: bool,
    /// Hits held in storage after this call (pruned or not).
    pub(crate) stored_hits: u64,
    /// SQLite rows read and written by this call, from the cursors.
    pub(crate) rows_read: u64,
    pub(crate) rows_written: u64,
    /// The id of the reservation an allowed `reserve` made; the Worker
    /// sends it back with `commit` or `release`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reservation: Option<u64>,
    /// Live (unexpired) reservations after this call.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) held: u64,
    /// The units a `lease` granted (0 when blocked); `None` for other ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) granted: Option<u64>,
    /// To a call carrying a penalty: when the key's penalty in force after
    /// the call ends (Unix ms, the object's clock); `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) penalty_until_ms: Option<i64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a call to a limiter object got no usable reply: the Worker then
/// applies the rule's fail policy and logs this as `counter_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// A Durable Object class's binding or the object's stub is missing:
    /// the text names the binding, its class and role
    /// (`count::classes`) and the runtime's error.
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
            CallFailure::NoBinding(e) => write!(f, "no Durable Object binding {e}"),
            CallFailure::Transport(e) => write!(f, "{e}"),
            CallFailure::Timeout { ms } => write!(f, "no answer within {ms} ms"),
            CallFailure::Refused { status, body } => write!(f, "limiter answered {status}: {body}"),
            CallFailure::Unreadable(e) => write!(f, "unreadable limiter reply: {e}"),
        }
    }
}

impl std::error::Error for CallFailure {}

/// The reply in its compact form, the answer to a compact call: one line
/// of fields separated by spaces, in this order (`-` for none):
///
/// ```text
/// 1 b 980 0 0 1 0 2 1 0 - 0 2/1000/2/0/980
/// ```
/// version, `a` (allowed) or `b` (blocked), retry_after_ms, binding_window,
/// in_flight (0/1), alarm_pending (0/1), alarm_set (0/1), stored_hits,
/// rows_read, rows_written, reservation, held, then one
/// `limit/window_ms/used/remaining/reset_ms` per window.
pub fn encode_reply_line(reply: &Reply) -> String {
    let t = &reply.tally;
    // WireField by field into one buffer, numbers without the formatter: no
    // `format!` of twelve arguments and no string per optional field, on
    // every call's reply.
    let mut line = String::with_capacity(48 + 24 * t.windows.len());
    let put = |line: &mut String, n: Option<u64>| match n {
        Some(n) => {
            push_u64(line, n);
            line.push(' ');
        }
        None => line.push_str("- "),
    };
    put(&mut line, Some(u64::from(reply.v)));
    line.push_str(if t.allowed { "a " } else { "b " });
    put(&mut line, Some(t.retry_after_ms));
    put(&mut line, t.binding.map(|b| b as u64));
    for flag in [t.in_flight, reply.alarm_pending, reply.alarm_set] {
        line.push_str(if flag { "1 " } else { "0 " });
    }
    for n in [Some(reply.stored_hits), Some(reply.rows_read), Some(reply.rows_written), reply.reservation] {
        put(&mut line, n);
    }
    push_u64(&mut line, reply.held);
    for w in &t.windows {
        for (i, n) in [u64::from(w.limit), w.window_ms, w.used, w.remaining, w.reset_ms].into_iter().enumerate() {
            line.push(if i == 0 { ' ' } else { '/' });
            push_u64(&mut line, n);
        }
        if let Some(unit) = w.calendar {
            line.push('/');
            line.push_str(unit.name());
        }
    }
    if let Some(granted) = reply.granted {
        line.push_str(" g=");
        push_u64(&mut line, granted);
    }
    if let Some(until) = reply.penalty_until_ms {
        line.push_str(" p=");
        push_i64(&mut line, until);
    }
    line
}

/// The answer to a call sent as an RPC (`stub.answer(url)`, the URL of
/// [`encode_call_url`]), as one string: the reply line for a 200, or
/// `!{status} {body}` for what the compact form answers with an error
/// status (a refused call, a failure). The same information as the compact
/// form's status and body, without a `Response` around it.
pub fn encode_rpc_answer(status: u16, body: &str) -> String {
    if status == 200 {
        body.to_string()
    } else {
        format!("!{status} {body}")
    }
}

/// Reads an RPC answer ([`encode_rpc_answer`]) as [`decode_reply_line`]
/// reads the compact form's status and body.
pub fn decode_rpc_answer(answer: &str) -> Result<Reply, CallFailure> {
    match answer.strip_prefix('!') {
        None => decode_reply_line(200, answer),
        Some(rest) => {
            let (status, body) = rest.split_once(' ').unwrap_or((rest, ""));
            match status.parse::<u16>() {
                Ok(status) if status != 200 => Err(CallFailure::Refused { status, body: body.to_string() }),
                _ => Err(CallFailure::Unreadable(format!("not an RPC answer: {}", answer.chars().take(200).collect::<String>()))),
            }
        }
    }
}

/// Reads an object's answer to a compact call: a 200 with a reply line
/// ([`encode_reply_line`]), or why not.
pub fn decode_reply_line(status: u16, body: &str) -> Result<Reply, CallFailure> {
    if status != 200 {
        return Err(CallFailure::Refused { status, body: body.to_string() });
    }
    parse_reply_line(body).ok_or_else(|| {
        let shown: String = body.chars().take(200).collect();
        CallFailure::Unreadable(format!("not a reply line: {shown}"))
    })
}

/// Reads a reply line ([`encode_reply_line`]): the fixed fields, then one
/// field per window, then `g=N` in an answer to a lease.
fn parse_reply_line(line: &str) -> Option<Reply> {
    let mut fields = split_ascii(line, b' ');
    let mut reply = parse_fixed_fields(&mut fields)?;
    let (windows, granted, penalty) = parse_window_fields(fields)?;
    reply.tally.windows = windows;
    reply.granted = granted;
    reply.penalty_until_ms = penalty;
    Some(reply)
}

/// The reply line's fixed fields, `v` to `held`, in order (the windows
/// left empty, nothing granted).
fn parse_fixed_fields<'a>(fields: &mut impl Iterator<Item = &'a str>) -> Option<Reply> {
    let number = |s: Option<&str>| s?.parse::<u64>().ok();
    let flag = |s: Option<&str>| match s? {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    };
    let optional = |s: Option<&str>| match s? {
        "-" => Some(None),
        n => n.parse::<u64>().ok().map(Some),
    };
    let v = u32::try_from(number(fields.next())?).ok().filter(|v| *v == VERSION)?;
    let allowed = match fields.next()? {
        "a" => true,
        "b" => false,
        _ => return None,
    };
    let retry_after_ms = number(fields.next())?;
    let binding = match optional(fields.next())? {
        Some(b) => Some(usize::try_from(b).ok()?),
        None => None,
    };
    let in_flight = flag(fields.next())?;
    Some(Reply {
        v,
        tally: Tally { allowed, retry_after_ms, windows: Vec::new(), binding, in_flight },
        alarm_pending: flag(fields.next())?,
        alarm_set: flag(fields.next())?,
        stored_hits: number(fields.next())?,
        rows_read: number(fields.next())?,
        rows_written: number(fields.next())?,
        reservation: optional(fields.next())?,
        held: number(fields.next())?,
        granted: None,
        penalty_until_ms: None,
    })
}

/// The fields after `held`: one per window, then `g=N` only in an answer
/// to a lease, then `p=UNTIL` only in an answer to a call carrying a
/// penalty, each at most once and in that order.
fn parse_window_fields<'a>(fields: impl Iterator<Item = &'a str>) -> Option<(Vec<WireWindow>, Option<u64>, Option<i64>)> {
    let mut windows = Vec::new();
    let (mut granted, mut penalty) = (None, None);
    for w in fields {
        if penalty.is_some() {
            return None;
        }
        if let Some(p) = w.strip_prefix("p=") {
            penalty = Some(p.parse::<i64>().ok()?);
            continue;
        }
        if let Some(g) = w.strip_prefix("g=") {
            if granted.replace(g.parse::<u64>().ok()?).is_some() {
                return None;
            }
            continue;
        }
        if granted.is_some() {
            return None;
        }
        windows.push(parse_wire_window(w)?);
    }
    Some((windows, granted, penalty))
}

/// One window's field: `limit/window_ms/used/remaining/reset_ms`, and a
/// calendar window's unit.
fn parse_wire_window(field: &str) -> Option<WireWindow> {
    let mut parts = split_ascii(field, b'/');
    let mut part = || parts.next().and_then(|p| p.parse::<u64>().ok());
    let window = WireWindow {
        limit: u32::try_from(part()?).ok()?,
        window_ms: part()?,
        used: part()?,
        remaining: part()?,
        reset_ms: part()?,
        calendar: None,
    };
    match (parts.next(), parts.next()) {
        (Some(unit), None) => Some(WireWindow { calendar: Some(Unit::from_name(unit)?), ..window }),
        (Some(_), Some(_)) => None,
        (None, _) => Some(window),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calendar_limit_round_trips_in_both_forms_and_is_refused_when_unknown() {
        let day = Calendar::parse("day@Asia/Tokyo").unwrap();
        let limits = vec![Limit::new(10, 60_000).unwrap(), Limit::per_period(300, day).unwrap()];
        let call = Call::new(Op::Hit, Algorithm::SlidingLog, limits);
        let url = encode_call_url(&call);
        assert_eq!(url, "https://limiter/v1/hit?l=10x60000,300xday@Asia/Tokyo");
        assert_eq!(decode_call_url(&url), Ok(call.clone()));
        let json = encode_call(&call);
        assert_eq!(json, r#"{"v":1,"op":"hit","limits":[[10,60000],[300,"day@Asia/Tokyo"]],"cost":1}"#);
        assert_eq!(decode_call(&json), Ok(call.clone()));
        // A zone with `+` and `_` in its name, as the URL carries it.
        let gmt = Call::new(Op::Hit, Algorithm::SlidingLog, vec![Limit::per_period(5, Calendar::parse("month@Etc/GMT+5").unwrap()).unwrap()]);
        assert_eq!(decode_call_url(&encode_call_url(&gmt)), Ok(gmt));
        for bad in ["l=300xday@Mars/Olympus", "l=300xfortnight@UTC", "l=300xday@", "l=0xday@UTC"] {
            assert!(decode_call_url(&format!("https://limiter/v1/hit?{bad}")).is_err(), "{bad}");
        }
        let gcra = encode_call_url(&call.with_algorithm(Algorithm::Gcra));
        assert_eq!(decode_call_url(&gcra), Err(CallError::CalendarUnderGcra));
    }

    /// A reply refusing on `window` alone, `retry_after_ms` to wait, the
    /// row holding `stored_hits`, its alarm pending.
    fn blocked_by(window: WireWindow, retry_after_ms: u64, stored_hits: u64) -> Reply {
        Reply {
            v: VERSION,
            tally: Tally { allowed: false, retry_after_ms, windows: vec![window], binding: Some(0), in_flight: false },
            alarm_pending: true,
            alarm_set: false,
            stored_hits,
            rows_read: 1,
            rows_written: 0,
            reservation: None,
            held: 0,
            granted: None,
            penalty_until_ms: None,
        }
    }

    #[test]
    fn a_calendar_window_of_a_reply_names_its_unit_in_the_line() {
        let day = Limit::per_period(300, Calendar::parse("day@UTC").unwrap()).unwrap();
        let state = WindowState { limit: day, used: 300, remaining: 0, reset_ms: 3_600_000 };
        let window = WireWindow::from(&state);
        assert_eq!(window.calendar, Some(Unit::Day));
        let reply = blocked_by(window.clone(), 3_600_000, 300);
        assert!(serde_json::to_string(&reply).unwrap().contains(r#""reset_ms":3600000,"calendar":"day"}"#));
        let line = encode_reply_line(&reply);
        assert!(line.ends_with(" 300/93600000/300/0/3600000/day"), "{line}");
        assert_eq!(decode_reply_line(200, &line).unwrap().tally.windows, [window]);
    }

    #[test]
    fn round_trip() {
        let call = Call::new(Op::Hit, Algorithm::SlidingLog, vec![Limit::new(10, 60_000).unwrap()]).with_cost(2);
        let text = encode_call(&call);
        assert_eq!(text, r#"{"v":1,"op":"hit","limits":[[10,60000]],"cost":2}"#, "as before two-phase counting");
        assert_eq!(decode_call(&text), Ok(call.clone()));
        let gcra = call.clone().with_algorithm(Algorithm::Gcra);
        let text = encode_call(&gcra);
        assert_eq!(text, r#"{"v":1,"op":"hit","alg":"gcra","limits":[[10,60000]],"cost":2}"#);
        assert_eq!(decode_call(&text), Ok(gcra));
        let reserve = call.clone().with_op(Op::Reserve).with_hold_ms(104_000);
        let text = encode_call(&reserve);
        assert_eq!(text, r#"{"v":1,"op":"reserve","limits":[[10,60000]],"cost":2,"hold_ms":104000}"#);
        assert_eq!(decode_call(&text), Ok(reserve));
        let commit = call.with_op(Op::Commit).settling(Some(1_700_000_000_000_000));
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
        let window = WireWindow { limit: 2, window_ms: 1_000, used: 2, remaining: 0, reset_ms: 980, calendar: None };
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
            granted: None,
            penalty_until_ms: None,
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

    /// The compact form: exact URLs, and every call round-trips through it
    /// to the same call as through the JSON form.
    #[test]
    fn call_url_wire_format() {
        let limits = vec![Limit::new(10, 60_000).unwrap()];
        let hit = Call::new(Op::Hit, Algorithm::SlidingLog, limits);
        assert_eq!(encode_call_url(&hit), "https://limiter/v1/hit?l=10x60000");
        let reserve = Call::new(Op::Reserve, Algorithm::Gcra, vec![Limit::new(10, 900_000).unwrap(), Limit::new(100, 86_400_000).unwrap()]).with_cost(2).with_hold_ms(104_000);
        assert_eq!(encode_call_url(&reserve), "https://limiter/v1/reserve?l=10x900000,100x86400000&c=2&a=gcra&h=104000");
        let commit = hit.clone().with_op(Op::Commit).with_hold_ms(None).settling(Some(1_700_000_000_000_000));
        assert_eq!(encode_call_url(&commit), "https://limiter/v1/commit?l=10x60000&r=1700000000000000");
        // The usage an origin reported rides on the commit, as `u`
        // (an object of the build before refuses it: unknown field, 400).
        let used = commit.clone().with_used(1_234);
        assert_eq!(encode_call_url(&used), "https://limiter/v1/commit?l=10x60000&r=1700000000000000&u=1234");
        assert_eq!(decode_call_url(&encode_call_url(&used)), Ok(used.clone()));
        assert_eq!(decode_call(&encode_call(&used)), Ok(used));
        assert_eq!(decode_call_url("https://limiter/v1/commit?l=1x1&u=0").map(|c| c.used), Ok(Some(0)));
        for (op, _) in OPS {
            let call = reserve.clone().with_op(op).with_hold_ms(5).with_reservation(9);
            assert_eq!(decode_call_url(&encode_call_url(&call)), Ok(call.clone()), "{op:?}");
            assert_eq!(decode_call(&encode_call(&call)), Ok(call), "{op:?}");
        }
        // Any host, fields in any order, the default algorithm spelled out.
        assert_eq!(decode_call_url("http://x.y/v1/hit?a=sliding_log&l=10x60000&c=1"), Ok(hit));
    }

    #[test]
    fn malformed_call_urls_are_refused_with_a_reason() {
        for (url, why) in [
            ("", "the path is not"),
            ("https://limiter/call", "the path is not"),
            ("https://limiter/v1", "the path is not"),
            ("https://limiter/vx/hit?l=1x1", "the version is not a number"),
            ("https://limiter/v2/hit?l=1x1", "unsupported call version 2"),
            ("https://limiter/v1/fly?l=1x1", "unknown op `fly`"),
            ("https://limiter/v1/hit", "no limits"),
            ("https://limiter/v1/hit?l=", "limit `` is not"),
            ("https://limiter/v1/hit?l=1x", "limit `1x` is not"),
            ("https://limiter/v1/hit?l=-1x5", "is not"),
            ("https://limiter/v1/hit?l=1x1&l=1x1", "`l` given twice"),
            ("https://limiter/v1/hit?l=1x1&z=1", "unknown field `z`"),
            ("https://limiter/v1/hit?l=1x1&c", "without `=`"),
            ("https://limiter/v1/hit?l=1x1&c=4294967296", "c is too large"),
            ("https://limiter/v1/hit?l=1x1&c=0", "cost must be"),
            ("https://limiter/v1/hit?l=1x1&a=fixed", "unknown algorithm"),
            ("https://limiter/v1/hit?l=0x1000", "invalid limit [0, 1000]"),
            ("https://limiter/v1/hit?l=1x1,1x1,1x1,1x1,1x1,1x1,1x1,1x1,1x1,1x1", "1 to 8 limits"),
            ("https://limiter/v1/reserve?l=1x1", "reserve needs hold_ms"),
            ("https://limiter/v1/release?l=1x1", "release needs the reservation"),
            ("https://limiter/v1/commit?l=1x1&r=-1", "r is not a number"),
            ("https://limiter/v1/commit?l=1x1&u=4294967296", "u is too large"),
            ("https://limiter/v1/commit?l=1x1&u=1&u=2", "`u` given twice"),
        ] {
            let err = decode_call_url(url).unwrap_err().to_string();
            assert!(err.contains(why), "{url}: {err}");
        }
        assert_eq!(
            decode_call_url("https://limiter/v1/hit?l=1x1,1x1,1x1,1x1,1x1,1x1,1x1,1x1,1x1"),
            Err(CallError::LimitCount(9))
        );
    }

    #[test]
    fn reply_lines_round_trip_and_are_refused_when_not_one() {
        let window = WireWindow { limit: 2, window_ms: 1_000, used: 2, remaining: 0, reset_ms: 980, calendar: None };
        let blocked = blocked_by(window.clone(), 980, 2);
        assert_eq!(encode_reply_line(&blocked), "1 b 980 0 0 1 0 2 1 0 - 0 2/1000/2/0/980");
        let reserved = Reply {
            tally: Tally { allowed: true, retry_after_ms: 0, windows: vec![window.clone(), window], binding: None, in_flight: true },
            alarm_set: true,
            reservation: Some(7_000),
            held: 3,
            ..blocked.clone()
        };
        let leased = Reply { granted: Some(40), reservation: Some(1_700_000_001_000), ..reserved.clone() };
        let line = encode_reply_line(&leased);
        assert!(line.ends_with(" 2/1000/2/0/980 g=40"), "{line}");
        let refused = Reply { granted: Some(0), ..blocked.clone() };
        for reply in [blocked, reserved, leased, refused] {
            assert_eq!(decode_reply_line(200, &encode_reply_line(&reply)), Ok(reply));
        }
        for body in ["1 a 0 - 0 0 0 0 0 0 - 0 g=1 1/2/3/4/5", "1 a 0 - 0 0 0 0 0 0 - 0 g=1 g=2", "1 a 0 - 0 0 0 0 0 0 - 0 g=x"] {
            assert!(decode_reply_line(200, body).is_err(), "{body:?}: the grant comes last, once, as a number");
        }
        for body in ["", "2 b 980 0 0 1 0 2 1 0 - 0", "1 x 0 - 0 0 0 0 0 0 - 0", "1 a 0 - 0 0 0 0 0 0 -", "1 a 0 - 2 0 0 0 0 0 - 0", "1 a 0 - 0 0 0 0 0 0 - 0 1/2/3/4", "1 a 0 - 0 0 0 0 0 0 - 0 1/2/3/4/5/6", "{\"v\":1}"] {
            assert!(matches!(decode_reply_line(200, body), Err(CallFailure::Unreadable(_))), "{body:?}");
        }
        assert_eq!(decode_reply_line(200, "1 a 0 - 0 0 0 0 0 0 - 0").map(|r| r.tally.windows.len()), Ok(0));
        assert!(matches!(decode_reply_line(400, "{\"v\":1,\"error\":\"x\"}"), Err(CallFailure::Refused { status: 400, .. })));
    }

    /// The RPC form carries what the compact form's status and body do.
    #[test]
    fn rpc_answers_carry_the_reply_or_the_error_status() {
        let line = "1 a 0 - 0 1 1 1 0 1 - 0 10/60000/1/9/60000";
        assert_eq!(encode_rpc_answer(200, line), line);
        assert_eq!(decode_rpc_answer(&encode_rpc_answer(200, line)), decode_reply_line(200, line));
        let corrupt = r#"{"v":1,"error":"corrupt row"}"#;
        assert_eq!(encode_rpc_answer(500, corrupt), format!("!500 {corrupt}"));
        assert_eq!(
            decode_rpc_answer(&encode_rpc_answer(500, corrupt)),
            Err(CallFailure::Refused { status: 500, body: corrupt.to_string() })
        );
        assert_eq!(decode_rpc_answer("!400 "), Err(CallFailure::Refused { status: 400, body: String::new() }));
        for answer in ["!200 1 a 0 - 0 1 1 1 0 1 - 0", "!abc x", "!", "", "ok"] {
            assert!(matches!(decode_rpc_answer(answer), Err(CallFailure::Unreadable(_))), "{answer:?}");
        }
    }

    #[test]
    fn replies_are_read_or_refused_with_a_reason() {
        let refused = decode_reply(500, r#"{"v":1,"error":"corrupt row"}"#).unwrap_err();
        assert_eq!(refused.to_string(), r#"limiter answered 500: {"v":1,"error":"corrupt row"}"#);
        assert!(matches!(decode_reply(200, "{}"), Err(CallFailure::Unreadable(_))));
        assert_eq!(CallFailure::Timeout { ms: 250 }.to_string(), "no answer within 250 ms");
    }

    /// A penalty travels as `p=` (`penalty_ms` in JSON) on a call, and as
    /// a last `p=UNTIL` in the reply line of an answer to such a call; an
    /// object of an earlier build refuses the field as unknown.
    #[test]
    fn penalty_calls_and_replies() {
        let hit = Call::new(Op::Hit, Algorithm::SlidingLog, vec![Limit::new(2, 2_000).unwrap()]).with_penalty_ms(600_000);
        assert_eq!(encode_call_url(&hit), "https://limiter/v1/hit?l=2x2000&p=600000");
        assert_eq!(decode_call_url(&encode_call_url(&hit)), Ok(hit.clone()));
        assert_eq!(encode_call(&hit), r#"{"v":1,"op":"hit","limits":[[2,2000]],"cost":1,"penalty_ms":600000}"#);
        assert_eq!(decode_call(&encode_call(&hit)), Ok(hit));
        for url in ["https://limiter/v1/hit?l=2x2000&p=0", "https://limiter/v1/hit?l=2x2000&p=2678400001"] {
            assert_eq!(decode_call_url(url), Err(CallError::InvalidPenalty), "{url}");
        }
        assert!(matches!(decode_call_url("https://limiter/v1/hit?l=2x2000&p=1&p=1"), Err(CallError::Malformed(_))));
        assert!(matches!(decode_call_url("https://limiter/v1/hit?l=2x2000&p=-1"), Err(CallError::Malformed(_))));
        let window = WireWindow { limit: 2, window_ms: 2_000, used: 0, remaining: 0, reset_ms: 600_000, calendar: None };
        let blocked = Reply {
            v: VERSION,
            tally: Tally { allowed: false, retry_after_ms: 600_000, windows: vec![window], binding: Some(0), in_flight: false },
            alarm_pending: true,
            alarm_set: false,
            stored_hits: 2,
            rows_read: 0,
            rows_written: 1,
            reservation: None,
            held: 0,
            granted: None,
            penalty_until_ms: Some(1_700_000_600_000),
        };
        let line = encode_reply_line(&blocked);
        assert!(line.ends_with(" 2/2000/0/0/600000 p=1700000600000"), "{line}");
        let leased = Reply { granted: Some(0), ..blocked.clone() };
        assert!(encode_reply_line(&leased).ends_with(" g=0 p=1700000600000"));
        for reply in [blocked, leased] {
            assert_eq!(decode_reply_line(200, &encode_reply_line(&reply)), Ok(reply));
        }
        for body in ["1 b 1 0 0 1 0 2 0 1 - 0 p=1 2/2000/0/0/1", "1 b 1 0 0 1 0 2 0 1 - 0 p=1 g=0", "1 b 1 0 0 1 0 2 0 1 - 0 p=1 p=2", "1 b 1 0 0 1 0 2 0 1 - 0 p=x"] {
            assert!(decode_reply_line(200, body).is_err(), "{body:?}: the penalty comes last, once, as a number");
        }
    }

    /// The lease ops travel in both forms, and a lease or refund that says
    /// too little (or too much) is refused.
    #[test]
    fn lease_calls() {
        let lease = Call::new(Op::Lease, Algorithm::Gcra, vec![Limit::new(5_000, 60_000).unwrap()]).with_hold_ms(1_000).with_want(40);
        assert_eq!(encode_call_url(&lease), "https://limiter/v1/lease?l=5000x60000&a=gcra&h=1000&w=40");
        assert_eq!(decode_call_url(&encode_call_url(&lease)), Ok(lease.clone()));
        assert_eq!(encode_call(&lease), r#"{"v":1,"op":"lease","alg":"gcra","limits":[[5000,60000]],"cost":1,"hold_ms":1000,"want":40}"#);
        assert_eq!(decode_call(&encode_call(&lease)), Ok(lease.clone()));
        let refund = lease.clone().with_op(Op::Refund).with_hold_ms(None).with_want(None).with_cost(12).with_reservation(1_700_000_001_000);
        assert_eq!(decode_call_url(&encode_call_url(&refund)), Ok(refund.clone()));
        let refused = [
            ("https://limiter/v1/lease?l=10x1000&w=4", CallError::InvalidLeaseTtl),
            ("https://limiter/v1/lease?l=10x1000&h=60001", CallError::InvalidLeaseTtl),
            ("https://limiter/v1/lease?l=10x1000&h=100&c=3&w=2", CallError::InvalidWant),
            ("https://limiter/v1/lease?l=10x1000&h=100&w=1000001", CallError::InvalidWant),
            ("https://limiter/v1/refund?l=10x1000&c=3", CallError::MissingReservation),
        ];
        for (url, why) in refused {
            assert_eq!(decode_call_url(url), Err(why), "{url}");
        }
        assert!(matches!(decode_call_url("https://limiter/v1/lease?l=10x1000&h=100&w=1&w=2"), Err(CallError::Malformed(_))));
        assert_eq!(decode_call_url("https://limiter/v1/lease?l=10x1000&h=100").map(|c| c.want), Ok(None), "want defaults to the cost");
    }

    impl Call {
        /// The same call counted by `algorithm`.
        pub(crate) fn with_algorithm(self, algorithm: Algorithm) -> Call {
            Call { algorithm, ..self }
        }
        /// The same call against `limits`.
        pub(crate) fn with_limits(self, limits: Vec<Limit>) -> Call {
            Call { limits, ..self }
        }
    }

    /// Reads an object's answer: a 200 with a [`Reply`], or why not.
    pub(crate) fn decode_reply(status: u16, body: &str) -> Result<Reply, CallFailure> {
        if status != 200 {
            return Err(CallFailure::Refused { status, body: body.to_string() });
        }
        serde_json::from_str(body).map_err(|e| CallFailure::Unreadable(e.to_string()))
    }
}

/// The wire forms of a set of calls, captured from the build before the
/// compact form became a table: both forms must stay byte for
/// byte what older objects read and what the skew tests replay.
#[cfg(test)]
mod wire_unchanged {
    use super::*;
    use crate::request::spelling::Spelling;

    fn calls() -> Vec<Call> {
        let one = vec![Limit::new(10, 60_000).unwrap()];
        let two = vec![Limit::new(10, 900_000).unwrap(), Limit::new(100, 86_400_000).unwrap()];
        let base = Call::new(Op::Hit, Algorithm::SlidingLog, one);
        let tag = Spelling::decode("00000000deadbeef");
        let mut calls = Vec::new();
        for (op, _) in OPS {
            calls.push(base.clone().with_op(op));
        }
        calls.extend([
            base.clone().with_cost(3).with_algorithm(Algorithm::Gcra).with_penalty_ms(600_000),
            base.clone().with_op(Op::Reserve).with_limits(two.clone()).with_cost(2).with_hold_ms(104_000).with_concurrency(4),
            base.clone().with_op(Op::Check).with_concurrency(1_000).with_penalty_ms(1),
            base.clone().with_op(Op::Commit).with_reservation(1_700_000_000_000_000).with_spelling(tag).with_used(0),
            base.clone().with_op(Op::Commit).with_reservation(u64::MAX).with_used(u32::MAX).with_cost(u32::MAX),
            base.clone().with_op(Op::Release).with_reservation(7).with_spelling(Spelling::Several),
            base.clone().with_op(Op::Forgive).with_spelling(tag).with_cost(2),
            base.clone().with_op(Op::Clear).with_reservation(9).with_spelling(tag),
            base.clone().with_op(Op::Lease).with_algorithm(Algorithm::Gcra).with_limits(vec![Limit::new(5_000, 60_000).unwrap()]).with_hold_ms(1_000).with_want(40).with_penalty_ms(2_000),
            base.clone().with_op(Op::Refund).with_cost(12).with_reservation(1_700_000_001_000),
            base.clone().with_op(Op::Status).with_limits(two).with_penalty_ms(5).with_algorithm(Algorithm::Gcra),
            base.with_op(Op::Record).with_cost(1_234).with_hold_ms(1).with_reservation(2).with_want(3).with_penalty_ms(4).with_used(5).with_concurrency(6),
        ]);
        calls
    }

    /// Captured with the code before the table (`print`ed, not derived
    /// from the code under test).
    const CAPTURED: [(&str, &str); 25] = [
        ("https://limiter/v1/hit?l=10x60000", r#"{"v":1,"op":"hit","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/check?l=10x60000", r#"{"v":1,"op":"check","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/record?l=10x60000", r#"{"v":1,"op":"record","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/status?l=10x60000", r#"{"v":1,"op":"status","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/reset?l=10x60000", r#"{"v":1,"op":"reset","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/reserve?l=10x60000", r#"{"v":1,"op":"reserve","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/commit?l=10x60000", r#"{"v":1,"op":"commit","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/release?l=10x60000", r#"{"v":1,"op":"release","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/forgive?l=10x60000", r#"{"v":1,"op":"forgive","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/clear?l=10x60000", r#"{"v":1,"op":"clear","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/lease?l=10x60000", r#"{"v":1,"op":"lease","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/refund?l=10x60000", r#"{"v":1,"op":"refund","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/probe?l=10x60000", r#"{"v":1,"op":"probe","limits":[[10,60000]],"cost":1}"#),
        ("https://limiter/v1/hit?l=10x60000&c=3&a=gcra&p=600000", r#"{"v":1,"op":"hit","alg":"gcra","limits":[[10,60000]],"cost":3,"penalty_ms":600000}"#),
        ("https://limiter/v1/reserve?l=10x900000,100x86400000&c=2&h=104000&n=4", r#"{"v":1,"op":"reserve","limits":[[10,900000],[100,86400000]],"cost":2,"hold_ms":104000,"concurrency":4}"#),
        ("https://limiter/v1/check?l=10x60000&p=1&n=1000", r#"{"v":1,"op":"check","limits":[[10,60000]],"cost":1,"penalty_ms":1,"concurrency":1000}"#),
        ("https://limiter/v1/commit?l=10x60000&r=1700000000000000&s=00000000deadbeef&u=0", r#"{"v":1,"op":"commit","limits":[[10,60000]],"cost":1,"reservation":1700000000000000,"spelling":"00000000deadbeef","used":0}"#),
        ("https://limiter/v1/commit?l=10x60000&c=4294967295&r=18446744073709551615&u=4294967295", r#"{"v":1,"op":"commit","limits":[[10,60000]],"cost":4294967295,"reservation":18446744073709551615,"used":4294967295}"#),
        ("https://limiter/v1/release?l=10x60000&r=7&s=-", r#"{"v":1,"op":"release","limits":[[10,60000]],"cost":1,"reservation":7,"spelling":"-"}"#),
        ("https://limiter/v1/forgive?l=10x60000&c=2&s=00000000deadbeef", r#"{"v":1,"op":"forgive","limits":[[10,60000]],"cost":2,"spelling":"00000000deadbeef"}"#),
        ("https://limiter/v1/clear?l=10x60000&r=9&s=00000000deadbeef", r#"{"v":1,"op":"clear","limits":[[10,60000]],"cost":1,"reservation":9,"spelling":"00000000deadbeef"}"#),
        ("https://limiter/v1/lease?l=5000x60000&a=gcra&h=1000&w=40&p=2000", r#"{"v":1,"op":"lease","alg":"gcra","limits":[[5000,60000]],"cost":1,"hold_ms":1000,"want":40,"penalty_ms":2000}"#),
        ("https://limiter/v1/refund?l=10x60000&c=12&r=1700000001000", r#"{"v":1,"op":"refund","limits":[[10,60000]],"cost":12,"reservation":1700000001000}"#),
        ("https://limiter/v1/status?l=10x900000,100x86400000&a=gcra&p=5", r#"{"v":1,"op":"status","alg":"gcra","limits":[[10,900000],[100,86400000]],"cost":1,"penalty_ms":5}"#),
        ("https://limiter/v1/record?l=10x60000&c=1234&h=1&r=2&w=3&p=4&u=5&n=6", r#"{"v":1,"op":"record","limits":[[10,60000]],"cost":1234,"hold_ms":1,"reservation":2,"want":3,"penalty_ms":4,"used":5,"concurrency":6}"#),
    ];

    #[test]
    fn both_forms_are_byte_identical_to_the_build_before() {
        let calls = calls();
        assert_eq!(calls.len(), CAPTURED.len());
        for (call, (url, json)) in calls.iter().zip(CAPTURED) {
            assert_eq!(encode_call_url(call), url);
            assert_eq!(encode_call(call), json);
            // What decodes (a valid call) comes back whole from both forms.
            if let Ok(decoded) = decode_call_url(url) {
                assert_eq!(&decoded, call, "{url}");
                assert_eq!(decode_call(json).as_ref(), Ok(call), "{json}");
            } else {
                assert_eq!(decode_call_url(url).map_err(|e| e.to_string()), decode_call(json).map_err(|e| e.to_string()), "{url}");
            }
        }
    }
}
