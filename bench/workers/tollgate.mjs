// tollgate as scripts/bench runs it: the release build (build/index.js and
// its Wasm) unchanged, its Worker entry re-exported as is, and its Durable
// Object class `Limiter` wrapped by the billing meter (bench/workers/meter.mjs):
// the same object, its calls, rows and alarms counted.
import { Limiter as Tollgate } from "../../build/index.js";
import { isMeterRequest, meterResponse, meterState, metered } from "./meter.mjs";

export { default } from "../../build/index.js";

export class Limiter {
  constructor(state, env) {
    this.inner = new Tollgate(meterState(state), env);
  }

  fetch(request) {
    if (isMeterRequest(request)) return meterResponse();
    return metered("calls", () => this.inner.fetch(request));
  }

  alarm(info) {
    return metered("alarms", () => this.inner.alarm(info));
  }
}
