// Peer A: hono-rate-limiter with the Durable Object store from
// @hono-rate-limiter/cloudflare, set up as that package's README shows
// (store built per request from the binding, DurableObjectRateLimiter
// exported by the Worker), on the same rule as tollgate's shipped config:
// 10 requests per 60 s per CF-Connecting-IP on /api/example?mode=heavy.
// Everything else, and every allowed request, is forwarded unchanged
// (fetch(request)). scripts/bench bundles this file with esbuild.
import { Hono } from "hono";
import { rateLimiter } from "hono-rate-limiter";
import { DurableObjectStore, DurableObjectRateLimiter } from "@hono-rate-limiter/cloudflare";

const app = new Hono();

app.use("/api/example", (c, next) =>
  rateLimiter({
    windowMs: 60_000,
    limit: 10,
    standardHeaders: "draft-6",
    keyGenerator: (c) => c.req.header("cf-connecting-ip") ?? "",
    // Only the `mode=heavy` variant is limited (first `mode` value, as Hono reads it).
    skip: (c) => c.req.query("mode") !== "heavy",
    store: new DurableObjectStore({ namespace: c.env.CACHE }),
  })(c, next),
);

app.all("*", (c) => fetch(c.req.raw));

export { DurableObjectRateLimiter };
export default app;
