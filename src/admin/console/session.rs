//! Console sessions and CSRF tokens, pure.
//!
//! Signing in with the admin token sets one cookie, [`COOKIE`]: `v2.<end>.<MAC>`,
//! the end in Unix ms ([`SESSION_MS`] after sign-in) and the MAC an
//! HMAC-SHA256 of `session.<end>.<client>` under a key derived from the
//! token ([`session_key`]); `<client>` is the client as the admin lockout
//! keys it (`ip=203.0.113.7`, an IPv6 address by its /64), so a cookie
//! copied to another address is no session there (a client
//! whose address changes signs in again). A cookie is valid while its MAC
//! holds, its end has not passed and it was issued after the last sign-out
//! ([`revoked`]): rotating the token ends every session at once (the key
//! changes), a cookie cannot be stretched (the end is under the MAC), and
//! signing out ends every session issued until then (the admin flow keeps
//! the time in the controls registry's object). The cookie is `HttpOnly`,
//! `Secure`, `SameSite=Strict` and scoped to the admin prefix; a browser
//! scopes it by the raw path, so it also comes with
//! `/.tollgate/..%2fapp` spellings: those are answered by tollgate, and
//! the cookie is taken out of every request forwarded
//! ([`crate::pipeline::credentials::without_session`]). A cross-site form post arrives without it.
//!
//! Every state-changing form carries [`csrf_token`]: the HMAC of
//! `csrf.<end>` under the same key, bound to the one session; a post
//! without it, or with another session's, is refused.

pub(crate) use crate::pipeline::credentials::COOKIE;
use crate::request::hmac::{hex, hmac_sha256, same_bytes};

pub(crate) use crate::pipeline::credentials::SESSION_MS;

/// The key that signs sessions and CSRF tokens, derived from the token
/// (trimmed, as the admin API compares it).
pub(crate) fn session_key(token: &str) -> [u8; 32] {
    hmac_sha256(token.trim().as_bytes(), b"tollgate console session v1")
}

fn mac(token: &str, what: &str, end_ms: i64) -> String {
    hex(&hmac_sha256(&session_key(token), format!("{what}.{end_ms}").as_bytes()))
}

fn session_mac(token: &str, end_ms: i64, client: &str) -> String {
    hex(&hmac_sha256(&session_key(token), format!("session.{end_ms}.{client}").as_bytes()))
}

/// The cookie value of a session signed in at `now_ms` by `client` (the
/// lockout's key of the client).
pub(crate) fn issue(token: &str, now_ms: i64, client: &str) -> String {
    let end = now_ms.saturating_add(SESSION_MS);
    format!("v2.{end}.{}", session_mac(token, end, client))
}

/// When a session ending at `end_ms` was issued.
pub(crate) fn issued_ms(end_ms: i64) -> i64 {
    end_ms.saturating_sub(SESSION_MS)
}

/// Whether the session ending at `end_ms` was signed out: issued at or
/// before the last sign-out (`signed_out_ms`, `None`: none within a
/// session's length).
pub(crate) fn revoked(end_ms: i64, signed_out_ms: Option<i64>) -> bool {
    signed_out_ms.is_some_and(|at| issued_ms(end_ms) <= at)
}

/// What a request's cookie says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Session {
    /// A valid session (unless signed out since: [`revoked`]), ending then
    /// (Unix ms).
    Valid { end_ms: i64 },
    /// A well-signed session that has ended.
    Expired,
    /// No cookie, or one this token did not sign.
    None,
}

/// Checks the session cookie in `cookie_header` (the `Cookie` field) of
/// `client` at `now_ms`. An end further ahead than [`SESSION_MS`] is
/// refused too, and so is a `v1` cookie (not bound to a client).
pub(crate) fn verify(token: &str, cookie_header: Option<&str>, client: &str, now_ms: i64) -> Session {
    let Some(value) = cookie_header.and_then(|h| cookie_value(h, COOKIE)) else { return Session::None };
    let mut parts = value.splitn(3, '.');
    let (Some("v2"), Some(end), Some(presented)) = (parts.next(), parts.next(), parts.next()) else { return Session::None };
    let Ok(end_ms) = end.parse::<i64>() else { return Session::None };
    if token.trim().is_empty() || !same_bytes(session_mac(token, end_ms, client).as_bytes(), presented.as_bytes()) {
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
pub(crate) fn csrf_token(token: &str, end_ms: i64) -> String {
    mac(token, "csrf", end_ms)
}

/// Whether `presented` is the CSRF token of the session ending at `end_ms`.
pub(crate) fn csrf_holds(token: &str, end_ms: i64, presented: Option<&str>) -> bool {
    presented.is_some_and(|p| same_bytes(csrf_token(token, end_ms).as_bytes(), p.as_bytes()))
}

/// The `Set-Cookie` value of a session (`value`), or of its removal
/// (`None`), scoped to `path` (the admin prefix).
pub(crate) fn set_cookie(value: Option<&str>, path: &str) -> String {
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
pub(crate) fn same_site(sec_fetch_site: Option<&str>, origin: Option<&str>, own_origin: &str) -> bool {
    let site_ok = sec_fetch_site.is_none_or(|s| matches!(s, "same-origin" | "none"));
    let origin_ok = origin.is_none_or(|o| o.eq_ignore_ascii_case(own_origin));
    site_ok && origin_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::credentials::{without_session, CookieRewrite};

    const TOKEN: &str = "a console token";
    const CLIENT: &str = "ip=203.0.113.7";

    fn cookie(value: &str) -> String {
        format!("other=1; {COOKIE}={value}")
    }

    #[test]
    fn a_session_holds_until_its_end_and_not_under_another_token() {
        let value = issue(TOKEN, 1_000, CLIENT);
        let end_ms = 1_000 + SESSION_MS;
        assert_eq!(verify(TOKEN, Some(&cookie(&value)), CLIENT, 2_000), Session::Valid { end_ms });
        assert_eq!(verify(&format!(" {TOKEN}\n"), Some(&cookie(&value)), CLIENT, 2_000), Session::Valid { end_ms }, "the token is trimmed");
        assert_eq!(verify(TOKEN, Some(&cookie(&value)), CLIENT, end_ms), Session::Expired);
        assert_eq!(verify("the rotated token", Some(&cookie(&value)), CLIENT, 2_000), Session::None, "rotating the token ends it");
        assert_eq!(verify(TOKEN, None, CLIENT, 2_000), Session::None);
        assert_eq!(verify(TOKEN, Some(&cookie(&value)), "ip=198.51.100.1", 2_000), Session::None, "a cookie copied to another address");
        let v1 = format!("v1.{end_ms}.{}", mac(TOKEN, "session", end_ms));
        assert_eq!(verify(TOKEN, Some(&cookie(&v1)), CLIENT, 2_000), Session::None, "v1 was bound to no client");
    }

    #[test]
    fn a_forged_or_stretched_session_is_refused() {
        let value = issue(TOKEN, 1_000, CLIENT);
        let (_, mac) = value.rsplit_once('.').unwrap();
        let stretched = format!("v2.{}.{mac}", 1_000 + 10 * SESSION_MS);
        assert_eq!(verify(TOKEN, Some(&cookie(&stretched)), CLIENT, 2_000), Session::None, "the end is under the MAC");
        let far = issue(TOKEN, 1_000 + 5 * SESSION_MS, CLIENT);
        assert_eq!(verify(TOKEN, Some(&cookie(&far)), CLIENT, 2_000), Session::None, "no end beyond one session ahead");
        for bad in ["", "v1", "v2.x.y", "v3.1.2", "v2.3600999."] {
            assert_eq!(verify(TOKEN, Some(&cookie(bad)), CLIENT, 2_000), Session::None, "{bad:?}");
        }
        assert_eq!(verify("", Some(&cookie(&issue("", 1_000, CLIENT))), CLIENT, 2_000), Session::None, "no empty token");
    }

    #[test]
    fn a_sign_out_ends_every_session_issued_until_then() {
        let end = 1_000 + SESSION_MS;
        assert!(!revoked(end, None));
        assert!(revoked(end, Some(1_000)), "issued at the sign-out's millisecond");
        assert!(revoked(end, Some(5_000)));
        assert!(!revoked(end, Some(999)), "signed in after the sign-out");
    }

    #[test]
    fn the_session_cookie_is_taken_out_and_every_other_byte_kept() {
        let s = "tollgate_session=v2.1.ab";
        assert_eq!(without_session("a=1; b=2"), CookieRewrite::Keep);
        assert_eq!(without_session(s), CookieRewrite::Remove);
        assert_eq!(without_session(&format!("{s}; {s}")), CookieRewrite::Remove, "two paths, two pairs");
        for (header, kept) in [
            (format!("a=1; {s}; b=2"), "a=1; b=2"),
            (format!("{s}; a=1;b=\"x y\""), "a=1;b=\"x y\""),
            (format!("a=1;{s}"), "a=1"),
            (format!("a=1, {s}"), "a=1"),
            (format!("{s}, a=1; c=x,y"), "a=1; c=x,y"),
            (format!("my_tollgate_session=1; {s}; tollgate_session2=3"), "my_tollgate_session=1; tollgate_session2=3"),
            (format!("a=1; {s} ; b=2"), "a=1; b=2"),
        ] {
            assert_eq!(without_session(&header), CookieRewrite::Set(kept.to_string()), "{header}");
        }
        assert_eq!(without_session("x=tollgate_session"), CookieRewrite::Keep, "a value that names it is not it");
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
