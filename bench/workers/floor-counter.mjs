// The Rust floor's counter (bench/workers/rust-floor): the least an exact
// per-key limiter stores for an allowed request, as a Durable Object that
// extends DurableObject (so the floor's call is an RPC, as tollgate's is):
// per key, one SQLite row holding the key's hits, written in place on every
// call (the table created once per instance), and one alarm per key that
// deletes it all. It decides nothing: the scenario that calls it (allowed)
// never goes over the limit. Metered like tollgate's and peer A's objects
// (bench/workers/meter.mjs).
import { DurableObject } from "cloudflare:workers";
import { isMeterRequest, meterResponse, meterState, metered } from "./meter.mjs";

export class FloorCounter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.state = meterState(ctx);
  }

  hit() {
    return metered("calls", () => {
      const sql = this.state.storage.sql;
      if (!this.ready) {
        sql.exec("CREATE TABLE IF NOT EXISTS hits (id INTEGER PRIMARY KEY CHECK (id = 0), log TEXT NOT NULL)");
        this.ready = true;
      }
      this.log = this.log === undefined ? String(Date.now()) : `${this.log},${Date.now()}`;
      sql.exec("INSERT INTO hits (id, log) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET log = excluded.log", this.log);
      if (!this.armed) {
        this.armed = true;
        this.state.storage.setAlarm(Date.now() + 60_000);
      }
      return 1;
    });
  }

  fetch(request) {
    return isMeterRequest(request) ? meterResponse() : new Response("not found", { status: 404 });
  }

  alarm() {
    return metered("alarms", () => this.state.storage.deleteAll());
  }
}
