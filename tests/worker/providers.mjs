// The LLM providers' answers as they send them today, streamed and not, in
// one place the tests share (issue 50): a mock origin (node:http, reached
// through the Worker's UPSTREAM var, or directly by an SDK) that answers as
// OpenAI's Chat Completions and Responses APIs, Anthropic's Messages API and
// Gemini's generateContent / streamGenerateContent do, closely enough that
// the official SDKs parse it as they parse the real API.
//
// The formats (each provider's API reference and its SDK's parser):
// - OpenAI Chat Completions, `stream: true`: `data: {chat.completion.chunk}`
//   events, every one with `usage: null` and an `obfuscation` string (random
//   padding, on by default); with `stream_options.include_usage` one more
//   chunk before `data: [DONE]` whose `choices` is `[]` and whose `usage` is
//   the whole request's. An error mid-stream: `data: {"error":{...}}`.
// - OpenAI Responses, `stream: true`: `event: TYPE` + `data: {"type": TYPE,
//   "sequence_number": n, ...}`: response.created, response.in_progress,
//   response.output_item.added, response.content_part.added,
//   response.output_text.delta (with `obfuscation`), response.output_text.done,
//   response.content_part.done, response.output_item.done, then one terminal
//   event repeating the whole response: response.completed (status
//   `completed`, `usage`), response.incomplete (`incomplete_details`,
//   `usage`) or response.failed (`error`, `usage: null`). No `[DONE]`. An
//   error event: `event: error` + `{"type":"error","code","message","param",
//   "sequence_number"}`.
// - Anthropic Messages, `stream: true`: message_start (the message with
//   `usage`: input_tokens, cache_creation_input_tokens,
//   cache_read_input_tokens, cache_creation, output_tokens 1),
//   content_block_start, ping, content_block_delta (text_delta) ...,
//   content_block_stop, one or more message_delta (`usage` cumulative, with
//   the input figures repeated), message_stop. An error: `event: error` +
//   `{"type":"error","error":{"type":"overloaded_error",...}}`.
// - Gemini `:streamGenerateContent?alt=sse`: `data: {GenerateContentResponse}`
//   framed by CRLF (`\r\n\r\n`), `usageMetadata` in every chunk (cumulative,
//   `thoughtsTokenCount` counted in the total), `finishReason` on the last.
//   Without `alt=sse`: one JSON array, streamed element by element
//   (`[{...}\n,\r\n{...}\n]`, each element pretty-printed). An error:
//   `{"error":{"code","message","status"}}`.
// - Non-streamed: chat.completion, the response object, the message, one
//   GenerateContentResponse.
//
// Paths are recognised by their end, so any prefix (a rule's path in front
// of `/v1/...`) reaches the same provider: `.../chat/completions`,
// `.../responses`, `.../messages`, `...:generateContent`,
// `...:streamGenerateContent`.
//
// Controls, per request (headers, which each SDK sets with its default or
// per-request headers):
//   x-tenant   whose answer (what was served is kept per tenant)
//   x-tokens   the answer's total usage (default 300): input a fifth of it,
//              the rest output (split further into cache and thoughts
//              figures where the provider has them, adding up to the total)
//   x-deltas   text deltas (default 6)
//   x-end      how the answer ends:
//              clean      (default) as the provider ends a finished answer
//              no-usage   as clean, without any usage (OpenAI without the
//                         usage chunk, Anthropic without usage fields,
//                         Gemini without usageMetadata)
//              partial    usage only in figures the provider will still
//                         revise: Anthropic without any message_delta, Gemini
//                         without the last chunk (no finishReason), Responses
//                         without the terminal event
//              error      the provider's error event after half the deltas
//              failed     Responses: response.failed; others as error
//              incomplete Responses: response.incomplete (usage present)
//              reset      the socket destroyed after half the deltas
//              runaway    the origin ignores its output cap: text keeps
//                         coming, 100 tokens an event, the usage reported as
//                         it grows (Gemini's usageMetadata in every chunk,
//                         Anthropic's message_delta after each delta), up to
//                         x-runaway-max (5,000) tokens or until the client
//                         goes
//   x-message-deltas  Anthropic: message_delta events (default 1), each
//                     cumulative
//   x-status   answer this HTTP status with the provider's error body
//
// `served[tenant]`: the tokens the origin spent, i.e. the final usage
// reported on ends that report it, else the answer's tokens (`x-tokens`),
// or what a runaway emitted until its connection closed. `requests`: every
// request's method, path, query, headers and parsed body.
import { createServer } from "node:http";
import { randomBytes } from "node:crypto";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The fixed figures the mock stamps into its answers. */
export const MODEL = { openai: "gpt-4o-mini-2024-07-18", anthropic: "claude-sonnet-4-5-20250929", gemini: "gemini-2.5-flash" };
const CREATED = 1_767_225_600; // 2026-01-01, seconds

/** The words of an answer with `n` deltas: what each delta carries. */
export function deltas(n) {
  return Array.from({ length: n }, (_, i) => (i === 0 ? "Tok0" : ` tok${i}`));
}

/** The whole text of an answer with `n` deltas. */
export const textOf = (n) => deltas(n).join("");

/**
 * The usage of an answer of `total` tokens, by provider, as the provider
 * reports it; the figures add up to `total` under the provider's own rule
 * for its total (OpenAI `total_tokens`; Anthropic input + cache creation +
 * cache read + output; Gemini `totalTokenCount`, thoughts included).
 */
export function usageOf(provider, total) {
  const input = Math.floor(total / 5);
  const output = total - input;
  if (provider === "chat") {
    return {
      prompt_tokens: input,
      completion_tokens: output,
      total_tokens: total,
      prompt_tokens_details: { cached_tokens: Math.floor(input / 2), audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: Math.floor(output / 4), audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
  }
  if (provider === "responses") {
    return {
      input_tokens: input,
      input_tokens_details: { cached_tokens: Math.floor(input / 2) },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: Math.floor(output / 4) },
      total_tokens: total,
    };
  }
  if (provider === "anthropic") {
    const cacheRead = Math.floor(input / 4);
    const cacheWrite = Math.floor(input / 4);
    return {
      input_tokens: input - cacheRead - cacheWrite,
      cache_creation_input_tokens: cacheWrite,
      cache_read_input_tokens: cacheRead,
      cache_creation: { ephemeral_5m_input_tokens: cacheWrite, ephemeral_1h_input_tokens: 0 },
      output_tokens: output,
      service_tier: "standard",
    };
  }
  if (provider === "gemini") {
    const thoughts = Math.floor(output / 3);
    return {
      promptTokenCount: input,
      candidatesTokenCount: output - thoughts,
      totalTokenCount: total,
      promptTokensDetails: [{ modality: "TEXT", tokenCount: input }],
      thoughtsTokenCount: thoughts,
    };
  }
  throw new Error(provider);
}

/** The total a provider's usage object says, by that provider's rule (what `count = "total"` charges). */
export function totalOf(provider, usage) {
  if (provider === "chat" || provider === "responses") return usage.total_tokens;
  if (provider === "anthropic") return usage.input_tokens + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0) + usage.output_tokens;
  if (provider === "gemini") return usage.totalTokenCount;
  throw new Error(provider);
}

const obfuscation = () => randomBytes(6).toString("base64url").slice(0, 2 + Math.floor(Math.random() * 8));
const sse = (data, event) => `${event ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
const sseCrlf = (data) => `data: ${JSON.stringify(data)}\r\n\r\n`;

/** The provider's error body for an HTTP status (`x-status`), as each API answers it. */
export function errorBody(provider, status, message = status === 429 ? "Rate limit reached for requests." : "The server had an error while processing your request.") {
  if (provider === "anthropic") return { type: "error", error: { type: status === 429 ? "rate_limit_error" : status === 529 ? "overloaded_error" : "api_error", message } };
  if (provider === "gemini") return { error: { code: status, message, status: status === 429 ? "RESOURCE_EXHAUSTED" : status === 503 ? "UNAVAILABLE" : "INTERNAL" } };
  return { error: { message, type: status === 429 ? "requests" : "server_error", param: null, code: status === 429 ? "rate_limit_exceeded" : null } };
}

// --- OpenAI Chat Completions --------------------------------------------

function chatChunk(id, choices, usage = null) {
  return { id, object: "chat.completion.chunk", created: CREATED, model: MODEL.openai, service_tier: "default", system_fingerprint: "fp_mock0001", choices, usage, obfuscation: obfuscation() };
}

/** The events of a streamed chat completion (each a string to write). */
export function chatEvents({ tokens, n, end, includeUsage, id = "chatcmpl-mock" }) {
  const out = [sse(chatChunk(id, [{ index: 0, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null }]))];
  const words = deltas(n);
  for (const [i, word] of words.entries()) {
    if ((end === "error" || end === "failed") && i === Math.floor(n / 2)) {
      out.push(sse({ error: { message: "The server had an error while processing your request. Sorry about that!", type: "server_error", param: null, code: null } }));
      return out;
    }
    out.push(sse(chatChunk(id, [{ index: 0, delta: { content: word }, logprobs: null, finish_reason: null }])));
  }
  out.push(sse(chatChunk(id, [{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }])));
  if (includeUsage && end !== "no-usage") out.push(sse(chatChunk(id, [], usageOf("chat", tokens))));
  out.push("data: [DONE]\n\n");
  return out;
}

export function chatJson({ tokens, n, end, id = "chatcmpl-mock" }) {
  return {
    id,
    object: "chat.completion",
    created: CREATED,
    model: MODEL.openai,
    choices: [{ index: 0, message: { role: "assistant", content: textOf(n), refusal: null, annotations: [] }, logprobs: null, finish_reason: "stop" }],
    ...(end === "no-usage" ? {} : { usage: usageOf("chat", tokens) }),
    service_tier: "default",
    system_fingerprint: "fp_mock0001",
  };
}

// --- OpenAI Responses ----------------------------------------------------

function responseObject({ id, status, text, usage = null, error = null, incomplete = null }) {
  const output = text === null ? [] : [{
    id: "msg_mock",
    type: "message",
    status: status === "in_progress" ? "in_progress" : "completed",
    content: [{ type: "output_text", annotations: [], logprobs: [], text }],
    role: "assistant",
  }];
  return {
    id, object: "response", created_at: CREATED, status, background: false, error,
    incomplete_details: incomplete, instructions: null, max_output_tokens: null, max_tool_calls: null,
    model: MODEL.openai, output, parallel_tool_calls: true, previous_response_id: null,
    prompt_cache_key: null, reasoning: { effort: null, summary: null }, safety_identifier: null,
    service_tier: "default", store: true, temperature: 1, text: { format: { type: "text" }, verbosity: "medium" },
    tool_choice: "auto", tools: [], top_logprobs: 0, top_p: 1, truncation: "disabled", usage, user: null, metadata: {},
  };
}

/** The events of a streamed Responses API answer. */
export function responsesEvents({ tokens, n, end, id = "resp_mock" }) {
  let seq = 0;
  const ev = (type, fields) => sse({ type, sequence_number: seq++, ...fields }, type);
  const out = [
    ev("response.created", { response: responseObject({ id, status: "in_progress", text: null }) }),
    ev("response.in_progress", { response: responseObject({ id, status: "in_progress", text: null }) }),
    ev("response.output_item.added", { output_index: 0, item: { id: "msg_mock", type: "message", status: "in_progress", content: [], role: "assistant" } }),
    ev("response.content_part.added", { item_id: "msg_mock", output_index: 0, content_index: 0, part: { type: "output_text", annotations: [], logprobs: [], text: "" } }),
  ];
  const words = deltas(n);
  for (const [i, word] of words.entries()) {
    if (end === "error" && i === Math.floor(n / 2)) {
      out.push(ev("error", { code: "server_error", message: "The server had an error while processing your request.", param: null }));
      return out;
    }
    out.push(ev("response.output_text.delta", { item_id: "msg_mock", output_index: 0, content_index: 0, delta: word, logprobs: [], obfuscation: obfuscation() }));
  }
  const text = textOf(n);
  if (end === "failed") {
    out.push(ev("response.failed", { response: responseObject({ id, status: "failed", text: null, error: { code: "server_error", message: "The model failed to generate a response." } }) }));
    return out;
  }
  out.push(ev("response.output_text.done", { item_id: "msg_mock", output_index: 0, content_index: 0, text, logprobs: [] }));
  out.push(ev("response.content_part.done", { item_id: "msg_mock", output_index: 0, content_index: 0, part: { type: "output_text", annotations: [], logprobs: [], text } }));
  out.push(ev("response.output_item.done", { output_index: 0, item: { id: "msg_mock", type: "message", status: "completed", content: [{ type: "output_text", annotations: [], logprobs: [], text }], role: "assistant" } }));
  if (end === "partial") return out;
  const usage = end === "no-usage" ? null : usageOf("responses", tokens);
  if (end === "incomplete") {
    out.push(ev("response.incomplete", { response: responseObject({ id, status: "incomplete", text, usage, incomplete: { reason: "max_output_tokens" } }) }));
  } else {
    out.push(ev("response.completed", { response: responseObject({ id, status: "completed", text, usage }) }));
  }
  return out;
}

export function responsesJson({ tokens, n, end, id = "resp_mock" }) {
  return responseObject({ id, status: "completed", text: textOf(n), usage: end === "no-usage" ? null : usageOf("responses", tokens) });
}

// --- Anthropic Messages --------------------------------------------------

function anthropicMessage({ id, content, usage, stop = null }) {
  return { id, type: "message", role: "assistant", model: MODEL.anthropic, content, stop_reason: stop, stop_sequence: null, usage };
}

/** The events of a streamed Anthropic message. */
export function anthropicEvents({ tokens, n, end, messageDeltas = 1, id = "msg_mock" }) {
  const full = usageOf("anthropic", tokens);
  const withUsage = end !== "no-usage";
  const inputs = { input_tokens: full.input_tokens, cache_creation_input_tokens: full.cache_creation_input_tokens, cache_read_input_tokens: full.cache_read_input_tokens };
  const startUsage = { ...full, output_tokens: 1 };
  const ev = (type, fields) => sse({ type, ...fields }, type);
  const out = [
    ev("message_start", { message: anthropicMessage({ id, content: [], usage: withUsage ? startUsage : undefined }) }),
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
    ev("ping", {}),
  ];
  for (const [i, word] of deltas(n).entries()) {
    if ((end === "error" || end === "failed") && i === Math.floor(n / 2)) {
      out.push(ev("error", { error: { type: "overloaded_error", message: "Overloaded" } }));
      return out;
    }
    out.push(ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: word } }));
  }
  out.push(ev("content_block_stop", { index: 0 }));
  if (end !== "partial") {
    for (let k = 1; k <= messageDeltas; k++) {
      const last = k === messageDeltas;
      const output = Math.max(1, Math.floor((full.output_tokens * k) / messageDeltas));
      out.push(ev("message_delta", {
        delta: last ? { stop_reason: "end_turn", stop_sequence: null } : { stop_reason: null, stop_sequence: null },
        ...(withUsage ? { usage: { ...inputs, output_tokens: output } } : {}),
      }));
    }
  }
  out.push(ev("message_stop", {}));
  return out;
}

export function anthropicJson({ tokens, n, end, id = "msg_mock" }) {
  return anthropicMessage({ id, content: [{ type: "text", text: textOf(n) }], usage: end === "no-usage" ? undefined : usageOf("anthropic", tokens), stop: "end_turn" });
}

// --- Gemini --------------------------------------------------------------

function geminiChunk({ text, usage, finish, id = "mockResponseId" }) {
  const candidate = { content: { parts: [{ text }], role: "model" }, index: 0 };
  if (finish) candidate.finishReason = finish;
  return { candidates: [candidate], ...(usage ? { usageMetadata: usage } : {}), modelVersion: MODEL.gemini, responseId: id };
}

/** The chunks (objects) of a streamed Gemini answer: usage cumulative in each, finishReason on the last. */
export function geminiChunks({ tokens, n, end }) {
  const full = usageOf("gemini", tokens);
  const words = deltas(n);
  const out = [];
  for (const [i, word] of words.entries()) {
    if ((end === "error" || end === "failed") && i === Math.floor(n / 2)) {
      out.push({ error: { code: 500, message: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", status: "INTERNAL" } });
      return out;
    }
    const last = i === n - 1;
    if (last && end === "partial") return out;
    // Cumulative: the prompt and thoughts from the first chunk, the candidates growing.
    const candidates = last ? full.candidatesTokenCount : Math.floor((full.candidatesTokenCount * (i + 1)) / n);
    const usage = { ...full, candidatesTokenCount: candidates, totalTokenCount: full.promptTokenCount + full.thoughtsTokenCount + candidates };
    out.push(geminiChunk({ text: word, usage: end === "no-usage" ? undefined : usage, finish: last ? "STOP" : undefined }));
  }
  return out;
}

export function geminiJson({ tokens, n, end }) {
  return geminiChunk({ text: textOf(n), usage: end === "no-usage" ? undefined : usageOf("gemini", tokens), finish: "STOP" });
}

/** Gemini's non-SSE stream: one JSON array, its elements written one by one. */
export function geminiArrayParts(chunks) {
  return chunks.map((c, i) => `${i === 0 ? "[" : "\n,\r\n"}${JSON.stringify(c, null, 2)}`).concat("\n]");
}

// --- The origin ----------------------------------------------------------

/** Which API a path is: chat | responses | anthropic | gemini (with `stream`), or null. */
export function apiOf(path) {
  if (path.endsWith("/chat/completions")) return { api: "chat" };
  if (path.endsWith("/responses")) return { api: "responses" };
  if (path.endsWith("/messages")) return { api: "anthropic" };
  if (path.endsWith(":streamGenerateContent")) return { api: "gemini", stream: true };
  if (path.endsWith(":generateContent")) return { api: "gemini", stream: false };
  return null;
}

/**
 * Starts the mock provider origin on 127.0.0.1. `gap` (ms) between the
 * events it writes (each event its own write).
 */
export async function providerOrigin({ gap = 2 } = {}) {
  const served = {};
  const requests = [];
  const closed = {};
  const add = (tenant, n) => (served[tenant] = (served[tenant] ?? 0) + n);
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const url = new URL(req.url, "http://origin");
    let body = null;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "null");
    } catch {}
    const h = req.headers;
    const tenant = h["x-tenant"] ?? "-";
    requests.push({ tenant, method: req.method, path: url.pathname, query: url.search, headers: { ...h }, body });
    const which = apiOf(url.pathname);
    if (!which) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no such API: ${url.pathname}` } }));
      return;
    }
    const { api } = which;
    const provider = api === "chat" || api === "responses" ? "openai" : api;
    const tokens = Number(h["x-tokens"] ?? 300);
    const n = Number(h["x-deltas"] ?? 6);
    const end = h["x-end"] ?? "clean";
    const status = h["x-status"] ? Number(h["x-status"]) : 0;
    if (status) {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(errorBody(provider, status)));
      return;
    }
    const stream = api === "gemini" ? which.stream : body?.stream === true;
    const opts = { tokens, n, end, messageDeltas: Number(h["x-message-deltas"] ?? 1) };
    if (!stream) {
      const json = { chat: chatJson, responses: responsesJson, anthropic: anthropicJson, gemini: geminiJson }[api](opts);
      add(tenant, tokens);
      const extra = api === "anthropic" ? { "request-id": "req_mock" } : api === "chat" || api === "responses" ? { "x-request-id": "req_mock" } : {};
      res.writeHead(200, { "content-type": "application/json", ...extra });
      res.end(JSON.stringify(json));
      return;
    }
    const sseMode = api !== "gemini" || url.searchParams.get("alt") === "sse";
    res.writeHead(200, { "content-type": sseMode ? "text/event-stream" : "application/json", "cache-control": "no-cache" });
    let gone = false;
    res.on("close", () => {
      gone = true;
      closed[tenant] = (closed[tenant] ?? 0) + 1;
    });
    if (end === "runaway") {
      const most = Number(h["x-runaway-max"] ?? 5_000);
      await runaway(res, api, sseMode, most, () => gone, (k) => add(tenant, k), gap);
      return;
    }
    let parts;
    if (api === "chat") parts = chatEvents({ ...opts, includeUsage: body?.stream_options?.include_usage === true });
    else if (api === "responses") parts = responsesEvents(opts);
    else if (api === "anthropic") parts = anthropicEvents(opts);
    else parts = sseMode ? geminiChunks(opts).map(sseCrlf) : geminiArrayParts(geminiChunks(opts));
    for (const [i, part] of parts.entries()) {
      if (gone) break;
      if (end === "reset" && i === Math.floor(parts.length / 2)) {
        add(tenant, tokens);
        res.destroy();
        return;
      }
      res.write(part);
      await sleep(gap);
    }
    add(tenant, tokens);
    res.end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    served,
    requests,
    /** Streams of `tenant` whose connection closed (ended or cut). */
    closed,
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((r) => {
      server.closeAllConnections?.();
      server.close(r);
    }),
  };
}

/**
 * An origin that ignores the output cap: 100 tokens an event, the usage
 * reported as it grows (Gemini in every chunk, Anthropic a message_delta
 * after each delta; other APIs: text only), until `most` or the client goes.
 * What it emitted is added to served as it goes.
 */
async function runaway(res, api, sseMode, most, gone, add, gap) {
  const input = 20;
  add(input);
  let first = true;
  if (api === "anthropic") {
    res.write(sse({ type: "message_start", message: anthropicMessage({ id: "msg_runaway", content: [], usage: { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } }) }, "message_start"));
    res.write(sse({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }, "content_block_start"));
  }
  for (let out = 100; out <= most && !gone(); out += 100) {
    let part;
    if (api === "gemini") {
      const chunk = geminiChunk({ text: " more", usage: { promptTokenCount: input, candidatesTokenCount: out, totalTokenCount: input + out, promptTokensDetails: [{ modality: "TEXT", tokenCount: input }] } });
      part = sseMode ? sseCrlf(chunk) : `${first ? "[" : "\n,\r\n"}${JSON.stringify(chunk, null, 2)}`;
    } else if (api === "anthropic") {
      part = sse({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: " more" } }, "content_block_delta")
        + sse({ type: "message_delta", delta: { stop_reason: null, stop_sequence: null }, usage: { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: out } }, "message_delta");
    } else if (api === "chat") {
      part = sse(chatChunk("chatcmpl-runaway", [{ index: 0, delta: { content: " more" }, logprobs: null, finish_reason: null }]));
    } else {
      part = sse({ type: "response.output_text.delta", sequence_number: out / 100, item_id: "msg_mock", output_index: 0, content_index: 0, delta: " more", logprobs: [] }, "response.output_text.delta");
    }
    first = false;
    res.write(part);
    add(100);
    await sleep(Math.max(gap, 5));
  }
  if (gone()) return;
  if (api === "gemini" && !sseMode) res.write("\n]");
  if (api === "anthropic") res.write(sse({ type: "message_stop" }, "message_stop"));
  res.end();
}
