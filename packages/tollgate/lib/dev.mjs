// `tollgate dev`: `wrangler dev` on 127.0.0.1:$PORT (8787) in front of the
// origin named by $UPSTREAM, or of a demo origin on 127.0.0.1:$ORIGIN_PORT
// (8788) that echoes every request as JSON (and answers POST /login 401
// unless the password is "demo-password", and /s/SCHOOL/LINK/chat as the
// llm preset's school chat: an LLM-like stream). Other arguments go to wrangler.
// --no-origin: no demo origin and no UPSTREAM (the project's Workers answer:
// an app behind tollgate's service binding, or an app calling it over RPC,
// given to wrangler as more than one -c).
// With a wrangler.admin.toml (the admin Worker, issue 38), a second wrangler
// dev serves it on 127.0.0.1:$ADMIN_PORT (8789): the console and the admin
// API, bound to the first one's Durable Objects.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));

export async function dev(args) {
  if (args.includes("-h") || args.includes("--help")) {
    console.log(`usage: tollgate dev [--no-origin] [wrangler dev options]
  wrangler dev on 127.0.0.1:$PORT (default 8787), forwarding allowed requests to
  $UPSTREAM, or to a demo origin on 127.0.0.1:$ORIGIN_PORT (default 8788).
  --no-origin: neither (the project's own Workers answer, given as -c FILE -c FILE).
  With wrangler.admin.toml, the console on 127.0.0.1:$ADMIN_PORT/.tollgate/ (default 8789).
  Counters persist in .wrangler/state: rm -rf .wrangler/state starts from zero.
  Local secrets (TOLLGATE_LOG_KEY, ...) go in .dev.vars.`);
    return 0;
  }
  const port = process.env.PORT ?? "8787";
  const children = [];
  const noOrigin = args.includes("--no-origin");
  args = args.filter((a) => a !== "--no-origin");
  let upstream = process.env.UPSTREAM;
  if (!upstream && !noOrigin) {
    const originPort = process.env.ORIGIN_PORT ?? "8788";
    upstream = `http://127.0.0.1:${originPort}`;
    const origin = spawn(process.execPath, [join(HERE, "demo-origin.mjs")], {
      env: { ...process.env, ORIGIN_PORT: originPort, DEMO_EXAMPLE: "login-brute-force,student-chat", DEMO_LABEL: " (POST /login: 401 unless the password is demo-password; /s/SCHOOL/LINK/chat: a school's LLM chat)" },
      stdio: "inherit",
    });
    children.push(origin);
    console.log(`demo origin on ${upstream} (set UPSTREAM to use your own)`);
  }
  const wrangler = spawn(
    "wrangler",
    // TOLLGATE_LOCAL_METRICS: the decisions' points kept in the local sink,
    // for the console's Traffic page (wrangler dev's dataset keeps nothing).
    ["dev", "--ip", "127.0.0.1", "--port", port, ...(upstream ? ["--var", `UPSTREAM:${upstream}`] : []), "--var", "TOLLGATE_LOCAL_METRICS:on", ...args],
    // No fetch of the Request.cf sample from workers.cloudflare.com: local runs need no internet.
    { stdio: "inherit", env: { WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", ...process.env } },
  );
  children.push(wrangler);
  if (existsSync("wrangler.admin.toml") && !args.some((a) => a === "-c" || a === "--config" || a.startsWith("--config="))) {
    const adminPort = process.env.ADMIN_PORT ?? "8789";
    const admin = spawn(
      "wrangler",
      ["dev", "-c", "wrangler.admin.toml", "--ip", "127.0.0.1", "--port", adminPort, "--var", "TOLLGATE_LOCAL_METRICS:on", "--persist-to", ".wrangler/state-admin", "--inspector-port", process.env.ADMIN_INSPECTOR_PORT ?? String(Number(adminPort) + 1000)],
      { stdio: "inherit", env: { WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", ...process.env } },
    );
    children.push(admin);
    console.log(`the console and the admin API: http://127.0.0.1:${adminPort}/.tollgate/ (the admin Worker)`);
  }
  const stop = () => children.forEach((child) => child.kill("SIGTERM"));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  return await new Promise((done) => {
    wrangler.on("error", (e) => {
      console.error(`tollgate dev: cannot run wrangler (${e.message}); run it from the project (npm run dev)`);
      stop();
      done(1);
    });
    wrangler.on("exit", (code) => {
      stop();
      done(code ?? 1);
    });
  });
}
