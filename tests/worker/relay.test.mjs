// The WebSocket relay of a `concurrency` rule (issue 52): every message
// passed on as sent (binary as binary, text as text, whole however it was
// fragmented, large ones too, in order, both ways; close codes and reasons
// both ways), and what the relay holds for a side that is not reading
// charged to its client's share of memory_budget (the session closed,
// 1013, `answer_cut` with reason `relay_buffer`), since workerd tells a
// relay neither what it has queued nor lets it stop reading. The origin is
// an app Worker behind a service binding, as in concurrency.test.mjs, or a
// raw WebSocket server (to send fragments).
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { randomBytes, createHash } from "node:crypto";
import { frame, framesOf, rawOrigin, rawClient } from "./websocket-frames.mjs";
import { withTollgate, mockOrigin, sleep, COMPATIBILITY_DATE } from "./harness.mjs";
import { rule, limit } from "./builders.mjs";
import { rssMb } from "../../bench/procs.mjs";

const MIB = 1_048_576;
/** memory_budget by default, and a client's quarter of it. */
const SHARE = (32 * MIB) / 4;
/** Bytes of memory a relayed byte is charged (MEMORY_PER_RELAY_BYTE). */
const PER_BYTE = 1;
/** Bytes of memory each relayed message is charged besides its bytes (MEMORY_PER_RELAY_MESSAGE). */
const PER_MESSAGE = 1536;
/** What the relay counts a side as reading a second (RELAY_DRAIN). */
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
let closes = [];
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/__drain") { resume?.(); return new Response("ok"); }
    if (url.pathname === "/__drained") return Response.json(drained);
    if (url.pathname === "/__flood") return Response.json(flood);
    if (url.pathname === "/__closes") return Response.json(closes);
    if (url.pathname.startsWith("/read/")) return Response.json(await request.json());
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
    } else if (url.pathname === "/ws/sink") {
      // Answers each message with its line only; records how it was closed.
      server.accept();
      server.addEventListener("message", async (e) => {
        const bytes = typeof e.data === "string" ? new TextEncoder().encode(e.data) : e.data;
        server.send(\`got \${typeof e.data === "string" ? "text" : "binary"} \${bytes.byteLength} \${await hex(bytes)}\`);
      });
      server.addEventListener("close", (e) => { closes.push([e.code, e.reason]); });
    } else if (url.pathname === "/ws/send") {
      // Sends a message of each size asked (its line first), then closes with the code and reason asked.
      server.accept();
      ctx.waitUntil((async () => {
        for (const size of (url.searchParams.get("sizes") ?? "").split(",").filter(Boolean).map(Number)) {
          const bytes = crypto.getRandomValues(new Uint8Array(size > 65536 ? 65536 : size));
          const whole = new Uint8Array(size);
          for (let at = 0; at < size; at += bytes.length) whole.set(bytes.subarray(0, Math.min(bytes.length, size - at)), at);
          server.send(\`sent \${size} \${await hex(whole)}\`);
          server.send(whole);
          await new Promise((r) => setTimeout(r, 50));
        }
        if (url.searchParams.has("code")) server.close(Number(url.searchParams.get("code")), url.searchParams.get("reason") ?? "");
      })());
      server.addEventListener("close", (e) => { closes.push([e.code, e.reason]); });
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

test("an origin that stops reading: the relay holds at most its client's share for it (plus what it counts as read), then closes the session (1013, answer_cut relay_buffer)", (t) =>
  withTollgate(sessions, async (tg) => {
    const { socket, closed } = await open(tg, "/ws/stall");
    const before = rssMb();
    const started = Date.now();
    const piece = new Uint8Array(MIB).fill(1);
    // 40 MiB, ten times what a client's share holds, to an origin reading nothing.
    for (let i = 0; i < 40; i++) socket.send(piece);
    const [code, reason] = await within(60_000, closed, ["still open", ""]);
    const elapsed = (Date.now() - started) / 1000;
    const grown = rssMb() - before;
    assert.equal(code, 1013, `tollgate closed the session (${reason})`);
    // Generous, finite: what was relayed (8 MiB) and the 40 MiB received on the way.
    assert.ok(grown < 80, `workerd grew ${grown.toFixed(1)} MB (the same 40 MiB relayed whole grew it by 300 MB per 300 MB before issue 52)`);
    assert.match(reason, /not reading/);
    await tg.settled();
    const cuts = tg.logEvents().filter((e) => e.tollgate === "answer_cut");
    assert.deepEqual(cuts.map((e) => [e.rule, e.reason]), [["ws", "relay_buffer"]]);
    // What the relay passed on is what the origin finds once it reads.
    await (await tg.mf.getWorker("app")).fetch("http://app/__drain");
    let drained;
    for (let i = 0; i < 300 && !(drained = await app(tg, "/__drained")).closed; i++) await sleep(100);
    assert.deepEqual(drained.closed?.[0], 1013, "the origin got the close after what was relayed");
    const bound = SHARE / PER_BYTE + DRAIN * elapsed;
    t.diagnostic(`relayed ${drained.messages} messages, ${drained.bytes} B of 40 MiB in ${elapsed} s (bound ${Math.round(bound)} B); workerd grew ${grown.toFixed(1)} MB`);
    assert.ok(drained.bytes <= bound, `relayed ${drained.bytes} B, at most ${bound} (the share's ${SHARE / PER_BYTE} B of messages + ${DRAIN} B/s for ${elapsed} s)`);
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

const closesAt = (tg) => app(tg, "/__closes");
async function waitFor(read, ok, ms = 30_000) {
  let value;
  for (const end = Date.now() + ms; !ok((value = await read())) && Date.now() < end; ) await sleep(100);
  return value;
}

test("a client's fragmented messages (binary in three frames, text split inside a character, a ping between fragments) reach the origin whole and byte-identical", () =>
  withTollgate(sessions, async (tg) => {
    const base = await tg.mf.ready;
    const { sock, status, frames } = await rawClient(base, "/ws/sink", { "x-tenant": "acme" });
    try {
      assert.equal(status, 101);
      const binary = randomBytes(300 * 1024);
      const text = Buffer.from("fragmented ✓ é 𝄞 end", "utf8");
      const cut = text.indexOf(Buffer.from("✓")) + 1; // inside the 3-byte ✓
      sock.write(Buffer.concat([
        frame(2, binary.subarray(0, 1000), { more: true, mask: true }),
        frame(9, "ping", { mask: true }),
        frame(0, binary.subarray(1000, 200_000), { more: true, mask: true }),
        frame(0, binary.subarray(200_000), { mask: true }),
        frame(1, text.subarray(0, cut), { more: true, mask: true }),
        frame(0, text.subarray(cut), { mask: true }),
      ]));
      const got = await frames.next(2);
      assert.deepEqual(got.map((m) => m.data.toString()), [`got binary ${binary.length} ${sha(binary)}`, `got text ${text.length} ${sha(text)}`]);
      sock.write(frame(8, Buffer.concat([Buffer.from([0x0f, 0xa1]), Buffer.from("bye ✓")]), { mask: true }));
      assert.deepEqual(await within(10_000, frames.closed, "no close"), [4001, "bye ✓"], "the origin's reply to the close came back as sent");
      assert.deepEqual(await waitFor(() => closesAt(tg), (c) => c.length > 0), [[4001, "bye ✓"]], "the client's close code and reason reached the origin");
    } finally {
      sock.destroy();
    }
  }));

test("an origin's fragmented messages reach the client whole and byte-identical, its close code and reason too, and the client's messages reach it", () =>
  (async () => {
    const binary = randomBytes(200 * 1024);
    const text = Buffer.from("origin ✓ 𝄞 fragments", "utf8");
    const fromClient = [];
    const origin = await rawOrigin(({ sock, frames }) => {
      sock.write(Buffer.concat([
        frame(2, binary.subarray(0, 70_000), { more: true }),
        frame(9, "ping"),
        frame(0, binary.subarray(70_000, 70_001), { more: true }),
        frame(0, binary.subarray(70_001)),
        frame(1, text.subarray(0, 8), { more: true }),
        frame(0, text.subarray(8)),
      ]));
      frames.next(1).then((m) => {
        fromClient.push(...m);
        sock.write(frame(8, Buffer.concat([Buffer.from([0x0f, 0xa3]), Buffer.from("served ✓")])));
      }, () => {});
    });
    try {
      await withTollgate({ ...sessions, config: { rules: sessions.config.rules }, vars: { UPSTREAM: origin.url }, workerOptions: { outboundService: undefined }, services: {} }, async (tg) => {
        const { socket, take, closed } = await open(tg, "/ws/raw");
        const [b, t] = await take(2);
        assert.equal(sha(await bytesOf(b)), sha(binary), "the binary message, whole, byte for byte");
        assert.equal(t, text.toString("utf8"), "the text, whole");
        const sent = randomBytes(MIB);
        socket.send(new Uint8Array(sent));
        assert.deepEqual(await within(20_000, closed, ["no close", ""]), [4003, "served ✓"], "the origin's close code and reason");
        assert.equal(fromClient.length, 1);
        assert.equal(fromClient[0].kind, "binary");
        assert.equal(sha(fromClient[0].data), sha(sent), "1 MiB from the client, byte for byte");
      });
    } finally {
      await origin.close();
    }
  })());

test("large messages (1 MiB and 4 MiB) pass byte-identical both ways; one byte over what a client's share holds ends the session with 1009 on both sides", () =>
  // The largest budget: a client's 16 MiB of memory holds 16 MiB of messages.
  withTollgate({ ...sessions, config: { ...sessions.config, memory_budget: 64 * MIB } }, async (tg) => {
    const largest = ((64 * MIB) / 4 - PER_MESSAGE) / PER_BYTE;
    // Origin to client: 1 MiB and 4 MiB, then the origin closes with its own code.
    {
      const { take, closed } = await open(tg, `/ws/send?sizes=${MIB},${4 * MIB}&code=4004&reason=${encodeURIComponent("sent ✓")}`);
      const got = await take(4, 60_000);
      for (const [i, size] of [MIB, 4 * MIB].entries()) {
        const [line, data] = [got[2 * i], got[2 * i + 1]];
        const bytes = await bytesOf(data);
        assert.equal(bytes.length, size);
        assert.equal(line, `sent ${size} ${sha(bytes)}`, `${size} B from the origin, byte for byte`);
      }
      assert.deepEqual(await within(20_000, closed, ["no close", ""]), [4004, "sent ✓"]);
    }
    // Client to origin: the same sizes.
    {
      const { socket, take } = await open(tg, "/ws/sink");
      for (const size of [MIB, 4 * MIB]) {
        const bytes = randomBytes(size);
        socket.send(new Uint8Array(bytes));
        assert.deepEqual(await take(1, 60_000), [`got binary ${size} ${sha(bytes)}`]);
      }
      socket.close(1000, "done");
    }
    // One byte over what a share holds: 1009 to both sides, a relay_buffer cut.
    {
      const { socket, closed } = await open(tg, "/ws/sink");
      socket.send(new Uint8Array(largest + 1));
      const [code, reason] = await within(20_000, closed, ["no close", ""]);
      assert.equal(code, 1009, reason);
      assert.match(reason, /larger than the relay may hold/);
      const closes = await waitFor(() => closesAt(tg), (c) => c.some(([code]) => code === 1009));
      assert.ok(closes.some(([code]) => code === 1009), `the origin was closed with 1009 too (${JSON.stringify(closes)})`);
      await tg.settled();
      assert.ok(tg.logEvents().some((e) => e.tollgate === "answer_cut" && e.reason === "relay_buffer"));
    }
  }));

test("one client's sessions share its quarter of memory_budget: a session whose origin stopped reading is closed at its quarter, and its charge stays (workerd still holds what it queued), so the client's next session is closed at once; another client's session passes", () =>
  withTollgate({ ...sessions, config: { ...sessions.config, memory_budget: 8 * MIB } }, async (tg) => {
    // 8 MiB: a client 2 MiB of memory, 1 B a byte and 1.5 KiB a message.
    const stall = async (ip) => {
      const res = await tg.fetch("/ws/stall", { ip, headers: { upgrade: "websocket", "x-tenant": "acme" } });
      const socket = res.webSocket;
      socket.accept();
      const closed = new Promise((r) => socket.addEventListener("close", (e) => r([e.code, e.reason])));
      return { socket, closed };
    };
    const first = await stall("198.51.100.40");
    // Eight 256 KiB messages: the eighth finds no room.
    for (let i = 0; i < 8; i++) first.socket.send(new Uint8Array(256 * 1024).fill(i));
    const [code, reason] = await within(20_000, first.closed, ["still open", ""]);
    assert.equal(code, 1013, `closed at its quarter (${reason})`);
    // Its seven messages' charge stays: a 1 MiB message would need 12 s of drain.
    const second = await stall("198.51.100.40");
    second.socket.send(new Uint8Array(MIB));
    assert.equal((await within(20_000, second.closed, ["still open", ""]))[0], 1013, "the client's next session is closed at once");
    // Another client is not touched.
    const other = await tg.fetch("/ws/sink", { ip: "203.0.113.41", headers: { upgrade: "websocket", "x-tenant": "acme" } });
    const reader = other.webSocket;
    reader.accept();
    const lines = [];
    reader.addEventListener("message", (e) => lines.push(e.data));
    const bytes = randomBytes(MIB);
    reader.send(new Uint8Array(bytes));
    for (let i = 0; i < 100 && lines.length < 1; i++) await sleep(100);
    assert.deepEqual(lines, [`got binary ${bytes.length} ${sha(bytes)}`], "another client's message passed");
    reader.close(1000, "done");
    await tg.settled();
    const cuts = tg.logEvents().filter((e) => e.tollgate === "answer_cut");
    assert.deepEqual(cuts.map((e) => [e.rule, e.reason]), [["ws", "relay_buffer"], ["ws", "relay_buffer"]], "the client's two sessions");
  }));

test("what a client's relay holds is in the same budget as its bodies: with its quarter held by a session whose origin stopped reading, its body read for keys is not read (an over_budget line), another client's is", () =>
  withTollgate({
    ...sessions,
    config: {
      ...sessions.config,
      memory_budget: 8 * MIB,
      body_limit: 256 * 1024,
      rules: [...sessions.config.rules, rule("by-user", "/read/*", { key: ["body:user"], limits: limit(100, "1m") })],
    },
  }, async (tg) => {
    const res = await tg.fetch("/ws/stall", { ip: "198.51.100.42", headers: { upgrade: "websocket", "x-tenant": "acme" } });
    const stalled = res.webSocket;
    stalled.accept();
    // Seven 256 KiB messages: 1.76 MiB of its 2 MiB quarter.
    for (let i = 0; i < 7; i++) stalled.send(new Uint8Array(256 * 1024).fill(i));
    await sleep(500);
    // 200 KiB of JSON read for its key: 600 KiB of memory at 3 bytes a byte (5 s of drain short).
    const body = JSON.stringify({ user: "ann", pad: "x".repeat(200 * 1024) });
    const post = (ip) => tg.fetch("/read/x", { ip, method: "POST", headers: { "content-type": "application/json", "content-length": String(body.length) }, body });
    const mine = await post("198.51.100.42");
    assert.equal(mine.status, 400, "not read: its key missing");
    await mine.arrayBuffer();
    const theirs = await post("203.0.113.43");
    assert.equal(theirs.status, 200, "another client's is read");
    await theirs.arrayBuffer();
    await tg.settled();
    const over = tg.logEvents().filter((e) => e.tollgate === "body" && e.outcome === "over_budget");
    assert.equal(over.length, 1);
    assert.ok(over[0].client_held > 6 * 256 * 1024, `the relay's charge (less what drained) is the client's: ${JSON.stringify(over[0])}`);
    stalled.close(1000, "done");
  }));
