// Startup CPU of the zone's Worker beside peer A's (issue 38 item 3), as
// `wrangler check startup` profiles it: each Worker bundled once by
// `wrangler deploy --dry-run --outfile` (tollgate from wrangler.toml, which
// runs scripts/build through its [build] command; the hono peer from a
// throwaway config beside bench/peers/hono.mjs), then profiled RUNS times,
// alternating. Reports each Worker's startup profile: its span (the
// profile's end minus its start, what the startup took in the isolate) and
// the time of its non-idle samples (a coarse reading: the profiler samples
// a startup of tens of ms only a few times), quietest and median of each,
// the bundle's gzip size, and the machine's load. Offline; writes only to bench/tmp/.
//
//   node bench/startup.mjs [RUNS]      # 5 by default, about a minute
//
// These are local numbers on whatever this machine is doing: the profile's
// samples, not Cloudflare's startup limit (which is measured on their side).
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = join(root, "bench", "tmp", "startup");
mkdirSync(tmp, { recursive: true });
const runs = Number(process.argv[2] ?? 5);
const env = { ...process.env, WRANGLER_SEND_METRICS: "false" };
const wrangler = (args) => execFileSync("npx", ["wrangler", ...args], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] }).toString();

/** The hono peer's throwaway wrangler config (its object class SQLite-backed, as in bench/run.mjs). */
function honoConfig() {
  const file = join(tmp, "hono.wrangler.toml");
  writeFileSync(
    file,
    [
      'name = "peer-hono"',
      `main = "${join(root, "bench", "peers", "hono.mjs")}"`,
      'compatibility_date = "2026-04-01"',
      "[[durable_objects.bindings]]",
      'name = "CACHE"',
      'class_name = "DurableObjectRateLimiter"',
      "[[migrations]]",
      'tag = "v1"',
      'new_sqlite_classes = ["DurableObjectRateLimiter"]',
      "",
    ].join("\n"),
  );
  return file;
}

/** Bundles one Worker; its bundle's path and gzip size in KiB. */
function bundle(name, config) {
  const outfile = join(tmp, `${name}.bundle`);
  wrangler(["deploy", "--dry-run", "-c", config, "--outfile", outfile]);
  return { outfile, gzipKiB: gzipSync(readFileSync(outfile)).length / 1024 };
}

/** One startup profile: its span and the time of its non-idle samples, in ms. */
function read(profileFile) {
  const profile = JSON.parse(readFileSync(profileFile, "utf8"));
  const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
  let us = 0;
  profile.samples.forEach((id, i) => {
    if (!idle.has(id)) us += profile.timeDeltas[i] ?? 0;
  });
  return { span: (profile.endTime - profile.startTime) / 1000, busy: us / 1000 };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const workers = [
  { name: "tollgate", ...bundle("tollgate", join(root, "wrangler.toml")) },
  { name: "peer A (hono)", ...bundle("hono", honoConfig()) },
];
const load = [loadavg()[0]];
for (let r = 0; r < runs; r++) {
  for (const w of r % 2 ? [...workers].reverse() : workers) {
    const profile = join(tmp, `${w.name.split(" ")[0]}.${r}.cpuprofile`);
    wrangler(["check", "startup", "--worker", w.outfile, "--outfile", profile]);
    (w.runs ??= []).push(read(profile));
  }
}
load.push(loadavg()[0]);
console.log(`startup profiles (wrangler check startup, ${runs} runs each, alternating); ${cpus().length} × ${cpus()[0]?.model.trim()}, load ${load.map((l) => l.toFixed(2)).join(" → ")}`);
console.log("| Worker | bundle gzip KiB | span quietest ms | span median ms | non-idle samples median ms | spans ms |");
console.log("|---|---|---|---|---|---|");
for (const w of workers) {
  const spans = w.runs.map((r) => r.span);
  const busy = w.runs.map((r) => r.busy);
  console.log(`| ${w.name} | ${w.gzipKiB.toFixed(2)} | ${Math.min(...spans).toFixed(1)} | ${median(spans).toFixed(1)} | ${median(busy).toFixed(1)} | ${spans.map((m) => m.toFixed(1)).join(", ")} |`);
}
