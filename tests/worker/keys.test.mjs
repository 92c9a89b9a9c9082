// Client keys and what logs show of them: IPv6 transition addresses
// (6to4, Teredo) and keyed log hashes (TOLLGATE_LOG_KEY).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, createHmac } from "node:crypto";
import { withTollgate, statuses } from "./harness.mjs";
import { config, rule, limit, json } from "./builders.mjs";

const perIp = (requests) => config(rule("per-ip", "/p/*", { limits: limit(requests, "60s") }));

test("a 6to4 host gets one bucket: 50 hits from 5 /64s of one 2002:V4::/48 against a limit of 10", () =>
  withTollgate({ config: perIp(10) }, async (tg) => {
    // 2002:c000:022d::/48 is 192.0.2.45's 6to4 prefix; 5 of its 65,536 /64s.
    const subnets = ["2002:c000:22d:1", "2002:c000:22d:2", "2002:c000:22d:ff", "2002:C000:022D:1234", "2002:c000:22d:ffff"];
    const all = [];
    for (let i = 0; i < 50; i++) {
      const res = await tg.fetch("/p/x", { ip: `${subnets[i % 5]}::${(i + 1).toString(16)}` });
      await res.arrayBuffer();
      all.push(res.status);
    }
    assert.equal(all.filter((s) => s === 200).length, 10, JSON.stringify(all));
    assert.equal(all.filter((s) => s === 429).length, 40);
    assert.equal(tg.origin.received.length, 10);
    assert.equal((await tg.fetch("/p/x", { ip: "192.0.2.45" })).status, 429, "the same host over IPv4");
    assert.equal((await tg.fetch("/p/x", { ip: "2002:c000:22e::1" })).status, 200, "another 6to4 host");
  }));

test("Teredo clients of one server are told apart by their public IPv4 address, not by port", () =>
  withTollgate({ config: perIp(2) }, async (tg) => {
    // RFC 4380 §4: server 65.54.227.120; client 192.0.2.45 port 40000.
    const client = "2001:0:4136:e378:8000:63bf:3fff:fdd2";
    // The same server (same /64), another client: 192.0.2.46.
    const neighbour = "2001:0:4136:e378:8000:63bf:3fff:fdd1";
    assert.deepEqual(await statuses(tg, 3, "/p/x", { ip: client }), [200, 200, 429]);
    assert.deepEqual(await statuses(tg, 3, "/p/x", { ip: neighbour }), [200, 200, 429], "not the server's shared /64");
    assert.equal((await tg.fetch("/p/x", { ip: "2001:0:4136:e378:0:63bf:3fff:fdd2" })).status, 429, "flags do not matter");
    // Issue 25: a new NAT mapping (port 192) is no new bucket, and the host over IPv4 is the same client.
    assert.equal((await tg.fetch("/p/x", { ip: "2001:0:4136:e378:8000:ff3f:3fff:fdd2" })).status, 429, "another port");
    assert.equal((await tg.fetch("/p/x", { ip: "192.0.2.45" })).status, 429, "the same address over IPv4");
  }));

test("an admin ban of an IPv4 address covers its Teredo clients on every port (issue 25)", () =>
  withTollgate({ config: perIp(1000), vars: { TOLLGATE_ADMIN_TOKEN: "admin-token-for-the-teredo-ban" } }, async (tg) => {
    const ban = await tg.fetch("/.tollgate/ban?rule=per-ip&ip=192.0.2.45&for=1h", {
      method: "POST",
      ip: "198.51.100.8",
      headers: { authorization: "Bearer admin-token-for-the-teredo-ban" },
    });
    assert.equal(ban.status, 200);
    // 192.0.2.45 behind Teredo, on ports 40000, 192, 1 and 65535 (the port is XORed with 0xffff).
    for (const port of ["63bf", "ff3f", "fffe", "0000"]) {
      const res = await tg.fetch("/p/x", { ip: `2001:0:4136:e378:8000:${port}:3fff:fdd2` });
      assert.equal(res.status, 429, `port field ${port}`);
    }
    assert.equal((await tg.fetch("/p/x", { ip: "2001:0:4136:e378:8000:63bf:3fff:fdd1" })).status, 200, "192.0.2.46 is not banned");
    assert.equal(tg.origin.received.length, 1);
    // Asked about by its Teredo address, the key is the IPv4 address's: the ban shows.
    const status = await tg.fetch("/.tollgate/status?rule=per-ip&ip=2001:0:4136:e378:8000:ff3f:3fff:fdd2", {
      ip: "198.51.100.8",
      headers: { authorization: "Bearer admin-token-for-the-teredo-ban" },
    });
    const body = await status.json();
    assert.equal(body.limits_source, "ban");
    assert.equal(body.key_hash, (await ban.json()).key_hash);
  }));

const LOGIN = config(
  rule("per-ip", "/p/*", { limits: limit(1, "60s") }),
  rule("login", "/login", { methods: ["POST"], key: ["body:email"], limits: limit(1, "60s") }),
);
const IP = "198.51.100.77";
const EMAIL = "Victim.Person@Example.com";
const TOKEN = "admin-token-for-the-keys-test";

/** Blocks IP on /p and EMAIL on /login, asks the admin API about the IP; returns the log lines and the admin answer. */
async function blockAndLook(vars) {
  let out;
  await withTollgate({ config: LOGIN, vars: { TOLLGATE_ADMIN_TOKEN: TOKEN, ...vars } }, async (tg) => {
    assert.deepEqual(await statuses(tg, 2, "/p/x", { ip: IP }), [200, 429]);
    const login = json({ email: EMAIL, password: "pw" }, { ip: "203.0.113.9" });
    assert.deepEqual(await statuses(tg, 2, "/login", login), [200, 429]);
    const status = await tg.fetch(`/.tollgate/status?rule=per-ip&ip=${IP}`, { ip: "192.0.2.8", headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(status.status, 200);
    await tg.settled();
    out = { logs: tg.logs(), events: tg.logEvents(), admin: await status.json() };
  });
  return out;
}

const blockHash = (events, rule) => events.find((e) => e.tollgate === "block" && e.rule === rule).key_hash;
const prefix = (digest) => digest.slice(0, 16);

test("two secrets give two hashes, and the raw key never appears in the logs", async () => {
  const one = await blockAndLook({ TOLLGATE_LOG_KEY: "first log secret" });
  const two = await blockAndLook({ TOLLGATE_LOG_KEY: "second log secret\n" });
  const none = await blockAndLook({});
  const key = `ip=${IP}`;
  // Keyed: HMAC-SHA256 under the secret (trimmed), the first 16 hex digits.
  assert.equal(blockHash(one.events, "per-ip"), prefix(createHmac("sha256", "first log secret").update(key).digest("hex")));
  assert.equal(blockHash(two.events, "per-ip"), prefix(createHmac("sha256", "second log secret").update(key).digest("hex")));
  // Without the secret: the unkeyed SHA-256 prefix.
  assert.equal(blockHash(none.events, "per-ip"), prefix(createHash("sha256").update(key).digest("hex")));
  for (const rule of ["per-ip", "login"]) {
    const hashes = new Set([one, two, none].map((run) => blockHash(run.events, rule)));
    assert.equal(hashes.size, 3, `${rule}: three different hashes`);
  }
  for (const [name, run] of Object.entries({ one, two, none })) {
    // The admin API answers and logs with the same keyed hash.
    assert.equal(run.admin.key_hash, blockHash(run.events, "per-ip"), `${name}: admin output`);
    const admin = run.events.find((e) => e.tollgate === "admin");
    assert.equal(admin.key_hash, run.admin.key_hash, `${name}: admin log line`);
    assert.match(admin.client_hash, /^[0-9a-f]{16}$/);
    for (const raw of [IP, EMAIL, EMAIL.toLowerCase(), "192.0.2.8", "203.0.113.9", TOKEN, "log secret"]) {
      assert.ok(!run.logs.includes(raw), `${name}: \`${raw}\` appears in the logs`);
    }
  }
});
