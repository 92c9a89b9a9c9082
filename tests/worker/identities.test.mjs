// Charge every identity an origin could read (issue 15): each test is a row
// of the table, and fails on the code that let it through.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses, mockOrigin, exampleConfig } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const json = { "content-type": "application/json" };

/** An origin that refuses every login (401) and counts what reached it. */
function loginOrigin() {
  return mockOrigin(async (_request, record) =>
    record.path === "/login" ? new Response("invalid email or password", { status: 401 }) : undefined,
  );
}

const loginConfig = () => ({ rules: exampleConfig("login-brute-force").rules.filter((r) => r.name === "login-account") });

async function failedLogins(tg, bodies) {
  for (const [i, body] of bodies.entries()) {
    const res = await tg.fetch("/login", { ip: `198.51.100.${(i % 250) + 1}`, method: "POST", headers: json, body });
    await res.arrayBuffer();
  }
  return tg.origin.received.filter((r) => r.path === "/login").length;
}

test("row 1: a tenant id with leading zeros, a sign or spaces is the same school (tenant example, enforce)", () =>
  withTollgate({ config: exampleConfig("tenant-daily-quota", "enforce") }, async (tg) => {
    // School 7: school 42 has its own 1,000 (the example's override).
    const served = await statuses(tg, 300, "/api/schools/7/ai/run", { method: "POST" });
    assert.ok(served.every((s) => s === 200));
    for (const spelling of ["07", "0007", "+7", "7%20", "%207", "7"]) {
      assert.equal((await statuses(tg, 1, `/api/schools/${spelling}/ai/run`, { method: "POST" }))[0], 429, spelling);
    }
    assert.equal((await statuses(tg, 1, "/api/schools/43/ai/run", { method: "POST" }))[0], 200, "another school");
  }));

test("row 2: a JSON member given twice charges both values", () =>
  withTollgate({ config: loginConfig(), origin: loginOrigin() }, async (tg) => {
    const bodies = Array.from({ length: 15 }, (_, n) => `{"email":"victim@x.io","password":"guess-${n}","email":"decoy-${n}@x.io"}`);
    assert.equal(await failedLogins(tg, bodies), 10, "the first-wins origin saw at most 10 failures for the victim");
  }));

test("row 3: a case-twin member (Email beside email) charges both", () =>
  withTollgate({ config: loginConfig(), origin: loginOrigin() }, async (tg) => {
    const bodies = Array.from({ length: 60 }, (_, n) => `{"email":"decoy-${n}@x.io","Email":"victim@x.io","password":"g${n}"}`);
    assert.equal(await failedLogins(tg, bodies), 10);
  }));

test("row 4: accented, soft-hyphen and fullwidth spellings of one email are one account", () =>
  withTollgate({ config: loginConfig(), origin: loginOrigin() }, async (tg) => {
    const spellings = ["victim@x.io", "víctim@x.io", "vìctim@x.io", "vic\u00ADtim@x.io", "\uFF56ictim@x.io", "VICTIM@x.io", "vi\u200Bctim@x.io", "vi\u0301ctim@x.io", " victim@x.io "];
    const bodies = [];
    for (let round = 0; round < 10; round++) for (const email of spellings) bodies.push(JSON.stringify({ email, password: `g${round}` }));
    assert.equal(await failedLogins(tg, bodies), 10, "90 attempts in 9 spellings, 10 reach the origin");
  }));

test("row 4: an email in a cookie or the query under a decoy form body is charged (PHP's $_REQUEST, Symfony's get())", () =>
  withTollgate({ config: loginConfig(), origin: loginOrigin() }, async (tg) => {
    const form = { "content-type": "application/x-www-form-urlencoded" };
    let reached = 0;
    for (let n = 0; n < 20; n++) {
      const before = tg.origin.received.length;
      const where = n % 2 ? { headers: { ...form, cookie: "email=victim%40x.io" } } : { headers: form, query: "email=victim%40x.io" };
      const path = where.query ? `/login?${where.query}` : "/login";
      const res = await tg.fetch(path, { ip: `198.51.100.${n + 1}`, method: "POST", headers: where.headers, body: `email=decoy-${n}%40x.io&password=g` });
      await res.arrayBuffer();
      reached += tg.origin.received.length - before;
    }
    assert.equal(reached, 10, "the victim's 10 failures, then 429 whatever the decoy");
  }));

test("row 7: a cookie PHP reads under another spelling of its name is charged too", () =>
  withTollgate(
    { config: config(rule("session", "/account", { key: ["cookie:laravel_session"], limits: limit(3, "1m") })) },
    async (tg) => {
      const got = [];
      for (let i = 0; i < 10; i++) {
        const res = await tg.fetch("/account", { headers: { cookie: `laravel.session=MINE; laravel_session=random-${i}` } });
        got.push(res.status);
      }
      assert.deepEqual(got, [200, 200, 200, ...Array(7).fill(429)]);
    },
  ));

test("row 8: a header sent twice charges each value, so a blocked key cannot hide behind a second one", () =>
  withTollgate(
    {
      config: config(rule("api-key", "/v1/*", { key: ["header:x-api-key"], fallback_key: ["ip"], limits: limit(3, "1m") })),
    },
    async (tg) => {
      assert.deepEqual(await statuses(tg, 4, "/v1/things", { headers: { "x-api-key": "REAL" } }), [200, 200, 200, 429]);
      for (let i = 0; i < 3; i++) {
        // Sent on two lines, the header reaches the Worker joined by ", ".
        const res = await tg.fetch("/v1/things", { headers: { "x-api-key": `REAL, junk-${i}` } });
        assert.equal(res.status, 429, "REAL is still charged, and over its limit");
      }
      // PHP reads `X_Api_Key` as `X-Api-Key` (HTTP_X_API_KEY): charged too.
      const underscore = await tg.fetch("/v1/things", { headers: { x_api_key: "REAL", "x-api-key": "junk-u" } });
      assert.equal(underscore.status, 429);
      const many = await tg.fetch("/v1/things", { headers: { "x-api-key": "a, b, c, d" } });
      assert.equal(many.status, 400, "past 4 identities the request is refused");
    },
  ));
