// Hostile input: every request gets a documented outcome (a clear 4xx, or
// normal limiting), the Worker never panics, and nothing it rejects reaches
// the origin.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const CONFIG = config(
  rule("heavy", "/api/example", { query: { mode: "heavy" }, limits: limit(2, "60s") }),
  rule("keyed", "/keyed", { key: ["header:x-api-key"], limits: limit(1, "60s") }),
);

const withShipped = (body) => withTollgate({ config: CONFIG }, body);

// Cloudflare accepts URLs up to 16 KB. Locally, Node's HTTP parser (in
// Miniflare's loopback to the mocked origin) needs --max-http-header-size
// above its 16 KB default for these; scripts/test sets it.
test("a URL at the 16 KB limit is canonicalized, limited and forwarded like any other", () =>
  withShipped(async (tg) => {
    const head = "/x/%2e%2e".repeat(200);
    const tail = "/api/example?mode=heavy&pad=";
    const url = head + tail + "x".repeat(16 * 1024 - "https://example.com".length - head.length - tail.length);
    assert.equal(`https://example.com${url}`.length, 16 * 1024);
    assert.deepEqual(await statuses(tg, 3, url, { ip: "203.0.113.1" }), [200, 200, 429]);
    assert.equal(tg.origin.received.length, 2);
    // The client (like any WHATWG URL parser) already resolved the dot
    // segments; the Worker forwards what it received, unchanged.
    const sent = new URL(`https://example.com${url}`).href;
    assert.ok(tg.origin.received[0].url === sent, "forwarded unchanged");
  }));

test("10,000 query parameters: the condition is still found, in any position", () =>
  withShipped(async (tg) => {
    const many = Array.from({ length: 10_000 }, (_, i) => `k${i}`).join("&");
    assert.deepEqual(await statuses(tg, 3, `/api/example?${many}&mode=heavy`, { ip: "203.0.113.2" }), [200, 200, 429]);
    assert.deepEqual(await statuses(tg, 2, `/api/example?mode=heavy&${many}`, { ip: "203.0.113.3" }), [200, 200]);
    assert.deepEqual(await statuses(tg, 3, `/other?${many}`, { ip: "203.0.113.2" }), [200, 200, 200]);
  }));

test("1,000 path segments, dot segments included", () =>
  withShipped(async (tg) => {
    assert.equal((await tg.fetch("/a".repeat(1_000))).status, 200);
    const climb = "/x/..".repeat(1_000) + "/api/example?mode=heavy";
    const raw = "/x/%2e%2e".repeat(1_000) + "/api/example?mode=heavy";
    assert.deepEqual([(await tg.fetch(climb, { ip: "203.0.113.3" })).status, (await tg.fetch(raw, { ip: "203.0.113.3" })).status, (await tg.fetch(climb, { ip: "203.0.113.3" })).status], [200, 200, 429]);
  }));

test("invalid UTF-8 and invalid escapes go through; decoded control characters are refused with 400", () =>
  withShipped(async (tg) => {
    for (const path of ["/api/%ff%fe?mode=%ff", "/api/example%zz?mode=heavy", "/api/%?mode=%", "/api/example?mode=heav%"]) {
      const res = await tg.fetch(path, { ip: "203.0.113.4" });
      assert.equal(res.status, 200, path);
    }
    const before = tg.origin.received.length;
    for (const path of ["/api/example%00.json?mode=heavy", "/api/%0a/example", "/api/exa%7Fmple", "/api/example%2500?mode=heavy"]) {
      const res = await tg.fetch(path, { ip: "203.0.113.4" });
      assert.equal(res.status, 400, path);
      assert.equal(res.headers.get("content-type"), "application/problem+json");
      assert.match((await res.json()).detail, /control character/);
    }
    assert.equal(tg.origin.received.length, before, "a refused request never reaches the origin");
  }));

test("header values with control characters (tab) key like any other value", () =>
  withShipped(async (tg) => {
    const key = "a\tb";
    assert.deepEqual(
      [await tg.fetch("/keyed", { headers: { "x-api-key": key } }), await tg.fetch("/keyed", { headers: { "x-api-key": key } })].map((r) => r.status),
      [200, 429],
    );
    // Characters no HTTP client may send in a header never reach the Worker.
    assert.throws(() => new Headers({ "x-api-key": "a\u0000b" }));
  }));
