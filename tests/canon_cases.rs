//! Data-driven canonicalization and matching cases, in the manner of
//! rust-url's WPT harness for `urltestdata.json`.
//!
//! `tests/canon_cases.json` holds named configs and cases. Each case is run
//! the way the Worker runs a request: [`RawUrl::split`], [`canonical_path`]
//! (an error is a 400, "reject"), [`CanonicalQuery::parse`], then
//! [`Config::matching`]. A case fails if its result, canonical path or
//! groups differ from what it expects. Known failures are listed in
//! [`EXPECTED_FAILURES`]; a listed case that passes fails the run too, so the
//! list never goes stale.

// Test code: helpers outside #[test] functions may panic too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use tollgate::internals::canon::{canonical_path, CanonicalQuery, RawUrl};
use tollgate::Config;
use tollgate::internals::rules::RequestView;

const CASES: &str = include_str!("canon_cases.json");

/// Cases known to fail, by id (`config METHOD url`, see [`Case::id`]), each
/// with the reason it is accepted for now.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

struct Case {
    url: String,
    method: String,
    config: String,
    expected: String,
    path: Option<String>,
    groups: Option<BTreeMap<String, String>>,
    why: String,
}

impl Case {
    fn from_json(value: &Value) -> Result<Case, String> {
        let object = value.as_object().ok_or("a case must be an object or a \"# comment\" string")?;
        for key in object.keys() {
            if !["url", "method", "config", "expected", "path", "groups", "why"].contains(&key.as_str()) {
                return Err(format!("unknown field `{key}`"));
            }
        }
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
        let required = |key: &str| text(key).ok_or_else(|| format!("missing string field `{key}`"));
        let expected = required("expected")?;
        if !["match", "no-match", "reject"].contains(&expected.as_str()) {
            return Err(format!("expected must be match, no-match or reject, not `{expected}`"));
        }
        let groups = match object.get("groups") {
            None => None,
            Some(Value::Object(map)) => Some(
                map.iter()
                    .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect::<Option<_>>()
                    .ok_or("groups must map names to strings")?,
            ),
            Some(_) => return Err("groups must be an object".into()),
        };
        Ok(Case {
            url: required("url")?,
            method: text("method").unwrap_or_else(|| "GET".into()),
            config: required("config")?,
            expected,
            path: text("path"),
            groups,
            why: required("why")?,
        })
    }

    /// How the case is named in reports and in [`EXPECTED_FAILURES`].
    fn id(&self) -> String {
        format!("{} {} {}", self.config, self.method, self.url)
    }
}

/// What tollgate made of a case's request.
#[derive(Debug)]
struct Seen {
    result: &'static str,
    path: Option<String>,
    groups: BTreeMap<String, String>,
    detail: String,
}

fn see(config: &Config, case: &Case) -> Seen {
    let raw = RawUrl::split(&case.url);
    let path = match canonical_path(raw.path) {
        Ok(path) => path,
        Err(e) => {
            return Seen { result: "reject", path: None, groups: BTreeMap::new(), detail: e.to_string() };
        }
    };
    let query = CanonicalQuery::parse(raw.query);
    let view = RequestView { method: &case.method, host: &raw.host, path: &path, query: &query };
    let matched = config.matching(&view);
    let detail = format!(
        "host `{}`, query {:?}; {}",
        raw.host,
        query.pairs(),
        config
            .rules
            .iter()
            .map(|rule| match rule.evaluate(&view) {
                Ok(m) => format!("rule {}: match as `{}`", rule.name, m.matched_path),
                Err(why) => format!("rule {}: {why}", rule.name),
            })
            .collect::<Vec<_>>()
            .join("; ")
    );
    let (result, groups) = match matched.first() {
        Some((_, m)) => ("match", m.groups.iter().cloned().collect()),
        None => ("no-match", BTreeMap::new()),
    };
    Seen { result, path: Some(path), groups, detail }
}

/// Runs one case; `Err` says how it failed.
fn check(config: &Config, case: &Case) -> Result<(), String> {
    let seen = see(config, case);
    let mut problems = Vec::new();
    if seen.result != case.expected {
        problems.push(format!("expected {}, got {}", case.expected, seen.result));
    }
    if let Some(want) = &case.path {
        if seen.path.as_ref() != Some(want) {
            problems.push(format!("expected canonical path `{want}`, got {:?}", seen.path));
        }
    }
    if let Some(want) = &case.groups {
        if *want != seen.groups {
            problems.push(format!("expected groups {want:?}, got {:?}", seen.groups));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n      canonical path: {:?}\n      seen: {}",
            problems.join("; "),
            seen.path,
            seen.detail
        ))
    }
}

fn load() -> (Map<String, Value>, Vec<Value>) {
    let file: Value = serde_json::from_str(CASES).expect("tests/canon_cases.json is valid JSON");
    let configs = file["configs"].as_object().expect("`configs` is an object").clone();
    let cases = file["cases"].as_array().expect("`cases` is a list").clone();
    (configs, cases)
}

#[test]
fn canon_cases() {
    let (raw_configs, raw_cases) = load();
    let configs: BTreeMap<&str, Config> = raw_configs
        .iter()
        .map(|(name, value)| {
            let config = Config::from_json(value).unwrap_or_else(|e| panic!("config `{name}` is invalid: {e:?}"));
            (name.as_str(), config)
        })
        .collect();

    let mut ran = 0;
    let mut expected_failed = Vec::new();
    let mut unexpected = Vec::new();
    let mut malformed = Vec::new();
    let mut seen_ids = std::collections::HashSet::new();
    let mut per_result: BTreeMap<String, usize> = BTreeMap::new();
    for (index, raw) in raw_cases.iter().enumerate() {
        if raw.as_str().is_some_and(|s| s.starts_with('#')) {
            continue;
        }
        let case = match Case::from_json(raw) {
            Ok(case) => case,
            Err(e) => {
                malformed.push(format!("cases[{index}]: {e}: {raw}"));
                continue;
            }
        };
        let Some(config) = configs.get(case.config.as_str()) else {
            malformed.push(format!("cases[{index}]: unknown config `{}`", case.config));
            continue;
        };
        let id = case.id();
        if !seen_ids.insert(id.clone()) {
            malformed.push(format!("cases[{index}]: duplicate case `{id}`"));
        }
        ran += 1;
        *per_result.entry(case.expected.clone()).or_default() += 1;
        let known = EXPECTED_FAILURES.iter().find(|(known, _)| *known == id);
        match (check(config, &case), known) {
            (Ok(()), None) => {}
            (Err(_), Some((_, reason))) => expected_failed.push(format!("{id}  ({reason})")),
            (Err(how), None) => unexpected.push(format!("FAIL {id}\n      why: {}\n      {how}", case.why)),
            (Ok(()), Some(_)) => unexpected.push(format!(
                "PASS {id}: listed in EXPECTED_FAILURES but now passes; remove it from the list"
            )),
        }
    }
    for (known, _) in EXPECTED_FAILURES {
        if !seen_ids.contains(*known) {
            malformed.push(format!("EXPECTED_FAILURES names `{known}`, which is not a case"));
        }
    }

    println!("{ran} cases ({per_result:?}); {} expected failures", expected_failed.len());
    common::report(&expected_failed, &malformed, &unexpected);
    assert!(ran >= 100, "the case file should hold at least 100 cases, holds {ran}");
}

/// The `shipped` config of the case file is the rule `wrangler.toml` ships,
/// so the cases test what is deployed.
#[test]
fn shipped_config_is_the_wrangler_toml_rule() {
    let (configs, _) = load();
    let manifest: toml::Value =
        toml::from_str(include_str!("../wrangler.toml")).expect("wrangler.toml parses");
    let tollgate = serde_json::to_value(&manifest["vars"]["TOLLGATE"]).expect("TOML converts to JSON");
    let shipped_rules = tollgate["rules"].as_array().expect("[[vars.TOLLGATE.rules]]");
    for rule in configs["shipped"]["rules"].as_array().expect("shipped rules") {
        let name = &rule["name"];
        let deployed = shipped_rules
            .iter()
            .find(|r| r["name"] == *name)
            .unwrap_or_else(|| panic!("wrangler.toml has no rule named {name}"));
        assert_eq!(deployed, rule, "tests/canon_cases.json `shipped` differs from wrangler.toml for rule {name}");
    }
    assert_eq!(configs["shipped"]["ipv6_prefix"], tollgate["ipv6_prefix"]);
}
