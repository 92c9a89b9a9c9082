// The plan memo (src/pipeline/memo.rs): a blocked client's repeats replay its plan,
// but only when every input that plan read is the same again. Each case
// below changes one input after a client is blocked; a memo that ignored
// it would answer the cached 429 instead of the fresh plan's decision.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses, COMPATIBILITY_DATE } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const SECRET = "m0nitor";
const CONFIG = config(
  { exempt: { asns: [64512] } },
  rule("keyed", "/m", {
    query: { mode: "heavy" },
    query_sources: ["query", "cookie"],
    key: ["ip", "header:x-api-key"],
    limits: limit(2, "60s"),
    exempt: { header: { name: "x-monitor-key", secret: "MONITOR_KEY" } },
  }),
);
const BLOCKED = [200, 200, 429, 429];

test("a blocked client's repeat replays its plan only when the method, URL, cf fields and every header the plan read are the same", () =>
  withTollgate({ config: CONFIG, vars: { MONITOR_KEY: SECRET } }, async (tg) => {
    const as = (over = {}) => ({ ip: "203.0.113.7", headers: { "x-api-key": "a", ...over.headers }, cf: { asn: 64513 }, ...over.init });
    assert.deepEqual(await statuses(tg, 4, "/m?mode=heavy", as()), BLOCKED);
    // The very same request, with a header the plan never reads: replayed.
    assert.deepEqual(await statuses(tg, 2, "/m?mode=heavy", as({ headers: { "user-agent": "other" } })), [429, 429]);
    // A key header the plan read: another key, its own counter.
    assert.deepEqual(await statuses(tg, 4, "/m?mode=heavy", as({ headers: { "x-api-key": "b" } })), BLOCKED);
    // Another client address (a header the plan read).
    assert.deepEqual(await statuses(tg, 3, "/m?mode=heavy", { ...as(), ip: "203.0.113.8" }), [200, 200, 429]);
    // A header the plan read and found absent: the exemption's secret.
    assert.deepEqual(await statuses(tg, 3, "/m?mode=heavy", as({ headers: { "x-monitor-key": SECRET } })), [200, 200, 200]);
    // A cookie the plan read (the rule's query sources): `mode=light`
    // joins the parameters, the blocked key stays blocked...
    assert.deepEqual(await statuses(tg, 1, "/m?mode=heavy", as({ headers: { cookie: "mode=light" } })), [429]);
    // ...and a cookie alone, without the query, makes the rule match.
    assert.deepEqual(await statuses(tg, 1, "/m", as({ headers: { cookie: "mode=heavy" } })), [429]);
    assert.deepEqual(await statuses(tg, 1, "/m", as()), [200], "no cookie: the rule does not match");
    // Another URL: another plan (here, no rule takes it).
    assert.deepEqual(await statuses(tg, 2, "/m?mode=light", as()), [200, 200]);
    // A cf field the plan read: the exempt ASN.
    assert.deepEqual(await statuses(tg, 2, "/m?mode=heavy", as({ init: { cf: { asn: 64512 } } })), [200, 200]);
    // And the blocked client, unchanged, is still refused.
    assert.deepEqual(await statuses(tg, 2, "/m?mode=heavy", as()), [429, 429]);
    await tg.settled();
    const blocks = tg.logEvents().filter((e) => e.tollgate === "block");
    assert.ok(blocks.length >= 2, "block episodes are logged as before");
  }));

// Embedded over RPC (`env.TOLLGATE.check(request, { cf })`): the cf fields
// the app passes are part of what a replay must match.
const APP = `
export default {
  async fetch(request, env) {
    const asn = Number(request.headers.get("x-asn"));
    const decision = await env.TOLLGATE.check(request, { cf: { asn } });
    return decision.allowed ? new Response("app ok") : decision.response;
  },
};`;

test("over RPC, the app's cf fields are part of the fingerprint: the exempt ASN is not answered from a blocked plan", () =>
  withTollgate(
    {
      config: config({ exempt: { asns: [64512] } }, rule("api", "/api/*", { key: ["ip"], limits: limit(2, "60s") })),
      entry: "app",
      workers: [{ name: "app", modules: true, script: APP, compatibilityDate: COMPATIBILITY_DATE, serviceBindings: { TOLLGATE: "tollgate" } }],
    },
    async (tg) => {
      const as = (asn) => ({ ip: "203.0.113.7", headers: { "x-asn": String(asn) } });
      assert.deepEqual(await statuses(tg, 4, "/api/items", as(64513)), [200, 200, 429, 429]);
      assert.deepEqual(await statuses(tg, 2, "/api/items", as(64512)), [200, 200], "the exempt ASN");
      assert.deepEqual(await statuses(tg, 1, "/api/items", as(64513)), [429]);
      assert.equal(tg.origin.received.length, 0, "the app served them, tollgate forwarded nothing");
    },
  ));
