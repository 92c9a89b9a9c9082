//! Arbitrary bytes as the `TOLLGATE` config var. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = tollgate::Config::from_json_str(text);
    }
});
