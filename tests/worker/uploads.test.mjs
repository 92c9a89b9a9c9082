// Slow uploads against a failures-only rule (issue 25, finding 2): a
// request reserves its slot only once its body is here (or past the rule's
// upload_buffer, and then for at most upload_timeout), so clients that are
// never served cannot hold a tenant's quota; and a refusal owed to slots in
// flight answers an honest Retry-After.
//
// Example 3's rule (`count_statuses = [200]`, keyed by the school in the
// path), scaled down. The origin reads the whole body, then serves the
// teacher (a token) and answers 401 to everyone else, as the did.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { withTollgate, exampleConfig, mockOrigin, sleep } from "./harness.mjs";
import { rule, limit } from "./builders.mjs";

const PATH = "/api/schools/7/ai/chat";
const KEY = "ai-quota\npath:school:int=7";
const TEACHER = { authorization: "Bearer teacher", "content-type": "application/json" };

/** Example 3 (enforced), `requests` a day, with `extra` rule fields. */
function quota(requests, extra = {}) {
  const config = exampleConfig("tenant-daily-quota", "enforce");
  Object.assign(config.rules[0], { limits: limit(requests, "1d"), ...extra });
  return config;
}

/** The origin: the teacher is served, anyone else refused (after `delayMs`). */
function origin(delayMs = 0) {
  return mockOrigin(async (request, record) => {
    if (delayMs) await sleep(delayMs);
    return record.headers.authorization === "Bearer teacher" ? undefined : new Response("who are you?", { status: 401 });
  });
}

/**
 * An attacker's upload over a raw connection: headers at once, then `first`
 * (bytes), then one byte every `everyMs` until `stop()`. `response` resolves
 * with the status (or "closed" if the connection ended without one).
 */
function slowUpload(base, { method = "POST", headers = {}, first = "", everyMs = 200, ip }) {
  const req = http.request(new URL(PATH, base), {
    method,
    headers: { "cf-connecting-ip": ip, "content-type": "application/json", ...headers },
  });
  let timer;
  const response = new Promise((resolve) => {
    req.on("response", (res) => {
      clearInterval(timer);
      res.resume();
      resolve(res.statusCode);
    });
    req.on("error", () => resolve("closed"));
    req.on("close", () => resolve("closed"));
  });
  req.flushHeaders();
  if (first) req.write(first);
  timer = setInterval(() => req.write(" "), everyMs);
  return {
    response,
    stop() {
      clearInterval(timer);
      req.destroy();
    },
  };
}

/** `promise`, or "no answer" once `ms` have passed. */
const within = (ms, promise) => Promise.race([promise, sleep(ms).then(() => "no answer")]);

const status = async (tg, requests) =>
  (await tg.callObject(KEY, { v: 1, op: "status", limits: [[requests, 86_400_000]] })).body;

/** Polls the key's object until `held` reservations are live (at most 5 s). */
async function untilHeld(tg, requests, held) {
  for (let i = 0; i < 100 && ((await status(tg, requests)).held ?? 0) !== held; i++) await sleep(50);
}

const teacher = (tg) => tg.fetch(PATH, { method: "POST", headers: TEACHER, body: JSON.stringify({ prompt: "a lesson plan" }) });

test("slow uploads hold no slot: 7 connections trickling bodies (chunked, a lying Content-Length, a GET with a body) against a quota of 5, and the teacher is served", () =>
  withTollgate({ origin: origin(), config: quota(5) }, async (tg) => {
    const base = await tg.mf.ready;
    const attackers = [
      ...Array.from({ length: 5 }, (_, i) => slowUpload(base, { ip: `198.51.100.${i + 1}`, first: '{"prompt":"' })),
      slowUpload(base, { ip: "198.51.100.6", headers: { "content-length": "100000" }, first: "{" }),
      slowUpload(base, { ip: "198.51.100.7", method: "GET", first: "{" }),
    ];
    try {
      // Every upload has begun and trickles on (the attack held the
      // quota from here on for 40 s).
      await sleep(1_500);
      const served = await teacher(tg);
      await served.arrayBuffer();
      assert.equal(served.status, 200, "the teacher is served while 7 uploads trickle");
      const s = await status(tg, 5);
      assert.equal(s.held ?? 0, 0, "no slot is held by an upload still arriving");
      assert.equal(s.windows[0].used, 1, "the teacher's call is the only one spent");
      // A second and third teacher call: still nothing held by the attack.
      for (let i = 0; i < 2; i++) {
        const again = await teacher(tg);
        await again.arrayBuffer();
        assert.equal(again.status, 200);
      }
    } finally {
      for (const a of attackers) a.stop();
    }
    const outcomes = await Promise.all(attackers.map((a) => a.response));
    assert.ok(!outcomes.includes(200), `no attacker was served: ${outcomes}`);
    // workerd hands a Worker no body for a GET: that one was forwarded at
    // once, bodiless, and refused (its slot held for the origin's answer).
    const strangers = tg.origin.received.filter((r) => r.headers.authorization !== "Bearer teacher");
    assert.deepEqual(strangers.map((r) => [r.method, r.body.length]), [["GET", 0]], "no upload still trickling reached the origin");
  }));

test("a body over upload_buffer holds its slot at most upload_timeout: the forward is aborted (408), the slot released, the teacher served within the bound", (t) =>
  withTollgate(
    { origin: origin(), config: quota(2, { upload_buffer: 1024, upload_timeout: "3s", timeout: "1s" }) },
    async (tg) => {
      const base = await tg.mf.ready;
      const over = "x".repeat(2048);
      const started = Date.now();
      const attackers = [
        slowUpload(base, { ip: "198.51.100.1", first: over }),
        slowUpload(base, { ip: "198.51.100.2", first: over, headers: { "content-length": "1000000" } }),
      ];
      try {
        await untilHeld(tg, 2, 2);
        // Held by the two uploads: refused, with the bound as the wait.
        const refused = await teacher(tg);
        await refused.arrayBuffer();
        assert.equal(refused.status, 429, "both slots are held by the uploads");
        const retryAfter = Number(refused.headers.get("retry-after"));
        assert.ok(retryAfter >= 1 && retryAfter <= 3, `Retry-After ${retryAfter}: at most the 3 s upload_timeout`);
        assert.match(refused.headers.get("ratelimit") ?? "", new RegExp(`;t=${retryAfter}$`), "RateLimit says the same wait");
        // The bound: upload_timeout (3 s) + the origin's answer (none: it
        // never got a whole body) + the settle call; 5 s of margin for a
        // loaded machine.
        const BOUND_MS = 3_000 + 5_000;
        let served;
        while (Date.now() - started < BOUND_MS) {
          const r = await teacher(tg);
          await r.arrayBuffer();
          if (r.status === 200) {
            served = Date.now() - started;
            break;
          }
          assert.equal(r.status, 429);
          await sleep(250);
        }
        assert.ok(served !== undefined, `the teacher was served within ${BOUND_MS} ms of the attack`);
        t.diagnostic(`the teacher was served ${served} ms after the attack began (upload_timeout 3000 ms)`);
        const outcomes = await within(5_000, Promise.all(attackers.map((a) => a.response)));
        assert.deepEqual(outcomes, [408, 408], "each stalled upload is aborted with 408");
        const s = await status(tg, 2);
        assert.deepEqual([s.held ?? 0, s.windows[0].used], [0, 1], "their slots were released; only the teacher's call is spent");
      } finally {
        for (const a of attackers) a.stop();
      }
      await tg.settled();
      const aborted = tg.logEvents().filter((e) => e.tollgate === "upload");
      assert.deepEqual(aborted.map((e) => e.outcome), ["aborted", "aborted"]);
    },
  ));

test("the origin gets the same request: a body within the buffer and one over it (streamed under the watch) arrive whole", () =>
  withTollgate({ origin: origin(), config: quota(5, { upload_buffer: 1024 }) }, async (tg) => {
    const small = JSON.stringify({ prompt: "p".repeat(500) });
    const large = JSON.stringify({ prompt: "q".repeat(50_000) });
    for (const body of [small, large]) {
      const r = await tg.fetch(PATH, { method: "POST", headers: { ...TEACHER, "x-trace": "42" }, body });
      await r.arrayBuffer();
      assert.equal(r.status, 200);
    }
    const seen = tg.origin.received.map((r) => [r.method, r.path, r.headers["x-trace"], r.headers["content-type"], r.body.toString()]);
    assert.deepEqual(seen, [
      ["POST", PATH, "42", "application/json", small],
      ["POST", PATH, "42", "application/json", large],
    ]);
    assert.equal((await status(tg, 5)).windows[0].used, 2);
  }));

test("a body that does not arrive within upload_timeout is answered 408 and never reserves", () =>
  withTollgate({ origin: origin(), config: quota(1, { upload_timeout: "1s" }) }, async (tg) => {
    const base = await tg.mf.ready;
    const attacker = slowUpload(base, { ip: "198.51.100.1", first: "{" });
    try {
      // The bound: the 1 s upload_timeout, with 5 s of margin.
      assert.equal(await within(6_000, attacker.response), 408);
    } finally {
      attacker.stop();
    }
    const s = await status(tg, 1);
    assert.deepEqual([s.held ?? 0, s.windows[0].used], [0, 0], "nothing reserved, nothing spent");
    const served = await teacher(tg);
    assert.equal(served.status, 200);
  }));

test("a client the isolate already knows to be blocked is refused at once, not kept waiting for its body", () => {
  const config = quota(5);
  config.rules.push(rule("per-client", "/api/schools/:school/ai/*", { key: ["ip"], limits: limit(1, "1h") }));
  return withTollgate({ origin: origin(), config }, async (tg) => {
    const ip = "198.51.100.9";
    const call = () => tg.fetch(PATH, { ip, method: "POST", headers: TEACHER, body: "{}" });
    assert.equal((await call()).status, 200);
    assert.equal((await call()).status, 429, "per-client: blocked, and the block is cached");
    const slow = slowUpload(await tg.mf.ready, { ip, first: "{" });
    try {
      // Waiting for the body would take the 10 s upload_timeout (then 408).
      assert.equal(await within(4_000, slow.response), 429);
    } finally {
      slow.stop();
    }
    const s = await status(tg, 5);
    assert.deepEqual([s.held ?? 0, s.windows[0].used], [0, 1], "nothing held, one call spent");
  });
});

test("Retry-After under a hold: a refusal owed to a request in flight says how long holds last, not when the reservation lapses", () =>
  // Each unauthenticated call keeps the origin busy 3 s, then gets 401.
  withTollgate({ origin: origin(3_000), config: quota(1) }, async (tg) => {
    const stranger = () => tg.fetch(PATH, { ip: "198.51.100.1", method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    // One such call completes: a hold of ~3 s is seen.
    const first = await stranger();
    await first.arrayBuffer();
    assert.equal(first.status, 401);
    // The next holds the quota's only slot for ~3 s.
    const holding = stranger().then(async (r) => (await r.arrayBuffer(), r.status), (e) => `failed: ${e}`);
    await untilHeld(tg, 1, 1);
    const refused = await teacher(tg);
    const problem = JSON.parse(await refused.text());
    assert.equal(refused.status, 429, "the slot is held by the stranger's call");
    const retryAfter = Number(refused.headers.get("retry-after"));
    // The answer was the reservation's lapse: 103 s in issue 25 (for an
    // 8 s hold). The hold seen was ~3 s: 3 or 4 s (load may stretch it).
    assert.ok(retryAfter >= 3 && retryAfter <= 6, `Retry-After ${retryAfter}: about the 3 s hold, not the reservation's lapse`);
    assert.match(refused.headers.get("ratelimit") ?? "", new RegExp(`;t=${retryAfter}$`), "RateLimit says the same wait");
    assert.equal(problem.retry_after, retryAfter, "and so does the problem body");
    // The hold ends as estimated: the stranger's call is answered, the
    // slot is back, and the teacher is served.
    assert.equal(await holding, 401);
    const served = await teacher(tg);
    assert.equal(served.status, 200, "served once the hold ended");
  }));

// Issue 35, break 7, and issue 52 item 3: the bytes a received upload
// waits with are the isolate's (128 MB for everything); six stalled uploads
// at a 16 MiB buffer added 101 MB of workerd RSS, and under the budget that
// counted payload once, 104 MB. Each upload takes its bytes from the
// isolate's memory_budget first, at 2 bytes of memory per byte (as
// measured), a client at most a quarter of it; one that finds no room
// streams (an `over_budget` line), and every hold comes back when its
// request ends.

const MIB = 1_048_576;

/** A stalled upload: `length` announced, `sent` bytes sent, then nothing. */
const stalled = (base, ip, length, sent) =>
  slowUpload(base, { ip, first: Buffer.alloc(sent, "x"), headers: { "content-length": String(length) }, everyMs: 1e9 });

const overBudget = (tg) => tg.logEvents().filter((e) => e.tollgate === "upload" && e.outcome === "over_budget");

/** Polls (at most `ms`) until `done()` holds. */
async function until(ms, done) {
  for (const end = Date.now() + ms; Date.now() < end && !(await done()); ) await sleep(100);
}

/**
 * A whole upload of `bytes` by the teacher from a fresh address, until one
 * is buffered (no new `over_budget` line) or `tries` were made: how many it
 * took (0: never buffered).
 */
async function untilBuffered(tg, bytes, tries) {
  for (let i = 1; i <= tries; i++) {
    const before = overBudget(tg).length;
    const r = await tg.fetch(PATH, { ip: `203.0.113.${100 + i}`, method: "POST", headers: TEACHER, body: Buffer.alloc(bytes, "y") });
    await r.arrayBuffer();
    assert.equal(r.status, 200, "served, buffered or not");
    await tg.settled();
    if (overBudget(tg).length === before) return i;
    await sleep(250);
  }
  return 0;
}

test("six stalled uploads at the largest buffer (8 MiB) stay within a 64 MiB memory_budget, held twice: four are buffered, two stream (over_budget), and once their clients went away a new upload is buffered again", (t) => {
  const config = quota(10, { upload_buffer: 8 * MIB, upload_timeout: "60s" });
  config.memory_budget = 64 * MIB;
  return withTollgate({ origin: origin(), config }, async (tg) => {
    const base = await tg.mf.ready;
    // Six networks: one /24 holds at most half the budget (memory.test.mjs).
    const uploads = Array.from({ length: 6 }, (_, i) => stalled(base, `198.51.${i + 1}.1`, 8 * MIB, 8 * MIB - 1024));
    try {
      // Nothing ends before the 60 s upload_timeout: all six are in flight.
      await until(30_000, async () => overBudget(tg).length >= 2 && ((await status(tg, 10)).held ?? 0) >= 2);
      const over = overBudget(tg);
      assert.equal(over.length, 2, "the fifth and sixth found no room");
      for (const e of over) {
        assert.deepEqual([e.wanted, e.buffered, e.isolate_held, e.memory_budget], [8 * MIB, 0, 4 * 2 * 8 * MIB, 64 * MIB], "four 8 MiB uploads hold 64 MiB of memory");
      }
      assert.equal((await status(tg, 10)).held, 2, "the two streamed reserved (their bodies go on to the origin under the deadline)");
    } finally {
      for (const u of uploads) u.stop();
    }
    // The clients went away: every hold is given back; a new upload is
    // buffered again (bounded: 20 tries).
    await within(10_000, Promise.all(uploads.map((u) => u.response)));
    const tries = await untilBuffered(tg, 8 * MIB - 1024, 20);
    assert.ok(tries > 0, "a new 8 MiB upload is buffered once the stalled ones ended");
    t.diagnostic(`buffered again at try ${tries}`);
  });
});

test("one client holds at most a quarter of memory_budget: its second upload streams, another client's is buffered, and its share is back once its uploads timed out", () => {
  const config = quota(10, { upload_buffer: MIB, upload_timeout: "2s" });
  config.memory_budget = 8 * MIB;
  return withTollgate({ origin: origin(), config }, async (tg) => {
    const base = await tg.mf.ready;
    const uploads = [
      stalled(base, "198.51.100.1", MIB, MIB - 1024),
      stalled(base, "198.51.100.1", MIB, MIB - 1024),
      stalled(base, "198.51.100.2", MIB, MIB - 1024),
    ];
    let statuses;
    try {
      // The bound: the 2 s upload_timeout, with 8 s of margin.
      statuses = await within(10_000, Promise.all(uploads.map((u) => u.response)));
    } finally {
      for (const u of uploads) u.stop();
    }
    assert.deepEqual(statuses, [408, 408, 408], "each stalled upload ends with 408 at upload_timeout");
    await tg.settled();
    const over = overBudget(tg);
    assert.equal(over.length, 1, "only the first client's second upload found no room");
    assert.deepEqual([over[0].client_held, over[0].isolate_held, over[0].buffered], [2 * MIB, 2 * MIB, 0], "its own quarter (2 MiB of memory: one 1 MiB upload, held twice) was full, the isolate was not");
    const outcomes = tg.logEvents().filter((e) => e.tollgate === "upload").map((e) => e.outcome).sort();
    assert.deepEqual(outcomes, ["aborted", "over_budget", "stalled", "stalled"], "two buffered (408 unreserved), one streamed (408, its forward aborted)");
    // Released on timeout: the same client's next upload is buffered.
    const before = over.length;
    const r = await tg.fetch(PATH, { ip: "198.51.100.1", method: "POST", headers: TEACHER, body: Buffer.alloc(MIB - 1024, "y") });
    await r.arrayBuffer();
    assert.equal(r.status, 200);
    await tg.settled();
    assert.equal(overBudget(tg).length, before, "its share is back: buffered");
    assert.deepEqual([(await status(tg, 10)).held ?? 0], [0], "no slot left held");
  });
});
