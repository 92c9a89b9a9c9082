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

test("a config naming an unknown time zone is refused, naming the rule and the field", () =>
  withTollgate(
    { scriptPath: CLOCK_ENTRY, config: config(rule("school", "/ask", { limits: [{ requests: 3, window: "day", time_zone: "Asia/Atlantis" }] })) },
    async (tg) => {
      const res = await tg.fetch("/ask");
      assert.notEqual(res.status, 200);
      assert.match(tg.logs(), /school[^\n]*limits\[0\]\.time_zone[^\n]*unknown time zone `Asia\/Atlantis`/);
    },
  ));
