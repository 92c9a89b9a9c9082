// Raw WebSocket frames (RFC 6455 §5) for the relay's tests (issue 52): a
// peer that fragments its messages, interleaves control frames, and sees
// every frame the relay sends it, which no WebSocket API does.
import net from "node:net";
import { randomBytes, createHash } from "node:crypto";

/** One frame: `opcode` (0 continuation, 1 text, 2 binary, 8 close, 9 ping), FIN unless `more`, masked when `mask` (a client's). */
export function frame(opcode, payload, { more = false, mask = false } = {}) {
  const body = Buffer.from(payload);
  const len = body.length;
  const head = [(more ? 0 : 0x80) | opcode];
  let ext = Buffer.alloc(0);
  if (len < 126) head.push((mask ? 0x80 : 0) | len);
  else if (len < 65536) {
    head.push((mask ? 0x80 : 0) | 126);
    ext = Buffer.alloc(2);
    ext.writeUInt16BE(len);
  } else {
    head.push((mask ? 0x80 : 0) | 127);
    ext = Buffer.alloc(8);
    ext.writeBigUInt64BE(BigInt(len));
  }
  if (!mask) return Buffer.concat([Buffer.from(head), ext, body]);
  const key = randomBytes(4);
  for (let i = 0; i < len; i++) body[i] ^= key[i % 4];
  return Buffer.concat([Buffer.from(head), ext, key, body]);
}

/** A close frame's payload: the code, then the UTF-8 reason. */
export function closePayload(code, reason) {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code);
  return Buffer.concat([b, Buffer.from(reason, "utf8")]);
}

/**
 * Reads frames off `sock` from `initial` on: `messages` (whole, in order:
 * `{ kind: "text"|"binary", data: Buffer, frames }`), `closed` (resolves
 * `[code, reason]`), `next(n)` (waits for `n` messages in all).
 */
export function framesOf(sock, initial = Buffer.alloc(0)) {
  let buf = initial;
  const messages = [];
  let partial = null;
  let wake = () => {};
  let closeWith;
  const closed = new Promise((r) => { closeWith = r; });
  const parse = () => {
    for (;;) {
      if (buf.length < 2) return;
      const fin = (buf[0] & 0x80) !== 0;
      const opcode = buf[0] & 0x0f;
      const masked = (buf[1] & 0x80) !== 0;
      let len = buf[1] & 0x7f;
      let at = 2;
      if (len === 126) {
        if (buf.length < 4) return;
        len = buf.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (buf.length < 10) return;
        len = Number(buf.readBigUInt64BE(2));
        at = 10;
      }
      const key = masked ? buf.subarray(at, at + 4) : null;
      if (masked) at += 4;
      if (buf.length < at + len) return;
      const payload = Buffer.from(buf.subarray(at, at + len));
      if (key) for (let i = 0; i < len; i++) payload[i] ^= key[i % 4];
      buf = buf.subarray(at + len);
      if (opcode === 8) {
        closeWith(len >= 2 ? [payload.readUInt16BE(0), payload.subarray(2).toString("utf8")] : [1005, ""]);
      } else if (opcode === 1 || opcode === 2) {
        partial = { kind: opcode === 1 ? "text" : "binary", parts: [payload], frames: 1 };
      } else if (opcode === 0 && partial) {
        partial.parts.push(payload);
        partial.frames++;
      } else continue; // ping, pong
      if ((opcode <= 2) && fin && partial) {
        messages.push({ kind: partial.kind, data: Buffer.concat(partial.parts), frames: partial.frames });
        partial = null;
      }
      wake();
    }
  };
  sock.on("data", (d) => { buf = Buffer.concat([buf, d]); parse(); });
  sock.on("close", () => { closeWith(["socket closed", ""]); wake(); });
  parse();
  const next = async (n, ms = 30_000) => {
    for (const end = Date.now() + ms; messages.length < n && Date.now() < end; ) await new Promise((r) => { wake = r; setTimeout(r, 200); });
    if (messages.length < n) throw new Error(`${n} messages arrived (got ${messages.length})`);
    return messages.slice(0, n);
  };
  return { messages, closed, next };
}

/** Splits the HTTP head off the first bytes of `sock`: `[head, rest]`. */
function headOf(sock) {
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0);
    const onData = (d) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf("\r\n\r\n");
      if (end < 0) return;
      sock.off("data", onData);
      resolve([got.subarray(0, end).toString("latin1"), got.subarray(end + 4)]);
    };
    sock.on("data", onData);
    sock.on("error", reject);
  });
}

const accept = (key) => createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");

/**
 * A raw WebSocket origin on 127.0.0.1: each upgrade is accepted and handed
 * to `onSession({ sock, frames, path })` (frames: {@link framesOf}).
 */
export async function rawOrigin(onSession) {
  const sockets = new Set();
  const server = net.createServer(async (sock) => {
    sockets.add(sock);
    sock.on("error", () => {});
    const [head, rest] = await headOf(sock);
    const key = /sec-websocket-key:\s*(\S+)/i.exec(head)?.[1] ?? "";
    sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\n\r\n`);
    onSession({ sock, frames: framesOf(sock, rest), path: head.split(" ")[1] });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((r) => { server.close(r); for (const s of sockets) s.destroy(); }),
  };
}

/** A raw client: the upgrade's handshake to `base` + `path` with `headers`, then `{ sock, status, frames }`. */
export async function rawClient(base, path, headers = {}) {
  const url = new URL(base);
  const sock = net.connect(Number(url.port), url.hostname);
  await new Promise((r, j) => { sock.once("connect", r); sock.once("error", j); });
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  sock.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\n${extra}\r\n`);
  const [head, rest] = await headOf(sock);
  return { sock, status: Number(head.split(" ")[1]), frames: framesOf(sock, rest) };
}
