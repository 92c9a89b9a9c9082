//! `tollgate explain`: how tollgate sees one URL, rule by rule.
//!
//! Pure: takes the config and the request parts, returns the report text.

use crate::canon::{canonical_path, CanonicalQuery, RawUrl};
use crate::config::Config;
use crate::key::{body_field, derive_key, KeyInputs};
use crate::policy::MissingKey;
use crate::rules::RequestView;
use std::fmt::Write;

/// The request parts `explain` works from.
pub struct ExplainRequest<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// Header names lowercased.
    pub headers: &'a [(String, String)],
    pub body: Option<&'a [u8]>,
}

/// The report: canonical path and query, then each rule with why it matches
/// or not, and the key it would use.
pub fn explain(config: &Config, request: &ExplainRequest<'_>) -> String {
    let mut out = String::new();
    let raw = RawUrl::split(request.url);
    let _ = writeln!(out, "request:    {} {}", request.method.to_ascii_uppercase(), request.url);
    let path = match canonical_path(raw.path) {
        Ok(path) => path,
        Err(e) => {
            let _ = writeln!(out, "rejected:   400 Bad Request ({e}); never reaches the origin");
            return out;
        }
    };
    let query = CanonicalQuery::parse(raw.query);
    let _ = writeln!(out, "host:       {}", if raw.host.is_empty() { "(none)" } else { &raw.host });
    let _ = writeln!(out, "canonical:  {path}");
    let pairs: Vec<String> = query.pairs().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(out, "query:      {}", if pairs.is_empty() { "(empty)".to_string() } else { pairs.join("  ") });

    let method = request.method.to_ascii_uppercase();
    let view = RequestView { method: &method, host: &raw.host, path: &path, query: &query };
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let content_type = header("content-type").unwrap_or_default();
    let body = |field: &str| request.body.and_then(|b| body_field(&content_type, b, field));
    let client_ip = header("cf-connecting-ip");
    let country = header("cf-ipcountry");
    let mut matched = 0;
    for rule in &config.rules {
        match rule.evaluate(&view).and_then(|m| rule.headers_hold(&header).map(|()| m)) {
            Err(why) => {
                let _ = writeln!(out, "rule {}: no match ({why})", rule.name);
            }
            Ok(found) => {
                matched += 1;
                let via = if found.matched_path == path {
                    String::new()
                } else {
                    format!(" as {} (format suffix removed)", found.matched_path)
                };
                let _ = writeln!(out, "rule {}: MATCH (path `{}`{via})", rule.name, rule.path);
                let inputs = KeyInputs {
                    client_ip: client_ip.as_deref(),
                    header: &header,
                    query: &query,
                    path_groups: &found.groups,
                    body: &body,
                    country: country.as_deref(),
                    asn: None,
                    ipv6_prefix: config.ipv6_prefix,
                };
                let key = match (derive_key(&rule.key, &inputs), &rule.on_missing_key) {
                    (Ok(key), _) => Ok(key),
                    (Err(m), MissingKey::Fallback(parts)) => derive_key(parts, &inputs)
                        .map(|k| format!("{k} (fallback: {m})"))
                        .map_err(|m| m.to_string()),
                    (Err(m), MissingKey::Skip) => Err(format!("{m}: rule skipped")),
                    (Err(m), MissingKey::Reject) => Err(format!("{m}: answered 400")),
                };
                let limits: Vec<String> = rule
                    .limits
                    .iter()
                    .map(|l| format!("{} per {} s", l.requests, l.window_ms.get() as f64 / 1000.0))
                    .collect();
                let _ = writeln!(out, "  limits:   {}", limits.join(", "));
                match key {
                    Ok(key) => {
                        let _ = writeln!(out, "  key:      {key}");
                    }
                    Err(why) => {
                        let _ = writeln!(out, "  key:      {why}");
                    }
                }
            }
        }
    }
    let _ = writeln!(out, "matching rules: {matched} of {}", config.rules.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn explains_a_bypass_variant() {
        let config = Config::from_json(&json!({"rules": [
            {"name": "heavy-example", "path": "/api/example", "query": {"mode": "heavy"},
             "limits": [{"requests": 10, "window": "60s"}]},
            {"name": "login", "path": "/login", "key": ["body:email"], "limits": [{"requests": 5, "window": "15m"}]},
        ]}))
        .unwrap();
        let headers = vec![("cf-connecting-ip".to_string(), "2001:db8::1".to_string())];
        let text = explain(
            &config,
            &ExplainRequest {
                method: "get",
                url: "https://example.com/api/example%2ejson?mode=normal&mode=heavy",
                headers: &headers,
                body: None,
            },
        );
        assert!(text.contains("canonical:  /api/example.json\n"), "{text}");
        assert!(text.contains("query:      mode=normal  mode=heavy\n"), "{text}");
        assert!(text.contains("rule heavy-example: MATCH (path `/api/example` as /api/example (format suffix removed))"), "{text}");
        assert!(text.contains("  key:      ip=2001:db8::/64\n"), "{text}");
        assert!(text.contains("rule login: no match (path `/api/example.json` does not match `/login`)"), "{text}");
        assert!(text.ends_with("matching rules: 1 of 2\n"), "{text}");

        let rejected = explain(&config, &ExplainRequest { method: "GET", url: "/api/example%00", headers: &[], body: None });
        assert!(rejected.contains("rejected:   400 Bad Request"), "{rejected}");

        let no_ip = explain(&config, &ExplainRequest { method: "GET", url: "/api/example?mode=heavy", headers: &[], body: None });
        assert!(no_ip.contains("no usable `ip`: answered 400"), "{no_ip}");
    }
}
