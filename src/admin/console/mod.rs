//! The operator console: server-rendered HTML pages under the
//! admin prefix, served only when `TOLLGATE_ADMIN_TOKEN` is set, never on
//! the request path of rate-limited traffic.
//!
//! Each page is the HTML of one admin API answer (its JSON twin): Rules of
//! `GET {prefix}/rules`, Keys of `GET {prefix}/status` and of the
//! override, ban and reset calls, Controls of `GET {prefix}/controls`. The
//! planner ([`route`]) turns a console request into that admin route once
//! the session holds ([`session`]); the admin flow runs it as it runs the
//! API's, and renders its answer through [`html`]. No page carries script:
//! the `Content-Security-Policy` allows none.
//!
//! Paths: `{prefix}/` (the sign-in form, or on to Rules), `{prefix}/ui/signin`
//! and `/ui/signout` (POST), `/ui/rules`, `/ui/traffic`, `/ui/events` (the
//! traffic's newest refusals), `/ui/keys` (GET a lookup, POST an action),
//! `/ui/controls`, `/ui/style.css`.

pub(crate) mod html;
pub(crate) mod route;
pub(crate) mod rules;
pub(crate) mod session;
pub(crate) mod traffic;

/// `text` escaped for HTML text and quoted attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Unix ms as `YYYY-MM-DD HH:MM:SS UTC`, in integers (no float formatting).
pub(crate) fn time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A console page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Page {
    Home,
    SignIn,
    SignOut,
    Rules,
    Traffic,
    /// The security events: the newest refusals, per rule.
    Events,
    Keys,
    /// A form on the Keys page: reset, ban, override, lift.
    KeysAction,
    Controls,
    Style,
}

impl Page {
    /// The page's path under the prefix.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Page::Home => "/",
            Page::SignIn => "/ui/signin",
            Page::SignOut => "/ui/signout",
            Page::Rules => "/ui/rules",
            Page::Traffic => "/ui/traffic",
            Page::Events => "/ui/events",
            Page::Keys | Page::KeysAction => "/ui/keys",
            Page::Controls => "/ui/controls",
            Page::Style => "/ui/style.css",
        }
    }

    /// Whether the page changes state (a POST with a form).
    pub(crate) fn changes_state(self) -> bool {
        matches!(self, Page::SignIn | Page::SignOut | Page::KeysAction)
    }
}

/// The console page at `canonical_path` for `method`, if it is one.
pub(crate) fn page(prefix: &str, canonical_path: &str, method: &str) -> Option<Page> {
    let rest = crate::request::canon::under_prefix(prefix, canonical_path)?;
    let post = method.eq_ignore_ascii_case("POST");
    let get = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    Some(match (rest, get, post) {
        ("" | "/", true, _) => Page::Home,
        ("/ui/signin", _, true) => Page::SignIn,
        ("/ui/signout", _, true) => Page::SignOut,
        ("/ui/rules", true, _) => Page::Rules,
        ("/ui/traffic", true, _) => Page::Traffic,
        ("/ui/events", true, _) => Page::Events,
        ("/ui/keys", true, _) => Page::Keys,
        ("/ui/keys", _, true) => Page::KeysAction,
        ("/ui/controls", true, _) => Page::Controls,
        ("/ui/style.css", true, _) => Page::Style,
        _ => return None,
    })
}

/// Who the console request is, once its cookie and form are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    /// The style sheet: no session needed.
    Public,
    /// A valid session (unless signed out since: the admin flow asks), its
    /// end and its CSRF token for the page's forms.
    Session { csrf: String, end_ms: i64 },
    /// Signed in by Cloudflare Access (its token's claims hold; the admin
    /// flow verifies its signature first): who, and the CSRF token of the
    /// page's forms ([`crate::admin::access::csrf_of`]).
    Access { identity: String, csrf: String },
    /// The right token in the sign-in form: the session cookie to set.
    SignedIn { cookie: String },
    /// A wrong token in the sign-in form (counted by the lockout).
    WrongToken,
    /// No valid session (`expired`: a well-signed one that ended).
    SignedOut { expired: bool },
    /// A state-changing post from another site, or without the session's
    /// CSRF token: refused, nothing done.
    Forged,
}

impl Auth {
    /// Whether the request is the operator's.
    pub(crate) fn authorized(&self) -> bool {
        matches!(self, Auth::Session { .. } | Auth::SignedIn { .. } | Auth::Access { .. })
    }
}

/// A console request, planned: `R` is the admin route the page asks
/// (`AdminRoute`; generic so that this module names no admin type).
#[derive(Debug)]
pub(crate) struct ConsoleRoute<R> {
    pub(crate) page: Page,
    pub(crate) auth: Auth,
    /// The admin prefix (links, the cookie's path).
    pub(crate) prefix: String,
    /// The admin route the page shows (None: the page asks nothing).
    pub(crate) inner: Option<R>,
    /// The raw key parts the operator typed on the Keys page, to fill its
    /// forms again (`name`, `value`).
    pub(crate) typed: Vec<(String, String)>,
    /// The admin token is shorter than the lockout's bar
    /// ([`TOKEN_PASSES_LOCKOUT_CHARS`](crate::admin::api::TOKEN_PASSES_LOCKOUT_CHARS)):
    /// every page says so.
    pub(crate) short_token: bool,
    /// Who signed in, when Cloudflare Access says (its `email`): shown
    /// beside Sign out.
    pub(crate) who: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_known_by_path_and_method() {
        assert_eq!(page("/.tollgate", "/.tollgate/", "GET"), Some(Page::Home));
        assert_eq!(page("/.tollgate", "/.tollgate", "GET"), Some(Page::Home));
        assert_eq!(page("/.tollgate", "/.tollgate/ui/keys", "POST"), Some(Page::KeysAction));
        assert_eq!(page("/.tollgate", "/.tollgate/ui/keys", "GET"), Some(Page::Keys));
        assert_eq!(page("/.tollgate", "/.tollgate/ui/signin", "GET"), None);
        assert_eq!(page("/.tollgate", "/.tollgate/status", "GET"), None, "the API's own paths are not pages");
        assert_eq!(page("/.tollgate", "/.tollgate/", "POST"), None);
        assert_eq!(page("/.tollgate", "/.TOLLGATE/ui/keys", "GET"), Some(Page::Keys), "the prefix in any case");
        assert!(Page::KeysAction.changes_state() && !Page::Keys.changes_state());
    }
}
