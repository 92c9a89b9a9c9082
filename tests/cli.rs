//! The operator CLI, run as a binary: `tollgate check` and `tollgate explain`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

fn tollgate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run tollgate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_toml(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_accepts_the_shipped_config() {
    let (code, out, err) = tollgate(&["check", "wrangler.toml"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("wrangler.toml top level: ok, 1 rule(s)"), "{out}");
}

#[test]
fn check_lists_every_error_and_exits_1() {
    let path = temp_toml(
        "bad.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "login"
path = "/login"
limits = [{ requests = 0, window = "15x" }]
on_error = "explode"

[env.staging.vars]
OTHER = "1"
"#,
    );
    let (code, _out, err) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("rule `login`, field `limits[0].requests`"), "{err}");
    assert!(err.contains("rule `login`, field `limits[0].window`: unknown unit `x`"), "{err}");
    assert!(err.contains("rule `login`, field `on_error`"), "{err}");
    assert!(err.contains("env `staging`: no [vars.TOLLGATE]"), "{err}");
}

#[test]
fn check_warns_about_narrow_routes() {
    let path = temp_toml(
        "narrow.toml",
        r#"
routes = [{ pattern = "example.com/api/example*", zone_name = "example.com" }]
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "heavy"
path = "/api/example"
limits = [{ requests = 10, window = "60s" }]
"#,
    );
    let (code, out, _) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "warnings do not fail the check");
    assert!(out.contains("warning:") && out.contains("`/api//example`"), "{out}");
    assert!(out.contains("`/API/EXAMPLE`"), "{out}");
}

#[test]
fn check_warns_that_a_success_without_an_identity_header_can_be_forged() {
    let path = temp_toml(
        "forgeable.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "login"
path = "/login"
key = ["body:email"]
count_statuses = [401]
clear_on_success = true
limits = [{ requests = 10, window = "15m" }]

[[vars.TOLLGATE.rules]]
name = "login-checked"
path = "/login"
key = ["body:email"]
count_statuses = [401]
on_success = "decrement"
success_identity_header = "x-authenticated-user"
limits = [{ requests = 10, window = "15m" }]
"#,
    );
    let (code, out, _) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "warnings do not fail the check");
    assert!(out.contains("warning: ") && out.contains("rule `login`, field `success_identity_header`: not set"), "{out}");
    assert!(!out.contains("rule `login-checked`"), "an identity header settles it: {out}");
}

#[test]
fn explain_shows_a_bypass_variant_caught() {
    let (code, out, err) = tollgate(&[
        "explain",
        "https://example.com/api/example%2ejson?mode=normal&mode=heavy",
        "--ip",
        "2001:db8:1:2::99",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("canonical:  /api/example.json"), "{out}");
    assert!(out.contains("rule heavy-example: MATCH"), "{out}");
    assert!(out.contains("key:      ip=2001:db8:1:2::/64"), "{out}");
    let (code, _, err) = tollgate(&["explain"]);
    assert_eq!(code, 2);
    assert!(err.contains("missing <url>"), "{err}");
}

#[test]
fn check_reads_wrangler_jsonc_and_honours_env() {
    let path = temp_toml(
        "wrangler.jsonc",
        r#"{
  // Wrangler's generated projects use JSONC.
  "name": "app",
  "routes": [{ "pattern": "example.com/*", "zone_name": "example.com" }],
  "vars": { "TOLLGATE": { "rules": [
    { "name": "heavy", "path": "/api/example", "limits": [{ "requests": 10, "window": "60s" }], },
  ] } },
  "env": { "broken": { "vars": { "TOLLGATE": { "rules": [
    { "name": "typo", "path": "/x", "limts": [] }
  ] } } } },
}"#,
    );
    let file = path.to_str().unwrap();
    let (code, out, err) = tollgate(&["check", file]);
    assert_eq!(code, 1, "the broken env fails the whole check: {out}{err}");
    assert!(out.contains("top level: ok, 1 rule(s)"), "{out}");
    assert!(err.contains("env `broken`: rule `typo`, field `limts`: unknown field"), "{err}");
    let (code, out, err) = tollgate(&["check", file, "--env", ""]);
    assert_eq!(code, 0, "the top level alone is valid: {out}{err}");
    let (code, _, err) = tollgate(&["check", file, "--env", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no environment `nope` (environments: `broken`)"), "{err}");
    let (code, _, err) = tollgate(&["explain", "/", "--config", file, "--env", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no environment `nope`"), "{err}");
}

#[test]
fn every_subcommand_has_help_and_check_warns_about_what_attaches_nothing() {
    for command in ["check", "explain"] {
        let (code, out, _) = tollgate(&[command, "--help"]);
        assert_eq!(code, 0);
        assert!(out.starts_with(&format!("usage: tollgate {command}")), "{out}");
    }
    let path = temp_toml(
        "noroutes.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "shadow"
path = "/x"
methods = ["PSOT"]
action = "log"
limits = [{ requests = 1, window = "1m" }]
"#,
    );
    let (code, out, _) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("no routes: the Worker attaches to nothing"), "{out}");
    assert!(out.contains("[observability] is off"), "{out}");
    assert!(out.contains("`PSOT` is not a standard method"), "{out}");
}
