// What scripts/dev prints once it is ready (scripts/try-it.mjs `banner`):
// the try-it lines of the README that documents that very start, and no
// others (issue 27: the root README's lines were printed for examples too).
import { test } from "node:test";
import assert from "node:assert/strict";
import { banner } from "../../scripts/try-it.mjs";

const ROOT_LINE = "/api/example?mode=heavy'; done | uniq -c";

test("the README's try-it lines are printed for the shipped config only", () => {
  const shipped = banner(8787, []);
  assert.match(shipped, /Try it \(from README\.md/);
  assert.ok(shipped.includes(ROOT_LINE), shipped);
  const other = banner(9001, []);
  assert.ok(other.includes("127.0.0.1:9001/api/example"), "the lines follow the port");
  assert.ok(!other.includes("127.0.0.1:8787"), other);
  // An environment of the shipped config: no README documents it.
  const env = banner(8787, ["--env", "staging"]);
  assert.ok(!env.includes(ROOT_LINE), env);
  assert.match(env, /No try-it lines for scripts\/dev --env staging/);
});

test("an example's start prints its own README's lines, for its environment only", () => {
  const login = banner(8787, ["--example", "login-brute-force"]);
  assert.match(login, /from examples\/login-brute-force\/README\.md/);
  assert.ok(!login.includes(ROOT_LINE), login);
  assert.match(login, /\/login/);
  const quota = banner(8787, ["--example", "tenant-daily-quota", "--env", "enforce"]);
  assert.doesNotMatch(quota, /--example tenant-daily-quota --env|with scripts\/dev/);
});

test("the banner says where local secrets go", () => {
  assert.match(banner(8787, []), /\.dev\.vars/);
});
