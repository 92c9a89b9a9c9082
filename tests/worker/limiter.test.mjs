// The limiter Durable Object: exact under concurrency, several windows,
// cost targets from the SQLite cursors, alarm TTL, blocked-until cache.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTollgate, withTollgate, statuses, sleep, objectFiles } from "./harness.mjs";
import { config, rule, limit, limits } from "./builders.mjs";

test("200 concurrent requests for one key with limit 10: exactly 10 allowed", () =>
  withTollgate({}, async (tg) => {
    const all = await Promise.all(
      Array.from({ length: 200 }, () => tg.fetch("/api/example?mode=heavy").then(async (r) => (await r.arrayBuffer(), r.status))),
    );
    assert.equal(all.filter((s) => s === 200).length, 10);
    assert.equal(all.filter((s) => s === 429).length, 190);
    assert.equal(tg.origin.received.length, 10);
  }));

test("two windows (3 per 2 s and 5 per 10 s) both bind", async () => {
  const two = config(rule("two", "/two", { key: ["ip"], limits: limits([3, "2s"], [5, "10s"]) }));
  await withTollgate({ config: two }, async (tg) => {
    assert.deepEqual(await statuses(tg, 4, "/two"), [200, 200, 200, 429], "the 2 s window binds first");
    const blocked = await tg.fetch("/two");
    assert.equal(blocked.status, 429);
    assert.ok(Number(blocked.headers.get("retry-after")) <= 2);
    assert.equal(blocked.headers.get("ratelimit-policy"), '"two/2s";q=3;w=2, "two/10s";q=5;w=10');
    await sleep(2_100);
    assert.deepEqual(await statuses(tg, 3, "/two"), [200, 200, 429], "then the 10 s window: 5 in all");
    const res = await tg.fetch("/two");
    assert.equal(res.status, 429);
    assert.ok(Number(res.headers.get("retry-after")) >= 7, "waits for the 10 s window, not the 2 s one");
    assert.match(res.headers.get("ratelimit"), /^"two\/10s";r=0;t=\d+$/);
  });
});

test("cost targets: <=1 row read per call (none once the object has read its row), 1 row written per allowed, 0 and no alarm per blocked", async () => {
  const tg = await startTollgate();
  const call = { v: 1, op: "hit", limits: [[3, 60_000]], cost: 1 };
  try {
    const replies = [];
    for (let i = 0; i < 5; i++) replies.push((await tg.callObject("cost-probe", call)).body);
    assert.deepEqual(replies.map((r) => r.allowed), [true, true, true, false, false]);
    for (const r of replies) assert.ok(r.rows_read <= 1, `rows_read ${r.rows_read}`);
    // The object is its storage's only writer: it keeps the row it wrote.
    for (const r of replies.slice(1)) assert.equal(r.rows_read, 0, "the row is kept in memory after the first call");
    for (const r of replies.slice(0, 3)) assert.equal(r.rows_written, 1, "one row, updated in place");
    for (const r of replies.slice(3)) assert.equal(r.rows_written, 0, "a blocked request writes nothing");
    assert.deepEqual(replies.map((r) => r.alarm_set), [true, false, false, false, false], "setAlarm only when none is pending");
    assert.ok(replies.every((r) => r.alarm_pending));
    assert.deepEqual(replies.map((r) => r.stored_hits), [1, 2, 3, 3, 3]);
    assert.ok(replies[3].retry_after_ms > 59_000 && replies[3].retry_after_ms <= 60_000);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test("steady state with pruning still writes one row per allowed request", async () => {
  const tg = await startTollgate();
  const call = { v: 1, op: "hit", limits: [[2, 300]], cost: 1 };
  try {
    for (let round = 0; round < 3; round++) {
      const a = (await tg.callObject("prune-probe", call)).body;
      const b = (await tg.callObject("prune-probe", call)).body;
      assert.equal(a.allowed && b.allowed, true, `round ${round}`);
      assert.equal(a.rows_written + b.rows_written, 2);
      // Pruned in the same write: the row keeps exactly the hits its window
      // still counts, as the object decided (on a loaded machine the two
      // calls can fall more than 300 ms apart, and then `a` is gone too).
      assert.equal(b.stored_hits, b.windows[0].used, "expired hits were pruned in the same write");
      assert.ok(b.stored_hits >= 1 && b.stored_hits <= 2, `round ${round}: ${b.stored_hits} stored (the last round's hits are 350 ms old)`);
      await sleep(350);
    }
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test("malformed calls are refused with a clear error", () =>
  withTollgate({}, async (tg) => {
    const bad = await tg.callObject("x", { v: 2, op: "hit", limits: [[1, 1000]] });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error, /unsupported call version 2/);
    const zero = await tg.callObject("x", { v: 1, op: "hit", limits: [[0, 1000]] });
    assert.equal(zero.status, 400);
    assert.match(zero.body.error, /invalid limit/);
  }));

test("TTL: after the window plus margin the object holds no rows and no alarm", async () => {
  // A 3 s window, the third hit 1.5 s after the first: the first alarm
  // (first hit + 3 s) and the re-armed one (third hit + 3 s) lie 1.5 s
  // apart, and the test looks halfway between, so a loaded machine's
  // request latency (hundreds of ms) cannot make it look too early or late.
  const short = config(rule("short", "/short", { key: ["ip"], limits: limit(5, "3s") }));
  const tg = await startTollgate({ config: short });
  const name = "short\nip=203.0.113.7";
  const status = async () => (await tg.callObject(name, { v: 1, op: "status", limits: [[5, 3000]] })).body;
  const until = (t) => sleep(Math.max(0, t - Date.now()));
  try {
    const t1 = Date.now();
    assert.deepEqual(await statuses(tg, 2, "/short"), [200, 200]);
    await until(t1 + 1_500);
    const t3 = Date.now();
    assert.deepEqual(await statuses(tg, 1, "/short"), [200]);
    let s = await status();
    assert.equal(s.stored_hits, 3);
    assert.equal(s.alarm_pending, true);
    // The first alarm (≈ t1 + 3 s) finds the third hit alive and re-arms.
    await until(t1 + 3_750);
    s = await status();
    assert.equal(s.alarm_pending, true, "re-armed for the newest hit");
    assert.ok(s.stored_hits >= 1);
    await until(t3 + 3_000 + 1_500);
    s = await status();
    assert.equal(s.stored_hits, 0, "storage deleted");
    assert.equal(s.alarm_pending, false, "no alarm left");
    assert.equal(s.rows_read, 0, "no log table left to read");
    assert.deepEqual(await statuses(tg, 5, "/short"), Array(5).fill(200), "a fresh window afterwards");
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test("blocked-until cache answers without calling the object", async () => {
  const tg = await startTollgate();
  const name = "heavy-example\nip=203.0.113.7";
  try {
    assert.deepEqual(await statuses(tg, 11, "/api/example?mode=heavy"), [...Array(10).fill(200), 429]);
    // Reset the object behind the isolate's back: had the Worker asked it,
    // the next request would be allowed.
    const reset = await tg.callObject(name, { v: 1, op: "reset", limits: [[10, 60_000]] });
    assert.equal(reset.body.stored_hits, 0);
    assert.deepEqual(await statuses(tg, 5, "/api/example?mode=heavy"), Array(5).fill(429));
    const s = await tg.callObject(name, { v: 1, op: "status", limits: [[10, 60_000]] });
    assert.equal(s.body.stored_hits, 0, "the object saw none of the cached blocks");
    assert.equal(s.body.rows_read, 0);
    assert.equal(tg.origin.received.length, 10);
    assert.equal(objectFiles(tg.persist).length, 1);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test("a GCRA rule: O(1) state, one row written per allowed request, burst then steady refill", async () => {
  // 3 per 15 s: one unit every T = 5 s. The emission interval is long
  // enough that the requests of each step below are decided within it on
  // a loaded machine; the refill is judged by the object's answers.
  const gcra = config(rule("big", "/big", { key: ["ip"], limits: limit(3, "15s"), algorithm: "gcra" }));
  await withTollgate({ config: gcra }, async (tg) => {
    assert.deepEqual(await statuses(tg, 4, "/big"), [200, 200, 200, 429]);
    const blocked = await tg.fetch("/big");
    const wait = Number(blocked.headers.get("retry-after"));
    assert.equal(blocked.status, 429);
    assert.ok(wait >= 1 && wait <= 5, `within one emission interval (5 s), not the whole window: ${wait}`);
    const call = { v: 1, op: "hit", alg: "gcra", limits: [[3, 15_000]], cost: 1 };
    const replies = [];
    for (let i = 0; i < 4; i++) replies.push((await tg.callObject("gcra-probe", call)).body);
    assert.deepEqual(replies.map((r) => [r.allowed, r.rows_written, r.stored_hits]), [
      [true, 1, 1],
      [true, 1, 1],
      [true, 1, 1],
      [false, 0, 1],
    ]);
    await sleep(wait * 1_000 + 50);
    assert.deepEqual(await statuses(tg, 2, "/big"), [200, 429], "one unit refilled after the wait it gave, and only one");
  });
});
