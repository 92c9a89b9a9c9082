//! The embed API's example (`src/glue/embed.rs`, wasm32 only, so not a
//! doctest `cargo test` can run natively) is the code of
//! `examples/rust-app`, which `scripts/test` builds and runs end to end
//! (`scripts/build-example rust-app`, tests/worker/rust-app.test.mjs): every
//! code line of the example is a line of that app, but the two where the
//! example has the app's own work (its handler) and the app reads its
//! request (`mut req`). The example cannot drift from a Worker that runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;

/// The code lines of the first ```` ```ignore ```` block in `//!` docs,
/// trimmed, comments after the code dropped.
fn example_lines(doc: &str) -> Vec<String> {
    let mut lines = doc.lines().map(|l| l.trim_start().strip_prefix("//!").unwrap_or("").trim());
    lines.by_ref().find(|l| *l == "```ignore").expect("an example in the module's docs");
    lines
        .take_while(|l| *l != "```")
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(|l| l.split(" // ").next().unwrap_or(l).trim().to_string())
        .collect()
}

#[test]
fn the_embed_example_is_the_rust_app_that_runs() {
    let example = example_lines(&fs::read_to_string("src/glue/embed.rs").unwrap());
    let app: Vec<String> = fs::read_to_string("examples/rust-app/src/lib.rs").unwrap().lines().map(|l| l.trim().to_string()).collect();
    let own = ["async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {", "let response = my_handler(req).await?;"];
    assert!(example.len() > 15, "{example:#?}");
    let missing: Vec<&String> = example.iter().filter(|l| !own.contains(&l.as_str()) && !app.contains(l)).collect();
    assert!(missing.is_empty(), "lines of the embed example that examples/rust-app does not run: {missing:#?}");
}
