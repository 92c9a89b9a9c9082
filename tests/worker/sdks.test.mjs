// The official SDKs through the built Worker (issue 50): openai-node (Chat
// Completions and Responses), @anthropic-ai/sdk, @google/genai and the Vercel
// AI SDK with its OpenAI (Responses and Chat) and Anthropic providers, each
// pointed at tollgate (baseURL: Miniflare's address) with its retries left at
// its default, against the mock origin of providers.mjs (reached through the
// UPSTREAM var), streamed and not:
//   - the text and usage the SDK reports are the same through tollgate as
//     directly against the origin, and the budget is charged exactly the
//     usage the SDK reported;
//   - at the 429 (a spent daily budget) the SDK raises its own rate-limit
//     error with the provider's error body, and returns within seconds
//     although Retry-After says hours;
//   - with `cut = true`, an answer that ended normally raises nothing and
//     delivers its whole text; a stream cut while running (an origin that
//     ignores its output cap) raises the SDK's own error.
// The SDKs are those of package.json (exact versions, the newest that run on
// Node 20), and the Python `openai` and `anthropic` of
// tests/worker/sdk-python/requirements.txt (scripts/setup installs them in a
// venv there; client.py makes one call per process).
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI, ApiError } from "@google/genai";
import { generateText, streamText, APICallError, RetryError } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { startTollgate, sleep, ROOT } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";
import { providerOrigin, textOf, totalOf, MODEL } from "./providers.mjs";

globalThis.AI_SDK_LOG_WARNINGS = false;

// An SDK that honours a day-long Retry-After sleeps on a timer of a day;
// the test gives up on it at its bound (and fails), but the timer must not
// keep this process alive: a timer over a minute is unref'd.
const setTimeoutOriginal = globalThis.setTimeout;
globalThis.setTimeout = function setTimeoutUnrefLong(fn, ms, ...args) {
  const timer = setTimeoutOriginal(fn, ms, ...args);
  if (ms > 60_000) timer.unref?.();
  return timer;
};

const ADMIN_TOKEN = "sdk-tests-admin-token";
const RESERVE = 1_000;
/** Per plan: the rule's daily budget and metering fields. One rule per (plan, provider), on `/{plan}/{provider}/*`. */
const PLANS = {
  big: { budget: 10_000, metering: {} },
  small: { budget: RESERVE, metering: {} },
  cut: { budget: 10_000, metering: { cut: true } },
};
const PROVIDERS = ["openai", "anthropic", "gemini"];

const CONFIG = config(
  ...Object.entries(PLANS).flatMap(([plan, { budget, metering }]) =>
    PROVIDERS.map((provider) =>
      rule(`${plan}-${provider}`, `/${plan}/${provider}/*`, {
        key: ["header:x-tenant"],
        limits: limit(budget, "1d"),
        counting: { mode: "response", statuses: [200] },
        metering: { usage: provider, reserve: RESERVE, max: RESERVE, ...metering },
      }),
    ),
  ),
);

const PROMPT = "Say something.";

/**
 * The SDK drivers: `run({ root, headers, stream, signal })` makes one call
 * as a user would (root: the provider's base address, before `/v1`) and
 * returns { text, usage: what the SDK reports, total: the total by the
 * SDK's own figures }.
 */
/** The Python SDKs' venv (scripts/setup makes it). */
const PYTHON = `${ROOT}/tests/worker/sdk-python/.venv/bin/python`;

/** An error a Python SDK raised: its class name, status and parsed body. */
class PythonSdkError extends Error {
  constructor({ class: cls, status, body, message, should_retry }) {
    super(message);
    Object.assign(this, { cls, status, body, shouldRetry: should_retry });
  }
}

/** One call through a Python SDK (tests/worker/sdk-python/client.py): its answer, or its error thrown; the process is killed at `signal`. */
function python(sdk, model, { root, headers, stream, signal }) {
  assert.ok(existsSync(PYTHON), `${PYTHON} is missing: run scripts/setup`);
  const spec = JSON.stringify({ sdk, root, headers, stream, model, prompt: PROMPT, max_tokens: RESERVE });
  return new Promise((resolve, reject) => {
    execFile(PYTHON, [`${ROOT}/tests/worker/sdk-python/client.py`, spec], { signal, timeout: 120_000 }, (error, stdout, stderr) => {
      if (error) return reject(error.name === "AbortError" ? error : new Error(`python ${sdk}: ${error.message}\n${stderr}`));
      let out;
      try {
        out = JSON.parse(stdout);
      } catch {
        return reject(new Error(`python ${sdk} printed no JSON: ${stdout}\n${stderr}`));
      }
      return out.error ? reject(new PythonSdkError(out.error)) : resolve(out);
    });
  });
}

const DRIVERS = {
  "openai-node chat.completions": {
    provider: "openai",
    async run({ root, headers, stream, signal }) {
      const client = new OpenAI({ apiKey: "sk-test", baseURL: `${root}/v1`, defaultHeaders: headers });
      const body = { model: "gpt-4o-mini", messages: [{ role: "user", content: PROMPT }], max_completion_tokens: RESERVE };
      if (!stream) {
        const c = await client.chat.completions.create(body, { signal });
        return { text: c.choices[0].message.content, usage: c.usage, total: c.usage.total_tokens };
      }
      const s = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal });
      let text = "";
      let usage;
      for await (const chunk of s) {
        text += chunk.choices[0]?.delta?.content ?? "";
        if (chunk.usage) usage = chunk.usage;
      }
      return { text, usage, total: usage?.total_tokens };
    },
  },
  "openai-node responses": {
    provider: "openai",
    async run({ root, headers, stream, signal }) {
      const client = new OpenAI({ apiKey: "sk-test", baseURL: `${root}/v1`, defaultHeaders: headers });
      const body = { model: "gpt-4o-mini", input: PROMPT, max_output_tokens: RESERVE };
      if (!stream) {
        const r = await client.responses.create(body, { signal });
        return { text: r.output_text, usage: r.usage, total: r.usage.total_tokens };
      }
      const s = client.responses.stream(body, { signal });
      let text = "";
      for await (const event of s) if (event.type === "response.output_text.delta") text += event.delta;
      const r = await s.finalResponse();
      return { text, usage: r.usage, total: r.usage?.total_tokens };
    },
  },
  "@anthropic-ai/sdk messages": {
    provider: "anthropic",
    async run({ root, headers, stream, signal }) {
      const client = new Anthropic({ apiKey: "sk-ant-test", baseURL: root, defaultHeaders: headers });
      const body = { model: MODEL.anthropic, max_tokens: RESERVE, messages: [{ role: "user", content: PROMPT }] };
      const m = stream ? await client.messages.stream(body, { signal }).finalMessage() : await client.messages.create(body, { signal });
      return { text: m.content.map((b) => b.text).join(""), usage: m.usage, total: totalOf("anthropic", m.usage) };
    },
  },
  "@google/genai models": {
    provider: "gemini",
    async run({ root, headers, stream, signal }) {
      const client = new GoogleGenAI({ apiKey: "gm-test", httpOptions: { baseUrl: root, headers } });
      const params = { model: MODEL.gemini, contents: PROMPT, config: { maxOutputTokens: RESERVE, abortSignal: signal } };
      if (!stream) {
        const r = await client.models.generateContent(params);
        return { text: r.text, usage: r.usageMetadata, total: r.usageMetadata.totalTokenCount };
      }
      let text = "";
      let usage;
      for await (const chunk of await client.models.generateContentStream(params)) {
        text += chunk.text ?? "";
        if (chunk.usageMetadata) usage = chunk.usageMetadata;
      }
      return { text, usage, total: usage?.totalTokenCount };
    },
  },
  "ai + @ai-sdk/openai (Responses)": {
    provider: "openai",
    run: (o) => aiSdk(createOpenAI({ apiKey: "sk-test", baseURL: `${o.root}/v1`, headers: o.headers })("gpt-4o-mini"), o),
  },
  "ai + @ai-sdk/openai (Chat)": {
    provider: "openai",
    run: (o) => aiSdk(createOpenAI({ apiKey: "sk-test", baseURL: `${o.root}/v1`, headers: o.headers }).chat("gpt-4o-mini"), o),
  },
  "ai + @ai-sdk/anthropic": {
    provider: "anthropic",
    run: (o) => aiSdk(createAnthropic({ apiKey: "sk-ant-test", baseURL: `${o.root}/v1`, headers: o.headers })(MODEL.anthropic), o),
  },
  "python openai chat.completions": { provider: "openai", run: (o) => python("openai", MODEL.openai, o) },
  "python anthropic messages": { provider: "anthropic", run: (o) => python("anthropic", MODEL.anthropic, o) },
};

/** The AI SDK's generateText / streamText; a stream's error part (or onError) is thrown. */
async function aiSdk(model, { stream, signal }) {
  const params = { model, prompt: PROMPT, maxOutputTokens: RESERVE, abortSignal: signal };
  if (!stream) {
    const r = await generateText(params);
    return { text: r.text, usage: r.usage, total: r.usage.totalTokens };
  }
  let error;
  const r = streamText({ ...params, onError: ({ error: e }) => (error ??= e) });
  let text = "";
  for await (const part of r.fullStream) {
    if (part.type === "text-delta") text += part.text;
    if (part.type === "error") error ??= part.error;
  }
  if (error) throw error;
  const usage = await r.usage;
  return { text, usage, total: usage.totalTokens };
}

let origin;
let tg;
let base;
let tenants = 0;
const tenant = (label) => `${label.replace(/[^a-z0-9]+/gi, "-").toLowerCase()}-${++tenants}`;

before(async () => {
  origin = await providerOrigin();
  tg = await startTollgate({
    config: CONFIG,
    vars: { UPSTREAM: origin.url, TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN },
    workerOptions: { outboundService: undefined },
  });
  base = new URL(tg.url).origin;
});

after(async () => {
  try {
    if (tg) {
      await tg.settled();
      assert.ok(!/panicked|RuntimeError: unreachable/i.test(tg.logs()), "no panic in the Worker");
    }
  } finally {
    await tg?.dispose();
    tg?.cleanup();
    await origin?.close();
  }
});

/** The key's admin status for rule `name` (windows[0].used: what is committed, held included while in flight). */
async function status(name, key) {
  const res = await tg.admin(`/.tollgate/status?rule=${name}&header:x-tenant=${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(res.status, 200, `admin status for ${name}/${key}`);
  return res.json();
}

/** What the key was charged, once the commit landed: polled until `expected` (or 5 s), then the last seen. */
async function charged(name, key, expected) {
  let used;
  for (let i = 0; i < 50; i++) {
    const s = await status(name, key);
    used = s.windows[0].used;
    if (used === expected && !s.held) return used;
    await sleep(100);
  }
  return used;
}

/** What the key was charged once nothing is held (polled for at most 5 s). */
async function chargedOnce(name, key) {
  let s;
  for (let i = 0; i < 50; i++) {
    s = await status(name, key);
    if (!s.held && s.windows[0].used > 0) break;
    await sleep(100);
  }
  return s.windows[0].used;
}

/** `run` bounded by `ms`: { value } or { error }, and the wall time; the call is aborted at the bound. */
async function bounded(ms, run) {
  const controller = new AbortController();
  const started = Date.now();
  let timer;
  const deadline = new Promise((resolve) => (timer = setTimeout(() => resolve({ timedOut: true }), ms)));
  const outcome = await Promise.race([
    run(controller.signal).then((value) => ({ value }), (error) => ({ error })),
    deadline,
  ]);
  clearTimeout(timer);
  if (outcome.timedOut) controller.abort();
  return { ...outcome, elapsed: Date.now() - started };
}

const describeError = (e) => (e ? `${e.constructor?.name}: ${String(e.message).slice(0, 300)}` : "none");

// --- (a), (b): the same text and usage, the charge the SDK's own usage ---

describe("through tollgate, each SDK reads the same text and usage as directly, and the budget is charged what the SDK reported", () => {
  let i = 0;
  for (const [label, driver] of Object.entries(DRIVERS)) {
    for (const stream of [false, true]) {
      const tokens = 300 + 17 * i++;
      test(`${label}, ${stream ? "streamed" : "not streamed"} (${tokens} tokens)`, { timeout: 60_000 }, async () => {
        const root = (where) => `${where}/big/${driver.provider}`;
        const key = tenant(label);
        const controls = { "x-tokens": String(tokens), "x-deltas": "8" };
        const direct = await driver.run({ root: root(origin.url), headers: { ...controls, "x-tenant": `direct-${key}` }, stream });
        const via = await driver.run({ root: root(base), headers: { ...controls, "x-tenant": key }, stream });
        assert.equal(direct.text, textOf(8), "the mock's text, read directly");
        assert.equal(direct.total, tokens, "the mock's usage, read directly");
        assert.deepEqual({ text: via.text, usage: via.usage }, { text: direct.text, usage: direct.usage }, "the same text and usage through tollgate");
        assert.equal(await charged(`big-${driver.provider}`, key, via.total), via.total, "charged the total the SDK reported");
      });
    }
  }
});

// --- (c): the 429 ---

/** The SDK's own rate-limit error, and the provider's error body parsed from it: a failure message, or null. */
const RATE_LIMITED = {
  "openai-node chat.completions": openaiRateLimited,
  "openai-node responses": openaiRateLimited,
  "@anthropic-ai/sdk messages": (e) => {
    if (!(e instanceof Anthropic.RateLimitError)) return `not Anthropic.RateLimitError: ${describeError(e)}`;
    if (e.error?.error?.type !== "rate_limit_error") return `error.error.type is ${JSON.stringify(e.error?.error?.type)} (body ${JSON.stringify(e.error)}), not rate_limit_error`;
    if (typeof e.error.error.message !== "string" || !e.error.error.message) return "no message in the body's error";
    return null;
  },
  "@google/genai models": (e) => {
    if (!(e instanceof ApiError) || e.status !== 429) return `not ApiError 429: ${describeError(e)}`;
    let body;
    try {
      body = JSON.parse(e.message);
    } catch {
      return `the message is not the JSON body: ${e.message}`;
    }
    if (body.error?.code !== 429 || body.error?.status !== "RESOURCE_EXHAUSTED" || typeof body.error?.message !== "string") return `not Gemini's error shape: ${e.message.slice(0, 300)}`;
    if (/^\s*[{[]/.test(body.error.message)) return `the error's message is itself JSON (double-encoded): ${body.error.message.slice(0, 200)}`;
    return null;
  },
  "ai + @ai-sdk/openai (Responses)": (e) => aiRateLimited(e, (data) => typeof data?.error?.message === "string"),
  "ai + @ai-sdk/openai (Chat)": (e) => aiRateLimited(e, (data) => typeof data?.error?.message === "string"),
  "ai + @ai-sdk/anthropic": (e) => aiRateLimited(e, (data) => data?.type === "error" && data?.error?.type === "rate_limit_error"),
  // openai-python keeps the body's `error` object; its message reads "Error code: 429 - {…}".
  "python openai chat.completions": (e) =>
    e instanceof PythonSdkError && e.cls === "RateLimitError" && e.status === 429 && typeof e.body?.message === "string" && /Rate limit/.test(e.message)
      ? null
      : `not openai.RateLimitError with the error's message: ${describeError(e)} ${JSON.stringify(e?.body)}`,
  "python anthropic messages": (e) =>
    e instanceof PythonSdkError && e.cls === "RateLimitError" && e.status === 429 && e.body?.error?.type === "rate_limit_error"
      ? null
      : `not anthropic.RateLimitError with a rate_limit_error body: ${describeError(e)} ${JSON.stringify(e?.body)}`,
};

function openaiRateLimited(e) {
  if (!(e instanceof OpenAI.RateLimitError)) return `not OpenAI.RateLimitError: ${describeError(e)}`;
  if (typeof e.error?.message !== "string" || !e.error.message) return `no error object with a message in the body: ${e.message}`;
  return null;
}

function aiRateLimited(e, parsed) {
  const call = RetryError.isInstance(e) ? e.lastError : e;
  if (!APICallError.isInstance(call) || call.statusCode !== 429) return `not APICallError 429 (or RetryError of one): ${describeError(e)}`;
  if (!parsed(call.data)) return `the provider's error body was not parsed: data ${JSON.stringify(call.data)}, body ${String(call.responseBody).slice(0, 200)}`;
  return null;
}

const BOUND_MS = 20_000;

describe("at the 429 (the daily budget spent), each SDK raises its own rate-limit error with the provider's body, within seconds though Retry-After says hours", { concurrency: true }, () => {
  for (const [label, driver] of Object.entries(DRIVERS)) {
    for (const stream of [false, true]) {
      test(`${label}, ${stream ? "streamed" : "not streamed"}`, { timeout: 90_000 }, async () => {
        const key = tenant(`429 ${label}`);
        const root = `${base}/small/${driver.provider}`;
        const headers = { "x-tenant": key, "x-tokens": String(RESERVE) };
        // Spend the budget (1,000 of 1,000) with one answer.
        const first = await driver.run({ root, headers, stream: false });
        assert.equal(first.total, RESERVE);
        assert.equal(await charged(`small-${driver.provider}`, key, RESERVE), RESERVE, "the budget is spent");
        const raw = await fetch(`${root}/v1/chat/completions`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: "{}" });
        await raw.arrayBuffer();
        assert.equal(raw.status, 429);
        const retryAfter = Number(raw.headers.get("retry-after"));
        assert.ok(retryAfter > 3_600, `Retry-After says hours: ${raw.headers.get("retry-after")}`);
        const before = origin.requests.filter((r) => r.tenant === key).length;
        const { value, error, timedOut, elapsed } = await bounded(BOUND_MS, (signal) => driver.run({ root, headers, stream, signal }));
        assert.ok(!timedOut, `the SDK still waited after ${BOUND_MS} ms (Retry-After: ${retryAfter} s; x-should-retry: ${raw.headers.get("x-should-retry")})`);
        assert.equal(value, undefined, "no answer at a spent budget");
        const wrong = RATE_LIMITED[label](error);
        assert.equal(wrong, null, `${wrong} (content-type ${raw.headers.get("content-type")}; ${elapsed} ms)`);
        assert.equal(origin.requests.filter((r) => r.tenant === key).length, before, "nothing reached the origin");
      });
    }
  }
});

// --- (d): cut = true ---

// 300 tokens: under the reserve throughout. 1,150 (230 in, 920 out: within
// max_tokens = 1,000): past the reserve only in the final report, which
// OpenAI (usage only at the end) and Anthropic (message_start's input, then
// the final message_delta) send once the answer is over. Gemini reports
// usage growing in every chunk, so an answer of 1,150 passes the reserve
// while it runs (a cut by design): Gemini only at 300.
describe("cut = true: an answer that ended normally raises nothing and delivers its whole text", () => {
  for (const [label, driver] of Object.entries(DRIVERS)) {
    for (const tokens of driver.provider === "gemini" ? [300] : [300, 1_150]) {
      for (const stream of [false, true]) {
        test(`${label}, ${stream ? "streamed" : "not streamed"}, ${tokens} tokens`, { timeout: 60_000 }, async () => {
          const key = tenant(`cut ${label}`);
          const { value, error } = await bounded(30_000, (signal) =>
            driver.run({ root: `${base}/cut/${driver.provider}`, headers: { "x-tenant": key, "x-tokens": String(tokens), "x-deltas": "8" }, stream, signal }),
          );
          assert.equal(error, undefined, `raised ${describeError(error)}`);
          assert.equal(value.text, textOf(8), "the whole text");
          assert.equal(value.total, tokens);
          assert.equal(await charged(`cut-${driver.provider}`, key, tokens), tokens, "charged the usage reported, in full");
        });
      }
    }
  }
});

/**
 * A stream whose origin ignores its output cap (usage reported as it grows,
 * 100 tokens an event, up to 5,000): cut past the reserve, the SDK raises
 * its own error; the origin stopped soon after; charged the report that
 * passed the reserve (above max: never less than what was reported).
 */
const RUNAWAYS = {
  "@google/genai models": (e) => (e instanceof ApiError && e.status === 429 ? null : `not ApiError 429: ${describeError(e)}`),
  "@anthropic-ai/sdk messages": (e) =>
    e instanceof Anthropic.APIError && e.error?.error?.type === "rate_limit_error" ? null : `not Anthropic.APIError with a rate_limit_error body: ${describeError(e)} ${JSON.stringify(e?.error)}`,
  "ai + @ai-sdk/anthropic": (e) => {
    const type = e?.type ?? e?.error?.type ?? e?.data?.error?.type;
    return type === "rate_limit_error" || (APICallError.isInstance(e) && e.statusCode === 429) ? null : `not Anthropic's rate_limit_error: ${describeError(e)} ${JSON.stringify(e)}`;
  },
  // anthropic-python raises an APIStatusError (the stream's status was 200) with the error event's body.
  "python anthropic messages": (e) =>
    e instanceof PythonSdkError && /APIStatusError|RateLimitError/.test(e.cls) && e.body?.error?.type === "rate_limit_error" ? null : `not anthropic's rate_limit_error: ${describeError(e)} ${JSON.stringify(e?.body)}`,
};

describe("cut = true: a stream cut while running (the origin ignores its output cap) raises the SDK's own error", () => {
  for (const [label, isExpected] of Object.entries(RUNAWAYS)) {
    const driver = DRIVERS[label];
    test(label, { timeout: 60_000 }, async () => {
      const key = tenant(`runaway ${label}`);
      const { error, timedOut } = await bounded(30_000, (signal) =>
        driver.run({ root: `${base}/cut/${driver.provider}`, headers: { "x-tenant": key, "x-end": "runaway" }, stream: true, signal }),
      );
      assert.ok(!timedOut, "the stream ended within 30 s");
      assert.notEqual(error, undefined, "the SDK raised");
      const wrong = isExpected(error);
      assert.equal(wrong, null, wrong);
      await sleep(300);
      assert.ok(origin.served[key] <= RESERVE + 500, `the origin stopped soon after the cut: ${origin.served[key]} emitted`);
      // The report that passed the reserve said more than max: it is charged (what was spent, at least).
      const got = await chargedOnce(`cut-${driver.provider}`, key);
      assert.ok(got > RESERVE && got <= origin.served[key], `charged ${got}: the figures read (above max ${RESERVE}), at most the ${origin.served[key]} emitted`);
    });
  }
});

// --- what the SDKs send (item 8: which key each provider's clients present) ---

test("the headers each SDK sends: its key (Anthropic's TS and Python SDKs a Bearer token, not x-api-key), and the tenant header the rules key on", { timeout: 60_000 }, async () => {
  const seen = {};
  for (const [label, driver] of Object.entries(DRIVERS)) {
    const key = tenant(`headers ${label}`);
    await driver.run({ root: `${base}/big/${driver.provider}`, headers: { "x-tenant": key }, stream: false });
    const [req] = origin.requests.filter((r) => r.tenant === key);
    assert.equal(req.headers["x-tenant"], key, `${label}: the tenant header passed through tollgate`);
    seen[label] = { authorization: req.headers.authorization ?? null, "x-api-key": req.headers["x-api-key"] ?? null, "x-goog-api-key": req.headers["x-goog-api-key"] ?? null };
  }
  assert.deepEqual(seen, {
    "openai-node chat.completions": { authorization: "Bearer sk-test", "x-api-key": null, "x-goog-api-key": null },
    "openai-node responses": { authorization: "Bearer sk-test", "x-api-key": null, "x-goog-api-key": null },
    "@anthropic-ai/sdk messages": { authorization: "Bearer sk-ant-test", "x-api-key": null, "x-goog-api-key": null },
    "@google/genai models": { authorization: null, "x-api-key": null, "x-goog-api-key": "gm-test" },
    "ai + @ai-sdk/openai (Responses)": { authorization: "Bearer sk-test", "x-api-key": null, "x-goog-api-key": null },
    "ai + @ai-sdk/openai (Chat)": { authorization: "Bearer sk-test", "x-api-key": null, "x-goog-api-key": null },
    "ai + @ai-sdk/anthropic": { authorization: null, "x-api-key": "sk-ant-test", "x-goog-api-key": null },
    "python openai chat.completions": { authorization: "Bearer sk-test", "x-api-key": null, "x-goog-api-key": null },
    "python anthropic messages": { authorization: "Bearer sk-ant-test", "x-api-key": null, "x-goog-api-key": null },
  });
});
