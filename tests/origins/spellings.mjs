// The spellings of the differential tests: requests an origin may route to
// a protected action, generated from a grammar of mutations of each
// action's canonical request (path, query, keys, bodies, method overrides),
// including every row of issue 15's table.
//
// A spelling is plain data with placeholders that each send fills in:
//   {N}  the identity number of the phase (a fresh one per phase)
//   {S}  the school id of the phase (1000 + N); {S_AR}, {S_FW}: the same
//        digits in Arabic-Indic and fullwidth form; {S_HEX}: 0x and hex
//   {R}  a fresh number per request (decoys, random sessions)
//   {PAD} 17,000 bytes of filler (over tollgate's 16 KiB body_limit)
//
// { id, action, row, cause, method, path, query, headers: [[name, value]],
//   body: null | { type: json|form|multipart|raw, text?, fields?, contentType? },
//   config: "all" | "no-query" }
//
// `row` is the row of issue 15's table a spelling belongs to (null for the
// path and query grammar), `cause` the mutation, used to group results.

/** Limits of the test config, per action (the rule the action is guarded by). */
export const LIMITS = { heavy: 10, tenant: 10, login: 10, delete: 3, apikey: 10, session: 10 };

/** The canonical request of each action, and whom it is for at the origin. */
export const CANONICAL = {
  heavy: { method: "GET", path: "/api/example", query: "mode=heavy", headers: [], body: null },
  tenant: { method: "GET", path: "/api/schools/{S}/ai/run", query: null, headers: [], body: null },
  login: {
    method: "POST",
    path: "/login",
    query: null,
    headers: [],
    body: { type: "json", text: '{"email":"victim{N}@x.test","password":"guess"}' },
  },
  delete: { method: "DELETE", path: "/posts/7", query: null, headers: [], body: null },
  apikey: { method: "GET", path: "/api/v1/data", query: null, headers: [["X-Api-Key", "key-{N}"]], body: null },
  session: { method: "GET", path: "/account/export", query: null, headers: [["Cookie", "laravel_session=sess-{N}"]], body: null },
};

// ---------------------------------------------------------------- paths

const hex = (c) => c.codePointAt(0).toString(16).toUpperCase().padStart(2, "0");
const enc = (c) => `%${hex(c)}`;
const encLower = (c) => `%${hex(c).toLowerCase()}`;

/**
 * Mutations of a path given as segments (a segment `{...}` is a placeholder
 * and is never rewritten). `full` adds the per-character encodings and the
 * rarer forms; otherwise a representative subset. Returns [{ path, cause }].
 */
export function pathMutations(segments, full) {
  const out = [];
  const add = (cause, segs, tail = "") => out.push({ path: "/" + segs.join("/") + tail, cause });
  const literal = (s) => !s.startsWith("{");
  const map = (f) => segments.map((s, i) => (literal(s) ? f(s, i) : s));
  const at = (i, f) => segments.map((s, j) => (j === i && literal(s) ? f(s) : s));
  const lits = segments.map((s, i) => [s, i]).filter(([s]) => literal(s));

  // Case.
  add("path: case", map((s) => s.toUpperCase()));
  add("path: case", at(lits[0][1], (s) => s.toUpperCase()));
  add("path: case", at(lits.at(-1)[1], (s) => s.toUpperCase()));
  add("path: case", map((s) => s[0].toUpperCase() + s.slice(1)));
  if (full) {
    add("path: case", map((s) => [...s].map((c, k) => (k % 2 ? c.toUpperCase() : c)).join("")));
    add("path: case", at(lits.at(-1)[1], (s) => s.slice(0, 2) + s.slice(2).toUpperCase()));
  }

  // Percent-encoding: each character (both hex cases where they differ),
  // every character, double and triple encoding.
  for (const [s, i] of lits) {
    const positions = full ? [...s].map((_, k) => k) : [0, s.length - 1];
    for (const k of positions) {
      const c = s[k];
      add("path: percent-encoded character", at(i, (x) => x.slice(0, k) + enc(c) + x.slice(k + 1)));
      if (full && enc(c) !== encLower(c)) {
        add("path: percent-encoded character", at(i, (x) => x.slice(0, k) + encLower(c) + x.slice(k + 1)));
      }
    }
  }
  add("path: percent-encoded character", map((s) => [...s].map(enc).join("")));
  add("path: double percent-encoding", at(lits.at(-1)[1], (s) => `%25${hex(s[0])}${s.slice(1)}`));
  if (full) {
    add("path: double percent-encoding", at(lits[0][1], (s) => `%2525${hex(s[0])}${s.slice(1)}`));
    add("path: percent-encoded case", at(lits.at(-1)[1], (s) => enc(s[0].toUpperCase()) + s.slice(1)));
  }
  // Encoded separators between the segments.
  const joined = (sep) => "/" + segments.join(sep);
  if (segments.length > 1) {
    out.push({ path: joined("%2F"), cause: "path: encoded slash" });
    out.push({ path: joined("%5C"), cause: "path: encoded backslash" });
    if (full) {
      out.push({ path: joined("%2f"), cause: "path: encoded slash" });
      out.push({ path: joined("%5c"), cause: "path: encoded backslash" });
      out.push({ path: joined("%EF%BC%8F"), cause: "path: fullwidth slash" });
      out.push({ path: joined("%C0%AF"), cause: "path: overlong UTF-8 slash" });
    }
  }
  out.push({ path: "/%2F" + segments.join("/"), cause: "path: encoded slash" });

  // Separators: doubled slashes, backslashes.
  out.push({ path: "/" + joined("/"), cause: "path: doubled slash" });
  if (segments.length > 1) out.push({ path: joined("//"), cause: "path: doubled slash" });
  out.push({ path: joined("/") + "//", cause: "path: doubled slash" });
  out.push({ path: "\\" + segments.join("\\"), cause: "path: backslash" });
  if (full) {
    out.push({ path: "//" + joined("/"), cause: "path: doubled slash" });
    if (segments.length > 1) out.push({ path: joined("///"), cause: "path: doubled slash" });
    out.push({ path: joined("/").replace(/\/([^/]*)$/, "\\$1"), cause: "path: backslash" });
  }

  // Dot segments.
  out.push({ path: "/./" + segments.join("/"), cause: "path: dot segment" });
  out.push({ path: "/x/../" + segments.join("/"), cause: "path: dot segment" });
  out.push({ path: "/%2e/" + segments.join("/"), cause: "path: encoded dot segment" });
  out.push({ path: "/x/%2E%2E/" + segments.join("/"), cause: "path: encoded dot segment" });
  out.push({ path: joined("/") + "/.", cause: "path: dot segment" });
  if (segments.length > 1) {
    out.push({ path: joined("/./"), cause: "path: dot segment" });
    out.push({ path: "/" + segments[0] + "/x/../" + segments.slice(1).join("/"), cause: "path: dot segment" });
  }
  if (full) {
    out.push({ path: "/x/..%2f" + segments.join("/"), cause: "path: encoded dot segment" });
    out.push({ path: "/x/.%2e/" + segments.join("/"), cause: "path: encoded dot segment" });
    out.push({ path: "/x/%2e./" + segments.join("/"), cause: "path: encoded dot segment" });
    out.push({ path: joined("/") + "/x/..", cause: "path: dot segment" });
    out.push({ path: joined("/") + "/x/%2e%2e", cause: "path: encoded dot segment" });
    out.push({ path: "/./././" + segments.join("/"), cause: "path: dot segment" });
    out.push({ path: joined("/") + "/..;/" + segments.at(-1), cause: "path: dot segment with ;params" });
  }

  // Matrix parameters.
  out.push({ path: joined("/") + ";x=1", cause: "path: ;params" });
  out.push({ path: joined("/") + ";", cause: "path: ;params" });
  if (segments.length > 1) add("path: ;params", at(lits[0][1], (s) => s + ";x=1"));
  if (full) {
    out.push({ path: joined("/") + ";jsessionid=ABC123", cause: "path: ;params" });
    out.push({ path: joined("/") + "%3Bx=1", cause: "path: encoded ;params" });
    out.push({ path: joined("/") + ";x=1/", cause: "path: ;params" });
  }

  // Suffixes.
  const suffixes = full
    ? [".json", ".JSON", ".Json", ".xml", ".html", ".htm", ".txt", ".csv", ".yaml", ".yml", ".php", ".foo", ".", "%2ejson", "%2Ejson", ".json/", ".json.json", "/index.html", "/index"]
    : [".json", ".html", ".php", ".", "%2ejson", "/index"];
  for (const suffix of suffixes) out.push({ path: joined("/") + suffix, cause: "path: suffix" });

  // Trailing characters.
  const trailing = full ? ["/", "//", "/%20", "%20", "%09", "%00", "%0A", "%2F", "%23", "%3F", "~", "%C2%A0"] : ["/", "%20", "%00", "%2F"];
  for (const t of trailing) out.push({ path: joined("/") + t, cause: t.startsWith("/") || t === "%2F" ? "path: trailing slash" : "path: trailing character" });

  const seen = new Set(["/" + segments.join("/")]);
  return out.filter((m) => !seen.has(m.path) && seen.add(m.path));
}

// ---------------------------------------------------------------- queries

/** Mutations of `mode=heavy` (the shipped rule's condition). */
export function queryMutations() {
  const q = [
    ["query: key case", ["MODE=heavy", "Mode=heavy", "moDe=heavy"]],
    ["query: value case", ["mode=HEAVY", "mode=Heavy"]],
    ["query: encoded key", ["%6Dode=heavy", "%6dode=heavy", "mo%64e=heavy", "%6D%6F%64%65=heavy", "mod%65=heavy", "%256Dode=heavy"]],
    ["query: encoded value", ["mode=%68eavy", "mode=he%61vy", "mode=heav%79", "mode=%68%65%61%76%79", "mode=he%2561vy"]],
    [
      "query: repeated key",
      ["mode=normal&mode=heavy", "mode=heavy&mode=normal", "mode=&mode=heavy", "mode&mode=heavy", "mode=heavy&mode=", "mode=light&mode=normal&mode=heavy", "MODE=normal&mode=heavy", "mode=normal&MODE=heavy", "mode=heavy&mode=heavy"],
    ],
    ["query: brackets", ["mode[]=heavy", "mode[0]=heavy", "mode[a]=heavy", "mode%5B%5D=heavy", "mode[=heavy", "mode]=heavy", "mode[]=normal&mode[]=heavy"]],
    ["query: semicolon", ["x=1;mode=heavy", "mode=heavy;x=1", "mode=heavy;", ";mode=heavy", "mode=normal;mode=heavy"]],
    ["query: plus", ["mode=heavy+", "mode=+heavy", "mode+=heavy", "+mode=heavy", "mo+de=heavy"]],
    ["query: NUL", ["mode=heavy%00", "mode%00=heavy", "mode=heavy%00x", "mode%00x=heavy", "mode=%00heavy"]],
    ["query: whitespace", ["mode=heavy%20", "mode=%20heavy", "%20mode=heavy", "mode%20=heavy", "mode=heavy%09", "mode=heavy%0A", "mode=heavy%C2%A0"]],
    ["query: empty pairs", ["&mode=heavy", "mode=heavy&", "&&mode=heavy&&", "?mode=heavy", "x=1&mode=heavy", "mode=heavy#frag"]],
    ["query: encoded separators", ["mode%3Dheavy", "x=1%26mode=heavy", "mode=heavy%26x=1", "mode%3dheavy"]],
    ["query: PHP name mangling", ["mo.de=heavy", "mode.=heavy", "mo%20de=heavy"]],
  ];
  return q.flatMap(([cause, list]) => list.map((query) => ({ query, cause })));
}

// ---------------------------------------------------------------- grammar

const form = (text) => ({ type: "form", text });
const json = (text) => ({ type: "json", text });
const multipart = (fields) => ({ type: "multipart", fields });

/** Every spelling, deduplicated, each with a unique id. */
export function allSpellings() {
  const list = [];
  const push = (action, row, cause, s) => list.push({ action, row, cause, config: "all", ...CANONICAL[action], ...s });

  // The shipped rule: path × query grammar, then bodies and cookies (row 5).
  push("heavy", null, "canonical", {});
  const heavyPaths = pathMutations(["api", "example"], true);
  const queries = queryMutations();
  for (const p of heavyPaths) push("heavy", null, p.cause, { path: p.path });
  for (const q of queries) push("heavy", null, q.cause, { query: q.query });
  const crossQueries = ["MODE=heavy", "mode=normal&mode=heavy", "%6Dode=heavy", "mode=heavy%00", "mode[]=heavy"];
  for (const p of heavyPaths) {
    for (const query of crossQueries) {
      const qc = queries.find((x) => x.query === query).cause;
      push("heavy", null, `${p.cause} + ${qc}`, { path: p.path, query });
    }
  }
  const heavyBodies = [
    ["urlencoded body", { method: "POST", query: null, body: form("mode=heavy") }],
    ["urlencoded body over a normal query", { method: "POST", query: "mode=normal", body: form("mode=heavy") }],
    ["multipart body", { method: "POST", query: null, body: multipart([["mode", "heavy"]]) }],
    ["multipart body over a normal query", { method: "POST", query: "mode=normal", body: multipart([["mode", "heavy"]]) }],
    ["urlencoded body over 16 KiB", { method: "POST", query: null, body: form("pad={PAD}&mode=heavy") }],
    ["urlencoded body over 16 KiB over a normal query", { method: "POST", query: "mode=normal", body: form("pad={PAD}&mode=heavy") }],
    ["multipart body over 16 KiB", { method: "POST", query: null, body: multipart([["pad", "{PAD}"], ["mode", "heavy"]]) }],
    ["JSON body", { method: "POST", query: null, body: json('{"mode":"heavy"}') }],
    ["PUT urlencoded body", { method: "PUT", query: null, body: form("mode=heavy") }],
    ["cookie", { query: null, headers: [["Cookie", "mode=heavy"]] }],
    ["cookie over a normal query", { query: "mode=normal", headers: [["Cookie", "mode=heavy"]] }],
    ["cookie, percent-encoded", { query: null, headers: [["Cookie", "mode=he%61vy"]] }],
    ["cookie among others", { query: null, headers: [["Cookie", "a=1; mode=heavy; b=2"]] }],
  ];
  for (const [what, s] of heavyBodies) push("heavy", 5, `row 5: mode=heavy in a ${what}`, s);

  // The tenant route: the school id as each origin reads an int (row 1),
  // then the path grammar around it.
  push("tenant", null, "canonical", {});
  const ids = [
    ["leading zeros", ["0{S}", "00{S}", "000000{S}"]],
    ["sign", ["+{S}", "%2B{S}", "+0{S}", "-0"]],
    ["whitespace", ["{S}%20", "%20{S}", "{S}%09", "%09{S}", "{S}%0A", "%0A{S}", "{S}%0D", "%20%20{S}%20", "{S}%C2%A0", "%E2%80%8B{S}"]],
    ["trailing text", ["{S}abc", "{S}.0", "{S}.9", "{S}e0", "{S}%00", "{S}x"]],
    ["exponent and hex", ["{S_HEX}", "{S}e1"]],
    ["other digits", ["{S_AR}", "{S_FW}"]],
    ["percent-encoded digits", ["%3{S}"]],
    [";params", ["{S};x", "{S}%3Bx", "{S};"]],
  ];
  for (const [what, spellings] of ids) {
    for (const id of spellings) {
      const path = id === "%3{S}" ? "/api/schools/%3{S0}{S1}/ai/run" : `/api/schools/${id}/ai/run`;
      push("tenant", 1, `row 1: tenant id, ${what}`, { path });
      push("tenant", 1, `row 1: tenant id, ${what}`, { path, method: "POST", body: json("{}") });
    }
  }
  for (const p of pathMutations(["api", "schools", "{S}", "ai", "run"], false)) push("tenant", null, p.cause, { path: p.path });
  for (const id of ["0{S}", "+{S}", "{S}%20"]) {
    for (const p of pathMutations(["api", "schools", id, "ai", "run"], false).slice(0, 12)) {
      push("tenant", 1, `row 1: tenant id + ${p.cause}`, { path: p.path });
    }
  }

  // Login: emails the account table folds (row 4) in JSON and form bodies,
  // JSON duplicates (row 2) and case twins (row 3), form and cookie twins.
  push("login", null, "canonical", {});
  const emails = [
    ["case and whitespace", ["Victim{N}@X.test", "VICTIM{N}@X.TEST", " victim{N}@x.test ", "\tvictim{N}@x.test"]],
    ["accent", ["v\u00edctim{N}@x.test", "vi\u0301ctim{N}@x.test", "v\u00ecctim{N}@x.test", "v\u00eectim{N}@x.test", "v\u00efctim{N}@x.test", "v\u00edctim{N}@X.TEST", "victim{N}@x.t\u00e9st"]],
    ["default-ignorable character", ["vic\u00adtim{N}@x.test", "vic\u200btim{N}@x.test", "vic\u200dtim{N}@x.test", "vic\u2060tim{N}@x.test", "\ufeffvictim{N}@x.test", "victim{N}@x.test\u00ad"]],
    ["compatibility form", ["\uff56ictim{N}@x.test", "\uff56\uff49\uff43\uff54\uff49\uff4d{N}@x.test", "victim{N}\uff20x.test", "\u24e5ictim{N}@x.test", "\ud835\udc2fictim{N}@x.test"]],
  ];
  for (const [what, list] of emails) {
    for (const email of list) {
      push("login", 4, `row 4: email, ${what}`, { body: json(JSON.stringify({ email, password: "guess" })) });
      push("login", 4, `row 4: email, ${what}`, { body: form(`email=${encodeURIComponent(email)}&password=guess`) });
    }
  }
  const twins = [
    [2, "row 2: JSON duplicate member, victim first", '{"email":"victim{N}@x.test","email":"decoy-{R}@x.test","password":"guess"}'],
    [2, "row 2: JSON duplicate member, victim last", '{"email":"decoy-{R}@x.test","email":"victim{N}@x.test","password":"guess"}'],
    [2, "row 2: JSON duplicate member, nested decoy", '{"email":"victim{N}@x.test","user":{"email":"decoy-{R}@x.test"},"password":"guess"}'],
    [3, "row 3: JSON case twin, victim in Email", '{"email":"decoy-{R}@x.test","Email":"victim{N}@x.test","password":"guess"}'],
    [3, "row 3: JSON case twin, victim in email", '{"Email":"decoy-{R}@x.test","email":"victim{N}@x.test","password":"guess"}'],
    [3, "row 3: JSON case twin, only EMAIL", '{"EMAIL":"victim{N}@x.test","password":"guess"}'],
    [3, "row 3: JSON case twin, escaped name", '{"email":"decoy-{R}@x.test","\\u0065mail":"victim{N}@x.test","password":"guess"}'],
  ];
  for (const [row, cause, text] of twins) push("login", row, cause, { body: json(text) });
  const loginOthers = [
    ["form duplicate, victim first", { body: form("email=victim{N}%40x.test&email=decoy-{R}%40x.test&password=guess") }],
    ["form duplicate, victim last", { body: form("email=decoy-{R}%40x.test&email=victim{N}%40x.test&password=guess") }],
    ["form brackets", { body: form("email[]=victim{N}%40x.test&password=guess") }],
    ["form key case", { body: form("Email=victim{N}%40x.test&password=guess") }],
    ["form encoded key", { body: form("e%6Dail=victim{N}%40x.test&password=guess") }],
    ["multipart", { body: multipart([["email", "victim{N}@x.test"], ["password", "guess"]]) }],
    ["multipart duplicate", { body: multipart([["email", "decoy-{R}@x.test"], ["email", "victim{N}@x.test"]]) }],
    // RFC 8187 names: Werkzeug (and busboy) read name*=UTF-8''email as email, over a plain name.
    ...[
      ["multipart RFC 8187 name", "name*=UTF-8''em%61il"],
      ["multipart RFC 8187 name over a decoy name", `name="decoy"; name*=utf-8''email`],
      ["multipart RFC 2231 continued name", `name*0="em"; name*1="ail"`],
    ].map(([what, disposition]) => [
      what,
      {
        body: {
          type: "raw",
          contentType: "multipart/form-data; boundary=b0undary",
          text: `--b0undary\r\nContent-Disposition: form-data; ${disposition}\r\n\r\nvictim{N}@x.test\r\n--b0undary\r\nContent-Disposition: form-data; name="email"\r\n\r\ndecoy-{R}@x.test\r\n--b0undary--\r\n`,
        },
      },
    ]),
    ["query only", { query: "email=victim{N}%40x.test", body: form("password=guess") }],
    ["query under a decoy body", { query: "email=victim{N}%40x.test", body: form("email=decoy-{R}%40x.test&password=guess") }],
    ["cookie under a decoy form body", { headers: [["Cookie", "email=victim{N}%40x.test"]], body: form("email=decoy-{R}%40x.test&password=guess") }],
    ["cookie only", { headers: [["Cookie", "email=victim{N}%40x.test"]], body: form("password=guess") }],
    ["JSON as text/plain", { body: { type: "raw", contentType: "text/plain", text: '{"email":"victim{N}@x.test","password":"guess"}' } }],
    ["JSON with charset", { body: { type: "raw", contentType: "application/json; charset=utf-8", text: '{"email":"victim{N}@x.test","password":"guess"}' } }],
    ["JSON type in capitals", { body: { type: "raw", contentType: "Application/JSON", text: '{"email":"victim{N}@x.test","password":"guess"}' } }],
    ["JSON +json type", { body: { type: "raw", contentType: "application/vnd.api+json", text: '{"email":"victim{N}@x.test","password":"guess"}' } }],
    ["JSON over 16 KiB, email first", { body: json('{"email":"victim{N}@x.test","pad":"{PAD}"}') }],
    ["JSON over 16 KiB, email last", { body: json('{"pad":"{PAD}","email":"victim{N}@x.test"}') }],
    ["form over 16 KiB", { body: form("pad={PAD}&email=victim{N}%40x.test") }],
    ["JSON with a BOM", { body: json('\ufeff{"email":"victim{N}@x.test","password":"guess"}') }],
    ["JSON unicode escapes", { body: json('{"email":"\\u0076ictim{N}@x.test","password":"guess"}') }],
  ];
  for (const [what, s] of loginOthers) push("login", 4, `row 4: login body, ${what}`, s);
  for (const p of pathMutations(["login"], false)) push("login", null, p.cause, { path: p.path });

  // Method override (row 6): headers, `_method` in query and bodies, against
  // the full config and against one without query conditions.
  const overrides = [
    ["header", { method: "POST", headers: [["X-HTTP-Method-Override", "DELETE"]] }],
    ["header, lower case", { method: "POST", headers: [["X-HTTP-Method-Override", "delete"]] }],
    ["header, padded", { method: "POST", headers: [["X-HTTP-Method-Override", " DELETE "]] }],
    ["header list DELETE, x", { method: "POST", headers: [["X-HTTP-Method-Override", "DELETE, x"]] }],
    ["header list DELETE,x", { method: "POST", headers: [["X-HTTP-Method-Override", "DELETE,x"]] }],
    ["header list x, DELETE", { method: "POST", headers: [["X-HTTP-Method-Override", "x, DELETE"]] }],
    ["header twice, DELETE first", { method: "POST", headers: [["X-HTTP-Method-Override", "DELETE"], ["X-HTTP-Method-Override", "x"]] }],
    ["header twice, DELETE last", { method: "POST", headers: [["X-HTTP-Method-Override", "x"], ["X-HTTP-Method-Override", "DELETE"]] }],
    ["X-HTTP-Method header", { method: "POST", headers: [["X-HTTP-Method", "DELETE"]] }],
    ["X-Method-Override header", { method: "POST", headers: [["X-Method-Override", "DELETE"]] }],
    ["header on a GET", { method: "GET", headers: [["X-HTTP-Method-Override", "DELETE"]] }],
    ["header on a PUT", { method: "PUT", headers: [["X-HTTP-Method-Override", "DELETE"]] }],
    ["_method in the query", { method: "POST", query: "_method=DELETE" }],
    ["_method in the query, lower case", { method: "POST", query: "_method=delete" }],
    ["_METHOD in the query", { method: "POST", query: "_METHOD=DELETE" }],
    ["_method in a form body", { method: "POST", body: form("_method=DELETE") }],
    ["_method in a form body, lower case", { method: "POST", body: form("_method=delete") }],
    ["_method in a form body after others", { method: "POST", body: form("title=x&_method=DELETE") }],
    ["_method in a multipart body", { method: "POST", body: multipart([["_method", "DELETE"]]) }],
    ["_method in a JSON body", { method: "POST", body: json('{"_method":"DELETE"}') }],
    ["_method in a form body over 16 KiB", { method: "POST", body: form("pad={PAD}&_method=DELETE") }],
    ["header PUT, form body DELETE", { method: "POST", headers: [["X-HTTP-Method-Override", "PUT"]], body: form("_method=DELETE") }],
    ["header DELETE, form body PUT", { method: "POST", headers: [["X-HTTP-Method-Override", "DELETE"]], body: form("_method=PUT") }],
  ];
  for (const config of ["all", "no-query"]) {
    const tag = config === "all" ? "" : " (no rule with query conditions)";
    if (config === "no-query") push("delete", null, `canonical${tag}`, { config });
    else push("delete", null, "canonical", {});
    for (const [what, s] of overrides) push("delete", 6, `row 6: method override, ${what}${tag}`, { config, ...s });
    for (const p of pathMutations(["posts", "7"], false).slice(0, 16)) push("delete", null, `${p.cause}${tag}`, { config, path: p.path });
    for (const p of pathMutations(["posts", "7"], false).slice(0, 8)) {
      push("delete", 6, `row 6: method override, header + ${p.cause}${tag}`, { config, ...overrides[0][1], path: p.path });
    }
  }

  // API key header (row 8).
  push("apikey", null, "canonical", {});
  const keys = [
    ["sent twice, real first", [["X-Api-Key", "key-{N}"], ["X-Api-Key", "junk-{R}"]]],
    ["sent twice, real last", [["X-Api-Key", "junk-{R}"], ["X-Api-Key", "key-{N}"]]],
    ["one line, real first", [["X-Api-Key", "key-{N}, junk-{R}"]]],
    ["one line, real last", [["X-Api-Key", "junk-{R}, key-{N}"]]],
    ["padded", [["X-Api-Key", "  key-{N}  "]]],
    ["upper case value", [["X-Api-Key", "KEY-{N}"]]],
    ["underscore name", [["X_Api_Key", "key-{N}"]]],
    ["underscore name beside a junk key", [["X-Api-Key", "junk-{R}"], ["X_Api_Key", "key-{N}"]]],
    ["underscore name before a junk key", [["X_Api_Key", "key-{N}"], ["X-Api-Key", "junk-{R}"]]],
    ["in the query instead", [], "api_key=key-{N}"],
  ];
  for (const [what, headers, query] of keys) push("apikey", 8, `row 8: API key, ${what}`, { headers, query: query ?? null });
  for (const p of pathMutations(["api", "v1", "data"], false)) push("apikey", null, p.cause, { path: p.path });

  // Session cookie (row 7).
  push("session", null, "canonical", {});
  const cookies = [
    ["dot in the name", "laravel.session=sess-{N}; laravel_session=rnd-{R}"],
    ["space in the name", "laravel session=sess-{N}; laravel_session=rnd-{R}"],
    ["dot in the name, alone", "laravel.session=sess-{N}"],
    ["twice, real first", "laravel_session=sess-{N}; laravel_session=rnd-{R}"],
    ["twice, real last", "laravel_session=rnd-{R}; laravel_session=sess-{N}"],
    ["quoted", 'laravel_session="sess-{N}"'],
    ["percent-encoded value", "laravel_session=sess%2D{N}"],
    ["percent-encoded name", "laravel%5Fsession=sess-{N}"],
    ["name in capitals", "LARAVEL_SESSION=sess-{N}"],
    ["padded", "  laravel_session = sess-{N} "],
    ["no space after ;", "a=1;laravel_session=sess-{N};b=2"],
    ["brackets in the name", "laravel_session[]=sess-{N}"],
  ];
  for (const [what, cookie] of cookies) push("session", 7, `row 7: session cookie, ${what}`, { headers: [["Cookie", cookie]] });
  for (const p of pathMutations(["account", "export"], false)) push("session", null, p.cause, { path: p.path });

  // Unique ids, first of a kind wins.
  const seen = new Set();
  const out = [];
  for (const s of list) {
    const id = spellingId(s);
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ id, ...s });
  }
  return out;
}

function spellingId(s) {
  const parts = [s.action, s.config, s.method, s.path + (s.query === null ? "" : `?${s.query}`)];
  for (const [k, v] of s.headers) parts.push(`${k}: ${v}`);
  if (s.body) parts.push(`${s.body.type} ${s.body.contentType ?? ""} ${s.body.text ?? JSON.stringify(s.body.fields)}`);
  return parts.join(" | ");
}

// ---------------------------------------------------------------- rendering

const ARABIC = "٠١٢٣٤٥٦٧٨٩";
const FULLWIDTH = "０１２３４５６７８９";
export const school = (n) => String(1000 + n);

/** Fills a template for identity number `n`; `r` is the request's own number. */
export function fill(text, n, r) {
  const s = school(n);
  return text
    .replaceAll("{S_AR}", encodeURIComponent([...s].map((d) => ARABIC[d]).join("")))
    .replaceAll("{S_FW}", encodeURIComponent([...s].map((d) => FULLWIDTH[d]).join("")))
    .replaceAll("{S_HEX}", "0x" + Number(s).toString(16))
    .replaceAll("{S0}", s[0])
    .replaceAll("{S1}", s.slice(1))
    .replaceAll("{S}", s)
    .replaceAll("{N}", String(n))
    .replaceAll("{R}", String(r))
    .replaceAll("{PAD}", "a".repeat(17_000));
}

const BOUNDARY = "----tollgate-origins-7f3a";

/** The request a spelling stands for: { url, method, headers: [[k, v]], body }. */
export function render(spelling, n, r) {
  const path = fill(spelling.path, n, r);
  const query = spelling.query === null ? "" : `?${fill(spelling.query, n, r)}`;
  const headers = spelling.headers.map(([k, v]) => [k, fill(v, n, r)]);
  let body = null;
  const b = spelling.body;
  if (b?.type === "json") {
    headers.push(["Content-Type", "application/json"]);
    body = fill(b.text, n, r);
  } else if (b?.type === "form") {
    headers.push(["Content-Type", "application/x-www-form-urlencoded"]);
    body = fill(b.text, n, r);
  } else if (b?.type === "raw") {
    headers.push(["Content-Type", b.contentType]);
    body = fill(b.text, n, r);
  } else if (b?.type === "multipart") {
    headers.push(["Content-Type", `multipart/form-data; boundary=${BOUNDARY}`]);
    body =
      b.fields
        .map(([k, v]) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${fill(v, n, r)}\r\n`)
        .join("") + `--${BOUNDARY}--\r\n`;
  }
  return { url: `https://example.com${path}${query}`, method: spelling.method, headers, body };
}

/** Whom the canonical request of `action` is for, at the origin, in phase `n` from `ip`. */
export function canonicalIdentity(action, n, ip) {
  switch (action) {
    case "heavy":
    case "delete":
      return ip;
    case "tenant":
      return school(n);
    case "login":
      return `victim${n}@x.test`;
    case "apikey":
      return `key-${n}`;
    case "session":
      return `sess-${n}`;
  }
}
