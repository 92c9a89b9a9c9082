//! tollgate: an exact, bypass-resistant rate limiter for Cloudflare Workers.
//!
//! The crate is a pure core, built and tested natively, and thin Worker /
//! Durable Object glue compiled only for `wasm32`, in folders by layer
//! (lower layers never use higher ones):
//!
//! - [`request`]: reading a request (canonical path and query, parameter
//!   bodies, client keys, exemptions, trusted devices, spellings);
//! - [`count`]: the limiter object's pure step, its algorithms, the wire
//!   protocol and the isolate's caches;
//! - [`config`]: the `TOLLGATE` var, validated and compiled;
//! - [`pipeline`]: the decision machine, sans-IO: a request's facts in,
//!   every effect of its decision out;
//! - `glue` (wasm32): the drivers (the Worker, [`embed`], the RPC entry
//!   points) and the Durable Object;
//! - [`tools`]: the `tollgate` CLI, `explain`, route coverage, the lease
//!   simulator.
//!
//! `docs/ARCHITECTURE.md` draws the layers and holds the module catalogue.

// Folders by layer (docs/ARCHITECTURE.md draws them): request reading,
// config, counting, the decision pipeline, the wasm32 glue and the tools.
pub mod config;
pub mod count;
pub mod pipeline;
pub mod request;
pub mod tools;
#[cfg(target_arch = "wasm32")]
mod glue;
#[cfg(test)]
mod testing;

/// The embedded check: an app Worker that runs tollgate in-process.
#[cfg(target_arch = "wasm32")]
pub use glue::embed;
/// The limiter Durable Object: an app that embeds tollgate binds it as
/// `LIMITER` (`class_name = "Limiter"`); its Worker exports the class.
#[cfg(target_arch = "wasm32")]
pub use glue::limiter::Limiter;
/// The controls registry's Durable Object: an app binds it as
/// `TOLLGATE_REGISTRY` (`class_name = "Registry"`), one class per role
/// (`tollgate check` names what a config lacks).
#[cfg(target_arch = "wasm32")]
pub use glue::registry::Registry;
