//! The local metrics sink's Durable Object (issue 28, its own class since
//! issue 36): one object, [`SINK_OBJECT`], bound as
//! [`crate::count::classes::METRICS_SINK`], that keeps the points Analytics
//! Engine would in local development (`scripts/dev` sets [`SINK_VAR`]), for
//! the console's Traffic page. Answers 404 unless [`SINK_VAR`] is set. A
//! `points` table, points older than 8 days dropped at each write; no alarm.
//!
//! [`SINK_OBJECT`]: crate::pipeline::console::traffic::SINK_OBJECT

use crate::glue::limiter::error_reply;
use crate::pipeline::console::traffic::{SINK_PATH, SINK_VAR};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::{durable_object, DurableObject, Env, Request, Response, State};

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, inline_js = r#"
const POINTS = "CREATE TABLE IF NOT EXISTS points (timestamp INTEGER NOT NULL, index1 TEXT, blob1 TEXT, blob2 TEXT, blob3 TEXT, blob4 TEXT, blob5 TEXT, blob6 TEXT, double1 REAL, double2 REAL, _sample_interval INTEGER NOT NULL DEFAULT 1)";
export function sinkWrite(sql, lines) {
  sql.exec(POINTS);
  const now = Math.floor(Date.now() / 1000);
  for (const line of lines.split("\n")) {
    const f = line.split("\t");
    if (f.length !== 9) continue;
    sql.exec("INSERT INTO points VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)", now, ...f.slice(0, 7), Number(f[7]), Number(f[8]));
  }
  sql.exec("DELETE FROM points WHERE timestamp < ?", now - 8 * 86400);
}
export function sinkQuery(sql, query) {
  sql.exec(POINTS);
  const data = [...sql.exec(query)];
  return JSON.stringify({ meta: [], data, rows: data.length });
}
"#)]
extern "C" {
    /// The local sink's write: one point a line (index, six blobs, two
    /// doubles, tab-separated), dated now; points older than 8 days dropped.
    #[wasm_bindgen(catch, js_name = sinkWrite)]
    fn sink_write(sql: &JsValue, lines: &str) -> Result<(), JsValue>;
    /// The local sink's query, answered in the SQL API's JSON format.
    #[wasm_bindgen(catch, js_name = sinkQuery)]
    fn sink_query(sql: &JsValue, query: &str) -> Result<String, JsValue>;
}

#[durable_object]
pub struct MetricsSink {
    state: State,
    /// The bindings: read only for [`SINK_VAR`].
    env: Env,
}

impl DurableObject for MetricsSink {
    fn new(state: State, env: Env) -> Self {
        MetricsSink { state, env }
    }

    /// `POST /v1/sink` of `write\n<points>` or `query\n<SQL>` (the
    /// console's own queries, built in [`crate::pipeline::console::traffic`]).
    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        if self.env.secret(SINK_VAR).is_err() {
            return error_reply(404, "no local sink");
        }
        if req.path() != SINK_PATH {
            return error_reply(404, "not a sink path");
        }
        let body = req.text().await?;
        let storage = self.state.storage().sql();
        let sql: &JsValue = storage.as_ref();
        let answer = match body.split_once('\n') {
            Some(("write", lines)) => sink_write(sql, lines).map(|()| String::new()),
            Some(("query", query)) => sink_query(sql, query),
            _ => return error_reply(400, "malformed sink call"),
        };
        match answer {
            Ok(text) => Response::ok(text),
            Err(e) => error_reply(500, &worker::Error::from(e).to_string()),
        }
    }
}
