// `tollgate schema` against every config tollgate ships: the JSON Schema the
// native CLI prints (from the config's own field tables) must accept every
// config `tollgate check` accepts (wrangler.toml, the examples, the npm
// package's presets, each environment of each), and refuse a planted typo'd
// field and a wrong enum value, as check does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseToml, stringify } from "smol-toml";
import Ajv2020 from "ajv/dist/2020.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Runs the native CLI (built by cargo if it is not, or is stale). */
function tollgate(args) {
  return spawnSync("cargo", ["run", "--quiet", "--locked", "--bin", "tollgate", "--", ...args], { cwd: ROOT, encoding: "utf8" });
}

const schema = JSON.parse(execFileSync("cargo", ["run", "--quiet", "--locked", "--bin", "tollgate", "--", "schema"], { cwd: ROOT, encoding: "utf8" }));
const validate = new Ajv2020({ allErrors: true, strict: true }).compile(schema);

/** Every wrangler config tollgate ships with a [vars.TOLLGATE]. */
function shippedFiles() {
  const files = ["wrangler.toml"];
  for (const dir of readdirSync(join(ROOT, "examples"), { withFileTypes: true }).filter((d) => d.isDirectory())) {
    for (const name of ["wrangler.toml", "tollgate.wrangler.toml"]) files.push(join("examples", dir.name, name));
  }
  // The presets' rule files (a preset's app folder holds no TOLLGATE var).
  for (const name of readdirSync(join(ROOT, "packages", "tollgate", "presets")).filter((n) => n.endsWith(".toml"))) {
    files.push(join("packages", "tollgate", "presets", name));
  }
  return files.filter((file) => existsSync(join(ROOT, file)) && /^\s*\[(env\.[^\]]+\.)?vars\.TOLLGATE\]/m.test(readFileSync(join(ROOT, file), "utf8")));
}

/** The TOLLGATE var of each section of a wrangler config: the top level, then each environment. */
function sections(file) {
  const wrangler = parseToml(readFileSync(join(ROOT, file), "utf8"));
  const out = [];
  if (wrangler.vars?.TOLLGATE) out.push(["top level", wrangler.vars.TOLLGATE]);
  for (const [name, env] of Object.entries(wrangler.env ?? {})) {
    if (env.vars?.TOLLGATE) out.push([`env.${name}`, env.vars.TOLLGATE]);
  }
  return out;
}

/** ajv's errors, one a line. */
const explain = (errors) => (errors ?? []).map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`).join("\n");

test("the schema is draft 2020-12 and names every rule field", () => {
  assert.equal(schema.$schema, "https://json-schema.org/draft/2020-12/schema");
  const rule = schema.properties.rules.items;
  for (const field of ["name", "path", "key", "limits", "on_error", "action", "counting", "metering", "on_success", "lease", "metrics", "timeout", "penalty"]) {
    assert.ok(rule.properties[field]?.description, `rules[].${field} is described`);
  }
  assert.deepEqual(rule.properties.on_error.enum, ["allow", "deny"]);
  assert.deepEqual(rule.properties.counting.properties.mode.enum, ["request", "response"]);
  assert.equal(rule.properties.count_statuses, undefined, "the 0.1 spelling is read by check, never offered by the schema");
  assert.equal(rule.additionalProperties, false);
});

test("the rules that set every rule field between them (the describe test's data) validate", () => {
  const rules = JSON.parse(readFileSync(join(ROOT, "tests", "schema", "every_rule_field.json"), "utf8"));
  assert.ok(validate({ rules }), explain(validate.errors));
  const set = new Set(rules.flatMap((r) => Object.keys(r)));
  for (const field of Object.keys(schema.properties.rules.items.properties)) assert.ok(set.has(field), `${field} is set by one of them`);
});

test("every config tollgate ships, which check accepts, validates", () => {
  const files = shippedFiles();
  assert.ok(files.length >= 10, `found the shipped configs: ${files.join(", ")}`);
  for (const file of files) {
    const checked = tollgate(["check", file]);
    // A preset for a zone with an app (in-front) names the app's service
    // binding, which `init` declares in the project's wrangler.toml (the
    // package test checks that project); the preset's rules file alone lacks it.
    const needsProject = file.includes(join("packages", "tollgate", "presets")) && /is not declared in this environment's \[\[services\]\]/.test(checked.stderr);
    if (!needsProject) assert.equal(checked.status, 0, `tollgate check ${file} accepts it:\n${checked.stderr}`);
    // Issue 36: every shipped config is in the current spelling.
    assert.doesNotMatch(checked.stdout, /the 0\.2\.0 spelling/, `${file} is in the current spelling (tollgate migrate ${file})`);
    const found = sections(file);
    assert.ok(found.length > 0, `${file} has a TOLLGATE var`);
    for (const [label, config] of found) {
      assert.ok(validate(config), `${relative(ROOT, join(ROOT, file))} ${label}:\n${explain(validate.errors)}`);
    }
  }
});

test("a typo'd field and a wrong enum value fail, as check fails them", () => {
  const [[, shipped]] = sections("wrangler.toml");
  const planted = [
    ["a typo'd rule field", (c) => { c.rules[0].limts = c.rules[0].limits; }, "/rules/0"],
    ["a typo'd top-level field", (c) => { c.ipv6_prefx = 64; }, ""],
    ["a wrong enum value", (c) => { c.rules[0].on_error = "block"; }, "/rules/0/on_error"],
    ["a wrong algorithm", (c) => { c.rules[0].algorithm = "token_bucket"; }, "/rules/0/algorithm"],
    ["a typo in a limit", (c) => { c.rules[0].limits[0].windw = "1m"; }, "/rules/0/limits/0"],
    ["a duration that is not one", (c) => { c.rules[0].timeout = "two seconds"; }, "/rules/0/timeout"],
    ["a rule without limits", (c) => { delete c.rules[0].limits; }, "/rules/0"],
  ];
  const work = mkdtempSync(join(tmpdir(), "tollgate-schema-"));
  for (const [what, plant, where] of planted) {
    const config = structuredClone(shipped);
    plant(config);
    assert.equal(validate(config), false, `${what} is refused`);
    assert.ok(validate.errors.some((e) => e.instancePath === where), `${what}: an error at ${where}:\n${explain(validate.errors)}`);
    // check refuses it too: here the schema is no stricter than the reader.
    const file = join(work, "wrangler.toml");
    writeFileSync(file, stringify({ name: "planted", vars: { TOLLGATE: config } }));
    const checked = tollgate(["check", file]);
    assert.equal(checked.status, 1, `tollgate check refuses ${what}:\n${checked.stdout}${checked.stderr}`);
  }
  rmSync(work, { recursive: true, force: true });
});

test("the wrapper that docs/configuration.md gives editors checks a whole wrangler config", () => {
  // Not strict: the wrapper leaves every other field of the file, and its type, to wrangler.
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  ajv.addSchema(schema, "tollgate.schema.json");
  const tollgateVar = { $ref: "tollgate.schema.json" };
  // As docs/configuration.md writes it (tollgate-wrangler.schema.json).
  const wrapper = {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    properties: {
      vars: { properties: { TOLLGATE: tollgateVar } },
      env: { additionalProperties: { properties: { vars: { properties: { TOLLGATE: tollgateVar } } } } },
    },
  };
  const docs = readFileSync(join(ROOT, "docs", "configuration.md"), "utf8");
  const documented = JSON.parse(docs.match(/```json tollgate-wrangler\.schema\.json\n([\s\S]*?)```/)[1]);
  assert.deepEqual(documented, wrapper, "the docs give this wrapper");
  const check = ajv.compile(wrapper);
  for (const file of shippedFiles()) {
    const wrangler = parseToml(readFileSync(join(ROOT, file), "utf8"));
    assert.ok(check(wrangler), `${file}:\n${explain(check.errors)}`);
    const broken = structuredClone(wrangler);
    broken.env = { staging: { vars: { TOLLGATE: { rules: [], ipv6_prefix: 200 } } } };
    assert.equal(check(broken), false, `${file} with a broken environment is refused`);
  }
});

test("a price table shared at the top level, named by rules, and a budget above 4294.967295 validate; a typo in a shared table or a bad name fails, as check fails them", () => {
  const table = { currency: "USD", models: { "gpt-4o-mini*": { input: 0.15, cached_input: 0.075, output: 0.6 } } };
  const rule = (name, price, spend) => ({
    name, path: `/${name}/*`, key: ["header:x-team"], on_missing_key: "skip",
    limits: [{ spend, window: "month", time_zone: "UTC" }],
    counting: { mode: "response" },
    metering: { usage: "openai", reserve: 1000, max: 1000, price },
  });
  const good = { prices: { openai: table }, rules: [rule("a", "openai", 10_000), rule("b", "openai", 200), rule("c", table, 200)] };
  assert.ok(validate(good), explain(validate.errors));
  const planted = [
    ["a typo in a shared table", (c) => { c.prices.openai.models["gpt-4o-mini*"].outptu = 1; }, "/prices/openai/models/gpt-4o-mini*"],
    ["a shared table without currency", (c) => { delete c.prices.openai.currency; }, "/prices/openai"],
    ["a name that is no name", (c) => { c.rules[0].metering.price = "open ai"; }, "/rules/0/metering/price"],
    ["a spend past a million", (c) => { c.rules[0].limits[0].spend = 1_000_001; }, "/rules/0/limits/0/spend"],
  ];
  const work = mkdtempSync(join(tmpdir(), "tollgate-schema-"));
  const file = join(work, "wrangler.toml");
  writeFileSync(file, stringify({ name: "priced", vars: { TOLLGATE: good } }));
  const accepted = tollgate(["check", file]);
  assert.equal(accepted.status, 0, `check accepts it:\n${accepted.stderr}`);
  assert.match(accepted.stdout, /rule `a`: counts in milli-USD: .* rounded up to 0\.001 USD/, accepted.stdout);
  for (const [what, plant, where] of planted) {
    const config = structuredClone(good);
    plant(config);
    assert.equal(validate(config), false, `${what} is refused`);
    assert.ok(validate.errors.some((e) => e.instancePath === where || e.instancePath.startsWith(`${where}/`)), `${what}: an error at ${where}:\n${explain(validate.errors)}`);
    writeFileSync(file, stringify({ name: "planted", vars: { TOLLGATE: config } }));
    const checked = tollgate(["check", file]);
    assert.equal(checked.status, 1, `tollgate check refuses ${what}:\n${checked.stdout}${checked.stderr}`);
  }
  rmSync(work, { recursive: true, force: true });
});
