// An Express 5 origin for tests/origins: the protected actions of tollgate's
// shipped config and examples, written as an Express app would write them.
// Every protected handler that runs says so in `X-Handler` (the action) and
// `X-Identity` (whom it ran for, as this app identifies them); `X-Read` shows
// the raw value it read. Usage: node app.mjs PORT
import express from "express";
import methodOverride from "method-override";
import cookieParser from "cookie-parser";

const port = Number(process.argv[2]);
const app = express();

// The account table's collation, as MySQL 8's default utf8mb4_0900_ai_ci
// compares: accents, case and default-ignorable characters (soft hyphen,
// zero-width ones) do not tell two emails apart; compatibility forms
// (fullwidth letters) fold (NFKD). The same fold in every origin.
const IGNORABLE = /[\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u202A-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF0-\uFFF8]/gu;
const account = (email) => email.normalize("NFKD").replace(/\p{M}/gu, "").replace(IGNORABLE, "").toLowerCase().trim();

function ran(res, action, identity, read) {
  res.set("X-Handler", action);
  res.set("X-Identity", encodeURIComponent(String(identity)));
  res.set("X-Read", encodeURIComponent(JSON.stringify(read ?? null)));
}

app.use(express.json());
app.use(express.urlencoded());
app.use(cookieParser());
// method-override's default: the X-HTTP-Method-Override header on a POST
// (its first comma-separated item).
app.use(methodOverride());
// The README's "custom logic" for HTML forms: `_method` in the parsed body.
app.use(
  methodOverride((req) => {
    if (req.body && typeof req.body === "object" && "_method" in req.body) {
      const method = req.body._method;
      delete req.body._method;
      return method;
    }
  }),
);

app.get("/__health", (req, res) => res.send("ok"));

// The shipped rule: /api/example?mode=heavy.
app.get("/api/example", (req, res) => {
  if (req.query.mode === "heavy") {
    ran(res, "heavy", req.get("cf-connecting-ip"), req.query.mode);
    return res.send("heavy");
  }
  res.send("normal");
});

// The tenant example: a paid AI call per school.
function tenant(req, res) {
  const school = parseInt(req.params.school, 10);
  if (!(school >= 1)) return res.status(404).send("no such school");
  ran(res, "tenant", school, req.params.school);
  res.send(`ai for school ${school}`);
}
app.get("/api/schools/:school/ai/*rest", tenant);
app.post("/api/schools/:school/ai/*rest", tenant);

// The login example: every attempt fails (401), so every attempt counts.
app.post("/login", (req, res) => {
  const email = req.body?.email;
  if (typeof email !== "string" || !email.trim()) return res.status(400).send("email required");
  ran(res, "login", account(email), email);
  res.status(401).send("wrong password");
});

// Method override: a form's POST deletes.
app.delete("/posts/:id", (req, res) => {
  ran(res, "delete", req.get("cf-connecting-ip"), { method: req.method, original: req.originalMethod });
  res.send(`deleted ${req.params.id}`);
});

// An API key header; keys look like key-N. `req.get` joins a repeated
// header with ", " (Node's http), which no key matches.
app.get("/api/v1/data", (req, res) => {
  const key = req.get("x-api-key");
  if (!/^key-\d+$/.test(key ?? "")) return res.status(401).send("bad key");
  ran(res, "apikey", key, key);
  res.send("data");
});

// A session cookie (Laravel's name); sessions look like sess-N.
app.get("/account/export", (req, res) => {
  const session = req.cookies?.laravel_session;
  if (!/^sess-\d+$/.test(session ?? "")) return res.status(401).send("no session");
  ran(res, "session", session, session);
  res.send("export");
});

app.use((req, res) => res.status(404).send("not found"));
app.use((err, req, res, next) => res.status(err.status ?? 500).send("error"));

const server = app.listen(port, "127.0.0.1", () => console.log(`express listening on ${port}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
