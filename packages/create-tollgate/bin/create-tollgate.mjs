#!/usr/bin/env node
// `npm create tollgate@latest DIR [-- --preset P]`: npm runs this bin, which
// is `tollgate init` of the tollgate package this one depends on (the same
// version), so both ways of starting a project write the same one.
//
// The dependency is optional: where it cannot be installed (a tollgate not
// on the registry yet), `--tollgate SPEC` (a tarball's path, file:...)
// names the tollgate whose init runs, through npx, and which the project's
// package.json installs.
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error(`usage: npm create tollgate@latest DIR [-- --preset P | --rules FILE | --tollgate SPEC]
  (npm passes options to it after --; \`npx tollgate init DIR --preset P\` does the same)`);
}
const installed = await import("tollgate/init").catch(() => undefined);
if (installed) {
  process.exitCode = await installed.init(args);
} else {
  const at = args.indexOf("--tollgate");
  const spec = at >= 0 ? args[at + 1] : undefined;
  if (spec === undefined) {
    console.error(`create-tollgate: the tollgate package is not installed (not on the registry yet?): give its tarball,
  --tollgate PATH/tollgate-VERSION.tgz (after -- with npm create)`);
    process.exitCode = 1;
  } else {
    const local = /\.(tgz|tar\.gz)$/.test(spec) && !spec.includes(":") ? resolve(spec) : spec.startsWith("file:") ? `file:${resolve(spec.slice(5))}` : spec;
    const rest = args.map((arg, i) => (i === at + 1 ? local : arg));
    const run = spawnSync("npx", ["--yes", "--package", local, "tollgate", "init", ...rest], { stdio: "inherit" });
    process.exitCode = run.status ?? 1;
  }
}
