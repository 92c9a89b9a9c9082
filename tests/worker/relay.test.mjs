// The WebSocket relay of a `concurrency` rule (issue 52): every message
// passed on as sent (binary as binary, text as text, in order, both ways),
// and what the relay holds for a side that is not reading bounded (the
// session closed, 1013, `answer_cut` with reason `relay_buffer`), since
// workerd tells a relay neither what it has queued nor lets it stop reading.
// The origin is an app Worker behind a service binding, as in
// concurrency.test.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { randomBytes, createHash } from "node:crypto";
import { withTollgate, mockOrigin, sleep, COMPATIBILITY_DATE } from "./harness.mjs";
import { rule, limit } from "./builders.mjs";

const MIB = 1_048_576;
/** What the relay holds for one side (RELAY_WINDOW in src/glue/origin.rs). */
const WINDOW = 8 * MIB;
/** What it counts a side as reading a second (RELAY_DRAIN). */
const DRAIN = 64 * 1024;

// /ws/echo: accepts, and answers each message with a text line saying what
// it got (kind, length, sha-256) and then the message itself.
// /ws/stall: never reads until /__drain, then counts what arrives.
// /ws/flood: sends `n` binary messages of 1 MiB at once.
const APP = `
let drained = { bytes: 0, messages: 0, closed: null };
let resume = null;
const hex = async (bytes) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
let flood = { sent: 0, closed: null };
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/__drain") { resume?.(); return new Response("ok"); }
    if (url.pathname === "/__drained") return Response.json(drained);
    if (url.pathname === "/__flood") return Response.json(flood);
    const [client, server] = Object.values(new WebSocketPair());
    server.binaryType = "arraybuffer";
    if (url.pathname === "/ws/echo") {
      server.accept();
      let chain = Promise.resolve();
      server.addEventListener("message", (e) => {
        const data = e.data;
        chain = chain.then(async () => {
          const text = typeof data === "string";
          const bytes = text ? new TextEncoder().encode(data) : data;
          server.send(\`got \${text ? "text" : data.constructor.name} \${bytes.byteLength} \${await hex(bytes)}\`);
          server.send(data);
        });
      });
    } else if (url.pathname === "/ws/stall") {
      drained = { bytes: 0, messages: 0, closed: null };
      ctx.waitUntil(new Promise((r) => { resume = r; }).then(() => new Promise((done) => {
        server.addEventListener("message", (e) => { drained.messages++; drained.bytes += e.data.byteLength ?? e.data.length; });
        server.addEventListener("close", (e) => { drained.closed = [e.code, e.reason]; done(); });
        server.accept();
      })));
    } else if (url.pathname === "/ws/flood") {
      const n = Number(url.searchParams.get("n"));
      flood = { sent: 0, closed: null };
      server.accept();
      server.addEventListener("close", (e) => { flood.closed = [e.code, e.reason]; });
      ctx.waitUntil((async () => {
        const piece = new Uint8Array(${MIB}).fill(7);
        for (let i = 0; i < n && flood.closed === null; i++) {
          try { server.send(piece); } catch { break; }
          flood.sent++;
          await new Promise((r) => setTimeout(r, 1));
        }
      })());
    }
    return new Response(null, { status: 101, webSocket: client });
  },
};
`;

const sessions = {
  origin: mockOrigin(),
  config: {
    upstream: { service: "APP" },
    rules: [rule("ws", "/ws/*", { key: ["header:x-tenant"], limits: limit(10_000, "1m"), concurrency: 4, timeout: "1s", reservation_ttl: "5m" })],
  },
  services: { APP: "app" },
  workers: [{ name: "app", modules: true, script: APP, compatibilityDate: COMPATIBILITY_DATE }],
};
const app = async (tg, path) => (await (await tg.mf.getWorker("app")).fetch(`http://app${path}`)).json();
const bytesOf = async (data) => {
  if (typeof data === "string") return null;
  if (data instanceof Blob) return Buffer.from(await data.arrayBuffer());
  return Buffer.from(data instanceof ArrayBuffer ? new Uint8Array(data) : data);
};
const sha = (b) => createHash("sha256").update(b).digest("hex");
/** `promise`, or `late` once `ms` passed (the timer cleared either way). */
async function within(ms, promise, late) {
  let timer;
  const timeout = new Promise((r) => { timer = setTimeout(() => r(late), ms); });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function open(tg, path) {
  const res = await tg.fetch(path, { headers: { upgrade: "websocket", "x-tenant": "acme" } });
  assert.equal(res.status, 101);
  const socket = res.webSocket;
  socket.accept();
  const got = [];
  let wake = () => {};
  socket.addEventListener("message", (e) => { got.push(e.data); wake(); });
  const closed = new Promise((r) => socket.addEventListener("close", (e) => { r([e.code, e.reason]); wake(); }));
  /** The next `n` messages (waiting at most `ms`). */
  const take = async (n, ms = 30_000) => {
    for (const end = Date.now() + ms; got.length < n && Date.now() < end; ) await new Promise((r) => { wake = r; setTimeout(r, 200); });
    assert.ok(got.length >= n, `${n} messages arrived (got ${got.length})`);
    return got.splice(0, n);
  };
  return { socket, take, closed };
}

test("binary messages of 0 B, 1 B, 64 KiB and 1 MiB pass the relay byte for byte both ways, text stays text, and the order is kept", () =>
  withTollgate(sessions, async (tg) => {
    const { socket, take } = await open(tg, "/ws/echo");
    const sent = [randomBytes(0), "first text", randomBytes(1), randomBytes(64 * 1024), "", randomBytes(MIB), "é ünïcode ✓", Buffer.from("[object Blob]")];
    for (const m of sent) socket.send(typeof m === "string" ? m : new Uint8Array(m));
    const replies = await take(2 * sent.length);
    for (const [i, m] of sent.entries()) {
      const [line, echo] = [replies[2 * i], replies[2 * i + 1]];
      const bytes = typeof m === "string" ? Buffer.from(m, "utf8") : m;
      const kind = typeof m === "string" ? "text" : "ArrayBuffer";
      assert.equal(line, `got ${kind} ${bytes.length} ${sha(bytes)}`, `message ${i} reached the origin as sent`);
      if (typeof m === "string") assert.equal(echo, m, `text ${i} came back as text`);
      else assert.equal(sha(await bytesOf(echo)), sha(m), `binary ${i} (${m.length} B) came back byte for byte`);
    }
    socket.close(1000, "done");
  }));

test("an origin that stops reading: the relay holds at most its window for it, then closes the session (1013, answer_cut relay_buffer)", (t) =>
  withTollgate(sessions, async (tg) => {
    const { socket, closed } = await open(tg, "/ws/stall");
    const started = Date.now();
    const piece = new Uint8Array(MIB).fill(1);
    // 40 MiB, five times the window, to an origin reading nothing.
    for (let i = 0; i < 40; i++) socket.send(piece);
    const [code, reason] = await within(60_000, closed, ["still open", ""]);
    const elapsed = (Date.now() - started) / 1000;
    assert.equal(code, 1013, `tollgate closed the session (${reason})`);
    assert.match(reason, /not reading/);
    await tg.settled();
    const cuts = tg.logEvents().filter((e) => e.tollgate === "answer_cut");
    assert.deepEqual(cuts.map((e) => [e.rule, e.reason]), [["ws", "relay_buffer"]]);
    // What the relay passed on is what the origin finds once it reads.
    await (await tg.mf.getWorker("app")).fetch("http://app/__drain");
    let drained;
    for (let i = 0; i < 300 && !(drained = await app(tg, "/__drained")).closed; i++) await sleep(100);
    assert.deepEqual(drained.closed?.[0], 1013, "the origin got the close after what was relayed");
    const bound = WINDOW + DRAIN * elapsed;
    t.diagnostic(`relayed ${drained.messages} messages, ${drained.bytes} B of 40 MiB in ${elapsed} s (bound ${Math.round(bound)} B)`);
    assert.ok(drained.bytes <= bound, `relayed ${drained.bytes} B, at most ${bound} (the window + ${DRAIN} B/s for ${elapsed} s)`);
    assert.ok(drained.bytes < 40 * MIB && drained.messages >= 1, `${drained.messages} messages relayed, not all 40`);
  }));

/** A raw client: the upgrade's handshake, then never reads (its socket paused). */
function stalledClient(base, path) {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(url.port), url.hostname, () => {
      sock.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nx-tenant: acme\r\n\r\n`);
    });
    let head = "";
    const onData = (d) => {
      head += d.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      sock.off("data", onData);
      sock.pause();
      resolve({ sock, status: Number(head.split(" ")[1]) });
    };
    sock.on("data", onData);
    sock.on("error", reject);
  });
}

test("a client that stops reading while the origin floods it: the relay closes the session (1013 to the origin, answer_cut relay_buffer) instead of holding the flood", (t) =>
  withTollgate(sessions, async (tg) => {
    const base = await tg.mf.ready;
    const { sock, status } = await stalledClient(base, "/ws/flood?n=128");
    try {
      assert.equal(status, 101);
      let flood;
      for (let i = 0; i < 600 && !(flood = await app(tg, "/__flood")).closed; i++) await sleep(100);
      assert.equal(flood.closed?.[0], 1013, `the origin's end was closed by tollgate (${JSON.stringify(flood)})`);
      t.diagnostic(`the origin sent ${flood.sent} of 128 MiB before tollgate closed its end`);
      assert.ok(flood.sent < 128, `the origin was stopped before its 128 MiB were all sent (${flood.sent})`);
      await tg.settled();
      const cuts = tg.logEvents().filter((e) => e.tollgate === "answer_cut");
      assert.deepEqual(cuts.map((e) => [e.rule, e.reason]), [["ws", "relay_buffer"]]);
    } finally {
      sock.destroy();
    }
  }));
