// Peer A of the hot-key phase as scripts/bench runs it: bench/peers/hono-hot.mjs
// with the same metered object class as bench/peers/hono-metered.mjs.
export { default } from "./hono-hot.mjs";
export { DurableObjectRateLimiter } from "./hono-metered.mjs";
