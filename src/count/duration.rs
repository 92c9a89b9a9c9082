//! Window lengths written the way operators write them: `"10s"`, `"1m"`,
//! `"1h"`, `"1d"` (also `"500ms"`, and a bare number of seconds).

use std::fmt;
use std::num::NonZeroU64;

/// The longest window accepted: 31 days. Longer windows would keep a client's
/// log (and its storage) alive for more than a month.
pub(crate) const MAX_WINDOW_MS: u64 = 31 * 24 * 3600 * 1000;

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DurationError {
    Empty,
    BadNumber(String),
    UnknownUnit(String),
    Zero,
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "empty duration"),
            DurationError::BadNumber(s) => write!(f, "`{s}` does not start with a whole number"),
            DurationError::UnknownUnit(u) => {
                write!(f, "unknown unit `{u}` (use ms, s, m, h or d)")
            }
            DurationError::Zero => write!(f, "a window must be longer than zero"),
            DurationError::TooLong => write!(f, "a window may be at most 31 days"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses `"<whole number><unit>"` with unit `ms`, `s`, `m`, `h` or `d` into
/// milliseconds. A bare number is seconds.
pub(crate) fn parse_duration_ms(text: &str) -> Result<NonZeroU64, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let number: u64 = digits
        .parse()
        .map_err(|_| DurationError::BadNumber(text.to_string()))?;
    let scale = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => return Err(DurationError::UnknownUnit(other.to_string())),
    };
    let ms = number.checked_mul(scale).ok_or(DurationError::TooLong)?;
    if ms > MAX_WINDOW_MS {
        return Err(DurationError::TooLong);
    }
    NonZeroU64::new(ms).ok_or(DurationError::Zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        let ms = |s: &str| parse_duration_ms(s).map(NonZeroU64::get);
        assert_eq!(ms("10s"), Ok(10_000));
        assert_eq!(ms("1m"), Ok(60_000));
        assert_eq!(ms("1h"), Ok(3_600_000));
        assert_eq!(ms("1d"), Ok(86_400_000));
        assert_eq!(ms("250ms"), Ok(250));
        assert_eq!(ms("60"), Ok(60_000));
    }

    #[test]
    fn errors() {
        assert_eq!(parse_duration_ms(""), Err(DurationError::Empty));
        assert_eq!(parse_duration_ms("0s"), Err(DurationError::Zero));
        assert_eq!(parse_duration_ms("5w"), Err(DurationError::UnknownUnit("w".into())));
        assert!(matches!(parse_duration_ms("s"), Err(DurationError::BadNumber(_))));
        assert_eq!(parse_duration_ms("32d"), Err(DurationError::TooLong));
        assert_eq!(parse_duration_ms("99999999999999999999d"), Err(DurationError::BadNumber("99999999999999999999d".into())));
    }
}
