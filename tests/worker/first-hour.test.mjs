// The first hour (issue 17): what a config mistake does, at deploy time and
// at runtime.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { withTollgate, statuses, ROOT } from "./harness.mjs";

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
    await tg.settled();
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
    await tg.settled();
    const logged = tg.logEvents().filter((e) => e.tollgate === "config_error");
    assert.equal(logged.length, 1);
    assert.equal(logged[0].decision, "allow");
  }));

// `wrangler deploy` runs scripts/build, which runs `tollgate check` on the
// config and environment being deployed: a typo stops the deploy.

function dryRun(name, toml, args = []) {
  const path = join(ROOT, `.test-${name}.wrangler.toml`);
  writeFileSync(path, toml);
  try {
    const run = spawnSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", join(ROOT, "dist", name), "--config", path, ...args], {
      cwd: ROOT,
      encoding: "utf8",
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
      timeout: 120_000,
    });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(path, { force: true });
  }
}

test("wrangler deploy --dry-run refuses a config with a typo, naming the rule and the field", () => {
  const shipped = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  const typo = shipped.replace("limits = [{ requests = 10", "limts = [{ requests = 10");
  assert.notEqual(typo, shipped);
  const run = dryRun("typo", typo);
  assert.notEqual(run.status, 0, run.output);
  assert.match(run.output, /rule `heavy-example`, field `limts`: unknown field/);
  assert.match(run.output, /nothing was built or deployed/);

  // The environment being deployed is the one checked.
  const env = `${shipped}\n[env.staging.vars.TOLLGATE]\n[[env.staging.vars.TOLLGATE.rules]]\nname = "staged"\npath = "/x"\nlimits = [{ requests = 1, window = "1 minute" }]\n`;
  const staged = dryRun("env", env, ["--env", "staging"]);
  assert.notEqual(staged.status, 0, staged.output);
  assert.match(staged.output, /env `staging`: rule `staged`, field `limits\[0\]\.window`/);
});
