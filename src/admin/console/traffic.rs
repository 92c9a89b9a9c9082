//! The Traffic page's data, pure: the SQL it asks, the answers
//! read back, and the charts drawn as SVG with integer coordinates.
//!
//! The data is the Analytics Engine points the Worker writes
//! ([`crate::pipeline::metrics`]), read through the SQL API (the var
//! [`ACCOUNT_VAR`], the secret [`TOKEN_SECRET`], the dataset named by
//! [`DATASET_VAR`], `tollgate` unless set), or, in local development, from
//! the local sink ([`Dialect::Sqlite`]: the same points in the SQLite table
//! `points` of one object, written when the var
//! [`SINK_VAR`](crate::pipeline::metrics::SINK_VAR) is set and no
//! dataset is bound). Every count is `SUM(_sample_interval)`, but allowed
//! decisions of a `limited` rule, which come as `allowed_total` points
//! standing for `double1` each: `SUM(_sample_interval * double1)`.
//!
//! Answers are read in the SQL API's JSON format (`{"meta": [...],
//! "data": [{column: value}], "rows": n, ...}`, 64-bit integers quoted as
//! strings); a malformed answer reads as no rows.

use serde_json::Value;
use std::fmt::Write;

/// The var holding the Cloudflare account id of the SQL API.
pub(crate) const ACCOUNT_VAR: &str = "TOLLGATE_ACCOUNT_ID";
/// The secret holding an API token with Account Analytics: Read.
pub(crate) const TOKEN_SECRET: &str = "TOLLGATE_ANALYTICS_TOKEN";
/// The var naming the dataset (the binding's `dataset`), `tollgate` unless set.
pub(crate) const DATASET_VAR: &str = "TOLLGATE_ANALYTICS_DATASET";

/// The actions a point records, in the charts' order, with their colours.
pub(crate) const ACTIONS: [(&str, &str); 5] =
    [("allowed", "#2b7bb9"), ("blocked", "#c62828"), ("shadow", "#ef8f00"), ("exempt", "#6a8a3a"), ("error", "#7b1fa2")];

/// Which SQL the answers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// The Analytics Engine SQL API.
    AnalyticsEngine,
    /// The local sink's SQLite (`timestamp` in Unix seconds).
    Sqlite,
}

/// The span a page shows: the last hour, day or week.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    Hour,
    Day,
    Week,
}

impl Range {
    /// `range=hour|day|week` (anything else: the hour).
    pub(crate) fn parse(text: Option<&str>) -> Range {
        match text {
            Some("day") => Range::Day,
            Some("week") => Range::Week,
            _ => Range::Hour,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Range::Hour => "hour",
            Range::Day => "day",
            Range::Week => "week",
        }
    }

    /// The span and the bucket, in seconds (60 buckets a chart, or so).
    pub(crate) fn seconds(self) -> (u64, u64) {
        match self {
            Range::Hour => (3_600, 60),
            Range::Day => (86_400, 1_800),
            Range::Week => (604_800, 10_800),
        }
    }
}

/// How many queries a page asks ([`queries`]), and their answers.
pub(crate) const QUERIES: usize = 5;
pub(crate) type Answers = [String; QUERIES];

/// The most refusals the events view lists (the newest).
pub(crate) const EVENTS_LISTED: usize = 100;

/// The most (rule, model) rows of the spend by model.
pub(crate) const SPEND_LISTED: usize = 50;

/// The queries of a page: counts per rule, action and bucket; the top
/// blocked key hashes; the top countries and colos; the newest refusals
/// (blocked, shadow and fail-closed points), each with its reason, method,
/// route, place and key hash (and raw key, where the rule wrote it); the
/// spend by rule and model (the `spend` points: answers and micro-units,
/// dearest first). `spend` points are no decision: the decision queries
/// leave them out.
pub(crate) fn queries(dialect: Dialect, dataset: &str, range: Range) -> Answers {
    let (span, bucket) = range.seconds();
    let (since, t, at) = match dialect {
        Dialect::AnalyticsEngine => (
            format!("timestamp > NOW() - INTERVAL '{span}' SECOND"),
            format!("intDiv(toUInt32(timestamp), {bucket}) * {bucket}"),
            "toUInt32(timestamp)",
        ),
        Dialect::Sqlite => (format!("timestamp > unixepoch() - {span}"), format!("(timestamp / {bucket}) * {bucket}"), "timestamp"),
    };
    let table = if dialect == Dialect::Sqlite { "points" } else { dataset };
    [
        format!(
            "SELECT blob1 AS rule, blob2 AS action, {t} AS t, SUM(_sample_interval) AS n, SUM(_sample_interval * double1) AS w FROM {table} WHERE {since} AND blob2 != 'spend' GROUP BY rule, action, t ORDER BY t"
        ),
        format!(
            "SELECT blob1 AS rule, blob5 AS key_hash, SUM(_sample_interval) AS n FROM {table} WHERE blob2 = 'blocked' AND blob5 != '' AND {since} GROUP BY rule, key_hash ORDER BY n DESC LIMIT 10"
        ),
        format!(
            "SELECT blob4 AS country, blob3 AS colo, SUM(_sample_interval) AS n FROM {table} WHERE {since} AND blob2 != 'allowed' AND blob2 != 'allowed_total' AND blob2 != 'spend' GROUP BY country, colo ORDER BY n DESC LIMIT 10"
        ),
        format!(
            "SELECT {at} AS t, blob1 AS rule, blob2 AS action, blob7 AS reason, blob8 AS method, blob9 AS route, blob4 AS country, blob3 AS colo, blob10 AS asn, blob5 AS key_hash, blob11 AS raw_key, double1 AS retry_ms, _sample_interval AS n FROM {table} WHERE {since} AND (blob2 = 'blocked' OR blob2 = 'shadow' OR blob7 = 'fail_closed') ORDER BY t DESC LIMIT {EVENTS_LISTED}"
        ),
        format!(
            "SELECT blob1 AS rule, blob6 AS model, SUM(_sample_interval) AS n, SUM(_sample_interval * double1) AS micro FROM {table} WHERE blob2 = 'spend' AND {since} GROUP BY rule, model ORDER BY micro DESC LIMIT {SPEND_LISTED}"
        ),
    ]
}

/// The query of one key's spend by model (its status'): the `spend`
/// points of `rule` and `key_hash` of the last `span_s` seconds (its
/// longest window), by model, dearest first. `None` when the rule's name
/// or the hash cannot be written in an SQL string as it is (a quote, a
/// backslash, a control character): no escaping to get wrong.
pub(crate) fn key_spend_query(dialect: Dialect, dataset: &str, rule: &str, key_hash: &str, span_s: u64) -> Option<String> {
    let plain = |text: &str| !text.chars().any(|c| c == '\'' || c == '\\' || c.is_control());
    if !plain(rule) || !plain(key_hash) {
        return None;
    }
    let (since, table) = match dialect {
        Dialect::AnalyticsEngine => (format!("timestamp > NOW() - INTERVAL '{span_s}' SECOND"), dataset),
        Dialect::Sqlite => (format!("timestamp > unixepoch() - {span_s}"), "points"),
    };
    Some(format!(
        "SELECT blob1 AS rule, blob6 AS model, SUM(_sample_interval) AS n, SUM(_sample_interval * double1) AS micro FROM {table} WHERE blob2 = 'spend' AND blob1 = '{rule}' AND blob5 = '{key_hash}' AND {since} GROUP BY rule, model ORDER BY micro DESC LIMIT {SPEND_LISTED}"
    ))
}

/// A dataset name as a query may hold it (letters, digits, `_`), else `tollgate`.
pub(crate) fn dataset(name: Option<&str>) -> String {
    name.filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).unwrap_or("tollgate").to_string()
}

/// An answer's rows (`data`); a malformed answer: none.
fn rows(answer: &str) -> Vec<Value> {
    match serde_json::from_str::<Value>(answer).ok().as_mut().and_then(|v| v.get_mut("data")).map(Value::take) {
        Some(Value::Array(rows)) => rows,
        _ => Vec::new(),
    }
}

/// A count as the SQL API writes one: a number or a quoted integer.
fn count(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        other => other.as_u64().or_else(|| other.as_f64().map(|f| f as u64)).unwrap_or(0),
    }
}

fn field(row: &Value, name: &str) -> String {
    match &row[name] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The page's JSON twin (`GET {prefix}/traffic?range=`), from the
/// answers (`Err`: why there are none): per rule, per action, the counts of
/// each bucket from `now_s - span` (oldest first) and their totals; the top
/// blocked key hashes; the top countries and colos; the newest refusals
/// ([`events`]: the raw key only of the rules `shows_key` names, those
/// whose `metrics_raw_key` is on now); the spend by model ([`spend`],
/// each amount said by `money`: a rule's micro-units in its currency).
pub(crate) fn body(range: Range, now_s: u64, answers: Result<Answers, String>, shows_key: &dyn Fn(&str) -> bool, money: &dyn Fn(&str, u64) -> Option<String>) -> Value {
    let answers = match answers {
        Ok(a) => a,
        Err(why) => return serde_json::json!({ "range": range.name(), "error": why }),
    };
    let (span, bucket) = range.seconds();
    let first = (now_s.saturating_sub(span) / bucket + 1) * bucket;
    let series = series(&answers[0], first, bucket, span / bucket);
    let totals: serde_json::Map<String, Value> = series
        .iter()
        .map(|(rule, per_action)| {
            let sums = per_action.as_object().into_iter().flatten().map(|(a, c)| (a.clone(), Value::from(c.as_array().into_iter().flatten().map(count).sum::<u64>())));
            (rule.clone(), Value::Object(sums.collect()))
        })
        .collect();
    let top = |answer: &str, a: &str, b: &str| -> Vec<Value> {
        rows(answer).iter().map(|r| serde_json::json!({ a: field(r, a), b: field(r, b), "n": count(&r["n"]) })).collect()
    };
    serde_json::json!({
        "range": range.name(),
        "from_s": first,
        "bucket_s": bucket,
        "rules": series,
        "totals": totals,
        "top_keys": top(&answers[1], "rule", "key_hash"),
        "top_places": top(&answers[2], "country", "colo"),
        "events": events(&answers[3], shows_key),
        "spend": spend(&answers[4], money),
    })
}

/// The spend by rule and model, dearest first: `answers` (priced answers
/// settled), `micro` (their charges, in micro-units of the rule's
/// currency) and `spent`, `money`'s words for it (`12.345678 JPY`; the
/// bare number when the rule is no longer priced). Analytics Engine may
/// sample: these are its estimates; a key's exact spend is its object's
/// (`status`).
pub(crate) fn spend(answer: &str, money: &dyn Fn(&str, u64) -> Option<String>) -> Vec<Value> {
    rows(answer)
        .iter()
        .map(|r| {
            let (rule, micro) = (field(r, "rule"), count(&r["micro"]));
            let spent = money(&rule, micro).unwrap_or_else(|| micro.to_string());
            serde_json::json!({ "rule": rule, "model": field(r, "model"), "answers": count(&r["n"]), "micro": micro, "spent": spent })
        })
        .collect()
}

/// Per rule, per action, the counts of the `buckets` buckets of `bucket`
/// seconds from `first`.
fn series(answer: &str, first: u64, bucket: u64, buckets: u64) -> serde_json::Map<String, Value> {
    let mut series = serde_json::Map::new();
    for row in rows(answer) {
        let (rule, mut action, t) = (field(&row, "rule"), field(&row, "action"), count(&row["t"]));
        // A `limited` rule's allowed decisions come as totals, each point
        // standing for `double1` of them.
        let n = if action == "allowed_total" {
            action = "allowed".to_string();
            count(&row["w"])
        } else {
            count(&row["n"])
        };
        let Some(slot) = t.checked_sub(first).map(|d| d / bucket).filter(|s| *s < buckets) else { continue };
        let per_rule = series.entry(rule).or_insert_with(|| Value::Object(serde_json::Map::new()));
        let counts = &mut per_rule[action.as_str()];
        if !counts.is_array() {
            *counts = Value::Array(vec![Value::from(0u64); buckets as usize]);
        }
        counts[slot as usize] = Value::from(count(&counts[slot as usize]) + n);
    }
    series
}

/// The newest refusals, newest first: when (`t`, Unix seconds), the rule,
/// the action, why (`reason`), the method, the route (the rule's pattern),
/// the country, colo and ASN, the key hash, and `key`, the raw key, only
/// where the point holds one and `shows_key` names its rule.
fn events(answer: &str, shows_key: &dyn Fn(&str) -> bool) -> Vec<Value> {
    let names = ["rule", "action", "reason", "method", "route", "country", "colo", "asn", "key_hash"];
    rows(answer)
        .iter()
        .map(|r| {
            let mut event = serde_json::Map::new();
            event.insert("t".into(), Value::from(count(&r["t"])));
            for name in names {
                event.insert(name.into(), Value::from(field(r, name)));
            }
            event.insert("retry_ms".into(), Value::from(count(&r["retry_ms"])));
            event.insert("n".into(), Value::from(count(&r["n"]).max(1)));
            let key = field(r, "raw_key");
            if !key.is_empty() && shows_key(&field(r, "rule")) {
                event.insert("key".into(), Value::from(key));
            }
            Value::Object(event)
        })
        .collect()
}

/// Each action's line style: its colour and dash pattern, so that no
/// series is told apart by colour alone (WCAG 2.2 SC 1.4.1).
fn dashes(action: &str) -> &'static str {
    match action {
        "blocked" => "",
        "allowed" => "1 3",
        "shadow" => "6 3",
        "exempt" => "2 2",
        _ => "8 3 2 3",
    }
}

/// A bucket's start as the axis writes it: `HH:MM` (UTC), with the day
/// (`MM-DD HH:MM`) when buckets are hours or longer.
fn clock(t_s: u64, bucket_s: u64) -> String {
    let full = crate::admin::console::time(i64::try_from(t_s.saturating_mul(1000)).unwrap_or(i64::MAX));
    let from = if bucket_s >= 3_600 { 5 } else { 11 };
    full.get(from..16).unwrap_or_default().to_string()
}

/// The lines of a chart: each action that has counts, in [`ACTIONS`]' order.
fn lines(per_action: &Value) -> Vec<(&'static str, &'static str, Vec<u64>)> {
    ACTIONS
        .iter()
        .filter_map(|(action, colour)| Some((*action, *colour, per_action.get(*action)?.as_array()?.iter().map(count).collect())))
        .collect()
}

/// One rule's chart: a line per action that has points, integer
/// coordinates, the scale's top labelled, a time axis (UTC) under it, and
/// a legend naming each line (its colour and dash); `from_s` and
/// `bucket_s` date the buckets.
pub(crate) fn chart(rule: &str, per_action: &Value, from_s: u64, bucket_s: u64) -> String {
    const W: u64 = 600;
    const H: u64 = 140;
    const PAD: u64 = 28;
    let lines = lines(per_action);
    let top = lines.iter().flat_map(|(_, _, c)| c.iter().copied()).max().unwrap_or(0).max(1);
    let n = lines.iter().map(|(_, _, c)| c.len()).max().unwrap_or(0).max(2) as u64 - 1;
    let mut svg = format!(
        "<svg class=\"chart\" role=\"img\" aria-label=\"{label}\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\">\
<line x1=\"{PAD}\" y1=\"{H}\" x2=\"{w}\" y2=\"{H}\" stroke=\"#666\"/><text x=\"2\" y=\"12\" font-size=\"10\">{top}</text>",
        label = crate::admin::console::esc(&summary(rule, &lines)),
        w = W + PAD,
        h = H + 40,
    );
    for tick in [0, n / 4, n / 2, 3 * n / 4, n] {
        let x = PAD + tick * W / n;
        let anchor = if tick == 0 { "start" } else if tick == n { "end" } else { "middle" };
        let _ = write!(
            svg,
            "<line x1=\"{x}\" y1=\"{H}\" x2=\"{x}\" y2=\"{}\" stroke=\"#666\"/><text x=\"{x}\" y=\"{}\" font-size=\"10\" text-anchor=\"{anchor}\">{}</text>",
            H + 4,
            H + 15,
            clock(from_s + tick * bucket_s, bucket_s)
        );
    }
    let mut legend = PAD;
    for (action, colour, counts) in &lines {
        let points: Vec<String> =
            counts.iter().enumerate().map(|(i, c)| format!("{},{}", PAD + i as u64 * W / n, H - c * (H - 14) / top)).collect();
        let dash = match dashes(action) {
            "" => String::new(),
            d => format!(" stroke-dasharray=\"{d}\""),
        };
        let _ = write!(
            svg,
            "<polyline class=\"{action}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>\
<line x1=\"{legend}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\" font-size=\"11\">{action}</text>",
            points.join(" "),
            legend + 18,
            legend + 22,
            H + 35,
            y = H + 31
        );
        legend += 90;
    }
    svg + "</svg>"
}

/// The chart in words, its text alternative: each line's total.
fn summary(rule: &str, lines: &[(&str, &str, Vec<u64>)]) -> String {
    let totals: Vec<String> = lines.iter().map(|(action, _, c)| format!("{action} {}", c.iter().sum::<u64>())).collect();
    format!("{rule}: {}", totals.join(", "))
}

/// The chart's numbers as a table (its text alternative for a reader who
/// wants more than totals): per action, the total and the busiest bucket.
pub(crate) fn table(per_action: &Value, from_s: u64, bucket_s: u64) -> String {
    let mut out = String::from("<table class=\"numbers\"><tr><th scope=\"col\">Action</th><th scope=\"col\">Total</th><th scope=\"col\">Busiest (UTC)</th></tr>");
    for (action, _, counts) in lines(per_action) {
        let (peak_at, peak) = counts.iter().enumerate().max_by_key(|(i, c)| (**c, usize::MAX - i)).map_or((0, 0), |(i, c)| (i as u64, *c));
        let busiest = if peak == 0 { "-".to_string() } else { format!("{peak} at {}", clock(from_s + peak_at * bucket_s, bucket_s)) };
        let _ = write!(out, "<tr><td>{action}</td><td>{}</td><td>{busiest}</td></tr>", counts.iter().sum::<u64>());
    }
    out + "</table>"
}

/// The share of `part` in `whole`, in whole percent (rounded down; 0 of 0).
fn percent(part: u64, whole: u64) -> u64 {
    part.saturating_mul(100).checked_div(whole).unwrap_or(0)
}

/// The "Allowed vs blocked per rule" table of the Traffic page, from the
/// body's `totals`: per rule, its allowed, blocked and shadow decisions,
/// the blocked share, and a bar of the two (its text alternative the
/// row's numbers, in its label).
pub(crate) fn allowed_blocked(totals: &Value) -> String {
    const W: u64 = 200;
    let mut out = String::from(
        "<section><h2>Allowed vs blocked per rule</h2><table id=\"allowed-blocked\"><tr><th scope=\"col\">Rule</th><th scope=\"col\">Allowed</th>\
<th scope=\"col\">Blocked</th><th scope=\"col\">Shadow</th><th scope=\"col\">Blocked share</th><th scope=\"col\">Bar</th></tr>",
    );
    for (rule, per_action) in totals.as_object().into_iter().flatten() {
        let n = |action: &str| per_action.get(action).map(count).unwrap_or(0);
        let (allowed, blocked, shadow) = (n("allowed"), n("blocked"), n("shadow"));
        let share = percent(blocked, allowed + blocked);
        let blocked_w = (blocked * W).checked_div(allowed + blocked).unwrap_or(0);
        let label = crate::admin::console::esc(&format!("{rule}: {allowed} allowed, {blocked} blocked ({share}%)"));
        let _ = write!(
            out,
            "<tr><td>{r}</td><td>{allowed}</td><td>{blocked}</td><td>{shadow}</td><td>{share}%</td><td><svg class=\"bar\" role=\"img\" aria-label=\"{label}\" viewBox=\"0 0 {W} 12\" width=\"{W}\" height=\"12\">\
<rect width=\"{W}\" height=\"12\" fill=\"{a}\"/><rect width=\"{blocked_w}\" height=\"12\" fill=\"{b}\"/></svg></td></tr>",
            r = crate::admin::console::esc(rule),
            a = ACTIONS[0].1,
            b = ACTIONS[1].1,
        );
    }
    out + "</table><p>In the bar, red is blocked and blue allowed; the numbers are beside it.</p></section>"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_dialects_count_by_sample_interval_over_the_range() {
        for dialect in [Dialect::AnalyticsEngine, Dialect::Sqlite] {
            let [series, top, places, events, spend] = queries(dialect, "tollgate", Range::Day);
            assert!(spend.contains("blob2 = 'spend'") && spend.contains("SUM(_sample_interval * double1) AS micro") && spend.contains("GROUP BY rule, model"), "{spend}");
            assert!(series.contains("blob2 != 'spend'") && places.contains("blob2 != 'spend'"), "a spend is no decision");
            assert!(events.contains("_sample_interval AS n") && events.contains("86400"), "each listed refusal stands for its sample interval: {events}");
            for q in [series, top, places] {
                assert!(q.contains("SUM(_sample_interval)"), "{q}");
                assert!(q.contains("86400"), "{q}");
            }
        }
        assert!(queries(Dialect::AnalyticsEngine, "tg_metrics", Range::Hour)[0].contains("FROM tg_metrics"));
        assert!(queries(Dialect::Sqlite, "tg_metrics", Range::Hour)[0].contains("FROM points"));
        for dialect in [Dialect::AnalyticsEngine, Dialect::Sqlite] {
            let q = &queries(dialect, "tollgate", Range::Hour)[3];
            for column in ["blob7 AS reason", "blob8 AS method", "blob9 AS route", "blob10 AS asn", "blob11 AS raw_key", "ORDER BY t DESC"] {
                assert!(q.contains(column), "the events query reads {column}: {q}");
            }
            assert!(queries(dialect, "tollgate", Range::Hour)[1].contains("blob5 != ''"), "a missing key's refusal has no key to top the list");
        }
        assert_eq!(dataset(Some("x; DROP")), "tollgate", "a name no query can be made of");
        let q = key_spend_query(Dialect::Sqlite, "tollgate", "school-yen", "0f1e2d3c4b5a6978", 86_400).unwrap();
        assert!(q.contains("blob1 = 'school-yen' AND blob5 = '0f1e2d3c4b5a6978'") && q.contains("unixepoch() - 86400") && q.contains("FROM points"), "{q}");
        assert!(key_spend_query(Dialect::AnalyticsEngine, "tg", "r", "h", 60).unwrap().contains("FROM tg WHERE blob2 = 'spend'"));
        for odd in ["it's", "a\\b", "x\ny"] {
            assert_eq!(key_spend_query(Dialect::AnalyticsEngine, "tg", odd, "h", 60), None, "{odd}");
        }
        assert_eq!(Range::parse(Some("week")), Range::Week);
        assert_eq!(Range::parse(Some("year")), Range::Hour);
    }

    #[test]
    fn answers_in_the_sql_apis_format_become_series_and_tops() {
        let now = 1_796_083_200; // a minute boundary
        let series = json!({ "meta": [{ "name": "rule", "type": "String" }, { "name": "n", "type": "UInt64" }],
            "data": [
                { "rule": "api", "action": "blocked", "t": now - 60, "n": "12" },
                { "rule": "api", "action": "blocked", "t": now - 120, "n": "3" },
                { "rule": "api", "action": "exempt", "t": now - 60, "n": 2 },
                { "rule": "api", "action": "blocked", "t": now - 7200, "n": "99" },
                { "rule": "api", "action": "allowed_total", "t": now - 60, "n": "2", "w": "41" },
                { "rule": "all", "action": "allowed", "t": now - 60, "n": "5", "w": "0" }
            ], "rows": 6, "rows_before_limit_at_least": 6 });
        let top = json!({ "data": [{ "rule": "api", "key_hash": "88fc262cb3e5792f", "n": "15" }], "rows": 1 });
        let places = json!({ "data": [{ "country": "NL", "colo": "AMS", "n": "17" }], "rows": 1 });
        let events = json!({ "data": [
            { "t": now - 5, "rule": "login", "action": "blocked", "reason": "penalty", "method": "POST", "route": "/login", "country": "NL",
              "colo": "AMS", "asn": "64500", "key_hash": "88fc262cb3e5792f", "raw_key": "ip=203.0.113.7", "retry_ms": 9000.0, "n": 1 },
            { "t": now - 9, "rule": "api", "action": "blocked", "reason": "limit", "method": "GET", "route": "/api/*", "country": "NL",
              "colo": "AMS", "asn": "", "key_hash": "0f0f", "raw_key": "ip=203.0.113.7", "retry_ms": 0, "n": "1" }
        ] });
        let shows = |rule: &str| rule == "login";
        let spend = json!({ "data": [
            { "rule": "yen", "model": "gpt-4o*", "n": "3", "micro": 12_345_678.0 },
            { "rule": "gone", "model": "(unpriced)", "n": "1", "micro": "900" }
        ] });
        let money = |rule: &str, micro: u64| (rule == "yen").then(|| crate::config::price::money_text(micro, "JPY"));
        let b = body(Range::Hour, now, Ok([series.to_string(), top.to_string(), places.to_string(), events.to_string(), spend.to_string()]), &shows, &money);
        assert_eq!(b["spend"], json!([
            { "rule": "yen", "model": "gpt-4o*", "answers": 3, "micro": 12_345_678, "spent": "12.345678 JPY" },
            { "rule": "gone", "model": "(unpriced)", "answers": 1, "micro": 900, "spent": "900" }
        ]), "in the rule's currency; a rule no longer priced: the bare micro-units");
        let blocked = b["rules"]["api"]["blocked"].as_array().unwrap();
        assert_eq!(blocked.len(), 60);
        assert_eq!(blocked[58], 12, "the last whole minute but one");
        assert_eq!(blocked[57], 3);
        assert_eq!(blocked.iter().map(count).sum::<u64>(), 15, "a point outside the range is dropped");
        assert_eq!(b["rules"]["api"]["allowed"][58], 41, "two allowed_total points standing for 41 decisions");
        assert_eq!(b["rules"]["all"]["allowed"][58], 5, "an `all` rule's own points, one each");
        assert_eq!(b["top_keys"][0]["n"], 15);
        assert_eq!(b["top_places"][0]["colo"], "AMS");
        assert_eq!(b["totals"]["api"], json!({ "blocked": 15, "exempt": 2, "allowed": 41 }), "each action's sum over the range");
        let e = &b["events"];
        assert_eq!((e[0]["rule"].as_str(), e[0]["reason"].as_str(), e[0]["route"].as_str(), e[0]["country"].as_str()), (Some("login"), Some("penalty"), Some("/login"), Some("NL")));
        assert_eq!((e[0]["t"].as_u64(), e[0]["retry_ms"].as_u64(), e[0]["asn"].as_str()), (Some(now - 5), Some(9000), Some("64500")));
        assert_eq!(e[0]["key"], "ip=203.0.113.7", "the rule asks for its raw key");
        assert!(e[1].get("key").is_none(), "a rule that does not ask shows no raw key, even if a point holds one: {}", e[1]);
        let nothing = ["nope".to_string(), String::new(), "{}".to_string(), "[]".to_string(), String::new()];
        assert_eq!(body(Range::Hour, now, Ok(nothing), &shows, &money)["rules"], json!({}));
        assert_eq!(body(Range::Hour, now, Err("not set".into()), &shows, &money)["error"], "not set");
    }

    #[test]
    fn a_chart_is_integer_svg_with_a_line_per_action() {
        let svg = chart("api<1>", &json!({ "blocked": [0, 5, 10], "exempt": [1, 1, 1] }), 1_796_083_200, 60);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("points=\"28,140 328,77 628,14\""), "{svg}");
        assert!(svg.contains("aria-label=\"api&lt;1&gt;: blocked 15, exempt 3\""), "the text alternative: {svg}");
        assert!(svg.contains(">00:00</text>") && svg.contains(">00:02</text>"), "a time axis in UTC: {svg}");
        assert!(svg.contains("stroke-dasharray=\"2 2\""), "exempt is dashed, not only another colour");
        let numbers = table(&json!({ "blocked": [0, 5, 10] }), 1_796_083_200, 60);
        assert!(numbers.contains("<td>blocked</td><td>15</td><td>10 at 00:02</td>"), "{numbers}");
        assert!(!svg.contains('.'), "no float anywhere: {svg}");
    }

    #[test]
    fn allowed_vs_blocked_is_a_row_per_rule_with_its_share() {
        let table = allowed_blocked(&json!({ "api": { "allowed": 30, "blocked": 10, "shadow": 2 }, "idle": {} }));
        assert!(table.contains("<td>api</td><td>30</td><td>10</td><td>2</td><td>25%</td>"), "{table}");
        assert!(table.contains("<rect width=\"50\""), "a quarter of the 200-wide bar is blocked: {table}");
        assert!(table.contains("aria-label=\"api: 30 allowed, 10 blocked (25%)\""), "{table}");
        assert!(table.contains("<td>idle</td><td>0</td><td>0</td><td>0</td><td>0%</td>"), "no decisions: no division by zero");
    }

}
