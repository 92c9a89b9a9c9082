//! Log episodes: one line per (event, rule, key) episode, not per request.
//!
//! A client hammering a blocked endpoint would otherwise write one `block`
//! line per request, and Workers Logs bills per line. So the
//! first `block`, `shadow_block`, `counter_error`, `exempt` or
//! `usage_missing` of a (rule, key) in this isolate is written and opens an *episode* of [`PERIOD_MS`]; the same
//! event for the same (rule, key) within it is suppressed and counted. Once
//! the period is over:
//! - the next such event is written again, with `suppressed`: how many were
//!   suppressed in the episode before (a new episode starts with it);
//! - or, if none comes, a `summary` line reports the count (`event`, `rule`,
//!   `key_hash`, `suppressed`, `period_ms`), written at the first request
//!   the isolate serves once the episode has ended, whatever that request
//!   is ([`Episodes::ended`], which the Worker asks on every request: one
//!   comparison until a summary is due). Sweeps are at most one per
//!   [`SWEEP_EVERY_MS`], so under steady traffic a summary comes at most
//!   that long after its episode's end.
//!
//! Every other event (`missing_key`, `admin*`, `config_error`,
//! `edge_error`, and a `counter_error` with decision `not_recorded`: a
//! settlement that could not be sent, at most one per forwarded request)
//! passes through unchanged: they are not per-request floods
//! of one key (`config_error` is already once a minute; admin lines are
//! the audit trail and must all be written).
//!
//! Per isolate, best effort: an isolate that ends takes its unreported
//! counts with it, and each isolate opens its own episodes. The map holds at
//! most `capacity` episodes, so a flood of distinct keys cannot grow the
//! isolate's memory: when full, ended episodes are dropped first (their
//! counts summarized), then the oldest sixteenth (summarized too).
//!
//! Pure: time is the caller's `now_ms`.

use crate::pipeline::verdict::LogEvent;
use serde_json::Value;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// How long an episode lasts by default (the config's `log_episode`): one
/// line per (event, rule, key) per minute at most, plus at most one
/// `summary` line.
pub(crate) const PERIOD_MS: i64 = crate::config::DEFAULT_LOG_EPISODE_MS;

/// The least time between two sweeps of ended episodes (each one scans
/// the map).
pub(crate) const SWEEP_EVERY_MS: i64 = 1_000;

/// Default capacity, like the blocked-until cache's
/// ([`crate::count::blocked::DEFAULT_CAPACITY`]): ~100 bytes per entry.
pub(crate) const DEFAULT_CAPACITY: usize = 10_000;

/// The events written once per episode.
const EPISODIC: [&str; 5] = ["block", "shadow_block", "counter_error", "exempt", "usage_missing"];

/// One open episode: when its line was written, how many were suppressed
/// since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Episode {
    started_ms: i64,
    suppressed: u64,
}

/// An episode's (event, rule, key_hash), as the map holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Id {
    event: &'static str,
    rule: String,
    key_hash: String,
}

/// An episode's (event, rule, key_hash), owned ([`Id`]) or borrowed from
/// its event (`(&str, &str, &str)`): the map is looked up without building
/// an owned key, one is built only to open an episode.
trait Parts {
    fn parts(&self) -> (&str, &str, &str);
}

impl Parts for Id {
    fn parts(&self) -> (&str, &str, &str) {
        (self.event, &self.rule, &self.key_hash)
    }
}

impl Parts for (&str, &str, &str) {
    fn parts(&self) -> (&str, &str, &str) {
        *self
    }
}

impl<'a> Borrow<dyn Parts + 'a> for Id {
    fn borrow(&self) -> &(dyn Parts + 'a) {
        self
    }
}

// One hash and one equality for both forms (what `Borrow` requires).
impl Hash for dyn Parts + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn Parts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Parts + '_ {}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn Parts).hash(state);
    }
}

/// A capped map from (event, rule, key_hash) to its open episode.
#[derive(Debug)]
pub(crate) struct Episodes {
    open: HashMap<Id, Episode>,
    capacity: usize,
    period_ms: i64,
    /// When ended episodes were last swept.
    swept_ms: i64,
    /// When the first episode that suppressed lines ends: a `summary` is
    /// due then (`None`: none is).
    due_ms: Option<i64>,
}

impl Episodes {
    /// At most `capacity` (at least 1) episodes of `period_ms` each.
    pub(crate) fn new(capacity: usize, period_ms: i64) -> Self {
        Episodes { open: HashMap::new(), capacity: capacity.max(1), period_ms, swept_ms: i64::MIN, due_ms: None }
    }

    /// Episodes of `period_ms` from now on (the config's `log_episode`,
    /// set once the isolate has read it); open ones keep their start.
    pub(crate) fn set_period(&mut self, period_ms: i64) {
        self.period_ms = period_ms.max(1);
    }

    /// The lines to write for `events`, at `now_ms`: episodic events that
    /// open an episode (with `suppressed` when one ended before them),
    /// every other event as it is, then the `summary` lines of episodes
    /// that ended ([`Episodes::ended`]) or were evicted.
    pub(crate) fn filter(&mut self, events: &[LogEvent], now_ms: i64) -> Vec<LogEvent> {
        let (mut out, mut summaries) = self.filter_parts(events, now_ms);
        out.append(&mut summaries);
        out
    }

    /// [`Episodes::filter`] in its two parts: the lines of `events` to
    /// write, and the `summary` lines due (of other requests' episodes:
    /// what the driver adds of this request, such as where the client is,
    /// goes on the first part only).
    pub(crate) fn filter_parts(&mut self, events: &[LogEvent], now_ms: i64) -> (Vec<LogEvent>, Vec<LogEvent>) {
        // Grown as lines are written: none, for a suppressed repeat.
        let mut out = Vec::new();
        let mut summaries = Vec::new();
        for event in events {
            let Some(id) = episode_id(event) else {
                out.push(event.clone());
                continue;
            };
            match self.open.get_mut(&id as &dyn Parts) {
                Some(episode) if now_ms - episode.started_ms < self.period_ms => {
                    if episode.suppressed == 0 {
                        let end = episode.started_ms + self.period_ms;
                        self.due_ms = Some(self.due_ms.map_or(end, |due| due.min(end)));
                    }
                    episode.suppressed += 1;
                }
                Some(episode) => {
                    let suppressed = episode.suppressed;
                    *episode = Episode { started_ms: now_ms, suppressed: 0 };
                    let mut line = event.clone();
                    if suppressed > 0 {
                        line.fields.push(("suppressed", suppressed.into()));
                    }
                    out.push(line);
                }
                None => {
                    self.make_room(now_ms, &mut summaries);
                    let (kind, rule, key_hash) = id;
                    let id = Id { event: kind, rule: rule.to_string(), key_hash: key_hash.to_string() };
                    self.open.insert(id, Episode { started_ms: now_ms, suppressed: 0 });
                    out.push(event.clone());
                }
            }
        }
        summaries.append(&mut self.ended(now_ms));
        (out, summaries)
    }

    /// The `summary` lines due at `now_ms`: of the episodes that have ended
    /// since the last sweep and suppressed lines. One comparison while none
    /// is due; a sweep at most once per [`SWEEP_EVERY_MS`].
    pub(crate) fn ended(&mut self, now_ms: i64) -> Vec<LogEvent> {
        let mut out = Vec::new();
        let due = self.due_ms.is_some_and(|due| due <= now_ms);
        if due && now_ms.saturating_sub(self.swept_ms) >= SWEEP_EVERY_MS {
            self.swept_ms = now_ms;
            self.drop_ended(now_ms, &mut out);
        }
        out
    }

    /// Drops ended episodes, summarizing those that suppressed lines, and
    /// works out when the next summary is due.
    fn drop_ended(&mut self, now_ms: i64, out: &mut Vec<LogEvent>) {
        let period_ms = self.period_ms;
        let mut due: Option<i64> = None;
        self.open.retain(|id, episode| {
            let live = now_ms - episode.started_ms < period_ms;
            if !live && episode.suppressed > 0 {
                out.push(summary(id, episode.suppressed, period_ms));
            }
            if live && episode.suppressed > 0 {
                let end = episode.started_ms + period_ms;
                due = Some(due.map_or(end, |d| d.min(end)));
            }
            live
        });
        self.due_ms = due;
    }

    /// Makes room for one more episode: drops ended ones, then (still full)
    /// the oldest sixteenth (more on ties), at once, so a flood of new keys pays the scan
    /// once per `capacity / 16` of them, not on each.
    fn make_room(&mut self, now_ms: i64, out: &mut Vec<LogEvent>) {
        if self.open.len() < self.capacity {
            return;
        }
        self.drop_ended(now_ms, out);
        if self.open.len() < self.capacity {
            return;
        }
        let mut starts: Vec<i64> = self.open.values().map(|e| e.started_ms).collect();
        let nth = (self.capacity / 16).min(starts.len() - 1);
        let (_, cutoff, _) = starts.select_nth_unstable(nth);
        let cutoff = *cutoff;
        let period_ms = self.period_ms;
        self.open.retain(|id, episode| {
            let keep = episode.started_ms > cutoff;
            if !keep && episode.suppressed > 0 {
                out.push(summary(id, episode.suppressed, period_ms));
            }
            keep
        });
    }

}

/// The episode an event belongs to: episodic events with a rule and a key
/// hash; `None` for any other.
fn episode_id(event: &LogEvent) -> Option<(&'static str, &str, &str)> {
    let kind = EPISODIC.iter().find(|k| **k == event.event)?;
    let field = |name: &str| event.fields.iter().find(|(n, _)| *n == name).and_then(|(_, v)| v.as_str());
    // A settlement that could not be sent is a count lost (or a usage
    // charge dropped), one per forwarded request at most: each is written
    // (one line stood for 15 unrecorded commits).
    if field("decision") == Some("not_recorded") {
        return None;
    }
    Some((kind, field("rule")?, field("key_hash")?))
}

fn summary(Id { event, rule, key_hash }: &Id, suppressed: u64, period_ms: i64) -> LogEvent {
    LogEvent::new(
        "summary",
        vec![
            ("event", Value::from(*event)),
            ("rule", rule.as_str().into()),
            ("key_hash", key_hash.as_str().into()),
            ("suppressed", suppressed.into()),
            ("period_ms", period_ms.into()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(rule: &str, key: &str) -> LogEvent {
        LogEvent::new(
            "block",
            vec![("rule", rule.into()), ("key_hash", key.into()), ("decision", "block".into()), ("retry_after_ms", 5.into())],
        )
    }

    fn error(rule: &str, key: &str) -> LogEvent {
        crate::pipeline::verdict::counter_error(rule, key, &"no answer within 300 ms".into(), "allow")
    }

    fn field<'a>(event: &'a LogEvent, name: &str) -> Option<&'a Value> {
        event.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    #[test]
    fn a_flood_on_one_key_writes_one_line_then_one_with_the_count() {
        let mut episodes = Episodes::new(100, PERIOD_MS);
        let first = episodes.filter(&[block("r", "k")], 1_000);
        assert_eq!(first, vec![block("r", "k")]);
        for t in 0..1_989 {
            assert_eq!(episodes.filter(&[block("r", "k")], 1_000 + t), vec![], "suppressed at {t}");
        }
        let next = episodes.filter(&[block("r", "k")], 1_000 + PERIOD_MS);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].event, "block");
        assert_eq!(field(&next[0], "suppressed"), Some(&Value::from(1_989)));
        assert_eq!(field(&next[0], "rule"), Some(&Value::from("r")));
        // A new episode: its own suppressed count starts from zero.
        assert_eq!(episodes.filter(&[block("r", "k")], 1_001 + PERIOD_MS), vec![]);
    }

    #[test]
    fn rules_keys_and_events_have_their_own_episodes() {
        let mut episodes = Episodes::new(100, PERIOD_MS);
        let events = [block("r", "k"), block("r", "other"), block("s", "k"), error("r", "k")];
        assert_eq!(episodes.filter(&events, 0), events.to_vec());
        assert_eq!(episodes.filter(&events, 10), vec![]);
    }

    /// 15 commits refused in 20 s were one line.
    #[test]
    fn every_unrecorded_settlement_is_written() {
        let mut episodes = Episodes::new(100, PERIOD_MS);
        let lost = crate::pipeline::verdict::counter_error("usage", "k", &"limiter answered 400".into(), "not_recorded");
        for t in 0..15 {
            assert_eq!(episodes.filter(std::slice::from_ref(&lost), t * 1_000), vec![lost.clone()], "at {t} s");
        }
        assert_eq!(episodes.filter(&[error("usage", "k")], 16_000), vec![error("usage", "k")], "a check's error opens its episode");
        assert_eq!(episodes.filter(&[error("usage", "k")], 17_000), vec![]);
    }

    #[test]
    fn other_events_pass_through() {
        let mut episodes = Episodes::new(1, PERIOD_MS);
        let admin = LogEvent::new("admin", vec![("action", "reset".into()), ("rule", "r".into()), ("key_hash", "k".into())]);
        let missing = LogEvent::new("missing_key", vec![("rule", "r".into()), ("detail", "x".into())]);
        for t in 0..3 {
            assert_eq!(episodes.filter(&[admin.clone(), missing.clone()], t), vec![admin.clone(), missing.clone()]);
        }
        assert_eq!(episodes.len(), 0);
    }

    #[test]
    fn a_quiet_key_is_summarized_by_the_sweep() {
        let mut episodes = Episodes::new(100, PERIOD_MS);
        episodes.filter(&[error("r", "k")], 0);
        episodes.filter(&[error("r", "k"), error("r", "k")], 5);
        episodes.filter(&[block("r", "once")], 10);
        // Later lines of any key carry the summary of the ended episode
        // (the one that suppressed nothing is dropped without a line).
        let out = episodes.filter(&[block("s", "x")], PERIOD_MS + 10);
        assert_eq!(out[0], block("s", "x"));
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[1].event, "summary");
        assert_eq!(field(&out[1], "event"), Some(&Value::from("counter_error")));
        assert_eq!(field(&out[1], "suppressed"), Some(&Value::from(2)));
        assert_eq!(field(&out[1], "period_ms"), Some(&Value::from(PERIOD_MS)));
        assert_eq!(episodes.len(), 1, "only the live episode is kept");
        // Reported once: the next line of the key opens a fresh episode.
        assert_eq!(episodes.filter(&[error("r", "k")], PERIOD_MS + 20), vec![error("r", "k")]);
    }

    #[test]
    fn a_summary_comes_with_the_first_request_after_its_episode_ends_whatever_it_is() {
        let mut episodes = Episodes::new(100, PERIOD_MS);
        episodes.filter(&[block("r", "k")], 0);
        episodes.filter(&[block("r", "k")], 10);
        assert_eq!(episodes.ended(PERIOD_MS - 1), vec![], "not yet ended");
        let out = episodes.ended(PERIOD_MS);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].event, "summary");
        assert_eq!(field(&out[0], "suppressed"), Some(&Value::from(1)));
        assert_eq!(episodes.ended(PERIOD_MS + 5_000), vec![], "reported once");
        assert_eq!(episodes.len(), 0);
        // An episode that suppressed nothing is never due: no sweep at all.
        episodes.filter(&[block("r", "quiet")], 100_000);
        assert_eq!(episodes.due_ms, None);
    }

    #[test]
    fn sweeps_are_at_most_one_per_second_and_none_is_lost() {
        let mut episodes = Episodes::new(100, PERIOD_MS);
        for (i, t) in [(0, 0), (1, 300), (2, 600)] {
            let key = format!("k{i}");
            episodes.filter(&[block("r", &key)], t);
            episodes.filter(&[block("r", &key)], t + 1);
        }
        assert_eq!(episodes.ended(PERIOD_MS).len(), 1, "k0 ended");
        assert_eq!(episodes.ended(PERIOD_MS + 700).len(), 0, "k1 and k2 ended, but the last sweep was under a second ago");
        assert_eq!(episodes.ended(PERIOD_MS + SWEEP_EVERY_MS).len(), 2, "both, at the next sweep");
        assert_eq!(episodes.due_ms, None);
    }

    #[test]
    fn capacity_is_never_exceeded_and_evicted_counts_are_summarized() {
        let mut episodes = Episodes::new(64, PERIOD_MS);
        episodes.filter(&[block("r", "k0")], 0);
        episodes.filter(&[block("r", "k0")], 1);
        let mut summaries = 0;
        for i in 1..10_000 {
            let out = episodes.filter(&[block("r", &format!("k{i}"))], 2 + i / 1_000);
            summaries += out.iter().filter(|e| e.event == "summary").count();
            assert!(episodes.len() <= 64);
            assert_eq!(out[0], block("r", &format!("k{i}")), "a new key is always written");
        }
        assert_eq!(summaries, 1, "k0's suppressed line is reported when it is evicted");
    }

    impl Episodes {
        fn len(&self) -> usize {
            self.open.len()
        }
    }
}
