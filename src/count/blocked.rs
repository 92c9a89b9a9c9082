//! The isolate's blocked-until cache.
//!
//! Once a limiter object answers "blocked until T" for a (rule, key), further
//! requests for it in the same isolate are answered 429 until T without
//! calling the object: a client under block costs no Durable Object request.
//! This is exact for the sliding log, because a blocked request records
//! nothing, so nothing the object would do could unblock the key earlier
//! (except an operator's reset, which reaches only the object).
//!
//! An entry is trusted for at most [`RECHECK_MS`]: past that, the
//! next request of the key asks the object again, which refuses it again
//! (and the cache keeps the new answer) unless an operator reset or lifted
//! the key meanwhile. The admin API is served by a Worker of its own, which
//! reaches no isolate of the zone's Worker: this bounds how long a reset,
//! a lifted ban or a cleared penalty goes unseen by an isolate that cached
//! the key's block, at one object call per blocked key per isolate every
//! 10 s.
//!
//! The cache holds at most `capacity` entries so a flood of distinct keys
//! cannot grow the isolate's memory. When full, expired entries are dropped
//! first, then the entry that expires soonest (the least valuable one).

use std::collections::HashMap;

/// Default capacity: 10,000 keys of ~100 bytes, plus 16 bytes per window
/// of the limits kept (at most 8), is about 1-3 MB of an isolate's 128 MB.
pub(crate) const DEFAULT_CAPACITY: usize = 10_000;

/// How long a cached block is trusted before the object is asked again
/// (a reset or lift made elsewhere is seen within it).
pub(crate) const RECHECK_MS: i64 = 10_000;

/// A cached block: until when (Unix ms), which window binds and the
/// limits that decided (for the `RateLimit` fields of the answers given
/// from the cache: without them, a runtime override's 2 per 30 s was reported
/// as the config's 10 per 60 s once the block came from the cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    /// When the block ends (Unix ms).
    pub(crate) until_ms: i64,
    /// The index of the binding window among `limits`.
    pub(crate) window: usize,
    /// The `(requests, window_ms)` of every window the object decided by
    /// (the key's own limits under an override), in order; empty when not
    /// known (a ban cached by the admin call): the rule's are reported.
    pub(crate) limits: Vec<(u32, u64, Option<crate::count::calendar::Unit>)>,
    /// Why the key is refused: its count, a ban, or a penalty
    /// ([`crate::count::penalty`]; cached to its end, as any block: nothing
    /// but an admin reset lifts it earlier).
    pub(crate) by: Refusal,
}

/// Why a counter refused a key (the `reason` of its block lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Refusal {
    /// A window of the rule is full.
    #[default]
    Limit,
    /// An operator banned the key (admin API): the object's answer binds
    /// no window.
    Ban,
    /// The rule's penalty is in force (the answer carries its end).
    Penalty,
    /// Every slot of the rule's `concurrency` is taken (never cached: a
    /// slot is back as soon as a request in flight ends).
    Concurrency,
}

impl Refusal {
    /// Why the object refused, from its answer: a penalty's end; a
    /// refusal that binds no window, owed to requests in flight (the
    /// slots: [`crate::count::slots::refused`]) or not (a ban: the limits
    /// did not refuse); else the count.
    pub(crate) fn of(binding: Option<usize>, penalty_until_ms: Option<i64>, in_flight: bool) -> Refusal {
        match (penalty_until_ms, binding, in_flight) {
            (Some(_), _, _) => Refusal::Penalty,
            (None, None, true) => Refusal::Concurrency,
            (None, None, false) => Refusal::Ban,
            (None, Some(_), _) => Refusal::Limit,
        }
    }

    /// Its name in log lines.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::Limit => "limit",
            Refusal::Ban => "ban",
            Refusal::Penalty => "penalty",
            Refusal::Concurrency => "concurrency",
        }
    }
}

/// A capped map from (rule, key) to the block in force.
#[derive(Debug)]
pub(crate) struct BlockedUntilCache {
    until: HashMap<String, Cached>,
    capacity: usize,
}

/// A block as cached: trusted until `ask_at` (at most [`RECHECK_MS`] after
/// it was cached), never past its end.
#[derive(Debug)]
struct Cached {
    block: Block,
    ask_at: i64,
}

impl Cached {
    fn holds(&self, now_ms: i64) -> bool {
        self.block.until_ms.min(self.ask_at) > now_ms
    }
}

impl BlockedUntilCache {
    /// An empty cache of at most `capacity` entries.
    pub(crate) fn new(capacity: usize) -> Self {
        BlockedUntilCache {
            until: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The block on `id`, if it lasts beyond `now_ms`.
    /// Expired entries are removed as they are found.
    pub(crate) fn blocked_until(&mut self, id: &str, now_ms: i64) -> Option<Block> {
        match self.until.get(id) {
            Some(cached) if cached.holds(now_ms) => Some(cached.block.clone()),
            Some(_) => {
                self.until.remove(id);
                None
            }
            None => None,
        }
    }

    /// The block on `id`, if it lasts beyond `now_ms` (read only, as
    /// [`BlockedUntilCache::blocked_until`]).
    pub(crate) fn get(&self, id: &str, now_ms: i64) -> Option<&Block> {
        self.until.get(id).filter(|cached| cached.holds(now_ms)).map(|cached| &cached.block)
    }

    /// Records that `id` is blocked as `block` says.
    pub(crate) fn insert(&mut self, id: &str, block: Block, now_ms: i64) {
        if block.until_ms <= now_ms {
            return;
        }
        if !self.until.contains_key(id) && self.until.len() >= self.capacity {
            self.until.retain(|_, c| c.holds(now_ms));
            if self.until.len() >= self.capacity {
                self.evict_soonest();
            }
        }
        self.until.insert(id.to_string(), Cached { block, ask_at: now_ms + RECHECK_MS });
    }

    /// Changes the capacity, evicting expired entries, then the soonest to
    /// expire, until the cache fits.
    pub(crate) fn set_capacity(&mut self, capacity: usize, now_ms: i64) {
        self.capacity = capacity.max(1);
        if self.until.len() > self.capacity {
            self.until.retain(|_, c| c.holds(now_ms));
        }
        while self.until.len() > self.capacity && self.evict_soonest() {}
    }

    /// Drops the entry that expires soonest (the least valuable one);
    /// whether there was one.
    fn evict_soonest(&mut self) -> bool {
        // The first to stop being trusted; of those, the block that ends first.
        let soonest = self.until.iter().min_by_key(|(_, c)| (c.block.until_ms.min(c.ask_at), c.block.until_ms)).map(|(k, _)| k.clone());
        soonest.is_some_and(|k| self.until.remove(&k).is_some())
    }

    /// Forgets `id` (after an operator reset, or an allowed answer).
    pub(crate) fn remove(&mut self, id: &str) {
        self.until.remove(id);
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    fn until(until_ms: i64) -> Block {
        Block { until_ms, window: 0, limits: vec![(10, 60_000, None)], by: Refusal::Limit }
    }

    #[test]
    fn why_a_key_was_refused() {
        assert_eq!(Refusal::of(Some(0), None, false), Refusal::Limit);
        assert_eq!(Refusal::of(Some(1), None, true), Refusal::Limit, "reservations in flight fill a window");
        assert_eq!(Refusal::of(None, None, false), Refusal::Ban);
        assert_eq!(Refusal::of(None, None, true), Refusal::Concurrency, "a full set of slots is no ban");
        assert_eq!(Refusal::of(Some(0), Some(1), false), Refusal::Penalty);
        assert_eq!(Refusal::Concurrency.name(), "concurrency");
    }

    #[test]
    fn a_block_is_trusted_for_at_most_the_recheck_time() {
        let mut cache = BlockedUntilCache::new(10);
        cache.insert("r|ip=1", until(3_600_000), 1_000);
        assert_eq!(cache.peek("r|ip=1", 1_000 + RECHECK_MS - 1), Some(until(3_600_000)));
        assert_eq!(cache.peek("r|ip=1", 1_000 + RECHECK_MS), None, "the object is asked again");
        assert_eq!(cache.blocked_until("r|ip=1", 1_000 + RECHECK_MS), None);
        assert!(cache.is_empty(), "and the stale entry dropped");
        cache.insert("r|ip=1", until(3_600_000), 20_000);
        assert_eq!(cache.blocked_until("r|ip=1", 29_999), Some(until(3_600_000)), "the object's new answer is cached anew");
    }

    #[test]
    fn answers_until_expiry() {
        let mut cache = BlockedUntilCache::new(10);
        cache.insert("r|ip=1", until(2_000), 1_000);
        assert_eq!(cache.blocked_until("r|ip=1", 1_999), Some(until(2_000)));
        assert_eq!(cache.blocked_until("r|ip=1", 2_000), None);
        assert!(cache.is_empty(), "expired entry removed");
        cache.insert("past", until(500), 1_000);
        assert!(cache.is_empty(), "an entry already expired is not stored");
    }

    #[test]
    fn capacity_is_never_exceeded() {
        let mut cache = BlockedUntilCache::new(100);
        for i in 0..10_000i64 {
            cache.insert(&format!("k{i}"), until(1_000_000 + i), 0);
            assert!(cache.len() <= 100);
        }
        // The soonest-expiring entries were evicted; the latest survive.
        assert_eq!(cache.blocked_until("k9999", 0), Some(until(1_009_999)));
        assert_eq!(cache.blocked_until("k0", 0), None);
    }

    #[test]
    fn shrinking_evicts_the_soonest() {
        let mut cache = BlockedUntilCache::new(10);
        for i in 0..10 {
            cache.insert(&format!("k{i}"), until(100 + i), 0);
        }
        cache.set_capacity(3, 0);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.capacity(), 3);
        assert!(cache.blocked_until("k9", 0).is_some());
        assert!(cache.blocked_until("k0", 0).is_none());
    }

    #[test]
    fn expired_entries_are_dropped_before_live_ones() {
        let mut cache = BlockedUntilCache::new(2);
        cache.insert("a", until(100), 0);
        cache.insert("b", until(5_000), 0);
        cache.insert("c", until(6_000), 200);
        assert_eq!(cache.blocked_until("b", 200), Some(until(5_000)));
        assert_eq!(cache.blocked_until("c", 200), Some(until(6_000)));
    }

    impl BlockedUntilCache {
        /// [`BlockedUntilCache::get`], cloned.
        pub(crate) fn peek(&self, id: &str, now_ms: i64) -> Option<Block> {
            self.get(id, now_ms).cloned()
        }
        pub(crate) fn capacity(&self) -> usize {
            self.capacity
        }
        pub(crate) fn len(&self) -> usize {
            self.until.len()
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.until.is_empty()
        }
    }
}
