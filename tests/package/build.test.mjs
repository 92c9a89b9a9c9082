// `tollgate build wrangler.admin.toml` (the admin Worker's [build] command)
// says when its [vars.TOLLGATE] differs from wrangler.toml's (issue 53,
// round 3 item 8: the admin API names rules and derives keys from its own
// copy, kept equal by hand). Runs the package's lib/build.mjs on files a
// test writes; needs no tarball.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { rulesDrift, tollgateVars } from "../../packages/tollgate/lib/build.mjs";

const PRESET = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "packages", "tollgate", "presets", "heavy-endpoint.toml");

test("the admin Worker's build says when its rules drift from wrangler.toml's, and only then", () => {
  const dir = mkdtempSync(join(tmpdir(), "tollgate-drift-"));
  try {
    const rules = readFileSync(PRESET, "utf8");
    const zone = `name = "demo"\nmain = ".tollgate/worker.mjs"\n\n${rules}\n[[durable_objects.bindings]]\nname = "LIMITER"\nclass_name = "Limiter"\n`;
    const admin = `name = "demo-admin"\nmain = ".tollgate/admin.mjs"\n\n[build]\ncommand = "tollgate build wrangler.admin.toml"\n\n${rules}`;
    writeFileSync(join(dir, "wrangler.toml"), zone);
    writeFileSync(join(dir, "wrangler.admin.toml"), admin);
    assert.ok(tollgateVars(zone).includes('name = "reports"') && !tollgateVars(zone).includes("durable_objects"), "the TOLLGATE tables only");
    assert.equal(rulesDrift(join(dir, "wrangler.admin.toml")), "", "the same rules: nothing said");
    writeFileSync(join(dir, "wrangler.admin.toml"), admin.replace("requests = 10, window", "requests = 11, window"));
    const said = rulesDrift(join(dir, "wrangler.admin.toml"));
    assert.match(said, /^warning: .*wrangler\.admin\.toml's \[vars\.TOLLGATE\] differs from .*wrangler\.toml's: .*copy wrangler\.toml's \[vars\.TOLLGATE\] tables into/);
    assert.equal(said.split("\n").filter(Boolean).length, 1, "one line");
    rmSync(join(dir, "wrangler.toml"));
    assert.equal(rulesDrift(join(dir, "wrangler.admin.toml")), "", "no wrangler.toml beside it: nothing to compare");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("tollgate --help names every preset the package holds", async () => {
  const { presetUsage } = await import("../../packages/tollgate/lib/init.mjs");
  const { readdirSync } = await import("node:fs");
  const usage = presetUsage();
  const words = usage.replace(/\s+/g, " ");
  for (const file of readdirSync(dirname(PRESET)).filter((f) => f.endsWith(".toml"))) {
    assert.match(words, new RegExp(`[ :,]${file.slice(0, -5)}[,;)]`), `${file}: ${usage}`);
  }
  assert.ok(usage.split("\n").every((line) => line.startsWith(" ".repeat(42)) && line.length <= 96), usage);
});

test("the heavy-endpoint preset's opening comment promises only the rules it has", () => {
  const preset = readFileSync(PRESET, "utf8");
  const opening = preset.split("\n").filter((l) => l.startsWith("#")).slice(0, 3).join(" ");
  assert.doesNotMatch(opening, /whole API/, "no rule limits the whole API");
  for (const name of ["heavy-example", "reports"]) assert.match(preset, new RegExp(`name = "${name}"`));
  assert.match(opening, /expensive endpoint/);
  assert.match(opening, /report endpoints/);
});
