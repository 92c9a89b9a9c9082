// The `RateLimit` fields a client reads (issue 35): every field states what
// decided, in the syntax of draft-ietf-httpapi-ratelimit-headers-11 (RFC 9651
// Lists): a runtime override in every 429 (cached ones too), no two policies
// of one name in a response, a usage rule's unit, a concurrency refusal's
// slots (and an honest Retry-After), no `w` for a sub-second window, and a
// usage header sent twice read rather than charged `reserve`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, sleep, eventsSince } from "./harness.mjs";
import { config, rule, limit, limits } from "./builders.mjs";

const TOKEN = "a-long-admin-token-for-the-fields-test-0123456789";

/**
 * Parses `value` as an RFC 9651 List whose members are Strings with
 * parameters (§4.2.1, §4.2.3.2, §4.2.5; what both RateLimit fields are):
 * [{ name, params: { key: number | string | true } }]. Throws on anything
 * else, so every field asserted on is also proven well-formed.
 */
function parseList(value) {
  const members = [];
  let rest = value;
  const fail = (why) => {
    throw new Error(`not an RFC 9651 list (${why}): ${JSON.stringify(value)} at ${JSON.stringify(rest)}`);
  };
  const string = () => {
    if (rest[0] !== '"') fail("a String");
    let out = "";
    let i = 1;
    for (; i < rest.length && rest[i] !== '"'; i++) {
      if (rest[i] === "\\") i++;
      if (i >= rest.length || rest.charCodeAt(i) < 0x20 || rest.charCodeAt(i) > 0x7e) fail("a String's character");
      out += rest[i];
    }
    if (i >= rest.length) fail("an unterminated String");
    rest = rest.slice(i + 1);
    return out;
  };
  while (true) {
    const name = string();
    const params = {};
    for (let m; (m = /^;([a-z*][a-z0-9_.*-]*)/.exec(rest)); ) {
      rest = rest.slice(m[0].length);
      if (m[1] in params) fail("a repeated parameter");
      if (rest[0] !== "=") params[m[1]] = true;
      else if (rest[1] === '"') {
        rest = rest.slice(1);
        params[m[1]] = string();
      } else {
        const int = /^=(-?[0-9]{1,15})(?![0-9.])/.exec(rest) ?? fail("an Integer");
        rest = rest.slice(int[0].length);
        params[m[1]] = Number(int[1]);
      }
    }
    members.push({ name, params });
    if (rest === "") return members;
    const sep = /^[ \t]*,[ \t]*/.exec(rest) ?? fail("a comma");
    rest = rest.slice(sep[0].length);
    if (rest === "") fail("a trailing comma");
  }
}

/** The two fields of `res`, parsed (`null` when absent). */
function fields(res) {
  const read = (name) => (res.headers.get(name) === null ? null : parseList(res.headers.get(name)));
  return { policy: read("ratelimit-policy"), limit: read("ratelimit") };
}

const admin = (tg, path, method) => tg.fetch(`/.tollgate${path}`, { method, ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });

test("after PUT override of 2 per 30 s on a 10 per 1 m rule, every 429 states the override, the cached ones too", () =>
  withTollgate({ config: config(rule("rto", "/rto/*", { limits: limit(10, "1m") })), vars: { TOLLGATE_ADMIN_TOKEN: TOKEN }, faults: true }, async (tg) => {
    const ip = "198.51.100.7";
    const set = await admin(tg, `/override?rule=rto&ip=${ip}&limit=2/30s&for=1h`, "PUT");
    assert.equal(set.status, 200, await set.text());
    const answers = [];
    for (let i = 0; i < 8; i++) {
      const res = await tg.fetch("/rto/x", { ip });
      await res.arrayBuffer();
      answers.push(res);
    }
    assert.deepEqual(answers.map((r) => r.status), [200, 200, 429, 429, 429, 429, 429, 429], "the override's 2 decide");
    const calls = await tg.objectCalls();
    const later = await tg.fetch("/rto/x", { ip });
    assert.equal(later.status, 429);
    assert.equal(await tg.objectCalls(), calls, "this one was answered from the isolate's blocked-until cache");
    for (const res of [...answers.slice(2), later]) {
      const { policy, limit: rate } = fields(res);
      assert.deepEqual(policy, [{ name: "rto", params: { q: 2, w: 30 } }], "the override, not the rule's 10 per 60 s");
      assert.equal(rate[0].name, "rto");
      assert.equal(rate[0].params.r, 0);
      assert.equal(rate[0].params.t, Number(res.headers.get("retry-after")));
      assert.ok(rate[0].params.t <= 30, `t=${rate[0].params.t} within the override's 30 s`);
    }
  }));

test("no response carries two policies of one name: 60s and 1m in one rule, a rule named like another's window; a sub-second window has no w", () => {
  const both = { ratelimit_headers: true };
  const cfg = config(
    rule("dup", "/p", { limits: limits([10, "60s"], [20, "1m"]), ...both }),
    rule("api", "/p", { limits: limits([30, "60s"], [40, "1h"]), ...both }),
    rule("api-60s", "/p", { limits: limit(50, "60s"), ...both }),
    rule("burst", "/p", { limits: limit(5, "500ms"), ...both }),
    rule("tiers", "/p", { limits: limits([6, "500ms"], [7, "1500ms"], [8, "2s"]), ...both }),
  );
  return withTollgate({ config: cfg }, async (tg) => {
    const res = await tg.fetch("/p");
    await res.arrayBuffer();
    assert.equal(res.status, 200);
    const { policy, limit: rate } = fields(res);
    const names = policy.map((p) => p.name);
    assert.equal(new Set(names).size, names.length, `every name once: ${names}`);
    assert.equal(new Set(rate.map((r) => r.name)).size, rate.length, "RateLimit too");
    assert.ok(rate.every((r) => names.includes(r.name)), "every RateLimit item names a policy of the response");
    const byName = Object.fromEntries(policy.map((p) => [p.name, p.params]));
    assert.deepEqual(byName["dup/60s"], { q: 10, w: 60 });
    assert.deepEqual(byName["dup/60s/2"], { q: 20, w: 60 });
    assert.deepEqual(byName["api/60s"], { q: 30, w: 60 });
    assert.deepEqual(byName["api-60s"], { q: 50, w: 60 });
    assert.deepEqual(byName.burst, { q: 5 }, "500 ms: no w (the draft has no sub-second w; w=1 would claim half the rate)");
    assert.deepEqual(byName["tiers/500ms"], { q: 6 });
    assert.deepEqual(byName["tiers/1500ms"], { q: 7 }, "1.5 s is no whole number of seconds either");
    assert.deepEqual(byName["tiers/2s"], { q: 8, w: 2 });
  });
});

/** An origin on /slow that answers once `release()` is called, and counts what it has in flight. */
function gatedOrigin() {
  const state = { inFlight: 0, most: 0 };
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  const origin = mockOrigin(async (request, record) => {
    if (record.path !== "/slow") return undefined;
    state.inFlight++;
    state.most = Math.max(state.most, state.inFlight);
    await gate;
    state.inFlight--;
    return new Response("done");
  });
  return { origin, state, release: () => open() };
}

test("a concurrency refusal states the slots: its own policy (qu=\"concurrent-requests\"), r=0 and no t, an honest Retry-After, reason concurrency", () => {
  const { origin, state, release } = gatedOrigin();
  const cfg = config(rule("conc", "/slow", { key: ["header:x-tenant"], limits: limit(100, "1m"), concurrency: 1, ratelimit_headers: true }));
  return withTollgate({ origin, config: cfg }, async (tg) => {
    const headers = { "x-tenant": "acme" };
    const first = tg.fetch("/slow", { headers });
    first.catch(() => {}); // awaited below, unless an assertion fails first
    try {
      for (let i = 0; i < 500 && state.inFlight === 0; i++) await sleep(10);
      assert.equal(state.inFlight, 1, "the first request holds the slot at the origin");
      const before = tg.logEvents().length;
      const refused = await tg.fetch("/slow", { headers });
      await refused.arrayBuffer();
      assert.equal(refused.status, 429);
      const { policy, limit: rate } = fields(refused);
      assert.deepEqual(policy, [
        { name: "conc", params: { q: 100, w: 60 } },
        { name: "conc/concurrency", params: { q: 1, qu: "concurrent-requests" } },
      ]);
      assert.deepEqual(rate, [{ name: "conc/concurrency", params: { r: 0 } }], "no slot free; no t: when one is back is not known");
      // Nothing seen of this rule's holds yet (the first is still in
      // flight): the shortest wait, not upload_timeout's 10 s (issue 35: a
      // slot back after 1.5 s was answered `Retry-After: 10`).
      assert.equal(refused.headers.get("retry-after"), "1");
      const json = await tg.fetch("/slow", { headers: { ...headers, accept: "application/json" } });
      assert.equal(json.status, 429);
      assert.equal(JSON.parse(await json.text()).retry_after, 1, "the body says the same");
      const [event] = (await eventsSince(tg, before, 1)).filter((e) => e.tollgate === "block");
      assert.equal(event.reason, "concurrency", "not a ban");
    } finally {
      release();
    }
    const served = await first;
    assert.equal(served.status, 200);
    await served.text();
    let after;
    for (let i = 0; i < 50; i++) {
      after = await tg.fetch("/slow", { headers });
      await after.arrayBuffer();
      if (after.status === 200) break;
      await sleep(100);
    }
    assert.equal(after.status, 200, "the slot came back once the first answer was sent");
    assert.equal(state.most, 1);
    const { policy: again, limit: allowed } = fields(after);
    assert.equal(again.length, 2, "the same policies on an allowed answer");
    assert.deepEqual(again[1], { name: "conc/concurrency", params: { q: 1, qu: "concurrent-requests" } });
    assert.equal(allowed[0].name, "conc", "allowed: the window's service limit");
  });
});

test("a concurrency rule without limits states only its slots: no stand-in window (q=4294967295) in either field", () => {
  const { origin, release } = gatedOrigin();
  release();
  const cfg = config({ name: "slots", path: "/slow", key: ["header:x-tenant"], concurrency: 2, counting: { mode: "response" }, ratelimit_headers: true });
  return withTollgate({ origin, config: cfg }, async (tg) => {
    const served = await tg.fetch("/slow", { headers: { "x-tenant": "acme" } });
    await served.arrayBuffer();
    assert.equal(served.status, 200);
    const { policy, limit: rate } = fields(served);
    assert.deepEqual(policy, [{ name: "slots/concurrency", params: { q: 2, qu: "concurrent-requests" } }]);
    assert.equal(rate, null, "no RateLimit field: free slots are not known at the edge, and the window is a stand-in");
  });
});

test("a usage rule's policy is in the origin's units; a usage header sent twice is read, not charged reserve", () => {
  let values = ["50", "50"];
  const origin = mockOrigin(async (request, record) => {
    if (!record.path.startsWith("/ai/")) return undefined;
    const headers = new Headers({ "content-type": "application/json" });
    for (const v of values) headers.append("x-tokens", v);
    return new Response("{}", { headers });
  });
  const cfg = config(
    rule("ai", "/ai/*", { key: ["header:x-tenant"], limits: limit(10_000, "1d"), cost: { header: "x-tokens", reserve: 3_000, max: 3_000 }, ratelimit_headers: true }),
  );
  return withTollgate({ origin, config: cfg }, async (tg) => {
    const call = async () => {
      const res = await tg.fetch("/ai/complete", { headers: { "x-tenant": "acme" } });
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      return fields(res);
    };
    const first = await call();
    assert.deepEqual(first.policy, [{ name: "ai", params: { q: 10_000, qu: "x-tokens", w: 86_400 } }], "tokens, not the draft's default of requests");
    assert.equal(first.limit[0].params.r, 10_000 - 3_000, "its own reservation held");
    await tg.settled();
    // `x-tokens: 50, 50` committed 50 (not reserve's 3,000): 10,000 − 50 − 3,000 held.
    values = ["50", "70"];
    assert.equal((await call()).limit[0].params.r, 10_000 - 50 - 3_000);
    await tg.settled();
    // `50, 70`: none is known to be the true one; the largest is charged.
    values = ["5", "ten"];
    assert.equal((await call()).limit[0].params.r, 10_000 - 50 - 70 - 3_000);
    await tg.settled();
    // A member that is no number: malformed, charged reserve (3,000).
    assert.equal((await call()).limit[0].params.r, 10_000 - 50 - 70 - 3_000 - 3_000);
  });
});
