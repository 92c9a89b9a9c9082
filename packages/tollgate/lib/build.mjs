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
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export const ENTRY = ".tollgate/worker.mjs";

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
  const entry = command.length ? mainOf(config) : ENTRY;
  const [code, stdout, stderr] = runCheck(["check", config, ...options]);
  process.stdout.write(stdout);
  process.stderr.write(stderr);
  if (code !== 0) {
    if (entry) rmSync(entry, { force: true });
    console.error(`tollgate: ${config} has errors (above): nothing was built, nothing will deploy`);
    // Under wrangler, the missing entry stops it; run by hand, the exit code says it.
    return process.env.WRANGLER_COMMAND && entry ? 0 : 1;
  }
  if (command.length) {
    const run = spawnSync(command.join(" "), { shell: true, stdio: "inherit" });
    if (run.status === 127) {
      console.error(`tollgate: the rules passed, but \`${command[0]}\` is not on PATH (a Rust app needs cargo and worker-build: see README.md)`);
    }
    return run.status ?? 1;
  }
  mkdirSync(dirname(ENTRY), { recursive: true });
  writeFileSync(
    ENTRY,
    `// Written by \`tollgate build\` once the rules passed \`tollgate check\`: the prebuilt Worker of the tollgate package.\nexport { default, Limiter, Registry, MetricsSink } from "tollgate/worker";\n`,
  );
  return 0;
}
