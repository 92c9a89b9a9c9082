// Turning the limiter against its users (issue 16): each test pins one way
// a client could make tollgate hurt someone else, and fails on the code
// that allowed it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses } from "./harness.mjs";

test("shadow mode never answers 503, whatever on_error says", () =>
  withTollgate(
    {
      faults: true,
      config: {
        rules: [
          { name: "shadow-closed", path: "/shadow", action: "log", on_error: "deny", limits: [{ requests: 1, window: "1m" }] },
          { name: "enforced-closed", path: "/enforced", on_error: "deny", limits: [{ requests: 1, window: "1m" }] },
        ],
      },
    },
    async (tg) => {
      await tg.setFault("throw");
      assert.deepEqual(await statuses(tg, 3, "/shadow"), [200, 200, 200], "the counter is down: shadow forwards");
      assert.deepEqual(await statuses(tg, 1, "/enforced"), [503], "a blocking rule still fails closed");
      const events = tg.logEvents().filter((e) => e.rule === "shadow-closed");
      assert.ok(events.length >= 3 && events.every((e) => e.tollgate === "counter_error" && e.decision === "allow"));
    },
  ));

test("CORS preflights are not counted unless a rule lists OPTIONS", () =>
  withTollgate(
    {
      config: {
        rules: [
          { name: "quota", path: "/api/schools/:school/*", key: ["path:school"], limits: [{ requests: 3, window: "1h" }] },
          { name: "preflights", path: "/preflight", methods: ["OPTIONS"], limits: [{ requests: 2, window: "1h" }] },
        ],
      },
    },
    async (tg) => {
      const preflight = { method: "OPTIONS", headers: { origin: "https://evil.example", "access-control-request-method": "POST" } };
      assert.deepEqual(await statuses(tg, 20, "/api/schools/42/run", preflight), Array(20).fill(200));
      assert.deepEqual(await statuses(tg, 4, "/api/schools/42/run", { method: "POST" }), [200, 200, 200, 429], "the quota is whole");
      assert.deepEqual(await statuses(tg, 3, "/preflight", { method: "OPTIONS" }), [200, 200, 429], "a rule may ask for them");
    },
  ));
