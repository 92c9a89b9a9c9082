// Two-phase counting for rules that count only some statuses
// (count_statuses): a request reserves a slot before it is forwarded and
// commits or releases it once the origin has answered, so concurrent
// requests never pass the limit together.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, sleep } from "./harness.mjs";
import { config, rule, limit, failedLogins, json } from "./builders.mjs";

const slow = (status, ms = 100) => mockOrigin(async () => (await sleep(ms), new Response(status === 200 ? "ok" : "no", { status })));
const concurrently = (n, send) => Promise.all(Array.from({ length: n }, (_, i) => send(i).then(async (r) => (await r.arrayBuffer(), r.status))));
const count = (all, status) => all.filter((s) => s === status).length;

for (const algorithm of ["sliding_log", "gcra"]) {
  test(`quota (${algorithm}): 200 concurrent requests, count_statuses [200], limit 10: the origin is reached exactly 10 times`, () => {
    const origin = slow(200);
    const quota = config(rule("quota", "/q", { key: ["global"], count_statuses: [200], algorithm, limits: limit(10, "1h") }));
    return withTollgate({ origin, config: quota }, async (tg) => {
      const all = await concurrently(200, (i) => tg.fetch("/q", { ip: `198.51.100.${i % 250}` }));
      assert.equal(origin.received.length, 10, "exactly the limit reached the origin");
      assert.deepEqual([count(all, 200), count(all, 429)], [10, 190]);
      const status = await tg.callObject("quota\nglobal=*", { v: 1, op: "status", alg: algorithm, limits: [[10, 3_600_000]] });
      assert.equal(status.body.held, undefined, "every reservation was committed: none held");
      assert.equal(status.body.windows[0].used, 10);
    });
  });
}

test("failures-only login rule: 200 concurrent wrong passwords for one account, limit 10: exactly 10 reach the origin", () => {
  const origin = slow(401);
  const logins = config(failedLogins({ name: "login" }));
  return withTollgate({ origin, config: logins }, async (tg) => {
    const body = JSON.stringify({ email: "victim@example.com", password: "guess" });
    const all = await concurrently(200, (i) =>
      tg.fetch("/login", json(body, { ip: `203.0.113.${i % 250}` })),
    );
    assert.equal(origin.received.length, 10, "exactly 10 guesses reached the origin");
    assert.deepEqual([count(all, 401), count(all, 429)], [10, 190]);
  });
});

test("a status that does not count releases its slot at once; a request another rule blocks releases it too", () => {
  const origin = mockOrigin((request, record) => (record.path === "/q/denied" ? new Response("no", { status: 403 }) : undefined));
  const quotas = config(
    rule("quota", "/q/*", { key: ["global"], count_statuses: [200], limits: limit(2, "1h") }),
    rule("per-ip", "/q/*", { key: ["ip"], limits: limit(2, "1h") }),
  );
  return withTollgate({ origin, config: quotas }, async (tg) => {
    const status = async () => (await tg.callObject("quota\nglobal=*", { v: 1, op: "status", limits: [[2, 3_600_000]] })).body;
    assert.equal((await tg.fetch("/q/denied", { ip: "203.0.113.1" })).status, 403);
    assert.equal((await status()).windows[0].used, 0, "a 403 costs nothing");
    assert.equal((await tg.fetch("/q/ok", { ip: "203.0.113.1" })).status, 200);
    assert.equal((await tg.fetch("/q/ok", { ip: "203.0.113.1" })).status, 429, "per-ip blocks: quota's reservation is released");
    let s = await status();
    assert.deepEqual([s.windows[0].used, s.held ?? 0], [1, 0]);
    assert.equal((await tg.fetch("/q/ok", { ip: "203.0.113.2" })).status, 200, "the released slot is free for another client");
    assert.equal((await tg.fetch("/q/ok", { ip: "203.0.113.3" })).status, 429, "the quota is spent: 2 served");
    s = await status();
    assert.deepEqual([s.windows[0].used, s.held ?? 0], [2, 0]);
    assert.equal(origin.received.filter((r) => r.path === "/q/ok").length, 2);
  });
});

test("a reservation whose request never completes expires; the late answer still counts", () => {
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  const origin = mockOrigin(async (request, record) => (record.path === "/q/slow" ? (await gate, new Response("late")) : undefined));
  // The hold is long enough (6 s) that the checks made while it holds are
  // made within it on a loaded machine; its end is observed by polling the
  // object, and judged against when the object can have reserved.
  const TTL_MS = 6_000;
  const expiring = config(
    rule("quota", "/q/*", { key: ["global"], count_statuses: [200], timeout: "200ms", reservation_ttl: `${TTL_MS}ms`, limits: limit(1, "1h") }),
  );
  return withTollgate({ origin, config: expiring }, async (tg) => {
    const status = async () => (await tg.callObject("quota\nglobal=*", { v: 1, op: "status", limits: [[1, 3_600_000]] })).body;
    const started = Date.now();
    // Caught, so that a failed assertion is reported as itself, not as this
    // request torn down with the runtime.
    const stuck = tg.fetch("/q/slow").catch((e) => e);
    // Until the object holds the slot (the request reached the origin).
    for (let i = 0; i < 100 && origin.received.length === 0; i++) await sleep(50);
    const held = await status();
    assert.deepEqual([held.held, held.stored_hits], [1, 0], "held, not committed");
    const waiting = await tg.fetch("/q/fast");
    assert.equal(waiting.status, 429, "the slot is held by the request in flight");
    assert.ok(Number(waiting.headers.get("retry-after")) <= TTL_MS / 1000 + 1, `at most until the reservation lapses: ${waiting.headers.get("retry-after")}`);
    // Until it lapses and the alarm deletes the row it kept alive (bounded).
    let lapsed = held;
    for (let i = 0; i < 150 && (lapsed.held !== undefined || lapsed.alarm_pending !== false); i++) {
      await sleep(100);
      lapsed = await status();
    }
    assert.deepEqual([lapsed.held, lapsed.alarm_pending], [undefined, false], "expired, and the alarm deleted the row it kept alive");
    assert.ok(Date.now() - started >= TTL_MS, "not before the hold's end: the object reserved after the test started");
    assert.equal((await tg.fetch("/q/fast")).status, 200, "the lapsed slot is free again");
    open();
    assert.equal((await stuck).status, 200);
    const s = await status();
    assert.equal(s.stored_hits, 2, "the late answer was committed as a hit all the same");
    assert.equal(origin.received.length, 2);
  });
});

test("a client that disconnects while the origin works is still settled", () => {
  const origin = slow(401, 400);
  const logins = config(rule("login", "/login", { key: ["header:x-account"], count_statuses: [401], limits: limit(5, "1h") }));
  return withTollgate({ origin, config: logins }, async (tg) => {
    const status = async () => (await tg.callObject("login\nheader:x-account=ann", { v: 1, op: "status", limits: [[5, 3_600_000]] })).body;
    const abort = new AbortController();
    const gone = tg.fetch("/login", { headers: { "x-account": "ann" }, signal: abort.signal }).catch((e) => e);
    await sleep(150);
    abort.abort();
    await gone;
    await sleep(800);
    const s = await status();
    assert.equal(origin.received.length, 1);
    assert.deepEqual([s.windows[0].used, s.held ?? 0], [1, 0], "the 401 was committed, nothing left held");
  });
});

test("cost of two-phase calls: a reserve, a commit and a release write one row each; a blocked reserve and a stale release none", () =>
  withTollgate({}, async (tg) => {
    const limits = [[2, 60_000]];
    const call = async (op, extra = {}) => (await tg.callObject("two-phase-probe", { v: 1, op, limits, ...extra })).body;
    const a = await call("reserve", { hold_ms: 60_000 });
    const b = await call("reserve", { hold_ms: 60_000 });
    assert.deepEqual([a.allowed, a.rows_written, a.alarm_set, a.held], [true, 1, true, 1]);
    assert.deepEqual([b.allowed, b.rows_written, b.alarm_set, b.held], [true, 1, false, 2]);
    assert.notEqual(a.reservation, b.reservation);
    const full = await call("reserve", { hold_ms: 60_000 });
    assert.deepEqual([full.allowed, full.in_flight, full.rows_written], [false, true, 0], "held by requests in flight: nothing written");
    const commit = await call("commit", { reservation: a.reservation });
    assert.deepEqual([commit.rows_written, commit.stored_hits, commit.held], [1, 1, 1]);
    const release = await call("release", { reservation: b.reservation });
    assert.deepEqual([release.rows_written, release.held ?? 0], [1, 0]);
    const stale = await call("release", { reservation: b.reservation });
    assert.equal(stale.rows_written, 0, "released once");
    for (const r of [a, b, full, commit, release, stale]) assert.ok(r.rows_read <= 1, `rows_read ${r.rows_read}`);
    const refused = await tg.callObject("two-phase-probe", { v: 1, op: "reserve", limits });
    assert.equal(refused.status, 400);
    assert.match(refused.body.error, /reserve needs hold_ms/);
  }));
