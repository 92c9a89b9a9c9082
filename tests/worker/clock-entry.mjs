// A test entry: tollgate's own (src/entry.mjs) on a clock the test sets, so
// a calendar window's boundary (a local midnight) is reached without
// waiting for it. `GET /__test/clock?at=<Unix ms>` moves `Date.now()` (what
// the Worker and its Durable Objects read, through wasm-bindgen's
// `Date.now` import) to that time; it runs on from there. Every other
// request is tollgate's. Only calendar.test.mjs uses it: nothing of it is
// in a build.
import Tollgate, { Limiter, Registry, MetricsSink } from "../../src/entry.mjs";

export { Limiter, Registry, MetricsSink };

const realNow = Date.now;
let offsetMs = 0;
Date.now = () => realNow() + offsetMs;

export default class extends Tollgate {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/__test/clock") {
      offsetMs = Number(url.searchParams.get("at")) - realNow();
      return new Response(String(Date.now()));
    }
    return super.fetch(request);
  }
}
