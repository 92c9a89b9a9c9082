// Daily token budgets of realistic size on the default algorithm (issue 37
// item 4): a sliding log of 1,000,000 a day, which the config refused
// before (above 10,000 it sent such budgets to GCRA, which admits up to
// 2N − 1 in a day). The built Worker in workerd, real SQLite objects; the
// origin mocked at the network edge, reporting 300,000 tokens per call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, mockOrigin } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const DAY_S = 86_400;

/** An origin that reports 300,000 tokens per call in `x-usage-tokens`. */
const reporting = () =>
  mockOrigin(async (_request, record) =>
    record.path.startsWith("/v1/")
      ? new Response(JSON.stringify({ ok: true }), { headers: { "content-type": "application/json", "x-usage-tokens": "300000" } })
      : undefined,
  );

/** The `ratelimit` and `ratelimit-policy` parameters of rule `tokens`. */
function fields(res) {
  const params = (name) =>
    Object.fromEntries(
      (res.headers.get(name) ?? "")
        .split(";")
        .slice(1)
        .map((p) => p.split("="))
        .map(([k, v]) => [k, v.startsWith('"') ? JSON.parse(v) : Number(v)]),
    );
  return { name: (res.headers.get("ratelimit") ?? "").split(";")[0], rate: params("ratelimit"), policy: params("ratelimit-policy") };
}

const call = (tg) => tg.fetch("/v1/chat", { headers: { "x-api-key": "sk-school-7" } });

for (const [how, fieldsOf, unit] of [
  ["the origin's reported usage (metering, reserve = max = 300,000)", { counting: { mode: "response" }, metering: { header: "x-usage-tokens", reserve: 300_000, max: 300_000 } }, { qu: "x-usage-tokens" }],
  ["a fixed cost of 300,000", { cost: 300_000 }, {}],
]) {
  test(`a 1,000,000-token daily budget on the default algorithm serves exactly 3 calls of 300,000 by ${how}; the 4th is refused with the day's RateLimit fields`, () => {
    const cfg = config(rule("tokens", "/v1/*", { key: ["header:x-api-key"], limits: limit(1_000_000, "1d"), ratelimit_headers: true, ...fieldsOf }));
    return withTollgate({ config: cfg, origin: reporting() }, async (tg) => {
      const served = [];
      for (let i = 0; i < 3; i++) {
        const res = await call(tg);
        await res.arrayBuffer();
        served.push(res);
      }
      assert.deepEqual(served.map((r) => r.status), [200, 200, 200], "three calls of 300,000 fit in 1,000,000");
      assert.deepEqual(served.map((r) => fields(r).rate.r), [700_000, 400_000, 100_000], "each call's 300,000 counted");
      assert.deepEqual(fields(served[0]).policy, { q: 1_000_000, w: DAY_S, ...unit }, "the policy is the day's million");
      const fourth = await call(tg);
      const problem = await fourth.json();
      assert.equal(fourth.status, 429, JSON.stringify(problem));
      const retry = Number(fourth.headers.get("retry-after"));
      assert.ok(retry > DAY_S - 60 && retry <= DAY_S, `until the first call is a day old: ${retry} s`);
      const { name, rate, policy } = fields(fourth);
      assert.equal(name, '"tokens"');
      assert.deepEqual(policy, { q: 1_000_000, w: DAY_S, ...unit });
      assert.equal(rate.r, 100_000, "100,000 left, not enough for 300,000");
      assert.equal(rate.t, retry, "t is the wait");
      assert.equal(tg.origin.received.length, 3, "the origin saw three calls");
      const status = await tg.callObject("tokens\nheader:x-api-key=sk-school-7", { v: 1, op: "status", limits: [[1_000_000, DAY_S * 1_000]] });
      assert.equal(status.status, 200);
      assert.equal(status.body.stored_hits, 3, "an exact log of three entries: a small log is stored as before");
    });
  });
}
