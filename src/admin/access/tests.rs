use super::*;
use proptest::prelude::*;
use serde_json::{json, Value};

const NOW_MS: i64 = 1_800_000_000_000;
const NOW_S: i64 = NOW_MS / 1000;

fn access() -> AdminAccess {
    AdminAccess { team_domain: "acme.cloudflareaccess.com".into(), audience: vec!["aud-tag".into()] }
}

/// base64url without padding, for building tokens.
pub(crate) fn encode(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

pub(crate) fn token(header: &Value, claims: &Value) -> String {
    format!("{}.{}.{}", encode(header.to_string().as_bytes()), encode(claims.to_string().as_bytes()), encode(&[7; 256]))
}

fn claims() -> Value {
    json!({ "aud": ["aud-tag"], "email": "ann@example.com", "exp": NOW_S + 300, "iat": NOW_S - 10, "nbf": NOW_S - 10,
            "iss": "https://acme.cloudflareaccess.com", "type": "app", "sub": "7335d417", "country": "NZ" })
}

fn header() -> Value {
    json!({ "alg": "RS256", "kid": "k1", "typ": "JWT" })
}

fn with(mut value: Value, field: &str, to: Value) -> Value {
    match to {
        Value::Null => value.as_object_mut().and_then(|o| o.remove(field)),
        to => value.as_object_mut().and_then(|o| o.insert(field.into(), to)),
    };
    value
}

#[test]
fn a_token_whose_claims_hold_is_read_to_its_key_signed_bytes_and_identity() {
    let jwt = token(&header(), &claims());
    let proof = check(&jwt, &access(), NOW_MS).unwrap();
    assert_eq!((proof.kid.as_str(), proof.identity.as_str()), ("k1", "ann@example.com"));
    let (signed, _) = jwt.rsplit_once('.').unwrap();
    assert_eq!(proof.signed, signed.as_bytes(), "header.payload as sent");
    assert_eq!(proof.signature, vec![7; 256]);
    assert_eq!(proof.csrf, csrf_of(&jwt));
    assert_ne!(csrf_of(&jwt), csrf_of(&token(&header(), &with(claims(), "sub", json!("other")))), "bound to the token");
    // A single audience, and one of several configured.
    let one = with(claims(), "aud", json!("aud-tag"));
    assert!(check(&token(&header(), &one), &access(), NOW_MS).is_ok());
    let several = AdminAccess { audience: vec!["other".into(), "aud-tag".into()], ..access() };
    assert!(check(&jwt, &several, NOW_MS).is_ok());
    // A service token: its common name.
    let service = with(with(claims(), "email", Value::Null), "common_name", json!("abc.access"));
    assert_eq!(check(&token(&header(), &service), &access(), NOW_MS).unwrap().identity, "abc.access");
}

#[test]
fn wrong_audience_issuer_expired_and_not_yet_valid_tokens_are_refused() {
    for (claims, refusal) in [
        (with(claims(), "aud", json!(["someone-else"])), AccessRefusal::Audience),
        (with(claims(), "aud", json!("aud-tag-2")), AccessRefusal::Audience),
        (with(claims(), "aud", Value::Null), AccessRefusal::Audience),
        (with(claims(), "aud", json!([])), AccessRefusal::Audience),
        (with(claims(), "iss", json!("https://evil.cloudflareaccess.com")), AccessRefusal::Issuer),
        (with(claims(), "iss", json!("https://acme.cloudflareaccess.com/")), AccessRefusal::Issuer),
        (with(claims(), "iss", Value::Null), AccessRefusal::Issuer),
        (with(claims(), "exp", json!(NOW_S - LEEWAY_S)), AccessRefusal::Expired),
        (with(claims(), "exp", json!(NOW_S - 3600)), AccessRefusal::Expired),
        (with(claims(), "exp", Value::Null), AccessRefusal::Expired),
        (with(claims(), "nbf", json!(NOW_S + LEEWAY_S + 1)), AccessRefusal::NotYetValid),
    ] {
        assert_eq!(check(&token(&header(), &claims), &access(), NOW_MS), Err(refusal.clone()), "{claims}");
    }
    // Within the leeway.
    assert!(check(&token(&header(), &with(claims(), "exp", json!(NOW_S - LEEWAY_S + 1))), &access(), NOW_MS).is_ok());
    assert!(check(&token(&header(), &with(claims(), "nbf", json!(NOW_S + LEEWAY_S))), &access(), NOW_MS).is_ok());
}

#[test]
fn alg_none_hs256_and_other_algorithms_are_refused_before_any_key() {
    for alg in ["none", "HS256", "RS384", "ES256", "PS256", "rs256", ""] {
        let jwt = token(&with(header(), "alg", json!(alg)), &claims());
        assert_eq!(check(&jwt, &access(), NOW_MS), Err(AccessRefusal::Algorithm), "{alg}");
    }
    let unsigned = format!("{}.{}.", encode(json!({"alg": "none"}).to_string().as_bytes()), encode(claims().to_string().as_bytes()));
    assert_eq!(check(&unsigned, &access(), NOW_MS), Err(AccessRefusal::Algorithm));
    let no_sig = format!("{}.{}.", encode(header().to_string().as_bytes()), encode(claims().to_string().as_bytes()));
    assert_eq!(check(&no_sig, &access(), NOW_MS), Err(AccessRefusal::Malformed("signature")), "an empty signature");
    assert_eq!(check(&token(&with(header(), "kid", Value::Null), &claims()), &access(), NOW_MS), Err(AccessRefusal::Malformed("kid")));
}

#[test]
fn malformed_tokens_are_refused() {
    let good = token(&header(), &claims());
    let (h, rest) = good.split_once('.').unwrap();
    for bad in [
        String::new(),
        "a.b".into(),
        format!("{good}.x"),
        format!("{h}=.{rest}"),
        format!("{h}+.{rest}"),
        format!("x{h}.{rest}"),
        format!("{}.{rest}", encode(b"not json")),
        format!("{}.{rest}", encode(br#"{"alg":"RS256","alg":"none","kid":"k1"}"#)),
        format!("{h}.{}.AAAA", encode(b"[]")),
        "x".repeat(MAX_TOKEN_BYTES + 1),
    ] {
        assert!(matches!(check(&bad, &access(), NOW_MS), Err(AccessRefusal::Malformed(_) | AccessRefusal::Algorithm)), "{bad:.80}");
    }
}

#[test]
fn claims_of_the_wrong_type_are_refused() {
    for (field, value, refusal) in [
        ("exp", json!("tomorrow"), AccessRefusal::Expired),
        ("exp", json!(1.8e12), AccessRefusal::Expired),
        ("nbf", json!("now"), AccessRefusal::NotYetValid),
        ("aud", json!({"aud-tag": true}), AccessRefusal::Audience),
        ("aud", json!([7]), AccessRefusal::Audience),
        ("iss", json!(["https://acme.cloudflareaccess.com"]), AccessRefusal::Issuer),
    ] {
        assert_eq!(check(&token(&header(), &with(claims(), field, value.clone())), &access(), NOW_MS), Err(refusal), "{field}: {value}");
    }
    assert_eq!(check(&token(&with(header(), "kid", json!(5)), &claims()), &access(), NOW_MS), Err(AccessRefusal::Malformed("kid")));
    assert_eq!(check(&token(&with(header(), "alg", json!(["RS256"])), &claims()), &access(), NOW_MS), Err(AccessRefusal::Algorithm));
    let no_one = with(with(claims(), "email", Value::Null), "sub", json!(" "));
    assert_eq!(check(&token(&header(), &no_one), &access(), NOW_MS).unwrap().identity, "access", "no name: still the operator, named as such");
}

#[test]
fn base64url_decodes_strictly() {
    assert_eq!(decode(""), Some(vec![]));
    assert_eq!(decode("YQ"), Some(b"a".to_vec()));
    assert_eq!(decode("YWI"), Some(b"ab".to_vec()));
    assert_eq!(decode("YWJj"), Some(b"abc".to_vec()));
    assert_eq!(decode("-_8"), Some(vec![0xfb, 0xff]));
    for bad in ["Y", "YQ==", "YR", "YW+j", "YW/j", "YW j"] {
        assert_eq!(decode(bad), None, "{bad}");
    }
    for bytes in [&b""[..], b"\x00", b"\xff\xfe", b"hello world", &[0u8; 256]] {
        assert_eq!(decode(&encode(bytes)).as_deref(), Some(bytes));
    }
}

fn jwks(kids: &[&str]) -> String {
    let n = encode(&[0xc5; 256]);
    let keys: Vec<Value> = kids.iter().map(|k| json!({ "kid": k, "kty": "RSA", "alg": "RS256", "use": "sig", "e": "AQAB", "n": n })).collect();
    json!({ "keys": keys, "public_cert": { "kid": kids.first(), "cert": "-----BEGIN CERTIFICATE-----" } }).to_string()
}

#[test]
fn only_rsa_signature_keys_are_read_from_the_jwks() {
    let keys = parse_keys(&jwks(&["k1", "k2"])).unwrap();
    assert_eq!(keys.iter().map(|k| k.kid.as_str()).collect::<Vec<_>>(), ["k1", "k2"]);
    assert_eq!(keys[0].e, "AQAB");
    let n = encode(&[0xc5; 256]);
    let skipped = json!({ "keys": [
        { "kid": "ec", "kty": "EC", "crv": "P-256", "x": "AA", "y": "AA" },
        { "kid": "hs", "kty": "RSA", "alg": "HS256", "n": n, "e": "AQAB" },
        { "kid": "enc", "kty": "RSA", "use": "enc", "n": n, "e": "AQAB" },
        { "kid": "short", "kty": "RSA", "n": "AQAB", "e": "AQAB" },
        { "kid": 5, "kty": "RSA", "n": n, "e": "AQAB" },
        { "kid": "ok", "kty": "RSA", "n": n, "e": "AQAB" },
    ]});
    assert_eq!(parse_keys(&skipped.to_string()).unwrap().iter().map(|k| k.kid.as_str()).collect::<Vec<_>>(), ["ok"]);
    for bad in ["", "{}", "[]", "{\"keys\": 1}", "{\"keys\": []}", "<html>"] {
        assert_eq!(parse_keys(bad), None, "{bad}");
    }
}

#[test]
fn keys_are_fetched_once_kept_an_hour_and_refetched_on_an_unknown_kid_at_most_once_a_minute() {
    let mut keys = Keys::default();
    assert_eq!(keys.step("k1", 0), KeyStep::Fetch, "nothing held");
    assert_eq!(keys.step("k1", 10), KeyStep::Refuse(AccessRefusal::KeysUnavailable), "a fetch in flight: not another");
    assert!(keys.fetched(Some(&jwks(&["k1"])), 20));
    assert!(matches!(keys.step("k1", 30), KeyStep::Verify(ref k) if k.kid == "k1"));
    // A foreign kid, a minute after the first fetch: one refetch, then refused for a minute whatever the kid.
    let m = REFETCH_MIN_MS;
    assert_eq!(keys.step("bogus-1", 1_000), KeyStep::Refuse(AccessRefusal::UnknownKey), "within a minute of the first fetch");
    assert_eq!(keys.step("bogus-1", m), KeyStep::Fetch);
    assert!(keys.fetched(Some(&jwks(&["k1"])), m + 10));
    assert_eq!(keys.step("bogus-1", m + 20), KeyStep::Refuse(AccessRefusal::UnknownKey));
    for i in 0..1_000 {
        assert_eq!(keys.step(&format!("bogus-{i}"), m + 2_000 + i), KeyStep::Refuse(AccessRefusal::UnknownKey), "no fetch per request");
    }
    assert!(matches!(keys.step("k1", m + 5_000), KeyStep::Verify(_)), "the known key still works");
    // A rotation: the new kid is fetched once the minute has passed.
    assert_eq!(keys.step("k2", 2 * m), KeyStep::Fetch);
    assert!(keys.fetched(Some(&jwks(&["k2", "k1"])), 2 * m));
    assert!(matches!(keys.step("k2", 2 * m + 1), KeyStep::Verify(ref k) if k.kid == "k2"));
    // After an hour, fetched again; a failed fetch keeps the keys held (stale, bounded).
    let later = 2 * m + KEYS_TTL_MS;
    assert_eq!(keys.step("k1", later), KeyStep::Fetch);
    assert!(!keys.fetched(None, later));
    assert!(!keys.fetched(Some("not json"), later));
    assert!(matches!(keys.step("k1", later + 1), KeyStep::Verify(_)), "stale keys while fetching fails");
    assert_eq!(keys.step("k1", later + MAX_STALE_MS), KeyStep::Fetch);
    assert_eq!(keys.step("k1", later + MAX_STALE_MS + 1), KeyStep::Refuse(AccessRefusal::UnknownKey), "too stale: refused");
}

proptest! {
    #[test]
    fn no_bytes_make_the_reader_panic(text in "\\PC{0,300}", dots in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = check(&text, &access(), NOW_MS);
        let _ = decode(&text);
        let _ = parse_keys(&text);
        let spliced = format!("{}.{}.{}", encode(&dots), text, encode(&dots));
        let _ = check(&spliced, &access(), NOW_MS);
        let header_of = format!("{}.{}.AAAA", encode(&dots), encode(claims().to_string().as_bytes()));
        prop_assert!(check(&header_of, &access(), NOW_MS).is_err());
    }
}
