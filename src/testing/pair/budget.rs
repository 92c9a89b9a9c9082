//! Daily budgets of realistic size on the default algorithm,
//! on the [`Pair`]: a 1,000,000-token day admits exactly three
//! calls of 300,000 and frees the first exactly a day later; a daily
//! billion of small hits keeps its row within the coalesced log's bound.

use super::Pair;
use crate::count::coalesce::{EXACT_ENTRIES, GRANULES_PER_WINDOW};
use crate::count::window::{decode_log, Hit};
use crate::testing::Req;
use serde_json::{json, Value};

const DAY: i64 = 86_400_000;

fn tokens_rule(extra: Value) -> Value {
    let mut rule = json!({ "name": "tokens", "path": "/v1/*", "key": ["header:x-api-key"], "limits": [{ "requests": 1_000_000, "window": "1d" }],
        "ratelimit_headers": true });
    rule.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!([rule])
}

fn call() -> Req {
    Req::get("/v1/chat").header("x-api-key", "sk-school-7")
}

/// The `r=` (remaining) of a `RateLimit` field.
fn remaining(field: Option<&str>) -> Option<u64> {
    field?.split(";r=").nth(1)?.split(';').next()?.parse().ok()
}

/// The stored log of the one `tokens` object (its count's state).
fn stored_log(pair: &Pair, rule: &str) -> Vec<Hit> {
    let rows = pair.object_rows(rule);
    let text = rows.first().map_or("", |(_, s)| s.row_text());
    decode_log(text.split(';').next().unwrap_or("")).unwrap()
}

/// Three calls of 300,000 a second apart, the fourth refused, by the
/// origin's reported usage (`metering`) or a fixed `cost`; the fourth is
/// refused until the first is exactly a day old, and then served.
#[test]
fn a_million_token_day_admits_exactly_three_calls_of_300_000() {
    let metered = json!({ "counting": { "mode": "response" }, "metering": { "header": "x-usage-tokens", "reserve": 300_000, "max": 300_000 } });
    for extra in [metered, json!({ "cost": 300_000 })] {
        let mut pair = Pair::new(tokens_rule(extra.clone()));
        let first = pair.now();
        for i in 0..3u64 {
            let served = pair.request(call());
            assert_eq!(served.status, 200, "{extra}: call {i}");
            assert_eq!(remaining(served.header("ratelimit")), Some(1_000_000 - 300_000 * (i + 1)), "{extra}: {:?}", served.header("ratelimit"));
            pair.settle(&served, Some(200), &[("x-usage-tokens", "300000")]);
            pair.advance(1_000);
        }
        let fourth = pair.request(call());
        assert_eq!(fourth.status, 429, "{extra}: the fourth call is refused");
        assert_eq!(fourth.retry_after, Some(86_397), "{extra}: until the first call is a day old");
        assert_eq!(remaining(fourth.header("ratelimit")), Some(100_000), "{extra}: {:?}", fourth.header("ratelimit"));
        pair.advance(first + DAY - 1 - pair.now());
        assert_eq!(pair.request(call()).status, 429, "{extra}: still a day's 900,000 a millisecond before");
        pair.advance(1);
        let again = pair.request(call());
        assert_eq!(again.status, 200, "{extra}: the first call's 300,000 are free exactly a day later");
        assert_eq!(remaining(again.header("ratelimit")), Some(100_000), "{extra}");
    }
}

/// A small deterministic generator (xorshift), for arrivals and costs.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The `bulk` rule: a daily billion, each call's tokens reported by the
/// origin (`x-usage-tokens`, up to 20,000).
fn bulk_rule() -> Value {
    json!([{ "name": "bulk", "path": "/v1/*", "key": ["header:x-api-key"], "limits": [{ "requests": 1_000_000_000u32, "window": "1d" }],
        "counting": { "mode": "response" }, "metering": { "header": "x-usage-tokens", "reserve": 1, "max": 20_000 } }])
}

const BULK_KEY: &str = "header:x-api-key=sk-bulk";

/// One bulk call of `tokens` (reserved, served, committed); its status.
fn bulk_call(pair: &mut Pair, tokens: u64) -> u16 {
    let exchange = pair.request(Req::get("/v1/batch").header("x-api-key", "sk-bulk"));
    if exchange.status == 200 {
        pair.settle(&exchange, Some(200), &[("x-usage-tokens", &tokens.to_string())]);
    }
    exchange.status
}

/// A daily billion of calls of 1 to 20,000 tokens, 1 to 11 s apart: the
/// object starts from a day's history just under the exact log's cap
/// (9,990 calls of the same kind, 8.64 s apart, written as the exact log writes them,
/// so the test need not send them one by one); past 10,000 entries the
/// row is coalesced and never grows past the cap, every unit is kept, and
/// every call is served (the budget is far from spent).
#[test]
fn a_daily_billion_of_small_calls_keeps_its_row_within_the_bound() {
    let mut pair = Pair::new(bulk_rule());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = pair.now();
    let history: Vec<Hit> = (0..9_990i64).map(|i| Hit { at_ms: start - 1_000 - (9_989 - i) * 8_640, cost: 1 + rng.below(20_000) as u32 }).collect();
    let mut units: u64 = history.iter().map(|h| u64::from(h.cost)).sum();
    let name = format!("bulk\n{BULK_KEY}");
    let storage = crate::count::store::Storage { row: Some((crate::count::window::encode_log(&history), DAY as u64)), ..Default::default() };
    pair.objects.rows.insert(name, storage);
    let mut coalesced = false;
    let granule = crate::count::coalesce::granule_ms(DAY as u64) as i64;
    for i in 0..300 {
        let tokens = 1 + rng.below(20_000);
        assert_eq!(bulk_call(&mut pair, tokens), 200, "call {i}");
        units += tokens;
        let log = stored_log(&pair, "bulk");
        coalesced |= log.len() < 9_990 + i + 1 - expired_count(&history, pair.now());
        assert!(log.len() <= EXACT_ENTRIES, "call {i}: {} entries", log.len());
        // Every unit still in the day kept; a unit that left it is still
        // counted for at most one granule (65.5 s).
        let held: u64 = log.iter().map(|h| u64::from(h.cost)).sum();
        let (live, late) = (units - expired(&history, pair.now()), units - expired(&history, pair.now() - granule));
        assert!((live..=late).contains(&held), "call {i}: {held} held, {live} live, {late} a granule ago");
        pair.advance(1_000 + 1_000 * rng.below(11) as i64);
    }
    let log = stored_log(&pair, "bulk");
    assert!(coalesced && log.len() <= 2 * GRANULES_PER_WINDOW as usize + 2 + 300, "{} entries", log.len());
    let status = pair.status("bulk", BULK_KEY).unwrap();
    assert_eq!(status.tally.windows[0].used, log.iter().map(|h| u64::from(h.cost)).sum::<u64>(), "read back through the object");
    assert!(status.tally.windows[0].used >= units - expired(&history, pair.now()));
}

/// How many calls of `history` are a day old at `now`.
fn expired_count(history: &[Hit], now: i64) -> usize {
    history.iter().filter(|h| now - h.at_ms >= DAY).count()
}

/// The units of `history` a day old at `now` (left the window).
fn expired(history: &[Hit], now: i64) -> u64 {
    history.iter().filter(|h| now - h.at_ms >= DAY).map(|h| u64::from(h.cost)).sum()
}

/// Measurement, not a check (ignored; `cargo test --release --lib
/// pair::budget::measure -- --ignored --nocapture`): a daily billion at one
/// call a second of 1 to 20,000 tokens for a day and a half through the
/// Pair (entries and row bytes per object), and the object's step (decode,
/// decide, encode) on a row of 10,000 entries against one of 10.
#[test]
#[ignore]
fn measure_a_daily_billion_at_one_call_a_second() {
    let mut pair = Pair::new(bulk_rule());
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut most, mut most_bytes, mut sum, mut sum_bytes, mut n) = (0usize, 0usize, 0usize, 0usize, 0usize);
    for i in 0..129_600 {
        assert_eq!(bulk_call(&mut pair, 1 + rng.below(20_000)), 200);
        if i >= 86_400 {
            let bytes = pair.object_rows("bulk").first().map_or(0, |(_, s)| s.row_text().len());
            let entries = stored_log(&pair, "bulk").len();
            (most, most_bytes, sum, sum_bytes, n) = (most.max(entries), most_bytes.max(bytes), sum + entries, sum_bytes + bytes, n + 1);
        }
        pair.advance(1_000);
    }
    println!("second half-day at 1 call/s: entries max {most}, mean {}; row bytes max {most_bytes}, mean {}", sum / n, sum_bytes / n);
    let call = crate::count::protocol::Call::new(crate::count::protocol::Op::Hit, crate::count::protocol::Algorithm::SlidingLog,
        vec![crate::count::window::Limit::new(1_000_000_000, DAY as u64).unwrap()]).with_cost(5_000);
    for size in [10usize, 1_000, EXACT_ENTRIES] {
        let now = 10 * DAY;
        let log: Vec<Hit> = (0..size as i64).map(|i| Hit { at_ms: now - DAY + 1 + i * (DAY - 10_000) / size as i64, cost: 1 + rng.below(20_000) as u32 }).collect();
        let row = crate::count::window::encode_log(&log);
        let rounds = 200_000 / size.max(100) + 20;
        let started = std::time::Instant::now();
        for r in 0..rounds {
            std::hint::black_box(crate::count::counter::step(std::hint::black_box(&row), now + r as i64, &call).unwrap());
        }
        println!("object step (decode, decide, encode) at {size} entries ({} bytes): {:.1} µs", row.len(), started.elapsed().as_secs_f64() * 1e6 / rounds as f64);
    }
}
