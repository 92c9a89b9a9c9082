//! tollgate: an exact, bypass-resistant rate limiter for Cloudflare Workers.
//!
//! The crate is a pure core, built and tested natively, and thin Worker /
//! Durable Object glue compiled only for `wasm32`, in folders by layer
//! (lower layers never use higher ones):
//!
//! - `request`: reading a request (canonical path and query, parameter
//!   bodies, client keys, exemptions, trusted devices, spellings);
//! - `count`: the limiter object's pure step, its algorithms, the wire
//!   protocol and the isolate's caches;
//! - `config`: the `TOLLGATE` var, validated and compiled;
//! - `pipeline`: the decision machine, sans-IO: a request's facts in,
//!   every effect of its decision out;
//! - `glue` (wasm32): the drivers (the Worker, `embed`, the RPC entry
//!   points) and the Durable Object;
//! - `tools`: the `tollgate` CLI, `explain`, route coverage, the lease
//!   simulator.
//!
//! The modules are private. The API is small: `embed` (`check`, `settle`:
//! an app Worker's own check, wasm32) with the `Limiter` object it binds,
//! the config reader [`Config`] (`from_json`, `from_json_str`,
//! `warnings`), and the CLI's entry [`cli`] (`run` with a `Host`).
//!
//! `docs/ARCHITECTURE.md` draws the layers, walks a request and gives the
//! decisions' reasons; each module's contract is its own `//!` doc.

// Folders by layer (docs/ARCHITECTURE.md draws them): request reading,
// config, counting, the decision pipeline, the wasm32 glue and the tools.
// None is public: the API is the re-exports below (docs/ARCHITECTURE.md,
// "Public surface"); scripts/narrow-pub.py keeps the rest `pub(crate)`.
// The core's dead code is found in the build that has all its drivers, the
// wasm32 admin Worker (`admin`, which has the zone's code too): natively,
// in the zone's Worker and in the embedded or Node CLI builds, code only
// the glue calls (or only the admin API uses) would read as dead. The tools are
// checked natively.
#[cfg_attr(not(all(target_arch = "wasm32", feature = "admin")), allow(dead_code))]
mod config;
#[cfg_attr(not(all(target_arch = "wasm32", feature = "admin")), allow(dead_code))]
mod count;
#[cfg_attr(not(all(target_arch = "wasm32", feature = "admin")), allow(dead_code))]
mod pipeline;
#[cfg_attr(not(all(target_arch = "wasm32", feature = "admin")), allow(dead_code))]
mod request;
/// The admin plane: in the admin Worker, natively and in the Node CLI.
#[cfg(any(feature = "admin", feature = "cli", not(target_arch = "wasm32")))]
#[cfg_attr(not(all(target_arch = "wasm32", feature = "admin")), allow(dead_code))]
mod admin;
mod tools;
#[cfg(target_arch = "wasm32")]
mod glue;
#[cfg(test)]
mod testing;

/// The config reader: the `TOLLGATE` var, validated and compiled.
pub use config::{Config, ConfigError, ConfigWarning};
/// The operator CLI's entry: `tollgate check`, `explain`, `hash`, `schema`,
/// `diff` as data (native, or wasm32 with the `cli` feature).
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub use tools::cli;
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

/// Not API: what this repository's integration tests, benches, fuzz
/// targets and examples reach inside the crate. No semver promise; hidden
/// from the docs. Each name is also in `scripts/narrow-pub.py`'s `KEEP`.
#[doc(hidden)]
pub mod internals {
    pub use crate::config::rules;
    pub use crate::config::DEFAULT_SUFFIXES;
    pub use crate::count::{protocol, window};
    pub use crate::pipeline::{applied, plan};
    pub use crate::request::{body, canon};
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::tools::sim;
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    pub use crate::tools::{explain, wrangler};
}
