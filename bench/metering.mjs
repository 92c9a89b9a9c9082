// Metering rules next to a plain one (issue 29): CPU per request and
// limiter-object calls per request for
//   plain   a rule counting every request (hit; lease off, as the others)
//   usage   metering = { header, reserve, max }: reserve, then commit the
//           origin's reported units
//   slots   concurrency = 8: reserve (the slot), then commit once the body
//           has been sent
// each in its own workerd (Miniflare, the harness of tests/worker: SQLite
// objects, the origin mocked at the network edge and reporting usage),
// driven over dispatchFetch by 8 clients, each client its own key. CPU is
// the workerd process's user + system time (/proc/PID/stat) per request
// served, objects included; object calls are counted by the harness's
// pass-through proxy in front of the limiter (which costs CPU of its own,
// the same for every rule). Rounds interleaved; medians.
//
//   node bench/metering.mjs [SECONDS] [ROUNDS]     (after scripts/build)
import { workerdPids, cpuUs } from "./procs.mjs";
import { startTollgate, mockOrigin } from "../tests/worker/harness.mjs";

const seconds = Number(process.argv[2] ?? 3);
const rounds = Number(process.argv[3] ?? 5);
const limits = [{ requests: 1_000_000, window: "1h" }];
const base = { key: ["header:x-client"], algorithm: "gcra", limits, lease: "off", ratelimit_headers: true };
const RULES = {
  plain: { name: "plain", path: "/plain", ...base },
  usage: { name: "usage", path: "/usage", ...base, counting: { mode: "response" }, metering: { header: "x-usage", reserve: 10, max: 10 } },
  slots: { name: "slots", path: "/slots", ...base, concurrency: 8 },
};


async function start(name) {
  const before = workerdPids();
  const origin = mockOrigin(() => new Response("origin ok", { headers: { "x-usage": "7" } }));
  const tg = await startTollgate({ origin, config: { rules: [RULES[name]] }, faults: true });
  const pid = [...workerdPids()].find((p) => !before.has(p));
  return { name, tg, pid, statuses: {}, rps: [] };
}

async function load(sys, ms) {
  const until = Date.now() + ms;
  let served = 0;
  await Promise.all(
    Array.from({ length: 8 }, async (_, client) => {
      while (Date.now() < until) {
        const res = await sys.tg.fetch(`/${sys.name}`, { headers: { "x-client": `c${client}` } });
        await res.arrayBuffer();
        if (res.status === 200) served++;
        sys.statuses[res.status] = (sys.statuses[res.status] ?? 0) + 1;
      }
    }),
  );
  return served;
}

const systems = [];
for (const name of Object.keys(RULES)) systems.push(await start(name));
for (const sys of systems) await load(sys, 1_000);
const cpu = new Map(systems.map((s) => [s.name, []]));
const calls = new Map(systems.map((s) => [s.name, []]));
for (let r = 0; r < rounds; r++) {
  for (const sys of r % 2 ? [...systems].reverse() : systems) {
    const [t0, c0] = [cpuUs(sys.pid), await sys.tg.objectCalls()];
    const served = await load(sys, seconds * 1_000);
    sys.rps.push(served / seconds);
    await new Promise((resolve) => setTimeout(resolve, 200)); // settlements after the answer
    cpu.get(sys.name).push((cpuUs(sys.pid) - t0) / served);
    calls.get(sys.name).push(((await sys.tg.objectCalls()) - c0) / served);
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(`${rounds} rounds of ${seconds} s, 8 clients; median CPU µs per request (workerd, objects included) and object calls per request:`);
for (const sys of systems) {
  console.log(`  ${sys.name.padEnd(6)} ${median(cpu.get(sys.name)).toFixed(0).padStart(6)} µs   ${median(calls.get(sys.name)).toFixed(2)} calls   (rounds: ${cpu.get(sys.name).map((x) => x.toFixed(0)).join(" ")}; ${median(sys.rps).toFixed(0)} req/s; statuses ${JSON.stringify(sys.statuses)})`);
}
for (const sys of systems) {
  await sys.tg.dispose();
  sys.tg.cleanup();
}
