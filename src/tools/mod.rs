//! The tools: the `tollgate` CLI (check, explain, hash, schema, diff,
//! migrate), the
//! wrangler file reader, route coverage and the lease simulator.

// The CLI's: none of it is in the Worker's build.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) mod coverage;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod explain;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod wrangler;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) mod diff;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod cli;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) mod migrate;
#[cfg(not(target_arch = "wasm32"))]
pub mod sim;
