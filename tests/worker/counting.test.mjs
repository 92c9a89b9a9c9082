// Two-phase counting for rules that count only some statuses
// (count_statuses): a request reserves a slot before it is forwarded and
// commits or releases it once the origin has answered, so concurrent
// requests never pass the limit together.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, sleep } from "./harness.mjs";
import { config, rule, limit, failedLogins, json } from "./builders.mjs";

const slow = (status, ms = 100) => mockOrigin(async () => (await sleep(ms), new Response(status === 200 ? "ok" : "no", { status })));

// Exactness under 200 concurrent requests (a quota under both algorithms,
// failures-only logins), the release of an uncounted status or another
// rule's block, and a reservation that lapses are tested natively on the
// Pair (src/testing/pair/tests.rs, issue 36). What stays here needs the
// runtime: a client gone while the origin works, and SQLite's row counts.

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
