// `tollgate build`: the [build] command of a project made by `tollgate init`.
// Checks the rules (`tollgate check wrangler.toml`, every environment) and
// writes the Worker entry that wrangler.toml's `main` names,
// .tollgate/worker.mjs (it re-exports this package's prebuilt Worker), only
// when they pass. On errors it removes that file, so `wrangler deploy` and
// `wrangler dev` stop with "the expected output file ... was not found":
// the errors are printed once, above it, and no stack trace follows (a
// failing build command makes wrangler print its output again, with one).
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const ENTRY = ".tollgate/worker.mjs";

export function build(args, runCheck) {
  const config = args.find((a) => !a.startsWith("-")) ?? "wrangler.toml";
  const [code, stdout, stderr] = runCheck(["check", config]);
  process.stdout.write(stdout);
  process.stderr.write(stderr);
  if (code !== 0) {
    rmSync(ENTRY, { force: true });
    console.error(`tollgate: ${config} has errors (above): nothing was built, nothing will deploy`);
    // Under wrangler, the missing entry stops it; run by hand, the exit code says it.
    return process.env.WRANGLER_COMMAND ? 0 : 1;
  }
  mkdirSync(join(ENTRY, ".."), { recursive: true });
  writeFileSync(
    ENTRY,
    `// Written by \`tollgate build\` once the rules passed \`tollgate check\`: the prebuilt Worker of the tollgate package.\nexport { default, Limiter } from "tollgate/worker";\n`,
  );
  return 0;
}
