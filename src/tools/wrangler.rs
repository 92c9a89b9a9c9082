//! Reading a Wrangler config for the CLI: `wrangler.toml`, `wrangler.json`
//! or `wrangler.jsonc`, and the environments in it.
//!
//! The result is the JSON the Worker's `env` sees. Wrangler's rules followed
//! here: `vars` are *not* inherited by `[env.NAME]` sections; `routes` /
//! `route` and `observability` are (an environment that sets its own
//! replaces the top level's).

use crate::count::classes::{self, ObjectClass};
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
    /// This section's `[[durable_objects.bindings]]` (not inherited), as
    /// (name, class_name).
    pub(crate) objects: Vec<(String, String)>,
    /// The Durable Object classes its migrations create or rename to (the
    /// `[[migrations]]` or declarative `exports`; inherited unless set).
    pub(crate) migrated: Vec<String>,
    /// The bindings of `objects` whose class another Worker exports
    /// (`script_name`: the admin Worker's, wrangler.admin.toml): that
    /// Worker's migrations create it, not this section's.
    pub(crate) elsewhere: Vec<String>,
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
    let objects = value
        .pointer("/durable_objects/bindings")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|b| Some((b.get("name")?.as_str()?.to_string(), b.get("class_name")?.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let migrated = migrated(value).or_else(|| top.map(|t| t.migrated.clone())).unwrap_or_default();
    let elsewhere = value
        .pointer("/durable_objects/bindings")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter(|b| b.get("script_name").is_some()).filter_map(|b| Some(b.get("name")?.as_str()?.to_string())).collect())
        .unwrap_or_default();
    Section { label, tollgate, routes, logs_kept, services, objects, migrated, elsewhere }
}

/// The classes `[[migrations]]` create (`new_sqlite_classes`,
/// `new_classes`) or rename to, or the declarative `exports` declare live;
/// `None` when the section sets neither.
fn migrated(value: &Value) -> Option<Vec<String>> {
    let names = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array).map(|l| l.iter().filter_map(|c| c.as_str().map(str::to_string)).collect()).unwrap_or_default()
    };
    if let Some(exports) = value.get("exports").and_then(Value::as_object) {
        let live = |e: &Value| e.get("type").and_then(Value::as_str) == Some("durable-object") && e.get("state").and_then(Value::as_str).is_none_or(|s| s == "created");
        return Some(exports.iter().filter(|(_, e)| live(e)).map(|(name, _)| name.clone()).collect());
    }
    let migrations = value.get("migrations").and_then(Value::as_array)?;
    let mut out = Vec::new();
    for m in migrations {
        out.extend(names(m.get("new_sqlite_classes")));
        out.extend(names(m.get("new_classes")));
        let renamed = m.get("renamed_classes").and_then(Value::as_array).into_iter().flatten();
        out.extend(renamed.filter_map(|r| r.get("to").and_then(Value::as_str).map(str::to_string)));
    }
    Some(out)
}

/// What a section lacks of tollgate's Durable Objects
/// ([`classes::ALL`]), as one message that names each binding and the
/// lines to add: a required one unbound, one bound to another class, or
/// one bound that no migration creates. `None` when nothing is wrong. A
/// section with no Durable Object bindings at all is a fragment to merge
/// (the examples): [`object_warnings`] reminds of them instead.
pub(crate) fn missing_objects(section: &Section) -> Option<String> {
    if section.objects.is_empty() {
        return None;
    }
    let bound = |c: &ObjectClass| section.objects.iter().find(|(name, _)| name == c.binding).map(|(_, class)| class.as_str());
    let mut problems = Vec::new();
    for class in &classes::ALL {
        match bound(class) {
            None if class.required => problems.push(format!(
                "the Durable Object binding {} ({}) is missing: add [[durable_objects.bindings]] name = \"{}\" class_name = \"{}\"",
                class.binding, class.role, class.binding, class.class
            )),
            Some(other) if other != class.class => {
                problems.push(format!("the Durable Object binding {} names class `{other}`, not `{}`", class.binding, class.class));
            }
            _ => {}
        }
    }
    let here = |c: &&ObjectClass| !section.elsewhere.iter().any(|b| b == c.binding);
    let needed = |c: &&ObjectClass| (c.required || bound(c).is_some()) && here(c);
    let unmigrated: Vec<&ObjectClass> = classes::ALL.iter().filter(needed).filter(|c| !section.migrated.iter().any(|m| m == c.class)).collect();
    if !unmigrated.is_empty() {
        problems.push(migration_hint(&unmigrated));
    }
    if problems.is_empty() {
        return None;
    }
    if bound(&classes::METRICS_SINK).is_none() {
        let sink = classes::METRICS_SINK;
        problems.push(format!(
            "the standalone Worker also exports {} ({}): bind it as {} and create it in the same migration",
            sink.class, sink.role, sink.binding
        ));
    }
    Some(problems.join("; "))
}

/// The reminder for a section with no Durable Object bindings at all.
pub(crate) fn object_warnings(section: &Section) -> Vec<String> {
    if !section.objects.is_empty() {
        return Vec::new();
    }
    let required: Vec<&str> = classes::ALL.iter().filter(|c| c.required).map(|c| c.binding).collect();
    vec![format!(
        "no [[durable_objects.bindings]]: a Worker deployed from this config reaches no counter (a fragment to merge into a full config is fine); tollgate needs {}",
        required.join(" and ")
    )]
}

/// The migration that creates `missing` (classes of [`classes::ALL`]):
/// tag `v1` with the limiter, else the split's tag.
fn migration_hint(missing: &[&ObjectClass]) -> String {
    let tag = if missing.contains(&&classes::LIMITER) { "v1" } else { classes::SPLIT_TAG };
    let names: Vec<&str> = missing.iter().map(|c| c.class).collect();
    let quoted: Vec<String> = names.iter().map(|c| format!("\"{c}\"")).collect();
    format!(
        "no migration creates the class(es) {}: add [[migrations]] tag = \"{tag}\" new_sqlite_classes = [{}] (a tag of its own, after the migrations already there)",
        names.join(", "),
        quoted.join(", ")
    )
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
    fn check_names_each_missing_object_binding_and_the_migration_to_add() {
        let w = |text: &str| select(&parse("w.toml", text).unwrap(), None).unwrap();
        let bind = |n: &str, c: &str| format!("[[durable_objects.bindings]]\nname = \"{n}\"\nclass_name = \"{c}\"\n");
        let migrate = |tag: &str, classes: &str| format!("[[migrations]]\ntag = \"{tag}\"\nnew_sqlite_classes = [{classes}]\n");
        let limiter = format!("{}{}", bind("LIMITER", "Limiter"), migrate("v1", "\"Limiter\""));
        // 0.1.0's config: the limiter alone.
        let old = missing_objects(&w(&limiter)).expect("the registry is required");
        assert!(old.contains("binding TOLLGATE_REGISTRY") && old.contains("class_name = \"Registry\""), "{old}");
        assert!(old.contains("tag = \"v2\" new_sqlite_classes = [\"Registry\"]"), "{old}");
        assert!(old.contains("also exports MetricsSink") && old.contains("TOLLGATE_METRICS_SINK"), "the sink named, for one edit: {old}");
        // The standalone Worker's, and an app's (which has no sink).
        let with_registry = format!("{limiter}{}", bind("TOLLGATE_REGISTRY", "Registry"));
        let full = format!("{with_registry}{}{}", bind("TOLLGATE_METRICS_SINK", "MetricsSink"), migrate("v2", "\"Registry\", \"MetricsSink\""));
        let app = format!("{with_registry}{}", migrate("v2", "\"Registry\""));
        for ok in [&full, &app] {
            assert_eq!((missing_objects(&w(ok)), object_warnings(&w(ok))), (None, Vec::<String>::new()), "{ok}");
        }
        // Bound but created by no migration: named, and only it.
        let e = missing_objects(&w(&format!("{with_registry}{}", bind("TOLLGATE_METRICS_SINK", "MetricsSink")))).unwrap();
        assert!(e.contains("class(es) Registry, MetricsSink:") && !e.contains("is missing"), "{e}");
        let wrong = full.replace("class_name = \"Registry\"", "class_name = \"Limiter\"");
        assert!(missing_objects(&w(&wrong)).unwrap().contains("TOLLGATE_REGISTRY names class `Limiter`, not `Registry`"));
        // The declarative exports stand for the migrations.
        let exports = "exports = { Limiter = { type = \"durable-object\" }, Registry = { type = \"durable-object\" } }\n";
        let declared = format!("{exports}{}{}", bind("LIMITER", "Limiter"), bind("TOLLGATE_REGISTRY", "Registry"));
        assert_eq!(missing_objects(&w(&declared)), None, "{declared}");
        // A fragment (no bindings at all): a reminder, never an error.
        assert_eq!(missing_objects(&w("name = \"x\"")), None);
        assert!(object_warnings(&w("name = \"x\""))[0].contains("LIMITER and TOLLGATE_REGISTRY"));
    }

    #[test]
    fn the_admin_workers_bindings_to_the_zone_workers_objects_need_no_migration_of_its_own() {
        let w = |text: &str| select(&parse("w.toml", text).unwrap(), None).unwrap();
        let bind = |n: &str, c: &str| format!("[[durable_objects.bindings]]\nname = \"{n}\"\nclass_name = \"{c}\"\nscript_name = \"tollgate\"\n");
        let admin = format!("{}{}{}", bind("LIMITER", "Limiter"), bind("TOLLGATE_REGISTRY", "Registry"), bind("TOLLGATE_METRICS_SINK", "MetricsSink"));
        let section = w(&admin);
        assert_eq!(section.elsewhere, ["LIMITER", "TOLLGATE_REGISTRY", "TOLLGATE_METRICS_SINK"]);
        assert_eq!(missing_objects(&section), None, "wrangler.admin.toml's shape");
        // Still checked: a required binding missing, or the wrong class.
        let partial = w(&bind("LIMITER", "Limiter"));
        assert!(missing_objects(&partial).unwrap().contains("binding TOLLGATE_REGISTRY"), "the registry is still required");
        let wrong = w(&admin.replace("class_name = \"Registry\"", "class_name = \"Limiter\""));
        assert!(missing_objects(&wrong).unwrap().contains("names class `Limiter`"));
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
