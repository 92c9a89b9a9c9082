//! Hostile URLs through the pure core, natively and with time bounds (the
//! same inputs run end to end in tests/worker/hostile.test.mjs): a 16 KB URL
//! (Cloudflare's limit), 10,000 query parameters, 1,000 path segments; and
//! hostile form bodies at the largest `body_limit` (1 MiB).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;
use tollgate::internals::body::{form_field_values, parameters, BodyParams};
use tollgate::internals::canon::{canonical_path, CanonicalQuery, RawUrl};
use tollgate::Config;
use tollgate::internals::rules::RequestView;

fn shipped() -> Config {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/wrangler.toml")).unwrap();
    let toml: toml::Value = toml::from_str(&text).unwrap();
    let json = serde_json::to_value(&toml["vars"]["TOLLGATE"]).unwrap();
    Config::from_json(&json).unwrap()
}

fn matches(config: &Config, url: &str) -> bool {
    let raw = RawUrl::split(url);
    let path = canonical_path(raw.path).unwrap();
    let query = CanonicalQuery::parse(raw.query);
    let view = RequestView { method: "GET", host: &raw.host, path: &path, query: &query };
    !config.matching(&view).is_empty()
}

#[test]
fn sixteen_kilobyte_url() {
    let config = shipped();
    let pad = "x/%2e%2E/".repeat(16 * 1024 / 9 - 6);
    let url = format!("https://example.com/{pad}api/example?mode=heavy");
    assert!(url.len() <= 16 * 1024 && url.len() > 16 * 1024 - 100, "{}", url.len());
    let started = Instant::now();
    assert!(matches(&config, &url));
    assert!(started.elapsed().as_millis() < 500);
}

#[test]
fn ten_thousand_query_parameters() {
    let config = shipped();
    let many: Vec<String> = (0..10_000).map(|i| format!("k{i}=v{i}")).collect();
    let url = format!("/api/example?{}&mode=heavy", many.join("&"));
    let started = Instant::now();
    assert!(matches(&config, &url));
    assert!(!matches(&config, &format!("/api/example?{}", many.join("&"))));
    assert_eq!(CanonicalQuery::parse(&many.join("&")).pairs().len(), 10_000);
    assert!(started.elapsed().as_millis() < 2_000);
}

#[test]
fn thousand_path_segments() {
    let config = shipped();
    assert!(matches(&config, &format!("{}/api/example?mode=heavy", "/x/..".repeat(1_000))));
    assert!(!matches(&config, &format!("{}?mode=heavy", "/a".repeat(1_000))));
    assert_eq!(canonical_path(&"/a".repeat(1_000)).unwrap().len(), 2_000);
}

#[test]
fn one_mebibyte_multipart_bodies() {
    let boundary = "b".repeat(70);
    let content_type = format!("multipart/form-data; boundary={boundary}; boundary=\"{boundary}\"");
    let started = Instant::now();
    // Every line a near-delimiter; then 20,000 tiny parts; then one long line.
    let near = format!("--{}x\n", "b".repeat(69)).repeat((1 << 20) / 72);
    assert!(matches!(parameters(&content_type, None, Some(near.as_bytes())), BodyParams::Unreadable(_)));
    let part = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"k\"\r\n\r\nv\r\n");
    let parts = format!("{}--{boundary}--", part.repeat(20_000));
    assert!(parts.len() > 1_000_000);
    match parameters(&content_type, None, Some(parts.as_bytes())) {
        BodyParams::Pairs(pairs) => assert_eq!(pairs.len(), 20_000),
        other => panic!("{other:?}"),
    }
    assert_eq!(form_field_values(&content_type, parts.as_bytes(), "k"), ["v"]);
    let long = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"k\"\r\n\r\n{}\r\n--{boundary}--", "%".repeat(1 << 20));
    assert!(matches!(parameters(&content_type, None, Some(long.as_bytes())), BodyParams::Pairs(_)));
    let form = "a=%25%25&".repeat((1 << 20) / 9);
    assert!(matches!(parameters("application/x-www-form-urlencoded", None, Some(form.as_bytes())), BodyParams::Pairs(_)));
    assert!(started.elapsed().as_millis() < 3_000, "{:?}", started.elapsed());
}
