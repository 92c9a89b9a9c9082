//! The wasm32 glue: the Worker entry, the embedded and RPC checks, the
//! Durable Objects (one class per role: the limiter, the controls registry;
//! the local metrics sink is src/entry.mjs's) and the calls to them. Reads, calls and applies;
//! decides nothing.

/// The admin Worker's glue; every other build has its 404 in its place.
#[cfg(feature = "admin")]
pub(crate) mod admin;
#[cfg(not(feature = "admin"))]
#[path = "no_admin.rs"]
pub(crate) mod admin;
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
