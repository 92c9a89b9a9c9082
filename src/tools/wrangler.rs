//! Reading a Wrangler config for the CLI: `wrangler.toml`, `wrangler.json`
//! or `wrangler.jsonc`, and the environments in it.
//!
//! The result is the JSON the Worker's `env` sees. Wrangler's rules followed
//! here: `vars` are *not* inherited by `[env.NAME]` sections; `routes` /
//! `route` and `observability` are (an environment that sets its own
//! replaces the top level's).

use serde_json::Value;

/// A Wrangler config, parsed by its file name: `.json` and `.jsonc` as JSON
/// with comments and trailing commas (as Wrangler accepts them), anything
/// else as TOML.
pub fn parse(path: &str, text: &str) -> Result<Value, String> {
    if path.ends_with(".json") || path.ends_with(".jsonc") {
        serde_json::from_str(&strip_jsonc(text)).map_err(|e| format!("{path} is not valid JSON(C): {e}"))
    } else {
        let parsed: toml::Value = toml::from_str(text).map_err(|e| format!("{path} is not valid TOML: {e}"))?;
        serde_json::to_value(parsed).map_err(|e| format!("{path}: {e}"))
    }
}

/// JSONC → JSON: `//` and `/* */` comments and trailing commas (before `}`
/// or `]`) removed, outside strings only. Everything else is kept, so
/// error positions stay close to the original.
pub(crate) fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    // A comma seen outside a string, held back until we know whether a
    // closing bracket follows (then it is dropped).
    let mut pending_comma: Option<String> = None;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                flush(&mut out, &mut pending_comma);
                copy_string(&mut out, &mut chars);
            }
            '/' if chars.peek() == Some(&'/') => {
                if chars.by_ref().any(|s| s == '\n') {
                    push_ws(&mut out, &mut pending_comma, '\n');
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = ' ';
                for s in chars.by_ref() {
                    if previous == '*' && s == '/' {
                        break;
                    }
                    previous = s;
                }
            }
            ',' => {
                flush(&mut out, &mut pending_comma);
                pending_comma = Some(",".to_string());
            }
            '}' | ']' => {
                // A trailing comma: dropped, the whitespace after it kept.
                if let Some(held) = pending_comma.take() {
                    out.push_str(&held[1..]);
                }
                out.push(c);
            }
            c if c.is_whitespace() => push_ws(&mut out, &mut pending_comma, c),
            c => {
                flush(&mut out, &mut pending_comma);
                out.push(c);
            }
        }
    }
    flush(&mut out, &mut pending_comma);
    out
}

/// Copies a string literal whose opening `"` was just read, escapes and
/// all, up to and with its closing `"`.
fn copy_string(out: &mut String, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    out.push('"');
    while let Some(s) = chars.next() {
        out.push(s);
        match s {
            '\\' => {
                if let Some(escaped) = chars.next() {
                    out.push(escaped);
                }
            }
            '"' => break,
            _ => {}
        }
    }
}

fn flush(out: &mut String, pending: &mut Option<String>) {
    if let Some(held) = pending.take() {
        out.push_str(&held);
    }
}

fn push_ws(out: &mut String, pending: &mut Option<String>, c: char) {
    match pending {
        Some(held) => held.push(c),
        None => out.push(c),
    }
}

/// One deployable section of a Wrangler config: the top level or an
/// environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// `top level` or ``env `NAME` ``.
    pub label: String,
    /// `vars.TOLLGATE` of this section (not inherited).
    pub tollgate: Option<Value>,
    /// Route patterns (inherited from the top level unless set).
    pub(crate) routes: Vec<String>,
    /// `observability.enabled` (inherited unless set): whether Workers Logs
    /// keeps the Worker's log lines.
    pub(crate) logs_kept: bool,
    /// The binding names of this section's `[[services]]` (not inherited:
    /// Wrangler treats bindings per environment).
    pub(crate) services: Vec<String>,
}

/// Every section to validate: the top level, then each `[env.NAME]`.
pub(crate) fn sections(wrangler: &Value) -> Vec<Section> {
    let top = section("top level".to_string(), wrangler, None);
    let mut out = vec![top.clone()];
    if let Some(envs) = wrangler.get("env").and_then(Value::as_object) {
        for (name, env) in envs {
            out.push(section(format!("env `{name}`"), env, Some(&top)));
        }
    }
    out
}

/// The section an operator names with `--env` (`None`: the top level).
pub fn select(wrangler: &Value, env: Option<&str>) -> Result<Section, String> {
    let all = sections(wrangler);
    let label = match env {
        None => "top level".to_string(),
        Some(name) => format!("env `{name}`"),
    };
    all.into_iter().find(|s| s.label == label).ok_or_else(|| {
        let names: Vec<String> = wrangler
            .get("env")
            .and_then(Value::as_object)
            .map(|envs| envs.keys().map(|k| format!("`{k}`")).collect())
            .unwrap_or_default();
        let known = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        format!("no environment `{}` (environments: {known})", env.unwrap_or_default())
    })
}

/// How an app Worker's own Wrangler config (`app`) leaves it reachable
/// other than through a Worker in front of it: one line per section (the
/// top level, then each `[env.NAME]`) that does. Wrangler's defaults: both
/// keys are inherited by environments; `workers_dev` is on unless set false
/// (Wrangler's default for a Worker without routes, as an app behind a
/// service binding is); `preview_urls` follows `workers_dev` unless set
/// (Wrangler 4.44 and later; older versions turned it on regardless, so
/// only an explicit `false` is certain). Routes or a custom domain of its
/// own also reach it directly.
pub(crate) fn exposures(app: &Value) -> Vec<String> {
    let flag = |v: &Value, key: &str| v.get(key).and_then(Value::as_bool);
    let mut out = Vec::new();
    let mut check = |label: &str, section: &Value, top: Option<&Value>| {
        let inherited = |key: &str| flag(section, key).or_else(|| top.and_then(|t| flag(t, key)));
        let mut open = Vec::new();
        if inherited("workers_dev") != Some(false) {
            open.push("workers_dev is not false (its *.workers.dev URL)".to_string());
        }
        if inherited("preview_urls") != Some(false) {
            open.push("preview_urls is not false (a URL per version)".to_string());
        }
        let routes = routes(section).or_else(|| top.and_then(routes)).unwrap_or_default();
        if !routes.is_empty() {
            open.push(format!("it has routes of its own ({})", routes.join(", ")));
        }
        if !open.is_empty() {
            out.push(format!("{label}: {}", open.join("; ")));
        }
    };
    check("top level", app, None);
    if let Some(envs) = app.get("env").and_then(Value::as_object) {
        for (name, env) in envs {
            check(&format!("env `{name}`"), env, Some(app));
        }
    }
    out
}

fn section(label: String, value: &Value, top: Option<&Section>) -> Section {
    let tollgate = value.get("vars").and_then(|v| v.get("TOLLGATE")).cloned();
    let routes = routes(value).or_else(|| top.map(|t| t.routes.clone())).unwrap_or_default();
    let logs_kept = match value.get("observability") {
        Some(o) => o.get("enabled").and_then(Value::as_bool).unwrap_or(false),
        None => top.is_some_and(|t| t.logs_kept),
    };
    let services = value
        .get("services")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|s| s.get("binding").and_then(Value::as_str).map(str::to_string)).collect())
        .unwrap_or_default();
    Section { label, tollgate, routes, logs_kept, services }
}

fn routes(section: &Value) -> Option<Vec<String>> {
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("pattern").and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    if let Some(list) = section.get("routes").and_then(Value::as_array) {
        return Some(list.iter().filter_map(one).collect());
    }
    section.get("route").and_then(one).map(|r| vec![r])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jsonc_comments_and_trailing_commas() {
        let text = r#"{
  // the name
  "name": "tollgate", /* block
  comment */ "url": "https://x//y", "s": "a,]\" // not a comment",
  "routes": [ { "pattern": "example.com/*", }, ],
}"#;
        let value = parse("wrangler.jsonc", text).unwrap();
        assert_eq!(value["name"], "tollgate");
        assert_eq!(value["url"], "https://x//y");
        assert_eq!(value["s"], "a,]\" // not a comment");
        assert_eq!(value["routes"][0]["pattern"], "example.com/*");
        assert!(parse("w.jsonc", "{ \"a\": }").unwrap_err().contains("not valid JSON(C)"));
        assert!(parse("w.toml", "a = ").unwrap_err().contains("not valid TOML"));
    }

    #[test]
    fn an_app_is_reachable_around_its_front_until_both_urls_are_off() {
        let app = |text: &str| parse("app.toml", text).unwrap();
        let open = exposures(&app("name = \"app\""));
        assert_eq!(open.len(), 1, "{open:?}");
        assert!(open[0].starts_with("top level: workers_dev is not false") && open[0].contains("preview_urls is not false"), "{open:?}");
        assert!(exposures(&app("workers_dev = false\npreview_urls = false")).is_empty());
        let only_dev = exposures(&app("workers_dev = false"));
        assert_eq!(only_dev, ["top level: preview_urls is not false (a URL per version)"], "only an explicit false is certain");
        let envs = exposures(&app("workers_dev = false\npreview_urls = false\n[env.staging]\nworkers_dev = true\n[env.prod]\nroutes = [\"app.example.com/*\"]"));
        assert_eq!(
            envs,
            ["env `prod`: it has routes of its own (app.example.com/*)", "env `staging`: workers_dev is not false (its *.workers.dev URL)"],
            "inherited unless set"
        );
    }

    #[test]
    fn services_are_per_environment() {
        let w = json!({
            "services": [{ "binding": "APP", "service": "app" }],
            "env": { "staging": { "services": [{ "binding": "APP_STAGING", "service": "app-staging" }] }, "bare": {} },
        });
        assert_eq!(select(&w, None).unwrap().services, ["APP"]);
        assert_eq!(select(&w, Some("staging")).unwrap().services, ["APP_STAGING"]);
        assert!(select(&w, Some("bare")).unwrap().services.is_empty(), "not inherited");
    }

    #[test]
    fn environments_inherit_routes_and_observability_but_not_vars() {
        let w = json!({
            "routes": ["example.com/*"],
            "observability": { "enabled": true },
            "vars": { "TOLLGATE": { "rules": [] } },
            "env": {
                "staging": { "vars": { "TOLLGATE": { "rules": [1] } } },
                "bare": { "routes": [], "observability": { "enabled": false } },
            },
        });
        let all = sections(&w);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].routes, ["example.com/*"]);
        let staging = select(&w, Some("staging")).unwrap();
        assert_eq!((staging.routes.len(), staging.logs_kept), (1, true));
        assert_eq!(staging.tollgate, Some(json!({ "rules": [1] })));
        let bare = select(&w, Some("bare")).unwrap();
        assert_eq!((bare.routes.len(), bare.logs_kept, bare.tollgate), (0, false, None));
        assert!(staging.services.is_empty());
        assert_eq!(select(&w, Some("nope")).unwrap_err(), "no environment `nope` (environments: `bare`, `staging`)");
        assert_eq!(select(&json!({}), Some("x")).unwrap_err(), "no environment `x` (environments: none)");
    }
}
