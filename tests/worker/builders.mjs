// Builders for the Worker tests: TOLLGATE configs and `tg.fetch` request
// inits, so a test states only what it is about. Every builder returns a
// plain object, exactly what the inline literal would have been: nothing is
// added that the test did not ask for, beyond the documented defaults.
//
//   config(
//     { body_limit: 256 },
//     rule("api", "/api/*", { key: ["header:x-api-key"], limits: limit(5, "1m") }),
//     failedLogins({ limits: limit(3, "15m") }),
//   )
//   tg.fetch("/login", json({ email, password }, { ip }))
//
// Tests whose point is a config's exact literal shape (parsing, errors, the
// shipped examples) keep their configs inline.

/** One window: `[{ requests, window }]`, a rule's `limits` (or an override's). */
export function limit(requests, window) {
  return [{ requests, window }];
}

/** Several windows from `[requests, window]` pairs: `limits([3, "60s"], [10, "1h"])`. */
export function limits(...pairs) {
  return pairs.map(([requests, window]) => ({ requests, window }));
}

/**
 * A rule: `{ name, path, limits, ...fields }`. `limits` is 10 a minute
 * (`limit(10, "1m")`) unless `fields` gives it; every other field (key,
 * methods, action, on_error, ...) only when `fields` gives it, so the
 * Worker's own defaults apply as they would to the literal.
 */
export function rule(name, path, fields = {}) {
  return { name, path, limits: limit(10, "1m"), ...fields };
}

/**
 * The failures-only login rule the tests keep using: `login-account` on
 * `POST /login`, keyed by the JSON or form field `email`, counting only the
 * origin's 401s, failing closed (`on_error: "deny"`), 10 per 15 minutes.
 * `fields` adds to or replaces any of these (e.g. `{ name: "login" }`,
 * `{ clear_on_success: true }`, `{ limits: limit(3, "15m") }`).
 */
export function failedLogins(fields = {}) {
  return rule("login-account", "/login", {
    methods: ["POST"],
    key: ["body:email"],
    count_statuses: [401],
    on_error: "deny",
    limits: limit(10, "15m"),
    ...fields,
  });
}

/**
 * A TOLLGATE config: `config(rule, ...)` → `{ rules: [...] }`, or with
 * top-level fields first, `config({ exempt: ..., body_limit: ... }, rule, ...)`
 * → `{ ...fields, rules: [...] }`. The first argument is read as top-level
 * fields when it has no `name` (every rule has one).
 */
export function config(...args) {
  const top = args.length > 0 && !("name" in args[0]) ? args.shift() : {};
  return { ...top, rules: args };
}

/**
 * A `tg.fetch` init for a POST of `body` as JSON (`content-type:
 * application/json`): `body` is sent as is when a string, else
 * JSON.stringify'd. `init` adds fields (ip, method, signal, ...); its
 * `headers` join the content type (and may replace it).
 */
export function json(body, init = {}) {
  return withBody("application/json", typeof body === "string" ? body : JSON.stringify(body), init);
}

/**
 * A `tg.fetch` init for a POST of the urlencoded `body` (a string, or an
 * object turned into one by URLSearchParams), as `json` does.
 */
export function form(body, init = {}) {
  return withBody("application/x-www-form-urlencoded", typeof body === "string" ? body : new URLSearchParams(body).toString(), init);
}

function withBody(contentType, body, { headers = {}, ...init }) {
  return { method: "POST", ...init, headers: { "content-type": contentType, ...headers }, body };
}
