#!/usr/bin/env node
// `npm create tollgate@latest DIR [-- --preset P]`: npm runs this bin, which
// is `tollgate init` of the tollgate package this one depends on (the same
// version), so both ways of starting a project write the same one.
import { init } from "tollgate/init";

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error(`usage: npm create tollgate@latest DIR [-- --preset P | --rules FILE]
  (npm passes options to it after --; \`npx tollgate init DIR --preset P\` does the same)`);
}
process.exitCode = await init(args);
