//! tollgate: an exact, bypass-resistant rate limiter for Cloudflare Workers.
//!
//! The crate is split into a pure core, built and tested natively, and thin
//! Worker / Durable Object glue compiled only for `wasm32`:
//!
//! | module      | concept                                                        |
//! |-------------|----------------------------------------------------------------|
//! | [`body`]    | what a body (form, multipart, JSON) holds as parameters        |
//! | `json`      | a JSON body with every member kept (duplicates, case twins)    |
//! | [`canon`]   | raw URL → canonical path and query, used only for matching     |
//! | [`duration`]| `"10s"`, `"1m"`, `"1h"`, `"1d"` window lengths                 |
//! | [`config`]  | the `TOLLGATE` var → validated, compiled [`config::Config`]    |
//! | [`metrics`] | Analytics Engine data points: one per decision, never the key |
//! | [`overrides`] | static per-key limits: a key value's own limits (tiers)  |
//! | [`policy`]  | what a rule does: over limit, counter down, key missing        |
//! | [`response`] | a rule's own block response (status, body template) and content negotiation |
//! | [`rules`]   | which rules a canonical request matches, and why               |
//! | [`plan`]    | front half of the pipeline: request parts → matched rules, keys, route |
//! | [`verdict`] | back half: the counters' outcomes → forward or answer, log events |
//! | [`exempt`]  | requests a rule neither counts nor limits: CIDR, ASN, bots, secret header |
//! | [`key`]     | a rule's client key from request parts (IP /64, header, ...)   |
//! | `hmac`      | HMAC-SHA256 (RFC 2104) over `sha2`: keyed log hashes           |
//! | `device`    | trusted-device cookies: lockout-resistant account limits       |
//! | [`spelling`] | an identity exactly as the request spelled it: what relief is bound to |
//! | [`window`]  | the sliding-log decision: (log, now, limits) → outcome, log    |
//! | [`gcra`]    | the O(1)-state alternative for large limits, and its accuracy  |
//! | [`counter`] | one limiter-object step: (stored row, now, call) → reply, row  |
//! | `object`    | one call to a limiter object: (row, controls, now, call) → answer and effects |
//! | [`reservation`] | two-phase counting: requests in flight hold their slots |
//! | [`upload`]  | a body is received before its slot is reserved (slow uploads) |
//! | [`hold`]    | how long slots in flight are held: an honest `Retry-After` |
//! | [`lease`]   | leased budgets: an isolate spends tokens its key's object debited |
//! | [`protocol`]| the small, versioned call format between Worker and object     |
//! | [`blocked`] | the isolate's capped blocked-until cache                       |
//! | `memo`      | the isolate's plan memo: a blocked client's repeats skip the plan |
//! | [`episodes`]| one log line per block episode of a (rule, key), with counts   |
//! | [`headers`] | 429 problem+json body and IETF `RateLimit` header values       |
//! | [`admin`]   | the admin API: routing, bearer token, keys from raw values     |
//! | `controls`  | runtime overrides and bans, kept in the key's own object       |
//! | [`explain`] | `tollgate explain`: the pipeline on one request, as a report   |
//! | [`coverage`]| `tollgate check`: do the wrangler.toml routes reach the rules? |
//! | [`ticket`]  | what an embedded check hands the app to settle failures-only rules |
//! | [`upstream`]| where allowed requests go: the origin or a service binding |
//! | [`wrangler`]| the CLI reads wrangler.toml / .json / .jsonc and its environments |
//! | [`cli`]     | the `tollgate` CLI as data: args in; exit code, stdout, stderr out |
//! | [`sim`]     | a deterministic simulator of leased budgets (native only)     |
//!
//! The glue (`edge`, the Worker entry; `origin`, its side facing the
//! origin; `objects`, its calls to the limiter objects; and `limiter`, the
//! Durable Object) only reads the clock, talks to
//! the platform and calls into the core.

// Internals are crate-private; the public modules are what the CLI, benches,
// fuzz targets and integration tests use. Modules marked `allow(dead_code)`
// natively serve the wasm32 glue (the Worker and the object); natively only
// their unit tests use them.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod admin;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod blocked;
pub mod body;
pub mod canon;
pub mod config;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod controls;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod counter;
pub mod coverage;
pub(crate) mod duration;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod episodes;
pub mod exempt;
pub mod explain;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod gcra;
pub(crate) mod headers;
pub(crate) mod hmac;
pub(crate) mod device;
pub mod spelling;
pub(crate) mod json;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod memo;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod object;
pub(crate) mod key;
pub mod lease;
pub mod metrics;
pub mod overrides;
pub mod policy;
pub mod protocol;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod reservation;
pub mod plan;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod hold;
pub mod upload;
pub mod response;
pub mod rules;
pub mod ticket;
pub mod upstream;
pub mod verdict;
pub mod window;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod wrangler;
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
pub mod sim;

#[cfg(target_arch = "wasm32")]
mod edge;
#[cfg(target_arch = "wasm32")]
pub mod embed;
#[cfg(target_arch = "wasm32")]
mod limiter;
#[cfg(all(target_arch = "wasm32", feature = "standalone"))]
mod rpc;
/// The limiter Durable Object: an app that embeds tollgate binds it as
/// `LIMITER` (`class_name = "Limiter"`); its Worker exports the class.
#[cfg(target_arch = "wasm32")]
pub use limiter::Limiter;
#[cfg(target_arch = "wasm32")]
mod objects;
#[cfg(target_arch = "wasm32")]
mod origin;
