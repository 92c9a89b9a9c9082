//! Drives the [decision machine](crate::pipeline::machine) for a live
//! request: reads the facts it is told, does the I/O its `Next` asks for
//! (the body, the upload, the counters), and applies its decision's
//! effects (logs, the memo, metrics). Shared by the standalone Worker
//! ([`crate::glue::edge`]) and the embedded check ([`crate::glue::embed`]),
//! so both decide alike; neither decides anything itself.

use crate::config::Config;
use crate::glue::admin;
use crate::glue::isolate::{load_secrets, now_ms, respond, with_isolate, write_lines, write_logs};
use crate::glue::objects::check;
use crate::glue::traffic::{metrics_dataset, write_metrics};
use crate::glue::origin::{read_body, receive_upload, BudgetHold};
use crate::pipeline::facts::{self, Facts, HeaderMap};
use crate::pipeline::machine::{self, Decision, Machine, Next};
use crate::pipeline::plane::{self, Door, Plane};
use crate::pipeline::metrics;
use crate::pipeline::upload::{self, Receipt, UploadLimits};
use futures_util::future::join_all;
use worker::wasm_bindgen::{self, prelude::wasm_bindgen};
use worker::{web_sys, Env};

/// What the rules may read of the client that `Request.cf` would say, for
/// a request that lost its `cf` on the way (RPC does not carry it): each
/// field set here is used instead of the request's own.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub country: Option<String>,
    pub asn: Option<u32>,
}

/// What the machine decided about a request.
pub(crate) enum Decided {
    /// Tollgate's own answer before any rule: the admin API's (the admin
    /// Worker), or the 404 of a request the other Worker serves
    /// ([`plane`]). Never forwarded, nothing to settle.
    Answered(web_sys::Response),
    /// The decision; its log lines are written, its memo entry kept, its
    /// metric points written. With the body's holds in the isolate's
    /// memory budget (a body read for keys, an upload), if any: keep them
    /// until the request is forwarded or answered.
    Decision(Box<Decision<'static>>, Vec<BudgetHold>),
}

/// Runs `req` through the machine, as the Worker on `plane` serves it.
/// `client` stands in for `req.cf()` where it says something (RPC does not
/// carry `cf`).
pub(crate) async fn decide(req: &web_sys::Request, env: &Env, config: &'static Config, client: &Client, plane: Plane) -> worker::Result<Decided> {
    let url = req.url();
    let walked = match with_isolate(|isolate| machine::entry(config, &isolate.memo, &url, plane)) {
        (Door::NotHere, _) => return Ok(Decided::Answered(respond(&plane::not_here())?)),
        (Door::Pass, _) => return Ok(Decided::Decision(Box::new(Decision::pass()), Vec::new())),
        (Door::Plan, walked) => walked,
    };
    let method = req.method();
    let headers = HeaderMap::from_lines(header_lines(req.headers().as_ref()));
    let cf = if config.facts.reads_cf { cf_facts(req.as_ref()) } else { None };
    let known = client_facts(cf.as_deref(), client);
    let secrets = load_secrets(env, config);
    let facts = Facts { method: &method, url: &url, headers: &headers, client: &known, secrets: &secrets, now_ms: now_ms() };
    let mut machine = with_isolate(|isolate| Machine::new(config, facts, &isolate.memo, walked));
    let mut holds = Vec::new();
    let client_address = || upload::client_of(headers.get("cf-connecting-ip").as_deref(), config.ipv6_prefix);
    let decision = loop {
        match with_isolate(|isolate| machine.next(Some(&isolate.blocked))) {
            Next::Body { limit, timeout_ms } => {
                let (body, held, note) = read_body(req, config.memory_budget, &client_address(), limit, timeout_ms, now_ms()).await;
                write_logs(note.as_slice());
                holds.extend(held);
                machine.body(&body);
            }
            Next::Upload(limits) => {
                let (receipt, started, held) = receive(req, config, &client_address(), &headers, limits).await;
                holds.extend(held);
                machine.uploaded(receipt, started);
            }
            // The admin plane's (the admin Worker's `glue::admin`; any
            // other build answers 404): served, or refused by the machine.
            Next::Admin => {
                if let Some(answer) = admin::serve(req, env, config, &mut machine, &mut holds).await? {
                    return Ok(Decided::Answered(answer));
                }
            }
            Next::Count(checks) => {
                let outcomes = join_all(checks.into_iter().map(|(applied, op)| check(env, applied, op))).await;
                break machine.counted(outcomes);
            }
            Next::Decided => break machine.decided(),
        }
    };
    let mut decision = decision;
    record(req, env, config, client, cf, &decision).await;
    with_isolate(|isolate| isolate.keep(&mut decision));
    Ok(Decided::Decision(Box::new(decision), holds))
}

/// Writes `decision`'s log lines and metric points. `cf`: what
/// [`cf_facts`] read of `request.cf` for the rules, if they read it.
async fn record(req: &web_sys::Request, env: &Env, config: &Config, client: &Client, cf: Option<String>, decision: &Decision<'_>) {
    // With the local sink on (local development), the points go there
    // instead: `wrangler dev` binds a dataset that keeps nothing.
    let sink = decision.makes_points() && crate::glue::traffic::sink_on(env);
    let dataset = metrics_dataset(env).filter(|_| decision.makes_points() && !sink);
    // The lines the log episodes let through, first: a block folded into an
    // episode needs nothing more read.
    let (mut lines, summaries) = with_isolate(|isolate| isolate.episodes.filter_parts(&decision.logs, now_ms()));
    // `request.cf`, read once: above when the rules read it, else here when
    // a line written or the metric points say where the client is.
    let cf = if config.facts.reads_cf || (lines.is_empty() && dataset.is_none() && !sink) { cf } else { cf_facts(req.as_ref()) };
    let place = client_facts(cf.as_deref(), client);
    if !config.facts.reads_cf {
        // Log lines say where the client is, even where the rules did not ask.
        crate::pipeline::who::locate(&mut lines, &place);
    }
    write_lines(&lines);
    write_lines(&summaries);
    let method = req.method();
    let at = metrics::Place { colo: place.colo.as_deref(), country: place.country.as_deref(), asn: place.asn, method: &method };
    apply(decision, dataset, at, config);
    if sink {
        // Local development: the same points, allowed totals too (each
        // decision's at once: a restart loses none), to the local sink.
        let now = now_ms();
        let mut points = decision.metric_points(at);
        points.extend(due_totals(decision, now, config, at, true));
        crate::glue::objects::sink(env, &points).await;
    }
}

/// Receives the upload within the isolate's memory budget, charged to
/// `client` (its address) ([`crate::pipeline::upload`]): the receipt, when it
/// began, and the hold to keep until the request ends; the line of an
/// upload granted less than it wanted is written.
async fn receive(req: &web_sys::Request, config: &Config, client: &str, headers: &HeaderMap, limits: UploadLimits) -> (Receipt, i64, Option<BudgetHold>) {
    let started = now_ms();
    let want = upload::wanted(limits, headers.get("content-length").as_deref());
    let (receipt, hold, note) = receive_upload(req, config.memory_budget, client, limits, want, started).await;
    write_logs(note.as_slice());
    (receipt, started, hold)
}

/// The decision's metric points (to `dataset`, when bound and the
/// decision makes points), at the client's `place` (`request.cf`'s).
fn apply(decision: &Decision<'_>, dataset: Option<worker::AnalyticsEngineDataset>, place: metrics::Place<'_>, config: &Config) {
    if let Some(dataset) = dataset {
        write_metrics(&dataset, decision.metric_points(place));
        let now = now_ms();
        write_metrics(&dataset, due_totals(decision, now, config, place, false));
    }
}

/// Counts `decision`'s allowed requests into the isolate's totals; the
/// totals' points now due, at `place` (each decision's at once under the
/// local `sink`).
fn due_totals(decision: &Decision<'_>, now: i64, config: &Config, place: metrics::Place<'_>, sink: bool) -> Vec<metrics::Point> {
    with_isolate(|isolate| isolate.due_totals(decision, config, now, place, sink))
}

/// The client facts: `client`'s where it says something, else those of
/// `cf` ([`cf_facts`]'s text).
fn client_facts(cf: Option<&str>, client: &Client) -> facts::ClientFacts {
    let mut fields = cf.unwrap_or_default().splitn(5, '\n');
    let mut next = || fields.next().filter(|f| !f.is_empty()).map(str::to_string);
    let (country, colo, asn, flag, category) = (next(), next(), next(), next(), next());
    let flag = || flag.as_deref().map(|f| f == "1");
    facts::ClientFacts {
        country: client.country.clone().or(country),
        asn: client.asn.or_else(|| asn?.parse().ok()),
        verified_bot: cf.and_then(|_| crate::request::exempt::verified_bot(category, flag)),
        colo,
    }
}

#[wasm_bindgen(inline_js = r#"
export function cfFacts(req) {
  const cf = req.cf;
  if (cf === null || typeof cf !== "object") return undefined;
  const text = (v) => (typeof v === "string" ? v : "");
  const asn = Number.isInteger(cf.asn) && cf.asn >= 0 && cf.asn <= 4294967295 ? String(cf.asn) : "";
  const bm = cf.botManagement;
  const flag = bm !== null && typeof bm === "object" && typeof bm.verifiedBot === "boolean" ? (bm.verifiedBot ? "1" : "0") : "";
  return text(cf.country) + "\n" + text(cf.colo) + "\n" + asn + "\n" + flag + "\n" + text(cf.verifiedBotCategory);
}
export function headerLines(headers) {
  let out = "";
  headers.forEach((value, name) => { out += name + "\n" + value + "\n"; });
  return out;
}
"#)]
extern "C" {
    /// A `Headers` object's fields in one call: `name\nvalue\n` each (a
    /// field's name and value never hold a line break; `forEach`, not the
    /// iterator: no array per field).
    #[wasm_bindgen(js_name = headerLines)]
    fn header_lines(headers: &wasm_bindgen::JsValue) -> String;
    /// What tollgate reads of `request.cf`, in one call (not a `Reflect`
    /// per field): `country`, `colo`, `asn`, `botManagement.verifiedBot`
    /// (`1`/`0`) and `verifiedBotCategory`, one line each, empty where
    /// absent or of another type (the category last: only it is free
    /// text); `None` without `cf` (local development, RPC).
    #[wasm_bindgen(js_name = cfFacts)]
    fn cf_facts(req: &wasm_bindgen::JsValue) -> Option<String>;
}

/// A response's fields by the names settling reads, as plain data.
pub(crate) fn response_headers(response: &web_sys::Response, names: &[&str]) -> HeaderMap {
    let headers = response.headers();
    HeaderMap::of(names, &|name| headers.get(name).ok().flatten())
}


