//! The Durable Object classes tollgate ships, one per role: the
//! binding each is reached through, its class name, and what it is for.
//! Declared once here, for the glue (which binding to call) and for
//! `tollgate check` (which bindings and migrations a Wrangler config needs).
//!
//! - [`LIMITER`]: one object per (rule, key), the count and that key's
//!   controls. A key's controls live with its count: the object applies
//!   them in the same synchronous step as the count (no second call on the
//!   request path), and its TTL alarm keeps them until they end.
//! - [`REGISTRY`]: one object, [`crate::count::registry::REGISTRY_OBJECT`],
//!   the index of controls and the console's last sign-out. The class has no
//!   alarm at all: nothing can delete its rows but their own end.
//! - [`METRICS_SINK`]: one object, the local sink of metric points
//!   (`TOLLGATE_LOCAL_METRICS`, local development only), written in
//!   JavaScript in `src/entry.mjs` (no Wasm in the upload for it): only the
//!   standalone Worker exports it, so a config may leave it out.

/// One Durable Object class and its binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObjectClass {
    /// The binding's name (`[[durable_objects.bindings]] name`).
    pub(crate) binding: &'static str,
    /// The exported class (`class_name`, and its `new_sqlite_classes` entry).
    pub(crate) class: &'static str,
    /// What it is for, as `tollgate check` names it.
    pub(crate) role: &'static str,
    /// Whether a config without the binding is an error (else it may be
    /// left out, but when bound, it must be to this class, migrated).
    pub(crate) required: bool,
}

/// The limiter objects: the count and the key's controls.
pub(crate) const LIMITER: ObjectClass = ObjectClass { binding: "LIMITER", class: "Limiter", role: "the counters", required: true };

/// The controls registry (and the console's sign-out).
pub(crate) const REGISTRY: ObjectClass =
    ObjectClass { binding: "TOLLGATE_REGISTRY", class: "Registry", role: "the controls registry and the console's sign-out", required: true };

/// The local metrics sink (`TOLLGATE_LOCAL_METRICS`).
pub(crate) const METRICS_SINK: ObjectClass =
    ObjectClass { binding: "TOLLGATE_METRICS_SINK", class: "MetricsSink", role: "the local metrics sink of scripts/dev", required: false };

/// Every class, in the order a config declares them.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) const ALL: [ObjectClass; 3] = [LIMITER, REGISTRY, METRICS_SINK];

/// The migration tag that added [`REGISTRY`] and [`METRICS_SINK`] (after
/// `v1`, which added [`LIMITER`]).
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) const SPLIT_TAG: &str = "v2";
