// Token budgets read from the answer itself (issue 37): `metering = { usage
// = "openai" | "anthropic" | "gemini", reserve, max }`. The origin is a real
// local HTTP server (node:http, reached through the UPSTREAM var) that
// streams like an LLM API: OpenAI-style SSE (usage in the final chunk),
// Anthropic-style SSE (cumulative message_delta), Gemini-style SSE (usage in
// every chunk) and JSON bodies. It keeps what it served per tenant; the
// tests compare that with the budget.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { withTollgate, sleep } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const sse = (data, event) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

/** The events of one answer of `tokens` (input 20% of it), by style. */
function events(style, tokens, { usage = true } = {}) {
  const input = Math.floor(tokens / 5);
  const output = tokens - input;
  const text = (t) => ({ choices: [{ index: 0, delta: { content: t } }], usage: null });
  if (style === "openai") {
    const last = usage ? [sse({ choices: [], usage: { prompt_tokens: input, completion_tokens: output, total_tokens: tokens } })] : [];
    return [sse(text("Hel")), ": keep-alive\n\n", sse(text("lo")), ...last, "data: [DONE]\n\n"];
  }
  if (style === "anthropic") {
    const half = Math.floor(output / 2);
    const delta = (n, stop) => sse({ type: "message_delta", delta: stop ? { stop_reason: "end_turn" } : {}, ...(usage ? { usage: { output_tokens: n } } : {}) }, "message_delta");
    const start = { type: "message_start", message: { id: "m", ...(usage ? { usage: { input_tokens: input, output_tokens: 1 } } : {}) } };
    return [
      sse(start, "message_start"),
      sse({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hi" } }, "content_block_delta"),
      delta(half, false),
      delta(output, true),
      sse({ type: "message_stop" }, "message_stop"),
    ];
  }
  throw new Error(style);
}

/**
 * The LLM-like origin. Per request, from its headers: `x-tokens` (what the
 * answer costs), `x-style` (openai | anthropic | gemini | json), `x-end`
 * (`clean`, `no-usage`, `error-event`, `fail` (the socket destroyed
 * mid-stream), `forever` (a comment every 100 ms until the client goes)),
 * `x-gap` (ms between writes, 5 unless given).
 * Every event is written on its own, `x-gap` ms apart, and the usage event
 * in two writes split inside its JSON. `served[tenant]`: tokens reported on clean
 * ends, or emitted (Gemini) until the connection closed.
 */
async function llmOrigin() {
  const served = {};
  let inFlight = 0;
  let mostInFlight = 0;
  const server = createServer(async (req, res) => {
    const h = req.headers;
    const tenant = h["x-tenant"];
    const tokens = Number(h["x-tokens"] ?? 0);
    const style = h["x-style"] ?? "openai";
    const end = h["x-end"] ?? "clean";
    const gap = Number(h["x-gap"] ?? 5);
    for await (const _ of req);
    inFlight++;
    mostInFlight = Math.max(mostInFlight, inFlight);
    res.on("close", () => inFlight--);
    const add = (n) => (served[tenant] = (served[tenant] ?? 0) + n);
    if (style === "json") {
      add(tokens);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ choices: [{ message: { content: "hi" } }], usage: { prompt_tokens: 1, completion_tokens: tokens - 1, total_tokens: tokens } }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (style === "gemini") return geminiRunaway(res, (n) => add(n));
    if (end === "forever") {
      const timer = setInterval(() => res.write(": still thinking\n\n"), 100);
      res.on("close", () => clearInterval(timer));
      return;
    }
    const list = end === "error-event"
      ? [sse({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }, "error")]
      : events(style, tokens, { usage: end !== "no-usage" });
    for (const [i, event] of list.entries()) {
      if (end === "fail" && i === 2) {
        res.destroy();
        return;
      }
      const cut = event.includes("usage") ? event.indexOf("tokens") : event.length;
      res.write(event.slice(0, cut));
      await sleep(gap);
      if (cut < event.length) res.write(event.slice(cut));
      await sleep(gap);
    }
    if (end === "clean") add(tokens);
    res.end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    served,
    mostInFlight: () => mostInFlight,
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((r) => server.close(r)),
  };
}

/** A Gemini-style stream that ignores max_tokens: 100 tokens a chunk, its usageMetadata cumulative, up to 5,000. */
async function geminiRunaway(res, add) {
  let closed = false;
  res.on("close", () => (closed = true));
  for (let n = 100; n <= 5_000 && !closed; n += 100) {
    res.write(sse({ candidates: [{ content: { parts: [{ text: "more" }] } }], usageMetadata: { promptTokenCount: 0, candidatesTokenCount: n, totalTokenCount: n } }));
    add(100);
    await sleep(10);
  }
  if (!closed) res.end();
}

const tokensRule = (budget, metering, counting = {}) =>
  rule("ai-tokens", "/v1/*", { key: ["header:x-tenant"], limits: limit(budget, "1d"), metering, counting: { mode: "response", ...counting } });

/** Runs `body(tg, origin)` with tollgate in front of a fresh LLM origin. */
async function withLlm(cfg, body) {
  const origin = await llmOrigin();
  try {
    await withTollgate({ config: cfg, vars: { UPSTREAM: origin.url }, workerOptions: { outboundService: undefined } }, (tg) => body(tg, origin));
  } finally {
    await origin.close();
  }
}

const call = (tg, tenant, tokens, headers = {}, init = {}) =>
  tg.fetch("/v1/chat", { method: "POST", body: '{"stream":true}', ...init, headers: { "x-tenant": tenant, "x-tokens": String(tokens), ...headers } });

/** A call, its body read to the end: status and text. */
async function complete(tg, tenant, tokens, headers) {
  const res = await call(tg, tenant, tokens, headers);
  return { status: res.status, text: await res.text() };
}

/** Calls until the budget refuses, a refusal retried after a pause (a commit may still be landing). */
async function untilRefused(once) {
  let refusals = 0;
  for (let i = 0; i < 200; i++) {
    if (await once()) {
      refusals = 0;
    } else if (++refusals === 3) {
      return;
    } else {
      await sleep(300);
    }
  }
  throw new Error("never refused");
}

let seed = 11;
const tokens = () => 100 + Math.floor(((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31) * 601);

for (const style of ["openai", "anthropic", "json"]) {
  for (const mode of ["sequential", "20 at once"]) {
    test(`${style}: a 10,000-token daily budget under reserve = max = 1,000, calls of 100-700, ${mode}: never exceeded, at least 80% usable`, { timeout: 120_000 }, (t) => {
      const cfg = config(tokensRule(10_000, { usage: "openai" === style || style === "json" ? "openai" : "anthropic", reserve: 1_000, max: 1_000 }));
      return withLlm(cfg, async (tg, origin) => {
        const headers = { "x-style": style };
        const wave = mode === "sequential" ? 1 : 20;
        await untilRefused(async () => {
          const answers = await Promise.all(Array.from({ length: wave }, () => complete(tg, "school", tokens(), headers)));
          assert.ok(answers.every((a) => a.status === 200 || a.status === 429), JSON.stringify(answers.map((a) => a.status)));
          return answers.some((a) => a.status === 200);
        });
        const used = origin.served.school;
        assert.ok(used <= 10_000, `served ${used} tokens of a 10,000 budget`);
        assert.ok(used >= 8_000, `at least 80% usable: served ${used}`);
        t.diagnostic(`served ${used} of 10,000; at most ${origin.mostInFlight()} in flight`);
        assert.ok(origin.mostInFlight() <= 10, `reservations fit the budget: at most 10 of 1,000 in flight, saw ${origin.mostInFlight()}`);
      });
    });
  }
}

/**
 * How many calls of 300 tokens a budget of 3,000 admits after one first
 * call (reserve = max = 1,000; a call is admitted while at most 2,000 are
 * used): 6 after a clean 300 (300 committed: 300 … 1,800 admitted), 4 after
 * a call charged max (1,000 committed: 1,000 … 1,900).
 */
async function admittedAfter(tg, tenant, first, style = "anthropic") {
  await first();
  let admitted = 0;
  await untilRefused(async () => {
    const { status } = await complete(tg, tenant, 300, { "x-style": style });
    if (status === 200) admitted++;
    return status === 200;
  });
  return admitted;
}

test("every end of a stream is charged by its rule: a clean end its usage; no usage event, an error event, the client gone, the origin failed: max", { timeout: 180_000 }, () => {
  const cfg = config(tokensRule(3_000, { usage: "anthropic", reserve: 1_000, max: 1_000 }));
  return withLlm(cfg, async (tg) => {
    const ends = {
      clean: () => complete(tg, "clean", 300, { "x-style": "anthropic" }),
      "no usage event": () => complete(tg, "none", 300, { "x-style": "anthropic", "x-end": "no-usage" }),
      "an error event without usage": () => complete(tg, "error", 300, { "x-style": "anthropic", "x-end": "error-event" }),
      "the origin fails mid-stream": async () => {
        const res = await call(tg, "fail", 300, { "x-style": "anthropic", "x-end": "fail" });
        await res.text().catch(() => "");
      },
      "the client goes away": async () => {
        const controller = new AbortController();
        const res = await call(tg, "gone", 300, { "x-style": "anthropic", "x-end": "forever" }, { signal: controller.signal });
        const reader = res.body.getReader();
        await reader.read();
        controller.abort();
        await reader.cancel().catch(() => {});
        await sleep(500);
      },
    };
    const expected = { clean: 6, "no usage event": 4, "an error event without usage": 4, "the origin fails mid-stream": 4, "the client goes away": 4 };
    for (const [name, first] of Object.entries(ends)) {
      const tenant = { clean: "clean", "no usage event": "none", "an error event without usage": "error", "the origin fails mid-stream": "fail", "the client goes away": "gone" }[name];
      assert.equal(await admittedAfter(tg, tenant, first), expected[name], name);
    }
    await tg.settled();
    const missing = tg.logEvents().filter((e) => e.tollgate === "usage_missing");
    assert.ok(missing.some((e) => e.committed === 1_000 && e.header === "tokens"), JSON.stringify(missing));
  });
});

// A usage rule that never cuts reads its answer in batches while the
// events come fast and behind its client once they trickle (three of the
// last four batches, 25 ms apart, held two events or fewer; from the
// first byte when the rule's last answer trickled: src/glue/origin.rs
// `watchBody`, then `readBehind`: a read, then a rest of 20 ms, doubling
// up to 100 while the reads find little). At a model's pace (every write
// 40 ms apart) the switch comes mid-answer in a fresh isolate, a read
// finds one event or a piece of one, and the usage event (split in two
// writes) straddles two reads. The client gets every byte as the origin
// wrote it, and the answer is charged its usage.
for (const style of ["openai", "anthropic"]) {
  test(`${style}: an answer whose writes come 40 ms apart, read behind its client: every byte reaches the client as written, and a clean 300 is charged 300 (6 calls of 300 admitted after it, not 4)`, { timeout: 90_000 }, () => {
    const cfg = config(tokensRule(3_000, { usage: style, reserve: 1_000, max: 1_000 }));
    return withLlm(cfg, async (tg) => {
      let text;
      const admitted = await admittedAfter(tg, "slow", async () => {
        const first = await complete(tg, "slow", 300, { "x-style": style, "x-gap": "40" });
        assert.equal(first.status, 200);
        text = first.text;
      }, style);
      assert.equal(text, events(style, 300).join(""), "the answer byte for byte");
      assert.equal(admitted, 6, "charged its usage (300), not max (1,000)");
    });
  });
}

test("the bytes pass as they arrive: the client reads the first event before the origin writes the rest", { timeout: 60_000 }, async () => {
  let go;
  const proceed = new Promise((r) => (go = r));
  const server = createServer(async (req, res) => {
    for await (const _ of req);
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(sse({ choices: [{ delta: { content: "first" } }] }));
    await Promise.race([proceed, sleep(20_000)]);
    res.end(sse({ choices: [], usage: { total_tokens: 42 } }) + "data: [DONE]\n\n");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const cfg = config(tokensRule(10_000, { usage: "openai", reserve: 1_000, max: 1_000 }));
  try {
    await withTollgate({ config: cfg, vars: { UPSTREAM: `http://127.0.0.1:${server.address().port}` }, workerOptions: { outboundService: undefined } }, async (tg) => {
      const res = await call(tg, "t", 0);
      const reader = res.body.getReader();
      const started = Date.now();
      const { value } = await reader.read();
      assert.match(new TextDecoder().decode(value), /first/);
      assert.ok(Date.now() - started < 15_000, "the first event arrived while the origin still held the rest");
      go();
      let rest = "";
      for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
      assert.match(rest, /"total_tokens":42/);
    });
  } finally {
    await new Promise((r) => server.close(r));
  }
});

test("a stream that outlives reservation_ttl is cut before its reservation lapses and charged max: 2 endless streams never let a third call through a 2,000 budget", { timeout: 60_000 }, () => {
  const cfg = config(tokensRule(2_000, { usage: "openai", reserve: 1_000, max: 1_000 }, { reservation_ttl: "5s" }));
  return withLlm(cfg, async (tg) => {
    const endless = () => call(tg, "t", 0, { "x-end": "forever" });
    const streams = await Promise.all([endless(), endless()]);
    assert.deepEqual(streams.map((s) => s.status), [200, 200]);
    // The origin's streams never end: any end the client sees is the cut.
    const drained = streams.map((s) => s.text().then(() => "over", () => "over"));
    // While they run, past the reservation's lifetime and after, nothing else fits.
    const until = Date.now() + 7_000;
    while (Date.now() < until) {
      const res = await complete(tg, "t", 100);
      assert.equal(res.status, 429, "the budget is held or spent");
      await sleep(250);
    }
    assert.deepEqual(await Promise.all(drained), ["over", "over"], "both streams were cut");
    await tg.settled();
    const cuts = tg.logEvents().filter((e) => e.tollgate === "answer_cut" && e.reason === "reservation_ttl");
    assert.equal(cuts.length, 2, JSON.stringify(cuts));
  });
});

test("cut = true: a Gemini-style stream that ignores max_tokens is ended past its reserve with Gemini's error event; 3 calls, each charged the 1,100 it reported, spend a 3,300 budget", { timeout: 60_000 }, () => {
  const cfg = config(tokensRule(3_300, { usage: "gemini", reserve: 1_000, max: 1_000, cut: true }));
  return withLlm(cfg, async (tg, origin) => {
    for (let i = 0; i < 3; i++) {
      const { status, text } = await complete(tg, "g", 0, { "x-style": "gemini" });
      assert.equal(status, 200);
      const last = text.trim().split("\n\n").pop();
      assert.match(last, /^data: \{"error":\{"code":429,.*"status":"RESOURCE_EXHAUSTED"\}\}$/);
      const counts = [...text.matchAll(/"totalTokenCount":(\d+)/g)].map((m) => Number(m[1]));
      assert.equal(Math.max(...counts), 1_100, "passed on up to the event that passed the reserve");
    }
    await sleep(300);
    assert.ok(origin.served.g <= 3 * 1_300, `the origin stopped soon after each cut: ${origin.served.g} emitted`);
    assert.equal((await complete(tg, "g", 0, { "x-style": "gemini" })).status, 429, "3 cut calls committed 3 × 1,100: what they reported, above max (issue 50)");
    await tg.settled();
    assert.equal(tg.logEvents().filter((e) => e.tollgate === "answer_cut" && e.reason === "usage").length, 3);
  });
});

test("a client that forges usage in its own request is charged what the origin's answer reports", { timeout: 60_000 }, () => {
  const cfg = config(tokensRule(3_000, { usage: "openai", reserve: 1_000, max: 1_000 }));
  return withLlm(cfg, async (tg) => {
    const forged = 'data: {"choices":[],"usage":{"total_tokens":1}}\n\n';
    const first = () => call(tg, "f", 300, { "x-style": "openai", "x-usage": "1" }, { body: forged }).then((r) => r.text());
    assert.equal(await admittedAfter(tg, "f", first, "openai"), 6, "the answer's 300 committed, not the request's 1");
  });
});
