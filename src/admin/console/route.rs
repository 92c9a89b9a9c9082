//! Plans a console request (pure): who it is ([`Auth`]: the session
//! cookie, the sign-in form's token, the CSRF token and the request's
//! origin) and the admin route its page asks, which the admin flow then
//! runs as it runs the API's.

use crate::config::Config;
use crate::admin::api::{self, AdminAction, AdminRoute};
use crate::pipeline::applied::object_name;
use crate::admin::access::AccessCheck;
use crate::admin::console::session::{self, Session};
use crate::admin::console::traffic::Range;
use crate::admin::console::{Auth, ConsoleRoute, Page};
use crate::request::canon::CanonicalQuery;
use crate::request::key::{key_hash, KeyPart};

/// What the planner reads of a console request.
pub(crate) struct ConsoleRequest<'a> {
    /// The `Cookie` field.
    pub(crate) cookie: Option<&'a str>,
    /// `Sec-Fetch-Site` and `Origin`.
    pub(crate) fetch_site: Option<&'a str>,
    pub(crate) origin: Option<&'a str>,
    /// `scheme://host` of the request's own URL.
    pub(crate) own_origin: &'a str,
    /// The URL's query, and a POST's form body (urlencoded).
    pub(crate) query: &'a CanonicalQuery,
    pub(crate) form: Option<&'a CanonicalQuery>,
    pub(crate) log_key: Option<&'a [u8]>,
    /// The client as the admin lockout keys it: a session is bound to it.
    pub(crate) client: &'a str,
    pub(crate) now_ms: i64,
    /// The request's Cloudflare Access token, read (with `admin_access`
    /// set): it alone decides who the request is.
    pub(crate) access: Option<&'a AccessCheck>,
}

/// The console route of `page` under the configured `token`, and whether
/// the lockout counter is asked: a wrong sign-in is counted; the right one
/// is checked as an authorized API request is (unless the token is long
/// enough to pass the lockout); a session asks nothing (its MAC
/// is no guess, so a neighbour's wrong tokens cannot shut it out), nor do
/// a page shown signed out, a forged post and the style sheet.
pub(crate) fn plan<'c>(config: &'c Config, page: Page, token: &str, req: &ConsoleRequest<'_>) -> (ConsoleRoute<AdminRoute<'c>>, bool) {
    let auth = auth(page, token, req);
    let binds = match &auth {
        Auth::WrongToken => true,
        Auth::SignedIn { .. } => !api::token_passes_lockout(token),
        Auth::Session { .. } | Auth::Access { .. } | Auth::Public | Auth::SignedOut { .. } | Auth::Forged => false,
    };
    let params = req.form.unwrap_or(req.query);
    let typed = typed_parts(config, params);
    let inner = if auth.authorized() { inner(config, page, params, req.log_key) } else { None };
    // Access only (no token): no banner about a token there is not.
    let short_token = !token.trim().is_empty() && !api::token_passes_lockout(token);
    let who = match &auth {
        Auth::Access { identity, .. } => Some(identity.clone()),
        _ => None,
    };
    let route = ConsoleRoute { page, auth, prefix: config.admin_prefix.clone(), inner, typed, short_token, who };
    (route, binds)
}

fn auth(page: Page, token: &str, req: &ConsoleRequest<'_>) -> Auth {
    let same_site = session::same_site(req.fetch_site, req.origin, req.own_origin);
    let field = |name: &str| req.form.and_then(|f| f.values(name).next());
    match (page, req.access) {
        (Page::Style, _) => return Auth::Public,
        // Behind Access, its token alone: a form needs the token's CSRF
        // token (signing in changes nothing: Access signed in already).
        (_, Some(AccessCheck::Pending(proof))) => {
            let csrf_ok = || same_site && field("csrf").is_some_and(|c| crate::request::hmac::same_bytes(c.as_bytes(), proof.csrf.as_bytes()));
            return if page.changes_state() && page != Page::SignIn && !csrf_ok() {
                Auth::Forged
            } else {
                Auth::Access { identity: proof.identity.clone(), csrf: proof.csrf.clone() }
            };
        }
        (_, Some(AccessCheck::Refused(_))) => return Auth::SignedOut { expired: false },
        _ => {}
    }
    match page {
        Page::SignIn if !same_site => return Auth::Forged,
        Page::SignIn => {
            let presented = field("token").unwrap_or("");
            return if api::token_matches(token, Some(&format!("Bearer {presented}"))) {
                Auth::SignedIn { cookie: session::issue(token, req.now_ms, req.client) }
            } else {
                Auth::WrongToken
            };
        }
        _ => {}
    }
    match session::verify(token, req.cookie, req.client, req.now_ms) {
        Session::Valid { end_ms } => {
            if page.changes_state() && !(same_site && session::csrf_holds(token, end_ms, field("csrf"))) {
                Auth::Forged
            } else {
                Auth::Session { csrf: session::csrf_token(token, end_ms), end_ms }
            }
        }
        Session::Expired => Auth::SignedOut { expired: true },
        Session::None => Auth::SignedOut { expired: false },
    }
}

/// The admin route a signed-in page shows: the rules, the controls, a
/// key's status (a Keys lookup with a `rule`), or a Keys form's action
/// (`do`: `reset`, `ban`, `lift`, `override`, `clear_override`).
fn inner<'c>(config: &'c Config, page: Page, params: &CanonicalQuery, log_key: Option<&[u8]>) -> Option<AdminRoute<'c>> {
    if let Some(action) = by_hash_action(config, page, params) {
        return Some(match api::parse_by_hash(config, action, params) {
            Ok(mut ask) => {
                if let Some(control) = ask.control.as_mut() {
                    control.by = "console".into();
                }
                AdminRoute::ByHash(ask)
            }
            Err(e) => AdminRoute::Invalid(e),
        });
    }
    let (endpoint, method) = match page {
        Page::Rules => return Some(AdminRoute::Rules),
        Page::Controls => return Some(AdminRoute::Controls),
        Page::Traffic | Page::Events => return Some(AdminRoute::Traffic(Range::parse(params.values("range").next()))),
        Page::Keys if params.values("rule").next().is_some() => ("/status", "GET"),
        Page::KeysAction => form(params).map(|(_, endpoint, method, _)| (endpoint, method))?,
        _ => return None,
    };
    let path = format!("{}{endpoint}", config.admin_prefix);
    Some(match api::parse(config, &path, method, params) {
        Ok(api::AdminAsk::Object(mut request)) => {
            if let Some(control) = request.control.as_mut() {
                control.by = "console".into();
            }
            AdminRoute::Call { id: object_name(request.rule, &request.key), key_hash: key_hash(&request.key, log_key), request }
        }
        Ok(api::AdminAsk::Rules) => AdminRoute::Rules,
        Ok(api::AdminAsk::Controls) => AdminRoute::Controls,
        Ok(api::AdminAsk::Traffic(range)) => AdminRoute::Traffic(range),
        Err(e) => AdminRoute::Invalid(e),
    })
}

/// The Keys page's forms: `do`, the admin endpoint and method it posts
/// as, and its action.
const FORMS: [(&str, &str, &str, AdminAction); 5] = [
    ("reset", "/reset", "POST", AdminAction::Reset),
    ("ban", "/ban", "POST", AdminAction::Ban),
    ("lift", "/ban", "DELETE", AdminAction::ClearBan),
    ("override", "/override", "PUT", AdminAction::SetOverride),
    ("clear_override", "/override", "DELETE", AdminAction::ClearOverride),
];

/// The form a Keys post names (`do`).
fn form(params: &CanonicalQuery) -> Option<(&'static str, &'static str, &'static str, AdminAction)> {
    let asked = params.values("do").next()?;
    FORMS.into_iter().find(|(name, ..)| *name == asked)
}

/// The action of a Keys page (or form) that names its key by `key_hash`
/// and none of its rule's parts (a link from Traffic, Events or Controls):
/// the key is then found through the controls registry.
fn by_hash_action(config: &Config, page: Page, params: &CanonicalQuery) -> Option<AdminAction> {
    params.values("key_hash").next()?;
    let rule = params.values("rule").next().and_then(|name| config.rules.iter().find(|r| r.name == name));
    if rule.is_some_and(|r| r.key.iter().filter_map(KeyPart::param_name).any(|n| params.values(&n).next().is_some())) {
        return None;
    }
    Some(match page {
        Page::Keys => AdminAction::Status,
        Page::KeysAction => form(params)?.3,
        _ => return None,
    })
}

/// The key parts the operator typed (for the named rule), to fill the
/// page's forms again: they are the operator's own.
fn typed_parts(config: &Config, params: &CanonicalQuery) -> Vec<(String, String)> {
    let Some(rule) = params.values("rule").next().and_then(|name| config.rules.iter().find(|r| r.name == name)) else {
        return Vec::new();
    };
    let mut typed = vec![("rule".to_string(), rule.name.clone())];
    for name in rule.key.iter().filter_map(KeyPart::param_name) {
        if let Some(value) = params.values(&name).next() {
            typed.push((name, value.to_string()));
        }
    }
    // A key asked by its hash: its forms ask by it too.
    if let (1, Some(hash)) = (typed.len(), params.values("key_hash").next()) {
        typed.push(("key_hash".into(), hash.to_string()));
    }
    typed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOKEN: &str = "short token";

    fn config() -> Config {
        crate::testing::config(json!([{ "name": "a", "path": "/a", "limits": [{ "requests": 5, "window": "1m" }] }]))
    }

    fn plan_of(page: Page, cookie: Option<&str>, form: Option<&str>, site: Option<&str>) -> (Auth, bool, Option<String>) {
        let config = config();
        let query = CanonicalQuery::parse("");
        let form = form.map(CanonicalQuery::parse);
        let req = ConsoleRequest {
            cookie,
            fetch_site: site,
            origin: None,
            own_origin: "https://example.com",
            query: &query,
            form: form.as_ref(),
            log_key: None,
            client: "ip=203.0.113.7",
            now_ms: 10_000,
            access: None,
        };
        let (route, binds) = plan(&config, page, TOKEN, &req);
        let inner = route.inner.as_ref().map(|r| format!("{r:?}").split([' ', '(', '{']).next().unwrap_or("").to_string());
        (route.auth, binds, inner)
    }

    #[test]
    fn signing_in_counts_a_wrong_token_and_sets_a_session_for_the_right_one() {
        let (auth, binds, _) = plan_of(Page::SignIn, None, Some("token=nope"), Some("same-origin"));
        assert_eq!((auth, binds), (Auth::WrongToken, true));
        let (auth, binds, _) = plan_of(Page::SignIn, None, Some("token=short%20token"), Some("same-origin"));
        assert!(matches!(auth, Auth::SignedIn { .. }), "{auth:?}");
        assert!(binds, "a short token keeps the lockout's check at sign-in");
        let (auth, binds, _) = plan_of(Page::SignIn, None, Some("token=short%20token"), Some("cross-site"));
        assert_eq!((auth, binds), (Auth::Forged, false), "a cross-site sign-in is not even counted");
    }

    #[test]
    fn a_session_shows_pages_and_a_post_needs_its_csrf_token() {
        let cookie = format!("{}={}", session::COOKIE, session::issue(TOKEN, 9_000, "ip=203.0.113.7"));
        let (auth, binds, inner) = plan_of(Page::Rules, Some(&cookie), None, None);
        assert!(matches!(auth, Auth::Session { .. }));
        assert!(!binds, "a session is not subject to the wrong-token lockout, even under a short token");
        let elsewhere = format!("{}={}", session::COOKIE, session::issue(TOKEN, 9_000, "ip=198.51.100.1"));
        assert_eq!(plan_of(Page::Rules, Some(&elsewhere), None, None).0, Auth::SignedOut { expired: false }, "bound to the client");
        assert_eq!(inner.as_deref(), Some("Rules"));
        let Auth::Session { csrf, .. } = auth else { unreachable!() };
        let form = format!("do=ban&rule=a&ip=198.51.100.7&for=10m&reason=abuse&csrf={csrf}");
        let (auth, _, inner) = plan_of(Page::KeysAction, Some(&cookie), Some(&form), Some("same-origin"));
        assert!(matches!(auth, Auth::Session { .. }));
        assert_eq!(inner.as_deref(), Some("Call"));
        let (auth, _, inner) = plan_of(Page::KeysAction, Some(&cookie), Some("do=ban&rule=a&ip=198.51.100.7&for=10m"), Some("same-origin"));
        assert_eq!((auth, inner), (Auth::Forged, None), "no CSRF token");
        let (auth, _, _) = plan_of(Page::KeysAction, Some(&cookie), Some(&form), Some("cross-site"));
        assert_eq!(auth, Auth::Forged, "the right CSRF token from another site");
        let (auth, binds, inner) = plan_of(Page::Controls, None, None, None);
        assert_eq!((auth, binds, inner), (Auth::SignedOut { expired: false }, false, None));
        let ended = format!("{}={}", session::COOKIE, session::issue(TOKEN, 10_000 - session::SESSION_MS, "ip=203.0.113.7"));
        assert_eq!(plan_of(Page::Rules, Some(&ended), None, None).0, Auth::SignedOut { expired: true });
    }
}
