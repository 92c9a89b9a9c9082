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
// API, bound to the first one's Durable Objects (with --no-origin too: the
// in-front and rpc projects). It needs TOLLGATE_ADMIN_TOKEN: without one in
// .dev.vars, a random local token is written there, and printed with the
// console's URL once it answers (issue 53). wrangler reads .dev.vars only
// when its config changes: an edit of .dev.vars touches the configs, so
// both Workers take it without a restart.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, existsSync, readFileSync, rmSync, unwatchFile, utimesSync, watchFile } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const DEV_VARS = ".dev.vars";
const TOKEN = "TOLLGATE_ADMIN_TOKEN";

/** The admin token of .dev.vars (as wrangler reads it: KEY=VALUE, quotes optional), if any. */
export function devVarsToken(text) {
  let token;
  for (const line of text.split(/\r?\n/)) {
    const match = line.match(/^\s*(?:export\s+)?TOLLGATE_ADMIN_TOKEN\s*=\s*(.*?)\s*$/);
    if (match) token = match[1].replace(/^(["'])(.*)\1$/, "$2").trim();
  }
  return token || undefined;
}

/**
 * The local admin token: .dev.vars's, or a new random one appended to
 * .dev.vars (made: true). .dev.vars is the project's file of local
 * secrets, which `tollgate init` lists in .gitignore.
 */
export function localToken(file = DEV_VARS) {
  const text = existsSync(file) ? readFileSync(file, "utf8") : "";
  const found = devVarsToken(text);
  if (found) return { token: found, made: false };
  const token = randomBytes(16).toString("hex");
  const lead = text && !text.endsWith("\n") ? "\n" : "";
  appendFileSync(file, `${lead}# The local console's token, written by \`tollgate dev\` (any value will do; deployed, use a long random secret).\n${TOKEN}=${token}\n`);
  return { token, made: true };
}

/** The config files (-c/--config) in wrangler's arguments; wrangler.toml without any. */
function configsOf(args) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    if ((args[i] === "-c" || args[i] === "--config") && args[i + 1]) out.push(args[++i]);
    else if (args[i].startsWith("--config=")) out.push(args[i].slice("--config=".length));
  }
  return out.length ? out : ["wrangler.toml"];
}

/** Waits until `url` answers (wrangler holds a request until its Worker is loaded); whether it did. */
async function answers(url, alive, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && alive()) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(30_000) });
      return true;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  return false;
}

export async function dev(args) {
  if (args.includes("-h") || args.includes("--help")) {
    console.log(`usage: tollgate dev [--no-origin] [wrangler dev options]
  wrangler dev on 127.0.0.1:$PORT (default 8787), forwarding allowed requests to
  $UPSTREAM, or to a demo origin on 127.0.0.1:$ORIGIN_PORT (default 8788).
  --no-origin: neither (the project's own Workers answer, given as -c FILE -c FILE).
  With wrangler.admin.toml, the console on 127.0.0.1:$ADMIN_PORT/.tollgate/ (default 8789),
  signed in with TOLLGATE_ADMIN_TOKEN from .dev.vars (written there, random, if missing).
  Counters persist in .wrangler/state: rm -rf .wrangler/state starts from zero.
  Local secrets (TOLLGATE_LOG_KEY, ...) go in .dev.vars; an edit reloads the Workers.`);
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
  // The lines `tollgate build` said in this session (lib/build.mjs `unsaid`): a new folder per start.
  const said = join(".wrangler", "tollgate-said");
  rmSync(said, { recursive: true, force: true });
  const wranglerEnv = { WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", ...process.env, TOLLGATE_DEV_SAID: resolve(said) };
  const configs = configsOf(args);
  const withAdmin = existsSync("wrangler.admin.toml") && !configs.includes("wrangler.admin.toml");
  // Before either wrangler starts: both read .dev.vars once, at start.
  const { token, made } = withAdmin ? localToken() : {};
  const wrangler = spawn(
    "wrangler",
    // TOLLGATE_LOCAL_METRICS: the decisions' points kept in the local sink,
    // for the console's Traffic page (wrangler dev's dataset keeps nothing).
    ["dev", "--ip", "127.0.0.1", "--port", port, ...(upstream ? ["--var", `UPSTREAM:${upstream}`] : []), "--var", "TOLLGATE_LOCAL_METRICS:on", ...args],
    // No fetch of the Request.cf sample from workers.cloudflare.com: local runs need no internet.
    { stdio: "inherit", env: wranglerEnv },
  );
  children.push(wrangler);
  if (withAdmin) {
    const adminPort = process.env.ADMIN_PORT ?? "8789";
    const admin = spawn(
      "wrangler",
      ["dev", "-c", "wrangler.admin.toml", "--ip", "127.0.0.1", "--port", adminPort, "--var", "TOLLGATE_LOCAL_METRICS:on", "--persist-to", ".wrangler/state-admin", "--inspector-port", process.env.ADMIN_INSPECTOR_PORT ?? String(Number(adminPort) + 1000)],
      { stdio: "inherit", env: wranglerEnv },
    );
    children.push(admin);
    configs.push("wrangler.admin.toml");
    const console_ = `http://127.0.0.1:${adminPort}/.tollgate/`;
    answers(console_, () => admin.exitCode === null && admin.signalCode === null).then((up) => {
      if (!up) return;
      const where = made ? `a local token written to ${DEV_VARS} for you` : `${TOKEN} from ${DEV_VARS}`;
      console.log(`\nthe console: ${console_} (sign in with ${token}: ${where})\n`);
    });
  }
  // wrangler reads .dev.vars when its config changes: touching the configs
  // on an edit of .dev.vars makes both Workers reload with it.
  watchFile(DEV_VARS, { interval: 500 }, (now, before) => {
    if (now.mtimeMs === before.mtimeMs) return;
    const at = new Date();
    for (const config of configs) {
      try {
        utimesSync(config, at, at);
      } catch {
        // a config that is not there: wrangler says so itself
      }
    }
    console.log(`${DEV_VARS} changed: the Workers reload with it`);
  });
  const stop = () => {
    unwatchFile(DEV_VARS);
    children.forEach((child) => child.kill("SIGTERM"));
  };
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
