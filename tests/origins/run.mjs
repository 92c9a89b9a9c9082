// The differential run against one real origin: tollgate (the built Worker)
// in Miniflare in front of the origin on loopback, each spelling sent 11
// times from a fresh client and then once in its canonical form, and all of
// them cycled through from one client (runOrigin says which go where). The
// invariant: no protected handler of the origin runs more than the limit
// for one identity, as that origin identifies it.
//
// Also a command: node tests/origins/run.mjs [express flask php nginx]
// writes tests/origins/out/report.json and summary.md.
import { Miniflare } from "miniflare";
import { parse as parseToml } from "smol-toml";
import { mkdirSync, readFileSync, rmSync, writeFileSync, mkdtempSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ROOT, shippedConfig, exampleConfig } from "../worker/harness.mjs";
import { ORIGINS, HERE, forwarder, startOrigin, missingOrigins } from "./origins.mjs";
import { LIMITS, CANONICAL, allSpellings, render, canonicalIdentity } from "./spellings.mjs";
import { summarize, summaryText } from "./report.mjs";

/** Sends per spelling in the fresh-client phase (then one canonical probe). */
export const SENDS = 11;
const CONCURRENCY = Number(process.env.TOLLGATE_ORIGINS_CONCURRENCY ?? 12);
/** Every request is bounded: a Worker or origin that hangs fails the run. */
const REQUEST_TIMEOUT_MS = 15_000;
export const OUT = join(HERE, "out");

const hour = (requests) => [{ requests, window: "1h" }];

/**
 * The test config: the rules of the shipped config and the examples, with
 * limits small enough to reach with 11 requests and windows (1 h, 1 d) that
 * outlast the run, plus a method-override rule, an API-key rule and a
 * session-cookie rule. "no-query" drops the one rule with query conditions
 * (then tollgate reads no form body for them: issue 15, row 6).
 */
export function testConfigs() {
  const heavy = shippedConfig().rules.find((r) => r.name === "heavy-example");
  const tenant = exampleConfig("tenant-daily-quota", "enforce").rules.find((r) => r.name === "ai-quota");
  const [loginAccount, loginClient] = exampleConfig("login-brute-force").rules;
  const rules = [
    { ...heavy, limits: hour(LIMITS.heavy) },
    { ...tenant, limits: [{ requests: LIMITS.tenant, window: "1d" }] },
    { ...loginAccount, limits: hour(LIMITS.login) },
    { ...loginClient, limits: hour(100) },
    { name: "delete-post", path: "/posts/:id", methods: ["DELETE"], key: ["ip"], limits: hour(LIMITS.delete), on_error: "deny" },
    { name: "api-key", path: "/api/v1/data", key: ["header:x-api-key"], fallback_key: ["ip"], limits: hour(LIMITS.apikey) },
    {
      name: "session-export",
      path: "/account/export",
      key: ["cookie:laravel_session"],
      fallback_key: ["ip"],
      limits: hour(LIMITS.session),
    },
  ];
  return {
    all: { ipv6_prefix: 64, rules },
    "no-query": { ipv6_prefix: 64, rules: rules.filter((r) => !r.query) },
  };
}

const WORKER_FOR = { all: "tollgate", "no-query": "tollgate-no-query" };

/** Miniflare with tollgate under both configs and a passthrough Worker (the oracle), all forwarding to `outboundService`. */
async function startMiniflare(outboundService) {
  const wrangler = parseToml(readFileSync(join(ROOT, "wrangler.toml"), "utf8"));
  const persist = mkdtempSync(join(tmpdir(), "tollgate-origins-"));
  const configs = testConfigs();
  const tollgate = (name, config) => ({
    name,
    modules: true,
    scriptPath: join(ROOT, "src", "entry.mjs"),
    modulesRoot: ROOT,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: wrangler.compatibility_date,
    bindings: { TOLLGATE: config },
    durableObjects: { LIMITER: { className: "Limiter", useSQLite: true } },
    outboundService,
    stripCfConnectingIp: false,
  });
  const logs = [];
  const mf = new Miniflare({
    workers: [
      tollgate(WORKER_FOR.all, configs.all),
      tollgate(WORKER_FOR["no-query"], configs["no-query"]),
      {
        name: "passthrough",
        modules: true,
        script: "export default { fetch: (request) => fetch(request) };",
        compatibilityDate: wrangler.compatibility_date,
        outboundService,
        stripCfConnectingIp: false,
      },
    ],
    durableObjectsPersist: persist,
    handleRuntimeStdio(stdout, stderr) {
      stdout.on("data", (d) => logs.push(d.toString()));
      stderr.on("data", (d) => logs.push(d.toString()));
    },
  });
  await mf.ready;
  const workers = {};
  for (const name of [...Object.values(WORKER_FOR), "passthrough"]) workers[name] = await mf.getWorker(name);
  return {
    workers,
    logs: () => logs.join(""),
    async dispose() {
      await mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    },
  };
}

const decode = (v) => {
  if (v === null) return null;
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
};

/** A fresh client address per phase (a header value only: nothing is sent there). */
const clientIp = (i) => `198.18.${(i >> 8) & 255}.${i & 255}`;
const CYCLE_IP = "198.19.0.1";
const ORACLE_IP = "198.19.0.2";
const ORACLE_N = 0;
const CYCLE_N = 1;

async function pool(items, size, work) {
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(size, items.length) }, run));
}

/**
 * Sends the spellings of origin `name`'s actions to tollgate in front of
 * that origin.
 *
 * - Oracle: every spelling once to the origin alone (through a passthrough
 *   Worker): does it run a protected handler, and for whom?
 * - Fresh clients: each spelling the origin routes to a protected handler
 *   is sent 11 times, then its action's canonical request once, from a new
 *   address with a new identity number. A spelling the origin routes to no
 *   protected handler cannot run one past a limit there; it is sent in the
 *   cycle only, which is enough to see tollgate refuse it (a false
 *   positive). TOLLGATE_ORIGINS_FULL=1 sends those 11 times as well.
 * - Cycle: one client sends each action's canonical request up to the
 *   limit, then every spelling once: every handler run for an identity past
 *   its limit is a bypass, charged to the spelling.
 */
export async function runOrigin(name, spellings = allSpellings()) {
  const actions = ORIGINS[name].actions;
  const mine = spellings.filter((s) => actions.includes(s.action));
  const started = Date.now();
  const origin = await startOrigin(name);
  const raw = new Map();
  const fwd = forwarder(origin.port, (request) => raw.get(request.headers.get("x-origins-probe")));
  let mf;
  let requests = 0;
  let counter = 0;
  try {
    mf = await startMiniflare(fwd.outboundService);

    async function send(worker, spelling, n, ip) {
      const r = ++counter;
      requests++;
      const req = render(spelling, n, r);
      const probe = `${r}`;
      raw.set(probe, req.headers);
      const headers = new Headers();
      for (const [k, v] of req.headers) headers.append(k, v);
      headers.set("cf-connecting-ip", ip);
      headers.set("x-origins-probe", probe);
      try {
        const res = await withTimeout(
          mf.workers[worker].fetch(req.url, { method: req.method, headers, body: req.body, redirect: "manual" }),
          `${worker} ${req.method} ${req.url}`,
        );
        await res.arrayBuffer();
        return {
          status: res.status,
          forwarded: res.headers.get("x-origins-forwarded") === "1",
          handler: res.headers.get("x-handler"),
          identity: decode(res.headers.get("x-identity")),
          read: decode(res.headers.get("x-read")),
        };
      } finally {
        raw.delete(probe);
      }
    }

    const oracle = new Map();
    await pool(mine, CONCURRENCY, async (s) => {
      const answer = await send("passthrough", s, ORACLE_N, ORACLE_IP);
      oracle.set(s.id, { ...answer, canonicalIdentity: canonicalIdentity(s.action, ORACLE_N, ORACLE_IP) });
    });

    const full = process.env.TOLLGATE_ORIGINS_FULL === "1";
    const fresh = new Map();
    const routed = mine.filter((s) => full || oracle.get(s.id).handler);
    await pool(routed, CONCURRENCY, async (s, i) => {
      const n = 1000 + i;
      const ip = clientIp(i);
      const worker = WORKER_FOR[s.config];
      const sends = [];
      for (let k = 0; k < SENDS; k++) sends.push(await send(worker, s, n, ip));
      const probe = await send(worker, { ...CANONICAL[s.action], config: s.config }, n, ip);
      fresh.set(s.id, { n, ip, sends, probe, canonicalIdentity: canonicalIdentity(s.action, n, ip) });
    });

    const cycle = new Map();
    const runs = new Map();
    const count = (config, answer) => {
      if (!answer.forwarded || !answer.handler) return 0;
      const key = `${config}\u0000${answer.handler}\u0000${answer.identity}`;
      runs.set(key, (runs.get(key) ?? 0) + 1);
      return runs.get(key);
    };
    const primes = [];
    for (const config of Object.keys(WORKER_FOR)) {
      for (const action of actions) {
        if (!mine.some((s) => s.action === action && s.config === config)) continue;
        for (let k = 0; k < LIMITS[action]; k++) {
          const answer = await send(WORKER_FOR[config], { ...CANONICAL[action], config }, CYCLE_N, CYCLE_IP);
          count(config, answer);
          primes.push({ config, action, ...answer });
        }
      }
    }
    for (const s of mine) {
      const answer = await send(WORKER_FOR[s.config], s, CYCLE_N, CYCLE_IP);
      const nth = count(s.config, answer);
      cycle.set(s.id, { ...answer, nth, overLimit: nth > (LIMITS[answer.handler] ?? Infinity) });
    }

    const logs = mf.logs();
    return {
      name,
      version: origin.version,
      port: origin.port,
      spellings: mine,
      full,
      oracle,
      fresh,
      cycle,
      primes,
      requests,
      seconds: (Date.now() - started) / 1000,
      workerPanicked: /panicked|RuntimeError: unreachable/i.test(logs),
    };
  } finally {
    if (mf) await mf.dispose();
    fwd.close();
    await origin.stop();
  }
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${REQUEST_TIMEOUT_MS} ms: ${what}`)), REQUEST_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Writes report.json and summary.md under tests/origins/out; returns the report. */
export function writeReport(results, { distinct }) {
  const report = summarize(results, { distinct, limits: LIMITS, sends: SENDS, configs: testConfigs() });
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, "report.json"), JSON.stringify(report, null, 2) + "\n");
  writeFileSync(join(OUT, "summary.md"), summaryText(report));
  return report;
}

/** Which origins to run: TOLLGATE_ORIGINS (comma-separated) or all four. */
export function selectedOrigins(argv = []) {
  const chosen = argv.length ? argv : (process.env.TOLLGATE_ORIGINS ?? "").split(",").filter(Boolean);
  const names = chosen.length ? chosen : Object.keys(ORIGINS);
  for (const n of names) if (!ORIGINS[n]) throw new Error(`unknown origin ${n} (choose from ${Object.keys(ORIGINS).join(", ")})`);
  return names;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const names = selectedOrigins(process.argv.slice(2));
  const missing = missingOrigins(names);
  if (missing.length) {
    console.error(`not installed: ${missing.join("; ")}. Run scripts/setup --origins.`);
    process.exit(2);
  }
  if (!existsSync(join(ROOT, "build", "index.js"))) {
    console.error("build/index.js is missing: run scripts/build.");
    process.exit(2);
  }
  const spellings = allSpellings();
  const results = [];
  for (const name of names) {
    const result = await runOrigin(name, spellings);
    console.error(`${name}: ${result.spellings.length} spellings, ${result.requests} requests, ${result.seconds.toFixed(1)} s`);
    results.push(result);
  }
  const report = writeReport(results, { distinct: new Set(results.flatMap((r) => r.spellings.map((s) => s.id))).size });
  process.stdout.write(summaryText(report));
}
