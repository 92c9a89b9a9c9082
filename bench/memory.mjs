// What tollgate makes workerd hold (issue 52): workerd's RSS before, at the
// peak of, and after each scenario, in one run (Linux only; loopback only).
//
//   node --max-http-header-size=131072 bench/memory.mjs [scenario...]
//
// Scenarios (all by default):
//   uploads       six stalled uploads at the largest upload_buffer the
//                 default budget allows (failures-only rule)
//   uploads-max   the same at the largest budget (64 MiB)
//   bodies        30 clients stalling 1 MiB − 1 KiB into a 1 MiB body read
//                 (`body:` key, body_limit = 1 MiB), then nothing
//   bodies-none   the same on a path no rule reads
//   json          40 JSON answers of ~1 MiB in flight (not read by the
//                 client) through `metering = { usage = "openai" }`
//   json-slot     the same through a concurrency rule (the answer watched
//                 as a usage rule's is, nothing read)
//   json-none     the same through a rule that reads no body
//   together      uploads (4 MiB), body reads and JSON answers at once
//   relay         four clients' WebSocket sessions through a concurrency
//                 rule, each sending 1 MiB messages (MESSAGES, 8 by
//                 default) to an origin that never reads (memory_budget
//                 64 MiB: a client's 16 MiB holds 8 MiB of messages)
//
// Each scenario starts its own workerd; its RSS is read from /proc.
import http from "node:http";
import { withTollgate, sleep } from "../tests/worker/harness.mjs";
import { config, rule, limit } from "../tests/worker/builders.mjs";
import { rssMb } from "./procs.mjs";
import { frame, rawClient, rawOrigin } from "../tests/worker/websocket-frames.mjs";

const MIB = 1_048_576;
/** Headers at once, `first` bytes, then nothing until `stop()`. */
function stalled(base, path, { ip, length, sent, headers = {} }) {
  const req = http.request(new URL(path, base), { method: "POST", headers: { "cf-connecting-ip": ip, "content-length": String(length), ...headers } });
  const response = new Promise((resolve) => {
    req.on("response", (res) => { res.resume(); resolve(res.statusCode); });
    req.on("error", () => resolve("closed"));
    req.on("close", () => resolve("closed"));
  });
  req.flushHeaders();
  req.write(Buffer.alloc(sent, "x"));
  return { response, stop: () => req.destroy() };
}

/** Polls RSS every 250 ms for `ms`: the peak. */
async function peakOver(ms) {
  let peak = 0;
  for (const end = Date.now() + ms; Date.now() < end; await sleep(250)) peak = Math.max(peak, rssMb());
  return peak;
}

async function measure(name, start, holdMs) {
  const cfg = start.config;
  const result = { name };
  const origin = start.origin ? await start.origin() : null;
  try {
    await withTollgate({ admin: false, config: cfg, ...(start.tollgate ?? {}), ...(origin ? { vars: { UPSTREAM: origin.url }, workerOptions: { outboundService: undefined } } : {}) }, async (tg) => {
      const base = await tg.mf.ready;
      // Warm: the Worker's isolate loaded, a few requests served.
      for (let i = 0; i < 5; i++) await (await tg.fetch("/warm")).arrayBuffer();
      await sleep(1000);
      result.before = rssMb();
      const load = await start.run(base, tg);
      result.peak = await peakOver(holdMs);
      result.outcome = await load.stop();
      await sleep(3000);
      result.after = rssMb();
    });
  } finally {
    if (origin) await origin.close();
  }
  result.growth = result.peak - result.before;
  console.log(JSON.stringify({ ...result, before: +result.before.toFixed(1), peak: +result.peak.toFixed(1), after: +result.after.toFixed(1), growth: +result.growth.toFixed(1) }));
}

const quota = (budget, buffer) => ({
  ...config(rule("quota", "/up/*", { key: ["ip"], limits: limit(100, "1d"), counting: { mode: "response", statuses: [401], upload_buffer: buffer, upload_timeout: "60s" } })),
  // upload_budget: the older name of memory_budget, so that the same
  // script runs on a build from before it.
  ...(budget ? { upload_budget: budget } : {}),
});

function uploads(budget, buffer) {
  return {
    config: quota(budget, buffer),
    run: async (base) => {
      // LENGTH: bodies of another size than the buffer (over it: they stream).
      const length = Number(process.env.LENGTH ?? buffer);
      const list = Array.from({ length: Number(process.env.COUNT ?? 6) }, (_, i) => stalled(base, "/up/x", { ip: `198.51.100.${i + 1}`, length, sent: length - 1024, headers: { "content-type": "application/json" } }));
      return { stop: async () => { list.forEach((u) => u.stop()); return (await Promise.all(list.map((u) => u.response))).join(","); } };
    },
  };
}

function bodies(path) {
  return {
    config: { ...config(rule("by-user", "/read/*", { key: ["body:user"], limits: limit(100, "1m") })), body_limit: MIB, ...(process.env.BUDGET ? { memory_budget: Number(process.env.BUDGET) } : {}) },
    run: async (base) => {
      const list = Array.from({ length: Number(process.env.COUNT ?? 30) }, (_, i) => stalled(base, path, { ip: `203.0.113.${i + 1}`, length: MIB, sent: MIB - 1024, headers: { "content-type": "application/json" } }));
      return { stop: async () => { list.forEach((u) => u.stop()); return (await Promise.all(list.map((u) => u.response))).join(","); } };
    },
  };
}

/** An origin answering every request with ~1 MiB of OpenAI-shaped JSON. */
async function jsonOrigin() {
  const text = "x".repeat(MIB - 200);
  const body = JSON.stringify({ choices: [{ message: { content: text } }], usage: { prompt_tokens: 1, completion_tokens: 9, total_tokens: 10 } });
  const server = http.createServer(async (req, res) => {
    try {
      for await (const _ of req);
    } catch {
      return; // an upload whose client went away
    }
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

function json(kind) {
  const reads = kind === "usage" ? { metering: { usage: "openai", reserve: 10, max: 10 }, counting: { mode: "response" } } : {};
  const held = kind === "slot" ? { concurrency: 1000, idle_release: "60s" } : {};
  const fields = { key: ["header:x-tenant"], limits: limit(1e9, "1d"), ...reads, ...held };
  return {
    config: config(rule("ai", "/v1/*", fields)),
    origin: jsonOrigin,
    run: async (base) => {
      // 40 answers in flight: their bodies not read by the client.
      const list = Array.from({ length: 40 }, (_, i) => new Promise((resolve) => {
        const req = http.request(new URL("/v1/chat", base), { method: "POST", headers: { "x-tenant": `t${i}`, "cf-connecting-ip": `192.0.2.${i + 1}` } }, (res) => {
          res.pause();
          resolve({ res, status: res.statusCode });
        });
        req.on("error", () => resolve({ status: "error" }));
        req.end("{}");
      }));
      const answers = await Promise.all(list);
      return { stop: async () => { answers.forEach((a) => a.res?.destroy()); return answers.map((a) => a.status).join(","); } };
    },
  };
}

/** Uploads, body reads and JSON answers at once, in one isolate (one budget for the first two). */
function together() {
  const up = uploads(undefined, 4 * MIB);
  const rd = bodies("/read/x");
  const js = json("usage");
  const rules = [...up.config.rules, ...rd.config.rules, ...js.config.rules];
  return {
    config: { ...rd.config, rules },
    origin: js.origin,
    run: async (base, tg) => {
      const loads = await Promise.all([up.run(base, tg), rd.run(base, tg), js.run(base, tg)]);
      return { stop: async () => (await Promise.all(loads.map((l) => l.stop()))).map((o) => o.slice(0, 40)).join(" | ") };
    },
  };
}

/** An app Worker whose WebSocket sessions never read (their messages wait in workerd); with READING=1, one that reads and drops every message. */
const STALLED_APP = `
export default {
  async fetch(request, env, ctx) {
    const [client, server] = Object.values(new WebSocketPair());
    if (${process.env.READING === "1"}) server.accept();
    else ctx.waitUntil(new Promise((r) => setTimeout(r, 120_000)).then(() => { server.accept(); server.close(1000, "late"); }));
    return new Response(null, { status: 101, webSocket: client });
  },
};`;

function relay() {
  const rules = [rule("ws", "/ws/*", { key: ["ip"], limits: limit(1e9, "1d"), concurrency: 100, reservation_ttl: "5m" })];
  // RAW_ORIGIN=1: the origin a raw server on loopback that never reads (its socket paused), not an app Worker.
  const raw = process.env.RAW_ORIGIN === "1";
  return {
    config: { ...(raw ? {} : { upstream: { service: "APP" } }), memory_budget: 64 * MIB, rules },
    ...(raw ? { origin: async () => rawOrigin(({ sock }) => sock.pause()) } : {}),
    tollgate: { services: { APP: "app" }, workers: [{ name: "app", modules: true, script: STALLED_APP, compatibilityDate: "2026-04-01" }] },
    run: async (base) => {
      // MSG_SIZE: another size than 1 MiB (0: empty messages, what each costs beyond its bytes).
      const messages = Number(process.env.MESSAGES ?? 8);
      const piece = Buffer.alloc(Number(process.env.MSG_SIZE ?? MIB), 7);
      const one = frame(2, piece, { mask: true });
      const round = async () => {
        const clients = await Promise.all(Array.from({ length: 4 }, (_, i) => rawClient(base, "/ws/x", { "cf-connecting-ip": `198.51.100.${i + 1}` })));
        for (const c of clients) for (let m = 0; m < messages; m += 1000) c.sock.write(Buffer.concat(Array(Math.min(1000, messages - m)).fill(one)));
        return clients;
      };
      // ROUNDS=n: n − 1 rounds first, each ended (closed by tollgate or not, the clients gone): is what they held given back?
      for (let r = 1; r < Number(process.env.ROUNDS ?? 1); r++) {
        const earlier = await round();
        await Promise.all(earlier.map((c) => Promise.race([c.frames.closed, sleep(10_000)])));
        earlier.forEach((c) => c.sock.destroy());
        await sleep(3000);
        console.log(JSON.stringify({ round: r, rss: +rssMb().toFixed(1) }));
      }
      const clients = await round();
      return {
        stop: async () => {
          const closed = await Promise.all(clients.map((c) => Promise.race([c.frames.closed, sleep(500).then(() => ["open"])])));
          clients.forEach((c) => c.sock.destroy());
          return closed.map((c) => c[0]).join(",");
        },
      };
    },
  };
}

const scenarios = {
  uploads: () => uploads(undefined, Number(process.env.BUFFER ?? 8 * MIB)),
  "uploads-max": () => uploads(64 * MIB, Number(process.env.BUFFER_MAX ?? 16 * MIB)),
  bodies: () => bodies("/read/x"),
  "bodies-none": () => bodies("/elsewhere"),
  json: () => json("usage"),
  "json-slot": () => json("slot"),
  "json-none": () => json("none"),
  together,
  relay,
};

const chosen = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(scenarios);
console.log(JSON.stringify({ machine: `${(await import("node:os")).cpus().length} cores`, load: (await import("node:os")).loadavg().map((l) => +l.toFixed(2)) }));
for (const name of chosen) await measure(name, scenarios[name](), Number(process.env.HOLD_MS ?? 8000));
