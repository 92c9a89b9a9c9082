//! Metric points' I/O: the Analytics Engine dataset bound, its writes,
//! and whether the local sink (local development, where no dataset is
//! bound) is on; the sink's own writes are a call to its object
//! (`glue::objects::sink`). The console's queries of the sink and of the
//! Analytics Engine SQL API are the admin Worker's (`glue::admin`).
//! Decides nothing.

use crate::glue::isolate::bindings;
use crate::pipeline::metrics::{self, SINK_VAR};
use worker::{AnalyticsEngineDataPointBuilder, Env};

pub(crate) fn text_binding(env: &Env, name: &str) -> Option<String> {
    env.secret(name).ok().map(|s| s.to_string()).filter(|s| !s.trim().is_empty())
}

/// Whether points go to the local sink ([`SINK_VAR`] set; in place of a
/// bound dataset, which `wrangler dev` stubs), looked up once per isolate.
pub(crate) fn sink_on(env: &Env) -> bool {
    bindings(|b| *b.sink_on.get_or_init(|| text_binding(env, SINK_VAR).is_some()))
}

/// The Analytics Engine dataset bound as [`metrics::BINDING`], if any
/// (not looked up again once found missing).
pub(crate) fn metrics_dataset(env: &Env) -> Option<worker::AnalyticsEngineDataset> {
    if bindings(|b| *b.metrics_bound.get_or_init(|| env.analytics_engine(metrics::BINDING).is_ok())) {
        env.analytics_engine(metrics::BINDING).ok()
    } else {
        None
    }
}

/// Writes the data points to the dataset. A failed write is dropped: a
/// metric never fails a request.
pub(crate) fn write_metrics(dataset: &worker::AnalyticsEngineDataset, points: Vec<metrics::Point>) {
    for p in points {
        let _ = AnalyticsEngineDataPointBuilder::new()
            .indexes([p.index.as_str()])
            .blobs(p.blobs)
            .doubles(p.doubles)
            .write_to(dataset);
    }
}
