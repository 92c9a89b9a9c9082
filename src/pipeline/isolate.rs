//! The isolate: what one Worker isolate keeps between requests, as one
//! value, and every decision about it. Pure and sans-IO: the driver holds
//! one `Isolate` (the glue: one thread-local), lends it to each step, and
//! does the I/O the steps ask for.
//!
//! It owns the blocked-until cache ([`crate::count::blocked`]), the lease
//! book ([`crate::count::lease`]), the holds ([`crate::count::hold`]), the
//! plan memo, the log episodes, the allowed totals, the upload budget and
//! the once-per-isolate flags.
//!
//! A rule's counter is asked through a [`CounterRun`], a step loop in the
//! manner of quinn-proto: the driver sends the object calls it asks for
//! ([`Step::Call`]) and hands each reply back with its typed failure, or
//! sleeps on a timer of its own ([`Step::Wait`]) and says so; the counter
//! decides the ban probe, the cache, the lease and the hold:
//!
//! ```text
//! CounterRun::new(applied, op).start(isolate, now)
//!   device       ─▶ Call(probe the account)  ─▶ replied: banned ─▶ Done(Blocked)
//!   cached block ─▶ Done(from the cache)
//!   leases       ─▶ tokens held ─▶ Done(Allowed) | in flight ─▶ Wait(5 ms) ─▶ waited ─▶ …
//!                   | back-off ─▶ Done(Failed) | Call(hit or lease) ─▶ replied ─▶ Done
//!   otherwise    ─▶ Call(op) ─▶ replied (an older object: Call(what it takes), …) ─▶ Done
//! ```

use crate::config::Config;
use crate::count::blocked::{BlockedUntilCache, Refusal, DEFAULT_CAPACITY};
use crate::count::blocked::Block;
use crate::count::hold::{self, Holds};
use crate::count::lease::{self, Admit, LeaseSettings, Leases};
use crate::count::older;
use crate::count::protocol::{Call, CallFailure, Op, Reply};
use crate::pipeline::applied::{object_name, Applied};
use crate::pipeline::episodes::{self, Episodes};
use crate::pipeline::machine::{Decision, SettleEffects};
use crate::pipeline::memo::{self, PlanMemo};
use crate::pipeline::metrics::{self, AllowedTotals, Point};
use crate::pipeline::upload::MemoryBudget;
use crate::pipeline::verdict::{self, Failure, LogEvent, Outcome};
use std::collections::VecDeque;

/// How long a request waiting on its key's call in flight sleeps before it
/// looks again. The wait is a timer of the driver's own: a request woken
/// from another request's handler would run (and do its I/O) in that
/// request's context, which workerd refuses ("Cannot perform I/O on behalf
/// of a different request").
pub(crate) const POLL_MS: u64 = 5;

/// A change to the isolate's blocked-until cache, made by an admin answer
/// (`crate::admin::flow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CacheEffect {
    /// A ban set: the key is refused here until then (Unix ms).
    Ban { id: String, until_ms: i64 },
    /// A control changed or the count reset: a cached block is stale.
    Forget(String),
}

/// What one isolate keeps between requests.
pub(crate) struct Isolate {
    /// Blocks the objects answered, kept to their end.
    pub(crate) blocked: BlockedUntilCache,
    /// The cache was sized to the config's capacity.
    sized: bool,
    pub(crate) leases: Leases,
    /// How long this isolate's reservations were held, per rule.
    pub(crate) holds: Holds,
    /// Blocked clients' plans, replayed for their repeats.
    pub(crate) memo: PlanMemo,
    /// One log line per block or counter-error episode of a (rule, key).
    pub(crate) episodes: Episodes,
    /// When the invalid config was last logged (Unix ms).
    pub(crate) config_error_logged: Option<i64>,
    /// The allowed decisions of `"limited"` rules not written yet.
    pub(crate) totals: AllowedTotals,
    /// The admin token's length was looked at (`admin_token_short`).
    admin_seen: bool,
    /// The memory held for request bodies: uploads received and bodies
    /// read for keys ([`crate::pipeline::upload`]).
    pub(crate) memory_budget: MemoryBudget,
}

impl Default for Isolate {
    fn default() -> Isolate {
        Isolate::new()
    }
}

impl Isolate {
    pub(crate) fn new() -> Isolate {
        Isolate {
            blocked: BlockedUntilCache::new(DEFAULT_CAPACITY),
            sized: false,
            leases: Leases::new(lease::DEFAULT_CAPACITY),
            holds: Holds::default(),
            memo: PlanMemo::new(memo::DEFAULT_CAPACITY),
            episodes: Episodes::new(episodes::DEFAULT_CAPACITY, episodes::PERIOD_MS),
            config_error_logged: None,
            totals: AllowedTotals::default(),
            admin_seen: false,
            memory_budget: MemoryBudget::new(),
        }
    }

    /// The config was read: its log episode period, and (once) its cache
    /// capacity.
    pub(crate) fn configure(&mut self, config: &Config, now_ms: i64) {
        self.episodes.set_period(config.log_episode_ms);
        self.size(config.blocked_cache_capacity, now_ms);
    }

    /// Sizes the blocked-until cache to `capacity`, once per isolate.
    pub(crate) fn size(&mut self, capacity: usize, now_ms: i64) {
        if !std::mem::replace(&mut self.sized, true) {
            self.blocked.set_capacity(capacity, now_ms);
        }
    }

    /// Whether this is the isolate's first admin request (then the driver
    /// logs a short admin token, [`crate::admin::api::short_token_event`]).
    pub(crate) fn first_admin(&mut self) -> bool {
        !std::mem::replace(&mut self.admin_seen, true)
    }

    /// Applies what settling decided to the isolate: each settled
    /// reservation's hold recorded, the cached blocks a relief made stale
    /// dropped. The calls are the driver's to send.
    pub(crate) fn settled(&mut self, settled: &SettleEffects, now_ms: i64) {
        for (rule, reserved_at) in &settled.holds {
            self.holds.record(rule, *reserved_at, now_ms);
        }
        for id in &settled.forget {
            self.blocked.remove(id);
        }
    }

    /// Applies an admin answer's cache effect: a ban is cached here at once
    /// (other isolates see it at their next call to the object, or once
    /// their cached block ends); a changed key's cached block is dropped.
    pub(crate) fn cache_effect(&mut self, effect: &CacheEffect, now_ms: i64) {
        match effect {
            CacheEffect::Ban { id, until_ms } if *until_ms > now_ms => {
                let block = Block { until_ms: *until_ms, window: 0, limits: Vec::new(), by: Refusal::Ban };
                self.blocked.insert(id, block, now_ms);
            }
            CacheEffect::Ban { .. } => {}
            CacheEffect::Forget(id) => self.blocked.remove(id),
        }
    }

    /// Keeps the decision's plan in the memo, if it made one to keep.
    pub(crate) fn keep(&mut self, decision: &mut Decision<'static>) {
        if let Some(kept) = decision.kept.take() {
            self.memo.keep(kept.fingerprint, kept.reads, kept.applied);
        }
    }

    /// Counts `decision`'s allowed requests into the totals; the totals'
    /// points now due, at `place` (with each decision when they go to the
    /// local `sink`: [`metrics::totals_interval_ms`]).
    pub(crate) fn due_totals(&mut self, decision: &Decision<'_>, config: &Config, now_ms: i64, place: metrics::Place<'_>, sink: bool) -> Vec<Point> {
        decision.count_allowed(&mut self.totals, now_ms);
        self.totals.due(now_ms, metrics::totals_interval_ms(config.metrics_interval_ms, sink), place)
    }

    /// The refunds due now: the unspent tokens of the leases that expired
    /// (lazily: when the isolate next runs), one `refund` call each. A
    /// refund that fails is not retried: its tokens lapse with their window.
    pub(crate) fn refunds(&mut self, config: &Config, now_ms: i64) -> Vec<ObjectCall> {
        let due = self.leases.due_refunds(now_ms, lease::DEFAULT_LEASE_TTL_MS);
        due.into_iter()
            .filter_map(|refund| {
                let (rule_name, key) = refund.id.split_once('\n')?;
                let rule = config.rules.iter().find(|r| r.name == rule_name)?;
                let call = rule
                    .call_for(Op::Hit, key)
                    .with_op(Op::Refund)
                    .with_cost(refund.units)
                    .with_reservation(refund.lease_id)
                    .with_hold_ms(None)
                    .with_want(None)
                    .with_penalty_ms(None);
                Some(ObjectCall { id: refund.id, call, timeout_ms: rule.timeout_ms })
            })
            .collect()
    }
}

/// One call to the object named `id`, within `timeout_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectCall {
    pub(crate) id: String,
    pub(crate) call: Call,
    pub(crate) timeout_ms: u32,
}

/// What a [`CounterRun`] needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send this call, then [`CounterRun::replied`] with its result.
    Call(ObjectCall),
    /// Sleep `ms` on a timer of the driver's own, then [`CounterRun::waited`].
    Wait { ms: u64 },
    /// The rule's outcome.
    Done(Outcome),
}

/// One call that an object of the release before may refuse for a field
/// it does not know ([`older`]): then the calls it takes instead
/// are sent, in order, and the refusal is logged (`counter_error`, decision
/// `older_form`). Bounded: each refusal drops one of the three newer
/// fields, so at most five calls.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    /// The call as first sent (its failure is told by it, [`Failure::of`]),
    /// once another has replaced it; `None`: `current` is the first.
    first: Option<Call>,
    current: Call,
    queue: VecDeque<Call>,
    sent: u8,
}

impl Exchange {
    pub(crate) fn new(call: Call) -> Exchange {
        Exchange { first: None, current: call, queue: VecDeque::new(), sent: 1 }
    }

    /// The call to send now.
    pub(crate) fn call(&self) -> &Call {
        &self.current
    }

    /// The call as first sent.
    pub(crate) fn first(&self) -> &Call {
        self.first.as_ref().unwrap_or(&self.current)
    }

    /// The result of [`Exchange::call`]: `Some` (the last call's result, or
    /// the first failure) when the exchange is over; `None` when another
    /// call is to be sent. `who` (the rule, the key hash) names the
    /// `older_form` line pushed to `logs`.
    pub(crate) fn answered(&mut self, result: Result<Reply, CallFailure>, who: (&str, &str), logs: &mut Vec<LogEvent>) -> Option<Result<Reply, CallFailure>> {
        if let Err(failure) = &result {
            let field = older::refused_field(&self.current, failure);
            let Some(calls) = field.and_then(|field| older::instead(&self.current, field)) else { return Some(result) };
            logs.push(verdict::counter_error(who.0, who.1, &Failure::Call(failure.clone()), "older_form"));
            for c in calls.into_iter().rev() {
                self.queue.push_front(c);
            }
        }
        match self.queue.pop_front() {
            Some(next) if self.sent < 5 => {
                let sent = std::mem::replace(&mut self.current, next);
                self.first.get_or_insert(sent);
                self.sent += 1;
                None
            }
            _ => Some(result),
        }
    }
}

/// Where a [`CounterRun`] is.
#[derive(Debug)]
enum Stage {
    Start,
    /// The account's ban is being probed (a trusted device).
    Probe,
    /// The rule's own call, sent at `at`.
    Direct { exchange: Exchange, at: i64 },
    /// Leasing: spending tokens held, or waiting on the key's call in flight.
    Poll { settings: LeaseSettings, waits: u64 },
    /// The key's one call in flight: a `hit`, or a `lease`, sent at `sent_at`.
    Ask { settings: LeaseSettings, exchange: Exchange, sent_at: i64 },
    Done,
}

/// One rule's counter, asked with `op` ([`verdict::check_op`] or the
/// admin lockout's): the cache, the ban probe, the lease and the hold are
/// decided here; the driver only sends and sleeps.
#[derive(Debug)]
pub(crate) struct CounterRun<'a, 'c> {
    applied: &'a Applied<'c>,
    op: Op,
    stage: Stage,
    /// Log lines the calls made (an older object's refusal): the driver
    /// writes them.
    pub(crate) logs: Vec<LogEvent>,
}

impl<'a, 'c> CounterRun<'a, 'c> {
    pub(crate) fn new(applied: &'a Applied<'c>, op: Op) -> CounterRun<'a, 'c> {
        CounterRun { applied, op, stage: Stage::Start, logs: Vec::new() }
    }

    /// The first step. A trusted device counts in a bucket of its own, but
    /// a ban of its account covers it: the account's object is
    /// probed first (nothing recorded, never cached).
    pub(crate) fn start(&mut self, isolate: &mut Isolate, now_ms: i64) -> Step {
        if self.applied.device.is_some() {
            self.stage = Stage::Probe;
            let (rule, key) = (self.applied.rule, &self.applied.key);
            return Step::Call(ObjectCall { id: object_name(rule, key), call: rule.call_for(Op::Probe, key), timeout_ms: rule.timeout_ms });
        }
        self.checked(isolate, now_ms)
    }

    /// After the probe: the blocked-until cache, then a lease or the call.
    fn checked(&mut self, isolate: &mut Isolate, now_ms: i64) -> Step {
        let a = self.applied;
        if let Some(block) = isolate.blocked.blocked_until(&a.id, now_ms) {
            return self.done(Outcome::from_cache(block, now_ms));
        }
        if let (Op::Hit, Some(settings)) = (self.op, a.rule.lease.settings().filter(|s| s.can_lease())) {
            self.stage = Stage::Poll { settings: *settings, waits: 0 };
            return self.poll(isolate, now_ms);
        }
        let exchange = Exchange::new(a.rule.call_for(self.op, &a.key));
        let step = self.send(&exchange);
        self.stage = Stage::Direct { exchange, at: now_ms };
        step
    }

    fn send(&self, exchange: &Exchange) -> Step {
        Step::Call(ObjectCall { id: self.applied.id.clone(), call: exchange.call().clone(), timeout_ms: self.applied.rule.timeout_ms })
    }

    fn done(&mut self, outcome: Outcome) -> Step {
        self.stage = Stage::Done;
        Step::Done(outcome)
    }

    /// The driver slept as [`Step::Wait`] asked.
    pub(crate) fn waited(&mut self, isolate: &mut Isolate, now_ms: i64) -> Step {
        self.poll(isolate, now_ms)
    }

    /// A leased rule: the lease book decides ([`Leases::admit`]). A call in
    /// flight ends within the rule's timeout; waiting twice that long is a
    /// safety net, after which the request asks on its own.
    fn poll(&mut self, isolate: &mut Isolate, now_ms: i64) -> Step {
        let Stage::Poll { settings, waits } = self.stage else { return self.done(Outcome::Failed(Failure::BackingOff)) };
        let a = self.applied;
        if waits > 0 {
            if let Some(block) = isolate.blocked.blocked_until(&a.id, now_ms) {
                return self.done(Outcome::from_cache(block, now_ms));
            }
        }
        let cost = a.rule.cost;
        let max_waits = (2 * u64::from(a.rule.timeout_ms)).div_ceil(POLL_MS).max(1);
        let admit = if waits >= max_waits { Admit::Ask { want: cost } } else { isolate.leases.admit(&a.id, &settings, cost, now_ms, waits == 0) };
        match admit {
            Admit::Local { windows } => self.done(Outcome::Allowed { windows, reservation: None }),
            Admit::Unavailable => self.done(Outcome::Failed(Failure::BackingOff)),
            Admit::Scarce { retry_after_ms, windows } => {
                self.done(Outcome::Blocked { retry_after_ms, window: 0, windows: Some(windows), by: Refusal::Limit })
            }
            Admit::Wait => {
                self.stage = Stage::Poll { settings, waits: waits + 1 };
                Step::Wait { ms: POLL_MS }
            }
            Admit::Ask { want } => {
                let hit = a.rule.call_for(Op::Hit, &a.key);
                let call = if want > cost { hit.with_op(Op::Lease).with_want(want).with_hold_ms(settings.ttl_ms) } else { hit };
                let exchange = Exchange::new(call);
                let step = self.send(&exchange);
                self.stage = Stage::Ask { settings, exchange, sent_at: now_ms };
                step
            }
        }
    }

    /// The result of the call [`Step::Call`] asked for.
    pub(crate) fn replied(&mut self, isolate: &mut Isolate, result: Result<Reply, CallFailure>, now_ms: i64) -> Step {
        let who = (self.applied.rule.name.as_str(), self.applied.key_hash.as_str());
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Probe => match result {
                Ok(reply) if reply.tally.allowed => self.checked(isolate, now_ms),
                Ok(reply) => self.done(Outcome::from_reply(reply)),
                Err(e) => self.done(Outcome::Failed(Failure::Call(e))),
            },
            Stage::Direct { mut exchange, at } => match exchange.answered(result, who, &mut self.logs) {
                None => {
                    let step = self.send(&exchange);
                    self.stage = Stage::Direct { exchange, at };
                    step
                }
                Some(result) => {
                    let outcome = self.direct(isolate, exchange.first(), result, at);
                    self.done(outcome)
                }
            },
            Stage::Ask { settings, mut exchange, sent_at } => match exchange.answered(result, who, &mut self.logs) {
                None => {
                    let step = self.send(&exchange);
                    self.stage = Stage::Ask { settings, exchange, sent_at };
                    step
                }
                Some(result) => {
                    let outcome = self.asked(isolate, &settings, exchange.first(), result, sent_at, now_ms);
                    self.done(outcome)
                }
            },
            stage => {
                self.stage = stage;
                Step::Done(Outcome::Failed(Failure::Call(CallFailure::Transport("a reply no call asked for".into()))))
            }
        }
    }

    /// The rule's own call answered (asked at `at`). A block is cached
    /// (exact for the sliding log: a blocked request records nothing, so
    /// the object would answer "blocked" until then; shadow rules too),
    /// unless it is owed to slots in flight: it lifts as soon as one is
    /// released, and its wait is the rule's longest recent hold here.
    fn direct(&self, isolate: &mut Isolate, call: &Call, result: Result<Reply, CallFailure>, at: i64) -> Outcome {
        let a = self.applied;
        let (outcome, cacheable) = match result {
            Ok(reply) => {
                let cacheable = !reply.tally.in_flight;
                let mut outcome = Outcome::from_reply(reply);
                if let (Outcome::Blocked { retry_after_ms, by, .. }, false) = (&mut outcome, cacheable) {
                    let longest = isolate.holds.longest(&a.rule.name);
                    *retry_after_ms = hold::in_flight_retry_ms(*retry_after_ms, longest, hold::unseen_wait_ms(*by, a.rule.upload.timeout_ms));
                }
                (outcome, cacheable)
            }
            Err(e) => (Outcome::Failed(Failure::of(call, e)), false),
        };
        if let Some(block) = outcome.block_to_cache(!cacheable, at) {
            isolate.blocked.insert(&a.id, block, at);
        }
        outcome
    }

    /// The key's call in flight answered: the grant, less this request's
    /// cost, is held until `sent_at` + `lease_ttl`; a failure backs the key off.
    fn asked(&self, isolate: &mut Isolate, settings: &LeaseSettings, call: &Call, result: Result<Reply, CallFailure>, sent_at: i64, now_ms: i64) -> Outcome {
        let a = self.applied;
        let cost = a.rule.cost;
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => {
                isolate.leases.failed(&a.id, now_ms);
                return Outcome::Failed(Failure::of(call, e));
            }
        };
        let granted = reply.granted.unwrap_or(if reply.tally.allowed { u64::from(cost) } else { 0 });
        isolate.leases.granted(&a.id, settings, sent_at, cost, granted, reply.reservation, &reply.tally.windows);
        let in_flight = reply.tally.in_flight;
        let mut outcome = Outcome::from_reply(reply);
        if let Outcome::Allowed { windows, .. } = &mut outcome {
            // The rest of the grant is this isolate's: remaining to it.
            let held = u32::try_from(granted.saturating_sub(u64::from(cost))).unwrap_or(u32::MAX);
            *windows = lease::with_held(windows, held);
        }
        if let Some(block) = outcome.block_to_cache(in_flight, now_ms) {
            isolate.blocked.insert(&a.id, block, now_ms);
        }
        outcome
    }

    /// The driver dropped the counter before it was done (its request was
    /// cancelled): a key's call in flight is forgotten, so the next request
    /// asks again (with no back-off: nothing failed).
    pub(crate) fn cancelled(&mut self, isolate: &mut Isolate) {
        if let Stage::Ask { .. } = self.stage {
            isolate.leases.abandon(&self.applied.id);
        }
        self.stage = Stage::Done;
    }

    /// Drives the counter to its outcome from `now_ms` with calls that
    /// answer at once (`send(call, at)`: the native tools, `explain` and the
    /// test harness, whose objects are in memory): a wait advances the
    /// counter's own clock by its length. The Worker drives it instead
    /// through the network (`glue::objects::check`).
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    pub(crate) fn run(&mut self, isolate: &mut Isolate, now_ms: i64, mut send: impl FnMut(&ObjectCall, i64) -> Result<Reply, CallFailure>) -> Outcome {
        let mut at = now_ms;
        let mut step = self.start(isolate, at);
        loop {
            step = match step {
                Step::Call(call) => {
                    let result = send(&call, at);
                    self.replied(isolate, result, at)
                }
                Step::Wait { ms } => {
                    at = at.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
                    self.waited(isolate, at)
                }
                Step::Done(outcome) => return outcome,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::protocol::WireWindow;
    use crate::count::tally::Tally;
    use crate::pipeline::plan::Route;
    use crate::testing::{leaked, Req};
    use serde_json::json;

    fn applied_of(config: &'static Config, req: &Req) -> Vec<Applied<'static>> {
        match req.plan(config).route {
            Route::Check(applied) => applied,
            other => panic!("{other:?}"),
        }
    }

    fn reply(allowed: bool, retry_after_ms: u64, granted: Option<u64>, in_flight: bool) -> Reply {
        let window = WireWindow { limit: 100, window_ms: 60_000, used: 1, remaining: 99, reset_ms: 60_000, calendar: None };
        Reply {
            v: crate::count::protocol::VERSION,
            tally: Tally { allowed, retry_after_ms, binding: (!allowed).then_some(0), windows: vec![window], in_flight },
            alarm_pending: false,
            alarm_set: false,
            stored_hits: 0,
            rows_read: 0,
            rows_written: 0,
            reservation: granted.map(|_| 61_000),
            held: 0,
            granted,
            penalty_until_ms: None,
        }
    }

    fn call_of(step: &Step) -> &Call {
        match step {
            Step::Call(c) => &c.call,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_blocked_reply_is_cached_and_answers_the_next_request_without_a_call() {
        let c = leaked(json!([{ "name": "api", "path": "/api", "key": ["ip"], "lease": "off", "limits": [{ "requests": 10, "window": "1m" }] }]));
        let applied = applied_of(c, &Req::get("/api").ip("192.0.2.1"));
        let mut iso = Isolate::new();
        let mut first = CounterRun::new(&applied[0], Op::Hit);
        let step = first.start(&mut iso, 1_000);
        assert_eq!(call_of(&step).op, Op::Hit);
        let done = first.replied(&mut iso, Ok(reply(false, 30_000, None, false)), 1_005);
        assert!(matches!(done, Step::Done(Outcome::Blocked { retry_after_ms: 30_000, .. })), "{done:?}");
        let mut second = CounterRun::new(&applied[0], Op::Hit);
        let cached = second.start(&mut iso, 2_000);
        assert!(matches!(cached, Step::Done(Outcome::Blocked { retry_after_ms: 29_000, .. })), "{cached:?}");
        // A failure is typed, and never cached.
        let mut iso = Isolate::new();
        let mut failing = CounterRun::new(&applied[0], Op::Hit);
        failing.start(&mut iso, 1_000);
        let failed = failing.replied(&mut iso, Err(CallFailure::Timeout { ms: 300 }), 1_300);
        let Step::Done(Outcome::Failed(failure)) = failed else { panic!("{failed:?}") };
        assert_eq!(failure.kind(), "timeout");
        assert!(iso.blocked.peek(&applied[0].id, 1_300).is_none());
    }

    #[test]
    fn a_hot_key_has_one_call_in_flight_and_its_waiters_spend_the_grant() {
        let c = leaked(json!([{ "name": "api", "path": "/api", "key": ["ip"], "limits": [{ "requests": 10000, "window": "1m" }] }]));
        let applied = applied_of(c, &Req::get("/api").ip("192.0.2.1"));
        let a = &applied[0];
        let mut iso = Isolate::new();
        // Warm the rate estimate: a few plain hits answered at once.
        for t in 0..i64::from(lease::MIN_LEASE) - 1 {
            let mut warm = CounterRun::new(a, Op::Hit);
            let step = warm.start(&mut iso, t);
            assert_eq!(call_of(&step).op, Op::Hit, "low rate: a plain hit");
            warm.replied(&mut iso, Ok(reply(true, 0, None, false)), t);
        }
        let mut asking = CounterRun::new(a, Op::Hit);
        let step = asking.start(&mut iso, 10);
        let lease = call_of(&step).clone();
        assert_eq!(lease.op, Op::Lease, "the rate calls for a lease");
        let mut waiting = CounterRun::new(a, Op::Hit);
        assert_eq!(waiting.start(&mut iso, 11), Step::Wait { ms: POLL_MS }, "single flight: the next waits");
        let granted = lease.want.map(u64::from);
        let done = asking.replied(&mut iso, Ok(reply(true, 0, granted, false)), 20);
        assert!(matches!(done, Step::Done(Outcome::Allowed { .. })));
        let local = waiting.waited(&mut iso, 16);
        assert!(matches!(local, Step::Done(Outcome::Allowed { reservation: None, .. })), "spent from the grant: {local:?}");
        assert!(iso.leases.held(&a.id, 16) > 0);
        // A cancelled ask lets the next request ask again.
        let mut iso = Isolate::new();
        let mut gone = CounterRun::new(a, Op::Hit);
        gone.start(&mut iso, 0);
        gone.cancelled(&mut iso);
        let mut next = CounterRun::new(a, Op::Hit);
        assert!(matches!(next.start(&mut iso, 1), Step::Call(_)), "no call in flight any more");
    }

    #[test]
    fn a_refusal_owed_to_slots_in_flight_waits_the_longest_hold_and_is_not_cached() {
        let c = leaked(json!([{ "name": "jobs", "path": "/jobs", "key": ["ip"], "count_statuses": [500],
            "limits": [{ "requests": 10, "window": "1m" }], "concurrency": 2 }]));
        let applied = applied_of(c, &Req::get("/jobs").ip("192.0.2.1"));
        let mut iso = Isolate::new();
        iso.holds.record("jobs", 0, 4_000);
        let mut counter = CounterRun::new(&applied[0], Op::Reserve);
        assert_eq!(call_of(&counter.start(&mut iso, 10_000)).op, Op::Reserve);
        let mut refused = reply(false, 100_000, None, true);
        refused.tally.binding = None;
        let done = counter.replied(&mut iso, Ok(refused), 10_000);
        assert!(matches!(done, Step::Done(Outcome::Blocked { retry_after_ms: 4_000, by: Refusal::Concurrency, .. })), "{done:?}");
        assert!(iso.blocked.peek(&applied[0].id, 10_001).is_none(), "a block owed to slots in flight is not cached");
    }

    #[test]
    fn a_failure_names_its_kind_in_the_counter_error_line() {
        let line = |f: Failure| verdict::counter_error("r", "h", &f, "allow").line();
        assert!(line(Failure::Call(CallFailure::Timeout { ms: 300 })).contains(r#""failure":"timeout""#));
        assert!(line(Failure::Call(CallFailure::Transport("gone".into()))).contains(r#""failure":"unreachable""#));
        let refused = line(Failure::Call(CallFailure::Refused { status: 500, body: "corrupt".into() }));
        assert!(refused.contains(r#""failure":"refused""#) && refused.contains(r#""error":"limiter answered 500: corrupt""#), "{refused}");
        assert!(line(Failure::BackingOff).contains(r#""failure":"backoff""#));
        assert!(Failure::NoSlot(CallFailure::Timeout { ms: 1 }).cannot_hold_slot());
    }

    #[test]
    fn settling_records_holds_and_drops_stale_blocks() {
        let mut iso = Isolate::new();
        iso.blocked.insert("r\nk", Block { until_ms: 9_000, window: 0, limits: Vec::new(), by: Refusal::Limit }, 0);
        let settled = SettleEffects { forget: vec!["r\nk".into()], holds: vec![("r".into(), 1_000)], ..SettleEffects::default() };
        iso.settled(&settled, 3_000);
        assert!(iso.blocked.peek("r\nk", 1).is_none());
        assert_eq!(iso.holds.longest("r"), Some(2_000));
        iso.cache_effect(&CacheEffect::Ban { id: "r\nb".into(), until_ms: 5_000 }, 4_000);
        assert_eq!(iso.blocked.peek("r\nb", 4_500).map(|b| b.by), Some(Refusal::Ban));
        assert!(iso.first_admin() && !iso.first_admin(), "once per isolate");
    }
}
