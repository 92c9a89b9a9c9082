//! Metrics in Workers Analytics Engine, pure: the data points one request's
//! decisions make.
//!
//! With an `analytics_engine_datasets` binding named [`BINDING`], the
//! Worker writes one data point per decision of a rule (each identity a
//! request is charged to is a decision), as a rule's `metrics` selects:
//! `"off"`, `"limited"` (the default: blocked, shadow, exempt and error
//! decisions, the ones an operator looks for) or `"all"` (allowed ones
//! too; billed per data point).
//!
//! Allowed traffic under `"limited"` is not lost: each isolate counts its
//! allowed decisions per rule ([`AllowedTotals`]) and writes one
//! `allowed_total` point per rule at most once per `metrics_interval` (a
//! minute by default),
//! standing for `double1` decisions. So rules are seen matching before the
//! first block, at most one point per (isolate, rule, minute) — never more
//! points than `"all"` would write. Best effort: an isolate that ends takes
//! its unwritten minute with it (under the local sink they are written with
//! each decision: [`totals_interval_ms`]).
//!
//! Sampling: none in the Worker. Every selected decision is written, and
//! Analytics Engine's own adaptive sampling applies when it stores and
//! queries them; every query must weigh rows by `_sample_interval`
//! (`SUM(_sample_interval)`, never `COUNT()`). The index is the rule's name,
//! the unit Analytics Engine samples fairly by, so a flood on one rule does
//! not thin out another's points. The cost bound is the volume: `limited`
//! writes nothing for allowed traffic.
//!
//! Layout (positional, as the SQL API reads it; see the guide's queries):
//!
//! | column | holds |
//! |---|---|
//! | `index1` | rule |
//! | `blob1` | rule |
//! | `blob2` | action: `allowed`, `blocked`, `shadow`, `exempt`, `error`, `allowed_total`; `spend` (a priced answer settled: [`spend_point`]) |
//! | `blob3` | colo (`request.cf.colo`) |
//! | `blob4` | country (`request.cf.country`) |
//! | `blob5` | key hash (as in the logs: keyed by `TOLLGATE_LOG_KEY`); never the key; empty for `allowed_total` |
//! | `blob6` | detail: what exempted (`ip`, `asn`, `verified_bot`, `header`); for `spend`, the price pattern that priced the answer's model ([`Spend::model`]); else empty |
//! | `blob7` | why (the decision's typed reason, [`Reason`]): `limit`, `ban`, `penalty`, `concurrency` (blocked and shadow), `missing_key` (blocked: a 400 for a key part the request lacks), `fail_closed` or `fail_open` (error); else empty |
//! | `blob8` | the method as sent (at most 16 characters); empty for `allowed_total` |
//! | `blob9` | the route: the rule's `path` pattern, never the request's own path or query (they may hold a raw key) |
//! | `blob10` | the client's ASN (`request.cf.asn`), in decimal; empty when unknown and for `allowed_total` |
//! | `blob11` | the raw key, only on a rule with `metrics_raw_key = true` (at most [`RAW_KEY_BYTES`]); else empty |
//! | `double1` | retry-after in ms (blocked and shadow); for `allowed_total`, how many allowed decisions the point stands for; for `spend`, the answer's charge in micro-units of the rule's currency (as committed: a milli-unit rule's rounded up); else 0 |
//! | `double2` | requests remaining in the tightest window (allowed), else 0 |
//!
//! Analytics Engine takes at most 20 blobs, 20 doubles and one index (of at
//! most 96 bytes) per point, its blobs together at most 16 KB: eleven blobs,
//! the raw key cut at [`RAW_KEY_BYTES`] and the method at 16 characters,
//! leave the rest to the config's names and patterns. The local sink
//! (`src/entry.mjs`) keeps the same columns.

use crate::pipeline::applied::{Applied, Matched};
use crate::config::policy::Action;
use crate::config::rules::Rule;
use crate::count::blocked::Refusal;
use crate::pipeline::verdict::Outcome;

/// The binding name of the dataset (`[[analytics_engine_datasets]]`).
pub(crate) const BINDING: &str = "TOLLGATE_METRICS";

pub(crate) use crate::config::policy::MetricsLevel;

/// The var that turns on the local metrics sink (scripts/dev sets it): in
/// local development, where no dataset is bound, the points go to one
/// object, which the console's Traffic page reads.
pub(crate) const SINK_VAR: &str = "TOLLGATE_LOCAL_METRICS";
/// The local sink's object name and its path.
pub(crate) const SINK_OBJECT: &str = "tollgate:local-metrics";
pub(crate) const SINK_PATH: &str = "/v1/sink";

/// How often an isolate writes its allowed totals, in ms: the config's
/// `metrics_interval`, but with each decision under the local sink
/// (`sink`). Local development restarts the Worker at every file saved,
/// and an isolate that goes takes its unwritten totals with it: the
/// Traffic page would show the blocks (written at once) and not the
/// allowed requests before them. The sink is called with every decision
/// anyway, so this costs one row per allowed decision in the local
/// object and no call; production (a dataset, no sink) is unchanged.
pub(crate) fn totals_interval_ms(configured_ms: i64, sink: bool) -> i64 {
    if sink { 0 } else { configured_ms }
}

/// How many blobs a point has (the layout above).
pub(crate) const BLOBS: usize = 11;

/// The longest raw key a point carries, in bytes (cut at a character's
/// boundary): a key is the config's parts, but a header or cookie value
/// is the client's own length.
pub(crate) const RAW_KEY_BYTES: usize = 512;

/// Why a decision refused (or, for an error, whether it did): `blob7`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The object's refusal: a full window, a ban, a penalty, no slot.
    Refused(Refusal),
    /// A key part the rule needs is missing (`on_missing_key = "reject"`).
    MissingKey,
    /// The counter failed and the rule refused (`on_error = "deny"`, 503).
    FailClosed,
    /// The counter failed and the request went on (`on_error = "allow"`).
    FailOpen,
}

impl Reason {
    /// Its name in `blob7`, as the log lines' `reason` spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Reason::Refused(by) => by.name(),
            Reason::MissingKey => "missing_key",
            Reason::FailClosed => "fail_closed",
            Reason::FailOpen => "fail_open",
        }
    }
}

/// One data point, as plain data (the Worker builds the platform's).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    pub(crate) index: String,
    pub(crate) blobs: [String; BLOBS],
    pub(crate) doubles: [f64; 2],
}

/// Where the request was served from and who sent it (`request.cf`), and
/// how (its method).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Place<'a> {
    pub(crate) colo: Option<&'a str>,
    pub(crate) country: Option<&'a str>,
    pub(crate) asn: Option<u32>,
    /// The method as sent (cut at 16 characters when written).
    pub(crate) method: &'a str,
}

/// What one point says beyond its rule and place.
struct Said<'a> {
    action: &'a str,
    key_hash: &'a str,
    detail: &'a str,
    reason: Option<Reason>,
    raw_key: &'a str,
    doubles: [f64; 2],
}

/// The data points of one request: one per exempt matching rule, then one
/// per checked rule and identity (`outcomes[i]` for `applied[i]`), each if
/// the rule's level selects it.
pub(crate) fn points(matched: &[Matched<'_>], applied: &[Applied<'_>], outcomes: &[Outcome], place: Place<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for m in matched {
        if let Some(e) = &m.exempt {
            if m.rule.metrics != MetricsLevel::Off {
                let said = Said { action: "exempt", key_hash: &e.key_hash, detail: e.by.kind(), reason: None, raw_key: "", doubles: [0.0, 0.0] };
                out.push(point(m.rule, &said, place));
            }
        }
    }
    for (a, outcome) in applied.iter().zip(outcomes) {
        let (action, doubles, detail, reason) = match outcome {
            Outcome::Allowed { windows, .. } => {
                let remaining = windows.iter().map(|w| w.remaining).min().unwrap_or(0);
                ("allowed", [0.0, remaining as f64], "", None)
            }
            Outcome::Blocked { retry_after_ms, by, .. } => {
                let shadow = a.rule.action == Action::Log;
                (if shadow { "shadow" } else { "blocked" }, [*retry_after_ms as f64, 0.0], "", Some(Reason::Refused(*by)))
            }
            // What failed: timeout, refused, unreachable, ... (`Failure::kind`).
            Outcome::Failed(failure) => {
                let reason = if crate::pipeline::verdict::denies(a.rule, failure) { Reason::FailClosed } else { Reason::FailOpen };
                ("error", [0.0, 0.0], failure.kind(), Some(reason))
            }
        };
        let selected = match a.rule.metrics {
            MetricsLevel::Off => false,
            MetricsLevel::Limited => action != "allowed",
            MetricsLevel::All => true,
        };
        if selected {
            let raw_key = if a.rule.metrics_raw_key { a.key.as_str() } else { "" };
            out.push(point(a.rule, &Said { action, key_hash: &a.key_hash, detail, reason, raw_key, doubles }, place));
        }
    }
    out
}

/// The point of a request refused for a key part `rule` needs (400, no
/// counter asked): `blocked`, no key hash (there is no key).
pub(crate) fn missing_key(rule: &Rule, place: Place<'_>) -> Option<Point> {
    let said = Said { action: "blocked", key_hash: "", detail: "", reason: Some(Reason::MissingKey), raw_key: "", doubles: [0.0, 0.0] };
    (rule.metrics != MetricsLevel::Off).then(|| point(rule, &said, place))
}

/// What one priced answer cost, as its settlement committed it: the
/// `spend` point's facts ([`spend_point`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spend {
    pub(crate) key_hash: String,
    /// The table's pattern that priced the answer's model, or `(several)`,
    /// `(unpriced)`, `(none named)`, `(not read)`: the config's words, so
    /// the labels are as few as the table's patterns.
    pub(crate) model: String,
    /// The charge committed, in micro-units of the rule's currency.
    pub(crate) micro: u64,
}

/// The `spend` point of a priced answer settled, unless its rule's
/// `metrics` is `"off"`: one per answer at either other level (an
/// answer a price table charges costs far more than a data point; the
/// spend by model and by key is summed from these). No place: settling
/// is after the request's own points (the key hash says whose it was).
pub(crate) fn spend_point(rule: &Rule, spend: &Spend) -> Option<Point> {
    let said = Said { action: "spend", key_hash: &spend.key_hash, detail: &spend.model, reason: None, raw_key: "", doubles: [spend.micro as f64, 0.0] };
    (rule.metrics != MetricsLevel::Off).then(|| point(rule, &said, Place::default()))
}

/// The allowed decisions of `"limited"` rules an isolate has not written
/// yet, per rule (a handful of rules: a list, in first-seen order).
#[derive(Debug, Default)]
pub(crate) struct AllowedTotals {
    counts: Vec<(String, u64)>,
    /// When the oldest unwritten decision was counted.
    since_ms: Option<i64>,
}

impl AllowedTotals {
    /// Counts the allowed decisions among `outcomes` (for `applied`, index
    /// for index) of rules whose level is `"limited"`: the ones [`points`]
    /// leaves out.
    pub(crate) fn count(&mut self, applied: &[Applied<'_>], outcomes: &[Outcome], now_ms: i64) {
        for (a, outcome) in applied.iter().zip(outcomes) {
            if a.rule.metrics != MetricsLevel::Limited || !matches!(outcome, Outcome::Allowed { .. }) {
                continue;
            }
            match self.counts.iter_mut().find(|(rule, _)| *rule == a.rule.name) {
                Some((_, n)) => *n += 1,
                None => self.counts.push((a.rule.name.clone(), 1)),
            }
            self.since_ms.get_or_insert(now_ms);
        }
    }

    /// The `allowed_total` points due at `now_ms` (one per rule counted,
    /// once `every_ms`, the config's `metrics_interval`, has passed since
    /// the oldest count), the totals emptied; none before.
    pub(crate) fn due(&mut self, now_ms: i64, every_ms: i64, place: Place<'_>) -> Vec<Point> {
        if self.since_ms.is_none_or(|since| now_ms - since < every_ms) {
            return Vec::new();
        }
        self.since_ms = None;
        // A total is many clients: the isolate's colo, nobody's country,
        // network or method.
        let place = Place { colo: place.colo, ..Place::default() };
        self.counts.drain(..).map(|(rule, n)| total(&rule, "allowed_total", [n as f64, 0.0], place)).collect()
    }
}

fn point(rule: &Rule, said: &Said<'_>, place: Place<'_>) -> Point {
    let mut point = total(&rule.name, said.action, said.doubles, place);
    point.blobs[4] = said.key_hash.to_string();
    point.blobs[5] = said.detail.to_string();
    point.blobs[6] = said.reason.map(Reason::name).unwrap_or_default().to_string();
    point.blobs[7] = crate::pipeline::who::bounded_method(place.method).to_string();
    point.blobs[8] = rule.path.clone();
    point.blobs[9] = place.asn.map(|a| a.to_string()).unwrap_or_default();
    point.blobs[10] = cut(said.raw_key, RAW_KEY_BYTES).to_string();
    point
}

/// A point of `rule`'s with only its action, place and doubles (an
/// `allowed_total`, or the start of any other).
fn total(rule: &str, action: &str, doubles: [f64; 2], place: Place<'_>) -> Point {
    let mut blobs: [String; BLOBS] = Default::default();
    blobs[0] = rule.to_string();
    blobs[1] = action.to_string();
    blobs[2] = place.colo.unwrap_or("").to_string();
    blobs[3] = place.country.unwrap_or("").to_string();
    Point { index: rule.to_string(), blobs, doubles }
}

/// `text` cut to at most `max` bytes, at a character's boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pipeline::plan::{plan, Body, RequestParts, Route};
    use crate::count::protocol::WireWindow;
    use serde_json::json;
    use url::Url;

    fn config() -> Config {
        let l = json!([{ "requests": 10, "window": "1m" }]);
        crate::testing::config(json!([
            { "name": "all", "path": "/p", "metrics": "all", "limits": l },
            { "name": "limited", "path": "/p", "limits": l },
            { "name": "shadow", "path": "/p", "action": "log", "limits": l },
            { "name": "off", "path": "/p", "metrics": "off", "limits": l },
            { "name": "exempt", "path": "/p", "limits": l, "exempt": { "asns": [64500] } },
        ]))
    }

    fn window(remaining: u64) -> WireWindow {
        WireWindow { limit: 10, window_ms: 60_000, used: 10 - remaining, remaining, reset_ms: 1, calendar: None }
    }

    #[test]
    fn one_point_per_selected_decision_with_the_hash_never_the_key() {
        let c = config();
        let url = Url::parse("https://example.com/p").unwrap();
        let header = |n: &str| (n == "cf-connecting-ip").then(|| "198.51.100.7".to_string());
        let parts = RequestParts {
            country: Some("NZ"),
            asn: Some(64500),
            log_key: Some(b"k"),
            ..RequestParts::plain("GET", url.as_str(), &header, Body::Unread)
        };
        let p = plan(&c, &parts);
        let Route::Check(applied) = &p.route else { panic!("{:?}", p.route) };
        assert_eq!(applied.len(), 4);
        let place = Place { colo: Some("AKL"), country: Some("NZ"), asn: Some(64_500), method: "GET" };
        let allowed = Outcome::Allowed { windows: vec![window(7)], reservation: None };
        let blocked = Outcome::Blocked { retry_after_ms: 1500, window: 0, windows: None, by: crate::count::blocked::Refusal::Limit };
        let outcomes = [allowed.clone(), allowed, blocked.clone(), blocked];
        let points = points(&p.matched, applied, &outcomes, place);
        let rows: Vec<(&str, &str, &str)> = points.iter().map(|p| (p.blobs[0].as_str(), p.blobs[1].as_str(), p.blobs[5].as_str())).collect();
        assert_eq!(rows, [("exempt", "exempt", "asn"), ("all", "allowed", ""), ("shadow", "shadow", "")], "limited: no allowed; off: none");
        for point in &points {
            assert_eq!(point.index, point.blobs[0]);
            assert_eq!((point.blobs[2].as_str(), point.blobs[3].as_str()), ("AKL", "NZ"));
            assert_eq!(point.blobs[4], crate::request::key::key_hash("ip=198.51.100.7", Some(b"k")));
            assert!(!point.blobs.iter().any(|b| b.contains("198.51.100.7")), "never the raw key");
        }
        assert_eq!(points[1].doubles, [0.0, 7.0]);
        assert_eq!(points[2].doubles, [1500.0, 0.0]);
        let failed = points_of_failure(&c);
        assert_eq!(failed, ["error timeout"], "an error point names its failure in blob6");
    }

    #[test]
    fn allowed_decisions_of_limited_rules_are_totalled_once_a_minute() {
        let c = config();
        let rule = |name: &str| c.rules.iter().find(|r| r.name == name).unwrap();
        let applied = |name: &str| Applied {
            rule: rule(name),
            key: "k".into(),
            id: format!("{name}\nk"),
            key_hash: "h".into(),
            fell_back: false,
            own_method: true,
            device: None,
            spelling: None,
        };
        let allowed = Outcome::Allowed { windows: vec![window(3)], reservation: None };
        let blocked = Outcome::Blocked { retry_after_ms: 5, window: 0, windows: None, by: crate::count::blocked::Refusal::Limit };
        let checked = [applied("limited"), applied("all"), applied("off"), applied("limited")];
        let mut totals = AllowedTotals::default();
        totals.count(&checked, &[allowed.clone(), allowed.clone(), allowed.clone(), blocked], 1_000);
        totals.count(&checked[..1], std::slice::from_ref(&allowed), 2_000);
        let place = Place { colo: Some("AKL"), country: Some("NZ"), asn: Some(64_500), method: "GET" };
        let every = crate::config::DEFAULT_METRICS_INTERVAL_MS;
        assert_eq!(totals.due(1_000 + every - 1, every, place), vec![], "not a minute yet");
        let due = totals.due(1_000 + every, every, place);
        assert_eq!(due.len(), 1, "only the limited rule: `all` wrote its own, `off` none, a block is a point of its own");
        assert_eq!((due[0].blobs[0].as_str(), due[0].blobs[1].as_str(), due[0].blobs[4].as_str()), ("limited", "allowed_total", ""));
        assert_eq!((due[0].blobs[2].as_str(), due[0].blobs[3].as_str()), ("AKL", ""), "the isolate's colo; no one client's country");
        assert_eq!(due[0].doubles, [2.0, 0.0], "two allowed decisions");
        assert_eq!(totals.due(10 * every, every, place), vec![], "written once");
    }

    #[test]
    fn under_the_local_sink_allowed_totals_are_written_with_each_decision() {
        let c = config();
        let rule = c.rules.iter().find(|r| r.name == "limited").unwrap();
        let applied = Applied { rule, key: "k".into(), id: "limited\nk".into(), key_hash: "h".into(), fell_back: false, own_method: true, device: None, spelling: None };
        let allowed = Outcome::Allowed { windows: vec![window(3)], reservation: None };
        let every = totals_interval_ms(crate::config::DEFAULT_METRICS_INTERVAL_MS, true);
        let mut totals = AllowedTotals::default();
        for now in [5_000, 5_000, 5_001] {
            totals.count(std::slice::from_ref(&applied), std::slice::from_ref(&allowed), now);
            let due = totals.due(now, every, Place::default());
            assert_eq!(due.iter().map(|p| (p.blobs[1].as_str(), p.doubles[0])).collect::<Vec<_>>(), [("allowed_total", 1.0)], "at {now}: this decision's, at once");
        }
        assert_eq!(totals.due(5_002, every, Place::default()), vec![], "nothing counted, nothing written");
        assert_eq!(totals_interval_ms(60_000, false), 60_000, "with a dataset: the config's interval");
    }

    #[test]
    fn a_refusal_says_why_how_and_where_and_the_raw_key_only_when_the_rule_asks() {
        let l = json!([{ "requests": 1, "window": "1m" }]);
        let c = crate::testing::config(json!([
            { "name": "plain", "path": "/p/*", "limits": l },
            { "name": "asks", "path": "/p/*", "limits": l, "metrics_raw_key": true },
            { "name": "closed", "path": "/p/*", "limits": l, "on_error": "deny" },
            { "name": "open", "path": "/p/*", "limits": l },
        ]));
        let url = Url::parse("https://example.com/p/secret?token=x").unwrap();
        let header = |n: &str| (n == "cf-connecting-ip").then(|| "198.51.100.7".to_string());
        let parts = RequestParts { log_key: Some(b"k"), ..RequestParts::plain("POST", url.as_str(), &header, Body::Unread) };
        let p = plan(&c, &parts);
        let Route::Check(applied) = &p.route else { panic!("{:?}", p.route) };
        let blocked = |by| Outcome::Blocked { retry_after_ms: 10, window: 0, windows: None, by };
        let timeout = || Outcome::Failed(crate::pipeline::verdict::Failure::Call(crate::count::protocol::CallFailure::Timeout { ms: 300 }));
        let outcomes = [blocked(Refusal::Penalty), blocked(Refusal::Ban), timeout(), timeout()];
        let place = Place { colo: Some("AMS"), country: Some("NL"), asn: Some(64_500), method: "POST-AND-A-VERY-LONG-METHOD" };
        let points = points(&p.matched, applied, &outcomes, place);
        let row = |p: &Point| (p.blobs[0].clone(), p.blobs[6].clone(), p.blobs[7].clone(), p.blobs[8].clone(), p.blobs[9].clone());
        let n = |s: &str| s.to_string();
        assert_eq!(points.iter().map(row).collect::<Vec<_>>(), [
            (n("plain"), n("penalty"), n("POST-AND-A-VERY-"), n("/p/*"), n("64500")),
            (n("asks"), n("ban"), n("POST-AND-A-VERY-"), n("/p/*"), n("64500")),
            (n("closed"), n("fail_closed"), n("POST-AND-A-VERY-"), n("/p/*"), n("64500")),
            (n("open"), n("fail_open"), n("POST-AND-A-VERY-"), n("/p/*"), n("64500")),
        ], "the typed reason; the method cut at 16; the route is the rule's pattern");
        assert_eq!(points[1].blobs[10], "ip=198.51.100.7", "the rule that asks gets its raw key");
        for point in points.iter().filter(|p| p.blobs[0] != "asks") {
            assert_eq!(point.blobs[10], "", "{}: no raw key unless asked", point.blobs[0]);
            assert!(!point.blobs.iter().any(|b| b.contains("198.51.100.7") || b.contains("secret") || b.contains("token")), "never the key, the path or the query: {point:?}");
        }
        let missing = missing_key(&c.rules[0], place).unwrap();
        assert_eq!((missing.blobs[1].as_str(), missing.blobs[4].as_str(), missing.blobs[6].as_str()), ("blocked", "", "missing_key"));
        assert_eq!(cut("ab\u{e9}", 3), "ab", "a raw key is cut at a character's boundary");
        assert!(points.iter().all(|p| p.blobs.iter().map(String::len).sum::<usize>() <= 16 * 1024 && p.index.len() <= 96), "Analytics Engine's limits");
    }

    fn points_of_failure(c: &Config) -> Vec<String> {
        let rule = c.rules.iter().find(|r| r.name == "limited").unwrap();
        let a = Applied {
            rule,
            key: "k".into(),
            id: "limited\nk".into(),
            key_hash: "h".into(),
            fell_back: false,
            own_method: true,
            device: None,
            spelling: None,
        };
        let timeout = Outcome::Failed(crate::pipeline::verdict::Failure::Call(crate::count::protocol::CallFailure::Timeout { ms: 300 }));
        points(&[], &[a], &[timeout], Place::default()).into_iter().map(|p| format!("{} {}", p.blobs[1], p.blobs[5])).collect()
    }
}
