// Turns the raw outcome of tests/origins/run.mjs into the report: per origin
// the bypasses (a protected handler ran past the limit for one identity)
// and the false positives (tollgate refused a request the origin would not
// have routed to any protected action), each grouped by cause, plus the
// harness's own checks. report.json is this object; summary.md its text.

const REFUSED = new Set([400, 429, 503]);

/** Handler runs per identity in a list of answers. */
function runsByIdentity(answers) {
  const runs = new Map();
  for (const a of answers) {
    if (!a.forwarded || !a.handler) continue;
    const key = `${a.handler}\u0000${a.identity}`;
    runs.set(key, (runs.get(key) ?? 0) + 1);
  }
  return [...runs].map(([key, count]) => {
    const [handler, identity] = key.split("\u0000");
    return { handler, identity, count };
  });
}

function group(entries, value) {
  const out = new Map();
  for (const e of entries) {
    const g = out.get(e.cause) ?? { cause: e.cause, row: e.row, spellings: 0, ...Object.fromEntries(Object.keys(value(e)).map((k) => [k, 0])) };
    g.spellings++;
    for (const [k, v] of Object.entries(value(e))) g[k] += v;
    out.set(e.cause, g);
  }
  return [...out.values()].sort((a, b) => b.spellings - a.spellings || a.cause.localeCompare(b.cause));
}

/** Per row of issue 15 (— for the path and query grammar): spellings sent and bypassing. */
function rowTable(result, bypasses) {
  const rows = {};
  const label = (row) => (row === null ? "—" : String(row));
  for (const s of result.spellings) {
    rows[label(s.row)] ??= { sent: 0, bypassing: 0 };
    rows[label(s.row)].sent++;
  }
  for (const b of bypasses) rows[label(b.row)].bypassing++;
  return rows;
}

/** The origins whose oracle ran a protected handler for spelling `id`. */
function routedBy(results, id) {
  return results.filter((r) => r.oracle.get(id)?.handler).map((r) => r.name);
}

function originReport(result, results, limits, sends) {
  const bypasses = [];
  const falsePositives = [];
  const checks = [];
  const mismatches = [];
  for (const s of result.spellings) {
    const oracle = result.oracle.get(s.id);
    const fresh = result.fresh.get(s.id);
    const cycle = result.cycle.get(s.id);
    const reads = oracle.handler
      ? `${oracle.handler} for ${oracle.identity === oracle.canonicalIdentity ? "the canonical identity" : JSON.stringify(oracle.identity)} (read ${oracle.read})`
      : `no protected handler (status ${oracle.status})`;

    // Fresh client (when sent): the 11 sends and the canonical probe.
    const worst = fresh
      ? runsByIdentity([...fresh.sends, fresh.probe])
          .map((r) => ({ ...r, excess: r.count - (limits[r.handler] ?? Infinity) }))
          .sort((a, b) => b.excess - a.excess)[0]
      : null;
    const variantRuns = fresh ? fresh.sends.filter((a) => a.forwarded && a.handler).length : 0;
    // The oracle and the first forwarded send must agree on the route.
    const first = fresh?.sends.find((a) => a.forwarded);
    if (first && Boolean(first.handler) !== Boolean(oracle.handler)) {
      mismatches.push(`${s.id}: oracle ${oracle.handler ?? "no handler"}, forwarded ${first.handler ?? "no handler"}`);
    }
    const phases = [];
    if (worst && worst.excess > 0) phases.push("fresh");
    if (cycle.overLimit) phases.push("cycle");
    if (phases.length) {
      bypasses.push({
        id: s.id,
        action: s.action,
        row: s.row,
        cause: s.cause,
        phases,
        fresh: worst && worst.excess > 0 ? { handler: worst.handler, runs: worst.count, limit: limits[worst.handler], excess: worst.excess, variantRuns } : null,
        cycle: cycle.overLimit ? { handler: cycle.handler, nth: cycle.nth, limit: limits[cycle.handler] } : null,
        origin: reads,
      });
    }

    // Refused by tollgate, yet the origin routes it to no protected action.
    const refusals = [...(fresh?.sends ?? []), cycle].filter((a) => !a.forwarded && REFUSED.has(a.status));
    if (!oracle.handler && refusals.length) {
      const elsewhere = routedBy(results, s.id);
      falsePositives.push({
        id: s.id,
        action: s.action,
        row: s.row,
        cause: s.cause,
        statuses: [...new Set(refusals.map((a) => a.status))].sort(),
        refusals: refusals.length,
        origin: reads,
        routedBy: elsewhere,
      });
    }

    if (s.cause.startsWith("canonical")) {
      checks.push({
        check: `the origin runs ${s.action} for the canonical request (${s.config})`,
        ok: oracle.handler === s.action && oracle.identity === oracle.canonicalIdentity,
        detail: reads,
      });
      const ran = fresh.sends.filter((a) => a.forwarded && a.handler === s.action).length;
      const refused = fresh.sends.slice(limits[s.action]).every((a) => !a.forwarded && a.status === 429);
      checks.push({
        check: `tollgate lets exactly ${limits[s.action]} canonical ${s.action} requests through, then answers 429 (${s.config})`,
        ok: ran === limits[s.action] && refused,
        detail: `${ran} of ${sends} ran; statuses ${fresh.sends.map((a) => a.status).join(" ")}`,
      });
    }
  }
  checks.push({ check: "the Worker never panicked", ok: !result.workerPanicked, detail: "" });
  checks.push({
    check: "the oracle and the first forwarded request agree on whether a protected handler runs",
    ok: mismatches.length === 0,
    detail: mismatches.slice(0, 10).join("; "),
  });
  const excessRuns = (b) => ({ excessRuns: b.fresh ? b.fresh.excess : 0, cycleRuns: b.cycle ? 1 : 0 });
  return {
    origin: result.name,
    version: result.version,
    spellingsSent: result.spellings.length,
    spellingsSentElevenTimes: result.fresh.size,
    requests: result.requests,
    seconds: Math.round(result.seconds * 10) / 10,
    bypassCount: bypasses.length,
    falsePositiveCount: falsePositives.length,
    bypassesByCause: group(bypasses, excessRuns),
    falsePositivesByCause: group(falsePositives, (f) => ({ routedElsewhere: f.routedBy.length ? 1 : 0, ...Object.fromEntries(f.statuses.map((st) => [`status${st}`, 1])) })),
    rows: rowTable(result, bypasses),
    checks,
    bypasses,
    falsePositives,
  };
}

/** The report of a run over several origins. */
export function summarize(results, { distinct, limits, sends, configs }) {
  const origins = results.map((r) => originReport(r, results, limits, sends));
  return {
    generated: new Date().toISOString(),
    invariant: "no protected handler of an origin runs more than its limit for one identity, as that origin identifies it",
    distinctSpellings: distinct,
    sendsPerSpelling: `${sends} times from a fresh client, then its canonical request once (spellings an origin routes to a protected handler; all with TOLLGATE_ORIGINS_FULL=1), and once in one client's cycle`,
    limits,
    configs,
    totals: {
      requests: origins.reduce((a, o) => a + o.requests, 0),
      seconds: Math.round(origins.reduce((a, o) => a + o.seconds, 0) * 10) / 10,
      bypasses: origins.reduce((a, o) => a + o.bypassCount, 0),
      falsePositives: origins.reduce((a, o) => a + o.falsePositiveCount, 0),
    },
    origins,
  };
}

/** Causes as the summary groups them: the query half of a path × query spelling folded. */
const broadly = (cause) => cause.replace(/ \+ query: .*$/, " (with a query mutation)").replace(" (no rule with query conditions)", "");

function regroup(groups, keys) {
  const out = new Map();
  for (const g of groups) {
    const cause = broadly(g.cause);
    const acc = out.get(cause) ?? { cause, ...Object.fromEntries(keys.map((k) => [k, 0])) };
    for (const k of keys) acc[k] += g[k] ?? 0;
    out.set(cause, acc);
  }
  return [...out.values()].sort((a, b) => b.spellings - a.spellings || a.cause.localeCompare(b.cause));
}

/** The readable summary (Markdown). */
export function summaryText(report) {
  const lines = [];
  lines.push("# tollgate against real origins", "");
  lines.push(`Invariant: ${report.invariant}.`, "");
  lines.push(
    `${report.distinctSpellings} distinct spellings; each sent ${report.sendsPerSpelling}. ` +
      `${report.totals.requests} requests in ${report.totals.seconds} s. ` +
      `Bypasses: ${report.totals.bypasses} spelling(s); false positives: ${report.totals.falsePositives}.`,
    "",
  );
  lines.push("| origin | version | spellings | of them sent 11 times | requests | seconds | bypassing spellings | false positives | checks |");
  lines.push("|---|---|--:|--:|--:|--:|--:|--:|---|");
  for (const o of report.origins) {
    const failed = o.checks.filter((c) => !c.ok).length;
    lines.push(
      `| ${o.origin} | ${o.version} | ${o.spellingsSent} | ${o.spellingsSentElevenTimes} | ${o.requests} | ${o.seconds} | ${o.bypassCount} | ${o.falsePositiveCount} | ${failed ? `${failed} failed` : "ok"} |`,
    );
  }
  lines.push("", "## Issue 15's rows", "");
  lines.push("Bypassing spellings / spellings of the row sent to the origin (the path and query grammar is row —).", "");
  const rows = [...new Set(report.origins.flatMap((o) => Object.keys(o.rows)))].sort();
  lines.push(`| row | ${report.origins.map((o) => o.origin).join(" | ")} |`);
  lines.push(`|---|${report.origins.map(() => "--:").join("|")}|`);
  for (const row of rows) {
    lines.push(`| ${row} | ${report.origins.map((o) => (o.rows[row] ? `${o.rows[row].bypassing} / ${o.rows[row].sent}` : "")).join(" | ")} |`);
  }
  lines.push("", "## Bypasses by origin and cause", "");
  lines.push(
    "Spellings: how many ran a protected handler past the limit; excess runs: handler runs past the limit among a fresh client's 11 sends and its canonical request; cycle: spellings that ran past the limit in the one-client cycle.",
    "",
  );
  lines.push("| origin | cause | spellings | excess runs | cycle |");
  lines.push("|---|---|--:|--:|--:|");
  for (const o of report.origins) {
    for (const g of regroup(o.bypassesByCause, ["spellings", "excessRuns", "cycleRuns"])) {
      lines.push(`| ${o.origin} | ${g.cause} | ${g.spellings} | ${g.excessRuns} | ${g.cycleRuns} |`);
    }
  }
  lines.push("", "## False positives by origin and cause", "");
  lines.push(
    "tollgate refused (400/429/503) a request this origin routes to no protected action. Routed elsewhere: of those spellings, how many another origin of the run does route to a protected action (they must stay limited).",
    "",
  );
  lines.push("| origin | cause | spellings | routed elsewhere | refused with |");
  lines.push("|---|---|--:|--:|---|");
  for (const o of report.origins) {
    for (const g of regroup(o.falsePositivesByCause, ["spellings", "routedElsewhere", "status400", "status429", "status503"])) {
      const statuses = [400, 429, 503].filter((st) => g[`status${st}`]).map((st) => `${st} (${g[`status${st}`]})`).join(", ");
      lines.push(`| ${o.origin} | ${g.cause} | ${g.spellings} | ${g.routedElsewhere} | ${statuses} |`);
    }
  }
  const failedChecks = report.origins.flatMap((o) => o.checks.filter((c) => !c.ok).map((c) => `- ${o.origin}: ${c.check}: ${c.detail}`));
  if (failedChecks.length) lines.push("", "## Harness checks that failed", "", ...failedChecks);
  lines.push("");
  return lines.join("\n");
}
