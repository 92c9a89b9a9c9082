//! The Rust floor: the least a workers-rs Worker does for a request, which
//! is to hand the very request object it was given to `fetch` and return the
//! origin's response object unchanged (the same raw `web_sys` forward as
//! tollgate's `origin::forward` with no `UPSTREAM`). It takes the raw
//! `web_sys::Request`, as tollgate's entry does (a `worker::Request` would
//! read `request.cf` up front).
//!
//! The load generator marks the requests an exact limiter counts or
//! refuses (`x-bench-floor`; the other systems ignore the header), and the
//! floor then pays the least such a limiter must:
//! - `count` (an allowed request): one RPC call to the key's counter object
//!   (`COUNTER`, bench/workers/floor-counter.mjs: one SQLite row written in
//!   place, one alarm per key), keyed by `CF-Connecting-IP`, then the
//!   forward;
//! - `429` (a refused one): the answer tollgate gives a block, status 429
//!   with `content-type`, `retry-after`, `ratelimit-policy` and `ratelimit`
//!   and a problem+json body of the same size, built in one
//!   `new Response(text, init)`, with nothing asked of any object.
//!
//! The counter object comes in two forms, bound as `COUNTER` by the entry
//! that runs the floor: in JavaScript (bench/workers/floor.mjs, the floor
//! scripts/bench measures) or in Rust ([`FloorRustCounter`],
//! bench/workers/floor-rs.mjs): the same rows and alarms, so the difference
//! between the two is what a workers-rs object costs per call.

use std::cell::{Cell, RefCell};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsCast, JsValue};
use worker::wasm_bindgen_futures::{self, JsFuture};
use worker::{durable_object, event, js_sys, web_sys, Context, DurableObject, Env, Request, Response, SqlStorageValue, State};

const BODY: &str = r#"{"detail":"Rate limit `heavy-example` exceeded; retry in 60 s.","retry_after":60,"rule":"heavy-example","status":429,"title":"Too Many Requests","type":"about:blank"}"#;

#[event(fetch)]
pub async fn fetch(req: web_sys::Request, env: Env, _ctx: Context) -> worker::Result<web_sys::Response> {
    match req.headers().get("x-bench-floor")?.as_deref() {
        Some("429") => return refuse(),
        Some("count") => count(&req, &env).await?,
        _ => {}
    }
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response = JsFuture::from(global.fetch_with_request(&req)).await?;
    Ok(response.unchecked_into())
}

fn refuse() -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new()?;
    headers.append("content-type", "application/problem+json")?;
    headers.append("retry-after", "60")?;
    headers.append("ratelimit-policy", "\"heavy-example\";q=10;w=60")?;
    headers.append("ratelimit", "\"heavy-example\";r=0;t=60")?;
    let init = web_sys::ResponseInit::new();
    init.set_status(429);
    init.set_headers(&headers);
    Ok(web_sys::Response::new_with_opt_str_and_init(Some(BODY), &init)?)
}

/// `COUNTER.get(idFromName(ip)).hit()`, awaited.
async fn count(req: &web_sys::Request, env: &Env) -> worker::Result<()> {
    let ip = req.headers().get("cf-connecting-ip")?.unwrap_or_default();
    let stub: JsValue = env.durable_object("COUNTER")?.id_from_name(&ip)?.get_stub()?.into_rpc();
    let hit = js_sys::Reflect::get(&stub, &JsValue::from_str("hit"))?;
    let hit: &js_sys::Function = hit.unchecked_ref();
    let pending: JsValue = js_sys::Reflect::apply(hit, &stub, &js_sys::Array::new())?;
    JsFuture::from(js_sys::Promise::<JsValue>::resolve(&pending)).await?;
    Ok(())
}

/// The Rust floor's counter in Rust: the same work as
/// bench/workers/floor-counter.mjs (one SQLite row written in place per
/// call, the table created once per instance, one alarm per key that
/// deletes it all; nothing decided), through workers-rs's own storage API
/// (`storage().sql()`, `exec` with `SqlStorageValue`s), as the least a
/// workers-rs limiter object pays per call. Its RPC method `hit` is
/// synchronous (no promise), and the alarm is set without waiting, as the
/// JS counter does. bench/workers/floor-rs.mjs declares it
/// `extends DurableObject` for RPC, as tollgate's entry does.
#[durable_object]
pub struct FloorRustCounter {
    state: State,
    ready: Cell<bool>,
    armed: Cell<bool>,
    log: RefCell<String>,
}

impl DurableObject for FloorRustCounter {
    fn new(state: State, _env: Env) -> Self {
        FloorRustCounter { state, ready: Cell::new(false), armed: Cell::new(false), log: RefCell::new(String::new()) }
    }

    async fn fetch(&self, _req: Request) -> worker::Result<Response> {
        Response::error("not found", 404)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        self.state.storage().delete_all().await?;
        Response::ok("")
    }
}

#[wasm_bindgen]
impl FloorRustCounter {
    /// One hit: the row written, 1 returned.
    pub fn hit(&self) -> Result<f64, JsValue> {
        let sql = self.state.storage().sql();
        if !self.ready.get() {
            sql.exec("CREATE TABLE IF NOT EXISTS hits (id INTEGER PRIMARY KEY CHECK (id = 0), log TEXT NOT NULL)", None)?;
            self.ready.set(true);
        }
        let now = js_sys::Date::now() as i64;
        let log = {
            let mut log = self.log.borrow_mut();
            if !log.is_empty() {
                log.push(',');
            }
            log.push_str(&now.to_string());
            log.clone()
        };
        sql.exec(
            "INSERT INTO hits (id, log) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET log = excluded.log",
            vec![SqlStorageValue::from(log)],
        )?;
        if !self.armed.get() {
            self.armed.set(true);
            let storage = self.state.storage();
            wasm_bindgen_futures::spawn_local(async move {
                let _ = storage.set_alarm(std::time::Duration::from_secs(60)).await;
            });
        }
        Ok(1.0)
    }
}
