// What the runtime alone costs per streamed event at a model's pace (issue
// 51): a bare Worker (no tollgate) in the same workerd through Miniflare, in
// front of a local origin writing N OpenAI-style events SP ms apart; 8
// clients, closed loop, R rounds of SECS s a cell; workerd CPU per answer
// at N/3 and N events, the per-event slope, and the slope over `floor` (the
// origin's response returned as is), for: a pipe through an
// IdentityTransformStream (`its`; `itssig` with an abort signal), a tee
// (one branch cancelled: `tee1`; then piped: `teeits`), reading behind (a
// BYOB read every 100 ms: `behind`, the client's branch piped through an
// IdentityTransformStream as tollgate does; `behindraw`, returned as is),
// tollgate's batched watch bare (`batched`; `sparse`: no rest after a read
// that waited 10 ms; `nowait`: its writes not awaited; `nodrain`: no drain
// branch; `direct`: no tee, the origin's body itself read; `ts`: a
// JavaScript TransformStream handing each chunk on), a tee of a tee's branch read behind (`teetee`), a timer alone
// (`restonly`). The clients reach the
// Worker on its own socket (ENTRY=1: through Miniflare's entry Worker);
// "paired": the round-by-round slope over floor's, median [min, max].
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
// Reading behind: \`branch\` read into one reused buffer, a rest of 100 ms
// after each read (cut short by \`sent\`, none once \`delivered()\`).
const readEvery100 = (ctx, branch, sent, delivered) => {
  const reader = branch.getReader({ mode: "byob" });
  ctx.waitUntil((async () => { let buf = new ArrayBuffer(65536); for (;;) { const { done, value } = await reader.read(new Uint8Array(buf)); if (done) return; buf = value.buffer; if (!delivered()) await (sent ? Promise.race([sleep(100), sent]) : sleep(100)); } })());
};
export default { async fetch(req, env, ctx) {
  const v = new URL(req.url).pathname.slice(1);
  const r = await fetch(${JSON.stringify(url)}, { headers: { "x-n": req.headers.get("x-n") } });
  if (v === "floor") return r;
  if (v === "its") { const t = new IdentityTransformStream(); r.body.pipeTo(t.writable).catch(() => {}); return new Response(t.readable, r); }
  if (v === "itssig") { const t = new IdentityTransformStream(); r.body.pipeTo(t.writable, { signal: new AbortController().signal }).catch(() => {}); return new Response(t.readable, r); }
  if (v === "tee1") { const [a, b] = r.body.tee(); b.cancel(); return new Response(a, r); }
  if (v === "teeits") { const [a, b] = r.body.tee(); b.cancel(); const t = new IdentityTransformStream(); a.pipeTo(t.writable).catch(() => {}); return new Response(t.readable, r); }
  if (v === "behind" || v === "teetee") {
    let body = r.body;
    if (v === "teetee") { const [x, y] = body.tee(); x.cancel(); body = y; }
    const [a, b] = body.tee(); const t = new IdentityTransformStream(); let done = false;
    const sent = a.pipeTo(t.writable).then(() => { done = true; }, () => {});
    readEvery100(ctx, b, sent, () => done);
    return new Response(t.readable, r);
  }
  if (v === "behindraw") {
    const [a, b] = r.body.tee();
    readEvery100(ctx, b, null, () => false);
    return new Response(a, r);
  }
  if (v === "batched" || v === "sparse" || v === "nowait" || v === "nodrain") {
    // tollgate's batched watch (src/glue/origin.rs watchBody), bare: a tee,
    // one branch drained natively, the other read, written to the client's
    // pipe and awaited, then a rest to 10 ms after the read ("sparse": no
    // rest after a read that waited 10 ms or more). tollgate's BATCH_MS is
    // 25 since issue 51's last change; this keeps the 10 its recorded runs
    // (bench/RESULTS.stream-paced.md) measured.
    const [toDrain, toRead] = r.body.tee();
    const through = new IdentityTransformStream();
    if (v === "nodrain") toDrain.cancel(); else toDrain.pipeTo(through.writable).catch(() => {});
    const dr = through.readable.getReader({ mode: "byob" });
    if (v !== "nodrain") ctx.waitUntil((async () => { let b = new ArrayBuffer(65536); for (;;) { const x = await dr.readAtLeast(65536, new Uint8Array(b)); if (x.done) return; b = x.value.buffer; } })());
    const { readable, writable } = new IdentityTransformStream();
    const writer = writable.getWriter();
    const reader = toRead.getReader({ mode: "byob" });
    ctx.waitUntil((async () => {
      let buf = new ArrayBuffer(65536);
      for (;;) {
        const asked = Date.now();
        const { done, value } = await reader.read(new Uint8Array(buf));
        if (done) { await writer.close(); return; }
        const at = Date.now();
        if (v === "nowait") writer.write(value).catch(() => {}); else await writer.write(value);
        buf = new ArrayBuffer(65536);
        const rest = 10 - (Date.now() - at);
        if (value.byteLength < 65536 && rest > 0 && !(v === "sparse" && at - asked >= 10)) await sleep(rest);
      }
    })());
    return new Response(readable, r);
  }
  if (v === "ts") {
    // A JavaScript TransformStream that hands each chunk on (where a
    // reader would see each one): no tee.
    return new Response(r.body.pipeThrough(new TransformStream({ transform(chunk, c) { c.enqueue(chunk); } })), r);
  }
  if (v === "direct") {
    // The batched watch with no tee: the origin's body read itself (a read,
    // then a rest to 10 ms), each read written to the client's pipe.
    const { readable, writable } = new IdentityTransformStream();
    const writer = writable.getWriter();
    const reader = r.body.getReader({ mode: "byob" });
    ctx.waitUntil((async () => {
      let buf = new ArrayBuffer(65536);
      for (;;) {
        const { done, value } = await reader.read(new Uint8Array(buf));
        if (done) { await writer.close(); return; }
        const at = Date.now();
        await writer.write(value);
        buf = new ArrayBuffer(65536);
        const rest = 10 - (Date.now() - at);
        if (value.byteLength < 65536 && rest > 0) await sleep(rest);
      }
    })());
    return new Response(readable, r);
  }
  if (v === "restonly") { ctx.waitUntil((async () => { for (let i = 0; i < 30; i++) await sleep(100); })()); return r; }
  return new Response("?", { status: 404 });
} };`;
const before = workerdPids();
// The clients reach the Worker on its own socket (ENTRY=1: through
// Miniflare's entry Worker, which forwards each chunk).
const DIRECT = process.env.ENTRY !== "1";
const mf = new Miniflare({ modules: true, script, compatibilityDate: COMPATIBILITY_DATE, ...(DIRECT ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}) });
await mf.ready;
const base = DIRECT ? String(await mf.unsafeGetDirectURL()).replace(/\/$/, "") : "http://x";
const get = (path, init) => (DIRECT ? fetch(`${base}${path}`, init) : mf.dispatchFetch(`${base}${path}`, init));
const pid = [...workerdPids()].find((p) => !before.has(p));
const variants = (process.env.V ?? "floor,its,tee1,teeits,behind,restonly").split(",");
async function load(v, n, ms) {
  const end = Date.now() + ms; let answers = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (Date.now() < end) { const r = await get(`/${v}`, { headers: { "x-n": String(n) } }); await r.arrayBuffer(); answers++; }
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
const slopes = (v) => res[v].hi.map((h, i) => (h - res[v].lo[i]) / (N - Math.round(N / 3)));
const floorSlopes = slopes("floor");
const over = (v) => slopes(v).map((x, i) => x - floorSlopes[i]).sort((a, b) => a - b);
const fs = (v) => (med(res[v].hi) - med(res[v].lo)) / (N - Math.round(N / 3));
for (const v of variants) console.log(`${v}\t${med(res[v].lo).toFixed(0)}\t${med(res[v].hi).toFixed(0)}\t${fs(v).toFixed(1)}\t${(fs(v) - fs("floor")).toFixed(1)}\tpaired ${med(over(v)).toFixed(1)} [${over(v)[0].toFixed(1)}, ${over(v).at(-1).toFixed(1)}]`);
await mf.dispose(); origin.close(); process.exit(0);
