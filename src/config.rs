//! The `TOLLGATE` config var, parsed once per isolate into validated types.
//!
//! Parse, don't validate: a [`Config`] can only hold non-zero limits, parsed
//! windows and compiled URLPatterns. Every [`ConfigError`] names the rule and
//! the field it is about, and parsing reports all errors at once.
//!
//! The config lives in `wrangler.toml` as a structured var, so each wrangler
//! environment can override it (`[env.staging.vars.TOLLGATE]`):
//!
//! ```toml
//! [vars.TOLLGATE]
//! ipv6_prefix = 64
//!
//! [[vars.TOLLGATE.rules]]
//! name = "heavy-example"
//! path = "/api/example"          # URLPattern pathname, on the canonical path
//! query = { mode = "heavy" }     # "v" equals, ["a", "b"] any of, true present
//! key = ["ip"]
//! limits = [{ requests = 10, window = "60s" }]
//! ```

use crate::duration::parse_duration_ms;
use crate::key::KeyPart;
use crate::policy::{Action, Counting, FailPolicy, MissingKey};
use crate::rules::{HeaderCondition, QueryCondition, Rule};
use crate::window::Limit;
use serde_json::{Map, Value};
use std::fmt;
use std::num::{NonZeroU32, NonZeroU64};

/// Default IPv6 grouping: one /64 is what a single subscriber is usually
/// given, so keying on the full address would let a client rotate through
/// 2^64 keys.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// Default wait for the counter before the rule's fail policy applies.
pub const DEFAULT_TIMEOUT_MS: u32 = 2_000;

/// Format suffixes folded into the bare path unless a rule lists its own
/// (`/api/example.json` is `/api/example`, as Rails and Express routers do).
pub const DEFAULT_SUFFIXES: &[&str] = &["json", "xml", "html", "htm", "txt", "csv", "yaml", "yml"];

/// The largest `requests` per window the sliding log accepts. The log keeps
/// one entry per hit, read and rewritten on every request: 10,000 entries is
/// ~50-140 KB per call. Above this, use `algorithm = "gcra"` (O(1) state).
pub const MAX_SLIDING_LOG_REQUESTS: u32 = 10_000;

/// Default prefix of the admin API (active only with a token set).
pub const DEFAULT_ADMIN_PREFIX: &str = "/.tollgate";

/// Default cap on the bytes read to find a `body:` key (16 KiB): login and
/// signup forms are far smaller; anything larger is not buffered.
pub const DEFAULT_BODY_LIMIT: u32 = 16 * 1024;

/// The whole validated config.
#[derive(Debug)]
pub struct Config {
    pub ipv6_prefix: u8,
    pub rules: Vec<Rule>,
    /// Path prefix of the admin API, e.g. `/.tollgate`.
    pub admin_prefix: String,
    /// Most body bytes read for `body:` keys.
    pub body_limit: u32,
    /// Most (rule, key) entries the isolate's blocked-until cache holds.
    pub blocked_cache_capacity: usize,
}

/// One problem found in the config, located by rule and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The rule's name (or `rules[i]` when it has none); `None` for
    /// top-level fields.
    pub rule: Option<String>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Some(rule) => write!(f, "rule `{}`, field `{}`: {}", rule, self.field, self.message),
            None => write!(f, "field `{}`: {}", self.field, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Parses the config from its JSON form (what `env.TOLLGATE` holds, or a
    /// TOML table converted to JSON). Returns every error found.
    pub fn from_json(value: &Value) -> Result<Config, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let Some(top) = value.as_object() else {
            return Err(vec![top_error("TOLLGATE", "must be a table with a `rules` list")]);
        };
        for key in top.keys() {
            if !["ipv6_prefix", "rules", "admin_prefix", "body_limit", "blocked_cache_capacity"].contains(&key.as_str()) {
                errors.push(top_error(key, "unknown field"));
            }
        }
        let admin_prefix = match top.get("admin_prefix") {
            None => DEFAULT_ADMIN_PREFIX.to_string(),
            Some(Value::String(p))
                if p.len() > 1
                    && p.starts_with('/')
                    && !p.ends_with('/')
                    && crate::canon::canonical_path(p).as_deref() == Ok(p.as_str()) =>
            {
                p.clone()
            }
            Some(_) => {
                errors.push(top_error("admin_prefix", "must be a canonical path such as \"/.tollgate\" (no trailing slash)"));
                DEFAULT_ADMIN_PREFIX.to_string()
            }
        };
        let body_limit = match top.get("body_limit") {
            None => DEFAULT_BODY_LIMIT,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=1_048_576) => n as u32,
                _ => {
                    errors.push(top_error("body_limit", "must be a number of bytes from 1 to 1048576"));
                    DEFAULT_BODY_LIMIT
                }
            },
        };
        let ipv6_prefix = match top.get("ipv6_prefix") {
            None => DEFAULT_IPV6_PREFIX,
            Some(v) => match v.as_u64() {
                Some(p @ 1..=128) => p as u8,
                _ => {
                    errors.push(top_error("ipv6_prefix", "must be a whole number from 1 to 128"));
                    DEFAULT_IPV6_PREFIX
                }
            },
        };
        let blocked_cache_capacity = match top.get("blocked_cache_capacity") {
            None => crate::blocked::DEFAULT_CAPACITY,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=1_000_000) => n as usize,
                _ => {
                    errors.push(top_error("blocked_cache_capacity", "must be a number of entries from 1 to 1000000"));
                    crate::blocked::DEFAULT_CAPACITY
                }
            },
        };
        let mut rules = Vec::new();
        match top.get("rules").map(Value::as_array) {
            None => errors.push(top_error("rules", "missing: list at least one rule")),
            Some(None) => errors.push(top_error("rules", "must be a list of tables")),
            Some(Some(list)) => {
                for (index, raw) in list.iter().enumerate() {
                    match parse_rule(index, raw) {
                        Ok(rule) => rules.push(rule),
                        Err(mut e) => errors.append(&mut e),
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for rule in &rules {
            if !seen.insert(rule.name.clone()) {
                errors.push(ConfigError {
                    rule: Some(rule.name.clone()),
                    field: "name".into(),
                    message: "another rule has the same name; names key the counters".into(),
                });
            }
        }
        if errors.is_empty() {
            Ok(Config { ipv6_prefix, rules, admin_prefix, body_limit, blocked_cache_capacity })
        } else {
            Err(errors)
        }
    }

    /// The rules that apply to `request`, in config order, with their match.
    pub fn matching<'c>(&'c self, request: &crate::rules::RequestView<'_>) -> Vec<(&'c Rule, crate::rules::Match)> {
        self.rules
            .iter()
            .filter_map(|rule| rule.matches(request).map(|m| (rule, m)))
            .collect()
    }

    /// Parses the config from JSON text.
    pub fn from_json_str(text: &str) -> Result<Config, Vec<ConfigError>> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| vec![top_error("TOLLGATE", &format!("not valid JSON: {e}"))])?;
        Config::from_json(&value)
    }
}

fn top_error(field: &str, message: &str) -> ConfigError {
    ConfigError {
        rule: None,
        field: field.to_string(),
        message: message.to_string(),
    }
}

const RULE_FIELDS: &[&str] = &[
    "name",
    "path",
    "host",
    "methods",
    "query",
    "case_insensitive",
    "suffixes",
    "key",
    "on_missing_key",
    "fallback_key",
    "count_statuses",
    "clear_on_success",
    "ratelimit_headers",
    "header",
    "algorithm",
    "limits",
    "cost",
    "action",
    "on_error",
    "timeout",
];

/// Collects errors for one rule, all tagged with its name.
struct RuleErrors {
    rule: String,
    errors: Vec<ConfigError>,
}

impl RuleErrors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError {
            rule: Some(self.rule.clone()),
            field: field.into(),
            message: message.into(),
        });
    }
}

fn parse_rule(index: usize, raw: &Value) -> Result<Rule, Vec<ConfigError>> {
    let fallback_name = format!("rules[{index}]");
    let Some(table) = raw.as_object() else {
        return Err(vec![ConfigError {
            rule: Some(fallback_name),
            field: String::new(),
            message: "must be a table".into(),
        }]);
    };
    let name = table.get("name").and_then(Value::as_str).map(str::to_string);
    let mut errs = RuleErrors {
        rule: name.clone().unwrap_or(fallback_name),
        errors: Vec::new(),
    };
    for key in table.keys() {
        if !RULE_FIELDS.contains(&key.as_str()) {
            errs.push(key.as_str(), "unknown field");
        }
    }
    let name = match name {
        Some(n) if valid_name(&n) => n,
        Some(_) => {
            errs.push("name", "use 1-64 characters from a-z, A-Z, 0-9, `-`, `_`, `.`");
            String::new()
        }
        None => {
            errs.push("name", "missing");
            String::new()
        }
    };
    let path = match table.get("path") {
        Some(Value::String(p)) if p.starts_with('/') => p.clone(),
        Some(_) => {
            errs.push("path", "must be a URLPattern pathname starting with `/`");
            String::new()
        }
        None => {
            errs.push("path", "missing");
            String::new()
        }
    };
    let host = match table.get("host") {
        None => None,
        Some(Value::String(h)) if !h.is_empty() => Some(h.to_ascii_lowercase()),
        Some(_) => {
            errs.push("host", "must be a non-empty URLPattern hostname");
            None
        }
    };
    let methods = match table.get("methods") {
        None => Vec::new(),
        Some(v) => match string_list(v) {
            Some(list) if !list.is_empty() && list.iter().all(|m| valid_method(m)) => {
                list.iter().map(|m| m.to_ascii_uppercase()).collect()
            }
            _ => {
                errs.push("methods", "must be a non-empty list of HTTP method names");
                Vec::new()
            }
        },
    };
    let query = match table.get("query") {
        None => Vec::new(),
        Some(Value::Object(conditions)) => parse_query_conditions(conditions, &mut errs),
        Some(_) => {
            errs.push("query", "must be a table of key = condition");
            Vec::new()
        }
    };
    // When in doubt, match: Express, ASP.NET and IIS route paths
    // case-insensitively, so rules do too unless told otherwise.
    let case_insensitive = flag(table, "case_insensitive", true, &mut errs);
    let suffixes = match table.get("suffixes") {
        None => DEFAULT_SUFFIXES.iter().map(|s| s.to_string()).collect(),
        Some(v) => match string_list(v) {
            Some(list) if list.iter().all(|s| valid_suffix(s)) => list
                .iter()
                .map(|s| s.trim_start_matches('.').to_ascii_lowercase())
                .collect(),
            _ => {
                errs.push("suffixes", "must be a list of extensions such as \"json\"");
                Vec::new()
            }
        },
    };
    let key = match table.get("key") {
        None => vec![KeyPart::Ip],
        Some(v) => parse_key(v, "key", &mut errs),
    };
    let fallback_key = table.get("fallback_key").map(|v| parse_key(v, "fallback_key", &mut errs));
    let on_missing_key = match (table.get("on_missing_key").map(Value::as_str), fallback_key) {
        (None | Some(Some("reject")), None) => MissingKey::Reject,
        (Some(Some("skip")), None) => MissingKey::Skip,
        (None | Some(Some("fallback")), Some(parts)) => MissingKey::Fallback(parts),
        (Some(Some("fallback")), None) => {
            errs.push("fallback_key", "missing: on_missing_key = \"fallback\" needs a fallback_key such as [\"ip\"]");
            MissingKey::Reject
        }
        (Some(Some("reject" | "skip")), Some(_)) => {
            errs.push("fallback_key", "only used with on_missing_key = \"fallback\"");
            MissingKey::Reject
        }
        (Some(_), _) => {
            errs.push("on_missing_key", "must be \"reject\", \"skip\" or \"fallback\"");
            MissingKey::Reject
        }
    };
    let counting = match table.get("count_statuses") {
        None => Counting::All,
        Some(Value::Array(list)) if !list.is_empty() => {
            let statuses: Option<Vec<u16>> = list
                .iter()
                .map(|v| v.as_u64().filter(|s| (100..=599).contains(s)).map(|s| s as u16))
                .collect();
            match statuses {
                Some(statuses) => Counting::Statuses(statuses),
                None => {
                    errs.push("count_statuses", "must be a list of HTTP statuses from 100 to 599");
                    Counting::All
                }
            }
        }
        Some(_) => {
            errs.push("count_statuses", "must be a non-empty list of HTTP statuses such as [401, 403]");
            Counting::All
        }
    };
    let clear_on_success = flag(table, "clear_on_success", false, &mut errs);
    if clear_on_success {
        if counting == Counting::All {
            errs.push("clear_on_success", "only for rules that count failures (set count_statuses)");
        }
        let fallback: &[KeyPart] = match &on_missing_key {
            MissingKey::Fallback(parts) => parts,
            _ => &[],
        };
        if let Some(part) = key.iter().chain(fallback).find(|p| p.identifies_client()) {
            errs.push(
                "clear_on_success",
                format!("the key part `{part}` (in key or fallback_key) identifies the client: a client could clear its own count by succeeding on its own account; clear only a rule keyed by the target (e.g. body:email) with on_missing_key = \"reject\""),
            );
        }
    }
    let ratelimit_headers = flag(table, "ratelimit_headers", false, &mut errs);
    let header = match table.get("header") {
        None => Vec::new(),
        Some(Value::Object(conditions)) => parse_header_conditions(conditions, &mut errs),
        Some(_) => {
            errs.push("header", "must be a table of header-name = condition");
            Vec::new()
        }
    };
    let limits = match table.get("limits") {
        Some(Value::Array(list)) if !list.is_empty() && list.len() <= crate::protocol::MAX_LIMITS => {
            parse_limits(list, &mut errs)
        }
        Some(Value::Array(list)) if !list.is_empty() => {
            errs.push("limits", format!("at most {} windows per rule ({} given)", crate::protocol::MAX_LIMITS, list.len()));
            Vec::new()
        }
        Some(_) => {
            errs.push("limits", "must be a non-empty list of { requests, window }");
            Vec::new()
        }
        None => {
            errs.push("limits", "missing");
            Vec::new()
        }
    };
    let cost = match table.get("cost") {
        None => 1,
        Some(v) => match v.as_u64().and_then(|c| u32::try_from(c).ok()) {
            Some(c) if c >= 1 => c,
            _ => {
                errs.push("cost", "must be a whole number of at least 1");
                1
            }
        },
    };
    if let Some(smallest) = limits.iter().map(|l: &Limit| l.requests.get()).min() {
        if cost > smallest {
            errs.push("cost", format!("{cost} is above the smallest limit ({smallest}): every request would be blocked"));
        }
    }
    let algorithm = match table.get("algorithm").map(Value::as_str) {
        None | Some(Some("sliding_log")) => crate::protocol::Algorithm::SlidingLog,
        Some(Some("gcra")) => crate::protocol::Algorithm::Gcra,
        Some(_) => {
            errs.push("algorithm", "must be \"sliding_log\" (exact, the default) or \"gcra\" (O(1) state)");
            crate::protocol::Algorithm::SlidingLog
        }
    };
    if algorithm == crate::protocol::Algorithm::SlidingLog {
        if let Some(big) = limits.iter().find(|l| l.requests.get() > MAX_SLIDING_LOG_REQUESTS) {
            errs.push(
                "algorithm",
                format!(
                    "a limit of {} requests is too large for the sliding log (at most {MAX_SLIDING_LOG_REQUESTS}); set algorithm = \"gcra\"",
                    big.requests
                ),
            );
        }
    }
    let action = match table.get("action").map(Value::as_str) {
        None | Some(Some("block")) => Action::Block,
        Some(Some("log")) => Action::Log,
        Some(_) => {
            errs.push("action", "must be \"block\" or \"log\"");
            Action::Block
        }
    };
    let on_error = match table.get("on_error").map(Value::as_str) {
        None | Some(Some("allow")) => FailPolicy::Allow,
        Some(Some("deny")) => FailPolicy::Deny,
        Some(_) => {
            errs.push("on_error", "must be \"allow\" (fail open) or \"deny\" (fail closed)");
            FailPolicy::Allow
        }
    };
    let timeout_ms = match table.get("timeout").map(Value::as_str) {
        None => DEFAULT_TIMEOUT_MS,
        Some(Some(text)) => match parse_duration_ms(text) {
            Ok(ms) if ms.get() <= 30_000 => ms.get() as u32,
            Ok(_) => {
                errs.push("timeout", "must be at most 30s");
                DEFAULT_TIMEOUT_MS
            }
            Err(e) => {
                errs.push("timeout", e.to_string());
                DEFAULT_TIMEOUT_MS
            }
        },
        Some(None) => {
            errs.push("timeout", "must be a duration such as \"2s\"");
            DEFAULT_TIMEOUT_MS
        }
    };
    if !errs.errors.is_empty() {
        return Err(errs.errors);
    }
    let spec = crate::rules::RuleSpec {
        name,
        path,
        host,
        methods,
        query,
        case_insensitive,
        suffixes,
        key,
        on_missing_key,
        counting,
        clear_on_success,
        ratelimit_headers,
        header,
        algorithm,
        limits,
        cost,
        action,
        on_error,
        timeout_ms,
    };
    Rule::compile(spec).map_err(|(field, message)| {
        errs.push(field, message);
        errs.errors
    })
}

/// A true/false field, `default` when absent.
fn flag(table: &Map<String, Value>, field: &str, default: bool, errs: &mut RuleErrors) -> bool {
    match table.get(field) {
        None => default,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errs.push(field, "must be true or false");
            default
        }
    }
}

fn parse_key(value: &Value, field: &str, errs: &mut RuleErrors) -> Vec<KeyPart> {
    match string_list(value) {
        Some(list) if !list.is_empty() => {
            let mut parts = Vec::new();
            for (i, item) in list.iter().enumerate() {
                match KeyPart::parse(item) {
                    Ok(part) => parts.push(part),
                    Err(message) => errs.push(format!("{field}[{i}]"), message),
                }
            }
            parts
        }
        _ => {
            errs.push(field, "must be a non-empty list such as [\"ip\"]");
            Vec::new()
        }
    }
}

fn parse_query_conditions(conditions: &Map<String, Value>, errs: &mut RuleErrors) -> Vec<QueryCondition> {
    let mut out = Vec::new();
    for (key, condition) in conditions {
        let field = format!("query.{key}");
        match condition {
            Value::String(v) => out.push(QueryCondition::Equals(key.clone(), v.clone())),
            Value::Bool(true) => out.push(QueryCondition::Present(key.clone())),
            Value::Array(_) => match string_list(condition) {
                Some(list) if !list.is_empty() => out.push(QueryCondition::AnyOf(key.clone(), list)),
                _ => errs.push(field, "an any-of condition must be a non-empty list of strings"),
            },
            _ => errs.push(field, "must be a string (equals), a list of strings (any of) or true (present)"),
        }
    }
    out
}

fn parse_header_conditions(conditions: &Map<String, Value>, errs: &mut RuleErrors) -> Vec<HeaderCondition> {
    let mut out = Vec::new();
    for (name, condition) in conditions {
        let field = format!("header.{name}");
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            errs.push(field, "is not a header name");
            continue;
        }
        let name = name.to_ascii_lowercase();
        match condition {
            Value::String(v) => out.push(HeaderCondition::Equals(name, v.clone())),
            Value::Bool(true) => out.push(HeaderCondition::Present(name)),
            Value::Array(_) => match string_list(condition) {
                Some(list) if !list.is_empty() => out.push(HeaderCondition::AnyOf(name, list)),
                _ => errs.push(field, "an any-of condition must be a non-empty list of strings"),
            },
            _ => errs.push(field, "must be a string (equals), a list of strings (any of) or true (present)"),
        }
    }
    out
}

fn parse_limits(list: &[Value], errs: &mut RuleErrors) -> Vec<Limit> {
    let mut limits = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let field = format!("limits[{i}]");
        let Some(table) = item.as_object() else {
            errs.push(field, "must be a table { requests, window }");
            continue;
        };
        for key in table.keys() {
            if key != "requests" && key != "window" {
                errs.push(format!("{field}.{key}"), "unknown field");
            }
        }
        let requests = table
            .get("requests")
            .and_then(Value::as_u64)
            .and_then(|r| u32::try_from(r).ok())
            .and_then(NonZeroU32::new);
        if requests.is_none() {
            errs.push(format!("{field}.requests"), "must be a whole number from 1 to 4294967295");
        }
        let window: Option<NonZeroU64> = match table.get("window") {
            Some(Value::String(text)) => match parse_duration_ms(text) {
                Ok(ms) => Some(ms),
                Err(e) => {
                    errs.push(format!("{field}.window"), e.to_string());
                    None
                }
            },
            _ => {
                errs.push(format!("{field}.window"), "must be a duration such as \"60s\", \"1m\", \"1h\" or \"1d\"");
                None
            }
        };
        if let (Some(requests), Some(window_ms)) = (requests, window) {
            limits.push(Limit { requests, window_ms });
        }
    }
    limits
}

fn string_list(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn valid_method(method: &str) -> bool {
    !method.is_empty() && method.bytes().all(|b| b.is_ascii_alphabetic())
}

fn valid_suffix(suffix: &str) -> bool {
    let s = suffix.trim_start_matches('.');
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(value: Value) -> Vec<String> {
        match Config::from_json(&value) {
            Ok(_) => vec![],
            Err(e) => e.iter().map(ToString::to_string).collect(),
        }
    }

    fn rule(extra: Value) -> Value {
        let mut base = json!({
            "name": "r",
            "path": "/api/example",
            "limits": [{ "requests": 10, "window": "60s" }],
        });
        if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        json!({ "rules": [base] })
    }

    #[test]
    fn shipped_shape_parses() {
        let config = Config::from_json(&rule(json!({
            "query": { "mode": "heavy" }, "key": ["ip"], "action": "block", "on_error": "allow"
        })))
        .unwrap();
        assert_eq!(config.ipv6_prefix, 64);
        assert_eq!(config.rules.len(), 1);
        assert_eq!(config.rules[0].limits[0].window_ms.get(), 60_000);
    }

    #[test]
    fn every_error_names_rule_and_field() {
        assert_eq!(errors(json!([])), ["field `TOLLGATE`: must be a table with a `rules` list"]);
        assert_eq!(errors(json!({})), ["field `rules`: missing: list at least one rule"]);
        assert_eq!(errors(json!({"rules": [], "x": 1})), ["field `x`: unknown field"]);
        assert_eq!(
            errors(json!({"rules": [], "ipv6_prefix": 129})),
            ["field `ipv6_prefix`: must be a whole number from 1 to 128"]
        );
        assert_eq!(
            errors(json!({"rules": [], "admin_prefix": "/admin/"})),
            ["field `admin_prefix`: must be a canonical path such as \"/.tollgate\" (no trailing slash)"]
        );
        assert_eq!(
            errors(json!({"rules": [], "blocked_cache_capacity": 0})),
            ["field `blocked_cache_capacity`: must be a number of entries from 1 to 1000000"]
        );
        assert_eq!(
            errors(json!({"rules": [], "body_limit": 0})),
            ["field `body_limit`: must be a number of bytes from 1 to 1048576"]
        );
        assert_eq!(errors(json!({"rules": [1]})), ["rule `rules[0]`, field ``: must be a table"]);
        assert_eq!(
            errors(json!({"rules": [{"path": "/a", "limits": [{"requests": 1, "window": "1s"}]}]})),
            ["rule `rules[0]`, field `name`: missing"]
        );
        let cases = [
            (json!({"name": "bad name"}), "name"),
            (json!({"path": "api"}), "path"),
            (json!({"path": "/api/(unclosed"}), "path"),
            (json!({"host": ""}), "host"),
            (json!({"methods": ["GET", "P0ST"]}), "methods"),
            (json!({"query": {"mode": 3}}), "query.mode"),
            (json!({"query": {"mode": []}}), "query.mode"),
            (json!({"query": []}), "query"),
            (json!({"case_insensitive": "yes"}), "case_insensitive"),
            (json!({"suffixes": [".js on"]}), "suffixes"),
            (json!({"key": []}), "key"),
            (json!({"key": ["ip", "colour"]}), "key[1]"),
            (json!({"on_missing_key": "ignore"}), "on_missing_key"),
            (json!({"on_missing_key": "fallback"}), "fallback_key"),
            (json!({"on_missing_key": "skip", "fallback_key": ["ip"]}), "fallback_key"),
            (json!({"fallback_key": ["nope"]}), "fallback_key[0]"),
            (json!({"count_statuses": [401, 700]}), "count_statuses"),
            (json!({"count_statuses": []}), "count_statuses"),
            (json!({"clear_on_success": true, "key": ["body:email"]}), "clear_on_success"),
            (json!({"clear_on_success": true, "count_statuses": [401], "key": ["ip", "body:email"]}), "clear_on_success"),
            (json!({"clear_on_success": "yes"}), "clear_on_success"),
            (json!({"ratelimit_headers": 1}), "ratelimit_headers"),
            (json!({"header": {"x-plan": 1}}), "header.x-plan"),
            (json!({"header": {"bad name": "x"}}), "header.bad name"),
            (json!({"header": "x-plan"}), "header"),
            (json!({"algorithm": "token_bucket"}), "algorithm"),
            (json!({"limits": [{"requests": 100000, "window": "1h"}]}), "algorithm"),
            (json!({"limits": []}), "limits"),
            (json!({"limits": vec![json!({"requests": 1, "window": "1s"}); 9]}), "limits"),
            (json!({"key": ["body:email"], "fallback_key": ["ip"], "count_statuses": [401], "clear_on_success": true}), "clear_on_success"),
            (json!({"limits": [{"requests": 0, "window": "1s"}]}), "limits[0].requests"),
            (json!({"limits": [{"requests": 1, "window": "1w"}]}), "limits[0].window"),
            (json!({"limits": [{"requests": 1, "window": 60}]}), "limits[0].window"),
            (json!({"limits": [{"requests": 1, "window": "1s", "burst": 2}]}), "limits[0].burst"),
            (json!({"cost": 0}), "cost"),
            (json!({"cost": 11}), "cost"),
            (json!({"action": "drop"}), "action"),
            (json!({"on_error": "fail"}), "on_error"),
            (json!({"timeout": "1m"}), "timeout"),
            (json!({"timeout": 5}), "timeout"),
            (json!({"colour": "red"}), "colour"),
        ];
        for (extra, field) in cases {
            let errs = errors(rule(extra.clone()));
            assert_eq!(errs.len(), 1, "{extra}: {errs:?}");
            let expected_rule = if field == "name" { "bad name" } else { "r" };
            assert!(
                errs[0].starts_with(&format!("rule `{expected_rule}`, field `{field}`: ")),
                "{extra}: {}",
                errs[0]
            );
        }
    }

    #[test]
    fn failures_only_and_fallback_parse() {
        let config = Config::from_json(&rule(json!({
            "key": ["body:email"], "count_statuses": [401, 403], "clear_on_success": true,
            "fallback_key": ["header:x-account"], "ratelimit_headers": true
        })))
        .unwrap();
        let r = &config.rules[0];
        assert_eq!(r.counting, Counting::Statuses(vec![401, 403]));
        assert!(r.clear_on_success && r.ratelimit_headers);
        assert_eq!(r.on_missing_key, MissingKey::Fallback(vec![KeyPart::Header("x-account".into())]));
        assert_eq!(config.admin_prefix, "/.tollgate");
        assert_eq!(config.body_limit, 16 * 1024);
    }

    #[test]
    fn duplicate_names_are_refused() {
        let r = json!({"name": "a", "path": "/a", "limits": [{"requests": 1, "window": "1s"}]});
        assert_eq!(
            errors(json!({"rules": [r.clone(), r]})),
            ["rule `a`, field `name`: another rule has the same name; names key the counters"]
        );
    }

    #[test]
    fn all_errors_are_reported_at_once() {
        let errs = errors(json!({"rules": [
            {"name": "a", "path": "x", "limits": []},
            {"name": "b", "path": "/b"}
        ]}));
        assert_eq!(errs.len(), 3, "{errs:?}");
    }
}
