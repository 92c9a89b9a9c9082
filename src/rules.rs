//! Rules and matching: which rules a canonical request falls under, and why.
//!
//! URLPatterns are compiled once, when the config is parsed (once per
//! isolate), never per request. Matching runs the compiled pathname matcher
//! directly on the canonical path from [`crate::canon`].

use crate::canon::CanonicalQuery;
use crate::policy::{Action, Counting, FailPolicy, MissingKey};
use crate::key::KeyPart;
use crate::window::Limit;
use urlpattern::{UrlPattern, UrlPatternInit, UrlPatternOptions};

/// A condition on the canonical query. Keys compare case-insensitively with
/// bracket suffixes removed ([`CanonicalQuery`]); values compare exactly. A
/// repeated key satisfies the condition if *any* of its values does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryCondition {
    Equals(String, String),
    AnyOf(String, Vec<String>),
    Present(String),
}

impl QueryCondition {
    /// Whether `query` satisfies the condition.
    pub fn holds(&self, query: &CanonicalQuery) -> bool {
        match self {
            QueryCondition::Equals(key, want) => query.values(key).any(|v| v == want),
            QueryCondition::AnyOf(key, wants) => {
                query.values(key).any(|v| wants.iter().any(|w| w == v))
            }
            QueryCondition::Present(key) => query.contains_key(key),
        }
    }

    fn describe(&self) -> String {
        match self {
            QueryCondition::Equals(k, v) => format!("{k}={v}"),
            QueryCondition::AnyOf(k, vs) => format!("{k} in [{}]", vs.join(", ")),
            QueryCondition::Present(k) => format!("{k} present"),
        }
    }
}

/// A condition on a request header (name lowercased). A header holding a
/// comma-separated list satisfies it if the whole value or any item does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderCondition {
    Equals(String, String),
    AnyOf(String, Vec<String>),
    Present(String),
}

impl HeaderCondition {
    /// Whether the header, looked up by lowercased name, satisfies it.
    pub fn holds(&self, header: &dyn Fn(&str) -> Option<String>) -> bool {
        let candidates = |name: &str| -> Vec<String> {
            let Some(value) = header(name) else { return Vec::new() };
            let mut all = vec![value.trim().to_string()];
            all.extend(value.split(',').map(|v| v.trim().to_string()));
            all
        };
        match self {
            HeaderCondition::Equals(name, want) => candidates(name).iter().any(|v| v == want),
            HeaderCondition::AnyOf(name, wants) => {
                candidates(name).iter().any(|v| wants.iter().any(|w| w == v))
            }
            HeaderCondition::Present(name) => header(name).is_some(),
        }
    }

    fn describe(&self) -> String {
        match self {
            HeaderCondition::Equals(k, v) => format!("header {k}: {v}"),
            HeaderCondition::AnyOf(k, vs) => format!("header {k} in [{}]", vs.join(", ")),
            HeaderCondition::Present(k) => format!("header {k} present"),
        }
    }
}

/// The methods a request may be routed as: its own, then each override
/// (`X-HTTP-Method-Override` and the like, Laravel's `_method`), uppercased,
/// without repeats.
pub fn method_candidates(method: &str, overrides: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = vec![method.to_ascii_uppercase()];
    for o in overrides {
        let o = o.trim().to_ascii_uppercase();
        if !o.is_empty() && o.bytes().all(|b| b.is_ascii_alphabetic()) && !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// A rule's fields once validated, before its patterns are compiled.
#[derive(Debug, Clone)]
pub struct RuleSpec {
    pub name: String,
    pub path: String,
    pub host: Option<String>,
    pub methods: Vec<String>,
    pub query: Vec<QueryCondition>,
    pub case_insensitive: bool,
    pub suffixes: Vec<String>,
    pub key: Vec<KeyPart>,
    pub on_missing_key: MissingKey,
    pub counting: Counting,
    pub clear_on_success: bool,
    /// Add `RateLimit` / `RateLimit-Policy` to allowed responses.
    pub ratelimit_headers: bool,
    /// Conditions on request headers, all of which must hold.
    pub header: Vec<HeaderCondition>,
    pub algorithm: crate::protocol::Algorithm,
    pub limits: Vec<Limit>,
    pub cost: u32,
    pub action: Action,
    pub on_error: FailPolicy,
    pub timeout_ms: u32,
}

/// A compiled rule.
#[derive(Debug)]
pub struct Rule {
    pub name: String,
    pub path: String,
    pub host: Option<String>,
    pub methods: Vec<String>,
    pub query: Vec<QueryCondition>,
    pub case_insensitive: bool,
    pub suffixes: Vec<String>,
    pub key: Vec<KeyPart>,
    pub on_missing_key: MissingKey,
    pub counting: Counting,
    pub clear_on_success: bool,
    /// Add `RateLimit` / `RateLimit-Policy` to allowed responses.
    pub ratelimit_headers: bool,
    /// Conditions on request headers, all of which must hold.
    pub header: Vec<HeaderCondition>,
    pub algorithm: crate::protocol::Algorithm,
    pub limits: Vec<Limit>,
    pub cost: u32,
    pub action: Action,
    pub on_error: FailPolicy,
    pub timeout_ms: u32,
    pattern: UrlPattern,
}

/// What a request looks like to the matcher: canonical parts only.
#[derive(Debug, Clone)]
pub struct RequestView<'a> {
    pub method: &'a str,
    /// Lowercased host without port.
    pub host: &'a str,
    /// From [`crate::canon::canonical_path`].
    pub path: &'a str,
    pub query: &'a CanonicalQuery,
}

/// A successful match: the rule and the URLPattern groups it captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The path the pattern matched: the canonical path, or it with a
    /// format suffix removed.
    pub matched_path: String,
    pub groups: Vec<(String, String)>,
}

impl Rule {
    /// Compiles the rule's URLPatterns. On failure, returns the field at fault
    /// and a message.
    pub fn compile(spec: RuleSpec) -> Result<Rule, (String, String)> {
        // urlpattern 0.6 compares a pattern's literal prefix case-sensitively
        // even with `ignore_case`, so case-insensitive rules are compiled
        // lowercased and matched against the lowercased path (their group
        // names and captured values are therefore lowercase too).
        let pathname = if spec.case_insensitive {
            spec.path.to_lowercase()
        } else {
            spec.path.clone()
        };
        let init = UrlPatternInit {
            pathname: Some(pathname),
            hostname: spec.host.clone(),
            ..Default::default()
        };
        let options = UrlPatternOptions {
            ignore_case: spec.case_insensitive,
            ..Default::default()
        };
        let pattern = <UrlPattern>::parse(init, options).map_err(|e| {
            let field = if spec.host.is_some() && !e.to_string().contains("pathname") {
                "path or host"
            } else {
                "path"
            };
            (field.to_string(), format!("not a valid URLPattern: {e}"))
        })?;
        Ok(Rule {
            name: spec.name,
            path: spec.path,
            host: spec.host,
            methods: spec.methods,
            query: spec.query,
            case_insensitive: spec.case_insensitive,
            suffixes: spec.suffixes,
            key: spec.key,
            on_missing_key: spec.on_missing_key,
            counting: spec.counting,
            clear_on_success: spec.clear_on_success,
            ratelimit_headers: spec.ratelimit_headers,
            header: spec.header,
            algorithm: spec.algorithm,
            limits: spec.limits,
            cost: spec.cost,
            action: spec.action,
            on_error: spec.on_error,
            timeout_ms: spec.timeout_ms,
            pattern,
        })
    }

    /// Matches the rule against a request, without allocating on a
    /// mismatch (the per-request path; [`Rule::evaluate`] says why not).
    pub fn matches(&self, request: &RequestView<'_>) -> Option<Match> {
        if !self.method_matches(request.method) || !self.host_matches(request.host) {
            return None;
        }
        let found = self.path_match(request.path)?;
        self.query.iter().all(|c| c.holds(request.query)).then_some(found)
    }

    /// Matches the rule against a request; `Err` says why it does not apply.
    pub fn evaluate(&self, request: &RequestView<'_>) -> Result<Match, String> {
        if !self.method_matches(request.method) {
            return Err(format!("method {} not in [{}]", request.method, self.methods.join(", ")));
        }
        if !self.host_matches(request.host) {
            return Err(format!("host `{}` does not match `{}`", request.host, self.pattern.hostname()));
        }
        let Some(found) = self.path_match(request.path) else {
            return Err(format!("path `{}` does not match `{}`", request.path, self.path));
        };
        if let Some(failed) = self.query.iter().find(|c| !c.holds(request.query)) {
            return Err(format!("query condition {} not met", failed.describe()));
        }
        Ok(found)
    }

    /// A rule for GET also applies to HEAD: Express, Flask, Rails and
    /// Django answer HEAD with the GET handler.
    fn method_matches(&self, method: &str) -> bool {
        self.methods.is_empty()
            || self.methods.iter().any(|m| {
                m.eq_ignore_ascii_case(method) || (m == "GET" && method.eq_ignore_ascii_case("HEAD"))
            })
    }

    fn host_matches(&self, host: &str) -> bool {
        self.host.is_none() || self.pattern.hostname.matcher.matches(host).is_some()
    }

    /// The first path candidate the pattern matches, most suffixes removed
    /// first, so that `/users/42.json` captures `:id` = `42` (not `42.json`,
    /// which would give `42.json.json` a counter of its own).
    /// Then the same forms with a trailing slash, which the canonical path
    /// drops but a pattern such as `/api/reports/*` needs.
    fn path_match(&self, path: &str) -> Option<Match> {
        let mut candidates: Vec<String> = self.path_candidates(path).collect();
        candidates.reverse();
        let slashed: Vec<String> = candidates
            .iter()
            .filter(|c| c.as_str() != "/")
            .map(|c| format!("{c}/"))
            .collect();
        candidates.into_iter().chain(slashed).find_map(|candidate| {
            let groups = self.pattern.pathname.matcher.matches(&candidate)?;
            let groups = self
                .pattern
                .pathname
                .group_name_list
                .iter()
                .zip(groups)
                .filter_map(|(name, value)| Some((name.clone(), value?.to_string())))
                .collect();
            Some(Match { matched_path: candidate, groups })
        })
    }

    /// Whether the rule's header conditions hold (checked apart from
    /// [`Rule::matches`], which sees only the canonical URL); `Err` names the
    /// first condition that does not.
    pub fn headers_hold(&self, header: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        match self.header.iter().find(|c| !c.holds(header)) {
            Some(failed) => Err(format!("condition {} not met", failed.describe())),
            None => Ok(()),
        }
    }

    /// The canonical path, then the same path with format suffixes removed
    /// one at a time (`/a/b.json.xml` → `/a/b.json` → `/a/b`).
    fn path_candidates<'p>(&'p self, path: &'p str) -> impl Iterator<Item = String> + 'p {
        let mut next = Some(if self.case_insensitive {
            path.to_lowercase()
        } else {
            path.to_string()
        });
        std::iter::from_fn(move || {
            let current = next.take()?;
            next = self.strip_suffix(&current);
            Some(current)
        })
    }

    fn strip_suffix(&self, path: &str) -> Option<String> {
        let last_slash = path.rfind('/')?;
        let dot = path.rfind('.').filter(|&d| d > last_slash + 1)?;
        let extension = &path[dot + 1..];
        self.suffixes
            .iter()
            .any(|s| s.eq_ignore_ascii_case(extension))
            .then(|| path[..dot].to_string())
    }

    /// The call that asks this rule's object to do `op`, with the rule's
    /// algorithm, limits and cost (limits travel with every call).
    pub fn call(&self, op: crate::protocol::Op) -> crate::protocol::Call {
        crate::protocol::Call { op, algorithm: self.algorithm, limits: self.limits.clone(), cost: self.cost }
    }

    /// Whether any part of the rule's key (or fallback key) reads the body.
    pub fn reads_body(&self) -> bool {
        let fallback: &[KeyPart] = match &self.on_missing_key {
            MissingKey::Fallback(parts) => parts,
            _ => &[],
        };
        self.key.iter().chain(fallback).any(|p| matches!(p, KeyPart::Body(_)))
    }

    /// The longest window of the rule: how long a key's log can live.
    pub fn horizon_ms(&self) -> u64 {
        crate::window::horizon_ms(&self.limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::{canonical_path, CanonicalQuery};
    use crate::config::Config;
    use serde_json::json;

    fn config() -> Config {
        Config::from_json(&json!({"rules": [
            {"name": "heavy", "path": "/api/example", "query": {"mode": "heavy"},
             "limits": [{"requests": 10, "window": "60s"}]},
            {"name": "users", "path": "/users/:id", "methods": ["POST"], "host": "*.example.com",
             "case_insensitive": true, "limits": [{"requests": 1, "window": "1s"}]},
        ]}))
        .unwrap()
    }

    fn eval(rule: &Rule, method: &str, host: &str, url: &str) -> Result<Match, String> {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let path = canonical_path(path).unwrap();
        let query = CanonicalQuery::parse(query);
        rule.evaluate(&RequestView { method, host, path: &path, query: &query })
    }

    #[test]
    fn variants_match_and_look_alikes_do_not() {
        let c = config();
        let heavy = &c.rules[0];
        for url in [
            "/api/example?mode=heavy",
            "/api/example/?mode=heavy",
            "/api/example.json?mode=heavy",
            "/api/example%2ejson?mode=heavy",
            "/api/example?mode=normal&mode=heavy",
        ] {
            assert!(eval(heavy, "GET", "h", url).is_ok(), "{url}");
        }
        for url in [
            "/api/examples?mode=heavy",
            "/api/example-other?mode=heavy",
            "/api/exampl?mode=heavy",
            "/api/example2.json?mode=heavy",
            "/api/example?mode=normal",
            "/api/example",
        ] {
            assert!(eval(heavy, "GET", "h", url).is_err(), "{url}");
        }
    }

    #[test]
    fn head_overrides_and_trailing_slash() {
        let c = Config::from_json(&json!({"rules": [
            {"name": "get", "path": "/r/*", "methods": ["GET"], "limits": [{"requests": 1, "window": "1s"}]},
            {"name": "del", "path": "/d", "methods": ["DELETE"], "limits": [{"requests": 1, "window": "1s"}]},
        ]}))
        .unwrap();
        assert!(eval(&c.rules[0], "HEAD", "h", "/r/x").is_ok(), "HEAD runs the GET handler");
        assert!(eval(&c.rules[0], "GET", "h", "/r/").is_ok(), "`/r/*` matches `/r/` though the canonical path is `/r`");
        assert!(eval(&c.rules[0], "GET", "h", "/r").is_ok());
        assert!(eval(&c.rules[1], "POST", "h", "/d").is_err());
        let methods = method_candidates("post", ["delete".to_string(), "DELETE".into(), "x y".into()].into_iter());
        assert_eq!(methods, ["POST", "DELETE"]);
        assert!(methods.iter().any(|m| eval(&c.rules[1], m, "h", "/d").is_ok()));
    }

    #[test]
    fn header_conditions() {
        let c = Config::from_json(&json!({"rules": [
            {"name": "h", "path": "/h", "header": {"X-Plan": "free", "x-tier": ["a", "b"], "x-debug": true},
             "limits": [{"requests": 1, "window": "1s"}]},
        ]}))
        .unwrap();
        let rule = &c.rules[0];
        let all = |name: &str| match name {
            "x-plan" => Some("gold, free".to_string()),
            "x-tier" => Some("b".to_string()),
            "x-debug" => Some(String::new()),
            _ => None,
        };
        assert_eq!(rule.headers_hold(&all), Ok(()));
        let no_debug = |name: &str| if name == "x-debug" { None } else { all(name) };
        assert_eq!(rule.headers_hold(&no_debug), Err("condition header x-debug present not met".to_string()));
        let other_plan = |name: &str| if name == "x-plan" { Some("gold".to_string()) } else { all(name) };
        assert!(rule.headers_hold(&other_plan).is_err());
    }

    #[test]
    fn methods_host_case_and_groups() {
        let c = config();
        let users = &c.rules[1];
        let m = eval(users, "post", "api.example.com", "/USERS/42").unwrap();
        assert_eq!(m.groups, vec![("id".to_string(), "42".to_string())]);
        assert!(eval(users, "GET", "api.example.com", "/users/42").unwrap_err().contains("method"));
        assert!(eval(users, "POST", "example.org", "/users/42").unwrap_err().contains("host"));
        assert!(eval(&c.rules[0], "GET", "h", "/API/example?mode=heavy").is_ok(), "case-insensitive by default");
        let strict = Config::from_json(&json!({"rules": [
            {"name": "s", "path": "/api/example", "case_insensitive": false, "limits": [{"requests": 1, "window": "1s"}]}
        ]}))
        .unwrap();
        assert!(eval(&strict.rules[0], "GET", "h", "/API/example").is_err(), "unless told otherwise");
    }
}
