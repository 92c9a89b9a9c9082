// Calendar windows (issue 53) in workerd: a day in Asia/Tokyo refuses with
// Retry-After up to Tokyo's midnight and is back after it. The clock is set
// through clock-entry.mjs (the Worker and its objects read one `Date.now`).
// The period arithmetic (DST days, month lengths) is tested natively
// (count::calendar, testing::pair::calendar); this shows the built Worker
// and its Durable Object count by it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, withTollgate, statuses } from "./harness.mjs";
import { config, rule } from "./builders.mjs";

const CLOCK_ENTRY = join(ROOT, "tests", "worker", "clock-entry.mjs");
const DAY = 86_400_000;
const TOKYO = 9 * 3_600_000; // UTC+9, no DST

/** The first Tokyo midnight after `now` (Unix ms). */
const nextTokyoMidnight = (now) => Math.floor((now + TOKYO) / DAY) * DAY + DAY - TOKYO;

async function setClock(tg, at) {
  const res = await tg.fetch(`/__test/clock?at=${at}`);
  const now = Number(await res.text());
  assert.ok(Math.abs(now - at) < 1_000, `the Worker's clock is at ${now}, not ${at}`);
}

const school = config(
  rule("school", "/ask", {
    key: ["ip"],
    ratelimit_headers: true,
    limits: [
      { requests: 10, window: "1m" },
      { requests: 3, window: "day", time_zone: "Asia/Tokyo" },
    ],
  }),
);

test("a calendar day in Asia/Tokyo refuses until Tokyo's midnight, with Retry-After to it, and is back after it", () =>
  withTollgate({ scriptPath: CLOCK_ENTRY, config: school }, async (tg) => {
    const midnight = nextTokyoMidnight(Date.now());
    await setClock(tg, midnight - 30_000);
    assert.deepEqual(await statuses(tg, 4, "/ask"), [200, 200, 200, 429], "3 a day");
    const refused = await tg.fetch("/ask");
    assert.equal(refused.status, 429);
    const retry = Number(refused.headers.get("retry-after"));
    assert.ok(retry >= 28 && retry <= 30, `Retry-After ${retry}: the seconds to Tokyo's midnight, not a rolling day`);
    assert.equal(refused.headers.get("ratelimit"), `"school/day";r=0;t=${retry}`);
    assert.equal(refused.headers.get("ratelimit-policy"), '"school/60s";q=10;w=60, "school/day";q=3', "no w for a calendar day");

    await setClock(tg, midnight - 2_000);
    const late = await tg.fetch("/ask");
    assert.equal(late.status, 429, "still the same day");
    assert.ok(Number(late.headers.get("retry-after")) <= 2);

    await setClock(tg, midnight + 1_000);
    assert.deepEqual(await statuses(tg, 4, "/ask"), [200, 200, 200, 429], "a new day: 3 again");
    const next = await tg.fetch("/ask");
    const wait = Number(next.headers.get("retry-after"));
    assert.ok(wait > DAY / 1000 - 10 && wait <= DAY / 1000, `the next wait is to the next midnight: ${wait}`);
    assert.equal(tg.origin.received.length, 6, "the origin saw the 6 admitted");
  }));

test("300 a Tokyo day beside 10 a minute: exactly 300 in the local day, the 301st refused with Retry-After to Tokyo's midnight", { timeout: 120_000 }, () =>
  withTollgate(
    { scriptPath: CLOCK_ENTRY, config: config(rule("big", "/big", { key: ["ip"], ratelimit_headers: true, limits: [{ requests: 10, window: "1m" }, { requests: 300, window: "day", time_zone: "Asia/Tokyo" }] })) },
    async (tg) => {
      const midnight = nextTokyoMidnight(Date.now());
      const start = midnight - 3 * 3_600_000;
      // 10 a minute for 30 minutes: every one admitted.
      for (let minute = 0; minute < 30; minute++) {
        await setClock(tg, start + minute * 61_000);
        assert.deepEqual(await statuses(tg, 10, "/big"), Array(10).fill(200), `minute ${minute}`);
      }
      const at = start + 30 * 61_000;
      await setClock(tg, at);
      const refused = await tg.fetch("/big");
      assert.equal(refused.status, 429, "the 301st, in a fresh minute");
      const retry = Number(refused.headers.get("retry-after"));
      const toMidnight = (midnight - at) / 1000;
      assert.ok(retry <= toMidnight && retry >= toMidnight - 5, `Retry-After ${retry}: to Tokyo's midnight (${toMidnight} s)`);
      assert.match(refused.headers.get("ratelimit"), /^"big\/day";r=0;t=\d+$/, "refused by the day");
      assert.equal(tg.origin.received.length, 300, "the origin saw exactly 300");
      await setClock(tg, midnight + 1_000);
      assert.equal((await tg.fetch("/big")).status, 200, "back at Tokyo's midnight");
    },
  ));

test("a config naming an unknown time zone is refused, naming the rule and the field", () =>
  withTollgate(
    { scriptPath: CLOCK_ENTRY, config: config(rule("school", "/ask", { limits: [{ requests: 3, window: "day", time_zone: "Asia/Atlantis" }] })) },
    async (tg) => {
      const res = await tg.fetch("/ask");
      assert.notEqual(res.status, 200);
      assert.match(tg.logs(), /school[^\n]*limits\[0\]\.time_zone[^\n]*unknown time zone `Asia\/Atlantis`/);
    },
  ));

const TOKEN = "s3cret-admin-token-for-calendar";
const adminCall = async (tg, path, method = "GET") => {
  const res = await tg.fetch(path, { method, ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, body: await res.json() };
};

test("a runtime override on a calendar rule stays on Tokyo's calendar; status says its zone and local reset", () =>
  withTollgate({ scriptPath: CLOCK_ENTRY, config: school, admin: true, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } }, async (tg) => {
    const ip = "203.0.113.53";
    const plain = await adminCall(tg, `/.tollgate/status?rule=school&ip=${ip}`);
    assert.equal(plain.status, 200, JSON.stringify(plain.body));
    assert.deepEqual(plain.body.limits, [[10, 60000], [3, "day@Asia/Tokyo"]], "a calendar window as its calendar, not a storage length");
    // The admin Worker reads the real clock (only the zone's is moved).
    const realMidnight = nextTokyoMidnight(Date.now());
    assert.equal(plain.body.limits_text[0], "10 per 1m");
    assert.match(plain.body.limits_text[1], /^3 a day \(Asia\/Tokyo\), resets at \d{4}-\d\d-\d\dT00:00\+09:00$/);
    assert.deepEqual(
      { ...plain.body.periods[0], start_ms: undefined },
      { limit: 3, calendar: "day", time_zone: "Asia/Tokyo", start_ms: undefined, end_ms: realMidnight, resets_at: plain.body.limits_text[1].split("resets at ")[1] },
    );

    const midnight = nextTokyoMidnight(Date.now());
    await setClock(tg, midnight - 30_000);
    // `5/day`: the rule's own zone. The override replaces both windows.
    const set = await adminCall(tg, `/.tollgate/override?rule=school&ip=${ip}&limit=5/day`, "PUT");
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.deepEqual([set.body.limits, set.body.limits_source, set.body.override.limits], [[[5, "day@Asia/Tokyo"]], "override", [[5, "day@Asia/Tokyo"]]]);
    assert.match(set.body.limits_text[0], /^5 a day \(Asia\/Tokyo\), resets at .*T00:00\+09:00$/);
    assert.deepEqual(await statuses(tg, 6, "/ask", { ip }), [200, 200, 200, 200, 200, 429], "exactly 5 in the local day");
    const refused = await tg.fetch("/ask", { ip });
    const retry = Number(refused.headers.get("retry-after"));
    assert.ok(retry >= 1 && retry <= 30, `Retry-After ${retry}: to Tokyo's midnight (a rolling day would say ~93600)`);
    const listed = await adminCall(tg, "/.tollgate/controls");
    assert.deepEqual(listed.body.controls.map((c) => [c.rule, c.kind, c.limits]), [["school", "override", [[5, "day@Asia/Tokyo"]]]]);
    assert.match(listed.body.controls[0].limits_text[0], /^5 a day \(Asia\/Tokyo\), resets at \d{4}-\d\d-\d\dT00:00\+09:00$/, "in words, as status says it");

    await setClock(tg, midnight + 1_000);
    assert.deepEqual(await statuses(tg, 6, "/ask", { ip }), [200, 200, 200, 200, 200, 429], "the next local day: 5 again");
    const next = await tg.fetch("/ask", { ip });
    const wait = Number(next.headers.get("retry-after"));
    assert.ok(wait > DAY / 1000 - 10 && wait <= DAY / 1000, `to the next midnight: ${wait}`);

    const rolling = await adminCall(tg, `/.tollgate/override?rule=school&ip=${ip}&limit=5/1d`, "PUT");
    assert.deepEqual(rolling.body.limits, [[5, 86400000]], "a rolling override is still the operator's to give");
    const nozone = await adminCall(tg, `/.tollgate/override?rule=school&ip=${ip}&limit=5/day@Mars/Olympus`, "PUT");
    assert.equal(nozone.status, 400);
    assert.match(JSON.stringify(nozone.body), /unknown time zone `Mars\/Olympus`/);
  }));
