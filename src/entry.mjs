// The deployed entry (wrangler.toml `main`): the Worker built from Rust
// (build/index.js, made by scripts/build), with its Durable Object class
// `Limiter` wrapped in one that `extends DurableObject`. workerd takes RPC
// calls only on such a class, and the Worker's call to count a request is
// an RPC (`answer`), which costs less than a fetch: no Request or Response is
// built on either side. The wrapper holds the Rust object and hands every
// method to it; nothing is decided here.
//
// An app that exports the Rust class without this wrapper still works:
// its Worker finds that the class refuses RPC and sends fetches instead.
//
// The controls registry is a class of its own (bound as TOLLGATE_REGISTRY),
// called by fetch only: exported as the Rust build makes it. The local
// metrics sink (TOLLGATE_METRICS_SINK) is written here, in JavaScript: it
// is SQL statements only, and a Rust class costs the Worker's upload Wasm
// for what local development alone uses.
import { DurableObject } from "cloudflare:workers";
import { Limiter as RustLimiter } from "../build/index.js";

export { default, Registry } from "../build/index.js";

export class Limiter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.limiter = new RustLimiter(ctx, env);
  }

  /** One count (the compact call's URL): the reply line, or `!{status} {body}`. */
  answer(url) {
    return this.limiter.answer(url);
  }

  /** Admin controls (`POST /v1/control`), JSON calls, and the fetch form of `answer`. */
  fetch(request) {
    return this.limiter.fetch(request);
  }

  /** The TTL alarm. */
  alarm(info) {
    return this.limiter.alarm(info);
  }
}

// The local sink's table, as Analytics Engine's columns (the console's
// queries, src/pipeline/console/traffic.rs, read it; the layout is
// src/pipeline/metrics.rs's). A table made by an older release gets the
// columns added since (ADDED), empty in its old rows.
const BLOBS = 11;
const blobColumns = Array.from({ length: BLOBS }, (_, i) => `blob${i + 1} TEXT`).join(", ");
const POINTS = `CREATE TABLE IF NOT EXISTS points (timestamp INTEGER NOT NULL, index1 TEXT, ${blobColumns}, double1 REAL, double2 REAL, _sample_interval INTEGER NOT NULL DEFAULT 1)`;
const ADDED = Array.from({ length: BLOBS - 6 }, (_, i) => `blob${i + 7}`);
const FIELDS = 1 + BLOBS + 2;
const INSERT = `INSERT INTO points (timestamp, index1, ${Array.from({ length: BLOBS }, (_, i) => `blob${i + 1}`).join(", ")}, double1, double2, _sample_interval) VALUES (${Array(FIELDS + 1).fill("?").join(", ")}, 1)`;
const sinkError = (status, error) => new Response(JSON.stringify({ error, v: 1 }), { status, headers: { "content-type": "application/json" } });

/**
 * The local metrics sink (a class of its own since 0.2.0):
 * one object, `tollgate:local-metrics`, keeping the points Analytics Engine
 * would, for the console's Traffic page, when TOLLGATE_LOCAL_METRICS is set
 * (scripts/dev; else 404). `POST /v1/sink` (SINK_PATH) of `write\n<points>`
 * (one a line: index, eleven blobs, two doubles, tab-separated; dated now;
 * points older than 8 days dropped) or `query\n<SQL>` (answered in the SQL
 * API's JSON format). No alarm.
 */
export class MetricsSink extends DurableObject {
  async fetch(request) {
    if (this.env.TOLLGATE_LOCAL_METRICS === undefined) return sinkError(404, "no local sink");
    if (new URL(request.url).pathname !== "/v1/sink") return sinkError(404, "not a sink path");
    const body = await request.text();
    const at = body.indexOf("\n");
    const [op, rest] = at < 0 ? [body, ""] : [body.slice(0, at), body.slice(at + 1)];
    const sql = this.ctx.storage.sql;
    try {
      sql.exec(POINTS);
      const have = new Set([...sql.exec("PRAGMA table_info(points)")].map((c) => c.name));
      for (const column of ADDED.filter((c) => !have.has(c))) sql.exec(`ALTER TABLE points ADD COLUMN ${column} TEXT`);
      if (op === "write") {
        const now = Math.floor(Date.now() / 1000);
        for (const line of rest.split("\n")) {
          const f = line.split("\t");
          if (f.length !== FIELDS) continue;
          sql.exec(INSERT, now, ...f.slice(0, FIELDS - 2), Number(f[FIELDS - 2]), Number(f[FIELDS - 1]));
        }
        sql.exec("DELETE FROM points WHERE timestamp < ?", now - 8 * 86400);
        return new Response("");
      }
      if (op === "query") {
        const data = [...sql.exec(rest)];
        return new Response(JSON.stringify({ meta: [], data, rows: data.length }));
      }
      return sinkError(400, "malformed sink call");
    } catch (e) {
      return sinkError(500, String(e));
    }
  }
}
