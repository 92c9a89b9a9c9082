//! The edge side of the native harness: one isolate, the core's
//! [`Isolate`], driven on simulated time as the Worker's glue drives it
//! (`glue::drive::decide`, `glue::objects::check`, `apply_settled`,
//! `refunds`): the decision machine asked, each rule's count run as the
//! core's [`CounterRun`], settling and refunds told to the isolate. No
//! decision is taken here: this is transport, as `glue/objects.rs` is.
//!
//! **All of the harness's coupling to the edge lives here**:
//! the pair and its tests know only [`Edge::decide`], [`Edge::settled`]
//! and [`Edge::held`].

use crate::config::Config;
use crate::count::protocol::{Call, CallFailure, Op, Reply};
use crate::pipeline::applied::Applied;
use crate::pipeline::isolate::{CounterRun, Isolate, ObjectCall};
use crate::pipeline::machine::{Decision, Machine, Next, SettleEffects};
use crate::pipeline::upload::Receipt;
use crate::pipeline::verdict::{LogEvent, Outcome};
use crate::testing::Req;

/// Sends one call to the object named by the first argument: the harness's
/// transport (the wire form, in memory).
pub type Send<'a> = dyn FnMut(&str, &Call) -> Result<Reply, CallFailure> + 'a;

/// One isolate: what the Worker keeps between requests.
pub struct Edge {
    isolate: Isolate,
}

impl Edge {
    /// A fresh isolate (a cold start, or one restarted: nothing held),
    /// configured as the glue configures it.
    pub fn new(config: &Config) -> Edge {
        let mut isolate = Isolate::new();
        isolate.configure(config, 0);
        Edge { isolate }
    }

    /// Tokens this isolate holds for the object `id` at `now_ms`.
    pub fn held(&self, id: &str, now_ms: i64) -> u32 {
        self.isolate.leases.held(id, now_ms)
    }

    /// The machine's decision of `req` (at `req.now_ms`), each count run
    /// as the core's [`CounterRun`], the plan kept for a blocked client; then
    /// the lease refunds due. The counters' log lines join the decision's.
    pub fn decide(&mut self, config: &'static Config, req: &Req, send: &mut Send<'_>) -> Decision<'static> {
        let now = req.now_ms;
        let headers = req.header_map();
        let facts = req.facts(&headers);
        let mut machine = Machine::new(config, facts, &self.isolate.memo, None);
        let mut logs = Vec::new();
        let mut decision = loop {
            match machine.next(Some(&self.isolate.blocked)) {
                Next::Body { .. } => machine.body(&crate::pipeline::upload::BodyRead::Read(req.body.clone().unwrap_or_default())),
                Next::Upload(_) => machine.uploaded(Receipt::Complete, now),
                Next::Admin => panic!("the pair drives no admin request"),
                Next::Count(checks) => {
                    let outcomes = checks.iter().map(|(applied, op)| self.check(applied, *op, now, send, &mut logs)).collect();
                    break machine.counted(outcomes);
                }
                Next::Decided => break machine.decided(),
            }
        };
        decision.logs.extend(logs);
        self.isolate.keep(&mut decision);
        if decision.checked {
            for refund in self.isolate.refunds(config, now) {
                let _ = send(&refund.id, &refund.call);
            }
        }
        decision
    }

    /// One rule's count (`glue::objects::check`): the [`CounterRun`] driven
    /// to its outcome, its calls sent at once, its waits slept on the
    /// request's own clock (the pair's clock stands still meanwhile; calls
    /// answer at once, so a wait ends at the next look).
    fn check(&mut self, applied: &Applied<'_>, op: Op, now: i64, send: &mut Send<'_>, logs: &mut Vec<LogEvent>) -> Outcome {
        let mut counter = CounterRun::new(applied, op);
        let outcome = counter.run(&mut self.isolate, now, |ObjectCall { id, call, .. }, _| send(id, call));
        logs.append(&mut counter.logs);
        outcome
    }

    /// Applies what settling decided at `now` (`glue::objects::apply_settled`):
    /// the isolate told ([`Isolate::settled`]: holds, stale blocks), every
    /// call sent. The calls' replies, in order.
    pub fn settled(&mut self, settled: SettleEffects, now: i64, send: &mut Send<'_>) -> Vec<Result<Reply, CallFailure>> {
        self.isolate.settled(&settled, now);
        settled.calls.iter().map(|s| send(&s.id, &s.call)).collect()
    }
}
