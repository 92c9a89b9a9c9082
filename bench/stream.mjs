// Streamed LLM answers through tollgate (issue 37 item 7): what reading the
// usage out of a streamed (SSE) answer costs, against a rule that only
// counts requests on the same path, paired.
//
// Systems, each in its own workerd (the harness of tests/worker: the built
// Worker, SQLite objects), all in front of one real local HTTP origin
// (node:http in this process, reached through UPSTREAM, as
// tests/worker/usage.test.mjs does: the network edge) that streams an
// LLM-style SSE answer of K text events, each written on its own, SPACING_MS
// apart, the same for every system:
//   floor    a rule on another path: nothing matches (the passthrough)
//   plain    a request-counted rule on the path (no body reading)
//   response counting = { mode = "response", statuses = [200] } alone:
//            reserve, then commit at the status (usage's object calls
//            without its body reading)
//   usage    counting = { mode = "response" }, metering = { usage = "openai",
//            reserve = 1000, max = 1000 }: the final chunk's usage committed
//   plain-a  as plain, on the Anthropic-style stream
//   cut      metering = { usage = "anthropic", reserve = 1000, max = 1000,
//            cut = true } on the Anthropic-style stream (never past reserve:
//            nothing is cut, the reading is measured)
// Every answer commits 300 tokens (60 input, 240 output).
//
// Phase 1 (CPU, time to first byte): 8 clients, each its own key, closed
// loop; rounds interleaved over every (system, K) cell in a rotating order;
// CPU is the workerd process's threads' time on a CPU (bench/procs.mjs:
// schedstat, in ns) per answer, objects included, origin and client
// excluded (they run here); the clients reach each Worker on its own
// socket (ENTRY=1: through Miniflare's entry Worker). Time to first byte is
// client-side: the request sent → first body chunk read.
// Per chunk: a pair's round-by-round difference at two K, its slope over
// K. Time to first byte also alone: one client, one answer at a time.
// Phase 2 (object calls, rows): the same systems started again with a
// pass-through proxy in front of the limiter (not in phase 1: the proxy
// costs CPU per call) reading each reply's rows fields and alarm flag,
// under phase 1's load. Prices from bench/prices.mjs.
//
// Phase 3 (provider shapes): one event per token in OpenAI, Anthropic and
// Gemini framing, 300 and 1,000 tokens: CPU per answer, the paired
// per-event slope with a 95% interval, time to first byte, and whether a
// rule's added CPU fits Workers Free's 10 ms.
//
//   node bench/stream.mjs [SECONDS] [ROUNDS] [SHAPE_SECONDS] [SHAPE_ROUNDS]
//   (after scripts/build; phases 1-2 SECONDS × ROUNDS per cell, phase 3
//   SHAPE_SECONDS × SHAPE_ROUNDS)
// Writes bench/RESULTS.stream.md and prints the same tables.
//   node bench/stream.mjs --shapes-only [SHAPE_SECONDS] [SHAPE_ROUNDS]
//   (or SHAPES_ONLY=1): phase 3 alone (a few minutes); prints its table
//   and writes it to bench/tmp/RESULTS.shapes.md (the committed results
//   are left as they are).
//   AB_ENTRY=bench/tmp/ab/src/entry.mjs node bench/stream.mjs --shapes-only:
//   phase 3 paired against another build (copy another commit's build/
//   and src/entry.mjs there after its scripts/build): this − that, round
//   by round, with intervals.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { execFileSync, spawn } from "node:child_process";
import { cpus } from "node:os";
import { join } from "node:path";
import { startTollgate, shippedObjects, COMPATIBILITY_DATE, ROOT } from "../tests/worker/harness.mjs";
import { costPerMillion } from "./prices.mjs";
import { workerdPids, cpuUs, TICK_US } from "./procs.mjs";

// `--shapes-only` (or SHAPES_ONLY=1): phase 3 alone, its two numbers first.
const shapesOnly = process.argv.includes("--shapes-only") || process.env.SHAPES_ONLY === "1";
const args = process.argv.slice(2).filter((a) => a !== "--shapes-only");
const seconds = Number((shapesOnly ? undefined : args[0]) ?? 2.5);
const rounds = Number((shapesOnly ? undefined : args[1]) ?? 5);
const shapeSeconds = Number((shapesOnly ? args[0] : args[2]) ?? 3);
const shapeRounds = Number((shapesOnly ? args[1] : args[3]) ?? 6);
const KS = [10, 50];
const [kLo, kHi] = KS;
const SPACING_MS = 1;
const CLIENTS = 8;
const INPUT = 60;
const OUTPUT = 240;
// A bound on the whole run, whatever happens.
setTimeout(() => {
  console.error("stream.mjs: over its 1,800 s bound, stopping");
  process.exit(2);
}, 1_800_000).unref();

// Limits a key's state outlives the gap between its calls under: 18,000
// requests an hour puts a request-counted key's GCRA horizon 200 ms further
// per call (a key here calls every 70-100 ms, under 1,000 times in a run),
// 1,000,000 tokens an hour a usage key's 1.08 s per 300-token answer: the
// row stays, its alarm is set once and kept. (At 1,000,000 requests an hour
// the horizon moves 3.6 ms a call: the row expires between calls and every
// call writes it and sets an alarm that fires.)
const base = { path: "/v1/chat", key: ["header:x-client"], algorithm: "gcra", limits: [{ requests: 18_000, window: "1h" }], lease: "off", ratelimit_headers: true };
const metered = (usage, extra = {}) => ({
  ...base,
  limits: [{ requests: 1_000_000, window: "1h" }],
  counting: { mode: "response", reservation_ttl: "10m" },
  metering: { usage, reserve: 1000, max: 1000, ...extra },
});
const SYSTEMS = {
  floor: { style: "openai", rule: { ...base, name: "elsewhere", path: "/elsewhere" } },
  plain: { style: "openai", rule: { ...base, name: "plain" } },
  response: { style: "openai", rule: { ...base, name: "response", counting: { mode: "response", statuses: [200], reservation_ttl: "10m" } } },
  usage: { style: "openai", rule: { name: "usage", ...metered("openai") } },
  "plain-a": { style: "anthropic", rule: { ...base, name: "plain-a" } },
  cut: { style: "anthropic", rule: { name: "cut", ...metered("anthropic", { cut: true }) } },
};
// (a, b): a's cost over b's, paired round by round.
const PAIRS = [["plain", "floor"], ["response", "plain"], ["usage", "plain"], ["usage", "response"], ["cut", "plain-a"]];

// ---- the origin -----------------------------------------------------------

const sse = (data, event) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

/** The events of one answer: K text events, then the usage, by style. */
function events(style, k) {
  const text = Array.from({ length: k }, (_, i) => `w${String(i).padStart(3, "0")} `);
  if (style === "openai") {
    return [
      ...text.map((t) => sse({ choices: [{ index: 0, delta: { content: t } }] })),
      sse({ choices: [], usage: { prompt_tokens: INPUT, completion_tokens: OUTPUT, total_tokens: INPUT + OUTPUT } }),
      "data: [DONE]\n\n",
    ];
  }
  return [
    sse({ type: "message_start", message: { id: "m", usage: { input_tokens: INPUT, output_tokens: 1 } } }, "message_start"),
    ...text.map((t) => sse({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: t } }, "content_block_delta")),
    sse({ type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: OUTPUT } }, "message_delta"),
    sse({ type: "message_stop" }, "message_stop"),
  ];
}

const wait = (ms) => new Promise((r) => setTimeout(r, ms));

async function llmOrigin() {
  const cache = new Map();
  const server = createServer(async (req, res) => {
    for await (const _ of req);
    const style = req.headers["x-style"] ?? "openai";
    const k = Number(req.headers["x-chunks"] ?? 50);
    const key = `${style}/${k}`;
    if (!cache.has(key)) cache.set(key, events(style, k));
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const event of cache.get(key)) {
      res.write(event);
      await wait(SPACING_MS);
    }
    res.end();
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

// ---- processes and CPU (bench/procs.mjs reads each workerd's) ---------------

/** The machine's busy CPU time (µs) from /proc/stat. */
function machineBusyUs() {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = f;
  return (user + nice + system + irq + softirq + steal) * TICK_US;
}

// ---- the systems ----------------------------------------------------------

// A pass-through proxy in front of the limiter (phase 2): counts the
// Worker's calls and reads each reply's rows fields and alarm flag
// (src/count/protocol.rs `encode_reply_line`: v allowed retry binding
// in_flight alarm_pending alarm_set stored_hits rows_read rows_written ...).
const METER = `
import { DurableObject } from "cloudflare:workers";
const m = { calls: 0, fetches: 0, errors: 0, rowsRead: 0, rowsWritten: 0, alarmsSet: 0 };
export class MeterLimiter extends DurableObject {
  real() {
    const real = this.env.REAL;
    return real.get(real.idFromName(this.ctx.id.name ?? this.ctx.id.toString()));
  }
  async answer(url) {
    m.calls++;
    const a = await this.real().answer(url);
    if (a.startsWith("!")) { m.errors++; return a; }
    const f = a.split(" ");
    if (f[6] === "1") m.alarmsSet++;
    m.rowsRead += Number(f[8]);
    m.rowsWritten += Number(f[9]);
    return a;
  }
  async fetch(request) {
    m.fetches++;
    return this.real().fetch(request);
  }
}
export default { fetch: () => Response.json(m) };
`;

// The clients reach each Worker on its own socket (Miniflare's direct
// socket), not through Miniflare's entry Worker (ENTRY=1: through it, as
// dispatchFetch does), which production does not have and whose CPU for
// each chunk it forwards would favour a rule that writes fewer, larger
// chunks (the batched watch).
const DIRECT = process.env.ENTRY !== "1";

/** A tollgate started from `options` (tests/worker/harness.mjs), its `fetch`
 * on the Worker's direct socket (unless ENTRY=1), and its workerd's pid. */
async function launch(options) {
  const before = workerdPids();
  const workerOptions = { ...options.workerOptions, ...(DIRECT ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}) };
  const tg = await startTollgate({ ...options, workerOptions });
  if (DIRECT) {
    const base = String(await tg.mf.unsafeGetDirectURL("tollgate")).replace(/\/$/, "");
    tg.fetch = (path, { ip = "203.0.113.7", headers = {}, ...init } = {}) => fetch(`${base}${path}`, { ...init, headers: { ...headers, "cf-connecting-ip": ip }, redirect: "manual" });
  }
  return { tg, pid: [...workerdPids()].find((p) => !before.has(p)) };
}

async function start(name, origin, { meter = false } = {}) {
  const options = {
    config: { rules: [SYSTEMS[name].rule] },
    vars: { UPSTREAM: origin.url },
    workerOptions: { outboundService: undefined },
    admin: false,
  };
  if (meter) {
    options.workerOptions.durableObjects = {
      ...shippedObjects(),
      LIMITER: { className: "MeterLimiter", scriptName: "meter" },
      REAL_LIMITER: { className: "Limiter", useSQLite: true },
    };
    options.extraWorkers = [
      {
        name: "meter",
        modules: true,
        script: METER,
        compatibilityDate: COMPATIBILITY_DATE,
        durableObjects: { REAL: { className: "Limiter", scriptName: "tollgate", useSQLite: true } },
      },
    ];
  }
  const { tg, pid } = await launch(options);
  return { name, style: SYSTEMS[name].style, tg, pid, statuses: {}, chunksSeen: [], fields: null };
}

async function meterTotals(sys) {
  const w = await sys.tg.mf.getWorker("meter");
  return (await w.fetch("http://meter/")).json();
}

/** One answer, read to its end: status, ms to the first body chunk, chunks read, the text. */
async function answer(sys, client, k) {
  const t0 = performance.now();
  const res = await sys.tg.fetch("/v1/chat", {
    method: "POST",
    body: '{"stream":true,"stream_options":{"include_usage":true},"max_tokens":1000}',
    headers: { "x-client": `c${client}`, "x-style": sys.style, "x-chunks": String(k), "content-type": "application/json" },
  });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let ttfb = null;
  let chunks = 0;
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (ttfb === null) ttfb = performance.now() - t0;
    chunks++;
    text += decoder.decode(value, { stream: true });
  }
  if (!sys.fields) sys.fields = { policy: res.headers.get("ratelimit-policy"), ratelimit: res.headers.get("ratelimit") };
  sys.statuses[res.status] = (sys.statuses[res.status] ?? 0) + 1;
  return { status: res.status, ttfb, chunks, text };
}

/** The closed loop: CLIENTS clients for `ms`. Returns answers complete (200) and their ttfbs. */
async function load(sys, k, ms) {
  const until = Date.now() + ms;
  const ttfbs = [];
  let served = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      while (Date.now() < until) {
        const a = await answer(sys, client, k);
        const complete = a.text.endsWith(sys.style === "openai" ? "data: [DONE]\n\n" : '{"type":"message_stop"}\n\n');
        if (a.status === 200 && complete) {
          served++;
          ttfbs.push(a.ttfb);
          sys.chunksSeen.push({ k, chunks: a.chunks });
        }
      }
    }),
  );
  return { served, ttfbs };
}

/** One client, one answer at a time: the time to first byte without queueing. */
async function sequential(sys, k, n) {
  const ttfbs = [];
  for (let i = 0; i < n; i++) {
    const a = await answer(sys, 0, k);
    if (a.status === 200) ttfbs.push(a.ttfb);
  }
  return ttfbs;
}

// ---- statistics -----------------------------------------------------------

const quantile = (a, q) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const median = (a) => quantile(a, 0.5);
const f0 = (x) => (x === undefined || Number.isNaN(x) ? "–" : x.toFixed(0));
const f1 = (x) => (x === undefined || Number.isNaN(x) ? "–" : x.toFixed(1));
const f2 = (x) => (x === undefined || Number.isNaN(x) ? "–" : x.toFixed(2));

// ---- phase 3: provider shapes ---------------------------------------------
//
// One event per token, as the providers frame them (OpenAI Chat Completions
// with include_usage, Anthropic Messages, Gemini alt=sse with its CRLF
// lines), 100-250 bytes an event, answers of SHAPE_TOKENS tokens, each
// event written on its own SPACING_MS apart. One workerd, one rule per
// (shape, rule) on its own path (a path no rule matches is the floor), so
// every cell runs in the same isolate; a cell's CPU is the workerd's while
// only that cell's load runs. Per rule and shape: CPU per answer, what it
// adds over the floor (paired round by round), the per-event slope
// ((added at the long answer − added at the short) ÷ the difference in
// events, per round) with a 95% interval (bench/profile.mjs's bootstrap
// of the rounds), time to first byte, and whether the added CPU fits the
// Free plan's 10 ms.

// SHAPES=a,b and SHAPE_RULES=a,b: some of them (floor and response, which
// the slopes are taken over, always).
const SHAPES = (process.env.SHAPES ?? "openai,anthropic,gemini").split(",");
const SHAPE_RULES = [...new Set(["floor", "response", ...(process.env.SHAPE_RULES ?? "usage,cut").split(",")])];
// SHAPE_TOKENS=a,b and SHAPE_SPACING_MS=ms (environment): other answer
// lengths and another pace (a model streaming 50 tokens a second writes an
// event every 20 ms), for phase 3 only; ENTRY=1: every phase through
// Miniflare's entry Worker (dispatchFetch); MEMORY_BUDGET=bytes: the Worker's
// memory_budget (its 8 clients share one address, so one client's quarter).
const SHAPE_TOKENS = (process.env.SHAPE_TOKENS ?? "300,1000").split(",").map(Number);
const SHAPE_SPACING_MS = Number(process.env.SHAPE_SPACING_MS ?? SPACING_MS);
const SHAPE_INPUT = 60;
const FREE_CPU_US = 10_000;

function shapeEvents(shape, n) {
  const word = (i) => ` w${String(i).padStart(4, "0")}`;
  if (shape === "openai") {
    const head = { id: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", object: "chat.completion.chunk", created: 1741570283, model: "gpt-4o-2024-08-06", system_fingerprint: "fp_eb9dce56a8" };
    const chunk = (delta, finish, extra = {}) => `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null, obfuscation: "x3Zq", ...extra })}\n\n`;
    return [
      chunk({ role: "assistant", content: "" }, null),
      ...Array.from({ length: n }, (_, i) => chunk({ content: word(i) }, null)),
      chunk({}, "stop"),
      `data: ${JSON.stringify({ ...head, choices: [], usage: { prompt_tokens: SHAPE_INPUT, completion_tokens: n, total_tokens: SHAPE_INPUT + n } })}\n\n`,
      "data: [DONE]\n\n",
    ];
  }
  if (shape === "anthropic") {
    const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    return [
      ev("message_start", { message: { id: "msg_01XFDUDYJgAACzvnptvVoYEL", type: "message", role: "assistant", content: [], model: "claude-sonnet-4-5", stop_reason: null, usage: { input_tokens: SHAPE_INPUT, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } } }),
      ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
      ev("ping", {}),
      ...Array.from({ length: n }, (_, i) => ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: word(i) } })),
      ev("content_block_stop", { index: 0 }),
      ev("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: n } }),
      ev("message_stop", {}),
    ];
  }
  const chunk = (i, last) => `data: ${JSON.stringify({
    candidates: [{ content: { parts: [{ text: word(i) }], role: "model" }, ...(last ? { finishReason: "STOP" } : {}), index: 0 }],
    usageMetadata: { promptTokenCount: SHAPE_INPUT, candidatesTokenCount: i + 1, totalTokenCount: SHAPE_INPUT + i + 1 },
    modelVersion: "gemini-2.5-flash",
    responseId: "mVjWaKSYJqGn1dkP8qjY4A4",
  })}\r\n\r\n`;
  return Array.from({ length: n }, (_, i) => chunk(i, i === n - 1));
}

/** The events' sizes, bytes: [min, median, max] of the token events. */
function eventSizes(shape) {
  const sizes = shapeEvents(shape, 50).map((e) => Buffer.byteLength(e)).slice(shape === "gemini" ? 0 : 3, 50);
  return [Math.min(...sizes), median(sizes), Math.max(...sizes)];
}

async function shapeOrigin() {
  const cache = new Map();
  const server = createServer(async (req, res) => {
    for await (const _ of req);
    const shape = req.url.split("/")[1];
    const n = Number(req.headers["x-tokens"] ?? 300);
    const key = `${shape}/${n}`;
    if (!cache.has(key)) cache.set(key, shapeEvents(shape, n));
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const event of cache.get(key)) {
      res.write(event);
      await wait(SHAPE_SPACING_MS);
    }
    res.end();
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

/** Every (shape, rule) cell's rule, on its own path; none for the floor. */
function shapeRules() {
  const rules = [];
  for (const shape of SHAPES) {
    const at = (name) => ({ ...base, name: `${shape}-${name}`, path: `/${shape}/${name}`, limits: [{ requests: 1_000_000_000, window: "1h" }] });
    rules.push({ ...at("response"), counting: { mode: "response", statuses: [200], reservation_ttl: "10m" } });
    const metering = { usage: shape, reserve: 2000, max: 2000 };
    rules.push({ ...at("usage"), counting: { mode: "response", reservation_ttl: "10m" }, metering });
    rules.push({ ...at("cut"), counting: { mode: "response", reservation_ttl: "10m" }, metering: { ...metering, cut: true } });
  }
  return rules;
}

const shapeEnds = { openai: "data: [DONE]\n\n", anthropic: '{"type":"message_stop"}\n\n', gemini: '"finishReason":"STOP"' };

async function shapeAnswer(tg, shape, rule, client, n) {
  const t0 = performance.now();
  const res = await tg.fetch(`/${shape}/${rule}`, {
    method: "POST",
    body: '{"stream":true,"stream_options":{"include_usage":true},"max_tokens":2000}',
    headers: { "x-client": `c${client}`, "x-tokens": String(n), "content-type": "application/json" },
  });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let ttfb = null;
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    ttfb ??= performance.now() - t0;
    text = (text + decoder.decode(value, { stream: true })).slice(-4096);
  }
  return { ok: res.status === 200 && text.includes(shapeEnds[shape]), ttfb };
}

async function shapeLoad(tg, shape, rule, n, ms) {
  const until = Date.now() + ms;
  const ttfbs = [];
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      while (Date.now() < until) {
        const a = await shapeAnswer(tg, shape, rule, client, n);
        if (a.ok) ttfbs.push(a.ttfb);
      }
    }),
  );
  return ttfbs;
}

/** bench/profile.mjs's interval: the 2.5th and 97.5th percentiles of the
 * medians of 2,000 resamples of the rounds (fixed seed). */
function interval(values) {
  let seed = 1;
  const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
  const medians = Array.from({ length: 2000 }, () => median(values.map(() => values[Math.floor(random() * values.length)])));
  medians.sort((x, y) => x - y);
  return [medians[50], medians[1949]];
}

/** One tollgate for phase 3 (its entry: this build's unless `scriptPath`). */
function startShapes(origin, scriptPath) {
  const config = { rules: shapeRules(), ...(process.env.MEMORY_BUDGET ? { memory_budget: Number(process.env.MEMORY_BUDGET) } : {}) };
  return launch({ config, vars: { UPSTREAM: origin.url }, workerOptions: { outboundService: undefined }, admin: false, ...(scriptPath ? { scriptPath } : {}) });
}

// AB_ENTRY=path (relative to the repo): a second tollgate from that entry
// in its own workerd (another build: a copy of another commit's build/ and
// src/entry.mjs under the repo, e.g. bench/tmp/ab/), every cell run on
// both in each round, which goes first alternating; shapesAbReport gives
// the paired difference round by round, this build − that one (two runs
// of the same code drift apart by more than one run's intervals).
async function shapesPhase(secondsPerCell, roundCount) {
  const origin = await shapeOrigin();
  const me = await startShapes(origin);
  const other = process.env.AB_ENTRY ? await startShapes(origin, join(ROOT, process.env.AB_ENTRY)) : null;
  const systems = other ? [me, other] : [me];
  const cellsOf = new Map();
  const list = [];
  for (const shape of SHAPES) for (const rule of SHAPE_RULES) for (const n of SHAPE_TOKENS) list.push({ shape, rule, n, cpu: [], cpuOther: [], ttfbs: [] });
  for (const c of list) cellsOf.set(`${c.shape}/${c.rule}/${c.n}`, c);
  // A warm-up that serves nothing (a config the Worker refused, an origin
  // gone) stops the run rather than fill its tables with nothing.
  for (const sys of systems) for (const c of list) {
    if ((await shapeLoad(sys.tg, c.shape, c.rule, c.n, 300)).length === 0) {
      console.error(`stream.mjs: ${c.shape}/${c.rule}/${c.n} served no complete answer in its warm-up: ${sys.tg.logs().split("\n").filter((l) => l.trim()).slice(-3).join(" | ")}`);
      process.exit(2);
    }
  }
  for (let r = 0; r < roundCount; r++) {
    const order = list.map((_, i) => list[(i + r * 5) % list.length]);
    for (const c of r % 2 ? order.reverse() : order) {
      const runs = other ? [[me, c.cpu], [other, c.cpuOther]] : [[me, c.cpu]];
      for (const [sys, into] of r % 2 ? runs.reverse() : runs) {
        // PERF_RULE=rule: `perf record` of the workerd while that rule's
        // longest answers run (the first round), to bench/tmp/perf.RULE.SHAPE.data.
        const perf = sys === me && r === 0 && c.rule === process.env.PERF_RULE && c.n === Math.max(...SHAPE_TOKENS) ? spawn("perf", ["record", "-g", "-o", `bench/tmp/perf.${c.rule}.${c.shape}.data`, "-p", sys.pid, "--", "sleep", String(secondsPerCell)], { stdio: "ignore" }) : null;
        const t0 = cpuUs(sys.pid);
        const ttfbs = await shapeLoad(sys.tg, c.shape, c.rule, c.n, secondsPerCell * 1_000);
        if (perf) await new Promise((r) => perf.on("exit", r));
        await wait(150);
        into.push((cpuUs(sys.pid) - t0) / ttfbs.length);
        if (sys === me) c.ttfbs.push(...ttfbs);
      }
    }
  }
  for (const sys of systems) {
    await sys.tg.dispose();
    sys.tg.cleanup();
  }
  await origin.close();
  return cellsOf;
}

// Phase 3's paired figures, per round, from the cells' `field` (`cpu`, or
// `cpuOther`: the AB_ENTRY build's): what `rule` adds per event over `base`
// (the slope between the two answer lengths), and over the floor at the
// longer answer; shown as a median and its 95% interval.
const shapeCell = (cellsOf, shape, rule, n) => cellsOf.get(`${shape}/${rule}/${n}`);
function shapeSlope(cellsOf, field, shape, rule, base) {
  const [nLo, nHi] = SHAPE_TOKENS;
  const at = (r, n) => shapeCell(cellsOf, shape, r, n)[field];
  return at(rule, nLo).map((_, i) => (at(rule, nHi)[i] - at(base, nHi)[i] - (at(rule, nLo)[i] - at(base, nLo)[i])) / (nHi - nLo));
}
function shapeAdded(cellsOf, field, shape, rule) {
  const nHi = SHAPE_TOKENS[1];
  const floor = shapeCell(cellsOf, shape, "floor", nHi)[field];
  return shapeCell(cellsOf, shape, rule, nHi)[field].map((x, i) => x - floor[i]);
}
function withInterval(values) {
  const [a, b] = interval(values);
  return `${f1(median(values))} (${f1(a)} – ${f1(b)})`;
}

/** With AB_ENTRY: per (shape, rule), this build against the other, round by
 * round: µs per event over `response` and µs added over the floor at the
 * longer answer, each build's median and the paired difference's, with a
 * 95% interval. */
function shapesAbReport(cellsOf, p) {
  const [nLo, nHi] = SHAPE_TOKENS;
  p(`## This build against \`${process.env.AB_ENTRY}\`, paired`);
  p();
  p(`Both in their own workerd, each cell run on both in every round (which first alternating). Per event: the slope over \`response\` between ${nLo} and ${nHi} tokens; added: over the floor at ${nHi} tokens. This − that: the median of the round-by-round differences, with its 95% interval.`);
  p();
  p("| shape | rule | µs per event, this | that | this − that | µs added at " + nHi + ", this | that | this − that |");
  p("|---|---|---|---|---|---|---|---|");
  for (const shape of SHAPES) {
    for (const rule of SHAPE_RULES.filter((r) => r !== "floor" && r !== "response")) {
      const [s1, s2] = ["cpu", "cpuOther"].map((field) => shapeSlope(cellsOf, field, shape, rule, "response"));
      const [a1, a2] = ["cpu", "cpuOther"].map((field) => shapeAdded(cellsOf, field, shape, rule));
      p(`| ${shape} | ${rule} | ${f1(median(s1))} | ${f1(median(s2))} | ${withInterval(s1.map((x, i) => x - s2[i]))} | ${f0(median(a1))} | ${f0(median(a2))} | ${withInterval(a1.map((x, i) => x - a2[i]))} |`);
    }
  }
  p();
}

function shapesReport(cellsOf, p, secondsPerCell, roundCount) {
  const [nLo, nHi] = SHAPE_TOKENS;
  p("## Provider shapes: one event per token");
  p();
  p(`Phase 3: one workerd (the built Worker, SQLite objects) with one rule per (shape, rule) on its own path, in front of a local origin streaming one event per token, each written on its own ${SHAPE_SPACING_MS} ms apart: OpenAI Chat Completions chunks (\`chat.completion.chunk\` with \`usage: null\` and \`obfuscation\`, then the finish chunk, the \`include_usage\` chunk and \`[DONE]\`), Anthropic Messages (\`message_start\`, \`content_block_start\`, \`ping\`, one \`content_block_delta\` per token, \`content_block_stop\`, \`message_delta\`, \`message_stop\`), Gemini \`alt=sse\` (CRLF-framed, \`usageMetadata\` running totals in every chunk, \`finishReason\` in the last). Token events of ${SHAPES.map((s) => `${s} ${eventSizes(s).join("/")} `).join(", ")}bytes (min/median/max). ${nLo} and ${nHi} output tokens (${SHAPE_INPUT} input). ${CLIENTS} clients, each its own key, closed loop; ${roundCount} rounds of ${secondsPerCell} s per cell, in a rotating order. CPU is the workerd's per answer (its threads' time on a CPU, /proc/PID/task/*/schedstat): the Worker and its objects${DIRECT ? ", the clients on the Worker's own socket (Miniflare's direct socket: no entry Worker)" : " and Miniflare's own entry, which production does not have and which costs each cell for every chunk it forwards"}.`);
  p();
  p("| rule | what |");
  p("|---|---|");
  p("| floor | a path no rule matches: the answer forwarded as is |");
  p("| response | `counting = { mode = \"response\", statuses = [200] }`: reserve 1, commit at the status; the body not read |");
  p("| usage | `metering = { usage = SHAPE, reserve = 2000, max = 2000 }`: the stream read, its usage committed |");
  p("| cut | the same with `cut = true` (never past its reserve: nothing cut; the client gets no byte before the reader has seen it) |");
  p();
  p(`| shape | rule | CPU µs per answer, ${nLo} tokens | CPU µs per answer, ${nHi} | added over floor at ${nHi}, µs (95% interval) | µs per event over floor (95% interval) | µs per event over response (95% interval) | time to first byte, ms (median, p90; ${nLo}) | fits Free's 10 ms at ${nHi} |`);
  p("|---|---|---|---|---|---|---|---|---|");
  const json = {};
  for (const shape of SHAPES) {
    for (const rule of SHAPE_RULES) {
      const [lo, hi] = [shapeCell(cellsOf, shape, rule, nLo), shapeCell(cellsOf, shape, rule, nHi)];
      const slopeOver = (base) => withInterval(shapeSlope(cellsOf, "cpu", shape, rule, base));
      const added = shapeAdded(cellsOf, "cpu", shape, rule);
      const fits = rule === "floor" ? "–" : interval(added)[1] <= FREE_CPU_US ? "yes" : "no";
      const cells = rule === "floor" ? ["–", "–", "–"] : [withInterval(added), slopeOver("floor"), rule === "response" ? "–" : slopeOver("response")];
      p(`| ${shape} | ${rule} | ${f0(median(lo.cpu))} | ${f0(median(hi.cpu))} | ${cells.join(" | ")} | ${f2(median(lo.ttfbs))}, ${f2(quantile(lo.ttfbs, 0.9))} | ${fits} |`);
      json[`${shape}/${rule}`] = { cpuLo: lo.cpu, cpuHi: hi.cpu, ttfbMedian: median(lo.ttfbs), answers: lo.ttfbs.length + hi.ttfbs.length };
    }
  }
  p();
  p(`"fits": the upper end of the 95% interval of what the rule adds over the floor at ${nHi} tokens is at most 10 ms (Workers Free's CPU per request; a request no rule matches costs the Worker itself little: its body is the runtime's own stream). Paired: round by round, the same round's floor (or response) cell subtracted. Per event: the slope between ${nLo} and ${nHi} tokens, so per-answer costs (the object calls) cancel.`);
  return json;
}

// ---- phase 1 --------------------------------------------------------------

const startedAt = new Date();
const load0 = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
if (shapesOnly) await shapesAlone();
const origin = await llmOrigin();
const names = Object.keys(SYSTEMS);
const systems = [];
for (const name of names) systems.push(await start(name, origin));
for (const sys of systems) for (const k of KS) await load(sys, k, 600);
const cells = [];
for (const sys of systems) for (const k of KS) cells.push({ sys, k, cpu: [], ttfbMedian: [], ttfbs: [], aps: [] });
const SEQUENTIAL = 20;
const alone = new Map(systems.map((s) => [s.name, { ttfbMedian: [], ttfbs: [] }]));
const cellOf = (name, k) => cells.find((c) => c.sys.name === name && c.k === k);
const ownUs = () => {
  const me = process.cpuUsage();
  return me.user + me.system + systems.reduce((s, x) => s + cpuUs(x.pid), 0);
};
const phase1 = { busy0: machineBusyUs(), own0: ownUs(), t0: performance.now() };
for (let r = 0; r < rounds; r++) {
  // Rotate the order each round, and reverse every other one.
  const order = cells.map((_, i) => cells[(i + r * 3) % cells.length]);
  for (const cell of r % 2 ? order.reverse() : order) {
    const t0 = cpuUs(cell.sys.pid);
    const { served, ttfbs } = await load(cell.sys, cell.k, seconds * 1_000);
    await wait(200); // the commit after the answer's end
    cell.cpu.push((cpuUs(cell.sys.pid) - t0) / served);
    cell.ttfbMedian.push(median(ttfbs));
    cell.ttfbs.push(...ttfbs);
    cell.aps.push(served / seconds);
  }
  for (const sys of r % 2 ? [...systems].reverse() : systems) {
    const ttfbs = await sequential(sys, kLo, SEQUENTIAL);
    alone.get(sys.name).ttfbMedian.push(median(ttfbs));
    alone.get(sys.name).ttfbs.push(...ttfbs);
  }
}
const elapsedUs = (performance.now() - phase1.t0) * 1_000;
const othersShare = (machineBusyUs() - phase1.busy0 - (ownUs() - phase1.own0)) / (elapsedUs * cpus().length);
const logLines = Object.fromEntries(systems.map((s) => [s.name, s.tg.logs().split("\n").filter((l) => l.trim()).length]));
for (const sys of systems) {
  await sys.tg.dispose();
  sys.tg.cleanup();
}

// ---- phase 2: object calls and rows ---------------------------------------

const METERED_MS = 2_000;
const meterBy = {};
for (const name of names) {
  const sys = await start(name, origin, { meter: true });
  await load(sys, kHi, 500); // the keys' objects made, their tables created
  await wait(200);
  const before = await meterTotals(sys);
  const { served } = await load(sys, kHi, METERED_MS);
  await wait(300);
  const after = await meterTotals(sys);
  const d = Object.fromEntries(Object.keys(after).map((f) => [f, after[f] - before[f]]));
  meterBy[name] = { ...d, answers: served, fields: sys.fields, statuses: sys.statuses };
  await sys.tg.dispose();
  sys.tg.cleanup();
}
await origin.close();
const shapeCells = await shapesPhase(shapeSeconds, shapeRounds);
const load1 = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

// ---- results --------------------------------------------------------------

function cpuModelOf() {
  try {
    return execFileSync("lscpu").toString().match(/Model name:\s*(.+)/)?.[1]?.trim() ?? cpus()[0].model;
  } catch {
    return cpus()[0].model;
  }
}
function commitOf() {
  try {
    return execFileSync("git", ["-C", ROOT, "rev-parse", "--short", "HEAD"]).toString().trim();
  } catch {
    return "?";
  }
}
const cpuModel = cpuModelOf();
const commit = commitOf();
/** Phase 3 alone (`--shapes-only`): its table, as the full run prints it,
 * with the run's line; written to bench/tmp/RESULTS.shapes.md. */
async function shapesAlone() {
  const busy0 = machineBusyUs();
  const t0 = performance.now();
  const shapeCells = await shapesPhase(shapeSeconds, shapeRounds);
  const others = (machineBusyUs() - busy0) / ((performance.now() - t0) * 1_000 * cpus().length);
  const out = [];
  const p = (s = "") => out.push(s);
  p("# Streamed LLM answers through tollgate: provider shapes alone");
  p();
  const env = ["SHAPE_TOKENS", "SHAPE_SPACING_MS", "MEMORY_BUDGET", "ENTRY", "SHAPES", "SHAPE_RULES", "AB_ENTRY"].filter((k) => process.env[k]).map((k) => `${k}=${process.env[k]} `).join("");
  p(`\`${env}node bench/stream.mjs --shapes-only ${shapeSeconds} ${shapeRounds}\` on ${commitOf()}, ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC. Machine: ${cpus().length} vCPUs (\`nproc\`), ${cpuModelOf()}; load average ${load0} before, ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")} after; the whole machine (this run included) was ${(others * 100).toFixed(0)} % busy.`);
  p();
  shapesReport(shapeCells, p, shapeSeconds, shapeRounds);
  if (process.env.AB_ENTRY) {
    p();
    shapesAbReport(shapeCells, p);
  }
  const text = out.join("\n") + "\n";
  console.log(text);
  mkdirSync(join(ROOT, "bench", "tmp"), { recursive: true });
  writeFileSync(join(ROOT, "bench", "tmp", "RESULTS.shapes.md"), text);
  process.exit(0);
}

const pairedBy = (a, b) => median(a.map((x, i) => x - b[i]));
const paired = (a, b, k, field) => pairedBy(cellOf(a, k)[field], cellOf(b, k)[field]);
// a − b's per-chunk slope in each round (its two K cells' differences),
// for an interval over rounds.
const roundSlopes = (a, b) => {
  const at = (name, k) => cellOf(name, k).cpu;
  return at(a, kLo).map((_, i) => (at(a, kHi)[i] - at(b, kHi)[i] - (at(a, kLo)[i] - at(b, kLo)[i])) / (kHi - kLo));
};
const out = [];
const p = (s = "") => out.push(s);
p("# Streamed LLM answers through tollgate (issues 37, 51)");
p();
p(`\`node bench/stream.mjs ${seconds} ${rounds} ${shapeSeconds} ${shapeRounds}\` on ${commit}, ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC. Machine: ${cpus().length} vCPUs (\`nproc\`), ${cpuModel}; load average ${load0} before, ${load1} after; other processes used ${(othersShare * 100).toFixed(0)} % of the machine during phase 1.`);
p();
p(`Each system in its own workerd (the built Worker, SQLite objects, tests/worker/harness.mjs) in front of one local HTTP origin (node:http, the network edge) streaming K text events of about 60 bytes (OpenAI style: \`data: {"choices":[{"index":0,"delta":{"content":"w012 "}}]}\`; Anthropic style: \`event: content_block_delta\` lines, about 120 bytes), each written on its own ${SPACING_MS} ms apart, then the usage (OpenAI: the \`stream_options.include_usage\` final chunk, then \`data: [DONE]\`; Anthropic: \`message_start\` input, \`message_delta\` cumulative output, \`message_stop\`): 300 tokens an answer. ${CLIENTS} clients, each its own key, closed loop; ${rounds} rounds of ${seconds} s per (system, K), cells interleaved in a rotating order. CPU: the workerd process's threads' time on a CPU per answer (/proc/PID/task/*/schedstat: the Worker and its objects${DIRECT ? ", reached on its own socket" : ", Miniflare's entry"}; not the origin or the client). Time to first byte: client-side, the request sent → first body chunk read. The client read ${KS.map((k) => `${f1(median(systems.flatMap((s) => s.chunksSeen.filter((c) => c.k === k).map((c) => c.chunks))))} body chunks per answer at K=${k}`).join(", ")} (medians; the origin writes K + 2 or K + 3 events): the events stay apart, mostly.`);
p();
p("| rule | what |");
p("|---|---|");
p("| floor | a rule on another path: nothing matches, the answer forwarded as is |");
p("| plain | a request-counted rule on the path (`gcra`, `lease = \"off\"`): one object call before forwarding, no body reading |");
p("| response | `counting = { mode = \"response\", statuses = [200] }`, no metering: a unit reserved before forwarding, committed once the status is known: the same object calls as usage, no body reading |");
p("| usage | `counting = { mode = \"response\" }`, `metering = { usage = \"openai\", reserve = 1000, max = 1000 }`: reserve 1,000, read the stream, commit the final chunk's 300 |");
p("| plain-a | as plain, on the Anthropic-style stream |");
p("| cut | `metering = { usage = \"anthropic\", reserve = 1000, max = 1000, cut = true }` on the Anthropic-style stream (300 < reserve: never cut) |");
p();
p("## CPU per answer and per streamed chunk");
p();
p("µs per answer (workerd), median of rounds, the rounds in brackets:");
p();
p(`| rule | K=${kLo} | K=${kHi} | answers/s K=${kHi} |`);
p("|---|---|---|---|");
for (const name of names) {
  const [lo, hi] = [cellOf(name, kLo), cellOf(name, kHi)];
  p(`| ${name} | ${f0(median(lo.cpu))} (${lo.cpu.map(f0).join(" ")}) | ${f0(median(hi.cpu))} (${hi.cpu.map(f0).join(" ")}) | ${f0(median(hi.aps))} |`);
}
p();
p(`Paired: the median of the round-by-round differences (a − b, same round). Per chunk: (a − b at K=${kHi} − a − b at K=${kLo}) ÷ ${kHi - kLo}, what each more chunk costs (of the medians; then the median of each round's own slope with a 95% bootstrap interval over the rounds); and the issue's simpler (a − b at K=${kHi}) ÷ ${kHi}, an upper bound (it spreads the per-answer costs, the second object call among them, over the chunks).`);
p();
p(`| a − b | K=${kLo} µs | K=${kHi} µs | µs per chunk (slope) | µs per chunk, round by round (95% interval) | µs per chunk (÷ ${kHi}) |`);
p("|---|---|---|---|---|---|");
for (const [a, b] of PAIRS) {
  const [dLo, dHi] = [paired(a, b, kLo, "cpu"), paired(a, b, kHi, "cpu")];
  p(`| ${a} − ${b} | ${f0(dLo)} | ${f0(dHi)} | ${f2((dHi - dLo) / (kHi - kLo))} | ${withInterval(roundSlopes(a, b))} | ${f2(dHi / kHi)} |`);
}
p();
p("## Time to first byte");
p();
p(`ms, client-side, the request sent → first body chunk read. Alone: one client, ${SEQUENTIAL} answers one after another (K=${kLo}) per system per round, no queueing. Under load: every answer of the CPU rounds (${CLIENTS} clients, closed loop: queueing included, so a system that takes more CPU also waits more). Added: the median of the paired round medians' differences.`);
p();
p(`| rule | alone median | alone p90 | under load K=${kHi} median | p90 | answers |`);
p("|---|---|---|---|---|---|");
for (const name of names) {
  const [a, hi] = [alone.get(name), cellOf(name, kHi)];
  p(`| ${name} | ${f2(median(a.ttfbs))} | ${f2(quantile(a.ttfbs, 0.9))} | ${f2(median(hi.ttfbs))} | ${f2(quantile(hi.ttfbs, 0.9))} | ${a.ttfbs.length} + ${hi.ttfbs.length + cellOf(name, kLo).ttfbs.length} |`);
}
p();
p(`| a − b | added alone | added under load K=${kLo} | added under load K=${kHi} |`);
p("|---|---|---|---|");
for (const [a, b] of PAIRS) {
  p(`| ${a} − ${b} | ${f2(pairedBy(alone.get(a).ttfbMedian, alone.get(b).ttfbMedian))} | ${f2(paired(a, b, kLo, "ttfbMedian"))} | ${f2(paired(a, b, kHi, "ttfbMedian"))} |`);
}
p();
p("## Object calls, rows, dollars");
p();
p(`Phase 2: each system again with a pass-through proxy in front of the limiter that counts the Worker's calls and reads each reply's \`rows_read\` / \`rows_written\` (the object's SQL cursor counts) and \`alarm_set\`; the same load as phase 1 (${CLIENTS} clients, K=${kHi}) for ${METERED_MS / 1000} s after 0.5 s unmeasured (${names.map((n) => meterBy[n].answers).join(", ")} answers). $ per million answers: bench/prices.mjs's \`costPerMillion\` with phase 1's CPU at K=50 and the console lines the Worker printed in phase 1 (${names.map((n) => `${n} ${logLines[n]}`).join(", ")} over the whole phase). Each \`setAlarm\` is billed as a row written; "$ per million answers" counts no alarm run (a key's next call moves its alarm, which runs once after the key's last call: per busy key, next to nothing per answer), "$ if every alarm set fires" prices one run per alarm set (bench/prices.mjs's assumption, an upper bound). Workers Logs at \`head_sampling_rate = 1\` (prices.mjs's), one execution log per Worker request and object call.`);
p();
p("| rule | object calls per answer | rows written per call | rows read per call | alarms set per answer | $ per million answers | $ if every alarm set fires | of which object requests + duration | of which CPU | statuses |");
p("|---|---|---|---|---|---|---|---|---|---|");
const json = { seconds, rounds, ks: KS, spacingMs: SPACING_MS, othersShare, load: [load0, load1], cells: {}, meter: meterBy, cost: {} };
for (const name of names) {
  const m = meterBy[name];
  const answers = m.answers;
  const cpu = median(cellOf(name, kHi).cpu);
  const served = cells.filter((c) => c.sys.name === name).reduce((s, c) => s + c.ttfbs.length, 0);
  const measured = {
    cpuUs: cpu,
    objectCalls: m.calls / answers,
    alarmsSet: m.alarmsSet / answers,
    rowsWritten: m.rowsWritten / answers,
    rowsRead: m.rowsRead / answers,
    logLines: logLines[name] / served,
    logBytes: 0,
  };
  // Each alarm set runs once later (bench/prices.mjs's assumption), or is
  // moved by the key's next call and runs once after its last: its write
  // billed, its run not.
  const fires = costPerMillion(measured);
  const moved = costPerMillion({ ...measured, alarmsSet: 0, rowsWritten: measured.rowsWritten + measured.alarmsSet });
  json.cost[name] = { measured, fires, moved };
  const perCall = (x) => (m.calls ? f2(x / m.calls) : "–");
  p(`| ${name} | ${f2(m.calls / answers)} | ${perCall(m.rowsWritten)} | ${perCall(m.rowsRead)} | ${f2(m.alarmsSet / answers)} | ${moved.total.toFixed(2)} | ${fires.total.toFixed(2)} | ${(moved.usd.objectRequests + moved.usd.objectDuration).toFixed(2)} | ${moved.usd.workersCpu.toFixed(3)} | ${JSON.stringify(m.statuses)} |`);
}
for (const c of cells) json.cells[`${c.sys.name}/${c.k}`] = { cpuUs: c.cpu, ttfbMedianMs: c.ttfbMedian, answersPerSecond: c.aps, statuses: c.sys.statuses };
for (const [name, a] of alone) json.cells[`${name}/alone`] = { ttfbMedianMs: a.ttfbMedian };
p();
p("## The RateLimit fields as sent");
p();
p("The first answer's `RateLimit-Policy` and `RateLimit` (`ratelimit_headers = true`):");
p();
p("| rule | RateLimit-Policy | RateLimit |");
p("|---|---|---|");
for (const name of names) {
  const f = meterBy[name].fields ?? {};
  p(`| ${name} | \`${f.policy ?? "(none)"}\` | \`${f.ratelimit ?? "(none)"}\` |`);
}
p();
p("A usage rule's quota is in tokens, and its policy item says so with `qu=\"tokens\"` (draft-ietf-httpapi-ratelimit-headers §3.1.2; the provider sources' unit, src/config/cost.rs `Usage::unit`); a request-counted rule's items carry no `qu` (the draft's default, requests).");
p();
json.shapes = shapesReport(shapeCells, p, shapeSeconds, shapeRounds);
if (process.env.AB_ENTRY) {
  p();
  shapesAbReport(shapeCells, p);
}
const text = out.join("\n") + "\n";
console.log(text);
writeFileSync(join(ROOT, "bench", "RESULTS.stream.md"), text);
mkdirSync(join(ROOT, "bench", "tmp"), { recursive: true });
writeFileSync(join(ROOT, "bench", "tmp", "stream.json"), JSON.stringify(json, null, 2));
process.exit(0);
