//! The decision pipeline: a request's facts → the plan (rules, keys, route),
//! the counters' outcomes → the verdict, and every effect of it (logs,
//! metrics, memo, settlements, admin answers).

pub mod admin;
pub mod admin_flow;
pub mod applied;
pub mod console;
pub mod episodes;
pub mod memo;
pub mod metrics;
pub mod facts;
pub mod isolate;
pub mod machine;
pub mod plan;
pub mod upload;
pub mod upgrade;
pub mod ticket;
pub mod verdict;
pub mod who;
