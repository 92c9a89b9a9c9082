// Version skew (issue 30): the previous release's Worker with today's
// objects, and today's Worker with the previous release's objects, as a
// deploy (a running object keeps its old code until it hibernates) or a
// gradual deployment (each object one version, edges of both) mixes them.
//
// The previous release is kept built under tests/skew/PREVIOUS/ (its
// index.js and gzipped Wasm, and the entry that wraps its object for RPC);
// scripts/release refreshes it. Each case runs three phases on the same
// persistence folder, so the rows one version wrote are read by the other:
// the objects of one build (a rollout's start), of the other (rolled out),
// of the first again (a rollback); in every phase requests go through an
// edge of each build (`via` 0: the objects' own build, 1: the other). Both
// orders run: objects previous → today → previous, and today → previous →
// today.
// What must hold in each: no request over-admitted, no count lost, no 500;
// a call the other side does not understand is refused with a versioned
// error, and the Worker applies the rule's on_error (or, for a field added
// since the previous release, sends what the older object takes instead:
// src/count/older.rs).
//
// To cover a new kind of counting, add a case to CASES: its config and its
// three phases' requests, each with the statuses expected. Fields added to
// version 1 since the previous release (penalty, usage, concurrency, the
// penalty row, the ban reply, the registry) have their own tests below the
// CASES: each build is given its own config (`startSkew`'s `cfg`), since
// the previous build refuses fields it does not know.
import { test } from "node:test";
import { Miniflare } from "miniflare";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync, copyFileSync, rmSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTollgate, mockOrigin, tempDir, ROOT, COMPATIBILITY_DATE, eventsSince, sleep, readAnswer, shippedObjects, adminWorkerBeside } from "./harness.mjs";
import { config, rule, limit, failedLogins, json } from "./builders.mjs";

/** The release whose build is kept under tests/skew/ (scripts/release sets it). */
const PREVIOUS = "0.1.0";
const TOKEN = "s3cret-admin-token-for-skew";

/** The previous release's build, unpacked once into a temporary folder. */
function unpackPrevious() {
  const from = join(ROOT, "tests", "skew", PREVIOUS);
  const dir = mkdtempSync(join(tmpdir(), `tollgate-${PREVIOUS}-`));
  for (const file of ["entry.mjs", "index.js"]) copyFileSync(join(from, file), join(dir, file));
  writeFileSync(join(dir, "index_bg.wasm"), gunzipSync(readFileSync(join(from, "index_bg.wasm.gz"))));
  return dir;
}
const previousDir = unpackPrevious();
process.on("exit", () => rmSync(previousDir, { recursive: true, force: true }));

const BUILDS = {
  previous: { scriptPath: join(previousDir, "entry.mjs"), modulesRoot: previousDir },
  today: { scriptPath: join(ROOT, "src", "entry.mjs"), modulesRoot: ROOT },
};

// A Worker from the future: it speaks call version 2. Its calls reach the
// real object (of either build) through this stand-in, which only rewrites
// the version in the call's path, as a newer Worker would send it.
const FUTURE = `
import { DurableObject } from "cloudflare:workers";
export class FutureLimiter extends DurableObject {
  answer(url) {
    const real = this.env.REAL;
    return real.get(real.idFromName(this.ctx.id.name)).answer(url.replace("/v1/", "/v2/"));
  }
}
export default { fetch: () => new Response("future") };
`;

/**
 * Tollgate with its objects (worker `tollgate`, also an edge: `via` 0) of
 * build `objects`, and a second edge (`via` 1) of build `edge`, sharing them.
 * `cfg`: one config for both builds, or `{ previous, today }`, each build's
 * own (the previous build refuses a config with today's new fields).
 * `future`: the second edge's calls go through FutureLimiter.
 */
function startSkew({ objects, edge, cfg: given, persist, origin, future = false }) {
  const cfgOf = (build) => (given.rules ? given : given[build]);
  const cfg = cfgOf(objects);
  const vars = { TOLLGATE_ADMIN_TOKEN: TOKEN };
  // The classes added since the previous release (the registry, the sink)
  // run today's code in every phase, as after the deploy that creates them
  // (a new class has no older code): in the tollgate worker when its build
  // is today's, else in a worker of today's build, `classes`, whose
  // LIMITER is the tollgate worker's (the previous build's) objects.
  const classesIn = objects === "today" ? "tollgate" : "classes";
  const newClasses = Object.fromEntries(Object.entries(shippedObjects(classesIn)).filter(([name]) => name !== "LIMITER"));
  const build = (name) => ({
    name,
    modules: true,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: COMPATIBILITY_DATE,
  });
  const edgeWorker = {
    ...build("edge-1"),
    ...BUILDS[edge],
    bindings: { TOLLGATE: cfgOf(edge), ...vars },
    durableObjects: { LIMITER: future ? { className: "FutureLimiter", scriptName: "future" } : { className: "Limiter", scriptName: "tollgate" }, ...newClasses },
    outboundService: origin.outboundService,
    stripCfConnectingIp: false,
    routes: ["edge-1.example.com/*"],
  };
  const extraWorkers = [edgeWorker];
  if (classesIn === "classes") {
    const own = Object.fromEntries(Object.entries(shippedObjects()).filter(([name]) => name !== "LIMITER"));
    extraWorkers.push({
      ...build("classes"),
      ...BUILDS.today,
      bindings: { TOLLGATE: cfgOf("today"), ...vars },
      durableObjects: { LIMITER: { className: "Limiter", scriptName: "tollgate" }, ...own },
    });
  }
  if (future) {
    extraWorkers.push({
      name: "future",
      modules: true,
      script: FUTURE,
      compatibilityDate: COMPATIBILITY_DATE,
      durableObjects: { FUTURE: { className: "FutureLimiter" }, REAL: { className: "Limiter", scriptName: "tollgate", useSQLite: true } },
    });
  }
  const durableObjects = { LIMITER: { className: "Limiter", useSQLite: true }, ...(classesIn === "tollgate" ? shippedObjects() : newClasses) };
  // Today's admin API is the admin Worker's (issue 38): beside whichever
  // worker runs today's build, on that worker's host and the plain prefix.
  extraWorkers.push(
    objects === "today"
      ? adminWorkerBeside({ ...build("tollgate"), bindings: { TOLLGATE: cfgOf("today"), ...vars }, durableObjects, outboundService: origin.outboundService }, ["example.com/.tollgate*"])
      : adminWorkerBeside(edgeWorker, ["edge-1.example.com/.tollgate*"]),
  );
  return startTollgate({
    config: cfg,
    persist,
    origin,
    vars,
    scriptPath: BUILDS[objects].scriptPath,
    workerOptions: { modulesRoot: BUILDS[objects].modulesRoot, durableObjects },
    extraWorkers,
  });
}

/** The three phases, the objects' builds `first`, the other, `first` again. */
const phasesFrom = (first) => {
  const other = first === "previous" ? "today" : "previous";
  return [
    { name: `phase 1: objects ${first}`, objects: first },
    { name: `phase 2: objects ${other}, rows of ${first}`, objects: other },
    { name: `phase 3: objects ${first} again, rows of ${other}`, objects: first },
  ];
};

const admin = (path, method = "GET") => ({ path, init: { method, ip: "192.0.2.1", headers: { authorization: `Bearer ${TOKEN}` } } });
const get = (path, ip) => ({ path, init: { ip } });
const login = (email, ip = "198.51.100.4") => ({ path: "/login", init: json({ email, password: "wrong" }, { ip }) });
const originFor = () =>
  mockOrigin((request) => (new URL(request.url).pathname === "/login" ? new Response("no", { status: 401 }) : undefined));

/**
 * The cases: a config, and per phase the requests sent, each through edge
 * `via` (0: the objects' own build, 1: the other build), with the status
 * expected (null: 200 or 429). `count`: the admin status query of the
 * count, and what it must hold at the end: `used` (exactly: no count lost,
 * none added), or `atMost` (leases: at most this many admitted, and the
 * object counts at least every one admitted).
 */
const CASES = [
  {
    name: "plain counting (hit), 6 per minute",
    cfg: config(rule("api", "/api/*", { limits: limit(6, "1m") })),
    phases: [
      [[0, get("/api/a", "203.0.113.10"), 200], [1, get("/api/b", "203.0.113.10"), 200], [1, get("/api/c", "203.0.113.10"), 200]],
      [[1, get("/api/d", "203.0.113.10"), 200], [0, get("/api/e", "203.0.113.10"), 200], [1, get("/api/f", "203.0.113.10"), 200], [0, get("/api/g", "203.0.113.10"), 429], [1, get("/api/h", "203.0.113.10"), 429]],
      [[1, get("/api/i", "203.0.113.10"), 429], [0, get("/api/j", "203.0.113.10"), 429]],
    ],
    count: { status: "rule=api&ip=203.0.113.10", used: 6 },
  },
  {
    name: "two-phase counting (count_statuses: reserve, then commit after the origin's 401), 4 per 15 minutes",
    cfg: config(failedLogins({ limits: limit(4, "15m") })),
    phases: [
      [[1, login("eve@example.com"), 401], [0, login("eve@example.com"), 401]],
      [[0, login("eve@example.com"), 401], [1, login("eve@example.com"), 401], [1, login("eve@example.com"), 429], [0, login("eve@example.com"), 429]],
      [[0, login("eve@example.com"), 429], [1, login("eve@example.com"), 429]],
    ],
    count: { status: "rule=login-account&body:email=eve@example.com", used: 4 },
  },
  {
    name: "leases (a global key, 40 per minute: edges lease tokens), 54 requests",
    cfg: config(rule("hot", "/hot/*", { key: ["global"], limits: limit(40, "1m"), lease_ttl: "5s" })),
    phases: [0, 1, 2].map(() => Array.from({ length: 18 }, (_, i) => [i % 2, get(`/hot/${i}`, `203.0.113.${20 + i}`), null])),
    count: { status: "rule=hot", atMost: 40 },
  },
  {
    name: "runtime controls (a ban, and an override, set through the admin API of either build)",
    cfg: config(rule("api", "/api/*", { limits: limit(100, "1m") })),
    phases: [
      [
        [1, admin("/.tollgate/ban?rule=api&ip=203.0.113.30&for=1h", "POST"), 200],
        [0, admin("/.tollgate/override?rule=api&ip=203.0.113.31&limit=3/1m&for=1h", "PUT"), 200],
        [0, get("/api/x", "203.0.113.30"), 429], [1, get("/api/x", "203.0.113.30"), 429],
        [1, get("/api/x", "203.0.113.31"), 200],
      ],
      [
        [0, get("/api/x", "203.0.113.30"), 429], [1, get("/api/x", "203.0.113.30"), 429],
        [0, get("/api/x", "203.0.113.31"), 200], [1, get("/api/x", "203.0.113.31"), 200], [0, get("/api/x", "203.0.113.31"), 429],
      ],
      [
        [1, get("/api/x", "203.0.113.31"), 429],
        [0, admin("/.tollgate/ban?rule=api&ip=203.0.113.30", "DELETE"), 200],
        [0, get("/api/x", "203.0.113.30"), 200], [1, get("/api/x", "203.0.113.30"), 200],
      ],
    ],
    count: { status: "rule=api&ip=203.0.113.31", used: 3 },
  },
];

/** The count's status, through the admin API of the objects' own build. */
async function countStatus(tg, query) {
  const { path, init } = admin(`/.tollgate/status?${query}`);
  const res = await tg.fetch(path, init);
  assert.equal(res.status, 200, `status ${query}`);
  return res.json();
}

// Both directions of rows: the objects' builds previous → today → previous,
// and today → previous → today. Calls go both ways in every phase.
for (const first of ["previous", "today"]) {
  const phases = phasesFrom(first);
  for (const c of CASES) {
    test(`skew ${PREVIOUS} ⇄ today, objects ${phases.map((p) => p.objects).join(" → ")}: ${c.name}`, { timeout: 90_000 }, async () => {
      const persist = tempDir();
      const origin = originFor();
      let admitted = 0;
      const seen = [];
      try {
        for (const [index, phase] of phases.entries()) {
          const edge = phase.objects === "previous" ? "today" : "previous";
          const tg = await startSkew({ objects: phase.objects, edge, cfg: c.cfg, persist, origin });
          try {
            for (const [via, { path, init }, expected] of c.phases[index]) {
              const res = await tg.fetchVia(via, path, init);
              await res.arrayBuffer();
              seen.push(res.status);
              const label = `${phase.name}, via ${via === 0 ? phase.objects : edge}: ${init.method ?? "GET"} ${path}`;
              if (expected !== null) assert.equal(res.status, expected, label);
              else assert.ok([200, 429].includes(res.status), `${label}: ${res.status}`);
              if (!path.startsWith("/.tollgate") && res.status !== 429) admitted++;
            }
            await tg.settled();
            const errors = tg.logEvents().filter((e) => ["counter_error", "edge_error", "config_error"].includes(e.tollgate));
            assert.deepEqual(errors, [], `${phase.name}: no counter, edge or config error`);
            assert.ok(!/panicked|RuntimeError: unreachable/i.test(tg.logs()), "no panic");
            const s = await countStatus(tg, c.count.status);
            if (index === phases.length - 1) {
              // The count, read back by the objects' last build.
              if (c.count.used !== undefined) assert.equal(s.windows[0].used, c.count.used, "no count lost, none added");
              if (c.count.atMost !== undefined) {
                assert.ok(admitted <= c.count.atMost, `admitted ${admitted}, over the limit ${c.count.atMost}`);
                console.log(`${c.name}: ${admitted} admitted, the object counts ${s.windows[0].used}`);
                assert.ok(s.windows[0].used >= admitted, `the object counts ${s.windows[0].used}, under the ${admitted} admitted`);
              }
            }
          } finally {
            await tg.dispose();
          }
        }
        assert.ok(!seen.includes(500) && !seen.includes(503), `no 500 or 503: ${seen}`);
      } finally {
        rmSync(persist, { recursive: true, force: true });
      }
    });
  }
}

// A call the object does not understand: a version it does not speak. Both
// builds refuse it with a versioned error (400, `{"v":1,"error":...}`), and
// the Worker (today's, and the previous one) applies the rule's on_error:
// deny answers 503, allow forwards; both log a counter_error naming it.
for (const objects of ["previous", "today"]) {
  test(`skew: a newer call (version 2) to the ${objects} object is refused, versioned, and the Worker applies on_error`, { timeout: 60_000 }, async () => {
    const cfg = config(
      rule("strict", "/strict/*", { limits: limit(5, "1m"), on_error: "deny" }),
      rule("lenient", "/lenient/*", { limits: limit(5, "1m"), on_error: "allow" }),
    );
    const edge = objects === "previous" ? "today" : "previous";
    const tg = await startSkew({ objects, edge, cfg, persist: tempDir(), origin: mockOrigin(), future: true });
    try {
      const direct = await tg.callObject("strict\nip=203.0.113.40", { v: 2, op: "hit", limits: [[5, 60_000]] });
      assert.equal(direct.status, 400);
      assert.deepEqual(direct.body, { v: 1, error: "unsupported call version 2 (this object speaks 1)" });
      const before = tg.logEvents().length;
      const denied = await tg.fetchVia(1, "/strict/a", { ip: "203.0.113.40" });
      assert.equal(denied.status, 503, "on_error deny");
      const allowed = await tg.fetchVia(1, "/lenient/a", { ip: "203.0.113.40" });
      assert.equal(allowed.status, 200, "on_error allow");
      const errors = (await eventsSince(tg, before, 2)).filter((e) => e.tollgate === "counter_error");
      assert.equal(errors.length, 2, JSON.stringify(errors));
      for (const e of errors) assert.match(JSON.stringify(e), /unsupported call version 2/);
      // Nothing was counted by the refused calls.
      const s = await tg.callObject("lenient\nip=203.0.113.40", { op: "status", limits: [[5, 60_000]] });
      assert.equal(s.body.windows[0].used, 0);
    } finally {
      await tg.dispose();
      tg.cleanup();
    }
  });
}

// Fields added to version 1 since release 0.1.0 (src/count/protocol.rs):
// `p=` (a rule's `penalty`), `u=` (the usage an origin reports, on a
// commit), `n=` (`concurrency`), the penalty row prefix `!{until}|`, a
// ban's reply with no binding window, and the controls registry. Today's
// config uses them; the previous build is given the same rules without them
// (its config reader refuses fields it does not know).
const NEW_FIELDS = ["penalty", "concurrency", "cost"];
const withoutNewFields = (cfg) => ({ ...cfg, rules: cfg.rules.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !NEW_FIELDS.includes(k)))) });
const NEW_RULES = config(
  rule("pen-deny", "/pd/*", { limits: limit(3, "1m"), penalty: "10m", on_error: "deny" }),
  rule("pen-allow", "/pa/*", { limits: limit(3, "1m"), penalty: "10m", on_error: "allow" }),
  rule("conc-deny", "/cd/*", { limits: limit(3, "1m"), concurrency: 2, on_error: "deny" }),
  rule("conc-allow", "/ca/*", { limits: limit(3, "1m"), concurrency: 2, on_error: "allow" }),
  rule("usage", "/u/*", { limits: limit(5, "1m"), cost: { header: "x-usage", reserve: 2, max: 4 }, count_statuses: [200], reservation_ttl: "20s", on_error: "deny" }),
  rule("api", "/api/*", { limits: limit(100, "1m") }),
);
const BOTH = { today: NEW_RULES, previous: withoutNewFields(NEW_RULES) };
const usageOrigin = () => mockOrigin(() => new Response("ok", { headers: { "x-usage": "1" } }));
const IP = "203.0.113.50";
const noServerError = (tg) => assert.ok(!/panicked|RuntimeError: unreachable/i.test(tg.logs()), "no panic");

/** Sends `path`s through edge `via`; returns their statuses. */
async function send(tg, via, paths, ip = IP) {
  const out = [];
  for (const path of paths) {
    const res = await tg.fetchVia(via, path, { ip });
    await res.arrayBuffer();
    out.push(res.status);
  }
  return out;
}
/** Sends the compact call `url` to object `name`, as the Worker does; reads the answer. */
async function rawCall(tg, name, url) {
  const ns = await tg.mf.getDurableObjectNamespace("LIMITER", "tollgate");
  return readAnswer(await ns.get(ns.idFromName(name)).answer(url));
}
/** Every op that carries each new field, in its compact form. */
const NEW_FIELD_CALLS = [
  ...["hit", "check", "status"].map((op) => `https://limiter/v1/${op}?l=3x60000&p=600000`),
  "https://limiter/v1/reserve?l=3x60000&h=10000&p=600000",
  "https://limiter/v1/lease?l=3x60000&h=1000&w=2&p=600000",
  "https://limiter/v1/reserve?l=3x60000&h=10000&n=2",
  "https://limiter/v1/check?l=3x60000&n=2",
  "https://limiter/v1/commit?l=5x60000&c=2&r=1&u=1",
];
const errorsOf = (tg, rule) => tg.logEvents().filter((e) => e.tollgate === "counter_error" && e.rule === rule);

// (a) Today's Worker, the previous object: every call carrying a new field
// is refused (400, versioned), and refused calls change nothing. The
// Worker reads the refusal as an older object's (src/count/older.rs,
// issue 35) and sends what it takes instead: a penalty rule's call again
// without `p=` (the limit counted exactly, whatever on_error; the penalty
// lost), a usage commit as a `record` of the units used and a `release`
// (charged exactly); a concurrency rule, whose slot no older op holds, is
// refused (503) even with on_error allow. Each fallback is logged
// (counter_error, decision older_form; a refused slot: deny).
test(`skew: today's Worker with new fields (p=, n=, u=) calls the ${PREVIOUS} object: versioned refusal, an older form or a refusal, never over the limit`, { timeout: 60_000 }, async () => {
  const tg = await startSkew({ objects: "previous", edge: "today", cfg: BOTH, persist: tempDir(), origin: usageOrigin() });
  try {
    for (const url of NEW_FIELD_CALLS) {
      const refused = await rawCall(tg, "direct\nip=203.0.113.59", url);
      assert.equal(refused.status, 400, `the previous object refuses ${url}: ${JSON.stringify(refused)}`);
      assert.equal(refused.body.v, 1, `a versioned error: ${JSON.stringify(refused.body)}`);
      assert.match(refused.body.error, /unknown field `[pnu]`/, url);
    }
    const untouched = await tg.callObject("direct\nip=203.0.113.59", { op: "status", limits: [[3, 60_000]] });
    assert.deepEqual([untouched.body.windows[0].used, untouched.body.held ?? 0], [0, 0], "the refused calls changed nothing");
    assert.deepEqual(await send(tg, 1, ["/pd/1", "/pd/2", "/pd/3", "/pd/4"]), [200, 200, 200, 429], "penalty, on_error deny: the limit holds");
    assert.deepEqual(await send(tg, 1, ["/pa/1", "/pa/2", "/pa/3", "/pa/4"]), [200, 200, 200, 429], "penalty, on_error allow: the limit holds");
    assert.deepEqual(await send(tg, 1, ["/cd/1", "/cd/2"]), [503, 503], "concurrency, on_error deny");
    assert.deepEqual(await send(tg, 1, ["/ca/1", "/ca/2"]), [503, 503], "concurrency, on_error allow: no older object holds a slot");
    // The admin status of a penalty rule (p= on a status call).
    const { path, init } = admin(`/.tollgate/status?rule=pen-deny&ip=${IP}`);
    const status = await tg.fetchVia(1, path, init);
    const statusBody = await status.text();
    console.log(`today's admin status of a penalty rule, ${PREVIOUS} object: ${status.status} ${statusBody}`);
    assert.equal(status.status, 503, `refused, not a 500: ${statusBody}`);
    assert.match(statusBody, /unknown field `p`/, "the refusal named");
    // Usage: the reserve (no new field) is taken, the commit's u= refused,
    // then the 1 unit the origin reported recorded and the reservation
    // released: 1 per request, as today's object counts it (the fifth's
    // reserve of 2 no longer fits beside the 4 used: 5 per minute).
    assert.deepEqual(await send(tg, 1, ["/u/1", "/u/2", "/u/3", "/u/4", "/u/5", "/u/6"]), [200, 200, 200, 200, 429, 429], "usage: 1 unit each");
    await tg.settled();
    for (const [name, decision] of [["pen-deny", "older_form"], ["pen-allow", "older_form"], ["conc-deny", "deny"], ["conc-allow", "deny"], ["usage", "older_form"]]) {
      const errors = errorsOf(tg, name);
      assert.ok(errors.length >= 1, `${name}: a counter_error`);
      for (const e of errors) {
        assert.equal(e.decision, decision, `${name}: ${JSON.stringify(e)}`);
        assert.match(JSON.stringify(e), /unknown field/, `${name}: the refusal named`);
      }
    }
    assert.deepEqual(tg.logEvents().filter((e) => e.decision === "not_recorded"), [], "every settlement recorded");
    for (const [name, l, used] of [["pen-deny", [3, 60_000], 3], ["pen-allow", [3, 60_000], 3], ["conc-deny", [3, 60_000], 0], ["conc-allow", [3, 60_000], 0], ["usage", [5, 60_000], 4]]) {
      const s = await tg.callObject(`${name}\nip=${IP}`, { op: "status", limits: [l] });
      assert.equal(s.body.windows[0].used, used, `${name}: counted ${used}: ${JSON.stringify(s.body)}`);
      assert.equal(s.body.held ?? 0, 0, `${name}: nothing left held: ${JSON.stringify(s.body)}`);
    }
    noServerError(tg);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// Issue 35, break 1: a usage rule in front of the previous release's
// objects charged nothing (the reserve taken, the commit's u= refused, the
// reservation lapsing at reservation_ttl): one call every 250 ms served 15
// calls of 3,000 tokens in 20 s against 10,000 a day (reservation_ttl 4 s
// with a shorter timeout; 5 s here, the least above twice the default
// timeout). Now the units used are recorded: 3 calls (9,000) are served,
// every later one refused, for two reservation_ttl. And an origin reporting more than the
// reserve is charged all of it, as today's object charges it.
test(`skew: a usage rule in front of ${PREVIOUS} objects never serves more than its budget`, { timeout: 120_000 }, async () => {
  const tokens = (reserve, max) => ({ cost: { header: "x-tokens", reserve, max }, count_statuses: [200], reservation_ttl: "5s", on_error: "deny" });
  const usage = config(
    rule("llm", "/llm/*", { limits: limit(10_000, "1d"), ...tokens(3_000, 3_000) }),
    rule("over", "/over/*", { limits: limit(10, "1d"), ...tokens(2, 10) }),
  );
  const origin = mockOrigin((request) => new Response("ok", { headers: { "x-tokens": new URL(request.url).pathname.startsWith("/over/") ? "4" : "3000" } }));
  const tg = await startSkew({ objects: "previous", edge: "today", cfg: { today: usage, previous: withoutNewFields(usage) }, persist: tempDir(), origin });
  try {
    const started = Date.now();
    const seen = [];
    // 40 calls, one every 250 ms at least: two reservation_ttl whatever
    // the load (a lapsed reservation would free its 3,000).
    for (let i = 0; i < 40; i++) {
      const [status] = await send(tg, 1, [`/llm/${i}`]);
      seen.push(status);
      await sleep(250);
    }
    const elapsed = Date.now() - started;
    const served = seen.filter((s) => s === 200).length;
    console.log(`usage against ${PREVIOUS} objects: ${served} served (${served * 3_000} tokens) of ${seen.length} in ${elapsed} ms: ${seen}`);
    assert.ok(elapsed >= 10_000, `two reservation_ttl: ${elapsed} ms`);
    assert.deepEqual(seen.slice(0, 3), [200, 200, 200], "the budget's 3 calls");
    assert.equal(served * 3_000, 9_000, `served within the 10,000 budget: ${seen}`);
    assert.ok(seen.slice(3).every((s) => s === 429), `then refused, never 503 or served: ${seen}`);
    await tg.settled();
    const llm = await tg.callObject(`llm\nip=${IP}`, { op: "status", limits: [[10_000, 86_400_000]] });
    assert.deepEqual([llm.body.windows[0].used, llm.body.held ?? 0], [9_000, 0], `charged what was served: ${JSON.stringify(llm.body)}`);
    // Reserve 2, the origin reporting 4: charged 4 each (2, 4 and 8 fit the
    // reserve's 2 under 10; the fourth does not), as today's object does.
    assert.deepEqual(await send(tg, 1, ["/over/1", "/over/2", "/over/3", "/over/4"]), [200, 200, 200, 429], "charged the units reported");
    await tg.settled();
    const over = await tg.callObject(`over\nip=${IP}`, { op: "status", limits: [[10, 86_400_000]] });
    assert.deepEqual([over.body.windows[0].used, over.body.held ?? 0], [12, 0], `the units reported, not the reserve: ${JSON.stringify(over.body)}`);
    assert.deepEqual(tg.logEvents().filter((e) => e.decision === "not_recorded"), [], "every commit recorded");
    noServerError(tg);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// (b) The previous Worker, today's object, the same rules without the new
// fields: counted exactly as before (every call is one the previous build
// sent, answered as it was).
test(`skew: the ${PREVIOUS} Worker calls today's object with the same rules minus the new fields: counted as before`, { timeout: 60_000 }, async () => {
  const tg = await startSkew({ objects: "today", edge: "previous", cfg: BOTH, persist: tempDir(), origin: usageOrigin() });
  try {
    assert.deepEqual(await send(tg, 1, ["/pd/1", "/pd/2", "/pd/3", "/pd/4", "/pd/5"]), [200, 200, 200, 429, 429], "penalty rule");
    assert.deepEqual(await send(tg, 1, ["/cd/1", "/cd/2", "/cd/3", "/cd/4"]), [200, 200, 200, 429], "concurrency rule");
    assert.deepEqual(await send(tg, 1, ["/u/1", "/u/2", "/u/3", "/u/4", "/u/5", "/u/6"]), [200, 200, 200, 200, 200, 429], "usage rule");
    await tg.settled();
    const errors = tg.logEvents().filter((e) => ["counter_error", "edge_error", "config_error"].includes(e.tollgate));
    assert.deepEqual(errors, [], "no counter, edge or config error");
    for (const [name, l, used] of [["pen-deny", [3, 60_000], 3], ["conc-deny", [3, 60_000], 3], ["usage", [5, 60_000], 5]]) {
      const s = await tg.callObject(`${name}\nip=${IP}`, { op: "status", limits: [l] });
      assert.equal(s.body.windows[0].used, used, `${name}: no count lost, none added`);
      assert.equal(s.body.held ?? 0, 0, `${name}: nothing left held`);
    }
    noServerError(tg);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// (c) A row today's object wrote with a penalty in force (the `!{until}|`
// prefix), read by the previous object: its Worker (no penalty in its
// config) must not admit past the limit, and today's Worker's `p=` call is
// refused (on_error deny: 503). Rolled forward again, the penalty is still
// in force. Objects today → previous → today.
test(`skew: a penalty row written by today's object, read by the ${PREVIOUS} object, never admits past the limit`, { timeout: 90_000 }, async () => {
  const persist = tempDir();
  const origin = usageOrigin();
  const seen = [];
  try {
    let tg = await startSkew({ objects: "today", edge: "previous", cfg: BOTH, persist, origin });
    try {
      seen.push(...(await send(tg, 0, ["/pd/1", "/pd/2", "/pd/3", "/pd/4"])));
      assert.deepEqual(seen, [200, 200, 200, 429], "today: the limit, then the penalty starts");
      assert.deepEqual(await send(tg, 0, ["/pa/1", "/pa/2", "/pa/3", "/pa/4"]), [200, 200, 200, 429], "on_error allow: the same");
      const s = await tg.callObject(`pen-deny\nip=${IP}`, { op: "status", limits: [[3, 60_000]], penalty_ms: 600_000 });
      assert.ok(s.body.penalty_until_ms > Date.now() + 60_000, `a penalty in force: ${JSON.stringify(s.body)}`);
    } finally {
      await tg.dispose();
    }
    tg = await startSkew({ objects: "previous", edge: "today", cfg: BOTH, persist, origin });
    try {
      const old = await send(tg, 0, ["/pd/5", "/pd/6"]);
      seen.push(...old);
      console.log(`the ${PREVIOUS} Worker and object on a penalty row: ${old}`);
      for (const status of old) assert.ok([429, 503].includes(status), `the ${PREVIOUS} object on a penalty row: blocked or refused, got ${status}`);
      const direct = await tg.callObject(`pen-deny\nip=${IP}`, { op: "hit", limits: [[3, 60_000]] });
      console.log(`the ${PREVIOUS} object's answer to a hit on a penalty row: ${JSON.stringify(direct)}`);
      // What happens: the previous object refuses the row as corrupt (an
      // error answer, `{"v":1,"error":...}`), neither admitting nor
      // rewriting it; its Worker applies on_error.
      assert.ok(direct.status >= 400 && direct.body.v === 1, `refused, versioned: ${JSON.stringify(direct)}`);
      assert.match(direct.body.error, /corrupt/);
      await tg.settled();
      const logged = errorsOf(tg, "pen-deny");
      assert.ok(logged.length >= 1 && logged.every((e) => e.decision === "deny"), `the ${PREVIOUS} Worker logs the refusal: ${JSON.stringify(logged)}`);
      // A rule failing open (on_error allow) forwards while the previous
      // object cannot read its row, as for any counter failure; not counted.
      assert.deepEqual(await send(tg, 0, ["/pa/5"]), [200], "on_error allow: forwarded (the rule's own choice)");
      const today = await send(tg, 1, ["/pd/7"]);
      seen.push(...today);
      assert.deepEqual(today, [503], "today's Worker (p=) on the previous object: on_error deny");
      await tg.settled();
      noServerError(tg);
    } finally {
      await tg.dispose();
    }
    tg = await startSkew({ objects: "today", edge: "previous", cfg: BOTH, persist, origin });
    try {
      const back = await send(tg, 0, ["/pd/8"]);
      seen.push(...back);
      assert.deepEqual(back, [429], "rolled forward: the penalty still in force");
      const res = await tg.fetchVia(0, "/pd/9", { ip: IP });
      await res.arrayBuffer();
      seen.push(res.status);
      assert.equal(res.status, 429);
      assert.ok(Number(res.headers.get("retry-after")) > 60, `the penalty's time left: ${res.headers.get("retry-after")}`);
      const prev = await send(tg, 1, ["/pd/10"]);
      seen.push(...prev);
      assert.deepEqual(prev, [429], `the ${PREVIOUS} Worker on the penalty row`);
      for (const name of ["pen-deny", "pen-allow"]) {
        const s = await tg.callObject(`${name}\nip=${IP}`, { op: "status", limits: [[3, 60_000]], penalty_ms: 600_000 });
        assert.equal(s.body.windows[0].used, 3, `${name}: no count lost, none added (the row was not rewritten)`);
        assert.ok(s.body.penalty_until_ms > Date.now() + 60_000, `${name}: the penalty still in force`);
      }
      assert.deepEqual(await send(tg, 0, ["/pa/6"]), [429], "on_error allow: blocked again once read");
      noServerError(tg);
    } finally {
      await tg.dispose();
    }
    assert.equal(seen.filter((x) => x === 200).length, 3, `admitted exactly the limit: ${seen}`);
    assert.ok(!seen.includes(500), `no 500: ${seen}`);
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
});

// (d) A ban through today's admin API with the previous object behind it:
// the ban is set in the key's object and applies; the registry entry goes
// to the registry's own class (issue 36), which runs today's code from the
// deploy that creates it, and is listed. Its one-time handover from the
// previous Limiter object is refused (400: that build has no registry) and
// leaves nothing to merge, never a 500 or a registry_error. And a ban set
// in today's object (its reply binds no window, `-`) still blocks through
// the previous Worker.
test(`skew: a ban through today's admin API with the ${PREVIOUS} object behind it applies and is listed by today's registry`, { timeout: 60_000 }, async () => {
  const tg = await startSkew({ objects: "previous", edge: "today", cfg: BOTH, persist: tempDir(), origin: usageOrigin() });
  try {
    const { path, init } = admin(`/.tollgate/ban?rule=api&ip=${IP}&for=1h&reason=skew`, "POST");
    const res = await tg.fetchVia(1, path, init);
    const body = await res.text();
    assert.equal(res.status, 200, `the ban is set: ${body}`);
    await tg.settled();
    const errors = tg.logEvents().filter((e) => ["registry_error", "edge_error"].includes(e.tollgate));
    assert.deepEqual(errors, [], "the registry took the entry");
    const listing = await tg.fetchVia(1, "/.tollgate/controls", admin("").init);
    const listed = JSON.parse(await listing.text());
    assert.deepEqual(listed.controls.map((c) => [c.rule, c.kind, c.reason, c.checked]), [["api", "ban", "skew", true]], JSON.stringify(listed));
    assert.deepEqual(await send(tg, 1, ["/api/a", "/api/b"]), [429, 429], "today's Worker: banned");
    assert.deepEqual(await send(tg, 0, ["/api/a", "/api/b"]), [429, 429], `the ${PREVIOUS} Worker: banned`);
    assert.deepEqual(await send(tg, 1, ["/api/a"], "203.0.113.51"), [200], "another key: not banned");
    noServerError(tg);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// (e) Registry rows kept in a Limiter object, as releases before the split
// kept them (one `registry` table in the Limiter named
// `tollgate:controls-registry`), planted through a stand-in class that
// shares the Limiter's storage (the same unique key), then read by today's
// build: the Registry takes them over at its first call (the live entry
// listed with its reason, the ended one not; the console's last sign-out
// kept), and the old object keeps its copy for a rollback while refusing
// every other registry call, as an older Worker would send it.
const REGISTRY_OBJECT = "tollgate:controls-registry";
const PLANT = `
import { DurableObject } from "cloudflare:workers";
export class Plant extends DurableObject {
  async fetch(request) {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE registry (id TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL, until_ms INTEGER, set_ms INTEGER NOT NULL, PRIMARY KEY (id, kind))");
    for (const r of await request.json()) sql.exec("INSERT INTO registry VALUES (?, ?, ?, ?, ?)", r.id, r.kind, r.value, r.until_ms, r.set_ms);
    return new Response([...sql.exec("SELECT count(*) AS n FROM registry")][0].n.toString());
  }
}
export default { fetch: (request, env) => env.PLANT.get(env.PLANT.idFromName("${REGISTRY_OBJECT}")).fetch(request) };
`;
/** An entry's registry line (src/count/registry.rs, Entry::encode). */
const entryLine = ({ id, kind, rule: ruleName, keyHash, until, reason, by, set }) =>
  [id.replaceAll("%", "%25").replaceAll("\n", "%0A"), kind, ruleName, keyHash, until ?? "-", "", reason, by, set].join("\t");

test("skew: registry rows a Limiter kept before the split are moved into the Registry class; the old object keeps them, refuses registry writes", { timeout: 60_000 }, async () => {
  const persist = tempDir();
  const now = Date.now();
  const live = { id: `api\nip=${IP}`, kind: "ban", rule: "api", keyHash: "0123456789abcdef", until: now + 3_600_000, reason: "legacy reason", by: "console", set: now - 2_000 };
  const ended = { ...live, id: "api\nip=203.0.113.61", keyHash: "fedcba9876543210", until: now - 1, reason: "ended" };
  const signedOut = now - 1_000;
  const rows = [
    ...[live, ended].map((e) => ({ id: e.id, kind: e.kind, value: entryLine(e), until_ms: e.until, set_ms: e.set })),
    { id: "console", kind: "signout", value: String(signedOut), until_ms: signedOut + 3_600_000, set_ms: signedOut },
  ];
  const plant = new Miniflare({
    workers: [{ name: "plant", modules: true, script: PLANT, compatibilityDate: COMPATIBILITY_DATE, durableObjects: { PLANT: { className: "Plant", useSQLite: true, unsafeUniqueKey: "tollgate-Limiter" } } }],
    durableObjectsPersist: persist,
  });
  assert.equal(await (await plant.dispatchFetch("http://plant/", { method: "POST", body: JSON.stringify(rows) })).text(), "3");
  await plant.dispose();

  const tg = await startTollgate({ config: NEW_RULES, persist, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN }, origin: usageOrigin() });
  try {
    const post = async (binding, name, path, body) => {
      const ns = await tg.mf.getDurableObjectNamespace(binding, "tollgate");
      const res = await ns.get(ns.idFromName(name)).fetch(`https://limiter${path}`, { method: "POST", body });
      return { status: res.status, text: await res.text() };
    };
    // The ban itself is the key's object's (the truth the listing is checked against).
    assert.equal((await post("LIMITER", live.id, "/v1/control", `ban ${live.until}`)).status, 200);
    const listing = await tg.fetch("/.tollgate/controls", admin("").init);
    const listed = JSON.parse(await listing.text());
    assert.deepEqual(listed.controls.map((c) => [c.rule, c.kind, c.key_hash, c.reason, c.by, c.checked]), [["api", "ban", live.keyHash, "legacy reason", "console", true]], JSON.stringify(listed));
    assert.deepEqual(await post("TOLLGATE_REGISTRY", REGISTRY_OBJECT, "/v1/registry", "signedout"), { status: 200, text: String(signedOut) }, "the sign-out moved");
    const kept = await post("LIMITER", REGISTRY_OBJECT, "/v1/registry", "handover");
    assert.equal(kept.status, 200);
    assert.ok(kept.text.includes("legacy reason") && kept.text.includes(`signout\t${signedOut}\t`) && !kept.text.includes("ended"), kept.text);
    for (const older of ["list", "signedout", `signout\t${now}\t1000`]) {
      const refused = await post("LIMITER", REGISTRY_OBJECT, "/v1/registry", older);
      assert.equal(refused.status, 400, `an older Worker's ${older}: ${refused.text}`);
    }
    assert.equal((await tg.fetch("/api/x", { ip: IP })).status, 429, "banned");
    noServerError(tg);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// (f) The deploy's first minutes: the Limiter object that was the registry
// still runs the release before the split (which kept the registry in it),
// stood in for here by a class that answers its registry calls as that
// code did. The Registry's handover is refused (400); it reads that object
// with `list` and `signedout`, merges them, sends a new sign-out there too
// (that release's Workers read it there), and asks again at its next call.
const PRE_SPLIT = `
import { DurableObject } from "cloudflare:workers";
const seen = [];
export class PreSplit extends DurableObject {
  async fetch(request) {
    const body = await request.text();
    seen.push(body.split("\\t")[0]);
    if (body === "list") return new Response(globalThis.LISTING);
    if (body === "signedout") return new Response(globalThis.SIGNED_OUT);
    if (body.startsWith("signout\\t")) return new Response("");
    return new Response(JSON.stringify({ v: 1, error: "malformed registry call" }), { status: 400 });
  }
}
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/set") {
      globalThis.LISTING = url.searchParams.get("listing");
      globalThis.SIGNED_OUT = url.searchParams.get("signed_out");
    }
    return new Response(JSON.stringify(seen));
  },
};
`;
test("skew: a Limiter registry still on the code before the split is read with its own calls and merged, a sign-out sent there too", { timeout: 60_000 }, async () => {
  const now = Date.now();
  const live = { id: `api\nip=${IP}`, kind: "ban", rule: "api", keyHash: "00112233aabbccdd", until: now + 3_600_000, reason: "pre-split reason", by: "api", set: now - 5_000 };
  const signedOut = now - 3_000;
  const own = Object.fromEntries(Object.entries(shippedObjects()).filter(([name]) => name !== "LIMITER"));
  const elsewhere = Object.fromEntries(Object.entries(shippedObjects("classes")).filter(([name]) => name !== "LIMITER"));
  const worker = (name) => ({ name, modules: true, compatibilityDate: COMPATIBILITY_DATE });
  const tg = await startTollgate({
    config: NEW_RULES,
    vars: { TOLLGATE_ADMIN_TOKEN: TOKEN },
    origin: usageOrigin(),
    workerOptions: { durableObjects: { LIMITER: { className: "Limiter", useSQLite: true }, ...elsewhere } },
    extraWorkers: [
      { ...worker("presplit"), script: PRE_SPLIT, durableObjects: { PRE: { className: "PreSplit", useSQLite: true } } },
      {
        ...worker("classes"),
        scriptPath: BUILDS.today.scriptPath,
        modulesRoot: BUILDS.today.modulesRoot,
        modulesRules: [
          { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
          { type: "CompiledWasm", include: ["**/*.wasm"] },
        ],
        bindings: { TOLLGATE: NEW_RULES },
        durableObjects: { LIMITER: { className: "PreSplit", scriptName: "presplit" }, ...own },
      },
    ],
  });
  try {
    const presplit = await tg.mf.getWorker("presplit");
    const query = new URLSearchParams({ listing: entryLine(live), signed_out: String(signedOut) });
    await (await presplit.fetch(`http://presplit/set?${query}`)).text();
    const ns = await tg.mf.getDurableObjectNamespace("LIMITER", "tollgate");
    const control = await ns.get(ns.idFromName(live.id)).fetch("https://limiter/v1/control", { method: "POST", body: `ban ${live.until}` });
    assert.equal(control.status, 200, await control.text());
    const listed = JSON.parse(await (await tg.fetch("/.tollgate/controls", admin("").init)).text());
    assert.deepEqual(listed.controls.map((c) => [c.key_hash, c.reason, c.by, c.checked]), [[live.keyHash, "pre-split reason", "api", true]], JSON.stringify(listed));
    const registry = await tg.mf.getDurableObjectNamespace("TOLLGATE_REGISTRY", "classes");
    const ask = async (body) => (await registry.get(registry.idFromName(REGISTRY_OBJECT)).fetch("https://limiter/v1/registry", { method: "POST", body })).text();
    assert.equal(await ask("signedout"), String(signedOut), "the older sign-out merged");
    assert.equal(await ask(`signout\t${now}\t3600000`), "");
    assert.equal(await ask("signedout"), String(now), "the later sign-out wins");
    const seen = JSON.parse(await (await presplit.fetch("http://presplit/")).text());
    assert.deepEqual(seen.filter((s) => s === "handover").length, 4, `asked again at every call until moved: ${seen}`);
    assert.ok(seen.includes("signout"), `the sign-out sent to the older registry too: ${seen}`);
    noServerError(tg);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

test(`skew: a ban reply from today's object (no binding window) still blocks through the ${PREVIOUS} Worker`, { timeout: 60_000 }, async () => {
  const tg = await startSkew({ objects: "today", edge: "previous", cfg: BOTH, persist: tempDir(), origin: usageOrigin() });
  try {
    const { path, init } = admin(`/.tollgate/ban?rule=api&ip=${IP}&for=1h`, "POST");
    const res = await tg.fetchVia(0, path, init);
    assert.equal(res.status, 200, await res.text());
    const direct = await tg.callObject(`api\nip=${IP}`, { op: "hit", limits: [[100, 60_000]] });
    assert.equal(direct.body.allowed, false);
    assert.equal(direct.body.binding_window, null, `a ban binds no window: ${JSON.stringify(direct.body)}`);
    assert.deepEqual(await send(tg, 1, ["/api/a", "/api/b"]), [429, 429], `the ${PREVIOUS} Worker: banned`);
    assert.deepEqual(await send(tg, 0, ["/api/a"]), [429], "today's Worker: banned");
    assert.deepEqual(await send(tg, 1, ["/api/a"], "203.0.113.51"), [200], "another key: not banned");
    await tg.settled();
    const errors = tg.logEvents().filter((e) => ["counter_error", "edge_error", "config_error", "registry_error"].includes(e.tollgate));
    assert.deepEqual(errors, [], "no error logged");
    noServerError(tg);
  } finally {
    await tg.dispose();
    tg.cleanup();
  }
});

// (c, continued) The penalty row's end under the previous object. What
// happens: it refuses the row (on_error deny: 503) until the alarm today's
// object set at the count's expiry (the window's end) fires; the previous
// build's alarm, which cannot read the prefix, deletes the row, penalty and
// all. From then it counts from zero, exactly: the limit, then blocked. So
// under the previous object the penalty is dropped at the window's end (the
// previous build has no penalties), but the limit itself is never exceeded.
// Limit 2 per 15 s (the restart between the phases takes far less, even at
// load 8), penalty 1 min; the wait is a bounded poll (a refused call counts
// nothing).
test(`skew: a penalty row under the ${PREVIOUS} object: refused until its count expires, then counted from zero, exactly`, { timeout: 90_000 }, async () => {
  const short = config(rule("pd", "/pd/*", { limits: limit(2, "15s"), penalty: "1m", on_error: "deny" }));
  const cfg = { today: short, previous: withoutNewFields(short) };
  const persist = tempDir();
  const origin = mockOrigin();
  try {
    let tg = await startSkew({ objects: "today", edge: "previous", cfg, persist, origin });
    try {
      assert.deepEqual(await send(tg, 0, ["/pd/1", "/pd/2", "/pd/3"]), [200, 200, 429], "today: the limit, then the penalty");
    } finally {
      await tg.dispose();
    }
    tg = await startSkew({ objects: "previous", edge: "today", cfg, persist, origin });
    try {
      const during = [];
      let status = 503;
      for (let i = 0; i < 120 && status === 503; i++) {
        [status] = await send(tg, 0, [`/pd/p${i}`]);
        during.push(status);
        if (status === 503) await sleep(500);
      }
      console.log(`the ${PREVIOUS} object on a penalty row, polled: ${during}`);
      assert.equal(during[0], 503, `refused while the penalty row is there: ${during}`);
      assert.ok(during.slice(0, -1).every((s) => s === 503), `only refusals before: ${during}`);
      // The first call past the refusals was counted: the limit's second, then blocked.
      assert.deepEqual([status, ...(await send(tg, 0, ["/pd/a", "/pd/b"]))], [200, 200, 429], `counted from zero, exactly: ${during}`);
      await tg.settled();
      noServerError(tg);
    } finally {
      await tg.dispose();
    }
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
});

// (g) Calendar windows (issue 53) against the 0.1.0 object, which knows
// only rolling windows: today's call `3xday@Asia/Tokyo` is refused
// (versioned 400) and changes nothing; today's Worker applies the rule's
// on_error (deny: 503; allow: served, as for any refusal) and never counts
// past the limit; a calendar override through today's admin API is not
// set (the old object refuses the control), and no registry entry is left
// claiming it. The 0.1.0 Worker, given the rule as its rolling `1d`, counts
// on the same object exactly. Rolled forward, today's object counts the
// calendar day from the hits the old one logged.
const calendarRules = (window, extra = {}) =>
  config(
    rule("cal-deny", "/cd/*", { limits: [{ requests: 3, window, ...extra }], on_error: "deny" }),
    rule("cal-allow", "/ca/*", { limits: [{ requests: 3, window, ...extra }], on_error: "allow" }),
  );
const CALENDAR = { today: calendarRules("day", { time_zone: "Asia/Tokyo" }), previous: calendarRules("1d") };

test(`skew: a calendar rule in front of ${PREVIOUS} objects: refused, versioned, on_error applied, never over the limit; a calendar override is not set`, { timeout: 90_000 }, async () => {
  const persist = tempDir();
  const tg = await startSkew({ objects: "previous", edge: "today", cfg: CALENDAR, persist, origin: mockOrigin() });
  try {
    const refused = await rawCall(tg, "direct\nip=203.0.113.70", "https://limiter/v1/hit?l=3xday@Asia/Tokyo");
    assert.equal(refused.status, 400, JSON.stringify(refused));
    assert.equal(refused.body.v, 1, `a versioned error: ${JSON.stringify(refused.body)}`);
    const untouched = await tg.callObject("direct\nip=203.0.113.70", { op: "status", limits: [[3, 86_400_000]] });
    assert.equal(untouched.body.windows[0].used, 0, "the refused call counted nothing");

    assert.deepEqual(await send(tg, 1, ["/cd/1", "/cd/2"]), [503, 503], "on_error deny");
    assert.deepEqual(await send(tg, 1, ["/ca/1", "/ca/2"]), [200, 200], "on_error allow: served uncounted, as the rule says");
    for (const name of ["cal-deny", "cal-allow"]) {
      const errors = errorsOf(tg, name);
      assert.ok(errors.length >= 1, `${name}: a counter_error`);
      for (const e of errors) assert.equal(e.decision, name === "cal-deny" ? "deny" : "allow", JSON.stringify(e));
    }
    // The previous Worker, its rolling 1d on the same objects: exact.
    assert.deepEqual(await send(tg, 0, ["/cd/1", "/cd/2", "/cd/3", "/cd/4"]), [200, 200, 200, 429], `the ${PREVIOUS} Worker counts its rolling day`);

    const { path, init } = admin(`/.tollgate/override?rule=cal-deny&ip=${IP}&limit=5/day`, "PUT");
    const set = await tg.fetchVia(1, path, init);
    const setBody = await set.text();
    console.log(`a calendar override through today's admin API, ${PREVIOUS} object: ${set.status} ${setBody}`);
    assert.ok(set.status >= 400 && set.status !== 500, `refused, not a 500: ${set.status} ${setBody}`);
    await tg.settled();
    const listing = await tg.fetchVia(1, "/.tollgate/controls", admin("").init);
    assert.deepEqual(JSON.parse(await listing.text()).controls, [], "no registry entry claims the override");
    assert.deepEqual(await send(tg, 0, ["/cd/5"]), [429], "the limit the old object holds is unchanged");
    noServerError(tg);
  } finally {
    await tg.dispose();
  }
  // Rolled forward: today's objects read the old object's log for the calendar day.
  const forward = await startSkew({ objects: "today", edge: "previous", cfg: CALENDAR, persist, origin: mockOrigin() });
  try {
    assert.deepEqual(await send(forward, 0, ["/cd/6"]), [429], "today's object: the 3 the old one logged count in today's Tokyo day (unless Tokyo's midnight passed)");
    const status = await forward.fetch(`/.tollgate/status?rule=cal-deny&ip=${IP}`, admin("").init);
    const body = await status.json();
    assert.deepEqual(body.limits, [[3, "day@Asia/Tokyo"]]);
    assert.equal(body.windows[0].used, 3, JSON.stringify(body));
    noServerError(forward);
  } finally {
    await forward.dispose();
    forward.cleanup();
  }
});
