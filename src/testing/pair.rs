//! The native harness, in the manner of quinn-proto's test
//! `Pair`: edge isolates ([`edge::Edge`]: the decision machine, the lease
//! book, the holds and the blocked-until cache) and the limiter objects
//! ([`Storage`]: [`crate::count::object`]'s pure step on in-memory rows,
//! applying the same effects the Durable Object applies,
//! [`crate::count::store`]) wired in-process on one simulated clock.
//! Every call crosses the wire form ([`encode_call_url`] and the reply
//! line), and the objects' alarms fire as the clock passes them.
//!
//! Tests use only this small API: [`Pair::request`] (and
//! [`Pair::request_on`] another edge), [`Pair::settle`], [`Pair::advance`],
//! [`Pair::restart`], [`Pair::object_rows`], [`Pair::object_calls`].

pub mod edge;
#[cfg(test)]
mod budget;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod calendar;

use crate::config::Config;
use crate::count::protocol::{decode_call_url, decode_reply_line, encode_call_url, encode_reply_line, Call, CallFailure, Op, Reply};
use crate::count::store::Storage;
use crate::pipeline::facts::{HeaderMap, Secrets};
use crate::pipeline::machine::Settle;
use crate::pipeline::verdict::{Answer, LogEvent};
use crate::testing::Req;
use edge::Edge;
use serde_json::Value;
use std::collections::BTreeMap;

/// When the simulated clock starts (Unix ms).
pub const START_MS: i64 = 1_800_000_000_000;

/// The edges and objects, on one clock.
pub struct Pair {
    config: &'static Config,
    now: i64,
    edges: Vec<Edge>,
    objects: Objects,
}

/// The limiter objects by name, and the calls they took.
#[derive(Default)]
struct Objects {
    rows: BTreeMap<String, Storage>,
    /// Every call that reached an object: its name and op.
    calls: Vec<(String, Op)>,
    /// Calls fail as unreachable (the rule's `on_error` applies).
    down: bool,
}

/// One request's answer, and what settling it needs.
pub struct Exchange {
    /// 200 when forwarded (the origin answers), else tollgate's own status.
    pub status: u16,
    /// `Retry-After` (s) of tollgate's own answer.
    pub retry_after: Option<u64>,
    /// The decision's log lines.
    pub logs: Vec<LogEvent>,
    /// The forward's added fields, or the answer's headers.
    pub headers: Vec<(String, String)>,
    edge: usize,
    settle: Settle<'static>,
    secrets: Secrets,
}

impl Exchange {
    /// The first log line named `event`.
    pub fn log(&self, event: &str) -> Option<&LogEvent> {
        self.logs.iter().find(|e| e.event == event)
    }

    /// A header of the answer (or a field added to the forward).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

impl Pair {
    /// One edge and no object yet, for a config of `rules` (a JSON array).
    pub fn new(rules: Value) -> Pair {
        let config = crate::testing::leaked(rules);
        Pair { config, now: START_MS, edges: vec![Edge::new(config)], objects: Objects::default() }
    }

    /// Now `n` edges (separate isolates on the same objects).
    pub fn edges(mut self, n: usize) -> Pair {
        while self.edges.len() < n {
            self.edges.push(Edge::new(self.config));
        }
        self
    }

    /// The simulated time (Unix ms).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// `req` through edge 0, now.
    pub fn request(&mut self, req: Req) -> Exchange {
        self.request_on(0, req)
    }

    /// `req` through edge `edge`, now: the machine's decision, its counts
    /// asked of the objects.
    pub fn request_on(&mut self, edge: usize, req: Req) -> Exchange {
        let req = req.now(self.now);
        let objects = &mut self.objects;
        let now = self.now;
        let decision = self.edges[edge].decide(self.config, &req, &mut |id: &str, call: &Call| objects.send(id, call, now));
        let (status, retry_after, headers) = match &decision.answer {
            Answer::Forward { fields } => (200, None, fields.clone()),
            Answer::Respond(r) => (r.status, r.header("retry-after").and_then(|s| s.parse().ok()), r.headers.clone()),
        };
        Exchange { status, retry_after, logs: decision.logs, headers, edge, settle: decision.settle, secrets: req.secrets }
    }

    /// Settles `exchange` now with the origin's `status` (`None`: nothing
    /// answered) and answer `headers`: the settling calls sent, the holds
    /// recorded. The settling calls' replies, in order.
    pub fn settle(&mut self, exchange: &Exchange, status: Option<u16>, headers: &[(&str, &str)]) -> Vec<Result<Reply, CallFailure>> {
        let headers = HeaderMap::from_pairs(headers);
        let settled = exchange.settle.after(status.map(|s| (s, &headers)), &exchange.secrets, self.now);
        let objects = &mut self.objects;
        let now = self.now;
        self.edges[exchange.edge].settled(settled, now, &mut |id: &str, call: &Call| objects.send(id, call, now))
    }

    /// Moves the clock on by `ms`, firing every object's alarm due on the
    /// way, at its time, in time order.
    pub fn advance(&mut self, ms: i64) {
        let end = self.now + ms;
        loop {
            let due = self.objects.rows.iter().filter_map(|(id, s)| s.alarm.filter(|&at| at <= end).map(|at| (at, id.clone()))).min();
            let Some((at, id)) = due else { break };
            self.now = self.now.max(at);
            if let Some(storage) = self.objects.rows.get_mut(&id) {
                storage.fire_alarm(self.now);
            }
        }
        self.objects.rows.retain(|_, s| !s.is_empty());
        self.now = end;
    }

    /// Restarts edge `edge`: its isolate's memory (tokens leased, cached
    /// blocks, holds) is gone; the objects keep theirs.
    pub fn restart(&mut self, edge: usize) {
        self.edges[edge] = Edge::new(self.config);
    }

    /// Makes every object unreachable (`true`) or reachable again.
    pub fn set_down(&mut self, down: bool) {
        self.objects.down = down;
    }

    /// The objects of `rule` still holding storage: each key and its storage.
    pub fn object_rows(&self, rule: &str) -> Vec<(&str, &Storage)> {
        let prefix = format!("{rule}\n");
        self.objects.rows.iter().filter_map(|(id, s)| Some((id.strip_prefix(&prefix)?, s))).collect()
    }

    /// The calls that reached the objects so far, by op.
    pub fn object_calls(&self) -> Vec<Op> {
        self.objects.calls.iter().map(|(_, op)| *op).collect()
    }

    /// What the object of (`rule`, `key`) holds now, as a `status` call
    /// answers it (nothing recorded, no call counted); `None` for no such
    /// rule or a corrupt row.
    pub fn status(&self, rule: &str, key: &str) -> Option<Reply> {
        let rule = self.config.rules.iter().find(|r| r.name == rule)?;
        let mut storage = self.objects.rows.get(&format!("{}\n{key}", rule.name)).cloned().unwrap_or_default();
        storage.answer(&rule.call_for(Op::Status, key), self.now).ok()
    }

    /// Tokens edge `edge` holds for (`rule`, `key`) now.
    pub fn held(&self, edge: usize, rule: &str, key: &str) -> u32 {
        self.edges[edge].held(&format!("{rule}\n{key}"), self.now)
    }
}

impl Objects {
    /// One call to the object `id` at `now`, through the wire form: the
    /// call's URL decoded by the object, its reply line decoded by the edge.
    fn send(&mut self, id: &str, call: &Call, now: i64) -> Result<Reply, CallFailure> {
        if self.down {
            return Err(CallFailure::Transport("the object is unreachable".into()));
        }
        let error = |status: u16, message: String| decode_reply_line(status, &serde_json::json!({ "v": 1, "error": message }).to_string());
        let call = match decode_call_url(&encode_call_url(call)) {
            Ok(call) => call,
            Err(refused) => return error(400, refused.to_string()),
        };
        self.calls.push((id.to_string(), call.op));
        match self.rows.entry(id.to_string()).or_default().answer(&call, now) {
            Ok(reply) => decode_reply_line(200, &encode_reply_line(&reply)),
            Err(corrupt) => error(500, corrupt),
        }
    }
}
