// Fault injection: the counter throws, hangs or fails its storage. Each
// rule's fail policy holds, nothing answers 500, nothing hangs, and a
// counter that recovers is used again at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTollgate, eventsSince } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const CONFIG = config(
  rule("open", "/open", { limits: limit(5, "60s"), on_error: "allow", timeout: "300ms" }),
  rule("closed", "/closed", { limits: limit(5, "60s"), on_error: "deny", timeout: "300ms" }),
);

const described = { throw: "throws", hang: "hangs", storage: "fails its storage" };
for (const mode of ["throw", "hang", "storage"]) {
  test(`counter ${described[mode]}: fail open reaches the origin, fail closed answers 503, never 500 or a hung request`, async () => {
    const tg = await startTollgate({ config: CONFIG, faults: true });
    try {
      await tg.setFault(mode);
      const started = Date.now();
      const open = await tg.fetch("/open");
      assert.equal(open.status, 200);
      assert.equal(await open.text(), JSON.stringify({ method: "GET", path: "/open", query: "" }));
      const closed = await tg.fetch("/closed");
      assert.equal(closed.status, 503);
      assert.equal(closed.headers.get("retry-after"), "1");
      assert.equal(closed.headers.get("content-type"), "application/problem+json");
      assert.match((await closed.json()).detail, /Rule `closed` cannot be checked right now/);
      assert.ok(Date.now() - started < 3_000, "bounded by the 300 ms timeout");
      assert.deepEqual(tg.origin.received.map((r) => r.path), ["/open"], "fail closed: nothing reached the origin");
      const errors = (await eventsSince(tg, 0, 2)).filter((e) => e.tollgate === "counter_error");
      assert.deepEqual(errors.map((e) => [e.rule, e.decision]), [["open", "allow"], ["closed", "deny"]]);
      if (mode === "hang") assert.match(errors[0].error, /no answer within 300 ms/);
      // The failure is typed: a throw is unreachable, a hang a timeout, a 500 a refusal.
      const kind = { throw: "unreachable", hang: "timeout", storage: "refused" }[mode];
      assert.deepEqual(errors.map((e) => e.failure), [kind, kind]);
    } finally {
      await tg.dispose();
      tg.cleanup();
    }
  });
}

test("a counter that recovers is used again at once, with no count lost", async () => {
  const tg = await startTollgate({ config: CONFIG, faults: true });
  const status = async (rule) =>
    (await tg.callObject(`${rule}\nip=203.0.113.7`, { v: 1, op: "status", limits: [[5, 60_000]] })).body;
  try {
    assert.equal((await tg.fetch("/closed")).status, 200);
    assert.equal((await tg.fetch("/closed")).status, 200);
    await tg.setFault("throw");
    assert.equal((await tg.fetch("/closed")).status, 503);
    assert.equal((await tg.fetch("/open")).status, 200);
    await tg.setFault("ok");
    assert.equal((await tg.fetch("/closed")).status, 200, "the very next request uses the counter");
    assert.equal((await status("closed")).stored_hits, 3, "the two hits before the fault are still counted");
    assert.deepEqual(
      [await tg.fetch("/closed"), await tg.fetch("/closed"), await tg.fetch("/closed")].map((r) => r.status),
      [200, 200, 429],
      "exactly 5 allowed in all",
    );
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});
