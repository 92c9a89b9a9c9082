//! Where allowed requests go: the zone's origin (the default), or another
//! Worker through a service binding (`upstream = { service = "APP" }`).
//!
//! Workers Routes run one Worker per route, so a zone whose `example.com/*`
//! already runs an app Worker puts tollgate on the route and the app behind
//! a `[[services]]` binding: allowed requests reach `env.APP.fetch(request)`
//! with the request object unchanged. `tollgate check` verifies that the
//! binding is declared in the same wrangler environment
//! ([`missing_binding`]).

use serde_json::Value;

/// The config field naming the upstream.
pub(crate) const FIELD: &str = "upstream";

/// Where an allowed request is forwarded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Upstream {
    /// The zone's origin: `fetch(request)` (or the `UPSTREAM` var's origin
    /// in local development).
    #[default]
    Origin,
    /// The Worker behind this service binding: `env.NAME.fetch(request)`.
    Service(String),
}

/// Reads the `upstream` field's value: `{ service = "NAME" }`, where `NAME`
/// is a binding name (a JavaScript identifier, as wrangler requires), or
/// `"origin"`, the default spelled out. The error says what is accepted.
pub(crate) fn read(value: &Value) -> Result<Upstream, String> {
    const SHAPE: &str = "must be { service = \"BINDING\" } (a [[services]] binding) or \"origin\"";
    match value {
        Value::String(s) if s == "origin" => Ok(Upstream::Origin),
        Value::Object(table) => {
            if let Some(unknown) = table.keys().find(|k| k.as_str() != "service") {
                return Err(format!("unknown key `{unknown}`: {SHAPE}"));
            }
            match table.get("service") {
                Some(Value::String(name)) if valid_binding(name) => Ok(Upstream::Service(name.clone())),
                Some(Value::String(name)) => Err(format!(
                    "`{name}` is not a binding name (letters, digits, `_` and `$`, not starting with a digit)"
                )),
                _ => Err(SHAPE.to_string()),
            }
        }
        _ => Err(SHAPE.to_string()),
    }
}

/// The upstream of a config that failed to parse, for `on_invalid_config =
/// "allow"`: `Some` when its `upstream` field (or its absence) is readable,
/// `None` when that field is itself invalid: the Worker then cannot know
/// where to forward and answers 503 instead.
pub(crate) fn of_invalid_config(value: &Value) -> Option<Upstream> {
    match value.get(FIELD) {
        None => Some(Upstream::Origin),
        Some(v) => read(v).ok(),
    }
}

/// Whether `name` can name a binding: a JavaScript identifier.
pub(crate) fn valid_binding(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// For `tollgate check`: the error when `upstream` names a service binding
/// that `bindings` (the `[[services]]` binding names of the same wrangler
/// environment, which does not inherit them from the top level) lacks.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) fn missing_binding(upstream: &Upstream, bindings: &[String]) -> Option<String> {
    match upstream {
        Upstream::Service(name) if !bindings.iter().any(|b| b == name) => {
            let declared = if bindings.is_empty() {
                "none".to_string()
            } else {
                bindings.iter().map(|b| format!("`{b}`")).collect::<Vec<_>>().join(", ")
            };
            Some(format!(
                "field `{FIELD}`: service binding `{name}` is not declared in this environment's [[services]] \
                 (declared: {declared}); add [[services]] binding = \"{name}\", service = \"<the app Worker>\""
            ))
        }
        _ => None,
    }
}

/// For `tollgate check`: the warning that the app behind a service binding
/// can be reached around tollgate. A Worker without routes still answers at
/// its `*.workers.dev` URL and at a Preview URL per version unless its own
/// Wrangler config turns them off, and there nothing limits it. `app` is
/// what [`crate::tools::wrangler::exposures`] found in the app's config (`file`),
/// when check was given it (`--app`): no warning when it found nothing;
/// without it, the reminder. `None` for the origin upstream.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) fn bypass_warning(upstream: &Upstream, app: Option<(&str, &[String])>) -> Option<String> {
    let Upstream::Service(binding) = upstream else { return None };
    const FIX: &str = "set workers_dev = false and preview_urls = false in the app's wrangler config (and give it no routes)";
    match app {
        None => Some(format!(
            "field `{FIELD}`: the app behind service binding `{binding}` stays reachable around tollgate, unlimited, \
             at its *.workers.dev URL and its Preview URLs while they are on (Wrangler's default): {FIX}; \
             `tollgate check --app APP_WRANGLER_FILE` checks that"
        )),
        Some((_, [])) => None,
        Some((file, open)) => Some(format!(
            "field `{FIELD}`: the app behind service binding `{binding}` ({file}) is reachable around tollgate, unlimited: {}; {FIX}",
            open.join(" | ")
        )),
    }
}

/// The schema of the `upstream` field, as [`read`] reads it.
pub(crate) fn schema() -> Value {
    serde_json::json!({
        "anyOf": [
            { "const": "origin" },
            {
                "type": "object",
                "properties": { "service": { "type": "string", "pattern": "^[A-Za-z_$][A-Za-z0-9_$]*$", "description": "The [[services]] binding's name." } },
                "required": ["service"],
                "additionalProperties": false
            }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_service_and_origin() {
        assert_eq!(read(&json!({ "service": "APP" })), Ok(Upstream::Service("APP".into())));
        assert_eq!(read(&json!("origin")), Ok(Upstream::Origin));
        assert!(read(&json!({ "service": "1APP" })).unwrap_err().contains("not a binding name"));
        assert!(read(&json!({ "service": "" })).unwrap_err().contains("not a binding name"));
        assert!(read(&json!({ "service": "A-B" })).unwrap_err().contains("not a binding name"));
        assert!(read(&json!({ "service": 3 })).unwrap_err().contains("must be"));
        assert!(read(&json!({ "url": "https://x" })).unwrap_err().contains("unknown key `url`"));
        assert!(read(&json!("APP")).unwrap_err().contains("must be"));
        assert!(read(&json!({})).unwrap_err().contains("must be"));
    }

    #[test]
    fn invalid_config_upstream_is_lenient_only_about_the_rest() {
        assert_eq!(of_invalid_config(&json!({ "rules": 3 })), Some(Upstream::Origin));
        assert_eq!(of_invalid_config(&json!({ "upstream": { "service": "APP" }, "rules": 3 })), Some(Upstream::Service("APP".into())));
        assert_eq!(of_invalid_config(&json!({ "upstream": { "service": 1 } })), None);
    }

    #[test]
    fn a_service_upstream_warns_that_the_app_is_reachable_around_tollgate() {
        let app = Upstream::Service("APP".into());
        assert_eq!(bypass_warning(&Upstream::Origin, None), None);
        let reminder = bypass_warning(&app, None).unwrap();
        assert!(reminder.contains("service binding `APP` stays reachable around tollgate"), "{reminder}");
        assert!(reminder.contains("workers_dev = false and preview_urls = false"), "{reminder}");
        assert_eq!(bypass_warning(&app, Some(("app.toml", &[]))), None, "the app's config turns both off");
        let open = ["top level: preview_urls is not false (a URL per version)".to_string()];
        let found = bypass_warning(&app, Some(("app.toml", &open))).unwrap();
        assert!(found.contains("(app.toml) is reachable around tollgate, unlimited: top level: preview_urls is not false"), "{found}");
    }

    #[test]
    fn missing_binding_is_named_with_the_declared_ones() {
        let app = Upstream::Service("APP".into());
        assert_eq!(missing_binding(&app, &["APP".into()]), None);
        assert_eq!(missing_binding(&Upstream::Origin, &[]), None);
        let e = missing_binding(&app, &["OTHER".into()]).unwrap();
        assert!(e.contains("`APP` is not declared") && e.contains("declared: `OTHER`"), "{e}");
        assert!(missing_binding(&app, &[]).unwrap().contains("declared: none"));
    }
}
