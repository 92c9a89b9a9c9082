//! Property tests for canonicalization and matching.
//!
//! (a) a protected path, rewritten in any of the ways an origin folds
//!     together (escapes in either hex case, repeated and trailing slashes,
//!     backslashes and encoded separators, `./` and `x/../` segments, `;`
//!     path parameters, a format suffix), has the plain path's canonical
//!     form and matches a rule on the plain path; the same for a query
//!     condition spelled in any of the ways some framework reads it;
//! (b) `canonical_path` is idempotent;
//! (c) a canonical path starts with `/`, has no empty, `.` or `..` segment
//!     and no trailing slash (but for the root), and is printable ASCII.

// Test code: helpers outside #[test] functions may panic too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::json;
use tollgate::internals::canon::{canonical_path, decode_fully, CanonicalQuery, RawUrl};
use tollgate::{Config, internals::DEFAULT_SUFFIXES};
use tollgate::internals::rules::RequestView;

/// A plain protected path: 1 to 5 segments of `[a-z0-9_-]`.
fn plain_path() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-z0-9_-]{1,8}", 1..=5)
}

/// One character, maybe percent-encoded, in either hex case.
fn spell_char(c: char, how: u8) -> String {
    match how % 4 {
        0 | 1 => c.to_string(),
        2 => format!("%{:02x}", c as u32),
        _ => format!("%{:02X}", c as u32),
    }
}

/// A separator between two segments: `/`, `\`, `//`, `%2f`, `%5C`, or one
/// with a `./` or `x/../` segment inserted, plain or encoded.
fn separator(how: u8, filler: &str) -> String {
    match how % 12 {
        0..=3 => "/".into(),
        4 => "//".into(),
        5 => "\\".into(),
        6 => "%2f".into(),
        7 => "%5C".into(),
        8 => "/./".into(),
        9 => "/%2e/".into(),
        10 => format!("/{filler}/../"),
        _ => format!("/{filler}/%2E%2e/"),
    }
}

#[derive(Debug, Clone)]
struct Rewrite {
    /// One byte per character of the path, choosing its spelling.
    chars: Vec<u8>,
    /// One byte per separator (including the leading one).
    separators: Vec<u8>,
    /// A segment (by index modulo the count) that gets `;param`.
    param_on: Option<(usize, String)>,
    /// A format suffix, its case and whether it goes after the parameter.
    suffix: Option<(usize, bool, bool)>,
    trailing: u8,
}

fn rewrite() -> impl Strategy<Value = Rewrite> {
    (
        prop::collection::vec(any::<u8>(), 48),
        prop::collection::vec(any::<u8>(), 6),
        prop::option::of((any::<usize>(), "[a-z]{1,10}(=[a-zA-Z0-9]{0,8})?")),
        prop::option::of((0..DEFAULT_SUFFIXES.len(), any::<bool>(), any::<bool>())),
        0u8..4,
    )
        .prop_map(|(chars, separators, param_on, suffix, trailing)| Rewrite {
            chars,
            separators,
            param_on,
            suffix,
            trailing,
        })
}

/// Applies a rewrite to a plain path.
fn apply(segments: &[String], r: &Rewrite) -> String {
    let mut out = String::new();
    let mut k = 0;
    for (i, segment) in segments.iter().enumerate() {
        let filler = format!("f{i}");
        out.push_str(&separator(r.separators[i % r.separators.len()], &filler));
        for c in segment.chars() {
            out.push_str(&spell_char(c, r.chars[k % r.chars.len()]));
            k += 1;
        }
        let last = i + 1 == segments.len();
        let suffix = r.suffix.filter(|_| last).map(|(which, upper, after_param)| {
            let s = DEFAULT_SUFFIXES[which];
            (format!(".{}", if upper { s.to_ascii_uppercase() } else { s.to_string() }), after_param)
        });
        if let Some((s, false)) = &suffix {
            out.push_str(s);
        }
        if let Some((on, param)) = &r.param_on {
            if on % segments.len() == i {
                out.push(';');
                out.push_str(param);
            }
        }
        if let Some((s, true)) = &suffix {
            out.push_str(s);
        }
    }
    out.push_str(["", "/", "//", "/%2f"][usize::from(r.trailing)]);
    out
}

fn rule_on(path: &str, query: serde_json::Value) -> Config {
    Config::from_json(&json!({"rules": [{
        "name": "p", "path": path, "query": query,
        "limits": [{"requests": 1, "window": "1s"}],
    }]}))
    .expect("a plain [a-z0-9_-] path is a valid rule")
}

fn matches(config: &Config, url: &str) -> bool {
    let raw = RawUrl::split(url);
    let Ok(path) = canonical_path(raw.path) else { return false };
    let query = CanonicalQuery::parse(raw.query);
    let view = RequestView { method: "GET", host: &raw.host, path: &path, query: &query };
    !config.matching(&view).is_empty()
}

/// A key spelled as some framework reads `key`: any case, escapes, array
/// brackets, stray brackets (Rack 2), a leading space (PHP).
fn spell_key(key: &str, how: &[u8]) -> String {
    let mut out: String = key
        .chars()
        .zip(how.iter().cycle())
        .map(|(c, h)| match h % 5 {
            0 | 1 => c.to_string(),
            2 => c.to_ascii_uppercase().to_string(),
            3 => format!("%{:02x}", c as u32),
            _ => format!("%{:02X}", c as u32),
        })
        .collect();
    match how.first().copied().unwrap_or(0) % 8 {
        0 => out.push_str("[]"),
        1 => out.push_str("[0]"),
        2 => out.push_str("%5B%5D"),
        3 => out = format!("[{out}]"),
        4 => out = format!("+{out}"),
        _ => {}
    }
    out
}

/// A value spelled with escapes in either hex case, maybe double-encoded.
fn spell_value(value: &str, how: &[u8]) -> String {
    value
        .chars()
        .zip(how.iter().cycle())
        .map(|(c, h)| match h % 6 {
            0..=2 => c.to_string(),
            3 => format!("%{:02x}", c as u32),
            4 => format!("%{:02X}", c as u32),
            _ => format!("%25{:02x}", c as u32),
        })
        .collect()
}

/// Strings that stress the canonicalizer: escapes of separators, dots,
/// percent and controls, dot segments, parameters, non-ASCII.
fn urlish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("/"), Just("\\"), Just("."), Just(".."), Just(";"), Just(";p=1"),
        Just("%2e"), Just("%2E"), Just("%2f"), Just("%5c"), Just("%25"), Just("%"),
        Just("%2"), Just("%zz"), Just("%3b"), Just("%3f"), Just("%23"), Just("%20"),
        Just("%00"), Just("%7f"), Just("%ff"), Just("%c3%a9"), Just("é"), Just(" "),
        Just("a"), Just("B"), Just("2"), Just("5"), Just("e"), Just("f"), Just("c"),
        Just("api"), Just("example"), Just(".json"), Just("?"), Just("#"),
    ];
    prop::collection::vec(token, 0..24).prop_map(|tokens| tokens.concat())
}

fn any_path() -> impl Strategy<Value = String> {
    prop_oneof![urlish(), any::<String>(), "[ -~]{0,40}"]
}

/// Whether percent-decoding `raw` reached its fixpoint within
/// `MAX_DECODE_ROUNDS`; see `idempotence_needs_the_decoding_fixpoint`.
fn decodes_to_fixpoint(raw: &str) -> bool {
    let once = decode_fully(raw.as_bytes());
    decode_fully(&once) == once
}

// Each case compiles a rule (a URLPattern), so these run fewer cases.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rewritten_paths_canonicalize_to_the_plain_path(segments in plain_path(), r in rewrite()) {
        let plain = format!("/{}", segments.join("/"));
        let rewritten = apply(&segments, &r);
        prop_assert_eq!(canonical_path(&plain), Ok(plain.clone()));
        if r.suffix.is_none() {
            prop_assert_eq!(canonical_path(&rewritten), Ok(plain.clone()), "rewritten: {}", rewritten);
        }
        let config = rule_on(&plain, json!({}));
        prop_assert!(matches(&config, &rewritten), "{} does not match a rule on {}", rewritten, plain);
    }

    #[test]
    fn rewritten_query_conditions_still_hold(
        key in "[a-z][a-z0-9]{0,7}",
        value in "[a-zA-Z0-9 ._-]{1,10}",
        key_how in prop::collection::vec(any::<u8>(), 1..12),
        value_how in prop::collection::vec(any::<u8>(), 1..12),
        noise in prop::collection::vec(("[a-z]{1,6}", "[a-z0-9]{0,6}"), 0..4),
        position in any::<usize>(),
        separator in prop_oneof![Just("&"), Just(";"), Just("&amp;")],
        decoy in any::<bool>(),
    ) {
        // Keys are folded like the canonical query folds them; spaces in
        // the value are written as `+` or escapes.
        let config = rule_on("/p", json!({ key.clone(): value.clone() }));
        let mut pairs: Vec<String> = noise.iter().map(|(k, v)| format!("{k}x={v}")).collect();
        if decoy {
            pairs.push(format!("{key}={value}x"));
        }
        let spelled = format!(
            "{}={}",
            spell_key(&key, &key_how),
            spell_value(&value, &value_how).replace(' ', "+")
        );
        let at = position % (pairs.len() + 1);
        pairs.insert(at, spelled);
        let url = format!("/p?{}", pairs.join(separator));
        prop_assert!(matches(&config, &url), "{} does not satisfy {}={}", url, key, value);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn canonical_path_is_idempotent(raw in any_path()) {
        if let Ok(once) = canonical_path(&raw) {
            if decodes_to_fixpoint(&raw) {
                prop_assert_eq!(canonical_path(&once), Ok(once.clone()), "raw: {:?}", raw);
            }
        }
    }

    #[test]
    fn canonical_paths_are_well_formed(raw in any_path()) {
        if let Ok(path) = canonical_path(&raw) {
            prop_assert!(path.starts_with('/'), "{:?} → {:?}", raw, path);
            prop_assert!(path.bytes().all(|b| b.is_ascii_graphic()), "{:?} → {:?}", raw, path);
            if path != "/" {
                prop_assert!(!path.ends_with('/'), "{:?} → {:?}", raw, path);
                for segment in path[1..].split('/') {
                    prop_assert!(!matches!(segment, "" | "." | ".."), "{:?} → {:?}", raw, path);
                }
            }
            prop_assert!(!path.contains("//") && !path.contains("/./") && !path.contains("/../"));
        }
    }

    #[test]
    fn canonicalization_never_panics(raw in any::<Vec<u8>>()) {
        let url = String::from_utf8_lossy(&raw);
        let split = RawUrl::split(&url);
        let _ = canonical_path(split.path);
        let _ = CanonicalQuery::parse(split.query);
    }
}

/// Decoding stops after `MAX_DECODE_ROUNDS` (4), so a fifth level of
/// encoding survives as an escape of `%` in the canonical path, which a
/// second canonicalization decodes further. The properties above therefore
/// assume the decoding reached its fixpoint; no origin decodes five times.
#[test]
fn idempotence_needs_the_decoding_fixpoint() {
    let five_levels = "/api/example%252525252ejson";
    assert!(!decodes_to_fixpoint(five_levels));
    let once = canonical_path(five_levels).expect("no control characters");
    assert_eq!(once, "/api/example%252ejson");
    assert_eq!(canonical_path(&once).as_deref(), Ok("/api/example.json"));
    assert!(decodes_to_fixpoint("/api/example%2525252ejson"), "four levels are decoded");
}
