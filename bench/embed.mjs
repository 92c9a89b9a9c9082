// Issue 18's measurement: the CPU per request that a TS app Worker adds by
// calling tollgate over RPC (check + settle through the Hono middleware of
// clients/ts), against the standalone tollgate Worker in front of the
// origin, and against hono-rate-limiter (DurableObjectStore) inside the
// same Hono app. Each system runs in its own Miniflare, so its own workerd
// process, whose CPU time (/proc/PID/stat utime + stime) over the measured
// requests is divided by their number. The origin is a Node function
// (outboundService): its CPU is not counted. Every request is allowed (one
// client, a limit it never reaches), so each system does its whole work:
// one counter call per request, and for RPC one check call.
//
//   node bench/embed.mjs [REQUESTS]     (scripts/build first; default 3000)
//
// Writes bench/RESULTS.embed.md. Loopback only, no network.
import { Miniflare } from "miniflare";
import { buildSync } from "esbuild";
import { readFileSync, readdirSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir, cpus } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const REQUESTS = Number(process.argv[2] ?? 3000);
const WARMUP = 300;
const CONCURRENCY = 4;
const COMPAT = "2026-04-01";
const LIMIT = 1_000_000;
const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

const RULE = { name: "api", path: "/api/*", key: ["ip"], algorithm: "gcra", limits: [{ requests: LIMIT, window: "1h" }] };

const origin = async () => new Response("ok", { headers: { "content-type": "text/plain" } });

const bundle = (source) =>
  buildSync({ stdin: { contents: source, resolveDir: ROOT, loader: "ts" }, bundle: true, format: "esm", platform: "neutral", mainFields: ["module", "main"], external: ["cloudflare:*"], target: "es2022", write: false, logLevel: "silent" })
    .outputFiles[0].text;

// The app with no limiter: the floor the two limiters add to.
const APP_ONLY = bundle(`
import { Hono } from "hono";
const app = new Hono();
app.all("*", (c) => fetch(c.req.raw));
export default app;`);

// The app with tollgate over RPC (clients/ts/hono.ts), tollgate bound as TOLLGATE.
const APP_RPC = bundle(`
import { Hono } from "hono";
import { tollgate } from "./clients/ts/hono";
const app = new Hono();
app.use("*", tollgate((c) => c.env.TOLLGATE));
app.all("*", (c) => fetch(c.req.raw));
export default app;`);

// The app with hono-rate-limiter and its Durable Object store, as bench/peers/hono.mjs.
const APP_HONO = bundle(`
import { Hono } from "hono";
import { rateLimiter } from "hono-rate-limiter";
import { DurableObjectStore, DurableObjectRateLimiter } from "@hono-rate-limiter/cloudflare";
const app = new Hono();
app.use("/api/*", (c, next) => rateLimiter({
  windowMs: 3_600_000, limit: ${LIMIT}, standardHeaders: "draft-6",
  keyGenerator: (c) => c.req.header("cf-connecting-ip") ?? "",
  store: new DurableObjectStore({ namespace: c.env.CACHE }),
})(c, next));
app.all("*", (c) => fetch(c.req.raw));
export { DurableObjectRateLimiter };
export default app;`);

const tollgateWorker = (extra = {}) => ({
  name: "tollgate",
  modules: true,
  scriptPath: join(ROOT, "build", "index.js"),
  modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }],
  compatibilityDate: COMPAT,
  bindings: { TOLLGATE: { rules: [RULE] } },
  durableObjects: { LIMITER: { className: "Limiter", useSQLite: true } },
  outboundService: origin,
  stripCfConnectingIp: false,
  ...extra,
});
const app = (script, extra = {}) => ({ name: "app", modules: true, script, compatibilityDate: COMPAT, outboundService: origin, stripCfConnectingIp: false, ...extra });

const SYSTEMS = [
  { name: "standalone", label: "tollgate standalone, in front of the origin", workers: () => [tollgateWorker()] },
  { name: "app", label: "Hono app, no limiter (floor)", workers: () => [app(APP_ONLY)] },
  {
    name: "rpc",
    label: "Hono app + tollgate over RPC (check; tollgate in the same workerd)",
    workers: () => [app(APP_RPC, { serviceBindings: { TOLLGATE: "tollgate" } }), tollgateWorker()],
  },
  {
    name: "hono",
    label: "Hono app + hono-rate-limiter (DurableObjectStore)",
    workers: () => [app(APP_HONO, { durableObjects: { CACHE: { className: "DurableObjectRateLimiter", useSQLite: true } } })],
  },
];

function workerdChildren() {
  const out = new Set();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, "utf8");
      const rest = st.slice(st.lastIndexOf(")") + 2).split(" ");
      if (Number(rest[1]) === process.pid && st.includes("(workerd)")) out.add(Number(d));
    } catch {}
  }
  return out;
}

function ticks(pid) {
  const st = readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = st.slice(st.lastIndexOf(")") + 2).split(" ");
  return Number(rest[11]) + Number(rest[12]);
}

async function drive(mf, n) {
  let next = 0;
  let failed = 0;
  const one = async () => {
    while (next < n) {
      next++;
      const res = await mf.dispatchFetch("https://example.com/api/items", { headers: { "cf-connecting-ip": "203.0.113.7" } });
      await res.arrayBuffer();
      if (res.status !== 200) failed++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, one));
  return failed;
}

// All systems up at once, then ROUNDS rounds of REQUESTS / ROUNDS requests
// each, the systems taking turns: other people's load on the shared machine
// then falls on every system alike. The median round is reported.
const ROUNDS = 5;
const started = [];
try {
  for (const sys of SYSTEMS) {
    const persist = mkdtempSync(join(tmpdir(), "tollgate-bench-embed-"));
    const before = workerdChildren();
    const mf = new Miniflare({ workers: sys.workers(), durableObjectsPersist: persist, handleRuntimeStdio() {} });
    started.push({ sys, mf, persist });
    await mf.ready;
    const pids = [...workerdChildren()].filter((p) => !before.has(p));
    if (pids.length !== 1) throw new Error(`${sys.name}: expected one new workerd, found ${pids.length}`);
    started.at(-1).pid = pids[0];
    if ((await drive(mf, WARMUP)) > 0) throw new Error(`${sys.name}: a warm-up request was not 200`);
    started.at(-1).rounds = [];
  }
  const perRound = Math.ceil(REQUESTS / ROUNDS);
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of started) {
      const t0 = ticks(s.pid);
      const w0 = Date.now();
      const failed = await drive(s.mf, perRound);
      if (failed > 0) throw new Error(`${s.sys.name}: ${failed} requests were not 200`);
      s.rounds.push({ cpuUs: ((ticks(s.pid) - t0) * 1e6) / CLK_TCK / perRound, rps: (perRound * 1000) / (Date.now() - w0) });
    }
  }
} finally {
  for (const s of started) {
    await s.mf.dispose();
    rmSync(s.persist, { recursive: true, force: true });
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = started.map((s) => {
  const cpu = s.rounds.map((r) => r.cpuUs);
  const r = { ...s.sys, cpuUs: median(cpu), low: Math.min(...cpu), high: Math.max(...cpu), rps: median(s.rounds.map((x) => x.rps)) };
  console.log(`${r.name}: median ${r.cpuUs.toFixed(0)} µs CPU/request (${r.low.toFixed(0)}–${r.high.toFixed(0)}), ${r.rps.toFixed(0)} req/s`);
  return r;
});

const by = Object.fromEntries(results.map((r) => [r.name, r]));
const cpuModel = (() => {
  try {
    return execFileSync("lscpu", { encoding: "utf8" }).match(/Model name:\s*(.+)/)?.[1]?.trim() ?? cpus()[0]?.model;
  } catch {
    return cpus()[0]?.model;
  }
})();
const lines = [
  "# RPC check vs standalone vs hono-rate-limiter (issue 18)",
  "",
  `Written by \`node bench/embed.mjs ${REQUESTS}\` on ${new Date().toISOString().slice(0, 10)}: ${cpus().length} CPUs (${cpuModel}), shared with other work;`,
  `${REQUESTS} allowed requests per system after ${WARMUP} of warm-up, in ${ROUNDS} rounds taken in turns by all systems (all running at once), ${CONCURRENCY} at a time, one client, a limit never reached; the origin a Node function (not counted). Median round, lowest–highest in brackets.`,
  "CPU: the system's workerd process (utime + stime, 1/" + CLK_TCK + " s ticks) over the measured requests. Loaded-machine figures: compare ratios, not absolutes.",
  "",
  "| system | CPU µs / request | req/s |",
  "|---|---:|---:|",
  ...results.map((r) => `| ${r.label} | ${r.cpuUs.toFixed(0)} (${r.low.toFixed(0)}–${r.high.toFixed(0)}) | ${r.rps.toFixed(0)} |`),
  "",
  `- RPC check path, added to the app: ${(by.rpc.cpuUs - by.app.cpuUs).toFixed(0)} µs (rpc − app floor); ` +
    `the standalone Worker: ${by.standalone.cpuUs.toFixed(0)} µs in all (its own entry, the origin fetch and the counter call); ` +
    `difference ${(by.rpc.cpuUs - by.app.cpuUs - by.standalone.cpuUs).toFixed(0)} µs (RPC path added − standalone).`,
  `- hono-rate-limiter, added to the same app: ${(by.hono.cpuUs - by.app.cpuUs).toFixed(0)} µs (hono − app floor).`,
  "",
];
writeFileSync(join(ROOT, "bench", "RESULTS.embed.md"), lines.join("\n"));
console.log(lines.join("\n"));
