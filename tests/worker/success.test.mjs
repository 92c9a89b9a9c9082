// Issue 16, "forged successes": a success settles a failures-only rule
// only when it is one (success_statuses), for a request the rule matched by
// its own method, and (with success_identity_header) for the account the
// origin says it authenticated.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin } from "./harness.mjs";
import { config, failedLogins } from "./builders.mjs";

const VICTIM = "victim@example.com";
const json = { "content-type": "application/json" };

/**
 * An origin as real frameworks behave: OPTIONS answered 200 (CORS
 * middleware), method-override middleware serving the login page for a
 * POST that asks to be a GET, plain HTTP redirected to HTTPS, and 401 for a
 * wrong password. `failures` counts the failed logins it saw per account.
 */
function loginOrigin() {
  const failures = new Map();
  const origin = mockOrigin((request, record) => {
    const headers = record.headers;
    if (headers["x-forwarded-proto"] === "http") return new Response(null, { status: 301, headers: { location: "https://example.com/login" } });
    if (record.method === "OPTIONS") return new Response(null, { status: 200, headers: { allow: "GET, POST, OPTIONS" } });
    if (headers["x-http-method-override"] === "GET") return new Response("<form>login</form>", { status: 200 });
    const { email, login, password } = JSON.parse(record.body.toString() || "{}");
    // Authenticates `login` when given, else `email`: a field tollgate's key does not read.
    const account = login ?? email;
    if (password === `${account}-pw`) return new Response("welcome", { status: 200, headers: { "x-authenticated-user": account } });
    failures.set(account, (failures.get(account) ?? 0) + 1);
    return new Response("invalid email or password", { status: 401 });
  });
  return { origin, failures };
}

test("the forged-success loop: three forged successes (OPTIONS with an override, a POST asking to be a GET, plain HTTP redirected) after every 9 guesses, 100 guesses in all: the origin sees 10", () => {
  const { origin, failures } = loginOrigin();
  return withTollgate({ origin, config: config(failedLogins({ clear_on_success: true })) }, async (tg) => {
    const body = (password) => JSON.stringify({ email: VICTIM, password });
    const forged = [
      { method: "OPTIONS", headers: { ...json, "x-http-method-override": "POST" }, body: body("x") },
      { method: "POST", headers: { ...json, "x-http-method-override": "GET" }, body: body("x") },
      { method: "POST", headers: { ...json, "x-forwarded-proto": "http" }, body: body("x") },
    ];
    let guesses = 0;
    const statuses = [];
    const forgedStatuses = [];
    while (guesses < 100) {
      for (let i = 0; i < 9 && guesses < 100; i++, guesses++) {
        const res = await tg.fetch("/login", { method: "POST", ip: `198.51.100.${guesses % 250}`, headers: json, body: body(`guess${guesses}`) });
        statuses.push(res.status);
      }
      for (const f of forged) forgedStatuses.push((await tg.fetch("/login", { ...f, ip: "203.0.113.66" })).status);
    }
    assert.deepEqual(forgedStatuses.slice(0, 3), [200, 200, 301], "the first forgeries reached the origin and got its successes");
    assert.equal(failures.get(VICTIM), 10, "the origin saw exactly 10 failed logins for the victim");
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(401));
    assert.ok(statuses.slice(10).every((s) => s === 429), "every later guess was blocked");
    assert.ok(forgedStatuses.slice(3).every((s) => s === 429), "later forgeries are blocked with the account");
  });
});

test("success_identity_header: a success clears only the account the origin authenticated", () => {
  const { origin, failures } = loginOrigin();
  const identified = config(failedLogins({ clear_on_success: true, success_identity_header: "x-authenticated-user" }));
  return withTollgate({ origin, config: identified }, async (tg) => {
    const login = async (fields, ip = "192.0.2.10") =>
      (await tg.fetch("/login", { method: "POST", ip, headers: json, body: JSON.stringify(fields) })).status;
    for (let i = 0; i < 9; i++) assert.equal(await login({ email: VICTIM, password: `guess${i}` }), 401);
    // The attacker's own account, logged in through a field tollgate does not key on.
    assert.equal(await login({ email: VICTIM, login: "mallory@example.com", password: "mallory@example.com-pw" }), 200);
    assert.equal(await login({ email: VICTIM, password: "guess9" }), 401, "the 10th guess");
    assert.equal(await login({ email: VICTIM, password: "guess10" }), 429, "not cleared by mallory's success");
    assert.equal(failures.get(VICTIM), 10);
    await tg.settled();
    assert.deepEqual(
      tg.logEvents().filter((e) => e.tollgate === "counter_error"),
      [],
      "every reservation was settled",
    );
  });
});

test("the owner's success clears with an identity header, and decrement forgives one failure only", () => {
  const { origin } = loginOrigin();
  const settling = config(
    failedLogins({ name: "clear", clear_on_success: true, success_identity_header: "x-authenticated-user" }),
    failedLogins({ name: "lower", path: "/login2", on_success: "decrement", success_identity_header: "x-authenticated-user" }),
  );
  return withTollgate({ origin, config: settling }, async (tg) => {
    const login = async (path, email, password) =>
      (await tg.fetch(path, { method: "POST", headers: json, body: JSON.stringify({ email, password }) })).status;
    for (const path of ["/login", "/login2"]) {
      for (let i = 0; i < 9; i++) assert.equal(await login(path, "amy@example.com", "nope"), 401, `${path} ${i}`);
      assert.equal(await login(path, "amy@example.com", "amy@example.com-pw"), 200);
    }
    // clear: a whole new allowance of 10.
    for (let i = 0; i < 10; i++) assert.equal(await login("/login", "amy@example.com", "nope"), 401, `after the clear, failure ${i + 1}`);
    assert.equal(await login("/login", "amy@example.com", "nope"), 429);
    // decrement: 9 failures, one forgiven, so two more before the limit.
    assert.deepEqual([await login("/login2", "amy@example.com", "nope"), await login("/login2", "amy@example.com", "nope")], [401, 401]);
    assert.equal(await login("/login2", "amy@example.com", "nope"), 429, "one failure forgiven, not all");
  });
});
