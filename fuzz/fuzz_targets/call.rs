//! Arbitrary bytes as a Worker → object call, in both forms: the JSON body
//! and the compact URL; and as an object's compact reply line. Nothing may
//! panic; a call that decodes re-encodes, in either form, to one that
//! decodes to the same call; a reply line that reads (a lease's `g=`
//! included) re-encodes to one that reads the same, and so does an RPC
//! answer (a reply line, or `!{status} {body}`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate::internals::protocol::{
    decode_call, decode_call_url, decode_reply_line, decode_rpc_answer, encode_call, encode_call_url, encode_reply_line,
    encode_rpc_answer, CallFailure,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        for call in [decode_call(text), decode_call_url(text)].into_iter().flatten() {
            assert_eq!(decode_call(&encode_call(&call)), Ok(call.clone()));
            assert_eq!(decode_call_url(&encode_call_url(&call)), Ok(call));
        }
        if let Ok(reply) = decode_reply_line(200, text) {
            assert_eq!(decode_reply_line(200, &encode_reply_line(&reply)), Ok(reply));
        }
        match decode_rpc_answer(text) {
            Ok(reply) => assert_eq!(decode_rpc_answer(&encode_rpc_answer(200, &encode_reply_line(&reply))), Ok(reply)),
            Err(CallFailure::Refused { status, body }) => {
                assert_eq!(decode_rpc_answer(&encode_rpc_answer(status, &body)), Err(CallFailure::Refused { status, body }))
            }
            Err(_) => {}
        }
    }
});
