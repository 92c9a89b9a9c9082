// The admin API (the admin Worker, `scripts/build admin`; the harness routes
// the plain prefix to it): off without a token; with one, bearer-authenticated
// status and reset for (rule, key), the key given raw and derived as the rule
// would, on the zone Worker's objects.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses } from "./harness.mjs";
import { config, rule, limit, limits, json } from "./builders.mjs";

const TOKEN = "s3cret-admin-token-for-tests";
const CONFIG = config(
  rule("heavy", "/api/example", { limits: limits([3, "60s"], [10, "1h"]) }),
  rule("login", "/login", { key: ["body:email"], limits: limit(2, "15m") }),
);


const admin = (tg, path, { token = TOKEN, method = "GET" } = {}) =>
  tg.fetch(path, { method, ip: "192.0.2.1", headers: token === null ? {} : { authorization: `Bearer ${token}` } });

test("without the secret the admin path is nobody's: the admin Worker's 404 and the zone's, never the origin (issue 38)", () =>
  withTollgate({ config: CONFIG, adminRoutes: [] }, async (tg) => {
    for (const res of [await tg.admin("/.tollgate/status?rule=heavy&ip=203.0.113.7"), await tg.fetch("/.tollgate/status?rule=heavy&ip=203.0.113.7")]) {
      assert.equal(res.status, 404);
      assert.equal(res.headers.get("x-origin"), null);
    }
    assert.equal(tg.origin.received.length, 0);
  }));

test("missing or wrong token: 401 with no detail about which", () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    const missing = await admin(tg, "/.tollgate/status?rule=heavy&ip=203.0.113.7", { token: null });
    const wrong = await admin(tg, "/.tollgate/status?rule=heavy&ip=203.0.113.7", { token: TOKEN.slice(0, -1) + "x" });
    const longer = await admin(tg, "/.tollgate/reset?rule=heavy&ip=203.0.113.7", { token: TOKEN + "x", method: "POST" });
    for (const res of [missing, wrong, longer]) assert.equal(res.status, 401);
    const bodies = await Promise.all([missing, wrong, longer].map((r) => r.text()));
    assert.equal(bodies[0], bodies[1]);
    assert.equal(bodies[1], bodies[2]);
    assert.equal(tg.origin.received.length, 0, "admin requests never reach the origin");
  }));

test("status per window, reset lifting a block, keys derived as the rule would", () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN }, edges: 1 }, async (tg) => {
    assert.deepEqual(await statuses(tg, 4, "/api/example", { ip: "2001:db8:7:7::1" }), [200, 200, 200, 429]);
    // The same /64, spelled differently, names the same key.
    const res = await admin(tg, "/.tollgate/status?rule=heavy&ip=2001:DB8:7:7:0:0:0:99");
    assert.equal(res.status, 200);
    const s = await res.json();
    assert.equal(s.rule, "heavy");
    assert.deepEqual(s.windows.map((w) => [w.limit, w.used, w.remaining]), [[3, 3, 0], [10, 3, 7]]);
    assert.ok(s.windows[0].reset_ms > 0 && s.windows[0].reset_ms <= 60_000);
    assert.equal(s.alarm_pending, true);
    assert.equal(s.stored_hits, 3);
    // Unblock this user now.
    const reset = await admin(tg, "/.tollgate/reset?rule=heavy&ip=2001:db8:7:7::5", { method: "POST" });
    assert.equal(reset.status, 200);
    assert.equal((await reset.json()).stored_hits, 0);
    // At the object at once: an isolate of the zone that never cached the
    // block counts afresh. The one that did keeps its cached 429 until the
    // block ends (docs/guide.md, "The admin Worker": the admin Worker reaches
    // no zone isolate's cache).
    const fresh = [];
    for (let i = 0; i < 4; i++) fresh.push((await tg.fetchVia(1, "/api/example", { ip: "2001:db8:7:7::1" })).status);
    assert.deepEqual(fresh, [200, 200, 200, 429], "unblocked at once at the object");
    // Body keys: the raw email, hashed as the rule does.
    const post = () => tg.fetch("/login", json('{"email":"Zed@Example.com"}'));
    assert.deepEqual([(await post()).status, (await post()).status, (await post()).status], [200, 200, 429]);
    const login = await (await admin(tg, "/.tollgate/status?rule=login&body:email=%20zed@example.COM")).json();
    assert.equal(login.windows[0].used, 2);
    assert.equal((await admin(tg, "/.tollgate/reset?rule=login&body:email=zed@example.com", { method: "POST" })).status, 200);
    assert.equal((await tg.fetchVia(1, "/login", json('{"email":"Zed@Example.com"}'))).status, 200);
  }));

test("admin errors are clear, and the token is never logged", () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    const cases = [
      ["/.tollgate/status?ip=1.2.3.4", "GET", 400, /missing query parameter `rule`/],
      ["/.tollgate/status?rule=nope&ip=1.2.3.4", "GET", 404, /no rule named `nope`/],
      ["/.tollgate/status?rule=heavy", "GET", 400, /`ip`/],
      ["/.tollgate/reset?rule=heavy&ip=1.2.3.4", "GET", 405, /use POST/],
      ["/.tollgate/other", "GET", 404, /unknown admin endpoint/],
    ];
    for (const [path, method, status, detail] of cases) {
      const res = await admin(tg, path, { method });
      assert.equal(res.status, status, path);
      assert.match((await res.json()).detail, detail, path);
    }
    await admin(tg, "/.tollgate/status?rule=heavy&ip=1.2.3.4");
    await tg.settled();
    assert.ok(tg.logs().includes('"tollgate":"admin"'), "admin actions are logged");
    assert.ok(!tg.logs().includes(TOKEN), "the token never appears in the logs");
    assert.ok(!tg.logs().includes("1.2.3.4"), "nor the raw key");
  }));

test("a custom admin prefix", () =>
  withTollgate({ config: { ...CONFIG, admin_prefix: "/_ops/limits" }, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    assert.equal((await admin(tg, "/_ops/limits/status?rule=heavy&ip=1.2.3.4")).status, 200);
    const passthrough = await admin(tg, "/.tollgate/status?rule=heavy&ip=1.2.3.4");
    assert.equal(passthrough.headers.get("x-origin"), "mock", "the default prefix is no longer special");
  }));

test("admin lockout: 10 wrong tokens, then 429 even with the right one; another client still gets in", () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    const from = (ip, token) =>
      tg.fetch("/.tollgate/status?rule=heavy&ip=203.0.113.7", { ip, headers: { authorization: `Bearer ${token}` } });
    const attacker = "2001:db8:bad:1::1";
    const wrong = async (n, ip = attacker) => {
      const out = [];
      for (let i = 0; i < n; i++) out.push((await from(ip, `guess-${i}`)).status);
      return out;
    };
    assert.deepEqual(await wrong(5), [401, 401, 401, 401, 401]);
    assert.equal((await from(attacker, TOKEN)).status, 200, "under the limit the right token works...");
    // ...and does not reset the count: 5 more failures, from another address of the same /64, make 10.
    assert.deepEqual(await wrong(5, "2001:db8:bad:1::2"), [401, 401, 401, 401, 401]);
    const locked = await from(attacker, TOKEN);
    assert.equal(locked.status, 429, "the 11th request, with the right token");
    const retryAfter = Number(locked.headers.get("retry-after"));
    assert.ok(retryAfter > 0 && retryAfter <= 900, `Retry-After ${retryAfter}`);
    assert.equal((await locked.json()).rule, "tollgate:admin-auth");
    assert.equal((await from(attacker, "guess-x")).status, 429, "a wrong token too");
    assert.equal((await from("198.51.100.20", TOKEN)).status, 200, "another client still gets in");
    assert.equal(tg.origin.received.length, 0);

    await tg.settled();
    const logs = tg.logs();
    assert.ok(!logs.includes(TOKEN), "the token never appears in the logs");
    assert.ok(!logs.includes("guess-"), "nor the wrong ones");
    assert.ok(!logs.includes("2001:db8:bad") && !logs.includes("198.51.100.20"), "nor a client IP");
    // The token is under 32 characters: told once (issue 35), with its length only.
    assert.deepEqual(tg.logEvents().filter((e) => e.tollgate === "admin_token_short").map((e) => e.chars), [TOKEN.length]);
    const events = tg.logEvents().filter((e) => e.tollgate.startsWith("admin") && e.tollgate !== "admin_token_short");
    assert.deepEqual(
      Object.fromEntries(["admin", "admin_denied", "admin_locked"].map((k) => [k, events.filter((e) => e.tollgate === k).length])),
      { admin: 2, admin_denied: 10, admin_locked: 2 },
    );
    for (const e of events) assert.match(e.client_hash, /^[0-9a-f]{16}$/, JSON.stringify(e));
    const attackerHash = events.find((e) => e.tollgate === "admin_denied").client_hash;
    assert.deepEqual(
      events.filter((e) => e.tollgate === "admin_locked").map((e) => [e.client_hash, e.authorized]),
      [[attackerHash, true], [attackerHash, false]],
      "a locked-out right token stands out in the logs",
    );
    assert.notEqual(events.at(-1).client_hash, attackerHash, "the other client has its own hash");
  }));

test("a rule's fallback bucket can be inspected and reset, and the rules listed", () =>
  withTollgate(
    {
      vars: { TOLLGATE_ADMIN_TOKEN: TOKEN },
      edges: 1,
      config: config(rule("api-general", "/api/*", { key: ["header:x-user"], fallback_key: ["ip"], limits: limit(2, "60s") })),
    },
    async (tg) => {
      // An anonymous client spends its fallback (per-IP) bucket.
      assert.deepEqual(await statuses(tg, 3, "/api/x", { ip: "127.0.0.1" }), [200, 200, 429]);
      const primary = await admin(tg, "/.tollgate/status?rule=api-general&ip=127.0.0.1");
      assert.equal(primary.status, 400, "the primary key needs its header");
      const status = await admin(tg, "/.tollgate/status?rule=api-general&bucket=fallback&ip=127.0.0.1");
      assert.equal(status.status, 200);
      assert.equal((await status.json()).windows[0].used, 2);
      const reset = await admin(tg, "/.tollgate/reset?rule=api-general&bucket=fallback&ip=127.0.0.1", { method: "POST" });
      assert.equal(reset.status, 200);
      const again = await tg.fetchVia(1, "/api/x", { ip: "127.0.0.1" });
      assert.equal(again.status, 200, "the anonymous client is let in again (a zone isolate without the cached block)");
      const rules = await admin(tg, "/.tollgate/rules");
      assert.equal(rules.status, 200);
      const listed = (await rules.json()).rules;
      assert.deepEqual(
        listed.map((r) => [r.name, r.key, r.fallback_key, r.limits]),
        [["api-general", ["header:x-user"], ["ip"], [{ requests: 2, window_ms: 60000 }]]],
      );
      assert.equal((await admin(tg, "/.tollgate/rules", { token: "wrong" })).status, 401);
    },
  ));

test("a raw key with a literal `+` is refused (not read as a space); `%2B` bans eve+1, and the answer's key_hash is the one her requests log (issue 25)", () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    const ban = (email) => admin(tg, `/.tollgate/ban?rule=login&body:email=${email}&for=1h`, { method: "POST" });
    const plus = await ban("eve+1@example.com");
    assert.equal(plus.status, 400, "today's code read `eve 1@example.com` and answered 200");
    assert.match((await plus.json()).detail, /`body:email` holds a `\+`.*`%2B` for a plus sign and `%20` for a space/);
    const login = (email) =>
      tg.fetch("/login", json({ email }, { ip: "203.0.113.50" }));
    assert.equal((await login("eve+1@example.com")).status, 200, "the refused ban banned nothing");

    const encoded = await ban("eve%2B1@example.com");
    assert.equal(encoded.status, 200);
    const answer = await encoded.json();
    assert.equal(answer.limits_source, "ban");
    assert.match(answer.key_hash, /^[0-9a-f]{16}$/);
    const before = tg.logEvents().length;
    assert.equal((await login("eve+1@example.com")).status, 429, "eve+1 is banned");
    assert.equal((await login("EVE+1@example.com")).status, 429, "as the rule reads her (lowercased)");
    assert.equal((await login("eve 1@example.com")).status, 200, "a space is another account");
    assert.equal((await login("eve1@example.com")).status, 200);
    await tg.settled();
    const blocks = tg.logEvents().slice(before).filter((e) => e.tollgate === "block" && e.rule === "login");
    assert.ok(blocks.length >= 1, JSON.stringify(tg.logEvents().slice(before)));
    assert.ok(blocks.every((e) => e.key_hash === answer.key_hash), "the ban's key_hash names the key her requests are charged to");
    const spaced = await admin(tg, "/.tollgate/status?rule=login&body:email=eve%201@example.com");
    assert.equal(spaced.status, 200);
    assert.notEqual((await spaced.json()).key_hash, answer.key_hash, "%20 is a space: another key, another hash");
  }));

test("a neighbour's wrong tokens do not lock out a long right token; wrong tokens are still locked out, a short token keeps the full lockout (issue 25)", async () => {
  const LONG = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"; // openssl rand -hex 32
  const status = (tg, ip, token) =>
    tg.fetch("/.tollgate/status?rule=heavy&ip=203.0.113.7", { ip, headers: { authorization: `Bearer ${token}` } });
  const neighbourLocksOut = async (tg, ip) => {
    const got = [];
    for (let i = 0; i < 11; i++) got.push((await status(tg, ip, `guess-${i}`)).status);
    assert.deepEqual(got, [...Array(10).fill(401), 429], "ten wrong tokens, then locked out");
  };
  await withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: LONG } }, async (tg) => {
    // The admin and a neighbour behind one IPv4 (NAT), then one IPv6 /64.
    for (const [neighbour, adminIp] of [["192.0.2.77", "192.0.2.77"], ["2001:db8:77:1::1", "2001:db8:77:1::2"]]) {
      await neighbourLocksOut(tg, neighbour);
      const res = await status(tg, adminIp, LONG);
      assert.equal(res.status, 200, "today's code answered 429 to the right token");
      assert.equal((await res.json()).rule, "heavy");
      assert.equal((await status(tg, neighbour, "guess-x")).status, 429, "a wrong token is still locked out");
      assert.equal((await status(tg, adminIp, LONG.slice(0, -1) + "1")).status, 429, "even one a character off");
    }
    await tg.settled();
    const locked = tg.logEvents().filter((e) => e.tollgate === "admin_locked");
    assert.equal(locked.length, 6);
    assert.ok(locked.every((e) => e.authorized === false));
    assert.equal(tg.logEvents().filter((e) => e.tollgate === "admin").length, 2, "both right-token requests served");
  });
  // A token under 32 characters could be guessed: a locked-out client learns nothing, right token or not.
  await withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    await neighbourLocksOut(tg, "192.0.2.78");
    assert.equal((await status(tg, "192.0.2.78", TOKEN)).status, 429);
  });
});
