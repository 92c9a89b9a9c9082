//! Counting: the limiter object's pure step (the stored row, the time and a
//! call → the reply, the row, the alarm), its algorithms (sliding log, GCRA,
//! reservations, leases), the wire protocol, and the isolate-side caches.

// Lowest first: each module uses only those above it (and `request::spelling`).
pub mod limit;
pub mod tally;
pub mod algorithm;
pub mod window;
pub mod gcra;
pub mod reservation;
pub mod row;
pub mod slots;
pub mod protocol;
pub mod older;
pub mod lease;
pub mod switch;
pub mod counter;
pub mod controls;
pub mod penalty;
pub mod object;
pub mod store;
pub mod registry;
pub(crate) mod classes;
pub mod blocked;
pub mod hold;
pub(crate) mod duration;
