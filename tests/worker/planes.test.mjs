// Issue 38: the admin plane off the zone. Two built Workers in workerd: the
// zone's (build/, no `admin` feature) and the admin Worker (build-admin/,
// `scripts/build admin`), bound to the zone Worker's Durable Objects as
// wrangler.admin.toml binds them. Here the admin Worker answers only on its
// own host (admin.example.com): every spelling of the admin prefix sent to
// the zone reaches neither the console, the admin API nor the origin; the
// admin Worker serves both with the same tokens, counts nothing and
// forwards nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";
import { LEAVING } from "./spellings.mjs";

const TOKEN = "planes-test-token-0123456789abcdef0123456789";
const CONFIG = config(rule("api", "/api/*", { key: ["ip"], limits: limit(3, "1m") }));
const VARS = { TOLLGATE_ADMIN_TOKEN: TOKEN };
/** The admin Worker on its host only: the zone's Worker gets every other request. */
const OWN_HOST = { config: CONFIG, vars: VARS, adminRoutes: [] };

/**
 * The admin prefix as a client may spell it: case, percent-encoding (one
 * and two rounds, `%2e`), double slashes, dot segments in and out of it,
 * `;` parameters, backslashes, a trailing slash or none; and the spellings
 * that enter it and leave it (credentials.test.mjs's).
 */
export const PREFIX_SPELLINGS = [
  "/.tollgate",
  "/.tollgate/",
  "/.tollgate/rules",
  "/.tollgate/status?rule=api&ip=203.0.113.7",
  "/.tollgate/ui/rules",
  "/.tollgate/ui/signin",
  "/.TOLLGATE/rules",
  "/.Tollgate/ui/rules",
  "/%2etollgate/rules",
  "/%2Etollgate/ui/rules",
  "/%252etollgate/rules",
  "/%2e%74%6f%6c%6c%67%61%74%65/rules",
  "/.tollgat%65/rules",
  "//.tollgate/rules",
  "/.tollgate//rules",
  "///.tollgate///ui//rules",
  "/./.tollgate/rules",
  "/api/../.tollgate/rules",
  "/api/..%2f.tollgate/rules",
  "/api/%2e%2e/.tollgate/rules",
  "/.tollgate/./rules",
  "/.tollgate;x=1/rules",
  "/.tollgate/rules;jsessionid=1",
  "/.tollgate;/ui;/rules",
  "/.tollgate%2frules",
  "/.tollgate%5crules",
  "/.tollgate/rules/",
  "/.tollgate/ui/",
  ...LEAVING,
];

const CREDENTIALS = { authorization: `Bearer ${TOKEN}`, cookie: "tollgate_session=v1.x.y; app=1" };

test("the zone answers every spelling of the admin prefix with its own 404: no console, no admin API, no origin", () =>
  withTollgate(OWN_HOST, async (tg) => {
    for (const path of PREFIX_SPELLINGS) {
      for (const method of ["GET", "POST", "DELETE"]) {
        const res = await tg.fetch(path, { method, headers: CREDENTIALS });
        const body = await res.text();
        assert.equal(res.status, 404, `${method} ${path}: ${body}`);
        assert.equal(res.headers.get("content-type"), "application/problem+json", `${method} ${path}: tollgate's own answer`);
        assert.doesNotMatch(body, /rules|controls|sign|<html/i, `${method} ${path}: nothing of the console or the API`);
        assert.equal(res.headers.get("set-cookie"), null, `${method} ${path}`);
      }
    }
    assert.deepEqual(tg.origin.received.map((r) => r.url), [], "no spelling reached the origin");
    // The zone still forwards everything else, without tollgate's credentials.
    const forwarded = await tg.fetch("/api/echo", { headers: CREDENTIALS });
    assert.equal(forwarded.status, 200);
    const [seen] = tg.origin.received;
    assert.equal(seen.headers.authorization, undefined, "the admin bearer token is stripped");
    assert.equal(seen.headers.cookie, "app=1", "the session cookie is stripped, the app's kept");
    assert.ok(!tg.logEvents().some((e) => e.tollgate.startsWith("admin")), "the zone ran no admin request");
  }));

test("the admin Worker serves the console and the API with the same tokens, on the zone's objects", () =>
  withTollgate(OWN_HOST, async (tg) => {
    const auth = { headers: { authorization: `Bearer ${TOKEN}` }, ip: "192.0.2.1" };
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await tg.fetch("/api/x")).status);
    assert.deepEqual(statuses, [200, 200, 200, 429], "the zone counts");
    const status = await tg.admin("/.tollgate/status?rule=api&ip=203.0.113.7", auth);
    assert.equal(status.status, 200);
    assert.equal((await status.json()).windows[0].used, 3, "the admin Worker reads the zone's counter");
    const rules = await tg.admin("/.tollgate/rules", auth);
    assert.deepEqual((await rules.json()).rules.map((r) => r.name), ["api"]);
    assert.equal((await tg.admin("/.tollgate/rules", { ...auth, headers: { authorization: "Bearer wrong" } })).status, 401);
    const signIn = await tg.admin("/.tollgate/", { ip: "192.0.2.1" });
    assert.equal(signIn.status, 200);
    assert.match(await signIn.text(), /<form/i, "the console's sign-in page");
    const reset = await tg.admin("/.tollgate/reset?rule=api&ip=203.0.113.7", { ...auth, method: "POST" });
    assert.equal(reset.status, 200);
    // The reset went to the object: the zone's next request counts again
    // (its isolate cached the block only until the window's end or the
    // object's answer, docs/guide.md "The admin Worker").
    const after = await tg.admin("/.tollgate/status?rule=api&ip=203.0.113.7", auth);
    assert.equal((await after.json()).windows[0].used, 0);
    // Everything but the prefix is not the admin Worker's: nothing counted, nothing forwarded.
    const before = tg.origin.received.length;
    for (const path of ["/api/x", "/", "/.tollgatex", "/ui/rules"]) {
      const res = await tg.admin(path);
      assert.equal(res.status, 404, path);
      assert.equal(res.headers.get("content-type"), "application/problem+json", path);
    }
    assert.equal(tg.origin.received.length, before, "the admin Worker forwards nothing");
    const still = await tg.admin("/.tollgate/status?rule=api&ip=203.0.113.7", auth);
    assert.equal((await still.json()).windows[0].used, 0, "the admin Worker's host burns no client's quota");
  }));

test("the admin Worker without a token or Access answers 404 under the prefix too", () =>
  withTollgate({ config: CONFIG, adminRoutes: [] }, async (tg) => {
    for (const path of ["/.tollgate/rules", "/.tollgate/", "/api/x"]) {
      const res = await tg.admin(path, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 404, path);
    }
    assert.equal(tg.origin.received.length, 0);
  }));

test("an invalid config failing open still keeps the admin prefix off the origin; the admin Worker fails closed", () =>
  withTollgate(
    { config: { on_invalid_config: "allow", rules: [{ name: "heavy", path: "/x", limts: [{ requests: 1, window: "1m" }] }] }, vars: VARS, adminRoutes: [] },
    async (tg) => {
      for (const path of ["/.tollgate/rules", "/.TOLLGATE/ui/rules", "//%2etollgate/status"]) {
        const res = await tg.fetch(path, { headers: CREDENTIALS });
        assert.equal(res.status, 404, path);
      }
      assert.equal(tg.origin.received.length, 0, "no spelling of the prefix forwarded");
      assert.equal((await tg.fetch("/x")).status, 200, "everything else forwarded unlimited");
      assert.equal(tg.origin.received.length, 1);
      const admin = await tg.admin("/.tollgate/rules", { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(admin.status, 503, "the admin Worker has no origin to fail open to");
      assert.equal(tg.origin.received.length, 1);
    },
  ));
