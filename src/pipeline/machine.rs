//! The decision machine: one request's whole handling, pure and sans-IO
//! (as quinn-proto and rustls drive their protocols). A driver (the Worker,
//! the embedded/RPC check, `tollgate explain`) only reads, calls and
//! applies; every choice is made here:
//!
//! ```text
//! entry(config, memo, url, plane) NotHere ─▶ tollgate's 404 (plane.rs: the other Worker's)
//!                                 Pass ─▶ Decision::pass(): forward, nothing read
//!                                 Plan, with the zone's walk of the URL
//! Machine::new(config, facts, memo, walked)          (the plan, or a kept plan replayed)
//! loop machine.next(cache):
//!   Next::Body { limit, .. } ─▶ read the body (a clone, capped, within the memory budget) ─▶ machine.body(..)
//!   Next::Upload(limits)     ─▶ receive the upload ─▶ machine.uploaded(receipt, started)
//!   Next::Admin              ─▶ the admin flow ([`crate::admin::api`])
//!   Next::Count(checks)      ─▶ ask each counter ─▶ machine.counted(outcomes) ─▶ Decision
//!   Next::Decided            ─▶ machine.decided() ─▶ Decision
//! Decision: the answer, log lines, metric points, the memo entry, refunds due,
//!           and the [`Settle`] step for after the answer
//! settle.after(answer of the origin or app) ─▶ SettleEffects: calls, cookies, cache and hold updates
//! ```

use crate::config::response::Prefers;
use crate::config::headers::OwnResponse;
use crate::config::policy::{FailPolicy, Named};
use crate::config::Config;
use crate::count::blocked::BlockedUntilCache;
use crate::count::protocol::{Call, Op};
use crate::pipeline::facts::{Facts, HeaderMap, Secrets};
use crate::pipeline::memo::{self, Fingerprint, PlanMemo, Reads};
use crate::pipeline::metrics::{self, Point};
use crate::pipeline::applied::Applied;
use crate::pipeline::plane::{self, Door, Plane, Walked};
use crate::pipeline::plan::{self, Body, Plan, RequestParts, Route};
use crate::pipeline::upload::{self, Charged, Receipt, UploadLimits};
use crate::pipeline::upgrade;
use crate::pipeline::verdict::{self, Answer, Answered, LogEvent, Outcome};

/// What the Worker on `plane` does with a request to `url` before reading
/// anything else ([`plane::walk`]): answer it 404 (the other Worker's),
/// plan it, or (the zone's fast path, [`Door::Pass`]) forward it as
/// [`Decision::pass`] says, with nothing else read (no `cf`, header,
/// secret or clock): a zone-wide route sends every request of the zone. A
/// URL a kept plan was made for is planned without walking it again (the
/// zone keeps plans only of the requests it counts). With [`Door::Plan`], the
/// zone's walk of the URL, if it made one: hand it to [`Machine::new`]
/// with the same `config` and `url`, where the plan starts from it.
pub(crate) fn entry<'c, 'u>(config: &'c Config, memo: &PlanMemo, url: &'u str, plane: Plane) -> (Door, Option<Walked<'c, 'u>>) {
    if plane == Plane::Zone && memo.holds_url(url) {
        return (Door::Plan, None);
    }
    plane::walk(config, url, plane, &|host, path| plan::rules_take(config, host, path))
}

/// One request on its way through the pipeline.
pub(crate) struct Machine<'c, 'f> {
    config: &'c Config,
    facts: Facts<'f>,
    /// The headers the plan read, for the memo.
    reads: Reads,
    /// The fingerprint of a plan made here with the body unread: the only
    /// kind the memo may keep (`None`: replayed, read the body, or the
    /// config reads the clock).
    fresh: Option<Fingerprint>,
    plan: Plan<'c>,
    /// The upload was received (or needs no receiving).
    received: bool,
    upload_deadline: Option<i64>,
    /// The upload's own answer (408, 400), when it has one.
    refused: Option<(Answer, LogEvent)>,
    /// The `block` rules the isolate's blocked-until cache refused already
    /// (index into the checked rules, and the outcome), when one did: the
    /// request is refused asking no counter, so no other rule is charged
    /// for it ([`cached_refusals`]).
    known: Option<Vec<(usize, Outcome)>>,
}

/// What the driver does next.
#[derive(Debug)]
pub(crate) enum Next<'m, 'c> {
    /// Read the body from a clone, at most `limit` bytes, within the
    /// isolate's memory budget and `timeout_ms` ([`crate::pipeline::upload`]),
    /// then [`Machine::body`].
    Body { limit: u32, timeout_ms: u32 },
    /// Receive the body under these limits before anything is reserved,
    /// then [`Machine::uploaded`] ([`crate::pipeline::upload`]).
    Upload(UploadLimits),
    /// An admin request ([`Route::Admin`]): never forwarded. The admin
    /// plane plans and serves it ([`Machine::admin`]), or refuses it
    /// before serving ([`Machine::admin_refused`]).
    Admin,
    /// Ask each rule's counter with its op, concurrently, then
    /// [`Machine::counted`] with the outcomes, index for index.
    Count(Vec<(&'m Applied<'c>, Op)>),
    /// Decided without a counter: [`Machine::decided`].
    Decided,
}

impl<'c, 'f> Machine<'c, 'f> {
    /// Plans the request, or replays the plan the memo kept for a request
    /// with the same fingerprint and header values. `walked`: what
    /// [`entry`] found of `facts.url` with `config` (`None`: the plan walks
    /// the URL itself; a walk of another config or URL string is not used).
    pub(crate) fn new(config: &'c Config, facts: Facts<'f>, memo: &PlanMemo, walked: Option<Walked<'_, '_>>) -> Machine<'c, 'f> {
        let client = facts.client;
        let fingerprint = (!config.facts.reads_clock).then(|| {
            Fingerprint::new(facts.method, facts.url, client.country.as_deref(), client.asn, client.verified_bot.as_deref())
        });
        let header = |name: &str| facts.headers.get_str(name);
        let replayed = fingerprint.as_ref().and_then(|fp| memo.replay(fp, &header));
        let mut machine = Machine {
            config,
            facts,
            reads: Reads::default(),
            fresh: None,
            plan: Plan { canonical: None, matched: Vec::new(), route: Route::NeedsBody },
            received: false,
            upload_deadline: None,
            refused: None,
            known: None,
        };
        match replayed {
            Some(plan) => machine.plan = plan,
            None => {
                machine.plan = machine.plan_with(Body::Unread, walked);
                machine.fresh = fingerprint;
            }
        }
        machine
    }

    fn plan_with(&self, body: Body<'_>, walked: Option<Walked<'_, '_>>) -> Plan<'c> {
        let headers = self.facts.headers;
        let recording = |name: &str| self.reads.read(&|n: &str| headers.get(n), name);
        plan_facts(self.config, &self.facts, &recording, body, walked)
    }

    /// What the driver does next. `cache`: the isolate's blocked-until
    /// cache, read only: a request it already refuses (a `block` rule's
    /// block lasting past the request's `now`) is decided from it, no
    /// counter asked and no upload waited for ([`cached_refusals`]).
    pub(crate) fn next(&mut self, cache: Option<&BlockedUntilCache>) -> Next<'_, 'c> {
        if let (Route::Check(applied), Some(cache), None) = (&self.plan.route, cache, &self.refused) {
            self.known = cached_refusals(cache, applied, self.facts.now_ms);
        }
        match &self.plan.route {
            Route::NeedsBody => Next::Body { limit: self.config.body_limit, timeout_ms: self.config.body_timeout_ms },
            Route::Admin => Next::Admin,
            Route::Check(applied) if !applied.is_empty() && self.refused.is_none() && self.known.is_none() => {
                if upgrade::refusing(applied, self.facts.headers).is_some() {
                    return Next::Decided;
                }
                match upload::limits_for(applied) {
                    Some(limits) if !self.received => Next::Upload(limits),
                    _ => Next::Count(applied.iter().map(|a| (a, verdict::check_op(a.rule))).collect()),
                }
            }
            _ => Next::Decided,
        }
    }

    /// The body, read after [`Next::Body`]: planned again with it
    /// (unusable: as a body over the cap). A body still arriving at
    /// `body_timeout` is answered 408, nothing counted. A plan that read
    /// the body is never kept.
    pub(crate) fn body(&mut self, read: &upload::BodyRead) {
        self.fresh = None;
        let body = match read {
            upload::BodyRead::Read(bytes) => Body::Read(bytes),
            upload::BodyRead::Unusable => Body::Unusable,
            upload::BodyRead::Stalled => {
                let (response, event) = upload::body_too_slow(self.config.body_timeout_ms);
                self.refused = Some((Answer::Respond(response), event));
                Body::Unusable
            }
        };
        self.plan = self.plan_with(body, None);
    }

    /// What the admin plane makes of this request ([`Next::Admin`]):
    /// `plan` given its parts, with `body` as read so far (headers read as
    /// sent: an admin plan is never kept in the memo).
    pub(crate) fn admin<T>(&self, body: Body<'_>, plan: impl FnOnce(&RequestParts<'_>) -> T) -> T {
        let headers = self.facts.headers;
        with_parts(&self.facts, &|name: &str| headers.get(name), body, plan)
    }

    /// An admin request the admin plane refused before serving it (its
    /// lockout's key missing, [`Route::MissingKey`]): decided as if planned
    /// so.
    pub(crate) fn admin_refused(&mut self, route: Route<'c>) {
        self.fresh = None;
        self.plan.route = route;
    }

    /// How the upload went after [`Next::Upload`], begun at `started_ms`:
    /// go on and count (with the deadline of a body over the buffer), or
    /// answer at once (408, 400), nothing reserved.
    pub(crate) fn uploaded(&mut self, receipt: Receipt, started_ms: i64) {
        self.received = true;
        let Route::Check(applied) = &self.plan.route else { return };
        let Some(limits) = upload::limits_for(applied) else { return };
        match upload::next(receipt, limits, started_ms) {
            upload::Next::Check { deadline_ms } => self.upload_deadline = deadline_ms,
            upload::Next::Answer { response, event } => self.refused = Some((Answer::Respond(response), event)),
        }
    }

    /// The decision of a request no counter was asked for.
    pub(crate) fn decided(self) -> Decision<'c> {
        self.counted(Vec::new())
    }

    /// The decision, once the counters answered (`outcomes[i]` for the
    /// `i`-th check of [`Next::Count`]).
    pub(crate) fn counted(self, outcomes: Vec<Outcome>) -> Decision<'c> {
        let Machine { config, fresh, reads, mut plan, facts, upload_deadline, refused, known, .. } = self;
        let refused = refused.or_else(|| upgrade_refusal(&plan, facts.headers));
        if let Some((answer, event)) = refused {
            let mut logs = vec![event];
            crate::pipeline::who::annotate(&mut logs, &facts, config);
            let forwarding = Forwarding::default();
            return Decision { answer, logs, kept: None, settle: Settle::none(), checked: false, forwarding, plan, metrics: false };
        }
        let (refusing_at, outcomes) = match known {
            Some(known) => {
                let (at, outcomes): (Vec<usize>, Vec<Outcome>) = known.into_iter().unzip();
                (Some(at), outcomes)
            }
            None => (None, outcomes),
        };
        let blocked = outcomes.iter().any(|o| matches!(o, Outcome::Blocked { .. }));
        // The checked rules move to the settle step: the plan's route keeps
        // `Check` with none (what the decision's `settle` holds).
        // A missing key's refusal is a point too (the events view's).
        let metrics = matches!(plan.route, Route::Check(_) | Route::MissingKey { .. });
        let all = match &mut plan.route {
            Route::Check(applied) => std::mem::take(applied),
            _ => Vec::new(),
        };
        let checked = !all.is_empty();
        // A blocked client's plan is kept, for its repeats: every rule of it.
        let kept = fresh
            .filter(|_| memo::keeps(&plan.matched, &all, blocked))
            .map(|fingerprint| Kept { fingerprint, reads, applied: all.clone() });
        // Refused from the cache: only the refusing rules are checked.
        let applied = match refusing_at {
            Some(at) => refusing(all, &at),
            None => all,
        };
        let verdict = if metrics && !applied.is_empty() {
            // The client's `Accept` shapes only a block's answer.
            let prefers = if blocked { Prefers::from_accept(facts.headers.get_str("accept")) } else { Prefers::Other };
            verdict::verdict_for(&applied, &outcomes, prefers)
        } else {
            early(&plan).unwrap_or_else(|| verdict::Verdict {
                answer: Answer::Respond(OwnResponse::problem(500, "Internal Server Error", "No verdict.", None)),
                events: Vec::new(),
            })
        };
        let mut logs = verdict::exempt_events(&plan.matched);
        logs.extend(verdict.events);
        crate::pipeline::who::annotate(&mut logs, &facts, config);
        let client = upload::client_of(facts.headers.get_str("cf-connecting-ip"), config.ipv6_prefix);
        let settle = Settle { applied, outcomes, charged: Charged { client, budget: config.memory_budget } };
        let forwarding = Forwarding::of(&settle, upload_deadline);
        Decision { answer: verdict.answer, logs, kept, settle, checked, forwarding, metrics, plan }
    }
}

/// The answer to an upgrade a usage rule of the plan refuses
/// ([`crate::pipeline::upgrade`]).
fn upgrade_refusal(plan: &Plan<'_>, headers: &HeaderMap) -> Option<(Answer, LogEvent)> {
    let Route::Check(applied) = &plan.route else { return None };
    let (response, event) = upgrade::refusal(upgrade::refusing(applied, headers)?);
    Some((Answer::Respond(response), event))
}

/// The verdict of a plan that needs no counter: a refused path (400), a
/// missing key (400), or nothing to check (forward). `None` for a plan that
/// has rules to check, or is admin or needs the body.
pub(crate) fn early(plan: &Plan<'_>) -> Option<verdict::Verdict> {
    match &plan.route {
        Route::Malformed(e) => Some(verdict::Verdict {
            answer: Answer::Respond(OwnResponse::problem(400, "Bad Request", &e.to_string(), None)),
            events: Vec::new(),
        }),
        Route::MissingKey { rule, missing } => {
            let why = missing.to_string();
            Some(verdict::Verdict {
                answer: Answer::Respond(OwnResponse::problem(
                    400,
                    "Bad Request",
                    &format!("Rule `{}`: {why}.", rule.name),
                    None,
                )),
                events: vec![LogEvent::new(
                    "missing_key",
                    vec![("rule", rule.name.as_str().into()), ("detail", why.into()), ("reason", "missing_key".into())],
                )],
            })
        }
        Route::Check(applied) if applied.is_empty() => {
            Some(verdict::Verdict { answer: Answer::Forward { fields: Vec::new() }, events: Vec::new() })
        }
        _ => None,
    }
}

/// [`plan::plan`] of what `facts` say, its headers read through `header`
/// (the machine records them for the memo) and `body` as known so far;
/// from the zone entry's `walked` of the URL, if it is this config's walk
/// of it ([`plan::plan_walked`]).
pub(crate) fn plan_facts<'c>(
    config: &'c Config,
    facts: &Facts<'_>,
    header: &dyn Fn(&str) -> Option<String>,
    body: Body<'_>,
    walked: Option<Walked<'_, '_>>,
) -> Plan<'c> {
    with_parts(facts, header, body, |parts| plan::plan_walked(config, parts, walked))
}

/// The request's parts as a plan reads them: what `facts` say, its headers
/// read through `header`, and `body` as known so far; for [`plan_facts`]
/// and the admin plane's own plan ([`Machine::admin`]).
pub(crate) fn with_parts<T>(facts: &Facts<'_>, header: &dyn Fn(&str) -> Option<String>, body: Body<'_>, f: impl FnOnce(&RequestParts<'_>) -> T) -> T {
    let admin_token = || facts.secrets.admin_token.clone();
    let secret = |name: &str| facts.secrets.get(name);
    let parts = RequestParts {
        method: facts.method,
        url: facts.url,
        header,
        body,
        country: facts.client.country.as_deref(),
        asn: facts.client.asn,
        verified_bot: facts.client.verified_bot.as_deref(),
        admin_token: &admin_token,
        log_key: facts.secrets.log_key.as_deref(),
        secret: &secret,
        now_ms: facts.now_ms,
    };
    f(&parts)
}

/// The `block` rules of `applied` the cache refuses at `now_ms` (their
/// index and outcome), `None` when it refuses none.
///
/// Such a request is refused whatever the other rules' counters would say,
/// so none is asked: a request refused by one rule is charged by no other
/// (it never reaches the origin), shadow rules included, and it costs no
/// object call. Exact: a cached block is the object's own answer, kept to
/// its end ([`crate::count::blocked`]), and the verdict is taken at the
/// same `now` the cache was read at; the glue asks no counter, so a block
/// that ends in between cannot let the request through uncharged. The
/// refusal the object itself answers (the first of a block, per isolate)
/// was asked of every rule at once, and the others counted it: see the
/// guide's "A request refused by one rule".
fn cached_refusals(cache: &BlockedUntilCache, applied: &[Applied<'_>], now_ms: i64) -> Option<Vec<(usize, Outcome)>> {
    let refusals: Vec<(usize, Outcome)> = applied
        .iter()
        .enumerate()
        .filter(|(_, a)| a.rule.action == crate::config::policy::Action::Block)
        .filter_map(|(i, a)| Some((i, Outcome::from_cache(cache.get(&a.id, now_ms)?, now_ms))))
        .collect();
    (!refusals.is_empty()).then_some(refusals)
}

/// Refused from the cache ([`cached_refusals`]): the refusing rules of
/// `applied` (at the indices `at`, ascending), the only ones checked (the
/// memo keeps every rule, taken before this).
fn refusing<'c>(applied: Vec<Applied<'c>>, at: &[usize]) -> Vec<Applied<'c>> {
    applied.into_iter().enumerate().filter(|(i, _)| at.contains(i)).map(|(_, a)| a).collect()
}

/// A plan for the memo to keep ([`PlanMemo::keep`]).
pub(crate) struct Kept<'c> {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) reads: Reads,
    pub(crate) applied: Vec<Applied<'c>>,
}

/// Everything one request's handling does, decided.
pub(crate) struct Decision<'c> {
    /// Forward (with fields) or tollgate's own answer.
    pub(crate) answer: Answer,
    /// The log lines, in order (exempt rules first, then the verdict's).
    pub(crate) logs: Vec<LogEvent>,
    /// A blocked client's plan, for the memo to keep.
    pub(crate) kept: Option<Kept<'c>>,
    /// What follows the answer ([`Settle::after`]).
    pub(crate) settle: Settle<'c>,
    /// Some rule's counter was asked: leased tokens past their expiry are
    /// due back ([`crate::count::lease`]); the non-matching path stays lean.
    pub(crate) checked: bool,
    /// How a forwarded request is sent and settled ([`Forwarding`]).
    pub(crate) forwarding: Forwarding<'c>,
    /// The plan decided on (`explain` reports it); its checked rules are
    /// in `settle`.
    pub(crate) plan: Plan<'c>,
    /// Whether the request makes metric points ([`Decision::metric_points`]).
    metrics: bool,
}

impl<'c> Decision<'c> {
    /// Forward, nothing checked: the fast path's decision.
    pub(crate) fn pass() -> Decision<'c> {
        Decision {
            answer: Answer::Forward { fields: Vec::new() },
            logs: Vec::new(),
            kept: None,
            settle: Settle::none(),
            checked: false,
            forwarding: Forwarding::default(),
            plan: Plan { canonical: None, matched: Vec::new(), route: Route::Check(Vec::new()) },
            metrics: false,
        }
    }

    /// The data points for the metrics dataset, at `place` (the client's
    /// `request.cf`, read only when points are written).
    pub(crate) fn metric_points(&self, place: metrics::Place<'_>) -> Vec<Point> {
        if !self.metrics {
            return Vec::new();
        }
        if let Route::MissingKey { rule, .. } = &self.plan.route {
            return metrics::missing_key(rule, place).into_iter().collect();
        }
        metrics::points(&self.plan.matched, &self.settle.applied, &self.settle.outcomes, place)
    }

    /// Counts this decision's allowed outcomes of `"limited"` rules into
    /// the isolate's `totals` ([`metrics::AllowedTotals`]).
    pub(crate) fn count_allowed(&self, totals: &mut metrics::AllowedTotals, now_ms: i64) {
        if self.metrics {
            totals.count(&self.settle.applied, &self.settle.outcomes, now_ms);
        }
    }

    /// Whether [`Decision::metric_points`] may have any (the `cf` fields
    /// they need are read only then).
    pub(crate) fn makes_points(&self) -> bool {
        self.metrics
    }
}

/// How a forwarded request is sent and settled, decided with its answer:
/// what the driver does besides adding [`Answer::Forward`]'s fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Forwarding<'c> {
    /// Forwarded and settled as one task: a failures-only rule reserved,
    /// so the origin's answer is settled ([`Settle::after`]) before the
    /// client gets it, or after, when its body is watched ([`Settle::hold`]).
    /// Otherwise the request is forwarded alone, nothing to settle.
    pub(crate) settles: bool,
    /// The usage headers removed from the client's response (those of
    /// usage rules without `expose`; [`crate::config::cost`]).
    pub(crate) hidden: Vec<&'c str>,
    /// A body over a failures-only rule's `upload_buffer` streams to the
    /// origin under a watch: it must have been forwarded by this deadline,
    /// else the request is answered [`crate::pipeline::upload::too_slow`].
    pub(crate) upload: Option<UploadWatch>,
}

/// The watch of an upload streamed past its buffer ([`Forwarding::upload`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct UploadWatch {
    /// When the body must have been forwarded (Unix ms).
    pub(crate) deadline_ms: i64,
    /// The rule's `upload_timeout`, for the 408 and its log line.
    pub(crate) timeout_ms: u32,
}

impl<'c> Forwarding<'c> {
    fn of(settle: &Settle<'c>, upload_deadline: Option<i64>) -> Forwarding<'c> {
        let timeout_ms = || upload::limits_for(&settle.applied).map_or(0, |l| l.timeout_ms);
        Forwarding {
            settles: settle.applied.iter().any(|a| verdict::check_op(a.rule) == Op::Reserve),
            hidden: settle.hidden_headers(),
            upload: upload_deadline.map(|deadline_ms| UploadWatch { deadline_ms, timeout_ms: timeout_ms() }),
        }
    }
}

/// The step after the answer: the checked rules and their outcomes.
#[derive(Debug, Clone)]
pub(crate) struct Settle<'c> {
    pub(crate) applied: Vec<Applied<'c>>,
    pub(crate) outcomes: Vec<Outcome>,
    /// What a relayed session's queues are charged to ([`Hold::Session`]).
    pub(crate) charged: Charged,
}

/// How an answer holds its request's concurrency slots ([`Settle::hold`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hold {
    /// SettleEffects at the headers: no slot is held past them.
    Headers,
    /// SettleEffects once the body has been sent or the client went away; cut
    /// (the client's answer broken off, the origin's cancelled) once a
    /// chunk has waited `idle_ms` for the client to take it, or after
    /// `left_ms`; what the watch holds of it is `charged`
    /// ([`crate::pipeline::upload::MemoryBudget::watch`]).
    Body { idle_ms: u64, left_ms: u64, charged: Charged },
    /// A WebSocket session (101): relayed, settled once either side closed
    /// it, closed by tollgate after `left_ms`; what the relay holds for
    /// its sides is `charged` ([`crate::pipeline::upload::MemoryBudget::relay`]).
    Session { left_ms: u64, charged: Charged },
}

/// One settling call to a rule's object.
#[derive(Debug, Clone)]
pub(crate) struct SettleCall {
    /// The object's name.
    pub(crate) id: String,
    pub(crate) call: Call,
    pub(crate) timeout_ms: u32,
    /// For the `counter_error` line of a failed call.
    pub(crate) rule: String,
    pub(crate) key_hash: String,
}

/// What settling decided.
#[derive(Debug, Default)]
pub(crate) struct SettleEffects {
    pub(crate) calls: Vec<SettleCall>,
    /// `Set-Cookie` fields of the devices a success made trusted.
    pub(crate) cookies: Vec<(String, String)>,
    /// Blocked-until cache entries a relief makes stale.
    pub(crate) forget: Vec<String>,
    /// `(rule, reserved at)` of each settled reservation, for the isolate's
    /// holds ([`crate::count::hold`]).
    pub(crate) holds: Vec<(String, i64)>,
    /// Log lines settling makes (`usage_missing`).
    pub(crate) events: Vec<LogEvent>,
    /// Metric points settling makes: what each priced answer committed,
    /// by model ([`crate::pipeline::metrics::spend_point`]).
    pub(crate) points: Vec<crate::pipeline::metrics::Point>,
}

impl<'c> Settle<'c> {
    fn none() -> Settle<'c> {
        Settle { applied: Vec::new(), outcomes: Vec::new(), charged: Charged::default() }
    }

    /// The response header fields settling reads (each rule's
    /// `success_identity_header`), for the driver to hand over.
    pub(crate) fn response_headers(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for a in &self.applied {
            let identity = a.rule.on_success.as_ref().and_then(|on| on.identity_header.as_deref());
            let usage = a.rule.usage.as_ref().and_then(|u| u.header());
            for name in identity.into_iter().chain(usage) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// How the origin's answer of `status`, at `now_ms`, holds the slots of
    /// this request's `concurrency` rules ([`crate::count::slots`]): not
    /// past its headers when no such rule counts the status (or none holds
    /// a reservation); otherwise until the body has been sent (cut when
    /// the client stops reading for the shortest `idle_release`), or, for
    /// a 101, until the session closes; either cut before the first
    /// reservation lapses.
    ///
    /// A usage rule reading the body ([`crate::pipeline::usage`])
    /// holds its reservation the same way, until the body ended, and cuts
    /// it before the reservation lapses; no idle cut of its own.
    pub(crate) fn hold(&self, status: u16, now_ms: i64) -> Hold {
        let holds = |a: &Applied<'c>| {
            let slot = a.rule.concurrency.is_some() && (status == 101 || a.rule.counting.counts(status));
            slot || (status != 101 && a.rule.counting.counts(status) && crate::pipeline::usage::reads_body(a.rule))
        };
        let holding: Vec<(&Applied<'c>, u64)> = self
            .applied
            .iter()
            .zip(&self.outcomes)
            .filter(|(a, _)| holds(a))
            .filter_map(|(a, outcome)| match outcome {
                Outcome::Allowed { reservation: Some(id), .. } => Some((a, *id)),
                _ => None,
            })
            .collect();
        let reservations = holding.iter().map(|(a, id)| (*id, a.rule.reservation_ttl_ms));
        let Some(left_ms) = crate::count::slots::hold_left_ms(reservations, now_ms) else { return Hold::Headers };
        let idle = holding.iter().filter(|(a, _)| a.rule.concurrency.is_some()).map(|(a, _)| a.rule.idle_release_ms).min();
        match status {
            101 => Hold::Session { left_ms, charged: self.charged.clone() },
            _ => Hold::Body { idle_ms: idle.unwrap_or(left_ms), left_ms, charged: self.charged.clone() },
        }
    }

    /// Whether settling needs the answer's body, not only its status and
    /// headers: a usage rule reads it (`metering.usage`), or a
    /// `concurrency` slot is held while it is sent ([`Settle::hold`]). An
    /// app settling itself (the crate, RPC) then hands tollgate its whole
    /// response.
    pub(crate) fn needs_body(&self) -> bool {
        self.applied.iter().any(|a| a.rule.concurrency.is_some() || crate::pipeline::usage::reads_body(a.rule))
    }

    /// The log lines of a held answer that tollgate cut, by the word its
    /// watch ended with ([`Hold`]): `idle` (the client stopped reading for
    /// `idle_release`), `lapsed` (its slot would lapse) or `overrun` (a
    /// WebSocket relay passed what it holds for a side that is not reading,
    /// `relay_buffer`); one `answer_cut` per concurrency rule.
    /// None for any other end.
    ///
    /// A usage rule reading the body logs `answer_cut` too: `lapsed`, and
    /// `cut` (reason `usage`: its stream passed the reserve) for a `cut` rule.
    pub(crate) fn cut_events(&self, why: &str) -> Vec<LogEvent> {
        let reason = match why {
            "idle" => "idle_release",
            "lapsed" => "reservation_ttl",
            "overrun" => "relay_buffer",
            "cut" => "usage",
            _ => return Vec::new(),
        };
        let reads = crate::pipeline::usage::reads_body;
        let cuts = |a: &&Applied<'c>| match why {
            "cut" => a.rule.usage.as_ref().is_some_and(|u| u.cut && reads(a.rule)),
            "lapsed" => a.rule.concurrency.is_some() || reads(a.rule),
            _ => a.rule.concurrency.is_some(),
        };
        let rules = self.applied.iter().filter(cuts);
        rules
            .map(|a| {
                let fields = vec![("rule", a.rule.name.as_str().into()), ("key_hash", a.key_hash.as_str().into()), ("reason", reason.into())];
                LogEvent::new("answer_cut", fields)
            })
            .collect()
    }

    /// The usage headers to remove from the client's response (those of
    /// usage rules without `expose`; [`crate::config::cost`]).
    fn hidden_headers(&self) -> Vec<&'c str> {
        let mut names: Vec<&'c str> = Vec::new();
        let rules = self.applied.iter().map(|a| -> &'c crate::config::rules::Rule { a.rule });
        for header in rules.filter_map(|rule| rule.usage.as_ref()).filter(|u| !u.expose).filter_map(|u| u.header()) {
            if !names.contains(&header) {
                names.push(header);
            }
        }
        names
    }

    /// Settles with the answer: `Some((status, headers))` of the origin or
    /// app, `None` when nothing answered (tollgate answered itself, the
    /// origin was unreachable, the app gave up): every reservation is then
    /// released. `now_ms` times the device cookies and the holds.
    pub(crate) fn after(&self, answer: Option<(u16, &HeaderMap)>, secrets: &Secrets, now_ms: i64) -> SettleEffects {
        let mut settled = self.after_reading(answer, &|_| None, &|_| None);
        if let Some(answer) = answer {
            settled.cookies = self.cookies(answer, secrets, now_ms);
        }
        settled
    }

    /// The `Set-Cookie` fields of the devices the answer's success made
    /// trusted (`trusted_device` rules; read from its status and headers
    /// only): what [`Settle::after`] puts in [`SettleEffects::cookies`], asked
    /// apart when the settlement waits for the body
    /// ([`Settle::after_reading`]) and the cookies must go with the headers.
    pub(crate) fn cookies(&self, answer: (u16, &HeaderMap), secrets: &Secrets, now_ms: i64) -> Vec<(String, String)> {
        let header = |name: &str| answer.1.get(name);
        let answered = Answered { status: answer.0, header: &header, body: &|_| None };
        let secret = |name: &str| secrets.get(name);
        verdict::device_cookies(&self.applied, &answered, &secret, now_ms)
    }

    /// [`Settle::after`] once the body was read, without the
    /// cookies (asked at the headers: [`Settle::cookies`]): `body` says
    /// the tokens each usage rule read from it, by rule name
    /// ([`crate::pipeline::usage::BodyUsage::tokens`]), and `model` the
    /// label of a priced rule's answer ([`crate::pipeline::usage::BodyUsage::model`]).
    pub(crate) fn after_reading(&self, answer: Option<(u16, &HeaderMap)>, body: &dyn Fn(&str) -> Option<u64>, model: &dyn Fn(&str) -> Option<String>) -> SettleEffects {
        let header = |name: &str| answer.and_then(|(_, headers)| headers.get(name));
        let answered = answer.map(|(status, _)| Answered { status, header: &header, body });
        let mut settled = SettleEffects::default();
        for (a, outcome) in self.applied.iter().zip(&self.outcomes) {
            let Some(call) = verdict::settle(a, outcome, answered.as_ref()) else { continue };
            if let (Op::Commit, Some(answered)) = (call.op, &answered) {
                if verdict::usage(a, answered) == Some(None) {
                    settled.events.push(verdict::usage_missing(a, answered.status));
                }
            }
            if let (Outcome::Allowed { reservation: Some(id), .. }, Op::Reserve) = (outcome, verdict::check_op(a.rule)) {
                settled.holds.push((a.rule.name.clone(), crate::count::reservation::reserved_at(*id)));
            }
            if matches!(call.op, Op::Clear | Op::Forgive) {
                settled.forget.push(a.id.clone());
            }
            if let (Op::Commit, Some(_), Some(step), Some(units)) = (call.op, &answered, a.rule.money_step(), call.used) {
                let model = model(&a.rule.name).unwrap_or_else(|| "(not read)".to_string());
                let micro = u64::from(units).saturating_mul(step);
                let spend = crate::pipeline::metrics::Spend { key_hash: a.key_hash.clone(), model, micro };
                settled.points.extend(crate::pipeline::metrics::spend_point(a.rule, &spend));
            }
            let (id, timeout_ms, rule, key_hash) = (a.id.clone(), a.rule.timeout_ms, a.rule.name.clone(), a.key_hash.clone());
            settled.calls.push(SettleCall { id, call, timeout_ms, rule, key_hash });
        }
        settled
    }
}

/// The config is invalid: what a request gets. `on_invalid_config = "allow"`
/// with a readable `upstream` forwards unlimited (`true`); otherwise 503.
/// The errors are logged at most once a minute per isolate
/// (`last_logged_ms`, updated), never shown to clients.
pub(crate) fn invalid_config(
    errors: &[crate::config::ConfigError],
    forwards: bool,
    now_ms: i64,
    last_logged_ms: &mut Option<i64>,
) -> (Option<crate::config::headers::OwnResponse>, Option<LogEvent>) {
    let due = last_logged_ms.is_none_or(|at| now_ms - at >= CONFIG_ERROR_LOG_PERIOD_MS);
    let log = due.then(|| {
        *last_logged_ms = Some(now_ms);
        let detail: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let decision = if forwards { FailPolicy::Allow } else { FailPolicy::Deny }.name();
        LogEvent::new("config_error", vec![("errors", detail.join("; ").into()), ("decision", decision.into())])
    });
    ((!forwards).then(verdict::invalid_config), log)
}

/// An invalid config is logged at most once per isolate per this period.
pub(crate) const CONFIG_ERROR_LOG_PERIOD_MS: i64 = 60_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{allowed, blocked, leaked, Req};
    use serde_json::json;

    fn rules() -> &'static Config {
        leaked(json!([
            { "name": "heavy", "path": "/x", "key": ["ip"], "limits": [{ "requests": 1, "window": "1m" }] },
            { "name": "login", "path": "/login", "methods": ["POST"], "key": ["body:email"], "count_statuses": [401],
              "on_success": "clear", "success_identity_header": "x-user", "limits": [{ "requests": 3, "window": "15m" }] },
            { "name": "open", "path": "/open", "exempt": { "ips": ["10.0.0.0/8"] }, "limits": [{ "requests": 1, "window": "1m" }] },
        ]))
    }

    #[test]
    fn a_request_no_rule_takes_is_passed_with_nothing_read() {
        let memo = PlanMemo::new(4);
        assert_eq!(entry(rules(), &memo, "https://example.com/elsewhere?mode=heavy", Plane::Zone).0, Door::Pass);
        assert_ne!(entry(rules(), &memo, "https://example.com/x", Plane::Zone).0, Door::Pass);
        let pass = Decision::pass();
        assert!(matches!(pass.answer, Answer::Forward { ref fields } if fields.is_empty()));
        assert!(pass.logs.is_empty() && !pass.checked && pass.settle.is_empty() && !pass.makes_points());
    }

    #[test]
    fn a_blocked_clients_plan_is_kept_and_its_repeat_replayed() {
        let c = rules();
        let mut memo = PlanMemo::new(4);
        let req = Req::get("/x").ip("192.0.2.1");
        let first = req.decide(c, &memo, &allowed);
        assert!(first.kept.is_none(), "an allowed client's plan is not kept");
        let second = req.decide(c, &memo, &blocked);
        assert!(matches!(&second.answer, Answer::Respond(r) if r.status == 429));
        let mut second = second;
        let kept = second.kept.take().expect("a blocked client's plan is kept");
        memo.keep(kept.fingerprint, kept.reads, kept.applied);
        let third = req.decide(c, &memo, &blocked);
        assert!(third.plan.canonical.is_none(), "replayed: no canonical view was made");
        assert!(matches!(&third.answer, Answer::Respond(r) if r.status == 429));
        // The log lines' key hashes are keyed by the log key, as the plan's.
        let hash = |d: &Decision<'_>| d.logs.iter().find_map(|e| e.fields.iter().find(|(n, _)| *n == "key_hash").map(|(_, v)| v.clone()));
        let keyed = req.clone().log_key(b"k").decide(c, &PlanMemo::new(1), &blocked);
        assert!(hash(&keyed).is_some() && hash(&keyed) != hash(&second), "keyed and unkeyed hashes differ");
        // Another client (another header value the plan read) plans afresh.
        let other = Req::get("/x").ip("192.0.2.2").decide(c, &memo, &allowed);
        assert!(other.plan.canonical.is_some());
    }

    /// A request the cache refuses for one rule asks no
    /// counter, so no other rule (block or shadow) is charged for it; the
    /// memo keeps every rule, so its repeat after the block is charged to
    /// all again.
    #[test]
    fn a_request_the_cache_refuses_is_charged_by_no_other_rule() {
        use crate::count::blocked::{Block, BlockedUntilCache, Refusal};
        let c = leaked(json!([
            { "name": "api", "path": "/api/*", "key": ["header:x-user"], "limits": [{ "requests": 10, "window": "1m" }] },
            { "name": "export", "path": "/api/export", "key": ["header:x-user"], "limits": [{ "requests": 2, "window": "1m" }] },
            { "name": "watch", "path": "/api/*", "key": ["ip"], "action": "log", "limits": [{ "requests": 1, "window": "1m" }] },
        ]));
        let req = Req::get("/api/export").ip("192.0.2.1").header("x-user", "ann").now(1_000);
        let asked = std::cell::RefCell::new(Vec::new());
        let count = |a: &Applied<'_>| {
            asked.borrow_mut().push(a.rule.name.clone());
            allowed(a)
        };
        let mut cache = BlockedUntilCache::new(8);
        let Route::Check(applied) = req.plan(c).route else { panic!("a check") };
        let export_id = applied[1].id.clone();
        cache.insert(&export_id, Block { until_ms: 31_000, window: 0, limits: Vec::new(), by: Refusal::Limit }, 1_000);
        let d = req.decide_cached(c, &PlanMemo::new(4), Some(&cache), &count);
        assert!(asked.borrow().is_empty(), "no counter asked: {:?}", asked.borrow());
        assert!(matches!(&d.answer, Answer::Respond(r) if r.status == 429 && r.header("retry-after") == Some("30")));
        let checked: Vec<&str> = d.settle.applied.iter().map(|a| a.rule.name.as_str()).collect();
        assert_eq!(checked, ["export"]);
        assert_eq!(d.logs.iter().map(|e| e.event).collect::<Vec<_>>(), ["block"], "no shadow line for a refused request");
        let kept = d.kept.expect("a blocked client's plan is kept");
        assert_eq!(kept.applied.len(), 3, "the memo keeps every rule");
        // Past the block, every rule is asked again.
        let later = req.clone().now(31_000).decide_cached(c, &PlanMemo::new(4), Some(&cache), &count);
        assert!(matches!(later.answer, Answer::Forward { .. }));
        assert_eq!(*asked.borrow(), ["api", "export", "watch"]);
    }

    #[test]
    fn an_exempt_request_logs_its_exemption_and_is_never_kept() {
        let d = Req::get("/open").ip("10.1.2.3").decide(rules(), &PlanMemo::new(4), &blocked);
        assert!(matches!(d.answer, Answer::Forward { .. }));
        assert_eq!(d.logs.iter().map(|e| e.event).collect::<Vec<_>>(), ["exempt"]);
        assert!(d.kept.is_none() && !d.checked);
        assert_eq!(d.forwarding, Forwarding::default(), "forwarded alone, nothing to settle");
    }

    #[test]
    fn a_body_key_reads_the_body_and_settling_follows_the_answer() {
        let c = rules();
        let req = Req::post("/login").ip("192.0.2.1").header("content-type", "application/json").body(br#"{"email":"ann@example.com"}"#);
        let reserved = |_: &Applied<'_>| Outcome::Allowed { windows: Vec::new(), reservation: Some(7) };
        let d = req.decide(c, &PlanMemo::new(4), &reserved);
        assert!(d.kept.is_none(), "a plan that read the body is never kept");
        assert_eq!(d.forwarding, Forwarding { settles: true, hidden: Vec::new(), upload: None }, "forwarded and settled as one task");
        assert_eq!(d.settle.response_headers(), ["x-user"]);
        let secrets = Secrets::default();
        let op = |settled: SettleEffects| settled.calls.iter().map(|s| s.call.op).collect::<Vec<_>>();
        assert_eq!(op(d.settle.after(None, &secrets, 0)), [Op::Release], "not answered: released");
        let none = HeaderMap::default();
        assert_eq!(op(d.settle.after(Some((401, &none)), &secrets, 0)), [Op::Commit], "a counted failure");
        let named = HeaderMap::from_pairs(&[("x-user", "ann@example.com")]);
        let success = d.settle.after(Some((200, &named)), &secrets, 0);
        assert_eq!(success.forget.len(), 1, "a cleared count drops the cached block");
        assert_eq!(op(success), [Op::Clear]);
        let other = HeaderMap::from_pairs(&[("x-user", "eve@example.com")]);
        assert_eq!(op(d.settle.after(Some((200, &other)), &secrets, 0)), [Op::Release], "another account's success clears nothing");
    }

    /// A body read for a `body:` key that is still
    /// arriving at `body_timeout` is answered 408, no counter asked; one the
    /// memory budget had no room for is planned as a body over
    /// `body_limit` (the key missing: the rule's missing-key policy, 400).
    #[test]
    fn a_stalled_body_read_is_answered_408_and_one_without_room_goes_unread() {
        let c = rules();
        let req = Req::post("/login").ip("192.0.2.1").header("content-type", "application/json");
        let headers = req.header_map();
        let run = |read: upload::BodyRead| {
            let mut machine = Machine::new(c, req.facts(&headers), &PlanMemo::new(4), None);
            let Next::Body { limit, timeout_ms } = machine.next(None) else { panic!("the body is read first") };
            assert_eq!((limit, timeout_ms), (16_384, 10_000), "body_limit, body_timeout");
            machine.body(&read);
            assert!(matches!(machine.next(None), Next::Decided), "no counter asked");
            machine.decided()
        };
        let stalled = run(upload::BodyRead::Stalled);
        let Answer::Respond(response) = &stalled.answer else { panic!("answered by tollgate") };
        assert_eq!(response.status, 408);
        assert!(!stalled.checked);
        assert!(stalled.logs.iter().any(|e| e.line().contains(r#""outcome":"stalled""#) && e.line().contains(r#""tollgate":"body""#)));
        let unread = run(upload::BodyRead::Unusable);
        let Answer::Respond(response) = &unread.answer else { panic!("answered by tollgate") };
        assert_eq!(response.status, 400, "the key is missing and the rule rejects, as for a body over body_limit");
    }

    #[test]
    fn a_trusted_device_counts_in_its_own_bucket_until_its_cookie_expires() {
        let c = leaked(json!([{ "name": "login", "path": "/login", "key": ["header:x-user"], "count_statuses": [401],
            "on_success": "clear", "trusted_device": { "secret": "DEVICE_KEY", "cookie": "dev" },
            "limits": [{ "requests": 3, "window": "15m" }] }]));
        const NOW: i64 = 1_800_000_000_000;
        let login = Req::post("/login").ip("192.0.2.1").header("x-user", "ann").secret("DEVICE_KEY", "k").now(NOW);
        // A success mints the device its cookie.
        let first = login.decide(c, &PlanMemo::new(4), &allowed);
        let settled = first.settle.after(Some((200, &HeaderMap::default())), &login.secrets, NOW);
        let [(name, cookie)] = settled.cookies.as_slice() else { panic!("{:?}", settled.cookies) };
        assert_eq!(name, "set-cookie");
        let value = cookie.split(';').next().unwrap_or_default().to_string();
        let with_cookie = |now| login.clone().header("cookie", &value).now(now).plan(c);
        let device = |p: &Plan<'_>| match &p.route {
            Route::Check(applied) => applied[0].device.is_some(),
            other => panic!("{other:?}"),
        };
        assert!(device(&with_cookie(NOW + 1_000)), "a valid cookie: the device's own bucket");
        assert!(!device(&with_cookie(NOW + 31 * 24 * 3_600_000)), "expired: the account's");
        let last = if value.ends_with('0') { '1' } else { '0' };
        let forged = login.clone().header("cookie", &format!("{}{last}", &value[..value.len() - 1])).now(NOW + 1_000).plan(c);
        assert!(!device(&forged), "an altered MAC: the account's");
        let without_secret = Req { secrets: Secrets::default(), ..login.clone().header("cookie", &value) };
        assert!(!device(&without_secret.now(NOW + 1_000).plan(c)), "no secret: no device");
    }

    /// An answer the rule does not count gives the slot back at
    /// its headers; a counted one holds it (cut after `idle_release` unread),
    /// a 101 for its session; every hold ends before the slot lapses.
    #[test]
    fn an_answer_holds_its_slot_only_when_counted_and_never_past_its_reservation() {
        let c = leaked(json!([{ "name": "exports", "path": "/export", "key": ["header:x-tenant"], "count_statuses": [200],
            "limits": [{ "requests": 100, "window": "1m" }], "concurrency": 2, "reservation_ttl": "15s", "idle_release": "2s" }]));
        const NOW: i64 = 1_800_000_000_000;
        let id = crate::count::reservation::next_id(&[], NOW);
        let reserved = |_: &Applied<'_>| Outcome::Allowed { windows: Vec::new(), reservation: Some(id) };
        let d = Req::get("/export").ip("192.0.2.1").header("x-tenant", "acme").decide(c, &PlanMemo::new(1), &reserved);
        let later = NOW + 3_000;
        assert_eq!(d.settle.hold(401, later), Hold::Headers, "a stranger's 401 is not counted: no hold");
        assert_eq!(d.settle.hold(200, later), Hold::Body { idle_ms: 2_000, left_ms: 15_000 - 1_000 - 3_000, charged: d.settle.charged.clone() });
        assert_eq!(d.settle.hold(101, later), Hold::Session { left_ms: 11_000, charged: Charged { client: "192.0.2.1".into(), budget: 32 * 1_048_576 } }, "a session holds whatever the statuses, charged to its client");
        assert_eq!(d.settle.hold(200, NOW + 20_000), Hold::Body { idle_ms: 2_000, left_ms: 0, charged: d.settle.charged.clone() }, "lapsed: cut at once");
        let failed = Req::get("/export").ip("192.0.2.1").header("x-tenant", "acme").decide(c, &PlanMemo::new(1), &|_| Outcome::Failed("down".into()));
        assert_eq!(failed.settle.hold(200, later), Hold::Headers, "no reservation, no slot to hold");
        let cut = |why| d.settle.cut_events(why).iter().map(|e| e.fields.iter().find(|(n, _)| *n == "reason").map(|(_, v)| v.to_string())).collect::<Vec<_>>();
        assert_eq!(cut("idle").len(), 1);
        let overrun = d.settle.cut_events("overrun").iter().map(|e| e.line()).collect::<Vec<_>>();
        assert!(overrun.len() == 1 && overrun[0].contains("\"reason\":\"relay_buffer\""), "a relay overrun: {overrun:?}");
        assert!(cut("ended").is_empty() && cut("cancelled").is_empty() && cut("closed").is_empty());
    }

    /// A usage read from the body holds its reservation until the
    /// body ended (no idle cut), cut before it lapses; settled with the
    /// tokens its reader saw, `max` without.
    #[test]
    fn a_usage_read_from_the_body_holds_until_the_body_ended_and_commits_what_it_read() {
        let c = leaked(json!([{ "name": "llm", "path": "/v1/*", "key": ["header:x-school"], "limits": [{ "requests": 10_000, "window": "1d" }],
            "counting": { "mode": "response", "statuses": [200], "reservation_ttl": "10m" }, "metering": { "usage": "openai", "reserve": 1000, "max": 1000, "cut": true } }]));
        const NOW: i64 = 1_800_000_000_000;
        let id = crate::count::reservation::next_id(&[], NOW);
        let reserved = |_: &Applied<'_>| Outcome::Allowed { windows: Vec::new(), reservation: Some(id) };
        let d = Req::get("/v1/chat").ip("192.0.2.1").header("x-school", "s1").decide(c, &PlanMemo::new(1), &reserved);
        let left = 600_000 - 1_000 - 3_000;
        assert_eq!(d.settle.hold(200, NOW + 3_000), Hold::Body { idle_ms: left as u64, left_ms: left as u64, charged: d.settle.charged.clone() });
        assert_eq!(d.settle.hold(400, NOW + 3_000), Hold::Headers, "an uncounted status is released at its headers");
        assert!(crate::pipeline::usage::body_usage(&d.settle.applied, 400, None).is_none());
        assert!(crate::pipeline::usage::body_usage(&d.settle.applied, 200, Some("text/event-stream")).is_some());
        assert!(d.settle.needs_body() && d.forwarding.settles, "settled with its body, as one task with the forward");
        let used = |tokens: Option<u64>| {
            let settled = d.settle.after_reading(Some((200, &HeaderMap::default())), &|_| tokens, &|_| None);
            (settled.calls[0].call.op, settled.calls[0].call.used, settled.events.len())
        };
        assert_eq!(used(Some(420)), (Op::Commit, Some(420), 0));
        assert_eq!(used(Some(5_000)), (Op::Commit, Some(5_000), 0), "what was reported, never clamped to max");
        assert_eq!(used(None), (Op::Commit, Some(1_000), 1), "none read: max, and a usage_missing line");
        let reasons = |why| d.settle.cut_events(why).iter().map(|e| e.line()).collect::<Vec<_>>();
        assert!(reasons("cut")[0].contains("\"reason\":\"usage\""), "{:?}", reasons("cut"));
        assert!(reasons("lapsed")[0].contains("\"reason\":\"reservation_ttl\""));
        assert!(reasons("ended").is_empty());
    }

    /// A priced answer settled makes a `spend` point: its charge in
    /// micro-units (a milli-unit rule's committed units times 1,000), the
    /// key's hash and the pattern that priced its model; a rule whose
    /// metrics are off, none.
    #[test]
    fn a_priced_answer_settled_makes_a_spend_point_by_model() {
        let rule = |name: &str, spend: u32, metrics: &str| json!({ "name": name, "path": format!("/{name}/*"), "key": ["header:x-school"], "metrics": metrics,
            "limits": [{ "spend": spend, "window": "1d" }], "counting": { "mode": "response", "reservation_ttl": "10m" },
            "metering": { "usage": "openai", "reserve": 1000, "max": 1000, "price": { "currency": "JPY", "models": { "gpt-4o*": { "input": 375, "output": 1500 } } } } });
        let c = leaked(json!([rule("yen", 200, "limited"), rule("big", 10_000, "limited"), rule("quiet", 200, "off")]));
        let id = crate::count::reservation::next_id(&[], 1_800_000_000_000);
        let reserved = |_: &Applied<'_>| Outcome::Allowed { windows: Vec::new(), reservation: Some(id) };
        let points = |path: &str| {
            let d = Req::get(path).ip("192.0.2.1").header("x-school", "s1").decide(c, &PlanMemo::new(1), &reserved);
            d.settle.after_reading(Some((200, &HeaderMap::default())), &|_| Some(1_234), &|_| Some("gpt-4o*".into())).points
        };
        let yen = points("/yen/chat");
        assert_eq!(yen.len(), 1, "{yen:?}");
        assert_eq!((yen[0].blobs[1].as_str(), yen[0].blobs[5].as_str(), yen[0].doubles), ("spend", "gpt-4o*", [1_234.0, 0.0]));
        assert_eq!(yen[0].blobs[4].len(), 16, "the key's hash, never the key: {:?}", yen[0].blobs);
        assert_eq!(points("/big/chat")[0].doubles[0], 1_234_000.0, "milli-units as micro-units");
        assert!(points("/quiet/chat").is_empty(), "metrics off");
    }

    #[test]
    fn an_invalid_config_is_logged_once_a_minute() {
        let errors = match Config::from_json(&json!({ "rules": [{ "name": "x" }] })) {
            Err(errors) => errors,
            Ok(_) => panic!("valid"),
        };
        let mut last = None;
        let (answer, log) = invalid_config(&errors, false, 1_000, &mut last);
        assert_eq!(answer.map(|r| r.status), Some(503));
        assert!(log.is_some());
        assert!(invalid_config(&errors, false, 60_999, &mut last).1.is_none(), "within the minute");
        assert!(invalid_config(&errors, true, 61_000, &mut last).1.is_some(), "a minute later");
        assert!(invalid_config(&errors, true, 61_000, &mut None).0.is_none(), "allow: forwarded");
    }

    impl<'c> Settle<'c> {
        pub(crate) fn is_empty(&self) -> bool {
            self.applied.is_empty()
        }
    }
}
