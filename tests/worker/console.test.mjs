// The operator console (issue 28), used as a person would: Debian's
// Chromium (scripts/setup installs it), driven by puppeteer-core, against
// the built Worker in Miniflare over a real port. Signs in with a wrong
// token then the right one, reads the rules, bans a key with a reason,
// finds it under Controls, sees the Worker answer that key 429, lifts the
// ban; the pages' CSP holds with no console error. Then the attacks: a
// cross-site form post, an expired session, the lockout on sign-in, a
// rotated token. Every page at 1280 and 390 px: axe-core finds no
// violation, nothing is wider than the window, Sign out is in view.
// TOLLGATE_SCREENSHOTS=1 saves the pages into docs/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import puppeteer from "puppeteer-core";
import { startTollgate, tempDir, mockOrigin, ROOT } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const TOKEN = "console-test-token"; // under 32 characters: the lockout binds it too
const CHROMIUM = process.env.TOLLGATE_CHROMIUM ?? "/usr/bin/chromium";
const CONFIG = config(
  rule("api", "/api/*", { key: ["ip"], limits: limit(100, "1m") }),
  rule("login", "/login", { methods: ["POST"], key: ["body:email"], limits: limit(5, "15m"), on_error: "deny" }),
);
const BANNED = "198.51.100.7";
const SHOTS = process.env.TOLLGATE_SCREENSHOTS === "1";
// axe-core from npm (a dev dependency), read as a file and injected.
const AXE = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
const WIDTHS = [1280, 390];

/**
 * The Analytics Engine SQL API, answered at the network edge in its JSON
 * format (ClickHouse's: `meta`, `data` with 64-bit integers quoted, `rows`,
 * `rows_before_limit_at_least`), for the three queries the Traffic page asks.
 */
function sqlApi(asked, top = { hash: "88fc262cb3e5792f" }) {
  return async (request, record) => {
    const url = new URL(request.url);
    if (url.host !== "api.cloudflare.com") return null;
    const query = record.body.toString();
    asked.push({ path: url.pathname, authorization: record.headers.authorization, query });
    const minute = Math.floor(Date.now() / 60_000) * 60 - 60;
    const col = (name, type) => ({ name, type });
    let meta, data;
    if (query.includes("AS reason")) {
      meta = ["t", "rule", "action", "reason", "method", "route", "country", "colo", "asn", "key_hash", "raw_key", "retry_ms", "n"].map((n) => col(n, "String"));
      const at = String(minute + 30);
      data = [
        { t: at, rule: "api", action: "blocked", reason: "ban", method: "GET", route: "/api/*", country: "NL", colo: "AMS", asn: "64500", key_hash: top.hash, raw_key: "", retry_ms: "0", n: "1" },
        { t: at, rule: "login", action: "blocked", reason: "missing_key", method: "POST", route: "/login", country: "US", colo: "IAD", asn: "", key_hash: "", raw_key: "", retry_ms: "0", n: "1" },
      ];
    } else if (query.includes("AS action")) {
      meta = [col("rule", "String"), col("action", "String"), col("t", "UInt64"), col("n", "UInt64")];
      data = [
        { rule: "api", action: "blocked", t: String(minute - 120), n: "7" },
        { rule: "api", action: "blocked", t: String(minute), n: "42" },
        { rule: "api", action: "exempt", t: String(minute - 60), n: "3" },
        { rule: "api", action: "allowed_total", t: String(minute - 60), n: "1", w: "147" },
        { rule: "login", action: "shadow", t: String(minute), n: "5" },
      ];
    } else if (query.includes("AS model")) {
      // The spend by model: no rule here is priced.
      meta = [col("rule", "String"), col("model", "String"), col("n", "UInt64"), col("micro", "Float64")];
      data = [];
    } else if (query.includes("key_hash")) {
      meta = [col("rule", "String"), col("key_hash", "String"), col("n", "UInt64")];
      data = [{ rule: "api", key_hash: top.hash, n: "49" }];
    } else {
      meta = [col("country", "String"), col("colo", "String"), col("n", "UInt64")];
      data = [{ country: "NL", colo: "AMS", n: "40" }, { country: "US", colo: "IAD", n: "17" }];
    }
    return Response.json({ meta, data, rows: data.length, rows_before_limit_at_least: data.length });
  };
}

/**
 * The session cookie the Worker would issue, ending at `endMs`, to the
 * client at `ip` (session.rs: bound to the lockout's key of the client).
 */
function sessionCookie(token, endMs, ip) {
  const key = createHmac("sha256", token).update("tollgate console session v1").digest();
  const mac = createHmac("sha256", key).update(`session.${endMs}.ip=${ip}`).digest("hex");
  return `v2.${endMs}.${mac}`;
}

async function withBrowser(body) {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    await body(browser);
  } finally {
    await browser.close();
  }
}

/** A page that records console errors, page errors and CSP violations. */
async function watchedPage(browser) {
  const page = await browser.newPage();
  page.setDefaultTimeout(30_000);
  const problems = [];
  page.on("console", (m) => {
    if (m.type() === "error" || /Content.Security.Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(String(e)));
  return { page, problems };
}

async function submit(page, formSelector) {
  const [response] = await Promise.all([page.waitForNavigation(), page.$eval(formSelector, (f) => f.requestSubmit())]);
  return response;
}

/**
 * axe-core's audit of `url` at `width` px, and the page's layout there.
 * The console's CSP allows no script at all, so axe's own script could not
 * run: this page, used for the audit only, bypasses the CSP
 * (`setBypassCSP`). Every other page of these tests runs under the CSP and
 * asserts that nothing violated it.
 */
async function audit(browser, url, width) {
  const page = await browser.newPage();
  try {
    await page.setBypassCSP(true);
    await page.setViewport({ width, height: 800 });
    const res = await page.goto(url);
    await page.addScriptTag({ path: AXE });
    const { violations } = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
    const layout = await page.evaluate(() => ({
      wide: document.documentElement.scrollWidth,
      signOut: document.querySelector("header button")?.getBoundingClientRect().right ?? 0,
    }));
    return { status: res.status(), violations: violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`), layout };
  } finally {
    await page.close();
  }
}

/** Every page of `urls` at every width: no axe violation, no sideways scroll. */
async function auditAll(browser, urls) {
  for (const url of urls) {
    for (const width of WIDTHS) {
      const { status, violations, layout } = await audit(browser, url, width);
      assert.ok(status < 500, `${url}: ${status}`);
      assert.deepEqual(violations, [], `${url} at ${width} px`);
      assert.ok(layout.wide <= width, `${url} at ${width} px is ${layout.wide} px wide`);
      assert.ok(layout.signOut <= width, `${url} at ${width} px: Sign out ends at ${layout.signOut} px`);
    }
  }
}

const shot = async (page, name) => {
  if (SHOTS) await page.screenshot({ path: join(ROOT, "docs", `console-${name}.png`), fullPage: true });
};

test("the console in a real browser: sign in, rules, ban with a reason, Controls, 429, lift; CSP holds", { timeout: 240_000 }, async () => {
  assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: scripts/setup installs Debian's chromium (or set TOLLGATE_CHROMIUM)`);
  const asked = [];
  const top = { hash: "88fc262cb3e5792f" };
  const tg = await startTollgate({
    config: CONFIG,
    origin: mockOrigin(sqlApi(asked, top)),
    vars: { TOLLGATE_ADMIN_TOKEN: TOKEN, TOLLGATE_ACCOUNT_ID: "0123456789abcdef0123456789abcdef", TOLLGATE_ANALYTICS_TOKEN: "ae-read-token" },
    miniflare: { host: "127.0.0.1", port: 0 },
    // A second isolate of the zone's Worker: it sees the lift at its next call to the object.
    edges: 1,
  });
  // The admin Worker (the harness routes every host's /.tollgate* to it).
  const base = new URL("/.tollgate", tg.url).href;
  try {
    await withBrowser(async (browser) => {
      const { page, problems } = await watchedPage(browser);
      await page.setViewport({ width: 1280, height: 800 });
      let res = await page.goto(`${base}/`);
      assert.equal(res.status(), 200);
      const csp = res.headers()["content-security-policy"];
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.doesNotMatch(csp, /unsafe-inline|script-src/, "no script is allowed at all");
      assert.equal(res.headers()["x-frame-options"], "DENY");
      await shot(page, "signin");
      await auditAll(browser, [`${base}/`]);

      // A wrong token, then the right one.
      await page.type("input[name=token]", "not-the-token");
      res = await submit(page, "form[action$='/ui/signin']");
      assert.equal(res.status(), 401);
      assert.match(await page.content(), /not the admin token/);
      // Chromium reports the 401 itself as a console error: that one is expected.
      assert.deepEqual(problems.splice(0).map((p) => p.replace(/\(.*\)/, "")), ["Failed to load resource: the server responded with a status of 401 "]);
      await page.type("input[name=token]", TOKEN);
      res = await submit(page, "form[action$='/ui/signin']");
      assert.equal(res.status(), 200);
      assert.ok(page.url().endsWith("/.tollgate/ui/rules"), page.url());
      const cookie = (await page.cookies()).find((c) => c.name === "tollgate_session");
      assert.ok(cookie, "a session cookie");
      assert.equal(cookie.httpOnly, true);
      assert.equal(cookie.secure, true);
      assert.equal(cookie.sameSite, "Strict");
      assert.equal(cookie.path, "/.tollgate", "never sent to the origin");
      const rules = await page.$$eval("main h2", (hs) => hs.map((h) => h.textContent));
      assert.deepEqual(rules, ["api", "login"]);
      // Try it: an explain of a request each rule takes (tools/explain.rs
      // checks every preset's against explain itself).
      assert.deepEqual(await page.$$eval("main pre.try", (ps) => ps.map((p) => p.textContent)), [
        "tollgate explain 'https://example.com/api/x' -X GET --ip 203.0.113.7",
        "tollgate explain 'https://example.com/login' -X POST -H 'content-type: application/x-www-form-urlencoded' --data 'email=demo' --ip 203.0.113.7",
      ]);
      const ruleRows = await page.$$eval("section:first-of-type table.rule tr", (trs) => trs.map((tr) => tr.cells[0].textContent));
      assert.deepEqual(ruleRows, ["Matches", "Limits", "Key", "Policy", "Lease"], "rules in explain's words, not a dump of fields");
      await shot(page, "rules");

      // Look the key up (after two requests of its own), ban it with a reason.
      for (let i = 0; i < 2; i++) assert.equal((await tg.fetch("/api/items", { ip: BANNED })).status, 200);
      res = await page.goto(`${base}/ui/keys?rule=api&ip=${BANNED}`);
      assert.equal(res.status(), 200);
      assert.ok(await page.$("#status"), "the key's status");
      assert.deepEqual(await page.$$eval("main .err:not(#short-token)", (es) => es.map((e) => e.outerHTML)), [], "no stray status line");
      const [used, resets] = await page.$eval("#windows tr:nth-child(2)", (tr) => [tr.cells[1].textContent, tr.cells[3].textContent]);
      assert.equal(used, "2");
      assert.match(resets, /^[1-9]\d?s$|^1m$/, "a person's units, not milliseconds");
      await page.type("form:has(input[value=ban]) input[name=reason]", "scraping the catalogue");
      res = await page.$eval("form:has(input[value=ban]) input[name=for]", (i) => (i.value = "10m"));
      res = await submit(page, "form:has(input[value=ban])");
      assert.equal(res.status(), 200);
      assert.ok(await page.$("#banned"), await page.content());
      assert.match(await page.$eval("#banned", (p) => p.textContent), /scraping the catalogue/);
      assert.doesNotMatch(await page.$eval("#status", (s) => s.textContent), /Remaining/, "nothing remains for a banned key");
      await shot(page, "keys");

      // Under Controls: the reason, who set it, the key only as its hash.
      await page.goto(`${base}/ui/controls`);
      const rows = await page.$$eval("#controls tr", (trs) => trs.slice(1).map((tr) => [...tr.cells].map((c) => c.textContent)));
      assert.equal(rows.length, 1, JSON.stringify(rows));
      const [ruleName, keyHash, kind, , ends, reason, by] = rows[0];
      assert.deepEqual([ruleName, kind, reason, by], ["api", "ban", "scraping the catalogue", "console"]);
      assert.match(keyHash, /^[0-9a-f]{16}$/);
      assert.match(ends, /UTC$/);
      assert.ok(!(await page.content()).includes(BANNED), "no raw key on the Controls page");
      const lift = await page.$$eval("#controls form", (fs) => fs.map((f) => [f.method, new URL(f.action).pathname, ...[...f.elements].filter((e) => e.type === "hidden").map((e) => `${e.name}=${e.value.length > 20 ? "…" : e.value}`)]));
      assert.deepEqual(lift, [["post", "/.tollgate/ui/keys", "csrf=…", "rule=api", `key_hash=${keyHash}`, "do=lift"]], "a Lift ban button per ban, with the session's CSRF token");
      await shot(page, "controls");
      top.hash = keyHash;
      if (SHOTS) {
        await page.setViewport({ width: 390, height: 800 });
        await page.goto(`${base}/ui/keys?rule=api&ip=${BANNED}`);
        await shot(page, "keys-390");
        await page.setViewport({ width: 1280, height: 800 });
      }
      await auditAll(browser, [
        `${base}/ui/rules`, `${base}/ui/keys?rule=api&ip=${BANNED}`, `${base}/ui/keys`, `${base}/ui/controls`, `${base}/ui/traffic?range=hour`,
        `${base}/ui/events?range=hour`, `${base}/ui/keys?rule=api&key_hash=${keyHash}`, `${base}/ui/keys?rule=api&key_hash=0000000000000000`,
      ]);
      asked.splice(0);

      // The Worker refuses that key, and not another.
      assert.equal((await tg.fetch("/api/items", { ip: BANNED })).status, 429);
      assert.equal((await tg.fetch("/api/items", { ip: "198.51.100.8" })).status, 200);

      // From the top blocked key (Traffic) to its page: its ban, by its hash.
      await page.goto(`${base}/ui/traffic?range=hour`);
      await Promise.all([page.waitForNavigation(), page.click(`#top-keys a[href*='key_hash=${keyHash}']`)]);
      assert.equal(new URL(page.url()).searchParams.get("key_hash"), keyHash);
      assert.ok(await page.$("#banned"), "the key's page shows its ban");
      assert.match(await page.$eval("#status h2", (h) => h.textContent), new RegExp(`api · ${keyHash}`));
      assert.ok(!(await page.content()).includes(BANNED), "found by its hash: the raw key is not shown");

      // Lift it with the Controls page's button: gone from Controls, served again.
      await page.goto(`${base}/ui/controls`);
      res = await submit(page, "#controls form");
      assert.equal(res.status(), 200);
      assert.equal(await page.$("#banned"), null);
      assert.match(await page.$eval("#status .ok", (p) => p.textContent), /Done: ban lifted/);
      assert.deepEqual(await page.$$eval("main .err:not(#short-token)", (es) => es.map((e) => e.outerHTML)), [], "a lift is no error");
      await page.goto(`${base}/ui/controls`);
      assert.match(await page.content(), /No ban or override is in force/);
      // Lifted at the object: the zone isolate that cached the ban trusts it
      // at most 10 s more (count::blocked::RECHECK_MS), another serves it now.
      assert.equal((await tg.fetchVia(1, "/api/items", { ip: BANNED })).status, 200);

      // Traffic: charts drawn on the server from the SQL API's answers.
      asked.splice(0);
      res = await page.goto(`${base}/ui/traffic?range=hour`);
      assert.equal(res.status(), 200);
      const charts = await page.$$eval("svg.chart", (svgs) => svgs.map((s) => [s.getAttribute("aria-label"), [...s.querySelectorAll("polyline")].map((p) => p.getAttribute("class"))]));
      // Each chart's text alternative: every line's total, as the SQL API answered.
      assert.deepEqual(charts, [["api: allowed 147, blocked 49, exempt 3", ["allowed", "blocked", "exempt"]], ["login: shadow 5", ["shadow"]]]);
      const axis = await page.$eval("svg.chart", (svg) => [...svg.querySelectorAll("text[text-anchor]")].map((t) => t.textContent));
      assert.equal(axis.length, 5, "five times on the axis");
      for (const t of axis) assert.match(t, /^\d\d:\d\d$/);
      assert.match(await page.$eval("table.numbers", (t) => t.textContent), /blocked4942 at \d\d:\d\d/);
      const peak = await page.$eval("svg.chart polyline.allowed", (p) => p.getAttribute("points").split(" ").map((xy) => Number(xy.split(",")[1])));
      assert.equal(Math.min(...peak), 14, "the 147 allowed (one point standing for them) is the chart's top");
      assert.match(await page.$eval("#top-keys", (t) => t.textContent), new RegExp(`${keyHash}\\s*49`));
      const shares = await page.$$eval("#allowed-blocked tr", (trs) => trs.slice(1).map((tr) => [...tr.cells].slice(0, 5).map((c) => c.textContent)));
      assert.deepEqual(shares, [["api", "147", "49", "0", "25%"], ["login", "0", "0", "5", "0%"]], "allowed vs blocked per rule");
      assert.equal(await page.$eval("#allowed-blocked svg", (s) => s.getAttribute("aria-label")), "api: 147 allowed, 49 blocked (25%)");
      assert.match(await page.$eval("#top-places", (t) => t.textContent), /NL\s*AMS\s*40/);
      assert.equal(asked.length, 5, "five queries a page (the spend by model the fifth)");
      assert.equal(await page.$("#spend"), null, "no priced answer: no spend section");
      for (const a of asked) {
        assert.equal(a.path, "/client/v4/accounts/0123456789abcdef0123456789abcdef/analytics_engine/sql");
        assert.equal(a.authorization, "Bearer ae-read-token");
        assert.match(a.query, /_sample_interval/);
        assert.match(a.query, /FROM tollgate /);
      }
      await shot(page, "traffic");
      // Events: the refusals the SQL API answered, per rule.
      res = await page.goto(`${base}/ui/events?range=hour`);
      assert.equal(res.status(), 200);
      assert.deepEqual(await page.$$eval("table.events", (ts) => ts.map((t) => t.dataset.rule)), ["api", "login"]);
      const apiEvent = await page.$eval("table.events[data-rule=api] tr:nth-child(2)", (tr) => [...tr.cells].map((c) => c.textContent));
      assert.deepEqual(apiEvent.slice(1), ["ban", "blocked", "GET", "/api/*", "NL", "AMS", "64500", keyHash]);
      assert.match(apiEvent[0], /UTC$/);
      assert.deepEqual(problems, [], "no console error and no CSP violation on any page");

      // Signing out ends the session in this browser.
      res = await submit(page, "header form[action$='/ui/signout']");
      assert.ok(page.url().endsWith("/.tollgate/"), page.url());
      assert.ok(await page.$("input[name=token]"), "the sign-in form again");
      assert.equal((await page.cookies()).find((c) => c.name === "tollgate_session"), undefined);
      assert.equal((await page.goto(`${base}/ui/controls`)).status(), 401);

      // A cross-site form post: another origin's page submits a ban form to
      // the console. SameSite=Strict keeps the cookie off it, and it carries
      // no CSRF token: refused, nothing banned.
      const evil = createServer((_, out) => {
        out.setHeader("content-type", "text/html");
        out.end(`<form id="f" method="post" action="${base}/ui/keys"><input name="do" value="ban"><input name="rule" value="api">
          <input name="ip" value="${BANNED}"><input name="for" value="1h"><button>go</button></form>`);
      });
      await new Promise((r) => evil.listen(0, "localhost", r));
      try {
        await page.goto(`http://localhost:${evil.address().port}/`);
        res = await submit(page, "#f");
        assert.ok([401, 403].includes(res.status()), `refused: ${res.status()}`);
      } finally {
        evil.close();
      }
      assert.equal((await tg.fetchVia(1, "/api/items", { ip: BANNED })).status, 200, "nothing was banned");

      // An expired session, correctly signed: refused.
      await page.setCookie({ name: "tollgate_session", value: sessionCookie(TOKEN, Date.now() - 1000, "127.0.0.1"), url: base, path: "/.tollgate" });
      res = await page.goto(`${base}/ui/controls`);
      assert.equal(res.status(), 401);
      assert.match(await page.content(), /session has ended/);
    });

    // The same cross-site post with a valid session cookie forced onto it
    // (a browser without SameSite): the CSRF token and Origin still refuse it.
    const good = `tollgate_session=${sessionCookie(TOKEN, Date.now() + 600_000, "203.0.113.50")}`;
    let res = await tg.fetch(`${base}/ui/keys`, {
      ip: "203.0.113.50",
      method: "POST",
      headers: { cookie: good, "content-type": "application/x-www-form-urlencoded", origin: "http://evil.example", "sec-fetch-site": "cross-site" },
      body: `do=ban&rule=api&ip=${BANNED}&for=1h`,
    });
    assert.equal(res.status, 403);
    assert.equal((await tg.fetchVia(1, "/api/items", { ip: BANNED })).status, 200);

    // The lockout counts failed sign-ins: ten wrong tokens, then even the
    // right one (shorter than 32 characters) gets 429.
    const signIn = (token) =>
      tg.fetch(`${base}/ui/signin`, {
        ip: "203.0.113.99",
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `token=${encodeURIComponent(token)}`,
      });
    for (let i = 0; i < 10; i++) assert.equal((await signIn(`wrong-${i}`)).status, 401);
    res = await signIn(TOKEN);
    assert.equal(res.status, 429);
    assert.ok(!res.headers.get("set-cookie"), "no session for a locked-out client");
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test("rotating the token ends every session", { timeout: 120_000 }, async () => {
  const persist = tempDir();
  const cookie = `tollgate_session=${sessionCookie(TOKEN, Date.now() + 600_000, "203.0.113.7")}`;
  let tg = await startTollgate({ config: CONFIG, persist, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } });
  try {
    const res = await tg.fetch("/.tollgate/ui/rules", { headers: { cookie } });
    assert.equal(res.status, 200, "the session holds under its token");
  } finally {
    await tg.dispose();
  }
  tg = await startTollgate({ config: CONFIG, persist, vars: { TOLLGATE_ADMIN_TOKEN: "the-rotated-token" } });
  try {
    const res = await tg.fetch("/.tollgate/ui/rules", { headers: { cookie } });
    assert.equal(res.status, 401);
    assert.match(await res.text(), /Sign in/);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// Issue 38: a project of `tollgate init` binds an Analytics Engine dataset,
// which `wrangler dev` keeps nothing of; `tollgate dev` (npm run dev) sets
// TOLLGATE_LOCAL_METRICS, and the points then go to the local sink instead.
test("under npm run dev (a dataset bound as init writes it, the local sink on), the Traffic page shows the Worker's own points", { timeout: 120_000 }, async () => {
  assert.match(readFileSync(join(ROOT, "packages", "tollgate", "lib", "dev.mjs"), "utf8"), /"--var", "TOLLGATE_LOCAL_METRICS:on"/, "tollgate dev turns the sink on");
  const tg = await startTollgate({
    config: CONFIG,
    vars: { TOLLGATE_ADMIN_TOKEN: TOKEN, TOLLGATE_LOCAL_METRICS: "on" },
    workerOptions: { analyticsEngineDatasets: { TOLLGATE_METRICS: { dataset: "tollgate" } } },
  });
  try {
    const ban = await tg.fetch(`/.tollgate/ban?rule=api&ip=${BANNED}&for=10m`, { method: "POST", ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ban.status, 200);
    for (let i = 0; i < 4; i++) assert.equal((await tg.fetch("/api/items", { ip: BANNED })).status, 429);
    const res = await tg.fetch("/.tollgate/traffic?range=hour", { ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    const blocked = body.rules.api.blocked;
    assert.equal(blocked.length, 60);
    assert.equal(blocked.reduce((a, b) => a + b, 0), 4, JSON.stringify(body));
    assert.equal(body.top_keys[0].n, 4);
    assert.match(body.top_keys[0].key_hash, /^[0-9a-f]{16}$/);
    const none = await startTollgate({ config: CONFIG, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN } });
    try {
      const off = await none.fetch("/.tollgate/traffic", { ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });
      assert.match((await off.json()).error, /not set up/);
    } finally {
      await none.dispose();
      none.cleanup();
    }
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// Issue 53: `npm run dev` restarts the Worker at every file saved. Under
// the local sink, a limited rule's allowed totals are written with each
// decision, not held in the isolate for `metrics_interval` (a minute) and
// lost with it: after a restart on the same persistence the Traffic page
// counts them beside the blocks.
test("under the local sink, allowed requests still count on the Traffic page after the Worker restarts", { timeout: 120_000 }, async () => {
  const rules = config(rule("api", "/api/*", { key: ["ip"], limits: limit(3, "1m") }));
  const options = { config: rules, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN, TOLLGATE_LOCAL_METRICS: "on" } };
  const first = await startTollgate(options);
  const persist = first.persist;
  try {
    const sent = [];
    for (let i = 0; i < 4; i++) sent.push((await first.fetch("/api/items", { ip: "198.51.100.31" })).status);
    sent.push((await first.fetch("/api/items", { ip: "198.51.100.32" })).status);
    assert.deepEqual(sent, [200, 200, 200, 429, 200]);
  } finally {
    await first.dispose();
  }
  try {
    const again = await startTollgate({ ...options, persist });
    try {
      const res = await again.fetch("/.tollgate/traffic?range=hour", { ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.deepEqual(body.totals.api, { allowed: 4, blocked: 1 }, "every allowed decision of the isolate that went, and its block");
      assert.equal(body.rules.api.allowed.reduce((a, b) => a + b, 0), 4, JSON.stringify(body.rules.api));
    } finally {
      await again.dispose();
    }
  } finally {
    first.cleanup();
  }
});

// Issue 38 item 4: who is blocked, and why. The Worker's own points (the
// local sink, as under npm run dev) in the Events view, in Chromium: each
// refusal with its reason (limit, ban, missing key), method, route (the
// rule's pattern, never the request's path or query), country, colo and
// ASN as `request.cf` gave them, and the key's hash; the raw key only on
// the rule with `metrics_raw_key = true`. Refusals are written as they
// happen: no metrics interval to wait for.
test("the events view lists a blocked client's refusals with reason, route and country, the raw key only where the rule asks", { timeout: 180_000 }, async () => {
  const RAW = "k-partner-0042";
  const events = config(
    rule("api", "/api/*", { key: ["ip"], limits: limit(2, "1m") }),
    rule("partners", "/partners/*", { key: ["header:x-api-key"], limits: limit(1, "1m"), metrics_raw_key: true }),
    rule("login", "/login", { methods: ["POST"], key: ["body:email"], limits: limit(5, "15m") }),
  );
  const tg = await startTollgate({
    config: events,
    vars: { TOLLGATE_ADMIN_TOKEN: TOKEN, TOLLGATE_LOCAL_METRICS: "on" },
    miniflare: { host: "127.0.0.1", port: 0 },
  });
  const base = new URL("/.tollgate", tg.url).href;
  const cf = { country: "NL", colo: "AMS", asn: 64500 };
  try {
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await tg.fetch("/api/items?email=eve@example.com", { ip: BANNED, cf })).status);
    const ban = await tg.fetch(`/.tollgate/ban?rule=api&ip=198.51.100.9&for=10m`, { method: "POST", ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ban.status, 200);
    statuses.push((await tg.fetch("/api/items", { ip: "198.51.100.9", cf: { country: "US", colo: "IAD", asn: 64501 } })).status);
    for (let i = 0; i < 2; i++) statuses.push((await tg.fetch("/partners/feed", { ip: "203.0.113.20", headers: { "x-api-key": RAW }, cf })).status);
    statuses.push((await tg.fetch("/login", { method: "POST", ip: "203.0.113.21", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "name=x", cf })).status);
    assert.deepEqual(statuses, [200, 200, 429, 429, 200, 429, 400], "limit, ban, limit, missing key");
    await withBrowser(async (browser) => {
      const { page, problems } = await watchedPage(browser);
      await page.setViewport({ width: 1280, height: 800 });
      await page.goto(`${base}/`);
      await page.type("input[name=token]", TOKEN);
      await submit(page, "form[action$='/ui/signin']");
      const res = await page.goto(`${base}/ui/events?range=hour`);
      assert.equal(res.status(), 200);
      const rows = await page.$$eval("table.events", (ts) =>
        ts.map((t) => [t.dataset.rule, [...t.rows].slice(1).map((tr) => [...tr.cells].slice(1).map((c) => c.textContent))]),
      );
      const byRule = Object.fromEntries(rows);
      // (Newest first, but both within the same second: in either order.)
      assert.deepEqual(byRule.api.map((r) => r.slice(0, 7)).sort(), [
        ["ban", "blocked", "GET", "/api/*", "US", "IAD", "64501"],
        ["limit", "blocked", "GET", "/api/*", "NL", "AMS", "64500"],
      ], "the ban and the limit, each where request.cf says");
      assert.deepEqual(byRule.login.map((r) => r.slice(0, 8)), [["missing_key", "blocked", "POST", "/login", "NL", "AMS", "64500", "-"]], "a missing key has no hash");
      assert.deepEqual(byRule.partners.map((r) => [r[0], r[3], r.at(-1)]), [["limit", "/partners/*", `header:x-api-key=${RAW}`]], "the rule that asks shows its raw key, as the key is made");
      for (const r of byRule.api) assert.match(r[7], /^[0-9a-f]{16}$/, "the key as its hash");
      const html = await page.content();
      assert.ok(!html.includes(BANNED) && !html.includes("198.51.100.9") && !html.includes("eve@example.com"), "no raw key, path or query of a rule that did not ask");
      assert.equal((await page.$$("th")).filter(Boolean).length > 0, true);
      assert.equal(await page.$$eval("table.events[data-rule=api] th", (ths) => ths.some((th) => th.textContent === "Key")), false);
      await shot(page, "events");
      if (SHOTS) {
        await page.setViewport({ width: 390, height: 800 });
        await page.reload();
        await shot(page, "events-390");
        await page.setViewport({ width: 1280, height: 800 });
      }
      // Allowed vs blocked per rule, from the same points.
      await page.goto(`${base}/ui/traffic?range=hour`);
      const shares = await page.$$eval("#allowed-blocked tr", (trs) => trs.slice(1).map((tr) => [...tr.cells].slice(0, 3).map((c) => c.textContent)));
      assert.deepEqual(shares.find((r) => r[0] === "api"), ["api", "2", "2"], "under the local sink a limited rule's allowed totals are written at once, as the blocks are");
      await auditAll(browser, [`${base}/ui/events?range=hour`, `${base}/ui/traffic?range=hour`]);
      assert.deepEqual(problems, [], "no console error and no CSP violation");
    });
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});
