//! `tollgate schema`: a JSON Schema (draft 2020-12) of the `TOLLGATE` var,
//! written from the field tables the reader reads by (`TOP_FIELDS`
//! and the tables below it): each `Field`'s name,
//! `Shape` and description. So the schema names exactly the fields the
//! reader accepts, and refuses the others (`additionalProperties: false` on
//! every table read by a field list, as `read_table` refuses an unknown
//! field); enums come from the [`crate::config::policy::Named`] tables.
//!
//! The schema is looser than the reader, never stricter: a config it
//! refuses is one `tollgate check` refuses too, but only `check` knows
//! every rule (URLPatterns compile, key parts parse, fields agree with each
//! other). It is for editors (completion, descriptions, typos flagged as
//! they are typed) and for validating a config where the CLI is not at hand.

use crate::config::reader::{infos, FieldInfo, Shape};
use serde_json::{json, Map, Value};

/// A duration as `parse_duration_ms` reads it: a whole number, a unit or
/// none (seconds), spaces around.
const DURATION_PATTERN: &str = r"^\s*[0-9]+\s*(ms|s|m|h|d)?\s*$";

/// The dialect the schema is written in.
pub(crate) const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The schema of the `TOLLGATE` var (its JSON form: what `env.TOLLGATE`
/// holds, or `[vars.TOLLGATE]` of `wrangler.toml` read as JSON).
pub(crate) fn schema() -> Value {
    let mut root = Map::new();
    root.insert("$schema".into(), DIALECT.into());
    root.insert("title".into(), "TOLLGATE".into());
    root.insert(
        "description".into(),
        "tollgate's config: the TOLLGATE var of wrangler.toml ([vars.TOLLGATE]) or wrangler.jsonc (vars.TOLLGATE). \
         Written by `tollgate schema`; `tollgate check` validates further."
            .into(),
    );
    if let Value::Object(mut table) = object(&infos(super::TOP_FIELDS)) {
        // A rule needs `limits` unless it has `concurrency` (the reader's
        // `checks::windowless`): not a field's shape, so said here.
        if let Some(Value::Object(rule)) = table.get_mut("properties").and_then(|p| p.pointer_mut("/rules/items")) {
            // Each branch names the property it requires (ajv's strict mode).
            let needs = |field: &str| json!({ "properties": { field: true }, "required": [field] });
            rule.insert("anyOf".into(), json!([needs("limits"), needs("concurrency")]));
        }
        root.extend(table);
    }
    Value::Object(root)
}

/// A table read by its field list: its properties, the required ones, and
/// no others.
fn object(fields: &[FieldInfo]) -> Value {
    let mut properties = Map::new();
    for field in fields {
        let mut property = fragment(field.shape);
        if let Value::Object(p) = &mut property {
            p.insert("description".into(), field.doc.into());
        }
        properties.insert(field.name.into(), property);
    }
    let required: Vec<&str> = fields.iter().filter(|f| f.required).map(|f| f.name).collect();
    let mut table = json!({ "type": "object", "properties": properties, "additionalProperties": false });
    if !required.is_empty() {
        table["required"] = json!(required);
    }
    table
}

/// The schema of one value of `shape`.
fn fragment(shape: &Shape) -> Value {
    match shape {
        Shape::Text("") => json!({ "type": "string" }),
        Shape::Text(pattern) => json!({ "type": "string", "pattern": pattern }),
        Shape::NonEmptyText => json!({ "type": "string", "minLength": 1 }),
        Shape::Integer(min, max) => json!({ "type": "integer", "minimum": min, "maximum": max }),
        Shape::OneOf(numbers) => json!({ "enum": numbers }),
        Shape::Flag => json!({ "type": "boolean" }),
        Shape::True => json!({ "const": true }),
        Shape::Duration => json!({ "type": "string", "pattern": DURATION_PATTERN }),
        Shape::Names(names) => json!({ "enum": names() }),
        Shape::List(item, 0) => json!({ "type": "array", "items": fragment(item) }),
        Shape::List(item, min) => json!({ "type": "array", "items": fragment(item), "minItems": min }),
        Shape::Table(fields) => object(&fields()),
        Shape::Map(value) => json!({ "type": "object", "additionalProperties": fragment(value) }),
        Shape::AnyOf(shapes) => json!({ "anyOf": shapes.iter().map(fragment).collect::<Vec<_>>() }),
        Shape::Custom(write) => write(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rule_fields::rule_infos;

    #[test]
    fn the_schema_is_json_and_lists_every_rule_field() {
        let text = serde_json::to_string_pretty(&schema()).unwrap();
        let schema: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(schema["$schema"], DIALECT);
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["rules"]));
        let rule = &schema["properties"]["rules"]["items"];
        assert_eq!(rule["additionalProperties"], false, "unknown rule fields are refused, as the reader refuses them");
        let listed: Vec<&str> = rule["properties"].as_object().unwrap().keys().map(String::as_str).collect();
        let fields: Vec<&str> = rule_infos().iter().map(|f| f.name).collect();
        assert_eq!(listed.len(), fields.len());
        for name in fields {
            assert!(listed.contains(&name), "{name} is in the schema");
            assert!(rule["properties"][name]["description"].as_str().is_some_and(|d| !d.is_empty()), "{name} is described");
        }
        assert_eq!(rule["required"], json!(["name", "path"]));
        let required: Vec<&Value> = rule["anyOf"].as_array().unwrap().iter().map(|b| &b["required"]).collect();
        assert_eq!(required, [&json!(["limits"]), &json!(["concurrency"])], "limits, but for a concurrency rule");
        assert_eq!(rule["properties"]["counting"]["properties"]["mode"]["enum"], json!(["request", "response"]));
        assert_eq!(rule["properties"]["counting"]["required"], json!(["mode"]));
        assert_eq!(rule["properties"]["cost"]["type"], "integer", "a weight only; metering is its own table");
        assert!(rule["properties"]["metering"]["properties"]["header"].is_object());
        for old in ["count_statuses", "clear_on_success", "reservation_ttl", "upload_buffer", "upload_timeout"] {
            assert!(rule["properties"].get(old).is_none(), "{old}: the 0.2.0 spelling is read, never suggested");
        }
        assert_eq!(rule["properties"]["on_error"]["enum"], json!(["allow", "deny"]));
        // `requests`, or `spend` in its place: check says which is missing.
        assert_eq!(rule["properties"]["limits"]["items"]["required"], json!(["window"]));
    }

    #[test]
    fn every_table_is_closed_and_every_property_described() {
        fn walk(value: &Value, path: &str) {
            if let Some(properties) = value.get("properties").and_then(Value::as_object) {
                assert_eq!(value["additionalProperties"], false, "{path} refuses unknown fields");
                for (name, property) in properties {
                    assert!(property.get("description").is_some(), "{path}.{name} is described");
                    walk(property, &format!("{path}.{name}"));
                }
            }
            for key in ["items", "additionalProperties"] {
                if let Some(inner) = value.get(key).filter(|v| v.is_object()) {
                    walk(inner, &format!("{path}[]"));
                }
            }
            // A branch with a type is a value's shape; one without only
            // requires a field (`limits` or `concurrency`).
            for inner in value.get("anyOf").and_then(Value::as_array).into_iter().flatten().filter(|b| b.get("type").is_some()) {
                walk(inner, path);
            }
        }
        walk(&schema(), "TOLLGATE");
    }
}
