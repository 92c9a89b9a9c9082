// The vertical slice: one rule (10 per 60 s per IP on /api/example?mode=heavy)
// limited end to end in workerd, with a real SQLite-backed Durable Object.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTollgate, withTollgate, objectFiles, statuses, tempDir } from "./harness.mjs";

const HEAVY = "/api/example?mode=heavy";

test("11 rapid requests from one IP: ten 200s, then 429 with Retry-After", () =>
  withTollgate({}, async (tg) => {
    assert.deepEqual(await statuses(tg, 10, HEAVY), Array(10).fill(200));
    const res = await tg.fetch(HEAVY);
    assert.equal(res.status, 429);
    const retryAfter = res.headers.get("retry-after");
    assert.match(retryAfter, /^\d+$/);
    assert.ok(Number(retryAfter) >= 59 && Number(retryAfter) <= 60, retryAfter);
    assert.equal(res.headers.get("content-type"), "application/problem+json");
    assert.equal(res.headers.get("ratelimit-policy"), '"heavy-example";q=10;w=60');
    assert.match(res.headers.get("ratelimit"), /^"heavy-example";r=0;t=(59|60)$/);
    const body = await res.json();
    assert.equal(body.status, 429);
    assert.equal(body.title, "Too Many Requests");
    assert.equal(body.retry_after, Number(retryAfter));
    assert.equal(tg.origin.received.length, 10, "the blocked request never reached the origin");
  }));

test("a second IP is unaffected", () =>
  withTollgate({}, async (tg) => {
    assert.deepEqual(await statuses(tg, 11, HEAVY, { ip: "198.51.100.1" }), [...Array(10).fill(200), 429]);
    assert.deepEqual(await statuses(tg, 10, HEAVY, { ip: "198.51.100.2" }), Array(10).fill(200));
    assert.equal(objectFiles(tg.persist).length, 2, "one object per (rule, key)");
  }));

test("non-matching paths are never limited and never reach a Durable Object", () =>
  withTollgate({}, async (tg) => {
    for (const path of ["/api/example?mode=normal", "/api/example", "/", "/api/other?mode=heavy", "/api/examples?mode=heavy"]) {
      assert.deepEqual(await statuses(tg, 12, path), Array(12).fill(200), path);
    }
    assert.equal(tg.origin.received.length, 60);
    assert.deepEqual(objectFiles(tg.persist), [], "no limiter object was ever created");
  }));

test("every variant lands in the same bucket", async () => {
  const tg = await startTollgate();
  const variants = [
    "/api/example?mode=heavy",
    "/api/example/?mode=heavy",
    "/api/example.json?mode=heavy",
    "/api/example%2ejson?mode=heavy",
    "/api/example?mode=normal&mode=heavy",
  ];
  try {
    for (const v of variants) {
      assert.deepEqual(await statuses(tg, 2, v), [200, 200], v);
    }
    for (const v of variants) {
      assert.equal((await tg.fetch(v)).status, 429, `${v} after 10 mixed variants`);
    }
    assert.equal(objectFiles(tg.persist).length, 1, "one bucket");
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test("the count survives a restart on the same persistence folder", async () => {
  const persist = tempDir();
  let tg = await startTollgate({ persist });
  assert.deepEqual(await statuses(tg, 6, HEAVY), Array(6).fill(200));
  await tg.dispose();
  tg = await startTollgate({ persist });
  try {
    assert.deepEqual(await statuses(tg, 5, HEAVY), [200, 200, 200, 200, 429]);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test("the origin receives exactly the allowed requests, unmodified", async () => {
  const tg = await startTollgate();
  const body = JSON.stringify({ note: "keep me", n: [1, 2, 3] });
  const headers = { "content-type": "application/json", "x-custom": "v1", cookie: "sid=abc" };
  try {
    for (let i = 0; i < 11; i++) {
      const res = await tg.fetch(`/api/example?mode=heavy&i=${i}`, { method: "POST", body, headers });
      assert.equal(res.status, i < 10 ? 200 : 429);
      if (i < 10) assert.equal(res.headers.get("x-origin"), "mock", "the origin's response comes back");
      await res.arrayBuffer();
    }
    assert.equal(tg.origin.received.length, 10);
    tg.origin.received.forEach((r, i) => {
      assert.equal(r.method, "POST");
      assert.equal(r.url, `https://example.com/api/example?mode=heavy&i=${i}`);
      assert.equal(r.body.toString(), body);
      assert.equal(r.headers["content-type"], "application/json");
      assert.equal(r.headers["x-custom"], "v1");
      assert.equal(r.headers.cookie, "sid=abc");
      assert.equal(r.headers["cf-connecting-ip"], "203.0.113.7");
    });
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});
