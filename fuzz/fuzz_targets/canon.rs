//! Arbitrary bytes as a request URL: split, canonicalize and match against
//! the shipped config (`wrangler.toml`). Nothing may panic, and the
//! canonical path keeps its invariants. Split as it is, a URL a WHATWG
//! parser serialized (what the Worker plans on) gives that parser's host,
//! path and query.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tollgate::internals::canon::{canonical_path, decode_fully, CanonicalQuery, RawUrl};
use tollgate::Config;
use tollgate::internals::rules::RequestView;

fn shipped() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let text = include_str!("../../wrangler.toml");
        let manifest: toml::Value = toml::from_str(text).expect("wrangler.toml parses");
        let tollgate = manifest
            .get("vars")
            .and_then(|v| v.get("TOLLGATE"))
            .expect("wrangler.toml has [vars.TOLLGATE]");
        let json = serde_json::to_value(tollgate).expect("TOML converts to JSON");
        Config::from_json(&json).expect("the shipped config is valid")
    })
}

fuzz_target!(|data: &[u8]| {
    let url = String::from_utf8_lossy(data);
    let raw = RawUrl::split(&url);
    let query = CanonicalQuery::parse(raw.query);
    let Ok(path) = canonical_path(raw.path) else { return };
    // A canonical path starts with `/`, is printable ASCII and has no
    // empty, `.` or `..` segment (so no trailing slash but for the root).
    assert!(path.starts_with('/'), "{path:?}");
    assert!(path.bytes().all(|b| b.is_ascii_graphic()), "{path:?}");
    assert!(path == "/" || path[1..].split('/').all(|s| !matches!(s, "" | "." | "..")), "{path:?}");
    // It is its own canonical form whenever the decoding reached its
    // fixpoint within MAX_DECODE_ROUNDS.
    let once = decode_fully(raw.path.as_bytes());
    if decode_fully(&once) == once {
        assert_eq!(canonical_path(&path).as_ref(), Ok(&path), "{:?}", raw.path);
    }
    // ASCII only: the url crate's no-IDNA adapter debug-asserts on some
    // non-ASCII hosts (the runtime hands the Worker punycode).
    if let Some(parsed) = url.is_ascii().then(|| url::Url::parse(&url).ok()).flatten().filter(|u| matches!(u.scheme(), "http" | "https")) {
        let split = RawUrl::split(parsed.as_str());
        assert_eq!(
            (split.host.as_str(), split.path, split.query),
            (tollgate::internals::canon::canonical_host(parsed.host_str().unwrap_or("")).as_str(), parsed.path(), parsed.query().unwrap_or("")),
            "{url:?}"
        );
    }
    for method in ["GET", "POST"] {
        let view = RequestView { method, host: &raw.host, path: &path, query: &query };
        for rule in &shipped().rules {
            let _ = rule.evaluate(&view);
        }
    }
});
