//! The wasm32 glue: the Worker entry, the embedded and RPC checks, the
//! Durable Objects (one class per role: the limiter, the controls registry;
//! the local metrics sink is src/entry.mjs's) and the calls to them. Reads, calls and applies;
//! decides nothing.

#[cfg(feature = "admin")]
pub(crate) mod access;
pub(crate) mod answer;
pub(crate) mod drive;
pub(crate) mod edge;
pub mod embed;
pub(crate) mod isolate;
pub(crate) mod limiter;
pub(crate) mod objects;
pub(crate) mod origin;
pub(crate) mod registry;
pub(crate) mod traffic;
#[cfg(feature = "standalone")]
pub(crate) mod rpc;
