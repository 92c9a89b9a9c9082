// Concurrency limits (issue 29): `concurrency = N`, at most N requests of
// one key in flight at once, a slot held until the response body has been
// sent or the client went away. The origin is mocked at the network edge
// and counts what it has in flight per key (an app Worker over RPC for the
// RPC contract).
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
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
    const encoder = new TextEncoder();
    if (url.pathname === "/export/slow") {
      // Three parts 1.5 s apart: an origin slower than idle_release.
      const { readable, writable } = new TransformStream();
      const writer = writable.getWriter();
      (async () => {
        for (const part of ["one ", "two ", "three"]) {
          await writer.write(encoder.encode(part));
          if (part !== "three") await new Promise((r) => setTimeout(r, 1_500));
        }
        await writer.close();
      })();
      return new Response(readable);
    }
    if (url.pathname !== "/export/stream") return new Response("report");
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

const streaming = (n, fields = {}) => ({
  origin: mockOrigin(),
  config: { upstream: { service: "APP" }, rules: [slots(n, fields)] },
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

test("idle_release times the client, not the origin: an origin slower than it is streamed whole to a client that reads", () =>
  withTollgate(streaming(1, { timeout: "1s", idle_release: "1s" }), async (tg) => {
    const res = await tg.fetch("/export/slow", { headers: { "x-tenant": "acme" } });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "one two three", "not cut while the origin took 3 s with gaps over idle_release");
    await tg.settled();
    assert.deepEqual(tg.logEvents().filter((e) => e.tollgate === "answer_cut"), []);
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

// Issue 35, break 5: WebSocket sessions. The app behind the service binding
// accepts a WebSocket on /ws/*, counts the sessions it has open (and the most
// at once), and echoes; /__open reports them.
const WS_APP = `
let open = 0;
let most = 0;
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/__open") return Response.json({ open, most });
    if (request.headers.get("upgrade") !== "websocket") return new Response("report");
    const [client, server] = Object.values(new WebSocketPair());
    server.accept();
    open++;
    most = Math.max(most, open);
    server.addEventListener("message", (e) => server.send("echo:" + e.data));
    server.addEventListener("close", () => { open--; });
    return new Response(null, { status: 101, webSocket: client });
  },
};
`;

const sessions = (rules) => ({
  origin: mockOrigin(),
  config: { upstream: { service: "APP" }, rules },
  services: { APP: "app" },
  workers: [{ name: "app", modules: true, script: WS_APP, compatibilityDate: COMPATIBILITY_DATE }],
});
const wsRule = (n, fields = {}) => rule("ws", "/ws/*", { key: ["header:x-tenant"], limits: limit(10_000, "1m"), concurrency: n, timeout: "1s", ...fields });
const held = async (tg, name, key = "acme") =>
  (await tg.callObject(`${name}\nheader:x-tenant=${key}`, { v: 1, op: "status", limits: [[10_000, 60_000]] })).body.held ?? 0;
const upgrade = (tg, tenant = "acme") => tg.fetch("/ws/chat", { headers: { upgrade: "websocket", "x-tenant": tenant } });
const appOpen = async (tg) => (await (await tg.mf.getWorker("app")).fetch("http://app/__open")).json();

/** Accepts the client end of a 101 and checks the session echoes. */
async function talk(res) {
  const socket = res.webSocket;
  assert.ok(socket, "a WebSocket came through");
  socket.accept();
  const reply = new Promise((resolve) => socket.addEventListener("message", (e) => resolve(e.data), { once: true }));
  socket.send("hi");
  assert.equal(await reply, "echo:hi", "the session is relayed both ways");
  return socket;
}

test("WebSockets with concurrency = 2: of 5 upgrades at once 2 open, the origin never has more than 2 sessions; a closed session frees its slot", () =>
  withTollgate(sessions([wsRule(2)]), async (tg) => {
    const answers = await Promise.all(Array.from({ length: 5 }, () => upgrade(tg)));
    const statuses = answers.map((r) => r.status).sort();
    assert.deepEqual(statuses, [101, 101, 429, 429, 429], "two slots, held while their sessions are open");
    for (const r of answers.filter((r) => r.status === 429)) await r.arrayBuffer();
    const open = await Promise.all(answers.filter((r) => r.status === 101).map(talk));
    assert.equal(await held(tg, "ws"), 2, "the object holds both slots while the sessions are open");
    const later = await upgrade(tg);
    assert.equal(later.status, 429, "still full: a session holds its slot past the 101");
    await later.arrayBuffer();
    assert.equal((await upgrade(tg, "globex")).status, 101, "another key has its own slots");
    open[0].close(1000, "done");
    let again;
    for (let i = 0; i < 100; i++) {
      again = await upgrade(tg);
      if (again.status === 101) break;
      await again.arrayBuffer();
      await sleep(50);
    }
    assert.equal(again.status, 101, "the closed session's slot is free again");
    open.push(await talk(again));
    assert.ok((await appOpen(tg)).most <= 3, "acme's 2 and globex's 1 at most");
    for (const socket of open.slice(1)) socket.close(1000, "done");
    for (let i = 0; i < 100 && (await held(tg, "ws")) > 0; i++) await sleep(50);
    assert.equal(await held(tg, "ws"), 0, "every slot back once the sessions closed");
  }));

test("WebSockets with concurrency = 1: a session is closed before its slot lapses (reservation_ttl), so the origin never has two", () =>
  withTollgate(sessions([wsRule(1, { reservation_ttl: "3s" })]), async (tg) => {
    const socket = await talk(await upgrade(tg));
    const closed = new Promise((resolve) => socket.addEventListener("close", (e) => resolve(e.code)));
    // reservation_ttl 3 s, less slots::LAPSE_MARGIN_MS (1 s): closed by tollgate after about 2 s.
    const code = await Promise.race([closed, sleep(20_000).then(() => "still open")]);
    assert.notEqual(code, "still open", "tollgate closed the session before its slot lapsed");
    for (let i = 0; i < 100 && (await appOpen(tg)).open > 0; i++) await sleep(50);
    assert.equal((await appOpen(tg)).open, 0, "the origin's end was closed too");
    await talk(await upgrade(tg));
    assert.equal((await appOpen(tg)).most, 1, "never two at once at the origin");
  }));

test("a usage rule refuses a WebSocket upgrade (403, nothing reserved, upgrade_refused), and charges a plain request as before", () => {
  const ai = rule("ai", "/ws/*", { key: ["header:x-tenant"], limits: limit(10_000, "1d"), cost: { header: "x-tokens", reserve: 100, max: 3_000 } });
  return withTollgate(sessions([ai]), async (tg) => {
    const res = await upgrade(tg);
    assert.equal(res.status, 403, "a session's usage cannot be read from the answer's header");
    assert.equal(res.webSocket, null);
    assert.match(await res.text(), /WebSocket/);
    assert.equal((await appOpen(tg)).most, 0, "the app never saw the upgrade");
    await tg.settled();
    const events = tg.logEvents().filter((e) => e.tollgate === "upgrade_refused");
    assert.equal(events.length, 1);
    assert.equal(events[0].rule, "ai");
    assert.equal(await held(tg, "ai"), 0, "nothing reserved");
    const plain = await tg.fetch("/ws/chat", { headers: { "x-tenant": "acme" } });
    assert.equal(plain.status, 200);
    assert.equal(await plain.text(), "report");
  });
});

// Issue 35, break 6: a stranger asks for a large answer with a tenant's key
// and never reads it. The origin streams 64 MiB (more than the socket
// buffers between workerd and the client hold) as it is read.
const LARGE = 64 * 1024 * 1024;
const large = (status) =>
  mockOrigin(async () => {
    let sent = 0;
    const chunk = new Uint8Array(64 * 1024);
    const body = new ReadableStream({
      pull(c) {
        if (sent >= LARGE) return c.close();
        sent += chunk.length;
        c.enqueue(chunk);
      },
    });
    return new Response(body, { status, headers: { "content-type": "application/octet-stream" } });
  });

/** A request over a raw connection whose answer is never read: resolves with its status once the headers arrived. */
function neverRead(tg, path, tenant) {
  const req = http.request(new URL(path, tg.url), { headers: { "x-tenant": tenant, "cf-connecting-ip": "198.51.100.66" } });
  const status = new Promise((resolve, reject) => {
    req.on("response", (res) => resolve(res.statusCode));
    req.on("error", reject);
  });
  req.end();
  return { status, close: () => req.destroy() };
}

/** Polls `held` of the key's object until it is `want` (at most `tries` × 100 ms); the last value. */
async function untilHeldIs(tg, name, want, tries) {
  let now = await held(tg, name);
  for (let i = 0; i < tries && now !== want; i++) {
    await sleep(100);
    now = await held(tg, name);
  }
  return now;
}

test("a client that never reads a counted 64 MiB answer loses its slot after idle_release, far under reservation_ttl (10m); the tenant is served", (t) => {
  const rules = [slots(2, { timeout: "1s", reservation_ttl: "10m", idle_release: "1s" })];
  return withTollgate({ origin: large(200), config: config(...rules) }, async (tg) => {
    const strangers = [neverRead(tg, "/export/x", "acme"), neverRead(tg, "/export/x", "acme")];
    try {
      assert.deepEqual(await Promise.all(strangers.map((s) => s.status)), [200, 200], "both answered, counted (every status counts)");
      const answered = Date.now();
      const blocked = await tg.fetch("/export/x", { headers: { "x-tenant": "acme" } });
      assert.equal(blocked.status, 429, "both slots held while the answers are unread");
      await blocked.arrayBuffer();
      // Freed once a chunk waited idle_release (1 s) for each client: the
      // bound is 1 s after the socket buffers fill, plus one settle call.
      // 300 polls of 100 ms (30 s) is far under the 10 minutes it took.
      assert.equal(await untilHeldIs(tg, "exports", 0, 300), 0, "both slots given back before reservation_ttl");
      t.diagnostic(`both slots free ${Date.now() - answered} ms after the headers (idle_release 1 s)`);
      await tg.settled();
      const cuts = tg.logEvents().filter((e) => e.tollgate === "answer_cut");
      assert.deepEqual(cuts.map((e) => [e.rule, e.reason]), [["exports", "idle_release"], ["exports", "idle_release"]]);
      // A small answer the tenant reads: the origin streams 64 MiB here too,
      // so read only its headers, then let it go.
      const served = await tg.fetch("/export/x", { headers: { "x-tenant": "acme" } });
      assert.equal(served.status, 200, "the tenant gets a slot at once");
      await served.body.cancel();
    } finally {
      strangers.forEach((s) => s.close());
    }
  });
});

test("an answer the rule does not count (count_statuses = [200]; a stranger's 401) gives the slot back at its headers, read or not", () => {
  const rules = [slots(2, { count_statuses: [200], timeout: "1s", reservation_ttl: "10m" })];
  return withTollgate({ origin: large(401), config: config(...rules) }, async (tg) => {
    const strangers = [neverRead(tg, "/export/x", "acme"), neverRead(tg, "/export/x", "acme")];
    try {
      assert.deepEqual(await Promise.all(strangers.map((s) => s.status)), [401, 401]);
      // Settled before the response is handed over: nothing left to poll for.
      assert.equal(await untilHeldIs(tg, "exports", 0, 20), 0, "no slot held by an uncounted answer");
      const served = await tg.fetch("/export/x", { headers: { "x-tenant": "acme" } });
      assert.equal(served.status, 401, "the tenant's own request is forwarded at once (not 429)");
      await served.body.cancel();
    } finally {
      strangers.forEach((s) => s.close());
    }
  });
});
