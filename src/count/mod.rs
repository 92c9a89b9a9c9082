//! Counting: the limiter object's pure step (the stored row, the time and a
//! call → the reply, the row, the alarm), its algorithms (sliding log, GCRA,
//! reservations, leases), the wire protocol, and the isolate-side caches.

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod algorithm;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod blocked;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod controls;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod counter;
pub(crate) mod duration;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod gcra;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod object;
pub mod lease;
pub mod limit;
pub mod protocol;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod reservation;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod hold;
pub mod tally;
pub mod window;
