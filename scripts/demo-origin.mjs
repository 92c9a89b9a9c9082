// A tiny demo origin for scripts/dev, loopback only. It answers every request
// 200 with a JSON echo of the method, path and query, except where the
// example being served (DEMO_EXAMPLE) needs its origin to say something else:
//   login-brute-force  POST /login answers 401 {"error":"invalid email or password"}
//                      unless the password is "demo-password" (200), for any email;
//                      the body may be a form (curl -d) or JSON.
//   ai-budget          POST /v1/chat/* answers 401 without an x-api-key or a Bearer token, else 200
//                      reporting the tokens used in x-usage-tokens: ?tokens=N, or 2500.
//   student-chat       a school's chat, streamed like an LLM (studentChat below):
//                      GET /s/SCHOOL/LINK sets the `device` cookie, POST
//                      /s/SCHOOL/LINK/chat answers an OpenAI-style question.
// DEMO_EXAMPLE may name several, comma-separated (`tollgate dev` serves
// login-brute-force and student-chat at once: their paths do not meet).
// Usage: ORIGIN_PORT=8788 DEMO_EXAMPLE=NAME node scripts/demo-origin.mjs
// (DEMO_LABEL: what its first line calls it, instead of the example's name;
// DEMO_CHUNK_MS: the pause between two chunks of a streamed answer, 40)
// Tests import demoOrigin (a server, not yet listening) and demoLink.
import { createServer } from "node:http";
import { createHmac, randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";

const DEMO_PASSWORD = "demo-password";


/** The login form's fields, from a JSON or an urlencoded body. */
function loginFields(req, body) {
  const text = body.toString("utf8");
  if ((req.headers["content-type"] ?? "").includes("json")) {
    try {
      return JSON.parse(text) ?? {};
    } catch {
      return {};
    }
  }
  return Object.fromEntries(new URLSearchParams(text));
}

/** The answer of an example's origin: [status, JSON body, headers], or undefined for the echo. */
function exampleAnswer(examples, req, url, body) {
  if (examples.includes("login-brute-force") && url.pathname === "/login" && req.method === "POST") {
    const fields = loginFields(req, body);
    // A success names the account logged in, as the example's rule asks
    // (success_identity_header): the email as read from the request.
    return fields.password === DEMO_PASSWORD
      ? [200, { ok: true }, { "x-authenticated-user": String(fields.email ?? "") }]
      : [401, { error: "invalid email or password" }];
  }
  if (examples.includes("ai-budget") && url.pathname.startsWith("/v1/chat/") && req.method === "POST") {
    if (!req.headers["x-api-key"] && !/^bearer \S/i.test(req.headers.authorization ?? "")) return [401, { error: "no API key" }];
    const tokens = url.searchParams.get("tokens") ?? "2500";
    return [200, { choices: [{ message: { role: "assistant", content: "…" } }], usage: { total_tokens: Number(tokens) } }, { "x-usage-tokens": tokens }];
  }
  return undefined;
}

// ---- student-chat: a school's chat, streamed like an LLM ----------------
//
// Links are the origin's: `N-MAC`, MAC the first 12 hex digits of
// HMAC-SHA256(LINK_KEY, "SCHOOL/N"), so a link is bound to one school and
// cannot be made up (demoLink makes them; a real app keeps its key secret).
// The origin trusts the school in the path only with a link issued for it,
// written as it was issued: anything else is 403 (what lets tollgate count
// per school: only answers served for a school count).
//   GET  /s/SCHOOL/LINK       the chat page's stand-in: sets the `device`
//                             cookie (a new random one unless sent), JSON
//   POST /s/SCHOOL/LINK/chat  `{ messages, stream, stream_options, max_tokens }`:
//     - 400 for an invalid question (not JSON, no user message, empty, over
//       2,000 characters);
//     - out of scope (it mentions off-topic, bitcoin or casino): 200, a
//       canned answer that cost nothing: `x-answered: 0`, usage 0 (always
//       reported, asked for or not);
//     - else 200, `x-answered: 1`, an answer of prompt + completion tokens:
//       prompt = the user messages' words, completion = max_tokens (150 by
//       default; the demo model always writes all of them), capped so that
//       the total is at most MAX_ANSWER_TOKENS (the rule's max). Streamed
//       (`stream: true`) as OpenAI's SSE `data:` chunks, the usage in a last
//       chunk of its own only with `stream_options.include_usage`, as
//       OpenAI does; else one JSON body with its usage.
const LINK_KEY = "student-chat demo link key";
/** The most one answer may cost, prompt included: the token rule's `max`. */
export const MAX_ANSWER_TOKENS = 1000;
const OUT_OF_SCOPE = /\b(off-topic|bitcoin|casino)\b/i;

/** The Nth link the demo school `school` handed out. */
export function demoLink(school, n) {
  return `${n}-${createHmac("sha256", LINK_KEY).update(`${school}/${n}`).digest("hex").slice(0, 12)}`;
}

/** Whether `link` was issued for `school`, both as they were issued (digits, no sign or leading zero). */
function issued(school, link) {
  const n = /^([0-9]+)-[0-9a-f]{12}$/.exec(link)?.[1];
  return /^[1-9][0-9]{0,8}$/.test(school) && n !== undefined && demoLink(school, n) === link;
}

/** The question of a chat body, or the reason it is invalid. */
function question(body) {
  let request;
  try {
    request = JSON.parse(body.toString("utf8"));
  } catch {
    return { invalid: "the body is not JSON" };
  }
  const users = Array.isArray(request?.messages) ? request.messages.filter((m) => m?.role === "user") : [];
  const text = users.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n").trim();
  if (!text) return { invalid: "no question: messages needs a user message with content" };
  if (text.length > 2000) return { invalid: "the question is over 2,000 characters" };
  const prompt = text.split(/\s+/).length;
  const asked = Number.isInteger(request.max_tokens) && request.max_tokens > 0 ? request.max_tokens : 150;
  return {
    text,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    prompt,
    completion: Math.max(0, Math.min(asked, MAX_ANSWER_TOKENS - prompt)),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Writes an answer of `parts` (text pieces) costing `usage`, streamed or as
 * one JSON body; a stream's usage chunk is sent when the question asked for
 * it, or `always`.
 */
async function writeAnswer(res, q, { parts, usage, always = false, headers }, chunkMs) {
  const base = { id: "chatcmpl-demo", created: Math.floor(Date.now() / 1000), model: "demo-tutor" };
  if (!q.stream) {
    res.writeHead(200, { "content-type": "application/json", ...headers });
    const message = { role: "assistant", content: parts.join("") };
    res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message, finish_reason: "stop" }], usage }) + "\n");
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...headers });
  let closed = false;
  res.on("close", () => (closed = true));
  const chunk = (choices, extra = {}) =>
    `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices, ...(q.includeUsage ? { usage: null } : {}), ...extra })}\n\n`;
  const events = [
    chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]),
    ...parts.map((content) => chunk([{ index: 0, delta: { content }, finish_reason: null }])),
    chunk([{ index: 0, delta: {}, finish_reason: "stop" }]),
    ...(always || q.includeUsage ? [chunk([], { usage })] : []),
    "data: [DONE]\n\n",
  ];
  for (const event of events) {
    if (closed) return;
    res.write(event);
    if (chunkMs > 0) await sleep(chunkMs);
  }
  res.end();
}

/** POST /s/SCHOOL/LINK/chat. */
async function chat(res, body, chunkMs) {
  const q = question(body);
  if (q.invalid) {
    refuse(res, 400, "invalid_request_error", q.invalid);
    return;
  }
  if (OUT_OF_SCOPE.test(q.text)) {
    const zero = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    const parts = ["I can only help with your school work. ", "Ask me about a subject!"];
    await writeAnswer(res, q, { parts, usage: zero, always: true, headers: { "x-answered": "0" } }, chunkMs);
    return;
  }
  const usage = { prompt_tokens: q.prompt, completion_tokens: q.completion, total_tokens: q.prompt + q.completion };
  // The question is echoed inside the text: JSON-escaped in a `content`
  // string, so usage a client writes into it is never an event of its own.
  const parts = ["Good question. ", `You asked: ${q.text} `, `(a demo answer of ${usage.total_tokens} tokens)`];
  await writeAnswer(res, q, { parts, usage, headers: { "x-answered": "1" } }, chunkMs);
}

/**
 * Whether a path is the chat app's: under /s/ in any case or spelling
 * (decoded). The app answers every such path itself, 404 for any it does
 * not route (`/S/42/LINK/CHAT`, `/s/42/LINK/chat.json`, `/s/42/LINK/%63hat`),
 * never the echo's 200: every path tollgate's rules match is one the app
 * either serves for its school or refuses.
 */
function underChat(pathname) {
  try {
    return decodeURIComponent(pathname).toLowerCase().startsWith("/s/");
  } catch {
    return pathname.toLowerCase().startsWith("/s/");
  }
}

/** A JSON error answer. */
function refuse(res, status, type, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ error: { message, type } }) + "\n");
}

/** The student-chat routes (every path under /s/). */
async function studentChat(req, res, url, body, chunkMs) {
  const m = /^\/s\/([^/]+)\/([^/]+?)(\/chat)?$/.exec(url.pathname);
  if (!m) return refuse(res, 404, "not_found", "no such page");
  const [, school, link, isChat] = m;
  if (!issued(school, link.toLowerCase())) {
    refuse(res, 403, "forbidden", "not a link of this school");
  } else if (isChat && req.method === "POST") {
    await chat(res, body, chunkMs);
  } else if (!isChat && req.method === "GET") {
    const sent = /(?:^|;\s*)device=([^;]+)/.exec(req.headers.cookie ?? "")?.[1];
    const device = sent ?? randomBytes(12).toString("hex");
    const cookie = sent ? {} : { "set-cookie": `device=${device}; Path=/s/; HttpOnly; SameSite=Lax; Max-Age=31536000` };
    res.writeHead(200, { "content-type": "application/json", ...cookie });
    res.end(JSON.stringify({ school, link, device, ask: `POST /s/${school}/${link}/chat` }) + "\n");
  } else {
    refuse(res, 405, "invalid_request_error", "method not allowed");
  }
}

function echo(req, url, body) {
  return {
    origin: "tollgate demo origin",
    method: req.method,
    path: url.pathname,
    query: Object.fromEntries([...url.searchParams.keys()].map((k) => [k, url.searchParams.getAll(k)])),
    body_bytes: body.length,
  };
}

/**
 * The demo origin of `examples` (names, as DEMO_EXAMPLE lists them): a
 * server, not yet listening. `chunkMs`: the pause between streamed chunks.
 */
export function demoOrigin(examples, { chunkMs = 40 } = {}) {
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://origin.local");
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks);
      if (examples.includes("student-chat") && underChat(url.pathname)) return studentChat(req, res, url, body, chunkMs);
      const [status, json, headers = {}] = exampleAnswer(examples, req, url, body) ?? [200, echo(req, url, body)];
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(json) + "\n");
    });
  });
  // Idle connections kept longer than the proxy in front keeps them (Node's
  // 5 s default races workerd reusing one: a reset, the client's 502).
  server.keepAliveTimeout = 65_000;
  return server;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.ORIGIN_PORT ?? 8788);
  const example = process.env.DEMO_EXAMPLE ?? "";
  const examples = example.split(",").filter(Boolean);
  demoOrigin(examples, { chunkMs: Number(process.env.DEMO_CHUNK_MS ?? 40) }).listen(port, "127.0.0.1", () =>
    console.log(`demo origin${process.env.DEMO_LABEL ?? (example ? ` (${example})` : "")} listening on http://127.0.0.1:${port}`),
  );
}
