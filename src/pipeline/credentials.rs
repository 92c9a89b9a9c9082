//! Tollgate's own credentials on a request, the one admin concern of the
//! zone's Worker: with the admin API on, every forwarded request has them
//! taken out ([`own_credentials`]), because a browser sends the console's
//! session cookie with any raw path under the admin prefix and a client
//! may send the admin token anywhere. The admin plane (`crate::admin`)
//! signs operators in with the same cookie and the same token check.

use crate::request::hmac::same_bytes;
use sha2::{Digest, Sha256};

/// The console session cookie's name.
pub(crate) const COOKIE: &str = "tollgate_session";

/// How long a session lasts: one hour.
pub(crate) const SESSION_MS: i64 = 3_600_000;

/// Whether `authorization` is `Bearer <expected>`, compared in constant
/// time: both sides are hashed with SHA-256 first, so neither the length nor
/// the position of the first difference leaks through timing.
pub(crate) fn token_matches(expected: &str, authorization: Option<&str>) -> bool {
    let presented = authorization
        .and_then(|h| {
            let h = h.trim();
            h.get(..7)
                .filter(|scheme| scheme.eq_ignore_ascii_case("bearer "))
                .map(|_| h[7..].trim())
        })
        .unwrap_or("");
    // A secret stored with a trailing newline (`echo token | wrangler secret
    // put`) is the same token.
    let expected = expected.trim();
    same_bytes(&Sha256::digest(expected.as_bytes()), &Sha256::digest(presented.as_bytes()))
        && !expected.is_empty()
        && !presented.is_empty()
}

/// What to take out of a request before it is forwarded: tollgate's own
/// credentials, and nothing else. The session cookie
/// ([`without_session`]:
/// its pairs only, every other cookie byte for byte) and an `Authorization`
/// with the admin token as its bearer (any item of a field sent twice). Asked
/// of every forwarded request while the admin API is on (`token`): a browser
/// sends the cookie with any raw path under the prefix, and a client may send
/// the token anywhere.
pub(crate) fn own_credentials(token: &str, cookie: Option<&str>, authorization: Option<&str>) -> Strip {
    use {without_session, CookieRewrite};
    let authorization =
        authorization.is_some_and(|a| token_matches(token, Some(a)) || a.split(',').any(|item| token_matches(token, Some(item))));
    let cookie = cookie.map_or(CookieRewrite::Keep, without_session);
    Strip { cookie, authorization }
}

/// [`own_credentials`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Strip {
    /// What becomes of the `Cookie` field.
    pub(crate) cookie: CookieRewrite,
    /// Whether the `Authorization` field is removed.
    pub(crate) authorization: bool,
}

impl Strip {
    /// Whether the request goes as it came.
    pub(crate) fn nothing(&self) -> bool {
        !self.authorization && self.cookie == CookieRewrite::Keep
    }
}

/// What becomes of a `Cookie` field once the session cookie is taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CookieRewrite {
    /// No session cookie in it: as it came.
    Keep,
    /// Nothing but session cookies: the field goes.
    Remove,
    /// The other cookies, each byte as it came, with their separators.
    Set(String),
}

/// The `Cookie` field without any [`COOKIE`] pair. Pairs are
/// separated by `;`; a `,` also ends a pair when a session cookie is on
/// either side of it (a field sent twice, joined by `", "`; a session's
/// value holds no `,`). Every other byte stays: a
/// kept pair keeps the separator and spaces before it, the first kept pair
/// loses only its leading spaces.
pub(crate) fn without_session(header: &str) -> CookieRewrite {
    if !header.contains(COOKIE) {
        return CookieRewrite::Keep;
    }
    let ours = |piece: &str| piece.split_once('=').is_some_and(|(name, _)| name.trim() == COOKIE);
    // (the separator before the piece, the piece)
    let mut pieces: Vec<(Option<char>, &str)> = Vec::new();
    let (mut start, mut sep) = (0, None);
    for (at, c) in header.char_indices() {
        let ends = c == ';'
            || (c == ',' && (ours(&header[start..at]) || ours(header[at + 1..].trim_start().split([';', ',']).next().unwrap_or(""))));
        if ends {
            pieces.push((sep, &header[start..at]));
            (start, sep) = (at + 1, Some(c));
        }
    }
    pieces.push((sep, &header[start..]));
    let kept: Vec<&(Option<char>, &str)> = pieces.iter().filter(|(_, piece)| !ours(piece)).collect();
    if kept.len() == pieces.len() {
        return CookieRewrite::Keep;
    }
    if kept.iter().all(|(_, piece)| piece.trim().is_empty()) {
        return CookieRewrite::Remove;
    }
    let mut out = String::with_capacity(header.len());
    for (i, (sep, piece)) in kept.iter().enumerate() {
        if i == 0 {
            out.push_str(piece.trim_start());
        } else {
            out.push(sep.unwrap_or(';'));
            out.push_str(piece);
        }
    }
    CookieRewrite::Set(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tollgates_own_credentials_are_taken_out() {
        let t = "s3cret";
        let none = own_credentials(t, Some("a=1; b=2"), Some("Bearer app-token"));
        assert!(none.nothing(), "{none:?}");
        assert!(own_credentials(t, None, None).nothing());
        let both = own_credentials(t, Some("a=1; tollgate_session=v2.1.x"), Some("Bearer s3cret"));
        assert_eq!(both, Strip { cookie: CookieRewrite::Set("a=1".into()), authorization: true });
        for spelled in ["bearer  s3cret ", "Bearer app, Bearer s3cret", "BEARER s3cret"] {
            assert!(own_credentials(t, None, Some(spelled)).authorization, "{spelled}");
        }
        for other in ["Bearer s3cretx", "Basic s3cret", "s3cret", "Bearer "] {
            assert!(!own_credentials(t, None, Some(other)).authorization, "{other}");
        }
    }
}
