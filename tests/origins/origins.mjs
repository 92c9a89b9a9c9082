// The four real origins of the differential tests (Express 5, Flask/Werkzeug,
// PHP 8's built-in server, nginx), each started on a free loopback port and
// stopped by the test, and the forwarder that takes what tollgate sends to
// "the origin" in Miniflare (outboundService) to the real one on 127.0.0.1.
import { spawn, spawnSync } from "node:child_process";
import { freePort } from "../ports.mjs";
import http from "node:http";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const HERE = dirname(fileURLToPath(import.meta.url));
const VENV_PYTHON = join(HERE, ".venv", "bin", "python");
const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 5_000;

function which(command) {
  const found = spawnSync("sh", ["-c", `command -v ${command}`], { encoding: "utf8" });
  return found.status === 0 ? found.stdout.trim() : null;
}

function versionOf(command, args) {
  const out = spawnSync(command, args, { encoding: "utf8" });
  return `${out.stdout}${out.stderr}`.split("\n")[0].trim();
}

const nginxBinary = () => which("nginx") ?? (existsSync("/usr/sbin/nginx") ? "/usr/sbin/nginx" : null);

/**
 * Each origin: the actions it implements, whether it is installed (and if
 * not, what to run), its version, and how to start it on a port (the
 * command, and a folder to remove once it stops).
 */
export const ORIGINS = {
  express: {
    actions: ["heavy", "tenant", "login", "delete", "apikey", "session"],
    missing: () =>
      existsSync(join(HERE, "express", "node_modules", "express")) ? null : "Express (tests/origins/express/node_modules)",
    version: () => {
      const pkg = JSON.parse(readFileSync(join(HERE, "express", "node_modules", "express", "package.json"), "utf8"));
      return `express ${pkg.version}, node ${process.version}`;
    },
    command: (port) => ({ cmd: process.execPath, args: [join(HERE, "express", "app.mjs"), String(port)] }),
  },
  flask: {
    actions: ["heavy", "tenant", "login", "delete", "apikey", "session"],
    missing: () => (existsSync(VENV_PYTHON) ? null : "Flask (tests/origins/.venv)"),
    version: () =>
      versionOf(VENV_PYTHON, [
        "-c",
        "import importlib.metadata as m, sys; print('flask', m.version('flask'), 'werkzeug', m.version('werkzeug'), 'python', sys.version.split()[0])",
      ]),
    command: (port) => ({ cmd: VENV_PYTHON, args: [join(HERE, "flask", "app.py"), String(port)] }),
  },
  php: {
    actions: ["heavy", "tenant", "login", "delete", "apikey", "session"],
    missing: () => {
      if (!which("php")) return "php (Debian php-cli)";
      const intl = spawnSync("php", ["-r", "exit(function_exists('transliterator_transliterate') ? 0 : 1);"]);
      return intl.status === 0 ? null : "php's intl extension (Debian php-intl)";
    },
    version: () => versionOf("php", ["--version"]),
    // PHP's built-in defaults for the superglobals (no request_order, variables_order EGPCS: Debian's php.ini sets
    // request_order = "GP"): $_REQUEST holds GET, POST and COOKIE.
    command: (port) => ({
      cmd: "php",
      args: ["-d", "variables_order=EGPCS", "-d", "request_order=GPC", "-S", `127.0.0.1:${port}`, join(HERE, "php", "router.php")],
      env: { PHP_CLI_SERVER_WORKERS: "4" },
    }),
  },
  nginx: {
    actions: ["heavy", "apikey", "session"],
    missing: () => (nginxBinary() ? null : "nginx (Debian nginx)"),
    version: () => versionOf(nginxBinary(), ["-v"]),
    command: (port) => {
      const prefix = mkdtempSync(join(tmpdir(), "tollgate-nginx-"));
      for (const dir of ["body", "proxy", "fastcgi", "uwsgi", "scgi"]) mkdirSync(join(prefix, dir));
      const user = process.getuid?.() === 0 ? "user root;" : "";
      const conf = readFileSync(join(HERE, "nginx", "nginx.conf.template"), "utf8")
        .replaceAll("@PREFIX@", prefix)
        .replaceAll("@PORT@", String(port))
        .replaceAll("@USER@", user);
      writeFileSync(join(prefix, "nginx.conf"), conf);
      return {
        cmd: nginxBinary(),
        args: ["-p", prefix, "-c", join(prefix, "nginx.conf"), "-e", join(prefix, "error.log"), "-g", "daemon off;"],
        cleanup: prefix,
      };
    },
  },
};

/** What is missing to run these origins (empty: all installed). */
export function missingOrigins(names) {
  return names.map((n) => ORIGINS[n].missing()).filter(Boolean);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function get(port, path) {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path, timeout: 1000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    });
    req.on("error", () => resolve(0));
    req.on("timeout", () => req.destroy());
  });
}

/**
 * Starts origin `name` on a free loopback port and waits (at most
 * START_TIMEOUT_MS) until it answers. Returns { name, port, version, stop }.
 * The origin runs in its own process group; `stop` ends that group (by its
 * id) and waits for it.
 */
export async function startOrigin(name) {
  const origin = ORIGINS[name];
  const port = await freePort();
  const { cmd, args, env, cleanup } = origin.command(port);
  const child = spawn(cmd, args, {
    cwd: HERE,
    env: { ...process.env, ...(env ?? {}) },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  const keep = (d) => {
    output = (output + d.toString()).slice(-4000);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  let exited = false;
  const exit = new Promise((resolve) => child.on("exit", (code, signal) => {
    exited = true;
    resolve({ code, signal });
  }));
  const stop = async () => {
    if (!exited) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      const done = await Promise.race([exit, sleep(STOP_TIMEOUT_MS).then(() => null)]);
      if (!done) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {}
        await exit;
      }
    }
    if (cleanup) rmSync(cleanup, { recursive: true, force: true });
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline && !exited) {
    if ((await get(port, "/__health")) === 200) {
      return { name, port, version: origin.version(), stop, output: () => output };
    }
    await sleep(100);
  }
  await stop();
  throw new Error(`origin ${name} did not answer on 127.0.0.1:${port} within ${START_TIMEOUT_MS} ms:\n${output}`);
}

// Hop-by-hop and length fields: node:http writes its own.
const DROPPED = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"]);

/**
 * The outboundService for Miniflare: sends what the Worker forwards to the
 * real origin on 127.0.0.1:port, with the same method, path, query, headers
 * and body, and returns the origin's answer marked `x-origins-forwarded`
 * (so a test tells the origin's 401 from tollgate's own answers).
 *
 * `rawHeaders(request)` may return header lines to send as separate lines:
 * a client's repeated header reaches the Worker joined (`a, b`, the Fetch
 * `Headers`), but the origin behind Cloudflare receives the lines the
 * client sent. They replace the joined value only when it is exactly their
 * join, so nothing the Worker changed is undone.
 */
export function forwarder(port, rawHeaders = () => null) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  async function outboundService(request) {
    const url = new URL(request.url);
    const body = Buffer.from(await request.arrayBuffer());
    const lines = [];
    const raw = rawHeaders(request) ?? [];
    const replaced = new Set();
    for (const [name, values] of groupLines(raw)) {
      if (values.length > 1 && request.headers.get(name) === values.join(", ")) {
        replaced.add(name);
        for (const v of values) lines.push(name, v);
      }
    }
    for (const [name, value] of request.headers) {
      if (!DROPPED.has(name) && !replaced.has(name)) lines.push(name, value);
    }
    lines.push("host", url.host);
    if (body.length || !["GET", "HEAD"].includes(request.method)) lines.push("content-length", String(body.length));
    const answer = await new Promise((resolve, reject) => {
      const req = http.request(
        { host: "127.0.0.1", port, method: request.method, path: `${url.pathname}${url.search}`, headers: lines, agent, timeout: 10_000 },
        (res) => {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }));
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error("origin timed out")));
      req.on("error", reject);
      req.end(body);
    });
    const headers = new Headers();
    for (let i = 0; i < answer.rawHeaders.length; i += 2) {
      const name = answer.rawHeaders[i].toLowerCase();
      if (!DROPPED.has(name)) headers.append(name, answer.rawHeaders[i + 1]);
    }
    headers.set("x-origins-forwarded", "1");
    const nullBody = [101, 204, 205, 304].includes(answer.status) || request.method === "HEAD";
    return new Response(nullBody ? null : answer.body, { status: answer.status, headers });
  }
  return { outboundService, close: () => agent.destroy() };
}

function groupLines(pairs) {
  const out = new Map();
  for (const [name, value] of pairs) {
    const key = name.toLowerCase();
    if (!out.has(key)) out.set(key, []);
    out.get(key).push(value);
  }
  return out;
}
