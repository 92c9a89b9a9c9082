//! Arbitrary bytes as a Worker → object call body. Nothing may panic, and a
//! call that decodes re-encodes to a body that decodes to the same call.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate::protocol::{decode_call, encode_call};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(call) = decode_call(text) {
            assert_eq!(decode_call(&encode_call(&call)), Ok(call));
        }
    }
});
