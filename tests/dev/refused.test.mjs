// A config with an error never deploys from this repository either, and
// wrangler says so once: `wrangler deploy --dry-run` on the root config with
// a typo planted stops before anything is built (scripts/build runs
// scripts/check-deploy first and, refused, removes build/entry.mjs, the
// config's `main`), naming the rule and the field exactly once, with no
// stack trace.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../../scripts/try-it.mjs";

test("wrangler deploy --dry-run refuses a typo in the root config, the error named once", { timeout: 300_000 }, () => {
  const config = join(ROOT, ".test-typo.wrangler.toml"); // .gitignored
  const entry = join(ROOT, "build", "entry.mjs");
  const before = existsSync(entry) ? readFileSync(entry) : undefined;
  const out = mkdtempSync(join(tmpdir(), "tollgate-refused-"));
  const shipped = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  assert.match(shipped, /limits = \[\{ requests = 10,/);
  writeFileSync(config, shipped.replace("limits = [{ requests = 10,", "limts = [{ requests = 10,"));
  try {
    // The native CLI that check-deploy runs, built before the clock starts.
    execFileSync("cargo", ["build", "--quiet", "--locked", "--bin", "tollgate"], { cwd: ROOT, stdio: "inherit" });
    const refused = spawnSync(join(ROOT, "node_modules", ".bin", "wrangler"), ["deploy", "--dry-run", "-c", config, "--outdir", out], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 240_000,
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    });
    const said = refused.stdout + refused.stderr;
    assert.notEqual(refused.status, 0, `the typo was not refused:\n${said}`);
    const named = "rule `heavy-example`, field `limts`: unknown field";
    assert.equal(said.split(named).length - 1, 1, `the error is not named exactly once:\n${said}`);
    assert.doesNotMatch(said, /^\s+at .+:\d+:\d+\)?$/m, `a stack trace:\n${said}`);
    assert.doesNotMatch(said, /building the Worker/, `a build started:\n${said}`);
  } finally {
    rmSync(config, { force: true });
    rmSync(out, { recursive: true, force: true });
    if (before) writeFileSync(entry, before);
  }
});
