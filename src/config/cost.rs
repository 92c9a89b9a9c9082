//! Usage reported by the origin: a rule's
//! `metering = { header = "x-usage-units", reserve = 1000, max = 100000 }`
//! (with `counting = { mode = "response" }`; a `cost` table in the 0.2.0
//! spelling), apart from `cost = N`, a weight; or, read from the answer's
//! body, `metering = { usage = "openai" | "anthropic" | "gemini",
//! reserve, max, count, cut }` or `usage = { json = "usage.total_tokens" }`
//! ([`UsageSource`]; the reader is [`crate::pipeline::usage`]).
//!
//! Such a rule counts in two phases ([`crate::count::reservation`]), like a
//! failures-only rule: before forwarding it reserves `reserve` units, which
//! must fit every window beside what is committed and what requests in
//! flight hold; once the origin answered, the reservation is committed at
//! [`Usage::units`] of the header's value (what the origin reported, never
//! clamped to `max`: a report is what was spent), or at `reserve` when the header is missing
//! or malformed. A usage read from the
//! body commits once the body ended, and at `max` when none was read
//! ([`Usage::missing_units`]; the bound of each end of a stream is in
//! [`crate::pipeline::usage`]). `counting.statuses`, when given, still
//! selects which answers count at all.
//!
//! # Over-commit bound
//! A request admitted with `reserve` units held commits what its answer
//! reports (`max` when it reports none, for a body): the windows can then
//! exceed their limit by at most Σ (reported − `reserve`) over the requests
//! in flight when the room ran out, that is (requests in flight) ×
//! (largest report − `reserve`). With every answer reporting at most
//! `reserve` (`reserve = max`, and an origin that caps its answers at
//! `max` in the units counted) the bound is 0: exact. What passes the
//! limit is recorded, so nothing more is admitted until the windows have
//! paid it back. `max` bounds what an answer without a report commits,
//! never what a report records (a clamp to `max` let
//! answers reporting 1,200 be charged 1,000, and a budget of 10,000 serve
//! 12,000).
//!
//! The table is read by `config::cost_fields`.

use crate::config::policy::Named;

/// Where a usage rule reads the units an answer used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UsageSource {
    /// A response header (lowercased name), read at the answer's headers.
    Header(String),
    /// The answer's body (a JSON body or an SSE stream), read as it passes.
    Body(Reading),
}

/// What a body-read usage looks for ([`crate::pipeline::usage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reading {
    /// A provider's own usage objects.
    Provider(Provider),
    /// A path of member names (or array indexes) to a whole number, into a
    /// JSON body or into each SSE `data:` event: `usage.total_tokens`, as
    /// written (dots between non-empty names).
    Json(String),
}

/// The LLM APIs whose usage objects tollgate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    /// Chat Completions (`usage`, the final chunk with
    /// `stream_options.include_usage`) and the Responses API
    /// (`response.completed`'s `response.usage`).
    OpenAi,
    /// Messages: `message_start.message.usage` (input),
    /// `message_delta.usage` (cumulative output).
    Anthropic,
    /// `usageMetadata`, the last one seen.
    Gemini,
}

impl Named for Provider {
    const NAMES: &'static [(&'static str, Self)] = &[("openai", Provider::OpenAi), ("anthropic", Provider::Anthropic), ("gemini", Provider::Gemini)];
}

/// Which tokens a body-read usage commits (`metering.count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// The total (the provider's, else input + output): the default.
    Total,
    Input,
    Output,
    /// `{ input = a, output = b }`: a × input + b × output.
    Weighted { input: u32, output: u32 },
}

impl Named for Count {
    /// The simple choices by name (a weighted count is a table).
    const NAMES: &'static [(&'static str, Self)] = &[("total", Count::Total), ("input", Count::Input), ("output", Count::Output)];
}

/// A rule's `metering` table: where the origin reports usage (a header or
/// the body), what a request reserves before forwarding, the most one
/// answer commits, whether the client sees the header, and for a body
/// which tokens count and whether a stream past its reserve is cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) source: UsageSource,
    /// Units reserved before forwarding (the rule's `cost`, as calls carry it).
    pub(crate) reserve: u32,
    /// The most units one answer commits.
    pub(crate) max: u32,
    /// Whether the header reaches the client (default: removed).
    pub(crate) expose: bool,
    /// Which tokens a body-read usage commits (`Total` for a header).
    pub(crate) count: Count,
    /// Whether a stream whose usage passes `reserve` is ended there
    /// (body-read usage only).
    pub(crate) cut: bool,
    /// A provider's usage priced per model: the rule counts
    /// micro-units of money, and `reserve` / `max` above are the tokens
    /// [`Priced`] keeps priced at the table's ceiling.
    pub(crate) price: Option<Priced>,
}

/// A priced usage: its table, and `reserve` / `max` in tokens as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Priced {
    pub(crate) table: crate::config::price::PriceTable,
    /// The top-level table's name when `metering.price` names one
    /// (`None`: the rule's own table).
    pub(crate) name: Option<String>,
    pub(crate) reserve_tokens: u32,
    pub(crate) max_tokens: u32,
    /// Micro-units per unit counted: 1, or 1,000 for a rule whose largest
    /// `spend` passes 4294.967295 ([`crate::config::price::step_for`]).
    pub(crate) step: u64,
    /// The unit named in `RateLimit-Policy`'s `qu`: `micro-JPY`, `milli-USD`.
    pub(crate) unit: String,
}

impl Priced {
    /// A charge in micro-units as counted: in units of `step`, rounded up
    /// (a coarser unit under-admits by less than one unit an answer, never
    /// over-admits).
    pub(crate) fn counted(&self, micro: u64) -> u64 {
        micro.div_ceil(self.step)
    }

    /// A priced rule's unit in words, with what rounding to it costs: `micro-JPY`,
    /// or `milli-USD: each answer's charge rounded up to 0.001 USD, so a
    /// window may admit less than its limit by under 0.001 USD an answer`.
    pub(crate) fn unit_words(&self) -> String {
        match self.step {
            1 => self.unit.clone(),
            step => format!(
                "{}: a spend above 4294.967295 {currency} does not fit micro-units; each answer's charge is rounded up to {} {currency}, so a window may admit less than its limit by under {} {currency} an answer, never more",
                self.unit,
                crate::config::price::decimal(step),
                crate::config::price::decimal(step),
                currency = self.table.currency
            ),
        }
    }

    /// A priced rule's table in words: whose it is (`the shared table
    /// `openai``), then [`crate::config::price::words`].
    pub(crate) fn table_words(&self) -> String {
        match &self.name {
            Some(name) => format!("the shared table `{name}` (top-level prices), {}", crate::config::price::words(&self.table)),
            None => crate::config::price::words(&self.table),
        }
    }
}

impl Usage {
    /// The response header the origin reports usage in (`None`: the body).
    pub(crate) fn header(&self) -> Option<&str> {
        match &self.source {
            UsageSource::Header(name) => Some(name),
            UsageSource::Body(_) => None,
        }
    }

    /// What the `RateLimit-Policy` names as the quota's unit: the header,
    /// else `tokens` (a provider's) or the JSON path.
    pub(crate) fn unit(&self) -> &str {
        if let Some(priced) = &self.price {
            return &priced.unit;
        }
        match &self.source {
            UsageSource::Header(name) | UsageSource::Body(Reading::Json(name)) => name,
            UsageSource::Body(Reading::Provider(_)) => "tokens",
        }
    }

    /// What an answer with no usage commits: `reserve` for a header (as
    /// before usage could be read from the body), `max` for a body: a stream that ended without a
    /// usage event may have spent anything up to the cap the origin was
    /// given, and charging less could admit past the budget as the origin
    /// counts it.
    pub(crate) fn missing_units(&self) -> u32 {
        match self.source {
            UsageSource::Header(_) => self.reserve,
            UsageSource::Body(_) => self.max,
        }
    }

    /// The units recorded for `tokens` read from a body: all of them
    /// (saturating at `u32::MAX`), never clamped to `max`.
    pub(crate) fn recorded(tokens: u64) -> u32 {
        u32::try_from(tokens).unwrap_or(u32::MAX)
    }

    /// The units an answer whose header holds `value` commits: a whole
    /// number, as reported (a negative one is 0, one past `u32::MAX` is
    /// `u32::MAX`; never clamped to `max`); `None` when the
    /// header is missing or is not a whole number (the reservation is then
    /// committed at `reserve`).
    ///
    /// A header the origin sent more than once reaches tollgate combined,
    /// `50, 50` (RFC 9110 §5.3): each member is read as above, and the
    /// largest is committed (the one value when they agree; when they
    /// differ, none is known to be the true one, and the largest never
    /// charges less than the origin reported: towards blocking). Any
    /// member that is not a whole number makes the whole header malformed.
    /// `50, 50` was committed at `reserve`.
    pub(crate) fn units(&self, value: Option<&str>) -> Option<u32> {
        value?.split(',').map(|member| self.member_units(member)).try_fold(0, |most, units| Some(most.max(units?)))
    }

    /// One member of the header's value, as [`Usage::units`] reads it.
    fn member_units(&self, member: &str) -> Option<u32> {
        let text = member.trim();
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if negative {
            return Some(0);
        }
        Some(digits.parse::<u64>().map_or(u32::MAX, Usage::recorded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_read_as_reported_never_clamped_to_max_and_anything_else_is_missing() {
        let usage = Usage { source: UsageSource::Header("x-usage".into()), reserve: 100, max: 3_000, expose: false, count: Count::Total, cut: false, price: None };
        for (value, units) in [
            (Some("1200"), Some(1_200)),
            (Some(" 42 "), Some(42)),
            (Some("+7"), Some(7)),
            (Some("0"), Some(0)),
            (Some("-5"), Some(0)),
            (Some("3001"), Some(3_001)),
            (Some("99999999999999999999999"), Some(u32::MAX)),
            (Some("12.5"), None),
            (Some("1e3"), None),
            (Some(""), None),
            (Some("-"), None),
            (Some("ten"), None),
            (None, None),
        ] {
            assert_eq!(usage.units(value), units, "{value:?}");
        }
    }

    /// A usage header sent twice (`50`, `50`) reached tollgate
    /// as `50, 50` and was committed at `reserve`.
    #[test]
    fn a_header_sent_twice_commits_its_largest_value() {
        let usage = Usage { source: UsageSource::Header("x-usage".into()), reserve: 100, max: 3_000, expose: false, count: Count::Total, cut: false, price: None };
        for (value, units) in [
            ("50, 50", Some(50)),
            ("50,50,50", Some(50)),
            ("50, 70", Some(70)),
            ("70, 50", Some(70)),
            ("-5, 20", Some(20)),
            ("10, 99999", Some(99_999)),
            ("50, ", None),
            (", 50", None),
            ("50, ten", None),
            (",", None),
        ] {
            assert_eq!(usage.units(Some(value)), units, "{value:?}");
        }
    }
}
