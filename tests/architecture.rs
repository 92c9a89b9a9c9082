//! docs/ARCHITECTURE.md names items of the code only as paths this test
//! resolves: every `a::b` in it (in prose, tables or drawings) must name a
//! module, an item, a method, a field or a variant of `src/`. A rename or
//! a removal then fails the build instead of leaving the page behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

#[path = "support/source.rs"]
mod source;
use source::{code_of, rust_files};

/// The crate's source files' code (`#[cfg(test)]` items dropped), by module path (`src/a/b.rs` → `a::b`,
/// `src/a/mod.rs` → `a`, `src/lib.rs` → ``), with their text.
fn sources() -> BTreeMap<String, String> {
    rust_files(Path::new("src"))
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix("src").unwrap().with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|s| s == "mod" || s == "lib") {
                parts.pop();
            }
            (parts.join("::"), code_of(&fs::read_to_string(&p).unwrap()))
        })
        .collect()
}

/// What each file defines: its items (`fn`, `struct`, `enum`, `trait`,
/// `type`, `const`, `static`, `mod`), what it re-exports (`pub use`), its
/// variants (a line that starts with a capitalized name and `(`, `{`, `,`)
/// and its fields (a line `name: Type`); and where each type is
/// implemented.
struct Index {
    files: BTreeMap<String, BTreeSet<String>>,
    /// A type's name → the files that define or implement it.
    types: BTreeMap<String, BTreeSet<String>>,
}

impl Index {
    fn new(sources: &BTreeMap<String, String>) -> Index {
        let item = Regex::new(r"\b(fn|struct|enum|trait|type|const|static|mod)\s+([A-Za-z_][A-Za-z0-9_]*)").unwrap();
        let reexport = Regex::new(r"pub use ([^;]*);").unwrap();
        let word = Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").unwrap();
        let variant = Regex::new(r"(?m)^\s*([A-Z][A-Za-z0-9_]*)\s*([({,]|$)").unwrap();
        let field = Regex::new(r"(?m)^\s*(pub(\([a-z]+\))?\s+)?([a-z_][a-z0-9_]*):\s").unwrap();
        let implements = Regex::new(r"impl(<[^>{]*>)?\s+([A-Za-z_:<>']+\s+for\s+)?([A-Za-z_][A-Za-z0-9_]*)").unwrap();
        let typed = Regex::new(r"\b(struct|enum|trait|type)\s+([A-Za-z_][A-Za-z0-9_]*)").unwrap();
        let (mut files, mut types) = (BTreeMap::new(), BTreeMap::<String, BTreeSet<String>>::new());
        for (module, text) in sources {
            let mut names: BTreeSet<String> = item.captures_iter(text).map(|c| c[2].to_string()).collect();
            names.extend(reexport.captures_iter(text).flat_map(|c| word.find_iter(&c[1]).map(|w| w.as_str().to_string()).collect::<Vec<_>>()));
            names.extend(variant.captures_iter(text).map(|c| c[1].to_string()));
            names.extend(field.captures_iter(text).map(|c| c[3].to_string()));
            for c in typed.captures_iter(text).chain(implements.captures_iter(text)) {
                types.entry(c[c.len() - 1].to_string()).or_default().insert(module.clone());
            }
            files.insert(module.clone(), names);
        }
        Index { files, types }
    }

    fn defines(&self, modules: &BTreeSet<String>, name: &str) -> bool {
        modules.iter().any(|m| self.files[m].contains(name))
    }
}

/// Whether `path` (`a::b::c`, maybe `tollgate::`-rooted) names something
/// in `src`: its first segment a module (by its last name: `machine` is
/// `pipeline::machine`) or a type, each later segment a module, an item
/// of the file before it, or a member of the type before it.
fn resolves(index: &Index, path: &str) -> bool {
    let path = path.strip_prefix("crate::").or_else(|| path.strip_prefix("tollgate::")).map_or(path.to_string(), |p| format!("::{p}"));
    let segments: Vec<&str> = path.split("::").collect();
    let (first, rest) = segments.split_first().unwrap();
    // Where the path may start: a module (`Some(its path)`) or a type
    // (`None`, the files that define or implement it).
    let mut starts: Vec<(Option<String>, BTreeSet<String>)> = index
        .files
        .keys()
        .filter(|m| *m == first || m.ends_with(&format!("::{first}")))
        .map(|m| (Some(m.clone()), BTreeSet::from([m.clone()])))
        .collect();
    if let Some(files) = index.types.get(*first) {
        starts.push((None, files.clone()));
    }
    starts.into_iter().any(|(mut module, mut files)| {
        for segment in rest {
            let sub = module.as_ref().map(|m| if m.is_empty() { segment.to_string() } else { format!("{m}::{segment}") });
            if let Some(sub) = sub.filter(|s| index.files.contains_key(s)) {
                (module, files) = (Some(sub.clone()), BTreeSet::from([sub]));
            } else if index.defines(&files, segment) {
                module = None;
                if let Some(of_type) = index.types.get(*segment) {
                    files = of_type.clone();
                }
            } else {
                return false;
            }
        }
        true
    })
}

/// Every `a::b` path in `text`.
fn paths_in(text: &str) -> Vec<String> {
    let path = Regex::new(r"\b[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+").unwrap();
    let mut found: Vec<String> = path.find_iter(text).map(|m| m.as_str().to_string()).collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn every_item_the_architecture_names_is_in_the_code() {
    let index = Index::new(&sources());
    let text = fs::read_to_string("docs/ARCHITECTURE.md").unwrap();
    let named = paths_in(&text);
    assert!(named.len() > 50, "the page names items: {named:?}");
    let stale: Vec<&String> = named.iter().filter(|p| !resolves(&index, p)).collect();
    assert!(stale.is_empty(), "docs/ARCHITECTURE.md names what src/ does not hold: {stale:#?}");
}

#[test]
fn a_removed_or_misspelt_name_is_caught() {
    let index = Index::new(&sources());
    for real in ["pipeline::machine", "plane::walk", "Settle::after", "Route::Admin", "tollgate::Config", "count::store", "Plane::Zone"] {
        assert!(resolves(&index, real), "{real}");
    }
    for stale in ["plan::may_apply", "machine::applies", "Settle::holds_until_sent", "Route::Nowhere", "tollgate::Nothing", "pipeline::nothing"] {
        assert!(!resolves(&index, stale), "{stale}");
    }
}
