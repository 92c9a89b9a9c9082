// A V8 CPU profile of tollgate under one bench scenario, for finding where
// a request's CPU goes (not a benchmark: the profiler itself costs CPU).
//
//   node bench/profile.mjs [allowed|blocked|nonmatch|mix] [seconds] [tollgate|hono|floor]
//
// Runs build/ (build it with TOLLGATE_KEEP_NAMES=1 scripts/build to see
// Rust function names instead of wasm-function[N]) in its own Miniflare with
// the shipped config, the Limiter object SQLite-backed, the origin mocked by
// outboundService, and workerd's inspector on; drives the scenario over
// loopback with 8 keep-alive clients while the Profiler records, then prints
// the functions by self time and by total time, and writes the raw profile
// to bench/tmp/NAME.cpuprofile (loadable in Chrome DevTools).
import { Miniflare } from "miniflare";
import http from "node:http";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const scenarioName = process.argv[2] ?? "allowed";
const seconds = Math.min(Number(process.argv[3] ?? 5), 30);
// `hono`: peer A's bundle (bench/tmp/hono.bundle.mjs, made by scripts/bench);
// `floor`: the Rust floor (bench/workers/floor.mjs, built by scripts/bench).
const system = process.argv[4] ?? "tollgate";
const INSPECTOR = 9300 + Math.floor(Math.random() * 500);

const toml = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
const { parse } = await import("smol-toml").catch(() => ({ parse: null }));
if (!parse) throw new Error("smol-toml is needed (npm ci)");
const TOLLGATE = parse(toml).vars.TOLLGATE;

const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  inspectorPort: INSPECTOR,
  durableObjectsPersist: join(ROOT, "bench", "tmp", `profile-${process.pid}`),
  workers: [
    system === "floor" ? {
      name: "floor",
      modules: true,
      modulesRoot: ROOT,
      scriptPath: join(ROOT, "bench", "workers", "floor.mjs"),
      modulesRules: [
        { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      compatibilityDate: parse(toml).compatibility_date,
      durableObjects: { COUNTER: { className: "FloorCounter", useSQLite: true } },
      stripCfConnectingIp: false,
      outboundService: () => new Response("origin ok"),
    } : system === "hono" ? {
      name: "hono",
      modules: true,
      scriptPath: join(ROOT, "bench", "tmp", "hono.bundle.mjs"),
      compatibilityDate: parse(toml).compatibility_date,
      durableObjects: { CACHE: { className: "DurableObjectRateLimiter", useSQLite: true } },
      stripCfConnectingIp: false,
      outboundService: () => new Response("origin ok"),
    } : {
      name: "tollgate",
      modules: true,
      modulesRoot: ROOT,
      scriptPath: join(ROOT, "src", "entry.mjs"),
      modulesRules: [
        { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      compatibilityDate: parse(toml).compatibility_date,
      bindings: { TOLLGATE },
      durableObjects: { LIMITER: { className: "Limiter", useSQLite: true } },
      stripCfConnectingIp: false,
      outboundService: () => new Response("origin ok"),
    },
  ],
});
const base = new URL((await mf.ready).toString());

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
let n = 0;
function next() {
  const i = n++;
  const ip = (k) => `10.${(k >>> 16) & 255}.${(k >>> 8) & 255}.${k & 255}`;
  switch (scenarioName) {
    case "nonmatch":
      return { path: "/api/other?mode=light", ip: ip(i % 250) };
    case "blocked":
      return { path: "/api/example?mode=heavy", ip: "192.0.2.1", mark: "429" };
    case "mix": {
      const r = i % 10;
      if (r < 7) return { path: "/api/other?mode=light", ip: ip(i % 250) };
      if (r < 9) return { path: "/api/example?mode=heavy", ip: ip(100000 + Math.floor(i / 50)), mark: "count" };
      return { path: "/api/example?mode=heavy", ip: "192.0.2.1", mark: "429" };
    }
    default:
      return { path: "/api/example?mode=heavy", ip: ip(Math.floor(i / 10)), mark: "count" };
  }
}
const statuses = {};
function send() {
  const { path, ip, mark } = next();
  return new Promise((resolve) => {
    const req = http.request(
      { host: base.hostname, port: base.port, path, agent, headers: { "cf-connecting-ip": ip, ...(mark ? { "x-bench-floor": mark } : {}) } },
      (res) => {
        res.resume();
        res.on("end", () => {
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          resolve();
        });
      },
    );
    req.on("error", () => resolve());
    req.end();
  });
}
async function load(ms) {
  const until = Date.now() + ms;
  let sent = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (Date.now() < until && sent < 200_000) {
        sent++;
        await send();
      }
    }),
  );
  return sent;
}

// Warm up (and, for `blocked`, exhaust the one key), then profile.
await load(1000);
const targets = await (await fetch(`http://127.0.0.1:${INSPECTOR}/json/list`)).json();
const target = targets.find((t) => t.title?.includes(system)) ?? targets[0];
const ws = new WebSocket(target.webSocketDebuggerUrl);
await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
let id = 0;
const pending = new Map();
ws.on("message", (m) => {
  const msg = JSON.parse(m);
  if (msg.id && pending.has(msg.id)) {
    pending.get(msg.id)(msg);
    pending.delete(msg.id);
  }
});
const cdp = (method, params = {}) =>
  new Promise((r) => {
    pending.set(++id, r);
    ws.send(JSON.stringify({ id, method, params }));
  });
await cdp("Profiler.enable");
await cdp("Profiler.setSamplingInterval", { interval: 100 });
await cdp("Profiler.start");
for (const k of Object.keys(statuses)) delete statuses[k];
const served = await load(seconds * 1000);
const { result } = await cdp("Profiler.stop");
ws.close();
await mf.dispose();
agent.destroy();

const profile = result.profile;
mkdirSync(join(ROOT, "bench", "tmp"), { recursive: true });
const out = join(ROOT, "bench", "tmp", `${system}-${scenarioName}.cpuprofile`);
writeFileSync(out, JSON.stringify(profile));

// Self and total time per function name, from the samples.
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map();
for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
const counts = new Map();
for (const s of profile.samples) counts.set(s, (counts.get(s) ?? 0) + 1);
const total = profile.samples.length;
const self = new Map();
const incl = new Map();
const label = (node) => {
  const f = node.callFrame;
  const file = f.url ? f.url.split("/").pop() : "";
  return `${f.functionName || "(anonymous)"}${file ? ` ${file}` : ""}`;
};
for (const [nodeId, c] of counts) {
  const node = byId.get(nodeId);
  self.set(label(node), (self.get(label(node)) ?? 0) + c);
  const seen = new Set();
  for (let cur = nodeId; cur !== undefined; cur = parent.get(cur)) {
    const l = label(byId.get(cur));
    if (seen.has(l)) continue;
    seen.add(l);
    incl.set(l, (incl.get(l) ?? 0) + c);
  }
}
const pct = (c) => `${((100 * c) / total).toFixed(1).padStart(5)}%`;
const top = (map, k) => [...map].sort((a, b) => b[1] - a[1]).slice(0, k);
console.log(`scenario ${scenarioName}: ${served} requests in ${seconds} s, statuses ${JSON.stringify(statuses)}, ${total} samples`);
console.log(`\nby self time:`);
for (const [l, c] of top(self, 45)) console.log(`${pct(c)}  ${l}`);
console.log(`\nby total time:`);
for (const [l, c] of top(incl, 60)) console.log(`${pct(c)}  ${l}`);
console.log(`\nraw profile: ${out}`);
