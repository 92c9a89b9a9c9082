// Bodies as origins read them, and method overrides (issue 15, rows 5 and
// 6): multipart, over-the-cap and compressed form bodies meet the shipped
// rule's `mode=heavy` condition; cookies do for a rule that opts in; a
// `_method` in any body kind and every item of an override header reach a
// DELETE rule, though no rule has query conditions. Each test is one
// spelling of the table, and failed before it was fixed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { withTollgate, shippedConfig, statuses } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const FORM = { "content-type": "application/x-www-form-urlencoded" };

/**
 * A multipart form as Fetch serializes a FormData (undici's boundary, CRLF
 * lines), with a file whose content is `mode=heavy`: `{ headers, body }`.
 */
async function multipart(fields) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  form.append("upload", new Blob(["mode=heavy"], { type: "text/plain" }), "notes.txt");
  const serialized = new Response(form);
  const body = Buffer.from(await serialized.arrayBuffer());
  return { headers: { "content-type": serialized.headers.get("content-type") }, body };
}

/** Statuses of `n` POSTs to `path` from one client, and how many reached the origin. */
async function posts(tg, n, path, init) {
  const before = tg.origin.received.length;
  const got = await statuses(tg, n, path, { method: "POST", ...init });
  return { statuses: got, reached: tg.origin.received.length - before };
}

const tenThen429 = [...Array(10).fill(200), 429];

test("row 5: the shipped rule limits mode=heavy sent as multipart, as PHP's $_POST and Laravel's input() read it", () =>
  withTollgate({}, async (tg) => {
    const heavy = await posts(tg, 30, "/api/example", { ...(await multipart({ note: "x", mode: "heavy" })), ip: "203.0.113.50" });
    assert.deepEqual(heavy.statuses, [...Array(10).fill(200), ...Array(20).fill(429)]);
    assert.equal(heavy.reached, 10, "the origin ran the heavy call 10 times, not 30");
    const sent = tg.origin.received.at(-1);
    assert.match(sent.headers["content-type"], /^multipart\/form-data; boundary=/);
    assert.match(sent.body.toString(), /name="mode"\r\n\r\nheavy\r\n/, "the body reached the origin intact");
    // A file's content is no parameter: a file holding `mode=heavy` is not heavy.
    const light = await posts(tg, 11, "/api/example", { ...(await multipart({ mode: "light" })), ip: "203.0.113.51" });
    assert.deepEqual(light.statuses, Array(11).fill(200));
  }));

test("row 5: a urlencoded body over body_limit may hold mode=heavy: limited (fail safe)", () =>
  withTollgate({}, async (tg) => {
    const big = `mode=heavy&pad=${"x".repeat(17 * 1024)}`;
    const large = await posts(tg, 11, "/api/example", { headers: FORM, body: big, ip: "203.0.113.60" });
    assert.deepEqual(large.statuses, tenThen429, "over the 16 KiB cap");
    assert.equal(tg.origin.received.at(-1).body.toString(), big, "forwarded intact");
    // A readable small form without mode=heavy is not limited.
    const light = await posts(tg, 11, "/api/example", { headers: FORM, body: "mode=light", ip: "203.0.113.63" });
    assert.deepEqual(light.statuses, Array(11).fill(200));
  }));

test("row 5: a compressed form body, or one in a charset tollgate cannot read, may hold mode=heavy: limited (fail safe)", () =>
  withTollgate({}, async (tg) => {
    const gzip = { headers: { ...FORM, "content-encoding": "gzip" }, body: gzipSync("mode=heavy"), ip: "203.0.113.61" };
    assert.deepEqual((await posts(tg, 11, "/api/example", gzip)).statuses, tenThen429, "Content-Encoding: gzip");
    assert.ok(gzipSync("mode=heavy").equals(tg.origin.received.at(-1).body), "the compressed body reached the origin as sent");
    const ebcdic = { headers: { "content-type": "application/x-www-form-urlencoded; charset=ibm037" }, body: "\x94\x96\x84\x85", ip: "203.0.113.62" };
    assert.deepEqual((await posts(tg, 11, "/api/example", ebcdic)).statuses, tenThen429, "a charset ASP.NET decodes and tollgate does not");
  }));

test("row 5: Cookie: mode=heavy is limited by a rule with query_sources = [query, body, cookie], and only by it", async () => {
  const config = shippedConfig();
  config.rules[0].query_sources = ["query", "body", "cookie"];
  await withTollgate({ config }, async (tg) => {
    const cookie = { headers: { cookie: "sid=abc; mode=heavy" }, ip: "203.0.113.70" };
    assert.deepEqual(await statuses(tg, 11, "/api/example", cookie), tenThen429, "PHP's $_REQUEST with variables_order = EGPCS");
    const light = { headers: { cookie: "mode=light" }, ip: "203.0.113.71" };
    assert.deepEqual(await statuses(tg, 11, "/api/example", light), Array(11).fill(200));
  });
  const defaults = shippedConfig();
  delete defaults.rules[0].query_sources;
  await withTollgate({ config: defaults }, async (tg) => {
    const cookie = { headers: { cookie: "mode=heavy" }, ip: "203.0.113.72" };
    assert.deepEqual(await statuses(tg, 11, "/api/example", cookie), Array(11).fill(200), "the default sources are query and body");
  });
});

test("row 5: the shipped rule reads cookies (PHP without a php.ini): Cookie: mode=heavy is limited", () =>
  withTollgate({}, async (tg) => {
    const cookie = { headers: { cookie: "sid=abc; mode=heav%79" }, ip: "203.0.113.73" };
    assert.deepEqual(await statuses(tg, 11, "/api/example?mode=light", cookie), tenThen429, "a cookie over a light query, percent-encoded");
  }));

test("a JSON body's mode=heavy is limited (Rails params, Laravel input()); malformed or oversized JSON fails safe", () =>
  withTollgate({}, async (tg) => {
    const json = { "content-type": "application/json; charset=utf-8" };
    assert.deepEqual((await posts(tg, 11, "/api/example", { headers: json, body: '{"mode":"heavy"}', ip: "203.0.113.80" })).statuses, tenThen429);
    const light = await posts(tg, 11, "/api/example", { headers: json, body: '{"mode":"light","x":{"mode":"heavy"}}', ip: "203.0.113.81" });
    assert.deepEqual(light.statuses, Array(11).fill(200), "a nested member is no parameter");
    const broken = { headers: json, body: '{"mode":"heavy",', ip: "203.0.113.82" };
    assert.deepEqual((await posts(tg, 11, "/api/example", broken)).statuses, tenThen429, "malformed JSON");
    assert.equal(tg.origin.received.at(-1).body.toString(), '{"mode":"heavy",', "it reached the origin as sent");
  }));

test("the query's leading ? is dropped as PHP's built-in server drops it: /api/example??mode=heavy is limited", () =>
  withTollgate({}, async (tg) => {
    assert.deepEqual(await statuses(tg, 11, "/api/example??mode=heavy", { ip: "203.0.113.90" }), tenThen429);
    assert.deepEqual(await statuses(tg, 11, "/api/example?%3Fmode=heavy", { ip: "203.0.113.91" }), Array(11).fill(200), "an encoded ? is part of the key");
  }));

/** A DELETE rule (limit 3) and no rule with query conditions. */
const deleteOnly = config(rule("delete-post", "/posts/:id", { methods: ["DELETE"], limits: limit(3, "60s") }));
const blocksTheFourth = [200, 200, 200, 429];

test("row 6: _method=DELETE in a urlencoded body reaches the DELETE rule, though no rule has query conditions", () =>
  withTollgate({ config: deleteOnly }, async (tg) => {
    const form = await posts(tg, 4, "/posts/7", { headers: FORM, body: "title=x&_method=DELETE", ip: "198.51.100.10" });
    assert.deepEqual(form.statuses, blocksTheFourth);
    assert.equal(form.reached, 3, "the origin deleted 3 times, not 4");
    const plain = await posts(tg, 4, "/posts/7", { headers: FORM, body: "title=x", ip: "198.51.100.16" });
    assert.deepEqual(plain.statuses, [200, 200, 200, 200], "a POST without an override is no DELETE");
  }));

test("row 6: _method=DELETE in a multipart body reaches the DELETE rule", () =>
  withTollgate({ config: deleteOnly }, async (tg) => {
    const inMultipart = { ...(await multipart({ _method: "DELETE" })), ip: "198.51.100.11" };
    assert.deepEqual((await posts(tg, 4, "/posts/7", inMultipart)).statuses, blocksTheFourth);
  }));

test("row 6: _method in a JSON body reaches the DELETE rule (Express's method-override custom logic, Laravel)", () =>
  withTollgate({ config: deleteOnly }, async (tg) => {
    const json = { headers: { "content-type": "application/json" }, body: '{"title":"x","_method":"DELETE"}', ip: "198.51.100.17" };
    const got = await posts(tg, 4, "/posts/7", json);
    assert.deepEqual(got.statuses, blocksTheFourth);
    assert.equal(got.reached, 3);
    const plain = { headers: { "content-type": "application/json" }, body: '{"title":"x"}', ip: "198.51.100.18" };
    assert.deepEqual((await posts(tg, 4, "/posts/7", plain)).statuses, [200, 200, 200, 200], "JSON without _method is no DELETE");
  }));

test("row 6: X-HTTP-Method-Override: DELETE, x reaches the DELETE rule (Express's method-override takes the first item)", () =>
  withTollgate({ config: deleteOnly }, async (tg) => {
    const items = { headers: { "x-http-method-override": "DELETE, x" }, ip: "198.51.100.12" };
    assert.deepEqual((await posts(tg, 4, "/posts/7", items)).statuses, blocksTheFourth);
  }));

test("row 6: X-HTTP-Method-Override sent twice reaches the DELETE rule", () =>
  withTollgate({ config: deleteOnly }, async (tg) => {
    const twice = [];
    for (let i = 0; i < 4; i++) {
      // Two header lines; the Worker sees "DELETE, PATCH".
      const headers = new Headers({ "cf-connecting-ip": "198.51.100.13" });
      headers.append("x-http-method-override", "DELETE");
      headers.append("x-http-method-override", "PATCH");
      const res = await tg.mf.dispatchFetch("https://example.com/posts/7", { method: "POST", headers });
      await res.arrayBuffer();
      twice.push(res.status);
    }
    assert.deepEqual(twice, blocksTheFourth);
  }));

test("row 6: a POST whose form body cannot be read may hold _method=DELETE: the DELETE rule counts it (fail safe, POST only)", () =>
  withTollgate({ config: deleteOnly }, async (tg) => {
    const gzip = { headers: { ...FORM, "content-encoding": "gzip" }, body: gzipSync("_method=DELETE"), ip: "198.51.100.14" };
    assert.deepEqual((await posts(tg, 4, "/posts/7", gzip)).statuses, blocksTheFourth);
    const put = { ...gzip, method: "PUT", ip: "198.51.100.15" };
    assert.deepEqual(await statuses(tg, 4, "/posts/7", put), [200, 200, 200, 200], "only a POST is overridden by _method");
  }));
