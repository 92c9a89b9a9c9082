//! The tools: the `tollgate` CLI (check, explain, hash, schema, diff,
//! migrate), the
//! wrangler file reader, route coverage and the lease simulator.

pub mod coverage;
pub mod explain;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod wrangler;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod diff;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod cli;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod migrate;
#[cfg(not(target_arch = "wasm32"))]
pub mod sim;
