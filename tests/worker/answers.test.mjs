// LLM answers as providers really send them (issue 50, items 1-6): each
// test ran against 3a1d203 and failed there. The origin is a real local
// HTTP server (node:http, through the UPSTREAM var) that answers in the
// shape the request's `x-shape` header names and keeps what it served per
// tenant (`x-tenant`): what its answers reported, or for a runaway stream
// what it emitted before the connection closed. Setup for the budgets: a
// 10,000-token day per tenant, reserve = max = 1,000.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { withTollgate, sleep } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

/** An SSE event; `eol` "\r\n" frames it as Gemini does. */
const sse = (data, event, eol = "\n") => `${event ? `event: ${event}${eol}` : ""}data: ${JSON.stringify(data)}${eol}${eol}`;

const anthropicText = (text) => sse({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }, "content_block_delta");
const anthropicStart = sse({ type: "message_start", message: { id: "m", type: "message", role: "assistant", content: [], usage: { input_tokens: 40, output_tokens: 1 } } }, "message_start");
const geminiChunk = (text, total, extra = {}) => ({ candidates: [{ content: { parts: [{ text }], role: "model" }, index: 0, ...extra }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: total - 10, totalTokenCount: total } });

/** The answers, by shape: [content type, events (or a runaway's writer), tokens the provider spent]. */
const SHAPES = {
  // Item 1: 200 input + 1,000 output under count = "total": 1,200, above max.
  "over-max": () => ["text/event-stream", [
    sse({ id: "c", choices: [{ index: 0, delta: { content: "Hello" } }], usage: null }),
    sse({ id: "c", choices: [], usage: { prompt_tokens: 200, completion_tokens: 1_000, total_tokens: 1_200 } }),
    "data: [DONE]\n\n",
  ], 1_200],
  // Item 5: Anthropic's last message_delta passes the reserve as the answer ends.
  "anthropic-over": () => ["text/event-stream", [
    anthropicStart,
    anthropicText("Hello"),
    sse({ type: "message_delta", delta: { stop_reason: "max_tokens" }, usage: { output_tokens: 1_160 } }, "message_delta"),
    sse({ type: "message_stop" }, "message_stop"),
  ], 1_200],
  // Item 2: Gemini repeats usageMetadata in every chunk; the last (an image, ~70 KB) says 900.
  "gemini-image": () => ["text/event-stream", [
    sse(geminiChunk("Here", 15), null, "\r\n"),
    sse(geminiChunk(" is", 400), null, "\r\n"),
    sse({ candidates: [{ content: { parts: [{ inlineData: { mimeType: "image/png", data: "iVBOR".padEnd(70_000, "A") } }], role: "model" }, finishReason: "STOP", index: 0 }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 890, totalTokenCount: 900 }, modelVersion: "gemini-2.5-flash" }, null, "\r\n"),
  ], 900],
  // Item 2: the Responses API's response.completed repeats the instructions and the output (~140 KB).
  "responses-long": () => {
    const text = "lorem ipsum ".repeat(6_000);
    const response = (status, usage, output = []) => ({ id: "resp_1", object: "response", status, instructions: text, output, usage });
    return ["text/event-stream", [
      sse({ type: "response.created", sequence_number: 0, response: response("in_progress", null) }, "response.created"),
      sse({ type: "response.output_text.delta", sequence_number: 1, item_id: "msg_1", output_index: 0, content_index: 0, delta: "lorem" }, "response.output_text.delta"),
      sse({ type: "response.completed", sequence_number: 2, response: response("completed", { input_tokens: 400, output_tokens: 500, total_tokens: 900 }, [{ type: "message", id: "msg_1", role: "assistant", content: [{ type: "output_text", text }] }]) }, "response.completed"),
    ], 900];
  },
  // Item 3: an overloaded_error after 30 text deltas: no message_delta.
  "anthropic-overloaded": () => ["text/event-stream", [
    anthropicStart,
    ...Array.from({ length: 30 }, () => anthropicText("word ")),
    sse({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }, "error"),
  ], 900],
  // Item 3: a clean end without message_delta.
  "anthropic-no-delta": () => ["text/event-stream", [anthropicStart, ...Array.from({ length: 30 }, () => anthropicText("word ")), sse({ type: "message_stop" }, "message_stop")], 900],
  // Items 4 and 6: runaway streams that ignore the output cap (100 tokens a chunk, up to 5,000).
  "gemini-array": () => ["application/json", (n, first) => `${first ? "[" : "\n,\r\n"}${JSON.stringify(geminiChunk("more", n))}`, "]"],
  "gemini-crlf": () => ["text/event-stream", (n) => sse(geminiChunk("more", n), null, "\r\n"), ""],
};

/** The origin of SHAPES. `served[tenant]`: tokens spent, by what the answers report or (runaways) emitted. */
async function providerOrigin() {
  const served = {};
  const server = createServer(async (req, res) => {
    for await (const _ of req);
    const tenant = req.headers["x-tenant"];
    const add = (n) => (served[tenant] = (served[tenant] ?? 0) + n);
    const [type, body, spent] = SHAPES[req.headers["x-shape"]]();
    res.writeHead(200, { "content-type": type, "cache-control": "no-cache" });
    if (typeof body === "function") {
      let closed = false;
      res.on("close", () => (closed = true));
      for (let n = 100; n <= 5_000 && !closed; n += 100) {
        res.write(body(n, n === 100));
        add(100);
        await sleep(10);
      }
      if (!closed) res.end(spent);
      return;
    }
    add(spent);
    for (const event of body) {
      res.write(event);
      await sleep(2);
    }
    res.end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { served, url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

const tokensRule = (metering) =>
  rule("llm", "/v1/*", { key: ["header:x-tenant"], limits: limit(10_000, "1d"), counting: { mode: "response", statuses: [200] }, metering });

async function withProvider(metering, body) {
  const origin = await providerOrigin();
  try {
    await withTollgate({ config: config(tokensRule(metering)), vars: { UPSTREAM: origin.url }, workerOptions: { outboundService: undefined } }, (tg) => body(tg, origin));
  } finally {
    await origin.close();
  }
}

const call = (tg, tenant, shape) => tg.fetch("/v1/chat", { method: "POST", body: '{"stream":true}', headers: { "x-tenant": tenant, "x-shape": shape } });

/** Calls one at a time until the budget refuses (a refusal retried after a pause: a commit may still be landing); how many were answered. */
async function untilRefused(tg, tenant, shape) {
  let [answered, refusals] = [0, 0];
  for (let i = 0; i < 60; i++) {
    const res = await call(tg, tenant, shape);
    await res.text().catch(() => "");
    if (res.status === 200) {
      answered++;
      refusals = 0;
    } else if (++refusals === 3) {
      return answered;
    } else {
      await sleep(300);
    }
  }
  return answered;
}

for (const [item, shape, metering, { answers, served }] of [
  ["1: a report above max is recorded in full (12,000 served against 10,000 on 3a1d203)", "over-max", { usage: "openai", reserve: 1_000, max: 1_000 }, { answers: 8, served: 9_600 }],
  ["2: a Gemini chunk of 70 KB is read, not skipped for an earlier smaller report (36,000 served)", "gemini-image", { usage: "gemini", reserve: 1_000, max: 1_000 }, { answers: 11, served: 9_900 }],
  ["2: a Responses response.completed of 140 KB is read: charged its usage, not max", "responses-long", { usage: "openai", reserve: 1_000, max: 1_000 }, { answers: 11, served: 9_900 }],
  ["3: an Anthropic stream cut by an overloaded_error is charged max, not message_start's input + 1", "anthropic-overloaded", { usage: "anthropic", reserve: 1_000, max: 1_000 }, { answers: 10, served: 9_000 }],
  ["3: an Anthropic stream that ends without message_delta is charged max", "anthropic-no-delta", { usage: "anthropic", reserve: 1_000, max: 1_000 }, { answers: 10, served: 9_000 }],
]) {
  test(`item ${item}`, { timeout: 120_000 }, () =>
    withProvider(metering, async (tg, origin) => {
      const answered = await untilRefused(tg, "t", shape);
      assert.ok(origin.served.t <= 10_000, `served ${origin.served.t} tokens against 10,000`);
      assert.deepEqual({ answers: answered, served: origin.served.t }, { answers, served });
      await tg.settled();
      const missing = tg.logEvents().filter((e) => e.tollgate === "usage_missing");
      if (shape.startsWith("anthropic")) assert.ok(missing.length >= 1 && missing.every((e) => e.committed === 1_000), JSON.stringify(missing));
      else assert.deepEqual(missing, [], "the usage was there");
    }));
}

test("item 4: cut = true cuts Gemini's stream without alt=sse (a JSON array) past its reserve, and the client still gets a JSON array", { timeout: 120_000 }, () =>
  withProvider({ usage: "gemini", reserve: 1_000, max: 1_000, cut: true }, async (tg, origin) => {
    let answered = 0;
    for (let i = 0; i < 12; i++) {
      const res = await call(tg, "t", "gemini-array");
      const text = await res.text();
      if (res.status !== 200) break;
      answered++;
      const elements = JSON.parse(text);
      const last = elements.pop();
      assert.equal(last.error.status, "RESOURCE_EXHAUSTED", text.slice(-300));
      assert.equal(elements.at(-1).usageMetadata.totalTokenCount, 1_100, "passed on up to the element that passed the reserve");
    }
    await sleep(300);
    assert.equal(answered, 9, "each cut call commits the 1,100 it reported (above max): 9 fit 10,000");
    assert.ok(origin.served.t <= 9 * 1_300, `the origin stopped soon after each cut: ${origin.served.t} emitted (50,000 on 3a1d203)`);
  }));

test("item 5: cut = true leaves an answer that ended normally whole: OpenAI's [DONE] and Anthropic's message_stop after a last report past the reserve", { timeout: 60_000 }, () =>
  withProvider({ usage: "openai", reserve: 1_000, max: 1_000, cut: true }, async (tg) => {
    const res = await call(tg, "t", "over-max");
    const text = await res.text();
    assert.ok(text.endsWith("data: [DONE]\n\n") && !text.includes('"error"'), text);
    await tg.settled();
    assert.deepEqual(tg.logEvents().filter((e) => e.tollgate === "answer_cut"), []);
  }).then(() =>
    withProvider({ usage: "anthropic", reserve: 1_000, max: 1_000, cut: true }, async (tg) => {
      const text = await (await call(tg, "t", "anthropic-over")).text();
      assert.ok(text.endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n') && !text.includes("event: error"), text);
    })));

test("item 6: a CRLF-framed Gemini stream is cut after its whole blank line, the error event framed in CRLF", { timeout: 60_000 }, () =>
  withProvider({ usage: "gemini", reserve: 1_000, max: 1_000, cut: true }, async (tg) => {
    const text = await (await call(tg, "t", "gemini-crlf")).text();
    assert.doesNotMatch(text, /\r\n\rdata:/, "no event begins inside a blank line");
    const events = text.split("\r\n\r\n");
    assert.equal(events.pop(), "", "the stream ends with a blank line");
    const data = events.map((e) => JSON.parse(e.replace(/^data: /, "")));
    assert.equal(data.at(-1).error.status, "RESOURCE_EXHAUSTED");
    assert.equal(data.at(-2).usageMetadata.totalTokenCount, 1_100);
  }));
