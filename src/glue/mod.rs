//! The wasm32 glue: the Worker entry, the embedded and RPC checks, the
//! limiter Durable Object and the calls to it. Reads, calls and applies;
//! decides nothing.

pub(crate) mod drive;
pub(crate) mod edge;
pub mod embed;
pub(crate) mod isolate;
pub(crate) mod limiter;
pub(crate) mod objects;
pub(crate) mod origin;
pub(crate) mod traffic;
#[cfg(feature = "standalone")]
pub(crate) mod rpc;
