// The first hour (issue 17): what a config mistake does at runtime.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses } from "./harness.mjs";

// A typo (`limts`) makes the whole config invalid.
const typo = (extra) => ({ ...extra, rules: [{ name: "heavy", path: "/x", limts: [{ requests: 1, window: "1m" }] }] });

test("an invalid config with on_invalid_config = deny answers 503 and logs once, without details to clients", () =>
  withTollgate({ config: typo({ on_invalid_config: "deny" }) }, async (tg) => {
    for (const path of ["/x", "/unrelated", "/x"]) {
      const res = await tg.fetch(path);
      assert.equal(res.status, 503);
      const body = await res.text();
      assert.match(body, /configuration is invalid/);
      assert.doesNotMatch(body, /limts|heavy/, "no config detail reaches clients");
    }
    assert.equal(tg.origin.received.length, 0);
    const logged = tg.logEvents().filter((e) => e.tollgate === "config_error");
    assert.equal(logged.length, 1, "logged once per isolate per minute, not per request");
    assert.match(logged[0].errors, /rule `heavy`, field `limts`: unknown field/);
    assert.equal(logged[0].decision, "deny");
  }));

test("an invalid config with on_invalid_config = allow forwards everything unlimited", () =>
  withTollgate({ config: typo({ on_invalid_config: "allow" }) }, async (tg) => {
    assert.deepEqual(await statuses(tg, 5, "/x"), [200, 200, 200, 200, 200]);
    assert.equal(tg.origin.received.length, 5, "the origin sees every request, unchanged");
    assert.equal(tg.origin.received[0].path, "/x");
    const logged = tg.logEvents().filter((e) => e.tollgate === "config_error");
    assert.equal(logged.length, 1);
    assert.equal(logged[0].decision, "allow");
  }));
