//! Counting: the limiter object's pure step (the stored row, the time and a
//! call → the reply, the row, the alarm), its algorithms (sliding log, GCRA,
//! reservations, leases), the wire protocol, and the isolate-side caches.

// Lowest first: each module uses only those above it (and `request::spelling`).
pub(crate) mod zones;
pub(crate) mod calendar;
pub(crate) mod limit;
pub(crate) mod tally;
pub(crate) mod algorithm;
pub(crate) mod coalesce;
pub mod window;
pub(crate) mod gcra;
pub(crate) mod reservation;
pub(crate) mod row;
pub(crate) mod slots;
pub mod protocol;
pub(crate) mod older;
pub(crate) mod lease;
pub(crate) mod switch;
pub(crate) mod counter;
pub(crate) mod controls;
pub(crate) mod penalty;
pub(crate) mod object;
pub(crate) mod store;
pub(crate) mod registry;
pub(crate) mod classes;
pub(crate) mod blocked;
pub(crate) mod hold;
pub(crate) mod duration;
