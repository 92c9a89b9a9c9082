// The benchmarks' reading of /proc: which workerd processes this Node
// process started, and how much CPU each has used (Linux only).
import { readFileSync, readdirSync } from "node:fs";
import { execFileSync } from "node:child_process";

/** Microseconds per clock tick of /proc's CPU times. */
export const TICK_US = 1e6 / (Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100);

/** This process's workerd children, by pid (as /proc names them); other
 * workerds on a shared machine come and go. */
export function workerdPids() {
  const out = new Set();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (stat.includes("(workerd)") && ppid === process.pid) out.add(d);
    } catch {}
  }
  return out;
}

/** The CPU time `pid` has used so far, in µs: the sum of its threads'
 * time on a CPU from /proc/PID/task/TID/schedstat (nanoseconds, so a
 * short cell is not rounded to clock ticks of 10 ms; a thread that
 * exited is no longer counted: workerd's threads live as long as it),
 * else user + system from /proc/PID/stat (clock ticks). */
export function cpuUs(pid) {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    if (ns > 0) return ns / 1000;
  } catch {}
  const st = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * TICK_US;
}

/** The resident memory (VmRSS) of this process's workerd children, in MB. */
export function rssMb() {
  let sum = 0;
  for (const pid of workerdPids()) {
    try {
      const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
      sum += Number(line.split(/\s+/)[1]) / 1024;
    } catch {}
  }
  return sum;
}
