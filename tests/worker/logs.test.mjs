// Issue 28, logs that say who and what: a refusing line carries the method,
// the rule's route, where the client is and why it was refused (never a raw
// key or the path as sent), and a suppressed-repeat summary is written at
// the next request the isolate serves once its episode has ended, whatever
// that request is. The release build in workerd.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses, sleep } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const CF = { country: "NL", colo: "AMS", asn: 64500 };

test("a block line says who and what: method, route, country, colo, ASN, reason; never the path as sent", () =>
  withTollgate({ config: config(rule("items", "/api/items/:id", { key: ["ip"], limits: limit(1, "1m") })) }, async (tg) => {
    const init = { method: "POST", ip: "203.0.113.40", cf: CF };
    assert.deepEqual(await statuses(tg, 2, "/api/items/acct-7731-secret", init), [200, 429]);
    await tg.settled();
    const block = tg.logEvents().find((e) => e.tollgate === "block");
    assert.ok(block, tg.logs());
    assert.deepEqual(
      [block.rule, block.method, block.route, block.country, block.colo, block.asn, block.reason],
      ["items", "POST", "/api/items/:id", "NL", "AMS", 64500, "limit"],
    );
    assert.match(block.key_hash, /^[0-9a-f]{16}$/);
    assert.ok(!tg.logs().includes("acct-7731-secret"), "the path as sent (it may hold a key) is never logged");
    assert.ok(!tg.logs().includes("203.0.113.40"), "nor the address");
  }));

test("a missing key and a counter that fails closed say why", () =>
  withTollgate(
    {
      faults: true,
      config: config(
        rule("tenant", "/t/export", { key: ["header:x-tenant"], on_missing_key: "reject" }),
        rule("strict", "/strict", { key: ["ip"], on_error: "deny", timeout: "300ms" }),
      ),
    },
    async (tg) => {
      assert.equal((await tg.fetch("/t/export", { method: "GET", cf: CF })).status, 400);
      await tg.setFault("throw");
      assert.equal((await tg.fetch("/strict", { method: "PUT", cf: CF })).status, 503);
      await tg.settled();
      const missing = tg.logEvents().find((e) => e.tollgate === "missing_key");
      assert.deepEqual([missing.reason, missing.method, missing.route, missing.country], ["missing_key", "GET", "/t/export", "NL"]);
      const failed = tg.logEvents().find((e) => e.tollgate === "counter_error");
      assert.deepEqual([failed.decision, failed.reason, failed.method, failed.route, failed.colo], ["deny", "fail_closed", "PUT", "/strict", "AMS"]);
      assert.equal(failed.failure, "unreachable", "a counter that threw: typed as unreachable");
    },
  ));

test("an ended episode's summary comes with the next request, whatever it is", () =>
  withTollgate({ config: config({ log_episode: "1s" }, rule("items", "/api/items", { key: ["ip"], limits: limit(1, "1m") })) }, async (tg) => {
    const ip = "203.0.113.41";
    assert.deepEqual(await statuses(tg, 4, "/api/items", { ip }), [200, 429, 429, 429]);
    await tg.settled();
    const blocks = tg.logEvents().filter((e) => e.tollgate === "block");
    assert.equal(blocks.length, 1, "one line per episode; the repeats are counted");
    // Past the episode's end (1 s from the first block, as the Worker's
    // clock reads it; sleeping only ever overshoots), nothing is written
    // until some request comes.
    await sleep(1_500);
    await tg.settled();
    assert.equal(tg.logEvents().filter((e) => e.tollgate === "summary").length, 0, "no request, no line yet");
    // A request no rule concerns (the fast path) brings the summary.
    assert.equal((await tg.fetch("/elsewhere", { ip: "198.51.100.9" })).status, 200);
    await tg.settled();
    const summaries = tg.logEvents().filter((e) => e.tollgate === "summary");
    assert.equal(summaries.length, 1, tg.logs());
    assert.deepEqual(
      [summaries[0].event, summaries[0].rule, summaries[0].key_hash, summaries[0].suppressed, summaries[0].period_ms],
      ["block", "items", blocks[0].key_hash, 2, 1000],
    );
  }));

test("a ban's block line says ban; a full window's says limit (the same rule, two keys)", () => {
  const token = "s3cret-admin-token-for-logs";
  return withTollgate({ config: config(rule("api", "/api/*", { key: ["ip"], limits: limit(1, "1m") })), vars: { TOLLGATE_ADMIN_TOKEN: token } }, async (tg) => {
    const banned = "203.0.113.61";
    const full = "203.0.113.62";
    const ban = await tg.fetch(`/.tollgate/ban?rule=api&ip=${banned}&for=1h`, { method: "POST", ip: "192.0.2.1", headers: { authorization: `Bearer ${token}` } });
    assert.equal(ban.status, 200, await ban.text());
    assert.equal((await tg.fetch("/api/x", { ip: banned, cf: CF })).status, 429);
    assert.deepEqual(await statuses(tg, 2, "/api/x", { ip: full, cf: CF }), [200, 429]);
    await tg.settled();
    const reasons = tg.logEvents().filter((e) => e.tollgate === "block").map((e) => e.reason);
    assert.deepEqual(reasons.sort(), ["ban", "limit"], tg.logs());
  });
});
