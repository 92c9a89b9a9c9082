//! The admin plane, sans-IO: the admin API, the operator console, and the
//! operator's sign-in (the admin token, console sessions, Cloudflare
//! Access). A layer above the request machine (`pipeline`), which knows of
//! an admin request only that it is one (`plan::Route::Admin`): this layer
//! plans it ([`crate::admin::plan`]) and runs its calls
//! ([`crate::admin::flow`]). Its one driver is
//! `glue::admin`, in the admin Worker's build (the `admin` feature); the
//! native build and the Node CLI compile it too (tests, `explain`, `hash`).

pub(crate) mod access;
pub(crate) mod api;
pub(crate) mod console;
pub(crate) mod flow;
pub(crate) mod plan;
