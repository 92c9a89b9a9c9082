// Metering expensive work (issue 29): usage reported by the origin, counted
// exactly at the edge. The origin is mocked at the network edge (or is a
// real app Worker behind a service binding, or an app calling tollgate over
// RPC) and reports the units each call used in a response header; the tests
// add up what the origin reported for the calls it answered.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, sleep, eventsSince, COMPATIBILITY_DATE } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

/** A usage rule on /ai/*, keyed by tenant: `budget` units a day. */
const tokens = (budget, cost, fields = {}) =>
  rule("ai-tokens", "/ai/*", { key: ["header:x-tenant"], limits: limit(budget, "1d"), cost, ...fields });

/**
 * An origin that reports `units(record)` tokens per call in `x-tokens`,
 * after `delay(record)` ms (or once `gate` resolves), and keeps what it
 * reported per tenant.
 */
function reportingOrigin({ units, delay = () => 0, gate, header = "x-tokens" }) {
  const reported = {};
  const origin = mockOrigin(async (request, record) => {
    if (!record.path.startsWith("/ai/") && !record.path.startsWith("/billed/")) return undefined;
    if (gate) await gate(record);
    await sleep(delay(record));
    const tenant = record.headers["x-tenant"];
    const used = units(record);
    if (typeof used === "number") reported[tenant] = (reported[tenant] ?? 0) + used;
    const headers = { "content-type": "application/json" };
    if (used !== undefined) headers[header] = String(used);
    return new Response(JSON.stringify({ used }), { status: Number(record.headers["x-status"] ?? 200), headers });
  });
  return { origin, reported };
}

const call = (tg, tenant, init = {}) => tg.fetch("/ai/complete", { ...init, headers: { "x-tenant": tenant, ...(init.headers ?? {}) } });

test("a token budget of 10,000 a day, 1,200-3,000 per call, 100 concurrent calls, reserve = max: the origin's reported total never exceeds 10,000; another tenant is unaffected", () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  const { origin, reported } = reportingOrigin({ units: () => 1_200 + Math.floor(random() * 1_801), delay: () => 20 + Math.floor(random() * 80) });
  const cfg = config(tokens(10_000, { header: "x-tokens", reserve: 3_000, max: 3_000 }));
  return withTollgate({ origin, config: cfg }, async (tg) => {
    const answers = await Promise.all(
      Array.from({ length: 100 }, async () => {
        const res = await call(tg, "acme");
        const body = await res.arrayBuffer();
        return { status: res.status, hidden: !res.headers.has("x-tokens"), body };
      }),
    );
    const served = answers.filter((a) => a.status === 200);
    assert.ok(served.length >= 3, `3 reservations of 3,000 fit at once: ${served.length} served`);
    assert.ok(answers.every((a) => a.status === 200 || a.status === 429), "every call is served or refused");
    assert.ok(served.every((a) => a.hidden), "the usage header never reaches the client (no expose)");
    assert.ok(reported.acme <= 10_000, `the origin reported ${reported.acme} tokens for acme`);
    assert.equal(served.length, tg.origin.received.length, "every call that reached the origin was answered to its client");
    // Whatever is left, a whole reservation no longer fits.
    assert.ok(reported.acme > 10_000 - 3_000 - 3_000, `the budget was used: ${reported.acme}`);
    const other = await call(tg, "globex");
    assert.equal(other.status, 200, "another tenant has its own budget");
    await other.arrayBuffer();
  });
});

// The over-commit bound, at its edge: reserve 1, max 5, a budget of 10.
// The origin holds every call until 10 are in flight, then each reports 5:
// 10 admitted on 1 unit each, 50 committed = 10 + 10 × (5 − 1), exactly the
// bound; with reserve = max the same run commits at most the budget.
for (const [reserve, max, bound] of [
  [1, 5, (admitted) => 10 + admitted * (5 - 1)],
  [5, 5, () => 10],
]) {
  test(`the over-commit bound: reserve ${reserve}, max ${max}: at most budget + in flight × (max − reserve)`, () => {
    let waiting = [];
    const gate = () =>
      new Promise((resolve) => {
        waiting.push(resolve);
        // Held until 10 are in flight, or 5 s at most (a bounded wait).
        const release = () => {
          for (const r of waiting) r();
          waiting = [];
        };
        if (waiting.length >= 10 / reserve) release();
        else setTimeout(release, 5_000);
      });
    const { origin, reported } = reportingOrigin({ units: () => 5, gate });
    const cfg = config(tokens(10, { header: "x-tokens", reserve, max }));
    return withTollgate({ origin, config: cfg }, async (tg) => {
      const statuses = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const res = await call(tg, "acme");
          await res.arrayBuffer();
          return res.status;
        }),
      );
      const admitted = statuses.filter((s) => s === 200).length;
      assert.equal(admitted, 10 / reserve, `${10 / reserve} reservations of ${reserve} fill the budget: ${statuses}`);
      assert.equal(reported.acme, admitted * 5);
      assert.ok(reported.acme <= bound(admitted), `${reported.acme} ≤ ${bound(admitted)}`);
      if (reserve === 1) assert.equal(reported.acme, bound(admitted), "the bound is reached: it is tight");
      const after = await call(tg, "acme");
      assert.equal(after.status, 429, "what was committed counts");
      await after.arrayBuffer();
    });
  });
}

test("a missing or malformed header commits `reserve`, with one usage_missing line per episode; expose keeps the header; count_statuses still selects", () => {
  const units = (record) => ({ none: undefined, bad: "lots", some: 2, big: 10 })[record.headers["x-mode"]];
  const { origin } = reportingOrigin({ units });
  const cfg = config(
    tokens(10, { header: "x-tokens", reserve: 4, max: 10 }),
    rule("billed", "/billed/*", { key: ["header:x-tenant"], limits: limit(10, "1d"), cost: { header: "x-tokens", reserve: 4, max: 10, expose: true }, count_statuses: [200] }),
  );
  return withTollgate({ origin, config: cfg }, async (tg) => {
    const before = tg.logEvents().length;
    for (const mode of ["none", "bad"]) {
      const res = await call(tg, "acme", { headers: { "x-mode": mode } });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    const third = await call(tg, "acme", { headers: { "x-mode": "some" } });
    assert.equal(third.status, 429, "two answers without usage committed 4 each: 8 + 4 > 10");
    await third.arrayBuffer();
    await tg.settled();
    const missing = (await eventsSince(tg, before, 1)).filter((e) => e.tollgate === "usage_missing");
    assert.equal(missing.length, 1, "one line for the episode");
    assert.equal(missing[0].rule, "ai-tokens");
    assert.equal(missing[0].committed, 4);
    // The billed rule: only its 200s count (a 500 reporting 10 releases its
    // reservation), and its header reaches the client (expose).
    const billed = async (status, mode = "big") => {
      const res = await tg.fetch("/billed/x", { headers: { "x-tenant": "t", "x-mode": mode, "x-status": String(status) } });
      await res.arrayBuffer();
      return res;
    };
    for (let i = 0; i < 4; i++) assert.equal((await billed(500)).status, 500, "a 500 does not count");
    const shown = await billed(200, "some");
    assert.equal(shown.headers.get("x-tokens"), "2", "expose = true: the client sees it");
    for (const used of [2, 4, 6]) assert.equal((await billed(200, "some")).status, 200, `${used} committed + 4 reserved fit`);
    assert.equal((await billed(200, "some")).status, 429, "8 committed + 4 do not");
  });
});

test("expose = true keeps the header; RateLimit fields count units", () => {
  const { origin, reported } = reportingOrigin({ units: () => 1_234 });
  const cfg = config(tokens(10_000, { header: "x-tokens", reserve: 3_000, max: 3_000, expose: true }, { ratelimit_headers: true }));
  return withTollgate({ origin, config: cfg }, async (tg) => {
    const first = await call(tg, "acme");
    assert.equal(first.headers.get("x-tokens"), "1234", "exposed");
    await first.arrayBuffer();
    const second = await call(tg, "acme");
    await second.arrayBuffer();
    // Reserved 3,000 beside 1,234 committed: 10,000 − 4,234 remain.
    assert.match(second.headers.get("ratelimit") ?? "", /^"ai-tokens";r=5766;t=\d+$/);
    assert.equal(second.headers.get("ratelimit-policy"), '"ai-tokens";q=10000;qu="x-tokens";w=86400', "in the origin's units, not requests");
    assert.equal(reported.acme, 2 * 1_234);
  });
});

// The same with a service-binding upstream: an app Worker reporting tokens.
const APP = `
export default {
  async fetch(request) {
    return new Response("done", { headers: { "x-tokens": new URL(request.url).searchParams.get("t") ?? "" } });
  },
};
`;

test("service-binding upstream: the app's reported usage is committed; 1,000 a call fits 8 calls of a 10,000 budget reserving 3,000", () =>
  withTollgate(
    {
      origin: mockOrigin(),
      config: { upstream: { service: "APP" }, rules: [tokens(10_000, { header: "x-tokens", reserve: 3_000, max: 3_000 })] },
      services: { APP: "app" },
      workers: [{ name: "app", modules: true, script: APP, compatibilityDate: COMPATIBILITY_DATE }],
    },
    async (tg) => {
      const statuses = [];
      for (let i = 0; i < 10; i++) {
        const res = await tg.fetch("/ai/x?t=1000", { headers: { "x-tenant": "acme" } });
        assert.equal(res.headers.get("x-tokens"), null, "hidden");
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      // Committed at reserve (3,000) it would be 3 calls; at 1,000 each, 8:
      // the 9th needs 8,000 + 3,000.
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 429, 429]);
    },
  ));

// The same over RPC: an app calls check, does the work, and settles with
// its response headers.
const RPC_APP = `
export default {
  async fetch(request, env) {
    const decision = await env.TOLLGATE.check(request);
    if (!decision.allowed) return decision.response;
    const used = new URL(request.url).searchParams.get("t");
    await env.TOLLGATE.settle(decision.ticket, 200, { "x-tokens": used });
    return new Response("done");
  },
};
`;

test("over RPC: check reserves, settle commits the units in the headers it is given", () =>
  withTollgate(
    {
      origin: mockOrigin(),
      config: config(tokens(10_000, { header: "x-tokens", reserve: 3_000, max: 3_000 })),
      entry: "app",
      workers: [{ name: "app", modules: true, script: RPC_APP, compatibilityDate: COMPATIBILITY_DATE, serviceBindings: { TOLLGATE: "tollgate" } }],
    },
    async (tg) => {
      const statuses = [];
      for (let i = 0; i < 10; i++) {
        const res = await tg.fetch("/ai/x?t=1000", { headers: { "x-tenant": "acme" } });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 429, 429]);
      await tg.settled();
      assert.ok(!tg.logs().includes("counter_error"), "every settlement reached its counter");
    },
  ));
