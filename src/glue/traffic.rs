//! The Traffic and Events pages' I/O: the queries of
//! [`crate::pipeline::console::traffic`] sent to the Analytics Engine SQL
//! API (the account id var and the API-token secret), or, without them and
//! with the local sink on, to the sink object; and the writes to that sink
//! in local development, where no dataset is bound. Decides nothing.

#[cfg(feature = "admin")]
use crate::count::protocol::CallFailure;
use crate::count::classes::METRICS_SINK;
use crate::glue::objects::post_to;
#[cfg(feature = "admin")]
use crate::pipeline::console::traffic::{self, Dialect, Range, ACCOUNT_VAR, DATASET_VAR, TOKEN_SECRET};
use crate::pipeline::console::traffic::{SINK_OBJECT, SINK_PATH, SINK_VAR};
use crate::pipeline::metrics::Point;
#[cfg(feature = "admin")]
use worker::wasm_bindgen::{JsCast, JsValue};
#[cfg(feature = "admin")]
use worker::wasm_bindgen_futures::JsFuture;
#[cfg(feature = "admin")]
use worker::{js_sys, web_sys};
use worker::Env;

fn text_binding(env: &Env, name: &str) -> Option<String> {
    env.secret(name).ok().map(|s| s.to_string()).filter(|s| !s.trim().is_empty())
}

/// Whether points go to the local sink ([`SINK_VAR`] set; in place of a
/// bound dataset, which `wrangler dev` stubs), looked up once per isolate.
pub(crate) fn sink_on(env: &Env) -> bool {
    crate::glue::isolate::bindings(|b| *b.sink_on.get_or_init(|| text_binding(env, SINK_VAR).is_some()))
}

/// Writes `points` to the local sink (awaited: local development only).
/// A failed write is dropped.
pub(crate) async fn sink(env: &Env, points: &[Point]) {
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    let mut body = String::from("write\n");
    for p in points {
        let blobs: Vec<String> = p.blobs.iter().map(|b| clean(b)).collect();
        body.push_str(&format!("{}\t{}\t{}\t{}\n", clean(&p.index), blobs.join("\t"), p.doubles[0] as i64, p.doubles[1] as i64));
    }
    let _ = post_to(env, METRICS_SINK, SINK_OBJECT, SINK_PATH, body).await;
}

/// The range's answers ([`traffic::queries`]; the admin Worker's: the
/// console reads them): from the SQL API when the account id and token are
/// set, else from the local sink when it is on; else why not.
#[cfg(feature = "admin")]
pub(crate) async fn answers(env: &Env, range: Range) -> Result<traffic::Answers, String> {
    let (account, token) = (text_binding(env, ACCOUNT_VAR), text_binding(env, TOKEN_SECRET));
    let dataset = traffic::dataset(text_binding(env, DATASET_VAR).as_deref());
    // One query after another: a console view, not a request's path (and
    // no join of futures in the Wasm).
    let mut out: traffic::Answers = Default::default();
    match (account, token) {
        (Some(account), Some(token)) => {
            for (slot, q) in out.iter_mut().zip(traffic::queries(Dialect::AnalyticsEngine, &dataset, range)) {
                *slot = sql_api(&account, &token, &q).await?;
            }
        }
        _ if sink_on(env) => {
            for (slot, q) in out.iter_mut().zip(traffic::queries(Dialect::Sqlite, &dataset, range)) {
                *slot = post_to(env, METRICS_SINK, SINK_OBJECT, SINK_PATH, format!("query\n{q}")).await.map_err(|e: CallFailure| e.to_string())?;
            }
        }
        _ => return Err(format!("Analytics Engine is not set up: {ACCOUNT_VAR} or {TOKEN_SECRET} is missing.")),
    }
    Ok(out)
}

/// One query to the SQL API: its answer's text when 200, else the status.
#[cfg(feature = "admin")]
async fn sql_api(account: &str, token: &str, query: &str) -> Result<String, String> {
    let failed = |e: JsValue| e.as_string().unwrap_or_else(|| "the SQL API cannot be reached".to_string());
    let headers = web_sys::Headers::new().map_err(failed)?;
    headers.set("authorization", &format!("Bearer {}", token.trim())).map_err(failed)?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&JsValue::from(query));
    let url = format!("https://api.cloudflare.com/client/v4/accounts/{}/analytics_engine/sql", account.trim());
    let request = web_sys::Request::new_with_str_and_init(&url, &init).map_err(failed)?;
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response: web_sys::Response = JsFuture::from(global.fetch_with_request(&request)).await.map_err(failed)?.unchecked_into();
    let text = JsFuture::from(response.text().map_err(failed)?).await.map_err(failed)?.as_string().unwrap_or_default();
    match response.status() {
        200 => Ok(text),
        status => Err(format!("the SQL API answered {status}")),
    }
}
