//! Per-request cost of the pure core: canonicalization and matching, and the
//! sliding-log decision.
//!
//! `cargo bench --bench core`. Targets: canonicalize + match against the
//! shipped config ≤ 5 µs median, against a 20-rule config ≤ 20 µs median.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use serde_json::json;
use tollgate::internals::canon::{canonical_path, CanonicalQuery, RawUrl};
use tollgate::Config;
use tollgate::internals::rules::RequestView;
use tollgate::internals::window::{decide, Hit, Limit};

/// The config `wrangler.toml` ships (`[vars.TOLLGATE]`).
fn shipped() -> Config {
    let manifest: toml::Value = toml::from_str(include_str!("../wrangler.toml")).expect("wrangler.toml parses");
    let tollgate = serde_json::to_value(&manifest["vars"]["TOLLGATE"]).expect("TOML converts to JSON");
    Config::from_json(&tollgate).expect("the shipped config is valid")
}

/// Twenty rules of the kinds a real zone has: path groups, hosts, methods,
/// query conditions, a case-insensitive rule, custom suffixes, wildcards.
fn twenty_rules() -> Config {
    let limits = json!([{ "requests": 100, "window": "60s" }]);
    let rules = json!([
        { "name": "heavy-example", "path": "/api/example", "query": { "mode": "heavy" } },
        { "name": "login", "path": "/login", "methods": ["POST"] },
        { "name": "user-write", "path": "/api/v1/users/:id", "methods": ["PUT", "PATCH", "DELETE"] },
        { "name": "user-posts", "path": "/api/v1/users/:id/posts", "methods": ["POST"] },
        { "name": "search", "path": "/search", "query": { "q": true } },
        { "name": "export", "path": "/api/v1/export", "query": { "format": ["csv", "xlsx"] } },
        { "name": "admin", "path": "/*", "host": "admin.example.com" },
        { "name": "tenant", "path": "/t/:tenant/*", "key": ["path:tenant"] },
        { "name": "order-items", "path": "/api/v2/orders/:order/items/:item" },
        { "name": "graphql", "path": "/graphql", "methods": ["POST"] },
        { "name": "token", "path": "/oauth/token", "host": "auth.example.com", "methods": ["POST"] },
        { "name": "reports", "path": "/api/v1/reports/:report", "suffixes": ["pdf", "csv"] },
        { "name": "upload", "path": "/upload/*", "methods": ["POST", "PUT"] },
        { "name": "comments", "path": "/API/V1/Comments", "case_insensitive": true, "methods": ["POST"] },
        { "name": "password-reset", "path": "/password/reset", "methods": ["POST"] },
        { "name": "paged", "path": "/api/v1/items", "query": { "page": true, "per_page": "1000" } },
        { "name": "files", "path": "/files/*" },
        { "name": "item-by-number", "path": "/api/v1/items/:id(\\d+)" },
        { "name": "webhooks", "path": "/webhooks/:provider", "host": "hooks.example.com", "methods": ["POST"] },
        { "name": "feed", "path": "/api/v1/feed", "query": { "sort": ["new", "top"], "limit": "100" } },
    ]);
    let rules: Vec<_> = rules
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["limits"] = limits.clone();
            r
        })
        .collect();
    let config = Config::from_json(&json!({ "rules": rules })).expect("the 20-rule config is valid");
    assert_eq!(config.rules.len(), 20);
    config
}

/// One request's work in the Worker: split, canonicalize, match every rule.
fn per_request(config: &Config, method: &str, url: &str) -> usize {
    let raw = RawUrl::split(url);
    let Ok(path) = canonical_path(raw.path) else { return usize::MAX };
    let query = CanonicalQuery::parse(raw.query);
    let view = RequestView { method, host: &raw.host, path: &path, query: &query };
    config.matching(&view).len()
}

const URLS: &[(&str, &str, usize)] = &[
    ("match", "https://www.example.com/api/example?mode=heavy", 1),
    ("no-match", "https://www.example.com/api/v1/products/1234?ref=home&utm_source=news", 0),
    ("bypass", "https://www.example.com/api/example%2ejson?mode=normal&mode=heavy", 1),
];

fn bench_matching(c: &mut Criterion) {
    for (label, config) in [("shipped", shipped()), ("20-rules", twenty_rules())] {
        let mut group = c.benchmark_group(format!("canonicalize+match/{label}"));
        for (name, url, want) in URLS {
            assert_eq!(per_request(&config, "GET", url), *want, "{label} {url}");
            group.bench_function(*name, |b| b.iter(|| per_request(&config, black_box("GET"), black_box(url))));
        }
        group.finish();
    }
}

fn bench_decide(c: &mut Criterion) {
    let limit = |requests: u32, window_ms: u64| Limit::new(requests, window_ms).expect("non-zero");
    let now = 1_700_000_060_000_i64;
    let log: Vec<Hit> = (0..10).map(|i| Hit { at_ms: now - 50_000 + i * 5_000, cost: 1 }).collect();
    let mut group = c.benchmark_group("window::decide/10-hit-log/2-windows");
    let roomy = [limit(20, 60_000), limit(100, 3_600_000)];
    assert!(decide(&log, now, &roomy, 1).tally.allowed);
    group.bench_function("allowed", |b| b.iter(|| decide(black_box(&log), black_box(now), &roomy, 1)));
    let full = [limit(10, 60_000), limit(100, 3_600_000)];
    assert!(!decide(&log, now, &full, 1).tally.allowed);
    group.bench_function("blocked", |b| b.iter(|| decide(black_box(&log), black_box(now), &full, 1)));
    group.finish();
}

criterion_group!(benches, bench_matching, bench_decide);
criterion_main!(benches);
