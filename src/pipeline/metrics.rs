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
//! its unwritten minute with it.
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
//! | `blob2` | action: `allowed`, `blocked`, `shadow`, `exempt`, `error`, `allowed_total` |
//! | `blob3` | colo (`request.cf.colo`) |
//! | `blob4` | country (`request.cf.country`) |
//! | `blob5` | key hash (as in the logs: keyed by `TOLLGATE_LOG_KEY`); never the key; empty for `allowed_total` |
//! | `blob6` | detail: what exempted (`ip`, `asn`, `verified_bot`, `header`), else empty |
//! | `double1` | retry-after in ms (blocked and shadow); for `allowed_total`, how many allowed decisions the point stands for; else 0 |
//! | `double2` | requests remaining in the tightest window (allowed), else 0 |

use crate::pipeline::applied::{Applied, Matched};
use crate::config::policy::Action;
use crate::pipeline::verdict::Outcome;

/// The binding name of the dataset (`[[analytics_engine_datasets]]`).
pub(crate) const BINDING: &str = "TOLLGATE_METRICS";

pub(crate) use crate::config::policy::MetricsLevel;

/// One data point, as plain data (the Worker builds the platform's).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    pub(crate) index: String,
    pub(crate) blobs: [String; 6],
    pub(crate) doubles: [f64; 2],
}

/// Where the request was served from (`request.cf`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Place<'a> {
    pub(crate) colo: Option<&'a str>,
    pub(crate) country: Option<&'a str>,
}

/// The data points of one request: one per exempt matching rule, then one
/// per checked rule and identity (`outcomes[i]` for `applied[i]`), each if
/// the rule's level selects it.
pub(crate) fn points(matched: &[Matched<'_>], applied: &[Applied<'_>], outcomes: &[Outcome], place: Place<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for m in matched {
        if let Some(e) = &m.exempt {
            if m.rule.metrics != MetricsLevel::Off {
                out.push(point(&m.rule.name, "exempt", &e.key_hash, e.by.kind(), [0.0, 0.0], place));
            }
        }
    }
    for (a, outcome) in applied.iter().zip(outcomes) {
        let (action, doubles, detail) = match outcome {
            Outcome::Allowed { windows, .. } => {
                let remaining = windows.iter().map(|w| w.remaining).min().unwrap_or(0);
                ("allowed", [0.0, remaining as f64], "")
            }
            Outcome::Blocked { retry_after_ms, .. } => {
                let shadow = a.rule.action == Action::Log;
                (if shadow { "shadow" } else { "blocked" }, [*retry_after_ms as f64, 0.0], "")
            }
            // What failed: timeout, refused, unreachable, ... (`Failure::kind`).
            Outcome::Failed(failure) => ("error", [0.0, 0.0], failure.kind()),
        };
        let selected = match a.rule.metrics {
            MetricsLevel::Off => false,
            MetricsLevel::Limited => action != "allowed",
            MetricsLevel::All => true,
        };
        if selected {
            out.push(point(&a.rule.name, action, &a.key_hash, detail, doubles, place));
        }
    }
    out
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
        let place = Place { country: None, ..place };
        self.counts.drain(..).map(|(rule, n)| point(&rule, "allowed_total", "", "", [n as f64, 0.0], place)).collect()
    }
}

fn point(rule: &str, action: &str, key_hash: &str, detail: &str, doubles: [f64; 2], place: Place<'_>) -> Point {
    Point {
        index: rule.to_string(),
        blobs: [
            rule.to_string(),
            action.to_string(),
            place.colo.unwrap_or("").to_string(),
            place.country.unwrap_or("").to_string(),
            key_hash.to_string(),
            detail.to_string(),
        ],
        doubles,
    }
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
        WireWindow { limit: 10, window_ms: 60_000, used: 10 - remaining, remaining, reset_ms: 1 }
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
        let place = Place { colo: Some("AKL"), country: Some("NZ") };
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
        let place = Place { colo: Some("AKL"), country: Some("NZ") };
        let every = crate::config::DEFAULT_METRICS_INTERVAL_MS;
        assert_eq!(totals.due(1_000 + every - 1, every, place), vec![], "not a minute yet");
        let due = totals.due(1_000 + every, every, place);
        assert_eq!(due.len(), 1, "only the limited rule: `all` wrote its own, `off` none, a block is a point of its own");
        assert_eq!((due[0].blobs[0].as_str(), due[0].blobs[1].as_str(), due[0].blobs[4].as_str()), ("limited", "allowed_total", ""));
        assert_eq!((due[0].blobs[2].as_str(), due[0].blobs[3].as_str()), ("AKL", ""), "the isolate's colo; no one client's country");
        assert_eq!(due[0].doubles, [2.0, 0.0], "two allowed decisions");
        assert_eq!(totals.due(10 * every, every, place), vec![], "written once");
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
