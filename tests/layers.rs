//! The layout is the architecture (issue 26): `src/` is in folders by
//! layer, and a layer uses only the layers below it. This test reads each
//! source file whole (comments and literals blanked, `#[cfg(test)]` items
//! dropped wherever they sit) and fails on a
//! `crate::` reference that goes up a layer, or on an import cycle between
//! two files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Each folder's rank: a file may name only folders of a lower rank, or
/// its own. `glue` and `tools` are the top: drivers, never used below.
const LAYERS: &[(&str, u8)] = &[("request", 0), ("count", 1), ("config", 2), ("pipeline", 3), ("glue", 4), ("tools", 4)];

/// A file's code, read whole: comments and the insides of string and
/// char literals blanked (so a brace or a `crate::` in them counts for
/// nothing), then every `#[cfg(test)]` item dropped (a test module or a
/// test-only item, wherever it sits in the file), the production code
/// after it kept.
fn code_of(text: &str) -> String {
    let mut code = blank_literals(text);
    while let Some(at) = code.find("#[cfg(test)]") {
        let end = item_end(code.as_bytes(), at + "#[cfg(test)]".len());
        let kept_lines: String = code[at..end].chars().map(|c| if c == '\n' { c } else { ' ' }).collect();
        code.replace_range(at..end, &kept_lines);
    }
    code
}

/// `text` with its comments and the contents of its string, raw string and
/// char literals replaced by spaces (newlines kept): same length, same lines.
fn blank_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |k| i + k);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (0usize, i);
                while j < b.len() {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            b'r' if !ident_before && matches!(b.get(i + 1), Some(b'#' | b'"')) => {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                let start = i + 2 + hashes;
                let end = b[start..].windows(close.len()).position(|w| w == close.as_slice()).map_or(b.len(), |k| start + k);
                blank(&mut out, start, end);
                i = end + close.len();
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                let end = b[i + 2..].iter().position(|&c| c == b'\'').map_or(b.len(), |k| i + 2 + k);
                blank(&mut out, i + 1, end);
                i = end + 1;
            }
            b'\'' => {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                if b.get(i + 1 + len) == Some(&b'\'') {
                    blank(&mut out, i + 1, i + 1 + len);
                    i += len + 2;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the item that starts at `from` ends (after its attributes): at its
/// `;` (outside brackets: `mod x;`, `use ...;`) or its body's closing `}`.
fn item_end(code: &[u8], from: usize) -> usize {
    let (mut brackets, mut braces) = (0i32, 0i32);
    for (k, &c) in code.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => brackets += 1,
            b')' | b']' => brackets -= 1,
            b';' if brackets == 0 && braces == 0 => return k + 1,
            b'{' => braces += 1,
            b'}' => {
                braces -= 1;
                if braces == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// `src/a/b.rs` → `["a", "b"]`; `src/a/mod.rs` → `["a"]`.
fn module_of(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix("src").unwrap_or(path).with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::a::b` path in `code`, as its segments.
fn references(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at + "crate::".len()..];
        let path: String = tail.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        out.push(path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect());
        rest = tail;
    }
    out
}

/// The modules (files) of the crate, and which other files each names.
fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut paths = Vec::new();
    files(Path::new("src"), &mut paths);
    let modules: BTreeMap<Vec<String>, String> = paths
        .iter()
        .filter(|p| !p.starts_with("src/bin"))
        .map(|p| (module_of(p), code_of(&fs::read_to_string(p).unwrap())))
        .collect();
    let mut edges = BTreeMap::new();
    for (module, code) in &modules {
        let targets: BTreeSet<Vec<String>> = references(code)
            .into_iter()
            .filter_map(|path| (0..=path.len()).rev().map(|k| path[..k].to_vec()).find(|m| modules.contains_key(m)))
            // A folder's mod.rs and its children declare each other.
            .filter(|t| t != module && !t.starts_with(module) && !module.starts_with(t))
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

fn rank(module: &[String]) -> Option<u8> {
    let folder = module.first()?;
    LAYERS.iter().find(|(name, _)| name == folder).map(|(_, rank)| *rank)
}

#[test]
fn a_layer_uses_only_the_layers_below_it() {
    let mut upward = Vec::new();
    for (module, targets) in graph() {
        let Some(own) = rank(&module) else { continue };
        for target in targets {
            if rank(&target).is_some_and(|r| r > own || (r == own && target[0] != module[0])) {
                upward.push(format!("{} -> {}", module.join("/"), target.join("/")));
            }
        }
    }
    assert!(upward.is_empty(), "references up (or across) a layer: {upward:#?}");
}

#[test]
fn no_import_cycle_between_files() {
    let edges = graph();
    // A cycle exists iff a depth-first search meets a module on its stack.
    fn visit<'a>(
        m: &'a Vec<String>,
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<&'a Vec<String>, u8>,
        stack: &mut Vec<&'a Vec<String>>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|s| *s == m).unwrap_or(0);
                return Some(stack[from..].iter().map(|s| s.join("/")).collect());
            }
            _ => {}
        }
        state.insert(m, 1);
        stack.push(m);
        for t in edges.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(t, edges, state, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        state.insert(m, 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        let cycle = visit(m, &edges, &mut state, &mut Vec::new());
        assert!(cycle.is_none(), "an import cycle: {cycle:?}");
    }
}

#[test]
fn a_file_is_read_past_its_test_items() {
    let text = "use crate::a::b; // crate::c\n#[cfg(test)]\nmod tests { fn f() { let s = \"}\"; let c = '}'; crate::d::e(); } }\n\
                #[cfg(test)]\nfn only<'a>(x: [u8; 2]) -> &'a str { \"crate::g\" }\nfn after() { crate::h::i(); let r = r#\"crate::j\"#; }\n";
    let code = code_of(text);
    let found: Vec<String> = references(&code).into_iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["a::b", "h::i"], "{code}");
    assert_eq!(code.lines().count(), text.lines().count(), "lines kept");
}
