// Budgets in money, per model (issue 54): the built Worker in workerd, real
// SQLite objects; the origin mocked at the network edge (node:http through
// the UPSTREAM var) answering as OpenAI's Chat Completions, Anthropic's
// Messages and Gemini's generateContent do, streamed and not
// (providers.mjs), each answer naming the model the request's `x-model`
// header asks the mock for (the client's own body may name another).
//
// Each provider has its own rule, keyed per school: a day's budget of 1,000
// credits (1e9 micro-credits), reserve = max = 2,000 tokens priced at the
// table's highest price (40,000 credits per million: 80 credits), and
// answers of 300 to 2,000 tokens, so no answer costs more than it reserved:
// the budget is exact. What each answer costs is computed here from the
// usage object the mock sent and the model's prices, in BigInt, and
// compared with what the object recorded (`status`'s `used`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { withTollgate } from "./harness.mjs";
import { config } from "./builders.mjs";
import { MODEL, usageOf, chatEvents, chatJson, anthropicEvents, anthropicJson, geminiChunks, geminiJson, geminiArrayParts } from "./providers.mjs";

const DAY_MS = 86_400_000;
const BUDGET = 1_000_000_000; // micro-credits
const RESERVE_TOKENS = 2_000;

/** Prices per million tokens, in credits (decimals on purpose). */
const PRICES = {
  "gpt-4o-mini*": { input: 1999.999, cached_input: 1000.5, output: 8000.25 },
  "gpt-4o*": { input: 10_000, cached_input: 5_000, output: 40_000 },
  "claude-haiku*": { input: 4_000, cached_input: 400, output: 20_000, cache_write: 5_000 },
  "claude-sonnet*": { input: 12_000, cached_input: 1_200, output: 40_000, cache_write: 15_000 },
  "gemini-2.5-flash*": { input: 1_500, cached_input: 375, output: 12_500 },
  "gemini-2.5-pro*": { input: 6_250, output: 37_500.000001 },
};
const MODELS = {
  openai: ["gpt-4o-mini-2024-07-18", "gpt-4o-2024-08-06", "gpt-4o-mini"],
  anthropic: ["claude-haiku-4-5", "claude-sonnet-4-5-20250929"],
  gemini: ["gemini-2.5-flash", "gemini-2.5-pro-preview"],
};
const PATHS = { openai: "/openai/v1/chat/completions", anthropic: "/anthropic/v1/messages" };

/** A price in millionths of a credit per million tokens, exactly (BigInt). */
const millionths = (price) => {
  const [whole, frac = ""] = String(price).split(".");
  return BigInt(whole) * 1_000_000n + BigInt(frac.padEnd(6, "0"));
};

/** The price the table gives `model`: exact name, else the longest prefix; none: null. */
function priceOf(model, table = PRICES) {
  let best = null;
  for (const [pattern, p] of Object.entries(table)) {
    const prefix = pattern.endsWith("*") ? pattern.slice(0, -1) : null;
    if (prefix === null ? pattern === model : model.startsWith(prefix)) {
      if (prefix === null) return p;
      if (!best || prefix.length > best[0]) best = [prefix.length, p];
    }
  }
  return best?.[1] ?? null;
}

/** Each kind at the table's highest price. */
function highest(table = PRICES) {
  const kinds = ["input", "cached_input", "output", "cache_write"];
  const of = (p, k) => millionths(p[k] ?? p.input);
  return Object.fromEntries(kinds.map((k) => [k, Object.values(table).map((p) => of(p, k)).reduce((a, b) => (a > b ? a : b))]));
}

/** What an answer of `tokens` from `provider` named `model` costs, in micro-credits (BigInt), from the usage the mock sends. */
function costOf(provider, model, tokens, table = PRICES) {
  const p = priceOf(model, table);
  const rate = p ? Object.fromEntries(["input", "cached_input", "output", "cache_write"].map((k) => [k, millionths(p[k] ?? p.input)])) : highest(table);
  let plain, cached = 0, written = 0, output;
  if (provider === "openai") {
    const u = usageOf("chat", tokens);
    cached = u.prompt_tokens_details.cached_tokens;
    plain = u.prompt_tokens - cached;
    output = u.completion_tokens;
  } else if (provider === "anthropic") {
    const u = usageOf("anthropic", tokens);
    [plain, cached, written, output] = [u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.output_tokens];
  } else {
    const u = usageOf("gemini", tokens);
    [plain, output] = [u.promptTokenCount, u.candidatesTokenCount + u.thoughtsTokenCount];
  }
  const sum = BigInt(plain) * rate.input + BigInt(cached) * rate.cached_input + BigInt(written) * rate.cache_write + BigInt(output) * rate.output;
  return (sum + 999_999n) / 1_000_000n;
}

/** The mock provider: providers.mjs's answers, the model swapped for `x-model`. */
async function modelOrigin() {
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "null");
    const url = new URL(req.url, "http://origin");
    const h = req.headers;
    const provider = url.pathname.startsWith("/openai/") ? "openai" : url.pathname.startsWith("/anthropic/") ? "anthropic" : "gemini";
    const opts = { tokens: Number(h["x-tokens"]), n: 4, end: "clean" };
    const model = h["x-model"] === undefined ? undefined : decodeURIComponent(h["x-model"]);
    const swap = (text) => (model === undefined ? text : text.replaceAll(JSON.stringify(MODEL[provider]), JSON.stringify(model)));
    const stream = provider === "gemini" ? url.pathname.endsWith(":streamGenerateContent") : body?.stream === true;
    if (!stream) {
      const json = { openai: chatJson, anthropic: anthropicJson, gemini: geminiJson }[provider](opts);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(swap(JSON.stringify(json)));
      return;
    }
    const sse = provider !== "gemini" || url.searchParams.get("alt") === "sse";
    res.writeHead(200, { "content-type": sse ? "text/event-stream" : "application/json" });
    const parts =
      provider === "openai" ? chatEvents({ ...opts, includeUsage: true })
      : provider === "anthropic" ? anthropicEvents(opts)
      : sse ? geminiChunks(opts).map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`)
      : geminiArrayParts(geminiChunks(opts));
    for (const part of parts) {
      res.write(swap(part));
      await new Promise((r) => setTimeout(r, 1));
    }
    res.end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) };
}

/** The money rule of `provider`: 1,000 credits a day per school. */
function moneyRule(provider, price = { currency: "credits", models: PRICES }, extra = {}) {
  const path = { openai: "/openai/*", anthropic: "/anthropic/*", gemini: "/gemini/*" }[provider];
  return {
    name: `money-${provider}`,
    path,
    key: ["header:x-school"],
    limits: [{ spend: 1_000, window: "1d" }],
    counting: { mode: "response", reservation_ttl: "10m" },
    metering: { usage: provider, reserve: RESERVE_TOKENS, max: RESERVE_TOKENS, price, ...extra },
    ratelimit_headers: true,
  };
}

/** A request of the `i`-th kind: model, size and streaming vary with `i`. */
function ask(provider, i) {
  const models = MODELS[provider];
  const model = models[(i * 7 + 3) % models.length];
  const tokens = 300 + ((i * 523) % 1_701);
  const stream = i % 3 !== 0;
  if (provider === "gemini") {
    const how = ["generateContent", "streamGenerateContent?alt=sse", "streamGenerateContent"][i % 3];
    return { model, tokens, path: `/gemini/v1beta/models/${model}:${how}`, body: { contents: [] } };
  }
  // The client names the cheapest model; the origin answers with `model`.
  return { model, tokens, path: PATHS[provider], body: { model: MODELS[provider][0], stream, max_tokens: 1_600, stream_options: stream && provider === "openai" ? { include_usage: true } : undefined } };
}

async function send(tg, school, provider, i) {
  const a = ask(provider, i);
  const res = await tg.fetch(a.path, { method: "POST", headers: { "x-school": school, "x-model": encodeURIComponent(a.model), "x-tokens": String(a.tokens), "content-type": "application/json" }, body: JSON.stringify(a.body) });
  const text = await res.text();
  return { status: res.status, text, res, cost: res.status === 200 ? costOf(provider, a.model, a.tokens) : 0n };
}

/** The micro-credits `school`'s object recorded for `provider`, with nothing in flight. */
async function used(tg, provider, school) {
  await tg.settled();
  const status = await tg.callObject(`money-${provider}\nheader:x-school=${school}`, { v: 1, op: "status", limits: [[BUDGET, DAY_MS]] });
  assert.equal(status.body.held ?? 0, 0, "nothing held");
  return BigInt(status.body.windows[0].used);
}

/** Sends waves of `width` requests until a wave, sent with nothing in flight, is refused whole. */
async function spend(tg, school, provider, width) {
  let charged = 0n, i = 0, served = 0;
  for (;;) {
    const wave = await Promise.all(Array.from({ length: width }, () => send(tg, school, provider, i++)));
    for (const r of wave.filter((r) => r.status === 200)) {
      charged += r.cost;
      served++;
    }
    const refused = wave.filter((r) => r.status === 429);
    assert.equal(refused.length + wave.filter((r) => r.status === 200).length, width, `200 or 429 only: ${wave.map((r) => r.status)}`);
    if (refused.length === width) return { charged, served, refused: refused[0] };
    await tg.settled();
  }
}

const withMoney = async (rules, body, { admin = false, vars = {} } = {}) => {
  const origin = await modelOrigin();
  try {
    await withTollgate({ config: config(...rules), vars: { UPSTREAM: origin.url, ...vars }, workerOptions: { outboundService: undefined }, admin }, body);
  } finally {
    await origin.close();
  }
};

for (const provider of ["openai", "anthropic", "gemini"]) {
  test(`${provider}: a day's 1,000 credits are never exceeded and at least 90% usable, mixed models and sizes, streamed and not, sequential and 20 at once; the charge is Σ tokens × price to the micro-credit`, () =>
    withMoney([moneyRule(provider)], async (tg) => {
      for (const [school, width] of [["one-by-one", 1], ["twenty-at-once", 20]]) {
        const { charged, served, refused } = await spend(tg, school, provider, width);
        const recorded = await used(tg, provider, school);
        assert.equal(recorded, charged, `${school}: the object recorded exactly what the answers cost (${served} answers)`);
        assert.ok(recorded <= BigInt(BUDGET), `${school}: never past the budget: ${recorded}`);
        assert.ok(recorded >= (BigInt(BUDGET) * 9n) / 10n, `${school}: at least 90% usable: ${recorded}`);
        const policy = refused.res.headers.get("ratelimit-policy");
        assert.match(policy, new RegExp(`^"money-${provider}";q=${BUDGET};qu="micro-credits";w=86400`), policy);
        const left = Number(/;r=(\d+)/.exec(refused.res.headers.get("ratelimit"))[1]);
        assert.ok(left < 80_000_000, `${school}: refused with less than one reserve (80 credits) left: ${left}`);
        console.log(`# ${provider} ${school}: ${served} answers, ${Number(recorded) / 1e6} of 1,000 credits (${(Number(recorded) / 1e7).toFixed(2)}%)`);
      }
    }));
}

/** A model the table cannot price, an answer naming none, a dearer one than the request asked for. */
test("unpriced models: charged at the table's highest prices by default, cut and charged max with refuse; the answer's model, not the request's, is priced", () =>
  withMoney([moneyRule("openai"), moneyRule("anthropic", { currency: "credits", models: PRICES, unpriced: "refuse" })], async (tg) => {
    const chat = (school, model, tokens, stream) =>
      tg.fetch(PATHS.openai, { method: "POST", headers: { "x-school": school, "x-model": encodeURIComponent(model), "x-tokens": String(tokens) }, body: JSON.stringify({ model: "gpt-4o-mini", stream, stream_options: stream ? { include_usage: true } : undefined }) });
    // The client asks for gpt-4o-mini; the origin answers gpt-4o.
    let res = await chat("a", "gpt-4o-2024-08-06", 1_000, true);
    await res.text();
    assert.equal(await used(tg, "openai", "a"), costOf("openai", "gpt-4o", 1_000), "priced as the answer's gpt-4o");
    // A model no pattern prices, and names spelled like a cheap one's.
    let total = 0n;
    for (const [model, stream] of [["o3-mini", false], ["gpt-4o-mini ", true], ["gpt-4o-m\u0131ni", false], ["x".repeat(200), true]]) {
      res = await chat("b", model, 1_000, stream);
      assert.equal(res.status, 200);
      await res.text();
      total += costOf("openai", "no-such-model", 1_000);
      assert.equal(await used(tg, "openai", "b"), total, `${JSON.stringify(model.slice(0, 20))}: at the highest prices`);
    }
    // refuse: the stream is cut at the first event naming the model, and max (80 credits) is charged.
    res = await tg.fetch(PATHS.anthropic, { method: "POST", headers: { "x-school": "c", "x-model": "claude-opus-4", "x-tokens": "1000" }, body: JSON.stringify({ stream: true }) });
    const text = await res.text();
    assert.match(text, /event: error\ndata: \{"type":"error","error":\{"type":"rate_limit_error","message":"tollgate: this answer's model has no price/, text);
    assert.ok(!text.includes("message_stop"), "the stream was cut");
    assert.equal(await used(tg, "anthropic", "c"), 80_000_000n, "max: 2,000 tokens at 40,000 credits per million");
    // A priced model streams to its end.
    res = await tg.fetch(PATHS.anthropic, { method: "POST", headers: { "x-school": "d", "x-model": "claude-haiku-4-5", "x-tokens": "1000" }, body: JSON.stringify({ stream: true }) });
    assert.match(await res.text(), /message_stop/);
    assert.equal(await used(tg, "anthropic", "d"), costOf("anthropic", "claude-haiku-4-5", 1_000));
  }));

/** What `rule`'s object recorded for `school` in its only window (`budget` units a day), with nothing in flight. */
async function usedBy(tg, rule, school, budget) {
  await tg.settled();
  const status = await tg.callObject(`${rule}\nheader:x-school=${school}`, { v: 1, op: "status", limits: [[budget, DAY_MS]] });
  assert.equal(status.body.held ?? 0, 0, "nothing held");
  return BigInt(status.body.windows[0].used);
}

/** A chat answer through `prefix` (a rule's path) for the `i`-th kind of request (ask's), and what it costs at `table`'s prices in micro-credits. */
async function chatVia(tg, prefix, school, i, table = PRICES) {
  const a = ask("openai", i);
  const res = await tg.fetch(a.path.replace("/openai/", prefix), { method: "POST", headers: { "x-school": school, "x-model": encodeURIComponent(a.model), "x-tokens": String(a.tokens), "content-type": "application/json" }, body: JSON.stringify(a.body) });
  await res.text();
  return { status: res.status, res, micro: costOf("openai", a.model, a.tokens, table) };
}

test("a price table shared at the top level: two rules naming it charge the same prices, to the micro-credit", () => {
  const rule = (name, path) => ({ ...moneyRule("openai", "credits-table"), name, path });
  return withMoney([{ prices: { "credits-table": { currency: "credits", models: PRICES } } }, rule("money-a", "/openai/a/*"), rule("money-b", "/openai/b/*")], async (tg) => {
    let expected = 0n;
    for (let i = 0; i < 9; i++) {
      const [a, b] = [await chatVia(tg, "/openai/a/", "s", i), await chatVia(tg, "/openai/b/", "s", i)];
      assert.deepEqual([a.status, b.status], [200, 200]);
      expected += a.micro;
      assert.equal(a.res.headers.get("ratelimit-policy").replace("money-a", "R"), b.res.headers.get("ratelimit-policy").replace("money-b", "R"), "the same policy, unit and budget");
    }
    const [a, b] = [await usedBy(tg, "money-a", "s", BUDGET), await usedBy(tg, "money-b", "s", BUDGET)];
    assert.equal(a, expected, "rule a: Σ tokens × the shared table's prices");
    assert.equal(b, expected, "rule b: the same");
  });
});

/** Prices ten times PRICES' OpenAI ones (credits per million tokens). */
const DEAR = {
  "gpt-4o-mini*": { input: 19_999.99, cached_input: 10_005, output: 80_002.5 },
  "gpt-4o*": { input: 100_000, cached_input: 50_000, output: 400_000 },
};

test("a budget above 4,295 credits (10,000 a day) counts in milli-credits: never exceeded, at least 90% usable, each charge Σ tokens × price rounded up to the milli-credit", () => {
  const BIG = 10_000_000n; // milli-credits
  const rule = { ...moneyRule("openai", { currency: "credits", models: DEAR }), limits: [{ spend: 10_000, window: "1d" }] };
  return withMoney([rule], async (tg) => {
    for (const [school, width] of [["one-by-one", 1], ["twenty-at-once", 20]]) {
      let [milli, micro, served, i, refused] = [0n, 0n, 0, 0, null];
      while (!refused) {
        const wave = await Promise.all(Array.from({ length: width }, () => chatVia(tg, "/openai/", school, i++, DEAR)));
        for (const r of wave.filter((r) => r.status === 200)) {
          micro += r.micro;
          milli += (r.micro + 999n) / 1_000n;
          served++;
        }
        assert.ok(wave.every((r) => r.status === 200 || r.status === 429), `200 or 429 only: ${wave.map((r) => r.status)}`);
        if (wave.every((r) => r.status === 429)) refused = wave[0];
        await tg.settled();
      }
      const recorded = await usedBy(tg, "money-openai", school, Number(BIG));
      assert.equal(recorded, milli, `${school}: the object recorded each answer's charge rounded up to the milli-credit (${served} answers)`);
      assert.ok(recorded * 1_000n - micro >= 0n && recorded * 1_000n - micro < BigInt(served) * 1_000n, `${school}: rounding took less than a milli-credit an answer, never counted less than spent`);
      assert.ok(recorded <= BIG, `${school}: never past the budget: ${recorded}`);
      assert.ok(recorded >= (BIG * 9n) / 10n, `${school}: at least 90% usable: ${recorded}`);
      const policy = refused.res.headers.get("ratelimit-policy");
      assert.match(policy, new RegExp(`^"money-openai";q=${BIG};qu="milli-credits";w=86400`), policy);
      console.log(`# milli ${school}: ${served} answers, ${Number(recorded) / 1e3} of 10,000 credits (${(Number(recorded) / 1e5).toFixed(2)}%), rounding ${Number(recorded * 1_000n - micro) / 1e6} credits`);
    }
  });
});

/** `micro` micro-credits as the admin plane says them: exact, no trailing zeros. */
function creditsText(micro) {
  const whole = micro / 1_000_000n, fraction = micro % 1_000_000n;
  return fraction === 0n ? `${whole} credits` : `${whole}.${String(fraction).padStart(6, "0").replace(/0+$/, "")} credits`;
}

const ADMIN_TOKEN = "s3cret-admin-token-for-money-status";

test("admin status and the console's Keys page say a money rule's limits and a key's spend in its currency, to the micro-credit", () => {
  const rule = { ...moneyRule("openai"), limits: [{ spend: 1_000, window: "day", time_zone: "Asia/Tokyo" }, { spend: 500, window: "1h" }] };
  return withMoney([rule], async (tg) => {
    let spent = 0n;
    for (let i = 0; i < 5; i++) {
      const a = await chatVia(tg, "/openai/", "north", i);
      assert.equal(a.status, 200);
      spent += a.micro;
    }
    await tg.settled();
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const res = await tg.admin("/.tollgate/status?rule=money-openai&header:x-school=north", { headers: auth });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.ok(spent % 1_000_000n !== 0n, "a spend with decimals");
    assert.deepEqual([body.currency, body.unit, body.spent], ["credits", "micro-credits", creditsText(spent)], JSON.stringify(body));
    assert.match(body.limits_text[0], /^1000 credits a day \(Asia\/Tokyo\), resets at \d{4}-\d\d-\d\dT00:00\+09:00$/);
    assert.equal(body.limits_text[1], "500 credits per 1h");
    for (const [w, limit] of [[body.windows[0], 1_000_000_000n], [body.windows[1], 500_000_000n]]) {
      assert.equal(BigInt(w.used), spent, "the count kept in its unit");
      assert.deepEqual([w.spent, w.remaining_spend, w.spend_limit], [creditsText(spent), creditsText(limit - spent), creditsText(limit)]);
    }
    // The console's Keys page, signed in, says the same words.
    const signin = await tg.admin("/.tollgate/ui/signin", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `token=${ADMIN_TOKEN}` });
    const cookie = signin.headers.get("set-cookie")?.split(";")[0];
    assert.ok(cookie, `signed in: ${signin.status}`);
    const page = await (await tg.admin("/.tollgate/ui/keys?rule=money-openai&header:x-school=north", { headers: { cookie } })).text();
    assert.ok(page.includes(`<p id="spent">Spent: ${creditsText(spent)} (in its longest window)</p>`), page);
    assert.ok(page.includes(`<td>1000 credits/calendar day</td><td>${creditsText(spent)}</td><td>${creditsText(1_000_000_000n - spent)}</td>`), page);
    assert.match(page, /Limits: 1000 credits a day \(Asia\/Tokyo\), resets at [^;]+; 500 credits per 1h/);
    console.log(`# status: spent ${body.spent} of ${body.limits_text[0]}`);
  }, { admin: true, vars: { TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN } });
});

/** The table's pattern that prices `model` (the spend by model's label), or "(unpriced)". */
function patternOf(model, table = PRICES) {
  let best = null;
  for (const pattern of Object.keys(table)) {
    const prefix = pattern.endsWith("*") ? pattern.slice(0, -1) : null;
    if (prefix === null ? pattern === model : model.startsWith(prefix)) {
      if (prefix === null) return pattern;
      if (!best || prefix.length > best[0]) best = [prefix.length, pattern];
    }
  }
  return best?.[1] ?? "(unpriced)";
}

test("spend by model: each priced answer's charge reaches the metrics (local sink) under the pattern that priced it; GET /traffic and the Traffic page sum it per rule and model, to the micro-credit", () => {
  const rules = [moneyRule("openai"), moneyRule("anthropic")];
  return withMoney(rules, async (tg) => {
    const expected = new Map(); // "rule model" -> { answers, micro }
    const north = new Map(); // money-openai's north only: model -> { answers, micro }
    const add = (rule, model, micro, school) => {
      const tally = (map, k) => {
        const e = map.get(k) ?? { answers: 0, micro: 0n };
        map.set(k, { answers: e.answers + 1, micro: e.micro + micro });
      };
      tally(expected, `${rule} ${patternOf(model)}`);
      if (rule === "money-openai" && school === "north") tally(north, patternOf(model));
    };
    for (let i = 0; i < 9; i++) {
      for (const provider of ["openai", "anthropic"]) {
        const school = i % 2 ? "north" : "south";
        const r = await send(tg, school, provider, i);
        assert.equal(r.status, 200);
        add(`money-${provider}`, ask(provider, i).model, r.cost, school);
      }
    }
    // A model no pattern prices: at the highest prices, labelled so.
    const res = await tg.fetch(PATHS.openai, { method: "POST", headers: { "x-school": "north", "x-model": "o3-mini", "x-tokens": "700" }, body: JSON.stringify({ model: "gpt-4o-mini" }) });
    await res.text();
    add("money-openai", "o3-mini", costOf("openai", "no-such-model", 700), "north");
    await tg.settled();
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const traffic = await (await tg.admin("/.tollgate/traffic?range=hour", { headers: auth })).json();
    const got = new Map(traffic.spend.map((s) => [`${s.rule} ${s.model}`, s]));
    assert.deepEqual([...got.keys()].sort(), [...expected.keys()].sort(), JSON.stringify(traffic.spend));
    for (const [k, e] of expected) {
      const s = got.get(k);
      assert.deepEqual([s.answers, BigInt(s.micro), s.spent], [e.answers, e.micro, creditsText(e.micro)], k);
    }
    assert.equal(traffic.rules["money-openai"]?.spend, undefined, "a spend is no decision in the charts");
    const micro = traffic.spend.map((s) => s.micro);
    assert.deepEqual(micro, [...micro].sort((a, b) => b - a), "dearest first");
    const signin = await tg.admin("/.tollgate/ui/signin", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `token=${ADMIN_TOKEN}` });
    const cookie = signin.headers.get("set-cookie")?.split(";")[0];
    const page = await (await tg.admin("/.tollgate/ui/traffic?range=hour", { headers: { cookie } })).text();
    const top = traffic.spend[0];
    assert.ok(page.includes(`<tr><td>${top.rule}</td><td><code>${top.model}</code></td><td>${top.answers}</td><td>${top.spent}</td></tr>`), page);
    for (const s of traffic.spend) console.log(`# ${s.rule} ${s.model}: ${s.answers} answers, ${s.spent}`);
    // One key's status: its exact spend (the object's) and its spend by model (the metrics').
    const status = await (await tg.admin("/.tollgate/status?rule=money-openai&header:x-school=north", { headers: auth })).json();
    const byModel = new Map(status.spend_by_model.map((s) => [s.model, s]));
    assert.deepEqual([...byModel.keys()].sort(), [...north.keys()].sort(), JSON.stringify(status.spend_by_model));
    let total = 0n;
    for (const [model, e] of north) {
      assert.deepEqual([byModel.get(model).answers, BigInt(byModel.get(model).micro), byModel.get(model).spent], [e.answers, e.micro, creditsText(e.micro)], model);
      total += e.micro;
    }
    assert.equal(status.spent, creditsText(total), "the object's exact spend is the sum of the key's spend by model");
  }, { admin: true, vars: { TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, TOLLGATE_LOCAL_METRICS: "on" } });
});
