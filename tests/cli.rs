//! The operator CLI, run as a binary: `tollgate check` and `tollgate explain`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// Runs the CLI without a log key in its environment (whatever the shell
/// running the tests has), or with `log_key` as `TOLLGATE_LOG_KEY`.
fn tollgate_with(args: &[&str], log_key: Option<&str>) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR")).env_remove("TOLLGATE_LOG_KEY");
    if let Some(key) = log_key {
        command.env("TOLLGATE_LOG_KEY", key);
    }
    let out = command.output().expect("run tollgate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tollgate(args: &[&str]) -> (i32, String, String) {
    tollgate_with(args, None)
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
fn check_takes_a_daily_token_budget_of_a_billion_on_the_default_algorithm() {
    let path = temp_toml(
        "budget.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "tokens"
path = "/v1/*"
key = ["header:x-api-key"]
limits = [{ requests = 1000000000, window = "1d" }]
counting = { mode = "response" }
metering = { header = "x-usage-tokens", reserve = 300000, max = 300000 }
"#,
    );
    let (code, out, err) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!format!("{out}{err}").contains("gcra"), "no longer sent to GCRA: {out}{err}");
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
counting = { mode = "response", statuses = [401] }
on_success = "clear"
limits = [{ requests = 10, window = "15m" }]

[[vars.TOLLGATE.rules]]
name = "login-checked"
path = "/login"
key = ["body:email"]
counting = { mode = "response", statuses = [401] }
on_success = "decrement"
success_identity_header = "x-authenticated-user"
limits = [{ requests = 10, window = "15m" }]
"#,
    );
    let (code, out, _) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "warnings do not fail the check");
    assert!(out.contains("warning: ") && out.contains("rule `login`, field `success_identity_header`: not set"), "{out}");
    let warned = |rule: &str| out.lines().any(|l| l.starts_with("warning:") && l.contains(&format!("rule `{rule}`")));
    assert!(!warned("login-checked"), "an identity header settles it: {out}");
    // Issue 25: the trade-off left, one line per rule whose success relieves.
    for rule in ["login", "login-checked"] {
        let notes: Vec<&str> =
            out.lines().filter(|l| l.starts_with("note:") && l.contains(&format!("rule `{rule}`: a success or device cookie"))).collect();
        assert_eq!(notes.len(), 1, "{rule}: {out}");
        assert!(notes[0].contains("share one count"), "{}", notes[0]);
    }
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
    assert!(out.contains("no routes: add routes = ["), "{out}");
    assert!(out.contains("[observability] is off"), "{out}");
    assert!(out.contains("`PSOT` is not a standard method"), "{out}");
    let (code, out, _) = tollgate(&["hash", "--help"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("usage:\n  tollgate hash"), "{out}");
}

#[test]
fn check_reminds_once_that_hashes_are_unkeyed_without_the_secret() {
    let path = temp_toml(
        "envs.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "heavy"
path = "/api/example"
limits = [{ requests = 10, window = "60s" }]

[env.staging.vars.TOLLGATE]
[[env.staging.vars.TOLLGATE.rules]]
name = "heavy"
path = "/api/example"
limits = [{ requests = 10, window = "60s" }]
"#,
    );
    let (code, out, _) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "a reminder, not an error");
    assert_eq!(out.matches("TOLLGATE_LOG_KEY").count(), 2, "one line naming the secret and its command: {out}");
    assert_eq!(out.lines().filter(|l| l.contains("key_hash")).count(), 1, "once, not per environment: {out}");
    assert!(out.contains("npx wrangler secret put TOLLGATE_LOG_KEY, --env NAME for each environment"), "{out}");
}

/// Issue 53, round 3 item 5: `check` on the project `tollgate init` writes
/// (no routes yet, no secrets) says each thing once, on one line, with
/// what to do: no paragraph that wraps to four lines in a terminal.
#[test]
fn check_on_a_fresh_project_says_each_thing_once_in_one_line() {
    let path = temp_toml(
        "fresh.toml",
        r#"
name = "my-limiter"
main = ".tollgate/worker.mjs"
compatibility_date = "2026-04-01"
workers_dev = false
preview_urls = false

[[durable_objects.bindings]]
name = "LIMITER"
class_name = "Limiter"

[[durable_objects.bindings]]
name = "TOLLGATE_REGISTRY"
class_name = "Registry"

[[durable_objects.bindings]]
name = "TOLLGATE_METRICS_SINK"
class_name = "MetricsSink"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Limiter"]

[[migrations]]
tag = "v2"
new_sqlite_classes = ["Registry", "MetricsSink"]

[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "heavy-example"
path = "/api/example"
query = { mode = "heavy" }
key = ["ip"]
limits = [{ requests = 10, window = "60s" }]
"#,
    );
    let file = path.to_str().unwrap();
    let (code, out, err) = tollgate(&["check", file]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let lines: Vec<String> = out.lines().map(|l| l.replace(file, "wrangler.toml")).collect();
    assert_eq!(lines.len(), 3, "ok, no routes, the log key: {out}");
    assert_eq!(lines[0], "wrangler.toml top level: ok, 1 rule(s)");
    assert!(lines[1].starts_with("warning: wrangler.toml top level: no routes: add routes = [{ pattern = "), "{out}");
    assert!(lines[2].starts_with("note: before deploying, set the secret TOLLGATE_LOG_KEY (npx wrangler secret put TOLLGATE_LOG_KEY)"), "{out}");
    for line in &lines {
        assert!(line.chars().count() <= 160, "one line, not a paragraph ({} chars): {line}", line.chars().count());
    }
}

/// `HASH  KEY` from `tollgate hash`.
fn hash_line(out: &str) -> (String, String) {
    let (hash, key) = out.trim_end().split_once("  ").expect("HASH  KEY");
    (hash.to_string(), key.to_string())
}

#[test]
fn hash_prints_the_workers_key_hash_with_or_without_the_log_key() {
    let (code, out, err) = tollgate(&["hash", "abc"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(hash_line(&out), ("ba7816bf8f01cfea".to_string(), "abc".to_string()), "unkeyed: the SHA-256 prefix");
    assert!(err.contains("unkeyed"), "says the hash is unkeyed: {err}");
    // HMAC-SHA256("k", "abc"), first 8 bytes, from the env var or a file
    // (a trailing newline in the file is not part of the key).
    let (code, out, err) = tollgate_with(&["hash", "abc"], Some("k"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(hash_line(&out).0, "342e519ce0ad6c03");
    assert!(err.is_empty(), "{err}");
    let key_file = temp_toml("log-key", "k\n");
    let (_, from_file, _) = tollgate_with(&["hash", "abc", "--log-key-file", key_file.to_str().unwrap()], Some("other"));
    assert_eq!(hash_line(&from_file).0, "342e519ce0ad6c03", "the file wins over the env var");
    let blank = temp_toml("blank-key", "\n");
    let (code, _, err) = tollgate(&["hash", "abc", "--log-key-file", blank.to_str().unwrap()]);
    assert_eq!(code, 1, "a blank key file is a mistake, not a silent unkeyed hash");
    assert!(err.contains("blank"), "{err}");
}

#[test]
fn hash_derives_a_rules_key_from_raw_values_and_explain_agrees() {
    let path = temp_toml(
        "hash.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "login"
path = "/login"
key = ["body:email"]
limits = [{ requests = 5, window = "15m" }]

[[vars.TOLLGATE.rules]]
name = "heavy"
path = "/heavy"
limits = [{ requests = 5, window = "1m" }]
"#,
    );
    let config = path.to_str().unwrap();
    let (code, out, err) = tollgate_with(&["hash", "--rule", "heavy", "ip=2002:c000:22d:9::1", "--config", config], Some("s"));
    assert_eq!(code, 0, "{err}");
    let (hash, key) = hash_line(&out);
    assert_eq!(key, "ip=192.0.2.45");
    let (_, direct, _) = tollgate_with(&["hash", "ip=192.0.2.45"], Some("s"));
    assert_eq!(hash_line(&direct).0, hash);
    // explain, given the same key, prints the same hash for the same client.
    let (code, explained, err) =
        tollgate_with(&["explain", "/heavy", "--config", config, "--ip", "192.0.2.45", "--json"], Some("s"));
    assert_eq!(code, 0, "{err}");
    assert!(explained.contains(&format!(r#""key_hash":"{hash}""#)), "{explained}");
    let (_, unkeyed, _) = tollgate(&["explain", "/heavy", "--config", config, "--ip", "192.0.2.45", "--json"]);
    assert!(!unkeyed.contains(&hash), "{unkeyed}");

    let (code, out, _) = tollgate(&["hash", "--rule", "login", "body:email= Victim@Example.com", "--config", config]);
    assert_eq!(code, 0);
    assert!(hash_line(&out).1.starts_with("body:email="), "{out}");
    assert!(!out.contains('@'), "the email is hashed in the key: {out}");
    let (code, _, err) = tollgate(&["hash", "--rule", "login", "ip=192.0.2.45", "--config", config]);
    assert_eq!(code, 1);
    assert!(err.contains("`body:email`") && err.contains("body:email=VALUE"), "{err}");
    let (code, _, err) = tollgate(&["hash"]);
    assert_eq!(code, 2);
    assert!(err.contains("give one key"), "{err}");
}

#[test]
fn explain_shows_exemptions_given_the_secret_or_the_bot_and_check_refuses_a_bare_header() {
    let config = "examples/operator-controls/wrangler.toml";
    let base = ["explain", "/api/items", "--config", config, "--ip", "203.0.113.9"];
    let with = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let (code, out, err) = tollgate(&args);
        assert_eq!(code, 0, "{out}{err}");
        out
    };
    let out = with(&["-H", "X-Monitor-Key: s3cret", "--secret", "TOLLGATE_MONITOR_KEY=s3cret"]);
    assert!(out.contains("exempt:   by header (x-monitor-key)"), "{out}");
    assert!(out.contains(r#""tollgate":"exempt""#) && !out.contains("s3cret\""), "{out}");
    let out = with(&["-H", "X-Monitor-Key: s3cret"]);
    assert!(!out.contains("exempt:"), "no secret given: no exemption\n{out}");
    let out = with(&["--verified-bot", "Search Engine Crawler"]);
    assert!(out.contains("exempt:   by verified_bot (Search Engine Crawler)"), "{out}");
    let out = with(&["--asn", "64512"]);
    assert!(out.contains("exempt:   by asn (64512)"), "{out}");
    let (_, json, _) = tollgate(&["explain", "/api/schools/042/ai/x", "--config", "examples/tenant-daily-quota/wrangler.toml", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["checked"][0]["limits"], serde_json::json!([[1000, 86_400_000]]), "{json}");
    assert_eq!(json["checked"][0]["limits_source"], "override");

    let bare = temp_toml(
        "bare-header.toml",
        "[vars.TOLLGATE]\nrules = [{ name = \"api\", path = \"/api/*\", limits = [{ requests = 1, window = \"1m\" }], exempt = { header = { name = \"x-internal\" } } }]\n",
    );
    let (code, out, err) = tollgate(&["check", bare.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(format!("{out}{err}").contains("exempt.header.secret`: missing: any client can send any header"), "{out}{err}");
}

#[test]
fn check_requires_the_upstream_service_binding_in_the_same_environment() {
    let path = temp_toml(
        "service.toml",
        r#"
routes = [{ pattern = "example.com/*", zone_name = "example.com" }]
services = [{ binding = "APP", service = "app" }]
[vars.TOLLGATE]
upstream = { service = "APP" }
[[vars.TOLLGATE.rules]]
name = "api"
path = "/api/*"
limits = [{ requests = 10, window = "60s" }]

[env.staging.vars.TOLLGATE]
upstream = { service = "APP" }
[[env.staging.vars.TOLLGATE.rules]]
name = "api"
path = "/api/*"
limits = [{ requests = 10, window = "60s" }]
"#,
    );
    let file = path.to_str().unwrap();
    let (code, out, err) = tollgate(&["check", file, "--env", ""]);
    assert_eq!(code, 0, "the top level declares APP: {out}{err}");
    let (code, out, err) = tollgate(&["check", file, "--env", "staging"]);
    assert_eq!(code, 1, "[[services]] is not inherited by env.staging: {out}{err}");
    assert!(err.contains("env `staging`: field `upstream`: service binding `APP` is not declared"), "{err}");
}

/// `check` says which rules lease and which are forced off (and why);
/// `explain` shows the lease mode and the state it assumes; a bad lease
/// field names the rule and the field.
#[test]
fn check_and_explain_show_leases() {
    let path = temp_toml(
        "leases.toml",
        r#"
routes = [{ pattern = "example.com/*", zone_name = "example.com" }]
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "tenant"
path = "/api/*"
key = ["header:x-api-key"]
limits = [{ requests = 5000, window = "60s" }]
lease_ttl = "500ms"
lease_max = 200

[[vars.TOLLGATE.rules]]
name = "global"
path = "/*"
key = ["global"]
algorithm = "gcra"
limits = [{ requests = 300000, window = "60s" }]

[[vars.TOLLGATE.rules]]
name = "per-ip"
path = "/*"
limits = [{ requests = 10, window = "60s" }]

[[vars.TOLLGATE.rules]]
name = "failures"
path = "/login"
counting = { mode = "response", statuses = [401] }
limits = [{ requests = 1000, window = "60s" }]
"#,
    );
    let (code, out, err) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("rule `tenant`: lease auto: up to 200 units per lease") && out.contains("for 500 ms"), "{out}");
    assert!(out.contains("rule `global`: lease auto") && out.contains("GCRA: up to 5000 more per window"), "{out}");
    assert!(!out.contains("rule `per-ip`"), "a small limit never leases: nothing to say: {out}");
    assert!(out.contains("rule `failures`: lease off (counting = { mode = \"response\" }"), "{out}");
    let (code, out, err) = tollgate(&["explain", "https://example.com/api/x", "--config", path.to_str().unwrap(), "-H", "x-api-key: k"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("  lease:    auto: up to 200 units") && out.contains("assumed: this isolate holds no tokens"), "{out}");
    assert!(out.contains("  lease:    auto, but never above one unit"), "per-ip: {out}");
    let bad = temp_toml(
        "bad-lease.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "tenant"
path = "/api/*"
limits = [{ requests = 5000, window = "60s" }]
lease = "sometimes"
lease_ttl = "2m"
"#,
    );
    let (code, _, err) = tollgate(&["check", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("rule `tenant`, field `lease`") && err.contains("rule `tenant`, field `lease_ttl`: must be at most 60s"), "{err}");
}

/// Issue 29: `check` refuses a penalty shorter than the rule's longest
/// window, naming the rule and the field once.
#[test]
fn check_refuses_a_penalty_shorter_than_the_longest_window() {
    let short = temp_toml(
        "short-penalty.toml",
        r#"
[vars.TOLLGATE]
[[vars.TOLLGATE.rules]]
name = "search"
path = "/search"
limits = [{ requests = 10, window = "1m" }, { requests = 100, window = "1h" }]
penalty = "10m"
"#,
    );
    let (code, _, err) = tollgate(&["check", short.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(err.matches("rule `search`, field `penalty`: must be at least the rule's longest window (3600000 ms)").count(), 1, "{err}");
}

/// Issue 25: the app behind `upstream = { service }` answers at its
/// workers.dev and Preview URLs, around tollgate, unless its own config
/// turns them off; `check` says so, and with `--app` reads the app's config.
#[test]
fn check_warns_that_a_service_upstreams_app_is_reachable_around_tollgate() {
    let front = temp_toml(
        "front.toml",
        r#"
routes = [{ pattern = "example.com/*", zone_name = "example.com" }]
services = [{ binding = "APP", service = "my-app" }]
[vars.TOLLGATE]
upstream = { service = "APP" }
[[vars.TOLLGATE.rules]]
name = "api"
path = "/api/*"
limits = [{ requests = 10, window = "60s" }]
"#,
    );
    let front = front.to_str().unwrap();
    let (code, out, err) = tollgate(&["check", front]);
    assert_eq!(code, 0, "a warning, not an error: {out}{err}");
    assert!(
        out.contains("warning: ") && out.contains("field `upstream`: the app behind service binding `APP` stays reachable around tollgate"),
        "{out}"
    );
    assert!(out.contains("set workers_dev = false and preview_urls = false"), "{out}");

    let closed = temp_toml("app-closed.toml", "name = \"my-app\"\nworkers_dev = false\npreview_urls = false\n");
    let (code, out, err) = tollgate(&["check", front, "--app", closed.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("reachable around tollgate"), "both off: no warning: {out}");

    let open = temp_toml("app-open.toml", "name = \"my-app\"\nworkers_dev = false\n[env.staging]\nworkers_dev = true\npreview_urls = false\n");
    let (code, out, err) = tollgate(&["check", front, "--app", open.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("is reachable around tollgate, unlimited: top level: preview_urls is not false"), "{out}");
    assert!(out.contains("env `staging`: workers_dev is not false"), "{out}");

    let (code, _, err) = tollgate(&["check", front, "--app", "no/such/app.toml"]);
    assert_eq!(code, 1, "an unreadable --app file is an error");
    assert!(err.contains("error: --app: cannot read no/such/app.toml"), "{err}");

    let (code, out, _) = tollgate(&["check", "wrangler.toml"]);
    assert_eq!(code, 0);
    assert!(!out.contains("reachable around tollgate"), "the origin upstream: no such warning");
}

/// Issue 26: `explain` reads the Worker's clock as `--now` (Unix ms), else
/// the machine's; a malformed one is refused with the option named.
#[test]
fn explain_takes_the_clock_from_now() {
    let (code, out, err) = tollgate(&["explain", "/api/example?mode=heavy", "--ip", "203.0.113.7", "--now", "1800000000000"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("heavy-example"), "{out}");
    let (code, _, err) = tollgate(&["explain", "/api/example", "--now", "soon"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--now `soon` is not Unix milliseconds"), "{err}");
}

#[test]
fn version_prints_the_crate_the_protocol_and_the_config_spelling() {
    let (code, out, _) = tollgate(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(out, format!("tollgate {} (object protocol v1, config spelling 0.2)\n", env!("CARGO_PKG_VERSION")));
}

/// A spelling is named by the release that brought it (issue 53, round 3
/// item 8: `tollgate 0.2.0` printed "config spelling 0.3" and the docs
/// spoke of migrating from 0.2.0): never newer than the crate, and the
/// spellings the docs name are the two `--version` and `check` use.
#[test]
fn the_spellings_named_are_this_release_s_and_the_one_before() {
    let minor = |v: &str| -> (u32, u32) {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
        (parts.next().unwrap(), parts.next().unwrap())
    };
    let (_, version, _) = tollgate(&["--version"]);
    let current = version.split("config spelling ").nth(1).unwrap().trim_end_matches(")\n");
    assert!(minor(current) <= minor(env!("CARGO_PKG_VERSION")), "spelling {current} is newer than the crate {}", env!("CARGO_PKG_VERSION"));
    let old = temp_toml("spelling-old.toml", "name = \"app\"\n\n[[vars.TOLLGATE.rules]]\nname = \"login\"\npath = \"/login\"\nkey = [\"ip\"]\ncount_statuses = [401]\nlimits = [{ requests = 5, window = \"15m\" }]\n");
    let (code, out, err) = tollgate(&["check", old.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let older = out.split("field `count_statuses`: the ").nth(1).and_then(|r| r.split(" spelling").next()).unwrap_or_else(|| panic!("{out}"));
    assert!(minor(older) < minor(current), "the older spelling {older} is before {current}");
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide.md")).unwrap();
    let guide = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(guide.contains(&format!("(`{}`)", version.trim_end())), "the guide quotes `tollgate --version` as it prints: {version}");
    for doc in ["docs/configuration.md", "CHANGELOG.md"] {
        let text = std::fs::read_to_string(format!("{}/{doc}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for (at, _) in text.match_indices(" spelling") {
            let named = text[..at].rsplit(' ').next().unwrap_or_default().trim_matches(|c: char| !c.is_ascii_digit());
            let word = !text[at + 9..].starts_with(|c: char| c.is_alphabetic());
            if word && named.contains('.') && named.starts_with(|c: char| c.is_ascii_digit()) {
                assert!([current, older].contains(&named), "{doc} names spelling {named}: {}", &text[at.saturating_sub(60)..at + 20]);
            }
        }
        for (at, _) in text.match_indices("spelling ") {
            let named = text[at + 9..].split(' ').next().unwrap_or_default().trim_end_matches(|c: char| !c.is_ascii_digit());
            if named.contains('.') && named.starts_with(|c: char| c.is_ascii_digit()) {
                assert!([current, older].contains(&named), "{doc} names spelling {named}: {}", &text[at.saturating_sub(40)..at + 30]);
            }
        }
        let this = env!("CARGO_PKG_VERSION");
        assert!(!text.contains(&format!("from {this}")), "{doc}: one migrates to this release ({this}), not from it");
    }
}

#[test]
fn diff_reads_toml_and_json_with_env_and_exits_3_on_reset_only_when_asked() {
    let old = temp_toml(
        "diff-old.toml",
        r#"name = "t"
[env.production.vars.TOLLGATE]
rules = [{ name = "login", path = "/login", key = ["body:email"], limits = [{ requests = 10, window = "15m" }] }]
"#,
    );
    let new = temp_toml(
        "diff-new.json",
        r#"{ "env": { "production": { "vars": { "TOLLGATE": { "rules": [
  { "name": "login", "path": "/login", "key": ["body:email"], "limits": [{ "requests": 5, "window": "15m" }] },
  { "name": "api", "path": "/api/*", "limits": [{ "requests": 10, "window": "1m" }] } ] } } } } }"#,
    );
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
    let (code, out, err) = tollgate(&["diff", old, new, "--env", "production"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "rule `login`:\n        tightens 10 -> 5 per 15m: keys already over 5 are blocked at once\n\
         rule `api`:\n  RESET new rule: every key starts from zero\n"
    );
    let (code, _, err) = tollgate(&["diff", old, new, "--env", "production", "--fail-on-reset"]);
    assert_eq!(code, 3, "{err}");
    let (code, out, _) = tollgate(&["diff", new, new, "--env", "production", "--fail-on-reset"]);
    assert_eq!((code, out.as_str()), (0, "no rule changes: every count carries over as it is\n"));
    // An invalid side names its file; a missing argument is a usage error.
    let bad = temp_toml("diff-bad.json", r#"{ "vars": { "TOLLGATE": { "rules": [{ "name": "x", "path": "/x" }] } } }"#);
    let (code, _, err) = tollgate(&["diff", bad.to_str().unwrap(), "wrangler.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("diff-bad.json") && err.contains("rule `x`"), "{err}");
    assert_eq!(tollgate(&["diff", "wrangler.toml"]).0, 2);
}

/// Issue 35: during a gradual deployment an old edge whose config lacked
/// `penalty` admitted 12 of 45 requests inside a 30 s penalty.
#[test]
fn diff_says_a_deploy_adding_penalty_concurrency_or_a_usage_cost_goes_to_100_percent_at_once() {
    let rule = |extra: &str| {
        format!(r#"{{ "vars": {{ "TOLLGATE": {{ "rules": [{{ "name": "llm", "path": "/v1/*", "key": ["header:x-user"], "limits": [{{ "requests": 10000, "window": "1d" }}]{extra} }}] }} }} }}"#)
    };
    let old = temp_toml("diff-100-old.json", &rule(""));
    let added = r#", "penalty": "2d", "concurrency": 2, "metering": { "header": "x-tokens", "reserve": 3000, "max": 3000 }, "counting": { "mode": "response" }"#;
    let new = temp_toml("diff-100-new.json", &rule(added));
    let (code, out, err) = tollgate(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let at_once = out.lines().filter(|l| l.starts_with("  100%  deploy this to 100% at once, never as a gradual deployment")).count();
    assert_eq!(at_once, 3, "penalty, concurrency and the usage cost: {out}");
    for said in ["send no penalty", "hold no slot", "not the units the origin reports"] {
        assert!(out.contains(said), "{said}: {out}");
    }
    // Taking them away splits safely: nothing to say at once.
    let (_, back, _) = tollgate(&["diff", new.to_str().unwrap(), old.to_str().unwrap()]);
    assert!(!back.contains("100%"), "{back}");
}

/// Issue 36: a config in the older spelling (`clear_on_success`, a `cost`
/// table, a `concurrency` rule with a limit only there because the older
/// spelling required one)
/// migrates into the current spelling, which check reads without a
/// respelling warning, and which diff says changes no count; the dummy
/// limit can then go.
#[test]
fn migrate_rewrites_an_older_config_that_check_then_passes() {
    let old = temp_toml(
        "migrate-old.toml",
        r#"name = "app"

[vars.TOLLGATE]
# Failed logins, cleared by a success.
[[vars.TOLLGATE.rules]]
name = "login"
path = "/login"
methods = ["POST"]
key = ["body:email"]
count_statuses = [401]
clear_on_success = true
success_identity_header = "x-authenticated-user"
limits = [{ requests = 5, window = "15m" }]

[[vars.TOLLGATE.rules]]
name = "tokens"
path = "/v1/*"
key = ["header:x-api-key"]
limits = [{ requests = 100000, window = "1d" }]
algorithm = "gcra"
cost = { header = "x-usage-tokens", reserve = 2000, max = 2000 }   # what the model reports

[[vars.TOLLGATE.rules]]
name = "exports"
path = "/export"
key = ["header:x-api-key"]
concurrency = 3
limits = [{ requests = 1000000, window = "1d" }]   # only because 0.1 required limits
algorithm = "gcra"
"#,
    );
    let (code, out, err) = tollgate(&["check", old.to_str().unwrap()]);
    assert_eq!(code, 0, "the older spelling still reads: {out}{err}");
    for field in ["count_statuses", "clear_on_success", "cost", "concurrency"] {
        let warned = out.lines().filter(|l| l.contains(&format!("field `{field}`: the 0.1 spelling"))).count();
        assert_eq!(warned, 1, "one warning for {field}: {out}");
    }
    let (code, migrated, notes) = tollgate(&["migrate", old.to_str().unwrap()]);
    assert_eq!(code, 0, "{notes}");
    assert_eq!(notes.lines().filter(|l| l.starts_with("migrated: ")).count(), 4, "{notes}");
    assert!(notes.contains("4 field(s) respelled into the config's 0.2 spelling; check reads it"), "{notes}");
    assert!(notes.contains("note: ") && notes.contains("rule `exports`: concurrency needs no limits"), "{notes}");
    for kept in ["# Failed logins, cleared by a success.", "# only because 0.1 required limits", "name = \"app\""] {
        assert!(migrated.contains(kept), "{kept}: {migrated}");
    }
    assert!(migrated.contains("counting = { mode = \"response\", statuses = [401] }\non_success = \"clear\"\n"), "{migrated}");
    assert!(migrated.contains("metering = { header = \"x-usage-tokens\", reserve = 2000, max = 2000 }"), "{migrated}");
    assert!(migrated.contains("concurrency = 3\nlimits") && migrated.contains("counting = { mode = \"response\" }"), "{migrated}");
    let new = temp_toml("migrate-new.toml", &migrated);
    let (code, out, err) = tollgate(&["check", new.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ok, 3 rule(s)") && !out.contains("0.1 spelling"), "{out}");
    let (code, diff, err) = tollgate(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(diff.contains("OLD writes 4 field(s) in the 0.1 spelling") && diff.contains("no rule changes"), "{diff}");
    // The current spelling needs no dummy limit beside concurrency.
    let lean = migrated.replace("limits = [{ requests = 1000000, window = \"1d\" }]   # only because 0.1 required limits\nalgorithm = \"gcra\"\n", "");
    assert_ne!(lean, migrated);
    let lean = temp_toml("migrate-lean.toml", &lean);
    let (code, out, err) = tollgate(&["check", lean.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, again, notes) = tollgate(&["migrate", new.to_str().unwrap()]);
    assert_eq!((again.as_str(), notes.lines().filter(|l| l.starts_with("migrated: ")).count()), (migrated.as_str(), 0), "nothing left to migrate");
    // In place, as a formatter (issue 53, round 3 item 7): the same text.
    let in_place = temp_toml("migrate-in-place.toml", &std::fs::read_to_string(&old).unwrap());
    let (code, out, notes) = tollgate(&["migrate", in_place.to_str().unwrap(), "--write"]);
    assert_eq!((code, out.as_str()), (0, ""), "{notes}");
    assert!(notes.contains("4 field(s) respelled") && notes.contains("written in place"), "{notes}");
    assert_eq!(std::fs::read_to_string(&in_place).unwrap(), migrated);
    let (code, _, notes) = tollgate(&["migrate", "--write", in_place.to_str().unwrap()]);
    assert!(code == 0 && notes.contains("nothing to write"), "{notes}");
    assert_eq!(std::fs::read_to_string(&in_place).unwrap(), migrated, "left as it is");
}

/// `tollgate diff` of one section names the older spelling the others
/// write, which `migrate` respells too (issue 53, round 3 item 7: diff
/// counted 6 where migrate respelled 8, two under [env.staging]).
#[test]
fn diff_names_the_respellings_of_the_other_environments() {
    let rule = "name = \"login\"\npath = \"/login\"\nmethods = [\"POST\"]\nkey = [\"body:email\"]\nlimits = [{ requests = 5, window = \"15m\" }]\ncount_statuses = [401]\nclear_on_success = true\n";
    let old = format!("name = \"x\"\n\n[vars.TOLLGATE]\n\n[[vars.TOLLGATE.rules]]\n{rule}reservation_ttl = \"2m\"\n\n[env.staging.vars.TOLLGATE]\n\n[[env.staging.vars.TOLLGATE.rules]]\n{rule}");
    let old = temp_toml("diff-envs-old.toml", &old);
    let (code, migrated, notes) = tollgate(&["migrate", old.to_str().unwrap()]);
    assert_eq!(code, 0, "{notes}");
    assert!(notes.contains("5 field(s) respelled"), "{notes}");
    let new = temp_toml("diff-envs-new.toml", &migrated);
    let (code, diff, err) = tollgate(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(diff.contains("OLD writes 3 field(s) in the 0.1 spelling"), "{diff}");
    assert!(diff.contains("OLD's [env.staging] writes 2 more field(s) in the 0.1 spelling, not compared here (`tollgate diff OLD NEW --env staging`"), "{diff}");
    let (_, staging, _) = tollgate(&["diff", old.to_str().unwrap(), new.to_str().unwrap(), "--env", "staging"]);
    assert!(staging.contains("OLD writes 2 field(s)") && staging.contains("OLD's top level writes 3 more field(s)"), "{staging}");
}

#[test]
fn check_notes_cloudflare_access_and_refuses_a_team_domain_that_is_not_one() {
    let config = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/wrangler.toml")).unwrap();
    let with = |team: &str| config.replacen("[vars.TOLLGATE]\n", &format!("[vars.TOLLGATE]\nadmin_access = {{ team_domain = \"{team}\", audience = \"aud-tag\" }}\n"), 1);
    assert!(with("x").contains("admin_access"), "the shipped config has a [vars.TOLLGATE] table");
    let path = temp_toml("access.toml", &with("acme.cloudflareaccess.com"));
    let (code, out, err) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("note: ") && out.contains("admin: Cloudflare Access signs operators in under /.tollgate (tokens of https://acme.cloudflareaccess.com, audience aud-tag)"), "{out}");
    let path = temp_toml("access-bad.toml", &with("acme.example.com"));
    let (code, _out, err) = tollgate(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(err.matches("field `admin_access.team_domain`: must be the Zero Trust team domain").count(), 1, "{err}");
}
