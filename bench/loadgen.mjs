// Load generator for scripts/bench, run in its own process (so it does not
// share an event loop with Miniflare or the mocked origin, and its CPU is
// not counted as any system's).
//
//   node bench/loadgen.mjs PLAN.json OUT.json
//
// PLAN: { systems: [{ name, base, host }], scenarios: [names], concurrency,
//         globalWarmupMs, globalWarmupScenario (default "mix"), rounds,
//         warmupMs, durationMs, maxRequests, requestTimeoutMs,
//         burst: { requests, limit } or null }
// Each system runs in its own workerd, reached at its own `base` URL (the
// Host header is `host`, for Miniflare's route `NAME.bench/*`).
//
// Usage: when started by bench/run.mjs (with an IPC channel), every
// measured phase is bracketed by two snapshots the parent takes of that
// system's workerd (CPU time, log output, object meter); the round keeps
// their difference. Run alone, rounds carry no usage.
//
// Closed loop: `concurrency` virtual clients, each sending its next request
// when the previous one has been read to the end (HTTP/1.1 keep-alive).
// Each cell (scenario × system) runs `rounds` times, interleaved with the
// other cells, and its rounds are merged.
// Every phase is bounded both in time (warmupMs, durationMs) and in count
// (maxRequests), and every request by requestTimeoutMs.
import http from "node:http";
import { readFileSync, writeFileSync } from "node:fs";

const [planPath, outPath] = process.argv.slice(2);
if (!planPath || !outPath) {
  console.error("usage: node bench/loadgen.mjs PLAN.json OUT.json");
  process.exit(2);
}
const plan = JSON.parse(readFileSync(planPath, "utf8"));
for (const sys of plan.systems) sys.url = new URL(sys.base);
const log = (...a) => console.error("[loadgen]", ...a);

const HEAVY = "/api/example?mode=heavy";
const OTHER = "/api/other?mode=light";

// ---- client IPs -----------------------------------------------------------
// Disjoint ranges per (system, use), so no scenario sees another's counters.
const dotted = (n) => `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
/** The k-th distinct "allowed" address of system s for use u (0: allowed, 1: mix). */
const distinctIp = (s, u, k) => dotted(((10 + u) << 24) + s * 0x400000 + (k % 0x400000));
const hotIp = (s, u) => `192.0.2.${10 + u * 20 + s}`;
const burstIp = (s) => `198.51.100.${10 + s}`;
const otherIp = (s, n) => `172.16.${s}.${(n % 250) + 1}`;

/**
 * A scenario for system s: next(n) gives the n-th request (n counts warmup
 * too) as { path, ip, kind }, kind being what the request should get:
 * "pass" (not limited, 200), "allow" (limited, under the limit, 200) or
 * "block" (limited, over the limit, 429).
 */
function scenario(name, s) {
  switch (name) {
    case "nonmatch":
      return { hot: null, next: (n) => ({ path: OTHER, ip: otherIp(s, n), kind: "pass" }) };
    case "allowed":
      // Each address is used 10 times (the limit), so every request is allowed.
      return { hot: null, next: (n) => ({ path: HEAVY, ip: distinctIp(s, 0, Math.floor(n / 10)), kind: "allow" }) };
    case "blocked":
      return { hot: hotIp(s, 0), next: () => ({ path: HEAVY, ip: hotIp(s, 0), kind: "block" }) };
    case "hotkey":
      // Every request counts on one key (the systems of the hot-key phase key
      // their rule on a constant, with a limit far above what a run sends),
      // so every request is allowed; the addresses vary but do not matter.
      return { hot: null, next: (n) => ({ path: HEAVY, ip: otherIp(s, n), kind: "allow" }) };
    case "mix": {
      // Per 10 requests: 7 non-matching, 2 allowed (distinct IPs), 1 hot IP.
      let allowedSeq = 0;
      return {
        hot: hotIp(s, 1),
        next: (n) => {
          const slot = n % 10;
          if (slot < 7) return { path: OTHER, ip: otherIp(s, n), kind: "pass" };
          if (slot < 9) return { path: HEAVY, ip: distinctIp(s, 1, Math.floor(allowedSeq++ / 10)), kind: "allow" };
          return { path: HEAVY, ip: hotIp(s, 1), kind: "block" };
        },
      };
    }
    default:
      throw new Error(`unknown scenario ${name}`);
  }
}

// ---- usage snapshots (from the parent) ---------------------------------------
const pendingSnapshots = new Map();
let snapshotSeq = 0;
process.on("message", (m) => {
  pendingSnapshots.get(m.id)?.(m.snapshot);
  pendingSnapshots.delete(m.id);
});
/** The parent's snapshot of `sys` (`at`: "start" or "end"), or null when run alone. */
function snapshot(sys, at) {
  if (!process.send) return Promise.resolve(null);
  return new Promise((resolve) => {
    const id = snapshotSeq++;
    pendingSnapshots.set(id, resolve);
    process.send({ type: "snapshot", id, system: sys.name, at });
  });
}
/** b − a for every number in two snapshots of the same shape (null stays null). */
function usageDelta(a, b) {
  if (a == null || b == null) return null;
  const out = {};
  for (const [k, v] of Object.entries(b)) {
    if (typeof v === "number") out[k] = v - (a[k] ?? 0);
    else if (v && typeof v === "object") out[k] = usageDelta(a[k], v);
    else out[k] = v;
  }
  return out;
}
/** a + b for every number (a may be null: the first round). */
function usageSum(a, b) {
  if (b == null) return a;
  if (a == null) return structuredClone(b);
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    if (typeof v === "number") out[k] = (a[k] ?? 0) + v;
    else if (v && typeof v === "object") out[k] = usageSum(a[k], v);
  }
  return out;
}

// ---- HTTP -----------------------------------------------------------------
// What the Rust floor alone reads (the other systems ignore the header): a
// request an exact limiter counts is marked `count` (the floor then makes
// one RPC to a per-key object that writes one row), one it refuses `429`
// (the floor answers tollgate's 429 itself): the least a workers-rs Worker
// pays on each path.
const FLOOR_MARK = { allow: { "x-bench-floor": "count" }, block: { "x-bench-floor": "429" } };

function send(agent, sys, path, ip, timeoutMs, extraHeaders = {}) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    let settled = false;
    const done = (status, error) => {
      if (settled) return;
      settled = true;
      resolve({ status, error, ms: Number(process.hrtime.bigint() - t0) / 1e6 });
    };
    const req = http.request(
      {
        host: sys.url.hostname,
        port: sys.url.port,
        path,
        method: "GET",
        agent,
        headers: { host: sys.host, "cf-connecting-ip": ip, ...extraHeaders },
      },
      (res) => {
        res.on("data", () => {});
        res.on("end", () => done(res.statusCode));
        res.on("error", (e) => done(0, e.message));
      },
    );
    req.setTimeout(timeoutMs, () => {
      req.destroy(new Error(`timeout after ${timeoutMs} ms`));
    });
    req.on("error", (e) => done(0, e.message));
    req.end();
  });
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

const expected = { pass: 200, allow: 200, block: 429 };

/**
 * Runs `next` with `concurrency` clients for at most `ms` milliseconds and
 * `max` requests, starting at sequence number `seq0`. Returns the sequence
 * reached, latencies and per-kind status counts.
 */
async function phase(agent, sys, gen, seq0, ms, max, record) {
  const lat = record ? new Float64Array(max) : null;
  let seq = seq0;
  let count = 0;
  const byKind = {};
  const statuses = {};
  const errors = {};
  const tStart = process.hrtime.bigint();
  const tEnd = tStart + BigInt(Math.round(ms * 1e6));
  async function client() {
    while (count < max && process.hrtime.bigint() < tEnd) {
      const r = gen.next(seq++);
      const i = count++;
      const res = await send(agent, sys, r.path, r.ip, plan.requestTimeoutMs, FLOOR_MARK[r.kind] ?? {});
      if (lat) lat[i] = res.ms;
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      const k = (byKind[r.kind] ??= { total: 0, unexpected: 0 });
      k.total++;
      if (res.status !== expected[r.kind]) k.unexpected++;
      if (res.error) errors[res.error] = (errors[res.error] ?? 0) + 1;
    }
  }
  await Promise.all(Array.from({ length: plan.concurrency }, client));
  const elapsedMs = Number(process.hrtime.bigint() - tStart) / 1e6;
  const out = { seq, count, elapsedMs, statuses, byKind, errors };
  if (lat) out.lat = lat.slice(0, count);
  return out;
}

/**
 * One round of one cell (scenario × system): re-exhaust the hot address if
 * the scenario has one (12 requests, one after another), warm up, measure
 * between two usage snapshots of the system's workerd.
 * `state` carries the generator and its sequence number across rounds, so
 * no address is reused beyond what the scenario intends.
 */
async function runRound(state, sys) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: plan.concurrency });
  try {
    const { gen } = state;
    if (gen.hot) {
      for (let i = 0; i < 12; i++) {
        const r = await send(agent, sys, HEAVY, gen.hot, plan.requestTimeoutMs);
        state.exhaust[r.status] = (state.exhaust[r.status] ?? 0) + 1;
      }
    }
    const warm = await phase(agent, sys, gen, state.seq, plan.warmupMs, plan.maxRequests, false);
    const before = await snapshot(sys, "start");
    const meas = await phase(agent, sys, gen, warm.seq, plan.durationMs, plan.maxRequests, true);
    meas.usage = usageDelta(before, await snapshot(sys, "end"));
    state.seq = meas.seq;
    state.warmupCount += warm.count;
    state.rounds.push(meas);
  } finally {
    agent.destroy();
  }
}

/** Merges a cell's rounds: req/s over the summed time, percentiles over all latencies. */
function merge(state) {
  const out = { rounds: state.rounds.length, count: 0, elapsedMs: 0, statuses: {}, byKind: {}, errors: {}, usage: null };
  const lat = [];
  for (const r of state.rounds) {
    out.count += r.count;
    out.elapsedMs += r.elapsedMs;
    out.usage = usageSum(out.usage, r.usage);
    for (const [k, v] of Object.entries(r.statuses)) out.statuses[k] = (out.statuses[k] ?? 0) + v;
    for (const [k, v] of Object.entries(r.errors)) out.errors[k] = (out.errors[k] ?? 0) + v;
    for (const [k, v] of Object.entries(r.byKind)) {
      const o = (out.byKind[k] ??= { total: 0, unexpected: 0 });
      o.total += v.total;
      o.unexpected += v.unexpected;
    }
    for (let i = 0; i < r.count; i++) lat.push(r.lat[i]);
  }
  lat.sort((a, b) => a - b);
  out.rps = out.count / (out.elapsedMs / 1000);
  out.rpsPerRound = state.rounds.map((r) => r.count / (r.elapsedMs / 1000));
  out.usagePerRound = state.rounds.map((r) => ({ count: r.count, usage: r.usage }));
  out.p50Ms = percentile(lat, 50);
  out.p90Ms = percentile(lat, 90);
  out.p99Ms = percentile(lat, 99);
  out.maxMs = lat.length ? lat[lat.length - 1] : null;
  out.meanMs = lat.length ? lat.reduce((a, b) => a + b, 0) / lat.length : null;
  out.warmupRequests = state.warmupCount;
  if (Object.keys(state.exhaust).length) out.exhaust = state.exhaust;
  return out;
}

/** `n` requests on one fresh address, all sent at once. */
async function burst(sys, s, n) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: n });
  try {
    const ip = burstIp(s);
    const t0 = process.hrtime.bigint();
    const results = await Promise.all(
      Array.from({ length: n }, () => send(agent, sys, HEAVY, ip, plan.requestTimeoutMs)),
    );
    const statuses = {};
    for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    const ok = statuses[200] ?? 0;
    return {
      ip,
      sent: n,
      statuses,
      allowed: ok,
      overLimit: Math.max(0, ok - plan.burst.limit),
      elapsedMs: Number(process.hrtime.bigint() - t0) / 1e6,
    };
  } finally {
    agent.destroy();
  }
}

const out = { scenarios: {}, burst: {} };

// Warm everything up first (JIT, isolates, sockets): a short unrecorded mix
// (or the plan's globalWarmupScenario) on every system, with addresses of its own.
if (plan.globalWarmupMs > 0) {
  for (const [s, sys] of plan.systems.entries()) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: plan.concurrency });
    const gen = scenario(plan.globalWarmupScenario ?? "mix", s + 16);
    await phase(agent, sys, gen, 0, plan.globalWarmupMs, plan.maxRequests, false);
    agent.destroy();
  }
  log(`warmed up every system for ${plan.globalWarmupMs} ms`);
}

// Rounds: each round runs every cell once, systems in a rotating order, so
// slow drift and outside load spread over all systems alike.
const states = {};
for (let round = 0; round < plan.rounds; round++) {
  for (const [si, name] of plan.scenarios.entries()) {
    const n = plan.systems.length;
    for (let j = 0; j < n; j++) {
      const s = (j + round + si) % n;
      const sys = plan.systems[s];
      const state = ((states[name] ??= {})[sys.name] ??= {
        gen: scenario(name, s),
        seq: 0,
        warmupCount: 0,
        rounds: [],
        exhaust: {},
      });
      await runRound(state, sys);
      const r = state.rounds[state.rounds.length - 1];
      const cpu = r.usage ? `${(r.usage.cpuUs / r.count).toFixed(0).padStart(5)} µs CPU/req  ` : "";
      log(
        `round ${round + 1}/${plan.rounds} ${name.padEnd(8)} ${sys.name.padEnd(11)} ` +
          `${(r.count / (r.elapsedMs / 1000)).toFixed(0).padStart(6)} req/s  ${cpu}statuses ${JSON.stringify(r.statuses)}`,
      );
    }
  }
}
for (const name of plan.scenarios) {
  out.scenarios[name] = {};
  for (const sys of plan.systems) out.scenarios[name][sys.name] = merge(states[name][sys.name]);
}

if (plan.burst) {
  for (const [s, sys] of plan.systems.entries()) {
    const r = await burst(sys, s, plan.burst.requests);
    out.burst[sys.name] = r;
    log(`burst    ${sys.name.padEnd(11)} ${JSON.stringify(r.statuses)} → over the limit: ${r.overLimit}`);
  }
}
writeFileSync(outPath, JSON.stringify(out, null, 2));
// The IPC channel would keep this process alive.
process.disconnect?.();
