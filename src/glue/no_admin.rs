//! The admin Worker's glue in every other build (the zone's Worker, the
//! embedded check, the Node CLI): no admin request is served, so none of
//! the admin plane is in their Wasm. The zone's entry answers the admin
//! prefix 404 before planning; a request planned as admin anyway (the Node
//! CLI's build) gets the same 404.

use crate::config::Config;
use crate::glue::isolate::respond;
use crate::glue::origin::BudgetHold;
use crate::pipeline::machine::Machine;
use worker::{web_sys, Env};

/// Answers an admin request as not this Worker's (404).
pub(crate) async fn serve(
    _req: &web_sys::Request,
    _env: &Env,
    _config: &'static Config,
    _machine: &mut Machine<'static, '_>,
    _holds: &mut Vec<BudgetHold>,
) -> worker::Result<Option<web_sys::Response>> {
    respond(&crate::pipeline::plane::not_here()).map(Some)
}
