// `tollgate build`: the [build] command of a project made by `tollgate init`.
//
//   tollgate build [FILE [OPTIONS]]   check FILE (wrangler.toml, every
//                                     environment), then write the Worker entry
//                                     .tollgate/worker.mjs (it re-exports this
//                                     package's prebuilt Worker); OPTIONS go to
//                                     check (--app APP_FILE)
//   tollgate build [FILE] -- CMD...   check FILE, then run CMD (a Rust app:
//                                     worker-build --release) to make the entry
//
// On errors it removes the entry that FILE's `main` names, so `wrangler
// deploy` and `wrangler dev` stop with "the expected output file ... was not
// found": the errors are printed once, above it, and no stack trace follows
// (a failing build command makes wrangler print its output again, with one).
//
// Under `tollgate dev` (TOLLGATE_DEV_SAID names a folder), each line check
// prints is said once per session: wrangler dev builds twice at start, and
// the admin Worker's build checks the same rules (issue 53: the log-key
// reminder was printed four times). Errors are always printed.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

export const ENTRY = ".tollgate/worker.mjs";
/** The admin Worker's entry (wrangler.admin.toml's `main`): the console and the admin API. */
export const ADMIN_ENTRY = ".tollgate/admin.mjs";

/** The top-level `main` of a wrangler.toml (before its first table), if any. */
function mainOf(config) {
  if (!existsSync(config)) return undefined;
  const top = readFileSync(config, "utf8").split(/^\s*\[/m)[0];
  return top.match(/^\s*main\s*=\s*["']([^"']+)["']/m)?.[1];
}

export function build(args, runCheck) {
  const split = args.indexOf("--");
  const own = split < 0 ? args : args.slice(0, split);
  const command = split < 0 ? [] : args.slice(split + 1);
  // FILE first, then any other `tollgate check` options (--app APP_FILE).
  const config = own[0] && !own[0].startsWith("-") ? own[0] : "wrangler.toml";
  const options = own[0] === config ? own.slice(1) : own;
  const admin = !command.length && mainOf(config) === ADMIN_ENTRY;
  const entry = command.length ? mainOf(config) : admin ? ADMIN_ENTRY : ENTRY;
  const [code, stdout, stderr] = runCheck(["check", config, ...options]);
  process.stdout.write(unsaid(stdout, process.env.TOLLGATE_DEV_SAID));
  process.stderr.write(stderr);
  if (code !== 0) {
    if (entry) rmSync(entry, { force: true });
    console.error(`tollgate: ${config} has errors (above): nothing was built, nothing will deploy`);
    // Under wrangler, the missing entry stops it; run by hand, the exit code says it.
    return process.env.WRANGLER_COMMAND && entry ? 0 : 1;
  }
  if (admin) process.stderr.write(unsaid(rulesDrift(config), process.env.TOLLGATE_DEV_SAID));
  if (command.length) {
    const run = spawnSync(command.join(" "), { shell: true, stdio: "inherit" });
    if (run.status === 127) {
      console.error(`tollgate: the rules passed, but \`${command[0]}\` is not on PATH (a Rust app needs cargo and worker-build: see README.md)`);
    }
    return run.status ?? 1;
  }
  mkdirSync(dirname(entry), { recursive: true });
  const exported = admin ? `export { default } from "tollgate/admin-worker";` : `export { default, Limiter, Registry, MetricsSink } from "tollgate/worker";`;
  writeFileSync(entry, `// Written by \`tollgate build\` once the rules passed \`tollgate check\`: the prebuilt ${admin ? "admin " : ""}Worker of the tollgate package.\n${exported}\n`);
  return 0;
}

/**
 * The `[vars.TOLLGATE]` tables of a wrangler.toml's text (the top level's:
 * from that header to the first header of another table), trimmed.
 */
export function tollgateVars(text) {
  const start = text.search(/^\[vars\.TOLLGATE\]/m);
  if (start < 0) return "";
  const rest = text.slice(start);
  const end = rest.slice(1).search(/^\[+(?!\[|vars\.TOLLGATE[.\]])/m);
  return (end < 0 ? rest : rest.slice(0, end + 1)).trim();
}

/**
 * The admin Worker's config (`admin`, wrangler.admin.toml) beside the
 * zone's (wrangler.toml): a warning line when their `[vars.TOLLGATE]`
 * differ, since the admin API names rules and derives keys from its own
 * copy (issue 53, round 3 item 8); "" when they agree or there is no
 * wrangler.toml beside it.
 */
export function rulesDrift(admin) {
  const zone = join(dirname(admin), "wrangler.toml");
  if (!existsSync(zone) || tollgateVars(readFileSync(zone, "utf8")) === tollgateVars(readFileSync(admin, "utf8"))) return "";
  return `warning: ${admin}'s [vars.TOLLGATE] differs from ${zone}'s: the console and the admin API name rules and derive keys from their own copy; copy wrangler.toml's [vars.TOLLGATE] tables into ${admin}\n`;
}

/**
 * The lines of `text` not yet said in this `tollgate dev` session (`said`:
 * its folder, one empty file per line said, created exclusively so that
 * two builds at once say a line once); all of `text` outside one.
 */
export function unsaid(text, said) {
  if (!said) return text;
  mkdirSync(said, { recursive: true });
  return text
    .split(/(?<=\n)/)
    .filter((line) => {
      try {
        writeFileSync(join(said, createHash("sha256").update(line.trimEnd()).digest("hex").slice(0, 32)), "", { flag: "wx" });
        return true;
      } catch {
        return false;
      }
    })
    .join("");
}
