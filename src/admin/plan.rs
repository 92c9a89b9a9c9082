//! The admin plane's plan of one request: what the request machine
//! recognized as an admin request ([`Route::Admin`]: the path enters the
//! admin prefix, the admin API is on) becomes the client's lockout counter
//! and the admin route ([`AdminPlan::Serve`]), which the admin flow
//! ([`crate::admin::flow`]) serves. Pure: the same config and parts give
//! the same plan.
//!
//! A path whose dot segments leave the prefix again is 400, a cross-site
//! API request 403, before any token is compared or counted; a console
//! page that changes state is planned with its form body
//! ([`AdminPlan::NeedsBody`]); a request without a client IP cannot be
//! counted by the lockout and is refused as a missing key, which the
//! request machine answers ([`AdminPlan::Refused`]).

use crate::admin::access::{self, AccessCheck};
use crate::admin::api::{self, AdminError, AdminRoute};
use crate::admin::console;
use crate::config::Config;
use crate::pipeline::applied::{object_name, Applied};
use crate::pipeline::plan::{walk, Body, RequestParts, Route};
use crate::request::canon::CanonicalQuery;
use crate::request::key::{derive_key, key_hash, KeyError, KeyInputs};

/// What the admin plane makes of an admin request.
#[derive(Debug)]
pub(crate) enum AdminPlan<'c> {
    /// A console page that changes state: plan again with the body read
    /// (never asked of a plan given the body, read or unusable).
    NeedsBody,
    /// Refused before serving (the lockout's key is missing; a path that
    /// cannot be canonicalized): the request machine decides it as this
    /// route ([`crate::pipeline::machine::Machine::admin_refused`]).
    Refused(Route<'c>),
    /// Serve it: first ask `lockout` (the built-in rule
    /// [`LOCKOUT_RULE`](crate::config::lockout::LOCKOUT_RULE), keyed by the
    /// client's IP) with [`api::lockout_op`], then act on `route` as
    /// [`api::gate`] says. `lockout_binds` is false for the right token
    /// when it is long enough to
    /// [pass the lockout](api::token_passes_lockout): its counter is then
    /// not asked. `access`: what the request's Cloudflare Access token says
    /// ([`crate::admin::access`]), when `admin_access` is set and the
    /// request carries one: then it alone signs the operator in (the route
    /// is planned as authorized; the admin flow verifies the signature
    /// before serving it), and no lockout counter is asked.
    Serve { lockout: Box<Applied<'c>>, route: AdminRoute<'c>, lockout_binds: bool, access: Option<AccessCheck> },
}

/// Plans an admin request ([`Route::Admin`]) from its parts.
pub(crate) fn plan<'c>(config: &'c Config, parts: &RequestParts<'_>) -> AdminPlan<'c> {
    let (path, raw_query) = match walk(config, parts.url, None) {
        Ok((_, path, raw_query, _, _)) => (path, raw_query),
        Err(e) => return AdminPlan::Refused(Route::Malformed(e)),
    };
    // Access only: no token matches "" (`token_matches`, `session::verify`).
    let token = (parts.admin_token)().unwrap_or_default();
    let query = CanonicalQuery::parse(raw_query);
    let under = api::is_admin_path(&config.admin_prefix, &path);
    let page = if under { console::page(&config.admin_prefix, &path, parts.method) } else { None };
    if page.is_some_and(console::Page::changes_state) && parts.body == Body::Unread {
        return AdminPlan::NeedsBody;
    }
    let asked = AdminPath { path: &path, raw_query, query: &query, page, leaves: !under };
    admin_route(config, parts, &token, &asked)
}

/// What an admin request asks, by its path.
struct AdminPath<'a> {
    /// The canonical path.
    path: &'a str,
    raw_query: &'a str,
    query: &'a CanonicalQuery,
    /// The console page, if it is one.
    page: Option<console::Page>,
    /// The raw path entered the prefix and its dot segments left it.
    leaves: bool,
}

/// An admin request: the client's lockout counter (keyed as any `ip` rule
/// is) and what the token allows. A path that left the prefix is 400, and a
/// cross-site API request 403, before any token is compared or counted. The
/// token is compared here, but the answer waits for the lockout counter
/// ([`api::gate`]), asked only for a request that presents a credential
///: a client locked out gets 429 even with the right token,
/// unless that token is long enough to pass the lockout
/// ([`api::token_passes_lockout`]); a request with no `Authorization` is
/// answered 401 uncounted.
fn admin_route<'c>(config: &'c Config, parts: &RequestParts<'_>, token: &str, asked: &AdminPath<'_>) -> AdminPlan<'c> {
    let AdminPath { path, raw_query, query, page, leaves } = *asked;
    let lockout = match lockout_of(config, parts, query) {
        Ok(lockout) => lockout,
        Err(missing) => return AdminPlan::Refused(Route::MissingKey { rule: &config.admin_lockout, missing }),
    };
    let refuse = |e: AdminError| AdminPlan::Serve { lockout: Box::new(lockout.clone()), route: AdminRoute::Invalid(e), lockout_binds: false, access: None };
    if leaves {
        return refuse(AdminError::LeavesPrefix);
    }
    let access = access_check(config, parts);
    if let Some(page) = page {
        let (route, lockout_binds) = console_route(config, parts, token, page, query, &lockout.key, access.as_ref());
        return AdminPlan::Serve { lockout: Box::new(lockout), route: AdminRoute::Console(Box::new(route)), lockout_binds, access };
    }
    let (fetch_site, origin) = ((parts.header)("sec-fetch-site"), (parts.header)("origin"));
    if api::cross_site(fetch_site.as_deref(), origin.as_deref(), own_origin(parts.url)) {
        return refuse(AdminError::CrossSite);
    }
    let authorization = (parts.header)("authorization");
    let (authorized, lockout_binds) = match &access {
        // The Access token alone decides; no guess of the admin token is made.
        Some(check) => (matches!(check, AccessCheck::Pending(_)), false),
        None => {
            let authorized = api::token_matches(token, authorization.as_deref());
            (authorized, if authorized { !api::token_passes_lockout(token) } else { api::presents_credential(authorization.as_deref()) })
        }
    };
    let route = if !authorized {
        AdminRoute::Unauthorized
    } else {
        match api::refuse_plus(raw_query).and_then(|()| api::parse(config, path, parts.method, query)) {
            Ok(api::AdminAsk::Rules) => AdminRoute::Rules,
            Ok(api::AdminAsk::Controls) => AdminRoute::Controls,
            Ok(api::AdminAsk::Traffic(range)) => AdminRoute::Traffic(range),
            Ok(api::AdminAsk::Object(request)) => AdminRoute::Call {
                id: object_name(request.rule, &request.key),
                key_hash: key_hash(&request.key, parts.log_key),
                request,
            },
            Err(e) => AdminRoute::Invalid(e),
        }
    };
    AdminPlan::Serve { lockout: Box::new(lockout), route, lockout_binds, access }
}

/// The request's Cloudflare Access token, read ([`access::check`]), when
/// the config names an Access application and the request carries one.
fn access_check(config: &Config, parts: &RequestParts<'_>) -> Option<AccessCheck> {
    let settings = config.admin_access.as_ref()?;
    let jwt = (parts.header)(access::ASSERTION_HEADER).filter(|j| !j.trim().is_empty())?;
    Some(match access::check(&jwt, settings, parts.now_ms) {
        Ok(proof) => AccessCheck::Pending(Box::new(proof)),
        Err(refusal) => AccessCheck::Refused(refusal),
    })
}

/// The client's lockout counter: the built-in rule keyed as any `ip` rule
/// is; a request without a client IP has none (its [`Route::MissingKey`], refused).
fn lockout_of<'c>(config: &'c Config, parts: &RequestParts<'_>, query: &CanonicalQuery) -> Result<Applied<'c>, KeyError> {
    let rule = &config.admin_lockout;
    let client_ip = (parts.header)("cf-connecting-ip");
    let inputs = KeyInputs {
        client_ip: client_ip.as_deref(),
        header: parts.header,
        query,
        path_groups: &[],
        fold_path_groups: false,
        body: &|_| Vec::new(),
        country: parts.country,
        asn: parts.asn,
        ipv6_prefix: config.ipv6_prefix,
    };
    let key = derive_key(&rule.key, &inputs).map_err(KeyError::Missing)?;
    Ok(Applied {
        rule,
        id: object_name(rule, &key),
        key_hash: key_hash(&key, parts.log_key),
        key,
        fell_back: false,
        // Counts every request (hit or check): there is no success to settle.
        own_method: false,
        device: None,
        spelling: None,
    })
}

/// A console page's route ([`console::route::plan`]): the cookie, the
/// fetch metadata, the form (a POST's urlencoded body) and the request's
/// own origin, read here.
fn console_route<'c>(
    config: &'c Config,
    parts: &RequestParts<'_>,
    token: &str,
    page: console::Page,
    query: &CanonicalQuery,
    client: &str,
    access: Option<&AccessCheck>,
) -> (console::ConsoleRoute<AdminRoute<'c>>, bool) {
    let form = match parts.body {
        Body::Read(bytes) => Some(CanonicalQuery::parse(&String::from_utf8_lossy(bytes))),
        _ => None,
    };
    let (cookie, fetch_site, origin) = ((parts.header)("cookie"), (parts.header)("sec-fetch-site"), (parts.header)("origin"));
    let request = console::route::ConsoleRequest {
        cookie: cookie.as_deref(),
        fetch_site: fetch_site.as_deref(),
        origin: origin.as_deref(),
        own_origin: own_origin(parts.url),
        query,
        form: form.as_ref(),
        log_key: parts.log_key,
        client,
        now_ms: parts.now_ms,
        access,
    };
    console::route::plan(config, page, token, &request)
}

/// `scheme://host[:port]` of a serialized URL: the request's own origin.
fn own_origin(url: &str) -> &str {
    url.find("://").map_or("", |at| {
        let rest = &url[at + 3..];
        &url[..at + 3 + rest.find('/').unwrap_or(rest.len())]
    })
}


#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IP: (&str, &str) = ("cf-connecting-ip", "198.51.100.7");

    fn config(rules: serde_json::Value) -> Config {
        crate::testing::config(rules)
    }

    fn limits() -> serde_json::Value {
        json!([{ "requests": 1, "window": "1m" }])
    }

    /// The admin plane's plan of a GET to `url` (under example.com) with
    /// `headers` and the admin `token`, which the request machine handed
    /// over as [`Route::Admin`].
    fn admin_of<'c>(config: &'c Config, method: &str, url: &str, headers: &[(&str, &str)], token: Option<&str>) -> AdminPlan<'c> {
        let req = crate::pipeline::plan::tests::request_of(method, url, headers, token);
        assert!(matches!(req.plan_once(config, Body::Unread).route, Route::Admin), "the request machine hands it over");
        req.admin_plan_once(config, Body::Unread)
    }

    #[test]
    fn the_admin_api_asks_the_lockout_only_of_a_presented_credential() {
        let c = config(json!([{ "name": "a", "path": "/a", "limits": limits() }]));
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[IP], Some("s3cret"));
        assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Unauthorized, lockout_binds: false, .. }), "no credential: 401, uncounted");
        let wrong = ("authorization", "Bearer guess");
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[IP, wrong], Some("s3cret"));
        match p {
            AdminPlan::Serve { lockout, route: AdminRoute::Unauthorized, lockout_binds: true, .. } => {
                assert_eq!(lockout.rule.name, crate::config::lockout::LOCKOUT_RULE);
                assert_eq!(lockout.key, "ip=198.51.100.7", "the client's IP, not the one asked about");
                assert_eq!(lockout.id, format!("{}\nip=198.51.100.7", crate::config::lockout::LOCKOUT_RULE));
                assert_eq!(lockout.key_hash, key_hash("ip=198.51.100.7", None));
            }
            other => panic!("{other:?}"),
        }
        let auth = ("authorization", "Bearer s3cret");
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[IP, auth], Some("s3cret"));
        match p {
            AdminPlan::Serve { route: AdminRoute::Call { request, id, key_hash: hash }, .. } => {
                assert_eq!(request.key, "ip=1.2.3.4");
                assert_eq!(id, "a\nip=1.2.3.4");
                assert_eq!(hash, key_hash("ip=1.2.3.4", None));
            }
            other => panic!("{other:?}"),
        }
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=nope", &[IP, auth], Some("s3cret"));
        assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Invalid(AdminError::UnknownRule(_)), .. }));
        // A literal `+` in the raw key is refused, not read as a space.
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4+", &[IP, auth], Some("s3cret"));
        assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Invalid(AdminError::AmbiguousPlus(ref n)), .. } if n == "ip"), "{:?}", p);
        // A short right token asks the lockout; a long one does not, a wrong one always does.
        assert!(matches!(p, AdminPlan::Serve { lockout_binds: true, .. }));
        let long = "0123456789abcdef0123456789abcdef";
        let bearer = format!("Bearer {long}");
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[IP, ("authorization", &bearer)], Some(long));
        assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Call { .. }, lockout_binds: false, .. }), "{:?}", p);
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[IP, auth], Some(long));
        assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Unauthorized, lockout_binds: true, .. }), "{:?}", p);
        // No client IP: the lockout cannot count the client, so it is refused
        // before the token is looked at.
        let p = admin_of(&c, "GET", "/.tollgate/status?rule=a&ip=1.2.3.4", &[auth], Some("s3cret"));
        assert!(matches!(&p, AdminPlan::Refused(Route::MissingKey { rule, .. }) if rule.name == crate::config::lockout::LOCKOUT_RULE), "{:?}", p);
    }

    #[test]
    fn a_path_that_enters_the_admin_prefix_is_tollgates_wherever_it_leads() {
        let c = config(json!([{ "name": "a", "path": "/api/*", "limits": limits() }]));
        let auth = ("authorization", "Bearer s3cret");
        for raw in ["/.tollgate/..%2fapi/echo", "/.tollgate/..;/x", "/.tollgate/..%5cx", "/.tollgate/..%252fx", "/.tollgate/ui/..%2f..%2fx", "/.TOLLGATE/..%2fapi/x"] {
            let p = admin_of(&c, "GET", raw, &[IP, auth], Some("s3cret"));
            assert!(
                matches!(p, AdminPlan::Serve { route: AdminRoute::Invalid(AdminError::LeavesPrefix), lockout_binds: false, .. }),
                "{raw}: {:?}",
                p
            );
        }
        for raw in ["/.TOLLGATE/status?rule=a&ip=1.2.3.4", "/.Tollgate/status?rule=a&ip=1.2.3.4"] {
            let p = admin_of(&c, "GET", raw, &[IP, auth], Some("s3cret"));
            assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Call { .. }, .. }), "{raw}: {:?}", p);
        }
        // A cross-site request is refused before its token is compared or counted.
        for site in [("sec-fetch-site", "cross-site"), ("sec-fetch-site", "same-site"), ("origin", "https://evil.example")] {
            let p = admin_of(&c, "GET", "/.tollgate/rules", &[IP, ("authorization", "Bearer guess"), site], Some("s3cret"));
            assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Invalid(AdminError::CrossSite), lockout_binds: false, .. }), "{site:?}: {:?}", p);
        }
        let p = admin_of(&c, "GET", "/.tollgate/rules", &[IP, auth, ("sec-fetch-site", "same-origin"), ("origin", "https://example.com")], Some("s3cret"));
        assert!(matches!(p, AdminPlan::Serve { route: AdminRoute::Rules, .. }), "{:?}", p);
    }

}
