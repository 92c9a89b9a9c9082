// Where a request's CPU goes, for one bench scenario (not the benchmark:
// scripts/bench is). Two modes:
//
//   node bench/profile.mjs SCENARIO [SECONDS] [SYSTEM]
//       a V8 CPU profile of SYSTEM (tollgate, default; hono; floor; floor-rs) under
//       SCENARIO (allowed, blocked, nonmatch, mix) through workerd's
//       inspector: the functions by self and total time, and the raw
//       profile in bench/tmp/SYSTEM-SCENARIO.cpuprofile (Chrome DevTools).
//   node bench/profile.mjs --ab SCENARIO [SECONDS] SYSTEM... [--rounds N] [--warmup S]
//       an A/B of CPU per request: each SYSTEM in its own workerd, rounds
//       of SECONDS interleaved (the order reversed every other round), the
//       workerd's user + system CPU (/proc/PID/stat) per request served;
//       medians, and the first system over each other as the median of
//       paired round ratios, with a 95% interval for it (a bootstrap over
//       the rounds: what another run of the same builds may read). On a
//       shared machine a round's CPU drifts by ±20%; paired rounds cancel
//       most of the drift. Each system is warmed up first, 1 s by default
//       (`--warmup S`, at most 120: to see whether one-off compilation,
//       Wasm tier-up included, is in a round).
//   node bench/profile.mjs --ab targets [SECONDS] [tollgate|tollgate@ENTRY] [--rounds N] [--warmup S]
//       issue 36's targets, three paired A/Bs: blocked against the Rust
//       floor's 429 (≤ 1.10×), allowed against the Rust floor with its
//       object in Rust (floor-rs, ≤ 1.05×), nonmatch against the Rust
//       forwarder (floor, ≤ 1.05×); then the build's size (gzip) and the
//       machine (CPU model, cores, load average before and after).
//
// Systems: tollgate is src/entry.mjs over build/ (build it with
// TOLLGATE_KEEP_NAMES=1 scripts/build to see Rust function names in a
// profile); hono is peer A's bundle (bench/tmp/hono.bundle.mjs) and floor
// the Rust floor (bench/workers/floor.mjs), both made by scripts/bench;
// floor-rs is the Rust floor with its counter object in Rust as well
// (bench/workers/floor-rs.mjs);
// ENTRY=path/to/entry.mjs runs tollgate from another entry (an experiment);
// a system named tollgate@path/to/entry.mjs (relative to the repo) runs
// that entry beside the others, e.g. a copy of src/entry.mjs and build/
// made before a change, to A/B the change; floor@path/to/entry.mjs does the
// same for a variant of the Rust floor.
// Each runs with the shipped config, SQLite-backed objects, the origin
// mocked by outboundService, driven over loopback by 8 keep-alive clients
// sending the bench's requests (the Rust floor's marks included).
import { Miniflare } from "miniflare";
import http from "node:http";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { gzipSync } from "node:zlib";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const ab = args[0] === "--ab";
const positional = args.filter((a, i) => !a.startsWith("--") && args[i - 1] !== "--rounds" && args[i - 1] !== "--warmup");
const roundsAt = args.indexOf("--rounds");
const rounds = roundsAt >= 0 ? Math.min(Number(args[roundsAt + 1]), 40) : 10;
const warmupAt = args.indexOf("--warmup");
const warmupMs = warmupAt >= 0 ? Math.min(Number(args[warmupAt + 1]), 120) * 1000 : 1000;
if (!(warmupMs >= 0)) {
  console.error(`--warmup takes a number of seconds (0-120), not ${JSON.stringify(args[warmupAt + 1])}`);
  process.exit(2);
}
let scenarioName = positional[0] ?? "allowed";
const seconds = Math.min(Number(positional[1] ?? (ab ? 2 : 5)), 30);
const systemNames = positional.slice(2).length ? positional.slice(2) : ["tollgate"];
const system = systemNames[0];
const INSPECTOR = 9300 + Math.floor(Math.random() * 500);

const toml = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
const { parse } = await import("smol-toml").catch(() => ({ parse: null }));
if (!parse) throw new Error("smol-toml is needed (npm ci)");
const TOLLGATE = parse(toml).vars.TOLLGATE;

/** workerd processes running now. */
function workerdPids() {
  const out = new Set();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/stat`, "utf8").includes("(workerd)")) out.add(d);
    } catch {}
  }
  return out;
}

/** The Miniflare worker options of one system (see the top comment). */
function workerOf(system) {
  const common = {
    name: system.replace(/[^A-Za-z0-9-]/g, "-"),
    modules: true,
    modulesRoot: ROOT,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: parse(toml).compatibility_date,
    stripCfConnectingIp: false,
    outboundService: () => new Response("origin ok"),
  };
  if (system === "floor" || system === "floor-rs" || system.startsWith("floor@")) {
    return {
      ...common,
      scriptPath: system.startsWith("floor@") ? join(ROOT, system.slice("floor@".length)) : join(ROOT, "bench", "workers", `${system}.mjs`),
      durableObjects: { COUNTER: { className: "FloorCounter", useSQLite: true } },
    };
  }
  switch (system) {
    case "hono":
      return {
        ...common,
        scriptPath: join(ROOT, "bench", "tmp", "hono.bundle.mjs"),
        durableObjects: { CACHE: { className: "DurableObjectRateLimiter", useSQLite: true } },
      };
    default:
      return {
        ...common,
        scriptPath: system.startsWith("tollgate@") ? join(ROOT, system.slice("tollgate@".length)) : (process.env.ENTRY ?? join(ROOT, "src", "entry.mjs")),
        bindings: { TOLLGATE },
        durableObjects: { LIMITER: { className: "Limiter", useSQLite: true } },
      };
  }
}

/** One system in its own Miniflare, so its own workerd (found by its pid). */
async function start(system, inspect) {
  const before = workerdPids();
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    ...(inspect ? { inspectorPort: INSPECTOR } : {}),
    durableObjectsPersist: join(ROOT, "bench", "tmp", `profile-${process.pid}-${system.replace(/[^A-Za-z0-9-]/g, "-")}`),
    workers: [workerOf(system)],
  });
  const url = new URL((await mf.ready).toString());
  const pid = [...workerdPids()].find((p) => !before.has(p));
  return { system, mf, url, pid };
}

/** utime + stime of a process, in µs (clock ticks of 1/100 s). */
function cpuUs(pid) {
  const st = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10_000;
}

let base;

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

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

/** How far the median of paired round ratios could be from another run's
 * of the same builds: the 2.5th and 97.5th percentiles of the medians of
 * 2,000 resamples of the rounds (with replacement; a fixed seed, so the
 * same rounds give the same interval). Rounds drift together, so this is
 * the spread of the pairing's result, not of either system's CPU. */
function interval(ratios) {
  let seed = 1;
  const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
  const medians = Array.from({ length: 2000 }, () => median(ratios.map(() => ratios[Math.floor(random() * ratios.length)])));
  medians.sort((x, y) => x - y);
  return [medians[50], medians[1949]];
}

/** One paired A/B of `names` on `scenarioName`: each system's rounds of
 * CPU µs per request, printed, and the first over each other as the median
 * of paired round ratios with its 95% interval ([`interval`]), returned
 * by name as `{ ratio, low, high }`. */
async function abRun(names) {
  const systems = [];
  for (const name of names) systems.push(await start(name, false));
  for (const sys of systems) {
    base = sys.url;
    await load(warmupMs);
  }
  const results = new Map(systems.map((sys) => [sys.system, []]));
  for (let r = 0; r < rounds; r++) {
    for (const sys of r % 2 ? [...systems].reverse() : systems) {
      base = sys.url;
      await load(300);
      const t0 = cpuUs(sys.pid);
      const served = await load(seconds * 1000);
      results.get(sys.system).push((cpuUs(sys.pid) - t0) / served);
    }
  }
  console.log(`${scenarioName}, ${rounds} rounds of ${seconds} s, CPU µs per request (median; rounds):`);
  for (const [name, a] of results) console.log(`  ${name.padEnd(10)} ${median(a).toFixed(0).padStart(6)}   ${a.map((x) => x.toFixed(0)).join(" ")}`);
  const [first, ...others] = [...results];
  const ratios = {};
  for (const [name, a] of others) {
    const paired = first[1].map((x, i) => x / a[i]);
    const [ratio, [low, high]] = [median(paired), interval(paired)];
    ratios[name] = { ratio, low, high };
    console.log(`  ${first[0]} ÷ ${name}: ${ratio.toFixed(3)} (median of paired rounds; 95% interval ${low.toFixed(3)}–${high.toFixed(3)})`);
  }
  for (const sys of systems) await sys.mf.dispose();
  return ratios;
}

/** The machine: CPU model, cores, load average (1 min). */
function machine() {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? "?";
  const cores = (cpuinfo.match(/^processor\s*:/gm) ?? []).length;
  return `${model}, ${cores} cores, load average ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`;
}

/** The release build's bytes and gzipped bytes (index.js + index_bg.wasm),
 * in KiB: what the upload's gzip figure is made of, without wrangler. */
function bundleKiB() {
  const parts = ["index.js", "index_bg.wasm"].map((f) => readFileSync(join(ROOT, "build", f)));
  const raw = parts.reduce((n, b) => n + b.length, 0);
  const gz = parts.reduce((n, b) => n + gzipSync(b, { level: 9 }).length, 0);
  return `${(raw / 1024).toFixed(2)} KiB, gzip ${(gz / 1024).toFixed(2)} KiB`;
}

// `--ab targets`: issue 36's three paired A/Bs, each path against its floor.
const TARGETS = [
  { scenario: "blocked", floor: "floor", most: 1.1, what: "blocked ÷ the Rust floor answering 429" },
  { scenario: "allowed", floor: "floor-rs", most: 1.05, what: "allowed ÷ the Rust floor with its object in Rust" },
  { scenario: "nonmatch", floor: "floor", most: 1.05, what: "non-matching ÷ the Rust forwarder" },
];

if (ab && scenarioName === "targets") {
  const first = systemNames[0] === "tollgate" || systemNames[0].startsWith("tollgate@") ? systemNames[0] : "tollgate";
  console.log(`machine: ${machine()}`);
  const rows = [];
  for (const t of TARGETS) {
    scenarioName = t.scenario;
    const { ratio, low, high } = (await abRun([first, t.floor]))[t.floor];
    const verdict = ratio <= t.most ? "met" : "missed";
    const sure = low <= t.most && t.most <= high ? `; the target is inside the interval ${low.toFixed(3)}–${high.toFixed(3)}` : "";
    rows.push(`  ${t.what}: ${ratio.toFixed(3)} (target ≤ ${t.most}: ${verdict}${sure})`);
  }
  console.log(`targets (${first}; machine at the end: ${machine()}):\n${rows.join("\n")}\n  bundle: ${bundleKiB()}`);
  agent.destroy();
  process.exit(0);
}

if (ab) {
  await abRun(systemNames);
  agent.destroy();
  process.exit(0);
}

// Warm up (and, for `blocked`, exhaust the one key), then profile.
const { mf, url } = await start(system, true);
base = url;
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
const out = join(ROOT, "bench", "tmp", `${system.replace(/[^A-Za-z0-9-]/g, "-")}-${scenarioName}.cpuprofile`);
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
