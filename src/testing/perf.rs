//! A native loop of the pure core's share of one request, for profiling
//!: `valgrind --tool=callgrind` on the test binary, with
//! `cargo test --release --lib testing::perf -- --ignored`. Each loop
//! steps the core as `glue::drive::decide`, `record` and `glue::edge::limit`
//! do for a live request (the I/O left out): the blocked path (the
//! isolate's blocked-until cache warm, the plan kept in the memo, the block
//! line folded into its episode) and the allowed path (a new key every ten
//! requests, its count run as the core's `CounterRun` against the object's
//! pure step on an in-memory row, through the wire form). `PERF_N`
//! requests (10,000 by default). Asserts the answers, so a change that
//! altered them fails here too.

use crate::config::Config;
use crate::count::protocol::{decode_call_url, decode_reply_line, encode_call_url, encode_reply_line};
use crate::count::store::Storage;
use crate::pipeline::facts::{ClientFacts, Facts, HeaderMap, Secrets};
use crate::pipeline::isolate::{CounterRun, Isolate, ObjectCall};
use crate::pipeline::machine::{self, Decision, Machine, Next};
use crate::pipeline::plane::{Door, Plane};
use crate::pipeline::verdict::Answer;
use std::collections::BTreeMap;

/// The bench's request headers as `headerLines` hands them over.
fn header_lines(ip: &str) -> String {
    format!("accept\n*/*\ncf-connecting-ip\n{ip}\nconnection\nkeep-alive\nhost\n127.0.0.1:8787\nx-bench-floor\n429\n")
}

fn shipped() -> &'static Config {
    let manifest: toml::Value = toml::from_str(include_str!("../../wrangler.toml")).unwrap_or_else(|e| panic!("{e}"));
    let value = serde_json::to_value(&manifest["vars"]["TOLLGATE"]).unwrap_or_else(|e| panic!("{e}"));
    Box::leak(Box::new(crate::testing::config_of(value)))
}

fn runs() -> usize {
    std::env::var("PERF_N").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000)
}

/// One request through the core as the Worker steps it; the counts sent
/// to `objects`. The status answered.
fn one(config: &'static Config, isolate: &mut Isolate, objects: &mut BTreeMap<String, Storage>, ip: &str, now: i64) -> u16 {
    let url = "http://127.0.0.1:8787/api/example?mode=heavy";
    let _ = isolate.episodes.ended(now);
    let (entry, walked) = machine::entry(config, &isolate.memo, url, Plane::Zone);
    assert_eq!(entry, Door::Plan);
    let headers = HeaderMap::from_lines(header_lines(ip));
    let client = ClientFacts::default();
    let secrets = std::rc::Rc::new(Secrets::default());
    let facts = Facts { method: "GET", url, headers: &headers, client: &client, secrets: &secrets, now_ms: now };
    let mut machine = Machine::new(config, facts, &isolate.memo, walked);
    let mut decision: Decision<'static> = match machine.next(Some(&isolate.blocked)) {
        Next::Count(checks) => {
            let outcomes = checks
                .iter()
                .map(|(applied, op)| {
                    let mut counter = CounterRun::new(applied, *op);
                    counter.run(isolate, now, |ObjectCall { id, call, .. }, at| {
                        let call = decode_call_url(&encode_call_url(call)).unwrap_or_else(|e| panic!("{e}"));
                        let reply = objects.entry(id.clone()).or_default().answer(&call, at).unwrap_or_else(|e| panic!("{e}"));
                        decode_reply_line(200, &encode_reply_line(&reply))
                    })
                })
                .collect();
            machine.counted(outcomes)
        }
        Next::Decided => machine.decided(),
        other => panic!("not on the bench's path: {other:?}"),
    };
    let (lines, summaries) = isolate.episodes.filter_parts(&decision.logs, now);
    std::hint::black_box((lines.iter().map(|l| l.line().len()).sum::<usize>(), summaries.len()));
    isolate.keep(&mut decision);
    if decision.checked {
        std::hint::black_box(isolate.refunds(config, now));
    }
    std::hint::black_box(&decision.forwarding);
    match &decision.answer {
        Answer::Respond(own) => {
            let settled = decision.settle.after(None, &secrets, now);
            std::hint::black_box(settled);
            std::hint::black_box(own.headers.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>() + own.body.len());
            own.status
        }
        Answer::Forward { fields } => {
            let settled = decision.settle.after(Some((200, &HeaderMap::from_pairs::<&str, &str>(&[]))), &secrets, now);
            std::hint::black_box((settled, fields.len()));
            200
        }
    }
}

#[test]
#[ignore = "a profiling loop: run it under callgrind"]
fn blocked() {
    let config = shipped();
    let mut isolate = Isolate::new();
    isolate.configure(config, 0);
    let mut objects = BTreeMap::new();
    let start = crate::testing::pair::START_MS;
    let statuses: Vec<u16> = (0..12).map(|i| one(config, &mut isolate, &mut objects, "192.0.2.1", start + i)).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429, 429]);
    for i in 0..runs() {
        assert_eq!(one(config, &mut isolate, &mut objects, "192.0.2.1", start + 20 + (i as i64) / 8), 429);
    }
}

#[test]
#[ignore = "a profiling loop: run it under callgrind"]
fn allowed() {
    let config = shipped();
    let mut isolate = Isolate::new();
    isolate.configure(config, 0);
    let mut objects = BTreeMap::new();
    let start = crate::testing::pair::START_MS;
    for i in 0..runs() {
        let k = i / 10;
        let ip = format!("10.{}.{}.{}", (k >> 16) & 255, (k >> 8) & 255, k & 255);
        assert_eq!(one(config, &mut isolate, &mut objects, &ip, start + (i as i64) / 4), 200);
    }
}
