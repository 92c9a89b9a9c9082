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

// A penalty outliving the window in every isolate, with Retry-After from
// the penalty, and a leased rule's refusal starting one are tested
// natively on the Pair (src/testing/pair/tests.rs, issue 36), on simulated
// time: they were this file's two slowest tests, and the leased one failed
// on a loaded machine only by its own clock.

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
