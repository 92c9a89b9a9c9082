// Runs the try-it commands of README.md and examples/*/README.md against
// scripts/dev, as a newcomer would paste them, and checks their output.
//
// Each `<!-- try-it: ARGS -->` block (format in scripts/try-it.mjs) gets its
// own `scripts/dev ARGS` on free loopback ports, with fresh counters
// (--persist-to a temporary folder), stopped (process group) when done.
// scripts/test runs this after the release build, which scripts/dev's dev
// build then reuses as is (build/ is newer than the sources).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { ROOT, tryItBlocks, onPort, normalize } from "../../scripts/try-it.mjs";
import { freePort } from "../ports.mjs";

const READY_TIMEOUT_MS = 240_000; // a dev build after a change under src/ included
const COMMAND_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 5_000;

// The examples of rules for the standalone Worker. The app examples (a
// crate embedding tollgate, Cargo.toml; an app calling it over RPC,
// tollgate.wrangler.toml) are not started by scripts/dev: their Miniflare
// tests are tests/worker/rust-app.test.mjs and rpc.test.mjs.
const examples = readdirSync(join(ROOT, "examples")).filter(
  (name) =>
    existsSync(join(ROOT, "examples", name, "wrangler.toml")) &&
    !existsSync(join(ROOT, "examples", name, "Cargo.toml")) &&
    !existsSync(join(ROOT, "examples", name, "tollgate.wrangler.toml")),
);
const readmes = [join(ROOT, "README.md"), ...examples.map((name) => join(ROOT, "examples", name, "README.md"))];


/** Starts scripts/dev in its own process group; resolves once it prints that tollgate is ready. */
async function startDev(args) {
  const [port, originPort, inspectorPort, adminPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const state = mkdtempSync(join(tmpdir(), "tollgate-dev-"));
  const child = spawn(
    join(ROOT, "scripts", "dev"),
    [...args, "--persist-to", state, "--inspector-port", String(inspectorPort)],
    {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), ORIGIN_PORT: String(originPort), ADMIN_PORT: String(adminPort) },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const ready = new Promise((resolve) => {
    const onData = (chunk) => {
      output += chunk;
      if (output.includes(`tollgate is ready on http://127.0.0.1:${port}`)) resolve(true);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
  });
  const dev = {
    port,
    output: () => output,
    async stop() {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
      const stopped = await Promise.race([exited, sleep(STOP_GRACE_MS)]);
      if (!stopped) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // already gone
        }
        await exited;
      }
      rmSync(state, { recursive: true, force: true });
    },
  };
  const outcome = await Promise.race([ready, exited, sleep(READY_TIMEOUT_MS)]);
  if (outcome !== true) {
    await dev.stop();
    assert.fail(
      `scripts/dev ${args.join(" ")} was not ready ` +
        (outcome ? `(exited: ${JSON.stringify(outcome)})` : `within ${READY_TIMEOUT_MS / 1000} s`) +
        `; its output ended with:\n${output.slice(-3000)}`,
    );
  }
  return dev;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(() => resolve(undefined), ms).unref());

function bash(command) {
  return new Promise((resolve, reject) => {
    execFile("bash", ["-c", command], { cwd: ROOT, timeout: COMMAND_TIMEOUT_MS }, (error, stdout, stderr) =>
      error ? reject(new Error(`${command}\nfailed: ${error.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

test("every example's README has a try-it block that runs with its own rules", () => {
  for (const name of examples) {
    const readme = join(ROOT, "examples", name, "README.md");
    const blocks = tryItBlocks(readme);
    assert.ok(blocks.length > 0, `examples/${name}/README.md has no <!-- try-it: ... --> block`);
    for (const block of blocks) {
      assert.equal(block.args[0], "--example", `examples/${name}/README.md: a try-it block for another start`);
      assert.equal(block.args[1], name, `examples/${name}/README.md: a try-it block for another example`);
    }
  }
});

for (const readme of readmes) {
  const blocks = tryItBlocks(readme);
  const text = readFileSync(readme, "utf8");
  for (const block of blocks) {
    const start = ["scripts/dev", ...block.args].join(" ");
    test(`${relative(ROOT, readme)}: ${start}`, { timeout: READY_TIMEOUT_MS + 4 * COMMAND_TIMEOUT_MS }, async () => {
      assert.ok(text.includes(`\`${start}\``), `${relative(ROOT, readme)} tells the reader to start \`${start}\``);
      const dev = await startDev(block.args);
      try {
        for (const { command, expected } of block.commands) {
          const stdout = await bash(onPort(command, dev.port));
          assert.deepEqual(
            normalize(stdout.split("\n")),
            normalize(expected),
            `$ ${command}\n(scripts/dev output ended with:\n${dev.output().slice(-2000)})`,
          );
        }
      } finally {
        await dev.stop();
      }
    });
  }
}
