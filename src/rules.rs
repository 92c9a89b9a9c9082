//! Rules and matching: which rules a canonical request falls under, and why.
//!
//! URLPatterns are compiled once, when the config is parsed (once per
//! isolate), never per request. Matching runs the compiled pathname matcher
//! directly on the canonical path from [`crate::canon`].

use crate::canon::CanonicalQuery;
use crate::key::KeyPart;
use crate::policy::{Action, Counting, FailPolicy, MissingKey};
use crate::window::Limit;
use std::fmt;
use urlpattern::{UrlPattern, UrlPatternInit, UrlPatternOptions};

/// Where a [`Condition`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The canonical query. Keys compare as [`CanonicalQuery`] stores them
    /// (case-insensitively, bracket suffixes removed, ...); values exactly.
    Query,
    /// A request header, looked up by lowercased name. A header holding a
    /// comma-separated list passes if the whole value or any item does
    /// (each trimmed).
    Header,
}

/// What a [`Condition`] asks of the values found under its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    /// Some value equals this one.
    Equals(String),
    /// Some value equals one of these.
    AnyOf(Vec<String>),
    /// The name is there at all, with any value (even empty).
    Present,
}

/// A condition on the query or on a header, all of a rule's conditions
/// must hold. A repeated query key or a header list passes if *any* of its
/// values does: a client cannot hide a value behind another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub target: Target,
    /// The name as the config wrote it (a header name lowercased), as
    /// [`Condition`]'s `Display` shows it.
    pub name: String,
    pub test: Test,
    /// The name as requests are searched for it, computed once: the query
    /// key normalized as [`CanonicalQuery`] normalizes keys, or the
    /// lowercased header name.
    key: String,
}

impl Condition {
    /// A condition on `name`. A header name must be visible ASCII without
    /// `:` (RFC 9110 §5.1 allows less, but nothing more could be sent);
    /// `Err` says why it is not.
    pub fn new(target: Target, name: &str, test: Test) -> Result<Condition, &'static str> {
        let (name, key) = match target {
            Target::Query => (name.to_string(), crate::canon::normalize_key(name)),
            Target::Header => {
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                    return Err("is not a header name");
                }
                let lowered = name.to_ascii_lowercase();
                (lowered.clone(), lowered)
            }
        };
        Ok(Condition { target, name, test, key })
    }

    /// Whether `query` satisfies this condition (`false` for a header
    /// condition). Allocates nothing.
    pub fn holds_in_query(&self, query: &CanonicalQuery) -> bool {
        self.target == Target::Query
            && self.passes(query.pairs().iter().filter(|(k, _)| *k == self.key).map(|(_, v)| v.as_str()))
    }

    /// Whether the headers satisfy this condition (`false` for a query
    /// condition); `header` looks a header up by lowercased name.
    pub fn holds_in_headers(&self, header: &dyn Fn(&str) -> Option<String>) -> bool {
        if self.target != Target::Header {
            return false;
        }
        let Some(value) = header(&self.key) else { return false };
        self.passes(std::iter::once(value.trim()).chain(value.split(',').map(str::trim)))
    }

    /// Whether the values found under the name pass the test.
    fn passes<'v>(&self, mut values: impl Iterator<Item = &'v str>) -> bool {
        match &self.test {
            Test::Equals(want) => values.any(|v| v == want),
            Test::AnyOf(wants) => values.any(|v| wants.iter().any(|w| w == v)),
            Test::Present => values.next().is_some(),
        }
    }
}

/// `mode=heavy`, `mode in [a, b]`, `mode present`; header conditions start
/// with `header ` and use `: ` for equals (`header x-plan: free`).
impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let equals = match self.target {
            Target::Query => "=",
            Target::Header => {
                f.write_str("header ")?;
                ": "
            }
        };
        match &self.test {
            Test::Equals(v) => write!(f, "{}{equals}{v}", self.name),
            Test::AnyOf(vs) => write!(f, "{} in [{}]", self.name, vs.join(", ")),
            Test::Present => write!(f, "{} present", self.name),
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

/// A rule's fields once validated, before its pattern is compiled: the one
/// place a rule's fields are declared ([`crate::config`] reads them,
/// [`Rule`] adds the compiled pattern).
#[derive(Debug, Clone)]
pub struct RuleSpec {
    /// Names the rule in logs, errors and counter keys (unique per config).
    pub name: String,
    /// URLPattern pathname, matched on the canonical path.
    pub path: String,
    /// URLPattern hostname, lowercased; `None` for any host.
    pub host: Option<String>,
    /// Uppercase method names; empty for any method.
    pub methods: Vec<String>,
    /// Conditions on the query and on request headers, all of which must
    /// hold.
    pub conditions: Vec<Condition>,
    pub case_insensitive: bool,
    /// Format suffixes (`json`, lowercase, no dot) folded into the bare path.
    pub suffixes: Vec<String>,
    pub key: Vec<KeyPart>,
    pub on_missing_key: MissingKey,
    pub counting: Counting,
    pub clear_on_success: bool,
    /// Add `RateLimit` / `RateLimit-Policy` to allowed responses.
    pub ratelimit_headers: bool,
    pub algorithm: crate::protocol::Algorithm,
    pub limits: Vec<Limit>,
    pub cost: u32,
    pub action: Action,
    pub on_error: FailPolicy,
    pub timeout_ms: u32,
}

/// A compiled rule: its [`RuleSpec`] and the URLPattern built from it.
#[derive(Debug)]
pub struct Rule {
    pub spec: RuleSpec,
    pattern: UrlPattern,
}

/// A rule reads as its spec (`rule.name`, `rule.limits`): every reader
/// wants the declared fields, and the compiled pattern, the only thing a
/// rule adds, is private to matching.
impl std::ops::Deref for Rule {
    type Target = RuleSpec;

    fn deref(&self) -> &RuleSpec {
        &self.spec
    }
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
        Ok(Rule { spec, pattern })
    }

    /// Matches the rule against a request, without allocating on a
    /// mismatch (the per-request path; [`Rule::evaluate`] says why not).
    pub fn matches(&self, request: &RequestView<'_>) -> Option<Match> {
        if !self.method_matches(request.method) || !self.host_matches(request.host) {
            return None;
        }
        let found = self.path_match(request.path)?;
        self.query_holds(request.query).then_some(found)
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
        if let Some(failed) = self.conditions_on(Target::Query).find(|c| !c.holds_in_query(request.query)) {
            return Err(format!("query condition {failed} not met"));
        }
        Ok(found)
    }

    /// Whether the rule has query conditions: a form body, which joins the
    /// query, must then be read before matching.
    pub fn has_query_conditions(&self) -> bool {
        self.conditions_on(Target::Query).next().is_some()
    }

    fn conditions_on(&self, target: Target) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(move |c| c.target == target)
    }

    fn query_holds(&self, query: &CanonicalQuery) -> bool {
        self.conditions_on(Target::Query).all(|c| c.holds_in_query(query))
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
        match self.conditions_on(Target::Header).find(|c| !c.holds_in_headers(header)) {
            Some(failed) => Err(format!("condition {failed} not met")),
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
        self.key.iter().chain(self.on_missing_key.fallback_parts()).any(|p| matches!(p, KeyPart::Body(_)))
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
