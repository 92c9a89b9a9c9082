//! Console sessions and CSRF tokens, pure (issue 28).
//!
//! Signing in with the admin token sets one cookie, [`COOKIE`]: `v1.<end>.<MAC>`,
//! the end in Unix ms ([`SESSION_MS`] after sign-in) and the MAC an
//! HMAC-SHA256 of `session.<end>` under a key derived from the token
//! ([`session_key`]). Nothing is stored: a cookie is valid while its MAC
//! holds and its end has not passed, so rotating the token ends every
//! session at once (the key changes), and a cookie cannot be stretched
//! (the end is under the MAC). The cookie is `HttpOnly`, `Secure`,
//! `SameSite=Strict` and scoped to the admin prefix, so it is never sent
//! to the origin, and a cross-site form post arrives without it.
//!
//! Every state-changing form carries [`csrf_token`]: the HMAC of
//! `csrf.<end>` under the same key, bound to the one session; a post
//! without it, or with another session's, is refused.

use crate::request::hmac::{hex, hmac_sha256, same_bytes};

/// The session cookie's name.
pub const COOKIE: &str = "tollgate_session";

/// How long a session lasts: one hour.
pub const SESSION_MS: i64 = 3_600_000;

/// The key that signs sessions and CSRF tokens, derived from the token
/// (trimmed, as the admin API compares it).
pub fn session_key(token: &str) -> [u8; 32] {
    hmac_sha256(token.trim().as_bytes(), b"tollgate console session v1")
}

fn mac(token: &str, what: &str, end_ms: i64) -> String {
    hex(&hmac_sha256(&session_key(token), format!("{what}.{end_ms}").as_bytes()))
}

/// The cookie value of a session signed in at `now_ms`.
pub fn issue(token: &str, now_ms: i64) -> String {
    let end = now_ms.saturating_add(SESSION_MS);
    format!("v1.{end}.{}", mac(token, "session", end))
}

/// What a request's cookie says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    /// A valid session, ending then (Unix ms).
    Valid { end_ms: i64 },
    /// A well-signed session that has ended.
    Expired,
    /// No cookie, or one this token did not sign.
    None,
}

/// Checks the session cookie in `cookie_header` (the `Cookie` field) at
/// `now_ms`. An end further ahead than [`SESSION_MS`] is refused too.
pub fn verify(token: &str, cookie_header: Option<&str>, now_ms: i64) -> Session {
    let Some(value) = cookie_header.and_then(|h| cookie_value(h, COOKIE)) else { return Session::None };
    let mut parts = value.splitn(3, '.');
    let (Some("v1"), Some(end), Some(presented)) = (parts.next(), parts.next(), parts.next()) else { return Session::None };
    let Ok(end_ms) = end.parse::<i64>() else { return Session::None };
    if token.trim().is_empty() || !same_bytes(mac(token, "session", end_ms).as_bytes(), presented.as_bytes()) {
        return Session::None;
    }
    if end_ms <= now_ms {
        Session::Expired
    } else if end_ms > now_ms.saturating_add(SESSION_MS) {
        Session::None
    } else {
        Session::Valid { end_ms }
    }
}

/// The CSRF token of the session ending at `end_ms`.
pub fn csrf_token(token: &str, end_ms: i64) -> String {
    mac(token, "csrf", end_ms)
}

/// Whether `presented` is the CSRF token of the session ending at `end_ms`.
pub fn csrf_holds(token: &str, end_ms: i64, presented: Option<&str>) -> bool {
    presented.is_some_and(|p| same_bytes(csrf_token(token, end_ms).as_bytes(), p.as_bytes()))
}

/// The `Set-Cookie` value of a session (`value`), or of its removal
/// (`None`), scoped to `path` (the admin prefix).
pub fn set_cookie(value: Option<&str>, path: &str) -> String {
    match value {
        Some(v) => format!("{COOKIE}={v}; Path={path}; Max-Age={}; HttpOnly; Secure; SameSite=Strict", SESSION_MS / 1000),
        None => format!("{COOKIE}=; Path={path}; Max-Age=0; HttpOnly; Secure; SameSite=Strict"),
    }
}

/// A cookie's value from a `Cookie` field (`a=1; b=2`); the first of that name.
fn cookie_value<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    header.split(';').filter_map(|pair| pair.trim().split_once('=')).find(|(n, _)| *n == name).map(|(_, v)| v.trim())
}

/// Whether a state-changing request comes from the console's own pages:
/// `Sec-Fetch-Site` (when sent) is `same-origin` (or `none`, typed by the
/// operator), and `Origin` (when sent) is the request's own.
pub fn same_site(sec_fetch_site: Option<&str>, origin: Option<&str>, own_origin: &str) -> bool {
    let site_ok = sec_fetch_site.is_none_or(|s| matches!(s, "same-origin" | "none"));
    let origin_ok = origin.is_none_or(|o| o.eq_ignore_ascii_case(own_origin));
    site_ok && origin_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "a console token";

    fn cookie(value: &str) -> String {
        format!("other=1; {COOKIE}={value}")
    }

    #[test]
    fn a_session_holds_until_its_end_and_not_under_another_token() {
        let value = issue(TOKEN, 1_000);
        let end_ms = 1_000 + SESSION_MS;
        assert_eq!(verify(TOKEN, Some(&cookie(&value)), 2_000), Session::Valid { end_ms });
        assert_eq!(verify(&format!(" {TOKEN}\n"), Some(&cookie(&value)), 2_000), Session::Valid { end_ms }, "the token is trimmed");
        assert_eq!(verify(TOKEN, Some(&cookie(&value)), end_ms), Session::Expired);
        assert_eq!(verify("the rotated token", Some(&cookie(&value)), 2_000), Session::None, "rotating the token ends it");
        assert_eq!(verify(TOKEN, None, 2_000), Session::None);
    }

    #[test]
    fn a_forged_or_stretched_session_is_refused() {
        let value = issue(TOKEN, 1_000);
        let (_, mac) = value.rsplit_once('.').unwrap();
        let stretched = format!("v1.{}.{mac}", 1_000 + 10 * SESSION_MS);
        assert_eq!(verify(TOKEN, Some(&cookie(&stretched)), 2_000), Session::None, "the end is under the MAC");
        let far = issue(TOKEN, 1_000 + 5 * SESSION_MS);
        assert_eq!(verify(TOKEN, Some(&cookie(&far)), 2_000), Session::None, "no end beyond one session ahead");
        for bad in ["", "v1", "v1.x.y", "v2.1.2", "v1.3600999."] {
            assert_eq!(verify(TOKEN, Some(&cookie(bad)), 2_000), Session::None, "{bad:?}");
        }
        assert_eq!(verify("", Some(&cookie(&issue("", 1_000))), 2_000), Session::None, "no empty token");
    }

    #[test]
    fn the_csrf_token_is_the_sessions_own() {
        let t = csrf_token(TOKEN, 5);
        assert!(csrf_holds(TOKEN, 5, Some(&t)));
        assert!(!csrf_holds(TOKEN, 6, Some(&t)), "another session's");
        assert!(!csrf_holds("other", 5, Some(&t)));
        assert!(!csrf_holds(TOKEN, 5, None));
        assert_ne!(t, mac(TOKEN, "session", 5), "not the session's MAC");
    }

    #[test]
    fn cross_site_posts_are_told_apart() {
        let own = "https://example.com";
        assert!(same_site(Some("same-origin"), Some(own), own));
        assert!(same_site(None, None, own));
        assert!(!same_site(Some("cross-site"), None, own));
        assert!(!same_site(Some("same-site"), None, own));
        assert!(!same_site(None, Some("https://evil.example"), own));
        assert!(set_cookie(Some("v"), "/.tollgate").contains("HttpOnly; Secure; SameSite=Strict"));
        assert!(set_cookie(None, "/.tollgate").contains("Max-Age=0"));
    }
}
