// Bypass resistance end to end: one variant per canonicalization category,
// each from its own IP, is limited on the 11th request; look-alikes never are.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTollgate, statuses } from "./harness.mjs";

const VARIANTS = {
  "plain": "/api/example?mode=heavy",
  "percent-encoded letters, either case": "/%61pi/ex%41mple?mode=heavy".replace("%41", "%61"),
  "encoded dot before a suffix": "/api/example%2Ejson?mode=heavy",
  "double encoding": "/api/example%252ejson?mode=heavy",
  "encoded slash": "/api%2fexample?mode=heavy",
  "encoded backslash": "/api%5Cexample?mode=heavy",
  "repeated slashes": "//api///example?mode=heavy",
  "trailing slash": "/api/example/?mode=heavy",
  "dot segments": "/api/./x/../example?mode=heavy",
  "path parameter": "/api/example;jsessionid=1?mode=heavy",
  "path parameter before dot-dot": "/api/x/..;/example?mode=heavy",
  "format suffix": "/api/example.xml?mode=heavy",
  "encoded query key and value": "/api/example?mo%64e=h%65avy",
  "bracket suffix": "/api/example?mode[]=heavy",
  "indexed bracket": "/api/example?mode[0]=heavy",
  "upper-case key": "/api/example?MODE=heavy",
  "repeated key, heavy last": "/api/example?mode=normal&mode=heavy",
  "repeated key, heavy first": "/api/example?mode=heavy&mode=normal",
  "semicolon separator": "/api/example?x=1;mode=heavy",
  "upper-case path (case-insensitive rule)": "/API/Example?mode=heavy",
};

const LOOK_ALIKES = [
  "/api/examples?mode=heavy",
  "/api/example-other?mode=heavy",
  "/api/exampl?mode=heavy",
  "/api/example2.json?mode=heavy",
  "/api/example/extra?mode=heavy",
  "/api/example?mode=heavyx",
  "/api/example?mode=Heavy",
  "/api/example?xmode=heavy",
];

test("one variant per category is limited on the 11th request", () =>
  withTollgate({}, async (tg) => {
    let n = 0;
    for (const [category, url] of Object.entries(VARIANTS)) {
      const ip = `198.51.100.${++n}`;
      assert.deepEqual(await statuses(tg, 11, url, { ip }), [...Array(10).fill(200), 429], `${category}: ${url}`);
    }
  }));

test("look-alikes are never limited", () =>
  withTollgate({}, async (tg) => {
    for (const url of LOOK_ALIKES) {
      assert.deepEqual(await statuses(tg, 12, url, { ip: "203.0.113.99" }), Array(12).fill(200), url);
    }
  }));
