//! The decision pipeline: a request's facts → the plan (rules, keys, route),
//! the counters' outcomes → the verdict, and every effect of it (logs,
//! metrics, memo, settlements). An admin request is only recognized here
//! (`plan::Route::Admin`); the admin plane (`crate::admin`) serves it.

pub mod applied;
pub(crate) mod credentials;
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
