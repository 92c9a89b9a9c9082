// tollgate called over RPC from a TypeScript app Worker (issue 18, pattern
// 2): examples/ts-app, bundled here with esbuild, binds the tollgate Worker
// as TOLLGATE and calls check/settle through clients/ts (Hono middleware in
// src/index.ts, the plain fetch wrapper in src/plain.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { buildSync } from "esbuild";
import { parse as parseToml } from "smol-toml";
import { withTollgate, mockOrigin, ROOT, COMPATIBILITY_DATE, sleep } from "./harness.mjs";
import { json } from "./builders.mjs";

const EXAMPLE = join(ROOT, "examples", "ts-app");
const bundle = (entry) =>
  buildSync({ entryPoints: [join(EXAMPLE, "src", entry)], bundle: true, format: "esm", platform: "neutral", write: false, logLevel: "silent" })
    .outputFiles[0].text;
const config = parseToml(readFileSync(join(EXAMPLE, "tollgate.wrangler.toml"), "utf8")).vars.TOLLGATE;
const appWorker = (name, entry) => ({
  name,
  modules: true,
  script: bundle(entry),
  compatibilityDate: COMPATIBILITY_DATE,
  serviceBindings: { TOLLGATE: "tollgate" },
});
const options = () => ({
  origin: mockOrigin(),
  config,
  entry: "ts-app",
  workers: [appWorker("ts-app", "index.ts"), appWorker("plain", "plain.ts")],
});

test("TS app over RPC (Hono middleware): 11th call 429 from tollgate, the app served 10, its responses carry RateLimit fields", () =>
  withTollgate(options(), async (tg) => {
    for (let i = 1; i <= 10; i++) {
      const res = await tg.fetch("/api/items");
      assert.equal(res.status, 200);
      assert.equal((await res.json()).served, i, "the app's own response");
      assert.equal(res.headers.get("ratelimit-policy"), '"api";q=10;w=60');
      assert.match(res.headers.get("ratelimit"), new RegExp(`^"api";r=${10 - i};t=\\d+$`));
    }
    const blocked = await tg.fetch("/api/items");
    assert.equal(blocked.status, 429);
    assert.equal(blocked.headers.get("content-type"), "application/problem+json", "tollgate's own 429, passed through");
    assert.ok(Number(blocked.headers.get("retry-after")) > 0);
    await blocked.arrayBuffer();
    assert.deepEqual(await (await tg.fetch("/stats")).json(), { served: 10 }, "the app served exactly 10");
    assert.equal((await tg.fetch("/API/items/")).status, 429, "the same canonicalization as the standalone Worker");
    assert.equal((await tg.fetch("/api/items", { ip: "198.51.100.9" })).status, 200, "another client has its own allowance");
    assert.equal(tg.origin.received.length, 0, "tollgate forwarded nothing itself");
  }));

// Each check reserves a slot (limit 5) until settled: were the successes
// not released, the 3rd failure would already be over the limit.
test("TS app over RPC: failures-only login counts the app's 401s, releases its successes; the 6th failure is 429", () =>
  withTollgate(options(), async (tg) => {
    const login = (password, email = "a@example.com") =>
      tg.fetch("/login", json({ email, password }));
    for (let i = 0; i < 3; i++) assert.equal((await login("right")).status, 200, "a success is released, not counted");
    for (let i = 0; i < 5; i++) assert.equal((await login("wrong")).status, 401, "the app read the body after check");
    const blocked = await login("right");
    assert.equal(blocked.status, 429, "5 failures spent the allowance");
    assert.equal(blocked.headers.get("content-type"), "application/problem+json");
    assert.equal((await login("wrong", "b@example.com")).status, 401, "per account");
    await tg.settled();
    assert.ok(!tg.logs().includes("counter_error"), "every settlement reached its counter");
  }));

test("plain fetch wrapper over RPC: the same limits, failures-only and RateLimit fields", () =>
  withTollgate(options(), async (tg) => {
    const plain = await tg.mf.getWorker("plain");
    const get = () => plain.fetch("https://example.com/api/x", { headers: { "cf-connecting-ip": "203.0.113.50" } });
    for (let i = 1; i <= 10; i++) {
      const res = await get();
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { path: "/api/x" });
      assert.match(res.headers.get("ratelimit"), new RegExp(`^"api";r=${10 - i};`));
    }
    const blocked = await get();
    assert.equal(blocked.status, 429);
    await blocked.arrayBuffer();
    const login = (password) =>
      plain.fetch("https://example.com/login", {
        method: "POST",
        headers: { "cf-connecting-ip": "203.0.113.50", "content-type": "application/json" },
        body: JSON.stringify({ email: "c@example.com", password }),
      });
    for (let i = 0; i < 3; i++) assert.equal((await login("right")).status, 200);
    for (let i = 0; i < 5; i++) assert.equal((await login("wrong")).status, 401);
    assert.equal((await login("right")).status, 429);
  }));

// Issue 37 item 6: an app settling over RPC reads usage the same way as
// tollgate in front of an origin. The Hono app streams OpenAI-style SSE
// (usage in the final chunk) and settles with its whole response
// (clients/ts: `settleWithResponse`); the rule's budget is 2,500 tokens a
// day with reserve = max = 1,000. Answers of 500 tokens: read from the
// stream, 4 fit (2,000 committed; a 5th's reserve would pass 2,500); were
// the usage not read (each charged max), 2 would.
test("TS app over RPC: a streamed answer's usage is read from the response handed to settle, the stream passes unchanged, the budget admits exactly 4 of 500 tokens", { timeout: 60_000 }, () =>
  withTollgate(options(), async (tg) => {
    const ask = () => tg.fetch("/v1/chat", { method: "POST", body: "{}", headers: { "x-tenant": "school", "x-tokens": "500" } });
    const first = await ask();
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("content-type"), "text/event-stream");
    const text = await first.text();
    assert.equal(text.split("\n\n").filter(Boolean).length, 4, "every event reached the client");
    assert.match(text, /"total_tokens":500/);
    assert.ok(text.endsWith("data: [DONE]\n\n"), "the stream's own end");
    let served = 1;
    let refusals = 0;
    // A refusal may meet the previous answer's reservation still held while
    // its commit lands: retried after a pause; three in a row end it.
    for (let i = 0; i < 20 && refusals < 3; i++) {
      const res = await ask();
      await res.arrayBuffer();
      if (res.status === 200) {
        served++;
        refusals = 0;
      } else {
        assert.equal(res.status, 429);
        refusals++;
        await sleep(300);
      }
    }
    assert.equal(served, 4, "2,000 of 2,500 tokens committed from the streams' usage; the 5th reserve does not fit");
    await tg.settled();
    const missing = tg.logEvents().filter((e) => e.tollgate === "usage_missing");
    assert.equal(missing.length, 0, "every stream reported its usage");
  }));

// A Worker bound to tollgate that calls its RPC methods with bad arguments.
const PROBE = `
export default { async fetch(request, env) {
  const out = {};
  for (const [name, call] of Object.entries({
    noRequest: () => env.TOLLGATE.check("https://example.com/api/x"),
    badTicket: () => env.TOLLGATE.settle("{not json", 401),
    badStatus: () => env.TOLLGATE.settle(JSON.stringify({ v: 2, t: Date.now(), e: [] }), 99),
    // Unsigned: this deployment has no TOLLGATE_LOG_KEY or device secret to
    // sign with (the signed case is abuse.test.mjs's forged-ticket test).
    foreignRules: () => env.TOLLGATE.settle('{"v":2,"t":' + Date.now() + ',"e":[["api","ip=1",0,null,null,null],["nope","x",0,null,null,null]]}', 401),
    oldVersion: () => env.TOLLGATE.settle('{"v":1,"e":[]}', 401),
    stale: () => env.TOLLGATE.settle(JSON.stringify({ v: 2, t: Date.now() - 3_700_000, e: [] }), 401),
  })) {
    try { out[name] = { ok: await call() }; } catch (e) { out[name] = { error: String(e.message) }; }
  }
  return Response.json(out);
} };`;

test("RPC arguments are checked: no Request, a malformed ticket, a bad status; a ticket naming other rules is accepted and settles nothing (ticket.rs tests what is dropped)", () => {
  const o = options();
  o.workers.push({ name: "probe", modules: true, script: PROBE, compatibilityDate: COMPATIBILITY_DATE, serviceBindings: { TOLLGATE: "tollgate" } });
  return withTollgate(o, async (tg) => {
    const out = await (await (await tg.mf.getWorker("probe")).fetch("https://probe/")).json();
    assert.match(out.noRequest.error, /not a Request/);
    assert.match(out.badTicket.error, /not a ticket/);
    assert.match(out.badStatus.error, /HTTP status/);
    assert.deepEqual(out.foreignRules, { ok: { headers: [] } });
    assert.match(out.oldVersion.error, /not a ticket/, "v1 tickets were unsigned");
    assert.match(out.stale.error, /over an hour old/, "no replay after the longest hold");
  });
});
