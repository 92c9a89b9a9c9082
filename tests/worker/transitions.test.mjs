// Config changes on live state (issue 30): each transition `tollgate diff`
// reports (src/tools/diff.rs), on real objects. A case counts requests
// under the OLD config, restarts tollgate on the same persistence folder
// with the NEW config (a deploy), and checks what the counts already kept
// do to the next requests. The algorithm switches, both ways, must never
// admit more than the stricter reading of the row allows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTollgate, tempDir } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";

const V4 = "203.0.113.50";
const V6 = "2001:db8:0:1::5";
const api = (fields = {}) => rule("api", "/api/*", { limits: limit(5, "1m"), ...fields });
const times = (n, ip = V4, headers = {}) => Array.from({ length: n }, () => ({ ip, headers }));

/**
 * name, old and new rules, the requests under OLD (every one must be
 * answered its `status`, 200 unless given), and the requests under NEW with
 * the statuses expected (null: any, bounded by `admitsAtMost`).
 */
const CASES = [
  {
    name: "sliding_log -> gcra: a full log is read as full (never as empty)",
    old: api(),
    new: api({ algorithm: "gcra" }),
    before: times(5),
    after: [[{ ip: V4 }, 429]],
  },
  {
    name: "gcra -> sliding_log: a full GCRA row is read as full",
    old: api({ algorithm: "gcra" }),
    new: api(),
    before: times(5),
    after: [[{ ip: V4 }, 429]],
  },
  {
    // GCRA drains linearly what the log frees at once: to admit nothing the
    // log would refuse at any later instant, it may under-admit now (up to
    // one window more; src/count/switch.rs).
    name: "sliding_log -> gcra, 3 of 5 used: at most the log's remaining 2 (the stricter reading)",
    old: api(),
    new: api({ algorithm: "gcra" }),
    before: times(3),
    after: [[{ ip: V4 }, null], [{ ip: V4 }, null], [{ ip: V4 }, 429], [{ ip: V4 }, 429]],
    admitsAtMost: 2,
  },
  {
    name: "gcra -> sliding_log, half used: no more than GCRA's remaining 2",
    old: api({ algorithm: "gcra" }),
    new: api(),
    before: times(3),
    after: [[{ ip: V4 }, 200], [{ ip: V4 }, 200], [{ ip: V4 }, 429]],
  },
  {
    name: "a limit tightens (5 -> 3): a key already over it is blocked at once",
    old: api(),
    new: api({ limits: limit(3, "1m") }),
    before: times(4),
    after: [[{ ip: V4 }, 429]],
  },
  {
    name: "a gcra limit tightens (5 -> 3): the units a key owes carry over, never counted afresh",
    old: api({ algorithm: "gcra" }),
    new: api({ algorithm: "gcra", limits: limit(3, "1m") }),
    before: times(4),
    after: [[{ ip: V4 }, 429]],
  },
  {
    name: "a gcra limit loosens (3 -> 5): a blocked key gets room at once, no more than the new limit allows",
    old: api({ algorithm: "gcra", limits: limit(3, "1m") }),
    new: api({ algorithm: "gcra" }),
    before: [...times(3), { ip: V4, status: 429 }],
    after: [[{ ip: V4 }, 200], [{ ip: V4 }, 200], [{ ip: V4 }, 429]],
  },
  {
    name: "a limit loosens (3 -> 5): a blocked key gets room at once",
    old: api({ limits: limit(3, "1m") }),
    new: api(),
    before: [...times(3), { ip: V4, status: 429 }],
    after: [[{ ip: V4 }, 200], [{ ip: V4 }, 200], [{ ip: V4 }, 429]],
  },
  {
    name: "a renamed rule starts from zero",
    old: api(),
    new: api({ name: "api-v2" }),
    before: times(5),
    after: [[{ ip: V4 }, 200]],
  },
  {
    name: "a changed key starts from zero",
    old: api(),
    new: api({ key: ["ip", "header:x-tenant"] }),
    before: times(5),
    after: [[{ ip: V4, headers: { "x-tenant": "acme" } }, 200]],
  },
  {
    name: "ipv6_prefix changes: IPv6 clients start from zero, IPv4 clients carry over",
    old: api(),
    new: api(),
    top: { ipv6_prefix: 48 },
    before: [...times(5), ...times(5, V6)],
    after: [[{ ip: V6 }, 200], [{ ip: V4 }, 429]],
  },
  {
    name: "a static override appears: its limit applies to the count at once",
    old: api({ limits: limit(10, "1m") }),
    new: api({ limits: limit(10, "1m"), overrides: { [V4]: limit(2, "1m") } }),
    before: times(3),
    after: [[{ ip: V4 }, 429], [{ ip: "203.0.113.51" }, 200]],
  },
  {
    name: "a static override vanishes: the rule's limit applies to the count at once",
    old: api({ limits: limit(2, "1m"), overrides: { [V4]: limit(10, "1m") } }),
    new: api({ limits: limit(2, "1m") }),
    before: times(3),
    after: [[{ ip: V4 }, 429]],
  },
  {
    name: "two-phase counting switches on: the hits so far stay counted",
    old: api({ key: ["global"] }),
    new: api({ key: ["global"], count_statuses: [200] }),
    before: times(5),
    after: [[{ ip: V4 }, 429]],
  },
  {
    name: "two-phase counting switches off: the commits so far stay counted",
    old: api({ key: ["global"], count_statuses: [200] }),
    new: api({ key: ["global"] }),
    before: times(5),
    after: [[{ ip: V4 }, 429]],
  },
  {
    name: "leases switch on (40 per minute, lease off -> auto): the count carries over",
    old: api({ key: ["global"], limits: limit(40, "1m"), lease: "off" }),
    new: api({ key: ["global"], limits: limit(40, "1m") }),
    before: times(40),
    after: [[{ ip: V4 }, 429], [{ ip: V4 }, 429]],
  },
];

for (const c of CASES) {
  test(`config change on live counts: ${c.name}`, { timeout: 60_000 }, async () => {
    const persist = tempDir();
    const run = async (cfg, requests) => {
      const tg = await startTollgate({ config: cfg, persist });
      try {
        const got = [];
        for (const { ip, headers } of requests) {
          const res = await tg.fetch("/api/x", { ip, headers });
          await res.arrayBuffer();
          got.push(res.status);
        }
        await tg.settled();
        assert.ok(!/counter_error|panicked/.test(tg.logs()), tg.logs());
        return got;
      } finally {
        await tg.dispose();
      }
    };
    try {
      const before = await run(config(c.old), c.before);
      assert.deepEqual(before, c.before.map((r) => r.status ?? 200), "under OLD");
      const after = await run(config(c.top ?? {}, c.new), c.after.map(([r]) => r));
      assert.deepEqual(after.map((got, i) => (c.after[i][1] === null ? null : got)), c.after.map(([, status]) => status), "under NEW");
      if (c.admitsAtMost !== undefined) assert.ok(after.filter((s) => s === 200).length <= c.admitsAtMost, `${after}`);
    } finally {
      (await import("node:fs")).rmSync(persist, { recursive: true, force: true });
    }
  });
}
