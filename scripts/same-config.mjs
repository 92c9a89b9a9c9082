// node scripts/same-config.mjs CONFIG [ENV]: when CONFIG (a wrangler .toml)
// binds LIMITER to another Worker by script_name (the admin Worker,
// wrangler.admin.toml), checks that its TOLLGATE var is the very one of the
// wrangler.toml beside it (of the same environment): the admin API names
// rules and derives keys as the zone's Worker counts them. Exits 1 naming
// the difference; 0 (silent) for any other config. scripts/check-deploy runs it.
import { readFileSync, existsSync } from "node:fs";
import { dirname, join, basename } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse } from "smol-toml";

const [config, env] = process.argv.slice(2);
const section = (toml) => (env ? toml.env?.[env] ?? {} : toml);
const admin = parse(readFileSync(config, "utf8"));
const limiter = (section(admin).durable_objects?.bindings ?? []).find((b) => b.name === "LIMITER");
if (!limiter?.script_name) process.exit(0);
const zonePath = join(dirname(config), "wrangler.toml");
if (basename(config) === "wrangler.toml" || !existsSync(zonePath)) process.exit(0);
const zone = parse(readFileSync(zonePath, "utf8"));
const [mine, theirs] = [section(admin).vars?.TOLLGATE, section(zone).vars?.TOLLGATE];
if (zone.name !== limiter.script_name) {
  console.error(`${basename(config)}: LIMITER names the Worker \`${limiter.script_name}\`, but ${zonePath} deploys \`${zone.name}\``);
  process.exit(1);
}
if (!isDeepStrictEqual(mine, theirs)) {
  const keys = new Set([...Object.keys(mine ?? {}), ...Object.keys(theirs ?? {})]);
  const differ = [...keys].filter((k) => !isDeepStrictEqual(mine?.[k], theirs?.[k]));
  console.error(
    `${basename(config)}: its [vars.TOLLGATE]${env ? ` (env ${env})` : ""} differs from wrangler.toml's (${differ.join(", ") || "one is missing"}): ` +
      "the admin Worker must read the zone Worker's config exactly; copy wrangler.toml's [vars.TOLLGATE] over",
  );
  process.exit(1);
}
