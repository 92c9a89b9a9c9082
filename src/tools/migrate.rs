//! `tollgate migrate FILE`: a Wrangler config rewritten into the config's
//! current spelling ([`crate::config::spelling::SPELLING`]), so that
//! `tollgate check` reads it without a respelling warning.
//!
//! The edits are the reader's own ([`spelling::plan`] of each rule), so
//! the migration and the reader cannot disagree on what an older field
//! means. A `wrangler.toml` is edited in place with `toml_edit`: every
//! comment, blank line and value the migration does not move is kept as
//! it was. A moved value lands in an inline table (`counting = { ... }`)
//! where its line was, with the comment lines above it; a comment at the
//! end of its line is dropped (an inline table holds no comment). A
//! `TOLLGATE` written as a JSON string, and `wrangler.json(c)`, are
//! rewritten as JSON (a `.jsonc` loses its comments: the run says so).
//! Every `[env.NAME.vars]` is migrated with the top level.

use crate::config::spelling::{self, Note, Step, COUNTING, TWO_PHASE};
use crate::tools::wrangler;
use serde_json::{Map, Value as Json};
use toml_edit::{DocumentMut, InlineTable, Item, TableLike, Value};

/// A migrated file: its new text, what changed, and what could not be.
#[derive(Debug, Default)]
pub(crate) struct Migrated {
    pub(crate) text: String,
    /// One line per respelled field: section, rule, field and its new spelling.
    pub(crate) changes: Vec<String>,
    /// Fields left as written (both spellings given): `check` refuses them.
    pub(crate) refused: Vec<String>,
    /// What the rewrite could not keep (a `.jsonc`'s comments).
    pub(crate) lost: Option<String>,
    /// What is left to the operator: a `concurrency` rule's `limits`, which
    /// the older spelling required and the current one does not (only the operator
    /// knows whether they were there for that alone).
    pub(crate) hints: Vec<String>,
}

/// Migrates the Wrangler config `text` read from `path` (its name says
/// TOML or JSON, as [`wrangler::parse`] reads it).
pub(crate) fn migrate(path: &str, text: &str) -> Result<Migrated, String> {
    if path.ends_with(".json") || path.ends_with(".jsonc") {
        let mut file: Json = serde_json::from_str(&wrangler::strip_jsonc(text)).map_err(|e| format!("{path} is not valid JSON(C): {e}"))?;
        let mut out = Migrated::default();
        for_each_vars_json(&mut file, &mut |section, tollgate| {
            respell_config_json(tollgate, section, &mut out);
        });
        out.text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())? + "\n";
        if path.ends_with(".jsonc") && !out.changes.is_empty() && text != wrangler::strip_jsonc(text) {
            out.lost = Some(format!("{path}'s comments and trailing commas (rewritten as plain JSON)"));
        }
        return Ok(out);
    }
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("{path} is not valid TOML: {e}"))?;
    let mut out = Migrated::default();
    if let Some(vars) = doc.get_mut("vars") {
        respell_vars(vars, "top level", &mut out);
    }
    if let Some(envs) = doc.get_mut("env").and_then(Item::as_table_like_mut) {
        for (name, env) in envs.iter_mut() {
            if let Some(vars) = env.as_table_like_mut().and_then(|e| e.get_mut("vars")) {
                respell_vars(vars, &format!("env.{}", name.get()), &mut out);
            }
        }
    }
    out.text = doc.to_string();
    Ok(out)
}

/// Calls `each` with every `vars.TOLLGATE` of a JSON Wrangler config (the
/// top level's and each environment's) and its section's name.
fn for_each_vars_json(file: &mut Json, each: &mut dyn FnMut(&str, &mut Json)) {
    if let Some(tollgate) = file.pointer_mut("/vars/TOLLGATE") {
        each("top level", tollgate);
    }
    if let Some(envs) = file.get_mut("env").and_then(Json::as_object_mut) {
        for (name, env) in envs.iter_mut() {
            if let Some(tollgate) = env.pointer_mut("/vars/TOLLGATE") {
                each(&format!("env.{name}"), tollgate);
            }
        }
    }
}

/// `[vars] TOLLGATE` of one section: a table, or JSON text.
fn respell_vars(vars: &mut Item, section: &str, out: &mut Migrated) {
    let Some(tollgate) = vars.as_table_like_mut().and_then(|v| v.get_mut("TOLLGATE")) else { return };
    if let Some(text) = tollgate.as_str() {
        let Ok(mut config) = serde_json::from_str::<Json>(text) else { return };
        if respell_config_json(&mut config, section, out) {
            let pretty = serde_json::to_string_pretty(&config).unwrap_or_else(|_| text.to_string());
            *tollgate = toml_edit::value(format!("{pretty}\n"));
        }
        return;
    }
    match tollgate.as_table_like_mut().and_then(|t| t.get_mut("rules")) {
        Some(Item::ArrayOfTables(rules)) => {
            for (index, rule) in rules.iter_mut().enumerate() {
                respell_rule(rule, index, section, out);
            }
        }
        Some(Item::Value(Value::Array(rules))) => {
            for (index, rule) in rules.iter_mut().enumerate() {
                if let Value::InlineTable(rule) = rule {
                    respell_rule(rule, index, section, out);
                }
            }
        }
        _ => {}
    }
}

/// A `TOLLGATE` as JSON: each rule respelled; whether any was.
fn respell_config_json(config: &mut Json, section: &str, out: &mut Migrated) -> bool {
    let Some(rules) = config.get_mut("rules").and_then(Json::as_array_mut) else { return false };
    let mut changed = false;
    for (index, rule) in rules.iter_mut().enumerate() {
        let Some(table) = rule.as_object_mut() else { continue };
        let (steps, notes) = spelling::plan(table);
        spelling::apply(table, &steps);
        changed |= !steps.is_empty();
        report(table, &name_of(table, index), section, notes, out);
    }
    changed
}

/// A rule's name as errors name it: its `name`, or `rules[i]`.
fn name_of(rule: &Map<String, Json>, index: usize) -> String {
    rule.get("name").and_then(Json::as_str).map_or_else(|| format!("rules[{index}]"), str::to_string)
}

fn report(view: &Map<String, Json>, rule: &str, section: &str, notes: Vec<Note>, out: &mut Migrated) {
    if view.contains_key("concurrency") && view.contains_key("limits") {
        out.hints.push(format!(
            "{section}: rule `{rule}`: concurrency needs no limits in the {} spelling; drop limits (and algorithm) if they were there only because the {} spelling required them",
            spelling::SPELLING,
            spelling::OLD_SPELLING
        ));
    }
    for note in notes {
        if note.refused {
            out.refused.push(format!("{section}: rule `{rule}`, field `{}`: {}", note.field, note.message));
        } else {
            out.changes.push(format!("{section}: rule `{rule}`: {} -> {}", note.field, note.now));
        }
    }
}

/// A rule's TOML table (`[[vars.TOLLGATE.rules]]` or an inline table),
/// edited by the plan its JSON view gives.
trait RuleToml: TableLike {
    /// Puts the keys in `order`'s ranks (others after, as they are).
    fn order(&mut self, rank: &dyn Fn(&str) -> usize);
}

impl RuleToml for toml_edit::Table {
    fn order(&mut self, rank: &dyn Fn(&str) -> usize) {
        self.sort_values_by(|a, _, b, _| rank(a.get()).cmp(&rank(b.get())));
    }
}

impl RuleToml for InlineTable {
    fn order(&mut self, rank: &dyn Fn(&str) -> usize) {
        self.sort_values_by(|a, _, b, _| rank(a.get()).cmp(&rank(b.get())));
    }
}

fn respell_rule(rule: &mut dyn RuleToml, index: usize, section: &str, out: &mut Migrated) {
    let Json::Object(view) = json_of_table(rule) else { return };
    let (steps, notes) = spelling::plan(&view);
    report(&view, &name_of(&view, index), section, notes, out);
    if steps.is_empty() {
        return;
    }
    let before: Vec<String> = rule.iter().map(|(k, _)| k.to_string()).collect();
    apply_toml(rule, &steps);
    // Each new key where the first field it replaces was.
    let replaced = |key: &str| -> Option<&'static str> {
        steps.iter().find_map(|s| match *s {
            Step::Move { from, into: Some(group), .. } if from == key => Some(group),
            Step::Move { from, into: None, to } if from == key => Some(to),
            Step::Remove { field } if field == key => steps.iter().find_map(|s| match *s {
                Step::SetText { field, .. } => Some(field),
                _ => None,
            }),
            _ => None,
        })
    };
    let mut order: Vec<String> = Vec::new();
    for key in &before {
        if let Some(new) = replaced(key).filter(|new| !order.iter().any(|k| k == new)) {
            order.push(new.to_string());
        }
        order.push(key.clone());
    }
    rule.order(&|key| order.iter().position(|k| k == key).unwrap_or(usize::MAX));
}

/// Applies the plan's steps to a rule's TOML table. The comment lines
/// above a moved or removed field go to the key that replaces it.
fn apply_toml(rule: &mut dyn RuleToml, steps: &[Step]) {
    let first_into_group = steps.iter().find_map(|s| match *s {
        Step::Move { from, into: Some(_), .. } => Some(from),
        _ => None,
    });
    let group_decor = first_into_group.and_then(|from| rule.key(from)).map(|k| k.leaf_decor().clone());
    let mut removed_decor = None;
    for step in steps {
        match *step {
            Step::Move { from, into, to } => {
                let decor = rule.key(from).map(|k| k.leaf_decor().clone());
                let Some(item) = rule.remove(from) else { continue };
                match into {
                    Some(group) => put_in_group(rule, group, to, item, group_decor.clone()),
                    None => insert_with(rule, to, item, decor),
                }
            }
            Step::TwoPhase => put_in_group(rule, COUNTING, "mode", toml_edit::value(TWO_PHASE), group_decor.clone()),
            Step::SetText { field, value } => insert_with(rule, field, toml_edit::value(value), removed_decor.take()),
            Step::Remove { field } => {
                removed_decor = rule.key(field).map(|k| k.leaf_decor().clone());
                rule.remove(field);
            }
        }
    }
}

/// Inserts `item` under `key`, its key carrying `decor` (the comment lines
/// of the field it replaces).
fn insert_with(rule: &mut dyn RuleToml, key: &str, item: Item, decor: Option<toml_edit::Decor>) {
    rule.insert(key, item);
    if let (Some(decor), Some(mut k)) = (decor, rule.key_mut(key)) {
        *k.leaf_decor_mut() = decor;
    }
}

/// Puts `item` under `key` in the rule's group `group`: an inline table
/// made where there is none (its key with `decor`), or the table the
/// config already has.
fn put_in_group(rule: &mut dyn RuleToml, group: &str, key: &str, item: Item, decor: Option<toml_edit::Decor>) {
    if !rule.get(group).is_some_and(Item::is_table_like) {
        insert_with(rule, group, Item::Value(Value::InlineTable(InlineTable::new())), decor);
    }
    let Some(table) = rule.get_mut(group) else { return };
    match table {
        Item::Value(Value::InlineTable(inline)) => {
            let Ok(mut value) = item.into_value() else { return };
            value.decor_mut().clear();
            inline.insert(key, value);
            inline.fmt();
        }
        other => {
            if let Some(t) = other.as_table_like_mut() {
                t.insert(key, item);
            }
        }
    }
}

/// A TOML table's JSON view, as the reader sees it.
fn json_of_table(table: &dyn TableLike) -> Json {
    Json::Object(table.iter().map(|(k, item)| (k.to_string(), json_of_item(item))).collect())
}

fn json_of_item(item: &Item) -> Json {
    match item {
        Item::Value(value) => json_of_value(value),
        Item::Table(table) => json_of_table(table),
        Item::ArrayOfTables(tables) => Json::Array(tables.iter().map(|t| json_of_table(t)).collect()),
        Item::None => Json::Null,
    }
}

fn json_of_value(value: &Value) -> Json {
    match value {
        Value::String(s) => Json::from(s.value().as_str()),
        Value::Integer(i) => Json::from(*i.value()),
        Value::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Json::Null, Json::Number),
        Value::Boolean(b) => Json::from(*b.value()),
        Value::Datetime(d) => Json::from(d.value().to_string()),
        Value::Array(a) => Json::Array(a.iter().map(json_of_value).collect()),
        Value::InlineTable(t) => json_of_table(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = r#"name = "app"

[vars.TOLLGATE]
ipv6_prefix = 64

# Logins: failures only.
[[vars.TOLLGATE.rules]]
name = "login"
path = "/login"
key = ["body:email"]
# Count the failed logins.
count_statuses = [401, 403]  # failures
clear_on_success = true
reservation_ttl = "2m"
limits = [{ requests = 5, window = "15m" }]

[[vars.TOLLGATE.rules]]
name = "ai"
path = "/ai"
limits = [{ requests = 100000, window = "1d" }]
algorithm = "gcra"

[vars.TOLLGATE.rules.cost]
header = "x-usage-units" # what the origin reports
reserve = 1000
max = 1000

[env.staging.vars]
TOLLGATE = { rules = [{ name = "slots", path = "/s", key = ["header:x-key"], concurrency = 2, limits = [{ requests = 10000, window = "1s" }] }] }
"#;

    #[test]
    fn a_0_2_0_file_is_respelled_keeping_its_comments() {
        let out = migrate("wrangler.toml", OLD).unwrap();
        assert!(out.refused.is_empty(), "{:?}", out.refused);
        assert_eq!(out.changes.len(), 5, "{:#?}", out.changes);
        let text = &out.text;
        for kept in ["# Logins: failures only.", "# Count the failed logins.", "# what the origin reports", "ipv6_prefix = 64"] {
            assert!(text.contains(kept), "{kept} kept in\n{text}");
        }
        assert!(text.contains("# Count the failed logins.\ncounting = { mode = \"response\", statuses = [401, 403], reservation_ttl = \"2m\" }\non_success = \"clear\"\n"), "{text}");
        assert!(text.contains("[vars.TOLLGATE.rules.metering]\nheader = \"x-usage-units\""), "{text}");
        assert!(text.contains("concurrency = 2"), "{text}");
        let after = wrangler::parse("wrangler.toml", text).unwrap();
        assert_eq!(after["env"]["staging"]["vars"]["TOLLGATE"]["rules"][0]["counting"], serde_json::json!({ "mode": "response" }));
        for old in ["count_statuses", "clear_on_success", "[vars.TOLLGATE.rules.cost]"] {
            assert!(!text.contains(old), "{old} left in\n{text}");
        }
        let again = migrate("wrangler.toml", text).unwrap();
        assert_eq!((again.text.as_str(), again.changes.len()), (text.as_str(), 0), "a migrated file stays as it is");
    }

    #[test]
    fn json_text_and_json_files_are_respelled_too() {
        let toml = "[vars]\nTOLLGATE = '{\"rules\": [{\"name\": \"r\", \"path\": \"/\", \"count_statuses\": [401], \"limits\": [{\"requests\": 1, \"window\": \"1s\"}]}]}'\n";
        let out = migrate("wrangler.toml", toml).unwrap();
        let after = wrangler::parse("wrangler.toml", &out.text).unwrap();
        let config: Json = serde_json::from_str(after["vars"]["TOLLGATE"].as_str().unwrap()).unwrap();
        assert_eq!(config["rules"][0]["counting"], serde_json::json!({ "mode": "response", "statuses": [401] }));
        let jsonc = "{ // the Worker\n \"vars\": { \"TOLLGATE\": { \"rules\": [{ \"name\": \"r\", \"clear_on_success\": false }] } } }";
        let out = migrate("wrangler.jsonc", jsonc).unwrap();
        assert_eq!(out.changes.len(), 1);
        assert!(out.lost.is_some() && !out.text.contains("clear_on_success"), "{out:?}");
    }

    #[test]
    fn both_spellings_are_left_as_written_and_named() {
        let toml = "[vars.TOLLGATE]\nrules = [{ name = \"r\", clear_on_success = true, on_success = \"decrement\" }]\n";
        let out = migrate("wrangler.toml", toml).unwrap();
        assert_eq!(out.text, toml);
        assert_eq!(out.refused.len(), 1);
        assert!(out.refused[0].starts_with("top level: rule `r`, field `clear_on_success`: "), "{:?}", out.refused);
    }
}
