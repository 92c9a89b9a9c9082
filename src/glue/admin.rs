//! Cloudflare Access's I/O: the team's signing keys fetched,
//! an RS256 signature verified with WebCrypto (`crypto.subtle`), so no RSA
//! code is in the Wasm. Decides nothing: the core's
//! [`Keys::step`](crate::pipeline::access::Keys::step) says which key, or
//! to fetch.

use crate::config::Config;
use crate::glue::isolate::{now_ms, with_isolate};
use crate::pipeline::access::{KeyStep, Proof, Refusal};
use worker::js_sys;
use worker::wasm_bindgen::{self, prelude::wasm_bindgen};
use worker::wasm_bindgen_futures::JsFuture;

/// How long fetching the keys may take.
const FETCH_TIMEOUT_MS: u32 = 3_000;

/// Verifies `proof`'s signature with the team's key of its `kid`,
/// fetching the keys first when the isolate's copy says so (at most one
/// fetch per request).
pub(crate) async fn verify(config: &Config, proof: &Proof) -> Result<(), Refusal> {
    let Some(access) = config.admin_access.as_ref() else { return Err(Refusal::KeysUnavailable) };
    let mut step = with_isolate(|isolate| isolate.access_keys.step(&proof.kid, now_ms()));
    if step == KeyStep::Fetch {
        let answer = JsFuture::from(fetch_text(&access.certs_url(), FETCH_TIMEOUT_MS)).await.ok().and_then(|v| v.as_string());
        step = with_isolate(|isolate| {
            isolate.access_keys.fetched(answer.as_deref(), now_ms());
            isolate.access_keys.step(&proof.kid, now_ms())
        });
    }
    match step {
        KeyStep::Verify(key) => {
            let (signed, signature) = (js_sys::Uint8Array::from(proof.signed.as_slice()), js_sys::Uint8Array::from(proof.signature.as_slice()));
            let valid = JsFuture::from(verify_rs256(&key.n, &key.e, &signed, &signature)).await;
            if valid.ok().and_then(|v| v.as_bool()) == Some(true) {
                Ok(())
            } else {
                Err(Refusal::Signature)
            }
        }
        KeyStep::Refuse(refusal) => Err(refusal),
        KeyStep::Fetch => Err(Refusal::KeysUnavailable),
    }
}

#[wasm_bindgen(inline_js = r#"
export async function fetchText(url, ms) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(ms), headers: { accept: "application/json" } });
    if (!res.ok) return undefined;
    const text = await res.text();
    return text.length <= 65536 ? text : undefined;
  } catch {
    return undefined;
  }
}
export async function verifyRs256(n, e, signed, signature) {
  try {
    const alg = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    const key = await crypto.subtle.importKey("jwk", { kty: "RSA", n, e, alg: "RS256", ext: true }, alg, false, ["verify"]);
    return await crypto.subtle.verify(alg, key, signature, signed);
  } catch {
    return false;
  }
}
"#)]
extern "C" {
    /// `GET url` within `ms`: the body's text (at most 64 KiB) of a 2xx
    /// answer, else `undefined`.
    #[wasm_bindgen(js_name = fetchText)]
    fn fetch_text(url: &str, ms: u32) -> js_sys::Promise;
    /// Whether `signature` is the RSASSA-PKCS1-v1_5 SHA-256 signature of
    /// `signed` under the RSA key (`n`, `e`, base64url); `false` for a key
    /// WebCrypto refuses.
    #[wasm_bindgen(js_name = verifyRs256)]
    fn verify_rs256(n: &str, e: &str, signed: &js_sys::Uint8Array, signature: &js_sys::Uint8Array) -> js_sys::Promise;
}
