// Cloudflare's published prices (Workers Paid, Standard usage model) and the
// assumptions that turn scripts/bench's per-request measurements into
// dollars per million requests. One place for them: bench/run.mjs prices
// with this module, bench/README.md explains it. Each price names the page
// and the date it was read; update both together.
//
// Marginal prices only: the monthly inclusions (10 M Worker requests, 30 M
// CPU-ms, 1 M object requests, 400,000 GB-s, 50 M rows written, 25 B rows
// read, 20 M log events) and the $5 subscription are left out, so the
// figures are what one more million requests costs on an account past them.

const READ = "2026-11-30";

export const PRICES = {
  workersRequest: {
    usdPerMillion: 0.3,
    unit: "Worker request",
    source: "https://developers.cloudflare.com/workers/platform/pricing/ (Workers, Standard)",
    read: READ,
  },
  workersCpuMs: {
    usdPerMillion: 0.02,
    unit: "CPU millisecond",
    source: "https://developers.cloudflare.com/workers/platform/pricing/ (Workers, Standard)",
    read: READ,
  },
  objectRequest: {
    usdPerMillion: 0.15,
    unit: "Durable Object request (fetch, RPC call or alarm invocation)",
    source: "https://developers.cloudflare.com/durable-objects/platform/pricing/ (Compute billing)",
    read: READ,
  },
  objectGbSecond: {
    usdPerMillion: 12.5,
    unit: "Durable Object GB-s (128 MB per active object)",
    source: "https://developers.cloudflare.com/durable-objects/platform/pricing/ (Compute billing)",
    read: READ,
  },
  rowWritten: {
    usdPerMillion: 1.0,
    unit: "SQLite row written (setAlarm = 1 row, deletes count as written, KV put/delete = 1 row per key)",
    source: "https://developers.cloudflare.com/durable-objects/platform/pricing/ (SQLite storage backend)",
    read: READ,
  },
  rowRead: {
    usdPerMillion: 0.001,
    unit: "SQLite row read (KV get = 1 row per key)",
    source: "https://developers.cloudflare.com/durable-objects/platform/pricing/ (SQLite storage backend)",
    read: READ,
  },
  logEvent: {
    usdPerMillion: 0.6,
    unit: "Workers Logs event (1 execution log per invocation + 1 per console line); until 2026-11-30",
    source: "https://developers.cloudflare.com/workers/platform/pricing/ (Workers Logs)",
    read: READ,
  },
  // From 2026-12-01 Workers Logs moves to Cloudflare Observability pricing:
  // per GB ingested (event body + enriched attributes, before compression)
  // and per GB-month stored (7-day retention). Reported beside the total,
  // on the console bytes measured here only (execution logs and the
  // attributes Cloudflare adds are not visible locally).
  logGbIngested: {
    usdPerGb: 0.25,
    unit: "GB of logs ingested, from 2026-12-01",
    source: "https://developers.cloudflare.com/observability/pricing/",
    read: READ,
  },
  logGbMonthStored: {
    usdPerGbMonth: 0.1,
    unit: "GB-month of logs stored, from 2026-12-01 (7 days kept = 7/30 GB-month per GB)",
    source: "https://developers.cloudflare.com/observability/pricing/",
    read: READ,
  },
};

export const ASSUMPTIONS = {
  // Objects are billed for wall-clock time while active (a call in
  // progress); an idle object that can hibernate is not. Local calls take
  // microseconds, production ones wait for the SQLite write to be durable:
  // the guide's cost model uses 5 ms, so does this.
  objectActiveSecondsPerCall: 0.005,
  objectMemoryGb: 0.128, // 128 MB, as the pricing page's examples count it
  // Every setAlarm leads to one alarm invocation later (a billed object
  // request, outside the measured window: tollgate's fire one window after
  // a key's last hit), which writes about one row (tollgate: deleteAll of
  // its one row; peer A: put of its counter).
  rowsWrittenPerAlarm: 1,
  // Workers Logs writes one execution log per invocation; the page's table
  // of execution messages lists alarm and RPC handlers, so each object
  // call is counted as an invocation with its own execution log too.
  executionLogsPerWorkerRequest: 1,
  executionLogsPerObjectCall: 1,
  // Workers Logs enabled with head_sampling_rate = 1 for every system: a
  // like-for-like comparison. tollgate ships 0.1 (issue 28; the guide's
  // "What observability costs" and bench/observability.mjs price the rates).
  logSampling: 1,
  // The Rate Limiting binding has no price on the Workers pricing page.
  rateLimitBindingUsd: 0,
  // The CPU measured is the whole workerd process (Worker, its objects,
  // Miniflare's entry Worker and HTTP handling): an upper bound of the
  // Worker's billed CPU time, whose price is small beside the rest.
  cpuIsWholeWorkerd: true,
};

/**
 * Dollars per million requests for one (system, scenario), from its
 * per-request measurements: { cpuUs, objectCalls, alarmsSet, rowsWritten,
 * rowsRead, logLines, logBytes }. Returns each component (`usd`), the total,
 * the object requests and log events per request it priced, and (apart,
 * not in the total) the console bytes at the pricing from 2026-12-01.
 */
export function costPerMillion(m) {
  const A = ASSUMPTIONS;
  const P = PRICES;
  const objectRequests = m.objectCalls + m.alarmsSet; // calls now + the alarms they set, later
  const logEvents =
    A.logSampling *
    (A.executionLogsPerWorkerRequest + A.executionLogsPerObjectCall * objectRequests + m.logLines);
  const usd = {
    workersRequests: P.workersRequest.usdPerMillion,
    workersCpu: P.workersCpuMs.usdPerMillion * (m.cpuUs / 1000),
    objectRequests: P.objectRequest.usdPerMillion * objectRequests,
    objectDuration:
      P.objectGbSecond.usdPerMillion * objectRequests * A.objectActiveSecondsPerCall * A.objectMemoryGb,
    rowsWritten: P.rowWritten.usdPerMillion * (m.rowsWritten + m.alarmsSet * A.rowsWrittenPerAlarm),
    rowsRead: P.rowRead.usdPerMillion * m.rowsRead,
    logs: P.logEvent.usdPerMillion * logEvents,
  };
  const total = Object.values(usd).reduce((a, b) => a + b, 0);
  // Console bytes per million requests under the pricing from 2026-12-01.
  const gb = (m.logBytes * A.logSampling * 1e6) / 1e9;
  const consoleLogsFromDec2026 = gb * (P.logGbIngested.usdPerGb + P.logGbMonthStored.usdPerGbMonth * (7 / 30));
  return { usd, total, objectRequestsPerRequest: objectRequests, logEventsPerRequest: logEvents, consoleLogsFromDec2026 };
}
