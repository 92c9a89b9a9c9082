// The example configs under examples/, each run in workerd with a scenario
// proving its headline behaviour.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, exampleConfig, statuses } from "./harness.mjs";
import { json } from "./builders.mjs";


test("example 1: the 11th heavy call is blocked while general calls pass", () =>
  withTollgate({ config: exampleConfig("heavy-endpoint") }, async (tg) => {
    const ip = "203.0.113.10";
    const heavy = await statuses(tg, 11, "/api/example?mode=heavy", { ip });
    assert.deepEqual(heavy, [...Array(10).fill(200), 429]);
    assert.deepEqual(await statuses(tg, 5, "/api/other", { ip }), Array(5).fill(200), "general calls pass");
    const general = await tg.fetch("/api/other", { ip });
    assert.match(general.headers.get("ratelimit"), /^"api-general";r=\d+;t=(59|60)$/);
    // The heavy class binds on its short window, then its long one.
    assert.deepEqual(await statuses(tg, 4, "/api/reports/daily", { ip: "203.0.113.11" }), [200, 200, 200, 429]);
    // Signed-in users are counted per user, whatever their IP.
    const user = { "cf-access-authenticated-user-email": "ann@example.com" };
    assert.match((await tg.fetch("/api/other", { ip: "198.51.100.1", headers: user })).headers.get("ratelimit"), /^"api-general";r=119;t=(59|60)$/);
    assert.match((await tg.fetch("/api/other", { ip: "198.51.100.2", headers: user })).headers.get("ratelimit"), /^"api-general";r=118;t=(59|60)$/, "per user, not per IP");
  }));

test("example 2: failures for an account are blocked from a fresh IP, other accounts unaffected, success clears", () => {
  const origin = mockOrigin((request, record) => {
    const { email, password } = JSON.parse(record.body.toString() || "{}");
    const ok = password === `${email}-pw`;
    // As the example asks of the app: a success names the email it read.
    const headers = ok ? { "x-authenticated-user": email } : {};
    return new Response(JSON.stringify(ok ? { ok: true } : { error: "invalid email or password" }), { status: ok ? 200 : 401, headers });
  });
  return withTollgate({ origin, config: exampleConfig("login-brute-force") }, async (tg) => {
    const login = async (email, password, ip) =>
      (await tg.fetch("/login", json({ email, password }, { ip }))).status;
    for (let i = 0; i < 10; i++) assert.equal(await login("victim@example.com", `guess${i}`, `198.51.100.${i + 1}`), 401);
    assert.equal(await login("victim@example.com", "guess10", "192.0.2.200"), 429, "11th failure, from a fresh IP");
    assert.equal(await login("victim@example.com", "victim@example.com-pw", "192.0.2.201"), 429, "even the right password waits");
    assert.equal(await login("other@example.com", "wrong", "192.0.2.200"), 401, "another account is unaffected");
    assert.equal(await login("other@example.com", "other@example.com-pw", "192.0.2.200"), 200);
    // A success clears only the account count.
    for (let i = 0; i < 9; i++) assert.equal(await login("amy@example.com", "nope", "192.0.2.50"), 401);
    assert.equal(await login("amy@example.com", "amy@example.com-pw", "192.0.2.50"), 200);
    for (let i = 0; i < 10; i++) assert.equal(await login("amy@example.com", "nope", "192.0.2.51"), 401, `after the success, failure ${i + 1}`);
    assert.equal(await login("amy@example.com", "nope", "192.0.2.52"), 429);
    // The 429 for a real and for a made-up account is the same answer.
    for (let i = 0; i < 10; i++) await login("ghost@example.com", "nope", "192.0.2.60");
    const real = await tg.fetch("/login", json('{"email":"amy@example.com"}', { ip: "192.0.2.61" }));
    const ghost = await tg.fetch("/login", json('{"email":"ghost@example.com"}', { ip: "192.0.2.61" }));
    assert.equal(real.status, ghost.status);
    const shape = async (r) => Object.keys(await r.json()).sort().join(",");
    assert.equal(await shape(real), await shape(ghost));
  });
});

test("example 3 (shadow, the default environment): the 301st call passes and is logged", () =>
  withTollgate({ config: exampleConfig("tenant-daily-quota") }, async (tg) => {
    const calls = await statuses(tg, 301, "/api/schools/17/ai/complete");
    assert.deepEqual(calls, Array(301).fill(200));
    await tg.settled();
    const shadow = tg.logEvents().filter((e) => e.tollgate === "shadow_block");
    assert.equal(shadow.length, 1);
    assert.equal(shadow[0].rule, "ai-quota");
    assert.equal(shadow[0].decision, "would_block");
  }));

test("example 3 (enforce environment): the 301st call is blocked, and a counter failure answers 503", () =>
  withTollgate({ config: exampleConfig("tenant-daily-quota", "enforce"), faults: true }, async (tg) => {
    const calls = await statuses(tg, 301, "/api/schools/17/ai/complete", { ip: null });
    assert.deepEqual(calls, [...Array(300).fill(200), 429]);
    assert.equal((await tg.fetch("/api/schools/18/ai/complete")).status, 200, "another school has its own quota");
    await tg.setFault("throw");
    const res = await tg.fetch("/api/schools/19/ai/complete");
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("retry-after"), "1");
    assert.equal(tg.origin.received.filter((r) => r.path.includes("/19/")).length, 0, "not spent unmetered");
  }));

test("example 3 (enforce environment): unauthenticated requests cannot spend a school's quota; the 301st served call is blocked", () => {
  // The app: 401 without a signed-in user, 204 to CORS preflights, 200 otherwise.
  const origin = mockOrigin((request, record) => {
    if (record.method === "OPTIONS") return new Response(null, { status: 204 });
    if (!record.headers["cf-access-authenticated-user-email"]) return new Response("sign in", { status: 401 });
    return undefined;
  });
  return withTollgate({ origin, config: exampleConfig("tenant-daily-quota", "enforce") }, async (tg) => {
    // School 43: school 42 has an override of 1,000 (operator.test.mjs).
    const path = "/api/schools/43/ai/complete";
    const stranger = await statuses(tg, 300, path, { ip: "198.51.100.66" });
    assert.deepEqual(stranger, Array(300).fill(401), "every unauthenticated request reached the origin and was refused");
    assert.deepEqual(await statuses(tg, 20, path, { method: "OPTIONS", ip: "198.51.100.66" }), Array(20).fill(204));
    const teacher = { ip: "203.0.113.42", headers: { "cf-access-authenticated-user-email": "teacher@school43.example" } };
    const served = await statuses(tg, 301, path, teacher);
    assert.deepEqual(served, [...Array(300).fill(200), 429], "the quota was whole: 300 served, the 301st blocked");
  });
});

test("ai-budget: 100 concurrent calls of 1,200-3,000 tokens never exceed the key's 10,000 a day; a stranger's 401s spend nothing", () => {
  // The app: 401 for a key it does not know; else 200, reporting the tokens
  // used (a fixed pseudo-random sequence), after a while.
  let n = 0;
  let reported = 0;
  const origin = mockOrigin(async (request, record) => {
    if (record.headers["x-api-key"] !== "key-1") return new Response("unknown key", { status: 401 });
    const tokens = 1_200 + ((n++ * 617) % 1_801);
    await new Promise((r) => setTimeout(r, 20 + (n % 5) * 20));
    reported += tokens;
    return new Response("{}", { status: 200, headers: { "x-usage-tokens": String(tokens) } });
  });
  return withTollgate({ origin, config: exampleConfig("ai-budget") }, async (tg) => {
    const call = (key) => tg.fetch("/v1/chat/completions", { method: "POST", headers: { "x-api-key": key }, body: "{}" });
    const stranger = [];
    for (let i = 0; i < 20; i++) {
      const res = await call("key-1-guess");
      await res.arrayBuffer();
      stranger.push(res.status);
    }
    assert.deepEqual(stranger, Array(20).fill(401), "refused by the origin, never charged (60,000 tokens had they counted)");
    const answers = await Promise.all(
      Array.from({ length: 100 }, async () => {
        const res = await call("key-1");
        await res.arrayBuffer();
        return { status: res.status, header: res.headers.get("x-usage-tokens") };
      }),
    );
    const served = answers.filter((a) => a.status === 200).length;
    assert.ok(served >= 3, `${served} served`);
    assert.ok(answers.every((a) => a.header === null), "the usage header stays with tollgate");
    assert.ok(reported <= 10_000, `the origin reported ${reported} tokens`);
    assert.equal((await call("key-2")).status, 401, "another key is not limited by key-1's spending (the origin refuses it)");
  });
});
