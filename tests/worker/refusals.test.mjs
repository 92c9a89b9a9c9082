// How a rule metering an LLM refuses, and whom it counts (issue 50, items 7
// and 8). A refusal of `metering = { usage = "openai" | "anthropic" |
// "gemini" }` is that API's own error JSON (which its SDKs turn into their
// rate-limit error), with `Retry-After` and the `RateLimit` fields as ever,
// and `x-should-retry: false` when the wait is longer than an SDK retry
// should sit through (60 s: the Anthropic SDKs slept a day's Retry-After
// away); `metering.refusal = "problem"` keeps problem+json. The key part
// `credential` reads the API key from `Authorization: Bearer` (Anthropic's
// SDKs since TS 1.17 / Python 2.17, OpenAI), `x-api-key` or
// `x-goog-api-key`, whichever are present, and charges every one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mockOrigin, withTollgate, sleep } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

/** A JSON answer reporting `tokens` as `provider` reports usage. */
function answer(provider, tokens) {
  const usage = {
    openai: { usage: { prompt_tokens: 1, completion_tokens: tokens - 1, total_tokens: tokens } },
    anthropic: { type: "message", usage: { input_tokens: 1, output_tokens: tokens - 1 } },
    gemini: { usageMetadata: { promptTokenCount: 1, candidatesTokenCount: tokens - 1, totalTokenCount: tokens } },
  }[provider];
  return new Response(JSON.stringify(usage), { headers: { "content-type": "application/json" } });
}

/** A rule of a 1,000-token budget per `window`, each answer reporting 1,000 (the budget spent at once). */
const llmRule = (provider, window, metering = {}, fields = {}) =>
  rule(`${provider}-chat`, "/v1/*", {
    key: ["credential"],
    limits: limit(1_000, window),
    counting: { mode: "response" },
    metering: { usage: provider, reserve: 1_000, max: 1_000, ...metering },
    ...fields,
  });

/** Runs `body(tg)` with an origin answering every call as `provider`, 1,000 tokens. */
const withLlm = (provider, cfg, body) =>
  withTollgate({ config: cfg, admin: false, origin: mockOrigin(() => answer(provider, 1_000)) }, body);

const call = (tg, headers = {}) =>
  tg.fetch("/v1/messages", { method: "POST", body: "{}", headers: { "content-type": "application/json", accept: "application/json", ...headers } });

/** Spends the budget of `headers`' credential, then returns the refusal that follows. */
async function spendThenRefused(tg, headers = { authorization: "Bearer sk-1" }) {
  const first = await call(tg, headers);
  assert.equal(first.status, 200);
  await first.text();
  await sleep(200); // the commit lands after the body ended
  const refused = await call(tg, headers);
  assert.equal(refused.status, 429);
  return { res: refused, text: await refused.text() };
}

const EXPECTED = {
  openai: (m) => ({ error: { message: m, type: "tokens", param: null, code: "rate_limit_exceeded" } }),
  anthropic: (m) => ({ type: "error", error: { type: "rate_limit_error", message: m } }),
  gemini: (m) => ({ error: { code: 429, message: m, status: "RESOURCE_EXHAUSTED" } }),
};

for (const provider of ["openai", "anthropic", "gemini"]) {
  test(`${provider}: a spent daily budget is refused in ${provider}'s own error JSON, with x-should-retry: false, Retry-After and RateLimit`, () =>
    withLlm(provider, config(llmRule(provider, "1d")), async (tg) => {
      const { res, text } = await spendThenRefused(tg);
      assert.equal(res.headers.get("content-type"), "application/json");
      const body = JSON.parse(text);
      const message = body.error.message;
      assert.match(message, new RegExp(`^Rate limit \`${provider}-chat\` exceeded; retry in (23 h 5\\d min|24 h)\\.$`), message);
      assert.deepEqual(body, EXPECTED[provider](message));
      const retryAfter = Number(res.headers.get("retry-after"));
      assert.ok(retryAfter > 86_000 && retryAfter <= 86_400, `Retry-After ${retryAfter}`);
      assert.equal(res.headers.get("x-should-retry"), "false", "a day is past any SDK retry");
      assert.match(res.headers.get("ratelimit") ?? "", new RegExp(`^"${provider}-chat";r=0;t=\\d+`));
      assert.match(res.headers.get("ratelimit-policy") ?? "", new RegExp(`^"${provider}-chat";q=1000;qu="tokens";w=86400$`));
    }));
}

test("a short wait lets the SDK retry: no x-should-retry, the wait in seconds", () =>
  withLlm("anthropic", config(llmRule("anthropic", "30s")), async (tg) => {
    const { res, text } = await spendThenRefused(tg);
    const retryAfter = Number(res.headers.get("retry-after"));
    assert.ok(retryAfter >= 1 && retryAfter <= 30, `Retry-After ${retryAfter}`);
    assert.equal(res.headers.get("x-should-retry"), null);
    assert.match(JSON.parse(text).error.message, /retry in \d+ s\.$/);
  }));

test("the operator's choice: refusal = \"problem\" keeps problem+json; a { json } usage is problem+json; a custom body stays the rule's own", () =>
  withLlm(
    "openai",
    config(
      llmRule("openai", "1d", { refusal: "problem" }, { name: "problem", path: "/v1/problem" }),
      rule("json-path", "/v1/json", { key: ["credential"], limits: limit(1_000, "1d"), counting: { mode: "response" }, metering: { usage: { json: "usage.total_tokens" }, reserve: 1_000, max: 1_000 } }),
      llmRule("openai", "1d", {}, { name: "page", path: "/v1/page", response: { body: "<p>{rule}: {retry_after} s</p>" } }),
    ),
    async (tg) => {
      for (const path of ["/v1/problem", "/v1/json"]) {
        const at = (headers) => tg.fetch(path, { method: "POST", body: "{}", headers: { accept: "application/json", ...headers } });
        await (await at({ authorization: "Bearer sk-p" })).text();
        await sleep(200);
        const res = await at({ authorization: "Bearer sk-p" });
        assert.equal(res.status, 429, path);
        assert.equal(res.headers.get("content-type"), "application/problem+json", path);
        assert.equal(res.headers.get("x-should-retry"), null, path);
        assert.equal(JSON.parse(await res.text()).type, "about:blank", path);
      }
      const page = (accept) => tg.fetch("/v1/page", { method: "POST", body: "{}", headers: { accept, authorization: "Bearer sk-p" } });
      await (await page("application/json")).text();
      await sleep(200);
      const html = await page("text/html");
      assert.equal(html.status, 429);
      assert.match(await html.text(), /^<p>page: \d+ s<\/p>$/, "the rule's own page for a browser");
      assert.equal(html.headers.get("x-should-retry"), "false");
      const sdk = await page("application/json");
      assert.equal(JSON.parse(await sdk.text()).error.code, "rate_limit_exceeded", "an SDK gets the API's shape");
    },
  ));

test("credential: a Bearer client is counted; its key in x-api-key is the same identity; a fresh key beside a spent one does not dodge it", () =>
  withLlm("anthropic", config(llmRule("anthropic", "1d")), async (tg) => {
    await spendThenRefused(tg, { authorization: "Bearer sk-ant-spent" });
    for (const headers of [
      { "x-api-key": "sk-ant-spent" },
      { authorization: "bearer sk-ant-spent" },
      { authorization: "Bearer sk-ant-fresh", "x-api-key": "sk-ant-spent" },
      { "x-api-key": "sk-ant-fresh", authorization: "Bearer sk-ant-spent" },
      { "x-goog-api-key": "sk-ant-spent" },
    ]) {
      const res = await call(tg, headers);
      assert.equal(res.status, 429, JSON.stringify(headers));
      await res.text();
    }
    const fresh = await call(tg, { "x-api-key": "sk-ant-other" });
    assert.equal(fresh.status, 200, "another key has its own budget");
    await fresh.text();
    const none = await call(tg, { authorization: "Basic dXNlcjpwYXNz" });
    assert.equal(none.status, 400, "no credential: the missing-key policy");
    await none.text();
  }));

test("header:x-api-key, as the guide's examples were, answers 400 to a Bearer client (what credential fixes)", () =>
  withLlm("anthropic", config(llmRule("anthropic", "1d", {}, { key: ["header:x-api-key"] })), async (tg) => {
    const res = await call(tg, { authorization: "Bearer sk-ant-1" });
    assert.equal(res.status, 400);
    await res.text();
  }));
