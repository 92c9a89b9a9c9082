// The Rust floor as scripts/bench runs it: its worker-build output
// (bench/workers/rust-floor/build/index.js) as the Worker, and the counter
// object it calls for the requests an exact limiter would count.
export { default } from "./rust-floor/build/index.js";
export { FloorCounter } from "./floor-counter.mjs";
