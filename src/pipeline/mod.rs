//! The decision pipeline: a request's facts → the plan (rules, keys, route),
//! the counters' outcomes → the verdict, and every effect of it (logs,
//! metrics, memo, settlements, admin answers).

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod admin;
pub mod applied;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod episodes;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) mod memo;
pub mod metrics;
pub mod facts;
pub mod machine;
pub mod plan;
pub mod upload;
pub mod ticket;
pub mod verdict;
