//! Arbitrary bytes as a form body: the first line is the `Content-Type`,
//! the rest the body. Nothing may panic; without its bytes (over the cap) a
//! body never reads as pairs, and is unreadable exactly when it needs them;
//! every value read (not a file's) is among `form_field_values` for its name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate::internals::body::{form_field_values, needs_bytes, parameters, BodyParams, Unreadable};
use tollgate::internals::canon::{CanonicalQuery, Source};

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let content_type = String::from_utf8_lossy(&data[..split]);
    let body = data.get(split + 1..).unwrap_or_default();
    let unread = parameters(&content_type, None, None);
    assert!(!matches!(unread, BodyParams::Pairs(_)));
    assert_eq!(unread == BodyParams::Unreadable(Unreadable::TooLarge), needs_bytes(&content_type, None));
    if let BodyParams::Pairs(pairs) = parameters(&content_type, None, Some(body)) {
        for (name, value) in pairs.iter().filter(|(_, v)| !v.is_empty() && !v.contains('\0')) {
            let mut named = CanonicalQuery::default();
            named.join(Source::Body, vec![(name.clone(), value.clone())]);
            // Looked up by the name as stored (normalized, up to a NUL).
            let Some((stored, _)) = named.pairs().first() else { continue };
            let values = form_field_values(&content_type, body, stored);
            assert!(values.contains(value), "{name}: {value:?} not in {values:?}");
        }
    }
});
