//! A deterministic simulator of leased budgets (issue 12), native only:
//! N isolates, each with its own arrival process, its own lease book
//! ([`crate::count::lease::Leases`]) and blocked-until cache, calling limiter
//! objects that run the real object step ([`crate::count::counter::step`], on the
//! stored row as text) behind a FIFO queue with a fixed service time (the
//! object's capacity), over round trips of 1–100 ms; isolates are evicted
//! and objects restart. Time is simulated in microseconds; nothing reads a
//! clock, and a seed fixes every random choice.
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
//! issue 12 and prints the table in `bench/RESULTS.md`; `cargo test` runs
//! short ones (`tests` below).

use crate::count::blocked::{Block, BlockedUntilCache};
use crate::count::counter::step;
use crate::count::lease::{Admit, LeaseSettings, Leases};
use crate::count::protocol::{Algorithm, Call, Op};
use crate::count::window::Limit;
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
    Evict { isolate: usize },
}

/// An object's answer as the isolate reads it: allowed, retry-after (ms),
/// the lease's id, units granted, the windows.
type Answered = (bool, u64, Option<u64>, u64, Vec<crate::count::protocol::WireWindow>);

#[derive(Debug, Clone)]
struct Pending {
    isolate: usize,
    generation: u64,
    key: usize,
    /// The requests waiting on the answer: their arrival times (µs) and
    /// indexes; the first asked.
    sent_us: i64,
    rtt_us: i64,
    call: Call,
    want: u32,
    result: Option<Result<Answered, ()>>,
    requester: Who,
}

/// A request: when it arrived (µs), its index, how often it waited.
#[derive(Debug, Clone, Copy)]
struct Who {
    arrived: i64,
    index: usize,
    waits: u32,
}

const NOBODY: Who = Who { arrived: 0, index: usize::MAX, waits: 0 };

/// A request waits on at most this many calls in flight, then asks on its
/// own. The sim wakes waiters when the answer comes; the Worker
/// (`objects.rs`) has them poll every 5 ms (not modelled), for as long as
/// twice the rule's timeout.
const MAX_WAITS: u32 = 4;

struct Isolate {
    leases: Leases,
    blocked: BlockedUntilCache,
    /// Requests waiting on a key's call in flight.
    waiting: HashMap<usize, Vec<Who>>,
    generation: u64,
}

impl Isolate {
    fn new(generation: u64) -> Isolate {
        Isolate { leases: Leases::new(4_096), blocked: BlockedUntilCache::new(10_000), waiting: HashMap::new(), generation }
    }
}

struct Object {
    row: String,
    busy_until_us: i64,
}

fn object_id(key: usize) -> String {
    format!("sim\nkey-{key}")
}

/// Runs `scenario`.
pub fn run(scenario: &Scenario) -> Report {
    Sim::new(scenario).run()
}

struct Sim<'s> {
    s: &'s Scenario,
    rng: Rng,
    events: BinaryHeap<Reverse<(i64, u64, Event)>>,
    seq: u64,
    isolates: Vec<Isolate>,
    objects: HashMap<usize, Object>,
    calls: Vec<Pending>,
    settings: Option<LeaseSettings>,
    // Measurements.
    arrivals: Vec<(i64, usize)>,
    decisions: Vec<Option<bool>>,
    admitted_at: Vec<Vec<i64>>,
    latencies: Vec<i64>,
    call_seconds: HashMap<i64, u64>,
    report: Report,
}

impl<'s> Sim<'s> {
    fn new(s: &'s Scenario) -> Sim<'s> {
        let settings = s.lease.map(|(ttl, max)| LeaseSettings::new(ttl, max, s.limit.requests.get()));
        Sim {
            s,
            rng: Rng::new(s.seed),
            events: BinaryHeap::new(),
            seq: 0,
            isolates: (0..s.isolates).map(|_| Isolate::new(0)).collect(),
            objects: HashMap::new(),
            calls: Vec::new(),
            settings,
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
        let end_us = self.s.duration_ms * 1_000;
        while let Some(Reverse((t, _, event))) = self.events.pop() {
            match event {
                Event::Arrival { isolate } => {
                    if t >= end_us {
                        continue;
                    }
                    let next = self.s.arrivals[isolate % self.s.arrivals.len()].next(t, &mut self.rng);
                    self.at(next, Event::Arrival { isolate });
                    let key = if self.s.keys == 1 { 0 } else { self.rng.range(0, self.s.keys as i64 - 1) as usize };
                    let index = self.arrivals.len();
                    self.arrivals.push((t, key));
                    self.decisions.push(None);
                    self.request(t, isolate, key, Who { arrived: t, index, waits: 0 });
                }
                Event::AtObject { call } => self.at_object(t, call),
                Event::Answer { call } => self.answer(t, call),
                Event::Evict { isolate } => {
                    let generation = self.isolates[isolate].generation + 1;
                    // Requests waiting in the evicted isolate are lost with it.
                    let lost: Vec<_> = self.isolates[isolate].waiting.drain().collect();
                    for (_, waiting) in lost {
                        for who in waiting {
                            self.decide(who, t, None);
                        }
                    }
                    self.isolates[isolate] = Isolate::new(generation);
                }
            }
        }
        self.finish()
    }

    /// A request (or one woken after waiting) in `isolate` at `t`.
    fn request(&mut self, t: i64, isolate: usize, key: usize, who: Who) {
        let now_ms = t / 1_000;
        let first = who.waits == 0;
        let id = object_id(key);
        let iso = &mut self.isolates[isolate];
        if iso.blocked.blocked_until(&id, now_ms).is_some() {
            self.decide(who, t, Some(false));
            return;
        }
        let Some(settings) = self.settings.filter(LeaseSettings::can_lease) else {
            self.send(t, isolate, key, 1, who);
            return;
        };
        for refund in iso.leases.due_refunds(now_ms, settings.ttl_ms) {
            self.report.refunds += 1;
            let call = Call {
                op: Op::Refund,
                cost: refund.units,
                reservation: Some(refund.lease_id),
                want: None,
                hold_ms: None,
                ..self.call(Op::Hit)
            };
            let k: usize = refund.id.rsplit('-').next().and_then(|k| k.parse().ok()).unwrap_or(0);
            self.send_call(t, isolate, k, call, 0, NOBODY);
        }
        let iso = &mut self.isolates[isolate];
        let admit = if who.waits >= MAX_WAITS { Admit::Ask { want: 1 } } else { iso.leases.admit(&id, &settings, 1, now_ms, first) };
        match admit {
            Admit::Local { .. } => {
                // Spent at the isolate's (millisecond) clock.
                self.admitted_at[key].push(now_ms * 1_000);
                self.decide(who, t, Some(true));
            }
            Admit::Wait => iso.waiting.entry(key).or_default().push(Who { waits: who.waits + 1, ..who }),
            Admit::Unavailable => {
                self.report.on_error += 1;
                self.decide(who, t, None);
            }
            Admit::Scarce { .. } => self.decide(who, t, Some(false)),
            Admit::Ask { want } => self.send(t, isolate, key, want, who),
        }
    }

    fn call(&self, op: Op) -> Call {
        Call {
            op,
            algorithm: self.s.algorithm,
            limits: vec![self.s.limit],
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

    fn send(&mut self, t: i64, isolate: usize, key: usize, want: u32, who: Who) {
        let call = match self.settings {
            Some(s) if want > 1 => Call { op: Op::Lease, want: Some(want), hold_ms: Some(s.ttl_ms), ..self.call(Op::Hit) },
            _ => self.call(Op::Hit),
        };
        self.send_call(t, isolate, key, call, want, who);
    }

    fn send_call(&mut self, t: i64, isolate: usize, key: usize, call: Call, want: u32, who: Who) {
        let rtt_us = self.rng.range(self.s.rtt_ms.0 * 1_000, self.s.rtt_ms.1 * 1_000);
        *self.call_seconds.entry(t / 1_000_000).or_default() += 1;
        self.report.object_calls += 1;
        self.calls.push(Pending {
            isolate,
            generation: self.isolates[isolate].generation,
            key,
            sent_us: t,
            rtt_us,
            call,
            want,
            result: None,
            requester: who,
        });
        let call = self.calls.len() - 1;
        self.at(t + rtt_us / 2, Event::AtObject { call });
    }

    fn at_object(&mut self, t: i64, index: usize) {
        let restarting = self.s.restart.is_some_and(|(every, down)| (t / 1_000) % every < down && t / 1_000 >= every);
        let pending = &self.calls[index];
        let (timeout_us, sent, rtt) = (self.s.timeout_ms * 1_000, pending.sent_us, pending.rtt_us);
        if restarting {
            // Refused at once: the isolate hears of it after the way back.
            self.calls[index].result = Some(Err(()));
            self.at(t + rtt / 2, Event::Answer { call: index });
            return;
        }
        let object = self.objects.entry(pending.key).or_insert(Object { row: String::new(), busy_until_us: 0 });
        if object.busy_until_us - t > timeout_us {
            // Overloaded: the call would wait past its timeout; refused at
            // once (Cloudflare answers "overloaded"), and not served.
            self.calls[index].result = Some(Err(()));
            self.at(t + rtt / 2, Event::Answer { call: index });
            return;
        }
        let start = t.max(object.busy_until_us);
        object.busy_until_us = start + self.s.service_us;
        self.report.max_queue_ms = self.report.max_queue_ms.max((start - t) as f64 / 1_000.0);
        let decided_ms = start / 1_000;
        let result = match step(&object.row, decided_ms, &pending.call) {
            Ok(stepped) => {
                if let Some(write) = stepped.write {
                    object.row = write.row;
                }
                let granted = stepped.granted.unwrap_or(if stepped.tally.allowed { 1 } else { 0 });
                let windows = stepped.tally.windows.iter().map(crate::count::protocol::WireWindow::from).collect();
                Ok((stepped.tally.allowed, stepped.tally.retry_after_ms, stepped.reservation, granted, windows))
            }
            Err(_) => Err(()),
        };
        // The requester's unit (a hit, or the first of a lease) counts when
        // the object decided it, if the isolate is still there to hear.
        let answered = start + self.s.service_us + rtt / 2;
        let late = answered - sent > timeout_us;
        if let (Ok((true, ..)), false) = (&result, late) {
            if pending.call.op != Op::Refund && pending.requester.index != usize::MAX {
                // At the object's (millisecond) clock, when it decided.
                self.admitted_at[pending.key].push(decided_ms * 1_000);
            }
        }
        self.calls[index].result = Some(if late { Err(()) } else { result });
        self.at(if late { sent + timeout_us } else { answered }, Event::Answer { call: index });
    }

    fn answer(&mut self, t: i64, index: usize) {
        let pending = self.calls[index].clone();
        if pending.call.op == Op::Refund {
            return;
        }
        let iso = &mut self.isolates[pending.isolate];
        if iso.generation != pending.generation {
            // Evicted meanwhile: the answer has no one to go to.
            let admitted = matches!(pending.result, Some(Ok((true, ..))));
            self.decide(pending.requester, t, admitted.then_some(true));
            return;
        }
        let id = object_id(pending.key);
        let now_ms = t / 1_000;
        let sent_ms = pending.sent_us / 1_000;
        let (requester_admitted, on_error) = match &pending.result {
            Some(Ok((allowed, retry_after, lease_id, granted, windows))) => {
                if let Some(settings) = self.settings {
                    iso.leases.granted(&id, &settings, sent_ms, 1, *granted, *lease_id, windows);
                }
                if !allowed {
                    iso.blocked.insert(&id, Block { until_ms: now_ms + *retry_after as i64, window: 0, limits: Vec::new(), by: crate::count::blocked::Refusal::Limit }, now_ms);
                }
                (*allowed, false)
            }
            _ => {
                self.report.failed_calls += 1;
                iso.leases.failed(&id, now_ms);
                (false, true)
            }
        };
        let _ = pending.want;
        if on_error {
            self.report.on_error += 1;
            self.decide(pending.requester, t, None);
        } else {
            self.decide(pending.requester, t, Some(requester_admitted));
        }
        // Wake the requests waiting on this call.
        let waiting = self.isolates[pending.isolate].waiting.remove(&pending.key).unwrap_or_default();
        for who in waiting {
            self.request(t, pending.isolate, pending.key, who);
        }
    }

    /// Records request `index`'s answer (`None`: on_error, fail closed).
    fn decide(&mut self, who: Who, t: i64, admitted: Option<bool>) {
        if who.index == usize::MAX {
            return;
        }
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

/// The scenarios of issue 12, scaled by `scale` in time (1.0: the long
/// run; the limit's window is scaled with the duration, so a short run
/// sees the same number of windows' worth of behaviour, faster).
pub fn scenarios(scale: f64) -> Vec<Scenario> {
    let minute = ((60_000.0 * scale) as u64).max(1_000);
    let duration = (180_000.0 * scale) as i64;
    let limit_per = |n: f64| Limit::new((n * scale).max(1.0) as u32, minute).unwrap_or(Limit { requests: std::num::NonZeroU32::MIN, window_ms: std::num::NonZeroU64::MIN });
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
