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
// error, and the Worker applies the rule's on_error.
//
// To cover a new kind of counting, add a case to CASES: its config and its
// three phases' requests, each with the statuses expected.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync, copyFileSync, rmSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTollgate, mockOrigin, tempDir, ROOT, COMPATIBILITY_DATE, eventsSince, sleep } from "./harness.mjs";
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
 * `future`: the second edge's calls go through FutureLimiter.
 */
function startSkew({ objects, edge, cfg, persist, origin, future = false }) {
  const vars = { TOLLGATE_ADMIN_TOKEN: TOKEN };
  const edgeWorker = {
    name: "edge-1",
    modules: true,
    ...BUILDS[edge],
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: { TOLLGATE: cfg, ...vars },
    durableObjects: { LIMITER: future ? { className: "FutureLimiter", scriptName: "future" } : { className: "Limiter", scriptName: "tollgate" } },
    outboundService: origin.outboundService,
    stripCfConnectingIp: false,
    routes: ["edge-1.example.com/*"],
  };
  const extraWorkers = [edgeWorker];
  if (future) {
    extraWorkers.push({
      name: "future",
      modules: true,
      script: FUTURE,
      compatibilityDate: COMPATIBILITY_DATE,
      durableObjects: { FUTURE: { className: "FutureLimiter" }, REAL: { className: "Limiter", scriptName: "tollgate", useSQLite: true } },
    });
  }
  return startTollgate({
    config: cfg,
    persist,
    origin,
    vars,
    scriptPath: BUILDS[objects].scriptPath,
    workerOptions: { modulesRoot: BUILDS[objects].modulesRoot },
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
