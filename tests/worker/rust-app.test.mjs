// A Rust app Worker that embeds tollgate as a crate (issue 18, pattern 3):
// examples/rust-app, built by scripts/build-example (scripts/test does),
// limits its own /api/* and /login with tollgate::embed and its own
// TOLLGATE config, counting in tollgate's Limiter exported from its Wasm.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { withTollgate, mockOrigin, exampleConfig, exampleObjects, ROOT } from "./harness.mjs";

const scriptPath = join(ROOT, "examples", "rust-app", "build", "index.js");
// Its own bindings: the app exports Limiter and Registry, not the standalone Worker's sink.
const options = () => ({ scriptPath, config: exampleConfig("rust-app"), origin: mockOrigin(), workerOptions: { durableObjects: exampleObjects("rust-app") } });

test("the Rust app is built (scripts/build-example rust-app)", () => {
  assert.ok(existsSync(scriptPath), `${scriptPath} is missing: run scripts/build-example rust-app`);
});

test("Rust app: the 11th call to its limited route is 429, its handler ran exactly 10 times, RateLimit fields on its responses", () =>
  withTollgate(options(), async (tg) => {
    for (let i = 1; i <= 10; i++) {
      const res = await tg.fetch("/api/items");
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { path: "/api/items" });
      assert.equal(res.headers.get("ratelimit-policy"), '"api";q=10;w=60');
      assert.match(res.headers.get("ratelimit"), new RegExp(`^"api";r=${10 - i};t=\\d+$`));
    }
    const blocked = await tg.fetch("/api/items");
    assert.equal(blocked.status, 429);
    assert.equal(blocked.headers.get("content-type"), "application/problem+json");
    await blocked.arrayBuffer();
    assert.deepEqual(await (await tg.fetch("/stats")).json(), { served: 10 });
    assert.equal((await tg.fetch("/API/items/")).status, 429, "the same canonicalization as the standalone Worker");
    assert.equal((await tg.fetch("/")).status, 200, "its other routes are not limited");
    assert.equal(tg.origin.received.length, 0);
  }));

test("Rust app: failures-only login settled with the app's status: successes released, the 6th failure is 429", () =>
  withTollgate(options(), async (tg) => {
    const login = (password) =>
      tg.fetch("/login", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email: "a@example.com", password }) });
    for (let i = 0; i < 3; i++) assert.equal((await login("right")).status, 200);
    for (let i = 0; i < 5; i++) assert.equal((await login("wrong")).status, 401, "the app read the body after check");
    assert.equal((await login("right")).status, 429);
    await tg.settled();
    assert.ok(!tg.logs().includes("counter_error"));
  }));
