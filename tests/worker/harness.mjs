// Test harness: runs the built Worker (src/entry.mjs, the deployed entry,
// over build/index.js + its Wasm) and the admin Worker (build-admin/entry.mjs,
// `scripts/build admin`: the console and the admin API, bound to the first
// one's Durable Objects as wrangler.admin.toml binds them) in workerd
// through Miniflare, with the limiter Durable Object on SQLite, persistence
// in a temporary folder, and the origin mocked at the network edge
// (outboundService) so tests see exactly what reached it.
import { Miniflare } from "miniflare";
import { parse as parseToml } from "smol-toml";
import { mkdtempSync, readFileSync, readdirSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

// A Durable Object standing in front of the real limiter, for fault
// injection. Its mode lives in the module, shared by the faults worker's
// fetch handler (which sets it) and its objects (which read it).
const FAULTY_LIMITER = `
import { DurableObject } from "cloudflare:workers";
let mode = "ok";
let calls = 0;
const INJECTED = JSON.stringify({ v: 1, error: "injected fault: SQLITE_IOERR" });
// Declared as the shipped entry declares the limiter (src/entry.mjs), so the
// Worker's counts arrive as RPC calls (\`call\`); admin controls as fetches.
export class FaultyLimiter extends DurableObject {
  real() {
    const real = this.env.REAL;
    return real.get(real.idFromName(this.ctx.id.name ?? this.ctx.id.toString()));
  }
  async answer(url) {
    calls++;
    if (mode === "throw") throw new Error("injected fault: counter threw");
    if (mode === "hang") await new Promise(() => {});
    if (mode === "storage") return "!500 " + INJECTED;
    return this.real().answer(url);
  }
  async fetch(request) {
    calls++;
    if (mode === "throw") throw new Error("injected fault: counter threw");
    if (mode === "hang") await new Promise(() => {});
    if (mode === "storage") return new Response(INJECTED, { status: 500 });
    return this.real().fetch(request);
  }
}
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/calls") return new Response(String(calls));
    if (url.pathname === "/mode") mode = url.searchParams.get("m");
    return new Response(mode);
  },
};
`;

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const WRANGLER = parseToml(readFileSync(join(ROOT, "wrangler.toml"), "utf8"));
/** The compatibility date of the shipped wrangler.toml, for extra workers. */
export const COMPATIBILITY_DATE = WRANGLER.compatibility_date;

/**
 * The Durable Object bindings of the shipped wrangler.toml (one class per
 * role: LIMITER, TOLLGATE_REGISTRY, TOLLGATE_METRICS_SINK) as Miniflare's
 * `durableObjects`, on SQLite; `scriptName`: the classes of that worker
 * (another edge's, sharing its objects). `wrangler`: another parsed config
 * (an example app's, whose Worker exports its own classes).
 */
export function shippedObjects(scriptName, wrangler = WRANGLER) {
  const entries = wrangler.durable_objects.bindings.map(({ name, class_name }) => [
    name,
    scriptName ? { className: class_name, scriptName } : { className: class_name, useSQLite: true },
  ]);
  return Object.fromEntries(entries);
}

/** The TOLLGATE config shipped in wrangler.toml. */
export function shippedConfig() {
  return structuredClone(WRANGLER.vars.TOLLGATE);
}

/** The TOLLGATE config of examples/NAME/wrangler.toml (or of its env). */
/** The Durable Object bindings of examples/NAME/wrangler.toml, as `shippedObjects`. */
export function exampleObjects(name) {
  return shippedObjects(undefined, parseToml(readFileSync(join(ROOT, "examples", name, "wrangler.toml"), "utf8")));
}

export function exampleConfig(name, env) {
  const toml = parseToml(readFileSync(join(ROOT, "examples", name, "wrangler.toml"), "utf8"));
  const section = env ? toml.env[env] : toml;
  return structuredClone(section.vars.TOLLGATE);
}

/** A fresh persistence folder, removed by `cleanup`. */
export function tempDir(prefix = "tollgate-test-") {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * A mock origin: records every request it receives and answers 200 with a
 * JSON echo, or whatever `respond(request, record)` returns.
 */
export function mockOrigin(respond) {
  const received = [];
  async function outboundService(request) {
    const body = Buffer.from(await request.arrayBuffer());
    const url = new URL(request.url);
    const record = {
      method: request.method,
      url: request.url,
      path: url.pathname,
      query: url.search,
      headers: Object.fromEntries(request.headers),
      body,
    };
    received.push(record);
    if (respond) {
      const custom = await respond(request, record);
      if (custom) return custom;
    }
    return new Response(JSON.stringify({ method: record.method, path: record.path, query: record.query }), {
      status: 200,
      headers: { "content-type": "application/json", "x-origin": "mock" },
    });
  }
  return { received, outboundService };
}

/**
 * A call's compact form, as the Worker sends it (src/count/protocol.rs
 * `encode_call_url`), from the fields of the call's JSON form.
 */
export function callUrl({ v = 1, op, alg, limits, cost, hold_ms, reservation, want, penalty_ms }) {
  let url = `https://limiter/v${v}/${op}?l=${limits.map(([requests, windowMs]) => `${requests}x${windowMs}`).join(",")}`;
  if (cost !== undefined && cost !== 1) url += `&c=${cost}`;
  if (alg !== undefined && alg !== "sliding_log") url += `&a=${alg}`;
  if (hold_ms !== undefined) url += `&h=${hold_ms}`;
  if (reservation !== undefined) url += `&r=${reservation}`;
  if (want !== undefined) url += `&w=${want}`;
  if (penalty_ms !== undefined) url += `&p=${penalty_ms}`;
  return url;
}

/**
 * An object's RPC answer (src/count/protocol.rs `encode_rpc_answer`): a reply
 * line, read into the fields of the reply's JSON form (`protocol::Reply`),
 * or `!{status} {json error}`.
 */
export function readAnswer(answer) {
  if (answer.startsWith("!")) {
    const space = answer.indexOf(" ");
    return { status: Number(answer.slice(1, space)), body: JSON.parse(answer.slice(space + 1)) };
  }
  const fields = answer.split(" ");
  const penalty = fields.at(-1).startsWith("p=") ? Number(fields.pop().slice(2)) : undefined;
  const granted = fields.at(-1).startsWith("g=") ? Number(fields.pop().slice(2)) : undefined;
  const [v, allowed, retryAfter, binding, inFlight, alarmPending, alarmSet, storedHits, rowsRead, rowsWritten, reservation, held, ...windows] = fields;
  const body = {
    v: Number(v),
    allowed: allowed === "a",
    retry_after_ms: Number(retryAfter),
    windows: windows.map((w) => {
      const [limit, window_ms, used, remaining, reset_ms] = w.split("/").map(Number);
      return { limit, window_ms, used, remaining, reset_ms };
    }),
    binding_window: binding === "-" ? null : Number(binding),
    alarm_pending: alarmPending === "1",
    alarm_set: alarmSet === "1",
    stored_hits: Number(storedHits),
    rows_read: Number(rowsRead),
    rows_written: Number(rowsWritten),
  };
  // Absent when false, 0 or none, as in the reply's JSON form.
  if (inFlight === "1") body.in_flight = true;
  if (held !== "0") body.held = Number(held);
  if (reservation !== "-") body.reservation = Number(reservation);
  if (granted !== undefined) body.granted = granted;
  if (penalty !== undefined) body.penalty_until_ms = penalty;
  return { status: 200, body };
}

/**
 * Starts tollgate in Miniflare.
 * options: config (TOLLGATE object; defaults to the shipped one), persist
 * (folder; defaults to a new temp folder), origin (from mockOrigin), vars
 * (extra plain bindings), limiterScript (replace the Durable Object, for
 * fault injection), services ({ BINDING: "worker-name" }: tollgate's
 * [[services]] bindings) and workers (more Miniflare worker definitions,
 * e.g. the app Worker behind a service binding, or one that binds tollgate).
 * Requests go to the first worker, tollgate, unless `entry` names another.
 * scriptPath: another built Worker in tollgate's place (one that embeds
 * tollgate, with the same bindings: TOLLGATE and its objects). workerOptions:
 * more Miniflare options of the tollgate Worker (analyticsEngineDatasets,
 * serviceBindings); extraWorkers: as workers.
 * miniflare: more top-level Miniflare options (host, port).
 * admin (default true): also run the admin Worker, `tollgate-admin`, with
 * the same config and vars (the same tokens), bound to tollgate's objects,
 * on `adminRoutes` (default: every host's `{admin_prefix}*`, as an operator
 * may route the zone's `example.com/.tollgate*` to it; the other spellings
 * of the prefix still reach the zone's Worker) and on admin.example.com
 * (`tg.admin(path)`); false: the zone's Worker alone.
 * edges (a number of extra Workers running the same
 * built script, named edge-1..edge-N: separate isolates sharing the
 * first one's limiter objects; `fetchVia(i, ...)` sends to edge i).
 */
export async function startTollgate(options = {}) {
  const persist = options.persist ?? tempDir();
  const origin = options.origin ?? mockOrigin();
  const tollgate = {
    name: "tollgate",
    modules: true,
    scriptPath: options.scriptPath ?? join(ROOT, "src", "entry.mjs"),
    modulesRoot: ROOT,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: WRANGLER.compatibility_date,
    bindings: { TOLLGATE: options.config ?? shippedConfig(), ...(options.vars ?? {}) },
    durableObjects: shippedObjects(),
    outboundService: origin.outboundService,
    stripCfConnectingIp: false,
    serviceBindings: options.services ?? {},
    ...(options.workerOptions ?? {}),
  };
  const workers = [tollgate, ...(options.workers ?? []), ...(options.extraWorkers ?? [])];
  if (options.admin ?? !options.scriptPath) workers.push(adminWorker(tollgate, options));
  if (options.entry) workers.unshift(...workers.splice(workers.findIndex((w) => w.name === options.entry), 1));
  if (options.faults) {
    // The Worker's LIMITER binding goes to FaultyLimiter, which passes calls
    // through to the real Limiter unless told to throw, hang or fail.
    tollgate.durableObjects = {
      ...tollgate.durableObjects,
      LIMITER: { className: "FaultyLimiter", scriptName: "faults" },
      REAL_LIMITER: { className: "Limiter", useSQLite: true },
    };
    workers.push({
      name: "faults",
      modules: true,
      script: FAULTY_LIMITER,
      compatibilityDate: WRANGLER.compatibility_date,
      durableObjects: {
        FAULTY: { className: "FaultyLimiter" },
        REAL: { className: "Limiter", scriptName: "tollgate", useSQLite: true },
      },
    });
  }
  const admin = workers.find((w) => w.name === ADMIN_WORKER);
  if (admin) {
    // Every object binding of tollgate's, as the zone Worker's own (script_name).
    const bound = Object.entries(tollgate.durableObjects).map(([name, { className, scriptName = "tollgate" }]) => [name, { className, scriptName }]);
    admin.durableObjects = Object.fromEntries(bound);
  }
  for (let i = 1; i <= (options.edges ?? 0); i++) {
    // Another edge: its own isolate (own lease book, own caches), the same
    // objects (the first worker's LIMITER, or the faults proxy in front).
    const { className, scriptName = "tollgate" } = tollgate.durableObjects.LIMITER;
    // Reached by host (dispatchFetch routes it), so every edge is driven
    // the same way as the first.
    const durableObjects = { ...shippedObjects("tollgate"), LIMITER: { className, scriptName } };
    workers.push({ ...tollgate, name: `edge-${i}`, routes: [`edge-${i}.example.com/*`], durableObjects });
  }
  const logs = [];
  let lastOutputAt = 0;
  const mf = new Miniflare({
    // More top-level Miniflare options (host, port: a browser's way in).
    ...(options.miniflare ?? {}),
    workers,
    durableObjectsPersist: persist,
    // Keep workerd's output (the Worker's structured log lines) for assertions.
    handleRuntimeStdio(stdout, stderr) {
      const keep = (d) => {
        logs.push(d.toString());
        lastOutputAt = Date.now();
      };
      stdout.on("data", keep);
      stderr.on("data", keep);
    },
  });
  const url = await mf.ready;
  return {
    mf,
    /** Where Miniflare listens (a URL): the way in for a browser. */
    url,
    persist,
    origin,
    /**
     * Waits for the Worker's output to catch up with the responses already
     * received (workerd's stdout reaches this process a little after the
     * response does): until nothing new has arrived for 50 ms, at most 2 s.
     * Call it before reading `logs()` or `logEvents()`.
     */
    async settled() {
      const until = Date.now() + 2_000;
      do {
        const seen = lastOutputAt;
        await sleep(50);
        if (lastOutputAt === seen) return;
      } while (Date.now() < until);
    },
    /** Everything the Worker printed so far. */
    logs: () => logs.join(""),
    /** The structured log lines (`{"tollgate": event, ...}`) printed so far. */
    logEvents: () =>
      logs
        .join("")
        .split("\n")
        .filter((l) => l.includes('"tollgate"'))
        .map((l) => JSON.parse(l.slice(l.indexOf("{")))),
    /** Sends a request as client `ip` (CF-Connecting-IP). */
    async fetch(path, { ip = "203.0.113.7", headers = {}, ...init } = {}) {
      const url = path.startsWith("http") ? path : `https://example.com${path}`;
      const h = { ...headers };
      if (ip !== null) h["cf-connecting-ip"] = ip;
      return mf.dispatchFetch(url, { ...init, headers: h, redirect: "manual" });
    },
    /** Sends a request to the admin Worker (admin.example.com) as client `ip`. */
    async admin(path, { ip = "203.0.113.7", headers = {}, ...init } = {}) {
      const h = { ...headers };
      if (ip !== null) h["cf-connecting-ip"] = ip;
      return mf.dispatchFetch(`https://${ADMIN_HOST}${path}`, { ...init, headers: h, redirect: "manual" });
    },
    /** Sends a request through edge `i` (0: the first worker). */
    async fetchVia(i, path, { ip = "203.0.113.7", headers = {}, ...init } = {}) {
      const host = i === 0 ? "example.com" : `edge-${i}.example.com`;
      const h = { ...headers };
      if (ip !== null) h["cf-connecting-ip"] = ip;
      return mf.dispatchFetch(`https://${host}${path}`, { ...init, headers: h, redirect: "manual" });
    },
    /** Calls that reached the limiter objects through FaultyLimiter. */
    async objectCalls() {
      const faults = await mf.getWorker("faults");
      return Number(await (await faults.fetch("http://faults/calls")).text());
    },
    /** Sets the fault mode of FaultyLimiter: ok | throw | hang | storage. */
    async setFault(mode) {
      const faults = await mf.getWorker("faults");
      const res = await faults.fetch(`http://faults/mode?m=${mode}`);
      assert.equal(await res.text(), mode);
    },
    /** Calls a limiter object directly with a protocol call. */
    /**
     * Sends `call` ({ v, op, alg, limits: [[requests, window_ms]], cost,
     * hold_ms, reservation, want }) to the limiter object `name` as the
     * Worker does (the compact form, over RPC), and reads its answer:
     * { status: 200, body: the reply's fields } or { status, body: the error }.
     */
    async callObject(name, call) {
      const ns = await mf.getDurableObjectNamespace(options.faults ? "REAL_LIMITER" : "LIMITER", "tollgate");
      const answer = await ns.get(ns.idFromName(name)).answer(callUrl(call));
      return readAnswer(answer);
    },
    async dispose() {
      await mf.dispose();
    },
    cleanup() {
      rmSync(persist, { recursive: true, force: true });
    },
  };
}

/** The admin Worker's name in Miniflare, and its own host. */
export const ADMIN_WORKER = "tollgate-admin";
export const ADMIN_HOST = "admin.example.com";
const ADMIN_BUILD = join(ROOT, "build-admin", "entry.mjs");

/**
 * The admin Worker beside `tollgate` (its Miniflare options): the same
 * bindings and vars, its objects tollgate's (set once the LIMITER binding is
 * known), the same mock origin (which it must never reach).
 */
/**
 * The admin Worker beside `worker` (a Miniflare worker of today's zone
 * build): its config and vars, its Durable Object bindings as the zone
 * Worker's (`script_name`), answering on `routes`. For tests that assemble
 * their own workers (skew.test.mjs).
 */
export function adminWorkerBeside(worker, routes) {
  assert.ok(existsSync(ADMIN_BUILD), `${ADMIN_BUILD} is missing: run scripts/build admin`);
  const bound = Object.entries(worker.durableObjects ?? {}).map(([name, { className, scriptName = worker.name }]) => [name, { className, scriptName }]);
  return {
    ...worker,
    name: ADMIN_WORKER,
    scriptPath: ADMIN_BUILD,
    modulesRoot: ROOT,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    durableObjects: Object.fromEntries(bound),
    routes,
    serviceBindings: {},
  };
}

function adminWorker(tollgate, options) {
  assert.ok(existsSync(ADMIN_BUILD), `${ADMIN_BUILD} is missing: run scripts/build admin`);
  const prefix = (options.config ?? shippedConfig()).admin_prefix ?? "/.tollgate";
  return {
    ...tollgate,
    name: ADMIN_WORKER,
    scriptPath: ADMIN_BUILD,
    routes: [...(options.adminRoutes ?? [`*${prefix}*`]), `${ADMIN_HOST}/*`],
    serviceBindings: {},
  };
}

/**
 * Runs `body(tg)` against a fresh tollgate, then checks the Worker never
 * panicked, and disposes of it and its persistence folder.
 */
export async function withTollgate(options, body) {
  const tg = await startTollgate(options);
  try {
    await body(tg);
    await tg.settled();
    assert.ok(!/panicked|RuntimeError: unreachable/i.test(tg.logs()), "no panic in the Worker");
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
}

/** SQLite files of limiter objects under a persistence folder. */
export function objectFiles(persist) {
  const out = [];
  const walk = (dir) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.name.endsWith(".sqlite") && entry.name !== "metadata.sqlite") out.push(p);
    }
  };
  walk(persist);
  return out;
}

/** Sends `n` requests one after another; returns their statuses. */
export async function statuses(tg, n, path, init) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const res = await tg.fetch(path, init);
    await res.arrayBuffer();
    out.push(res.status);
  }
  return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The log events `tg` wrote after the first `before`, once `count` of them
 * have arrived (workerd's stdout reaches this process a little after the
 * response does; at most 2 s).
 */
export async function eventsSince(tg, before, count) {
  for (let i = 0; i < 100 && tg.logEvents().length < before + count; i++) await sleep(20);
  await sleep(5);
  return tg.logEvents().slice(before);
}
