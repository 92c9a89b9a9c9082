// Issue 38, item 2: operator sign-in the Cloudflare way. Behind Cloudflare
// Access, the console and the admin API take a request whose
// Cf-Access-Jwt-Assertion holds a valid Access token: RS256 under a key of
// the team's JWKS, `aud` the application's tag, `iss` the team domain, not
// expired. The keys are made here (node:crypto), the JWKS answered at the
// network edge (the harness's outbound mock, as the origin is), and the
// built Worker runs in Miniflare. Refused: a wrong audience, an expired
// token, one signed by a foreign key (same kid, or an unknown one), alg
// none / HS256; the admin token path works as before. The attacker's side:
// a token on an ordinary path of the zone changes nothing (forwarded with
// its headers, never admin), and no admin path forwards any credential.
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync, createSign, createHmac } from "node:crypto";
import { startTollgate, mockOrigin } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const TEAM = "acme.cloudflareaccess.com";
const AUD = "4714c1358e65fe4b408ad6d432a5f878f08194bdb4752441fd56faefa9b2b6f2";
const TOKEN = "0123456789abcdef0123456789abcdef-admin-token";
const JWKS_URL = `https://${TEAM}/cdn-cgi/access/certs`;

const b64url = (buf) => Buffer.from(buf).toString("base64url");

function keyPair(kid) {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { kid, privateKey, jwk: { ...publicKey.export({ format: "jwk" }), kid, alg: "RS256", use: "sig" } };
}

const TEAM_KEY = keyPair("team-key-1");
const FOREIGN = keyPair("team-key-1"); // the team's kid, another key
const STRANGER = keyPair("stranger-key");

/** An Access token: `claims` over the defaults, signed by `key` (RS256), or as `alg` says. */
function jwt(claims = {}, { key = TEAM_KEY, alg = "RS256", kid = key.kid } = {}) {
  const now = Math.floor(Date.now() / 1000);
  const header = b64url(JSON.stringify({ alg, kid, typ: "JWT" }));
  const body = { aud: [AUD], email: "ann@example.com", exp: now + 600, iat: now - 5, nbf: now - 5, iss: `https://${TEAM}`, type: "app", sub: "7335d417-61da", ...claims };
  const payload = b64url(JSON.stringify(body));
  const input = `${header}.${payload}`;
  let signature = "";
  if (alg === "RS256") signature = b64url(createSign("RSA-SHA256").update(input).sign(key.privateKey));
  if (alg === "HS256") signature = b64url(createHmac("sha256", JSON.stringify(TEAM_KEY.jwk)).update(input).digest());
  return `${input}.${signature}`;
}

const CONFIG = {
  ...config(rule("api", "/api/*", { key: ["ip"], limits: limit(100, "1m") })),
  admin_access: { team_domain: TEAM, audience: AUD },
};

/** The origin, and the team's JWKS at the edge (counting its fetches). */
function edge() {
  const jwks = { fetches: 0 };
  const origin = mockOrigin(async (request) => {
    if (request.url !== JWKS_URL) return null;
    jwks.fetches++;
    return Response.json({ keys: [TEAM_KEY.jwk], public_cert: { kid: TEAM_KEY.kid, cert: "-----BEGIN CERTIFICATE-----" } });
  });
  return { origin, jwks };
}

async function withTollgate(vars, body) {
  const { origin, jwks } = edge();
  const tg = await startTollgate({ config: CONFIG, origin, vars });
  try {
    await body(tg, origin, jwks);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
}

const assertion = (token) => ({ headers: { "cf-access-jwt-assertion": token } });
/** What reached the origin besides the JWKS fetches. */
const reachedOrigin = (origin) => origin.received.filter((r) => r.url !== JWKS_URL);

test("a valid Access token opens the admin API and the console; the admin lines name the operator", { timeout: 120_000 }, async () => {
  await withTollgate({ TOLLGATE_ADMIN_TOKEN: TOKEN }, async (tg, origin, jwks) => {
    const res = await tg.fetch("/.tollgate/rules", assertion(jwt()));
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual((await res.json()).rules.map((r) => r.name), ["api"]);
    const status = await tg.fetch("/.tollgate/status?rule=api&ip=198.51.100.7", assertion(jwt()));
    assert.equal(status.status, 200);
    assert.equal((await status.json()).rule, "api");
    // The console: the page, with who signed in beside Sign out.
    const page = await tg.fetch("/.tollgate/ui/rules", assertion(jwt({ email: "ann+ops@example.com" })));
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /<span id="who"[^>]*>ann\+ops@example\.com<\/span>/);
    assert.match(html, /Sign out/);
    assert.doesNotMatch(html, /name="token"/, "no token form: Access signed in");
    // Home leads on to Rules; signing out goes to Access's logout.
    const home = await tg.fetch("/.tollgate/", { ...assertion(jwt()), redirect: "manual" });
    assert.equal(home.status, 303);
    assert.equal(home.headers.get("location"), "/.tollgate/ui/rules");
    // A ban through the console's form: its CSRF token is the Access token's own.
    const token = jwt();
    const keys = await (await tg.fetch("/.tollgate/ui/keys?rule=api&ip=198.51.100.7", assertion(token))).text();
    const csrf = keys.match(/name="csrf" value="([0-9a-f]+)"/)[1];
    const post = (csrf) =>
      tg.fetch("/.tollgate/ui/keys", {
        method: "POST",
        redirect: "manual",
        headers: { "cf-access-jwt-assertion": token, "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" },
        body: `do=ban&rule=api&ip=198.51.100.7&for=10m&reason=test&csrf=${csrf}`,
      });
    assert.equal((await post("0".repeat(64))).status, 403, "another CSRF token: refused");
    assert.equal((await post(csrf)).status, 200);
    assert.equal((await tg.fetch("/api/x", { ip: "198.51.100.7" })).status, 429, "the ban is in force");
    const out = await tg.fetch("/.tollgate/ui/signout", {
      method: "POST",
      redirect: "manual",
      headers: { "cf-access-jwt-assertion": token, "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" },
      body: `csrf=${csrf}`,
    });
    assert.equal(out.status, 303);
    assert.equal(out.headers.get("location"), "/cdn-cgi/access/logout");
    await tg.settled();
    const lines = tg.logEvents().filter((e) => e.tollgate === "admin");
    assert.ok(lines.length >= 4, JSON.stringify(lines));
    for (const line of lines) assert.match(line.operator ?? "", /^ann(\+ops)?@example\.com$/, JSON.stringify(line));
    assert.ok(lines.some((l) => l.action === "ban" && l.operator === "ann@example.com"), "the ban names who set it");
    // The keys were fetched once for all of it (cached in the isolate).
    assert.equal(jwks.fetches, 1);
    assert.deepEqual(reachedOrigin(origin).map((r) => r.path), [], "nothing admin reached the origin");
  });
});

test("a wrong audience, an expired or not yet valid token, a foreign key, alg none and HS256 are refused", { timeout: 120_000 }, async () => {
  await withTollgate({ TOLLGATE_ADMIN_TOKEN: TOKEN }, async (tg, origin, jwks) => {
    const now = Math.floor(Date.now() / 1000);
    const cases = [
      ["wrong audience", jwt({ aud: ["0".repeat(64)] }), "audience"],
      ["expired", jwt({ exp: now - 120, iat: now - 900, nbf: now - 900 }), "expired"],
      ["not yet valid", jwt({ nbf: now + 600 }), "not_yet_valid"],
      ["another team", jwt({ iss: "https://evil.cloudflareaccess.com" }), "issuer"],
      ["a foreign key under the team's kid", jwt({}, { key: FOREIGN }), "signature"],
      ["an unknown kid", jwt({}, { key: STRANGER }), "unknown_key"],
      ["alg none", jwt({}, { alg: "none" }), "algorithm"],
      ["HS256 keyed by the public key", jwt({}, { alg: "HS256" }), "algorithm"],
      ["garbage", "not.a.jwt", "malformed"],
      ["a valid token, its payload edited", jwt().replace(/\.([^.]+)\./, (_, p) => `.${b64url(JSON.stringify({ ...JSON.parse(Buffer.from(p, "base64url")), email: "eve@example.com" }))}.`), "signature"],
    ];
    for (const [what, token, reason] of cases) {
      await tg.settled();
      const seen = tg.logEvents().length;
      const api = await tg.fetch("/.tollgate/rules", assertion(token));
      assert.equal(api.status, 401, what);
      const page = await tg.fetch("/.tollgate/ui/rules", assertion(token));
      assert.equal(page.status, 401, what);
      assert.match(await page.text(), /could not be verified/, what);
      await tg.settled();
      const denied = tg.logEvents().slice(seen).filter((e) => e.tollgate === "admin_denied" && e.access === reason);
      assert.equal(denied.length, 2, `${what}: ${JSON.stringify(tg.logEvents().slice(-4))}`);
    }
    // The keys were fetched once: an unknown kid within a minute of a fetch
    // fetches nothing (a refetch waits REFETCH_MIN_MS; the unit tests of
    // pipeline::access step past it).
    assert.equal(jwks.fetches, 1, "one fetch for every case");
    for (let i = 0; i < 20; i++) {
      const res = await tg.fetch("/.tollgate/rules", assertion(jwt({}, { key: keyPair(`bogus-${i}`) })));
      assert.equal(res.status, 401);
    }
    assert.equal(jwks.fetches, 1, "a flood of made-up kids fetches nothing more");
    // No Access token refused counts toward the lockout: the right token still works at once.
    const ok = await tg.fetch("/.tollgate/rules", { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200);
    assert.deepEqual(reachedOrigin(origin), []);
  });
});

test("the admin token path is as today, beside Access; Access alone turns the admin API on", { timeout: 120_000 }, async () => {
  await withTollgate({ TOLLGATE_ADMIN_TOKEN: TOKEN }, async (tg) => {
    assert.equal((await tg.fetch("/.tollgate/rules", { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
    assert.equal((await tg.fetch("/.tollgate/rules", { headers: { authorization: "Bearer wrong" } })).status, 401);
    assert.equal((await tg.fetch("/.tollgate/rules")).status, 401);
    await tg.settled();
    assert.equal(tg.logEvents().filter((e) => e.tollgate === "admin" && e.operator).length, 0, "no operator on a token's lines");
  });
  await withTollgate({}, async (tg, origin) => {
    assert.equal((await tg.fetch("/.tollgate/rules", assertion(jwt()))).status, 200, "Access without a token");
    assert.equal((await tg.fetch("/.tollgate/rules", { headers: { authorization: "Bearer " } })).status, 401);
    assert.equal((await tg.fetch("/.tollgate/rules", { headers: { authorization: `Bearer ${TOKEN}` } })).status, 401, "no token set: none matches");
    const page = await tg.fetch("/.tollgate/ui/rules", assertion(jwt()));
    assert.doesNotMatch(await page.text(), /short-token/, "no banner about a token there is not");
    await tg.settled();
    assert.ok(!tg.logEvents().some((e) => e.tollgate === "admin_token_short"));
    assert.deepEqual(reachedOrigin(origin), []);
  });
});

test("a token on the zone's own paths is the app's: forwarded with every header, never admin", { timeout: 120_000 }, async () => {
  await withTollgate({ TOLLGATE_ADMIN_TOKEN: TOKEN }, async (tg, origin) => {
    const token = jwt();
    const res = await tg.fetch("/api/thing", { headers: { "cf-access-jwt-assertion": token, cookie: `CF_Authorization=${token}; app=1`, "x-app": "kept" } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-origin"), "mock");
    const [seen] = reachedOrigin(origin);
    assert.equal(seen.path, "/api/thing");
    assert.equal(seen.headers["cf-access-jwt-assertion"], token, "the app behind Access gets its token");
    assert.equal(seen.headers.cookie, `CF_Authorization=${token}; app=1`);
    assert.equal(seen.headers["x-app"], "kept");
    // Admin spellings with a valid token and the admin credentials: answered by tollgate, nothing forwarded.
    const before = reachedOrigin(origin).length;
    for (const path of ["/.TOLLGATE/rules", "/.tollgate/..%2fapi/echo", "/.Tollgate/ui/..%2f..%2fapi/echo", "/.tollgate/ui/rules"]) {
      const res = await tg.fetch(path, { headers: { "cf-access-jwt-assertion": token, authorization: `Bearer ${TOKEN}`, cookie: "tollgate_session=v2.1.x" } });
      assert.notEqual(res.headers.get("x-origin"), "mock", path);
    }
    assert.equal(reachedOrigin(origin).length, before, "no admin path reached the origin");
  });
});
