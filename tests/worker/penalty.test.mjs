// Issue 29, penalties: a key refused by one of its rule's limits stays
// refused for the rule's `penalty`, measured from that first refusal, kept
// in the key's object (every isolate sees it). Times are asserted against
// the object's own decision (`penalty_until_ms`, from its status), never on
// when a response arrived: Retry-After is bounded by the penalty's end seen
// from just before and just after each request.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, statuses, sleep, COMPATIBILITY_DATE } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const TOKEN = "s3cret-admin-token-for-penalty-tests";
const adminCall = async (tg, path, method = "GET") => {
  const res = await tg.fetch(path, { method, ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, body: await res.json() };
};

/** The penalty's end the object of (rule `api`, `ip`) reports, and its windows. */
async function objectStatus(tg, ip, limits, penaltyMs, rule = "api") {
  const { status, body } = await tg.callObject(`${rule}\nip=${ip}`, { op: "status", limits, penalty_ms: penaltyMs });
  assert.equal(status, 200, JSON.stringify(body));
  return body;
}

/** A request through edge `i`, with the Node clock read just before and after it. */
async function timed(tg, i, path, ip) {
  const before = Date.now();
  const res = await tg.fetchVia(i, path, { ip });
  const after = Date.now();
  await res.arrayBuffer();
  return { res, before, after };
}

/** Retry-After of a refusal by the penalty ending at `until`: the time left, in whole seconds, seen between `before` and `after`. */
function assertRetryAfterFromPenalty({ res, before, after }, until, what) {
  assert.equal(res.status, 429, what);
  const retry = Number(res.headers.get("retry-after"));
  const [low, high] = [Math.ceil((until - after - 50) / 1000), Math.ceil((until - before + 50) / 1000)];
  assert.ok(retry >= Math.max(low, 1) && retry <= high, `${what}: Retry-After ${retry} not in [${low}, ${high}]`);
}

test("a penalty outlives the window: refused after the window emptied, by another isolate too, Retry-After from the penalty, not extended, then admitted", () => {
  const PENALTY_MS = 10_000;
  const LIMITS = [[2, 2_000]];
  const penalised = config(rule("api", "/api/*", { limits: limit(2, "2s"), penalty: "10s" }));
  return withTollgate({ config: penalised, edges: 1 }, async (tg) => {
    const ip = "203.0.113.70";
    assert.deepEqual(await statuses(tg, 2, "/api/x", { ip }), [200, 200]);
    const first = await timed(tg, 0, "/api/x", ip);
    assert.equal(first.res.status, 429);
    assert.equal(first.res.headers.get("retry-after"), "10", "the whole penalty, not the window's wait");
    const until = (await objectStatus(tg, ip, LIMITS, PENALTY_MS)).penalty_until_ms;
    assert.ok(until >= first.before + PENALTY_MS - 50 && until <= first.after + PENALTY_MS + 50, `the penalty ends ${until - first.before} ms after the refusal`);
    // The window (2 s) has emptied; the penalty has not.
    await sleep(Math.max(0, first.after + 2_500 - Date.now()));
    const status = await objectStatus(tg, ip, LIMITS, PENALTY_MS);
    assert.equal(status.windows[0].used, 0, "nothing counted in the window any more");
    assert.equal(status.windows[0].remaining, 2, "a status shows the count as it is: the penalty refuses, not the window");
    assert.equal(status.penalty_until_ms, until);
    assertRetryAfterFromPenalty(await timed(tg, 0, "/api/x", ip), until, "the isolate that saw the refusal (its cache)");
    assertRetryAfterFromPenalty(await timed(tg, 1, "/api/x", ip), until, "another isolate, which never saw this key: the object");
    assert.equal((await objectStatus(tg, ip, LIMITS, PENALTY_MS)).penalty_until_ms, until, "refusals during the penalty do not extend it");
    assert.equal((await tg.fetchVia(1, "/api/x", { ip: "203.0.113.71" })).status, 200, "another key is untouched");
    // Once it has ended (the isolate's cached block ends with it, give or
    // take the reply's latency), the key is counted afresh.
    await sleep(Math.max(0, until + 1_000 - Date.now()));
    for (const i of [0, 1]) assert.equal((await tg.fetchVia(i, "/api/x", { ip })).status, 200, `edge ${i} after the penalty`);
    await tg.settled();
    const blocks = tg.logEvents().filter((e) => e.tollgate === "block");
    assert.ok(blocks.length >= 2, "a block line in each isolate");
    assert.ok(blocks.every((e) => e.reason === "penalty" && e.rule === "api"), JSON.stringify(blocks));
    assert.equal(blocks[0].retry_after_ms, PENALTY_MS);
  });
});

test("the admin status shows a penalty and POST /reset lifts it (count and penalty together)", () => {
  const lift = config(rule("api", "/api/*", { limits: limit(2, "1m"), penalty: "1h" }));
  return withTollgate({ config: lift, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN }, edges: 1 }, async (tg) => {
    const ip = "203.0.113.80";
    const before = Date.now();
    assert.deepEqual(await statuses(tg, 3, "/api/x", { ip }), [200, 200, 429]);
    const refused = await tg.fetch("/api/x", { ip });
    const retry = Number(refused.headers.get("retry-after"));
    assert.ok(retry > 3_500 && retry <= 3_600, `Retry-After ${retry}: the penalty's time left`);
    await refused.arrayBuffer();
    const status = await adminCall(tg, `/.tollgate/status?rule=api&ip=${ip}`);
    assert.equal(status.status, 200, JSON.stringify(status.body));
    const until = status.body.penalty_until_ms;
    assert.ok(until >= before + 3_600_000 - 50 && until <= Date.now() + 3_600_000, JSON.stringify(status.body));
    const reset = await adminCall(tg, `/.tollgate/reset?rule=api&ip=${ip}`, "POST");
    assert.equal(reset.status, 200, JSON.stringify(reset.body));
    assert.equal(reset.body.penalty_until_ms, null);
    // The reset is the admin Worker's: at once at the object, so a zone
    // isolate that did not cache the penalty serves the key (the one that
    // did trusts its entry at most 10 s: count::blocked::RECHECK_MS).
    assert.equal((await tg.fetchVia(1, "/api/x", { ip })).status, 200, "lifted at once at the object");
    const after = await adminCall(tg, `/.tollgate/status?rule=api&ip=${ip}`);
    assert.equal(after.body.penalty_until_ms, null);
    assert.equal(after.body.windows[0].used, 1, "counted afresh");
  });
});

test("a shadow rule logs the penalty it would apply and never blocks", () => {
  const origin = mockOrigin();
  const shadow = config(rule("api", "/api/*", { limits: limit(2, "2s"), penalty: "1h", action: "log" }));
  return withTollgate({ origin, config: shadow }, async (tg) => {
    const ip = "203.0.113.90";
    assert.deepEqual(await statuses(tg, 4, "/api/x", { ip }), [200, 200, 200, 200]);
    await sleep(2_300);
    assert.equal((await tg.fetch("/api/x", { ip })).status, 200, "after the window, still never blocked");
    assert.equal(origin.received.length, 5);
    const status = await objectStatus(tg, ip, [[2, 2_000]], 3_600_000);
    assert.ok(status.penalty_until_ms > Date.now() + 3_500_000, "the object keeps the penalty it would apply");
    await tg.settled();
    const lines = tg.logEvents().filter((e) => e.tollgate === "shadow_block");
    assert.ok(lines.length >= 1);
    assert.deepEqual([lines[0].decision, lines[0].reason, lines[0].retry_after_ms], ["would_block", "penalty", 3_600_000]);
    assert.ok(!tg.logEvents().some((e) => e.tollgate === "block"));
  });
});

test("a leased rule's refusal starts the penalty too: refused after the window emptied", () => {
  // 40 per 2 s leases (a limit of 32 or more); the object refuses a lease or
  // hit once not even one unit fits, and that refusal starts the penalty.
  const leased = config(rule("api", "/api/*", { limits: limit(40, "2s"), penalty: "1h" }));
  // The requests go one after another until the first refusal: on a loaded
  // machine they may spread past the 2 s window, which then lets more than
  // 40 through, as a sliding window must. So the bound is checked on the
  // limiter's decisions: each served request was decided between its send
  // and its arrival at the origin, and no 40 + 1 of them fit in one window.
  const sent = new Map();
  const arrived = new Map();
  const origin = mockOrigin((request) => {
    arrived.set(new URL(request.url).searchParams.get("n"), Date.now());
    return undefined;
  });
  return withTollgate({ config: leased, faults: true, origin }, async (tg) => {
    const ip = "203.0.113.100";
    const codes = [];
    for (let n = 0; n < 400 && codes.at(-1) !== 429; n++) {
      sent.set(String(n), Date.now());
      const res = await tg.fetch(`/api/x?n=${n}`, { ip });
      await res.arrayBuffer();
      codes.push(res.status);
    }
    assert.equal(codes.at(-1), 429, `refused once no unit fits (${codes.length} requests)`);
    assert.ok((await tg.objectCalls()) < codes.length, "leased: fewer object calls than requests");
    codes.push(...(await statuses(tg, 20, "/api/x", { ip })));
    assert.ok(codes.slice(-21).every((c) => c === 429), "after the refusal, every request is refused (the penalty)");
    const served = [...arrived].map(([n, at]) => [sent.get(n), at]);
    assert.equal(served.length, codes.filter((c) => c === 200).length);
    assert.ok(decidedInOneWindow(served, 2_000) <= 40, "never past the limit in a window of the limiter's decisions");
    const status = await objectStatus(tg, ip, [[40, 2_000]], 3_600_000);
    assert.ok(status.penalty_until_ms > Date.now() + 3_500_000, JSON.stringify(status));
    await sleep(2_500);
    for (let i = 0; i < 3; i++) {
      const res = await tg.fetch("/api/x", { ip });
      assert.equal(res.status, 429, "the window emptied, the penalty holds");
      assert.ok(Number(res.headers.get("retry-after")) > 3_500);
      await res.arrayBuffer();
    }
    await tg.settled();
    assert.ok(tg.logEvents().some((e) => e.tollgate === "block" && e.reason === "penalty"));
  });
});

/** The most of `intervals` ([sent, arrived]: a decision between the two)
 * that lie wholly inside one window of `ms`: decisions that surely fell in
 * one window of the limit. */
function decidedInOneWindow(intervals, ms) {
  let most = 0;
  for (const [start] of intervals) {
    most = Math.max(most, intervals.filter(([s, a]) => s >= start && a < start + ms).length);
  }
  return most;
}

// An app Worker bound to tollgate: check over RPC, serve 401, settle.
const APP = `
export default { async fetch(request, env) {
  const decision = await env.TOLLGATE.check(request.clone());
  if (decision.response) return decision.response;
  if (decision.ticket) await env.TOLLGATE.settle(decision.ticket, 401, {});
  return new Response("wrong password", { status: 401 });
} };`;

test("over RPC check/settle: a failures-only rule's penalty outlives its window", () => {
  const login = config(rule("login", "/login", { count_statuses: [401], limits: limit(2, "2s"), penalty: "1h" }));
  const app = { name: "app", modules: true, script: APP, compatibilityDate: COMPATIBILITY_DATE, serviceBindings: { TOLLGATE: "tollgate" } };
  return withTollgate({ config: login, entry: "app", workers: [app] }, async (tg) => {
    const ip = "203.0.113.110";
    assert.deepEqual(await statuses(tg, 2, "/login", { ip }), [401, 401], "two failures, committed by settle");
    const refused = await tg.fetch("/login", { ip });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "3600", "the reserve refused: the whole penalty");
    await refused.arrayBuffer();
    await sleep(2_500);
    const status = await objectStatus(tg, ip, [[2, 2_000]], 3_600_000, "login");
    assert.equal(status.windows[0].used, 0, "both failures have left the window");
    assert.ok(status.penalty_until_ms > Date.now() + 3_500_000);
    const still = await tg.fetch("/login", { ip });
    assert.equal(still.status, 429);
    assert.ok(Number(still.headers.get("retry-after")) > 3_500);
    await still.arrayBuffer();
    assert.equal((await tg.fetch("/login", { ip: "203.0.113.111" })).status, 401, "another client is served");
  });
});
