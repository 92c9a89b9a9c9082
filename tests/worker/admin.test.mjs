// The admin API: off without a token; with one, bearer-authenticated status
// and reset for (rule, key), the key given raw and derived as the rule would.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses } from "./harness.mjs";

const TOKEN = "s3cret-admin-token-for-tests";
const config = {
  rules: [
    { name: "heavy", path: "/api/example", limits: [{ requests: 3, window: "60s" }, { requests: 10, window: "1h" }] },
    { name: "login", path: "/login", key: ["body:email"], limits: [{ requests: 2, window: "15m" }] },
  ],
};


const admin = (tg, path, { token = TOKEN, method = "GET" } = {}) =>
  tg.fetch(path, { method, ip: "192.0.2.1", headers: token === null ? {} : { authorization: `Bearer ${token}` } });

test("without the secret the admin path is not special", () =>
  withTollgate({ config }, async (tg) => {
    const res = await admin(tg, "/.tollgate/status?rule=heavy&ip=203.0.113.7");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-origin"), "mock");
    assert.equal(tg.origin.received.length, 1);
  }));

test("missing or wrong token: 401 with no detail about which", () =>
  withTollgate({ config, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
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
  withTollgate({ config, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
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
    assert.deepEqual(await statuses(tg, 4, "/api/example", { ip: "2001:db8:7:7::1" }), [200, 200, 200, 429], "unblocked at once");
    // Body keys: the raw email, hashed as the rule does.
    const post = () => tg.fetch("/login", { method: "POST", headers: { "content-type": "application/json" }, body: '{"email":"Zed@Example.com"}' });
    assert.deepEqual([(await post()).status, (await post()).status, (await post()).status], [200, 200, 429]);
    const login = await (await admin(tg, "/.tollgate/status?rule=login&body:email=%20zed@example.COM")).json();
    assert.equal(login.windows[0].used, 2);
    assert.equal((await admin(tg, "/.tollgate/reset?rule=login&body:email=zed@example.com", { method: "POST" })).status, 200);
    assert.equal((await post()).status, 200);
  }));

test("admin errors are clear, and the token is never logged", () =>
  withTollgate({ config, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
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
    assert.ok(tg.logs().includes('"tollgate":"admin"'), "admin actions are logged");
    assert.ok(!tg.logs().includes(TOKEN), "the token never appears in the logs");
    assert.ok(!tg.logs().includes("1.2.3.4"), "nor the raw key");
  }));

test("a custom admin prefix", () =>
  withTollgate({ config: { ...config, admin_prefix: "/_ops/limits" }, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    assert.equal((await admin(tg, "/_ops/limits/status?rule=heavy&ip=1.2.3.4")).status, 200);
    const passthrough = await admin(tg, "/.tollgate/status?rule=heavy&ip=1.2.3.4");
    assert.equal(passthrough.headers.get("x-origin"), "mock", "the default prefix is no longer special");
  }));
