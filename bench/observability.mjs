// What observability costs, per million requests, for the shipped config and
// the examples (issue 28): Workers Logs (per event until 2026-11-30, by
// volume from 2026-12-01) at several head sampling rates, and Analytics
// Engine data points. Counts, not time: each config gets the same traffic
// mix (most clients under their limit, one over it), sent through the
// release build in workerd (Miniflare), with the limiter objects behind a
// counting proxy and the dataset behind a recorder; nothing here is timed.
//
//   node bench/observability.mjs          (after scripts/build)
//
// Prints a table and writes bench/OBSERVABILITY.md.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTollgate, shippedConfig, exampleConfig, mockOrigin, objectFiles, ROOT } from "../tests/worker/harness.mjs";
import { PRICES } from "./prices.mjs";

// Not visible locally: the execution log Workers Logs writes per invocation
// (the request's URL, method, headers, `cf`, outcome), and the attributes it
// adds to each console line. Assumed sizes, stated in the output.
const EXECUTION_LOG_BYTES = 1_500;
const LINE_ATTRIBUTES_BYTES = 500;
const RATES = [1, 0.1, 0.01];
const CLIENTS = 100; // well-behaved clients, each under its limit
const ABUSE = 100; // requests of the one client over its limit

const RECORDER = `
import { WorkerEntrypoint } from "cloudflare:workers";
let points = 0;
export class Recorder extends WorkerEntrypoint { writeDataPoint() { points++; } }
export default { fetch() { return new Response(String(points)); } };
`;

/** Each config: its TOLLGATE, an origin, and the traffic mix as request inits. */
const CASES = [
  {
    name: "shipped wrangler.toml (heavy-example, 10 a minute per IP)",
    config: shippedConfig(),
    traffic: () => mix((i, n) => ({ path: "/api/example?mode=heavy", ip: ip(i) }), 9),
  },
  {
    name: "examples/operator-controls (10 a minute per IP)",
    config: exampleConfig("operator-controls"),
    traffic: () => mix((i) => ({ path: "/api/items", ip: ip(i) }), 9),
  },
  {
    name: "examples/tenant-daily-quota, env enforce (300 a day per school, 200s counted)",
    config: exampleConfig("tenant-daily-quota", "enforce"),
    traffic: () => mix((i) => ({ path: `/api/schools/${i}/ai/ask`, ip: ip(i) }), 9, 400),
  },
  {
    name: "examples/login-brute-force (failed logins per account and per IP)",
    config: exampleConfig("login-brute-force"),
    origin: mockOrigin((req, rec) => (JSON.parse(rec.body.toString() || "{}").password === "right" ? null : new Response("no", { status: 401 }))),
    traffic: () =>
      mix((i, n, abuser) => ({
        path: "/login",
        ip: abuser ? "203.0.113.250" : ip(i),
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: abuser ? "victim@example.com" : `user${i}@example.com`, password: abuser ? `guess${n}` : "right" }),
      }), 1),
  },
];

function ip(i) {
  return `192.0.${2 + Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** `each` requests from each of CLIENTS clients, then `abuse` from one more. */
function mix(make, each, abuse = ABUSE) {
  const out = [];
  for (let i = 0; i < CLIENTS; i++) for (let n = 0; n < each; n++) out.push(make(i, n, false));
  for (let n = 0; n < abuse; n++) out.push(make(CLIENTS, n, true));
  return out;
}

async function measure(c) {
  const tg = await startTollgate({
    config: c.config,
    origin: c.origin,
    faults: true,
    workerOptions: { serviceBindings: { TOLLGATE_METRICS: { name: "recorder", entrypoint: "Recorder" } } },
    extraWorkers: [{ name: "recorder", modules: true, script: RECORDER, compatibilityDate: "2025-01-01" }],
  });
  try {
    const requests = c.traffic();
    const statuses = {};
    for (const { path, ...init } of requests) {
      const res = await tg.fetch(path, init);
      await res.arrayBuffer();
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    }
    await tg.settled();
    const lines = tg.logs().split("\n").filter((l) => l.includes('"tollgate"'));
    const bytes = lines.reduce((sum, l) => sum + Buffer.byteLength(l.slice(l.indexOf("{"))), 0);
    const recorder = await tg.mf.getWorker("recorder");
    const points = Number(await (await recorder.fetch("http://recorder/")).text());
    return {
      requests: requests.length,
      statuses,
      objectCalls: await tg.objectCalls(),
      // Each object sets one alarm within the run (its TTL): one more invocation later.
      alarms: objectFiles(tg.persist).length,
      lines: lines.length,
      bytes,
      points,
    };
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
}

/** Dollars per million requests of logs at head sampling `rate`, and of points. */
function price(m, rate) {
  const per = (x) => x / m.requests;
  const invocations = per(m.requests + m.objectCalls + m.alarms);
  const events = rate * (invocations + per(m.lines));
  const perEvent = events * PRICES.logEvent.usdPerMillion;
  const bytes = rate * (invocations * EXECUTION_LOG_BYTES + per(m.bytes) + per(m.lines) * LINE_ATTRIBUTES_BYTES);
  const gb = (bytes * 1e6) / 1e9;
  const byVolume = gb * (PRICES.logGbIngested.usdPerGb + PRICES.logGbMonthStored.usdPerGbMonth * (7 / 30));
  return { invocations, events, perEvent, gb, byVolume };
}

const rows = [];
for (const c of CASES) {
  const m = await measure(c);
  rows.push({ name: c.name, m });
  console.log(c.name, JSON.stringify(m));
}

const usd = (x) => `$${x < 0.01 ? x.toFixed(4) : x.toFixed(3)}`;
let md = `# Observability cost per million requests

Measured by \`node bench/observability.mjs\` (${new Date().toISOString().slice(0, 10)}): each config gets
${CLIENTS} clients under their limit and one client sending ${ABUSE} requests
(most of them over it), through the release build in workerd. Counted:
Worker requests, limiter object calls (behind a counting proxy), objects
(one alarm invocation each, later), tollgate's console lines and bytes, and
Analytics Engine data points (behind a recorder). Nothing is timed.

Prices (read ${PRICES.logEvent.read}): Workers Logs **until 2026-11-30** $${PRICES.logEvent.usdPerMillion} per million
events (one execution log per invocation, Worker and object alike, plus one
per console line); **from 2026-12-01** by volume, $${PRICES.logGbIngested.usdPerGb} per GB ingested plus
$${PRICES.logGbMonthStored.usdPerGbMonth} per GB-month stored (7 days kept). Volume pricing needs the
bytes of the execution logs and of the attributes Workers Logs adds, which
are not visible locally: assumed ${EXECUTION_LOG_BYTES} bytes per execution log and
${LINE_ATTRIBUTES_BYTES} bytes added per console line. Analytics Engine: $${0.25} per million
points beyond the 10 million included. For scale: a Worker request is $${PRICES.workersRequest.usdPerMillion}
and an object request $${PRICES.objectRequest.usdPerMillion} per million.

| config | statuses | invocations / req | console lines / req | console bytes / req | AE points / req | AE $/M |
|---|---|---|---|---|---|---|
`;
for (const { name, m } of rows) {
  const p = price(m, 1);
  md += `| ${name} | ${Object.entries(m.statuses).map(([s, n]) => `${n}× ${s}`).join(", ")} | ${p.invocations.toFixed(3)} | ${(m.lines / m.requests).toFixed(3)} | ${(m.bytes / m.requests).toFixed(1)} | ${(m.points / m.requests).toFixed(3)} | ${usd((m.points / m.requests) * 0.25)} |\n`;
}
md += `\nWorkers Logs, $ per million requests, by \`head_sampling_rate\`:\n\n| config | ${RATES.map((r) => `${r}: per event (to 2026-11-30)`).join(" | ")} | ${RATES.map((r) => `${r}: by volume (from 2026-12-01)`).join(" | ")} |\n|---|${RATES.map(() => "---|").join("")}${RATES.map(() => "---|").join("")}\n`;
for (const { name, m } of rows) {
  md += `| ${name} | ${RATES.map((r) => usd(price(m, r).perEvent)).join(" | ")} | ${RATES.map((r) => usd(price(m, r).byVolume)).join(" | ")} |\n`;
}
writeFileSync(join(ROOT, "bench", "OBSERVABILITY.md"), md);
console.log(md);
