// The rule language end to end: key kinds, shadow mode, fail policies,
// failures-only counting, RateLimit fields, missing keys, invalid config.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin, statuses } from "./harness.mjs";
import { config, rule, limit, limits, failedLogins, json, form } from "./builders.mjs";

const one = (extra) => config(rule("r", "/p/*", { limits: limit(2, "60s"), ...extra }));


test("ip keys: IPv6 grouped by /64, spelling variants and mapped IPv4 are one client, X-Forwarded-For ignored", () =>
  withTollgate({ config: one({ key: ["ip"] }) }, async (tg) => {
    assert.equal((await tg.fetch("/p/a", { ip: "2001:db8:1:2::1" })).status, 200);
    assert.equal((await tg.fetch("/p/a", { ip: "2001:DB8:1:2:ffff:0:0:9" })).status, 200, "same /64");
    assert.equal((await tg.fetch("/p/a", { ip: "2001:0db8:0001:0002::77" })).status, 429, "same /64, other spelling");
    assert.equal((await tg.fetch("/p/a", { ip: "2001:db8:1:3::1" })).status, 200, "next /64 is another client");
    assert.equal((await tg.fetch("/p/a", { ip: "198.51.100.4" })).status, 200);
    assert.equal((await tg.fetch("/p/a", { ip: "::ffff:198.51.100.4" })).status, 200, "mapped = the IPv4 address");
    assert.equal((await tg.fetch("/p/a", { ip: "64:ff9b::198.51.100.4", headers: { "x-forwarded-for": "10.0.0.1" } })).status, 429, "NAT64 = the IPv4 address");
    const spoof = await tg.fetch("/p/a", { ip: "198.51.100.4", headers: { "x-forwarded-for": "10.9.9.9", "true-client-ip": "10.8.8.8" } });
    assert.equal(spoof.status, 429, "spoofed forwarding headers change nothing");
  }));

test("ipv6_prefix = 56 groups a whole /56", () =>
  withTollgate({ config: { ipv6_prefix: 56, ...one({}) } }, async (tg) => {
    assert.deepEqual(
      [await tg.fetch("/p/x", { ip: "2001:db8:0:100::1" }), await tg.fetch("/p/x", { ip: "2001:db8:0:1ff::1" }), await tg.fetch("/p/x", { ip: "2001:db8:0:1aa::1" })].map((r) => r.status),
      [200, 200, 429],
    );
  }));

test("header, cookie, query and path-group keys", () =>
  withTollgate(
    {
      config: config(
        rule("h", "/h", { key: ["header:x-api-key"], limits: limit(1, "60s") }),
        rule("c", "/c", { key: ["cookie:sid"], limits: limit(1, "60s") }),
        rule("q", "/q", { key: ["query:tenant"], limits: limit(1, "60s") }),
        rule("g", "/t/:school/*", { key: ["path:school"], limits: limit(1, "60s") }),
      ),
    },
    async (tg) => {
      const s = async (path, headers = {}, ip = "203.0.113.1") => (await tg.fetch(path, { headers, ip })).status;
      assert.deepEqual([await s("/h", { "x-api-key": "k1" }), await s("/h", { "x-api-key": "k1" }, "203.0.113.2"), await s("/h", { "x-api-key": "k2" })], [200, 429, 200]);
      assert.deepEqual([await s("/c", { cookie: "a=1; sid=s1" }), await s("/c", { cookie: "sid=s1" }, "203.0.113.9"), await s("/c", { cookie: "sid=s2" })], [200, 429, 200]);
      assert.deepEqual([await s("/q?tenant=t1"), await s("/q?TENANT=t1&x=1", {}, "203.0.113.9"), await s("/q?tenant=t2")], [200, 429, 200]);
      assert.deepEqual([await s("/t/s1/report"), await s("/t/s1/other", {}, "203.0.113.9"), await s("/t/s2/report")], [200, 429, 200]);
    },
  ));

test("global, country and asn keys from request.cf", () =>
  withTollgate(
    {
      config: config(
        rule("all", "/all", { key: ["global"], limits: limit(2, "60s") }),
        rule("geo", "/geo", { key: ["country", "asn"], limits: limit(1, "60s") }),
      ),
    },
    async (tg) => {
      assert.deepEqual(await Promise.all(["203.0.113.1", "203.0.113.2", "203.0.113.3"].map(async (ip) => (await tg.fetch("/all", { ip })).status)).then((s) => s.sort()), [200, 200, 429]);
      const geo = async (country, asn) => (await tg.mf.dispatchFetch("https://example.com/geo", { cf: { country, asn } })).status;
      assert.deepEqual([await geo("DE", 3320), await geo("DE", 3320), await geo("DE", 64500), await geo("FR", 3320)], [200, 429, 200, 200]);
    },
  ));

test("body keys: JSON and form fields hashed, body reaches the origin intact, oversized body falls back", () => {
  const origin = mockOrigin();
  return withTollgate(
    {
      origin,
      config: config(
        { body_limit: 256 },
        rule("login", "/login", { methods: ["POST"], key: ["body:email"], fallback_key: ["ip"], limits: limit(2, "60s") }),
      ),
    },
    async (tg) => {
      const post = (body, type, ip) => tg.fetch("/login", { method: "POST", body, headers: { "content-type": type }, ip });
      const json = JSON.stringify({ email: "  Alice@Example.COM ", password: "x" });
      assert.equal((await post(json, "application/json", "203.0.113.1")).status, 200);
      assert.equal((await post("email=alice%40example.com&password=y", "application/x-www-form-urlencoded", "203.0.113.2")).status, 200);
      assert.equal((await post(JSON.stringify({ email: "alice@example.com" }), "application/json; charset=utf-8", "203.0.113.3")).status, 429, "same account from a third IP");
      assert.equal((await post(JSON.stringify({ email: "bob@example.com" }), "application/json", "203.0.113.1")).status, 200, "another account");
      assert.equal(origin.received[0].body.toString(), json, "the body reached the origin byte for byte");
      assert.equal(origin.received[1].body.toString(), "email=alice%40example.com&password=y");
      // Over the 256-byte cap, malformed JSON, wrong content type: the fallback key (ip) counts.
      const big = JSON.stringify({ email: "carol@example.com", pad: "x".repeat(400) });
      assert.equal((await post(big, "application/json", "198.51.100.7")).status, 200);
      assert.equal((await post("{not json", "application/json", "198.51.100.7")).status, 200);
      assert.equal((await post("email=carol@example.com", "text/plain", "198.51.100.7")).status, 429, "fallback bucket ip=198.51.100.7 is full");
      assert.equal(origin.received.at(-1).body.toString(), "{not json");
      assert.equal(origin.received.find((r) => r.body.length > 400).body.toString(), big, "an oversized body is forwarded intact");
    },
  );
});

test("missing key parts: reject with 400 by default, or skip the rule", () =>
  withTollgate(
    {
      config: config(
        rule("strict", "/strict", { key: ["header:x-api-key"], limits: limit(1, "60s") }),
        rule("lenient", "/lenient", { key: ["header:x-api-key"], on_missing_key: "skip", limits: limit(1, "60s") }),
      ),
    },
    async (tg) => {
      const res = await tg.fetch("/strict");
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /Rule `strict`: the request has no usable `header:x-api-key`/);
      assert.equal((await tg.fetch("/strict", { headers: { "x-api-key": "  " } })).status, 400, "blank is missing too");
      assert.deepEqual(await statuses(tg, 3, "/lenient"), [200, 200, 200], "never a shared empty-key bucket");
      assert.equal(tg.origin.received.length, 3);
    },
  ));

test("shadow mode never blocks; headers and logs show what would have happened", () =>
  withTollgate({ config: one({ action: "log", ratelimit_headers: true }) }, async (tg) => {
    const all = [];
    for (let i = 0; i < 4; i++) all.push(await tg.fetch("/p/x"));
    assert.deepEqual(all.map((r) => r.status), [200, 200, 200, 200]);
    assert.equal(all[0].headers.get("ratelimit"), '"r";r=1;t=60');
    assert.equal(all[1].headers.get("ratelimit"), '"r";r=0;t=60');
    assert.match(all[2].headers.get("ratelimit"), /^"r";r=0;t=(59|60)$/, "would have been blocked");
    assert.equal(all[3].headers.get("ratelimit-policy"), '"r";q=2;w=60');
    assert.equal(all[0].headers.get("x-origin"), "mock", "the origin's own headers are kept");
    assert.equal(tg.origin.received.length, 4);
  }));

test("RateLimit fields on allowed responses only where the rule asks", () =>
  withTollgate(
    {
      config: config(
        rule("with", "/with", { ratelimit_headers: true, limits: limits([3, "60s"], [10, "1h"]) }),
        rule("without", "/without", { limits: limit(3, "60s") }),
      ),
    },
    async (tg) => {
      const res = await tg.fetch("/with");
      assert.equal(res.headers.get("ratelimit-policy"), '"with/60s";q=3;w=60, "with/3600s";q=10;w=3600');
      assert.equal(res.headers.get("ratelimit"), '"with/60s";r=2;t=60');
      const plain = await tg.fetch("/without");
      assert.equal(plain.headers.get("ratelimit"), null);
      assert.equal(plain.headers.get("ratelimit-policy"), null);
    },
  ));

test("failures only: failed logins count, a success clears the account's count but never the client's", () => {
  const origin = mockOrigin((request, record) => {
    const ok = record.body.toString().includes('"password":"right"');
    return new Response(ok ? "welcome" : "nope", { status: ok ? 200 : 401 });
  });
  const logins = config(
    failedLogins({ clear_on_success: true, limits: limit(3, "15m") }),
    failedLogins({ name: "login-client", key: ["ip"], limits: limit(5, "15m") }),
  );
  return withTollgate({ origin, config: logins }, async (tg) => {
    const login = async (email, password, ip) => (await tg.fetch("/login", json({ email, password }, { ip }))).status;
    // Successes are never counted.
    for (let i = 0; i < 4; i++) assert.equal(await login("ann@example.com", "right", "203.0.113.1"), 200);
    // Three failures for bob from three IPs, then bob is blocked from a fresh IP.
    assert.deepEqual([await login("bob@example.com", "w", "203.0.113.2"), await login("bob@example.com", "w", "203.0.113.3"), await login("bob@example.com", "w", "203.0.113.4")], [401, 401, 401]);
    assert.equal(await login("bob@example.com", "right", "198.51.100.50"), 429, "blocked even with the right password, from a fresh IP");
    assert.equal(await login("cat@example.com", "w", "198.51.100.50"), 401, "another account is unaffected");
    // Two failures for dan from one client, then dan succeeds: the account count is cleared...
    assert.deepEqual([await login("dan@example.com", "w", "203.0.113.9"), await login("dan@example.com", "w", "203.0.113.9")], [401, 401]);
    assert.equal(await login("dan@example.com", "right", "203.0.113.9"), 200);
    assert.deepEqual([await login("dan@example.com", "w", "203.0.113.9"), await login("dan@example.com", "w", "203.0.113.9")], [401, 401], "account count was cleared");
    // ...but the client's was not: 4 failures so far from 203.0.113.9, the 5th is the last allowed.
    assert.equal(await login("eve@example.com", "w", "203.0.113.9"), 401);
    assert.equal(await login("fay@example.com", "w", "203.0.113.9"), 429, "client limit (5 failures) holds despite the success");
  });
});

test("header conditions: only requests whose header matches are limited", () =>
  withTollgate({ config: one({ header: { "X-Plan": ["free", "trial"] } }) }, async (tg) => {
    const plan = (p) => ({ headers: p ? { "x-plan": p } : {} });
    assert.deepEqual(await statuses(tg, 3, "/p/x", plan("free")), [200, 200, 429]);
    assert.deepEqual(await statuses(tg, 3, "/p/x", { ip: "203.0.113.8", ...plan("gold, trial") }), [200, 200, 429], "any item of a list");
    assert.deepEqual(await statuses(tg, 3, "/p/x", { ip: "203.0.113.9", ...plan("gold") }), [200, 200, 200]);
    assert.deepEqual(await statuses(tg, 3, "/p/x", { ip: "203.0.113.10", ...plan(null) }), [200, 200, 200]);
  }));

test("an invalid config fails closed with 503", () =>
  withTollgate({ config: { rules: [{ name: "bad", path: "/x", limits: [] }] } }, async (tg) => {
    const res = await tg.fetch("/anything");
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("content-type"), "application/problem+json");
    assert.match((await res.json()).detail, /configuration is invalid/);
    assert.equal(tg.origin.received.length, 0, "nothing reaches the origin unlimited");
  }));

test("HEAD counts as GET, method overrides count, form bodies feed query conditions", () =>
  withTollgate(
    {
      config: config(
        rule("get", "/g", { methods: ["GET"], limits: limit(2, "60s") }),
        rule("del", "/d", { methods: ["DELETE"], limits: limit(1, "60s") }),
        rule("heavy", "/api/example", { query: { mode: "heavy" }, limits: limit(1, "60s") }),
      ),
    },
    async (tg) => {
      assert.deepEqual([(await tg.fetch("/g", { method: "HEAD" })).status, (await tg.fetch("/g")).status, (await tg.fetch("/g", { method: "HEAD" })).status], [200, 200, 429]);
      const override = { method: "POST", headers: { "x-http-method-override": "DELETE" } };
      assert.deepEqual([(await tg.fetch("/d", override)).status, (await tg.fetch("/d?_method=delete", { method: "POST", ip: "203.0.113.2" })).status], [200, 200]);
      assert.equal((await tg.fetch("/d", override)).status, 429);
      const heavy = form("x=1&mode=heavy");
      assert.deepEqual([(await tg.fetch("/api/example", heavy)).status, (await tg.fetch("/api/example", heavy)).status], [200, 429]);
      assert.equal(tg.origin.received.at(-1).body.toString(), "x=1&mode=heavy", "the form body reached the origin intact");
    },
  ));

// Issue 39 item 3: `/api/*` 10 a minute and `/api/export` 2 a minute per
// user; six exports (2 served, 4 refused), then 8 plain calls. The first
// refusal is the object's, asked of both rules at once, so `/api/*`
// counts it; the three after it are refused from the isolate's cache,
// asking no counter, so no rule counts them: 7 of the 8 plain calls are
// served (4 before: every refused export used the general budget).
test("a request refused from the cache by one rule is charged by no other", () => {
  const origin = mockOrigin();
  const api = config(
    rule("api", "/api/*", { key: ["header:x-user"], limits: limit(10, "1m") }),
    rule("export", "/api/export", { key: ["header:x-user"], limits: limit(2, "1m") }),
  );
  return withTollgate({ origin, config: api }, async (tg) => {
    const as = { headers: { "x-user": "ann" } };
    const exports = [];
    for (let i = 0; i < 6; i++) exports.push((await tg.fetch("/api/export", as)).status);
    assert.deepEqual(exports, [200, 200, 429, 429, 429, 429]);
    const plain = [];
    for (let i = 0; i < 8; i++) plain.push((await tg.fetch("/api/items", as)).status);
    assert.deepEqual(plain, [200, 200, 200, 200, 200, 200, 200, 429], "only the object's own refusal used the general budget");
    assert.equal(origin.received.length, 9, "2 exports and 7 plain calls reached the origin");
    const status = await tg.callObject("api\nheader:x-user=ann", { v: 1, op: "status", limits: [[10, 60_000]] });
    assert.equal(status.body.windows[0].used, 10);
  });
});

// Issue 39 item 4: a case-insensitive rule matches the path in any case,
// but `path:NAME:raw` counts the group as sent.
test("path:NAME:raw keeps the case sent; the match still folds", () =>
  withTollgate({ config: config(rule("link", "/chat/:link", { key: ["path:link:raw"], limits: limit(1, "1m") })) }, async (tg) => {
    assert.equal((await tg.fetch("/chat/AbC123")).status, 200);
    assert.equal((await tg.fetch("/chat/abc123")).status, 200, "another link: another count");
    assert.equal((await tg.fetch("/CHAT/AbC123")).status, 429, "the path matched in another case: the same link");
    const status = await tg.callObject("link\npath:link:raw=AbC123", { v: 1, op: "status", limits: [[1, 60_000]] });
    assert.equal(status.body.windows[0].used, 1);
  }));
