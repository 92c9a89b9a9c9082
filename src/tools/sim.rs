//! A deterministic simulator of leased budgets, native only:
//! N isolates, each with its own arrival process, each the core's
//! [`Isolate`] (lease book, blocked-until cache, holds), every request
//! decided by the core's [`CounterRun`] as the Worker's glue drives it (its
//! calls sent, its waits of [`crate::pipeline::isolate::POLL_MS`] slept as
//! events, its refunds sent beside the next request), calling limiter
//! objects that run the object's real step ([`Storage`]:
//! [`crate::count::object::answer`] and its effects, on the stored row)
//! behind a FIFO queue with a fixed service time (the object's capacity),
//! over round trips of 1–100 ms; isolates are evicted and objects restart.
//! Nothing here decides for the isolate or the object. Time is
//! simulated in microseconds; nothing reads a clock, and a seed fixes
//! every random choice.
//!
//! It checks, for every scenario:
//! - **over-admission**: the most units admitted in any real-time window of
//!   the limit (a hit counts when its object decided it, a leased token when
//!   the isolate spent it) against the limit;
//! - **under-admission** against an ideal exact limiter deciding every
//!   arrival the moment it arrives, on the same arrivals;
//! - object calls per second (mean and the busiest second), the longest
//!   queue wait, and the latency the limiter adds to a request (p50, p99).
//!
//! `cargo run --release --example lease-sim` runs the long scenarios of
//! the lease design and prints the table in `bench/RESULTS.md`; `cargo test` runs
//! short ones (`tests` below).

use crate::config::Config;
use crate::count::lease::{LeaseMode, LeaseSettings};
use crate::count::protocol::{Algorithm, CallFailure, Op, Reply};
use crate::count::store::Storage;
use crate::count::window::Limit;
use crate::pipeline::applied::{object_name, Applied};
use crate::pipeline::isolate::{CounterRun, Isolate, ObjectCall, Step};
use crate::pipeline::verdict::Outcome;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// Deterministic pseudo-random numbers (splitmix64).
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi].
    pub(crate) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
    /// Exponential gap with mean `mean_us`.
    fn exp_us(&mut self, mean_us: f64) -> i64 {
        (-(1.0 - self.unit()).ln() * mean_us).max(1.0) as i64
    }
}

/// How an isolate's requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Poisson at `rate` per second.
    Steady { rate: f64 },
    /// Poisson at `rate`, times `factor` for the first `burst_ms` of every
    /// `every_ms`.
    Bursts { rate: f64, factor: f64, burst_ms: i64, every_ms: i64 },
    /// Poisson at `rate` for `on_ms`, then nothing for `off_ms`.
    OnOff { rate: f64, on_ms: i64, off_ms: i64 },
}

impl Arrivals {
    fn rate_at(&self, t_us: i64) -> f64 {
        let ms = t_us / 1_000;
        match *self {
            Arrivals::Steady { rate } => rate,
            Arrivals::Bursts { rate, factor, burst_ms, every_ms } => {
                if ms % every_ms < burst_ms {
                    rate * factor
                } else {
                    rate
                }
            }
            Arrivals::OnOff { rate, on_ms, off_ms } => {
                if ms % (on_ms + off_ms) < on_ms {
                    rate
                } else {
                    0.0
                }
            }
        }
    }

    /// The next arrival after `t_us`, by thinning against the peak rate.
    fn next(&self, t_us: i64, rng: &mut Rng) -> i64 {
        let peak = match *self {
            Arrivals::Steady { rate } | Arrivals::OnOff { rate, .. } => rate,
            Arrivals::Bursts { rate, factor, .. } => rate * factor.max(1.0),
        };
        let mut t = t_us;
        loop {
            t += rng.exp_us(1e6 / peak);
            if rng.unit() * peak < self.rate_at(t) {
                return t;
            }
        }
    }
}

/// One scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub isolates: usize,
    /// Each isolate's arrivals (cycled over the isolates).
    pub arrivals: Vec<Arrivals>,
    /// Keys: each request picks one uniformly (1: one hot key).
    pub keys: usize,
    pub limit: Limit,
    pub algorithm: Algorithm,
    /// `None`: lease = "off".
    pub lease: Option<(u64, u32)>,
    pub duration_ms: i64,
    /// Object round trip range (ms), per call.
    pub rtt_ms: (i64, i64),
    /// Object service time per call (µs): 1,000 caps it at 1,000 calls/s.
    pub service_us: i64,
    /// The rule's timeout (ms): a later answer is a failure.
    pub timeout_ms: i64,
    /// Every this many ms, one isolate (in turn) is evicted.
    pub evict_every_ms: Option<i64>,
    /// Every this many ms, every object restarts, refusing calls for the
    /// second value (ms).
    pub restart: Option<(i64, i64)>,
    pub seed: u64,
}

/// What a scenario measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub requests: u64,
    pub admitted: u64,
    pub ideal_admitted: u64,
    /// The most units admitted in any window of the limit, over all keys.
    pub worst_window: u64,
    pub limit: u64,
    pub object_calls: u64,
    pub calls_per_s: f64,
    pub busiest_second: u64,
    pub max_queue_ms: f64,
    pub failed_calls: u64,
    /// Requests answered by the rule's `on_error` (a failed call, or backing
    /// off with no tokens held); counted as admitted only if fail-open.
    pub on_error: u64,
    pub refunds: u64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    /// Every request's answer in arrival order (true: admitted), for
    /// comparing runs.
    pub decisions: Vec<bool>,
}

impl Report {
    /// Over-admission: units past the limit in the worst window (0 is the
    /// target).
    pub fn over(&self) -> u64 {
        self.worst_window.saturating_sub(self.limit)
    }
    /// Under-admission against the ideal exact limiter, in percent.
    pub fn under_percent(&self) -> f64 {
        if self.ideal_admitted == 0 {
            return 0.0;
        }
        100.0 * (self.ideal_admitted as f64 - self.admitted as f64).max(0.0) / self.ideal_admitted as f64
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival { isolate: usize },
    AtObject { call: usize },
    Answer { call: usize },
    /// A request's [`Step::Wait`] is over.
    Wake { request: usize },
    Evict { isolate: usize },
}

/// A request: when it arrived (µs) and its index.
#[derive(Debug, Clone, Copy)]
struct Who {
    arrived: i64,
    index: usize,
}

/// A request being decided: its rule's counter, in the isolate (of the
/// generation) it arrived at.
struct Request<'s> {
    counter: CounterRun<'s, 's>,
    isolate: usize,
    generation: u64,
    key: usize,
    who: Who,
}

/// One call on its way: sent by `requester` (a request's slot; `None`: a
/// refund), answered `result`, decided by the object at `decided_us`.
struct Pending {
    isolate: usize,
    generation: u64,
    key: usize,
    sent_us: i64,
    rtt_us: i64,
    call: ObjectCall,
    requester: Option<usize>,
    decided_us: i64,
    result: Option<Result<Reply, CallFailure>>,
}

/// One isolate: the core's [`Isolate`], and how often it was evicted.
struct Edge {
    isolate: Isolate,
    generation: u64,
}

impl Edge {
    fn new(config: &Config, generation: u64) -> Edge {
        let mut isolate = Isolate::new();
        isolate.configure(config, 0);
        Edge { isolate, generation }
    }
}

/// One limiter object: its storage ([`Storage`], the object's real step)
/// behind a FIFO queue of fixed service time.
#[derive(Default)]
struct Object {
    storage: Storage,
    busy_until_us: i64,
}

/// The scenario's rule, as the Worker reads it: built from JSON, then
/// given the scenario's limit, algorithm, lease and timeout directly.
fn config_of(s: &Scenario) -> Config {
    let rule = serde_json::json!({ "name": "sim", "path": "/*", "key": ["global"], "limits": [{ "requests": 10, "window": "1m" }] });
    let mut config = match Config::from_json(&serde_json::json!({ "rules": [rule] })) {
        Ok(config) => config,
        Err(errors) => panic!("the simulator's own rule is refused: {errors:?}"),
    };
    for rule in config.rules.iter_mut().map(|r| &mut r.spec) {
        rule.limits = vec![s.limit];
        rule.algorithm = s.algorithm;
        rule.timeout_ms = u32::try_from(s.timeout_ms).unwrap_or(u32::MAX);
        rule.lease = match s.lease {
            Some((ttl_ms, max)) => LeaseMode::Auto(LeaseSettings::new(ttl_ms, max, s.limit.requests.get())),
            None => LeaseMode::Off,
        };
    }
    config
}

/// Each key's rule to check, as the plan would apply it.
fn applied_of<'c>(config: &'c Config, keys: usize) -> Vec<Applied<'c>> {
    let Some(rule) = config.rules.first() else { return Vec::new() };
    (0..keys)
        .map(|k| {
            let key = format!("key-{k}");
            let id = object_name(rule, &key);
            Applied { rule, key, id, key_hash: format!("{k}"), fell_back: false, own_method: true, device: None, spelling: None }
        })
        .collect()
}

/// Runs `scenario`.
pub fn run(scenario: &Scenario) -> Report {
    let config = config_of(scenario);
    let applied = applied_of(&config, scenario.keys);
    Sim::new(scenario, &config, &applied).run()
}

struct Sim<'s> {
    s: &'s Scenario,
    config: &'s Config,
    applied: &'s [Applied<'s>],
    /// The key of each object's name.
    keys: HashMap<&'s str, usize>,
    rng: Rng,
    events: BinaryHeap<Reverse<(i64, u64, Event)>>,
    seq: u64,
    isolates: Vec<Edge>,
    objects: HashMap<usize, Object>,
    calls: Vec<Pending>,
    requests: Vec<Option<Request<'s>>>,
    // Measurements.
    arrivals: Vec<(i64, usize)>,
    decisions: Vec<Option<bool>>,
    admitted_at: Vec<Vec<i64>>,
    latencies: Vec<i64>,
    call_seconds: HashMap<i64, u64>,
    report: Report,
}

impl<'s> Sim<'s> {
    fn new(s: &'s Scenario, config: &'s Config, applied: &'s [Applied<'s>]) -> Sim<'s> {
        Sim {
            s,
            config,
            applied,
            keys: applied.iter().enumerate().map(|(k, a)| (a.id.as_str(), k)).collect(),
            rng: Rng::new(s.seed),
            events: BinaryHeap::new(),
            seq: 0,
            isolates: (0..s.isolates).map(|_| Edge::new(config, 0)).collect(),
            objects: HashMap::new(),
            calls: Vec::new(),
            requests: Vec::new(),
            arrivals: Vec::new(),
            decisions: Vec::new(),
            admitted_at: vec![Vec::new(); s.keys],
            latencies: Vec::new(),
            call_seconds: HashMap::new(),
            report: Report { limit: u64::from(s.limit.requests.get()), ..Report::default() },
        }
    }

    fn at(&mut self, t_us: i64, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((t_us, self.seq, event)));
    }

    fn run(mut self) -> Report {
        for isolate in 0..self.s.isolates {
            let first = self.s.arrivals[isolate % self.s.arrivals.len()].next(0, &mut self.rng);
            self.at(first, Event::Arrival { isolate });
        }
        if let Some(every) = self.s.evict_every_ms {
            let mut t = every;
            let mut i = 0;
            while t < self.s.duration_ms {
                self.at(t * 1_000, Event::Evict { isolate: i % self.s.isolates });
                t += every;
                i += 1;
            }
        }
        while let Some(Reverse((t, _, event))) = self.events.pop() {
            match event {
                Event::Arrival { isolate } => self.arrival(t, isolate),
                Event::AtObject { call } => self.at_object(t, call),
                Event::Answer { call } => self.answer(t, call),
                Event::Wake { request } => self.wake(t, request),
                Event::Evict { isolate } => {
                    // Requests waiting in the evicted isolate are lost with
                    // it (at their next look).
                    let generation = self.isolates[isolate].generation + 1;
                    self.isolates[isolate] = Edge::new(self.config, generation);
                }
            }
        }
        self.finish()
    }

    /// A request arriving at `isolate` at `t`: the refunds due sent (as
    /// the Worker sends them, beside the request), then its counter started.
    fn arrival(&mut self, t: i64, isolate: usize) {
        if t >= self.s.duration_ms * 1_000 {
            return;
        }
        let next = self.s.arrivals[isolate % self.s.arrivals.len()].next(t, &mut self.rng);
        self.at(next, Event::Arrival { isolate });
        let key = if self.s.keys == 1 { 0 } else { self.rng.range(0, self.s.keys as i64 - 1) as usize };
        let index = self.arrivals.len();
        self.arrivals.push((t, key));
        self.decisions.push(None);
        let now_ms = t / 1_000;
        for refund in self.isolates[isolate].isolate.refunds(self.config, now_ms) {
            self.report.refunds += 1;
            let k = self.keys.get(refund.id.as_str()).copied().unwrap_or(0);
            self.send(t, isolate, k, refund, None);
        }
        let edge = &mut self.isolates[isolate];
        let mut counter = CounterRun::new(&self.applied[key], Op::Hit);
        let step = counter.start(&mut edge.isolate, now_ms);
        let request = Request { counter, isolate, generation: edge.generation, key, who: Who { arrived: t, index } };
        self.requests.push(None);
        self.stepped(self.requests.len() - 1, request, t, step, now_ms * 1_000);
    }

    /// What request `slot`'s counter asked for at `t`: a call sent, a wait
    /// slept, or its outcome recorded (an admission at `counted_us`: the
    /// object's decision, or the isolate's spending of a token held).
    fn stepped(&mut self, slot: usize, request: Request<'s>, t: i64, step: Step, counted_us: i64) {
        match step {
            Step::Call(call) => {
                let (isolate, key) = (request.isolate, request.key);
                self.requests[slot] = Some(request);
                self.send(t, isolate, key, call, Some(slot));
            }
            Step::Wait { ms } => {
                self.requests[slot] = Some(request);
                self.at(t + i64::try_from(ms).unwrap_or(i64::MAX / 2) * 1_000, Event::Wake { request: slot });
            }
            Step::Done(outcome) => {
                let admitted = match outcome {
                    Outcome::Allowed { .. } => Some(true),
                    Outcome::Blocked { .. } => Some(false),
                    Outcome::Failed(_) => {
                        self.report.on_error += 1;
                        None
                    }
                };
                if admitted == Some(true) {
                    self.admitted_at[request.key].push(counted_us);
                }
                self.decide(request.who, t, admitted);
            }
        }
    }

    /// Request `slot`'s wait is over: its counter looks again, unless its
    /// isolate was evicted meanwhile (then it is lost: fail closed).
    fn wake(&mut self, t: i64, slot: usize) {
        let Some(mut request) = self.requests[slot].take() else { return };
        let edge = &mut self.isolates[request.isolate];
        if edge.generation != request.generation {
            self.decide(request.who, t, None);
            return;
        }
        let now_ms = t / 1_000;
        let step = request.counter.waited(&mut edge.isolate, now_ms);
        self.stepped(slot, request, t, step, now_ms * 1_000);
    }

    fn send(&mut self, t: i64, isolate: usize, key: usize, call: ObjectCall, requester: Option<usize>) {
        let rtt_us = self.rng.range(self.s.rtt_ms.0 * 1_000, self.s.rtt_ms.1 * 1_000);
        *self.call_seconds.entry(t / 1_000_000).or_default() += 1;
        self.report.object_calls += 1;
        let generation = self.isolates[isolate].generation;
        self.calls.push(Pending { isolate, generation, key, sent_us: t, rtt_us, call, requester, decided_us: t, result: None });
        let call = self.calls.len() - 1;
        self.at(t + rtt_us / 2, Event::AtObject { call });
    }

    /// A call reaching its object at `t`: refused at once while the object
    /// restarts or when it would wait past its timeout (Cloudflare answers
    /// "overloaded"); else queued, then answered by the object's step.
    fn at_object(&mut self, t: i64, index: usize) {
        let restarting = self.s.restart.is_some_and(|(every, down)| (t / 1_000) % every < down && t / 1_000 >= every);
        let timeout_us = self.s.timeout_ms * 1_000;
        let pending = &mut self.calls[index];
        let object = self.objects.entry(pending.key).or_default();
        let refused = if restarting { Some("restarting") } else { (object.busy_until_us - t > timeout_us).then_some("overloaded") };
        if let Some(why) = refused {
            // The isolate hears of it after the way back.
            pending.result = Some(Err(CallFailure::Transport(why.into())));
            let back = t + pending.rtt_us / 2;
            self.at(back, Event::Answer { call: index });
            return;
        }
        let start = t.max(object.busy_until_us);
        object.busy_until_us = start + self.s.service_us;
        self.report.max_queue_ms = self.report.max_queue_ms.max((start - t) as f64 / 1_000.0);
        let result = object.storage.answer(&pending.call.call, start / 1_000).map_err(|body| CallFailure::Refused { status: 500, body });
        let answered = start + self.s.service_us + pending.rtt_us / 2;
        let late = answered - pending.sent_us > timeout_us;
        pending.decided_us = start / 1_000 * 1_000;
        pending.result = Some(if late { Err(CallFailure::Timeout { ms: pending.call.timeout_ms }) } else { result });
        let when = if late { pending.sent_us + timeout_us } else { answered };
        self.at(when, Event::Answer { call: index });
    }

    /// A call's answer back at its isolate at `t`: handed to the counter
    /// that asked; a request whose isolate was evicted meanwhile is
    /// answered by the reply alone.
    fn answer(&mut self, t: i64, index: usize) {
        let pending = &mut self.calls[index];
        let result = pending.result.take().unwrap_or_else(|| Err(CallFailure::Transport("no answer".into())));
        let (requester, decided_us) = (pending.requester, pending.decided_us);
        let same = self.isolates[pending.isolate].generation == pending.generation;
        if result.is_err() {
            self.report.failed_calls += 1;
        }
        let Some(slot) = requester else { return };
        let Some(mut request) = self.requests[slot].take() else { return };
        if !same {
            let admitted = matches!(&result, Ok(reply) if reply.tally.allowed);
            if admitted {
                self.admitted_at[request.key].push(decided_us);
            }
            self.decide(request.who, t, admitted.then_some(true));
            return;
        }
        let step = request.counter.replied(&mut self.isolates[request.isolate].isolate, result, t / 1_000);
        self.stepped(slot, request, t, step, decided_us);
    }

    /// Records request `who`'s answer (`None`: on_error, fail closed).
    fn decide(&mut self, who: Who, t: i64, admitted: Option<bool>) {
        self.decisions[who.index] = Some(admitted == Some(true));
        self.latencies.push(t - who.arrived);
    }

    fn finish(mut self) -> Report {
        let window_us = i64::try_from(self.s.limit.window_ms.get()).unwrap_or(i64::MAX) * 1_000;
        let limit = self.report.limit;
        // Ideal: an exact sliding log per key, deciding at arrival.
        let mut ideal: HashMap<usize, VecDeque<i64>> = HashMap::new();
        for &(t, key) in &self.arrivals {
            let log = ideal.entry(key).or_default();
            while log.front().is_some_and(|&at| t - at >= window_us) {
                log.pop_front();
            }
            if (log.len() as u64) < limit {
                log.push_back(t);
                self.report.ideal_admitted += 1;
            }
        }
        for times in &mut self.admitted_at {
            times.sort_unstable();
            let mut start = 0;
            for end in 0..times.len() {
                while times[end] - times[start] >= window_us {
                    start += 1;
                }
                self.report.worst_window = self.report.worst_window.max((end - start + 1) as u64);
            }
        }
        self.report.requests = self.arrivals.len() as u64;
        self.report.decisions = self.decisions.iter().map(|d| d.unwrap_or(false)).collect();
        self.report.admitted = self.report.decisions.iter().filter(|d| **d).count() as u64;
        let seconds = (self.s.duration_ms as f64 / 1_000.0).max(1.0);
        self.report.calls_per_s = self.report.object_calls as f64 / seconds;
        self.report.busiest_second = self.call_seconds.values().copied().max().unwrap_or(0);
        self.latencies.sort_unstable();
        let pick = |q: f64| {
            let n = self.latencies.len();
            if n == 0 {
                return 0.0;
            }
            self.latencies[((n - 1) as f64 * q) as usize] as f64 / 1_000.0
        };
        self.report.latency_p50_ms = pick(0.50);
        self.report.latency_p99_ms = pick(0.99);
        self.report
    }
}

/// The lease design's scenarios, scaled by `scale` in time (1.0: the long
/// run; the limit's window is scaled with the duration, so a short run
/// sees the same number of windows' worth of behaviour, faster).
pub fn scenarios(scale: f64) -> Vec<Scenario> {
    let minute = ((60_000.0 * scale) as u64).max(1_000);
    let duration = (180_000.0 * scale) as i64;
    let limit_per = |n: f64| Limit::new((n * scale).max(1.0) as u32, minute).unwrap_or(Limit { requests: std::num::NonZeroU32::MIN, window_ms: std::num::NonZeroU64::MIN, calendar: None });
    let mixed = |rate: f64| {
        vec![
            Arrivals::Steady { rate },
            Arrivals::Bursts { rate: rate * 0.6, factor: 5.0, burst_ms: 1_000, every_ms: 10_000 },
            Arrivals::OnOff { rate: rate * 2.0, on_ms: 5_000, off_ms: 5_000 },
        ]
    };
    let base = Scenario {
        name: "",
        isolates: 50,
        arrivals: mixed(200.0),
        keys: 1,
        limit: limit_per(300_000.0),
        algorithm: Algorithm::SlidingLog,
        // lease_ttl 1 s against a one-minute window, scaled with it.
        lease: Some((((1_000.0 * scale) as u64).max(1), 1_000)),
        duration_ms: duration,
        rtt_ms: (1, 100),
        service_us: 1_000,
        timeout_ms: 2_000,
        evict_every_ms: None,
        restart: None,
        seed: 12,
    };
    vec![
        Scenario { name: "1: one key, 10k req/s, 50 isolates, 300k/min", ..base.clone() },
        Scenario { name: "2: one key, 50k req/s, 50 isolates, 300k/min", arrivals: mixed(1_000.0), ..base.clone() },
        Scenario {
            name: "3: per-IP keys, 10/min",
            arrivals: vec![Arrivals::Steady { rate: 20.0 }],
            keys: 300,
            limit: Limit::new(10, minute).unwrap_or(base.limit),
            ..base.clone()
        },
        Scenario {
            name: "4: flood, 10k req/s on one key of 100/min",
            limit: Limit::new(100, minute).unwrap_or(base.limit),
            arrivals: vec![Arrivals::Steady { rate: 200.0 }],
            ..base.clone()
        },
        Scenario {
            name: "5: as 1, with restarts and evictions",
            evict_every_ms: Some(500),
            // Every 20 s, every object is down for 2 s (scaled).
            restart: Some((((20_000.0 * scale) as i64).max(1_000), ((2_000.0 * scale) as i64).max(1))),
            ..base
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The short version of `examples/lease-sim.rs`: every scenario at a
    /// tenth of the time (6 s windows, 18 s runs), held to the targets.
    #[test]
    fn short_simulation_meets_the_targets() {
        for (i, scenario) in scenarios(0.1).into_iter().enumerate() {
            let r = run(&scenario);
            let shown = format!("{}: {:?}", scenario.name, Report { decisions: Vec::new(), ..r.clone() });
            assert_eq!(r.over(), 0, "over-admitted: {shown}");
            assert!(r.requests > 10_000, "{shown}");
            match i {
                0 => assert!(r.calls_per_s <= 500.0 && r.under_percent() <= 5.0, "{shown}"),
                1 => assert!(r.busiest_second < 1_000 && r.failed_calls == 0, "under the object's capacity: {shown}"),
                3 => assert!(r.under_percent() <= 5.0 && r.calls_per_s < 100.0, "{shown}"),
                4 => assert!(r.failed_calls > 0 && r.under_percent() <= 10.0, "restarts happened: {shown}"),
                _ => {}
            }
        }
    }

    /// Scenario 3 with leases on is exactly what it is with them off.
    #[test]
    fn per_ip_keys_behave_as_without_leases() {
        let scenario = scenarios(0.1).remove(2);
        let auto = run(&scenario);
        let off = run(&Scenario { lease: None, ..scenario });
        assert_eq!(auto.decisions, off.decisions);
        assert_eq!(auto.object_calls, off.object_calls);
    }
}
