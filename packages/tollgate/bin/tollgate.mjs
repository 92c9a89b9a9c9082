#!/usr/bin/env node
// The `tollgate` command of the npm package. `check`, `explain`, `hash` and `schema`
// run the Rust CLI itself (tollgate::cli, built for wasm32: cli/), so they
// answer exactly as the native binary does; `init` and `dev` are Node's own
// (lib/): they write a project and run `wrangler dev`; `build`, the
// project's [build] command, checks the rules and writes its Worker entry;
// `admin` calls a deployed Worker's admin API (lib/admin.mjs).
import { readFileSync, writeFileSync } from "node:fs";
import { ADMIN_USAGE } from "../lib/admin.mjs";
import { presetUsage } from "../lib/init.mjs";

const NODE_USAGE = `  tollgate init DIR [--preset P | --rules FILE] [--name NAME] [--tollgate SPEC] [--no-install]
${presetUsage()}
                                          --tollgate: the tollgate its package.json installs
                                          (a tarball's path, file:..., a version; until
                                          tollgate is on the npm registry, the tarball)
  tollgate dev [--no-origin] [wrangler dev options]
                                          serve the project locally (wrangler dev) in front
                                          of a demo origin, or of $UPSTREAM
  tollgate build [FILE] [-- COMMAND]      check the rules, then write the Worker entry
                                          (.tollgate/worker.mjs), or run COMMAND to build it:
                                          the project's [build] command
${ADMIN_USAGE}`;

const args = process.argv.slice(2);
switch (args[0]) {
  case "init": {
    const { init } = await import("../lib/init.mjs");
    process.exitCode = await init(args.slice(1));
    break;
  }
  case "dev": {
    const { dev } = await import("../lib/dev.mjs");
    process.exitCode = await dev(args.slice(1));
    break;
  }
  case "build": {
    const { build } = await import("../lib/build.mjs");
    const { runCli } = await import("../cli/tollgate_cli.js");
    process.exitCode = build(args.slice(1), (check) => runCli(check, readFile, (name) => process.env[name]));
    break;
  }
  case "admin": {
    const { admin } = await import("../lib/admin.mjs");
    process.exitCode = await admin(args.slice(1));
    break;
  }
  default: {
    const { runCli } = await import("../cli/tollgate_cli.js");
    const [code, stdout, stderr, write] = runCli(args, readFile, (name) => process.env[name]);
    process.stderr.write(stderr);
    // `migrate FILE --write`: the result is FILE's, in place.
    if (write !== undefined) writeFileSync(write, stdout);
    else process.stdout.write(stdout);
    if (args.length === 0 || ["-h", "--help", "help"].includes(args[0])) {
      (code === 0 ? process.stdout : process.stderr).write(`${NODE_USAGE}\n`);
    }
    process.exitCode = code;
  }
}

/** A file's bytes, or the reason why not, worded as Rust's std::io::Error words it. */
function readFile(path) {
  try {
    return readFileSync(path);
  } catch (e) {
    const os = { ENOENT: ["No such file or directory", 2], EACCES: ["Permission denied", 13], EISDIR: ["Is a directory", 21] };
    const known = os[e.code];
    return known ? `${known[0]} (os error ${known[1]})` : String(e.message);
  }
}
