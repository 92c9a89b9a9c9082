// scripts/bench's driver: starts five systems, each in its own workerd (one
// Miniflare instance per system), drives them with bench/loadgen.mjs in a
// separate process, and measures per system and scenario what a request
// costs: the workerd process's CPU time, Durable Object calls, SQLite rows,
// log lines and bytes, and dollars per million requests at Cloudflare's
// prices; also req/s and latency, exactness under a burst, bundle size,
// cold start and (if present) the core Rust microbenchmark. A second load
// phase then starts four systems (the passthrough again, tollgate with lease auto and off,
// peer A) on one hot key with a large limit: req/s and object calls per
// request when one key takes all the traffic. Writes
// bench/RESULTS.md and bench/results.json (with --origin=worker:
// bench/RESULTS.origin-worker.md and bench/results.origin-worker.json).
//
//   node bench/run.mjs [--quick] [--origin=worker]
//
// scripts/bench runs scripts/setup and the builds first, then this file.
// Everything is bounded: every load phase in time and count, every child
// process by a timeout, and the whole run by a deadline (optional steps are
// skipped, with a note, when they would not fit).
import { Miniflare } from "miniflare";
import { parse as parseToml } from "smol-toml";
import { spawn, fork, execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { PRICES, ASSUMPTIONS, costPerMillion } from "./prices.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const BENCH = join(ROOT, "bench");
const TMP = join(BENCH, "tmp");
const BIN = join(ROOT, "node_modules", ".bin");

const args = new Set(process.argv.slice(2));
const QUICK = args.has("--quick");
// --origin=worker: the mocked origin is a JS Worker inside each system's
// workerd (outboundService names it) instead of a Node function, so
// forwarding does not cross into Node, and the CPU per request then
// includes the origin's.
const ORIGIN = args.has("--origin=worker") ? "worker" : "function";
// Each origin mode keeps its own results: bench/RESULTS.md and
// bench/results.json, or bench/RESULTS.origin-worker.md and
// bench/results.origin-worker.json.
const OUT = ORIGIN === "worker" ? ".origin-worker" : "";
const RESULTS_MD = `RESULTS${OUT}.md`;
const RESULTS_JSON = `results${OUT}.json`;
const MODE = QUICK
  ? {
      name: "quick",
      budgetMs: 200_000,
      concurrency: 8,
      globalWarmupMs: 1_000,
      rounds: 2,
      warmupMs: 300,
      durationMs: 1_500,
      coldRuns: 3,
      criterionArgs: ["--warm-up-time", "0.5", "--measurement-time", "1", "--sample-size", "10"],
    }
  : {
      name: "default",
      budgetMs: 630_000,
      concurrency: 8,
      globalWarmupMs: 2_000,
      rounds: 4,
      warmupMs: 500,
      durationMs: 2_500,
      coldRuns: 5,
      criterionArgs: [],
    };
const MAX_REQUESTS = 500_000; // per phase, on top of the time bound
const REQUEST_TIMEOUT_MS = 10_000;
const BURST = 200;
const LIMIT = 10;
// Before each usage snapshot: lets the system finish what it does after its
// last response and its log lines reach this process through the pipe.
const SETTLE_MS = 100;

// The deadline counts from the end of scripts/setup in scripts/bench (the build included).
const T0 = Number(process.env.BENCH_T0_MS) || Date.now();
const deadline = T0 + MODE.budgetMs;
const remaining = () => deadline - Date.now();
const log = (...a) => console.error("\x1b[1;34m==>\x1b[0m", ...a);
const notes = [];
const note = (s) => {
  notes.push(s);
  log(`note: ${s}`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const WRANGLER = parseToml(readFileSync(join(ROOT, "wrangler.toml"), "utf8"));
const COMPAT = WRANGLER.compatibility_date;
const TOLLGATE_CONFIG = WRANGLER.vars.TOLLGATE;

rmSync(join(TMP, "run"), { recursive: true, force: true });
mkdirSync(join(TMP, "run"), { recursive: true });

// ---- helpers ----------------------------------------------------------------

/** Runs a command with a timeout (its whole process group is killed then). */
function run(cmd, argv, { timeoutMs, env = {}, cwd = ROOT } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, {
      cwd,
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    }, Math.max(1, timeoutMs));
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

const median = (xs) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round = (x, d = 2) => (x == null || !Number.isFinite(x) ? null : Number(x.toFixed(d)));

function gitInfo() {
  const git = (...a) => {
    try {
      return execFileSync("git", ["--no-optional-locks", ...a], { cwd: ROOT, encoding: "utf8" }).trim();
    } catch {
      return null;
    }
  };
  const commit = git("rev-parse", "--short", "HEAD");
  // The results files a previous run left are not a change to what is measured.
  const dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/RESULTS*.md", ":!bench/results*.json");
  return { commit, dirty: dirty == null ? null : dirty.length > 0 };
}

function machineInfo() {
  let cpuModel = cpus()[0]?.model ?? "unknown";
  try {
    const l = execFileSync("lscpu", { encoding: "utf8" });
    const m = l.match(/^Model name:\s*(.+)$/m);
    if (m) cpuModel = m[1].trim();
  } catch {}
  let nproc = cpus().length;
  try {
    nproc = Number(execFileSync("nproc", { encoding: "utf8" }).trim());
  } catch {}
  return {
    nproc,
    cpuModel,
    memGiB: round(totalmem() / 2 ** 30, 1),
    node: process.version,
    miniflare: JSON.parse(readFileSync(join(ROOT, "node_modules/miniflare/package.json"), "utf8")).version,
    wrangler: JSON.parse(readFileSync(join(ROOT, "node_modules/wrangler/package.json"), "utf8")).version,
  };
}

/**
 * CPU use from /proc: all busy jiffies on the machine, and those of this
 * process tree (this process with its reaped children, the load generator
 * included once it has exited, plus live descendants such as workerd).
 */
function cpuSnapshot() {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = f;
    const busy = user + nice + system + irq + softirq + (steal ?? 0);
    const procs = new Map();
    for (const d of readdirSync("/proc")) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const st = readFileSync(`/proc/${d}/stat`, "utf8");
        const rest = st.slice(st.lastIndexOf(")") + 2).split(" ");
        procs.set(Number(d), { ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14]) });
      } catch {}
    }
    const ours = new Set([process.pid]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const [pid, p] of procs) if (!ours.has(pid) && ours.has(p.ppid)) (ours.add(pid), (grew = true));
    }
    let mine = 0;
    for (const pid of ours) mine += procs.get(pid)?.ticks ?? 0;
    return { t: Date.now(), busy, mine };
  } catch {
    return null;
  }
}

function cpuShare(a, b) {
  if (!a || !b) return null;
  const HZ = 100; // USER_HZ on Linux
  const capacity = ((b.t - a.t) / 1000) * HZ * (cpus().length || 1);
  const outside = Math.max(0, b.busy - a.busy - (b.mine - a.mine));
  return {
    seconds: round((b.t - a.t) / 1000, 1),
    benchPercent: round((100 * (b.mine - a.mine)) / capacity, 1),
    otherPercent: round((100 * outside) / capacity, 1),
  };
}

// ---- the mocked origin (network edge) --------------------------------------

const originHits = new Map();
/** Every system's outbound fetch lands here: 200, a few bytes, at once. */
async function origin(request) {
  const host = new URL(request.url).hostname;
  originHits.set(host, (originHits.get(host) ?? 0) + 1);
  return new Response("origin ok\n", { status: 200, headers: { "content-type": "text/plain" } });
}

const ORIGIN_WORKER = {
  name: "origin",
  modules: true,
  compatibilityDate: COMPAT,
  script: `export default { fetch() { return new Response("origin ok\\n", { status: 200, headers: { "content-type": "text/plain" } }); } };`,
};

// ---- the systems --------------------------------------------------------------

const HONO_BUNDLE = join(TMP, "hono.bundle.mjs"); // bench/peers/hono.mjs, for its size
const HONO_METERED = join(TMP, "hono.metered.mjs"); // bench/peers/hono-metered.mjs, what runs
const HONO_HOT_METERED = join(TMP, "hono-hot.metered.mjs"); // bench/peers/hono-hot-metered.mjs, the hot-key phase
const FLOOR_DIR = join(BENCH, "workers", "rust-floor", "build");

const SYSTEMS = [
  { name: "passthrough", short: "passthrough", label: "JS passthrough: `fetch(request)`, nothing else" },
  { name: "floor", short: "Rust floor", label: "Rust floor: workers-rs, `fetch` of the request it was given; for a request an exact limiter counts, first one RPC to a per-key object that writes one SQLite row; for one it refuses, tollgate's 429 answered at once" },
  { name: "tollgate", short: "tollgate", label: "tollgate (release Wasm, SQLite Durable Object)" },
  { name: "hono", short: "peer A (hono)", label: "peer A: hono-rate-limiter + DurableObjectStore" },
  { name: "ratelimit", short: "peer B (binding)", label: "peer B: Workers Rate Limiting binding" },
];
// The hot-key phase (its own workerds, started after the first phase's are
// gone): one rule on one constant key with a large limit, nothing blocked;
// the passthrough again, as the ceiling of req/s in the same phase.
// HOT_LIMIT is also bench/peers/hono-hot.mjs's. tollgate's rule is GCRA: the
// sliding log takes at most 10,000 per limit; peer A counts fixed windows.
const HOT_LIMIT = 300_000;
const HOT_SYSTEMS = [
  { name: "passthrough", short: "passthrough", label: "JS passthrough, the same `fetch(request)` floor as above: what the machine serves with no limiter at all" },
  { name: "tollgate-hot", short: "tollgate (lease auto)", label: "tollgate, hot-key rule `key = [\"global\"]`, lease = \"auto\" (the default)" },
  { name: "tollgate-hot-off", short: "tollgate (lease off)", label: "tollgate, the same rule with lease = \"off\" (one object call per request)" },
  { name: "hono-hot", short: "peer A (hono)", label: "peer A: hono-rate-limiter + DurableObjectStore, constant keyGenerator" },
];
// The object-floor phase (its own workerds, after the hot-key phase): the
// allowed scenario alone, on the Rust floor with its counter object in
// JavaScript (as above) and in Rust, beside tollgate and peer A: what an
// object written with workers-rs costs per call, against the allowed target.
const OBJECT_SYSTEMS = [
  { name: "floor", short: "Rust floor (JS object)", label: "the Rust floor as above: its counter object in JavaScript (bench/workers/floor-counter.mjs)" },
  { name: "floor-rs", short: "Rust floor (Rust object)", label: "the same Worker, its counter object in Rust with workers-rs (`FloorRustCounter`, bench/workers/floor-rs.mjs): the same rows and alarm, a synchronous RPC method" },
  { name: "tollgate", short: "tollgate", label: "tollgate as above" },
  { name: "hono", short: "peer A (hono)", label: "peer A as above" },
];
// The first two phases' short names win for the systems they share with the third.
const SHORT = Object.fromEntries([...OBJECT_SYSTEMS, ...SYSTEMS, ...HOT_SYSTEMS].map((s) => [s.name, s.short]));
// The object namespace the billing meter is read through (bench/workers/meter.mjs).
const METERED = { floor: "COUNTER", "floor-rs": "COUNTER", tollgate: "LIMITER", hono: "CACHE", "tollgate-hot": "LIMITER", "tollgate-hot-off": "LIMITER", "hono-hot": "CACHE" };

/** tollgate's config for the hot-key phase: the shipped one with its rules replaced by one global rule. */
function hotTollgateConfig(lease) {
  return {
    ...structuredClone(TOLLGATE_CONFIG),
    rules: [
      {
        name: "hot-global",
        path: "/api/example",
        query: { mode: "heavy" },
        key: ["global"],
        // The sliding log takes at most 10,000 requests per limit (config.rs).
        algorithm: "gcra",
        limits: [{ requests: HOT_LIMIT, window: "60s" }],
        action: "block",
        on_error: "allow",
        lease,
      },
    ],
  };
}

// Modules as workerd loads them: build/index.js files are ES modules.
const MODULE_RULES = [
  { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
  { type: "CompiledWasm", include: ["**/*.wasm"] },
];

function workerOptions(name) {
  const common = {
    name,
    modules: true,
    compatibilityDate: COMPAT,
    outboundService: ORIGIN === "worker" ? "origin" : origin,
    stripCfConnectingIp: false,
    routes: [`${name}.bench/*`],
  };
  switch (name) {
    case "passthrough":
      return { ...common, scriptPath: join(BENCH, "workers", "passthrough.mjs") };
    case "floor":
    case "floor-rs":
      return {
        ...common,
        modulesRoot: ROOT,
        scriptPath: join(BENCH, "workers", `${name}.mjs`),
        modulesRules: MODULE_RULES,
        durableObjects: { COUNTER: { className: "FloorCounter", useSQLite: true } },
      };
    case "tollgate":
    case "tollgate-hot":
    case "tollgate-hot-off": {
      const config = name === "tollgate" ? structuredClone(TOLLGATE_CONFIG) : hotTollgateConfig(name === "tollgate-hot" ? "auto" : "off");
      return {
        ...common,
        modulesRoot: ROOT,
        scriptPath: join(BENCH, "workers", "tollgate.mjs"),
        modulesRules: MODULE_RULES,
        bindings: { TOLLGATE: config },
        durableObjects: { LIMITER: { className: "Limiter", useSQLite: true } },
      };
    }
    case "hono":
    case "hono-hot":
      return {
        ...common,
        scriptPath: name === "hono" ? HONO_METERED : HONO_HOT_METERED,
        durableObjects: { CACHE: { className: "DurableObjectRateLimiter", useSQLite: true } },
      };
    case "ratelimit":
      return {
        ...common,
        scriptPath: join(BENCH, "workers", "ratelimit-binding.mjs"),
        ratelimits: { LIMITER: { simple: { limit: LIMIT, period: 60 } } },
      };
    default:
      throw new Error(name);
  }
}

/** Children of this process now, by pid → command name. */
function childProcesses() {
  const out = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, "utf8");
      const rest = st.slice(st.lastIndexOf(")") + 2).split(" ");
      if (Number(rest[1]) === process.pid) out.set(Number(d), st.slice(st.indexOf("(") + 1, st.lastIndexOf(")")));
    } catch {}
  }
  return out;
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of one process, in clock ticks (/proc/PID/stat fields 14 and 15). */
function processTicks(pid) {
  const st = readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = st.slice(st.lastIndexOf(")") + 2).split(" ");
  return Number(rest[11]) + Number(rest[12]);
}

/** Counts a workerd's stdout and stderr (lines and bytes), keeps stderr's last lines. */
function stdioCounter() {
  const c = { stdoutLines: 0, stdoutBytes: 0, stderrLines: 0, stderrBytes: 0, stderrTail: [] };
  c.handle = (stdout, stderr) => {
    stdout.on("data", (d) => {
      c.stdoutBytes += d.length;
      c.stdoutLines += String(d).split("\n").length - 1;
    });
    stderr.on("data", (d) => {
      c.stderrBytes += d.length;
      const text = String(d);
      c.stderrLines += text.split("\n").length - 1;
      c.stderrTail.push(...text.split("\n").filter(Boolean));
      c.stderrTail.splice(0, Math.max(0, c.stderrTail.length - 20));
    });
  };
  return c;
}

/**
 * One system in its own Miniflare instance, so its own workerd process (a
 * direct child of this process, found by comparing the children before and
 * after it starts): the CPU time of that process is this system's alone.
 */
async function startSystem(name, persist) {
  const before = childProcesses();
  const io = stdioCounter();
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    durableObjectsPersist: persist,
    handleRuntimeStdio: io.handle,
    workers: [workerOptions(name), ...(ORIGIN === "worker" ? [ORIGIN_WORKER] : [])],
  });
  try {
    const url = (await mf.ready).toString();
    const started = [...childProcesses()].filter(([pid, comm]) => !before.has(pid) && comm === "workerd");
    if (started.length !== 1) throw new Error(`${name}: expected one new workerd child process, found ${started.length}`);
    return { name, mf, url, pid: started[0][0], io, meterNamespace: null };
  } catch (e) {
    await mf.dispose();
    throw e;
  }
}

/** The object meter's counters (bench/workers/meter.mjs), or null for systems without objects. */
async function readMeter(sys) {
  if (!METERED[sys.name]) return null;
  sys.meterNamespace ??= await sys.mf.getDurableObjectNamespace(METERED[sys.name], sys.name);
  const stub = sys.meterNamespace.get(sys.meterNamespace.idFromName("__bench_meter"));
  const res = await stub.fetch("https://meter.bench/", { headers: { "x-bench-meter": "1" } });
  if (res.status !== 200) throw new Error(`${sys.name}: meter answered ${res.status}`);
  return res.json();
}

/**
 * A usage snapshot of one system: its workerd's CPU time, its log output so
 * far and its object meter. The meter call is itself a request to that
 * workerd, so it is read before the CPU at "start" and after it at "end":
 * outside the measured window either way.
 */
async function usageSnapshot(sys, at) {
  await sleep(SETTLE_MS);
  const meter = at === "start" ? await readMeter(sys) : null;
  const ticks = processTicks(sys.pid);
  const machine = cpuSnapshot();
  const s = {
    wallMs: Date.now(),
    // The whole machine and this benchmark's process tree: what is left is
    // other people's load, which slows everything and inflates CPU time a bit.
    machineBusyTicks: machine?.busy ?? 0,
    benchTreeTicks: machine?.mine ?? 0,
    cpuTicks: ticks,
    cpuUs: (ticks * 1e6) / CLK_TCK,
    // This process: the mocked origin (default) and Miniflare's Node side.
    nodeCpuUs: (processTicks(process.pid) * 1e6) / CLK_TCK,
    stdoutLines: sys.io.stdoutLines,
    stdoutBytes: sys.io.stdoutBytes,
    stderrLines: sys.io.stderrLines,
    stderrBytes: sys.io.stderrBytes,
  };
  s.meter = at === "start" ? meter : await readMeter(sys);
  return s;
}

/**
 * Runs bench/loadgen.mjs, answering its snapshot requests. `phase`: "main"
 * (the four scenarios and the burst), "hot" (the hot-key scenario alone) or
 * "object" (the allowed scenario alone).
 */
async function loadTest(systems, phase = "main") {
  const only = { hot: "hotkey", object: "allowed" }[phase];
  const plan = {
    systems: systems.map((s) => ({ name: s.name, base: s.url, host: `${s.name}.bench` })),
    scenarios: only ? [only] : ["nonmatch", "allowed", "blocked", "mix"],
    concurrency: MODE.concurrency,
    globalWarmupMs: MODE.globalWarmupMs,
    globalWarmupScenario: only ?? "mix",
    rounds: MODE.rounds,
    warmupMs: MODE.warmupMs,
    durationMs: MODE.durationMs,
    maxRequests: MAX_REQUESTS,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    burst: only ? null : { requests: BURST, limit: LIMIT },
  };
  const planPath = join(TMP, "run", `plan.${phase}.json`);
  const outPath = join(TMP, "run", `loadgen.${phase}.json`);
  writeFileSync(planPath, JSON.stringify(plan, null, 2));
  const perCell = MODE.rounds * (MODE.warmupMs + MODE.durationMs + 4 * SETTLE_MS + 2_000);
  const bound = plan.systems.length * (MODE.globalWarmupMs + plan.scenarios.length * perCell + 5_000) + 30_000;
  log(
    `load (${phase}): ${plan.systems.length} systems × ${plan.scenarios.length} scenario(s) × ${MODE.rounds} round(s), ` +
      `${MODE.warmupMs} ms warm-up + ${MODE.durationMs} ms measured each, concurrency ${MODE.concurrency} ` +
      `(killed after ${Math.round(bound / 1000)} s at most)`,
  );
  const byName = Object.fromEntries(systems.map((s) => [s.name, s]));
  const child = fork(join(BENCH, "loadgen.mjs"), [planPath, outPath], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  child.on("message", async (m) => {
    if (m?.type !== "snapshot") return;
    try {
      child.send({ id: m.id, snapshot: await usageSnapshot(byName[m.system], m.at) });
    } catch (e) {
      log(`snapshot of ${m.system} failed: ${e.message}`);
      if (child.connected) child.send({ id: m.id, snapshot: null });
    }
  });
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), bound);
    child.on("close", (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  if (code !== 0) throw new Error(`load generator exited ${code}`);
  return { plan, ...JSON.parse(readFileSync(outPath, "utf8")) };
}

/** Per request, from a merged cell's usage: what the cost model prices. */
function perRequest(cell) {
  const u = cell.usage;
  const n = cell.count;
  if (!u || !n) return null;
  const m = u.meter ?? {};
  const per = (x) => (x ?? 0) / n;
  const out = {
    requests: n,
    cpuUs: per(u.cpuUs),
    nodeCpuUs: per(u.nodeCpuUs),
    objectCalls: per(m.calls),
    alarmsRun: per(m.alarms),
    alarmsSet: per(m.setAlarm),
    rowsWritten: per((m.sqlRowsWritten ?? 0) + (m.kvRowsWritten ?? 0) + (m.setAlarm ?? 0)),
    rowsRead: per((m.sqlRowsRead ?? 0) + (m.kvRowsRead ?? 0)),
    deleteAll: per(m.deleteAll),
    objectErrors: per(m.errors),
    logLines: per(u.stdoutLines + u.stderrLines),
    logBytes: per(u.stdoutBytes + u.stderrBytes),
    metered: Boolean(u.meter),
    // Share of the machine's CPUs that other processes used during the cell.
    otherLoadPercent:
      (100 * Math.max(0, u.machineBusyTicks - u.benchTreeTicks)) / ((u.wallMs / 1000) * CLK_TCK * (cpus().length || 1)),
  };
  out.costPerMillionUsd = costPerMillion(out);
  return out;
}

// ---- steps ------------------------------------------------------------------

/** Bundle size as wrangler reports it (the [build] command rebuilds first). */
async function measureGzip() {
  const parse = (text) => {
    const m = text.match(/Total Upload:\s*([\d.]+)\s*KiB\s*\/\s*gzip:\s*([\d.]+)\s*KiB/);
    return m ? { totalKiB: Number(m[1]), gzipKiB: Number(m[2]) } : null;
  };
  // The exact command rebuilds through wrangler.toml's [build] (scripts/build,
  // ~30 s of wasm-opt). The quick mode, or a failed build, or too little time
  // left, measures the build/ just made (or kept) with the same config minus
  // [build] instead: same bytes, no second build.
  const exactBudget = Math.min(240_000, remaining() - 300_000);
  if (process.env.BENCH_BUILD === "failed") {
    // noted already
  } else if (QUICK || exactBudget < 60_000) {
    note(
      "bundle size measured on the build/ that scripts/bench just checked or made, with wrangler.toml minus its [build] " +
        "command (the exact `npx wrangler deploy --dry-run --outdir dist` would rebuild first; default mode runs it when time allows)",
    );
  } else {
    const cmd = "npx --no-install wrangler deploy --dry-run --outdir dist";
    log(cmd);
    const r = await run("npx", ["--no-install", "wrangler", "deploy", "--dry-run", "--outdir", "dist"], { timeoutMs: exactBudget });
    const sizes = parse(r.stdout + r.stderr);
    if (r.code === 0 && sizes) return { ...sizes, command: cmd, source: "wrangler's [build] (scripts/build) + dry-run" };
    note(
      `\`${cmd}\` ${r.timedOut ? "timed out" : `exited ${r.code}`}` +
        ` (its [build] step runs scripts/build); measured the existing build/ instead`,
    );
  }
  // Same config minus the [build] command, on the build/ already there.
  const toml = readFileSync(join(ROOT, "wrangler.toml"), "utf8")
    .replace(/^\[build\]\s*\ncommand\s*=.*\n/m, "")
    .replace(/^main\s*=\s*"([^"]+)"/m, (_, p) => `main = "${relative(TMP, join(ROOT, p))}"`);
  const cfg = join(TMP, "wrangler.nobuild.toml");
  writeFileSync(cfg, toml);
  const outdir = join(TMP, "dist");
  rmSync(outdir, { recursive: true, force: true });
  const cmd = `npx --no-install wrangler deploy --dry-run --outdir ${relative(ROOT, outdir)} -c ${relative(ROOT, cfg)}`;
  // Absolute --outdir: wrangler resolves a relative one against the config's folder.
  const r = await run("npx", ["--no-install", "wrangler", "deploy", "--dry-run", "--outdir", outdir, "-c", cfg], {
    timeoutMs: 60_000,
  });
  const sizes = parse(r.stdout + r.stderr);
  if (sizes) return { ...sizes, command: cmd, source: "on build/ as scripts/bench left it, config without [build]" };
  note(`could not measure the bundle size: ${(r.stderr || r.stdout).trim().split("\n").slice(-3).join(" / ")}`);
  return null;
}

/** esbuild of one peer entry into one module. */
async function esbuild(entry, outfile) {
  const r = await run(
    join(BIN, "esbuild"),
    [
      entry,
      "--bundle",
      "--format=esm",
      "--platform=neutral",
      "--target=es2022",
      "--main-fields=module,main",
      "--external:cloudflare:*",
      `--outfile=${outfile}`,
      "--log-level=warning",
    ],
    { timeoutMs: 60_000 },
  );
  if (r.code !== 0) throw new Error(`esbuild failed: ${r.stderr}`);
}

/** Peer A bundled: as published (its size) and metered (what runs). */
async function bundleHono() {
  await esbuild(join(BENCH, "peers", "hono.mjs"), HONO_BUNDLE);
  await esbuild(join(BENCH, "peers", "hono-metered.mjs"), HONO_METERED);
  await esbuild(join(BENCH, "peers", "hono-hot-metered.mjs"), HONO_HOT_METERED);
  const bytes = readFileSync(HONO_BUNDLE);
  return { bytes: bytes.length, totalKiB: round(bytes.length / 1024), gzipKiB: round(gzipSync(bytes, { level: 9 }).length / 1024) };
}

/** new Miniflare(...) → first response, on a fresh workerd each time. */
async function coldStart(name, runs) {
  const out = [];
  for (let i = 0; i < runs; i++) {
    const persist = join(TMP, "run", `cold-${name}-${i}`);
    const t0 = performance.now();
    const mf = new Miniflare({
      host: "127.0.0.1",
      port: 0,
      durableObjectsPersist: persist,
      handleRuntimeStdio: stdioCounter().handle,
      workers: [workerOptions(name), ...(ORIGIN === "worker" ? [ORIGIN_WORKER] : [])],
    });
    try {
      await mf.ready;
      const tReady = performance.now();
      const res = await mf.dispatchFetch(`http://${name}.bench/api/example?mode=heavy`, {
        headers: { "cf-connecting-ip": "203.0.113.99" },
      });
      await res.arrayBuffer();
      const tFirst = performance.now();
      if (res.status !== 200) throw new Error(`${name}: first response ${res.status}`);
      out.push({ totalMs: tFirst - t0, readyMs: tReady - t0, firstMs: tFirst - tReady });
    } finally {
      await mf.dispose();
    }
  }
  return {
    runs: out.length,
    totalMsMedian: round(median(out.map((r) => r.totalMs)), 1),
    readyMsMedian: round(median(out.map((r) => r.readyMs)), 1),
    firstResponseMsMedian: round(median(out.map((r) => r.firstMs)), 1),
    samples: out.map((r) => ({ totalMs: round(r.totalMs, 1), readyMs: round(r.readyMs, 1), firstMs: round(r.firstMs, 1) })),
  };
}

const UNIT_NS = { ps: 1e-3, ns: 1, "µs": 1e3, "μs": 1e3, us: 1e3, ms: 1e6, s: 1e9 };

/** Criterion's figures: estimates.json (median) where present, else stdout. */
function parseCriterion(stdout, startedMs) {
  const fromStdout = {};
  const lines = stdout.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = lines[i].match(/^(.*?)\s*time:\s*\[\s*([\d.]+)\s*(\S+)\s+([\d.]+)\s*(\S+)\s+([\d.]+)\s*(\S+)\s*\]/);
    if (!m) continue;
    const name = m[1].trim() || (lines[i - 1] ?? "").trim();
    fromStdout[name] = { estimateNs: Number(m[4]) * (UNIT_NS[m[5]] ?? NaN) };
  }
  const benches = [];
  const dir = join(ROOT, "target", "criterion");
  const walk = (d) => {
    if (!existsSync(d)) return;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        if (e.name === "new") {
          const est = join(p, "estimates.json");
          const meta = join(p, "benchmark.json");
          if (existsSync(est) && existsSync(meta) && statSync(est).mtimeMs >= startedMs) {
            const E = JSON.parse(readFileSync(est, "utf8"));
            const M = JSON.parse(readFileSync(meta, "utf8"));
            const elements = M.throughput?.Elements ?? null;
            const medianNs = E.median?.point_estimate;
            benches.push({
              id: M.full_id ?? M.title ?? relative(dir, d),
              medianNsPerIter: round(medianNs, 1),
              elementsPerIter: elements,
              medianUsPerRequest: round((elements ? medianNs / elements : medianNs) / 1000, 4),
            });
          }
        } else walk(p);
      }
    }
  };
  walk(dir);
  if (benches.length === 0) {
    for (const [id, v] of Object.entries(fromStdout)) {
      benches.push({
        id,
        medianNsPerIter: round(v.estimateNs, 1),
        elementsPerIter: null,
        medianUsPerRequest: round(v.estimateNs / 1000, 4),
        note: "criterion's point estimate from stdout (no estimates.json found)",
      });
    }
  }
  return benches.sort((a, b) => a.id.localeCompare(b.id));
}

async function coreBench() {
  const base = { command: null, benches: [], skipped: null };
  if (!existsSync(join(ROOT, "benches", "core.rs"))) {
    return { ...base, skipped: "benches/core.rs does not exist (yet)" };
  }
  const argv = ["bench", "--bench", "core", "--", "--noplot", ...MODE.criterionArgs];
  const cmd = `cargo ${argv.join(" ")}`;
  const budget = remaining() - 15_000;
  if (budget < 20_000) return { ...base, command: cmd, skipped: `not enough time left in the ${MODE.name} budget` };
  log(`${cmd} (at most ${Math.round(budget / 1000)} s)`);
  const started = Date.now();
  const r = await run("cargo", argv, { timeoutMs: budget });
  const benches = r.code === 0 ? parseCriterion(r.stdout, started - 1000) : [];
  if (r.code !== 0 || benches.length === 0) {
    const why = r.timedOut
      ? `timed out after ${Math.round(budget / 1000)} s`
      : r.code !== 0
        ? `exited ${r.code}: ${r.stderr.trim().split("\n").slice(-3).join(" / ")}`
        : "no criterion figures found in its output";
    return { ...base, command: cmd, skipped: why };
  }
  return { ...base, command: cmd, seconds: round((Date.now() - started) / 1000, 1), benches };
}

// ---- report -----------------------------------------------------------------

const SCENARIOS = ["nonmatch", "allowed", "blocked", "mix"];
const SCENARIO_TEXT = {
  nonmatch: "`/api/other?mode=light`, no rule matches",
  allowed: "`/api/example?mode=heavy` from distinct IPs, each used exactly 10 times (all allowed)",
  blocked: "`/api/example?mode=heavy` from one IP exhausted beforehand (all limited)",
  mix: "per 10 requests: 7 nonmatch, 2 allowed (distinct IPs), 1 from an exhausted IP",
};

function fmt(x, d = 2) {
  if (x == null || !Number.isFinite(x)) return "–";
  return x.toFixed(d);
}
const ratio = (a, b) => (a != null && b ? a / b : null);
const usd = (x) => (x == null ? "–" : x < 0.01 ? `$${x.toFixed(4)}` : `$${x.toFixed(3)}`);
const cell = (R, sc, sys) => R.perRequest?.[sc]?.[sys] ?? null;

function buildReport(R) {
  const L = [];
  const p = (s = "") => L.push(s);
  p("# tollgate benchmark results");
  p();
  p(`- date: ${R.date}`);
  p(`- mode: \`scripts/bench${R.mode === "quick" ? " --quick" : ""}${R.origin === "worker" ? " --origin=worker" : ""}\` (${R.mode}), took ${fmt(R.elapsedSeconds, 0)} s`);
  p(`- machine: ${R.machine.nproc} CPUs (nproc), ${R.machine.cpuModel}, ${R.machine.memGiB} GiB; Node ${R.machine.node}, Miniflare ${R.machine.miniflare}, wrangler ${R.machine.wrangler}`);
  p(`- git commit: \`${R.git.commit ?? "unknown"}\`${R.git.dirty ? " (working tree had uncommitted changes to tracked files)" : ""}`);
  p(`- build: ${R.build}; Rust floor: ${R.floorBuild}`);
  p(
    `- setup: five systems, each in its own workerd (one Miniflare instance each), loopback only; origin mocked with ` +
      `\`outboundService\`: ${R.origin === "worker" ? "a JS Worker inside each system's workerd (--origin=worker), so its CPU is included below" : "a Node function in the benchmark's own process, so its CPU is **not** in the figures below"}; ` +
      `load generator in its own Node process, ${R.load.plan.concurrency} concurrent keep-alive HTTP/1.1 clients; each cell (scenario × system) ran ${R.load.plan.rounds} round(s) of ` +
      `${R.load.plan.warmupMs} ms warm-up + ${R.load.plan.durationMs} ms measured, cells interleaved, systems in rotating order; ` +
      `then a second phase of four systems on one hot key (the passthrough again, tollgate lease auto and off, peer A; see "Hot key" below), ` +
      `and a third on the allowed scenario alone (the Rust floor with its object in JS and in Rust, tollgate, peer A; see "Object floor" below)`,
  );
  if (R.cpuDuringLoad) {
    p(
      `- CPU during the load test (${R.cpuDuringLoad.seconds} s): this benchmark ${R.cpuDuringLoad.benchPercent}%, ` +
        `other processes ${R.cpuDuringLoad.otherPercent}% of ${R.machine.nproc} CPUs`,
    );
  }
  p();
  p("## CPU per request (the headline)");
  p();
  p(
    "Each system's workerd process: user + system CPU time (`/proc/PID/stat` utime + stime, in clock ticks of " +
      `1/${R.cpu.clockTicksPerSecond} s) over the measured phase, divided by the requests it served in it. ` +
      "It includes the Worker, its Durable Objects and Miniflare's entry Worker in front of it" +
      (R.origin === "worker" ? ", and the origin Worker" : "") +
      "; it excludes the load generator" +
      (R.origin === "worker" ? "" : ", the origin (Node)") +
      " and the other systems. Ratios are within this run only.",
  );
  p();
  p(`| scenario | ${SYSTEMS.map((s) => `${s.short} µs`).join(" | ")} | tollgate ÷ Rust floor | tollgate ÷ peer A | tollgate ÷ peer B | Rust floor ÷ passthrough | others' load % |`);
  p(`|---|${SYSTEMS.map(() => "--:").join("|")}|--:|--:|--:|--:|--:|`);
  for (const sc of SCENARIOS) {
    const c = (sys) => cell(R, sc, sys)?.cpuUs ?? null;
    const load = SYSTEMS.map((s) => cell(R, sc, s.name)?.otherLoadPercent).filter(Number.isFinite);
    p(
      `| ${sc} | ${SYSTEMS.map((s) => fmt(c(s.name), 0)).join(" | ")} | ${fmt(ratio(c("tollgate"), c("floor")))} | ` +
        `${fmt(ratio(c("tollgate"), c("hono")))} | ${fmt(ratio(c("tollgate"), c("ratelimit")))} | ${fmt(ratio(c("floor"), c("passthrough")))} | ` +
        `${load.length ? `${fmt(Math.min(...load), 0)}–${fmt(Math.max(...load), 0)}` : "–"} |`,
    );
  }
  p();
  p(
    "\"Others' load\": the share of the machine's CPUs that processes outside this benchmark used during the row's cells (min–max); " +
      "it slows everything and, on shared cores, inflates CPU time somewhat.",
  );
  if (R.load.plan.rounds > 1) {
    p();
    p("The same, lowest–highest of the rounds (each round's CPU ÷ its requests):");
    p();
    p(`| scenario | ${SYSTEMS.map((s) => `${s.short} µs`).join(" | ")} |`);
    p(`|---|${SYSTEMS.map(() => "--:").join("|")}|`);
    for (const sc of SCENARIOS) {
      const range = (sys) => {
        const rr = (cell(R, sc, sys)?.cpuUsPerRound ?? []).filter(Number.isFinite);
        return rr.length ? `${fmt(Math.min(...rr), 0)}–${fmt(Math.max(...rr), 0)}` : "–";
      };
      p(`| ${sc} | ${SYSTEMS.map((s) => range(s.name)).join(" | ")} |`);
    }
  }
  p();
  p("## Per request: object calls, SQLite rows, log output");
  p();
  p(
    "Object calls and rows from the billing meter wrapped around each Durable Object class (`bench/workers/meter.mjs`: " +
      "fetch/RPC calls, alarm runs, SQL cursor `rowsRead`/`rowsWritten`, key-value reads/writes per key, `setAlarm` = 1 row written); " +
      "log lines and bytes from the system's workerd stdout + stderr. Per request served in the measured phase.",
  );
  p();
  p("| scenario | system | requests | object calls | alarms set | rows written | rows read | log lines | log bytes | alarms run in window |");
  p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
  for (const sc of SCENARIOS) {
    for (const s of SYSTEMS) {
      const c = cell(R, sc, s.name);
      if (!c) continue;
      const m = (x, d = 3) => (c.metered || METERED[s.name] ? fmt(x, d) : "0");
      p(
        `| ${sc} | ${s.short} | ${c.requests} | ${m(c.objectCalls)} | ${m(c.alarmsSet)} | ${m(c.rowsWritten)} | ${m(c.rowsRead)} | ` +
          `${fmt(c.logLines, 3)} | ${fmt(c.logBytes, 1)} | ${m(c.alarmsRun)} |`,
      );
    }
  }
  p();
  p(
    "Peer B's `limit()` calls go to the Rate Limiting binding, not to a Durable Object (no price listed). " +
      "\"Alarms run in window\" are alarms set earlier in the run (one window after a key's last hit) that fired during this cell; " +
      "their CPU is in this cell's figure, their cost is counted where they were set.",
  );
  p();
  p("## Cost per million requests (USD, marginal, Workers Paid)");
  p();
  const A = ASSUMPTIONS;
  p(
    `Formula and prices in \`bench/README.md\` (prices read ${PRICES.workersRequest.read}). Per request: Worker request $${PRICES.workersRequest.usdPerMillion}/M + ` +
      `CPU-ms × $${PRICES.workersCpuMs.usdPerMillion}/M + object requests (calls + alarms they set) × ($${PRICES.objectRequest.usdPerMillion}/M + ` +
      `${A.objectActiveSecondsPerCall * 1000} ms × ${A.objectMemoryGb} GB × $${PRICES.objectGbSecond.usdPerMillion}/M GB-s) + rows written (+ ${A.rowsWrittenPerAlarm} per alarm set) × $${PRICES.rowWritten.usdPerMillion}/M + ` +
      `rows read × $${PRICES.rowRead.usdPerMillion}/M + log events (1 execution log per request and per object request, + each log line) × $${PRICES.logEvent.usdPerMillion}/M. ` +
      "CPU is the whole workerd's (an upper bound).",
  );
  p();
  p("| scenario | system | Worker requests | CPU | object requests + duration | rows | log events | **total** | ÷ peer A | above passthrough | logs from 2026-12-01 (console bytes only) |");
  p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
  for (const sc of SCENARIOS) {
    const peerA = cell(R, sc, "hono")?.costPerMillionUsd?.total;
    const floor = cell(R, sc, "passthrough")?.costPerMillionUsd?.total;
    for (const s of SYSTEMS) {
      const c = cell(R, sc, s.name)?.costPerMillionUsd;
      if (!c) continue;
      p(
        `| ${sc} | ${s.short} | ${usd(c.usd.workersRequests)} | ${usd(c.usd.workersCpu)} | ${usd(c.usd.objectRequests + c.usd.objectDuration)} | ` +
          `${usd(c.usd.rowsWritten + c.usd.rowsRead)} | ${usd(c.usd.logs)} (${fmt(c.logEventsPerRequest, 2)}/req) | **${usd(c.total)}** | ${fmt(ratio(c.total, peerA))} | ` +
          `${floor == null ? "–" : usd(Math.max(0, c.total - floor))} | ${usd(c.consoleLogsFromDec2026)} |`,
      );
    }
  }
  p();
  p(
    "\"Above passthrough\": the total minus the JS passthrough's in the same scenario, i.e. what the limiter adds; " +
      "every request pays the passthrough's (the Worker request and, with Workers Logs on, its execution log) whatever the limiter does.",
  );
  p();
  p("## Throughput and latency");
  p();
  p("Each system in its own workerd, all sharing the machine's CPUs with the load generator; ratios within this run only.");
  p();
  p("| scenario | system | req/s | req/s per round (min–max) | p50 ms | p99 ms | req/s ÷ passthrough | req/s ÷ peer A | requests | statuses |");
  p("|---|---|--:|--:|--:|--:|--:|--:|--:|---|");
  for (const [sc, bySys] of Object.entries(R.load.scenarios)) {
    const pt = bySys.passthrough;
    const pa = bySys.hono;
    for (const s of SYSTEMS) {
      const r = bySys[s.name];
      if (!r) continue;
      const st = Object.entries(r.statuses)
        .map(([k, v]) => `${k}×${v}`)
        .join(" ");
      p(
        `| ${sc} | ${s.short} | ${fmt(r.rps, 0)} | ${fmt(Math.min(...r.rpsPerRound), 0)}–${fmt(Math.max(...r.rpsPerRound), 0)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ` +
          `${fmt(ratio(r.rps, pt?.rps))} | ${fmt(ratio(r.rps, pa?.rps))} | ${r.count} | ${st} |`,
      );
    }
  }
  p();
  for (const [sc, text] of Object.entries(SCENARIO_TEXT)) p(`- **${sc}**: ${text}`);
  const unexpected = [];
  for (const [sc, bySys] of Object.entries(R.load.scenarios)) {
    for (const [sys, r] of Object.entries(bySys)) {
      if (sys === "passthrough" || sys === "floor") continue;
      for (const [kind, k] of Object.entries(r.byKind)) {
        if (k.unexpected > 0) unexpected.push(`${SHORT[sys]} / ${sc}: ${k.unexpected} of ${k.total} "${kind}" requests got another status than expected`);
      }
      if (Object.keys(r.errors).length) unexpected.push(`${SHORT[sys]} / ${sc}: client errors ${JSON.stringify(r.errors)}`);
    }
  }
  p();
  p(`Statuses that differ from what an exact limiter gives (200 for no-match and allowed, 429 for the exhausted IP): ${unexpected.length ? "" : "none."}`);
  for (const u of unexpected) p(`- ${u}`);
  p();
  hotReport(R, p);
  objectFloorReport(R, p);
  p(`## Correctness: ${R.load.plan.burst.requests} concurrent requests on one fresh IP (limit ${LIMIT})`);
  p();
  p("| system | let through (200) | limited (429) | other | over the limit |");
  p("|---|--:|--:|--:|--:|");
  for (const s of SYSTEMS) {
    const b = R.load.burst[s.name];
    if (!b) continue;
    const other = b.sent - (b.statuses[200] ?? 0) - (b.statuses[429] ?? 0);
    const limiter = !["passthrough", "floor"].includes(s.name);
    p(`| ${s.short} | ${b.statuses[200] ?? 0} | ${b.statuses[429] ?? 0} | ${other} | ${limiter ? b.overLimit : "n/a (no limiter)"} |`);
  }
  p();
  p("## Bundle size");
  p();
  p("| system | upload KiB | gzip KiB | measured by |");
  p("|---|--:|--:|---|");
  if (R.gzip) p(`| tollgate | ${fmt(R.gzip.totalKiB)} | ${fmt(R.gzip.gzipKiB)} | \`${R.gzip.command}\` (${R.gzip.source}) |`);
  else p("| tollgate | – | – | not measured (see notes) |");
  if (R.floorBundle) p(`| Rust floor | ${fmt(R.floorBundle.totalKiB)} | ${fmt(R.floorBundle.gzipKiB)} | \`bench/workers/rust-floor/build/\` index.js + index_bg.wasm, gzip -9 in Node (for scale only) |`);
  if (R.honoBundle) p(`| peer A (hono) | ${fmt(R.honoBundle.totalKiB)} | ${fmt(R.honoBundle.gzipKiB)} | esbuild bundle, gzip -9 in Node (for scale only) |`);
  p();
  p("## Cold start: `new Miniflare(...)` → first response, fresh workerd each run");
  p();
  p("First request: `/api/example?mode=heavy` (so the limiter and its Durable Object are exercised).");
  p();
  p("| system | runs | median total ms | median to `ready` ms | median `ready` → first response ms |");
  p("|---|--:|--:|--:|--:|");
  for (const name of ["tollgate", "hono"]) {
    const c = R.coldStart?.[name];
    if (c) p(`| ${SHORT[name]} | ${c.runs} | ${fmt(c.totalMsMedian, 1)} | ${fmt(c.readyMsMedian, 1)} | ${fmt(c.firstResponseMsMedian, 1)} |`);
    else p(`| ${SHORT[name]} | 0 | – | – | – |`);
  }
  if (R.coldStart?.tollgate && R.coldStart?.hono) p(`\ntollgate ÷ peer A (median total): ${fmt(ratio(R.coldStart.tollgate.totalMsMedian, R.coldStart.hono.totalMsMedian))}`);
  p();
  p("## Core microbenchmark (`benches/core.rs`, criterion)");
  p();
  if (R.core.skipped) p(`Skipped: ${R.core.skipped}.${R.core.command ? ` (\`${R.core.command}\`)` : ""}`);
  else {
    p(`\`${R.core.command}\` (${R.core.seconds} s)`);
    p();
    p("| bench | median per iteration | elements per iteration | median µs per request |");
    p("|---|--:|--:|--:|");
    for (const b of R.core.benches) p(`| ${b.id} | ${fmt(b.medianNsPerIter, 1)} ns | ${b.elementsPerIter ?? 1} | ${fmt(b.medianUsPerRequest, 3)} |`);
  }
  p();
  // The leased-budgets simulator's section (issue 12): measured by
  // `cargo run --release --example lease-sim`, not by this script; kept
  // across runs of it.
  const leaseSim = join(BENCH, "lease-sim.md");
  if (existsSync(leaseSim)) {
    p(readFileSync(leaseSim, "utf8").trimEnd());
    p();
  }
  p("## Targets");
  p();
  p("| target | measured | status |");
  p("|---|---|---|");
  for (const t of R.targets) p(`| ${t.target} | ${t.measured} | ${t.status} |`);
  p();
  p("## Notes");
  p();
  for (const n of R.notes) p(`- ${n}`);
  p();
  return L.join("\n");
}

/** The object-floor phase's section of RESULTS.md. */
function objectFloorReport(R, p) {
  const O = R.objectFloor;
  p("## Object floor: the allowed path with the counter object in JavaScript and in Rust");
  p();
  p(
    `A third phase, in workerds of its own (fresh objects): the allowed scenario alone on the systems below, ` +
      `with the same load generator, origin, meter and rounds (${O.load.plan.rounds} round(s) of ${O.load.plan.warmupMs} ms warm-up + ` +
      `${O.load.plan.durationMs} ms measured per system, rotating order).` +
      (O.cpuDuringLoad ? ` CPU during this phase (${O.cpuDuringLoad.seconds} s): this benchmark ${O.cpuDuringLoad.benchPercent}%, other processes ${O.cpuDuringLoad.otherPercent}%.` : ""),
  );
  p();
  for (const s of OBJECT_SYSTEMS) p(`- **${s.short}**: ${s.label}`);
  p();
  const c = (sys) => O.perRequest.allowed?.[sys]?.cpuUs ?? null;
  p("| system | CPU µs/req | CPU µs/req per round (min–max) | ÷ Rust floor (JS object) | ÷ Rust floor (Rust object) | ÷ peer A | object calls/req | rows written/req | statuses |");
  p("|---|--:|--:|--:|--:|--:|--:|--:|---|");
  for (const s of OBJECT_SYSTEMS) {
    const r = O.load.scenarios.allowed?.[s.name];
    const pr = O.perRequest.allowed?.[s.name];
    if (!r) continue;
    const rr = (pr?.cpuUsPerRound ?? []).filter(Number.isFinite);
    const st = Object.entries(r.statuses)
      .map(([k, v]) => `${k}×${v}`)
      .join(" ");
    p(
      `| ${s.short} | ${fmt(c(s.name), 0)} | ${rr.length ? `${fmt(Math.min(...rr), 0)}–${fmt(Math.max(...rr), 0)}` : "–"} | ` +
        `${fmt(ratio(c(s.name), c("floor")))} | ${fmt(ratio(c(s.name), c("floor-rs")))} | ${fmt(ratio(c(s.name), c("hono")))} | ` +
        `${fmt(pr?.objectCalls, 3)} | ${fmt(pr?.rowsWritten, 3)} | ${st} |`,
    );
  }
  p();
  p(
    "The two floors differ only in the language of the object: the Rust one pays wasm-bindgen's crossings and workers-rs's storage " +
      "API on every call. What tollgate pays above the Rust floor with the Rust object is its own: the plan, the call's URL and its " +
      "reply line, the decision and the timeout on the Worker's side, and the counter's logic on the object's.",
  );
  p();
}

/** The hot-key phase's section of RESULTS.md. */
function hotReport(R, p) {
  const H = R.hot;
  p("## Hot key: one global key, large limit, nothing blocked");
  p();
  p(
    `A second phase, after the first phase's workerds are gone: the limiters below, each in its own workerd, on one rule whose key is the same ` +
      `for every request, ${H.limit.toLocaleString("en-US")} requests per 60 s (far above what a run sends: every request is allowed), ` +
      `on \`/api/example?mode=heavy\`; the same load generator, origin, rounds and meter as above ` +
      `(${H.load.plan.rounds} round(s) of ${H.load.plan.warmupMs} ms warm-up + ${H.load.plan.durationMs} ms measured per system, rotating order).` +
      (H.cpuDuringLoad ? ` CPU during this phase (${H.cpuDuringLoad.seconds} s): this benchmark ${H.cpuDuringLoad.benchPercent}%, other processes ${H.cpuDuringLoad.otherPercent}%.` : ""),
  );
  p();
  for (const s of HOT_SYSTEMS) p(`- **${s.short}**: ${s.label}`);
  p(`- tollgate's rule: \`${JSON.stringify(H.tollgateRule)}\` (lease_ttl and lease_max at their defaults)`);
  p();
  p("| system | req/s | req/s per round (min–max) | req/s ÷ peer A | req/s ÷ passthrough | CPU µs/req | CPU µs/req per round (min–max) | object calls/req | rows written/req | rows read/req | log lines/req | p50 ms | p99 ms | requests | statuses |");
  p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|");
  const pa = H.load.scenarios.hotkey?.["hono-hot"];
  const pt = H.load.scenarios.hotkey?.passthrough;
  for (const s of HOT_SYSTEMS) {
    const r = H.load.scenarios.hotkey?.[s.name];
    const c = H.perRequest.hotkey?.[s.name];
    if (!r) continue;
    const m = (x) => (METERED[s.name] ? fmt(x, 4) : "0");
    const rr = (c?.cpuUsPerRound ?? []).filter(Number.isFinite);
    const st = Object.entries(r.statuses)
      .map(([k, v]) => `${k}×${v}`)
      .join(" ");
    p(
      `| ${s.short} | ${fmt(r.rps, 0)} | ${fmt(Math.min(...r.rpsPerRound), 0)}–${fmt(Math.max(...r.rpsPerRound), 0)} | ${fmt(ratio(r.rps, pa?.rps))} | ${fmt(ratio(r.rps, pt?.rps))} | ` +
        `${fmt(c?.cpuUs, 0)} | ${rr.length ? `${fmt(Math.min(...rr), 0)}–${fmt(Math.max(...rr), 0)}` : "–"} | ${m(c?.objectCalls)} | ` +
        `${m(c?.rowsWritten)} | ${m(c?.rowsRead)} | ${fmt(c?.logLines, 3)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${r.count} | ${st} |`,
    );
  }
  const bad = [];
  for (const [sys, r] of Object.entries(H.load.scenarios.hotkey ?? {})) {
    if (!METERED[sys]) continue;
    for (const k of Object.values(r.byKind)) if (k.unexpected > 0) bad.push(`${SHORT[sys]}: ${k.unexpected} of ${k.total} requests were not answered 200`);
    if (Object.keys(r.errors).length) bad.push(`${SHORT[sys]}: client errors ${JSON.stringify(r.errors)}`);
  }
  p();
  p(`Requests not answered 200 (nothing should be blocked): ${bad.length ? "" : "none."}`);
  for (const b of bad) p(`- ${b}`);
  p();
  p(
    "With leases, tollgate's isolate takes a lease of about rate × `lease_ttl` tokens from the key's object (at most `lease_max`, 1,000) and " +
      "spends it locally, so object calls per request fall well below one; with `lease = \"off\"` (and peer A) every request is one " +
      "call to the one object that holds the key, so that object's throughput caps the key. Locally an object call is cheap (no network, " +
      "no durable write wait), so the req/s gap here understates production's, where each call waits for its object's write to be durable; " +
      "and no system serves more than the passthrough does on the same machine in the same phase, so a req/s ratio to peer A is capped by " +
      "passthrough ÷ peer A.",
  );
  p();
}

function targets(R) {
  const sc = R.load.scenarios;
  const T = [];
  const status = (ok) => (ok == null ? "not measured" : ok ? "met" : "missed");
  const cpu = (s, sys) => cell(R, s, sys)?.cpuUs ?? null;
  const cpuTarget = (target, s, sys, other, max) => {
    const a = cpu(s, sys);
    const b = cpu(s, other);
    T.push({
      target,
      measured: `${fmt(a, 0)} vs ${fmt(b, 0)} µs (×${fmt(ratio(a, b))})`,
      status: status(a == null || b == null ? null : a <= max * b),
    });
  };
  cpuTarget("CPU, non-matching: tollgate ≤ 1.05× the Rust floor", "nonmatch", "tollgate", "floor", 1.05);
  cpuTarget("CPU, blocked: tollgate ≤ 1.2× peer B (the binding)", "blocked", "tollgate", "ratelimit", 1.2);
  cpuTarget("CPU, blocked: tollgate ≤ 0.5× peer A", "blocked", "tollgate", "hono", 0.5);
  cpuTarget("CPU, allowed: tollgate ≤ 1.0× peer A", "allowed", "tollgate", "hono", 1.0);
  // What the least Rust Worker pays on the same paths (the Rust floor's
  // 429 answered at once; its one RPC + one row written per allowed
  // request): a target below it is out of reach of any workers-rs Worker.
  const floorLine = (target, s, over, max) => {
    const f = cpu(s, "floor");
    const o = cpu(s, over);
    T.push({
      target,
      measured: `${fmt(f, 0)} vs ${fmt(o, 0)} µs (×${fmt(ratio(f, o))})`,
      status: f == null || o == null ? "not measured" : f <= max * o ? "the floor is within it" : "the floor is above it",
    });
  };
  floorLine("floor: the Rust floor's 429 ÷ peer B, blocked (against the 1.2× target)", "blocked", "ratelimit", 1.2);
  floorLine("floor: the Rust floor's 429 ÷ peer A, blocked (against the 0.5× target)", "blocked", "hono", 0.5);
  floorLine("floor: the Rust floor with one RPC and one row written ÷ peer A, allowed (against the 1.0× target)", "allowed", "hono", 1.0);
  {
    // The same with the object in Rust (the object-floor phase, its own run).
    const o = (sys) => R.objectFloor?.perRequest?.allowed?.[sys]?.cpuUs ?? null;
    const [f, a, t] = [o("floor-rs"), o("hono"), o("tollgate")];
    T.push({
      target: "floor: the Rust floor with its object in Rust too ÷ peer A, allowed (object-floor phase; against the 1.0× target)",
      measured: `${fmt(f, 0)} vs ${fmt(a, 0)} µs (×${fmt(ratio(f, a))}); tollgate ×${fmt(ratio(t, f))} this floor, ×${fmt(ratio(t, a))} peer A in the same phase`,
      status: f == null || a == null ? "not measured" : f <= a ? "the floor is within it" : "the floor is above it",
    });
  }
  {
    const a = cell(R, "blocked", "tollgate")?.costPerMillionUsd?.total ?? null;
    const b = cell(R, "blocked", "hono")?.costPerMillionUsd?.total ?? null;
    const floor = cell(R, "blocked", "passthrough")?.costPerMillionUsd?.total ?? null;
    T.push({
      target: "cost per million blocked requests: tollgate ≤ 1/20 of peer A's",
      measured:
        `${usd(a)} vs ${usd(b)} (1/${fmt(ratio(b, a), 1)}); any request costs at least the passthrough's ${usd(floor)}` +
        (floor != null && b != null && floor * 20 > b ? ", more than 1/20 of peer A's: out of reach on totals" : ""),
      status: status(a == null || b == null ? null : a * 20 <= b),
    });
    const addA = a == null || floor == null ? null : Math.max(0, a - floor);
    const addB = b == null || floor == null ? null : Math.max(0, b - floor);
    T.push({
      target: "cost added over the passthrough per million blocked requests: tollgate ≤ 1/20 of peer A's (the limiters' own share of the target above)",
      measured: `${usd(addA)} vs ${usd(addB)} (${addA ? `1/${fmt(ratio(addB, addA), 1)}` : "0"})`,
      status: status(addA == null || addB == null ? null : addA * 20 <= addB),
    });
  }
  const rps = (s, sys) => sc[s]?.[sys]?.rps ?? null;
  {
    const a = rps("allowed", "tollgate");
    const b = rps("allowed", "hono");
    T.push({
      target: "allowed-path throughput ≥ peer A's",
      measured: `${fmt(a, 0)} vs ${fmt(b, 0)} req/s (×${fmt(ratio(a, b))})`,
      status: status(a == null || b == null ? null : a >= b),
    });
  }
  {
    const a = rps("blocked", "tollgate");
    const b = rps("blocked", "hono");
    T.push({
      target: "blocked-path throughput ≥ 3× peer A's",
      measured: `${fmt(a, 0)} vs ${fmt(b, 0)} req/s (×${fmt(ratio(a, b))})`,
      status: status(a == null || b == null ? null : a >= 3 * b),
    });
  }
  // The same two against the Rust floor's req/s (one RPC and one row per
  // allowed request; its 429 answered at once when blocked), and against
  // the passthrough's: a ratio the floor or the machine cannot reach here
  // is out of reach of any workers-rs Worker on this machine.
  for (const [sc, times] of [["allowed", 1], ["blocked", 3]]) {
    const [f, pt, b] = [rps(sc, "floor"), rps(sc, "passthrough"), rps(sc, "hono")];
    T.push({
      target: `floor: the Rust floor's req/s ÷ peer A, ${sc} (against the ${times}× target)`,
      measured: `${fmt(f, 0)} vs ${fmt(b, 0)} req/s (×${fmt(ratio(f, b))}); the passthrough ×${fmt(ratio(pt, b))}`,
      status: f == null || b == null ? "not measured" : f >= times * b ? "the floor is within it" : "the floor is below it",
    });
  }
  {
    const hr = (sys) => R.hot?.load?.scenarios?.hotkey?.[sys]?.rps ?? null;
    const calls = (sys) => R.hot?.perRequest?.hotkey?.[sys]?.objectCalls ?? null;
    const a = hr("tollgate-hot");
    const b = hr("hono-hot");
    T.push({
      target: "hot-key req/s: tollgate ≥ 2× peer A (one global key, large limit, nothing blocked)",
      measured:
        `${fmt(a, 0)} vs ${fmt(b, 0)} req/s (×${fmt(ratio(a, b))}); object calls per request ${fmt(calls("tollgate-hot"), 4)} vs ${fmt(calls("hono-hot"), 4)}` +
        `; tollgate with lease = "off": ${fmt(hr("tollgate-hot-off"), 0)} req/s, ${fmt(calls("tollgate-hot-off"), 4)} calls per request` +
        `; passthrough (the ceiling here) ${fmt(hr("passthrough"), 0)} req/s, ×${fmt(ratio(hr("passthrough"), b))} peer A`,
      status: status(a == null || b == null ? null : a >= 2 * b),
    });
  }
  {
    const a = rps("nonmatch", "tollgate");
    const b = rps("nonmatch", "passthrough");
    T.push({
      target: "non-matching path ≥ 90% of passthrough req/s",
      measured: `${fmt(a, 0)} vs ${fmt(b, 0)} req/s (${fmt(ratio(a, b) * 100, 1)}%)`,
      status: status(a == null || b == null ? null : a >= 0.9 * b),
    });
  }
  {
    const b = R.load.burst.tollgate;
    T.push({
      target: `0 requests over the limit (${BURST} concurrent, one IP)`,
      measured: b ? `${b.overLimit} over (${b.allowed} let through)` : "–",
      status: status(b ? b.overLimit === 0 : null),
    });
  }
  T.push({
    target: "gzip ≤ 600 KiB",
    measured: R.gzip ? `${fmt(R.gzip.gzipKiB)} KiB` : "–",
    status: status(R.gzip ? R.gzip.gzipKiB <= 600 : null),
  });
  {
    // benches/core.rs states its own targets: canonicalize + match against the
    // shipped config ≤ 5 µs median, against a 20-rule config ≤ 20 µs. The
    // 5 µs target is checked on every bench but the 20-rule ones.
    const worstOf = (bs) => (bs.length ? bs.reduce((w, b) => (b.medianUsPerRequest > w.medianUsPerRequest ? b : w)) : null);
    const five = worstOf(R.core.benches.filter((b) => !/20-rules/.test(b.id)));
    const twenty = worstOf(R.core.benches.filter((b) => /20-rules/.test(b.id)));
    T.push({
      target: "core ≤ 5 µs per request (median; shipped config, and the window decision)",
      measured: five ? `worst: ${five.id} ${fmt(five.medianUsPerRequest, 3)} µs` : `– (${R.core.skipped ?? "no figures"})`,
      status: status(five ? five.medianUsPerRequest <= 5 : null),
    });
    if (twenty) {
      T.push({
        target: "core with a 20-rule config ≤ 20 µs per request (benches/core.rs's own second target)",
        measured: `worst: ${twenty.id} ${fmt(twenty.medianUsPerRequest, 3)} µs`,
        status: status(twenty.medianUsPerRequest <= 20),
      });
    }
  }
  return T;
}

// ---- main -------------------------------------------------------------------

const R = {
  date: new Date().toISOString(),
  mode: MODE.name,
  origin: ORIGIN,
  machine: machineInfo(),
  git: gitInfo(),
  build: process.env.BENCH_BUILD_TEXT ?? "not recorded (run through scripts/bench)",
  floorBuild: process.env.BENCH_FLOOR_TEXT ?? "not recorded (run through scripts/bench)",
  systems: Object.fromEntries(SYSTEMS.map((s) => [s.name, s.label])),
  cpu: { clockTicksPerSecond: CLK_TCK, source: "/proc/PID/stat utime + stime of each system's workerd" },
  prices: PRICES,
  assumptions: ASSUMPTIONS,
};

for (const [what, file] of [
  ["build/index.js", join(ROOT, "build", "index.js")],
  ["build/index_bg.wasm", join(ROOT, "build", "index_bg.wasm")],
  ["the Rust floor's build", join(FLOOR_DIR, "index_bg.wasm")],
]) {
  if (!existsSync(file)) {
    console.error(`${what} is missing (${relative(ROOT, file)}): the build failed, nothing to benchmark`);
    process.exit(1);
  }
}
if (process.env.BENCH_BUILD === "failed") {
  note(`scripts/build failed on the current sources; benchmarked the existing build/ (${R.build})`);
}

R.gzip = await measureGzip();
R.honoBundle = await bundleHono();
{
  const bytes = Buffer.concat([readFileSync(join(FLOOR_DIR, "index.js")), readFileSync(join(FLOOR_DIR, "index_bg.wasm"))]);
  R.floorBundle = { totalKiB: round(bytes.length / 1024), gzipKiB: round(gzipSync(bytes, { level: 9 }).length / 1024) };
}

/**
 * One load phase: starts `list`'s systems, each in its own workerd, checks
 * that each answers, runs bench/loadgen.mjs on them, reads their totals and
 * disposes of them. `phase`: "main", "hot" or "object" (see loadTest).
 * Each phase's objects persist in their own directory: a later phase
 * counts from zero.
 */
async function loadPhase(list, phase) {
  log(`starting ${list.length} systems (${phase} phase), each in its own workerd`);
  const out = {};
  const systems = [];
  try {
    for (const s of list) systems.push(await startSystem(s.name, join(TMP, "run", phase === "main" ? `do-${s.name}` : `do-${phase}-${s.name}`)));
    log(`workerd pids: ${systems.map((s) => `${s.name} ${s.pid}`).join(", ")}`);
    // Smoke check: every system answers a non-matching request with the origin's 200.
    for (const s of systems) {
      const res = await s.mf.dispatchFetch(`http://${s.name}.bench/api/other`, { headers: { "cf-connecting-ip": "203.0.113.1" } });
      const text = await res.text();
      if (res.status !== 200 || text !== "origin ok\n") throw new Error(`${s.name}: smoke check got ${res.status} ${text.slice(0, 200)}`);
      if (METERED[s.name] && !(await readMeter(s))) throw new Error(`${s.name}: no object meter`);
      if (phase === "hot" && METERED[s.name]) {
        // The limited path is let through, and counted: an object call.
        const calls0 = (await readMeter(s)).calls ?? 0;
        const r = await s.mf.dispatchFetch(`http://${s.name}.bench/api/example?mode=heavy`, { headers: { "cf-connecting-ip": "203.0.113.2" } });
        await r.arrayBuffer();
        await sleep(SETTLE_MS);
        const calls1 = (await readMeter(s)).calls ?? 0;
        if (r.status !== 200 || calls1 <= calls0) {
          throw new Error(`${s.name}: hot-key smoke check got ${r.status} with ${calls1 - calls0} object calls (expected 200 and a call)`);
        }
      }
    }
    const before = cpuSnapshot();
    out.load = await loadTest(systems, phase);
    out.cpuDuringLoad = cpuShare(before, cpuSnapshot());
    out.runtimeOutput = Object.fromEntries(
      systems.map((s) => [s.name, { stdoutLines: s.io.stdoutLines, stdoutBytes: s.io.stdoutBytes, stderrLines: s.io.stderrLines, stderrBytes: s.io.stderrBytes }]),
    );
    out.meterTotals = {};
    for (const s of systems) if (METERED[s.name]) out.meterTotals[s.name] = await readMeter(s);
  } catch (e) {
    for (const s of systems) if (s.io.stderrTail.length) console.error(`[${s.name}] ${s.io.stderrTail.join(`\n[${s.name}] `)}`);
    throw e;
  } finally {
    for (const s of systems) await s.mf.dispose();
  }
  return out;
}

/** Per (scenario, system): what a request costs (perRequest), with the per-round CPU. */
function perRequestAll(load) {
  const out = {};
  for (const [sc, bySys] of Object.entries(load.scenarios)) {
    out[sc] = {};
    for (const [sys, c] of Object.entries(bySys)) {
      const pr = perRequest(c);
      if (!pr) continue;
      pr.cpuUsPerRound = c.usagePerRound.map((r) => (r.usage && r.count ? r.usage.cpuUs / r.count : null));
      out[sc][sys] = pr;
    }
  }
  return out;
}

{
  const main = await loadPhase(SYSTEMS, "main");
  R.load = main.load;
  R.cpuDuringLoad = main.cpuDuringLoad;
  R.runtimeOutput = main.runtimeOutput;
  R.meterTotals = main.meterTotals;
  if (R.cpuDuringLoad && R.cpuDuringLoad.otherPercent >= 10) {
    note(
      `other processes on the machine used ${R.cpuDuringLoad.otherPercent}% of its CPU during the load test ` +
        "(e.g. someone else's build or tests): req/s are disturbed; CPU per request much less (it counts only each workerd's own time)",
    );
  }
}
// The hot-key phase: its own systems (other configs), after the first
// phase's workerds are gone.
{
  const hot = await loadPhase(HOT_SYSTEMS, "hot");
  R.hot = {
    limit: HOT_LIMIT,
    systems: Object.fromEntries(HOT_SYSTEMS.map((s) => [s.name, s.label])),
    tollgateRule: hotTollgateConfig("auto").rules[0],
    ...hot,
  };
  if (R.hot.cpuDuringLoad && R.hot.cpuDuringLoad.otherPercent >= 10) {
    note(`other processes used ${R.hot.cpuDuringLoad.otherPercent}% of the machine's CPU during the hot-key phase`);
  }
}
// The object-floor phase: the allowed scenario alone, on the Rust floor
// with its object in JavaScript and in Rust, tollgate and peer A.
{
  const object = await loadPhase(OBJECT_SYSTEMS, "object");
  R.objectFloor = { systems: Object.fromEntries(OBJECT_SYSTEMS.map((s) => [s.name, s.label])), ...object };
  if (R.objectFloor.cpuDuringLoad && R.objectFloor.cpuDuringLoad.otherPercent >= 10) {
    note(`other processes used ${R.objectFloor.cpuDuringLoad.otherPercent}% of the machine's CPU during the object-floor phase`);
  }
}
R.originHits = Object.fromEntries(originHits);

R.perRequest = perRequestAll(R.load);
R.hot.perRequest = perRequestAll(R.hot.load);
R.objectFloor.perRequest = perRequestAll(R.objectFloor.load);
if (
  SCENARIOS.some((sc) => SYSTEMS.some((s) => !R.perRequest[sc]?.[s.name])) ||
  HOT_SYSTEMS.some((s) => !R.hot.perRequest.hotkey?.[s.name]) ||
  OBJECT_SYSTEMS.some((s) => !R.objectFloor.perRequest.allowed?.[s.name])
) {
  note("some cells have no usage figures (a snapshot failed: see the log)");
}

// Cold start: needs about 2 s per run and system.
R.coldStart = {};
for (const name of ["tollgate", "hono"]) {
  const need = MODE.coldRuns * 2_000;
  if (remaining() < need + 10_000) {
    note(`cold start of ${name} skipped: not enough time left in the ${MODE.name} budget`);
    continue;
  }
  log(`cold start: ${name}, ${MODE.coldRuns} runs`);
  R.coldStart[name] = await coldStart(name, MODE.coldRuns);
}

R.core = await coreBench();
if (R.core.skipped) note(`core microbenchmark skipped: ${R.core.skipped}`);

// Context for the reader.
note(
  R.origin === "worker"
    ? "the origin is a JS Worker inside each system's workerd (--origin=worker): CPU per request includes it (the same for every system)"
    : "the origin is a Node function in the benchmark's process (`outboundService`): CPU per request includes workerd's side of the " +
        "loopback HTTP call to it, not the origin itself; `scripts/bench --origin=worker` puts it inside each workerd instead",
);
note(
  "CPU per request is the whole workerd process, Miniflare's entry Worker (which routes and rewrites every request) included; " +
    "the same fixed overhead for every system, so differences between systems are theirs, ratios understate them",
);
note(
  "tollgate and peer A run with their Durable Object class wrapped by the billing meter (bench/workers/meter.mjs): " +
    "a counter per call and a Proxy on `storage`, a few µs per object call at most",
);
note(
  "tollgate answers repeat offenders from its in-isolate blocked-until cache (no Durable Object call), and logs one " +
    "JSON line per block episode of a (rule, key) (a minute), not per blocked request",
);
note(
  "peer A (hono-rate-limiter's DurableObjectStore) calls its Durable Object on every limited request, blocked ones " +
    "included (increment, then compare); its object is a SQLite-backed class here too, used through the KV storage API",
);
note(
  "peer B is Miniflare's local simulation of the Rate Limiting binding: exact, in-memory, fixed 60 s windows " +
    "(all counters reset at each minute boundary, so a cell spanning one may let a few blocked requests through); " +
    "the production binding is per-location and eventually consistent, so its local exactness says little about production",
);
R.notes = notes;
R.targets = targets(R);
R.elapsedSeconds = (Date.now() - T0) / 1000;

writeFileSync(join(BENCH, RESULTS_JSON), JSON.stringify(R, null, 2) + "\n");
writeFileSync(join(BENCH, RESULTS_MD), buildReport(R));
rmSync(join(TMP, "run"), { recursive: true, force: true });
log(`wrote bench/${RESULTS_MD} and bench/${RESULTS_JSON} in ${fmt(R.elapsedSeconds, 0)} s`);
for (const sc of SCENARIOS) {
  log(`CPU µs/request ${sc.padEnd(8)} ` + SYSTEMS.map((s) => `${s.short} ${fmt(cell(R, sc, s.name)?.cpuUs, 0)}`).join(", "));
}
for (const s of HOT_SYSTEMS) {
  const r = R.hot.load.scenarios.hotkey?.[s.name];
  const c = R.hot.perRequest.hotkey?.[s.name];
  log(`hot key ${s.short.padEnd(22)} ${fmt(r?.rps, 0)} req/s, ${fmt(c?.cpuUs, 0)} µs CPU/req, ${fmt(c?.objectCalls, 4)} object calls/req`);
}
for (const s of OBJECT_SYSTEMS) {
  log(`object floor ${s.short.padEnd(26)} ${fmt(R.objectFloor.perRequest.allowed?.[s.name]?.cpuUs, 0)} µs CPU/req (allowed)`);
}
for (const t of R.targets) log(`target: ${t.target}: ${t.status} (${t.measured})`);
