//! HMAC-SHA256 (RFC 2104) from RustCrypto's `hmac` over the `sha2` the
//! Worker already carries, and `subtle`'s constant-time comparison
//! (the hand-written compare before had no optimization barrier, so the
//! compiler was free to stop at the first difference). Checked against the
//! RFC 4231 test vectors.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// HMAC-SHA256 of `message` under `key` (RFC 2104 §2): a key longer than
/// the block (64 bytes) is hashed first, a shorter one padded with zeros.
pub(crate) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` has no error to
    // give for it (its `InvalidLength` is for fixed-size-key MACs).
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac.chain_update(message).finalize().into_bytes().into(),
        Err(_) => [0; 32],
    }
}

/// `bytes` as lowercase hex, two digits a byte: how digests and MACs are
/// written into keys, cookies, tickets and logs.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(2 * bytes.len());
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
    // Hex digits: always UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Whether `a` and `b` are the same bytes, in a time that depends on their
/// lengths only (never on where they first differ): for a MAC or a digest
/// of a secret against the one presented.
///
/// `subtle`'s `ct_eq` hides the bytes from the optimizer (its `black_box`
/// barrier), so the comparison cannot be turned back into an early exit.
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    #[test]
    fn same_bytes_compares_whole_values() {
        assert!(same_bytes(b"abc", b"abc"));
        assert!(same_bytes(b"", b""));
        assert!(!same_bytes(b"abc", b"abd"));
        assert!(!same_bytes(b"abc", b"ab"), "a prefix is not the value");
        assert_eq!(hex(&[0x00, 0x0f, 0xa5]), "000fa5");
    }

    /// Written without `format!`: the same text for every byte.
    #[test]
    fn hex_writes_every_byte_as_format_does() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(&all), all.iter().map(|b| format!("{b:02x}")).collect::<String>());
    }

    /// RFC 4231 §4.2-4.8, every case but 5 (a truncated output).
    #[test]
    fn rfc_4231_test_vectors() {
        let long_key = [0xaa; 131];
        let cases: [(&[u8], &[u8], &str); 6] = [
            (&[0x0b; 20], b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (b"Jefe", b"what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            (&[0xaa; 20], &[0xdd; 50], "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
            (
                &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25],
                &[0xcd; 50],
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            ),
            (
                &long_key,
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
            (
                &long_key,
                b"This is a test using a larger than block-size key and a larger than block-size data. \
The key needs to be hashed before being used by the HMAC algorithm.",
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
            ),
        ];
        for (i, (key, message, expected)) in cases.iter().enumerate() {
            assert_eq!(hex(&hmac_sha256(key, message)), *expected, "RFC 4231 case {}", i + 1);
        }
    }

    #[test]
    fn a_key_of_exactly_one_block_is_used_as_is() {
        // 64 bytes: padded with nothing, not hashed (hashing it would give
        // another MAC, as the 65-byte key shows).
        let block = [0x42; 64];
        let longer = [0x42; 65];
        assert_ne!(hmac_sha256(&block, b"m"), hmac_sha256(&Sha256::digest(block), b"m"));
        assert_eq!(hmac_sha256(&longer, b"m"), hmac_sha256(&Sha256::digest(longer), b"m"));
    }
}
