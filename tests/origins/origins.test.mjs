// Differential tests against real origins (issue 15): tollgate in Miniflare
// in front of Express 5, Flask/Werkzeug, PHP 8 (`php -S`) and nginx on
// loopback, with the shipped and example rules. For every origin: no
// protected handler runs more than its limit for one identity, as that
// origin identifies it. Writes tests/origins/out/report.json and
// summary.md (also when a test fails).
//
// Run with `scripts/test --origins` (installs the origins first), or
// `scripts/setup --origins && scripts/build && node --test tests/origins/`.
// TOLLGATE_ORIGINS=php,nginx picks origins. Without the origins installed
// the tests are skipped, unless TOLLGATE_ORIGINS_REQUIRED=1 (scripts/test
// --origins sets it), which fails them.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join, relative } from "node:path";
import { ROOT } from "../worker/harness.mjs";
import { missingOrigins, ORIGINS } from "./origins.mjs";
import { allSpellings, LIMITS } from "./spellings.mjs";
import { runOrigin, selectedOrigins, writeReport, OUT, SENDS } from "./run.mjs";
import { summarize } from "./report.mjs";

const ORIGIN_TIMEOUT_MS = 10 * 60_000;
const names = selectedOrigins();
const spellings = allSpellings();
const required = process.env.TOLLGATE_ORIGINS_REQUIRED === "1";
const missing = missingOrigins(names);
const built = existsSync(join(ROOT, "build", "index.js"));
let skip = false;
if (!built) skip = "build/index.js is missing: run scripts/build";
else if (missing.length && !required) skip = `not installed: ${missing.join("; ")} (scripts/setup --origins)`;
const results = [];

after(() => {
  if (!results.length) return;
  const distinct = new Set(results.flatMap((r) => r.spellings.map((s) => s.id))).size;
  const report = writeReport(results, { distinct });
  console.log(
    `origins report: ${relative(ROOT, join(OUT, "report.json"))} and summary.md: ` +
      `${report.totals.bypasses} bypassing spelling(s), ${report.totals.falsePositives} false positive(s), ${report.totals.requests} requests in ${report.totals.seconds} s`,
  );
});

test("the grammar yields at least 1,000 distinct spellings, and every one goes to some origin", () => {
  assert.ok(spellings.length >= 1000, `${spellings.length} spellings`);
  assert.equal(new Set(spellings.map((s) => s.id)).size, spellings.length, "ids are unique");
  const implemented = new Set(Object.values(ORIGINS).flatMap((o) => o.actions));
  assert.deepEqual(spellings.filter((s) => !implemented.has(s.action)), [], "no spelling of an action no origin implements");
});

test("the origins are installed", { skip: !required && "TOLLGATE_ORIGINS_REQUIRED is not set" }, () => {
  assert.deepEqual(missing, [], "run scripts/setup --origins");
});

for (const name of names) {
  test(`${name}: no protected handler runs past its limit for one identity`, { skip, timeout: ORIGIN_TIMEOUT_MS }, async () => {
    const result = await runOrigin(name, spellings);
    results.push(result);
    const [report] = summarize([result], { distinct: result.spellings.length, limits: LIMITS, sends: SENDS, configs: {} }).origins;

    // The harness itself: the origin runs each canonical request, tollgate
    // limits it, the oracle agrees with what was forwarded.
    const failed = report.checks.filter((c) => !c.ok);
    assert.deepEqual(failed, [], "harness checks");

    const byCause = report.bypassesByCause.map((g) => `  ${g.cause}: ${g.spellings} spelling(s), ${g.excessRuns} excess run(s)`);
    assert.equal(
      report.bypassCount,
      0,
      `${name}: ${report.bypassCount} spelling(s) ran a protected handler past its limit:\n${byCause.join("\n")}\n` +
        `(details: tests/origins/out/report.json)`,
    );
  });
}
