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
