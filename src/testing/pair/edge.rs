//! The edge side of the native harness: one isolate's state and the steps
//! the Worker's glue takes around the decision machine, on simulated time.
//!
//! **All of the harness's coupling to the edge lives here** (issue 36):
//! the pair and its tests know only [`Edge::decide`], [`Edge::settled`]
//! and [`Edge::refunds`]. Today the isolate's decisions around a count
//! (the account's ban probe, the blocked-until cache, the lease book, the
//! holds' `Retry-After`) are made in `glue/objects.rs` (`check`, `leased`,
//! `ask`, `apply_settled`, `refunds`), which builds for `wasm32` only; this
//! adapter takes the same steps with the same pure parts, in the same
//! order. Once the core's `Isolate` makes them, this file calls it instead
//! and the tests stay as they are.

use crate::config::Config;
use crate::count::blocked::{BlockedUntilCache, Refusal};
use crate::count::hold::{self, Holds};
use crate::count::lease::{self, Admit, LeaseSettings, Leases};
use crate::count::protocol::{Call, CallFailure, Op, Reply};
use crate::pipeline::applied::{object_name, Applied};
use crate::pipeline::machine::{Decision, Machine, Next, Settled};
use crate::pipeline::memo::PlanMemo;
use crate::pipeline::upload::Receipt;
use crate::pipeline::verdict::{Failure, Outcome};
use crate::testing::Req;

/// Sends one call to the object named by the first argument: the harness's
/// transport (the wire form, in memory).
pub type Send<'a> = dyn FnMut(&str, &Call) -> Result<Reply, CallFailure> + 'a;

/// One isolate: what the Worker keeps between requests.
pub struct Edge {
    cache: BlockedUntilCache,
    leases: Leases,
    holds: Holds,
    memo: PlanMemo,
}

impl Edge {
    /// A fresh isolate (a cold start, or one restarted: nothing held).
    pub fn new(config: &Config) -> Edge {
        Edge {
            cache: BlockedUntilCache::new(config.blocked_cache_capacity),
            leases: Leases::new(lease::DEFAULT_CAPACITY),
            holds: Holds::default(),
            memo: PlanMemo::new(64),
        }
    }

    /// Tokens this isolate holds for the object `id` at `now_ms`.
    pub fn held(&self, id: &str, now_ms: i64) -> u32 {
        self.leases.held(id, now_ms)
    }

    /// The machine's decision of `req` (at `req.now_ms`), each count asked
    /// as the glue asks it (`glue::drive::decide`, `glue::objects::check`),
    /// the plan kept for a blocked client; then the lease refunds due.
    pub fn decide(&mut self, config: &'static Config, req: &Req, send: &mut Send<'_>) -> Decision<'static> {
        let now = req.now_ms;
        let headers = req.header_map();
        let facts = req.facts(&headers);
        let mut machine = Machine::new(config, facts, &self.memo);
        let mut decision = loop {
            match machine.next(Some(&self.cache)) {
                Next::Body { .. } => machine.body(Some(req.body.as_deref().unwrap_or_default())),
                Next::Upload(_) => machine.uploaded(Receipt::Complete, now),
                Next::Admin { .. } => panic!("the pair drives no admin request"),
                Next::Count(checks) => {
                    let outcomes = checks.iter().map(|(applied, op)| self.check(applied, *op, now, send)).collect();
                    break machine.counted(outcomes);
                }
                Next::Decided => break machine.decided(),
            }
        };
        if let Some(kept) = decision.kept.take() {
            self.memo.keep(kept.fingerprint, kept.reads, kept.applied);
        }
        if decision.checked {
            self.refunds(config, now, send);
        }
        decision
    }

    /// One rule's count (`glue::objects::check`): the account's ban for a
    /// trusted device, the cache, a lease, or one call.
    fn check(&mut self, applied: &Applied<'_>, op: Op, now: i64, send: &mut Send<'_>) -> Outcome {
        if applied.device.is_some() {
            let call = applied.rule.call_for(Op::Probe, &applied.key);
            match send(&object_name(applied.rule, &applied.key), &call) {
                Ok(reply) if reply.tally.allowed => {}
                Ok(reply) => return Outcome::from_reply(reply),
                Err(e) => return Outcome::Failed(Failure::Call(e)),
            }
        }
        if let Some(block) = self.cache.blocked_until(&applied.id, now) {
            return Outcome::from_cache(block, now);
        }
        if let (Op::Hit, Some(settings)) = (op, applied.rule.lease.settings().filter(|s| s.can_lease())) {
            return self.leased(applied, *settings, now, send);
        }
        let call = applied.rule.call_for(op, &applied.key);
        let (outcome, cacheable) = match send(&applied.id, &call) {
            Ok(reply) => {
                let cacheable = !reply.tally.in_flight;
                let mut outcome = Outcome::from_reply(reply);
                if let (Outcome::Blocked { retry_after_ms, by, .. }, false) = (&mut outcome, cacheable) {
                    let longest = self.holds.longest(&applied.rule.name);
                    *retry_after_ms = hold::in_flight_retry_ms(*retry_after_ms, longest, hold::unseen_wait_ms(*by, applied.rule.upload.timeout_ms));
                }
                (outcome, cacheable)
            }
            Err(e) => (Outcome::Failed(Failure::of(&call, e)), false),
        };
        if let Some(block) = outcome.block_to_cache(!cacheable, now) {
            self.cache.insert(&applied.id, block, now);
        }
        outcome
    }

    /// A leased rule (`glue::objects::leased` and `ask`): the lease book
    /// admits from tokens held, or asks. Calls complete before the next
    /// request here, so none waits on a call in flight.
    fn leased(&mut self, applied: &Applied<'_>, settings: LeaseSettings, now: i64, send: &mut Send<'_>) -> Outcome {
        let cost = applied.rule.cost;
        let want = match self.leases.admit(&applied.id, &settings, cost, now, true) {
            Admit::Local { windows } => return Outcome::Allowed { windows, reservation: None },
            Admit::Unavailable => return Outcome::Failed(Failure::BackingOff),
            Admit::Scarce { retry_after_ms, windows } => {
                return Outcome::Blocked { retry_after_ms, window: 0, windows: Some(windows), by: Refusal::Limit }
            }
            Admit::Wait => return Outcome::Failed("waited on a call in flight".into()),
            Admit::Ask { want } => want,
        };
        let hit = applied.rule.call_for(Op::Hit, &applied.key);
        let call = if want > cost { Call { op: Op::Lease, want: Some(want), hold_ms: Some(settings.ttl_ms), ..hit } } else { hit };
        match send(&applied.id, &call) {
            Ok(reply) => {
                let granted = reply.granted.unwrap_or(if reply.tally.allowed { u64::from(cost) } else { 0 });
                self.leases.granted(&applied.id, &settings, now, cost, granted, reply.reservation, &reply.tally.windows);
                let in_flight = reply.tally.in_flight;
                let mut outcome = Outcome::from_reply(reply);
                if let Outcome::Allowed { windows, .. } = &mut outcome {
                    let held = u32::try_from(granted.saturating_sub(u64::from(cost))).unwrap_or(u32::MAX);
                    *windows = lease::with_held(windows, held);
                }
                if let Some(block) = outcome.block_to_cache(in_flight, now) {
                    self.cache.insert(&applied.id, block, now);
                }
                outcome
            }
            Err(e) => {
                self.leases.failed(&applied.id, now);
                Outcome::Failed(Failure::of(&call, e))
            }
        }
    }

    /// Applies what settling decided at `now` (`glue::objects::apply_settled`):
    /// the holds recorded, stale cached blocks dropped, every call sent.
    pub fn settled(&mut self, settled: Settled, now: i64, send: &mut Send<'_>) -> Vec<Result<Reply, CallFailure>> {
        for (rule, reserved_at) in &settled.holds {
            self.holds.record(rule, *reserved_at, now);
        }
        for id in &settled.forget {
            self.cache.remove(id);
        }
        settled.calls.iter().map(|s| send(&s.id, &s.call)).collect()
    }

    /// Gives back the unspent tokens of expired leases due at `now`
    /// (`glue::objects::refunds`).
    pub fn refunds(&mut self, config: &Config, now: i64, send: &mut Send<'_>) {
        for refund in self.leases.due_refunds(now, lease::DEFAULT_LEASE_TTL_MS) {
            let Some((rule_name, key)) = refund.id.split_once('\n') else { continue };
            let Some(rule) = config.rules.iter().find(|r| r.name == rule_name) else { continue };
            let call = Call {
                op: Op::Refund,
                cost: refund.units,
                reservation: Some(refund.lease_id),
                hold_ms: None,
                want: None,
                penalty_ms: None,
                ..rule.call_for(Op::Hit, key)
            };
            let _ = send(&refund.id, &call);
        }
    }
}
