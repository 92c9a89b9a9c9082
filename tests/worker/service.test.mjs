// tollgate in front of another Worker (issue 18, pattern 1): `upstream =
// { service = "APP" }` forwards allowed requests to env.APP.fetch(request).
// The app Worker here is real (workerd, its own isolate); it counts what it
// sees, so the tests assert exactly how many requests got through.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, COMPATIBILITY_DATE } from "./harness.mjs";
import { rule, limit, json } from "./builders.mjs";

// The app: counts requests per path; /login answers 401 unless the password
// is "right"; /ws accepts a WebSocket and echoes; /__seen reports the count.
const APP = `
const seen = {};
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/__seen") return Response.json(seen);
    seen[url.pathname] = (seen[url.pathname] ?? 0) + 1;
    if (url.pathname === "/ws") {
      const [client, server] = Object.values(new WebSocketPair());
      server.accept();
      server.addEventListener("message", (e) => server.send("echo:" + e.data));
      return new Response(null, { status: 101, webSocket: client });
    }
    const body = request.method === "POST" ? await request.text() : "";
    if (url.pathname === "/login") {
      return new Response("login", { status: JSON.parse(body).password === "right" ? 200 : 401 });
    }
    return Response.json(
      { url: request.url, method: request.method, ip: request.headers.get("cf-connecting-ip"), custom: request.headers.get("x-custom"), body },
      { headers: { "x-app": "yes" } },
    );
  },
};
`;

const app = { name: "app", modules: true, script: APP, compatibilityDate: COMPATIBILITY_DATE };
const options = (rules, extra = {}) => ({
  origin: mockOrigin(),
  config: { upstream: { service: "APP" }, rules },
  services: { APP: "app" },
  workers: [app],
  ...extra,
});
async function seenByApp(tg) {
  const worker = await tg.mf.getWorker("app");
  return (await worker.fetch("http://app/__seen")).json();
}

test("service upstream: 11 calls, the 11th is 429, the app Worker sees exactly 10; the zone origin none", () => {
  const rules = [rule("api", "/api/*", { key: ["ip"], ratelimit_headers: true, limits: limit(10, "1h") })];
  return withTollgate(options(rules), async (tg) => {
    for (let i = 1; i <= 10; i++) {
      const res = await tg.fetch("/api/items?x=1", { method: "POST", body: `n=${i}`, headers: { "x-custom": "kept" } });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("x-app"), "yes", "the app's own response, with its headers");
      assert.equal(res.headers.get("ratelimit-policy"), '"api";q=10;w=3600', "RateLimit fields added to the app's response");
      assert.match(res.headers.get("ratelimit"), new RegExp(`^"api";r=${10 - i};t=\\d+$`));
      const echo = await res.json();
      assert.deepEqual(echo, {
        url: "https://example.com/api/items?x=1",
        method: "POST",
        ip: "203.0.113.7",
        custom: "kept",
        body: `n=${i}`,
      }, "the request reaches the app unchanged");
    }
    const blocked = await tg.fetch("/api/items?x=1");
    assert.equal(blocked.status, 429);
    assert.equal(blocked.headers.get("x-app"), null, "tollgate's own answer");
    await blocked.arrayBuffer();
    assert.deepEqual(await seenByApp(tg), { "/api/items": 10 });
    assert.equal((await tg.fetch("/other")).status, 200, "an unlimited path goes to the app too");
    assert.equal(tg.origin.received.length, 0, "nothing reached the zone's origin");
  });
});

test("service upstream: a failures-only rule counts the app's 401s only, and blocks the 4th failure", () => {
  const rules = [rule("login", "/login", { methods: ["POST"], key: ["body:email"], count_statuses: [401], limits: limit(3, "15m") })];
  return withTollgate(options(rules), async (tg) => {
    const login = (password) =>
      tg.fetch("/login", json({ email: "a@example.com", password }));
    assert.equal((await login("right")).status, 200, "a success costs nothing");
    for (let i = 0; i < 3; i++) assert.equal((await login("wrong")).status, 401);
    assert.equal((await login("right")).status, 429, "3 failures spent the allowance");
    assert.deepEqual(await seenByApp(tg), { "/login": 4 });
  });
});

test("service upstream: a WebSocket upgrade reaches the app and the socket works", () => {
  const rules = [rule("ws", "/ws", { key: ["ip"], ratelimit_headers: true, limits: limit(1, "1h") })];
  return withTollgate(options(rules), async (tg) => {
    const res = await tg.fetch("/ws", { headers: { upgrade: "websocket" } });
    assert.equal(res.status, 101);
    const socket = res.webSocket;
    assert.ok(socket, "the app's WebSocket came through");
    socket.accept();
    const reply = new Promise((resolve) => socket.addEventListener("message", (e) => resolve(e.data)));
    socket.send("hi");
    assert.equal(await reply, "echo:hi");
    socket.close();
    const again = await tg.fetch("/ws", { headers: { upgrade: "websocket" } });
    assert.equal(again.status, 429, "the second upgrade is over the limit");
    await again.arrayBuffer();
    assert.deepEqual(await seenByApp(tg), { "/ws": 1 });
  });
});

test("service upstream with an invalid config: on_invalid_config = allow forwards to the app, not the origin", () => {
  const config = { upstream: { service: "APP" }, on_invalid_config: "allow", rules: [{ name: "broken", path: "/x" }] };
  return withTollgate(options([], { config }), async (tg) => {
    const res = await tg.fetch("/anything");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-app"), "yes");
    await res.arrayBuffer();
    assert.equal(tg.origin.received.length, 0);
  });
});
