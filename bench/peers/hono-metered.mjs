// Peer A as scripts/bench runs it: bench/peers/hono.mjs unchanged, its
// Durable Object class (`DurableObjectRateLimiter` from
// @hono-rate-limiter/cloudflare) subclassed only to meter what it is billed
// for (bench/workers/meter.mjs). Its RPC methods are counted as calls when
// they come from outside the object; `alarm` calls `this.reset()` itself,
// which is not a second billed request.
import { DurableObjectRateLimiter as Peer } from "@hono-rate-limiter/cloudflare";
import { isMeterRequest, meterResponse, meterState, metered } from "../workers/meter.mjs";

export { default } from "./hono.mjs";

export class DurableObjectRateLimiter extends Peer {
  #inAlarm = false;

  constructor(ctx, env) {
    super(ctx, env);
    // The base class checks that it gets a real DurableObjectState; the
    // metered view replaces it afterwards, for the peer's own methods.
    Object.defineProperty(this, "ctx", { value: meterState(ctx) });
  }

  value() {
    return metered("calls", () => super.value());
  }

  update(by, windowMs) {
    return metered("calls", () => super.update(by, windowMs));
  }

  reset() {
    return this.#inAlarm ? super.reset() : metered("calls", () => super.reset());
  }

  async alarm() {
    this.#inAlarm = true;
    try {
      return await metered("alarms", () => super.alarm());
    } finally {
      this.#inAlarm = false;
    }
  }

  fetch(request) {
    if (isMeterRequest(request)) return meterResponse();
    return new Response("not found", { status: 404 });
  }
}
