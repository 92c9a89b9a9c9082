//! The local metrics sink's I/O (local development, where no dataset is
//! bound): whether it is on, and the points written to it. The console's
//! queries of it and of the Analytics Engine SQL API are the admin
//! Worker's (`glue::admin`). Decides nothing.

use crate::count::classes::METRICS_SINK;
use crate::glue::objects::post_to;
use crate::pipeline::metrics::{SINK_OBJECT, SINK_PATH, SINK_VAR};
use crate::pipeline::metrics::Point;
use worker::Env;

pub(crate) fn text_binding(env: &Env, name: &str) -> Option<String> {
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

