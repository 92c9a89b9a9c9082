// Client keys: IPv6 transition addresses (6to4, Teredo).
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses } from "./harness.mjs";

const perIp = (requests) => ({ rules: [{ name: "per-ip", path: "/p/*", limits: [{ requests, window: "60s" }] }] });

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

test("Teredo clients of one server are told apart by their public address and port", () =>
  withTollgate({ config: perIp(2) }, async (tg) => {
    // RFC 4380 §4: server 65.54.227.120; client 192.0.2.45 port 40000.
    const client = "2001:0:4136:e378:8000:63bf:3fff:fdd2";
    // The same server (same /64), another client: 192.0.2.46.
    const neighbour = "2001:0:4136:e378:8000:63bf:3fff:fdd1";
    assert.deepEqual(await statuses(tg, 3, "/p/x", { ip: client }), [200, 200, 429]);
    assert.deepEqual(await statuses(tg, 3, "/p/x", { ip: neighbour }), [200, 200, 429], "not the server's shared /64");
    assert.equal((await tg.fetch("/p/x", { ip: "2001:0:4136:e378:0:63bf:3fff:fdd2" })).status, 429, "flags do not matter");
  }));
