//! Receiving a request's body before a failures-only rule reserves its
//! slot, pure (the glue in `crate::glue::origin` reads the stream; this module
//! says what each outcome means).
//!
//! # Why
//! A `counting.statuses` rule reserves a slot before forwarding
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
//!
//! # The isolate's memory budget
//! The bytes tollgate holds of a request's body wait in the isolate, and
//! an isolate has 128 MB for everything: six stalled uploads at a 16 MiB
//! buffer added 101 MB of workerd RSS, thirty stalled 1 MiB body reads
//! for `body:` keys 123 MB, and about eight such uploads would have killed
//! the isolate with every request in it. So every body tollgate holds
//! takes its bytes from the isolate's [`MemoryBudget`] (`memory_budget`,
//! 32 MiB by default) before it is read, one client (its address,
//! [`client_of`]) at most a quarter of it ([`MEMORY_CLIENT_SHARES`]), and
//! one network (an IPv4 /24, an IPv6 /48: [`network_of`]) at most half
//! ([`MEMORY_NETWORK_SHARES`]), however many addresses it has: four
//! addresses of one /24 could otherwise hold the whole budget.
//!
//! The budget is in bytes of isolate memory, not of payload: a body waits
//! in the original request's stream (for the origin) while tollgate reads
//! a clone, so each byte is held about twice (measured: four stalled 8 MiB
//! uploads, 32 MiB of payload, grew workerd by 67-71 MB), and a body read
//! for keys about three times (the copy read, the runtime's buffers).
//! Every hold is charged what its kind costs per byte ([`Holder::per_byte`]:
//! [`MEMORY_PER_UPLOAD_BYTE`], [`MEMORY_PER_READ_BYTE`]).
//!
//! - the bytes a body may need ([`wanted`]: the announced `Content-Length`,
//!   capped by the buffer, all or nothing; without a length, the buffer,
//!   or what is left of it) are held while it is received and until its
//!   forward returned (or tollgate answered);
//! - an upload that finds no room ([`Reception::Stream`]) is not buffered:
//!   it is handled as a body over the buffer at once (reserve, stream
//!   under `upload_timeout`, 408 if not all in by then), and logged as an
//!   `upload` line with `outcome = "over_budget"`. The client is served as
//!   usual; it only loses the slow-upload protection above.
//! - a body read for `body:` keys and form parameters
//!   ([`crate::pipeline::machine::Next::Body`], up to `body_limit`) that
//!   finds no room is not read ([`BodyRead::Unusable`], a `body` line with
//!   `outcome = "over_budget"`): planned as a body over `body_limit` always
//!   was (a `body:` key is missing and its rule's missing-key policy
//!   applies; form conditions fail safe and match). One still arriving at
//!   `body_timeout` (10 s by default) is answered 408 ([`BodyRead::Stalled`],
//!   a `body` line, `outcome = "stalled"`), nothing counted or forwarded:
//!   a client that stops sending loses its hold first.
//! - a hold is given back when its request ends, whatever the path
//!   (the glue's guard), and lapses by itself its timeout +
//!   [`HOLD_GRACE_MS`] after the read began, for a request whose end the
//!   runtime never reported.
//!
//! So an isolate holds at most `memory_budget` bytes of memory for bodies
//! (plus one read's chunk per body past its hold, cancelled there), a
//! client at most a quarter of that and a network half, however many
//! connections it opens.
//!
//! # Watched answers
//! An answer read for usage, or holding a `concurrency` slot, is watched
//! as it passes (`crate::glue::origin`'s `watchBody`), and what the watch
//! reads ahead of its client waits in the isolate. It is charged to the
//! client's shares until the answer ends ([`MemoryBudget::watch`]):
//! - read behind the client (a usage rule that never cuts, no idle watch:
//!   the body teed once its events trickle, batched before: src/glue/origin.rs
//!   `watchBody`) [`MEMORY_PER_ANSWER_BEHIND`] (2 MiB), what the
//!   runtime's tee was measured to hold past the batched watch (and more
//!   than the batches before it hold);
//! - watched in batches [`MEMORY_PER_AHEAD_BYTE`] (2) a byte of its
//!   read-ahead, [`ANSWER_AHEAD`] (64 KiB): 128 KiB (the batch gathering
//!   and the batch in flight).
//!
//! A tee is taken only while it leaves as much room again (for batched
//! answers: tees alone would leave the next ones no read-ahead); an answer
//! that finds no room for the tee is watched in batches; one
//! that finds less than 128 KiB reads ahead half of what is left, down to
//! nothing: each chunk is then read only once the client took the one
//! before (one chunk of the origin's per answer held past the budget,
//! uncharged, as a body's last read). It is never passed unwatched: a
//! usage rule must read every byte, and a `cut` must see each byte before
//! the client. What it costs is time, not exactness: batches of one chunk
//! (more JS turns per event) and no read-ahead.
//!
//! # The WebSocket relay's queues
//! A `concurrency` rule's WebSocket session is relayed by the Worker
//! (`crate::glue::origin`), and what the relay passes on waits in workerd
//! until its peer takes it. workerd's WebSocket tells no one how much it
//! has queued (no `bufferedAmount`, `send()` returns nothing, no
//! `WebSocketStream`), nor can a relay stop reading, so what a peer holds
//! cannot be measured: it is charged. Every message is charged to its
//! client's share of this same budget before it is sent
//! ([`MemoryBudget::relay`], [`MEMORY_PER_RELAY_BYTE`] a byte and
//! [`MEMORY_PER_RELAY_MESSAGE`] a message), and each side's charge drains
//! at [`RELAY_DRAIN`] bytes and [`RELAY_DRAIN_MESSAGES`] messages a second
//! (what its peer is counted as reading). A message that does not fit
//! ends its session (1013), one over a client's share too (1009). An
//! ended session's charge is not given back but drains on: workerd keeps
//! what was queued for a peer that does not read (a closed socket's
//! `close()` waits behind it, and there is no abort), so a client that
//! opens session after session still holds at most its share. So a
//! client's sessions hold at most its share in charge; a peer that reads
//! nothing holds at most that plus what the drain credited, [`RELAY_DRAIN`]
//! bytes and [`RELAY_DRAIN_MESSAGES`] messages a second of the session's
//! age (its `reservation_ttl` at most), the part no platform signal lets
//! the relay see; a reader whose sender outruns the drain by its client's
//! share is ended as one that stopped, and a client whose stalled
//! sessions hold its share has its other sessions ended as well.

use crate::config::headers::OwnResponse;
use crate::pipeline::applied::Applied;
use crate::count::protocol::Op;
use crate::pipeline::verdict::{check_op, LogEvent};
use crate::config::policy::Action;

pub(crate) use crate::config::policy::{
    UploadLimits, ANSWER_AHEAD, MEMORY_CLIENT_SHARES, MEMORY_NETWORK_SHARES, MEMORY_PER_AHEAD_BYTE, MEMORY_PER_ANSWER_BEHIND, MEMORY_PER_READ_BYTE, MEMORY_PER_RELAY_BYTE, MEMORY_PER_RELAY_MESSAGE,
    MEMORY_PER_UPLOAD_BYTE, NETWORK_V4_PREFIX, NETWORK_V6_PREFIX, RELAY_DRAIN, RELAY_DRAIN_MESSAGES,
};

/// What reading the body before the reservation found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receipt {
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
    pub(crate) fn from_word(word: &str) -> Receipt {
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
pub(crate) fn limits_for(applied: &[Applied<'_>]) -> Option<UploadLimits> {
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

/// A hold lapses this long after its upload's `upload_timeout` (the time
/// for the counter calls and for the origin to take the bytes), even if its
/// request never ended in a way the glue saw.
pub(crate) const HOLD_GRACE_MS: i64 = 60_000;

/// The client an upload's bytes are charged to: the `CF-Connecting-IP`
/// address as an `ip` key would read it (IPv6 by `ipv6_prefix`), or one
/// shared `unknown` client without it.
pub(crate) fn client_of(connecting_ip: Option<&str>, ipv6_prefix: u8) -> String {
    connecting_ip.and_then(|raw| crate::request::key::client_ip_key(raw, ipv6_prefix)).unwrap_or_else(|| "unknown".into())
}

/// The network `client` ([`client_of`]) belongs to, for
/// [`MEMORY_NETWORK_SHARES`]: its IPv4 /[`NETWORK_V4_PREFIX`], its IPv6
/// /[`NETWORK_V6_PREFIX`] (its own prefix when that is wider), `unknown`
/// for `unknown`.
pub(crate) fn network_of(client: &str) -> String {
    use std::net::{Ipv4Addr, Ipv6Addr};
    if let Ok(v4) = client.parse::<Ipv4Addr>() {
        let bits = u32::from(v4) & (u32::MAX << (32 - u32::from(NETWORK_V4_PREFIX)));
        return format!("{}/{NETWORK_V4_PREFIX}", Ipv4Addr::from(bits));
    }
    let Some((address, prefix)) = client.split_once('/') else { return client.to_string() };
    match (address.parse::<Ipv6Addr>(), prefix.parse::<u8>()) {
        (Ok(v6), Ok(prefix)) if prefix > NETWORK_V6_PREFIX => {
            let bits = u128::from(v6) & (u128::MAX << (128 - u32::from(NETWORK_V6_PREFIX)));
            format!("{}/{NETWORK_V6_PREFIX}", Ipv6Addr::from(bits))
        }
        _ => client.to_string(),
    }
}

/// Whose share of which budget a request's relayed WebSocket session is
/// charged to ([`MemoryBudget::relay`]): its client ([`client_of`]) and the
/// config's `memory_budget`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Charged {
    pub(crate) client: String,
    pub(crate) budget: u32,
}

impl Default for Charged {
    /// The shared `unknown` client, in the default budget (an embedded
    /// app's settlement, which carries no address).
    fn default() -> Charged {
        Charged { client: "unknown".into(), budget: crate::config::policy::DEFAULT_MEMORY_BUDGET }
    }
}

/// The bytes an upload may need to hold while it is received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Want {
    pub(crate) bytes: u32,
    /// All of `bytes` or none (the length was announced: less could not
    /// hold the body).
    pub(crate) whole: bool,
}

/// What an upload under `limits` asks of the budget, given its
/// `Content-Length` (if any): the announced length when it fits the
/// buffer, else the buffer (a longer body streams past it anyway).
pub(crate) fn wanted(limits: UploadLimits, content_length: Option<&str>) -> Want {
    let announced = content_length.map(str::trim).filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()));
    match announced.map(|l| l.parse::<u64>().unwrap_or(u64::MAX)) {
        Some(length) => Want { bytes: u32::try_from(length.min(u64::from(limits.buffer))).unwrap_or(limits.buffer), whole: true },
        None => Want { bytes: limits.buffer, whole: false },
    }
}

/// How to receive an upload, given what the budget granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reception {
    /// Read it within these limits (the buffer: what was granted).
    Read(UploadLimits),
    /// No room: read nothing, go on as [`Receipt::OverBuffer`] (stream).
    Stream,
}

/// What [`MemoryBudget::take`] decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Taken {
    /// The hold to give back ([`MemoryBudget::give_back`]); `None` when
    /// nothing is held.
    pub(crate) hold: Option<u64>,
    pub(crate) reception: Reception,
    /// The line of a body granted less than it wanted (`upload` or `body`).
    pub(crate) note: Option<LogEvent>,
}

/// One body's bytes, or one side of a relayed WebSocket session's, held.
#[derive(Debug, Clone)]
struct Hold {
    id: u64,
    client: String,
    /// The client's network ([`network_of`]).
    network: String,
    /// Bytes of isolate memory: the body's bytes × [`Holder::per_byte`].
    memory: u64,
    until_ms: i64,
    /// A relay side's ([`MemoryBudget::relay`]). `None`: a body's hold,
    /// fixed until given back.
    relay: Option<RelaySide>,
}

/// One side of a relayed session, as charged: `memory` is its messages'
/// bytes × [`MEMORY_PER_RELAY_BYTE`] + `messages` × [`MEMORY_PER_RELAY_MESSAGE`].
#[derive(Debug, Clone, Copy)]
struct RelaySide {
    session: u64,
    /// When it was last drained ([`RELAY_DRAIN`], [`RELAY_DRAIN_MESSAGES`]).
    at_ms: i64,
    /// The messages still charged.
    messages: u64,
    /// The session ended: it takes no more, and what it holds drains.
    ended: bool,
}

impl Hold {
    /// Whether this is a side of the relayed session `session`.
    fn of_session(&self, session: u64) -> bool {
        self.relay.is_some_and(|r| r.session == session)
    }
}

/// What a hold is for: the line its shortfall is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    /// An upload received before a failures-only rule's check (`upload`).
    Upload,
    /// A body read for `body:` keys and form parameters (`body`).
    BodyRead,
    /// A message a WebSocket relay passed on, until its peer could have
    /// read it ([`MemoryBudget::relay`]).
    Relay,
}

impl Holder {
    /// Bytes of isolate memory one body byte held this way costs, as
    /// measured ([`MEMORY_PER_UPLOAD_BYTE`], [`MEMORY_PER_READ_BYTE`]).
    pub(crate) const fn per_byte(self) -> u64 {
        match self {
            Holder::Upload => MEMORY_PER_UPLOAD_BYTE as u64,
            Holder::BodyRead => MEMORY_PER_READ_BYTE as u64,
            Holder::Relay => MEMORY_PER_RELAY_BYTE as u64,
        }
    }
}

/// The isolate's budget of memory held for request bodies, relayed
/// messages and watched answers: received uploads, bodies read for keys,
/// relay sides and answers' read-ahead (isolate state: the glue
/// keeps one, `crate::glue`'s only part is to hold it and give holds
/// back). Counted in bytes of isolate memory, each body byte at what its
/// kind costs ([`Holder::per_byte`]). Linear in the bodies being held, which an
/// isolate's concurrent requests bound.
#[derive(Debug, Default)]
pub(crate) struct MemoryBudget {
    holds: Vec<Hold>,
    next_id: u64,
}

impl MemoryBudget {
    pub(crate) const fn new() -> MemoryBudget {
        MemoryBudget { holds: Vec::new(), next_id: 0 }
    }

    /// Bytes of memory held at `now_ms` (lapsed holds dropped), in all and
    /// by `client`.
    #[cfg(test)]
    pub(crate) fn held(&mut self, client: &str, now_ms: i64) -> (u64, u64) {
        let held = self.held_by(client, &network_of(client), now_ms);
        (held.all, held.client)
    }

    /// Bytes of memory held at `now_ms` (lapsed holds dropped), in all, by
    /// `client` and by its `network`.
    fn held_by(&mut self, client: &str, network: &str, now_ms: i64) -> Held {
        self.holds.retain(|h| h.until_ms > now_ms);
        self.drain(now_ms);
        let sum = |of: &dyn Fn(&Hold) -> bool| self.holds.iter().filter(|h| of(h)).map(|h| h.memory).sum();
        Held { all: sum(&|_| true), client: sum(&|h| h.client == client), network: sum(&|h| h.network == network) }
    }

    /// The bytes of memory `client` may still take within `budget` at
    /// `now_ms`: what is left of the isolate's budget, of the client's
    /// [`MEMORY_CLIENT_SHARES`]th and of its network's
    /// [`MEMORY_NETWORK_SHARES`]th, whichever is least; and what is held.
    fn room(&mut self, budget: u32, client: &str, now_ms: i64) -> (u64, Held) {
        let held = self.held_by(client, &network_of(client), now_ms);
        let (client_share, network_share) = shares(budget);
        let room = u64::from(budget).saturating_sub(held.all).min(client_share.saturating_sub(held.client)).min(network_share.saturating_sub(held.network));
        (room, held)
    }

    /// A new hold of `memory` bytes for `client`, until `until_ms`: its id.
    fn push(&mut self, client: &str, memory: u64, until_ms: i64, relay: Option<RelaySide>) -> u64 {
        self.next_id += 1;
        self.holds.push(Hold { id: self.next_id, client: client.to_string(), network: network_of(client), memory, until_ms, relay });
        self.next_id
    }

    /// Takes what `client`'s body under `limits` wants (bytes of body),
    /// within `budget` bytes of memory for the isolate and a
    /// [`MEMORY_CLIENT_SHARES`]th of it for the client, at `now_ms`: the
    /// hold lapses `limits.timeout_ms` + [`HOLD_GRACE_MS`] later. The
    /// buffer granted ([`Reception::Read`]) is in bytes of body.
    pub(crate) fn take(&mut self, budget: u32, client: &str, limits: UploadLimits, want: Want, holder: Holder, now_ms: i64) -> Taken {
        let (room, held) = self.room(budget, client, now_ms);
        let room = room / holder.per_byte();
        let wants = u64::from(want.bytes);
        let granted = if want.whole && room < wants { 0 } else { wants.min(room) };
        let note = (granted < wants).then(|| over_budget(holder, want, granted, held, budget));
        if granted == 0 && wants > 0 {
            return Taken { hold: None, reception: Reception::Stream, note };
        }
        let buffer = u32::try_from(granted).unwrap_or(limits.buffer);
        let until_ms = now_ms.saturating_add(i64::from(limits.timeout_ms)).saturating_add(HOLD_GRACE_MS);
        let hold = (granted > 0).then(|| self.push(client, granted.saturating_mul(holder.per_byte()), until_ms, None));
        Taken { hold, reception: Reception::Read(UploadLimits { buffer, ..limits }), note }
    }

    /// Takes what a watched answer of `client`'s holds ([`AnswerWatch`]),
    /// within `budget`, its client's and its network's shares, at `now_ms`,
    /// until it ends (given back) or `left_ms` + [`HOLD_GRACE_MS`] passed:
    /// read behind the client ([`MEMORY_PER_ANSWER_BEHIND`]) when `behind`
    /// is wanted and the room holds twice that (a tee leaves as much room
    /// again for batched answers); else watched in batches, reading at most
    /// [`ANSWER_AHEAD`] ahead of the client ([`MEMORY_PER_AHEAD_BYTE`] a
    /// byte), or as much less as the room holds, down to nothing: a chunk
    /// read only once the client took the one before, held uncharged (one
    /// chunk of the origin's per answer past the budget). Never unwatched:
    /// a usage rule reads every byte, and a `cut` stays exact.
    pub(crate) fn watch(&mut self, budget: u32, client: &str, behind: bool, left_ms: u64, now_ms: i64) -> AnswerWatch {
        let (room, held) = self.room(budget, client, now_ms);
        let until_ms = now_ms.saturating_add(i64::try_from(left_ms).unwrap_or(i64::MAX)).saturating_add(HOLD_GRACE_MS);
        let tee = u64::from(MEMORY_PER_ANSWER_BEHIND);
        // A tee only while it leaves as much room again, for answers
        // watched in batches (16 at the full read-ahead): tees alone would
        // leave the next answers no read-ahead, a read per chunk.
        if behind && room >= tee.saturating_mul(2) {
            return AnswerWatch { hold: Some(self.push(client, tee, until_ms, None)), ahead: ANSWER_AHEAD, behind: true, note: None };
        }
        let per_byte = u64::from(MEMORY_PER_AHEAD_BYTE);
        let ahead = (room / per_byte).min(u64::from(ANSWER_AHEAD));
        let hold = (ahead > 0).then(|| self.push(client, ahead * per_byte, until_ms, None));
        let short = behind || ahead < u64::from(ANSWER_AHEAD);
        let note = short.then(|| answer_over_budget(behind, ahead, held, budget));
        AnswerWatch { hold, ahead: u32::try_from(ahead).unwrap_or(ANSWER_AHEAD), behind: false, note }
    }

    /// Gives the hold `id` back (nothing if it lapsed).
    pub(crate) fn give_back(&mut self, id: u64) {
        self.holds.retain(|h| h.id != id);
    }

    /// Opens a relayed WebSocket session of `client`'s at `now_ms`, for at
    /// most `left_ms` (its holds lapse [`HOLD_GRACE_MS`] after): the
    /// session's id, for [`MemoryBudget::relay`] and
    /// [`MemoryBudget::end_session`]. It holds nothing yet.
    pub(crate) fn open_session(&mut self, client: &str, left_ms: u64, now_ms: i64) -> u64 {
        let until_ms = now_ms.saturating_add(i64::try_from(left_ms).unwrap_or(i64::MAX)).saturating_add(HOLD_GRACE_MS);
        self.next_id += 1;
        let session = self.next_id;
        for _ in 0..2 {
            self.push(client, 0, until_ms, Some(RelaySide { session, at_ms: now_ms, messages: 0, ended: false }));
        }
        session
    }

    /// Charges a message of `bytes` the relay is about to pass on to side
    /// `side` (0 or 1) of `session` ([`MEMORY_PER_RELAY_BYTE`] a byte and
    /// [`MEMORY_PER_RELAY_MESSAGE`]), within `budget` and the client's
    /// share, at `now_ms`. Each side's charge drains at [`RELAY_DRAIN`]
    /// bytes and [`RELAY_DRAIN_MESSAGES`] messages a second (what its peer
    /// is counted as reading: workerd tells no one what a socket has
    /// queued). A message that does not fit ends its session
    /// ([`RelayVerdict::Cut`]; [`RelayVerdict::TooBig`] for one over the
    /// share): the charge of a peer that stopped reading does not drain,
    /// so it is that peer's sessions, and its client's, that run out.
    pub(crate) fn relay(&mut self, budget: u32, session: u64, side: usize, bytes: u64, now_ms: i64) -> RelayVerdict {
        let need = bytes.saturating_mul(Holder::Relay.per_byte()).saturating_add(u64::from(MEMORY_PER_RELAY_MESSAGE));
        let live = |h: &&Hold| h.of_session(session) && h.relay.is_some_and(|r| !r.ended);
        let Some(client) = self.holds.iter().find(live).map(|h| h.client.clone()) else { return RelayVerdict::Cut };
        if need > shares(budget).0 {
            return RelayVerdict::TooBig;
        }
        if self.room(budget, &client, now_ms).0 < need {
            return RelayVerdict::Cut;
        }
        if let Some(hold) = self.holds.iter_mut().filter(|h| h.of_session(session)).nth(side) {
            hold.memory = hold.memory.saturating_add(need);
            if let Some(charged) = hold.relay.as_mut() {
                charged.messages += 1;
            }
        }
        RelayVerdict::Pass
    }

    /// Ends `session`: it takes no more messages, and its charge stays
    /// until drained (or lapsed). workerd gives nothing back when a relay
    /// closes a socket: `close()` is queued behind the messages, and a peer
    /// that does not read keeps them (measured: each round of sessions
    /// closed at their share toward an origin that reads nothing left its
    /// 64 MiB in workerd). Given back at once, a client could open session
    /// after session, each filling its share anew.
    pub(crate) fn end_session(&mut self, session: u64) {
        for hold in self.holds.iter_mut().filter(|h| h.of_session(session)) {
            if let Some(side) = hold.relay.as_mut() {
                side.ended = true;
            }
        }
        self.holds.retain(|h| !(h.relay.is_some_and(|r| r.ended) && h.memory == 0));
    }

    /// Each relay side's charge less what its peer is counted as having
    /// read since it was last drained: [`RELAY_DRAIN`] bytes and
    /// [`RELAY_DRAIN_MESSAGES`] messages a second.
    fn drain(&mut self, now_ms: i64) {
        let (per_byte, per_message) = (Holder::Relay.per_byte(), u64::from(MEMORY_PER_RELAY_MESSAGE));
        for hold in &mut self.holds {
            let Some(side) = hold.relay.as_mut() else { continue };
            let elapsed = u64::try_from(now_ms.saturating_sub(side.at_ms)).unwrap_or(0);
            side.at_ms = side.at_ms.max(now_ms);
            let bytes = hold.memory.saturating_sub(side.messages * per_message) / per_byte;
            let bytes = bytes.saturating_sub(elapsed.saturating_mul(u64::from(RELAY_DRAIN)) / 1000);
            side.messages = side.messages.saturating_sub(elapsed.saturating_mul(u64::from(RELAY_DRAIN_MESSAGES)) / 1000);
            hold.memory = bytes * per_byte + side.messages * per_message;
        }
        self.holds.retain(|h| !(h.relay.is_some_and(|r| r.ended) && h.memory == 0));
    }
}

/// Bytes of memory held at a moment: in all, by a client, by its network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    all: u64,
    client: u64,
    network: u64,
}

/// A client's and a network's share of `budget`, in bytes of memory
/// ([`MEMORY_CLIENT_SHARES`], [`MEMORY_NETWORK_SHARES`]).
fn shares(budget: u32) -> (u64, u64) {
    (u64::from(budget / MEMORY_CLIENT_SHARES), u64::from(budget / MEMORY_NETWORK_SHARES))
}

/// What [`MemoryBudget::watch`] granted a watched answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AnswerWatch {
    /// The hold to give back when the answer ends; `None`: nothing held.
    pub(crate) hold: Option<u64>,
    /// Bytes the batched watch reads ahead of the client (0: a chunk only
    /// once the client took the one before).
    pub(crate) ahead: u32,
    /// May be read behind the client (the tee, once the events trickle)
    /// rather than in batches throughout.
    pub(crate) behind: bool,
    /// The `answer` line of one granted less than it wanted.
    pub(crate) note: Option<LogEvent>,
}

/// The line of a watched answer the budget could not hold whole:
/// `{"tollgate":"answer","outcome":"over_budget"}`, with whether it wanted
/// to be read behind its client, the read-ahead it got (bytes of body), and
/// what was held (bytes of memory).
fn answer_over_budget(behind: bool, ahead: u64, held: Held, budget: u32) -> LogEvent {
    LogEvent::new(
        "answer",
        vec![
            ("outcome", "over_budget".into()),
            ("wanted", if behind { "behind" } else { "ahead" }.into()),
            ("read_ahead", ahead.into()),
            ("isolate_held", held.all.into()),
            ("client_held", held.client.into()),
            ("network_held", held.network.into()),
            ("memory_budget", budget.into()),
        ],
    )
}

/// A relayed message's fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelayVerdict {
    /// Charged: pass it on.
    Pass,
    /// Larger than a client's share can ever hold: end the session (1009).
    TooBig,
    /// No room in the client's share or the budget: end the session (1013).
    Cut,
}

impl RelayVerdict {
    /// The relay's word for it (`pass`, `too_big`, `cut`).
    pub(crate) const fn word(self) -> &'static str {
        match self {
            RelayVerdict::Pass => "pass",
            RelayVerdict::TooBig => "too_big",
            RelayVerdict::Cut => "cut",
        }
    }
}

/// The line of a body the budget could not hold whole: `upload` (it
/// streams) or `body` (it is not read). `wanted` and `buffered` in bytes
/// of body; `isolate_held`, `client_held` and `memory_budget` in bytes of
/// memory.
fn over_budget(holder: Holder, want: Want, granted: u64, held: Held, budget: u32) -> LogEvent {
    let line = match holder {
        Holder::Upload => "upload",
        Holder::BodyRead | Holder::Relay => "body",
    };
    LogEvent::new(
        line,
        vec![
            ("outcome", "over_budget".into()),
            ("wanted", want.bytes.into()),
            ("buffered", granted.into()),
            ("isolate_held", held.all.into()),
            ("client_held", held.client.into()),
            ("network_held", held.network.into()),
            ("memory_budget", budget.into()),
        ],
    )
}

/// What a body read for keys ([`crate::pipeline::machine::Next::Body`])
/// asks of the budget: `None` when its announced `Content-Length` is over
/// `limit` (it is not read, as before: planned as unusable); else what
/// [`wanted`] says for a buffer of `limit`.
pub(crate) fn body_wanted(limit: u32, content_length: Option<&str>) -> Option<Want> {
    let announced = content_length.map(str::trim).filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()));
    if announced.is_some_and(|l| l.parse::<u64>().map_or(true, |l| l > u64::from(limit))) {
        return None;
    }
    Some(wanted(UploadLimits { buffer: limit, timeout_ms: 0 }, content_length))
}

/// How a body read for keys went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyRead {
    /// The whole body, within its limit (empty for no body at all).
    Read(Vec<u8>),
    /// Not buffered: no body, over the limit (announced or streamed), no
    /// room in the budget, or the stream failed. Planned as
    /// `Body::Unusable`, as a body over `body_limit` always was.
    Unusable,
    /// Still arriving at `body_timeout`: 408, nothing counted or forwarded
    /// (the client that stops sending loses its hold first).
    Stalled,
}

/// 408 for a body read for keys that did not arrive within `timeout_ms`,
/// and its `body` line.
pub(crate) fn body_too_slow(timeout_ms: u32) -> (OwnResponse, LogEvent) {
    let event = LogEvent::new("body", vec![("outcome", "stalled".into()), ("body_timeout_ms", timeout_ms.into())]);
    (too_slow(timeout_ms), event)
}

/// What the Worker does once the body was read as far as `limits` allow.
#[derive(Debug, Clone)]
pub(crate) enum Next {
    /// Check the rules (reserve). `deadline_ms`: the Unix ms by which the
    /// rest of the body must have been forwarded, for a body over the
    /// buffer (`None`: the body is all here, or there is none).
    Check { deadline_ms: Option<i64> },
    /// Answer at once, reserving nothing, forwarding nothing.
    Answer { response: OwnResponse, event: LogEvent },
}

/// What follows `receipt`, read under `limits` from `started_ms` on.
pub(crate) fn next(receipt: Receipt, limits: UploadLimits, started_ms: i64) -> Next {
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
pub(crate) fn left_ms(deadline_ms: i64, now_ms: i64) -> u32 {
    u32::try_from(deadline_ms.saturating_sub(now_ms).max(0)).unwrap_or(u32::MAX)
}

/// 408: the body did not arrive within `timeout_ms`.
pub(crate) fn too_slow(timeout_ms: u32) -> OwnResponse {
    let detail = format!("The request body did not arrive within {} s.", crate::config::headers::seconds_ceil(u64::from(timeout_ms)));
    OwnResponse::problem(408, "Request Timeout", &detail, None)
}

/// The log line of a body that stalled after its slot was reserved (the
/// forward aborted, the slot released).
pub(crate) fn aborted_event(timeout_ms: u32) -> LogEvent {
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

    const MIB: u32 = 1_048_576;

    fn taken_bytes(t: &Taken) -> Option<u32> {
        match t.reception {
            Reception::Read(limits) => Some(limits.buffer),
            Reception::Stream => None,
        }
    }

    const UP: Holder = Holder::Upload;

    /// Six stalled 8 MiB − 1 KiB
    /// uploads at the largest buffer the largest budget holds (64 MiB of
    /// memory, a client's 16 MiB share at 2 bytes per body byte): four are
    /// held (64 MiB of memory, 32 MiB of body), the fifth and sixth
    /// stream, one client gets a quarter, and every hold comes back.
    #[test]
    fn six_largest_uploads_stay_within_the_isolate_memory_budget() {
        let limits = UploadLimits { buffer: 8 * MIB, timeout_ms: 10_000 };
        let length = (8 * MIB - 1024).to_string();
        let want = wanted(limits, Some(&length));
        assert_eq!(want, Want { bytes: 8 * MIB - 1024, whole: true });
        let mut budget = MemoryBudget::new();
        let taken: Vec<Taken> = (0..6).map(|i| budget.take(64 * MIB, &format!("198.51.{i}.1"), limits, want, UP, 0)).collect();
        let read: Vec<Option<u32>> = taken.iter().map(taken_bytes).collect();
        assert_eq!(read, [Some(want.bytes), Some(want.bytes), Some(want.bytes), Some(want.bytes), None, None]);
        assert_eq!(budget.held("x", 0).0, 2 * 4 * u64::from(want.bytes), "each body byte held is charged twice");
        assert!(budget.held("x", 0).0 <= u64::from(64 * MIB), "within the budget");
        assert!(taken[..4].iter().all(|t| t.note.is_none()));
        let note = taken[4].note.as_ref().map(LogEvent::line).unwrap_or_default();
        assert!(note.contains(r#""tollgate":"upload""#) && note.contains(r#""outcome":"over_budget""#) && note.contains(r#""buffered":0"#), "{note}");
        assert!(note.contains(&format!(r#""isolate_held":{}"#, 8 * u64::from(want.bytes))) && note.contains(r#""memory_budget":67108864"#), "{note}");
        // One client: a quarter of the budget, whatever it opens.
        let mine = budget.take(64 * MIB, "198.51.0.1", limits, Want { bytes: 1025, whole: true }, UP, 0);
        assert_eq!(mine.reception, Reception::Stream, "2 KiB of memory left of its 16 MiB share: 1 KiB of body");
        // Given back (an upload ended): a new upload is buffered again.
        for t in &taken {
            if let Some(id) = t.hold {
                budget.give_back(id);
            }
        }
        assert_eq!(budget.held("x", 0), (0, 0));
        assert_eq!(taken_bytes(&budget.take(64 * MIB, "203.0.113.9", limits, want, UP, 0)), Some(want.bytes));
    }

    #[test]
    fn a_hold_lapses_by_itself_when_its_request_never_ends() {
        let limits = UploadLimits { buffer: 4 * MIB, timeout_ms: 10_000 };
        let want = Want { bytes: 4 * MIB, whole: true };
        let mut budget = MemoryBudget::new();
        for i in 0..4 {
            assert!(budget.take(32 * MIB, &format!("c{i}"), limits, want, UP, 0).hold.is_some());
        }
        let lapses = 10_000 + HOLD_GRACE_MS;
        assert_eq!(budget.take(32 * MIB, "late", limits, want, UP, lapses - 1).reception, Reception::Stream, "still held");
        assert_eq!(taken_bytes(&budget.take(32 * MIB, "late", limits, want, UP, lapses)), Some(4 * MIB), "lapsed: room again");
        budget.give_back(1);
        budget.give_back(1);
        assert_eq!(budget.held("late", lapses).1, u64::from(8 * MIB), "a lapsed or doubled give-back changes nothing");
    }

    #[test]
    fn an_unannounced_length_takes_what_is_left() {
        let limits = UploadLimits { buffer: 8 * MIB, timeout_ms: 1_000 };
        assert_eq!(wanted(limits, None), Want { bytes: 8 * MIB, whole: false });
        assert_eq!(wanted(limits, Some(" 100 ")), Want { bytes: 100, whole: true });
        assert_eq!(wanted(limits, Some("99999999999999999999999")), Want { bytes: 8 * MIB, whole: true }, "over the buffer");
        assert_eq!(wanted(limits, Some("-1")), Want { bytes: 8 * MIB, whole: false }, "not a length");
        assert_eq!(wanted(limits, Some("0")), Want { bytes: 0, whole: true });
        let mut budget = MemoryBudget::new();
        budget.take(16 * MIB, "a", limits, Want { bytes: MIB, whole: true }, UP, 0);
        let rest = budget.take(16 * MIB, "a", limits, wanted(limits, None), UP, 0);
        assert_eq!(taken_bytes(&rest), Some(MIB), "the client's 4 MiB share of memory, less 2 MiB held: 1 MiB of body");
        assert!(rest.note.is_some(), "less than wanted is logged");
        let empty = budget.take(16 * MIB, "a", limits, Want { bytes: 0, whole: true }, UP, 0);
        assert_eq!((taken_bytes(&empty), empty.hold, empty.note), (Some(0), None, None), "an empty body needs no room");
        assert_eq!(client_of(Some("2001:db8:1:2:3:4:5:6"), 64), "2001:db8:1:2::/64");
        assert_eq!(client_of(None, 64), "unknown");
    }

    /// Thirty clients stalling 1 MiB body reads grew
    /// workerd by 123 MB. Body reads share the one budget with uploads, at
    /// 3 bytes of memory per byte: a client's reads stop at its quarter,
    /// the isolate's at the budget, and what finds no room is not read (a
    /// `body` line).
    #[test]
    fn body_reads_share_the_budget_with_uploads() {
        let body_limits = UploadLimits { buffer: MIB, timeout_ms: 10_000 };
        let want = body_wanted(MIB, Some("1048576")).unwrap();
        assert_eq!(want, Want { bytes: MIB, whole: true });
        let mut budget = MemoryBudget::new();
        // One client, many connections: its 8 MiB share of memory holds two 1 MiB reads (3 MiB each).
        let one: Vec<Taken> = (0..6).map(|_| budget.take(32 * MIB, "198.51.100.7", body_limits, want, Holder::BodyRead, 0)).collect();
        assert_eq!(one.iter().filter(|t| t.hold.is_some()).count(), 2, "a quarter of 32 MiB at 3 bytes per byte: two 1 MiB reads");
        let note = one[2].note.as_ref().map(LogEvent::line).unwrap_or_default();
        assert!(note.contains(r#""tollgate":"body""#) && note.contains(r#""outcome":"over_budget""#) && note.contains(r#""client_held":6291456"#), "{note}");
        // Thirty clients (of thirty networks): the isolate's 32 MiB of memory hold ten.
        let many = (0..30).filter(|i| budget.take(32 * MIB, &format!("203.0.{i}.1"), body_limits, want, Holder::BodyRead, 0).hold.is_some()).count();
        assert_eq!(many, 8, "ten in all, two of them the first client's");
        assert_eq!(budget.held("x", 0).0, 30 * u64::from(MIB));
        // Uploads share it: 2 MiB of memory left, 1 MiB of upload (at 2 per byte), not more.
        let upload = UploadLimits { buffer: 2 * MIB, timeout_ms: 1_000 };
        let over = budget.take(32 * MIB, "192.0.2.1", upload, Want { bytes: MIB + 1, whole: true }, UP, 0);
        assert_eq!(over.reception, Reception::Stream);
        assert_eq!(taken_bytes(&budget.take(32 * MIB, "192.0.2.1", upload, Want { bytes: MIB, whole: true }, UP, 0)), Some(MIB));
        // The stalled reads' holds lapse at body_timeout + grace at the latest.
        assert_eq!(budget.held("x", 10_000 + HOLD_GRACE_MS).0, 0);
    }

    const RELAY: u64 = MEMORY_PER_RELAY_BYTE as u64;
    const MSG: u64 = MEMORY_PER_RELAY_MESSAGE as u64;

    /// A relayed session's messages are charged to its client's
    /// share until its peer could have read them (RELAY_DRAIN a second):
    /// a reading side drains as it goes, one that does not read fills the
    /// share and the message that finds no room ends its session; one
    /// message over the share is too big; an ended session's charge stays
    /// until drained (workerd still holds its queue).
    #[test]
    fn a_relay_is_charged_to_its_clients_share_until_drained() {
        let budget = 32 * MIB;
        let share = u64::from(budget / MEMORY_CLIENT_SHARES);
        let mut b = MemoryBudget::new();
        let reading = b.open_session("198.51.100.1", 3_600_000, 0);
        for t in 0..600 {
            assert_eq!(b.relay(budget, reading, 1, u64::from(RELAY_DRAIN) - MSG, t * 1000), RelayVerdict::Pass, "a side read at the drain rate never fills ({t} s)");
        }
        assert!(b.held("198.51.100.1", 600_000).1 <= u64::from(RELAY_DRAIN), "drained as it goes");
        let stalled = b.open_session("198.51.100.1", 300_000, 600_000);
        let each = u64::from(MIB) * RELAY + MSG;
        let fits = (share - b.held("198.51.100.1", 600_000).1) / each;
        for _ in 0..fits {
            assert_eq!(b.relay(budget, stalled, 0, u64::from(MIB), 600_000), RelayVerdict::Pass);
        }
        assert_eq!(b.relay(budget, stalled, 0, u64::from(MIB), 600_000), RelayVerdict::Cut, "the share full: the session is ended");
        assert!(b.held("198.51.100.1", 600_000).1 <= share, "never past the share");
        assert_eq!(b.relay(budget, reading, 1, u64::from(MIB), 600_000), RelayVerdict::Cut, "the client's other session finds no room either");
        b.end_session(stalled);
        assert_eq!(b.relay(budget, stalled, 0, 1, 600_000), RelayVerdict::Cut, "an ended session takes no more");
        let kept = b.held("198.51.100.1", 600_000).1;
        assert!(kept >= fits * each, "its charge stays after it ended: {kept}");
        let drained_ms = 1000 * (kept / u64::from(RELAY_DRAIN) + 1);
        assert_eq!(b.held("198.51.100.1", 600_000 + drained_ms as i64).1, 0, "and drains at the rate its peer is counted as reading");
        // One message over the share can never be held.
        let big = b.open_session("203.0.113.1", 300_000, 0);
        assert_eq!(b.relay(budget, big, 0, (share - MSG) / RELAY + 1, 0), RelayVerdict::TooBig);
        assert_eq!(b.relay(budget, big, 0, (share - MSG) / RELAY, 0), RelayVerdict::Pass, "exactly the share fits");
    }

    /// Relays share the isolate's budget with bodies, and lapse with their
    /// slot (+ grace) if they never end.
    #[test]
    fn relays_share_the_isolate_budget_with_bodies() {
        let budget = 8 * MIB;
        let mut b = MemoryBudget::new();
        let read = b.take(budget, "192.0.2.9", UploadLimits { buffer: 512 * 1024, timeout_ms: 10_000 }, Want { bytes: 512 * 1024, whole: true }, Holder::BodyRead, 0);
        assert!(read.hold.is_some());
        let sessions: Vec<u64> = (0..4).map(|i| b.open_session(&format!("203.0.{i}.1"), 60_000, 0)).collect();
        // Four clients, 2 MiB a share, each nearly all of it: with the read's 1.5 MiB, past the 8 MiB.
        let verdicts: Vec<RelayVerdict> = sessions.iter().map(|s| b.relay(budget, *s, 0, (u64::from(2 * MIB) - MSG) / RELAY - 1024, 0)).collect();
        assert_eq!(verdicts, [RelayVerdict::Pass, RelayVerdict::Pass, RelayVerdict::Pass, RelayVerdict::Cut], "the isolate full");
        assert!(b.held("x", 0).0 <= u64::from(budget));
        // A body with no room is refused as ever: the relays' charge is memory held.
        let late = b.take(budget, "192.0.2.10", UploadLimits { buffer: 512 * 1024, timeout_ms: 10_000 }, Want { bytes: 512 * 1024, whole: true }, Holder::BodyRead, 0);
        assert_eq!(late.reception, Reception::Stream);
        assert_eq!(b.held("x", 60_000 + HOLD_GRACE_MS).0, 0, "lapsed with the slot, and the read with its timeout");
    }

    /// As an attacker: empty messages cost memory too (charged
    /// MSG each, so a share holds a bounded number of them); a client that
    /// opens session after session toward a peer that does not read holds
    /// no more than its share in all; a reader of a 60 Hz stream of small
    /// messages is never cut.
    #[test]
    fn empty_messages_and_session_after_session_stay_within_the_share() {
        let budget = 8 * MIB;
        let share = u64::from(budget / MEMORY_CLIENT_SHARES);
        let mut b = MemoryBudget::new();
        let empty = b.open_session("198.51.100.1", 60_000, 0);
        let passed = (0..10_000).take_while(|_| b.relay(budget, empty, 0, 0, 0) == RelayVerdict::Pass).count() as u64;
        assert_eq!(passed, share / MSG, "a share holds {} empty messages, not unbounded", share / MSG);
        assert_eq!(b.held("x", 1_000).0, (passed - u64::from(RELAY_DRAIN_MESSAGES)) * MSG, "a second later: {RELAY_DRAIN_MESSAGES} counted as read");
        b.end_session(empty);
        // Session after session, each cut at once: the client's charge never passes its share.
        for i in 0..20 {
            let s = b.open_session("198.51.100.1", 60_000, 1_000 + i);
            while b.relay(budget, s, 0, 64 * 1024, 1_000 + i) == RelayVerdict::Pass {}
            b.end_session(s);
            assert!(b.held("198.51.100.1", 1_000 + i).1 <= share);
        }
        // A reader of a 60 Hz stream of 100-byte messages is never cut, however long.
        let game = b.open_session("198.51.100.2", 3_600_000, 0);
        for tick in 0..60 * 600 {
            assert_eq!(b.relay(budget, game, 0, 100, tick * 1000 / 60), RelayVerdict::Pass, "tick {tick}");
        }
        assert!(b.held("198.51.100.2", 600_000).1 < 2 * MSG, "drained as it goes");
    }

    #[test]
    fn a_body_announced_over_its_limit_is_never_read_nor_held() {
        assert_eq!(body_wanted(16_384, Some("16385")), None);
        assert_eq!(body_wanted(16_384, Some("99999999999999999999999")), None, "a length past u64");
        assert_eq!(body_wanted(16_384, Some("16384")), Some(Want { bytes: 16_384, whole: true }));
        assert_eq!(body_wanted(16_384, None), Some(Want { bytes: 16_384, whole: false }), "unannounced: up to the limit, what is left");
        assert_eq!(body_wanted(16_384, Some("x")), Some(Want { bytes: 16_384, whole: false }), "not a length");
        let (response, event) = body_too_slow(10_000);
        assert_eq!(response.status, 408);
        assert_eq!(event.line(), r#"{"body_timeout_ms":10000,"outcome":"stalled","tollgate":"body"}"#);
    }

    /// A network: an IPv4 /24, an IPv6 /48 (or the client's own prefix,
    /// wider), `unknown` its own.
    #[test]
    fn a_clients_network_is_its_ipv4_24_or_ipv6_48() {
        assert_eq!(network_of(&client_of(Some("198.51.100.77"), 64)), "198.51.100.0/24");
        assert_eq!(network_of(&client_of(Some("::ffff:198.51.100.77"), 64)), "198.51.100.0/24", "a mapped address is its IPv4");
        assert_eq!(network_of(&client_of(Some("2001:db8:1:2:3:4:5:6"), 64)), "2001:db8:1::/48");
        assert_eq!(network_of(&client_of(Some("2001:db8:1:ff::1"), 64)), "2001:db8:1::/48", "another /64 of the same /48");
        assert_eq!(network_of(&client_of(Some("2001:db8:1:2::1"), 32)), "2001:db8::/32", "an ipv6_prefix wider than /48 is its own network");
        assert_eq!(network_of(&client_of(None, 64)), "unknown");
        assert_eq!(network_of("not an address/99"), "not an address/99");
    }

    /// As an attacker with many addresses in one network: each address
    /// holds at most a quarter, the network at most half, and another
    /// network still finds the other half (bodies and relays alike).
    #[test]
    fn one_network_holds_at_most_half_the_budget_however_many_addresses() {
        let (budget, limits) = (32 * MIB, UploadLimits { buffer: MIB, timeout_ms: 10_000 });
        let want = Want { bytes: MIB, whole: true };
        let mut b = MemoryBudget::new();
        // Eight addresses of one /24, four 1 MiB reads each (3 MiB of memory a read).
        let taken: Vec<bool> = (0..32).map(|i| b.take(budget, &format!("198.51.100.{}", i / 4), limits, want, Holder::BodyRead, 0).hold.is_some()).collect();
        assert_eq!(taken.iter().filter(|t| **t).count(), 5, "16 MiB, half of 32, holds five 3 MiB reads: {taken:?}");
        let (all, _) = b.held("198.51.100.0", 0);
        assert!(all <= u64::from(budget / MEMORY_NETWORK_SHARES), "the network within its half: {all}");
        let refused = b.take(budget, "198.51.100.9", limits, want, Holder::BodyRead, 0);
        let note = refused.note.as_ref().map(LogEvent::line).unwrap_or_default();
        assert!(note.contains(r#""client_held":0"#) && note.contains(&format!(r#""network_held":{}"#, 15 * MIB)), "a fresh address of the same /24: {note}");
        let session = b.open_session("198.51.100.10", 60_000, 0);
        assert_eq!(b.relay(budget, session, 0, u64::from(2 * MIB), 0), RelayVerdict::Cut, "its relay finds no room either");
        // Another network: the other half, a quarter a client.
        let other: Vec<bool> = (0..6).map(|i| b.take(budget, &format!("203.0.113.{}", i / 2), limits, want, Holder::BodyRead, 0).hold.is_some()).collect();
        assert_eq!(other, [true, true, true, true, true, false], "five more: 30 MiB of 32 in all");
        // IPv6: two /64s of one /48 share its half.
        let mut v6 = MemoryBudget::new();
        let six = (0..8).filter(|i| v6.take(budget, &format!("2001:db8:1:{i}::/64"), limits, want, Holder::BodyRead, 0).hold.is_some()).count();
        assert_eq!(six, 5);
        assert!(v6.take(budget, "2001:db8:2::/64", limits, want, Holder::BodyRead, 0).hold.is_some(), "another /48 is read");
    }

    /// A watched answer is charged to its client's share until it ends: read
    /// behind the client (the tee's charge) while that leaves as much room
    /// again, else batched with as much read-ahead as the room holds, down
    /// to none (a line says so); never more than the shares, and given
    /// back or lapsed.
    #[test]
    fn a_watched_answer_takes_what_the_room_holds_down_to_no_read_ahead() {
        let budget = 16 * MIB;
        let quarter = u64::from(budget / MEMORY_CLIENT_SHARES);
        let (tee, full) = (u64::from(MEMORY_PER_ANSWER_BEHIND), u64::from(ANSWER_AHEAD) * u64::from(MEMORY_PER_AHEAD_BYTE));
        let mut b = MemoryBudget::new();
        let first = b.watch(budget, "198.51.100.1", true, 60_000, 0);
        assert_eq!((first.behind, first.note.is_none()), (true, true), "a quarter of 16 MiB holds a tee's 2 MiB twice");
        assert_eq!(b.held("198.51.100.1", 0).1, tee);
        let second = b.watch(budget, "198.51.100.1", true, 60_000, 0);
        assert_eq!((second.behind, second.ahead), (false, ANSWER_AHEAD), "2 MiB left: no second tee, batched at the full read-ahead");
        let note = second.note.as_ref().map(LogEvent::line).unwrap_or_default();
        assert!(note.contains(r#""tollgate":"answer""#) && note.contains(r#""wanted":"behind""#) && note.contains(r#""read_ahead":65536"#), "{note}");
        // The rest of the quarter in batched answers, then none read ahead.
        let batched_left = (quarter - tee - full) / full;
        (0..batched_left).for_each(|_| assert_eq!(b.watch(budget, "198.51.100.1", true, 60_000, 0).ahead, ANSWER_AHEAD));
        let none = b.watch(budget, "198.51.100.1", true, 60_000, 0);
        assert_eq!((none.behind, none.ahead, none.hold), (false, 0, None), "no room: batched, no read-ahead, still watched");
        assert!(none.note.as_ref().map(LogEvent::line).unwrap_or_default().contains(r#""read_ahead":0"#));
        // Another client: its own quarter, batched at the full read-ahead.
        let batched = b.watch(budget, "203.0.113.1", false, 60_000, 0);
        assert_eq!((batched.behind, batched.ahead, batched.note.is_none()), (false, ANSWER_AHEAD, true));
        assert_eq!(b.held("203.0.113.1", 0).1, full);
        // Fill that client's quarter but about one answer's charge: the last gets half of what is left.
        let fill = (quarter - full - 100 * 1024) / full;
        (0..fill).for_each(|_| assert_eq!(b.watch(budget, "203.0.113.1", false, 60_000, 0).ahead, ANSWER_AHEAD));
        let left = quarter - b.held("203.0.113.1", 0).1;
        let partial = b.watch(budget, "203.0.113.1", false, 60_000, 0);
        assert_eq!(u64::from(partial.ahead), left / 2, "half the room: the gathering batch and the one in flight");
        assert!(b.held("203.0.113.1", 0).1 <= quarter, "never past the quarter");
        // Ended: given back; never ended: lapsed with its slot.
        assert_eq!(b.held("198.51.100.1", 0).1, quarter);
        b.give_back(first.hold.unwrap_or_default());
        assert_eq!(b.held("198.51.100.1", 0).1, quarter - tee, "the tee's 2 MiB back");
        assert!(!b.watch(budget, "198.51.100.1", true, 60_000, 0).behind, "2 MiB of room: batched");
        let later = 60_000 + HOLD_GRACE_MS;
        assert_eq!(b.held("x", later).0, 0, "lapsed");
        assert!(b.watch(budget, "198.51.100.1", true, 60_000, later).behind, "the room back: a tee again");
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
