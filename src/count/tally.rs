//! What a limiter decided for one request, whichever algorithm decided
//! it: the [`Tally`] an algorithm returns, the object's step passes on and
//! the protocol's reply carries.

use crate::count::limit::WindowState;
use serde::{Deserialize, Serialize};

/// What a limiter decided for one request, whichever algorithm decided it;
/// a [`crate::count::protocol::Reply`] carries it to the Worker, with the windows
/// in their wire form (`W` = [`crate::count::protocol::WireWindow`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally<W = WindowState> {
    pub allowed: bool,
    /// Exact milliseconds (rounded up) until a request of the same cost
    /// would be allowed; 0 when allowed.
    pub(crate) retry_after_ms: u64,
    /// One entry per limit of the call, in its order.
    pub(crate) windows: Vec<W>,
    /// When blocked, the index in `windows` of the window that sets
    /// `retry_after_ms` (the first of the longest waits).
    #[serde(rename = "binding_window", default)]
    pub(crate) binding: Option<usize>,
    /// Blocked only by in-flight requests: the committed hits alone would
    /// allow, other requests' live reservations do not. Such a block lifts
    /// as soon as one of them is released, so it is never cached, and its
    /// `retry_after_ms` is at most the time until a reservation expires.
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) in_flight: bool,
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

impl<W> Tally<W> {
    /// Allowed, nothing to wait for: what a record or a status reports.
    pub(crate) fn allowing(windows: Vec<W>) -> Tally<W> {
        Tally { allowed: true, retry_after_ms: 0, windows, binding: None, in_flight: false }
    }

    /// The same tally with each window converted (to its wire form, say).
    pub(crate) fn map_windows<V>(self, convert: impl FnMut(W) -> V) -> Tally<V> {
        Tally {
            allowed: self.allowed,
            retry_after_ms: self.retry_after_ms,
            windows: self.windows.into_iter().map(convert).collect(),
            binding: self.binding,
            in_flight: self.in_flight,
        }
    }
}

