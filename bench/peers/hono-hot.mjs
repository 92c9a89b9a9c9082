// Peer A for the hot-key scenario (scripts/bench's second phase): the same
// hono-rate-limiter + DurableObjectStore setup as bench/peers/hono.mjs, on
// one constant key with a large limit (HOT_LIMIT per 60 s, far above what a
// run sends, so nothing is blocked): every limited request is one call to
// that key's one Durable Object. scripts/bench bundles this file (through
// hono-hot-metered.mjs) with esbuild.
import { Hono } from "hono";
import { rateLimiter } from "hono-rate-limiter";
import { DurableObjectStore, DurableObjectRateLimiter } from "@hono-rate-limiter/cloudflare";

/** The hot-key phase's limit per 60 s (the same as tollgate's hot rule in bench/run.mjs). */
export const HOT_LIMIT = 300_000;

const app = new Hono();

app.use("/api/example", (c, next) =>
  rateLimiter({
    windowMs: 60_000,
    limit: HOT_LIMIT,
    standardHeaders: "draft-6",
    keyGenerator: () => "global",
    skip: (c) => c.req.query("mode") !== "heavy",
    store: new DurableObjectStore({ namespace: c.env.CACHE }),
  })(c, next),
);

app.all("*", (c) => fetch(c.req.raw));

export { DurableObjectRateLimiter };
export default app;
