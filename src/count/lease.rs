//! Leased budgets: one key far past one object's capacity, with
//! no over-admission. Pure, time injected; the isolate's side of it. The
//! object's side is the `lease` and `refund` ops ([`crate::count::counter`]).
//!
//! # The design
//! An isolate that needs tokens for a (rule, key) asks the key's object for
//! `want` units; the object grants `g` of them, `cost ≤ g ≤ want` (or none),
//! and debits them at once. The isolate then admits requests from the
//! tokens it holds, with no object call, until they run out or the lease
//! expires; unspent tokens go back (`refund`) the next time the isolate runs
//! after the expiry. At low rates `want` is the request's own cost and the
//! isolate sends a plain `hit`: exactly what it did before leases.
//!
//! - **Lease size** ([`KeyLease::want`]): the arrivals this isolate saw on
//!   the key in the last `lease_ttl` (≈ rate × ttl), plus the requests
//!   waiting on the call, capped by `lease_max` and by the limit's
//!   1/[`LEASE_FRACTION`] (a limit under 32 never leases). The object
//!   grants at most 1/[`GRANT_SPREAD`] of what is left ([`grant_size`]), so
//!   the last tokens are spread thin over the isolates that ask. Under
//!   [`MIN_LEASE`] requests per `lease_ttl` the isolate sends a plain hit.
//! - **Single flight**: at most one call per (rule, key) in flight in an
//!   isolate ([`Admit::Wait`]); the requests that arrive meanwhile wait for
//!   it and then spend its grant.
//! - **Faults**: a failed call backs the key off (doubling from
//!   [`BACKOFF_MIN_MS`] to [`BACKOFF_MAX_MS`]) once it leases
//!   ([`Admit::Unavailable`]: the rule's `on_error`, no call); the tokens it
//!   holds are still spent first. A key at `want = 1` never backs off: each
//!   request asks, as before.
//!
//! # Never over-admitting (the sliding log)
//! The object dates leased tokens at the lease's expiry `E = s + ttl` (`s`
//! the object's time when it granted them), and a window read at time `t`
//! counts every hit dated after `t − W`, those dated in the future included
//! ([`crate::count::window::decide`]). The isolate measures the lease from when it
//! *sent* the call, `sent + ttl ≤ s + ttl = E`, so every token is spent at a
//! time `t_u` with `d_u ≤ t_u ≤ r_u`: after the decision `d_u` that granted
//! it and no later than the time `r_u` it is dated at. Take any window
//! `(a, a + W]` and the units spent in it; let `d*` be the latest decision
//! among them (`d* ≤ a + W`). Every other unit `u` was decided before
//! `d*` and dated `r_u ≥ t_u > a ≥ d* − W`, so the decision at `d*` counted
//! it (it was neither pruned, being less than a window old, nor refunded,
//! being spent). That decision allowed its own units only if they fit with
//! all it counted: the window holds at most the limit. The same holds for
//! every window of a rule at once, and for hits (`r_u = t_u = d_u`).
//!
//! **Clock assumption**: the isolate's clock may lag the object's, never
//! lead it by more than the margin nothing accounts for: a token must be
//! spent, in the object's time, no later than `E`. Workers freeze
//! `Date.now()` between I/O (it reads the time of the last I/O, never a
//! later one), so `sent` read before the call is at most the real send time.
//!
//! **Under-admission** is bounded by the tokens leased and not yet spent or
//! refunded (at most `lease_max` per isolate and key, at most a
//! 1/[`GRANT_SPREAD`] of what was left per grant), plus, for every leased
//! token, `ttl` more in the window than a hit's: a token leased at `s` leaves
//! the window at `s + ttl + W`. An evicted isolate's tokens are never
//! refunded: they lapse with their window.
//!
//! # GCRA
//! A GCRA lease is `g` units recorded at the grant (`tat += g·T`), spent
//! until `s + ttl`. GCRA admits at most `N + ⌈L / T⌉ − 1` units (`T = W/N`)
//! in any half-open interval of length `L` of decisions (a full backlog of
//! `N` at its start, then one per `T`; `L = W` gives the `2N − 1` of
//! [`crate::count::gcra`]). Units spent in a real-use window `[a, a + W)` were
//! granted in `[a − ttl, a + W)`, an interval of length `W + ttl`: at most
//! `2N − 1 + ⌈ttl · N / W⌉` per window of real use, and the long-run rate is
//! still `N / W` (refunds only move `tat` back over units never spent,
//! never before now). `lease_ttl` of 1 s on 5,000 per minute adds 84.
//! `gcra_lease_bound` tests it.

use crate::count::protocol::WireWindow;
use std::collections::HashMap;

/// The isolate asks for at most 1/`LEASE_FRACTION` of a rule's smallest
/// limit: a limit under `2 × LEASE_FRACTION` never leases (each request is
/// one `hit`, as before leases), and a limit of 5,000 leases at most 312.
pub(crate) const LEASE_FRACTION: u32 = 16;

/// The object grants at most 1/`GRANT_SPREAD` of the room left (and at
/// least the request's cost): the last tokens are spread over the isolates
/// that ask instead of going to the first.
pub(crate) const GRANT_SPREAD: u64 = 4;

/// The smallest lease worth asking for: below it the isolate sends a plain
/// `hit` (a lease of 2 saves one call, and dates its tokens a lease later),
/// so keys at a few requests per `lease_ttl` behave exactly as before.
pub(crate) const MIN_LEASE: u32 = 4;

/// The first back-off after a failed call; it doubles per failure.
pub(crate) const BACKOFF_MIN_MS: i64 = 50;
/// The longest back-off.
pub(crate) const BACKOFF_MAX_MS: i64 = 2_000;

/// Default `lease_ttl`: one second. Leased tokens stay debited this much
/// longer than hits; one second is 1.7% of a one-minute window.
pub(crate) const DEFAULT_LEASE_TTL_MS: u64 = 1_000;
/// Default `lease_max`.
pub(crate) const DEFAULT_LEASE_MAX: u32 = 1_000;

/// Keys an isolate tracks at most; idle ones are dropped first.
pub(crate) const DEFAULT_CAPACITY: usize = 4_096;

/// How many units a `lease` of `want` (for a request of `cost`) gets when
/// `room` is left: 0 if not even `cost` fits; else `want`, but at most
/// 1/[`GRANT_SPREAD`] of the room, never below `cost`.
pub(crate) fn grant_size(want: u32, cost: u32, room: u64) -> u32 {
    if room < u64::from(cost) {
        return 0;
    }
    let share = (room / GRANT_SPREAD).max(u64::from(cost));
    u32::try_from(share.min(u64::from(want.max(cost)))).unwrap_or(cost)
}

/// A rule's lease settings, validated (`lease`, `lease_ttl`, `lease_max`
/// in the config; `None` on the rule when `lease = "off"` or forced off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseSettings {
    /// How long a lease lasts, from when its call is sent.
    pub(crate) ttl_ms: u64,
    /// The most units one lease asks for.
    pub(crate) max: u32,
    /// `max(1, smallest limit / LEASE_FRACTION)`: the most any lease of
    /// this rule asks for, whatever `max` says.
    pub(crate) ceiling: u32,
}

impl LeaseSettings {
    /// The settings of a rule whose smallest limit is `smallest_limit`.
    pub(crate) fn new(ttl_ms: u64, max: u32, smallest_limit: u32) -> LeaseSettings {
        LeaseSettings { ttl_ms, max, ceiling: (smallest_limit / LEASE_FRACTION).max(1) }
    }

    /// Whether this rule can ever lease more than one unit.
    pub(crate) fn can_lease(&self) -> bool {
        self.ceiling > 1 && self.max > 1
    }
}

/// A rule's `lease` setting, as validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMode {
    /// `lease = "auto"` (the default): leases sized to the key's rate in
    /// each isolate, one unit (a plain hit) at low rates.
    Auto(LeaseSettings),
    /// `lease = "off"`: every request asks the object, as before leases.
    Off,
    /// Auto was asked for (or defaulted to), but leasing cannot be exact
    /// for this rule: why. Every request asks the object.
    ForcedOff(&'static str),
}

impl LeaseMode {
    /// The settings when the rule leases.
    pub(crate) fn settings(&self) -> Option<&LeaseSettings> {
        match self {
            LeaseMode::Auto(settings) => Some(settings),
            _ => None,
        }
    }

    /// Whether the rule can ever lease more than one unit.
    pub(crate) fn leases(&self) -> bool {
        self.settings().is_some_and(LeaseSettings::can_lease)
    }

    /// One line for `tollgate check`, `explain` and the console's Rules page.
    pub(crate) fn describe(&self) -> String {
        match self {
            LeaseMode::Auto(s) if s.can_lease() => format!(
                "auto: up to {} units per lease (lease_max {}, 1/{LEASE_FRACTION} of the smallest limit {}), for {} ms from the call; one unit (a plain hit) at low rates",
                s.max.min(s.ceiling),
                s.max,
                s.ceiling,
                s.ttl_ms
            ),
            LeaseMode::Auto(_) => {
                format!("auto, but never above one unit (a limit under {} or lease_max 1): one object call per request", 2 * LEASE_FRACTION)
            }
            LeaseMode::Off => "off: one object call per request".to_string(),
            LeaseMode::ForcedOff(why) => format!("off ({why}): one object call per request"),
        }
    }
}

/// Why `counting.statuses` rules never lease.
pub(crate) const OFF_TWO_PHASE: &str = "counting = { mode = \"response\" } settles after the origin answers; a lease debits before";
/// Why rules whose success clears or forgives never lease.
pub(crate) const OFF_ON_SUCCESS: &str =
    "a success clears or forgives the count, which would drop tokens other isolates still hold and may spend";

/// What a request for a leased (rule, key) does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Admitted from tokens this isolate holds: no object call. `windows`
    /// are the last reply's, with the tokens still held counted as
    /// remaining (for the `RateLimit` fields).
    Local { windows: Vec<WireWindow> },
    /// Ask the object: a plain `hit` when `want` is the request's cost, a
    /// `lease` of `want` otherwise. The caller must report the answer with
    /// [`Leases::granted`] or [`Leases::failed`].
    Ask { want: u32 },
    /// A call for this key is in flight: wait for it, then admit again.
    Wait,
    /// The object failed recently and nothing is held: apply the rule's
    /// `on_error` without a call (back-off).
    Unavailable,
    /// A request that waited on a call whose grant fell short of what was
    /// asked (the object is spreading its last tokens thin) and found none
    /// left: answered 429 for `retry_after_ms` (one lease), with the last
    /// reply's `windows`, instead of queueing for yet another call. Not an
    /// exact block: not cached. New arrivals still ask, so the room the
    /// object frees is still taken.
    Scarce { retry_after_ms: u64, windows: Vec<WireWindow> },
}

/// Unspent tokens to give back to the object named `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refund {
    pub(crate) id: String,
    /// The lease's id (its expiry, as the object dated it).
    pub(crate) lease_id: u64,
    pub(crate) units: u32,
}

/// One (rule, key)'s lease state in this isolate.
#[derive(Debug, Clone, Default)]
struct KeyLease {
    /// Tokens held, spendable until `expires_at`.
    held: u32,
    lease_id: u64,
    expires_at: i64,
    /// The last reply's windows (for the `RateLimit` fields of local admits).
    windows: Vec<WireWindow>,
    /// Arrivals in the current and the previous period of `ttl_ms`.
    period_start: i64,
    this_period: u32,
    last_period: u32,
    /// When the call in flight was sent, if one is.
    in_flight_since: Option<i64>,
    /// Requests waiting on that call.
    waiting: u32,
    /// What the call in flight (or the last one) asked for.
    asked: u32,
    /// The last grant fell short of what was asked.
    scarce: bool,
    failures: u32,
    backoff_until: i64,
    last_seen: i64,
}

impl KeyLease {
    /// Counts one arrival at `now` in the rate estimate.
    fn arrive(&mut self, now: i64, ttl: i64) {
        let elapsed = now.saturating_sub(self.period_start);
        if elapsed >= ttl {
            self.last_period = if elapsed >= 2 * ttl { 0 } else { self.this_period };
            self.this_period = 0;
            self.period_start = now;
        }
        self.this_period = self.this_period.saturating_add(1);
        self.last_seen = now;
    }

    /// The units to ask for, for a request of `cost`: about rate × ttl
    /// (the arrivals in the last full period, or in this one if more),
    /// plus those waiting, within the rule's caps; just `cost` (a plain
    /// hit) when that comes to less than [`MIN_LEASE`] requests.
    fn want(&self, settings: &LeaseSettings, cost: u32) -> u32 {
        let requests = self.this_period.max(self.last_period).saturating_add(self.waiting);
        if requests < MIN_LEASE {
            return cost;
        }
        requests.saturating_mul(cost).min(settings.max).min(settings.ceiling).max(cost)
    }

    fn in_flight(&self, now: i64, stale_after: i64) -> bool {
        self.in_flight_since.is_some_and(|since| now.saturating_sub(since) < stale_after)
    }
}

/// The isolate's lease book: (rule, key) → tokens held, rate, flight,
/// back-off; and the refunds owed. Capped at `capacity` keys.
#[derive(Debug)]
pub(crate) struct Leases {
    keys: HashMap<String, KeyLease>,
    capacity: usize,
    refunds: Vec<Refund>,
    next_sweep: i64,
}

impl Leases {
    pub(crate) fn new(capacity: usize) -> Leases {
        Leases { keys: HashMap::new(), capacity, refunds: Vec::new(), next_sweep: i64::MIN }
    }

    /// What a request of `cost` on `id` does at `now`. `first` is false
    /// when the same request asks again after waiting ([`Admit::Wait`]):
    /// it is not counted twice in the rate.
    pub(crate) fn admit(&mut self, id: &str, settings: &LeaseSettings, cost: u32, now: i64, first: bool) -> Admit {
        let ttl = i64::try_from(settings.ttl_ms).unwrap_or(i64::MAX).max(1);
        if !self.keys.contains_key(id) {
            if self.keys.len() >= self.capacity {
                self.sweep(now, ttl, true);
            }
            if self.keys.len() >= self.capacity {
                // No room to track it: no single flight, no lease.
                return Admit::Ask { want: cost };
            }
            self.keys.insert(id.to_string(), KeyLease { period_start: now, ..KeyLease::default() });
        }
        let Some(key) = self.keys.get_mut(id) else { return Admit::Ask { want: cost } };
        if first {
            key.arrive(now, ttl);
        } else {
            key.waiting = key.waiting.saturating_sub(1);
        }
        lapse(id, key, now, &mut self.refunds);
        if key.held >= cost {
            key.held -= cost;
            let windows = with_held(&key.windows, key.held);
            return Admit::Local { windows };
        }
        if key.in_flight(now, stale_after(ttl)) {
            key.waiting = key.waiting.saturating_add(1);
            return Admit::Wait;
        }
        if !first && key.scarce {
            return Admit::Scarce { retry_after_ms: settings.ttl_ms, windows: key.windows.clone() };
        }
        let want = key.want(settings, cost);
        if key.backoff_until > now && key.failures > 0 && want > cost {
            return Admit::Unavailable;
        }
        if key.held > 0 {
            // Too few for this cost: give them back rather than strand them.
            self.refunds.push(Refund { id: id.to_string(), lease_id: key.lease_id, units: key.held });
            key.held = 0;
        }
        key.in_flight_since = Some(now);
        key.asked = want;
        Admit::Ask { want }
    }

    /// The object answered the call sent at `sent_at` for a request of
    /// `cost`: it granted `granted` units (a hit: `cost` if allowed, 0 if
    /// not) under lease `lease_id`, with these `windows`. The asking
    /// request spends `cost` of them (it is admitted iff `granted ≥ cost`);
    /// the rest are held until `sent_at + ttl`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn granted(
        &mut self,
        id: &str,
        settings: &LeaseSettings,
        sent_at: i64,
        cost: u32,
        granted: u64,
        lease_id: Option<u64>,
        windows: &[WireWindow],
    ) {
        let Some(key) = self.keys.get_mut(id) else {
            if let (Some(lease_id), Ok(extra)) = (lease_id, u32::try_from(granted.saturating_sub(u64::from(cost)))) {
                if extra > 0 {
                    self.refunds.push(Refund { id: id.to_string(), lease_id, units: extra });
                }
            }
            return;
        };
        key.in_flight_since = None;
        key.failures = 0;
        key.backoff_until = 0;
        key.windows = windows.to_vec();
        key.scarce = granted < u64::from(key.asked.max(cost));
        let extra = u32::try_from(granted.saturating_sub(u64::from(cost))).unwrap_or(u32::MAX);
        if extra == 0 {
            return;
        }
        if key.held > 0 {
            self.refunds.push(Refund { id: id.to_string(), lease_id: key.lease_id, units: key.held });
        }
        key.held = extra;
        key.lease_id = lease_id.unwrap_or(0);
        key.expires_at = sent_at.saturating_add(i64::try_from(settings.ttl_ms).unwrap_or(i64::MAX));
    }

    /// The call for `id` failed at `now` (unreachable, overloaded, timed
    /// out): back off before the next, doubling per failure in a row.
    pub(crate) fn failed(&mut self, id: &str, now: i64) {
        if let Some(key) = self.keys.get_mut(id) {
            key.in_flight_since = None;
            key.failures = key.failures.saturating_add(1);
            let shift = (key.failures - 1).min(16);
            key.backoff_until = now.saturating_add((BACKOFF_MIN_MS << shift).min(BACKOFF_MAX_MS));
        }
    }

    /// The call in flight for `id` was dropped before it finished (its
    /// request was cancelled): the next request asks again, with no
    /// back-off (nothing failed).
    pub(crate) fn abandon(&mut self, id: &str) {
        if let Some(key) = self.keys.get_mut(id) {
            key.in_flight_since = None;
        }
    }

    /// The refunds owed at `now`: tokens of expired leases, and tokens
    /// set aside before. Lazy: an isolate sweeps every key at most once
    /// per `ttl_ms`, and only when it runs.
    pub(crate) fn due_refunds(&mut self, now: i64, ttl_ms: u64) -> Vec<Refund> {
        if now >= self.next_sweep {
            let ttl = i64::try_from(ttl_ms).unwrap_or(i64::MAX).max(1);
            self.sweep(now, ttl, false);
            self.next_sweep = now.saturating_add(ttl);
        }
        std::mem::take(&mut self.refunds)
    }

    /// Lapses expired leases into refunds; drops idle keys (nothing held,
    /// nothing in flight, unseen for two periods), or when `evict`, any key
    /// holding nothing, so that a new one fits.
    fn sweep(&mut self, now: i64, ttl: i64, evict: bool) {
        let refunds = &mut self.refunds;
        self.keys.retain(|id, key| {
            lapse(id, key, now, refunds);
            let busy = key.held > 0 || key.in_flight(now, stale_after(ttl));
            let idle = now.saturating_sub(key.last_seen) >= 2 * ttl;
            busy || !(idle || evict)
        });
    }
}

/// Moves the tokens of an expired lease of `key` to `refunds`.
fn lapse(id: &str, key: &mut KeyLease, now: i64, refunds: &mut Vec<Refund>) {
    if key.held > 0 && now >= key.expires_at {
        refunds.push(Refund { id: id.to_string(), lease_id: key.lease_id, units: key.held });
        key.held = 0;
    }
}

/// A call in flight longer than this is taken as lost (its request was
/// cancelled before it finished): the next request asks again.
fn stale_after(ttl: i64) -> i64 {
    ttl.max(1_000).saturating_mul(2)
}

/// The last reply's windows with `held` tokens counted as remaining (they
/// are this isolate's to spend), never above the limit: the `RateLimit`
/// fields of a request admitted from a lease, or that took one.
pub(crate) fn with_held(windows: &[WireWindow], held: u32) -> Vec<WireWindow> {
    windows
        .iter()
        .map(|w| WireWindow {
            used: w.used.saturating_sub(u64::from(held)),
            remaining: (w.remaining + u64::from(held)).min(u64::from(w.limit)),
            ..w.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> LeaseSettings {
        LeaseSettings::new(1_000, 1_000, 5_000)
    }

    /// A book whose key `k` saw 50 one-unit hits in its first second, and
    /// the lease it then asks for at t = 1 s (its call now in flight).
    fn busy_key_asking(s: &LeaseSettings) -> (Leases, u32) {
        let mut leases = Leases::new(16);
        for t in 0..50 {
            leases.admit("k", s, 1, t * 20, true);
            leases.granted("k", s, t * 20, 1, 1, None, &windows(0, 4_000));
        }
        let Admit::Ask { want } = leases.admit("k", s, 1, 1_000, true) else { panic!("a busy key asks for a lease") };
        (leases, want)
    }

    fn windows(used: u64, remaining: u64) -> Vec<WireWindow> {
        vec![WireWindow { limit: 5_000, window_ms: 60_000, used, remaining, reset_ms: 0, calendar: None }]
    }

    #[test]
    fn grants_spread_the_last_tokens_thin() {
        assert_eq!(grant_size(100, 1, 5_000), 100);
        assert_eq!(grant_size(100, 1, 200), 50, "a quarter of what is left");
        assert_eq!(grant_size(100, 1, 3), 1, "at least the cost");
        assert_eq!(grant_size(100, 2, 1), 0, "not even the cost: blocked");
        assert_eq!(grant_size(1, 1, 0), 0);
        assert_eq!(grant_size(1, 3, 100), 3, "want below cost reads as cost");
    }

    #[test]
    fn small_limits_never_lease() {
        assert!(!LeaseSettings::new(1_000, 1_000, 10).can_lease());
        assert!(!LeaseSettings::new(1_000, 1_000, 31).can_lease());
        assert!(LeaseSettings::new(1_000, 1_000, 32).can_lease());
        assert_eq!(LeaseSettings::new(1_000, 1_000, 5_000).ceiling, 312);
        // Even a burst on a 10-per-minute key asks one unit at a time.
        let s = LeaseSettings::new(1_000, 1_000, 10);
        let mut leases = Leases::new(16);
        for t in 0..20 {
            assert_eq!(leases.admit("ip", &s, 1, t, true), Admit::Ask { want: 1 }, "request {t}");
            leases.granted("ip", &s, t, 1, 1, None, &windows(1, 9));
        }
    }

    /// A few requests per lease_ttl are plain hits, each one call.
    #[test]
    fn a_few_requests_per_period_never_lease() {
        let s = settings();
        let mut leases = Leases::new(16);
        for t in 0..3 {
            assert_eq!(leases.admit("k", &s, 1, t, true), Admit::Ask { want: 1 }, "request {t}");
            leases.granted("k", &s, t, 1, 1, None, &windows(1, 4_999));
        }
        assert!(matches!(leases.admit("k", &s, 1, 3, true), Admit::Ask { want: 4 }), "the fourth in a period leases");
    }

    /// At low rates every request is one call (today's behaviour); as the
    /// rate grows, the lease grows with it and calls become rare.
    #[test]
    fn want_follows_the_rate() {
        let s = settings();
        let mut leases = Leases::new(16);
        assert_eq!(leases.admit("k", &s, 1, 0, true), Admit::Ask { want: 1 });
        leases.granted("k", &s, 0, 1, 1, None, &windows(1, 4_999));
        assert_eq!(leases.admit("k", &s, 1, 1_500, true), Admit::Ask { want: 1 }, "one per second");
        leases.granted("k", &s, 1_500, 1, 1, None, &windows(2, 4_998));
        // 100 requests in the next second, each one call while the lease grows.
        let mut calls = 0;
        for i in 0..100 {
            let now = 2_000 + i * 10;
            match leases.admit("k", &s, 1, now, true) {
                Admit::Ask { want } => {
                    calls += 1;
                    leases.granted("k", &s, now, 1, u64::from(want), Some(now as u64 + 1_000), &windows(0, 4_000));
                }
                Admit::Local { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(calls < 15, "{calls} calls for 100 requests");
        // The next second: one lease of about the rate covers it.
        let mut calls = 0;
        for i in 0..100 {
            let now = 3_000 + i * 10;
            if let Admit::Ask { want } = leases.admit("k", &s, 1, now, true) {
                calls += 1;
                assert!(want >= 50, "{want}: at least the last period's arrivals");
                leases.granted("k", &s, now, 1, u64::from(want), Some(now as u64 + 1_000), &windows(0, 4_000));
            }
        }
        assert!(calls <= 3, "{calls} calls");
    }

    #[test]
    fn single_flight_and_waiters_share_the_grant() {
        let s = settings();
        let (mut leases, want) = busy_key_asking(&s);
        for _ in 0..5 {
            assert_eq!(leases.admit("k", &s, 1, 1_001, true), Admit::Wait, "one call in flight");
        }
        leases.granted("k", &s, 1_000, 1, u64::from(want), Some(2_000), &windows(60, 4_000));
        for _ in 0..5 {
            let Admit::Local { windows } = leases.admit("k", &s, 1, 1_002, false) else { panic!() };
            assert!(windows[0].remaining > 4_000, "held tokens count as remaining");
        }
        assert_eq!(leases.held("k", 1_002), want - 6);
    }

    /// Waiters that find the grant spent, when it fell short of the ask,
    /// are answered 429 at once rather than queued for another call; new
    /// arrivals still ask.
    #[test]
    fn a_short_grant_turns_waiters_away() {
        let s = settings();
        let (mut leases, want) = busy_key_asking(&s);
        assert!(want > 3);
        for _ in 0..4 {
            assert_eq!(leases.admit("k", &s, 1, 1_001, true), Admit::Wait);
        }
        leases.granted("k", &s, 1_000, 1, 3, Some(2_000), &windows(4_997, 3));
        assert!(matches!(leases.admit("k", &s, 1, 1_050, false), Admit::Local { .. }));
        assert!(matches!(leases.admit("k", &s, 1, 1_050, false), Admit::Local { .. }));
        assert_eq!(leases.admit("k", &s, 1, 1_050, false), Admit::Scarce { retry_after_ms: 1_000, windows: windows(4_997, 3) });
        assert!(matches!(leases.admit("k", &s, 1, 1_060, true), Admit::Ask { .. }), "a new arrival asks");
    }

    #[test]
    fn expired_tokens_are_never_spent_and_go_back() {
        let s = settings();
        let mut leases = Leases::new(16);
        leases.admit("k", &s, 1, 0, true);
        leases.granted("k", &s, 0, 1, 10, Some(1_000), &windows(10, 4_990));
        assert!(matches!(leases.admit("k", &s, 1, 999, true), Admit::Local { .. }), "until sent + ttl");
        assert_eq!(leases.held("k", 999), 8);
        assert!(matches!(leases.admit("k", &s, 1, 1_000, true), Admit::Ask { .. }), "expired at sent + ttl");
        let refunds = leases.due_refunds(1_000, 1_000);
        assert_eq!(refunds, vec![Refund { id: "k".into(), lease_id: 1_000, units: 8 }]);
        assert!(leases.due_refunds(1_001, 1_000).is_empty(), "refunded once");
    }

    /// The expiry counts from when the call was *sent*, not answered.
    #[test]
    fn lease_runs_from_the_send() {
        let s = settings();
        let mut leases = Leases::new(16);
        leases.admit("k", &s, 1, 0, true);
        leases.granted("k", &s, 0, 1, 10, Some(1_090), &windows(10, 4_990));
        assert_eq!(leases.held("k", 999), 9);
        assert_eq!(leases.held("k", 1_000), 0, "answered at 90 ms, still over at 1 000");
    }

    #[test]
    fn a_failing_object_backs_off_once_the_key_leases() {
        let s = settings();
        let mut leases = Leases::new(16);
        // A cold key asks on every request even while failing.
        for t in 0..3 {
            assert_eq!(leases.admit("cold", &s, 1, t * 5_000, true), Admit::Ask { want: 1 });
            leases.failed("cold", t * 5_000);
        }
        // A hot key holding tokens spends them, then backs off.
        for t in 0..40 {
            leases.admit("hot", &s, 1, t, true);
            leases.granted("hot", &s, t, 1, 1, None, &windows(0, 4_000));
        }
        let Admit::Ask { .. } = leases.admit("hot", &s, 1, 40, true) else { panic!() };
        leases.granted("hot", &s, 40, 1, 3, Some(1_040), &windows(0, 4_000));
        assert!(matches!(leases.admit("hot", &s, 1, 41, true), Admit::Local { .. }));
        assert!(matches!(leases.admit("hot", &s, 1, 42, true), Admit::Local { .. }));
        let Admit::Ask { .. } = leases.admit("hot", &s, 1, 43, true) else { panic!() };
        leases.failed("hot", 43);
        assert_eq!(leases.admit("hot", &s, 1, 44, true), Admit::Unavailable);
        assert!(matches!(leases.admit("hot", &s, 1, 43 + BACKOFF_MIN_MS, true), Admit::Ask { .. }));
        leases.failed("hot", 93);
        assert_eq!(leases.admit("hot", &s, 1, 93 + BACKOFF_MIN_MS, true), Admit::Unavailable, "doubled");
        assert!(matches!(leases.admit("hot", &s, 1, 93 + 2 * BACKOFF_MIN_MS, true), Admit::Ask { .. }));
    }

    #[test]
    fn a_lost_flight_does_not_block_the_key_forever() {
        let s = settings();
        let mut leases = Leases::new(16);
        assert!(matches!(leases.admit("k", &s, 1, 0, true), Admit::Ask { .. }));
        assert_eq!(leases.admit("k", &s, 1, 1, true), Admit::Wait);
        assert!(matches!(leases.admit("k", &s, 1, 2_000, true), Admit::Ask { .. }), "stale after 2 s");
    }

    #[test]
    fn the_book_is_capped_and_idle_keys_go_first() {
        let s = settings();
        let mut leases = Leases::new(2);
        leases.admit("a", &s, 1, 0, true);
        leases.granted("a", &s, 0, 1, 5, Some(1_000), &windows(0, 10));
        leases.admit("b", &s, 1, 0, true);
        leases.granted("b", &s, 0, 1, 1, None, &windows(0, 10));
        leases.admit("c", &s, 1, 10, true);
        assert_eq!(leases.len(), 2);
        assert_eq!(leases.held("a", 10), 4, "a key holding tokens stays");
        assert_eq!(leases.admit("d", &s, 1, 10, true), Admit::Ask { want: 1 }, "full: asked, untracked");
    }

    impl Leases {
        /// Keys tracked.
        pub(crate) fn len(&self) -> usize {
            self.keys.len()
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.keys.is_empty()
        }
        /// Tokens held for `id` at `now` (0 once expired).
        pub(crate) fn held(&self, id: &str, now: i64) -> u32 {
            self.keys.get(id).filter(|k| now < k.expires_at).map_or(0, |k| k.held)
        }
    }
}
