// Floods, loopback only, bounded. The hot-key flood runs by default; the
// 10,000-key flood is slow (one Durable Object and SQLite file per key) and
// runs only with TOLLGATE_FLOOD=1 (scripts/test --flood).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execSync } from "node:child_process";
import { startTollgate, sleep } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

/** Runs `tasks` with at most `limit` in flight; returns their results. */
async function pool(tasks, limit) {
  const results = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]();
      }
    }),
  );
  return results;
}

const status = (tg, path, ip) => async () => {
  const res = await tg.fetch(path, { ip });
  await res.arrayBuffer();
  return res.status;
};

test("2,000 requests on one hot key, 50 concurrent: exactly the limit allowed, 0 errors", async () => {
  const tg = await startTollgate();
  try {
    const started = Date.now();
    const results = await pool(Array.from({ length: 2_000 }, () => status(tg, "/api/example?mode=heavy", "203.0.113.50")), 50);
    const seconds = (Date.now() - started) / 1000;
    const count = (s) => results.filter((r) => r === s).length;
    assert.equal(count(200), 10);
    assert.equal(count(429), 1_990);
    assert.equal(results.length, count(200) + count(429), "no other status (0 errors)");
    assert.equal(tg.origin.received.length, 10);
    // One block episode per (rule, key) and minute: the first 429 is
    // written, the other 1,989 are counted (a line after a minute would
    // carry the count), never one line each.
    await tg.settled();
    const blocks = tg.logEvents().filter((e) => e.tollgate === "block" || e.tollgate === "summary");
    assert.ok(blocks.length >= 1 && blocks.length <= 1 + Math.floor(seconds / 60), `${blocks.length} lines in ${seconds} s`);
    assert.deepEqual([blocks[0].tollgate, blocks[0].rule, blocks[0].suppressed], ["block", "heavy-example", undefined]);
    console.log(`hot-key flood: 2000 requests in ${seconds.toFixed(1)} s (${Math.round(2000 / seconds)} req/s)`);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

function workerdRssKiB() {
  try {
    const out = execSync("ps -C workerd -o rss=", { encoding: "utf8" });
    return out.split("\n").filter(Boolean).reduce((a, b) => a + Number(b), 0);
  } catch {
    return null;
  }
}

test("10,000 distinct keys: bounded cache, every object's storage reclaimed by its alarm", { skip: process.env.TOLLGATE_FLOOD !== "1" && "set TOLLGATE_FLOOD=1 (scripts/test --flood)" }, async () => {
  const keys = Number(process.env.TOLLGATE_FLOOD_KEYS ?? 10_000);
  // Long enough that blocks from the last ~1,100 keys are still in force at the end.
  const windowMs = 120_000;
  const flood = config({ blocked_cache_capacity: 1_000 }, rule("flood", "/f", { timeout: "10s", limits: limit(1, `${windowMs}ms`) }));
  const tg = await startTollgate({ config: flood });
  const ip = (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  try {
    const rssBefore = workerdRssKiB();
    const started = Date.now();
    // Each key: one allowed request, then at once one blocked (which fills
    // the cache), 50 keys in flight.
    const pairs = await pool(
      Array.from({ length: keys }, (_, i) => async () => [await status(tg, "/f", ip(i))(), await status(tg, "/f", ip(i))()]),
      50,
    );
    const floodSeconds = (Date.now() - started) / 1000;
    const tally = {};
    for (const [a, b] of pairs) tally[`${a},${b}`] = (tally[`${a},${b}`] ?? 0) + 1;
    await tg.settled();
    const counterErrors = tg.logEvents().filter((e) => e.tollgate === "counter_error").length;
    console.log(`flood statuses (first,second): ${JSON.stringify(tally)}; counter errors: ${counterErrors}`);
    assert.equal(pairs.filter(([a]) => a === 200).length, keys);
    assert.equal(pairs.filter(([, b]) => b === 429).length, keys);
    const rssAfter = workerdRssKiB();
    // The cache holds at most 1,000 keys, so the block of the key 1,100 from
    // the end (still in force) was evicted. Reset two objects behind the
    // isolate's back: the evicted key asks its object (now allowed), the
    // newest one is still answered from the cache.
    const evicted = keys - 1_100;
    for (const i of [evicted, keys - 1]) {
      await tg.callObject(`flood\nip=${ip(i)}`, { v: 1, op: "reset", limits: [[1, windowMs]] });
    }
    assert.equal(await status(tg, "/f", ip(evicted))(), 200, "evicted from the capped cache");
    assert.equal(await status(tg, "/f", ip(keys - 1))(), 429, "still cached");
    // After the window plus margin, every alarm has deleted its object's storage.
    await sleep(windowMs + 5_000);
    const remaining = (
      await pool(
        Array.from({ length: keys }, (_, i) => async () => {
          const { body } = await tg.callObject(`flood\nip=${ip(i)}`, { v: 1, op: "status", limits: [[1, windowMs]] });
          return body.stored_hits > 0 || body.alarm_pending || body.rows_read > 0;
        }),
        50,
      )
    ).filter(Boolean).length;
    console.log(
      `flood: ${keys} keys, ${2 * keys} requests in ${floodSeconds.toFixed(1)} s; workerd RSS ${rssBefore} KiB -> ${rssAfter} KiB; objects with storage left after the window: ${remaining}`,
    );
    assert.equal(remaining, 0, "every object's storage was reclaimed");
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});
