//! tollgate: an exact, bypass-resistant rate limiter for Cloudflare Workers.
//!
//! The crate is split into a pure core, built and tested natively, and thin
//! Worker / Durable Object glue compiled only for `wasm32`:
//!
//! | module      | concept                                                        |
//! |-------------|----------------------------------------------------------------|
//! | [`canon`]   | raw URL → canonical path and query, used only for matching     |
//! | [`duration`]| `"10s"`, `"1m"`, `"1h"`, `"1d"` window lengths                 |
//! | [`config`]  | the `TOLLGATE` var → validated, compiled [`config::Config`]    |
//! | [`policy`]  | what a rule does: over limit, counter down, key missing        |
//! | [`rules`]   | which rules a canonical request matches, and why               |
//! | [`plan`]    | front half of the pipeline: request parts → matched rules, keys, route |
//! | [`verdict`] | back half: the counters' outcomes → forward or answer, log events |
//! | [`key`]     | a rule's client key from request parts (IP /64, header, ...)   |
//! | [`window`]  | the sliding-log decision: (log, now, limits) → outcome, log    |
//! | [`gcra`]    | the O(1)-state alternative for large limits, and its accuracy  |
//! | [`counter`] | one limiter-object step: (stored row, now, call) → reply, row  |
//! | [`protocol`]| the small, versioned call format between Worker and object     |
//! | [`blocked`] | the isolate's capped blocked-until cache                       |
//! | [`headers`] | 429 problem+json body and IETF `RateLimit` header values       |
//! | [`admin`]   | the admin API: routing, bearer token, keys from raw values     |
//! | [`explain`] | `tollgate explain`: how one URL is seen, rule by rule          |
//! | [`coverage`]| `tollgate check`: do the wrangler.toml routes reach the rules? |
//!
//! The glue (`edge`, the Worker entry, and `limiter`, the Durable Object)
//! only reads the clock, talks to the platform and calls into the core.

pub mod admin;
pub mod blocked;
pub mod canon;
pub mod config;
pub mod counter;
pub mod coverage;
pub mod duration;
pub mod explain;
pub mod gcra;
pub mod headers;
pub mod key;
pub mod policy;
pub mod protocol;
pub mod plan;
pub mod rules;
pub mod verdict;
pub mod window;

#[cfg(target_arch = "wasm32")]
mod edge;
#[cfg(target_arch = "wasm32")]
mod limiter;
#[cfg(target_arch = "wasm32")]
mod origin;
