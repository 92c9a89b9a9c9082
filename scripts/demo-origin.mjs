// A tiny demo origin for scripts/dev, loopback only. It answers every request
// 200 with a JSON echo of the method, path and query, except where the
// example being served (DEMO_EXAMPLE) needs its origin to say something else:
//   login-brute-force  POST /login answers 401 {"error":"invalid email or password"}
//                      unless the password is "demo-password" (200), for any email;
//                      the body may be a form (curl -d) or JSON.
//   ai-budget          POST /v1/chat/* answers 401 without an x-api-key, else 200
//                      reporting the tokens used in x-usage-tokens: ?tokens=N, or 2500.
// Usage: ORIGIN_PORT=8788 DEMO_EXAMPLE=NAME node scripts/demo-origin.mjs
// (DEMO_LABEL: what its first line calls it, instead of the example's name)
import { createServer } from "node:http";

const DEMO_PASSWORD = "demo-password";

const port = Number(process.env.ORIGIN_PORT ?? 8788);
const example = process.env.DEMO_EXAMPLE ?? "";

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

/** The answer of the example's origin: [status, JSON body, headers], or undefined for the echo. */
function exampleAnswer(req, url, body) {
  if (example === "login-brute-force" && url.pathname === "/login" && req.method === "POST") {
    const fields = loginFields(req, body);
    // A success names the account logged in, as the example's rule asks
    // (success_identity_header): the email as read from the request.
    return fields.password === DEMO_PASSWORD
      ? [200, { ok: true }, { "x-authenticated-user": String(fields.email ?? "") }]
      : [401, { error: "invalid email or password" }];
  }
  if (example === "ai-budget" && url.pathname.startsWith("/v1/chat/") && req.method === "POST") {
    if (!req.headers["x-api-key"]) return [401, { error: "no API key" }];
    const tokens = url.searchParams.get("tokens") ?? "2500";
    return [200, { choices: [{ message: { role: "assistant", content: "…" } }], usage: { total_tokens: Number(tokens) } }, { "x-usage-tokens": tokens }];
  }
  return undefined;
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

createServer((req, res) => {
  const url = new URL(req.url, "http://origin.local");
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const [status, json, headers = {}] = exampleAnswer(req, url, body) ?? [200, echo(req, url, body)];
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(json) + "\n");
  });
}).listen(port, "127.0.0.1", () =>
  console.log(`demo origin${process.env.DEMO_LABEL ?? (example ? ` (${example})` : "")} listening on http://127.0.0.1:${port}`),
);
