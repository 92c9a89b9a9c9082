// Leased budgets (issue 12): several edge Workers (the same built script
// under other names: separate isolates, each with its own lease book) share
// one Limiter namespace. A key whose rule would never lease is answered the
// same with leases on as off, by the real runtime.
//
// The hot key (5,000 per 60 s, 20,000 requests from 4 edges, everything
// restarted mid-lease: at most 5,000 pass, object calls at most 10%) is
// tested natively on the Pair (src/testing/pair/tests.rs, issue 36), on
// simulated time. In Miniflare it took 24 s, and on a loaded machine
// workerd's link to the test's origin dropped forwards ("Network connection
// lost."), which the test had to tell from the limiter's answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTollgate, mockOrigin } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const EDGES = 3; // plus the first worker: 4 isolates

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
