//! Reading a request: pure functions from the raw URL, headers, cookies and
//! body to what rules match on and key by (canonical path and query,
//! parameters, client keys, exemptions, trusted devices, spellings).

pub mod body;
pub mod canon;
pub(crate) mod exempt;
pub(crate) mod hmac;
pub(crate) mod device;
pub(crate) mod spelling;
pub(crate) mod json;
pub(crate) mod key;
