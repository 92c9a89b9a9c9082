//! Data-driven key cases: whom a request is charged to, in the manner of
//! `canon_cases.rs`.
//!
//! `tests/key_cases.json` holds named configs, named canonical requests and
//! cases. Each case is a request (method, URL, headers, body, client IP)
//! and what must hold for one named rule: whether it matches and how it is
//! keyed (`expected`), how many identities it is charged to
//! (`identities`), and whose identity that is (`charged_as`: every key of
//! a canonical request is among the case's keys; `not_charged_as`: none
//! is). The request is run through the Worker's own pure pipeline,
//! [`plan::plan`], built as `tollgate explain` builds it: the URL
//! WHATWG-parsed, a repeated header joined by `", "` as Fetch joins it, a
//! body over `body_limit` unusable. The keys are those the plan sends to
//! the counters ([`Route::Check`]).
//!
//! Known failures are listed in [`EXPECTED_FAILURES`]; a listed case that
//! passes fails the run too, so the list never goes stale.

// Test code: helpers outside #[test] functions may panic too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use tollgate::Config;
use tollgate::internals::applied::KeyOutcome;
use tollgate::internals::plan::{self, Body, RequestParts, Route};
use tollgate::internals::explain::parse_url;

const CASES: &str = include_str!("key_cases.json");

/// Cases known to fail, by id ([`Case::id`]), each with the reason it is
/// accepted for now.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

/// The client IP (`CF-Connecting-IP`) of a request that gives no `ip`.
const DEFAULT_IP: &str = "198.51.100.7";
/// What `{PAD}` in a body stands for: more than the default 16 KiB
/// `body_limit`, as in `tests/origins/spellings.mjs`.
const PAD_LEN: usize = 17_000;
/// The boundary of a `multipart` body.
const BOUNDARY: &str = "----tollgate-key-cases";

/// What a case can expect of its rule: charged under its key or its
/// `fallback_key`, a key part missing and the rule rejecting (400) or
/// skipping, more identities than the cap (400), no match, or a path with
/// no canonical view (400 whatever the rules, never forwarded).
const OUTCOMES: [&str; 7] = ["match", "fallback", "rejected", "skipped", "too-many", "no-match", "malformed"];

/// One request, as a case or a named canonical request gives it.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    url: String,
    /// As sent, in order, `CF-Connecting-IP` and a multipart
    /// `Content-Type` included.
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    /// How the body was written (before `{PAD}` is filled in), for the id.
    body_text: Option<String>,
}

const REQUEST_FIELDS: [&str; 6] = ["method", "url", "headers", "body", "multipart", "ip"];

impl Request {
    fn from_json(object: &Map<String, Value>) -> Result<Request, String> {
        let text = |key: &str| match object.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{key}` must be a string")),
        };
        let url = text("url")?.ok_or("missing string field `url`")?;
        let method = text("method")?.unwrap_or_else(|| "GET".into());
        let mut headers = match object.get("headers") {
            None => Vec::new(),
            Some(value) => pairs(value).map_err(|e| format!("`headers`: {e}"))?,
        };
        if headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("cf-connecting-ip")) {
            return Err("give the client IP as `ip`, not as a header".into());
        }
        match object.get("ip") {
            None => headers.push(("CF-Connecting-IP".into(), DEFAULT_IP.into())),
            Some(Value::Null) => {}
            Some(Value::String(ip)) => headers.push(("CF-Connecting-IP".into(), ip.clone())),
            Some(_) => return Err("`ip` must be a string, or null for none".into()),
        }
        let pad = |s: &str| s.replace("{PAD}", &"a".repeat(PAD_LEN));
        let (body, body_text) = match (text("body")?, object.get("multipart")) {
            (Some(_), Some(_)) => return Err("give `body` or `multipart`, not both".into()),
            (Some(body), None) => (Some(pad(&body).into_bytes()), Some(body)),
            (None, Some(fields)) => {
                let fields = pairs(fields).map_err(|e| format!("`multipart`: {e}"))?;
                if headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
                    return Err("a `multipart` body sets its own Content-Type".into());
                }
                headers.push(("Content-Type".into(), format!("multipart/form-data; boundary={BOUNDARY}")));
                let mut body: String = fields
                    .iter()
                    .map(|(k, v)| {
                        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{}\r\n", pad(v))
                    })
                    .collect();
                body.push_str(&format!("--{BOUNDARY}--\r\n"));
                (Some(body.into_bytes()), Some(format!("multipart {fields:?}")))
            }
            (None, None) => (None, None),
        };
        Ok(Request { method, url, headers, body, body_text })
    }

    /// The method, the URL, every header but the default client IP (and a
    /// multipart Content-Type), and the body as written.
    fn describe(&self) -> String {
        let mut parts = vec![format!("{} {}", self.method, self.url)];
        for (name, value) in &self.headers {
            let implied = (name == "CF-Connecting-IP" && value == DEFAULT_IP) || value.contains(BOUNDARY);
            if !implied {
                parts.push(format!("{name}: {value}"));
            }
        }
        if !self.headers.iter().any(|(name, _)| name == "CF-Connecting-IP") {
            parts.push("no client IP".into());
        }
        if let Some(body) = &self.body_text {
            parts.push(body.clone());
        }
        parts.join(" | ")
    }
}

/// `[[name, value], ...]`.
fn pairs(value: &Value) -> Result<Vec<(String, String)>, String> {
    let list = value.as_array().ok_or("must be a list of [name, value] pairs")?;
    list.iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(name), Value::String(value)]) => Ok((name.clone(), value.clone())),
            _ => Err(format!("`{pair}` is not a [name, value] pair of strings")),
        })
        .collect()
}

/// A canonical request a case is compared with: a name from `requests`,
/// or a request written in place.
#[derive(Debug, Clone)]
struct Reference {
    name: String,
    request: Request,
}

/// One or a list of references.
fn references(value: &Value, named: &BTreeMap<String, Request>) -> Result<Vec<Reference>, String> {
    let one = |value: &Value| match value {
        Value::String(name) => named
            .get(name)
            .map(|request| Reference { name: name.clone(), request: request.clone() })
            .ok_or_else(|| format!("no request named `{name}` in `requests`")),
        Value::Object(object) => {
            for key in object.keys() {
                if !REQUEST_FIELDS.contains(&key.as_str()) {
                    return Err(format!("unknown request field `{key}`"));
                }
            }
            let request = Request::from_json(object)?;
            Ok(Reference { name: request.describe(), request })
        }
        _ => Err("a request is a name from `requests` or an object".into()),
    };
    match value {
        Value::Array(list) if !list.is_empty() => list.iter().map(one).collect(),
        Value::Array(_) => Err("an empty list".into()),
        other => Ok(vec![one(other)?]),
    }
}

struct Case {
    config: String,
    rule: String,
    request: Request,
    expected: String,
    identities: Option<usize>,
    charged_as: Vec<Reference>,
    not_charged_as: Vec<Reference>,
    why: String,
}

const CASE_FIELDS: [&str; 7] = ["config", "rule", "expected", "identities", "charged_as", "not_charged_as", "why"];

impl Case {
    fn from_json(value: &Value, named: &BTreeMap<String, Request>) -> Result<Case, String> {
        let object = value.as_object().ok_or("a case must be an object or a \"# comment\" string")?;
        for key in object.keys() {
            if !CASE_FIELDS.contains(&key.as_str()) && !REQUEST_FIELDS.contains(&key.as_str()) {
                return Err(format!("unknown field `{key}`"));
            }
        }
        let required = |key: &str| {
            object
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("missing string field `{key}`"))
        };
        let expected = required("expected")?;
        if !OUTCOMES.contains(&expected.as_str()) {
            return Err(format!("expected must be one of {OUTCOMES:?}, not `{expected}`"));
        }
        let identities = match object.get("identities") {
            None => None,
            Some(n) => Some(n.as_u64().filter(|&n| n > 0).ok_or("identities must be a positive integer")? as usize),
        };
        let refs = |key: &str| match object.get(key) {
            None => Ok(Vec::new()),
            Some(value) => references(value, named).map_err(|e| format!("`{key}`: {e}")),
        };
        let charged_as = refs("charged_as")?;
        let not_charged_as = refs("not_charged_as")?;
        let charged = expected == "match" || expected == "fallback";
        if !charged && (identities.is_some() || !charged_as.is_empty() || !not_charged_as.is_empty()) {
            return Err(format!(
                "identities, charged_as and not_charged_as need expected match or fallback, not `{expected}`"
            ));
        }
        Ok(Case {
            config: required("config")?,
            rule: required("rule")?,
            request: Request::from_json(object)?,
            expected,
            identities,
            charged_as,
            not_charged_as,
            why: required("why")?,
        })
    }

    /// How the case is named in reports and in [`EXPECTED_FAILURES`].
    fn id(&self) -> String {
        format!("{} {}: {}", self.config, self.rule, self.request.describe())
    }
}

/// What tollgate made of a request for one rule.
#[derive(Debug)]
struct Seen {
    /// One of [`OUTCOMES`], or what else happened.
    outcome: String,
    /// The keys the plan charges to the rule (its [`Route::Check`]
    /// entries).
    keys: BTreeSet<String>,
    detail: String,
}

fn see(config: &Config, rule: &str, request: &Request) -> Seen {
    let url = match parse_url(&request.url) {
        Ok(url) => url,
        Err(e) => return Seen { outcome: "bad-url".into(), keys: BTreeSet::new(), detail: e },
    };
    let headers = &request.headers;
    let header = move |name: &str| {
        let values: Vec<&str> =
            headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect();
        (!values.is_empty()).then(|| values.join(", "))
    };
    let body = match &request.body {
        Some(bytes) if bytes.len() > config.body_limit as usize => Body::Unusable,
        Some(bytes) => Body::Read(bytes),
        None => Body::Read(&[]),
    };
    let parts = RequestParts::plain(&request.method, url.as_str(), &header, body);
    let plan = plan::plan(config, &parts);
    let keys: BTreeSet<String> = match &plan.route {
        Route::Check(applied) => applied.iter().filter(|a| a.rule.name == rule).map(|a| a.key.clone()).collect(),
        _ => BTreeSet::new(),
    };
    let outcome = match plan.matched.iter().find(|m| m.rule.name == rule).map(|m| &m.key) {
        _ if matches!(plan.route, Route::Malformed(_)) => "malformed",
        None => "no-match",
        Some(KeyOutcome::Keys { .. }) if keys.is_empty() => "not checked",
        Some(KeyOutcome::Keys { fell_back: false, .. }) => "match",
        Some(KeyOutcome::Keys { fell_back: true, .. }) => "fallback",
        // `KeyError` (crate-private) is `Missing(..)` or `TooMany { .. }`.
        Some(KeyOutcome::Skipped(e) | KeyOutcome::Rejected(e)) if format!("{e:?}").starts_with("TooMany") => "too-many",
        Some(KeyOutcome::Skipped(_)) => "skipped",
        Some(KeyOutcome::Rejected(_)) => "rejected",
    };
    let route = match &plan.route {
        Route::Malformed(e) => format!("malformed: {e}"),
        Route::Admin => "admin".into(),
        Route::NeedsBody => "needs body".into(),
        Route::MissingKey { rule, missing } => format!("400 by rule {}: {missing}", rule.name),
        Route::Check(applied) => format!("check {} key(s)", applied.len()),
    };
    let canonical = plan.canonical.as_ref().map_or_else(
        || "no canonical view".to_string(),
        |c| {
            format!(
                "path `{}`, parameters {:?}, methods {:?}, unreadable body {:?}",
                c.path,
                c.query.pairs(),
                c.methods,
                c.unreadable_body.as_ref().map(ToString::to_string)
            )
        },
    );
    let rules: Vec<String> = plan
        .matched
        .iter()
        .map(|m| match &m.key {
            KeyOutcome::Keys { keys, fell_back } => {
                format!("{}: keys {keys:?}{}", m.rule.name, if *fell_back { " (fallback)" } else { "" })
            }
            KeyOutcome::Skipped(e) => format!("{}: skipped, {e}", m.rule.name),
            KeyOutcome::Rejected(e) => format!("{}: rejected, {e}", m.rule.name),
        })
        .collect();
    let detail = format!("{canonical}; matched [{}]; route: {route}", rules.join("; "));
    Seen { outcome: outcome.to_string(), keys, detail }
}

/// Runs one case; `Err` says how it failed.
fn check(config: &Config, case: &Case) -> Result<(), String> {
    let seen = see(config, &case.rule, &case.request);
    let mut problems = Vec::new();
    if seen.outcome != case.expected {
        problems.push(format!("expected {}, got {}", case.expected, seen.outcome));
    }
    if let Some(n) = case.identities {
        if seen.keys.len() != n {
            problems.push(format!("expected {n} identities, got {}", seen.keys.len()));
        }
    }
    let references = case.charged_as.iter().map(|r| (r, true)).chain(case.not_charged_as.iter().map(|r| (r, false)));
    for (reference, charged) in references {
        let canonical = see(config, &case.rule, &reference.request);
        if canonical.keys.is_empty() {
            problems.push(format!(
                "the canonical request `{}` is charged nothing by rule {} ({})",
                reference.name, case.rule, canonical.detail
            ));
        } else if charged && !canonical.keys.is_subset(&seen.keys) {
            problems.push(format!("not charged as `{}`: its keys {:?}", reference.name, canonical.keys));
        } else if !charged && !canonical.keys.is_disjoint(&seen.keys) {
            problems.push(format!("charged as `{}`: its keys {:?}", reference.name, canonical.keys));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n      keys: {:?}\n      seen: {}", problems.join("; "), seen.keys, seen.detail))
    }
}

struct File {
    configs: Map<String, Value>,
    requests: BTreeMap<String, Request>,
    cases: Vec<Value>,
}

fn load() -> File {
    let file: Value = serde_json::from_str(CASES).expect("tests/key_cases.json is valid JSON");
    let object = file.as_object().expect("the file is an object");
    for key in object.keys() {
        assert!(["comment", "configs", "requests", "cases"].contains(&key.as_str()), "unknown top-level field `{key}`");
    }
    let configs = file["configs"].as_object().expect("`configs` is an object").clone();
    let requests = file["requests"]
        .as_object()
        .expect("`requests` is an object")
        .iter()
        .map(|(name, value)| {
            let object = value.as_object().unwrap_or_else(|| panic!("request `{name}` is not an object"));
            for key in object.keys() {
                assert!(REQUEST_FIELDS.contains(&key.as_str()), "request `{name}`: unknown field `{key}`");
            }
            let request = Request::from_json(object).unwrap_or_else(|e| panic!("request `{name}`: {e}"));
            (name.clone(), request)
        })
        .collect();
    let cases = file["cases"].as_array().expect("`cases` is a list").clone();
    File { configs, requests, cases }
}

#[test]
fn key_cases() {
    let file = load();
    let configs: BTreeMap<&str, Config> = file
        .configs
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
    let mut seen_ids = HashSet::new();
    let mut used_requests = HashSet::new();
    let mut per_section: Vec<(String, usize)> = Vec::new();
    let mut per_outcome: BTreeMap<String, usize> = BTreeMap::new();
    for (index, raw) in file.cases.iter().enumerate() {
        if let Some(section) = raw.as_str().and_then(|s| s.strip_prefix('#')) {
            per_section.push((section.trim().to_string(), 0));
            continue;
        }
        let case = match Case::from_json(raw, &file.requests) {
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
        if !config.rules.iter().any(|r| r.name == case.rule) {
            malformed.push(format!("cases[{index}]: config `{}` has no rule `{}`", case.config, case.rule));
            continue;
        }
        used_requests.extend(case.charged_as.iter().chain(&case.not_charged_as).map(|r| r.name.clone()));
        let id = case.id();
        if !seen_ids.insert(id.clone()) {
            malformed.push(format!("cases[{index}]: duplicate case `{id}`"));
        }
        ran += 1;
        if let Some((_, n)) = per_section.last_mut() {
            *n += 1;
        }
        *per_outcome.entry(case.expected.clone()).or_default() += 1;
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
    for name in file.requests.keys() {
        if !used_requests.contains(name) {
            malformed.push(format!("request `{name}` is used by no case"));
        }
    }

    println!("{ran} cases ({per_outcome:?}); {} expected failures", expected_failed.len());
    for (section, n) in &per_section {
        println!("  {n:>3}  {section}");
    }
    common::report(&expected_failed, &malformed, &unexpected);
    assert!(ran >= 80, "the case file should hold at least 80 cases, holds {ran}");
}

/// The configs of the case file that copy a deployable config: the
/// config's name, the file, and the environment (`None`: the top level).
const COPIES: [(&str, &str, Option<&str>, &str); 3] = [
    ("shipped", "wrangler.toml", None, include_str!("../wrangler.toml")),
    (
        "tenant",
        "examples/tenant-daily-quota/wrangler.toml",
        Some("enforce"),
        include_str!("../examples/tenant-daily-quota/wrangler.toml"),
    ),
    (
        "login",
        "examples/login-brute-force/wrangler.toml",
        None,
        include_str!("../examples/login-brute-force/wrangler.toml"),
    ),
];

/// The `shipped`, `tenant` and `login` configs are the `vars.TOLLGATE` of
/// the shipped `wrangler.toml` and the examples, and every rule of another
/// config (the origins harness's) named like one of theirs is that rule,
/// so the cases test what is deployed.
#[test]
fn copied_configs_are_the_wrangler_toml_configs() {
    let file = load();
    let mut real_rules: BTreeMap<String, Value> = BTreeMap::new();
    for (name, path, env, text) in COPIES {
        let wrangler = tollgate::internals::wrangler::parse(path, text).unwrap_or_else(|e| panic!("{e}"));
        let section = tollgate::internals::wrangler::select(&wrangler, env).unwrap_or_else(|e| panic!("{path}: {e}"));
        let tollgate = section.tollgate.unwrap_or_else(|| panic!("{path} {}: no vars.TOLLGATE", section.label));
        assert_eq!(
            file.configs[name], tollgate,
            "tests/key_cases.json `{name}` differs from vars.TOLLGATE of {path} ({})",
            section.label
        );
        for rule in tollgate["rules"].as_array().expect("rules") {
            let rule_name = rule["name"].as_str().expect("a rule name").to_string();
            assert!(real_rules.insert(rule_name.clone(), rule.clone()).is_none(), "rule {rule_name} twice");
        }
    }
    let mut compared = 0;
    for (name, config) in &file.configs {
        for rule in config["rules"].as_array().expect("rules") {
            if let Some(real) = real_rules.get(rule["name"].as_str().expect("a rule name")) {
                assert_eq!(rule, real, "config `{name}`: rule {} differs from the deployed one", rule["name"]);
                compared += 1;
            } else {
                origins_harness_has(name, rule);
            }
        }
    }
    assert!(compared > real_rules.len(), "the origins configs copy the deployed rules too");
}

/// A rule of the origins configs that no `wrangler.toml` ships is one of
/// `testConfigs()` in `tests/origins/run.mjs`: its name, path, methods and
/// key parts are written there as here.
fn origins_harness_has(config: &str, rule: &Value) {
    let run = include_str!("origins/run.mjs");
    let quoted = |v: &Value| format!("\"{}\"", v.as_str().expect("a string"));
    let mut wanted = vec![format!("name: {}", quoted(&rule["name"])), format!("path: {}", quoted(&rule["path"]))];
    for field in ["methods", "key", "fallback_key"] {
        if let Some(list) = rule[field].as_array() {
            let items: Vec<String> = list.iter().map(quoted).collect();
            wanted.push(format!("{field}: [{}]", items.join(", ")));
        }
    }
    for text in wanted {
        assert!(run.contains(&text), "config `{config}`: rule {}: tests/origins/run.mjs has no `{text}`", rule["name"]);
    }
}
