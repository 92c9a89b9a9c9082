//! Route coverage: does a `wrangler.toml` route send a rule's requests to
//! the Worker at all?
//!
//! Workers Routes match the request's host and *raw* path against patterns
//! such as `example.com/api/example*` (a `*` may open the host or close the
//! path). A narrow route misses spellings the origin still routes to the
//! protected action: `/api//example`, `/API/example`, `/api/%65xample`.
//! Those requests never reach tollgate, so no rule can limit them. The cure
//! is a broad route (`example.com/*`) with the narrowing left to the rules.

use crate::config::Config;

/// A parsed Workers route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoutePattern {
    pub(crate) pattern: String,
    host: String,
    path: String,
}

impl RoutePattern {
    /// Parses `[scheme://][*]host[/path[*]]`.
    pub(crate) fn parse(pattern: &str) -> RoutePattern {
        let rest = pattern.split_once("://").map_or(pattern, |(_, r)| r);
        let (host, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        RoutePattern {
            pattern: pattern.to_string(),
            host: host.to_ascii_lowercase(),
            path: path.to_string(),
        }
    }

    /// Whether the route sends `path` (raw) on `host` (`None`: any host the
    /// route names) to the Worker.
    pub(crate) fn covers(&self, host: Option<&str>, path: &str) -> bool {
        let host_ok = match host {
            None => true,
            Some(h) => match self.host.strip_prefix('*') {
                Some(suffix) => h.ends_with(suffix),
                None => self.host == h,
            },
        };
        let path_ok = match self.path.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => self.path == path,
        };
        host_ok && path_ok
    }
}

/// The literal start of a URLPattern pathname, up to its first group,
/// wildcard, regexp or optional part.
fn literal_prefix(pattern: &str) -> &str {
    let end = pattern
        .find([':', '*', '(', '{', '?', '+', '\\'])
        .unwrap_or(pattern.len());
    &pattern[..end]
}

/// Spellings of `path` that reach the same action on common origins but
/// that a narrow route may not match.
fn variants(path: &str) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    if path.len() > 1 {
        out.push((format!("/{path}"), "a doubled leading slash"));
        if let Some(at) = path[1..].find('/') {
            let at = at + 1;
            out.push((format!("{}/{}", &path[..at], &path[at..]), "a doubled inner slash"));
        }
        out.push((path.to_ascii_uppercase(), "upper case"));
        if let Some(c) = path[1..].chars().next().filter(|c| c.is_ascii_alphanumeric()) {
            out.push((format!("/%{:02X}{}", c as u32, &path[1 + c.len_utf8()..]), "a percent-encoded letter"));
        }
    }
    out
}

/// Warnings for rules that the routes would not (fully) send to the Worker.
/// No routes at all (workers.dev, or routes set elsewhere) gives none.
pub(crate) fn route_warnings(routes: &[String], config: &Config) -> Vec<String> {
    if routes.is_empty() {
        return Vec::new();
    }
    let routes: Vec<RoutePattern> = routes.iter().map(|r| RoutePattern::parse(r)).collect();
    let mut warnings = Vec::new();
    for rule in &config.rules {
        let host = rule.host.as_deref().filter(|h| !h.contains(['*', ':', '{', '(']));
        let prefix = literal_prefix(&rule.path);
        let probe = if prefix.is_empty() { "/" } else { prefix };
        if !routes.iter().any(|r| r.covers(host, probe)) {
            warnings.push(format!(
                "rule `{}`: no route sends `{probe}` to the Worker, so the rule never applies; add a broad route such as `example.com/*`",
                rule.name
            ));
            continue;
        }
        for (variant, what) in variants(probe) {
            if !routes.iter().any(|r| r.covers(host, &variant)) {
                warnings.push(format!(
                    "rule `{}`: `{variant}` ({what}) is not sent to the Worker by any route, but an origin may route it like `{probe}`; use a broad route such as `example.com/*` and let the rule narrow",
                    rule.name
                ));
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> Config {
        crate::testing::config(json!([
            {"name": "heavy", "path": "/api/example", "limits": [{"requests": 10, "window": "60s"}]}
        ]))
    }

    #[test]
    fn narrow_route_is_warned_about() {
        let warnings = route_warnings(&["example.com/api/example*".to_string()], &config());
        assert!(warnings.iter().any(|w| w.contains("`//api/example`")), "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("`/api//example`")), "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("`/API/EXAMPLE`")), "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("`/%61pi/example`")), "{warnings:?}");
    }

    #[test]
    fn broad_route_is_fine_and_missing_route_is_flagged() {
        assert!(route_warnings(&["example.com/*".to_string()], &config()).is_empty());
        assert!(route_warnings(&["*example.com/*".to_string()], &config()).is_empty());
        assert!(route_warnings(&[], &config()).is_empty());
        let w = route_warnings(&["example.com/static/*".to_string()], &config());
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("never applies"));
    }

    #[test]
    fn route_patterns() {
        let r = RoutePattern::parse("https://*.example.com/api/*");
        assert!(r.covers(Some("a.example.com"), "/api/x"));
        assert!(!r.covers(Some("example.org"), "/api/x"));
        assert!(!r.covers(None, "/API/x"));
        let exact = RoutePattern::parse("example.com/login");
        assert!(exact.covers(None, "/login"));
        assert!(!exact.covers(None, "/login/"));
        assert_eq!(literal_prefix("/t/:school/*"), "/t/");
    }
}
