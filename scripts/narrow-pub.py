#!/usr/bin/env python3
"""Narrow the crate's `pub` items to its public API (issue 36, item 5).

    scripts/narrow-pub.py --count     # plain `pub` items and fields, per layer
    scripts/narrow-pub.py --check     # exit 1 if a rewrite is due (lists them)
    scripts/narrow-pub.py --apply     # rewrite src/ and the outside callers
    scripts/narrow-pub.py --list      # the plain `pub` items that stay, with their paths
    scripts/narrow-pub.py --interfaces  # cargo check x3: names kept signatures leak (add to KEEP)

What it does. It walks the library's module tree from `src/lib.rs` (following
`mod NAME;` to its file; `src/bin` is another crate and is left alone) with a
small Rust tokenizer (comments, strings, raw strings, chars and lifetimes
understood), and finds every plain `pub` (one not followed by `(`): items
(`fn`, `struct`, `enum`, `trait`, `type`, `const`, `static`, `mod`, `use`),
methods of inherent `impl` blocks, and struct fields. Each gets a path
(`config::Config::from_json`, `config::Config::rules`); a method's path is
its self type's, resolved through the file's `use` imports. Code under
`#[cfg(test)]` (a `mod tests`, `src/testing.rs`, a test-only item) is never
counted nor touched.

`--apply` rewrites `pub` to `pub(crate)` unless the path is kept. A path is
kept when it is in KEEP (below, the public API and the doc-hidden
`internals` module that this repo's own tests, benches, fuzz targets and
examples use) after resolving `pub use` re-exports: `Config::from_json`
resolves through lib.rs's `pub use config::Config` to the definition
`config::Config::from_json`, and the `pub use` itself is kept. `TYPE::*`
keeps every member of a type (fields and methods). Items carrying
`#[wasm_bindgen]`, `#[durable_object]` or `#[event(...)]` stay `pub` (the
JavaScript side calls them). It then rewrites the outside callers' paths
(CALLER_PATHS: `tollgate::request::canon::` -> `tollgate::internals::canon::`,
...) in tests/*.rs, benches/, fuzz/fuzz_targets/ and examples/*.rs.

It is idempotent: a second `--apply` changes nothing. What it cannot know,
the compiler says: a `private_interfaces` warning (a kept item's signature
names a narrowed type) means a path to add to KEEP; a `dead_code` warning
means code that only a `pub` kept alive. Re-run after editing KEEP.

How it counts (`--count`): every plain `pub` token in the library's non-test
code, outside macro bodies, split into items (everything but struct fields)
and fields. `pub(crate)`, `pub(super)` and `pub(in ...)` are not counted.
Standard-library Python only.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")

# The public surface, as paths from the crate root (docs/ARCHITECTURE.md,
# "Public surface", lists the same). Everything else becomes `pub(crate)`.
KEEP = [
    # The embed API (wasm32): an app Worker's check and settle.
    "embed", "embed::check", "embed::check_as", "embed::settle", "embed::settle_response",
    "embed::Settled::*",
    "embed::Decision::*", "embed::Client::*", "embed::Ticket",
    # The limiter Durable Object an embedding app binds as LIMITER.
    "Limiter",
    # The controls registry's Durable Object, bound as TOLLGATE_REGISTRY.
    "Registry",
    # The config reader.
    "Config", "Config::from_json", "Config::from_json_str", "Config::warnings",
    "ConfigError::*", "ConfigWarning::*",
    # The CLI's entry: src/bin/tollgate.rs and the npm package's Node CLI.
    "cli", "cli::run", "cli::Host", "cli::Output::*",
    # Not API (`#[doc(hidden)]`, no semver promise): what this repo's
    # integration tests, benches, fuzz targets and examples reach.
    "internals",
    "internals::canon", "internals::canon::canonical_path", "internals::canon::canonical_host",
    "internals::canon::decode_fully", "internals::canon::CanonicalQuery::*",
    "internals::canon::RawUrl::*", "internals::canon::Source",
    "internals::body", "internals::body::form_field_values", "internals::body::parameters",
    "internals::body::needs_bytes", "internals::body::BodyParams::*", "internals::body::Unreadable",
    "internals::rules", "internals::rules::RequestView::*", "internals::rules::Rule",
    "internals::rules::RuleSpec", "internals::rules::RuleSpec::name", "internals::rules::Rule::matches", "internals::rules::Rule::evaluate",
    "internals::rules::Match", "internals::rules::Match::matched_path",
    "internals::rules::NoMatch", "Config::matching", "Config::rules", "Config::body_limit",
    "internals::DEFAULT_SUFFIXES",
    "internals::plan", "internals::plan::plan", "internals::plan::Body", "internals::plan::RequestParts::*",
    "internals::plan::Route",
    "internals::applied", "internals::applied::KeyOutcome",
    "internals::explain", "internals::explain::parse_url",
    "internals::wrangler", "internals::wrangler::parse", "internals::wrangler::select",
    "internals::sim", "internals::sim::run", "internals::sim::scenarios", "internals::sim::Scenario::*",
    "internals::window", "internals::window::decide", "internals::window::Hit::*",
    "internals::window::Limit::*",
    "internals::protocol", "internals::protocol::decode_call", "internals::protocol::decode_call_url",
    "internals::protocol::decode_reply_line", "internals::protocol::decode_rpc_answer",
    "internals::protocol::encode_call", "internals::protocol::encode_call_url",
    "internals::protocol::encode_reply_line", "internals::protocol::encode_rpc_answer",
    "internals::protocol::CallFailure", "internals::protocol::Algorithm",
    # ... and what those names' signatures and fields name (the compiler's
    # `private_interfaces` warnings list them).
    "internals::protocol::Call", "internals::protocol::CallError", "internals::protocol::Reply",
    "internals::window::Admission", "internals::window::Admission::tally", "internals::applied::Applied", "internals::plan::Plan", "internals::applied::Applied::rule", "internals::applied::Applied::key",
    "internals::plan::Plan::route", "internals::plan::Plan::matched", "internals::plan::Plan::canonical",
    "internals::canon::CanonError", "internals::canon::Sources", "internals::body::Malformed",
    "internals::rules::Condition", "internals::sim::Arrivals", "internals::sim::Report::*",
    "internals::wrangler::Section", "internals::applied::KeyError",
    "internals::applied::Matched::rule", "internals::applied::Matched::key", "internals::plan::Canonical::path",
    "internals::plan::Canonical::query", "internals::plan::Canonical::methods",
    "internals::plan::Canonical::unreadable_body", "internals::wrangler::Section::label",
    "internals::wrangler::Section::tollgate",
    "internals::rules::Match::groups",
    # --interfaces (definition paths: named by a kept signature, not by a caller)
    "count::tally::Tally", "count::tally::Tally::allowed",
    "request::key::ValueType",
    "pipeline::applied::Matched",
    "pipeline::plan::Canonical",
    "request::key::KeyPart",
    "request::key::MissingPart",
    "request::spelling::Spelling",
]

# Outside callers' paths, rewritten in order (the first match wins per
# occurrence). The left side is the path before the narrowing.
CALLER_PATHS = [
    ("tollgate::config::Config", "tollgate::Config"),
    ("tollgate::tools::cli", "tollgate::cli"),
    ("tollgate::config::rules::", "tollgate::internals::rules::"),
    ("tollgate::config::{Config, ", "tollgate::{Config, internals::"),
    ("tollgate::config::", "tollgate::internals::"),
    ("tollgate::request::", "tollgate::internals::"),
    ("tollgate::count::", "tollgate::internals::"),
    ("tollgate::pipeline::", "tollgate::internals::"),
    ("tollgate::tools::", "tollgate::internals::"),
]
CALLER_DIRS = ["tests", "benches", "fuzz/fuzz_targets", "examples", "src/bin"]

# The builds whose `private_interfaces` warnings `--interfaces` reads.
CHECKS = [
    ["cargo", "check", "--locked", "--all-targets"],
    ["cargo", "check", "--locked", "--lib", "--target", "wasm32-unknown-unknown"],
    ["cargo", "check", "--locked", "--lib", "--target", "wasm32-unknown-unknown", "--no-default-features", "--features", "cli"],
]

ENTRY_ATTRS = re.compile(r"^#\s*\[\s*(wasm_bindgen|durable_object|event)\b")
TEST_ATTR = re.compile(r"^#!?\s*\[\s*cfg\s*\((.*)\)\s*\]$", re.S)
ITEM_KW = {"fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod", "use"}
SCOPE_KW = ["mod", "impl", "struct", "enum", "union", "trait", "fn", "extern"]


# --- tokenizer --------------------------------------------------------------

TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<line>//[^\n]*)
      | (?P<block>/\*)
      | (?P<raw>(?:br|r|cr)(?P<hashes>\#*)")
      | (?P<str>(?:b|c)?"(?:\\.|[^"\\])*")
      | (?P<char>b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^'\\\n])')
      | (?P<life>'[A-Za-z_][A-Za-z0-9_]*)
      | (?P<ident>(?:r\#)?[A-Za-z_][A-Za-z0-9_]*)
      | (?P<num>[0-9][0-9A-Za-z_.]*)
      | (?P<path>::)
      | (?P<punct>.)""",
    re.X | re.S,
)


def tokens(text):
    """(kind, value, offset) for every token of `text`, comments skipped."""
    i, out = 0, []
    while i < len(text):
        m = TOKEN.match(text, i)
        kind = m.lastgroup if m.lastgroup != "hashes" else "raw"
        if m.group("block"):
            depth, j = 1, i + 2
            while depth and j < len(text):
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            continue
        if m.group("raw"):
            end = text.index('"' + m.group("hashes"), m.end())
            out.append(("str", text[i : end + 1 + len(m.group("hashes"))], i))
            i = end + 1 + len(m.group("hashes"))
            continue
        for k in ("ws", "line", "str", "char", "life", "ident", "num", "path", "punct"):
            if m.group(k) is not None:
                kind = k
                break
        if kind not in ("ws", "line"):
            out.append((kind, m.group(0), i))
        i = m.end()
    return out


# --- one file ---------------------------------------------------------------


class Scope:
    def __init__(self, kind, name=None, test=False, path=None):
        self.kind, self.name, self.test, self.path = kind, name, test, path
        self.parens = 0


def is_test_attr(attr):
    m = TEST_ATTR.match(attr)
    return bool(m) and re.search(r"\btest\b", m.group(1)) is not None and "not(test" not in m.group(1).replace(" ", "")


def parse_use(toks, i, modpath):
    """The use tree at toks[i] (after `use`): [(target segments, local name)], end index."""
    out = []

    def tree(i, prefix):
        segs = list(prefix)
        while True:
            kind, val, _ = toks[i]
            if val == "{":
                i += 1
                while toks[i][1] != "}":
                    i = tree(i, segs)
                    if toks[i][1] == ",":
                        i += 1
                return i + 1
            if val == "*":
                out.append((segs + ["*"], "*"))
                return i + 1
            segs.append(val)
            i += 1
            if toks[i][1] == "::":
                i += 1
                continue
            name = segs[-1]
            if toks[i][1] == "as":
                name = toks[i + 1][1]
                i += 2
            if name == "self":
                segs, name = segs[:-1], segs[-2] if len(segs) > 1 else name
            out.append((segs, name))
            return i

    if toks[i][1] == "::":
        i += 1
    i = tree(i, [])
    return out, i


def impl_self_type(header):
    """The self type's path segments of an `impl ... {` header (token values)."""
    vals, depth, k = header[1:], 0, 0
    if vals and vals[0] == "<":
        for k, v in enumerate(vals):
            if v == "<":
                depth += 1
            elif v == ">" and vals[k - 1] != "-":
                depth -= 1
                if depth == 0:
                    break
        vals = vals[k + 1 :]
    depth = 0
    for k, v in enumerate(vals):
        if v == "<":
            depth += 1
        elif v == ">" and vals[k - 1] != "-":
            depth -= 1
        elif v == "for" and depth == 0:
            return None  # a trait impl: its items carry no `pub`
    segs = []
    for v in vals:
        if v in ("<", "{", "where", "("):
            break
        if v not in ("::", "&", "mut", "dyn") and not v.startswith("'"):
            segs.append(v)
    return segs


class File:
    """The plain `pub` tokens of one module file, and its `use` maps."""

    def __init__(self, path, modpath, test):
        self.path, self.modpath = path, modpath
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.toks = tokens(self.text)
        self.pubs = []  # dicts: offset, kind, path (list), test, entry, scope_path
        self.uses = []  # (modpath, [(target, name)], pub offset or None, test)
        self.mods = []  # (modpath list, name, test, inline?)
        self.impls = []  # pub records needing self-type resolution
        self.defs = []  # every item's path, whatever its visibility
        self.walk(test)

    def walk(self, file_test):
        toks = self.toks
        stack = [Scope("mod", test=file_test, path=list(self.modpath))]
        pending, attrs = [], []
        i = 0
        while i < len(toks):
            kind, val, off = toks[i]
            top = stack[-1]
            if val == "#" and i + 1 < len(toks) and toks[i + 1][1] in ("[", "!"):
                j = i + 1 if toks[i + 1][1] == "[" else i + 2
                depth, k = 0, j
                while True:
                    if toks[k][1] == "[":
                        depth += 1
                    elif toks[k][1] == "]":
                        depth -= 1
                        if depth == 0:
                            break
                    k += 1
                attr = self.text[off : toks[k][2] + 1]
                if toks[i + 1][1] == "!":
                    if is_test_attr(attr):
                        top.test = True
                else:
                    attrs.append(attr)
                i = k + 1
                continue
            if val == "macro_rules":
                # skip `macro_rules! name { ... }` whole
                k = i
                while toks[k][1] not in ("{", "(", "["):
                    k += 1
                open_, close = toks[k][1], {"{": "}", "(": ")", "[": "]"}[toks[k][1]]
                depth = 0
                while True:
                    if toks[k][1] == open_:
                        depth += 1
                    elif toks[k][1] == close:
                        depth -= 1
                        if depth == 0:
                            break
                    k += 1
                i = k + 1
                pending, attrs = [], []
                continue
            test_here = top.test or any(is_test_attr(a) for a in attrs)
            if val == "pub" and (i + 1 >= len(toks) or toks[i + 1][1] != "("):
                self.record_pub(i, stack, pending, attrs, test_here)
            if val == "use" and top.kind in ("mod",):
                leaves, end = parse_use(toks, i + 1, top.path)
                is_pub = pending[-1:] == ["pub"]
                self.uses.append((list(top.path), leaves, is_pub, test_here))
                if is_pub and self.pubs and self.pubs[-1]["kind"] == "use":
                    self.pubs[-1].update(leaves=leaves, modpath=list(top.path))
                i = end
                continue
            if val in ITEM_KW and val != "use" and top.kind in ("mod", "impl", "struct") and toks[i + 1][0] == "ident":
                self.defs.append(top.path + [toks[i + 1][1]])
            if val == "mod" and top.kind == "mod" and toks[i + 2][1] == ";":
                self.mods.append((list(top.path), toks[i + 1][1], test_here))
            if val == "(":
                top.parens += 1
            elif val == ")":
                top.parens -= 1
            if val == "{":
                stack.append(self.open_scope(pending, top, test_here))
                pending, attrs = [], []
            elif val == "}":
                stack.pop()
                pending, attrs = [], []
            elif val == ";" or (val == "," and top.kind in ("struct", "enum") and top.parens == 0):
                pending, attrs = [], []
            else:
                pending.append(val)
            i += 1

    def open_scope(self, pending, top, test):
        first = next((v for v in pending if v in SCOPE_KW), None)
        if top.kind in ("fn", "block", "variant") or first is None:
            return Scope("variant" if top.kind == "enum" else "block", test=test, path=top.path)
        k = pending.index(first)
        name = pending[k + 1] if k + 1 < len(pending) else None
        if first == "mod":
            return Scope("mod", name, test, top.path + [name])
        if first == "impl":
            return Scope("impl", impl_self_type(pending[k:]), test, top.path)
        if first in ("struct", "union"):
            return Scope("struct", name, test, top.path)
        if first == "extern":
            return Scope("extern", None, test, top.path)
        return Scope(first, name, test, top.path)

    def record_pub(self, i, stack, pending, attrs, test):
        toks = self.toks
        top = stack[-1]
        entry = any(ENTRY_ATTRS.match(a) for a in attrs)
        k = i + 1
        while toks[k][1] in ("async", "unsafe", "extern") or toks[k][0] == "str":
            k += 1
        word = toks[k][1]
        if word == "const" and toks[k + 1][1] in ("fn", "async", "unsafe"):
            k += 1
            while toks[k][1] != "fn":
                k += 1
            word = "fn"
        rec = {"offset": toks[i][2], "test": test, "entry": entry, "file": self}
        if any(s.kind in ("fn", "block", "variant") for s in stack):
            rec.update(kind="nested", path=None)
        elif top.parens > 0 and top.kind != "struct" and "struct" in pending:
            name = pending[pending.index("struct") + 1]
            rec.update(kind="field", path=top.path + [name, "#"])
        elif word in ITEM_KW:
            if word == "use":
                rec.update(kind="use", path=None)
            else:
                name = toks[k + 1][1]
                if top.kind == "impl":
                    rec.update(kind=word, path=None, self_type=top.name, name=name, modpath=top.path)
                    self.impls.append(rec)
                else:
                    rec.update(kind=word, path=top.path + [name])
        elif top.kind == "struct":
            rec.update(kind="field", path=top.path + [top.name, toks[k][1]])
        else:
            rec.update(kind="other", path=None)
        self.pubs.append(rec)


# --- the crate --------------------------------------------------------------


class Crate:
    def __init__(self):
        self.files = []
        self.uses = {}  # (modpath tuple, name) -> target segments (as written), pub?, modpath
        self.defs = set()  # tuples: every item path defined
        self.load(os.path.join(SRC, "lib.rs"), [], False, SRC)
        for f in self.files:
            for modpath, leaves, is_pub, test in f.uses:
                for target, name in leaves:
                    if name != "*":
                        self.uses[(tuple(modpath), name)] = (target, is_pub, modpath)
            self.defs.update(tuple(p) for p in f.defs)
        for f in self.files:
            for rec in f.impls:
                ty = self.resolve(rec["modpath"], rec["self_type"] or ["?"], follow=False)
                rec["path"] = list(ty) + [rec["name"]] if ty else rec["modpath"] + ["?", rec["name"]]

    def load(self, path, modpath, test, dirpath):
        f = File(path, modpath, test)
        self.files.append(f)
        for parent, name, mod_test in f.mods:
            sub = parent[len(modpath):]
            base = os.path.join(dirpath, *sub)
            for cand, nextdir in ((os.path.join(base, name + ".rs"), os.path.join(base, name)),
                                  (os.path.join(base, name, "mod.rs"), os.path.join(base, name))):
                if os.path.exists(cand):
                    self.load(cand, parent + [name], mod_test, nextdir)
                    break

    def absolute(self, modpath, segs, via=None):
        """Segments as written in module `modpath`, made absolute (None: another crate)."""
        segs = list(segs)
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] == "self":
            return list(modpath) + segs[1:]
        if segs[0] == "super":
            base = list(modpath)
            while segs and segs[0] == "super":
                base, segs = base[:-1], segs[1:]
            return base + segs
        if (tuple(modpath), segs[0]) in self.uses:
            target, _, where = self.uses[(tuple(modpath), segs[0])]
            if via is not None:
                via.add((tuple(modpath), segs[0]))
            head = self.absolute(where, target, via)
            return None if head is None else head + segs[1:]
        if tuple(modpath + [segs[0]]) in self.defs or any(
            tuple(modpath + [segs[0]]) == tuple(f.modpath) for f in self.files
        ):
            return list(modpath) + segs
        return None

    def resolve(self, modpath, segs, follow=True, via=None):
        """The definition's path of `segs` (seen from `modpath`), through re-exports."""
        path = self.absolute(modpath, segs, via)
        if path is None:
            return None
        changed = True
        while changed:
            changed = False
            for n in range(len(path), 0, -1):
                key = (tuple(path[: n - 1]), path[n - 1])
                if key in self.uses:
                    target, is_pub, where = self.uses[key]
                    head = self.absolute(where, target, via)
                    if head is not None and head != path[:n]:
                        if via is not None:
                            via.add(key)
                        path, changed = head + path[n:], True
                        break
        return tuple(path)

    def kept(self):
        """The kept definitions' paths, and the re-export links they go through.

        `TYPE::*` keeps the type and its members. A kept `pub use` keeps
        every name it re-exports (a re-export is not split)."""
        paths, via = set(), set()
        for entry in KEEP:
            segs = entry.split("::")
            target = self.resolve([], segs[:-1] if segs[-1] == "*" else segs, via=via)
            if target is None:
                sys.exit(f"narrow-pub: KEEP names {entry!r}, which resolves to nothing")
            paths.add(target)
            if segs[-1] == "*":
                paths.add(target + ("*",))
        done = set()
        while via - done:
            for key in sorted(via - done):
                done.add(key)
                for f in self.files:
                    for rec in f.pubs:
                        if rec["kind"] == "use" and tuple(rec["modpath"]) == key[0] and key[1] in [n for _, n in rec["leaves"]]:
                            for _, name in rec["leaves"]:
                                target = self.resolve(key[0], [name], via=via)
                                if target is not None:
                                    paths.add(target)
        return paths, via

    def decide(self):
        """(rec, keep?) for every plain `pub` outside tests."""
        kept, via = self.kept()
        out = []
        for f in self.files:
            for rec in f.pubs:
                if rec["test"]:
                    continue
                keep = rec["entry"]
                if rec["kind"] == "use":
                    keep = keep or self.use_kept(f, rec, via)
                elif rec["path"]:
                    p = tuple(rec["path"])
                    keep = keep or p in kept or (len(p) > 1 and p[:-1] + ("*",) in kept)
                out.append((rec, keep))
        return out

    def use_kept(self, f, rec, via):
        """Whether a `pub use` is a link of some kept path's re-export chain."""
        return any((tuple(rec["modpath"]), name) in via for _, name in rec["leaves"])


# --- commands ---------------------------------------------------------------


def count(crate):
    items, fields, layers = 0, 0, {}
    for rec in (r for f in crate.files for r in f.pubs if not r["test"]):
        layer = rec["file"].modpath[0] if rec["file"].modpath else "(lib.rs)"
        key = "fields" if rec["kind"] == "field" else "items"
        layers.setdefault(layer, {"items": 0, "fields": 0})[key] += 1
        if key == "items":
            items += 1
        else:
            fields += 1
    for layer in sorted(layers):
        print(f"  {layer:10} {layers[layer]['items']:4} items {layers[layer]['fields']:4} fields")
    print(f"plain pub: {items} items, {fields} fields, {items + fields} in all (non-test library code)")


def rewrite_src(crate, apply):
    due = {}
    for rec, keep in crate.decide():
        if not keep:
            due.setdefault(rec["file"], []).append(rec["offset"])
    for f, offsets in due.items():
        text = f.text
        for off in sorted(offsets, reverse=True):
            assert text[off : off + 3] == "pub"
            text = text[: off + 3] + "(crate)" + text[off + 3 :]
        if apply:
            with open(f.path, "w", encoding="utf-8") as out:
                out.write(text)
    return sum(len(v) for v in due.values()), {os.path.relpath(f.path, ROOT): len(v) for f, v in due.items()}


def rewrite_callers(apply):
    changed = []
    for d in CALLER_DIRS:
        base = os.path.join(ROOT, d)
        for dirpath, _, names in os.walk(base):
            if os.sep + "target" in dirpath or "node_modules" in dirpath:
                continue
            if d == "examples" and dirpath != base:
                continue  # examples/rust-app is its own crate: it uses only the API
            for name in names:
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                new = re.sub(
                    "|".join(re.escape(old) for old, _ in CALLER_PATHS),
                    lambda m: dict(CALLER_PATHS)[m.group(0)],
                    text,
                )
                if new != text:
                    changed.append(os.path.relpath(path, ROOT))
                    if apply:
                        with open(path, "w", encoding="utf-8") as f:
                            f.write(new)
    return changed


def interfaces(crate):
    """The paths a kept item's signature names but --apply narrowed: KEEP them."""
    import json
    import subprocess

    modpath = {os.path.relpath(f.path, ROOT): f.modpath for f in crate.files}
    found = set()
    for cmd in CHECKS:
        out = subprocess.run(cmd + ["--message-format=json"], cwd=ROOT, capture_output=True, text=True).stdout
        for raw in out.splitlines():
            msg = json.loads(raw)
            d = msg.get("message") or {}
            if (d.get("code") or {}).get("code") not in ("private_interfaces", "private_bounds"):
                continue
            for child in d["children"]:
                for span in child["spans"]:
                    found.add((span["file_name"], span["line_start"], child["message"]))
    paths = set()
    for file, line, message in sorted(found):
        name = re.sub(r"<.*", "", re.search(r"`([^`]*)`", message).group(1)).split("::")[-1]
        paths.add("::".join(modpath.get(file, ["?"]) + [name]))
    for path in sorted(paths):
        print(f'    "{path}",')
    return 1 if paths else 0


def main(argv):
    mode = argv[1] if len(argv) > 1 else "--count"
    crate = Crate()
    if mode == "--count":
        count(crate)
    elif mode == "--list":
        for rec, keep in crate.decide():
            if keep:
                where = os.path.relpath(rec["file"].path, ROOT)
                line = rec["file"].text.count("\n", 0, rec["offset"]) + 1
                name = "::".join(rec["path"]) if rec["path"] else rec["kind"]
                print(f"{where}:{line}: {rec['kind']} {name}{' (JS entry)' if rec['entry'] else ''}")
    elif mode == "--interfaces":
        return interfaces(crate)
    elif mode in ("--check", "--apply"):
        n, per_file = rewrite_src(crate, mode == "--apply")
        callers = rewrite_callers(mode == "--apply")
        verb = "rewrote" if mode == "--apply" else "would rewrite"
        for path, k in sorted(per_file.items()):
            print(f"  {path}: {k}")
        print(f"{verb} {n} `pub` to `pub(crate)` in {len(per_file)} files; callers: {', '.join(callers) or 'none'}")
        if mode == "--check" and (n or callers):
            return 1
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
