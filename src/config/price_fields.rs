//! The fields of a `metering.price` table, read into a
//! [`PriceTable`]; what a table means is [`crate::config::price`]'s. A
//! table is written in the rule, or once at the top level under a name
//! (`[vars.TOLLGATE.prices.openai]`, [`read_prices`]) that rules give as
//! `metering.price = "openai"` ([`Pricing`]).

use crate::config::policy::Named;
use crate::config::price::{millionths, Price, PriceTable, Rate, Unpriced, MOST};
use crate::config::reader::{infos, Errors, Field, FieldInfo, Input, Shape};
use serde_json::Value;

/// `price`'s table while it is read.
#[derive(Default)]
struct TableDraft {
    currency: Option<String>,
    models: Vec<(String, Price)>,
    unpriced: Option<Unpriced>,
}

/// A model's prices while they are read.
#[derive(Default)]
struct PriceDraft {
    input: Option<Rate>,
    cached_input: Option<Rate>,
    output: Option<Rate>,
    cache_write: Option<Rate>,
}

#[inline(never)]
fn amount(i: &mut Input<'_>) -> Option<Rate> {
    millionths(i.value).or_else(|| i.fail("must be a price per million tokens from 0 to 1000000, with at most 6 decimals, e.g. 0.15"))
}

fn amount_schema() -> Value {
    serde_json::json!({ "type": "number", "minimum": 0, "maximum": MOST })
}

const PRICE_FIELDS: &[Field<PriceDraft>] = &[
    Field::required("input", "missing", Shape::Custom(amount_schema), "Input tokens, per million, in the table's currency.", |d, i| d.input = amount(i)),
    Field::optional("cached_input", Shape::Custom(amount_schema), "Input read from the provider's cache, per million (default: input).", |d, i| d.cached_input = amount(i)),
    Field::required("output", "missing", Shape::Custom(amount_schema), "Output tokens (reasoning included), per million.", |d, i| d.output = amount(i)),
    Field::optional("cache_write", Shape::Custom(amount_schema), "Input written to the provider's cache (Anthropic's cache_creation_input_tokens), per million (default: input).", |d, i| d.cache_write = amount(i)),
];

fn price_infos() -> Vec<FieldInfo> {
    infos(PRICE_FIELDS)
}

const MODELS_SHAPE: Shape = Shape::Map(&Shape::Table(price_infos));

const TABLE_FIELDS: &[Field<TableDraft>] = &[
    Field::required("currency", "missing", Shape::Text("^[A-Za-z0-9_-]{1,16}$"), "The unit prices and money limits are in, e.g. \"JPY\", \"USD\" (a name; charges are whole micro-units of it).", |d, i| {
        d.currency = i.text(|t| (1..=16).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "must be a short name such as \"JPY\" or \"USD\"");
    }),
    Field::required("models", "missing", MODELS_SHAPE, "Each model's prices per million tokens, by the name the answer gives (`model`, Gemini's `modelVersion`): an exact name, or a prefix and * (\"gpt-4o*\"; \"*\" any named model). An exact name wins, else the longest prefix.", |d, i| {
        d.models = read_models(i);
    }),
    Field::optional("unpriced", Shape::Names(Unpriced::names), "A model no pattern matches, or an answer naming none: \"highest\" (charged at the table's highest prices, the default) or \"refuse\" (the same, and a stream is cut there).", |d, i| {
        d.unpriced = i.choice::<Unpriced>(None);
    }),
];

/// The fields of a `price` table (for the schema).
pub(super) fn table_infos() -> Vec<FieldInfo> {
    infos(TABLE_FIELDS)
}

#[inline(never)]
fn read_models(input: &mut Input<'_>) -> Vec<(String, Price)> {
    let Some(table) = input.value.as_object().filter(|t| !t.is_empty()) else {
        input.report("must be a non-empty table of model = { input, output }, such as { \"gpt-4o-mini*\" = { input = 0.15, output = 0.6 } }");
        return Vec::new();
    };
    let mut models = Vec::new();
    for (pattern, value) in table {
        let field = format!("{}.{pattern}", input.field);
        let mut sub = Input { field: &field, value, errors: input.errors };
        let valid = pattern.len() <= 64 && !pattern.is_empty() && pattern.bytes().all(|b| b.is_ascii_graphic()) && !pattern.trim_end_matches('*').contains('*') && pattern.matches('*').count() <= 1;
        if !valid {
            sub.report("a model name, or a prefix and one * at its end, in printable ASCII without spaces, at most 64 bytes");
            continue;
        }
        let Some(fields) = value.as_object() else {
            sub.report("must be a table { input, output }");
            continue;
        };
        let mut draft = PriceDraft::default();
        if sub.read_fields(fields, PRICE_FIELDS, &mut draft) {
            if let (Some(input), Some(output)) = (draft.input, draft.output) {
                models.push((pattern.clone(), Price { input, cached_input: draft.cached_input.unwrap_or(input), output, cache_write: draft.cache_write.unwrap_or(input) }));
            }
        }
    }
    models
}

/// Reads `metering.price`; `None` (reported under its field) when it is
/// not one.
pub(super) fn read_table(input: &mut Input<'_>) -> Option<PriceTable> {
    let Some(table) = input.value.as_object() else {
        return input.fail("must be a table { currency = \"JPY\", models = { \"gpt-4o-mini*\" = { input = 22.5, output = 90 } } }");
    };
    let mut draft = TableDraft::default();
    if !input.read_fields(table, TABLE_FIELDS, &mut draft) || draft.models.is_empty() {
        return None;
    }
    Some(PriceTable { currency: draft.currency?, models: draft.models, unpriced: draft.unpriced.unwrap_or(Unpriced::Highest) })
}


/// A shared table's name: 1-64 of `A-Z a-z 0-9 _ -`.
pub(super) const NAME_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `metering.price` as written: a table, or a shared table's name.
pub(super) enum PriceRef {
    Own(PriceTable),
    Named(String),
}

/// `metering.price`'s value: a table, or a name (resolved by [`Pricing::resolve`]).
pub(super) fn read_price(input: &mut Input<'_>) -> Option<PriceRef> {
    match input.value.as_str() {
        Some(name) if valid_name(name) => Some(PriceRef::Named(name.to_string())),
        Some(_) => input.fail("must be the name of a table in the top-level prices (1-64 of A-Z a-z 0-9 _ -), or a table { currency, models }"),
        None => read_table(input).map(PriceRef::Own),
    }
}

/// What a rule's money fields are read with, found before its fields
/// (which are read in any order): the unit its `spend` limits ask for
/// ([`crate::config::limits::money_step`]) and the shared table its
/// `metering.price` names, if it names one (`Err`: the names there are).
pub(super) struct Pricing {
    pub(super) step: u64,
    pub(super) named: Option<(String, Result<PriceTable, String>)>,
}

impl Default for Pricing {
    fn default() -> Pricing {
        Pricing { step: 1, named: None }
    }
}

impl Pricing {
    /// For the rule `rule` (as written) among the shared `tables`.
    pub(super) fn of(rule: &serde_json::Map<String, Value>, tables: &[(String, PriceTable)]) -> Pricing {
        let name = rule.get("metering").and_then(|m| m.get("price")).and_then(Value::as_str);
        let named = name.map(|name| {
            let found = tables.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
            let known: Vec<&str> = tables.iter().map(|(n, _)| n.as_str()).collect();
            (name.to_string(), found.ok_or_else(|| if known.is_empty() { "none".to_string() } else { known.join(", ") }))
        });
        Pricing { step: crate::config::limits::money_step(rule), named }
    }

    /// The table `price` stands for, with its shared name; `None`
    /// (reported under `field`) for a name no valid shared table has.
    pub(super) fn resolve(&self, price: PriceRef, field: &str, errors: &mut Errors) -> Option<(PriceTable, Option<String>)> {
        let name = match price {
            PriceRef::Own(table) => return Some((table, None)),
            PriceRef::Named(name) => name,
        };
        let known = match &self.named {
            Some((n, Ok(table))) if *n == name => return Some((table.clone(), Some(name))),
            Some((_, Err(known))) => known.as_str(),
            _ => "none",
        };
        errors.push(field, format!("no valid table `{name}` in the top-level prices (its valid tables: {known})"));
        None
    }
}

/// The top-level `prices`: each shared table by name, read as a rule's
/// (errors under `prices.NAME`, once); the valid ones, in config order.
pub(super) fn read_prices(value: Option<&Value>, errors: &mut Errors) -> Vec<(String, PriceTable)> {
    let Some(value) = value else { return Vec::new() };
    let Some(tables) = value.as_object() else {
        errors.push("prices", "must be a table of name = { currency, models }, such as { openai = { currency = \"USD\", models = { \"gpt-4o-mini*\" = { input = 0.15, output = 0.6 } } } }");
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, table) in tables {
        let field = format!("prices.{name}");
        if !valid_name(name) {
            errors.push(field, "a table's name is 1-64 of A-Z a-z 0-9 _ - (rules name it in metering.price)");
            continue;
        }
        if let Some(table) = read_table(&mut Input { field: &field, value: table, errors }) {
            out.push((name.clone(), table));
        }
    }
    out
}
