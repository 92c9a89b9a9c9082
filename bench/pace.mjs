// What the runtime alone costs per streamed event at a model's pace (issue
// 51): a bare Worker (no tollgate) in the same workerd through Miniflare, in
// front of a local origin writing N OpenAI-style events SP ms apart; 8
// clients, closed loop, R rounds of SECS s a cell; workerd CPU per answer
// at N/3 and N events, the per-event slope, and the slope over `floor` (the
// origin's response returned as is), for: a pipe through an
// IdentityTransformStream, a tee (one branch cancelled), both, reading
// behind (a BYOB read every 100 ms), a timer alone.
//   N=100 SP=20 SECS=5 R=2 [V=floor,its,...] node bench/pace.mjs
import { Miniflare } from "miniflare";
import { createServer } from "node:http";
import { workerdPids, cpuUs } from "./procs.mjs";
import { COMPATIBILITY_DATE } from "../tests/worker/harness.mjs";
const N = Number(process.env.N ?? 100), SP = Number(process.env.SP ?? 20), SECS = Number(process.env.SECS ?? 5), CLIENTS = 8;
const ev = `data: ${JSON.stringify({ id: "chatcmpl-x", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: " w0001" } }], usage: null })}\n\n`;
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
const origin = createServer(async (req, res) => {
  for await (const _ of req);
  res.writeHead(200, { "content-type": "text/event-stream" });
  const n = Number(req.headers["x-n"]);
  for (let i = 0; i < n; i++) { res.write(ev); await wait(SP); }
  res.end();
});
await new Promise((r) => origin.listen(0, "127.0.0.1", r));
const url = `http://127.0.0.1:${origin.address().port}/`;
// HEAP=MB: the isolate holds that much in JS objects (a larger isolate).
const script = `
globalThis.held = Array.from({ length: ${Number(process.env.HEAP ?? 0)} * 1000 }, (_, i) => ({ i, s: "x".repeat(40) + i, a: [i, i + 1] }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default { async fetch(req, env, ctx) {
  const v = new URL(req.url).pathname.slice(1);
  const r = await fetch(${JSON.stringify(url)}, { headers: { "x-n": req.headers.get("x-n") } });
  if (v === "floor") return r;
  if (v === "its") { const t = new IdentityTransformStream(); r.body.pipeTo(t.writable).catch(() => {}); return new Response(t.readable, r); }
  if (v === "itssig") { const t = new IdentityTransformStream(); r.body.pipeTo(t.writable, { signal: new AbortController().signal }).catch(() => {}); return new Response(t.readable, r); }
  if (v === "tee1") { const [a, b] = r.body.tee(); b.cancel(); return new Response(a, r); }
  if (v === "teeits") { const [a, b] = r.body.tee(); b.cancel(); const t = new IdentityTransformStream(); a.pipeTo(t.writable).catch(() => {}); return new Response(t.readable, r); }
  if (v === "behind") {
    const [a, b] = r.body.tee(); const t = new IdentityTransformStream(); let done = false;
    const sent = a.pipeTo(t.writable).then(() => { done = true; }, () => {});
    const reader = b.getReader({ mode: "byob" });
    ctx.waitUntil((async () => { let buf = new ArrayBuffer(65536); for (;;) { const { done: d, value } = await reader.read(new Uint8Array(buf)); if (d) return; buf = value.buffer; if (!done) await Promise.race([sleep(100), sent]); } })());
    return new Response(t.readable, r);
  }
  if (v === "restonly") { ctx.waitUntil((async () => { for (let i = 0; i < 30; i++) await sleep(100); })()); return r; }
  return new Response("?", { status: 404 });
} };`;
const before = workerdPids();
const mf = new Miniflare({ modules: true, script, compatibilityDate: COMPATIBILITY_DATE });
await mf.ready;
const pid = [...workerdPids()].find((p) => !before.has(p));
const variants = (process.env.V ?? "floor,its,tee1,teeits,behind,restonly").split(",");
async function load(v, n, ms) {
  const end = Date.now() + ms; let answers = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (Date.now() < end) { const r = await mf.dispatchFetch(`http://x/${v}`, { headers: { "x-n": String(n) } }); await r.arrayBuffer(); answers++; }
  }));
  return answers;
}
const res = {};
for (const v of variants) res[v] = { lo: [], hi: [] };
for (let round = 0; round < Number(process.env.R ?? 2); round++) {
  for (const v of variants) for (const [k, n] of [["lo", Math.round(N / 3)], ["hi", N]]) {
    const t0 = cpuUs(pid); const a = await load(v, n, SECS * 1000); await wait(150);
    res[v][k].push((cpuUs(pid) - t0) / a);
  }
}
const med = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`N=${N} SP=${SP}ms; µs per answer lo/hi, per event slope, slope over floor`);
const fs = (v) => (med(res[v].hi) - med(res[v].lo)) / (N - Math.round(N / 3));
for (const v of variants) console.log(`${v}\t${med(res[v].lo).toFixed(0)}\t${med(res[v].hi).toFixed(0)}\t${fs(v).toFixed(1)}\t${(fs(v) - fs("floor")).toFixed(1)}`);
await mf.dispose(); origin.close(); process.exit(0);
