// The Rust floor with its counter object in Rust: the same Worker as
// bench/workers/floor.mjs (bench/workers/rust-floor/build/index.js), its
// `COUNTER` class the Rust `FloorRustCounter` (the same rows and alarms as
// floor-counter.mjs), declared `extends DurableObject` so that `hit` is an
// RPC, as tollgate's entry does for its Limiter, and metered the same way.
// `node bench/profile.mjs --ab allowed 2 floor floor-rs` compares the two.
import { DurableObject } from "cloudflare:workers";
import { FloorRustCounter } from "./rust-floor/build/index.js";
import { isMeterRequest, meterResponse, meterState, metered } from "./meter.mjs";

export { default } from "./rust-floor/build/index.js";

export class FloorCounter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.counter = new FloorRustCounter(meterState(ctx), env);
  }

  hit() {
    return metered("calls", () => this.counter.hit());
  }

  fetch(request) {
    return isMeterRequest(request) ? meterResponse() : new Response("not found", { status: 404 });
  }

  alarm() {
    return metered("alarms", () => this.counter.alarm());
  }
}
