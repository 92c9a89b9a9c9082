// Concurrency limits (issue 29): `concurrency = N`, at most N requests of
// one key in flight at once, a slot held until the response body has been
// sent or the client went away. The origin is mocked at the network edge
// and counts what it has in flight per key (an app Worker over RPC for the
// RPC contract).
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, sleep, COMPATIBILITY_DATE } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const slots = (n, fields = {}) => rule("exports", "/export/*", { key: ["header:x-tenant"], limits: limit(10_000, "1m"), concurrency: n, ...fields });

/** Sends a request of `tenant` until it is not 429 (at most `tries`, `pause` ms apart); its status and how many 429s it got. */
async function untilServed(tg, path, tenant, { tries = 300, pause = 50 } = {}) {
  let refused = 0;
  for (let i = 0; i < tries; i++) {
    const res = await tg.fetch(path, { headers: { "x-tenant": tenant } });
    await res.arrayBuffer();
    if (res.status !== 429) return { status: res.status, refused };
    refused++;
    await sleep(pause);
  }
  return { status: 429, refused };
}

test("50 concurrent slow requests with concurrency = 3: the origin never has more than 3 of the key at once, all 50 are served in the end, another key is unaffected", () => {
  const inFlight = {};
  const most = {};
  const origin = mockOrigin(async (request, record) => {
    const tenant = record.headers["x-tenant"];
    inFlight[tenant] = (inFlight[tenant] ?? 0) + 1;
    most[tenant] = Math.max(most[tenant] ?? 0, inFlight[tenant]);
    await sleep(100);
    inFlight[tenant]--;
    return new Response("report", { status: 200 });
  });
  return withTollgate({ origin, config: config(slots(3)) }, async (tg) => {
    const storm = Promise.all(Array.from({ length: 50 }, () => untilServed(tg, "/export/x", "acme")));
    await sleep(50);
    const other = await tg.fetch("/export/x", { headers: { "x-tenant": "globex" } });
    assert.equal(other.status, 200, "another key has its own slots, at once");
    await other.arrayBuffer();
    const results = await storm;
    assert.ok(results.every((r) => r.status === 200), "every request was served once a slot was free: slots are given back");
    assert.ok(results.some((r) => r.refused > 0), "some waited for a slot");
    assert.ok(most.acme <= 3, `the origin had ${most.acme} of acme's requests at once`);
    assert.equal(tg.origin.received.filter((r) => r.headers["x-tenant"] === "acme").length, 50, "each reached the origin once");
  });
});

// The streaming origin is a Worker behind a service binding (workerd
// streams its body as it is written): /export/stream answers a first chunk,
// then a token every 100 ms until /__end (or the stream is cancelled).
const STREAMING_APP = `
let ends = [];
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/__end") {
      for (const end of ends.splice(0)) end();
      return new Response("ended");
    }
    if (url.pathname !== "/export/stream") return new Response("report");
    const encoder = new TextEncoder();
    let timer;
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(encoder.encode("first chunk\\n"));
        timer = setInterval(() => {
          try { controller.enqueue(encoder.encode("token\\n")); } catch { clearInterval(timer); }
        }, 100);
        ends.push(() => { clearInterval(timer); try { controller.close(); } catch {} });
      },
      cancel() { clearInterval(timer); },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  },
};
`;

const streaming = (n) => ({
  origin: mockOrigin(),
  config: { upstream: { service: "APP" }, rules: [slots(n)] },
  services: { APP: "app" },
  workers: [{ name: "app", modules: true, script: STREAMING_APP, compatibilityDate: COMPATIBILITY_DATE }],
});

async function app(tg, path) {
  const worker = await tg.mf.getWorker("app");
  return (await worker.fetch(`http://app${path}`)).text();
}

test("a streamed answer holds its slot while it streams, and gives it back when it ends", () =>
  withTollgate(streaming(1), async (tg) => {
    const res = await tg.fetch("/export/stream", { headers: { "x-tenant": "acme" } });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    const first = await reader.read();
    assert.match(new TextDecoder().decode(first.value), /first chunk/);
    // The origin has answered (headers and a first chunk): the slot is
    // still held while the body streams.
    for (let i = 0; i < 3; i++) {
      const second = await tg.fetch("/export/x", { headers: { "x-tenant": "acme" } });
      assert.equal(second.status, 429, "the one slot is held by the stream");
      assert.ok(Number(second.headers.get("retry-after")) >= 1);
      await second.arrayBuffer();
      await sleep(100);
    }
    assert.equal(await app(tg, "/__end"), "ended");
    for (let i = 0; i < 100 && !(await reader.read()).done; i++);
    const after = await untilServed(tg, "/export/x", "acme", { tries: 100, pause: 50 });
    assert.equal(after.status, 200, "the slot came back once the stream ended");
  }));

test("a client that goes away mid-stream frees its slot", () =>
  withTollgate(streaming(1), async (tg) => {
    const controller = new AbortController();
    const res = await tg.fetch("/export/stream", { headers: { "x-tenant": "acme" }, signal: controller.signal });
    const reader = res.body.getReader();
    await reader.read();
    const held = await tg.fetch("/export/x", { headers: { "x-tenant": "acme" } });
    assert.equal(held.status, 429, "held while streaming");
    await held.arrayBuffer();
    await reader.cancel().catch(() => {});
    controller.abort();
    // The stream never ends on its own: only the client's going away frees it.
    const after = await untilServed(tg, "/export/x", "acme", { tries: 100, pause: 50 });
    assert.equal(after.status, 200, "the slot came back when the client went away");
    await app(tg, "/__end");
  }));

// Over RPC: `check` takes the slot, `settle` gives it back; a caller that
// never settles holds it until reservation_ttl.
const RPC_APP = `
const tickets = [];
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/settle") {
      const ticket = tickets.shift();
      if (ticket) await env.TOLLGATE.settle(ticket, 200, {});
      return new Response(ticket ? "settled" : "none");
    }
    const decision = await env.TOLLGATE.check(request);
    if (!decision.allowed) return decision.response;
    tickets.push(decision.ticket);
    return new Response("working");
  },
};
`;

test("over RPC: check takes a slot, settle gives it back; one never settled is freed by reservation_ttl", () =>
  withTollgate(
    {
      origin: mockOrigin(),
      config: config(slots(2, { timeout: "1s", reservation_ttl: "3s" })),
      entry: "app",
      workers: [{ name: "app", modules: true, script: RPC_APP, compatibilityDate: COMPATIBILITY_DATE, serviceBindings: { TOLLGATE: "tollgate" } }],
    },
    async (tg) => {
      const start = async () => {
        const res = await tg.fetch("/export/x", { headers: { "x-tenant": "acme" } });
        await res.arrayBuffer();
        return res.status;
      };
      assert.deepEqual([await start(), await start(), await start()], [200, 200, 429], "2 slots");
      assert.equal(await (await tg.fetch("/settle")).text(), "settled");
      assert.equal(await start(), 200, "a settled slot is free at once");
      assert.equal(await start(), 429);
      // Two slots held, never settled: free after reservation_ttl (3 s).
      await sleep(3_200);
      assert.deepEqual([await start(), await start(), await start()], [200, 200, 429], "the lapsed slots are free again");
    },
  ));
