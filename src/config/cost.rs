//! Usage reported by the origin (issue 29): a rule's
//! `metering = { header = "x-usage-units", reserve = 1000, max = 100000 }`
//! (with `counting = { mode = "response" }`; a `cost` table in the 0.2.0
//! spelling), apart from `cost = N`, a weight.
//!
//! Such a rule counts in two phases ([`crate::count::reservation`]), like a
//! failures-only rule: before forwarding it reserves `reserve` units, which
//! must fit every window beside what is committed and what requests in
//! flight hold; once the origin answered, the reservation is committed at
//! [`Usage::units`] of the header's value (clamped to `[0, max]`), or at
//! `reserve` when the header is missing or malformed. `counting.statuses`, when
//! given, still selects which answers count at all.
//!
//! # Over-commit bound
//! A request admitted with `reserve` units held may commit up to `max`: the
//! windows can then exceed their limit by at most (requests in flight) ×
//! (`max` − `reserve`). With `reserve = max` the bound is 0: exact.
//!
//! The table is read by `config::cost_fields`.

/// A rule's `metering` table: the response header the origin reports usage in,
/// what a request reserves before forwarding, the most one answer commits,
/// and whether the client sees the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Lowercased response header name.
    pub(crate) header: String,
    /// Units reserved before forwarding (the rule's `cost`, as calls carry it).
    pub(crate) reserve: u32,
    /// The most units one answer commits.
    pub(crate) max: u32,
    /// Whether the header reaches the client (default: removed).
    pub(crate) expose: bool,
}

impl Usage {
    /// The units an answer whose header holds `value` commits: a whole
    /// number clamped to `[0, max]` (a negative one is 0, one too large for
    /// any integer is `max`); `None` when the header is missing or is not
    /// a whole number (the reservation is then committed at `reserve`).
    ///
    /// A header the origin sent more than once reaches tollgate combined,
    /// `50, 50` (RFC 9110 §5.3): each member is read as above, and the
    /// largest is committed (the one value when they agree; when they
    /// differ, none is known to be the true one, and the largest never
    /// charges less than the origin reported: towards blocking). Any
    /// member that is not a whole number makes the whole header malformed.
    /// Issue 35: `50, 50` was committed at `reserve`.
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
        Some(digits.parse::<u64>().map_or(self.max, |n| u32::try_from(n).unwrap_or(u32::MAX).min(self.max)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_clamped_to_zero_and_max_and_anything_else_is_missing() {
        let usage = Usage { header: "x-usage".into(), reserve: 100, max: 3_000, expose: false };
        for (value, units) in [
            (Some("1200"), Some(1_200)),
            (Some(" 42 "), Some(42)),
            (Some("+7"), Some(7)),
            (Some("0"), Some(0)),
            (Some("-5"), Some(0)),
            (Some("3001"), Some(3_000)),
            (Some("99999999999999999999999"), Some(3_000)),
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

    /// Issue 35: a usage header sent twice (`50`, `50`) reached tollgate
    /// as `50, 50` and was committed at `reserve`.
    #[test]
    fn a_header_sent_twice_commits_its_largest_value() {
        let usage = Usage { header: "x-usage".into(), reserve: 100, max: 3_000, expose: false };
        for (value, units) in [
            ("50, 50", Some(50)),
            ("50,50,50", Some(50)),
            ("50, 70", Some(70)),
            ("70, 50", Some(70)),
            ("-5, 20", Some(20)),
            ("10, 99999", Some(3_000)),
            ("50, ", None),
            (", 50", None),
            ("50, ten", None),
            (",", None),
        ] {
            assert_eq!(usage.units(Some(value)), units, "{value:?}");
        }
    }
}
