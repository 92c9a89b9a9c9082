//! Prices per model: a usage rule's `metering.price` table,
//! `{ currency = "JPY", unpriced = "highest", models = { "gpt-4o-mini*" =
//! { input = 22.5, cached_input = 11.25, output = 90 } } }`, each price in
//! the operator's currency per million tokens (at most 6 decimals). The
//! rule then counts money: whole micro-units of the currency, so every sum
//! is an exact integer ([`PriceTable::charge`]).
//!
//! # Which price applies
//! The model is the one the *answer* names (never the request's: a client
//! may ask for a cheap model and be served a dear one). A pattern is a
//! model's name, or a prefix and `*` (`"gpt-4o*"`; `"*"` alone prices any
//! named model). An exact name wins, else the longest prefix: so
//! `gpt-4o-mini-2024-07-18` takes `gpt-4o-mini*`'s price, not `gpt-4o*`'s.
//! A model name that no pattern matches, that is not printable ASCII, that
//! is longer than 64 bytes (the scanner keeps no more) or that is missing,
//! are priced by `unpriced` (an answer naming several models pays, kind by kind, the dearest of their prices):
//! - `"highest"` (the default): each kind of token at the highest price
//!   the table has for it (every model named is priced so, the dearest
//!   wins);
//! - `"refuse"`: the same charge, and a stream is cut at the event that
//!   named the model (a JSON body has passed by then: it is charged).
//!
//! # What is reserved
//! `reserve` and `max` stay in tokens (what the origin is asked to cap an
//! answer at); they are priced at the table's highest price of any kind
//! ([`PriceTable::ceiling`]), so an answer of at most `reserve` tokens is
//! never charged more than its reservation whatever model serves it, and
//! `reserve = max` keeps a money budget exact.
//!
//! # The unit counted
//! Counters hold `u32` units, so micro-units fit at most 4294.967295 of
//! the currency per window. A rule with a larger `spend` (its own or an
//! override's; at most [`MOST`]) counts in milli-units instead
//! ([`UNITS`], [`step_for`]): each answer's charge, and its priced
//! reserve and max, are rounded *up* to the milli-unit, so the rule may
//! admit less than its limit by under one milli-unit per answer, never
//! more. The counters and their protocol are unchanged (a count is a
//! count); the unit is named in `RateLimit-Policy`'s `qu` (`milli-USD`).
//! Shared tables: the top-level `prices` names tables a rule's
//! `metering.price = "name"` refers to ([`crate::config::price_fields`]).

use crate::config::policy::Named;
use serde_json::Value;

/// A price per million tokens, in millionths of the currency unit (so one
/// token costs `rate / 1,000,000` micro-units).
pub(crate) type Rate = u64;

/// The most a price may be, per million tokens (a million currency units).
pub(crate) const MOST: f64 = 1_000_000.0;

/// The units a priced rule may count in, finest first: micro-units of its
/// currency per counted unit, and the unit's prefix (`micro-USD`).
pub(crate) const UNITS: [(u64, &str); 2] = [(1, "micro-"), (1_000, "milli-")];

/// The finest unit of [`UNITS`] in which `largest` micro-units (a rule's
/// largest `spend`) fit a `u32` counter: micro-units up to 4294.967295,
/// milli-units above (up to [`MOST`], whose milli-units fit).
pub(crate) fn step_for(largest: u64) -> u64 {
    UNITS.iter().map(|(step, _)| *step).find(|step| largest / step <= u64::from(u32::MAX)).unwrap_or(UNITS[UNITS.len() - 1].0)
}

/// The unit named in `RateLimit-Policy`'s `qu`: `micro-JPY`, `milli-USD`.
pub(crate) fn unit_name(step: u64, currency: &str) -> String {
    let prefix = UNITS.iter().find(|(s, _)| *s == step).map_or("", |(_, p)| *p);
    format!("{prefix}{currency}")
}

/// The prices of one model (or pattern), per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Price {
    pub(crate) input: Rate,
    /// Input read from a cache (default: `input`).
    pub(crate) cached_input: Rate,
    /// Output, reasoning included.
    pub(crate) output: Rate,
    /// Input written to a cache (Anthropic's cache creation; default `input`).
    pub(crate) cache_write: Rate,
}

impl Price {
    /// Each kind at the larger of the two prices.
    pub(crate) fn dearest(self, other: Price) -> Price {
        Price { input: self.input.max(other.input), cached_input: self.cached_input.max(other.cached_input), output: self.output.max(other.output), cache_write: self.cache_write.max(other.cache_write) }
    }
}

/// What a model the table cannot price costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unpriced {
    Highest,
    Refuse,
}

impl Named for Unpriced {
    const NAMES: &'static [(&'static str, Self)] = &[("highest", Unpriced::Highest), ("refuse", Unpriced::Refuse)];
}

/// Token counts an answer reported, by how they are billed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Billed {
    /// All input, cached and cache writes included.
    pub(crate) input: u64,
    /// Of `input`, read from a cache.
    pub(crate) cached: u64,
    /// Of `input`, written to a cache.
    pub(crate) cache_write: u64,
    pub(crate) output: u64,
}

/// A rule's price table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PriceTable {
    /// The operator's name for the unit (`JPY`, `USD`, `credits`).
    pub(crate) currency: String,
    /// (pattern, price), in config order.
    pub(crate) models: Vec<(String, Price)>,
    pub(crate) unpriced: Unpriced,
}

impl PriceTable {
    /// Which of `models` prices `model` (as the answer spelled it): the
    /// exact name, else the longest prefix `*`; `None` when the table
    /// cannot price it (see the module's doc).
    pub(crate) fn pattern(&self, model: &[u8]) -> Option<usize> {
        if model.is_empty() || !model.iter().all(|b| b.is_ascii_graphic()) {
            return None;
        }
        let mut best: Option<(usize, usize)> = None;
        for (i, (pattern, _)) in self.models.iter().enumerate() {
            let length = match pattern.strip_suffix('*') {
                None if pattern.as_bytes() == model => return Some(i),
                Some(prefix) if model.starts_with(prefix.as_bytes()) => prefix.len(),
                _ => continue,
            };
            if best.is_none_or(|(longest, _)| length > longest) {
                best = Some((length, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Each kind at the highest price the table has for it.
    pub(crate) fn highest(&self) -> Price {
        self.models.iter().fold(Price::default(), |most, (_, price)| most.dearest(*price))
    }

    /// The highest price of any kind: what a token of unknown kind and
    /// model may cost.
    pub(crate) fn ceiling(&self) -> Rate {
        let h = self.highest();
        h.input.max(h.cached_input).max(h.output).max(h.cache_write)
    }

    /// `tokens` of unknown kind at [`PriceTable::ceiling`], in units of
    /// `step` micro-units (rounded up); `None` past `u32::MAX` of them.
    pub(crate) fn reserve_units(&self, tokens: u32, step: u64) -> Option<u32> {
        u32::try_from(PriceTable::charge(Price { output: self.ceiling(), ..Price::default() }, Billed { output: u64::from(tokens), ..Billed::default() }).div_ceil(step)).ok()
    }

    /// What `tokens` cost at `price`, in micro-units, rounded up once per
    /// answer: Σ tokens × rate / 1,000,000. Cached input and cache writes
    /// are taken out of the input (each at most what remains of it), the
    /// rest is input at its price.
    pub(crate) fn charge(price: Price, tokens: Billed) -> u64 {
        let cached = tokens.cached.min(tokens.input);
        let written = tokens.cache_write.min(tokens.input - cached);
        let plain = tokens.input - cached - written;
        // n × rate / 1e6 = n × ⌊rate / 1e6⌋ + n × (rate mod 1e6) / 1e6: the
        // whole parts, then the fractions summed (each below n × 1e6)
        // and rounded up once; u64 throughout, saturating.
        let (mut whole, mut fraction) = (0u64, 0u64);
        for (n, rate) in [(plain, price.input), (cached, price.cached_input), (written, price.cache_write), (tokens.output, price.output)] {
            whole = whole.saturating_add(n.saturating_mul(rate / 1_000_000));
            fraction = fraction.saturating_add(n.saturating_mul(rate % 1_000_000));
        }
        whole.saturating_add(fraction.div_ceil(1_000_000))
    }
}

/// A decimal amount in millionths (`0.15` is 150,000): `None` when it is
/// negative, above [`MOST`], or has more than 6 decimals.
pub(crate) fn millionths(value: &Value) -> Option<u64> {
    let x = value.as_f64().filter(|x| (0.0..=MOST).contains(x))?;
    let scaled = x * 1_000_000.0;
    let whole = scaled.round();
    ((scaled - whole).abs() < 1e-3).then_some(whole as u64)
}

/// A decimal amount written as text (`200`, `0.5`, `12.345678`) in
/// millionths, exactly (no float): `None` for a sign, an exponent, more
/// than 6 decimals, or more than [`MOST`].
pub(crate) fn millionths_of_text(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 6 || (text.contains('.') && fraction.is_empty()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = format!("{fraction:0<6}").parse().ok()?;
    let micro = whole.checked_mul(1_000_000)?.checked_add(fraction)?;
    (micro as f64 <= MOST * 1_000_000.0).then_some(micro)
}

/// Millionths written back as the decimal they were read from.
pub(crate) fn decimal(millionths: u64) -> Value {
    if millionths.is_multiple_of(1_000_000) {
        return (millionths / 1_000_000).into();
    }
    serde_json::Number::from_f64(millionths as f64 / 1_000_000.0).map_or(Value::Null, Value::Number)
}

/// An amount of money for a person, exact: `micro` micro-units of
/// `currency` as a decimal with no trailing zeros (`12345678` →
/// `12.345678 JPY`, `200000000` → `200 JPY`, `0` → `0 JPY`). Integer
/// arithmetic only, so a count of any size reads exactly (an `f64`
/// would round past 2^53 micro-units).
pub(crate) fn money_text(micro: u64, currency: &str) -> String {
    let (whole, fraction) = (micro / 1_000_000, micro % 1_000_000);
    if fraction == 0 {
        return format!("{whole} {currency}");
    }
    let digits = format!("{fraction:06}");
    format!("{whole}.{} {currency}", digits.trim_end_matches('0'))
}

/// The table as it is written in the config.
pub(crate) fn written(table: &PriceTable) -> Value {
    let mut models = serde_json::Map::new();
    for (pattern, p) in &table.models {
        let mut fields = serde_json::Map::new();
        for (name, rate) in [("input", p.input), ("cached_input", p.cached_input), ("output", p.output), ("cache_write", p.cache_write)] {
            fields.insert(name.into(), decimal(rate));
        }
        models.insert(pattern.clone(), Value::Object(fields));
    }
    let mut out = serde_json::Map::new();
    out.insert("currency".into(), Value::String(table.currency.clone()));
    out.insert("models".into(), Value::Object(models));
    out.insert("unpriced".into(), table.unpriced.name().into());
    Value::Object(out)
}

/// One model's prices: `in 22.5 (cached 11.25, cache write 22.5) out 90`.
pub(crate) fn price_words(p: &Price) -> String {
    let text = |rate: Rate| decimal(rate).to_string();
    format!("in {} (cached {}, cache write {}) out {}", text(p.input), text(p.cached_input), text(p.cache_write), text(p.output))
}

/// The table in words, for `explain`: `JPY per million tokens: gpt-4o-mini*
/// in 22.5 (cached 11.25, cache write 22.5) out 90; unpriced: highest`.
pub(crate) fn words(table: &PriceTable) -> String {
    let models: Vec<String> = table.models.iter().map(|(pattern, p)| format!("{pattern} {}", price_words(p))).collect();
    format!("{} per million tokens: {}; a model none prices: {}", table.currency, models.join("; "), table.unpriced.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PriceTable {
        let p = |input, output| Price { input, cached_input: input / 2, output, cache_write: input + input / 4 };
        PriceTable { currency: "JPY".into(), models: vec![("gpt-4o*".into(), p(375_000_000, 1_500_000_000)), ("gpt-4o-mini*".into(), p(22_500_000, 90_000_000)), ("o3".into(), p(300_000_000, 1_200_000_000))], unpriced: Unpriced::Highest }
    }

    /// The exact name, else the longest prefix; a name spelled to look
    /// like another's (`gpt-4o-mini` with a space, a non-ASCII letter) is
    /// unpriced, never the cheaper match.
    #[test]
    fn the_most_specific_pattern_prices_a_model_and_odd_spellings_are_unpriced() {
        let t = table();
        let input = |m: &[u8]| t.pattern(m).map(|i| t.models[i].1.input);
        assert_eq!(input(b"gpt-4o-mini-2024-07-18"), Some(22_500_000));
        assert_eq!(input(b"gpt-4o-2024-08-06"), Some(375_000_000));
        assert_eq!(input(b"gpt-4o"), Some(375_000_000));
        assert_eq!(input(b"o3"), Some(300_000_000));
        for odd in [&b"o3-pro"[..], b"", b"gpt-4o-mini x", b"gpt-4o-mini\xff", b"GPT-4O-MINI", b" gpt-4o-mini"] {
            assert_eq!(input(odd), None, "{:?}", String::from_utf8_lossy(odd));
        }
        assert_eq!(t.highest(), Price { input: 375_000_000, cached_input: 187_500_000, output: 1_500_000_000, cache_write: 468_750_000 });
        assert_eq!(t.ceiling(), 1_500_000_000);
        assert_eq!(t.reserve_units(4_024, 1), Some(6_036_000), "4,024 tokens at 1,500 per million: 6.036 units");
        assert_eq!(t.reserve_units(4_024, 1_000), Some(6_036), "in milli-units, rounded up");
        assert_eq!(t.reserve_units(4_025, 1_000), Some(6_038), "6.0375 units: 6,037.5 milli rounded up");
        assert_eq!(t.reserve_units(3_000_000, 1), None, "past u32::MAX micro-units");
        assert_eq!(t.reserve_units(3_000_000, 1_000), Some(4_500_000), "4,500 units fit in milli-units");
    }

    /// Σ tokens × rate, each kind at its own price, rounded up once.
    #[test]
    fn a_charge_is_the_exact_sum_rounded_up_to_the_micro_unit() {
        let t = table();
        let p = t.models[t.pattern(b"gpt-4o-mini").unwrap()].1;
        let charge = |input, cached, cache_write, output| PriceTable::charge(p, Billed { input, cached, cache_write, output });
        // 3,000 × 22.5 + 1,024 × 90 per million: 0.067500 + 0.092160 units.
        assert_eq!(charge(3_000, 0, 0, 1_024), 159_660);
        // 1,000 of the input cached at 11.25, 500 written at 28.125.
        assert_eq!(charge(3_000, 1_000, 500, 0), 59_063, "33,750 + 11,250 + 14,062.5 rounded up");
        assert_eq!(charge(1, 0, 0, 0), 23, "22.5 micro-units rounded up");
        assert_eq!(charge(10, 50, 50, 0), 113, "cached past the input is capped at it");
        assert_eq!(charge(0, 0, 0, 0), 0);
        assert_eq!(PriceTable::charge(Price { input: u64::MAX, cached_input: 0, output: u64::MAX, cache_write: 0 }, Billed { input: u64::MAX, cached: 0, cache_write: 0, output: u64::MAX }), u64::MAX);
    }

    #[test]
    fn money_is_said_exactly_in_its_currency() {
        assert_eq!(money_text(12_345_678, "JPY"), "12.345678 JPY");
        assert_eq!(money_text(200_000_000, "JPY"), "200 JPY");
        assert_eq!(money_text(0, "USD"), "0 USD");
        assert_eq!(money_text(1, "USD"), "0.000001 USD");
        assert_eq!(money_text(9_620_285_000, "credits"), "9620.285 credits", "milli-units times their step");
        assert_eq!(money_text(u64::MAX, "X"), "18446744073709.551615 X", "no float rounding");
    }

    #[test]
    fn decimals_are_read_to_six_places_and_written_back_as_read() {
        for (value, read) in [(serde_json::json!(0.15), Some(150_000)), (serde_json::json!(22.5), Some(22_500_000)), (serde_json::json!(90), Some(90_000_000)), (serde_json::json!(0.000001), Some(1)), (serde_json::json!(0.0000001), None), (serde_json::json!(-1), None), (serde_json::json!("1"), None), (serde_json::json!(2_000_000), None)] {
            assert_eq!(millionths(&value), read, "{value}");
            if let Some(n) = read {
                assert_eq!(millionths(&decimal(n)), Some(n));
            }
        }
    }

    fn school(price: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
        serde_json::json!({ "rules": [{ "name": "money", "path": "/v1/*", "key": ["header:x-school"], "limits": limits, "counting": { "mode": "response", "reservation_ttl": "10m" },
            "metering": { "usage": "openai", "reserve": 4024, "max": 4024, "price": price } }] })
    }

    fn yen() -> serde_json::Value {
        serde_json::json!({ "currency": "JPY", "models": { "gpt-4o-mini*": { "input": 22.5, "cached_input": 11.25, "output": 90 }, "gpt-4o*": { "input": 375, "output": 1500 } } })
    }

    /// A priced rule reads spend limits in micro-units, reserves its
    /// tokens at the table's ceiling, says its unit, and is described as
    /// it was written.
    #[test]
    fn a_priced_rule_counts_micro_units_and_is_described_as_read() {
        use crate::config::Config;
        let config = Config::from_json(&school(yen(), serde_json::json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }, { "spend": 10.5, "window": "1m" }]))).unwrap();
        let r = &config.rules[0];
        let u = r.usage.as_ref().unwrap();
        assert_eq!((r.limits[0].requests.get(), r.limits[1].requests.get()), (200_000_000, 10_500_000));
        assert_eq!((u.reserve, u.max, r.cost, u.unit()), (6_036_000, 6_036_000, 6_036_000, "micro-JPY"), "4,024 tokens at 1,500 yen per million");
        assert!(r.counts_money());
        let described = crate::config::describe::rule_json(r);
        assert_eq!(described["limits"], serde_json::json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }, { "spend": 10.5, "window": "1m" }]));
        assert_eq!((&described["metering"]["reserve"], &described["metering"]["price"]["unpriced"], described["metering"].get("count")), (&serde_json::json!(4024), &serde_json::json!("highest"), None));
        let again = Config::from_json(&serde_json::json!({ "rules": [described] })).unwrap();
        assert_eq!((&again.rules[0].usage, &again.rules[0].limits), (&r.usage, &r.limits), "read back the same");
        let words = crate::config::words::usage_text(u);
        assert!(words.contains("micro-JPY") && words.contains("gpt-4o-mini* in 22.5 (cached 11.25, cache write 22.5) out 90"), "{words}");
    }

    #[test]
    fn a_wrong_price_table_or_money_limit_is_refused_naming_the_field_once() {
        use crate::config::Config;
        let day = serde_json::json!([{ "spend": 200, "window": "1d" }]);
        // (A wrong metering is its own error: reservation_ttl, kept, is not refused for it too.)
        let errors = |config: serde_json::Value| Config::from_json(&config).err().unwrap_or_default().iter().map(|e| e.to_string()).collect::<Vec<_>>();
        let mut cases = vec![
            (school(serde_json::json!({ "models": { "a": { "input": 1, "output": 2 } } }), day.clone()), "metering.price.currency"),
            (school(serde_json::json!({ "currency": "JPY", "models": {} }), day.clone()), "metering.price.models"),
            (school(serde_json::json!({ "currency": "JPY", "models": { "a": { "input": 1 } } }), day.clone()), "metering.price.models.a.output"),
            (school(serde_json::json!({ "currency": "JPY", "models": { "a": { "input": 0.0000001, "output": 1 } } }), day.clone()), "metering.price.models.a.input"),
            (school(serde_json::json!({ "currency": "JPY", "models": { "a*b": { "input": 1, "output": 1 } } }), day.clone()), "metering.price.models.a*b"),
            (school(serde_json::json!({ "currency": "JPY", "models": { "a": { "input": 1, "output": 1 } }, "unpriced": "free" }), day.clone()), "metering.price.unpriced"),
            (school(yen(), serde_json::json!([{ "requests": 200_000_000, "window": "1d" }])), "limits"),
            (school(yen(), serde_json::json!([{ "spend": 200, "requests": 5, "window": "1d" }])), "limits[0].spend"),
            (school(yen(), serde_json::json!([{ "spend": 1_000_001, "window": "1d" }])), "limits[0].spend"),
        ];
        let mut header = school(yen(), day.clone());
        header["rules"][0]["metering"] = serde_json::json!({ "header": "x-t", "reserve": 5, "max": 5, "price": yen() });
        cases.push((header, "metering.price"));
        let mut dear = school(serde_json::json!({ "currency": "JPY", "models": { "a": { "input": 1, "output": 1_000_000 } } }), day.clone());
        dear["rules"][0]["metering"]["max"] = serde_json::json!(5000);
        cases.push((dear, "metering.max"));
        let mut count = school(yen(), day.clone());
        count["rules"][0]["metering"]["count"] = serde_json::json!("output");
        cases.push((count, "metering.count"));
        let mut unpriced = school(yen(), day);
        unpriced["rules"][0]["metering"].as_object_mut().unwrap().remove("price");
        cases.push((unpriced, "limits"));
        for (config, field) in cases {
            let errs = errors(config.clone());
            assert_eq!(errs.len(), 1, "{config}: {errs:?}");
            assert!(errs[0].starts_with(&format!("rule `money`, field `{field}`: ")), "{field}: {errs:?}");
        }
    }

    /// `tollgate diff` says a price table's changes, and a change of unit.
    #[test]
    fn diff_states_a_price_change_and_a_change_of_unit() {
        use crate::config::Config;
        let day = serde_json::json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }]);
        let old = Config::from_json(&school(yen(), day.clone())).unwrap();
        let mut dearer = yen();
        dearer["models"]["gpt-4o-mini*"]["output"] = serde_json::json!(120);
        dearer["models"]["o3"] = serde_json::json!({ "input": 300, "output": 1200 });
        dearer["unpriced"] = serde_json::json!("refuse");
        let new = Config::from_json(&school(dearer, day)).unwrap();
        let report = crate::tools::diff::report(&crate::tools::diff::diff(&old, &new));
        assert!(report.contains("`gpt-4o-mini*` in 22.5 (cached 11.25, cache write 22.5) out 90 -> in 22.5 (cached 11.25, cache write 22.5) out 120") && report.contains("`o3` added") && report.contains("unpriced highest -> refuse"), "{report}");
        let tokens = Config::from_json(&serde_json::json!({ "rules": [{ "name": "money", "path": "/v1/*", "key": ["header:x-school"], "limits": [{ "requests": 200_000_000, "window": "day", "time_zone": "Asia/Tokyo" }], "counting": { "mode": "response", "reservation_ttl": "10m" }, "metering": { "usage": "openai", "reserve": 4024, "max": 4024 } }] })).unwrap();
        let report = crate::tools::diff::report(&crate::tools::diff::diff(&tokens, &old));
        assert!(report.contains("counts in micro-JPY, not tokens"), "{report}");
    }

    fn shared(rules: Vec<serde_json::Value>, prices: serde_json::Value) -> serde_json::Value {
        serde_json::json!({ "prices": prices, "rules": rules })
    }

    fn rule_named(name: &str, price: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
        let mut r = school(price, limits)["rules"][0].clone();
        r["name"] = name.into();
        r["path"] = format!("/{name}/*").into();
        r
    }

    /// Two rules name one top-level table: both price by it, say its name,
    /// and read back; the inline form stays; an unknown name is one error
    /// naming the rule and field; an unused table is a warning.
    #[test]
    fn a_shared_table_is_named_by_rules_and_checked_once() {
        use crate::config::Config;
        let day = serde_json::json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }]);
        let config = Config::from_json(&shared(vec![rule_named("a", "yen".into(), day.clone()), rule_named("b", "yen".into(), day.clone()), rule_named("c", yen(), day.clone())], serde_json::json!({ "yen": yen(), "spare": yen() }))).unwrap();
        let priced = |i: usize| config.rules[i].usage.as_ref().unwrap().price.clone().unwrap();
        assert_eq!((priced(0).table.clone(), priced(0).name.as_deref(), priced(1).name.as_deref(), priced(2).name.as_deref()), (priced(2).table, Some("yen"), Some("yen"), None));
        assert_eq!(config.rules[0].usage, config.rules[1].usage, "the same prices, reserve and unit");
        let words = crate::config::words::usage_text(config.rules[0].usage.as_ref().unwrap());
        assert!(words.contains("the shared table `yen` (top-level prices), JPY per million tokens: gpt-4o* in 375"), "{words}");
        let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).filter(|w| w.contains("prices")).collect();
        assert_eq!(warnings, vec!["field `prices`: the table `spare` is named by no rule's metering.price: it prices nothing".to_string()]);
        let described = crate::config::describe::rule_json(&config.rules[0]);
        let again = Config::from_json(&serde_json::json!({ "rules": [described] })).unwrap();
        assert_eq!(again.rules[0].usage.as_ref().unwrap().price.as_ref().unwrap().table, priced(0).table, "described with its table inline: it reads back alone");
        let errors = |value| Config::from_json(&value).err().unwrap_or_default().iter().map(|e| e.to_string()).collect::<Vec<_>>();
        let unknown = errors(shared(vec![rule_named("a", "yne".into(), day.clone())], serde_json::json!({ "yen": yen() })));
        assert_eq!(unknown, vec!["rule `a`, field `metering.price`: no valid table `yne` in the top-level prices (its valid tables: yen)".to_string()]);
        let mut wrong = yen();
        wrong["models"]["gpt-4o*"]["output"] = serde_json::json!(-1);
        let bad = errors(shared(vec![rule_named("a", yen(), day.clone())], serde_json::json!({ "yen": wrong, "a b": yen() })));
        assert_eq!(bad, vec!["field `prices.a b`: a table's name is 1-64 of A-Z a-z 0-9 _ - (rules name it in metering.price)".to_string(), "field `prices.yen.models.gpt-4o*.output`: must be a price per million tokens from 0 to 1000000, with at most 6 decimals, e.g. 0.15".to_string()]);
        assert_eq!(errors(shared(vec![rule_named("a", "a b".into(), day)], serde_json::json!({})))[0], "rule `a`, field `metering.price`: must be the name of a table in the top-level prices (1-64 of A-Z a-z 0-9 _ -), or a table { currency, models }");
    }

    /// A shared table's change is said once, with the rules that name it;
    /// their own diffs leave it out.
    #[test]
    fn diff_states_a_shared_tables_change_once_with_its_rules() {
        use crate::config::Config;
        let day = serde_json::json!([{ "spend": 200, "window": "day", "time_zone": "Asia/Tokyo" }]);
        let rules = || vec![rule_named("a", "yen".into(), day.clone()), rule_named("b", "yen".into(), day.clone())];
        let old = Config::from_json(&shared(rules(), serde_json::json!({ "yen": yen() }))).unwrap();
        let mut dearer = yen();
        dearer["models"]["gpt-4o*"]["output"] = serde_json::json!(1600);
        let new = Config::from_json(&shared(rules(), serde_json::json!({ "yen": dearer }))).unwrap();
        let report = crate::tools::diff::report(&crate::tools::diff::diff(&old, &new));
        assert_eq!(report.matches("out 1500 -> ").count(), 1, "{report}");
        assert!(report.contains("prices `yen` (a shared table):\n") && report.contains("in every rule that names it: `a`, `b`") && !report.contains("rule `a`"), "{report}");
    }

    /// A spend above 4294.967295 (the rule's or an override's) counts the
    /// rule in milli-units: limits, reserve and max in them (rounded up),
    /// the unit said, written back as read; finer than 3 decimals refused.
    #[test]
    fn a_budget_above_the_micro_unit_range_counts_in_milli_units() {
        use crate::config::Config;
        assert_eq!((step_for(0), step_for(u64::from(u32::MAX)), step_for(u64::from(u32::MAX) + 1), step_for(1_000_000_000_000)), (1, 1, 1_000, 1_000));
        let month = serde_json::json!([{ "spend": 10_000, "window": "month", "time_zone": "UTC" }, { "spend": 50.5, "window": "1m" }]);
        let config = Config::from_json(&school(yen(), month.clone())).unwrap();
        let (r, u) = (&config.rules[0], config.rules[0].usage.as_ref().unwrap());
        assert_eq!((r.limits[0].requests.get(), r.limits[1].requests.get(), r.money_step()), (10_000_000, 50_500, Some(1_000)));
        assert_eq!((u.reserve, u.max, u.unit()), (6_036, 6_036, "milli-JPY"), "4,024 tokens at 1,500 yen per million: 6.036 yen");
        assert_eq!(crate::config::describe::rule_json(r)["limits"], month, "written back in yen");
        let note = crate::config::checks::unit_note(r).unwrap();
        assert!(note.contains("counts in milli-JPY") && note.contains("rounded up to 0.001 JPY") && note.contains("under 0.001 JPY an answer, never more"), "{note}");
        let words = crate::config::words::usage_text(u);
        assert!(words.contains("in milli-JPY: a spend above 4294.967295 JPY"), "{words}");
        let mut by_override = school(yen(), serde_json::json!([{ "spend": 200, "window": "1d" }]));
        by_override["rules"][0]["overrides"] = serde_json::json!({ "big": [{ "spend": 5_000, "window": "1d" }] });
        assert_eq!(Config::from_json(&by_override).unwrap().rules[0].limits[0].requests.get(), 200_000, "an override's spend sets the unit too");
        let fine = Config::from_json(&school(yen(), serde_json::json!([{ "spend": 10_000, "window": "1d" }, { "spend": 0.0005, "window": "1m" }]))).unwrap_err();
        assert_eq!(fine.len(), 1, "{fine:?}");
        assert!(fine[0].to_string().starts_with("rule `money`, field `limits[1].spend`: at most 3 decimals"), "{}", fine[0]);
        assert!(Config::from_json(&school(yen(), serde_json::json!([{ "spend": 1_000_001, "window": "1d" }]))).is_err(), "past a million");
    }

    /// A rule whose unit changes: `diff` says which way the counts move,
    /// not a limit raised or lowered in incomparable units.
    #[test]
    fn diff_says_what_a_change_of_money_unit_does_to_the_counts() {
        use crate::config::Config;
        let small = Config::from_json(&school(yen(), serde_json::json!([{ "spend": 4_000, "window": "month", "time_zone": "UTC" }]))).unwrap();
        let large = Config::from_json(&school(yen(), serde_json::json!([{ "spend": 10_000, "window": "month", "time_zone": "UTC" }]))).unwrap();
        let up = crate::tools::diff::report(&crate::tools::diff::diff(&small, &large));
        assert!(up.contains("counts in milli-JPY, not micro-JPY (a spend passes 4294.967295)") && up.contains("1,000 times what was spent") && !up.contains("->"), "{up}");
        let down = crate::tools::diff::report(&crate::tools::diff::diff(&large, &small));
        assert!(down.contains("counts in micro-JPY, not milli-JPY") && down.contains("OVER-ADMITS"), "{down}");
    }
}
