//! Trusted devices: lockout-resistant account limits.
//!
//! A limit on failed logins per account lets anyone lock the owner out: ten
//! wrong passwords and the right one gets 429 too (the trade-off OWASP's
//! authentication cheat sheet describes). The usual mitigation is a device
//! cookie: a browser that has logged in to an account successfully before
//! gets a signed cookie, and the account limit counts that browser's
//! failures in a bucket of its own. An attacker who fills the account's
//! bucket does not touch it, and without the secret cannot forge one.
//!
//! The cookie value is `v2.<expires, Unix s>.<32 hex digits>`: an
//! HMAC-SHA256 under a Workers secret of the rule's name, the account key,
//! the account's exact spelling ([`crate::request::spelling`]) and the expiry, so a
//! cookie is good for one rule and one account, spelled as it was when the
//! origin let it in, until it expires. The key alone would not do: it
//! folds case, and on an origin whose accounts are case-sensitive an
//! attacker who owns `Victim@example.com` would earn a cookie for
//! `victim@example.com`'s key, each one a fresh bucket of guesses.
//! `v1` cookies, signed for the key alone, are refused. The device's
//! bucket is the account key with `|device=` and the first 16 hex digits
//! of that MAC appended.

use crate::request::hmac::{hex, hmac_sha256, same_bytes};

/// The cookie's format version.
const VERSION: &str = "v2";

/// The signature carried in the cookie: 128 bits of the MAC, hex.
const MAC_HEX: usize = 32;

/// The part of the signature that names the device's bucket.
const DEVICE_ID_HEX: usize = 16;

fn mac_hex(secret: &[u8], rule: &str, key: &str, spelling: &str, expires_s: i64) -> String {
    let message = format!("tollgate-device-v2\n{rule}\n{key}\n{spelling}\n{expires_s}");
    hex(&hmac_sha256(secret, message.as_bytes())[..MAC_HEX / 2])
}

/// The cookie value for `key` spelled `spelling` (its tag) under `rule`,
/// good until `expires_s`.
pub(crate) fn token(secret: &[u8], rule: &str, key: &str, spelling: &str, expires_s: i64) -> String {
    format!("{VERSION}.{expires_s}.{}", mac_hex(secret, rule, key, spelling, expires_s))
}

/// The device id a valid, unexpired cookie `value` stands for, for `key`
/// spelled `spelling` under `rule` at `now_ms`; `None` for anything else
/// (malformed, expired, signed for another rule, account or spelling, or
/// not by `secret`). The MAC is compared in constant time.
pub(crate) fn verify(secret: &[u8], rule: &str, key: &str, spelling: &str, value: &str, now_ms: i64) -> Option<String> {
    let mut parts = value.trim().splitn(3, '.');
    let (version, expires, mac) = (parts.next()?, parts.next()?, parts.next()?);
    let expires_s: i64 = expires.parse().ok()?;
    if version != VERSION || mac.len() != MAC_HEX || expires_s.saturating_mul(1000) <= now_ms {
        return None;
    }
    let expected = mac_hex(secret, rule, key, spelling, expires_s);
    same_bytes(expected.as_bytes(), mac.as_bytes()).then(|| expected[..DEVICE_ID_HEX].to_string())
}

/// The key a trusted device's requests count under: the account's, plus
/// the device.
pub(crate) fn device_key(key: &str, device: &str) -> String {
    format!("{key}|device={device}")
}

/// The `Set-Cookie` value that hands a device its cookie: `HttpOnly`,
/// `Secure`, `SameSite=Lax`, for the whole site, for `ttl_s`.
pub(crate) fn set_cookie(name: &str, token: &str, ttl_s: u64) -> String {
    format!("{name}={token}; Max-Age={ttl_s}; Path=/; HttpOnly; Secure; SameSite=Lax")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"device secret";
    const NOW: i64 = 1_800_000_000_000;
    const SPELLED: &str = "0123456789abcdef";

    #[test]
    fn a_token_is_good_for_its_rule_account_spelling_and_time_only() {
        let t = token(SECRET, "login", "body:email=abc", SPELLED, NOW / 1000 + 60);
        let id = verify(SECRET, "login", "body:email=abc", SPELLED, &t, NOW).unwrap();
        assert_eq!(id.len(), DEVICE_ID_HEX);
        assert_eq!(verify(SECRET, "login", "body:email=abc", SPELLED, &format!(" {t} "), NOW), Some(id.clone()));
        assert_eq!(verify(SECRET, "login", "body:email=other", SPELLED, &t, NOW), None, "another account");
        assert_eq!(verify(SECRET, "login", "body:email=abc", "fedcba9876543210", &t, NOW), None, "another spelling");
        assert_eq!(verify(SECRET, "signup", "body:email=abc", SPELLED, &t, NOW), None, "another rule");
        assert_eq!(verify(b"another secret", "login", "body:email=abc", SPELLED, &t, NOW), None, "another secret");
        assert_eq!(verify(SECRET, "login", "body:email=abc", SPELLED, &t, NOW + 60_000), None, "expired");
        let later = token(SECRET, "login", "body:email=abc", SPELLED, NOW / 1000 + 120);
        assert_ne!(verify(SECRET, "login", "body:email=abc", SPELLED, &later, NOW), Some(id), "each cookie its own device");
        let v1 = t.replacen("v2.", "v1.", 1);
        assert_eq!(verify(SECRET, "login", "body:email=abc", SPELLED, &v1, NOW), None, "a v1 cookie is bound to no spelling");
    }

    #[test]
    fn forged_and_malformed_tokens_are_refused() {
        let t = token(SECRET, "login", "k", SPELLED, NOW / 1000 + 60);
        let (head, mac) = t.rsplit_once('.').unwrap();
        let flipped = format!("{head}.{}{}", if mac.starts_with('0') { '1' } else { '0' }, &mac[1..]);
        let extended = t.replace(&format!(".{}.", NOW / 1000 + 60), &format!(".{}.", NOW / 1000 + 6_000));
        for bad in ["", "v2", "v2..", "v3.1.0", &flipped, &extended, &format!("{t}0"), &t[..t.len() - 1], "v2.x.y"] {
            assert_eq!(verify(SECRET, "login", "k", SPELLED, bad, NOW), None, "{bad}");
        }
    }

    #[test]
    fn cookie_attributes() {
        assert_eq!(
            set_cookie("tollgate_device", "v2.1.ab", 86_400),
            "tollgate_device=v2.1.ab; Max-Age=86400; Path=/; HttpOnly; Secure; SameSite=Lax"
        );
        assert_eq!(device_key("body:email=abc", "0123"), "body:email=abc|device=0123");
    }
}
