//! The decision pipeline: a request's facts → the plan (rules, keys, route),
//! the counters' outcomes → the verdict, and every effect of it (logs,
//! metrics, memo, settlements, admin answers).

pub(crate) mod access;
pub(crate) mod admin;
#[cfg(any(feature = "admin", feature = "cli", not(target_arch = "wasm32")))]
pub(crate) mod admin_flow;
pub mod applied;
pub(crate) mod console;
pub(crate) mod episodes;
pub(crate) mod memo;
pub(crate) mod metrics;
pub(crate) mod facts;
pub(crate) mod isolate;
pub(crate) mod machine;
pub mod plan;
pub(crate) mod plane;
pub(crate) mod upload;
pub(crate) mod upgrade;
pub(crate) mod usage;
pub(crate) mod ticket;
pub(crate) mod verdict;
pub(crate) mod who;
