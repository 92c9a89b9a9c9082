//! The Rules page, pure: each rule in the words `tollgate
//! explain` uses ([`crate::config::words`]), in the config's order, and a
//! "Try it" command: a `tollgate explain` of a request the rule itself
//! takes ([`sample`]), checked against the rule's own matcher before it is
//! shown (a pattern no sample fits is said so, not given a wrong command).

use crate::config::rules::{RequestView, Rule, Target, Test};
use crate::config::words;
use crate::admin::console::esc;
use crate::request::canon::{CanonicalQuery, Source};
use crate::request::key::{KeyPart, ValueType};
use std::fmt::Write;

/// The client address of every sample (TEST-NET-3, RFC 5737).
pub(crate) const SAMPLE_IP: &str = "203.0.113.7";

/// A request a rule takes: what `tollgate explain` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) method: String,
    pub(crate) host: String,
    /// The path and, when the rule asks, its query (`/api/x?mode=heavy`).
    pub(crate) path_and_query: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Option<String>,
    pub(crate) country: Option<&'static str>,
    pub(crate) asn: Option<u32>,
}

/// A value of the type a key part reads.
fn value_of(kind: Option<ValueType>) -> &'static str {
    match kind {
        Some(ValueType::Int) => "42",
        Some(ValueType::Uuid) => "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
        Some(ValueType::Email) => "someone@example.com",
        _ => "demo",
    }
}

/// A text a URLPattern (path or host) matches: a named or regex group is
/// `42`, a wildcard `x`, a group's modifier (`?`, `*`, `+`) and braces dropped.
fn fill(pattern: &str, wildcard: &str) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    let mut after_group = false;
    while let Some(c) = chars.next() {
        let was_group = std::mem::take(&mut after_group);
        match c {
            '?' | '*' | '+' if was_group => {}
            '*' => out.push_str(wildcard),
            '\\' => out.extend(chars.next()),
            '{' => {}
            '}' => after_group = true,
            ':' | '(' => {
                if c == ':' {
                    while chars.peek().is_some_and(|n| n.is_alphanumeric() || *n == '_') {
                        chars.next();
                    }
                }
                if c == '(' || chars.next_if_eq(&'(').is_some() {
                    skip_group(&mut chars);
                }
                out.push_str("42");
                after_group = true;
            }
            c => out.push(c),
        }
    }
    out
}

/// Skips a regex group's text up to its closing `)`.
fn skip_group(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    let mut depth = 1;
    while let Some(n) = chars.next() {
        match n {
            '\\' => {
                chars.next();
            }
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return;
        }
    }
}

/// A sample's query pairs, header lines and body fields.
#[derive(Default)]
struct SampleParts {
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    fields: Vec<(String, String)>,
    cookies: Vec<String>,
}

impl SampleParts {
    /// What `rule`'s conditions ask.
    fn conditions(&mut self, rule: &Rule) {
        for c in &rule.conditions {
            let value = match &c.test {
                Test::Equals(v) => v.clone(),
                Test::AnyOf(vs) => vs.first().cloned().unwrap_or_default(),
                Test::Present => "1".into(),
            };
            match c.target {
                Target::Header => self.headers.push((c.name.clone(), value)),
                Target::Query if rule.query_sources.contains(Source::Query) => self.query.push((c.name.clone(), value)),
                Target::Query => self.fields.push((c.name.clone(), value)),
            }
        }
    }

    /// A value for each part of `rule`'s key not given yet.
    fn key(&mut self, rule: &Rule) {
        let add = |list: &mut Vec<(String, String)>, n: &str, t: Option<ValueType>| {
            if !list.iter().any(|(name, _)| name == n) {
                list.push((n.to_string(), value_of(t).into()));
            }
        };
        for part in &rule.key {
            match part {
                KeyPart::Header(n, t) => add(&mut self.headers, n, *t),
                KeyPart::Credential if !self.headers.iter().any(|(n, _)| n == "authorization") => {
                    self.headers.push(("authorization".into(), "Bearer demo".into()));
                }
                KeyPart::Query(n, t) => add(&mut self.query, n, *t),
                KeyPart::Body(n, t) => add(&mut self.fields, n, Some(t.unwrap_or(ValueType::Lower))),
                KeyPart::Cookie(n, t) if !self.cookies.iter().any(|c| c.starts_with(&format!("{n}="))) => {
                    self.cookies.push(format!("{n}={}", value_of(*t)));
                }
                _ => {}
            }
        }
    }
}

/// A form body of `fields`, or a JSON one when a field is a dotted path
/// (`user.email`): the body and its content type.
fn body_of(fields: &[(String, String)]) -> (String, &'static str) {
    if fields.iter().any(|(n, _)| n.contains('.')) {
        let mut root = serde_json::Map::new();
        for (name, value) in fields {
            let mut at = &mut root;
            let mut names = name.split('.').peekable();
            while let Some(n) = names.next() {
                if names.peek().is_none() {
                    at.insert(n.to_string(), serde_json::Value::from(value.as_str()));
                    break;
                }
                let next = at.entry(n.to_string()).or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
                let Some(map) = next.as_object_mut() else { break };
                at = map;
            }
        }
        return (serde_json::Value::Object(root).to_string(), "application/json");
    }
    let form: Vec<String> = fields.iter().map(|(n, v)| format!("{}={}", form_escape(n), form_escape(v))).collect();
    (form.join("&"), "application/x-www-form-urlencoded")
}

/// `application/x-www-form-urlencoded` escaping (the WHATWG URL Standard's
/// set: alphanumerics and `*-._` kept, space as `+`).
pub(crate) fn form_escape(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' | b'@' => out.push(b as char),
            b' ' => out.push('+'),
            b => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// A request `rule` takes, with every key part it reads, and those of the
/// other `rules` the same request falls under (a real client's request:
/// the login form carries the email another rule keys on), or why no
/// sample fits its pattern (the matcher's own reason).
pub(crate) fn sample(rule: &Rule, rules: &[Rule]) -> Result<Sample, String> {
    let mut parts = SampleParts::default();
    parts.conditions(rule);
    parts.key(rule);
    let method = rule
        .methods
        .iter()
        .find(|m| parts.fields.is_empty() || !matches!(m.as_str(), "GET" | "HEAD"))
        .or(rule.methods.first())
        .cloned()
        .unwrap_or_else(|| if parts.fields.is_empty() { "GET" } else { "POST" }.into());
    let host = rule.host.as_deref().map_or_else(|| "example.com".to_string(), |h| fill(h, "www").to_ascii_lowercase());
    let path = fill(&rule.path, "x");
    let encode = |pairs: &[(String, String)]| pairs.iter().map(|(n, v)| format!("{}={}", form_escape(n), form_escape(v))).collect::<Vec<_>>().join("&");
    let query = CanonicalQuery::parse(&encode(&parts.query));
    let view = RequestView { method: &method, host: &host, path: &path, query: &query };
    let header = |name: &str| parts.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    rule.evaluate(&view).and_then(|_| rule.headers_hold(&header)).map_err(|why| why.to_string())?;
    for other in rules.iter().filter(|other| other.name != rule.name && other.evaluate(&view).is_ok()) {
        parts.key(other);
    }
    let raw_query = encode(&parts.query);
    let mut headers = std::mem::take(&mut parts.headers);
    if !parts.cookies.is_empty() {
        headers.push(("cookie".into(), parts.cookies.join("; ")));
    }
    let body = (!parts.fields.is_empty()).then(|| {
        let (body, content_type) = body_of(&parts.fields);
        headers.push(("content-type".into(), content_type.into()));
        body
    });
    let path_and_query = if raw_query.is_empty() { path } else { format!("{path}?{raw_query}") };
    let any_key = |part: &KeyPart| rules.iter().any(|r| r.key.contains(part));
    let (country, asn) = (any_key(&KeyPart::Country).then_some("NL"), any_key(&KeyPart::Asn).then_some(64_500));
    Ok(Sample { method, host, path_and_query, headers, body, country, asn })
}

/// `text` single-quoted for a POSIX shell.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

impl Sample {
    /// The `tollgate explain` command line of this request.
    pub(crate) fn command(&self) -> String {
        let mut out = format!("tollgate explain {} -X {}", quoted(&format!("https://{}{}", self.host, self.path_and_query)), self.method);
        for (name, value) in &self.headers {
            let _ = write!(out, " -H {}", quoted(&format!("{name}: {value}")));
        }
        if let Some(body) = &self.body {
            let _ = write!(out, " --data {}", quoted(body));
        }
        let _ = write!(out, " --ip {SAMPLE_IP}");
        if let Some(country) = self.country {
            let _ = write!(out, " --country {country}");
        }
        if let Some(asn) = self.asn {
            let _ = write!(out, " --asn {asn}");
        }
        out
    }
}

/// One rule's section: what it matches, its words, its key, Try it.
pub(crate) fn section(rule: &Rule, rules: &[Rule]) -> String {
    let n = esc(&rule.name);
    let mut matches = rule.methods.join(", ");
    let _ = write!(matches, " {}{}", rule.host.as_deref().unwrap_or(""), rule.path);
    for c in &rule.conditions {
        let _ = write!(matches, "; {c}");
    }
    let key: Vec<String> = rule.key.iter().map(|p| p.param_name().unwrap_or_else(|| "global".into())).collect();
    let rows = [
        ("Matches", matches.trim().to_string()),
        ("Limits", words::limits(&rule.limits)),
        ("Key", key.join(" + ")),
        ("Policy", words::policy(rule)),
        ("Lease", words::lease(rule)),
    ];
    let mut out = format!("<section aria-labelledby=\"rule-{n}\"><h2 id=\"rule-{n}\">{n}</h2><table class=\"rule\">");
    for (label, value) in rows {
        let _ = write!(out, "<tr><th scope=\"row\">{label}</th><td>{}</td></tr>", esc(&value));
    }
    out.push_str("</table>");
    match sample(rule, rules) {
        Ok(s) => {
            let _ = write!(out, "<p>Try it:</p><pre class=\"try\"><code>{}</code></pre>", esc(&s.command()));
        }
        Err(why) => {
            let _ = write!(out, "<p>Try it: no sample request fits this rule's pattern ({}); give <code>tollgate explain</code> a URL it takes.</p>", esc(&why));
        }
    }
    out + "</section>"
}

/// The Rules page: every rule, in the config's order.
pub(crate) fn page(rules: &[Rule]) -> String {
    rules.iter().map(|rule| section(rule, rules)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use serde_json::json;

    fn rule(spec: serde_json::Value) -> Rule {
        Config::from_json(&json!({ "rules": [spec] })).map_err(|e| format!("{e:?}")).unwrap().rules.remove(0)
    }

    #[test]
    fn patterns_are_filled_with_text_they_match() {
        assert_eq!(fill("/api/reports/*", "x"), "/api/reports/x");
        assert_eq!(fill("/t/:tenant/items/:id(\\d+)", "x"), "/t/42/items/42");
        assert_eq!(fill("/a{/b}?/c", "x"), "/a/b/c");
        assert_eq!(fill("*.example.com", "www"), "www.example.com");
        for path in ["/t/:tenant/items/:id(\\d+)", "/a{/b}?/c", "/files/*", "/v:major(\\d+)/x"] {
            let r = rule(json!({ "name": "r", "path": path, "limits": [{ "requests": 1, "window": "1m" }] }));
            assert!(sample(&r, &[]).is_ok(), "{path}: {:?}", sample(&r, &[]));
        }
    }

    #[test]
    fn a_sample_carries_the_query_condition_and_the_body_key() {
        let heavy = rule(json!({ "name": "heavy-example", "path": "/api/example", "query": { "mode": "heavy" }, "limits": [{ "requests": 10, "window": "60s" }] }));
        let s = sample(&heavy, &[]).unwrap();
        assert_eq!(s.command(), "tollgate explain 'https://example.com/api/example?mode=heavy' -X GET --ip 203.0.113.7");
        let login = rule(json!({ "name": "login-account", "path": "/login", "methods": ["POST"], "key": ["body:email:email"],
            "on_missing_key": "reject", "limits": [{ "requests": 10, "window": "15m" }] }));
        let s = sample(&login, &[]).unwrap();
        assert_eq!(s.body.as_deref(), Some("email=someone@example.com"));
        assert!(s.command().contains("-X POST -H 'content-type: application/x-www-form-urlencoded' --data 'email=someone@example.com'"), "{}", s.command());
        let nested = rule(json!({ "name": "n", "path": "/x", "key": ["body:user.email", "header:x-api-key"], "limits": [{ "requests": 1, "window": "1m" }] }));
        let s = sample(&nested, &[]).unwrap();
        assert_eq!(s.body.as_deref(), Some("{\"user\":{\"email\":\"demo\"}}"));
        assert!(s.headers.contains(&("x-api-key".into(), "demo".into())));
    }

    #[test]
    fn the_page_says_what_explain_says_escaped() {
        let r = rule(json!({ "name": "tags", "path": "/x", "query": { "q": "<b>'" }, "limits": [{ "requests": 3, "window": "1m" }] }));
        let html = section(&r, &[]);
        assert!(html.contains("q=&lt;b&gt;&#39;") && !html.contains("<b>"), "{html}");
        assert!(html.contains("q=%3Cb%3E%27"), "the sample's query is encoded: {html}");
        assert!(html.contains(&esc(&words::lease(&r))), "the lease line is explain's");
        assert!(html.contains("3 per 60 s"), "{html}");
        // `tollgate check` says a rule whose success clears the count never
        // leases: so does its page (it once read `lease auto`).
        let login = rule(json!({ "name": "login", "path": "/login", "methods": ["POST"], "counting": { "mode": "response", "statuses": [401] },
            "key": ["body:email"], "on_missing_key": "reject", "on_success": "clear", "limits": [{ "requests": 1000, "window": "15m" }] }));
        let page = section(&login, &[]);
        assert!(page.contains("<th scope=\"row\">Lease</th><td>off ("), "{page}");
    }
}
