//! An app Worker that limits its own routes with tollgate embedded: every
//! request goes through `tollgate::embed::check`, and the app's own
//! `TOLLGATE` rules limit `/api/*` and `/login` (failures-only, settled with
//! the app's status). tollgate's `Limiter` Durable Object is bound as
//! `LIMITER`; linking the crate exports the class from this Worker.

use std::cell::Cell;
use tollgate::embed::{self, Decision};
use worker::{event, Context, Env, Headers, Request, Response, Result};

thread_local! {
    /// How many /api/ requests this isolate served (for the test).
    static SERVED: Cell<u32> = const { Cell::new(0) };
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let path = req.path();
    if path == "/stats" {
        return Response::from_json(&serde_json::json!({ "served": SERVED.with(Cell::get) }));
    }
    // Every request goes through check, and the rules pick what to limit:
    // the app's own routing (case-sensitive, `/api/` here) would miss
    // `/API/items` or `/api//items`, which tollgate canonicalizes.
    let decision = embed::check(&req, &env).await?;
    if let Some(answer) = decision.response {
        return Ok(Response::from(answer));
    }
    let response = if !(path.starts_with("/api/") || path == "/login") {
        Response::ok("home (not limited)")?
    } else if path == "/login" {
        let body: serde_json::Value = req.json().await.unwrap_or_default();
        if body.get("password").and_then(|p| p.as_str()) == Some("right") {
            Response::ok("welcome")?
        } else {
            Response::error("wrong password", 401)?
        }
    } else {
        SERVED.with(|s| s.set(s.get() + 1));
        Response::from_json(&serde_json::json!({ "path": path }))?
    };
    finish(&env, decision, response).await
}

/// Settles the decision's failures-only rules with the app's status and
/// adds the RateLimit fields (and any trusted-device cookie).
async fn finish(env: &Env, decision: Decision, response: Response) -> Result<Response> {
    let headers = response.headers().clone();
    let header = |name: &str| headers.get(name).ok().flatten();
    let cookies = embed::settle(env, &decision.ticket, Some(response.status_code()), &header).await;
    let out = Headers::new();
    for (name, value) in response.headers().entries() {
        out.append(&name, &value)?;
    }
    for (name, value) in decision.headers.iter().chain(&cookies) {
        out.append(name, value)?;
    }
    Ok(response.with_headers(out))
}
