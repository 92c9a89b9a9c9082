//! The tools: the `tollgate` CLI (check, explain, hash, schema, diff), the
//! wrangler file reader, route coverage and the lease simulator.

pub(crate) mod coverage;
pub mod explain;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod wrangler;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) mod diff;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
pub mod sim;
