// Relief bound to the exact spelling (issue 25, finding 1): a success, or a
// trusted-device cookie, earned by account A never relieves account B when
// A != B as the origin compares identities. The origin here is
// case-sensitive (a PostgreSQL `text` unique column): `Victim@example.com`
// is the attacker's own account, `victim@example.com` the victim's. Each
// test fails on the code before the fix.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { withTollgate, mockOrigin, sleep, COMPATIBILITY_DATE } from "./harness.mjs";
import { config, failedLogins } from "./builders.mjs";

const VICTIM = "victim@example.com";
const LOOK_ALIKE = "Victim@example.com"; // the attacker's own account
const ATTACKER = "attacker@example.com";
const PASSWORDS = { [VICTIM]: "victim-secret", [LOOK_ALIKE]: "attacker-pass", [ATTACKER]: "attacker-pass" };
const DEVICE_KEY = "a device signing secret";
const TOKEN = "admin-token-for-relief-tests";

/** A login origin with case-sensitive accounts: JSON.parse reads the last
 * of a member given twice, as Express does. On success it names the
 * account it logged in, exactly as stored. */
function loginOrigin() {
  return mockOrigin(async (request, record) => {
    if (record.path !== "/login") return undefined;
    let body = {};
    try {
      body = JSON.parse(record.body.toString() || "{}");
    } catch {
      return new Response("bad json", { status: 400 });
    }
    const ok = Object.hasOwn(PASSWORDS, body.email) && PASSWORDS[body.email] === body.password;
    return ok
      ? new Response("welcome", { status: 200, headers: { "x-authenticated-user": body.email } })
      : new Response("wrong password", { status: 401 });
  });
}

/** The failed logins of `email`, exactly, that reached the origin. */
function failuresAtOrigin(tg, email) {
  return tg.origin.received.filter((r) => {
    if (r.path !== "/login") return false;
    try {
      const body = JSON.parse(r.body.toString());
      return body.email === email && body.password !== PASSWORDS[email];
    } catch {
      return false;
    }
  }).length;
}

/** The failures-only login rule, keyed by `email` read as an email address, with trusted devices. */
function loginRule(extra = {}) {
  return failedLogins({ key: ["body:email:email"], on_success: "decrement", trusted_device: { secret: "TOLLGATE_DEVICE_KEY" }, ...extra });
}

function login(tg, body, { cookie, ip = "198.51.100.20" } = {}) {
  return tg.fetch("/login", {
    ip,
    method: "POST",
    headers: { "content-type": "application/json", ...(cookie ? { cookie } : {}) },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const cookieOf = (res) => (res.headers.get("set-cookie") ?? "").split(";")[0];

test("a look-alike account's success mints no device cookie for the victim (success_identity_header)", () =>
  withTollgate(
    {
      origin: loginOrigin(),
      vars: { TOLLGATE_DEVICE_KEY: DEVICE_KEY },
      config: config(loginRule({ success_identity_header: "x-authenticated-user" })),
    },
    async (tg) => {
      // Six rounds, each in a new second (a cookie's expiry, and so its
      // device, is in whole seconds): the attacker logs in to its own
      // look-alike account (the origin truthfully names it), then guesses
      // the victim's password with the cookie it got. Before the fix each
      // cookie opened a fresh bucket of 10 guesses on the victim's account
      // (61 against 10 in the run).
      const statuses = [];
      let first;
      for (let round = 0; round < 6; round++) {
        await sleep(1_020 - (Date.now() % 1_000));
        const own = await login(tg, { email: LOOK_ALIKE, password: "attacker-pass" });
        await own.arrayBuffer();
        const cookie = cookieOf(own);
        first ??= cookie;
        for (let i = 0; i < 10; i++) {
          const res = await login(tg, { email: VICTIM, password: `guess-${round}-${i}` }, { cookie });
          statuses.push(res.status);
          await res.arrayBuffer();
        }
      }
      assert.equal(failuresAtOrigin(tg, VICTIM), 10, "the victim's account saw exactly its limit of failures");
      assert.equal(statuses.filter((s) => s === 401).length, 10);
      assert.equal(statuses.filter((s) => s === 429).length, 50);
      // The look-alike's cookie is a device of its own account, spelled as
      // it is: it still logs in there (its bucket untouched by the guesses
      // at the victim), and nowhere else.
      assert.match(first, /^tollgate_device=v2\./);
      assert.equal((await login(tg, { email: LOOK_ALIKE, password: "attacker-pass" }, { cookie: first })).status, 200);
      const bare = await login(tg, { email: LOOK_ALIKE, password: "attacker-pass" }, { ip: "198.51.100.21" });
      assert.equal(bare.status, 429, "without its device, the look-alike shares the victim's (full) count");
    },
  ));

test("a look-alike's success clears nothing of the victim's count (clear, no identity header)", () =>
  withTollgate(
    {
      origin: loginOrigin(),
      config: config((({ trusted_device, ...rule }) => rule)(loginRule({ on_success: "clear" }))),
    },
    async (tg) => {
      // Before the fix: 9 guesses, a login to the look-alike (the count's
      // last free slot) clears the count, 9 more ... (101 against 10).
      const own = [];
      for (let round = 0; round < 5; round++) {
        for (let i = 0; i < 9; i++) await (await login(tg, { email: VICTIM, password: `guess-${round}-${i}` })).arrayBuffer();
        const res = await login(tg, { email: LOOK_ALIKE, password: "attacker-pass" });
        own.push(res.status);
        await res.arrayBuffer();
      }
      assert.equal(own[0], 200, "the look-alike logged in (its own account)");
      assert.equal(failuresAtOrigin(tg, VICTIM), 10, "45 guesses, 10 reached the victim's account");
    },
  ));

test("a body naming two accounts (a member given twice) mints no cookie and relieves neither", () =>
  withTollgate(
    {
      origin: loginOrigin(),
      vars: { TOLLGATE_DEVICE_KEY: DEVICE_KEY },
      config: config(loginRule({ on_success: "clear" })),
    },
    async (tg) => {
      // The origin reads the last member (the attacker's own account, its
      // right password); tollgate charges both and, before the fix, handed
      // out a cookie for the first: the victim's.
      const twice = `{"email":"${VICTIM}","email":"${ATTACKER}","password":"attacker-pass"}`;
      const statuses = [];
      for (let round = 0; round < 4; round++) {
        const dup = await login(tg, twice);
        await dup.arrayBuffer();
        if (round === 0) {
          assert.equal(dup.status, 200, "the origin logged the attacker in");
          assert.equal(dup.headers.get("set-cookie"), null, "no device cookie: which account was it?");
        }
        const cookie = cookieOf(dup);
        for (let i = 0; i < 10; i++) {
          const res = await login(tg, { email: VICTIM, password: `guess-${round}-${i}` }, { cookie });
          statuses.push(res.status);
          await res.arrayBuffer();
        }
      }
      assert.equal(failuresAtOrigin(tg, VICTIM), 10, "40 guesses, 10 reached the victim's account");
    },
  ));

test("an admin ban of an account covers its trusted devices", () =>
  withTollgate(
    {
      origin: loginOrigin(),
      vars: { TOLLGATE_DEVICE_KEY: DEVICE_KEY, TOLLGATE_ADMIN_TOKEN: TOKEN },
      config: config(loginRule({ success_identity_header: "x-authenticated-user" })),
    },
    async (tg) => {
      const first = await login(tg, { email: VICTIM, password: PASSWORDS[VICTIM] });
      assert.equal(first.status, 200);
      const cookie = cookieOf(first);
      assert.match(cookie, /^tollgate_device=v2\./);
      assert.equal((await login(tg, { email: VICTIM, password: PASSWORDS[VICTIM] }, { cookie })).status, 200, "the device works");
      const ban = await tg.fetch(`/.tollgate/ban?rule=login-account&body:email=${encodeURIComponent(VICTIM)}&for=1h`, {
        method: "POST",
        ip: "192.0.2.1",
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(ban.status, 200, await ban.text());
      const before = tg.origin.received.length;
      const banned = [];
      for (let i = 0; i < 3; i++) {
        const res = await login(tg, { email: VICTIM, password: PASSWORDS[VICTIM] }, { cookie });
        banned.push(res.status);
        if (i === 0) assert.ok(Number(res.headers.get("retry-after")) > 3500, "for the ban's time");
        await res.arrayBuffer();
      }
      assert.deepEqual(banned, [429, 429, 429]);
      assert.equal(tg.origin.received.length, before, "nothing reached the origin");
      // Another account's device is untouched by the ban.
      const other = await login(tg, { email: ATTACKER, password: "attacker-pass" });
      assert.equal(other.status, 200);
    },
  ));

// A Worker bound to tollgate that settles tickets it made up or altered.
const FORGER = `
export default { async fetch(request, env) {
  const victimKey = new URL(request.url).searchParams.get("key");
  const loginRequest = (email, password) => new Request("https://example.com/login", {
    method: "POST",
    headers: { "cf-connecting-ip": "203.0.113.80", "content-type": "application/json" },
    body: JSON.stringify({ email, password }),
  });
  const settle = async (ticket, status, headers) => {
    try { return { ok: await env.TOLLGATE.settle(ticket, status, headers) }; } catch (e) { return { error: String(e.message) }; }
  };
  const out = {};
  // Made up: the shapes check() hands out, naming the victim's account.
  out.madeUpV1 = await settle(JSON.stringify({ v: 1, e: [["login-account", victimKey, 2, null, null]] }), 200);
  out.madeUpV2 = await settle(JSON.stringify({ v: 2, t: Date.now(), e: [["login-account", victimKey, 2, null, null, null]] }), 200);
  // A real ticket, for the attacker's own account, altered to name the victim.
  const own = await env.TOLLGATE.check(loginRequest("${ATTACKER}", "attacker-pass"));
  const parsed = JSON.parse(own.ticket);
  parsed.e[0][1] = victimKey;
  out.altered = await settle(JSON.stringify(parsed), 200);
  // The real ticket itself settles, and earns its own device cookie.
  out.real = await settle(own.ticket, 200, { "x-authenticated-user": "${ATTACKER}" });
  return Response.json(out);
} };`;

test("a forged or altered RPC ticket settles nothing and mints no cookie", () =>
  withTollgate(
    {
      origin: loginOrigin(),
      vars: { TOLLGATE_DEVICE_KEY: DEVICE_KEY },
      config: config(loginRule({ on_success: "clear" })),
      workers: [{ name: "forger", modules: true, script: FORGER, compatibilityDate: COMPATIBILITY_DATE, serviceBindings: { TOLLGATE: "tollgate" } }],
    },
    async (tg) => {
      // The victim's key as tollgate derives it (`:email` folds, then SHA-256).
      const victimKey = `body:email:email=${createHash("sha256").update(VICTIM).digest("hex")}`;
      const forger = await tg.mf.getWorker("forger");
      const out = await (await forger.fetch(`https://forger/?key=${encodeURIComponent(victimKey)}`)).json();
      for (const name of ["madeUpV1", "madeUpV2", "altered"]) {
        assert.ok(out[name].error, `${name}: refused, not ${JSON.stringify(out[name])}`);
        assert.match(out[name].error, /not a ticket from this deployment/, name);
      }
      assert.equal(out.real.ok.headers.length, 1, JSON.stringify(out.real));
      assert.match(out.real.ok.headers[0][1], /^tollgate_device=v2\./, "the real ticket earns its own cookie");
    },
  ));
