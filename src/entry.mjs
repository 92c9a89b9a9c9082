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
// The controls registry and the local metrics sink are classes of their
// own (bound as TOLLGATE_REGISTRY and TOLLGATE_METRICS_SINK), called by
// fetch only: exported as the Rust build makes them.
import { DurableObject } from "cloudflare:workers";
import { Limiter as RustLimiter } from "../build/index.js";

export { default, Registry, MetricsSink } from "../build/index.js";

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
