//! The layout is the architecture: `src/` is in folders by
//! layer, and a layer uses only the layers below it. This test reads each
//! source file whole (comments and literals blanked, `#[cfg(test)]` items
//! dropped wherever they sit) and fails on a
//! `crate::` reference that goes up a layer, or on an import cycle between
//! two files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

#[path = "support/source.rs"]
mod source;
use source::{code_of, rust_files};

/// Each folder's rank: a file may name only folders of a lower rank, or
/// its own. The request machine (`pipeline`) knows of an admin request only
/// that it is one; the admin plane (`admin`: the admin API, the console,
/// sign-in) sits above it, so none of it is needed by the zone's Worker.
/// `glue` and `tools` are the top: drivers, never used below.
const LAYERS: &[(&str, u8)] = &[("request", 0), ("count", 1), ("config", 2), ("pipeline", 3), ("admin", 4), ("glue", 5), ("tools", 5)];

/// `src/a/b.rs` → `["a", "b"]`; `src/a/mod.rs` → `["a"]`.
fn module_of(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix("src").unwrap_or(path).with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
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
    let paths = rust_files(Path::new("src"));
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
