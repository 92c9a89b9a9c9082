// Bodies read for `body:` keys and form parameters under the isolate's
// memory budget (issue 52 item 5): thirty clients stalling 1 MiB body reads
// grew workerd by 123 MB, with no deadline and no budget. A read now takes
// its bytes from memory_budget first (3 bytes of memory per body byte, as
// measured; a client at most a quarter), a body that finds no room is not
// read (as one over body_limit: the rule's missing-key policy answers), and
// a client still sending at body_timeout is answered 408, its hold given
// back. These tests assert what tollgate decided; bench/memory.mjs measures
// workerd's RSS.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { withTollgate, sleep, mockOrigin } from "./harness.mjs";
import { config, rule, limit } from "./builders.mjs";
import { rssMb } from "../../bench/procs.mjs";

const KIB = 1024;
const MIB = 1_048_576;

/** A `body:user` rule on /read/*, with top-level `fields`. */
const reading = (fields) => ({ ...config(rule("by-user", "/read/*", { key: ["body:user"], limits: limit(100, "1m") })), ...fields });

/** A stalled JSON upload to the `body:user` rule's path ([`stalledPost`]). */
function stalledRead(base, stall) {
  return stalledPost(base, "/read/x", stall);
}

/** `promise`, or "no answer" once `ms` have passed. */
const within = (ms, promise) => Promise.race([promise, sleep(ms).then(() => "no answer")]);

const bodyLines = (tg, outcome) => tg.logEvents().filter((e) => e.tollgate === "body" && e.outcome === outcome);

const read = (tg, ip, user = "bob") =>
  tg.fetch("/read/x", { ip, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ user }) });

test("a body read that stalls is answered 408 at body_timeout: nothing counted or forwarded, a `body` line, and its client's share is back", () =>
  withTollgate({ config: reading({ body_timeout: "2s", body_limit: 64 * KIB, memory_budget: 2 * MIB }) }, async (tg) => {
    const base = await tg.mf.ready;
    const before = tg.origin.received.length;
    // 2 MiB of memory, a client 512 KiB: two reads of 64 KiB (192 KiB held each).
    const stalled = [0, 1].map(() => stalledRead(base, { ip: "198.51.100.1", length: 64 * KIB, sent: 32 * KIB }));
    let statuses;
    try {
      // The bound: the 2 s body_timeout, with 8 s of margin.
      statuses = await within(10_000, Promise.all(stalled.map((s) => s.response)));
    } finally {
      stalled.forEach((s) => s.stop());
    }
    assert.deepEqual(statuses, [408, 408], "released at the deadline (no deadline before: never answered)");
    await tg.settled();
    const lines = bodyLines(tg, "stalled");
    assert.equal(lines.length, 2);
    assert.equal(lines[0].body_timeout_ms, 2000);
    assert.equal(tg.origin.received.length, before, "nothing forwarded");
    // The same client's holds came back: its next bodies are read and counted.
    for (let i = 0; i < 3; i++) {
      const r = await read(tg, "198.51.100.1");
      assert.equal(r.status, 200);
      await r.arrayBuffer();
    }
    await tg.settled();
    assert.equal(bodyLines(tg, "over_budget").length, 0, "read within its share again");
  }));

/**
 * A JSON POST to `path` over a raw connection: `length` announced, `sent`
 * bytes of `{"user":"ann","pad":"xxx…` sent at once, then nothing until
 * `stop()`. `response` resolves with the status (or "closed").
 */
function stalledPost(base, path, { ip, length, sent }) {
  const req = http.request(new URL(path, base), {
    method: "POST",
    headers: { "cf-connecting-ip": ip, "content-type": "application/json", "content-length": String(length) },
  });
  const response = new Promise((resolve) => {
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on("error", () => resolve("closed"));
    req.on("close", () => resolve("closed"));
  });
  req.flushHeaders();
  const head = '{"user":"ann","pad":"';
  req.write(head + "x".repeat(Math.max(0, sent - head.length)));
  return { response, stop: () => req.destroy() };
}

test("uploads, body reads and JSON answers at once: the uploads and reads tollgate held add up to at most memory_budget, the rest streamed or was not read, every stalled one ended at its deadline, every answer came whole", async (t) => {
  const usage = { prompt_tokens: 1, completion_tokens: 9, total_tokens: 10 };
  const answer = JSON.stringify({ choices: [{ message: { content: "y".repeat(256 * KIB) } }], usage });
  const origin = mockOrigin(async (request, record) => (record.path.startsWith("/v1/") ? new Response(answer, { headers: { "content-type": "application/json" } }) : null));
  const rules = [
    rule("quota", "/up/*", { key: ["ip"], limits: limit(1000, "1d"), counting: { mode: "response", statuses: [401], upload_buffer: 64 * KIB, upload_timeout: "4s" } }),
    rule("by-user", "/read/*", { key: ["body:user"], limits: limit(1000, "1m") }),
    rule("ai", "/v1/*", { key: ["header:x-tenant"], limits: limit(1e9, "1d"), metering: { usage: "openai", reserve: 10, max: 10 }, counting: { mode: "response" } }),
  ];
  const cfg = { ...config(...rules), body_limit: 64 * KIB, body_timeout: "4s", memory_budget: 2 * MIB };
  await withTollgate({ config: cfg, origin }, async (tg) => {
    const base = await tg.mf.ready;
    const before = rssMb();
    // Eight clients, each one stalled upload (64 KiB: 128 KiB held at 2
    // bytes a byte) and one stalled body read (64 KiB: 192 KiB at 3): 2.5
    // MiB wanted of a 2 MiB budget.
    const loads = [];
    for (let i = 1; i <= 8; i++) {
      // Eight networks: one /24 holds at most half the budget (the next test).
      const ip = `203.0.${i}.1`;
      loads.push({ kind: "upload", ...stalledPost(base, "/up/x", { ip, length: 64 * KIB, sent: 32 * KIB }) });
      loads.push({ kind: "read", ...stalledPost(base, "/read/x", { ip, length: 64 * KIB, sent: 32 * KIB }) });
    }
    // Meanwhile (the holds taken), JSON answers read for usage: each watched
    // answer is charged what it may read ahead of its client; with the
    // budget held by the stalled bodies, they are read with what is left
    // (down to no read-ahead), and still whole.
    await sleep(1_000);
    const answers = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
      const r = await tg.fetch("/v1/chat", { ip: `192.0.2.${i + 1}`, method: "POST", headers: { "x-tenant": `t${i}` }, body: "{}" });
      return [r.status, (await r.text()).length];
    }));
    const peak = rssMb();
    let statuses;
    try {
      // The bound: the 4 s deadlines, with 11 s of margin.
      statuses = await within(15_000, Promise.all(loads.map((l) => l.response)));
    } finally {
      loads.forEach((l) => l.stop());
    }
    assert.notEqual(statuses, "no answer", "every stalled request was answered within its deadline's bound");
    assert.deepEqual(answers, Array(10).fill([200, answer.length]), "every JSON answer came whole");
    await tg.settled();
    const lines = tg.logEvents();
    // The JSON requests' own bodies ("{}") are uploads too (the usage rule reserves): told apart by size.
    const overUploads = lines.filter((e) => e.tollgate === "upload" && e.outcome === "over_budget" && e.wanted === 64 * KIB);
    const overReads = lines.filter((e) => e.tollgate === "body" && e.outcome === "over_budget");
    const heldUploads = lines.filter((e) => e.tollgate === "upload" && e.outcome === "stalled").length;
    const heldReads = lines.filter((e) => e.tollgate === "body" && e.outcome === "stalled").length;
    t.diagnostic(`held ${heldUploads} uploads and ${heldReads} reads; ${overUploads.length} uploads streamed, ${overReads.length} reads not read; workerd ${before.toFixed(1)} MB before, ${peak.toFixed(1)} MB with all in flight`);
    // Held at once (all stalled together until their 4 s deadlines).
    const held = heldUploads * 2 * 64 * KIB + heldReads * 3 * 64 * KIB;
    assert.ok(held <= 2 * MIB, `held ${held} B of memory, within the 2 MiB budget`);
    assert.ok(held > 2 * MIB - 3 * 64 * KIB, `the budget was used (${held} B): it refused only past it`);
    assert.equal(heldUploads + overUploads.length, 8, "each upload held or streamed");
    assert.equal(heldReads + overReads.length, 8, "each read held or not read");
    assert.ok([...overUploads, ...overReads].every((e) => e.isolate_held <= 2 * MIB && e.client_held <= MIB / 2), "never past the budget nor a client's quarter");
    const overAnswers = lines.filter((e) => e.tollgate === "answer" && e.outcome === "over_budget");
    t.diagnostic(`${overAnswers.length} of 10 answers watched with less read-ahead than 64 KiB: ${JSON.stringify(overAnswers.map((e) => e.read_ahead))}`);
    assert.ok(overAnswers.length > 0, "the answers found the budget held");
    assert.ok(overAnswers.every((e) => e.isolate_held + 2 * e.read_ahead <= 2 * MIB), "an answer took only what was left");
    const counts = statuses.reduce((m, s, i) => ({ ...m, [`${loads[i].kind} ${s}`]: (m[`${loads[i].kind} ${s}`] ?? 0) + 1 }), {});
    assert.equal(counts["read 408"] ?? 0, heldReads, JSON.stringify(counts));
    assert.equal(counts["read 400"] ?? 0, overReads.length, "a read with no room: its key missing, 400 at once");
    assert.equal((counts["upload 408"] ?? 0), 8, "every upload ended at upload_timeout (held: stalled; streamed: aborted)");
    // Generous, finite: 2 MiB held, ten 256 KiB answers, sixteen connections.
    assert.ok(peak - before < 96, `workerd grew ${(peak - before).toFixed(1)} MB`);
  });
});

test("one client holds at most a quarter of memory_budget in body reads: past it a body is not read (its rule's missing-key policy: 400, an over_budget line), another client's is read", () =>
  withTollgate({ config: reading({ body_timeout: "3s", body_limit: 64 * KIB, memory_budget: 2 * MIB }) }, async (tg) => {
    const base = await tg.mf.ready;
    const stalled = [0, 1].map(() => stalledRead(base, { ip: "198.51.100.2", length: 64 * KIB, sent: 32 * KIB }));
    try {
      // Both have reached the Worker (its holds taken) well before their 3 s deadline.
      await sleep(1_000);
      // Its third read (64 KiB, whole) finds 128 KiB of memory left of its
      // quarter, 42 KiB of body: not read, refused at once (no key).
      const head = '{"user":"ann","pad":"';
      const body = head + "x".repeat(64 * KIB - head.length - 2) + '"}';
      const third = await tg.fetch("/read/x", { ip: "198.51.100.2", method: "POST", headers: { "content-type": "application/json" }, body });
      assert.equal(third.status, 400, "missing key: the rule rejects");
      await third.arrayBuffer();
      await tg.settled();
      const over = bodyLines(tg, "over_budget");
      assert.equal(over.length, 1);
      assert.deepEqual(
        [over[0].wanted, over[0].client_held, over[0].isolate_held, over[0].memory_budget],
        [64 * KIB, 2 * 3 * 64 * KIB, 2 * 3 * 64 * KIB, 2 * MIB],
        "two reads of 64 KiB at 3 bytes per byte: 384 KiB of its 512 KiB"
      );
      // Sent without a length (as dispatchFetch sends it), it may read what
      // is left (42 KiB), never the whole: over that, not read.
      assert.ok(over[0].buffered < 64 * KIB, JSON.stringify(over[0]));
      // Another client is read and counted.
      const other = await read(tg, "203.0.113.9", "carol");
      assert.equal(other.status, 200);
      await other.arrayBuffer();
      assert.ok(tg.origin.received.some((r) => r.body.toString() === JSON.stringify({ user: "carol" })), "forwarded intact");
    } finally {
      stalled.forEach((s) => s.stop());
    }
  }));

test("many addresses of one network (an IPv4 /24) hold at most half of memory_budget: past it their body reads are not read (400, an over_budget line naming the network's hold), another network's is read", () =>
  withTollgate({ config: reading({ body_timeout: "3s", body_limit: 64 * KIB, memory_budget: 2 * MIB }) }, async (tg) => {
    const base = await tg.mf.ready;
    // Four addresses of 198.51.100.0/24, two stalled reads each (192 KiB of
    // memory a read): within each address's quarter (512 KiB), but the
    // network's half (1 MiB) holds five of the eight.
    const stalled = Array.from({ length: 8 }, (_, i) => stalledRead(base, { ip: `198.51.100.${10 + (i % 4)}`, length: 64 * KIB, sent: 32 * KIB }));
    let statuses;
    try {
      // While they are held (3 s body_timeout), another network's read is read.
      await sleep(1_000);
      const other = await read(tg, "192.0.2.50", "erin");
      assert.equal(other.status, 200, "another network is read");
      await other.arrayBuffer();
      statuses = await within(15_000, Promise.all(stalled.map((s) => s.response)));
    } finally {
      stalled.forEach((s) => s.stop());
    }
    assert.notEqual(statuses, "no answer");
    const counts = statuses.reduce((m, s) => ({ ...m, [s]: (m[s] ?? 0) + 1 }), {});
    assert.deepEqual(counts, { 400: 3, 408: 5 }, JSON.stringify(statuses));
    await tg.settled();
    const over = bodyLines(tg, "over_budget");
    assert.equal(over.length, 3);
    assert.ok(over.every((e) => e.network_held === 5 * 3 * 64 * KIB && e.client_held <= 2 * 3 * 64 * KIB), JSON.stringify(over));
    assert.ok(tg.origin.received.some((r) => r.body.toString() === JSON.stringify({ user: "erin" })), "forwarded intact");
  }));

test("thirty clients stalling body reads: the isolate holds what memory_budget allows (ten), the other twenty are not read, and every stalled read ends at body_timeout", () =>
  withTollgate({ config: reading({ body_timeout: "3s", body_limit: 64 * KIB, memory_budget: 2 * MIB }) }, async (tg) => {
    const base = await tg.mf.ready;
    const stalled = Array.from({ length: 30 }, (_, i) => stalledRead(base, { ip: `203.0.${i + 1}.1`, length: 64 * KIB, sent: 32 * KIB }));
    let statuses;
    try {
      statuses = await within(15_000, Promise.all(stalled.map((s) => s.response)));
    } finally {
      stalled.forEach((s) => s.stop());
    }
    assert.notEqual(statuses, "no answer", "every client answered within the bound");
    const counts = statuses.reduce((m, s) => ({ ...m, [s]: (m[s] ?? 0) + 1 }), {});
    // 2 MiB / (3 × 64 KiB) = 10 reads held; the rest not read: no key, 400.
    assert.deepEqual(counts, { 400: 20, 408: 10 }, JSON.stringify(statuses));
    await tg.settled();
    assert.equal(bodyLines(tg, "over_budget").length, 20);
    assert.ok(bodyLines(tg, "over_budget").every((e) => e.isolate_held <= 2 * MIB), "never past the budget");
    // All given back: a body is read again.
    const r = await read(tg, "192.0.2.77", "dave");
    assert.equal(r.status, 200);
    await r.arrayBuffer();
  }));

// A watched answer (issue 51, 52): an answer read for its usage is read from
// the origin no faster than the client takes it, within a bounded buffer
// (src/glue/origin.rs: `watchBody`'s 64 KiB ahead of the client, batched as
// a `cut` rule's is, or, read behind the client as a rule's that never
// cuts once its events trickle, the runtime's tee), charged to its
// client's share of memory_budget until it ends. An origin that
// streams without end to a client that stopped reading is held back by
// that, and by the runtime's and the kernel's socket buffers, which are
// bounded too: what it manages to write stops growing. Without the
// backpressure (a reader that pulls the origin regardless, as a tee with
// an eager second branch does), it would grow as fast as loopback carries.
// `squeezed`: the client's quarter of memory_budget is held (but 2 bytes) by
// its own stalled body read, so the answer is watched with no read-ahead
// (a chunk read only once the client took the one before): still held
// back, still whole.
const heldBack = [
  { cut: false, squeezed: false, title: " (read behind the client)" },
  { cut: true, squeezed: false, title: " by a cut rule (batched, 64 KiB ahead)" },
  { cut: true, squeezed: true, title: " by a cut rule whose client's share of memory_budget is full (no read-ahead)" },
];
for (const { cut, squeezed, title } of heldBack)
test(`an answer read for its usage${title} that the client stops reading: the origin is read no further (what it writes stops growing, within 64 MiB), and every byte reaches the client once it reads again`, { timeout: 60_000 }, async () => {
  const EVENT = `data: ${JSON.stringify({ choices: [{ delta: { content: "x".repeat(16 * KIB) } }] })}\n\n`;
  let written = 0;
  let stop = false;
  const server = http.createServer(async (req, res) => {
    for await (const _ of req);
    res.writeHead(200, { "content-type": "text/event-stream" });
    // Read behind: first eight short events 30 ms apart (a model's pace,
    // from which a watch that may read behind its client does so).
    for (let i = 0; !cut && i < 8; i++) {
      const line = `data: ${JSON.stringify({ choices: [{ delta: { content: `w${i}` } }] })}\n\n`;
      res.write(line);
      written += line.length;
      await sleep(30);
    }
    // As fast as the connection takes it, until 256 MiB or told to stop.
    while (!stop && written < 256 * MIB) {
      const more = res.write(EVENT);
      written += EVENT.length;
      if (!more) await new Promise((r) => res.once("drain", r));
    }
    res.end(`data: ${JSON.stringify({ choices: [], usage: { total_tokens: 7 } })}\n\ndata: [DONE]\n\n`);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const metered = rule("ai", "/v1/*", { key: ["header:x-tenant"], limits: limit(1_000_000, "1d"), metering: { usage: "openai", reserve: 100, max: 100, cut }, counting: { mode: "response", reservation_ttl: "1m" } });
  // 2 MiB: a quarter is 524,288 bytes of memory; a 174,762-byte read at 3 a byte leaves 2.
  const squeeze = { ...config(metered, rule("by-user", "/read/*", { key: ["body:user"], limits: limit(100, "1m") })), memory_budget: 2 * MIB, body_limit: 174_762, body_timeout: "50s" };
  const ip = "198.51.100.80";
  let stalled = null;
  try {
    await withTollgate({ config: squeezed ? squeeze : config(metered), vars: { UPSTREAM: `http://127.0.0.1:${server.address().port}` }, workerOptions: { outboundService: undefined } }, async (tg) => {
      if (squeezed) {
        stalled = stalledRead(await tg.mf.ready, { ip, length: 174_762, sent: 32 * KIB });
        await sleep(1_000);
      }
      const res = await tg.fetch("/v1/chat", { ip, method: "POST", body: "{}", headers: { "x-tenant": "t" } });
      assert.equal(res.status, 200);
      const reader = res.body.getReader();
      let got = (await reader.read()).value.byteLength;
      // The client reads nothing more: the buffers on the way fill, then hold.
      await sleep(2_000);
      const filled = written;
      await sleep(1_500);
      const held = written;
      console.log(`# ${squeezed ? "cut, no read-ahead" : cut ? "cut (batched)" : "read behind"}: origin wrote ${filled} bytes after 2 s, ${held} after 3.5 s, to a client that read ${got}`);
      assert.ok(held < 64 * MIB, `the origin wrote ${held} bytes to a client that read ${got}`);
      assert.ok(held - filled <= 256 * KIB, `still written after the buffers filled: ${held - filled} bytes (${filled} → ${held})`);
      // Reading again, the client gets the rest, byte for byte, in order.
      stop = true;
      let tail = "";
      const decoder = new TextDecoder();
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        got += r.value.byteLength;
        tail = (tail + decoder.decode(r.value, { stream: true })).slice(-200);
      }
      assert.equal(got, written + `data: ${JSON.stringify({ choices: [], usage: { total_tokens: 7 } })}\n\ndata: [DONE]\n\n`.length, "every byte the origin wrote");
      assert.match(tail, /"total_tokens":7\}\}\n\ndata: \[DONE\]\n\n$/);
      stalled?.stop();
      await tg.settled();
      const lines = tg.logEvents().filter((e) => e.tollgate === "answer" && e.outcome === "over_budget");
      if (squeezed) {
        assert.equal(lines.length, 1, JSON.stringify(lines));
        assert.ok(lines[0].read_ahead <= 1 && lines[0].client_held >= 2 * MIB / 4 - 2, `no read-ahead left: ${JSON.stringify(lines[0])}`);
      } else {
        assert.deepEqual(lines, [], "the default budget holds it whole");
      }
    });
  } finally {
    stalled?.stop();
    await new Promise((r) => server.close(r));
  }
});
