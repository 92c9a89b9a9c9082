//! The origin side of the Worker (glue, `wasm32` only): reading a capped
//! copy of the body, receiving the body before a slot is reserved (and
//! watching the rest of a large one, [`crate::pipeline::upload`]), forwarding the original request (to the origin or to a
//! service binding, [`crate::config::upstream`]), and adding fields to the
//! upstream's response.

use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use crate::pipeline::machine::Hold;
use crate::pipeline::usage::BodyUsage;
use std::cell::RefCell;
use std::rc::Rc;
use worker::wasm_bindgen::closure::Closure;
use crate::pipeline::upload::{self, BodyRead, Charged, Holder, Receipt, Reception, UploadLimits, Want};
use crate::pipeline::verdict::LogEvent;
use crate::config::upstream::Upstream;
use worker::{js_sys, web_sys, Env};

/// Optional var naming a local origin (`http://127.0.0.1:8788`) to forward
/// to instead of the zone's origin; unset in production.
const UPSTREAM_VAR: &str = "UPSTREAM";

/// The `UPSTREAM` var (local development only), if set and not blank.
fn upstream_var(env: &Env) -> Option<std::rc::Rc<str>> {
    // Read once per isolate (vars are fixed for its life).
    crate::glue::isolate::bindings(|b| {
        b.upstream
            .get_or_init(|| env.var(UPSTREAM_VAR).ok().map(|v| v.to_string()).filter(|v| !v.trim().is_empty()).map(Into::into))
            .clone()
    })
}

/// Reads the body, for `body:` keys and form parameters, from a clone (the
/// original still reaches the origin intact), at most `limit` bytes, within
/// what the isolate's memory budget grants `client` and `timeout_ms`
/// ([`crate::pipeline::upload`]): the read, the hold to keep while the
/// request lasts (the bytes wait in the original's stream until
/// forwarded), and the line of a body the budget had no room for. A body
/// announced or found to be larger, or with no room, is not buffered
/// ([`BodyRead::Unusable`], planned as `Body::Unusable`: a `body:` key is
/// missing and the rule's missing-key policy applies; a form body is
/// unreadable and matches, fail safe, see `crate::pipeline::plan`); one
/// still arriving at `timeout_ms` is [`BodyRead::Stalled`] (408). The bytes
/// gather in JS and are copied into Wasm once, whole: Wasm memory, which
/// never shrinks, grows by one body at most.
pub(crate) async fn read_body(req: &web_sys::Request, budget: u32, client: &str, limit: u32, timeout_ms: u32, now_ms: i64) -> (BodyRead, Option<BudgetHold>, Option<LogEvent>) {
    if req.body().is_none() {
        return (BodyRead::Unusable, None, None);
    }
    let announced = req.headers().get("content-length").ok().flatten();
    let Some(want) = upload::body_wanted(limit, announced.as_deref()) else { return (BodyRead::Unusable, None, None) };
    let limits = UploadLimits { buffer: limit, timeout_ms };
    let taken = crate::glue::isolate::with_isolate(|isolate| isolate.memory_budget.take(budget, client, limits, want, Holder::BodyRead, now_ms));
    let hold = taken.hold.map(BudgetHold);
    let granted = match taken.reception {
        Reception::Read(granted) => granted.buffer,
        Reception::Stream => return (BodyRead::Unusable, hold, taken.note),
    };
    let read = match JsFuture::from(read_body_js(req, granted, timeout_ms)).await {
        Ok(pair) => {
            let pair: js_sys::Array = pair.unchecked_into();
            match (pair.get(0).as_string().as_deref(), pair.get(1).dyn_into::<js_sys::Uint8Array>()) {
                (Some("complete"), Ok(bytes)) => BodyRead::Read(bytes.to_vec()),
                (Some("stalled"), _) => BodyRead::Stalled,
                _ => BodyRead::Unusable,
            }
        }
        Err(_) => BodyRead::Unusable,
    };
    (read, hold, taken.note)
}

#[wasm_bindgen(inline_js = r#"
// Reads a clone of the body (the original, teed, keeps every byte for the
// origin) into one array of at most `limit` bytes, sized once (`limit` is
// what the budget granted: the announced length, or body_limit):
// ["complete", bytes], ["over", null] (one more byte came),
// ["stalled", null] (`ms` passed), ["broken", null].
export function readBody(request, limit, ms) {
  return readClone(request, limit, ms, true);
}

// Receives a clone of the body (the original, teed, keeps every byte for
// the origin) without keeping it: "complete", "over" (more than `buffer`
// bytes), "stalled" (`ms` passed), "broken", or "none" (no body).
export function receiveBody(request, buffer, ms) {
  if (request.body === null) return Promise.resolve("none");
  return readClone(request, buffer, ms, false).then(([word]) => word);
}

// readBody and receiveBody: a clone read to its end under a deadline and a
// cap, its bytes kept in one array sized once when `keep`.
function readClone(request, limit, ms, keep) {
  let reader;
  try {
    reader = request.clone().body.getReader();
  } catch (e) {
    return Promise.resolve(["broken", null]);
  }
  return new Promise((resolve) => {
    let into = keep ? new Uint8Array(limit) : null;
    let size = 0;
    let done = false;
    const finish = (word, cancel) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (cancel) reader.cancel().catch(() => {});
      const bytes = into !== null && word === "complete" ? into.subarray(0, size) : null;
      into = null;
      resolve([word, bytes]);
    };
    const timer = setTimeout(() => finish("stalled", true), ms);
    const pump = () => reader.read().then(({ done: end, value }) => {
      if (done) return;
      if (end) return finish("complete", false);
      if (size + value.byteLength > limit) return finish("over", true);
      if (into !== null) into.set(value, size);
      size += value.byteLength;
      pump();
    }, () => finish("broken", false));
    pump();
  });
}

// The body piped natively (runtime stream to runtime stream: no chunk
// passes through JS: a JS TransformStream here left every chunk
// behind as garbage, and six stalled 4 MiB bodies grew workerd by 44 MB)
// into a FixedLengthStream when the length was announced, else an
// IdentityTransformStream; the pipe's end says the body is all in.
export function watchUpload(request, ms) {
  const controller = new AbortController();
  const pipe = new AbortController();
  let finished = false;
  let fired = false;
  const timer = setTimeout(() => {
    if (finished) return;
    fired = true;
    const reason = new Error("tollgate: the upload did not finish in time");
    pipe.abort(reason);
    controller.abort(reason);
  }, ms);
  const length = (request.headers.get("content-length") ?? "").trim();
  const native = typeof IdentityTransformStream === "function";
  let body;
  if (native) {
    const through = /^[0-9]{1,15}$/.test(length) && typeof FixedLengthStream === "function"
      ? new FixedLengthStream(Number(length))
      : new IdentityTransformStream();
    request.body.pipeTo(through.writable, { signal: pipe.signal }).then(
      () => { finished = true; clearTimeout(timer); },
      () => {},
    );
    body = through.readable;
  } else {
    let stream;
    pipe.signal.addEventListener("abort", () => stream.error(pipe.signal.reason));
    body = request.body.pipeThrough(new TransformStream({
      start(c) { stream = c; },
      flush() { finished = true; clearTimeout(timer); },
    }));
  }
  const outbound = new Request(request.url, {
    method: request.method,
    headers: request.headers,
    body,
    redirect: request.redirect,
    signal: controller.signal,
    duplex: "half",
  });
  const stop = () => { clearTimeout(timer); return fired; };
  return [outbound, stop];
}

// The answer's body, watched (a concurrency slot, a usage reader that may
// cut): every byte reaches the client only once `onChunk` has seen it (a
// cut keeps the client from every byte after its event), in batches: the
// body is teed, one branch drained by the runtime alone (`drainer`: so the
// origin is pulled as it sends and each chunk queues on the other branch
// too, with no JS per chunk), the other read by the watch: the first read
// at once (time to first byte is the origin's), then one read BATCH_MS
// after the last, taking every byte queued (at most READ): one JS turn,
// one onChunk call (the usage reader: one Wasm call for many events) and
// one write to the client's native pipe for many chunks (a read of the
// origin's own stream returns one HTTP chunk; each batch wakes the isolate
// two or three times, a timer, a read, a write, and at 1 ms apart the
// batches, not the events, are most of what a watch costs: 25 ms between
// reads measured 5-10 ms less CPU a usage rule's 1,000-token answer than
// 10 ms, paired). A byte reaches the client at most BATCH_MS (CUT_BATCH_MS
// if the reader may cut, `cuts`; and its batch's handling) later than
// unwatched. Backpressure (memory): the drain lets the tee pull at most
// `ahead` bytes (what the isolate's memory budget granted, Rust's
// MemoryBudget::watch: 64 KiB, or less) past what the watch has read, and
// the watch reads only once the client took its last batch: an answer the
// client does not read holds one batch, `ahead` queued and the drain's
// `ahead`-byte buffer. With `ahead` under 16 KiB (DRAIN_MIN), no drain:
// each read pulls one chunk from the origin, once the client took the one
// before.
// `behind` (a usage reader that never cuts, no idle watch): batched while
// the events come fast (one write per batch is what costs least then), and
// read behind the client (`readBehind`: no JS per event) once SPARSE_READS
// of its last SPARSE_OF batches held SPARSE_EVENTS events or fewer
// (`onChunk` says how many each held): at a model's pace a batch holds one
// or two events, and its read and write cost two isolate entries for them
// (bench/pace.mjs, 10 ms batches: about 150 µs of workerd CPU per event at
// 20 ms apart, against about 30 read behind). An answer whose reading
// (`pace`, its rules' names) last trickled (`trickling`) is read behind
// from its first byte.
export function watchBody(response, idleMs, leftMs, onChunk, behind, ahead, pace, cuts) {
  if (response.body === null) return [response, Promise.resolve("ended")];
  if (behind && trickling.get(pace)) {
    const { readable, writable } = new IdentityTransformStream();
    return [new Response(readable, response), readBehind(response.body, writable, leftMs, onChunk, pace)];
  }
  const started = Date.now();
  let finish;
  const finished = new Promise((r) => { finish = r; });
  const [toDrain, toRead] = response.body.tee();
  const drain = drainer(toDrain, ahead);
  const reader = toRead.getReader({ mode: "byob" });
  // The client's body: a native pipe. Its readable side is the runtime's
  // own stream, pumped to the client without JS; each write resolves once
  // the client has taken it (the pipe holds nothing), which is how a
  // client that stopped reading is seen.
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  let ended = false;
  // When the write the client has not yet taken began (null: none waits).
  let waiting = null;
  // The watch stopped (its timers and drain), once: whether it was running.
  const halt = () => {
    if (ended) return false;
    ended = true;
    clearTimeout(idle);
    clearTimeout(lapse);
    drain.stop();
    return true;
  };
  const end = (word) => {
    if (!halt()) return false;
    finish(word);
    return true;
  };
  // The client's answer broken off, the origin's cancelled: the slot is free.
  const cut = (word) => {
    if (!end(word)) return;
    const reason = new Error(`tollgate: the answer was cut (${word})`);
    writer.abort(reason).catch(() => {});
    reader.cancel(reason).catch(() => {});
  };
  const lapse = setTimeout(() => cut("lapsed"), leftMs);
  // One timer, not one per batch: a batch the client has not taken idleMs
  // after it was written is one the client stopped reading.
  let idle;
  const check = () => {
    const since = waiting === null ? 0 : Date.now() - waiting;
    if (since >= idleMs) return cut("idle");
    idle = setTimeout(check, idleMs - since);
  };
  idle = setTimeout(check, idleMs);
  const give = async (bytes) => {
    waiting = Date.now();
    await writer.write(bytes);
    waiting = null;
  };
  // One batch to the client, as the origin sent it unless the reader cuts;
  // resolves with the events the reader found in it (0 with no reader).
  const pass = async (batch) => {
    const said = onChunk ? onChunk(batch) : undefined;
    if (!Array.isArray(said)) {
      await give(batch);
      return said ?? 0;
    }
    reader.cancel(new Error("tollgate: the answer passed its reserve (cut)")).catch(() => {});
    await give(batch.subarray(0, said[0]));
    await give(said[1]);
    if (!ended) await writer.close();
    end("cut");
    return 0;
  };
  // Read behind from here on (`behind`, once the batches show the events
  // trickle): the watch's timers and drain stopped, the client's pipe and
  // the unread rest of the body handed to `readBehind`, whose word ends the
  // answer. Between two reads, so every byte read so far has reached the
  // client's pipe and the rest is unread.
  const goBehind = () => {
    halt();
    reader.releaseLock();
    writer.releaseLock();
    trickling.set(pace, true);
    readBehind(toRead, writable, leftMs - (Date.now() - started), onChunk, pace).then(finish);
  };
  (async () => {
    // One buffer, read into again and again (the reader copies what it
    // is handed into Wasm, the client's pipe once the write resolved).
    let buffer = new ArrayBuffer(READ);
    // Whether each of the last SPARSE_OF batches held SPARSE_EVENTS or
    // fewer (a bit each, the newest lowest; not the first, the answer's
    // opening).
    let recent = 0;
    let batches = 0;
    for (;;) {
      let next;
      let events;
      try {
        drain.waiting(true);
        next = await reader.read(new Uint8Array(buffer));
      } catch (e) {
        if (end("failed")) writer.abort(e).catch(() => {});
        return;
      } finally {
        drain.waiting(false);
      }
      if (ended) return;
      const at = Date.now();
      try {
        if (next.done) {
          // Batched to its end: the reading's answers come fast.
          if (behind && batches > SPARSE_OF) trickling.set(pace, false);
          await writer.close();
          end("ended");
          return;
        }
        events = await pass(next.value);
      } catch (e) {
        // The client went away (its end of the pipe is gone).
        if (end("cancelled")) reader.cancel(e).catch(() => {});
        return;
      }
      if (ended) return;
      buffer = next.value.buffer;
      batches += 1;
      if (behind) {
        if (batches > 1) recent = ((recent << 1) | (events <= SPARSE_EVENTS ? 1 : 0)) & ((1 << SPARSE_OF) - 1);
        if (ones(recent) >= SPARSE_READS) return goBehind();
      }
      const rest = (cuts ? CUT_BATCH_MS : BATCH_MS) - (Date.now() - at);
      // No rest without a drain: nothing would gather meanwhile.
      if (next.value.byteLength < READ && rest > 0 && drain.live()) await new Promise((r) => setTimeout(r, rest));
    }
  })();
  return [new Response(readable, response), finished];
}

// The drain of a watched answer: its branch of the tee piped natively into
// an IdentityTransformStream read in `readAtLeast(ahead)` bytes (one JS
// turn per `ahead` bytes, the buffer reused), so the tee pulls the origin
// as it sends without JS per chunk. Each read lets the tee run `ahead`
// bytes ahead, no further: `run` issues the next one (the watch calls it
// before each of its reads: the origin is pulled at most `ahead` bytes
// past what the watch took), and so does a read that ends while the
// watch waits for bytes (`waiting(true)`: it has taken all there is).
// `stop`: cancelled, the origin then pulled only by the watch's reads;
// `ahead` under DRAIN_MIN (the tee's own pull, 16 KiB: a smaller drain
// read would take a turn for less than a chunk): no drain. `live`: whether
// it still runs.
function drainer(branch, ahead) {
  if (ahead < DRAIN_MIN) {
    branch.cancel().catch(() => {});
    return { run() {}, waiting() {}, stop() {}, live: () => false };
  }
  const through = new IdentityTransformStream();
  const pipe = new AbortController();
  branch.pipeTo(through.writable, { signal: pipe.signal }).catch(() => {});
  const reader = through.readable.getReader({ mode: "byob" });
  let buffer = new ArrayBuffer(ahead);
  let armed = false;
  let off = false;
  let starved = false;
  const run = () => {
    if (off || armed) return;
    armed = true;
    reader.readAtLeast(ahead, new Uint8Array(buffer)).then(({ done, value }) => {
      armed = false;
      if (done) return stop();
      buffer = value.buffer;
      if (starved) run();
    }, () => { off = true; });
  };
  const stop = () => {
    if (off) return;
    off = true;
    const reason = new Error("tollgate: the drain stopped");
    reader.cancel(reason).catch(() => {});
    pipe.abort(reason);
  };
  return { run, waiting: (flag) => { starved = flag; if (flag) run(); }, stop, live: () => !off };
}

// The rest of an answer read behind its client (`body`, what the batched
// watch has not read; `writable`, the client's pipe, every byte before
// `body`'s already through it; `leftMs`, the time left to the lapse):
// `body` teed, one branch piped natively to the
// client (no JS per chunk; abortable, for the lapse), the other read by
// the usage reader, resting after a read that found less than READ
// bytes, so that the events gather in the tee and one read takes many:
// REST_MIN ms at first, twice as long after each read that found less
// than half of READ (up to REST_MAX: a trickling stream costs one read
// turn in REST_MAX, whatever its events' pace), back to REST_MIN after one
// that found more (a fast origin queues at most about REST_MIN of its
// bytes in the tee; no rest after a full read). The client never waits
// on a rest: its branch is piped by the runtime. The runtime's tee holds
// the branches within a bounded distance (an origin streaming to a
// client that reads nothing is held back, as the batched watch holds it:
// tests/worker/memory.test.mjs). Resolves with the word:
// `failed` (the origin's stream), else `cancelled` (the client went
// away: the reading branch is cancelled with it), `lapsed`, or `ended`
// once the client has every byte and the reader has read them all.
// (A `readAtLeast` on the reading branch would take fewer turns still, but
// the runtime's tee then pulls the origin that many bytes at a time and
// holds the client's branch back with it: the client got a 50-event answer
// whole at its end.)
function readBehind(body, writable, leftMs, onChunk, pace) {
  const [toClient, toRead] = body.tee();
  const reader = toRead.getReader({ mode: "byob" });
  const stop = new AbortController();
  let finish;
  const finished = new Promise((r) => { finish = r; });
  let lapsed = false;
  const lapse = setTimeout(() => {
    lapsed = true;
    const reason = new Error("tollgate: the answer was cut (lapsed)");
    stop.abort(reason);
    reader.cancel(reason).catch(() => {});
  }, leftMs);
  let delivered = false;
  // Events read, when the first read came back, when the client had all.
  let events = 0;
  let began = null;
  let sentAt = 0;
  const sent = toClient.pipeTo(writable, { signal: stop.signal }).then(
    () => {
      delivered = true;
      sentAt = Date.now();
      return "ended";
    },
    () => {
      reader.cancel(new Error("tollgate: the client went away")).catch(() => {});
      return "cancelled";
    },
  );
  const read = (async () => {
    try {
      // One buffer, read into again and again (the reader copies what it
      // is handed into Wasm): no garbage per read.
      let buffer = new ArrayBuffer(READ);
      let rest = REST_MIN;
      for (;;) {
        const { done, value } = await reader.read(new Uint8Array(buffer));
        if (done) return "ended";
        events += onChunk(value) || 0;
        if (began === null) began = Date.now();
        buffer = value.buffer;
        rest = value.byteLength < READ / 2 ? Math.min(REST_MAX, rest * 2) : REST_MIN;
        // No rest once the client has it all: what is left is read at
        // once, and the answer settles as soon as the watched one would.
        if (value.byteLength < READ && !delivered) await Promise.race([new Promise((r) => setTimeout(r, rest)), sent]);
      }
    } catch {
      return "failed";
    }
  })();
  Promise.all([sent, read]).then(([s, r]) => {
    clearTimeout(lapse);
    // Its events came TRICKLE_MS apart or more, from the first read to
    // the client's last byte: the reading's next answer starts behind.
    if (s === "ended" && r === "ended" && events > SPARSE_OF) trickling.set(pace, sentAt - began >= events * TRICKLE_MS);
    finish(lapsed ? "lapsed" : r === "failed" ? "failed" : s);
  });
  return finished;
}

// The reading branch of an answer read behind the client reads at most
// READ bytes at once, and rests REST_MIN to REST_MAX ms after a read
// that found fewer (it had caught up).
const REST_MIN = 20;
const REST_MAX = 100;
const READ = 65536;
// A watched answer that may be read behind is, once SPARSE_READS of its
// last SPARSE_OF batches held SPARSE_EVENTS events or fewer (its events
// come about BATCH_MS / SPARSE_EVENTS = 12.5 ms apart or more: a batch
// then costs a read, a Wasm call and a write for one or two events). A
// pause (a model's first token after its prompt) is one such batch, the
// read that waited through it, and does not switch it.
const SPARSE_READS = 3;
const SPARSE_OF = 4;
const SPARSE_EVENTS = 2;
// An answer read behind its client whose events came this far apart on
// average (ms) or more leaves its reading trickling (`trickling`): the
// next starts behind its client; closer, batched. (Between this and
// BATCH_MS a reading stays as it is.)
const TRICKLE_MS = 5;
// Whether each reading's (its rules' names) last answer trickled: true,
// its next answer is read behind its client from its first byte; else
// batched first, behind once SPARSE. Its keys are the configuration's
// rules, a bounded set; what a client's answers teach it changes what
// later answers cost, never what they are charged.
const trickling = new Map();
// The set bits of a batch history (`recent`).
const ones = (bits) => {
  let n = 0;
  for (; bits; bits &= bits - 1) n += 1;
  return n;
};

// A watched answer's batches: one read this long (ms) after the last (the
// longest a byte waits for its batch: a token 25 ms late is below what a
// reader of a streamed answer sees; fewer batches are less CPU).
const BATCH_MS = 25;
// The same for an answer a reader may cut: the origin is cancelled at the
// first read after the report that passed the reserve, so what an origin
// that ignores its cap makes past it (neither passed on nor reported) is
// what it makes in this long; 25 ms would let it make 2.5 times as much.
const CUT_BATCH_MS = 10;
// The least read-ahead a watched answer is drained with (bytes).
const DRAIN_MIN = 16384;

// `finished`, which calls `release` (the answer's hold in the memory
// budget given back) once it resolves, with its word.
export function afterWatch(finished, release) {
  return finished.then((word) => {
    release();
    return word;
  });
}

// A 101's WebSocket, relayed through a pair whose client end goes to the
// client: the promise resolves once either side closed (or failed), or
// leftMs passed (both closed), or the relay had no room for a message in
// what the isolate's memory budget grants (`overrun`, both closed).
//
// Every message is passed on as it came: text as text, binary as binary,
// whole (a fragmented message arrives here reassembled, and is sent as one
// frame: RFC 6455 §5.4 lets an intermediary refragment), and a close's
// code and reason go to the other side as they came (a code no endpoint
// may send, 1005 or 1006, goes as a close without one). From
// compatibility date 2026-03-17 (`websocket_standard_binary_type`, on at
// the shipped date) a binary message arrives as a Blob unless binaryType
// says otherwise, and send(Blob) sends its string form (`[object Blob]`):
// both sockets take ArrayBuffers.
//
// What the relay holds: workerd's send() copies a message into
// the socket's outgoing queue, unbounded, and tells no one how much is
// queued (no bufferedAmount, no promise, no WebSocketStream: workerd
// 1.20260426 and its source to 2026-08), nor can a relay stop reading, nor
// take back what it queued (close() waits behind it). So each message is
// charged to the isolate's memory budget before it is sent
// (`charge(side, bytes)`, Rust's MemoryBudget::relay: the client's share,
// drained at what its peer is counted as reading), and the answer says
// pass, or end the session (`cut`: no room; `too_big`: one message over a
// client's share). `charge(-1, 0)` ends it; its charge drains on.
export function relaySession(response, leftMs, session, charge) {
  const upstream = response.webSocket;
  if (!upstream || typeof charge !== "function") return [response, Promise.resolve("ended")];
  const [client, server] = Object.values(new WebSocketPair());
  upstream.binaryType = "arraybuffer";
  server.binaryType = "arraybuffer";
  upstream.accept();
  server.accept();
  let finish;
  const finished = new Promise((r) => { finish = r; });
  let over = false;
  const close = (socket, code, reason) => {
    try { socket.close(code, reason); } catch { try { socket.close(); } catch {} }
  };
  const end = (word, code, reason) => {
    if (over) return;
    over = true;
    clearTimeout(lapse);
    charge(-1, 0);
    close(upstream, code, reason);
    close(server, code, reason);
    finish(word);
  };
  const lapse = setTimeout(() => end("lapsed", 1013, "tollgate: the session's slot lapsed (reservation_ttl)"), leftMs);
  for (const [side, from, to] of [[0, upstream, server], [1, server, upstream]]) {
    const pass = (data) => {
      if (over) return;
      const verdict = charge(side, messageSize(data));
      if (verdict === "too_big") return end("overrun", 1009, "tollgate: a message larger than the relay may hold");
      if (verdict !== "pass") return end("overrun", 1013, "tollgate: a side is not reading (no room left to relay)");
      try { to.send(data); } catch {}
    };
    // Blobs (a runtime that ignores binaryType) are read in order: a later
    // message waits for the bytes of an earlier Blob.
    let queue = null;
    from.addEventListener("message", (e) => {
      const data = e.data;
      if (queue === null && !(data instanceof Blob)) return pass(data);
      queue = (queue ?? Promise.resolve())
        .then(() => (data instanceof Blob ? data.arrayBuffer() : data))
        .then(pass, () => end("failed", 1011, "tollgate: the session failed"));
    });
    from.addEventListener("close", (e) => end("closed", e.code, e.reason));
    from.addEventListener("error", () => end("failed", 1011, "tollgate: the session failed"));
  }
  const headers = new Headers(response.headers);
  for (const name of ["upgrade", "connection", "sec-websocket-accept", "sec-websocket-extensions"]) headers.delete(name);
  return [new Response(null, { status: 101, webSocket: client, headers }), finished];
}

// A message's size in bytes: binary as is, text as its UTF-8 (what the
// outgoing queue holds).
function messageSize(data) {
  if (typeof data !== "string") return data.byteLength ?? data.size ?? 0;
  let bytes = data.length;
  for (let i = 0; i < data.length; i++) {
    const unit = data.charCodeAt(i);
    if (unit >= 0x800) bytes += unit >= 0xd800 && unit < 0xdc00 ? 1 : 2;
    else if (unit >= 0x80) bytes += 1;
  }
  return bytes;
}
"#)]
extern "C" {
    /// Reads a clone of `request`'s body (the original, teed, keeps every
    /// byte) into one array sized once, until it ends (`["complete",
    /// bytes]`), passes `limit` bytes (`["over", null]`, the clone
    /// cancelled), `ms` pass (`["stalled", null]`, cancelled) or it fails
    /// (`["broken", null]`).
    #[wasm_bindgen(js_name = readBody)]
    fn read_body_js(request: &web_sys::Request, limit: u32, ms: u32) -> js_sys::Promise;

    /// Reads a clone of `request`'s body (the original, teed, keeps every
    /// byte) until it ends (`complete`), passes `buffer` bytes (`over`, the
    /// clone cancelled), `ms` pass (`stalled`, cancelled) or it fails
    /// (`broken`); `none` when there is no body. Nothing is copied into
    /// Wasm: the bytes wait in the original's stream.
    #[wasm_bindgen(js_name = receiveBody)]
    fn receive_body_js(request: &web_sys::Request, buffer: u32, ms: u32) -> js_sys::Promise;

    /// A request like `request` (URL, method, headers, body; the length
    /// kept when announced) whose body streams through a watch: unless the
    /// body has ended within `ms`, the request is aborted. With the
    /// function that stops the watch, saying whether it fired.
    #[wasm_bindgen(catch, js_name = watchUpload)]
    fn watch_upload_js(request: &web_sys::Request, ms: u32) -> Result<js_sys::Array, JsValue>;

    /// A response like `response` whose body streams through a watch, and
    /// a promise that resolves once the body is done: `ended`, `failed`,
    /// `cancelled` (the client went away), or cut: `idle` (a chunk waited
    /// `idle_ms` for the client to take it) or `lapsed` (`left_ms` passed).
    /// At once (`ended`) for no body (a 101's session is relayed by
    /// [`relay_session`], not watched). `on_chunk` (or null) is handed each batch of the origin's
    /// bytes (in order, every byte once, before any of them reaches the
    /// client: the first read at once, then one read 25 ms after the last,
    /// 10 ms if `cuts` (a reader that may cut: the origin is cancelled
    /// sooner after the report that passed the reserve), taking what
    /// queued meanwhile, at most 64 KiB) and returns the
    /// number of events the batch completed, or `[keep, event]`: pass the
    /// batch's first `keep` bytes and `event`, end the client's stream,
    /// cancel the origin's (`cut`).
    ///
    /// `behind` (with an `on_chunk` that never cuts, and no idle watch):
    /// batched while the events come fast, then, once three of its last
    /// four batches held two events or fewer (the events come about 12 ms
    /// apart or more), the rest of the body teed, the client's branch piped
    /// natively, the other read by `on_chunk` in batches behind it
    /// (`readBehind`); read so from the first byte when the last answer
    /// read under the same `pace` (the reading rules' names) trickled.
    ///
    /// `ahead`: the bytes the batched watch lets the origin be pulled past
    /// what it has read (what the memory budget granted; 0: a chunk once
    /// the client took the one before, no batching).
    #[wasm_bindgen(catch, js_name = watchBody)]
    fn watch_body_js(response: &web_sys::Response, idle_ms: f64, left_ms: f64, on_chunk: &JsValue, behind: bool, ahead: u32, pace: &str, cuts: bool) -> Result<js_sys::Array, JsValue>;

    /// `response`'s WebSocket session relayed through a new pair, and a
    /// promise that resolves once it is done: `closed` (by either side,
    /// its code and reason passed on), `failed`, `lapsed` (`left_ms`
    /// passed) or `overrun` (no room for a message: both sides closed,
    /// 1013, or 1009 for one over a client's share). `charge(side, bytes)`
    /// is asked before each message is passed on ([`relay_charge`]).
    #[wasm_bindgen(catch, js_name = relaySession)]
    fn relay_session_js(response: &web_sys::Response, left_ms: f64, session: f64, charge: &JsValue) -> Result<js_sys::Array, JsValue>;

    /// `finished`, calling `release` once it resolved, with the same word.
    #[wasm_bindgen(js_name = afterWatch)]
    fn after_watch_js(finished: &js_sys::Promise, release: &JsValue) -> js_sys::Promise;
}

/// `response` with its body watched, or its WebSocket session relayed, as
/// `hold` says ([`crate::count::slots`]: a concurrency slot is held until
/// the answer has been sent, or the session closed): the response to send,
/// and what resolves, with the word of why, once it is done. `None`: no
/// hold, or the runtime refused to build it.
///
/// What the watch holds of a body is charged to `charged`'s share of the
/// isolate's memory budget until the answer is done
/// ([`MemoryBudget::watch`](crate::pipeline::upload::MemoryBudget::watch):
/// read behind the client, or batched with as much read-ahead as the room
/// holds, down to none; never unwatched).
pub(crate) fn watch_body(response: &web_sys::Response, hold: Hold, reading: Option<&UsageFeed>) -> Option<(web_sys::Response, js_sys::Promise)> {
    use crate::glue::isolate::{now_ms, with_isolate, write_logs};
    let (idle_ms, left_ms, charged) = match hold {
        Hold::Headers => return None,
        Hold::Body { idle_ms, left_ms, charged } => (idle_ms, left_ms, charged),
        Hold::Session { left_ms, charged } => return relay_session(response, left_ms, &charged),
    };
    // What `watchBody` returns, always: no `instanceof` checks to carry.
    let on_chunk = reading.map_or(JsValue::NULL, |feed| feed.closure.as_ref().clone());
    // Read behind the client when nothing needs to see a byte before it
    // does: no reader cuts, and no idle watch shorter than the lapse.
    let cuts = reading.is_some_and(|feed| feed.usage.borrow().cuts());
    let behind = reading.is_some() && !cuts && idle_ms >= left_ms;
    let mut watch = crate::pipeline::upload::AnswerWatch { hold: None, ahead: 0, behind, note: None };
    if response.body().is_some() {
        watch = with_isolate(|isolate| isolate.memory_budget.watch(charged.budget, &charged.client, behind, left_ms, now_ms()));
    }
    write_logs(watch.note.as_slice());
    // Given back when dropped: at once if the watch is not built, else once it is done.
    let memory = watch.hold.map(BudgetHold);
    let pace = reading.map_or("", |feed| feed.pace.as_str());
    let pair = watch_body_js(response, idle_ms as f64, left_ms as f64, &on_chunk, watch.behind, watch.ahead, pace, cuts).ok()?;
    let release = Closure::once_into_js(move || drop(memory));
    let finished = after_watch_js(&pair.get(1).unchecked_into(), &release);
    Some((pair.get(0).unchecked_into(), finished))
}

/// `response`'s WebSocket session relayed for at most `left_ms`, what it
/// holds for each side charged to `charged`'s share of the isolate's
/// memory budget ([`MemoryBudget::relay`](crate::pipeline::upload::MemoryBudget::relay)),
/// drained as its peers are counted as reading, even after it ended.
fn relay_session(response: &web_sys::Response, left_ms: u64, charged: &Charged) -> Option<(web_sys::Response, js_sys::Promise)> {
    use crate::glue::isolate::{now_ms, with_isolate};
    let session = with_isolate(|isolate| isolate.memory_budget.open_session(&charged.client, left_ms, now_ms()));
    let charge = relay_charge(session, charged.budget);
    let Ok(pair) = relay_session_js(response, left_ms as f64, session as f64, &charge) else {
        with_isolate(|isolate| isolate.memory_budget.end_session(session));
        return None;
    };
    Some((pair.get(0).unchecked_into(), pair.get(1).unchecked_into()))
}

/// The function `relaySession` asks before it passes a message of `bytes`
/// to side `side` of `session`: its verdict's word
/// ([`RelayVerdict::word`](crate::pipeline::upload::RelayVerdict::word));
/// a negative `side` ends the session (its charge drains on). Owned by JS
/// (it lives as long as the session's listeners).
fn relay_charge(session: u64, budget: u32) -> JsValue {
    use crate::glue::isolate::{now_ms, with_isolate};
    let charge = move |side: f64, bytes: f64| -> JsValue {
        if side < 0.0 {
            with_isolate(|isolate| isolate.memory_budget.end_session(session));
            return JsValue::UNDEFINED;
        }
        // `bytes` is a message's length (a JS number): whole, at most 2^53.
        let verdict = with_isolate(|isolate| isolate.memory_budget.relay(budget, session, side as usize, bytes as u64, now_ms()));
        JsValue::from_str(verdict.word())
    };
    Closure::<dyn FnMut(f64, f64) -> JsValue>::new(charge).into_js_value()
}

/// Receives the body before a failures-only rule reserves
/// ([`crate::pipeline::upload`]): how far it got within `limits`.
async fn receive_body(req: &web_sys::Request, limits: UploadLimits) -> Receipt {
    match JsFuture::from(receive_body_js(req, limits.buffer, limits.timeout_ms)).await {
        Ok(word) => Receipt::from_word(&word.as_string().unwrap_or_default()),
        Err(_) => Receipt::Broken,
    }
}

/// A body's bytes held in the isolate's memory budget (the core's
/// [`crate::pipeline::isolate::Isolate::memory_budget`]), given back when
/// dropped (the request ended, however: keep it until the forward
/// returned or tollgate answered).
pub(crate) struct BudgetHold(u64);

impl Drop for BudgetHold {
    fn drop(&mut self) {
        crate::glue::isolate::with_isolate(|isolate| isolate.memory_budget.give_back(self.0));
    }
}

/// Receives the upload within what the isolate's budget grants `client`
/// for `want` ([`crate::pipeline::upload`]): the receipt (`OverBuffer` at
/// once when there is no room), the hold to keep while the request lasts,
/// and the line to log when less than wanted was granted.
pub(crate) async fn receive_upload(
    req: &web_sys::Request,
    budget: u32,
    client: &str,
    limits: UploadLimits,
    want: Want,
    now_ms: i64,
) -> (Receipt, Option<BudgetHold>, Option<LogEvent>) {
    // No body (a GET, a WebSocket upgrade): nothing to hold. Taken, the
    // buffer would stay held until the forward returned, for nothing.
    if req.body().is_none() {
        return (Receipt::NoBody, None, None);
    }
    let taken = crate::glue::isolate::with_isolate(|isolate| isolate.memory_budget.take(budget, client, limits, want, Holder::Upload, now_ms));
    let hold = taken.hold.map(BudgetHold);
    let receipt = match taken.reception {
        Reception::Read(granted) => receive_body(req, granted).await,
        Reception::Stream => Receipt::OverBuffer,
    };
    (receipt, hold, taken.note)
}

/// A body over the buffer, forwarded as it streams in, under a deadline
/// ([`crate::pipeline::upload`]).
pub(crate) struct UploadWatch {
    /// What to forward instead of the original.
    pub(crate) request: web_sys::Request,
    pub(crate) stop: WatchStop,
}

/// Ends an [`UploadWatch`].
pub(crate) struct WatchStop(js_sys::Function);

impl WatchStop {
    /// Ends the watch (call it as soon as the forward has returned):
    /// whether the deadline passed first, i.e. the forward was aborted.
    pub(crate) fn fired(&self) -> bool {
        self.0.call0(&JsValue::NULL).ok().and_then(|fired| fired.as_bool()).unwrap_or(false)
    }
}

/// Puts `req`'s body under a watch of `left_ms`; `None` when the runtime
/// refuses to build the watched request (then it must not be forwarded:
/// its slot would wait on the upload unbounded).
pub(crate) fn watch_upload(req: &web_sys::Request, left_ms: u32) -> Option<UploadWatch> {
    let pair = watch_upload_js(req, left_ms).ok()?;
    let request = pair.get(0).dyn_into::<web_sys::Request>().ok()?;
    let stop = pair.get(1).dyn_into::<js_sys::Function>().ok()?;
    Some(UploadWatch { request, stop: WatchStop(stop) })
}

/// Forwards the original request, unchanged but for tollgate's own
/// credentials ([`without_own_credentials`]): to the Worker behind the
/// config's service binding (`upstream = { service = "APP" }`:
/// `env.APP.fetch(request)`, the very request object), else to the zone's
/// origin, or to `UPSTREAM` (scheme, host and port replaced; path, query,
/// method, headers and body kept) when that var is set. `admin_token`: the
/// `TOLLGATE_ADMIN_TOKEN` secret (`None`: the admin API is off, tollgate
/// has no credential of its own to take out).
pub(crate) async fn forward(
    req: web_sys::Request,
    env: &Env,
    upstream: &Upstream,
    admin_token: Option<&str>,
) -> worker::Result<web_sys::Response> {
    let req = match admin_token {
        Some(token) => without_own_credentials(req, token)?,
        None => req,
    };
    if let Upstream::Service(binding) = upstream {
        let service: worker::worker_sys::Fetcher = env.service(binding)?.into_rpc();
        let response = JsFuture::from(service.fetch(&req)?).await?;
        return Ok(response.unchecked_into());
    }
    let outbound: web_sys::Request = match upstream_var(env) {
        // The same JS object (a handle clone, not `Request.clone()`, which
        // would tee the body).
        None => req,
        Some(origin) => {
            let url = worker::Url::parse(&req.url())?;
            let mut target = format!("{}{}", origin.trim_end_matches('/'), url.path());
            if let Some(q) = url.query() {
                target.push('?');
                target.push_str(q);
            }
            let original = &req;
            let init = web_sys::RequestInit::new();
            init.set_method(&original.method());
            init.set_headers(&original.headers());
            init.set_redirect(web_sys::RequestRedirect::Manual);
            if let Some(body) = original.body() {
                init.set_body(&body);
            }
            web_sys::Request::new_with_str_and_init(&target, &init).map_err(worker::Error::from)?
        }
    };
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let response = JsFuture::from(global.fetch_with_request(&outbound)).await?;
    Ok(response.unchecked_into())
}

/// `req` without tollgate's own credentials, as
/// [`own_credentials`](crate::pipeline::credentials::own_credentials) says
/// (the session cookie's pairs, an `Authorization` with the admin token):
/// the very object when it carries neither (two header reads), else a new
/// `Request` over it (`new Request(req, { headers })`: the same method, URL,
/// body stream, `redirect` and `cf`) with those fields changed, nothing else.
fn without_own_credentials(req: web_sys::Request, token: &str) -> worker::Result<web_sys::Request> {
    use crate::pipeline::credentials::CookieRewrite;
    let headers = req.headers();
    let (cookie, authorization) = (headers.get("cookie")?, headers.get("authorization")?);
    let strip = crate::pipeline::credentials::own_credentials(token, cookie.as_deref(), authorization.as_deref());
    if strip.nothing() {
        return Ok(req);
    }
    let fresh = web_sys::Headers::new_with_headers(&headers)?;
    match strip.cookie {
        CookieRewrite::Keep => {}
        CookieRewrite::Remove => fresh.delete("cookie")?,
        CookieRewrite::Set(kept) => fresh.set("cookie", &kept)?,
    }
    if strip.authorization {
        fresh.delete("authorization")?;
    }
    let init = web_sys::RequestInit::new();
    init.set_headers(&fresh);
    Ok(web_sys::Request::new_with_request_and_init(&req, &init)?)
}

/// The origin's response with `fields` added and the fields named `hidden`
/// removed (its headers are immutable, so status, headers and body stream
/// move to a new response).
pub(crate) fn with_fields(raw: web_sys::Response, fields: &[(String, String)], hidden: &[&str]) -> worker::Result<web_sys::Response> {
    let headers = web_sys::Headers::new_with_headers(&raw.headers()).map_err(worker::Error::from)?;
    for name in hidden {
        headers.delete(name).map_err(worker::Error::from)?;
    }
    for (name, value) in fields {
        headers.append(name, value).map_err(worker::Error::from)?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(raw.status());
    init.set_status_text(&raw.status_text());
    init.set_headers(&headers);
    web_sys::Response::new_with_opt_readable_stream_and_init(raw.body().as_ref(), &init).map_err(worker::Error::from)
}

/// The usage readers of one answer's body
/// ([`crate::pipeline::usage`]) and the function `watchBody` hands each
/// batch of chunks to: the batch copied into Wasm and read in one call
/// (the reader's state carries across chunks and batches alike); a cut
/// answered as `[keep, event]`, `keep` counted in the batch. Keep it until the watch is done.
pub(crate) struct UsageFeed {
    pub(crate) usage: Rc<RefCell<BodyUsage>>,
    closure: Closure<dyn FnMut(js_sys::Uint8Array) -> JsValue>,
    /// What the watch learns the pace of answers under (`trickling`):
    /// the reading rules' names.
    pace: String,
}

impl UsageFeed {
    pub(crate) fn new(usage: BodyUsage) -> UsageFeed {
        let pace = usage.rules().collect::<Vec<_>>().join(",");
        let usage = Rc::new(RefCell::new(usage));
        let read = usage.clone();
        let closure = Closure::new(move |chunk: js_sys::Uint8Array| -> JsValue {
            let Ok(mut reading) = read.try_borrow_mut() else { return JsValue::UNDEFINED };
            let before = reading.events();
            match reading.feed(&chunk.to_vec()) {
                None => JsValue::from(reading.events().saturating_sub(before) as f64),
                Some(cut) => js_sys::Array::of2(&JsValue::from(cut.keep as f64), &js_sys::Uint8Array::from(&cut.event[..])).into(),
            }
        });
        UsageFeed { usage, closure, pace }
    }
}
