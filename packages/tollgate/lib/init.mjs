// `tollgate init DIR`: writes a project that deploys the prebuilt tollgate
// Worker of this package with wrangler, its rules from a preset or a file.
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ADMIN_ENTRY } from "./build.mjs";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
const { version } = JSON.parse(readFileSync(join(PACKAGE, "package.json"), "utf8"));
/** The last wrangler that runs on Node.js 20 (4.87 and later need 22). */
const WRANGLER = "4.86.0";
/** 2026-02-24 or later: deleteAll() also clears the alarm (the TTL relies on it). */
const COMPATIBILITY_DATE = "2026-04-01";

/** What to send to see each preset answer 429 (`npm run dev` serves on 8787). */
const TRY = {
  "heavy-endpoint": `for i in $(seq 11); do curl -s -o /dev/null -w '%{http_code}\\n' 'http://127.0.0.1:8787/api/example?mode=heavy'; done | uniq -c`,
  login: `for i in $(seq 11); do curl -s -o /dev/null -w '%{http_code}\\n' -d 'email=victim@example.com&password=guess' http://127.0.0.1:8787/login; done | uniq -c`,
  "tenant-quota": `for i in $(seq 6); do curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8787/api/tenants/7/reports; done | uniq -c`,
  "api-keys": `for i in $(seq 6); do curl -s -o /dev/null -w '%{http_code}\\n' -H 'x-api-key: demo-key' http://127.0.0.1:8787/api/items; done | uniq -c`,
  // One magic link of school 42 (the demo origin's), 11 devices: 10 answers, then 429.
  llm: `for i in $(seq 11); do curl -s -o /dev/null -w '%{http_code}\\n' -b device=d$i -d '{"messages":[{"role":"user","content":"why is the sky blue?"}]}' http://127.0.0.1:8787/s/42/2-6557f037b898/chat; done | uniq -c`,
  "in-front": `for i in $(seq 11); do curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8787/api/items; done | uniq -c`,
  rpc: `for i in $(seq 11); do curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8787/api/items; done | uniq -c`,
};

/**
 * The presets for a zone that already runs a Worker (docs/guide.md, "Adding
 * tollgate to a zone that already has a Worker"): besides tollgate's rules
 * (presets/NAME.toml), each writes the files of presets/NAME/ ({{...}}
 * filled in) and its own scripts.
 *  - in-front: tollgate owns the route and forwards to the app over a
 *    service binding; app/ is a stand-in app that `npm run dev` serves
 *    behind tollgate (two Workers, one wrangler dev).
 *  - rpc: tollgate has no route; app/ is a TS Worker calling it over RPC
 *    with the package's client; `npm run dev` serves the app in front.
 *  - crate: a Rust app Worker embedding the tollgate crate: Cargo.toml,
 *    src/lib.rs, and wrangler.toml with the rules; building it needs cargo.
 */
const APP_PRESETS = {
  "in-front": {
    files: ["app/wrangler.toml", "app/src/index.js"],
    scripts: {
      dev: "tollgate dev --no-origin -c wrangler.toml -c app/wrangler.toml",
      check: "tollgate check wrangler.toml --app app/wrangler.toml",
      deploy: "tollgate check wrangler.toml --app app/wrangler.toml && wrangler deploy",
    },
    next: "npm run dev        # tollgate on http://127.0.0.1:8787, in front of the stand-in app in app/",
    deploy: "npm run deploy     # after setting service (your app's name) and routes in wrangler.toml",
  },
  rpc: {
    files: ["app/wrangler.toml", "app/src/index.ts"],
    scripts: {
      dev: "tollgate dev --no-origin -c app/wrangler.toml -c wrangler.toml",
      "deploy:app": "wrangler deploy -c app/wrangler.toml",
    },
    next: "npm run dev        # the app on http://127.0.0.1:8787, calling tollgate over RPC",
    deploy: "npm run deploy     # tollgate, no route (npx wrangler login first); then npm run deploy:app,\n                     # the app, once its routes are set in app/wrangler.toml",
  },
  crate: {
    files: ["Cargo.toml", "src/lib.rs", "README.md"],
    scripts: { dev: "wrangler dev" },
    next: "npm run dev        # needs Rust and worker-build: see README.md",
  },
};

export const USAGE = `usage: tollgate init DIR [--preset P | --rules FILE] [--name NAME] [--tollgate SPEC] [--no-install]
  Writes a project in DIR (new, or empty) that deploys tollgate with wrangler:
  package.json (tollgate, wrangler ${WRANGLER}), wrangler.toml (the Worker, its
  Durable Object and migration, observability, a routes placeholder, your
  rules), .gitignore; then runs npm install (--no-install skips it).
    --preset P       starter rules: ${presets().filter((p) => !APP_PRESETS[p]).join(", ")}
                     (default heavy-endpoint); for a zone that already runs a
                     Worker: in-front (tollgate forwards to your app over a
                     service binding), rpc (your TS app calls tollgate),
                     crate (your Rust app embeds it)
    --rules FILE     your own rules instead: a TOML file holding [vars.TOLLGATE]
    --name NAME      the Worker's name (default: DIR's name)
    --tollgate SPEC  how package.json names tollgate (default ^${version}, from
                     the npm registry; until tollgate is published there, the
                     path of the tarball: build/npm/tollgate-${version}.tgz)`;

/**
 * `tollgate --help`'s lines on init's presets, every one the package holds
 * (presets/*.toml; issue 53: the llm preset was left out of a hand-kept
 * list), in lines of at most 54 characters after the usage's 42-column
 * indent.
 */
export function presetUsage() {
  const standalone = presets().filter((p) => !APP_PRESETS[p]);
  const app = presets().filter((p) => APP_PRESETS[p]);
  const words = `write a project deploying tollgate (presets: ${standalone.join(", ")}; for a zone that already runs a Worker: ${app.join(", ")});`;
  const lines = [""];
  for (const word of words.split(" ")) {
    const last = lines.length - 1;
    if (lines[last] && lines[last].length + word.length + 1 > 54) lines.push(word);
    else lines[last] = lines[last] ? `${lines[last]} ${word}` : word;
  }
  return lines.map((line) => `${" ".repeat(42)}${line}`).join("\n");
}

function presets() {
  return readdirSync(join(PACKAGE, "presets"))
    .filter((f) => f.endsWith(".toml"))
    .map((f) => f.slice(0, -5))
    .sort();
}

function parse(args) {
  const options = { dir: undefined, preset: undefined, rules: undefined, name: undefined, tollgate: `^${version}`, install: true };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const value = () => {
      if (i + 1 >= args.length) throw new Error(`${arg} needs a value`);
      return args[++i];
    };
    if (arg === "--preset") options.preset = value();
    else if (arg === "--rules") options.rules = value();
    else if (arg === "--name") options.name = value();
    else if (arg === "--tollgate") {
      options.tollgate = value();
      options.tollgateGiven = true;
    }
    else if (arg === "--no-install") options.install = false;
    else if (arg.startsWith("-")) throw new Error(`unknown option ${arg}`);
    else if (options.dir === undefined) options.dir = arg;
    else throw new Error(`unexpected argument ${arg}`);
  }
  if (options.dir === undefined) throw new Error("missing DIR");
  if (options.preset !== undefined && options.rules !== undefined) throw new Error("give --preset or --rules, not both");
  if (options.rules === undefined) options.preset ??= "heavy-endpoint";
  if (options.preset !== undefined && !presets().includes(options.preset)) {
    throw new Error(`no preset ${options.preset} (one of: ${presets().join(", ")})`);
  }
  return options;
}

/** A tarball path becomes `file:` with an absolute path, so it still resolves from DIR. */
function dependencySpec(spec) {
  if (/\.(tgz|tar\.gz)$/.test(spec) && !spec.includes(":")) return `file:${resolve(spec)}`;
  if (spec.startsWith("file:")) return `file:${resolve(spec.slice(5))}`;
  return spec;
}

/** The routes placeholder: tollgate's own route, unless the app keeps it (rpc). */
function routesPart(preset) {
  if (preset === "rpc") {
    return `# No routes: the app (app/wrangler.toml) owns the zone's route and asks
# tollgate about each request over RPC (its service binding TOLLGATE).
workers_dev = false
preview_urls = false`;
  }
  const app = preset === "in-front" ? "\n# It takes the route your app Worker had: the app keeps none (app/wrangler.toml)." : "";
  return `# Deploy step: attach tollgate to your proxied zone. Broad routes, narrow
# rules: send the whole zone and let the rules below pick what to limit (a
# narrow route like example.com/api/* misses /API/x and /%61pi/x).${app}
# routes = [{ pattern = "example.com/*", zone_name = "example.com" }]
# No NAME.SUBDOMAIN.workers.dev URL: tollgate answers on the zone's route,
# where the origin is; on workers.dev there is none to forward to.
workers_dev = false
preview_urls = false`;
}

/** in-front: the app Worker's service binding, which the rules' `upstream` names. */
function appService(name, preset, admin) {
  if (preset !== "in-front") return "";
  const why = admin
    ? `# The binding the rules' \`upstream = { service = "APP" }\` names (\`tollgate check\`
# requires it); the admin Worker forwards nothing to it.`
    : `# Your app Worker, reached over a service binding: \`upstream = { service =
# "APP" }\` below forwards allowed requests to env.APP.fetch(request).
# \`service\` is the app Worker's name (app/ is a stand-in for local dev).`;
  return `
${why}
[[services]]
binding = "APP"
service = "${name}-app"
`;
}

function wranglerToml(name, rules, preset) {
  if (preset === "crate") return crateWranglerToml(name, rules);
  const services = appService(name, preset, false);
  return `# tollgate, deployed with wrangler. Written by \`tollgate init\` (tollgate ${version}).
name = "${name}"
# The prebuilt tollgate Worker (Rust compiled to Wasm) from the npm package,
# re-exported by a file that the [build] command below writes only when the
# rules pass \`tollgate check\`.
main = ".tollgate/worker.mjs"
compatibility_date = "${COMPATIBILITY_DATE}"
minify = true

${routesPart(preset)}

# Every decision is counted in Analytics Engine (blocked, shadow, exempt,
# error one point each, allowed ones totalled per minute); Workers Logs
# keeps 10% of invocations with their JSON lines. head_sampling_rate = 1
# keeps every line, for about 10 times the log bill.
[observability]
enabled = true
head_sampling_rate = 0.1

[[analytics_engine_datasets]]
binding = "TOLLGATE_METRICS"
dataset = "tollgate"

# \`wrangler dev\` and \`wrangler deploy\` check the rules first: a config with
# an error never deploys (the error names the rule and the field). wrangler
# dev runs it twice at start, the second time when its file watcher is ready
# ("The file src changed, restarting build": wrangler's own; harmless).
[build]
command = "node node_modules/tollgate/bin/tollgate.mjs build wrangler.toml${preset === "in-front" ? " --app app/wrangler.toml" : ""}"

# One SQLite-backed Durable Object per (rule, key) counts exactly.
[[durable_objects.bindings]]
name = "LIMITER"
class_name = "Limiter"

# One class per role: the controls registry (and the console's sign-out),
# and the local metrics sink of \`scripts/dev\`. \`tollgate check\` names what
# a config lacks.
[[durable_objects.bindings]]
name = "TOLLGATE_REGISTRY"
class_name = "Registry"

[[durable_objects.bindings]]
name = "TOLLGATE_METRICS_SINK"
class_name = "MetricsSink"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Limiter"]

[[migrations]]
tag = "v2"
new_sqlite_classes = ["Registry", "MetricsSink"]
${services}
[vars]
${preset && APP_PRESETS[preset] ? "" : "# UPSTREAM = \"http://127.0.0.1:8788\"   # local development only: `npm run dev` sets it\n"}
${rules.trim()}
`;
}

/**
 * The admin Worker's config (issue 38): the console and the admin API of
 * the package's prebuilt admin Worker, its Durable Objects those of the
 * Worker `name` (script_name), the same rules (the admin API names rules
 * and derives keys as that Worker counts them: edit both, or copy).
 */
function adminWranglerToml(name, rules, preset) {
  return `# The admin Worker: the console and the admin API, apart from the Worker in
# wrangler.toml (which answers every spelling of the admin prefix 404).
# Written by \`tollgate init\` (tollgate ${version}). Deploy it after that one:
# \`npm run deploy:admin\`; set TOLLGATE_ADMIN_TOKEN (and TOLLGATE_LOG_KEY, the
# same as the other Worker's) with \`npx wrangler secret put NAME -c wrangler.admin.toml\`.
name = "${name}-admin"
main = "${ADMIN_ENTRY}"
compatibility_date = "${COMPATIBILITY_DATE}"
minify = true
# Served on ${name}-admin.SUBDOMAIN.workers.dev; or workers_dev = false and a
# custom domain of its own, with Cloudflare Access in front.
workers_dev = true
preview_urls = false

[observability]
enabled = true

[build]
command = "node node_modules/tollgate/bin/tollgate.mjs build wrangler.admin.toml${preset === "in-front" ? " --app app/wrangler.toml" : ""}"

# The objects of the Worker in wrangler.toml: the same counters, bans and sign-outs; no migrations here.
[[durable_objects.bindings]]
name = "LIMITER"
class_name = "Limiter"
script_name = "${name}"

[[durable_objects.bindings]]
name = "TOLLGATE_REGISTRY"
class_name = "Registry"
script_name = "${name}"

[[durable_objects.bindings]]
name = "TOLLGATE_METRICS_SINK"
class_name = "MetricsSink"
script_name = "${name}"
${appService(name, preset, true)}
[vars]

# The same rules as wrangler.toml's: keep the two equal.
${rules.trim()}
`;
}

/** The crate preset: the app Worker's own config, with tollgate's rules and object. */
function crateWranglerToml(name, rules) {
  return `# A Rust app Worker that embeds tollgate (tollgate::embed). Written by
# \`tollgate init --preset crate\` (tollgate ${version}).
name = "${name}"
main = "build/worker/shim.mjs"
compatibility_date = "${COMPATIBILITY_DATE}"

# Deploy step: the app's route (every request goes through tollgate::embed::check).
# routes = [{ pattern = "example.com/*", zone_name = "example.com" }]

[observability]
enabled = true
head_sampling_rate = 1

# \`tollgate build\` checks the rules, then runs worker-build (which needs
# cargo): a config with an error stops here, before anything compiles, the
# rule and the field named once.
[build]
command = "node node_modules/tollgate/bin/tollgate.mjs build wrangler.toml -- worker-build --release"

# tollgate's Limiter Durable Object, exported by this Worker (linking the crate).
[[durable_objects.bindings]]
name = "LIMITER"
class_name = "Limiter"

# One class per role: the controls registry (and the console's sign-out).
# \`tollgate check\` names what a config lacks.
[[durable_objects.bindings]]
name = "TOLLGATE_REGISTRY"
class_name = "Registry"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Limiter"]

[[migrations]]
tag = "v2"
new_sqlite_classes = ["Registry"]

[vars]

${rules.trim()}
`;
}

/**
 * npm 11's allowScripts (npm 12 runs no dependency's install script unless
 * it is listed): wrangler's esbuild and workerd check or fetch their
 * platform binary in theirs; sharp (an optional image library of
 * miniflare, unused here) needs none with its prebuilt binaries. Listed by
 * name, so a newer wrangler's versions stay covered; without the field,
 * every install warns that their scripts are "not yet covered".
 */
const ALLOW_SCRIPTS = { esbuild: true, workerd: true, sharp: false };

function packageJson(name, tollgate, preset) {
  const scripts = {
    dev: "tollgate dev",
    check: "tollgate check",
    explain: "tollgate explain",
    deploy: "tollgate check && wrangler deploy",
    ...(preset === "crate" ? {} : { "deploy:admin": `tollgate check wrangler.admin.toml${preset === "in-front" ? " --app app/wrangler.toml" : ""} && wrangler deploy -c wrangler.admin.toml` }),
    ...(APP_PRESETS[preset]?.scripts ?? {}),
  };
  const project = { name, private: true, type: "module", scripts, devDependencies: { tollgate, wrangler: WRANGLER }, allowScripts: ALLOW_SCRIPTS };
  return `${JSON.stringify(project, null, 2)}\n`;
}

/** An app preset's files (presets/NAME/...), with {{NAME}}, {{APP}}, ... filled in. */
function writePresetFiles(dir, preset, name) {
  const values = { NAME: name, APP: `${name}-app`, CRATE: name.replace(/-/g, "_"), VERSION: version, COMPATIBILITY_DATE };
  for (const file of APP_PRESETS[preset].files) {
    const text = readFileSync(join(PACKAGE, "presets", preset, file), "utf8");
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text.replace(/\{\{([A-Z_]+)\}\}/g, (whole, key) => values[key] ?? whole));
  }
}

export async function init(args) {
  if (args.includes("-h") || args.includes("--help")) {
    console.log(USAGE);
    return 0;
  }
  let options;
  try {
    options = parse(args);
  } catch (e) {
    console.error(`tollgate init: ${e.message}\n${USAGE}`);
    return 2;
  }
  const dir = resolve(options.dir);
  if (existsSync(dir) && readdirSync(dir).length > 0) {
    console.error(`tollgate init: ${options.dir} is not empty; pick a new directory`);
    return 1;
  }
  let rules;
  try {
    rules = readFileSync(options.rules ?? join(PACKAGE, "presets", `${options.preset}.toml`), "utf8");
  } catch (e) {
    console.error(`tollgate init: cannot read ${options.rules}: ${e.message}`);
    return 1;
  }
  if (!/^\[vars\.TOLLGATE\]/m.test(rules)) {
    console.error(`tollgate init: ${options.rules} has no [vars.TOLLGATE] table (see the presets in ${join(PACKAGE, "presets")})`);
    return 1;
  }
  const name = (options.name ?? basename(dir)).toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/^-+|-+$/g, "") || "tollgate";
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "wrangler.toml"), wranglerToml(name, rules, options.preset));
  // The console and the admin API: a Worker of their own (not for a Rust app, which builds its own).
  if (options.preset !== "crate") writeFileSync(join(dir, "wrangler.admin.toml"), adminWranglerToml(name, rules, options.preset));
  writeFileSync(join(dir, "package.json"), packageJson(name, dependencySpec(options.tollgate), options.preset));
  const ignored = options.preset === "crate" ? "target/\nbuild/\n" : ".tollgate/\n";
  writeFileSync(join(dir, ".gitignore"), `node_modules/\n.wrangler/\n${ignored}.dev.vars\n`);
  if (APP_PRESETS[options.preset]) writePresetFiles(dir, options.preset, name);
  // The rules are checked now (a --rules file may have errors), as
  // `npm run check` would: the errors name the rule and the field.
  const { runCli } = await import("../cli/tollgate_cli.js");
  const appConfig = options.preset === "in-front" ? ["--app", join(dir, "app", "wrangler.toml")] : [];
  const [code, , stderr] = runCli(["check", join(dir, "wrangler.toml"), ...appConfig], (path) => readFileSync(path), () => undefined);
  if (code !== 0) {
    process.stderr.write(stderr);
    console.error(`tollgate init: wrote ${options.dir}/, but its rules have the errors above: fix them in wrangler.toml, then npm run check`);
    return 1;
  }
  const extra = APP_PRESETS[options.preset]?.files.map((f) => `, ${f}`).join("") ?? "";
  const admin = options.preset === "crate" ? "" : ", wrangler.admin.toml (the console and the admin API)";
  console.log(`wrote ${options.dir}/: package.json, wrangler.toml (${options.preset ? `preset ${options.preset}` : `rules of ${options.rules}`})${admin}${extra}, .gitignore`);

  if (options.install) {
    console.log(`installing tollgate and wrangler ${WRANGLER} (npm install)`);
    const npm = spawnSync("npm", ["install", "--no-audit", "--no-fund"], { cwd: dir, stdio: "inherit" });
    if (npm.status !== 0) {
      console.error(
        options.tollgateGiven
          ? `tollgate init: npm install failed in ${options.dir}; fix it and run npm install there`
          : // The default spec is the registry's tollgate, which may not be published yet (issue 53).
            `tollgate init: npm install failed in ${options.dir}: package.json asks the npm registry for tollgate ${options.tollgate}, which may not be published yet.
  With the tarball that scripts/pack makes (build/npm/tollgate-${version}.tgz), in ${options.dir}:
    npm install --save-dev /path/to/tollgate-${version}.tgz
  or start again with: tollgate init DIR --tollgate /path/to/tollgate-${version}.tgz`,
      );
      return 1;
    }
  }
  console.log(`
next:
  cd ${options.dir}
${options.install ? "" : "  npm install\n"}  ${APP_PRESETS[options.preset]?.next ?? "npm run dev        # tollgate on http://127.0.0.1:8787, in front of a demo origin"}
${TRY[options.preset] ? `  ${TRY[options.preset]}\n` : ""}  npm run check      # validate the rules offline
  ${APP_PRESETS[options.preset]?.deploy ?? "npm run deploy     # after setting routes in wrangler.toml (npx wrangler login first)"}`);
  return 0;
}
