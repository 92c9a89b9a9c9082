// examples/student-chat end to end (issue 37 item 5): the shipped config,
// the built Worker in workerd, in front of the example's own demo origin
// (scripts/demo-origin.mjs, a real local HTTP server reached through the
// UPSTREAM var) streaming OpenAI-style SSE. Every number of the config is
// proven here: 10 a minute per link and per device, 60 a minute per network
// whatever the cookies and links, 300 answered questions per school a day
// (400s, out of scope answers and links of another school not counted),
// 200,000 tokens per school a day from the streams' own usage, and 503 when
// the counter cannot be reached. The attacker's moves ride along: usage
// written into the question, links in another case, made-up links, fresh
// cookies, a school the link was not issued for, a client that asks for a
// huge answer or no usage at all.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { withTollgate, exampleConfig, sleep, ROOT } from "./harness.mjs";
import { demoOrigin, demoLink, MAX_ANSWER_TOKENS } from "../../scripts/demo-origin.mjs";

const DAY_MS = 86_400_000;
const CONFIG = exampleConfig("student-chat");
const ruleOf = (cfg, name) => cfg.rules.find((r) => r.name === name);
/** The config's own numbers: the tests read them, so a change of the example is a change here. */
const LIMIT = Object.fromEntries(CONFIG.rules.map((r) => [r.name, r.limits[0].requests]));

/**
 * Runs `body(tg, origin)` with tollgate (`cfg`, the example's by default) in
 * front of the demo origin; `origin.requests` counts what reached it.
 */
async function withChat(body, { cfg = CONFIG, faults = false } = {}) {
  const server = demoOrigin(["student-chat"], { chunkMs: 1 });
  const origin = { requests: 0 };
  server.on("request", () => origin.requests++);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  try {
    const vars = { UPSTREAM: `http://127.0.0.1:${server.address().port}` };
    await withTollgate({ config: cfg, vars, faults, workerOptions: { outboundService: undefined } }, (tg) => body(tg, origin));
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

/** The usage an answer reported (its last SSE chunk with usage, or its JSON body's), or undefined. */
function usageOf(text) {
  if (!text.startsWith("data:")) {
    try {
      return JSON.parse(text).usage ?? undefined;
    } catch {
      return undefined;
    }
  }
  const events = text.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
  return events.filter((e) => e.usage).at(-1)?.usage;
}

/**
 * One question, as the chat page sends it: POST /s/SCHOOL/LINK/chat with the
 * device cookie, from `ip`. `text` the question (`null`: an invalid body),
 * `maxTokens`, `includeUsage` (true), `stream` (true), `extra` more body
 * members. Resolves to { status, rule (a refusal's), usage, text }.
 */
async function ask(tg, { school = "42", link, device, ip, text = "what is a prime number?", maxTokens, includeUsage = true, stream = true, extra = {} }) {
  const body =
    text === null
      ? "not json"
      : JSON.stringify({
          messages: [{ role: "user", content: text }],
          stream,
          ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
          ...(maxTokens ? { max_tokens: maxTokens } : {}),
          ...extra,
        });
  const headers = { "content-type": "application/json", ...(device ? { cookie: `device=${device}` } : {}) };
  const res = await tg.fetch(`/s/${school}/${link}/chat`, { method: "POST", body, headers, ip });
  const answer = await res.text();
  // problem+json names the rule; an LLM rule's refusal in OpenAI's shape (metering.refusal) says it in its message.
  const refusal = res.status === 429 || res.status === 503 ? JSON.parse(answer) : undefined;
  const rule = refusal && (refusal.rule ?? refusal.error?.message?.match(/`([^`]+)`/)?.[1]);
  return { status: res.status, rule, usage: usageOf(answer), text: answer, answered: res.headers.get("x-answered") };
}

/**
 * Asks `plan`; a 429 from `rule` while its school object still holds
 * reservations (two-phase counting: a question in flight holds its unit
 * until the origin's answer settles it, an out of scope one included) is
 * asked again once they settled, as `retry` (a fresh link, device and
 * network: the refusal counted in those).
 */
async function askSettled(tg, plan, retry, rule, school) {
  const first = await ask(tg, plan);
  if (first.status !== 429 || first.rule !== rule || !(await schoolObject(tg, rule, school)).held) return first;
  await settledSchool(tg, rule, school);
  return ask(tg, { ...plan, ...retry });
}

/** Sends `plans` (ask options) `wave` at a time; resolves to their answers, in order. */
async function inWaves(tg, plans, wave = 20) {
  const out = [];
  for (let i = 0; i < plans.length; i += wave) out.push(...(await Promise.all(plans.slice(i, i + wave).map((p) => ask(tg, p)))));
  return out;
}

/** The reply of a school rule's object (status: nothing recorded). */
async function schoolObject(tg, rule, school, cfg = CONFIG) {
  const limit = ruleOf(cfg, rule).limits[0].requests;
  return (await tg.callObject(`${rule}\npath:school:int=${school}`, { v: 1, op: "status", limits: [[limit, DAY_MS]] })).body;
}

/** Waits until a school rule's object holds no reservation (every answer settled): at most 5 s. */
async function settledSchool(tg, rule, school, cfg = CONFIG) {
  for (let i = 0; i < 100; i++) {
    const reply = await schoolObject(tg, rule, school, cfg);
    if (!reply.held) return reply;
    await sleep(50);
  }
  assert.fail(`${rule} of school ${school} still holds reservations after 5 s`);
}

test("`tollgate init --preset llm` writes these same rules", () => {
  const preset = parseToml(readFileSync(join(ROOT, "packages", "tollgate", "presets", "llm.toml"), "utf8"));
  const plain = (value) => JSON.parse(JSON.stringify(value));
  assert.deepEqual(plain(preset.vars.TOLLGATE), plain(CONFIG));
});

const statusesOf = (answers) => answers.map((a) => (a.status === 429 || a.status === 503 ? `${a.status} ${a.rule}` : a.status));
const times = (n, value) => Array(n).fill(value);

test("per link: 10 questions a minute, whatever the devices and networks, the link in any case", { timeout: 60_000 }, () =>
  withChat(async (tg) => {
    const link = demoLink(42, 1);
    const plans = Array.from({ length: LIMIT["per-link"] }, (_, i) => ({ link, device: `link-d${i}`, ip: `198.51.100.${i + 1}` }));
    const served = await inWaves(tg, plans, 1);
    assert.deepEqual(statusesOf(served), times(LIMIT["per-link"], 200));
    const again = await ask(tg, { link: link.toUpperCase(), device: "link-fresh", ip: "198.51.100.200" });
    assert.equal(`${again.status} ${again.rule}`, "429 per-link", "a fresh device and network, the link in upper case: the same link");
  }),
);

test("per device: 10 a minute across links and networks; no device cookie is 400, never a shared bucket", { timeout: 60_000 }, () =>
  withChat(async (tg, origin) => {
    const plans = Array.from({ length: LIMIT["per-device"] + 1 }, (_, i) => ({ link: demoLink(42, 100 + i), device: "one-device", ip: `198.51.100.${i + 1}` }));
    assert.deepEqual(statusesOf(await inWaves(tg, plans, 1)), [...times(LIMIT["per-device"], 200), "429 per-device"]);
    const before = origin.requests;
    const none = await ask(tg, { link: demoLink(42, 200), ip: "198.51.100.99" });
    assert.equal(none.status, 400);
    assert.equal(origin.requests, before, "a request with no device cookie never reaches the origin");
  }),
);

test("per network: fresh cookies and made-up links from one network stop at 60 a minute, an IPv6 /64 is one network", { timeout: 60_000 }, () =>
  withChat(async (tg) => {
    const n = LIMIT["per-network"];
    // Half made up (the origin's 403), half real links, each used at most 10 times; a new cookie every time.
    const plans = Array.from({ length: n }, (_, i) => ({
      link: i % 2 ? demoLink(42, 300 + Math.floor(i / 10)) : `${i}-made-up-link`,
      device: `net-fresh-${i}`,
      ip: "2001:db8:7:1::1",
    }));
    const answers = await inWaves(tg, plans, 1);
    assert.deepEqual(statusesOf(answers), plans.map((_, i) => (i % 2 ? 200 : 403)));
    const next = await ask(tg, { link: demoLink(42, 399), device: "net-fresh-last", ip: "2001:db8:7:1:ffff::2" });
    assert.equal(`${next.status} ${next.rule}`, "429 per-network", "another address of the same /64, a new cookie, a new link: still the network's 60");
    const elsewhere = await ask(tg, { link: demoLink(42, 399), device: "net-fresh-last", ip: "2001:db8:7:2::1" });
    assert.equal(elsewhere.status, 200, "another /64 is another network");
  }),
);

test("300 answered questions per school a day: invalid questions, out of scope ones and links of another school cost nothing", { timeout: 120_000 }, () =>
  withChat(async (tg, origin) => {
    const quota = LIMIT["school-questions"];
    // Every request its own link, device and network slot within their limits (10, 10, 60 a minute).
    const slot = (i) => ({ link: demoLink(42, 1000 + Math.floor(i / 10)), device: `q-d${Math.floor(i / 10)}`, ip: `198.18.${Math.floor(i / 50)}.1` });
    const kinds = [];
    for (let i = 0; i < quota; i++) {
      kinds.push("answer");
      if (i % 30 === 0) kinds.push(i % 60 ? "not json" : "empty question");
      if (i % 30 === 10) kinds.push("out of scope");
      if (i % 30 === 20) kinds.push(i % 60 === 20 ? "other school" : "school 4.2e1");
    }
    const plans = kinds.map((kind, i) => {
      const p = slot(i);
      if (kind === "not json") return { ...p, text: null };
      if (kind === "empty question") return { ...p, text: " " };
      if (kind === "out of scope") return { ...p, text: "any bitcoin tips for tonight?" };
      // The path names school 42 (or 4.2e1: 4 and 42 to tollgate's :int), the link is school 4's: 403.
      if (kind === "other school") return { ...p, link: demoLink(4, i) };
      if (kind === "school 4.2e1") return { ...p, school: "4.2e1", link: demoLink(4, i) };
      return { ...p, maxTokens: 5 };
    });
    // In waves far from the quota; the last 20 questions one by one, each
    // asked again if refused while another's unit was still held.
    let tail = 0;
    for (let answered = 0; answered < quota - 20; tail++) if (kinds[tail] === "answer") answered++;
    const answers = await inWaves(tg, plans.slice(0, tail));
    for (const [j, plan] of plans.slice(tail).entries()) {
      answers.push(await askSettled(tg, plan, slot(kinds.length + 20 + j), "school-questions", 42));
    }
    const expected = { answer: 200, "not json": 400, "empty question": 400, "out of scope": 200, "other school": 403, "school 4.2e1": 403 };
    assert.deepEqual(statusesOf(answers), kinds.map((k) => expected[k]));
    for (const [i, a] of answers.entries()) {
      if (kinds[i] === "out of scope") assert.equal(a.usage?.total_tokens, 0, "an out of scope answer costs nothing");
      if (kinds[i] === "answer") assert.ok(a.usage?.total_tokens > 0);
      assert.equal(a.answered, null, "x-answered is the origin's word to tollgate: removed from the client's answer");
    }
    const uncounted = kinds.length - quota;
    assert.equal(uncounted, 30, "requests besides the answers, each of which would have taken one of the 300");
    const reply = await settledSchool(tg, "school-questions", 42);
    assert.equal(reply.windows[0].used, quota, "exactly the answers counted");
    const before = origin.requests;
    const over = await ask(tg, { ...slot(kinds.length + 10), maxTokens: 5 });
    assert.equal(`${over.status} ${over.rule}`, `429 school-questions`);
    const oos = await ask(tg, { ...slot(kinds.length + 11), text: "casino?" });
    assert.equal(`${oos.status} ${oos.rule}`, `429 school-questions`, "a spent quota refuses before the origin classifies the question");
    assert.equal(origin.requests, before, "nothing past the quota reached the origin");
    const other = await ask(tg, { ...slot(kinds.length + 12), school: "43", link: demoLink(43, 1), maxTokens: 5 });
    assert.equal(other.status, 200, "another school has its own 300");
    assert.equal((await schoolObject(tg, "school-questions", 4)).windows[0].used, 0, "school 4 was charged nothing by the 4.2e1 spellings");
  }),
);

test("200,000 tokens per school a day from the streams' usage: answers of 1,000 tokens, exactly 200 served, usage written into the question ignored", { timeout: 120_000 }, () =>
  withChat(async (tg, origin) => {
    const budget = LIMIT["school-tokens"];
    const { reserve, max } = ruleOf(CONFIG, "school-tokens").metering;
    assert.equal(reserve, max, "reserve = max: the budget is never exceeded");
    assert.equal(max, MAX_ANSWER_TOKENS, "the demo origin caps an answer at the rule's max");
    const expected = budget / max;
    // Asking for 100,000 tokens: the origin caps the answer at 1,000, prompt included.
    // The question carries a forged usage event, the body a forged usage member: neither is the answer's.
    const forged = 'data: {"choices":[],"usage":{"prompt_tokens":0,"completion_tokens":1,"total_tokens":1}}';
    const plans = Array.from({ length: expected + 5 }, (_, i) => ({
      school: "43",
      link: demoLink(43, 2000 + Math.floor(i / 10)),
      device: `t-d${Math.floor(i / 10)}`,
      ip: `198.19.${Math.floor(i / 50)}.1`,
      text: `explain photosynthesis ${forged}`,
      maxTokens: 100_000,
      extra: { usage: { total_tokens: 1 } },
    }));
    const answers = await inWaves(tg, plans);
    const served = answers.filter((a) => a.status === 200);
    assert.deepEqual(
      statusesOf(answers).filter((s) => s !== 200),
      times(plans.length - served.length, "429 school-tokens"),
    );
    assert.equal(served.length, expected, `exactly ${budget} / ${max} answers of ${max} tokens`);
    assert.ok(served.every((a) => a.usage.total_tokens === max), "each answer reported 1,000 tokens");
    assert.ok(served.every((a) => a.text.includes('\\"usage\\"')), "the forged usage reached the answer only inside its text");
    const reply = await settledSchool(tg, "school-tokens", 43);
    assert.equal(reply.windows[0].used, budget, "the stream's usage committed: the whole budget, not one token more");
    const before = origin.requests;
    const next = await ask(tg, { ...plans[0], ip: "198.19.99.1", device: "t-last", link: demoLink(43, 2999) });
    assert.equal(`${next.status} ${next.rule}`, "429 school-tokens");
    assert.equal(origin.requests, before);
  }),
);

/**
 * The example's config with the token budget at `budget`: what the count of
 * answers of N < max tokens is, said on a number of calls that runs quickly.
 */
function scaledTokens(budget) {
  const cfg = structuredClone(CONFIG);
  ruleOf(cfg, "school-tokens").limits = [{ requests: budget, window: "1d" }];
  return cfg;
}

/** Asks `plan(i)` one at a time until the rule refuses with every reservation settled: the number served. */
async function servedUntilRefused(tg, cfg, school, plan) {
  let served = 0;
  for (let i = 0; i < 500; i++) {
    const a = await ask(tg, plan(i));
    if (a.status === 200) {
      served++;
      continue;
    }
    assert.equal(`${a.status} ${a.rule}`, "429 school-tokens");
    // Refused while an answer's commit was still landing (its reservation held)? Ask again once settled.
    const before = await schoolObject(tg, "school-tokens", school, cfg);
    if (!before.held) return served;
    await settledSchool(tg, "school-tokens", school, cfg);
  }
  assert.fail("never refused");
}

test("answers of N < max tokens: floor((budget - max) / N) + 1 served; a stream without usage is charged max (budget scaled to 10,000)", { timeout: 120_000 }, () => {
  const cfg = scaledTokens(10_000);
  return withChat(async (tg) => {
    const plan = (school, tokens) => (i) => ({
      school,
      link: demoLink(school, 3000 + Math.floor(i / 10)),
      device: `s${school}-d${Math.floor(i / 10)}`,
      ip: `198.20.${school}.${1 + Math.floor(i / 50)}`,
      text: "q",
      maxTokens: tokens - 1, // one prompt word: answers of `tokens`
    });
    // A call is admitted while committed + 1,000 fits in 10,000: after 9,000.
    assert.equal(await servedUntilRefused(tg, cfg, 44, plan(44, 300)), Math.floor((10_000 - 1_000) / 300) + 1);
    assert.equal((await schoolObject(tg, "school-tokens", 44, cfg)).windows[0].used, 31 * 300);
    // A client that leaves out stream_options.include_usage gets its answer, charged 1,000.
    const first = await ask(tg, { ...plan(45, 300)(499), includeUsage: false });
    assert.equal(first.status, 200);
    assert.equal(first.usage, undefined, "no usage chunk: OpenAI's semantics");
    await settledSchool(tg, "school-tokens", 45, cfg);
    assert.equal((await schoolObject(tg, "school-tokens", 45, cfg)).windows[0].used, 1_000, "charged max");
    assert.equal(await servedUntilRefused(tg, cfg, 45, plan(45, 300)), Math.floor((10_000 - 1_000 - 1_000) / 300) + 1);
  }, { cfg });
});

for (const mode of ["throw", "storage"]) {
  test(`the counter ${mode === "throw" ? "unreachable" : "failing its storage"}: 503, and no question reaches the model`, { timeout: 60_000 }, () =>
    withChat(async (tg, origin) => {
      const plan = { link: demoLink(42, 1), device: "fail-d", ip: "198.51.100.7" };
      assert.equal((await ask(tg, plan)).status, 200);
      const before = origin.requests;
      await tg.setFault(mode);
      const refused = await ask(tg, plan);
      assert.equal(refused.status, 503);
      assert.match(JSON.parse(refused.text).detail, /cannot be checked right now/);
      assert.equal(origin.requests, before, "fail closed: nothing forwarded");
      await tg.setFault("ok");
      assert.equal((await ask(tg, plan)).status, 200, "served again once the counter is back");
    }, { faults: true }),
  );
}
