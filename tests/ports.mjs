// Shared by the test suites that start servers of their own (tests/dev,
// tests/package, tests/origins): loopback ports only.
//
// A port is handed out from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 here): a port the OS
// picked (listen on 0) and released can be picked again by any process that
// binds port 0 before our server binds it, and workerd binds several such
// sockets while `wrangler dev` starts. CI once met exactly that: the admin
// Worker's port answered as the zone's Worker (its 404 for the admin prefix).
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

const LOW = 20_000;
/** Above this, a port's `+ 1000` (tollgate dev's default admin inspector port) meets the ephemeral range. */
const HIGH = Math.min(31_000, ephemeralStart() - 1000);
/** Ports handed out by this process (and their `+ 1000`), never handed out twice. */
const given = new Set();

function ephemeralStart() {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768;
  }
}

function bindable(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A loopback port nothing listens on right now, outside the ephemeral range, not given before. */
export async function freePort() {
  for (let tries = 0; tries < 200; tries++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (given.has(port) || given.has(port + 1000)) continue;
    if (!(await bindable(port)) || !(await bindable(port + 1000))) continue;
    given.add(port).add(port + 1000);
    return port;
  }
  throw new Error(`no free loopback port in ${LOW}-${HIGH} after 200 tries`);
}
