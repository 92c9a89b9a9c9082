//! Which Worker answers what. The zone's Worker (the default
//! build) limits and forwards; the console and the admin API are served by
//! a Worker of their own (the `admin` build, `wrangler.admin.toml`) bound to
//! the same Durable Objects. Pure: the driver says which it is.
//!
//! - [`Plane::Zone`]: a path that enters the admin prefix, in any spelling
//!   ([`canonical_path_entering`]: case, percent-encoding, `%2e`, double
//!   slashes, dot segments, `;` parameters, a trailing slash) is answered
//!   here with tollgate's own 404 ([`not_here`]), whether or not an admin
//!   token is set: never planned, counted or forwarded. Answered rather than
//!   stripped and forwarded: a request there is an operator's tool or
//!   browser pointed at the wrong host (it carries the bearer token or a
//!   session cookie scoped to the prefix), or a probe; forwarding it would
//!   hand the origin whatever credential a stripping rule missed, and let
//!   the origin serve a page of its own under tollgate's prefix.
//! - [`Plane::Admin`]: only the admin prefix, and only with the admin API
//!   on (the token secret set, or `admin_access`): everything else is the
//!   same 404, so the admin Worker's hostname never counts, forwards or
//!   burns a client's quota.
//!
//! A malformed path (a decoded control character) is planned as before,
//! and answered 400 by either Worker: never forwarded.

use crate::config::headers::OwnResponse;
use crate::config::Config;
use crate::request::canon::{canonical_path_entering, RawUrl};

/// The Worker a request reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plane {
    /// The zone's Worker: rules, counting, forwarding; no admin API.
    Zone,
    /// The admin Worker: the console and the admin API only. `on`: the
    /// admin token secret is set or the config names `admin_access`.
    Admin { on: bool },
}

/// What the driver does with a request before anything else is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    /// Not this Worker's: answer [`not_here`], read nothing more.
    NotHere,
    /// Plan it (the machine decides).
    Plan,
    /// The zone's fast path: no rule takes it; forward, nothing read.
    Pass,
}

/// Where a request to `url` (as the runtime serialized it) goes on
/// `plane`, and the walk of a URL the zone sends to be planned because
/// a rule takes it ([`Walked`]; `None` for any other entry).
pub(crate) fn walk<'c, 'u>(config: &'c Config, url: &'u str, plane: Plane, takes: &dyn Fn(&str, &str) -> bool) -> (Door, Option<Walked<'c, 'u>>) {
    let raw = RawUrl::split(url);
    let Ok((path, entered)) = canonical_path_entering(raw.path, &config.admin_prefix) else { return (Door::Plan, None) };
    match plane {
        Plane::Zone if entered => (Door::NotHere, None),
        Plane::Zone if takes(&raw.host, &path) => (Door::Plan, Walked::new(config, url, raw.host, path, raw.query)),
        Plane::Zone => (Door::Pass, None),
        Plane::Admin { on: true } if entered => (Door::Plan, None),
        Plane::Admin { .. } => (Door::NotHere, None),
    }
}

/// What the zone's [`walk`] found of a URL it sent to be planned: its host
/// and canonical path (a walk that entered no admin prefix) and where its
/// raw query is, some rule's host and path taking it. The plan starts from
/// it rather than splitting and walking the same URL again
/// ([`crate::pipeline::plan::plan_walked`]); it holds only for the very
/// config and URL string it was found for ([`Walked::of`]): it borrows
/// both, so while it lives neither can change or be freed, and the same
/// address is the same config and the same text.
#[derive(Debug)]
pub(crate) struct Walked<'c, 'u> {
    config: &'c Config,
    url: &'u str,
    host: String,
    path: String,
    query: std::ops::Range<usize>,
}

impl<'c, 'u> Walked<'c, 'u> {
    /// `query` is a slice of `url` (or empty); `None` if it is not.
    fn new(config: &'c Config, url: &'u str, host: String, path: String, query: &str) -> Option<Walked<'c, 'u>> {
        let query = if query.is_empty() {
            0..0
        } else {
            let at = (query.as_ptr() as usize).checked_sub(url.as_ptr() as usize)?;
            at..at.checked_add(query.len())?
        };
        url.get(query.clone())?;
        Some(Walked { config, url, host, path, query })
    }

    /// The host, canonical path and raw query of `url`, if this is
    /// `config`'s walk of it: the same config and the same string (by
    /// address; another copy of the same text is walked again).
    pub(crate) fn of<'v>(self, config: &Config, url: &'v str) -> Option<(String, String, &'v str)> {
        if !std::ptr::eq(self.config, config) || !std::ptr::eq(self.url, url) {
            return None;
        }
        Some((self.host, self.path, url.get(self.query)?))
    }
}

/// Whether `url`'s path enters the default admin prefix, in any spelling:
/// with an invalid config and `on_invalid_config = "allow"`, the zone's
/// Worker answers it [`not_here`] rather than forwarding it unlimited (the
/// config, which may name another prefix, could not be read).
pub(crate) fn enters_default(url: &str) -> bool {
    canonical_path_entering(RawUrl::split(url).path, crate::config::DEFAULT_ADMIN_PREFIX).is_ok_and(|(_, entered)| entered)
}

/// Tollgate's own 404 for a request this Worker does not serve.
pub(crate) fn not_here() -> OwnResponse {
    OwnResponse::problem(404, "Not Found", "There is nothing here.", None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a request to `url` goes on `plane` ([`walk`]'s entry).
    fn entry(config: &Config, url: &str, plane: Plane, takes: &dyn Fn(&str, &str) -> bool) -> Door {
        walk(config, url, plane, takes).0
    }
    use serde_json::json;

    fn config() -> Config {
        Config::from_json(&json!({"rules": [{"name": "api", "path": "/api/*", "key": ["ip"], "limits": [{"requests": 1, "window": "1m"}]}]}))
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    const SPELLINGS: &[&str] = &[
        "/.tollgate",
        "/.tollgate/",
        "/.TOLLGATE/status",
        "/.Tollgate/ui/rules",
        "/%2etollgate/status",
        "/%2Etollgate/",
        "/%252etollgate/",
        "//.tollgate//ui",
        "/./.tollgate/rules",
        "/x/../.tollgate/rules",
        "/.tollgate;x=1/rules",
        "/.tollgate/..%2fapi/echo",
        "/api/..%2f.tollgate/..%2fapi/echo",
        "/%2e%74%6f%6c%6c%67%61%74%65/rules",
        "/\\.tollgate\\rules",
    ];

    #[test]
    fn the_zone_answers_every_spelling_of_the_admin_prefix_itself() {
        let config = config();
        let takes = |_: &str, _: &str| true;
        for path in SPELLINGS {
            let url = format!("https://example.com{path}");
            assert_eq!(entry(&config, &url, Plane::Zone, &takes), Door::NotHere, "{path}");
            assert_eq!(entry(&config, &url, Plane::Admin { on: true }, &takes), Door::Plan, "{path}: the admin Worker's");
            assert_eq!(entry(&config, &url, Plane::Admin { on: false }, &takes), Door::NotHere, "{path}: admin off");
        }
    }

    #[test]
    fn the_admin_worker_serves_nothing_but_the_prefix_and_the_zone_keeps_its_fast_path() {
        let config = config();
        let rules = |_: &str, path: &str| path.starts_with("/api/");
        for path in ["/api/echo", "/", "/.tollgatex", "/ui/rules"] {
            let url = format!("https://example.com{path}");
            assert_eq!(entry(&config, &url, Plane::Admin { on: true }, &rules), Door::NotHere, "{path}");
        }
        assert_eq!(entry(&config, "https://example.com/api/echo", Plane::Zone, &rules), Door::Plan);
        assert_eq!(entry(&config, "https://example.com/.tollgatex", Plane::Zone, &rules), Door::Pass);
        assert_eq!(entry(&config, "https://example.com/%00", Plane::Zone, &rules), Door::Plan, "malformed: planned, 400");
        assert_eq!(not_here().status, 404);
        assert!(enters_default("https://example.com/%2eTOLLGATE//ui") && !enters_default("https://example.com/api/echo"));
    }
}
