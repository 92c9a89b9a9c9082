// Turning the limiter against its users (issue 16): each test pins one way
// a client could make tollgate hurt someone else, and fails on the code
// that allowed it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses, mockOrigin } from "./harness.mjs";
import { config, rule, limit, failedLogins, json } from "./builders.mjs";

test("shadow mode never answers 503, whatever on_error says", () =>
  withTollgate(
    {
      faults: true,
      config: config(
        rule("shadow-closed", "/shadow", { action: "log", on_error: "deny", limits: limit(1, "1m") }),
        rule("enforced-closed", "/enforced", { on_error: "deny", limits: limit(1, "1m") }),
      ),
    },
    async (tg) => {
      await tg.setFault("throw");
      assert.deepEqual(await statuses(tg, 3, "/shadow"), [200, 200, 200], "the counter is down: shadow forwards");
      assert.deepEqual(await statuses(tg, 1, "/enforced"), [503], "a blocking rule still fails closed");
      // One counter_error episode for the key: its first failure is written,
      // the two after it within the minute are counted, not written.
      await tg.settled();
      const events = tg.logEvents().filter((e) => e.rule === "shadow-closed");
      assert.deepEqual(events.map((e) => [e.tollgate, e.decision]), [["counter_error", "allow"]]);
    },
  ));

test("CORS preflights are not counted unless a rule lists OPTIONS", () =>
  withTollgate(
    {
      config: config(
        rule("quota", "/api/schools/:school/*", { key: ["path:school"], limits: limit(3, "1h") }),
        rule("preflights", "/preflight", { methods: ["OPTIONS"], limits: limit(2, "1h") }),
      ),
    },
    async (tg) => {
      const preflight = { method: "OPTIONS", headers: { origin: "https://evil.example", "access-control-request-method": "POST" } };
      assert.deepEqual(await statuses(tg, 20, "/api/schools/42/run", preflight), Array(20).fill(200));
      assert.deepEqual(await statuses(tg, 4, "/api/schools/42/run", { method: "POST" }), [200, 200, 200, 429], "the quota is whole");
      assert.deepEqual(await statuses(tg, 3, "/preflight", { method: "OPTIONS" }), [200, 200, 429], "a rule may ask for them");
    },
  ));

test("a known device logs in while its account is under attack (trusted_device)", () => {
  const origin = mockOrigin(async (request, record) => {
    if (record.path !== "/login") return undefined;
    const { password } = JSON.parse(record.body.toString() || "{}");
    return new Response(password === "right" ? "welcome" : "wrong password", { status: password === "right" ? 200 : 401 });
  });
  return withTollgate(
    {
      origin,
      vars: { TOLLGATE_DEVICE_KEY: "a device signing secret" },
      config: config(
        failedLogins({ on_success: "decrement", trusted_device: { secret: "TOLLGATE_DEVICE_KEY", ttl: "30d" }, limits: limit(3, "15m") }),
      ),
    },
    async (tg) => {
      const login = (password, { cookie, ip = "203.0.113.7" } = {}) =>
        tg.fetch("/login", json({ email: "owner@example.com", password }, { ip, headers: cookie ? { cookie } : {} }));
      // The owner logs in from their laptop and gets the device cookie.
      const first = await login("right");
      assert.equal(first.status, 200);
      const setCookie = first.headers.get("set-cookie") ?? "";
      assert.match(setCookie, /^tollgate_device=v2\.\d+\.[0-9a-f]{32}; Max-Age=2592000; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
      const cookie = setCookie.split(";")[0];
      // An attacker spends the account's failures from elsewhere.
      const attack = [];
      for (let i = 0; i < 5; i++) attack.push((await login(`guess-${i}`, { ip: `198.51.100.${i + 1}` })).status);
      assert.deepEqual(attack, [401, 401, 401, 429, 429]);
      // A browser the account never logged in from is locked out ...
      assert.equal((await login("right", { ip: "192.0.2.50" })).status, 429);
      // ... and so is a forged or altered cookie ...
      const altered = cookie.replace(/[0-9a-f]$/, (c) => (c === "0" ? "1" : "0"));
      assert.equal((await login("right", { cookie: altered })).status, 429);
      // ... but the owner's device gets in, with its cookie renewed.
      const known = await login("right", { cookie });
      assert.equal(known.status, 200);
      assert.match(known.headers.get("set-cookie") ?? "", /^tollgate_device=v2\./);
      // The device's own failures are still limited, in its own bucket.
      const mine = [];
      for (let i = 0; i < 4; i++) mine.push((await login(`typo-${i}`, { cookie })).status);
      assert.deepEqual(mine, [401, 401, 401, 429]);
      const failedAtOrigin = tg.origin.received.filter((r) => r.path === "/login").length;
      assert.equal(failedAtOrigin, 1 + 3 + 1 + 3, "the origin saw 3 attacker failures, the device's 3, and the 2 logins");
    },
  );
});
