//! How the config's tables are read: a [`Field`] list per table names the
//! accepted fields, how each is read and how the schema describes it;
//! [`read_table`] reads a table by its list (an unknown name is an error,
//! as is a required field absent); [`Input`] reads one value (numbers in a
//! range, names from a table, durations, key parts, conditions...) and
//! reports what is wrong with it under the field's name, so that every
//! problem is collected ([`Errors`]) and parsing goes on. The value checks
//! that several tables share (`valid_*`) are here too.

use crate::config::policy::Named;
use crate::config::rules::{Condition, Target, Test};
use crate::config::ConfigError;
use crate::count::duration::parse_duration_ms;
use crate::request::canon::{Source, Sources};
use crate::request::key::KeyPart;
use serde_json::{Map, Value};
use std::num::NonZeroU64;
use std::ops::RangeInclusive;

/// The problems found so far, all tagged with the rule being read.
pub(super) struct Errors {
    /// The rule's name, or `rules[i]` when it has none; `None` at the top
    /// level.
    pub(super) rule: Option<String>,
    pub(super) list: Vec<ConfigError>,
}

impl Errors {
    pub(super) fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.list.push(ConfigError {
            rule: self.rule.clone(),
            field: field.into(),
            message: message.into(),
        });
    }

    /// `value` when nothing was found wrong, or every problem.
    pub(super) fn or_ok<T>(self, value: T) -> Result<T, Vec<ConfigError>> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            Err(self.list)
        }
    }
}

/// One field of a config table: its name, whether it must be present, its
/// value's [`Shape`] and description (for the schema), and how its value
/// is read into the draft `D`, which starts out holding the defaults. Each
/// table's fields are listed once (`TOP_FIELDS`, `RULE_FIELDS`,
/// `LIMIT_FIELDS`...): that list drives parsing, is the set of names
/// accepted, and is what `tollgate schema` prints. Adding a field takes its
/// entry (reader included) and its docs.
///
/// The shape and the description are kept only where the schema is
/// written (natively and in the Node CLI): the Worker's tables hold
/// neither, so its upload carries no descriptions (the constructors drop
/// them at compile time).
pub(super) struct Field<D, S = ()> {
    pub(super) name: &'static str,
    /// The error when the field is absent; `None` when it is optional.
    pub(super) required: Option<&'static str>,
    /// What the value looks like, as far as a JSON Schema can say.
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    pub(super) shape: Shape,
    /// What the field does, for the schema's `description`.
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    pub(super) doc: &'static str,
    /// Reads a present value; on an error it reports it and leaves the
    /// default.
    pub(super) read: fn(&mut D, &mut Input<'_>),
    /// Writes the field back from what the table was read into (`S`: a
    /// rule's [`crate::config::rules::RuleSpec`]), in the config's own
    /// spelling; `None` where no value means what its absence means.
    /// [`crate::config::describe::rule_json`] is every field's writer.
    pub(super) write: Option<fn(&S) -> Option<Value>>,
}

impl<D, S> Field<D, S> {
    /// The field written back by `write` (a rule's fields all are). Not
    /// in a Worker without the admin API or the CLI (the zone's, the
    /// embedded crate's): nothing there describes a rule (the admin flow
    /// is the admin Worker's), so its tables keep no writer and its upload
    /// carries none.
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli", feature = "admin"))]
    pub(super) const fn writes(self, write: fn(&S) -> Option<Value>) -> Field<D, S> {
        Field { write: Some(write), ..self }
    }

    /// The zone's Worker and the embedded crate: no writer kept.
    #[cfg(all(target_arch = "wasm32", not(feature = "cli"), not(feature = "admin")))]
    pub(super) const fn writes(self, _: fn(&S) -> Option<Value>) -> Field<D, S> {
        self
    }

    pub(super) const fn optional(name: &'static str, shape: Shape, doc: &'static str, read: fn(&mut D, &mut Input<'_>)) -> Field<D, S> {
        Field::new(name, None, shape, doc, read)
    }

    pub(super) const fn required(
        name: &'static str,
        missing: &'static str,
        shape: Shape,
        doc: &'static str,
        read: fn(&mut D, &mut Input<'_>),
    ) -> Field<D, S> {
        Field::new(name, Some(missing), shape, doc, read)
    }

    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    const fn new(name: &'static str, required: Option<&'static str>, shape: Shape, doc: &'static str, read: fn(&mut D, &mut Input<'_>)) -> Field<D, S> {
        Field { name, required, shape, doc, read, write: None }
    }

    /// The Worker's: without the shape and the description.
    #[cfg(all(target_arch = "wasm32", not(feature = "cli")))]
    const fn new(name: &'static str, required: Option<&'static str>, _: Shape, _: &'static str, read: fn(&mut D, &mut Input<'_>)) -> Field<D, S> {
        Field { name, required, read, write: None }
    }
}

/// A field as the schema sees it: a table's [`Field`]s without their
/// draft type.
#[cfg_attr(all(target_arch = "wasm32", not(feature = "cli")), allow(dead_code))]
pub(super) struct FieldInfo {
    pub(super) name: &'static str,
    pub(super) required: bool,
    pub(super) shape: &'static Shape,
    pub(super) doc: &'static str,
}

/// The schema's view of a table's fields.
#[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
pub(super) fn infos<D, S>(fields: &'static [Field<D, S>]) -> Vec<FieldInfo> {
    fields.iter().map(|f| FieldInfo { name: f.name, required: f.required.is_some(), shape: &f.shape, doc: f.doc }).collect()
}

/// The Worker writes no schema: its tables hold no shapes.
#[cfg(all(target_arch = "wasm32", not(feature = "cli")))]
pub(super) fn infos<D, S>(_: &'static [Field<D, S>]) -> Vec<FieldInfo> {
    Vec::new()
}

/// What a field's value looks like, as far as a JSON Schema can say it
/// ([`crate::config::schema`] renders it). Never narrower than the reader:
/// a value the reader takes must fit its shape (the reader checks more).
/// (The Worker builds its tables' shapes only to drop them: see [`Field`].)
#[cfg_attr(all(target_arch = "wasm32", not(feature = "cli")), allow(dead_code))]
pub(super) enum Shape {
    /// A string matching this ECMA-262 pattern (`""`: any string).
    Text(&'static str),
    /// A non-empty string.
    NonEmptyText,
    /// A whole number from the first to the second.
    Integer(u64, u64),
    /// One of these numbers.
    OneOf(&'static [u16]),
    /// `true` or `false`.
    Flag,
    /// `true` only.
    True,
    /// A duration: a whole number and a unit (`ms`, `s`, `m`, `h`, `d`;
    /// none is seconds), as [`parse_duration_ms`] reads it.
    Duration,
    /// One of these names (a [`Named`] table's, or [`source_names`]).
    Names(fn() -> Vec<&'static str>),
    /// A list of at least this many items of a shape.
    List(&'static Shape, usize),
    /// A table read by its own field list: unknown fields refused.
    Table(fn() -> Vec<FieldInfo>),
    /// A table of names the config chooses, each to a value of a shape.
    Map(&'static Shape),
    /// Any one of these.
    AnyOf(&'static [Shape]),
    /// A fragment written by the field's own reader's module.
    Custom(fn() -> Value),
}

/// The names of the parameter sources (`query_sources`).
pub(super) fn source_names() -> Vec<&'static str> {
    [Source::Query, Source::Body, Source::Cookie].iter().map(|s| s.name()).collect()
}

/// A query or header condition: `"v"` equals, `["a", "b"]` any of, `true`
/// present (see [`condition`]).
pub(super) const CONDITION: Shape = Shape::AnyOf(&[Shape::Text(""), Shape::List(&Shape::Text(""), 1), Shape::True]);

/// A key part such as `"ip"`, `"header:x-api-key"`, `"body:email:lower"`.
pub(super) const KEY: Shape = Shape::List(&Shape::NonEmptyText, 1);

/// A Workers secret's name: 1-64 of `A-Z a-z 0-9 _` ([`valid_secret_name`]).
pub(super) const SECRET_NAME: Shape = Shape::Text("^[A-Za-z0-9_]{1,64}$");

/// A header name: visible ASCII without `:` ([`valid_header_name`]).
pub(super) const HEADER_NAME: Shape = Shape::Text("^[!-9;-~]+$");

/// HTTP statuses, 100 to 599: at least one.
pub(super) const STATUSES: Shape = Shape::List(&Shape::Integer(100, 599), 1);

/// Reads `table` into `draft` by `fields`; `prefix` starts every field
/// name in errors (`limits[0].`). An unknown name, or a required field
/// absent, is an error; an optional field absent keeps the draft's default.
pub(super) fn read_table<D, S>(table: &Map<String, Value>, fields: &[Field<D, S>], draft: &mut D, errors: &mut Errors, prefix: &str) {
    for (name, value) in table {
        let field = format!("{prefix}{name}");
        match fields.iter().find(|f| f.name == name) {
            Some(f) => (f.read)(draft, &mut Input { field: &field, value, errors }),
            None => errors.push(field, "unknown field"),
        }
    }
    for f in fields {
        if let (Some(missing), false) = (f.required, table.contains_key(f.name)) {
            errors.push(format!("{prefix}{}", f.name), missing);
        }
    }
}

pub(super) fn valid_secret_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

pub(super) fn valid_cookie_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// One field's value being read; what is wrong with it is reported under
/// the field's name.
pub(super) struct Input<'a> {
    pub(super) field: &'a str,
    pub(super) value: &'a Value,
    pub(super) errors: &'a mut Errors,
}

impl Input<'_> {
    /// Reports `message` about this field.
    pub(super) fn report(&mut self, message: impl Into<String>) {
        self.errors.push(self.field, message);
    }

    /// Reports `message`; `None`, for readers to return.
    pub(super) fn fail<T>(&mut self, message: impl Into<String>) -> Option<T> {
        self.report(message);
        None
    }

    /// `table` (this field's value) read with `fields` into `draft`, each
    /// error under `<field>.<name>`: `true` when no field was wrong. What a
    /// value that is no table means is the caller's.
    pub(super) fn read_fields<D, S>(&mut self, table: &Map<String, Value>, fields: &[Field<D, S>], draft: &mut D) -> bool {
        let before = self.errors.list.len();
        read_table(table, fields, draft, self.errors, &format!("{}.", self.field));
        self.errors.list.len() == before
    }

    /// A whole number in `range`, `what` naming it in the error ("number of
    /// bytes").
    pub(super) fn number<T: TryFrom<u64>>(&mut self, range: RangeInclusive<u64>, what: &str) -> Option<T> {
        match self.value.as_u64().filter(|n| range.contains(n)).map(T::try_from) {
            Some(Ok(n)) => Some(n),
            _ => self.fail(format!("must be a {what} from {} to {}", range.start(), range.end())),
        }
    }

    /// A value of `T`, given by its name ([`Named::NAMES`]); the error
    /// lists the names in table order, `first` (if any) moved to the front.
    pub(super) fn choice<T: Named>(&mut self, first: Option<T>) -> Option<T> {
        if let Some(value) = self.value.as_str().and_then(T::from_name) {
            return Some(value);
        }
        self.refuse_choice(T::names(), first.map(T::name));
        None
    }

    /// Reports a name that is none of `names` (`first` listed first): one
    /// function for every [`Named`] type, not one each.
    fn refuse_choice(&mut self, mut names: Vec<&'static str>, first: Option<&'static str>) {
        if let Some(first) = first {
            names.retain(|name| *name != first);
            names.insert(0, first);
        }
        let quoted: Vec<String> = names.iter().map(|name| format!("\"{name}\"")).collect();
        let listed = match quoted.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        self.report(format!("must be {listed}"));
    }

    /// `true` or `false`.
    pub(super) fn flag(&mut self) -> Option<bool> {
        match self.value.as_bool() {
            Some(on) => Some(on),
            None => self.fail("must be true or false"),
        }
    }

    /// A string that `valid` accepts; `message` otherwise.
    pub(super) fn text(&mut self, valid: impl Fn(&str) -> bool, message: &str) -> Option<String> {
        match self.value.as_str().filter(|text| valid(text)) {
            Some(text) => Some(text.to_string()),
            None => self.fail(message),
        }
    }

    /// A list of strings that `valid` accepts as a whole; `message`
    /// otherwise.
    pub(super) fn strings(&mut self, valid: impl Fn(&[String]) -> bool, message: &str) -> Option<Vec<String>> {
        let list: Option<Vec<String>> = match self.value.as_array() {
            Some(items) => items.iter().map(|v| v.as_str().map(str::to_string)).collect(),
            None => None,
        };
        match list.filter(|list| valid(list)) {
            Some(list) => Some(list),
            None => self.fail(message),
        }
    }

    /// A window or timeout such as `"60s"`; `examples` in the error for a
    /// value that is not a string.
    pub(super) fn duration(&mut self, examples: &str) -> Option<NonZeroU64> {
        match self.value.as_str().map(parse_duration_ms) {
            Some(Ok(ms)) => Some(ms),
            Some(Err(e)) => self.fail(e.to_string()),
            None => self.fail(format!("must be a duration such as {examples}")),
        }
    }

    /// A non-empty list of key parts such as `["ip", "header:x-api-key"]`.
    /// Each bad part is reported at `field[i]`; the good ones are returned
    /// (none when the list itself is wrong).
    pub(super) fn key_parts(&mut self) -> Vec<KeyPart> {
        let Some(list) = self.strings(|list| !list.is_empty(), "must be a non-empty list such as [\"ip\"]") else {
            return Vec::new();
        };
        let mut parts = Vec::new();
        for (i, item) in list.iter().enumerate() {
            match KeyPart::parse(item) {
                Ok(part) => parts.push(part),
                Err(message) => self.errors.push(format!("{}[{i}]", self.field), message),
            }
        }
        parts
    }

    /// A non-empty list of parameter sources: `"query"`, `"body"`,
    /// `"cookie"`.
    pub(super) fn sources(&mut self) -> Option<Sources> {
        let names = [Source::Query, Source::Body, Source::Cookie];
        let message = "must be a non-empty list of \"query\", \"body\" and \"cookie\"";
        let list = self.strings(|list| !list.is_empty() && list.iter().all(|s| names.iter().any(|n| n.name() == s)), message)?;
        Some(names.iter().filter(|n| list.iter().any(|s| s == n.name())).fold(Sources::NONE, |set, n| set.with(*n)))
    }

    /// A non-empty list of HTTP statuses, 100 to 599.
    pub(super) fn statuses(&mut self) -> Option<Vec<u16>> {
        let list = match self.value.as_array() {
            Some(list) if !list.is_empty() => list,
            _ => return self.fail("must be a non-empty list of HTTP statuses such as [401, 403]"),
        };
        let status = |v: &Value| v.as_u64().filter(|s| (100..=599).contains(s)).and_then(|s| u16::try_from(s).ok());
        match list.iter().map(status).collect() {
            Some(statuses) => Some(statuses),
            None => self.fail("must be a list of HTTP statuses from 100 to 599"),
        }
    }

    /// A table of `name = condition` on `target`; `shape` is the error
    /// when it is not a table. Each bad condition is reported at
    /// `field.name`.
    pub(super) fn conditions(&mut self, target: Target, shape: &str) -> Option<Vec<Condition>> {
        let Some(table) = self.value.as_object() else {
            return self.fail(shape);
        };
        let mut conditions = Vec::new();
        for (name, value) in table {
            match condition(target, name, value) {
                Ok(condition) => conditions.push(condition),
                Err(message) => self.errors.push(format!("{}.{name}", self.field), message),
            }
        }
        Some(conditions)
    }
}

/// One condition: `"v"` equals, `["a", "b"]` any of, `true` present.
pub(super) fn condition(target: Target, name: &str, value: &Value) -> Result<Condition, &'static str> {
    let test = match value {
        Value::String(v) => Test::Equals(v.clone()),
        Value::Bool(true) => Test::Present,
        Value::Array(items) => {
            let list: Option<Vec<String>> = items.iter().map(|v| v.as_str().map(str::to_string)).collect();
            match list {
                Some(list) if !list.is_empty() => Test::AnyOf(list),
                _ => return Err("an any-of condition must be a non-empty list of strings"),
            }
        }
        _ => return Err("must be a string (equals), a list of strings (any of) or true (present)"),
    };
    Condition::new(target, name, test)
}

pub(super) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The methods of RFC 9110 §9 and PATCH (RFC 5789), matched in any case.
pub(crate) const STANDARD_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/// A standard method in any case, or a custom one written as it is sent:
/// upper-case letters only (`PSOT` passes, with a warning from
/// [`crate::config::Config::warnings`]; `psot` does not).
pub(super) fn valid_method(method: &str) -> bool {
    is_standard_method(method) || (!method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase()))
}

pub(super) fn is_standard_method(method: &str) -> bool {
    STANDARD_METHODS.iter().any(|m| m.eq_ignore_ascii_case(method))
}

/// Visible ASCII without `:` (RFC 9110 §5.1 allows less, but nothing more
/// can be sent).
pub(super) fn valid_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
}

pub(super) fn valid_suffix(suffix: &str) -> bool {
    let s = suffix.trim_start_matches('.');
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// `/.tollgate`: a canonical path, not the root, without a trailing slash.
pub(super) fn valid_admin_prefix(prefix: &str) -> bool {
    prefix.len() > 1
        && prefix.starts_with('/')
        && !prefix.ends_with('/')
        && crate::request::canon::canonical_path(prefix).as_deref() == Ok(prefix)
}
