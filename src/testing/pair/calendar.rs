//! Calendar windows on the [`Pair`], simulated time: exact in
//! each local period, refused with `Retry-After` to the period's end, back
//! at the boundary, with a rolling window beside them and with leases.

use super::{Pair, START_MS};
use crate::testing::Req;
use serde_json::json;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

/// `START_MS` is 2027-01-15T08:00Z, 17:00 in Tokyo: its next midnight is
/// 15:00Z, seven hours on.
const TOKYO_MIDNIGHT: i64 = START_MS + 7 * HOUR;

fn school() -> Pair {
    Pair::new(json!([{ "name": "school", "path": "/ask", "key": ["ip"], "ratelimit_headers": true,
        "limits": [{ "requests": 10, "window": "1m" }, { "requests": 300, "window": "day", "time_zone": "Asia/Tokyo" }] }]))
}

/// Requests at 10 a minute until `n` are admitted or one is refused by the
/// day; the admitted count.
fn ask_until_the_day_refuses(pair: &mut Pair, n: usize) -> usize {
    let mut admitted = 0;
    while admitted < n {
        let e = pair.request(Req::get("/ask").ip("203.0.113.7"));
        match e.status {
            200 => admitted += 1,
            429 if e.header("ratelimit").is_some_and(|r| r.starts_with("\"school/60s\"")) => pair.advance(MINUTE),
            _ => break,
        }
    }
    admitted
}

#[test]
fn a_tokyo_day_of_300_beside_10_a_minute_admits_300_and_comes_back_at_local_midnight() {
    let mut pair = school();
    assert_eq!(ask_until_the_day_refuses(&mut pair, 1_000), 300);
    assert!(pair.now() < TOKYO_MIDNIGHT - 6 * HOUR, "300 at 10 a minute take half an hour");

    pair.advance(MINUTE);
    let refused = pair.request(Req::get("/ask").ip("203.0.113.7"));
    assert_eq!(refused.status, 429);
    let to_midnight = (TOKYO_MIDNIGHT - pair.now()) / 1000;
    assert_eq!(refused.retry_after, Some(to_midnight as u64), "Retry-After is the wait to Tokyo's midnight");
    assert_eq!(refused.header("ratelimit"), Some(format!("\"school/day\";r=0;t={to_midnight}").as_str()));
    assert_eq!(refused.header("ratelimit-policy"), Some("\"school/60s\";q=10;w=60, \"school/day\";q=300"));

    // Still refused a second before midnight (the blocked cache included).
    pair.advance(TOKYO_MIDNIGHT - 1_000 - pair.now());
    let e = pair.request(Req::get("/ask").ip("203.0.113.7"));
    assert_eq!((e.status, e.retry_after), (429, Some(1)));
    // At midnight the whole day's quota is back.
    pair.advance(1_000);
    assert_eq!(ask_until_the_day_refuses(&mut pair, 1_000), 300);
}

/// 1,000 a month in New York: March 2027 has 31 days and loses an hour on
/// the 14th. The quota spent across the change, the 1,001st refused until
/// April 1 00:00 EDT (04:00Z), admitted then.
#[test]
fn a_new_york_month_across_a_dst_change_is_exact() {
    let mut pair = Pair::new(json!([{ "name": "plan", "path": "/api/*", "key": ["header:x-customer"],
        "limits": [{ "requests": 1000, "window": "month", "time_zone": "America/New_York" }] }]));
    // 2027-03-01 00:00 EST is 05:00Z; 2027-04-01 00:00 EDT is 04:00Z.
    let march_1 = 1_803_877_200_000;
    let april_1 = 1_806_552_000_000;
    let ask = |pair: &mut Pair| pair.request(Req::get("/api/x").header("x-customer", "acme")).status;
    // February's requests do not count in March.
    pair.advance(march_1 - 10 * MINUTE - pair.now());
    assert_eq!((0..5).map(|_| ask(&mut pair)).filter(|&s| s == 200).count(), 5);
    pair.advance(10 * MINUTE);
    // 500 in the first week, 500 after the change on the 14th.
    assert_eq!((0..500).filter(|_| ask(&mut pair) == 200).count(), 500);
    pair.advance(20 * 24 * HOUR);
    assert_eq!((0..501).filter(|_| ask(&mut pair) == 200).count(), 500);
    let refused = pair.request(Req::get("/api/x").header("x-customer", "acme"));
    assert_eq!(refused.retry_after, Some(((april_1 - pair.now()) / 1000) as u64));
    pair.advance(april_1 - 1_000 - pair.now());
    assert_eq!(ask(&mut pair), 429);
    pair.advance(1_000);
    assert_eq!(ask(&mut pair), 200);
}

/// A hot key leased from two edges: a lease granted before midnight may be
/// spent after it (its tokens are dated at its expiry, so they count in
/// the period they are spent in, or both): never more than the day's
/// quota in either local day.
#[test]
fn leases_across_midnight_never_pass_either_days_quota() {
    let mut pair = Pair::new(json!([{ "name": "hot", "path": "/api/*", "key": ["global"], "lease_ttl": "5s",
        "limits": [{ "requests": 2000, "window": "day", "time_zone": "Asia/Tokyo" }] }]))
    .edges(2);
    pair.advance(TOKYO_MIDNIGHT - 30_000 - pair.now());
    let (mut before, mut after) = (0, 0);
    for i in 0..6_000 {
        if pair.request_on(i % 2, Req::get("/api/x").ip("198.51.100.1")).status == 200 {
            if pair.now() < TOKYO_MIDNIGHT {
                before += 1;
            } else {
                after += 1;
            }
        }
        pair.advance(10);
    }
    assert!(before <= 2000 && after <= 2000, "{before} before, {after} after midnight");
    assert_eq!(before, 2000, "the day before is used up in the 30 s before midnight");
    assert!(after >= 1_990, "the new day is (nearly) all there: {after}");
}

/// A metered rule (the origin reports its tokens) on a Tokyo day: each
/// call reserves, then commits what the origin reported; the day's tokens
/// are exact and all come back at Tokyo's midnight.
#[test]
fn a_metered_tokyo_day_commits_the_reported_tokens_and_resets_at_midnight() {
    let mut pair = Pair::new(json!([{ "name": "tokens", "path": "/v1/*", "key": ["header:x-api-key"],
        "limits": [{ "requests": 10_000, "window": "day", "time_zone": "Asia/Tokyo" }],
        "counting": { "mode": "response" }, "metering": { "header": "x-usage-tokens", "reserve": 1_000, "max": 5_000 } }]));
    let call = |pair: &mut Pair, tokens: &str| {
        let e = pair.request(Req::get("/v1/chat").header("x-api-key", "sk-school"));
        if e.status == 200 {
            pair.settle(&e, Some(200), &[("x-usage-tokens", tokens)]);
        }
        e
    };
    // 2,500 tokens a call: four calls use 10,000; a fifth finds no room
    // for its reserve of 1,000.
    for _ in 0..4 {
        assert_eq!(call(&mut pair, "2500").status, 200);
        pair.advance(MINUTE);
    }
    let refused = call(&mut pair, "2500");
    assert_eq!(refused.status, 429);
    assert_eq!(refused.retry_after, Some(((TOKYO_MIDNIGHT - pair.now()) / 1000) as u64), "to Tokyo's midnight");
    pair.advance(TOKYO_MIDNIGHT - pair.now());
    assert_eq!(call(&mut pair, "5000").status, 200, "a new day");
    assert_eq!(call(&mut pair, "4500").status, 200);
    assert_eq!(call(&mut pair, "100").status, 429, "9,500 committed: a reserve of 1,000 would pass 10,000");
}
