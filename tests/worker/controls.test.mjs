// The controls registry (issue 28): `GET {prefix}/controls` lists every
// runtime ban and override in force, with its end, reason and who set it,
// and matches what `status` says for each key, after bans, overrides and
// lifts set through two isolates (edges) that share the limiter objects.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { withTollgate, ROOT } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const TOKEN = "a-long-admin-token-for-the-controls-test-0123456789";
const CONFIG = config(rule("api", "/api/*", { key: ["ip"], limits: limit(100, "1m") }), rule("search", "/search", { key: ["header:x-api-key"], limits: limit(50, "1m") }));

// The admin Worker's (issue 38): `edge` is kept from when each isolate of
// the zone served the API; every call now goes to the admin Worker.
const admin = (tg, edge, path, method = "GET") =>
  tg.admin(`/.tollgate${path}`, { method, ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });

async function json(res) {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}

test("Controls matches every key's status after changes through two isolates", { timeout: 120_000 }, () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN }, edges: 1 }, async (tg) => {
    // Set from edge 0 and edge 1, lifted from the other one.
    await json(await admin(tg, 0, "/ban?rule=api&ip=198.51.100.1&for=10m&reason=scraper%20%231", "POST"));
    await json(await admin(tg, 1, "/override?rule=api&ip=198.51.100.2&limit=1000/1m&reason=partner&by=ops-bot", "PUT"));
    await json(await admin(tg, 1, "/ban?rule=search&header:x-api-key=k-secret-1&for=1h&reason=abuse", "POST"));
    await json(await admin(tg, 1, "/ban?rule=api&ip=198.51.100.3&for=1h", "POST"));
    await json(await admin(tg, 0, "/ban?rule=api&ip=198.51.100.3", "DELETE"));
    await json(await admin(tg, 0, "/override?rule=search&header:x-api-key=k-secret-1&limit=5/1m&for=30m", "PUT"));

    const keys = [
      ["api", "ip=198.51.100.1"],
      ["api", "ip=198.51.100.2"],
      ["api", "ip=198.51.100.3"],
      ["search", "header:x-api-key=k-secret-1"],
    ];
    const expected = [];
    for (const [ruleName, key] of keys) {
      const status = await json(await admin(tg, 1, `/status?rule=${ruleName}&${key}`));
      if (status.ban) expected.push({ rule: ruleName, key_hash: status.key_hash, kind: "ban", until_ms: status.ban.until_ms, limits: [] });
      if (status.override) {
        expected.push({ rule: ruleName, key_hash: status.key_hash, kind: "override", until_ms: status.override.until_ms, limits: status.override.limits });
      }
    }
    assert.equal(expected.length, 4, "two bans and two overrides are in force");
    for (const edge of [0, 1]) {
      const listed = await json(await admin(tg, edge, "/controls"));
      const seen = listed.controls.map(({ rule, key_hash, kind, until_ms, limits }) => ({ rule, key_hash, kind, until_ms, limits }));
      const order = (a, b) => `${a.key_hash}${a.kind}`.localeCompare(`${b.key_hash}${b.kind}`);
      assert.deepEqual(seen.sort(order), [...expected].sort(order), `edge ${edge}`);
      assert.ok(listed.controls.every((c) => c.checked), "each checked against its key's object");
      const text = JSON.stringify(listed);
      assert.ok(!text.includes("198.51.100") && !text.includes("k-secret-1"), "no raw key in the listing");
      const byReason = Object.fromEntries(listed.controls.map((c) => [`${c.kind} ${c.reason}`, c.by]));
      assert.equal(byReason["ban scraper #1"], "api");
      assert.equal(byReason["override partner"], "ops-bot");
      assert.equal(byReason["ban abuse"], "api");
    }
    // The console's page of the same, with a session: not needed here; the
    // ban reaches the Worker through both edges.
    assert.equal((await tg.fetchVia(1, "/api/x", { ip: "198.51.100.1" })).status, 429);
    assert.equal((await tg.fetchVia(0, "/api/x", { ip: "198.51.100.3" })).status, 200, "the lifted ban");
  }));

test("GET /controls needs the token, and only GET", () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    assert.equal((await tg.fetch("/.tollgate/controls", { ip: "192.0.2.9" })).status, 401);
    assert.equal((await admin(tg, 0, "/controls", "POST")).status, 405);
    assert.deepEqual(await json(await admin(tg, 0, "/controls")), { controls: [] });
  }));

test("tollgate admin (the npm package's CLI) bans, lists, reports and lifts against the Worker", { timeout: 120_000 }, () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN }, miniflare: { host: "127.0.0.1", port: 0 } }, async (tg) => {
    const cli = (...args) =>
      new Promise((resolve) => {
        execFile(process.execPath, [join(ROOT, "packages", "tollgate", "bin", "tollgate.mjs"), "admin", tg.url.href, ...args], {
          env: { ...process.env, TOLLGATE_ADMIN_TOKEN: TOKEN },
        }, (error, stdout, stderr) => resolve({ code: error ? error.code : 0, stdout, stderr }));
      });
    let run = await cli("ban", "--rule", "search", "header:x-api-key=k+1 two", "--for", "10m", "--reason", "abuse + spam");
    assert.equal(run.code, 0, run.stderr);
    const banned = JSON.parse(run.stdout);
    assert.equal(banned.limits_source, "ban");
    assert.deepEqual([banned.reason, banned.by], ["abuse + spam", "cli"]);
    run = await cli("controls");
    const [listed] = JSON.parse(run.stdout).controls;
    assert.deepEqual([listed.kind, listed.reason, listed.by, listed.key_hash], ["ban", "abuse + spam", "cli", banned.key_hash]);
    // The key was sent exactly (a plus and a space, percent-encoded): the
    // Worker refuses that key, not another.
    assert.equal((await tg.fetch("/search", { headers: { "x-api-key": "k+1 two" } })).status, 429);
    assert.equal((await tg.fetch("/search", { headers: { "x-api-key": "k 1 two" } })).status, 200);
    run = await cli("status", "--rule", "search", "header:x-api-key=k+1 two");
    assert.equal(JSON.parse(run.stdout).ban.until_ms, listed.until_ms);
    run = await cli("lift", "--rule", "search", "header:x-api-key=k+1 two");
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse((await cli("controls")).stdout).controls, []);
    run = await cli("ban", "--rule", "nope", "ip=1.2.3.4", "--for", "1m");
    assert.equal(run.code, 1);
    assert.match(run.stderr, /404: no rule named `nope`/);
    const wrong = await new Promise((resolve) =>
      execFile(process.execPath, [join(ROOT, "packages", "tollgate", "bin", "tollgate.mjs"), "admin", tg.url.href, "controls"], { env: { ...process.env, TOLLGATE_ADMIN_TOKEN: "wrong" } }, (error, stdout, stderr) =>
        resolve({ code: error ? error.code : 0, stderr }),
      ),
    );
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /^401/);
  }));

// A config without the registry's binding (a wrangler.toml of a release
// before the split, deployed without `tollgate check`): the ban still
// applies in the key's object; the registry's failure is logged naming the
// binding to add, never a panic or a 500; the listing fails closed (503).
test("without the TOLLGATE_REGISTRY binding, a ban applies, the failure names the binding, and the listing answers 503", () =>
  withTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN }, workerOptions: { durableObjects: { LIMITER: { className: "Limiter", useSQLite: true } } } }, async (tg) => {
    await json(await admin(tg, 0, "/ban?rule=api&ip=198.51.100.9&for=10m", "POST"));
    assert.equal((await tg.fetch("/api/x", { ip: "198.51.100.9" })).status, 429, "the ban applies");
    await tg.settled();
    const failed = tg.logEvents().filter((e) => e.tollgate === "registry_error");
    assert.equal(failed.length, 1, JSON.stringify(tg.logEvents()));
    assert.match(JSON.stringify(failed[0]), /TOLLGATE_REGISTRY \(class Registry/);
    const listing = await admin(tg, 0, "/controls");
    assert.equal(listing.status, 503, await listing.text());
  }));
