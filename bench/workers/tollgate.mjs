// tollgate as scripts/bench runs it: the deployed entry (src/entry.mjs over
// the release build, build/index.js and its Wasm) unchanged, its Durable
// Object class `Limiter` subclassed only to meter what it is billed for
// (bench/workers/meter.mjs): the same object, its calls, rows and alarms
// counted.
import { Limiter as Entry } from "../../src/entry.mjs";
import { Limiter as RustLimiter } from "../../build/index.js";
import { isMeterRequest, meterResponse, meterState, metered } from "./meter.mjs";

export { default } from "../../src/entry.mjs";

export class Limiter extends Entry {
  constructor(ctx, env) {
    super(ctx, env);
    // The same Rust object over the metered view of its state (the base
    // class needs the real DurableObjectState, so the swap comes after).
    this.limiter = new RustLimiter(meterState(ctx), env);
  }

  answer(url) {
    return metered("calls", () => super.answer(url));
  }

  fetch(request) {
    if (isMeterRequest(request)) return meterResponse();
    return metered("calls", () => super.fetch(request));
  }

  alarm(info) {
    return metered("alarms", () => super.alarm(info));
  }
}
