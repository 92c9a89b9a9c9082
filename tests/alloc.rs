//! The per-request promise of `Rule::matches` and `Config::matching`: a
//! request a rule does not match allocates nothing, whether it fails on the
//! method, the host, the path (with or without format suffixes, on
//! case-insensitive and case-sensitive rules) or a query condition.
//!
//! The one exception `Rule::matches` documents, a pattern urlpattern runs as
//! a regular expression on a path that passes its literal prefix and suffix,
//! is left out: the `tenant` cases here fail its prefix `/t`.
//!
//! A global allocator counts the allocations of the current thread (tests
//! run on threads of their own, so other tests do not disturb the count).

// Test code: helpers outside #[test] functions may panic too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tollgate::internals::canon::{canonical_path, CanonicalQuery, RawUrl};
use tollgate::Config;
use tollgate::internals::rules::RequestView;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, counting allocations and reallocations.
struct CountingAllocator;

fn count() {
    // `try_with`: the thread-local may already be gone while a thread exits.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// How many times `f` allocates on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    let after = ALLOCATIONS.with(Cell::get);
    drop(out);
    after - before
}

/// Rules of every matcher shape: literal paths, a segment capture with a
/// host pattern, a wildcard, a case-sensitive literal with a suffix, and a
/// pattern urlpattern runs as a regular expression.
fn config() -> Config {
    let limits = json!([{ "requests": 10, "window": "60s" }]);
    Config::from_json(&json!({"rules": [
        {"name": "heavy", "path": "/api/example", "query": {"mode": "heavy"}, "limits": limits},
        {"name": "users", "path": "/users/:id", "methods": ["POST"], "host": "*.example.com", "limits": limits},
        {"name": "reports", "path": "/Admin/Reports/*", "case_insensitive": false, "limits": limits},
        {"name": "export", "path": "/Export.CSV", "case_insensitive": false, "limits": limits},
        {"name": "tenant", "path": "/t/:tenant/:action{/:more}?", "methods": ["GET", "PUT"], "limits": limits},
        {"name": "login", "path": "/login", "methods": ["POST"], "header": {"x-plan": "free"}, "limits": limits},
    ]}))
    .unwrap()
}

/// A request, and the rule it should fail for a reason named in
/// `Rule::evaluate`'s answer.
struct Case {
    method: &'static str,
    host: &'static str,
    url: &'static str,
    rule: &'static str,
    because: &'static str,
}

const CASES: &[Case] = &[
    Case { method: "GET", host: "api.example.com", url: "/users/42", rule: "users", because: "method" },
    Case { method: "DELETE", host: "h", url: "/t/acme/run", rule: "tenant", because: "method" },
    Case { method: "POST", host: "example.org", url: "/users/42", rule: "users", because: "host" },
    Case { method: "POST", host: "api.example.net", url: "/USERS/42.json", rule: "users", because: "host" },
    Case { method: "POST", host: "api.example.com", url: "/users/42/extra.json", rule: "users", because: "path" },
    Case { method: "POST", host: "api.example.com", url: "/USERS", rule: "users", because: "path" },
    Case { method: "GET", host: "h", url: "/API/EXAMPLES.JSON.XML?mode=heavy", rule: "heavy", because: "path" },
    Case { method: "GET", host: "h", url: "/api/example-other.json?mode=heavy", rule: "heavy", because: "path" },
    Case { method: "GET", host: "h", url: "/api/exampl?mode=heavy", rule: "heavy", because: "path" },
    Case { method: "GET", host: "h", url: "/admin/reports/daily.csv", rule: "reports", because: "path" },
    Case { method: "GET", host: "h", url: "/Admin/Report", rule: "reports", because: "path" },
    Case { method: "GET", host: "h", url: "/export.CSV", rule: "export", because: "path" },
    Case { method: "GET", host: "h", url: "/Export.TXT.json", rule: "export", because: "path" },
    Case { method: "GET", host: "h", url: "/v/acme/run", rule: "tenant", because: "path" },
    Case { method: "POST", host: "h", url: "/log-in", rule: "login", because: "path" },
    Case { method: "GET", host: "h", url: "/api/example.json?mode=normal&Mode=light", rule: "heavy", because: "query condition" },
    Case { method: "GET", host: "h", url: "/API/Example/?moder=heavy", rule: "heavy", because: "query condition" },
];

/// Runs `check` on the request view of `case`.
fn with_view<T>(case: &Case, check: impl FnOnce(&RequestView<'_>) -> T) -> T {
    let raw = RawUrl::split(case.url);
    let path = canonical_path(raw.path).unwrap();
    let query = CanonicalQuery::parse(raw.query);
    check(&RequestView { method: case.method, host: case.host, path: &path, query: &query })
}

#[test]
fn a_rule_that_does_not_match_allocates_nothing() {
    let config = config();
    for case in CASES {
        with_view(case, |view| {
            let rule = config.rules.iter().find(|r| r.name == case.rule).unwrap();
            let why = rule.evaluate(view).expect_err(case.url).to_string();
            assert!(why.starts_with(case.because), "{} on {}: {why}", case.rule, case.url);
            for rule in config.rules.iter().filter(|r| r.matches(view).is_none()) {
                assert_eq!(allocations(|| rule.matches(view)), 0, "rule {} on {} {}", rule.name, case.method, case.url);
            }
        });
    }
}

#[test]
fn matching_nothing_allocates_nothing() {
    let config = config();
    for case in CASES {
        with_view(case, |view| {
            assert!(config.matching(view).is_empty(), "{}", case.url);
            assert_eq!(allocations(|| config.matching(view)), 0, "{} {}", case.method, case.url);
        });
    }
}

/// The counter does see the allocations of a match (its path and groups).
#[test]
fn a_match_is_counted() {
    let config = config();
    let case = Case { method: "post", host: "api.example.com", url: "/Users/42.json", rule: "users", because: "" };
    with_view(&case, |view| {
        assert_eq!(config.matching(view).len(), 1);
        assert!(allocations(|| config.matching(view)) > 0);
    });
}
