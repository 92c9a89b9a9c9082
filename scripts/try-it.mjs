// The try-it blocks of the READMEs: what scripts/dev prints once it is ready,
// and what tests/dev/try-it.test.mjs runs against it.
//
// A try-it block is a ```console block right after a marker comment naming the
// scripts/dev arguments it needs:
//
//   <!-- try-it: --example login-brute-force -->
//   ```console
//   $ curl -s -o /dev/null -w '%{http_code}\n' http://127.0.0.1:8787/login
//   401
//   ```
//
// Lines starting with `$ ` are commands (run with bash); the lines below a
// command are its expected output, compared with runs of blanks folded.
// READMEs are written for the default port 8787.
//
// Usage: node scripts/try-it.mjs banner PORT [scripts/dev arguments]
import { readFileSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join, relative } from "node:path";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const README_PORT = 8787;

/** The README that documents a scripts/dev start: the example's, or the root one. */
export function readmeFor(devArgs) {
  const i = devArgs.indexOf("--example");
  return i >= 0 ? join(ROOT, "examples", devArgs[i + 1], "README.md") : join(ROOT, "README.md");
}

/** Every try-it block of a README: { args, lines, commands: [{ command, expected }] }. */
export function tryItBlocks(readme) {
  const text = readFileSync(readme, "utf8");
  const blocks = [];
  const marker = /<!-- try-it:([^>]*?)-->\s*\n```console\n([\s\S]*?)\n```/g;
  for (const [, args, body] of text.matchAll(marker)) {
    const lines = body.split("\n");
    const commands = [];
    for (const line of lines) {
      if (line.startsWith("$ ")) commands.push({ command: line.slice(2), expected: [] });
      else if (commands.length) commands.at(-1).expected.push(line);
      else throw new Error(`${readme}: a try-it block must start with a \`$ \` command line`);
    }
    blocks.push({ args: args.trim().split(/\s+/).filter(Boolean), lines, commands });
  }
  return blocks;
}

/** A README line for another port. */
export function onPort(line, port) {
  return line.replaceAll(`127.0.0.1:${README_PORT}`, `127.0.0.1:${port}`);
}

/** Output lines compared as the README shows them: trailing blanks dropped, runs of blanks folded. */
export function normalize(lines) {
  const out = lines.map((l) => l.trim().replace(/\s+/g, " "));
  while (out.length && out.at(-1) === "") out.pop();
  return out;
}

const sameArgs = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * What scripts/dev prints when it is ready: the try-it blocks written for
 * exactly these arguments (the root README's for the shipped config, an
 * example's README's for `--example NAME [--env ENV]`), and none for a
 * start no README documents (an environment of the shipped config): lines
 * that would not hold are worse than none.
 */
export function banner(port, devArgs) {
  const readme = readmeFor(devArgs);
  const mine = existsSync(readme) ? tryItBlocks(readme).filter((b) => sameArgs(b.args, devArgs)) : [];
  const out = [];
  if (mine.length) {
    out.push(`  Try it (from ${relative(ROOT, readme)}; the lines without $ are the expected output):`);
    for (const block of mine) for (const line of block.lines) out.push(`    ${onPort(line, port)}`);
  } else {
    out.push(`  No try-it lines for scripts/dev ${devArgs.join(" ")}: ${relative(ROOT, readme)} documents other starts.`);
  }
  out.push(
    "",
    "  Counters persist across restarts, per config (in .wrangler/state/, or the --persist-to",
    "  folder): stop scripts/dev and delete that folder to start from zero.",
    "  Local secrets (TOLLGATE_LOG_KEY, ...) go in .dev.vars, never in wrangler.toml.",
  );
  return out.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === "banner") {
  const [port, ...devArgs] = process.argv.slice(3);
  console.log(banner(port, devArgs));
}
