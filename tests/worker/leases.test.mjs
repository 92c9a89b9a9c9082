// Leased budgets (issue 12): several edge Workers (the same built script
// under other names: separate isolates, each with its own lease book) share
// one Limiter namespace. A hot key with a large limit is hit from all of them
// at once; leases keep the object calls few, and nothing passes the limit,
// not even across a restart of everything while tokens are leased out.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTollgate, mockOrigin, tempDir } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";
import { rmSync } from "node:fs";

const EDGES = 3; // plus the first worker: 4 isolates
const LIMIT = 5_000;
const WINDOW_MS = 60_000;

const CONFIG = config(rule("hot", "/api/*", { key: ["global"], limits: limit(LIMIT, "60s"), ratelimit_headers: true, lease_ttl: "5s" }));

/** A mock origin that also notes when each request reached it, by the
 * request's number (`?n=`), and when each was sent (`sent`, by flood). */
function timedOrigin() {
  const times = [];
  const arrived = new Map();
  const sent = new Map();
  const origin = mockOrigin((request) => {
    const now = Date.now();
    times.push(now);
    arrived.set(new URL(request.url).searchParams.get("n"), now);
    return undefined;
  });
  return { ...origin, times, arrived, sent };
}

/**
 * The longest a request took from being sent to reaching the origin: an
 * upper bound on how long after its limiter decision (which comes after
 * the send) it arrived. On a loaded machine forwards arrive late, so the
 * origin's arrival times are checked over windows this much shorter than
 * the limit's (issue 26): a request decided inside a window of the limit
 * arrives inside that window or at most this much after it.
 */
function longestForward(origin) {
  let longest = 0;
  for (const [n, at] of origin.arrived) longest = Math.max(longest, at - (origin.sent.get(n) ?? at));
  return longest;
}

/** Sends `n` requests from every edge at once, `width` in flight per edge;
 * numbers them across calls (`?n=`), noting when each was sent. */
let numbered = 0;
async function flood(tg, n, width = 40, sent = new Map()) {
  const statuses = [];
  let next = 0;
  const edge = async (i) => {
    const lanes = Array.from({ length: width }, async () => {
      while (next < n) {
        next++;
        const id = String(++numbered);
        sent.set(id, Date.now());
        const res = await tg.fetchVia(i, `/api/item?n=${id}`, { ip: `198.51.100.${next % 250}` });
        await res.arrayBuffer();
        statuses.push([res.status, res.headers.get("ratelimit")]);
      }
    });
    await Promise.all(lanes);
  };
  await Promise.all(Array.from({ length: EDGES + 1 }, (_, i) => edge(i)));
  return statuses;
}

/** The `error` of every `edge_error` log line in `logs` (what a 502 of
 * tollgate's own says went wrong). */
function edgeErrors(logs) {
  return [...logs.matchAll(/^.*"edge_error".*$/gm)].map(([line]) => {
    try {
      return JSON.parse(line.slice(line.indexOf("{"))).error ?? line;
    } catch {
      return line;
    }
  });
}

/** How many times each distinct string occurs. */
function tally(items) {
  const out = {};
  for (const item of items) out[item] = (out[item] ?? 0) + 1;
  return out;
}

/** The most origin arrivals in any window of `ms`. */
function worstWindow(times, ms) {
  const sorted = [...times].sort((a, b) => a - b);
  let worst = 0;
  for (let end = 0, start = 0; end < sorted.length; end++) {
    while (sorted[end] - sorted[start] >= ms) start++;
    worst = Math.max(worst, end - start + 1);
  }
  return worst;
}

test("hot key, limit 5,000 per 60 s, 20,000 requests from 4 edges, restarted mid-lease: at most 5,000 reach the origin, object calls at most 10%", async () => {
  const persist = tempDir();
  const origin = timedOrigin();
  let calls = 0;
  const statuses = [];
  const failures = [];
  try {
    // Phase 1: every edge leases tokens for the key, and holds some.
    let tg = await startTollgate({ config: CONFIG, origin, persist, faults: true, edges: EDGES });
    try {
      statuses.push(...(await flood(tg, 2_000, 40, origin.sent)));
      calls += await tg.objectCalls();
      await tg.settled();
      failures.push(...edgeErrors(tg.logs()));
    } finally {
      await tg.dispose();
    }
    const afterPhase1 = origin.received.length;
    assert.ok(afterPhase1 > 0 && afterPhase1 <= 2_000, `phase 1 reached the origin ${afterPhase1} times`);
    // Everything restarts (isolates and objects): the tokens the isolates
    // held are never refunded, and the objects read their rows back.
    tg = await startTollgate({ config: CONFIG, origin, persist, faults: true, edges: EDGES });
    try {
      statuses.push(...(await flood(tg, 18_000, 40, origin.sent)));
      calls += await tg.objectCalls();
      await tg.settled();
      failures.push(...edgeErrors(tg.logs()));
      assert.ok(!/panicked|RuntimeError: unreachable/i.test(tg.logs()), "no panic in the Worker");
    } finally {
      await tg.dispose();
    }
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
  const requests = statuses.length;
  assert.equal(requests, 20_000);
  const passed = statuses.filter(([s]) => s === 200).length;
  const blocked = statuses.filter(([s]) => s === 429).length;
  const by = {};
  for (const [s] of statuses) by[s] = (by[s] ?? 0) + 1;
  // A 502 is the Worker's answer when the forward itself fails. On a
  // machine at load 12 (scripts/test --under-load beside builds), workerd's
  // link to the test's origin (Miniflare's outbound service, in this Node
  // process) dropped 256 of 20,000 forwards: "Network connection lost.",
  // the answer a client gets from an origin that drops its connection.
  // Those, and only those, are allowed here; every other error fails.
  const lost = failures.filter((e) => e === "Error: Network connection lost.").length;
  const errors = `${JSON.stringify(by)}; the Worker's errors: ${JSON.stringify(tally(failures))}`;
  assert.equal(lost, failures.length, `the only Worker errors are lost origin connections: ${errors}`);
  assert.equal(by[502] ?? 0, lost, `each 502 is a lost origin connection: ${errors}`);
  assert.equal(passed + blocked + lost, requests, `every request answered 200 or 429, or 502 for a lost origin connection: ${errors}`);
  // A lost forward may have reached the origin before its answer was lost.
  assert.ok(origin.received.length >= passed && origin.received.length <= passed + lost, `${origin.received.length} reached the origin, ${passed} served, ${lost} lost`);
  // Exactness: the limit holds in every 60 s window of the limiter's
  // decisions; seen at the origin, in every window shorter by the longest
  // forward (the whole run, if it took less than that).
  const forward = longestForward(origin);
  const worst = worstWindow(origin.times, WINDOW_MS - forward);
  assert.ok(forward < WINDOW_MS / 2, `a forward took ${forward} ms`);
  assert.ok(worst <= LIMIT, `${worst} requests reached the origin within ${WINDOW_MS - forward} ms (limit ${LIMIT} per 60 s, longest forward ${forward} ms)`);
  assert.ok(calls <= requests / 10, `${calls} object calls for ${requests} requests (at most 10%)`);
  // The RateLimit fields never claim more than the limit.
  for (const [, field] of statuses) {
    const r = field && /;r=(\d+)/.exec(field);
    if (r) assert.ok(Number(r[1]) <= LIMIT, field);
  }
  console.log(`leases: ${passed} passed, ${blocked} blocked, ${lost} lost at the origin link, ${calls} object calls for ${requests} requests; worst window ${worst} (60 s less the longest forward, ${forward} ms)`);
});

test("per-IP 10 per minute from 4 edges: the same answers and the same object calls with lease = auto as with lease = off", async () => {
  const run = async (lease) => {
    const perIp = config(rule("per-ip", "/api/*", { key: ["ip"], limits: limit(10, "60s"), lease }));
    const origin = mockOrigin();
    const tg = await startTollgate({ config: perIp, origin, faults: true, edges: EDGES });
    try {
      const answers = [];
      for (let n = 0; n < 16; n++) {
        const res = await tg.fetchVia(n % (EDGES + 1), `/api/item?n=${n}`, { ip: "203.0.113.77" });
        answers.push([res.status, res.headers.get("retry-after")]);
        await res.arrayBuffer();
      }
      return { answers: answers.map(([s]) => s), calls: await tg.objectCalls(), reached: origin.received.length };
    } finally {
      await tg.dispose();
      tg.cleanup();
    }
  };
  const auto = await run("auto");
  const off = await run("off");
  assert.deepEqual(auto.answers, [...Array(10).fill(200), ...Array(6).fill(429)]);
  assert.equal(auto.reached, 10);
  // One call per request until each edge has cached the block: 10 allowed
  // hits, then one blocked answer per edge.
  assert.equal(auto.calls, 10 + EDGES + 1);
  assert.deepEqual(auto, off);
});
