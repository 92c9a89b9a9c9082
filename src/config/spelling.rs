//! The config's spellings: what the current one is
//! ([`SPELLING`]), and how a rule written in the older one
//! ([`OLD_SPELLING`]) is read.
//!
//! The older spelling switched a rule to two-phase counting by any of three fields
//! (`count_statuses`, a `cost` table, `concurrency`), which silently made
//! `reservation_ttl`, `upload_buffer` and `upload_timeout` legal; `cost`
//! was a weight or a metering table; `clear_on_success` stood beside
//! `on_success`. The current spelling names the mode:
//!
//! ```toml
//! counting = { mode = "response", statuses = [401, 403], reservation_ttl = "2m" }
//! metering = { header = "x-usage-units", reserve = 1000, max = 100000 }
//! ```
//!
//! An older rule is respelled before it is read, by one [`plan`] of
//! [`Step`]s and one note per old field. The reader applies the plan to
//! the rule's JSON ([`apply`]) and turns the notes into warnings (or
//! errors, where the old and new spellings are both given);
//! `tollgate migrate` (`crate::tools::migrate`) applies the same plan to
//! the TOML table, keeping its comments. So the reader and the migration
//! cannot disagree on what an older field means.

use serde_json::{Map, Value};

/// The config's current spelling, as `tollgate --version` and
/// `tollgate diff` name it: a spelling is named by the release that
/// brought it (0.2.0: the counting mode is a field, `counting`; metering
/// is `metering`; `cost` is a weight only).
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(crate) const SPELLING: &str = "0.2";

/// The spelling [`plan`] reads besides the current one: 0.1.0's
/// (`count_statuses`, `clear_on_success`, `reservation_ttl` and the upload
/// fields at a rule's top level), and what the builds of 0.2.0 before its
/// release added in the same style (a `cost` table, `concurrency` with no
/// `counting`).
pub(crate) const OLD_SPELLING: &str = "0.1";

/// The group that holds the counting mode and what the two-phase mode
/// unlocks.
pub(crate) const COUNTING: &str = "counting";

/// The two-phase mode's name (`counting.mode`).
pub(crate) const TWO_PHASE: &str = "response";

/// The older fields moved into `counting` as they are.
const MOVED_INTO_COUNTING: [(&str, &str); 4] = [
    ("count_statuses", "statuses"),
    ("reservation_ttl", "reservation_ttl"),
    ("upload_buffer", "upload_buffer"),
    ("upload_timeout", "upload_timeout"),
];

/// `value` as TOML writes it in a config (`[401, 403]`, `"2m"`,
/// `{ header = "x-usage", reserve = 10 }`), for the notes.
fn toml_text(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("[{}]", items.iter().map(toml_text).collect::<Vec<_>>().join(", ")),
        Value::Object(fields) => {
            let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k} = {}", toml_text(v))).collect();
            format!("{{ {} }}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

/// One edit of a rule's table, from the older spelling to the current one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Move the value at `from` to `to`, inside the group `into` (created
    /// when missing) or at the rule's top level.
    Move { from: &'static str, into: Option<&'static str>, to: &'static str },
    /// Set `counting.mode` to the two-phase mode.
    TwoPhase,
    /// Set `field` to the text `value` (replacing it).
    SetText { field: &'static str, value: &'static str },
    /// Remove `field` (an older field that said nothing: `clear_on_success = false`).
    Remove { field: &'static str },
}

/// What an older field became, or why it could not be respelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// The older field.
    pub(crate) field: &'static str,
    /// What it is now written as (`counting = { ... }`), for
    /// `tollgate migrate` to list; empty when refused.
    pub(crate) now: String,
    pub(crate) message: String,
    /// The old spelling stands beside the new one: an error, not a warning.
    pub(crate) refused: bool,
}

impl Note {
    fn respelled(field: &'static str, now: String) -> Note {
        let message = format!("the {OLD_SPELLING} spelling: write {now} (`tollgate migrate` rewrites it)");
        Note { field, now, message, refused: false }
    }

    fn refused(field: &'static str, message: String) -> Note {
        Note { field, now: String::new(), message, refused: true }
    }
}

/// The steps that respell `rule` (a rule's table, as JSON) into the
/// current spelling, and one note per older field. A field whose new
/// spelling is given too is left where it is, with a refusing note. A
/// rule in the current spelling yields nothing.
pub(crate) fn plan(rule: &Map<String, Value>) -> (Vec<Step>, Vec<Note>) {
    let mut steps = Vec::new();
    let mut notes = Vec::new();
    let group = rule.get(COUNTING).and_then(Value::as_object);
    let mode_given = group.is_some_and(|g| g.contains_key("mode"));
    let two_phase_by = |field: &str| ["count_statuses", "cost", "concurrency"].contains(&field);
    let mut two_phase = false;
    for (old, new) in MOVED_INTO_COUNTING {
        let Some(value) = rule.get(old) else { continue };
        if group.is_some_and(|g| g.contains_key(new)) {
            notes.push(Note::refused(old, format!("the {OLD_SPELLING} spelling of {COUNTING}.{new}, given beside it: keep {COUNTING}.{new}")));
            continue;
        }
        steps.push(Step::Move { from: old, into: Some(COUNTING), to: new });
        two_phase |= two_phase_by(old);
        let mode = if two_phase_by(old) && !mode_given { format!("mode = \"{TWO_PHASE}\", ") } else { String::new() };
        notes.push(Note::respelled(old, format!("{COUNTING} = {{ {mode}{new} = {} }}", toml_text(value))));
    }
    if let Some(cost) = rule.get("cost").filter(|c| c.is_object()) {
        if rule.contains_key("metering") {
            notes.push(Note::refused("cost", format!("a table is the {OLD_SPELLING} spelling of metering, given beside it: keep metering, and cost a number (or none)")));
        } else {
            steps.push(Step::Move { from: "cost", into: None, to: "metering" });
            let mode = if mode_given { String::new() } else { format!(" and {COUNTING} = {{ mode = \"{TWO_PHASE}\" }}") };
            notes.push(Note::respelled("cost", format!("metering = {}{mode} (cost is a weight: a number)", toml_text(cost))));
            two_phase = true;
        }
    }
    if rule.contains_key("concurrency") && !mode_given && !two_phase {
        notes.push(Note::respelled("concurrency", format!("{COUNTING} = {{ mode = \"{TWO_PHASE}\" }} beside it (a slot is held until the response is sent)")));
        two_phase = true;
    }
    if two_phase && !mode_given {
        // First, so that the mode leads the group it creates.
        steps.insert(0, Step::TwoPhase);
    }
    clear_on_success(rule, &mut steps, &mut notes);
    (steps, notes)
}

/// `clear_on_success = true` is `on_success = "clear"`; `false` says
/// nothing.
fn clear_on_success(rule: &Map<String, Value>, steps: &mut Vec<Step>, notes: &mut Vec<Note>) {
    const FIELD: &str = "clear_on_success";
    let Some(value) = rule.get(FIELD) else { return };
    match value.as_bool() {
        _ if rule.contains_key("on_success") => {
            notes.push(Note::refused(FIELD, format!("the {OLD_SPELLING} spelling of on_success = \"clear\", given beside on_success: keep on_success alone")));
        }
        Some(true) => {
            steps.extend([Step::Remove { field: FIELD }, Step::SetText { field: "on_success", value: "clear" }]);
            notes.push(Note::respelled(FIELD, "on_success = \"clear\"".into()));
        }
        Some(false) => {
            steps.push(Step::Remove { field: FIELD });
            notes.push(Note::respelled(FIELD, "nothing (false was the default; on_success = \"clear\" is the true)".into()));
        }
        None => notes.push(Note::refused(FIELD, format!("the {OLD_SPELLING} spelling of on_success = \"clear\": write on_success = \"clear\""))),
    }
}

/// Applies `steps` (from [`plan`] of the same table) to a rule's JSON.
pub(crate) fn apply(rule: &mut Map<String, Value>, steps: &[Step]) {
    for step in steps {
        match *step {
            Step::Move { from, into, to } => {
                let Some(value) = rule.remove(from) else { continue };
                group(rule, into).insert(to.to_string(), value);
            }
            Step::TwoPhase => {
                group(rule, Some(COUNTING)).insert("mode".into(), TWO_PHASE.into());
            }
            Step::SetText { field, value } => {
                rule.insert(field.into(), value.into());
            }
            Step::Remove { field } => {
                rule.remove(field);
            }
        }
    }
}

/// The table `into` names in `rule` (created when missing), or the rule.
fn group<'r>(rule: &'r mut Map<String, Value>, into: Option<&str>) -> &'r mut Map<String, Value> {
    let Some(name) = into else { return rule };
    let entry = rule.entry(name).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(table) => table,
        _ => unreachable!("made a table above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn respell(rule: Value) -> (Value, Vec<Note>) {
        let mut table = rule.as_object().cloned().unwrap_or_default();
        let (steps, notes) = plan(&table);
        apply(&mut table, &steps);
        (Value::Object(table), notes)
    }

    #[test]
    fn each_old_field_is_respelled_with_one_note() {
        let (rule, notes) = respell(json!({
            "name": "login", "count_statuses": [401], "clear_on_success": true, "reservation_ttl": "2m",
            "cost": { "header": "x-u", "reserve": 1, "max": 2 }
        }));
        assert_eq!(rule, json!({
            "name": "login", "on_success": "clear", "metering": { "header": "x-u", "reserve": 1, "max": 2 },
            "counting": { "mode": "response", "statuses": [401], "reservation_ttl": "2m" }
        }));
        let fields: Vec<&str> = notes.iter().map(|n| n.field).collect();
        assert_eq!(fields, ["count_statuses", "reservation_ttl", "cost", "clear_on_success"]);
        assert!(notes.iter().all(|n| !n.refused && n.message.contains("tollgate migrate")), "{notes:?}");
        assert!(notes[0].message.contains("counting = { mode = \"response\", statuses = [401] }"), "{}", notes[0].message);
    }

    #[test]
    fn concurrency_alone_gets_the_mode_and_a_number_cost_stays() {
        let (rule, notes) = respell(json!({ "concurrency": 3, "cost": 2 }));
        assert_eq!(rule, json!({ "concurrency": 3, "cost": 2, "counting": { "mode": "response" } }));
        assert_eq!((notes.len(), notes[0].field), (1, "concurrency"));
    }

    #[test]
    fn the_current_spelling_is_left_alone() {
        let current = json!({ "counting": { "mode": "response", "statuses": [401] }, "concurrency": 2, "on_success": "clear", "cost": 3 });
        assert_eq!(respell(current.clone()), (current, vec![]));
        let (rule, notes) = respell(json!({ "clear_on_success": false }));
        assert_eq!((rule, notes.len()), (json!({}), 1));
    }

    /// The reader's side: an older rule is the rule its current spelling
    /// is, with one warning per old field naming rule, field and spelling.
    #[test]
    fn an_older_rule_reads_as_its_current_spelling() {
        use crate::config::Config;
        let limits = json!([{ "requests": 100, "window": "1h" }]);
        let old = json!({ "rules": [
            { "name": "login", "path": "/login", "key": ["body:email"], "count_statuses": [401], "clear_on_success": true,
              "upload_timeout": "5s", "limits": limits },
            { "name": "ai", "path": "/ai", "cost": { "header": "x-u", "reserve": 10, "max": 20 }, "limits": limits },
            { "name": "slots", "path": "/s", "key": ["header:x-k"], "concurrency": 2, "limits": limits }
        ] });
        let new = json!({ "rules": [
            { "name": "login", "path": "/login", "key": ["body:email"], "counting": { "mode": "response", "statuses": [401], "upload_timeout": "5s" },
              "on_success": "clear", "limits": limits },
            { "name": "ai", "path": "/ai", "counting": { "mode": "response" }, "metering": { "header": "x-u", "reserve": 10, "max": 20 }, "limits": limits },
            { "name": "slots", "path": "/s", "key": ["header:x-k"], "counting": { "mode": "response" }, "concurrency": 2, "limits": limits }
        ] });
        let (old, new) = (Config::from_json(&old).unwrap(), Config::from_json(&new).unwrap());
        for (a, b) in old.rules.iter().zip(&new.rules) {
            assert_eq!(crate::config::describe::rule_json(a), crate::config::describe::rule_json(b), "{}", a.name);
            assert_eq!((a.reserves(), a.lease, a.usage.as_ref(), a.upload), (b.reserves(), b.lease, b.usage.as_ref(), b.upload), "{}", a.name);
        }
        let warned: Vec<String> = old.respelled.iter().map(|w| format!("{}.{}", w.rule, w.field)).collect();
        assert_eq!(warned, ["login.count_statuses", "login.upload_timeout", "login.clear_on_success", "ai.cost", "slots.concurrency"]);
        assert!(old.respelled[0].to_string().starts_with("rule `login`, field `count_statuses`: the 0.1 spelling: write counting = { mode = \"response\", statuses = [401] }"), "{}", old.respelled[0]);
        assert!(new.respelled.is_empty());
    }

    #[test]
    fn both_spellings_at_once_are_refused_and_left_for_the_reader() {
        for (rule, field) in [
            (json!({ "count_statuses": [401], "counting": { "mode": "response", "statuses": [403] } }), "count_statuses"),
            (json!({ "cost": { "header": "x" }, "metering": { "header": "y" } }), "cost"),
            (json!({ "clear_on_success": true, "on_success": "decrement" }), "clear_on_success"),
            (json!({ "clear_on_success": "yes" }), "clear_on_success"),
        ] {
            let (after, notes) = respell(rule.clone());
            assert_eq!(notes.len(), 1, "{rule}");
            assert!(notes[0].refused && notes[0].field == field, "{rule}: {notes:?}");
            assert_eq!(after.get(field), rule.get(field), "left where it was");
        }
    }
}
