//! Client keys: what a rule counts by.
//!
//! Keys come only from values a client cannot forge cheaply. `ip` reads
//! `CF-Connecting-IP`, which Cloudflare sets on every request it proxies;
//! `X-Forwarded-For`, `True-Client-IP` and the like are client-controlled and
//! never read. A key is a short string such as `ip=203.0.113.7` or
//! `ip=2001:db8:1:2::/64|header:x-api-key=k1`; the Durable Object that counts
//! for it is named after `(rule, key)`.

use crate::request::canon::CanonicalQuery;
use crate::request::json::Json;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One part of a rule's key: where its value comes from and, for the
/// parts a client writes, how the origin reads it ([`ValueType`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The client IP from `CF-Connecting-IP`, IPv6 grouped by prefix.
    Ip,
    /// A request header, by lowercased name.
    Header(String, Option<ValueType>),
    /// A cookie, by exact name (and PHP's spelling of it, see
    /// [`cookie_values`]).
    Cookie(String, Option<ValueType>),
    /// A query parameter, by name (normalized as in [`CanonicalQuery`]).
    Query(String, Option<ValueType>),
    /// A named group of the rule's URLPattern (`:tenant` in `/t/:tenant/*`).
    PathGroup(String, Option<ValueType>),
    /// A JSON or form field of the body (`email`, or `user.email` in JSON),
    /// read as its type says (trimmed and lowercased by default) and hashed
    /// with SHA-256: no raw value is stored or logged.
    Body(String, Option<ValueType>),
    /// The API credential the request carries, as LLM APIs read one: the
    /// token of `Authorization: Bearer` (OpenAI; Anthropic's SDKs since TS
    /// 1.17 and Python 2.17), `x-api-key` (Anthropic), `x-goog-api-key`
    /// and the `key` query parameter (Gemini), whichever are present, each
    /// hashed with SHA-256 ([`credentials`]).
    Credential,
    /// `request.cf.country`.
    Country,
    /// `request.cf.asn`.
    Asn,
    /// One bucket for every client.
    Global,
}

/// How an origin reads a key part's value, so that every spelling it reads
/// as one identity is one key (`/schools/042` and `/schools/42`
/// are the same school to `parseInt`, Werkzeug's `<int:>`, PHP's `(int)`,
/// Rails' `find` and an integer SQL column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// As sent (the default for headers, cookies, query parameters and path
    /// groups).
    Raw,
    /// Trimmed and lowercased (the default for body fields).
    Lower,
    /// An integer as `parseInt` and PHP's `(int)` read it: surrounding
    /// whitespace and a `+` dropped, the leading digits, leading zeros
    /// removed (`042`, `+42`, ` 42 `, `42abc` are `42`); no leading digit:
    /// missing.
    Int,
    /// A UUID in any spelling: case, braces, `urn:uuid:` and the hyphenless
    /// form folded to 32 lowercase hex digits; anything else: missing.
    Uuid,
    /// An email or account name as a case- and accent-insensitive
    /// collation finds it (MySQL 8's default `utf8mb4_0900_ai_ci`, SQL
    /// Server's `*_CI_AI`, citext with unaccent): trimmed, compatibility
    /// forms folded (fullwidth `ｖ` is `v`), Latin accents removed (`í` is
    /// `i`), default-ignorable characters (soft hyphen, zero-width spaces
    /// and joiners, BOM) dropped, lowercased. See [`fold_email`].
    Email,
}

impl ValueType {
    fn parse(name: &str) -> Option<ValueType> {
        match name {
            "raw" => Some(ValueType::Raw),
            "lower" => Some(ValueType::Lower),
            "int" => Some(ValueType::Int),
            "uuid" => Some(ValueType::Uuid),
            "email" => Some(ValueType::Email),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ValueType::Raw => "raw",
            ValueType::Lower => "lower",
            ValueType::Int => "int",
            ValueType::Uuid => "uuid",
            ValueType::Email => "email",
        }
    }

    /// Every value an origin could read (an `int` may read several ways,
    /// see [`int_readings`]); the first is [`ValueType::read`]'s. Empty
    /// when no origin would read an identity from it.
    pub(crate) fn readings(self, value: &str) -> Vec<String> {
        match self {
            ValueType::Int => int_readings(value),
            _ => self.read(value).into_iter().collect(),
        }
    }

    /// The value as the origin reads it; `None` when the origin would read
    /// no identity from it.
    pub(crate) fn read(self, value: &str) -> Option<String> {
        let read = match self {
            ValueType::Raw => value.to_string(),
            ValueType::Lower => value.trim().to_lowercase(),
            ValueType::Int => read_int(value)?,
            ValueType::Uuid => read_uuid(value)?,
            ValueType::Email => fold_email(value),
        };
        (!read.is_empty()).then_some(read)
    }
}

/// Every integer an origin could read from `value`, as canonical decimal
/// strings, each once, [`read_int`]'s first:
/// - the leading digits (`parseInt(value, 10)`: `42abc` is 42, `4.2e1` is 4);
/// - digits grouped by underscores (`4_2`: Python's `int()`, PostgreSQL 16);
/// - a decimal number with a fraction or exponent, truncated (`4.2e1` and
///   `42.0` are 42, `42e1` is 420: PHP 8's `(int)`, MySQL's string to
///   number comparison, JavaScript's `Number()`);
/// - a radix prefix (`0x2a`, `0o52`, `0b101010`: `Number()`, PostgreSQL 16).
///
/// A client spelling its tenant id so that one origin reads 42 and another
/// 4 is charged to both.
fn int_readings(value: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let text = value.trim();
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'+') => (false, &text[1..]),
        Some(b'-') => (true, &text[1..]),
        _ => (false, text),
    };
    let signed = |magnitude: u64| -> Option<i64> {
        let v = i64::try_from(magnitude).ok()?;
        Some(if negative { -v } else { v })
    };
    let grouped = (!unsigned.starts_with('_') && !unsigned.ends_with('_') && !unsigned.contains("__"))
        .then(|| unsigned.replace('_', ""))
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| read_int(&format!("{}{d}", if negative { "-" } else { "" })));
    let decimal = unsigned
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        .then(|| json_number(text))
        .flatten()
        .filter(|v| v.is_finite() && v.abs() < 9.0e18)
        .map(|v| (v.trunc() as i64).to_string());
    let radix = [("0x", 16), ("0o", 8), ("0b", 2)].iter().find_map(|(prefix, radix)| {
        let digits = unsigned.get(..2).filter(|p| p.eq_ignore_ascii_case(prefix)).map(|_| unsigned[2..].replace('_', ""))?;
        u64::from_str_radix(&digits, *radix).ok().filter(|_| !digits.starts_with(['+', '-'])).and_then(signed).map(|v| v.to_string())
    });
    for reading in [read_int(value), grouped, decimal, radix].into_iter().flatten() {
        if !out.contains(&reading) {
            out.push(reading);
        }
    }
    out
}

/// A decimal number (`+042.50e1`) as a float, read by serde_json's number
/// parser (already in the Worker for JSON bodies; `str::parse::<f64>`
/// would add its own tables to the upload): the sign, leading zeros and a
/// bare trailing `.` that JSON refuses are normalized first. It reads
/// what `str::parse::<f64>` reads (but `inf` and `nan`, which no caller
/// keeps): every whole number below 2^53 exactly, any value within one
/// unit in the last place (tested against it).
pub(crate) fn json_number(text: &str) -> Option<f64> {
    let (sign, unsigned) = match text.as_bytes().first() {
        Some(b'+') => ("", &text[1..]),
        Some(b'-') => ("-", &text[1..]),
        _ => ("", text),
    };
    let trimmed = unsigned.trim_start_matches('0');
    let mantissa_end = trimmed.find(['e', 'E']).unwrap_or(trimmed.len());
    let (mantissa, exponent) = trimmed.split_at(mantissa_end);
    let mantissa = mantissa.strip_suffix('.').unwrap_or(mantissa);
    let mantissa = match mantissa.as_bytes().first() {
        None | Some(b'.') if unsigned.starts_with('0') || mantissa.starts_with('.') => format!("0{mantissa}"),
        _ => mantissa.to_string(),
    };
    serde_json::from_str::<f64>(&format!("{sign}{mantissa}{exponent}")).ok()
}

/// `parseInt(value, 10)` and PHP 7's `(int)`, as a canonical decimal string.
fn read_int(value: &str) -> Option<String> {
    let text = value.trim();
    let (negative, text) = match text.as_bytes().first() {
        Some(b'+') => (false, &text[1..]),
        Some(b'-') => (true, &text[1..]),
        _ => (false, text),
    };
    let digits_end = text.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(text.len());
    let digits = text[..digits_end].trim_start_matches('0');
    if digits_end == 0 {
        return None;
    }
    Some(match (digits.is_empty(), negative) {
        (true, _) => "0".to_string(),
        (false, true) => format!("-{digits}"),
        (false, false) => digits.to_string(),
    })
}

fn read_uuid(value: &str) -> Option<String> {
    let text = value.trim().to_ascii_lowercase();
    let text = text.strip_prefix("urn:uuid:").unwrap_or(&text);
    let text = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(text);
    let hex: String = text.chars().filter(|&c| c != '-').collect();
    (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

/// The collation key of an email or account name (see
/// [`ValueType::Email`]). Covers what a client can type to reach the same
/// row: ASCII case, fullwidth ASCII (U+FF01–FF5E), the accented letters of
/// Latin-1 and Latin Extended-A, and the default-ignorable characters that
/// render as nothing. Other scripts are kept as they are (lowercased).
pub(crate) fn fold_email(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.trim().chars() {
        if is_default_ignorable(c) {
            continue;
        }
        let c = compatibility_letter(c);
        match strip_accent(c) {
            Some(base) => out.push_str(base),
            None => out.extend(c.to_lowercase()),
        }
    }
    out.trim().to_string()
}

/// The ASCII character a compatibility form of one stands for, as NFKC
/// reads it: fullwidth forms (U+FF01–FF5E), the ideographic space, circled
/// letters (U+24B6–24E9) and the Mathematical Alphanumeric Symbols' letters
/// and digits (U+1D400–1D6A3 in runs of 52, U+1D7CE–1D7FF in runs of 10).
fn compatibility_letter(c: char) -> char {
    let code = c as u32;
    let ascii = match code {
        0xFF01..=0xFF5E => code - 0xFF01 + 0x21,
        0x3000 => 0x20,
        0x24B6..=0x24CF => code - 0x24B6 + u32::from(b'A'),
        0x24D0..=0x24E9 => code - 0x24D0 + u32::from(b'a'),
        0x1D400..=0x1D6A3 => match (code - 0x1D400) % 52 {
            upper @ 0..=25 => upper + u32::from(b'A'),
            lower => lower - 26 + u32::from(b'a'),
        },
        0x1D7CE..=0x1D7FF => (code - 0x1D7CE) % 10 + u32::from(b'0'),
        _ => return c,
    };
    char::from_u32(ascii).unwrap_or(c)
}

/// Characters that render as nothing/// Characters that render as nothing (Unicode's Default_Ignorable_Code_Point,
/// the ones a keyboard or paste can carry).
fn is_default_ignorable(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
        // Combining diacritical marks: an accent typed as a separate mark.
        || ('\u{0300}'..='\u{036F}').contains(&c)
}

/// The unaccented lowercase base of a Latin letter with a diacritic
/// (Latin-1 Supplement and Latin Extended-A, U+00C0–017F; generated from
/// Unicode's canonical decompositions, with the letters that have none
/// spelled out: `ß` is `ss`, `ł` is `l`, `œ` is `oe`).
fn strip_accent(c: char) -> Option<&'static str> {
    const LATIN: [&str; 192] = [
        "a", "a", "a", "a", "a", "a", "ae", "c", "e", "e", "e", "e", "i", "i", "i", "i",
        "d", "n", "o", "o", "o", "o", "o", "", "o", "u", "u", "u", "u", "y", "th", "ss",
        "a", "a", "a", "a", "a", "a", "ae", "c", "e", "e", "e", "e", "i", "i", "i", "i",
        "d", "n", "o", "o", "o", "o", "o", "", "o", "u", "u", "u", "u", "y", "th", "y",
        "a", "a", "a", "a", "a", "a", "c", "c", "c", "c", "c", "c", "c", "c", "d", "d",
        "d", "d", "e", "e", "e", "e", "e", "e", "e", "e", "e", "e", "g", "g", "g", "g",
        "g", "g", "g", "g", "h", "h", "h", "h", "i", "i", "i", "i", "i", "i", "i", "i",
        "i", "i", "ij", "ij", "j", "j", "k", "k", "k", "l", "l", "l", "l", "l", "l", "l",
        "l", "l", "l", "n", "n", "n", "n", "n", "n", "n", "n", "n", "o", "o", "o", "o",
        "o", "o", "oe", "oe", "r", "r", "r", "r", "r", "r", "s", "s", "s", "s", "s", "s",
        "s", "s", "t", "t", "t", "t", "t", "t", "u", "u", "u", "u", "u", "u", "u", "u",
        "u", "u", "u", "u", "w", "w", "y", "y", "y", "z", "z", "z", "z", "z", "z", "s",
    ];
    let index = (c as u32).checked_sub(0xC0)? as usize;
    LATIN.get(index).copied().filter(|base| !base.is_empty())
}

impl KeyPart {
    /// Whether the part identifies the client (as opposed to the target of
    /// the request). Clearing a count on success must never touch these, or
    /// a client could reset its own count by succeeding on its own account.
    pub(crate) fn identifies_client(&self) -> bool {
        matches!(self, KeyPart::Ip | KeyPart::Global | KeyPart::Country | KeyPart::Asn | KeyPart::Credential)
    }

    /// The name of a part that has one (`header:`, `cookie:`, `query:`,
    /// `path:`, `body:`), with its declared type.
    pub(crate) fn named(&self) -> Option<(&str, Option<ValueType>)> {
        match self {
            KeyPart::Header(n, t) | KeyPart::Cookie(n, t) | KeyPart::Query(n, t) | KeyPart::PathGroup(n, t) | KeyPart::Body(n, t) => {
                Some((n, *t))
            }
            KeyPart::Ip | KeyPart::Global | KeyPart::Country | KeyPart::Asn | KeyPart::Credential => None,
        }
    }

    /// The type its values are read as: the declared one, else the kind's
    /// default (`lower` for body fields, `raw` for the rest).
    pub(crate) fn value_type(&self) -> ValueType {
        match self {
            KeyPart::Body(_, t) => t.unwrap_or(ValueType::Lower),
            other => other.named().and_then(|(_, t)| t).unwrap_or(ValueType::Raw),
        }
    }

    /// Whether the part is a path group read in the case its rule matched
    /// it: lowercased on a `case_insensitive` rule, as a case-insensitive
    /// router finds one resource for `/chat/AbC` and `/chat/abc`. Every
    /// path group but a `:raw` one, which is the value as sent (an origin
    /// that tells `AbC123` from `abc123` apart).
    pub(crate) fn folds_with_match(&self) -> bool {
        matches!(self, KeyPart::PathGroup(_, t) if *t != Some(ValueType::Raw))
    }

    /// Whether the part names an id (`id`, `*_id`, `*Id`, `*-id`) but
    /// declares no type: `tollgate check` warns that spellings an origin
    /// reads as one id (`042`, `42`) would count apart.
    pub(crate) fn untyped_id(&self) -> bool {
        let Some((name, None)) = self.named() else { return false };
        let last = name.rsplit('.').next().unwrap_or(name);
        let lower = last.to_ascii_lowercase();
        lower == "id" || lower.ends_with("_id") || lower.ends_with("-id") || last.ends_with("Id")
    }
}

impl KeyPart {
    /// Parses `ip`, `global`, `country`, `asn`, `credential`, `header:NAME`,
    /// `cookie:NAME`, `query:NAME`, `path:GROUP` or `body:FIELD`, each of
    /// the named ones optionally followed by `:TYPE` (`raw`, `lower`, `int`,
    /// `uuid`, `email`): `path:school:int`.
    pub(crate) fn parse(text: &str) -> Result<KeyPart, KeyPartError> {
        let (kind, name) = match text.split_once(':') {
            Some((kind, name)) => (kind, Some(name)),
            None => (text, None),
        };
        let named = |make: fn(String, Option<ValueType>) -> KeyPart| {
            let Some(rest) = name.filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic())) else {
                return Err(KeyPartError::MissingName { text: text.to_string(), kind: kind.to_string() });
            };
            match rest.rsplit_once(':') {
                Some((n, t)) if !n.is_empty() => match ValueType::parse(t) {
                    Some(value_type) => Ok(make(n.to_string(), Some(value_type))),
                    None => Err(KeyPartError::UnknownType { text: text.to_string(), value_type: t.to_string() }),
                },
                _ => Ok(make(rest.to_string(), None)),
            }
        };
        match (kind, name) {
            ("ip", None) => Ok(KeyPart::Ip),
            ("global", None) => Ok(KeyPart::Global),
            ("country", None) => Ok(KeyPart::Country),
            ("asn", None) => Ok(KeyPart::Asn),
            ("credential", None) => Ok(KeyPart::Credential),
            ("body", _) => named(KeyPart::Body),
            ("header", _) => named(|n, t| KeyPart::Header(n.to_ascii_lowercase(), t)),
            ("cookie", _) => named(KeyPart::Cookie),
            ("query", _) => named(KeyPart::Query),
            ("path", _) => named(KeyPart::PathGroup),
            _ => Err(KeyPartError::Unknown(text.to_string())),
        }
    }
}

/// Why a key part written in the config was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyPartError {
    /// `header:`, `cookie:`, `query:`, `path:` or `body:` without a name
    /// of visible ASCII after the colon (`text` is the whole part).
    MissingName { text: String, kind: String },
    /// Not a known kind of part (`colour`), or a kind that takes no name
    /// given one (`ip:x`).
    Unknown(String),
    /// A `:TYPE` suffix that is not a known type.
    UnknownType { text: String, value_type: String },
}

impl fmt::Display for KeyPartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPartError::MissingName { text, kind } => write!(f, "`{text}` needs a name after `{kind}:`"),
            KeyPartError::Unknown(text) => write!(
                f,
                "unknown key part `{text}` (use ip, global, country, asn, credential, header:NAME, cookie:NAME, query:NAME, path:GROUP or body:FIELD)"
            ),
            KeyPartError::UnknownType { text, value_type } => write!(
                f,
                "`{text}`: unknown type `{value_type}` (use raw, lower, int, uuid or email after the name)"
            ),
        }
    }
}

impl std::error::Error for KeyPartError {}

/// The message, for collectors that keep errors as text (the config's
/// per-rule error list).
impl From<KeyPartError> for String {
    fn from(error: KeyPartError) -> String {
        error.to_string()
    }
}

impl KeyPart {
    /// The part's spelling in pieces (`query`, `id`, `int` of
    /// `query:id:int`): the one definition that [`KeyPart::push_name`] and
    /// [`fmt::Display`] both write.
    fn pieces(&self) -> (&'static str, Option<&str>, Option<&'static str>) {
        let (kind, name, value_type) = match self {
            KeyPart::Ip => return ("ip", None, None),
            KeyPart::Global => return ("global", None, None),
            KeyPart::Country => return ("country", None, None),
            KeyPart::Asn => return ("asn", None, None),
            KeyPart::Credential => return ("credential", None, None),
            KeyPart::Body(n, t) => ("body", n, t),
            KeyPart::Header(n, t) => ("header", n, t),
            KeyPart::Cookie(n, t) => ("cookie", n, t),
            KeyPart::Query(n, t) => ("query", n, t),
            KeyPart::PathGroup(n, t) => ("path", n, t),
        };
        (kind, Some(name.as_str()), value_type.map(|t| t.name()))
    }

    /// The name a value of this part is given by where one is typed (the
    /// admin API's query parameters, `tollgate hash`, the console's forms):
    /// the part without its value type (`header:x-user-id` for
    /// `header:x-user-id:int`: the type says how the value is read, not
    /// which value it is); `None` for `global`.
    pub(crate) fn param_name(&self) -> Option<String> {
        let (kind, name, _) = self.pieces();
        match (self, name) {
            (KeyPart::Global, _) => None,
            (_, Some(name)) => Some(format!("{kind}:{name}")),
            (_, None) => Some(kind.to_string()),
        }
    }

    /// Appends the part as [`fmt::Display`] writes it (`ip`, `header:x-user`,
    /// `query:id:int`), without the formatter: every key of every counted
    /// request spells its parts ([`derive_keys`]).
    fn push_name(&self, out: &mut String) {
        let (kind, name, value_type) = self.pieces();
        out.push_str(kind);
        for piece in [name, value_type].into_iter().flatten() {
            out.push(':');
            out.push_str(piece);
        }
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, name, value_type) = self.pieces();
        f.write_str(kind)?;
        for piece in [name, value_type].into_iter().flatten() {
            write!(f, ":{piece}")?;
        }
        Ok(())
    }
}

/// The request values a key can be built from.
pub(crate) struct KeyInputs<'a> {
    /// The raw `CF-Connecting-IP` header, if any.
    pub(crate) client_ip: Option<&'a str>,
    /// Looks up a request header by lowercased name.
    pub(crate) header: &'a dyn Fn(&str) -> Option<String>,
    pub(crate) query: &'a CanonicalQuery,
    /// Groups captured by the rule's URLPattern, as sent
    /// ([`crate::config::rules::Match::groups`]).
    pub(crate) path_groups: &'a [(String, String)],
    /// The rule matches paths in any case: a group read as matched
    /// ([`KeyPart::folds_with_match`]) is lowercased.
    pub(crate) fold_path_groups: bool,
    /// Every raw value a body field could be read as (see
    /// [`body_field_values`]).
    pub(crate) body: &'a dyn Fn(&str) -> Vec<String>,
    /// `request.cf.country` and `request.cf.asn`.
    pub(crate) country: Option<&'a str>,
    pub(crate) asn: Option<u32>,
    pub(crate) ipv6_prefix: u8,
}

/// Most identities one request is charged to for one rule. Past it the
/// request is refused (400): a client sending many spellings of a key
/// would otherwise cost one object call each.
pub(crate) const MAX_IDENTITIES: usize = 4;

/// A key part the request does not carry (or carries unusably).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingPart(pub(crate) KeyPart);

impl fmt::Display for MissingPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the request has no usable `{}`", self.0)
    }
}

impl std::error::Error for MissingPart {}

/// Why a request has no key for a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// A part is absent or unusable: the rule's missing-key policy applies.
    Missing(MissingPart),
    /// The request names more than [`MAX_IDENTITIES`] identities: refused.
    TooMany { part: KeyPart, identities: usize },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Missing(missing) => missing.fmt(f),
            KeyError::TooMany { part, identities } => write!(
                f,
                "the request names {identities} or more identities by `{part}` (at most {MAX_IDENTITIES})"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Every key the request could be counted under by an origin: one per
/// combination of the values each part could be read as (a repeated
/// header, query parameter, form field or cookie, a JSON member given
/// twice or in another case, PHP's spelling of a cookie name). The request
/// is charged to each, so a client cannot pick the identity that still has
/// budget (charge every identity an origin could read). Values
/// are read as the part's type says, so spellings the origin reads alike
/// are one key. A part with no usable value is [`KeyError::Missing`]: the
/// caller applies the rule's missing-key policy, so absent values never
/// share one empty-key bucket by accident.
pub(crate) fn derive_keys(parts: &[KeyPart], inputs: &KeyInputs<'_>) -> Result<Vec<String>, KeyError> {
    let mut keys = vec![String::new()];
    for part in parts {
        let values = part_values(part, inputs);
        if values.is_empty() {
            return Err(KeyError::Missing(MissingPart(part.clone())));
        }
        if keys.len() * values.len() > MAX_IDENTITIES {
            return Err(KeyError::TooMany { part: part.clone(), identities: keys.len() * values.len() });
        }
        keys = keys
            .iter()
            .flat_map(|key| {
                values.iter().map(move |value| {
                    // `{key}|{part}={value}` (no `|` after an empty key), in one buffer.
                    let mut identity = String::with_capacity(key.len() + 24 + value.len());
                    identity.push_str(key);
                    if !key.is_empty() {
                        identity.push('|');
                    }
                    part.push_name(&mut identity);
                    identity.push('=');
                    identity.push_str(value);
                    identity
                })
            })
            .collect();
    }
    Ok(keys)
}

/// The one key of a request whose parts each have one value (the admin
/// API's, given raw): the first of [`derive_keys`].
pub(crate) fn derive_key(parts: &[KeyPart], inputs: &KeyInputs<'_>) -> Result<String, MissingPart> {
    match derive_keys(parts, inputs) {
        Ok(keys) => keys.into_iter().next().ok_or_else(|| MissingPart(parts.first().cloned().unwrap_or(KeyPart::Global))),
        Err(KeyError::Missing(missing)) => Err(missing),
        Err(KeyError::TooMany { part, .. }) => Err(MissingPart(part)),
    }
}

/// A part's values as the origin could read them, typed, distinct, in the
/// order found.
fn part_values(part: &KeyPart, inputs: &KeyInputs<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for value in raw_values(part, inputs) {
        for read in read_values(part, &value) {
            if !out.contains(&read) {
                out.push(read);
            }
        }
    }
    out
}

/// Every raw value the request carries for `part`, as sent (no type read,
/// nothing folded), in the order found: what [`crate::request::spelling::Spelling`]
/// binds relief to.
pub(crate) fn raw_values(part: &KeyPart, inputs: &KeyInputs<'_>) -> Vec<String> {
    match part {
        KeyPart::Ip => inputs.client_ip.and_then(|ip| client_ip_key(ip, inputs.ipv6_prefix)).into_iter().collect(),
        KeyPart::Global => vec!["*".to_string()],
        // PHP (and CGI) read `X_Api_Key` and `X-Api-Key` as one header
        // (`HTTP_X_API_KEY`): the other spelling of the name counts too.
        KeyPart::Header(name, _) => {
            let mut values = (inputs.header)(name).map(|v| header_values(&v)).unwrap_or_default();
            let twin = if name.contains('-') { name.replace('-', "_") } else { name.replace('_', "-") };
            if twin != *name {
                values.extend((inputs.header)(&twin).map(|v| header_values(&v)).unwrap_or_default());
            }
            values
        }
        KeyPart::Cookie(name, _) => (inputs.header)("cookie").map(|c| cookie_values(&c, name)).unwrap_or_default(),
        KeyPart::Query(name, _) => inputs.query.values(name).map(str::to_string).collect(),
        // The canonical path keeps what it cannot show percent-encoded
        // (`%20`); a typed group is read decoded, as the origin's router
        // hands it to the handler (` 42` is 42 to `parseInt`).
        KeyPart::PathGroup(name, value_type) => inputs
            .path_groups
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| {
                let v = if inputs.fold_path_groups && part.folds_with_match() { v.to_lowercase() } else { v.clone() };
                match value_type {
                    Some(_) => String::from_utf8_lossy(&crate::request::canon::decode_fully(v.as_bytes())).into_owned(),
                    None => v,
                }
            })
            .collect(),
        // PHP's `$_REQUEST` (cookies over the body over the query, with
        // PHP's built-in `request_order`) and Symfony's `$request->get()`
        // (the query over the body) read a form field from the query or a
        // cookie too, whichever wins: each is charged. A dotted JSON path
        // (`user.email`) is read from the body only.
        KeyPart::Body(field, _) => {
            let mut values = (inputs.body)(field);
            if !field.contains('.') {
                values.extend(inputs.query.values(field).map(str::to_string));
                values.extend((inputs.header)("cookie").map(|c| cookie_values(&c, field)).unwrap_or_default());
            }
            values
        }
        KeyPart::Country => inputs.country.map(|c| c.trim().to_ascii_uppercase()).into_iter().collect(),
        KeyPart::Asn => inputs.asn.map(|a| a.to_string()).into_iter().collect(),
        KeyPart::Credential => credentials(inputs),
    }
}

/// The headers in which LLM APIs take an API key as it is (Anthropic's,
/// Gemini's), beside `Authorization: Bearer` and Gemini's `key` query
/// parameter.
const CREDENTIAL_HEADERS: [&str; 2] = ["x-api-key", "x-goog-api-key"];

/// Every credential the request carries ([`KeyPart::Credential`]): the
/// token of each `Authorization` item whose scheme is `Bearer` (in any
/// case, RFC 9110 §11.1), each item of `x-api-key` and `x-goog-api-key`,
/// each `key` query parameter. Which one the API behind reads is its
/// business, so each is an identity and the request is charged to every
/// one ([`derive_keys`]): a client sending a spent key beside a fresh one
/// is still refused by the spent one. Another scheme
/// (`Basic`) names no credential.
fn credentials(inputs: &KeyInputs<'_>) -> Vec<String> {
    let items = |name: &str| -> Vec<String> {
        (inputs.header)(name).map(|v| v.split(',').map(|i| i.trim().to_string()).filter(|i| !i.is_empty()).collect()).unwrap_or_default()
    };
    let bearer = items("authorization").into_iter().filter_map(|item| {
        let (scheme, token) = item.split_once(' ')?;
        let token = token.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
    });
    let mut out: Vec<String> = bearer.collect();
    for name in CREDENTIAL_HEADERS {
        out.extend(items(name));
    }
    out.extend(inputs.query.values("key").map(str::to_string));
    out
}

/// One raw value as the part's key holds it: typed, and for body fields
/// hashed (no raw value is stored or logged); every reading of its type
/// ([`ValueType::readings`]). Empty: no identity.
fn read_values(part: &KeyPart, value: &str) -> Vec<String> {
    if part.named().is_none() {
        return match part {
            _ if value.is_empty() => Vec::new(),
            KeyPart::Credential => vec![sha256_hex(value)],
            _ => vec![value.to_string()],
        };
    }
    let readings = part.value_type().readings(value);
    match part {
        KeyPart::Body(..) => readings.iter().map(|r| sha256_hex(r)).collect(),
        _ => readings,
    }
}

/// The values a header could be read as: each comma-separated item (Go's
/// `Header.Get` and Java's `getHeader` read the first of a repeated
/// header, others the last), and the whole line when it has several (Node
/// joins a repeated header with `", "`).
fn header_values(joined: &str) -> Vec<String> {
    let items: Vec<&str> = joined.split(',').map(str::trim).filter(|i| !i.is_empty()).collect();
    let mut out: Vec<String> = Vec::new();
    for item in &items {
        if !out.iter().any(|o| o == item) {
            out.push((*item).to_string());
        }
    }
    if out.len() > 1 {
        out.push(joined.trim().to_string());
    }
    out
}

/// The key a one-part key of `part` would be for a request carrying
/// `value` for it, derived exactly as [`derive_keys`] derives it (typed; a
/// `body:` or `credential` value hashed); a header naming several different
/// items names no one. `None` for a value that would be missing, and for `ip`, `global`,
/// `country` and `asn`, which no request value names.
pub(crate) fn identity_key(part: &KeyPart, value: &str) -> Option<String> {
    let value = match part {
        KeyPart::Header(..) => {
            let items = header_values(value);
            match items.as_slice() {
                [one] => one.clone(),
                _ => return None,
            }
        }
        KeyPart::Ip | KeyPart::Global | KeyPart::Country | KeyPart::Asn => return None,
        _ => value.to_string(),
    };
    match read_values(part, &value).as_slice() {
        [one] => Some(format!("{part}={one}")),
        _ => None,
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    crate::request::hmac::hex(&Sha256::digest(text.as_bytes()))
}

/// Every raw value `field` of a request body could be read as, by content
/// type:
/// - `application/json` (and `+json`): a top-level member, or a dotted path
///   (`user.email`); strings, numbers and booleans are read, anything else
///   is absent. A member given twice counts twice (first-wins scanners such
///   as Go's gjson read the first, `JSON.parse` the last), and so does one
///   whose name differs only in ASCII case (Go's `encoding/json` and
///   ASP.NET Core's web defaults match member names case-insensitively);
/// - `application/x-www-form-urlencoded` and `multipart/form-data`: every
///   value of the field, as [`crate::request::body::form_field_values`] reads them
///   (names normalized as query keys are, see [`CanonicalQuery`]).
///
/// Anything else (text, malformed JSON, invalid UTF-8) has none: the rule's
/// missing-key policy then applies.
pub(crate) fn body_field_values(content_type: &str, body: &[u8], field: &str) -> Vec<String> {
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if crate::request::body::is_json(&media) {
        let Some(json) = crate::request::json::parse(body) else { return Vec::new() };
        let mut level = vec![&json];
        for part in field.split('.') {
            level = level.iter().flat_map(|node| node.members(part)).collect();
        }
        level.into_iter().filter_map(Json::scalar).map(str::to_string).collect()
    } else if media == "application/x-www-form-urlencoded" || media == "multipart/form-data" {
        crate::request::body::form_field_values(content_type, body, field)
    } else {
        Vec::new()
    }
}

/// A short label for a key in logs and admin output: 16 hex digits, the
/// first 8 bytes of HMAC-SHA256(`log_key`, key) when the Worker has the
/// secret `TOLLGATE_LOG_KEY`, else of the key's plain SHA-256. The raw key
/// (an IP, an account) is never logged.
///
/// Without a log key the label is unkeyed: anyone with the logs can test a
/// guess against it, and all 2^32 IPv4 addresses are a few seconds of
/// hashing, so an unkeyed `ip=` hash is as good as the address. With one,
/// only a holder of the secret can compute or test a label (`tollgate
/// hash`). Both have the same length, so log queries and dashboards do not
/// change when the secret is added; the labels themselves do.
pub(crate) fn key_hash(key: &str, log_key: Option<&[u8]>) -> String {
    use sha2::{Digest, Sha256};
    let digest: [u8; 32] = match log_key {
        Some(secret) => crate::request::hmac::hmac_sha256(secret, key.as_bytes()),
        None => Sha256::digest(key.as_bytes()).into(),
    };
    crate::request::hmac::hex(&digest[..8])
}

/// The log key a `TOLLGATE_LOG_KEY` secret stands for: its bytes with
/// surrounding whitespace trimmed (a secret stored with a trailing newline,
/// `echo key | wrangler secret put`, or read from a file, is the same key).
/// `None` for a blank secret, which keys nothing.
pub(crate) fn log_key(secret: &str) -> Option<Vec<u8>> {
    let trimmed = secret.trim();
    (!trimmed.is_empty()).then(|| trimmed.as_bytes().to_vec())
}

/// Every value cookie `name` could be read as in a `Cookie` header
/// (RFC 6265 §5.4): surrounding quotes removed and percent-decoded to a
/// fixpoint, as Express, PHP and Rack decode it (`sid=%61bc` is `sid=abc`).
/// A cookie given several times counts each value (Django reads the last,
/// most others the first), and so does one whose name PHP reads as the same
/// (`.`, spaces and a first `[` without a `]` after it become `_` in
/// `$_COOKIE`, the first kept: `laravel.session` and `laravel[session` are
/// `laravel_session`), or in another case
/// (nginx's `$cookie_NAME` ignores case).
pub(crate) fn cookie_values(header: &str, name: &str) -> Vec<String> {
    // PHP also reads a first `[` without a `]` after it as `_`.
    let php = |n: &str| {
        let n = n.trim();
        let n = match n.find('[') {
            Some(at) if !n[at..].contains(']') => format!("{}_{}", &n[..at], &n[at + 1..]),
            _ => n.to_string(),
        };
        n.replace(['.', ' '], "_")
    };
    let wanted = php(name);
    let mut out: Vec<String> = Vec::new();
    for pair in header.split(';') {
        let Some((k, v)) = pair.split_once('=') else { continue };
        // nginx's `$cookie_NAME` matches names case-insensitively.
        if !k.trim().eq_ignore_ascii_case(name) && !php(k).eq_ignore_ascii_case(&wanted) {
            continue;
        }
        let v = v.trim().trim_matches('"');
        let value = String::from_utf8_lossy(&crate::request::canon::decode_fully(v.as_bytes())).into_owned();
        if !out.contains(&value) {
            out.push(value);
        }
    }
    out
}

/// The value of cookie `name` when the header gives it exactly one
/// ([`cookie_values`]).
pub(crate) fn cookie_value(header: &str, name: &str) -> Option<String> {
    let mut values = cookie_values(header, name);
    (values.len() == 1).then(|| values.pop()).flatten()
}

/// The counting identity of a client address.
///
/// - IPv4 as dotted quad.
/// - IPv4-mapped IPv6 (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2), NAT64
///   well-known-prefix addresses (`64:ff9b::/96`, RFC 6052) and 6to4
///   addresses (`2002:V4ADDR::/48`, RFC 3056 §2) count as their IPv4
///   address: the same client reached over another stack. A 6to4 host owns
///   a whole /48 (65,536 /64s), so grouping it by `prefix` would hand it
///   that many buckets.
/// - Teredo addresses (`2001:0::/32`, RFC 4380 §4) count as the client's
///   public IPv4 address (`192.0.2.45`), the one its NAT sends from: the
///   first 64 bits name only the Teredo server, which every client of that
///   server shares, and the UDP port beside the address is the client's to
///   change (each new NAT mapping is a new port), so keying on it handed
///   out a bucket per port and let a Teredo client slip past a ban of its
///   IPv4 address. Clients behind one NAT share the bucket, as
///   they do over IPv4.
/// - Other IPv6 is masked to `prefix` bits and written as `network/prefix`,
///   so that spelling variants (case, zero compression) are one key and a
///   client cannot rotate through the addresses of its own subnet.
///
/// `None` when `raw` is not an IP address.
pub(crate) fn client_ip_key(raw: &str, ipv6_prefix: u8) -> Option<String> {
    match raw.trim().parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => Some(ipv4_text(v4)),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(&v6) {
                return Some(ipv4_text(v4));
            }
            if let Some(v4) = teredo_client(&v6) {
                return Some(ipv4_text(v4));
            }
            let prefix = u32::from(ipv6_prefix.min(128));
            let bits = u128::from(v6);
            let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
            Some(format!("{}/{}", Ipv6Addr::from(bits & mask), prefix))
        }
    }
}

/// `v4.to_string()` (dotted decimal, no leading zeros), written without
/// the formatter.
fn ipv4_text(v4: Ipv4Addr) -> String {
    let mut out = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        if octet >= 100 {
            out.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            out.push(char::from(b'0' + octet / 10 % 10));
        }
        out.push(char::from(b'0' + octet % 10));
    }
    out
}

/// The IPv4 address a mapped, NAT64 or 6to4 address stands for.
fn embedded_ipv4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let bits = u128::from(*v6);
    let s = v6.segments();
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::from(bits as u32));
    }
    // 6to4: the IPv4 address is bits 16..48 (RFC 3056 §2).
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::from((bits >> 80) as u32));
    }
    None
}

/// The client's public IPv4 address of a Teredo address (RFC 4380 §4):
/// prefix `2001:0000::/32`, server IPv4 (32 bits), flags (16), the port
/// XOR `0xFFFF` (16, not read: the client can change it), the address XOR
/// `0xFFFFFFFF` (32).
fn teredo_client(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    if s[..2] != [0x2001, 0] {
        return None;
    }
    let bits = u128::from(*v6);
    Some(Ipv4Addr::from(!(bits as u32)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn key_hash_is_short_and_stable() {
        assert_eq!(key_hash("ip=203.0.113.7", None), key_hash("ip=203.0.113.7", None));
        assert_eq!(key_hash("abc", None), "ba7816bf8f01cfea", "unkeyed: the SHA-256 prefix");
    }

    #[test]
    fn a_log_key_makes_the_hash_an_hmac() {
        assert_eq!(key_hash("abc", Some(b"k")), "342e519ce0ad6c03", "HMAC-SHA256(k, abc), first 8 bytes");
        let a = key_hash("ip=203.0.113.7", Some(b"first secret"));
        let b = key_hash("ip=203.0.113.7", Some(b"second secret"));
        assert_ne!(a, b);
        assert_ne!(a, key_hash("ip=203.0.113.7", None));
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_eq!(log_key(" s3cret\n").as_deref(), Some(&b"s3cret"[..]));
        assert_eq!(log_key(" \n"), None, "a blank secret keys nothing");
    }

    #[test]
    fn a_part_is_spelled_as_display_writes_it() {
        let texts = ["ip", "global", "country", "asn", "header:x-user", "cookie:sid", "query:id:int", "path:tenant:raw", "body:email:email", "header:x-a:lower"];
        for text in texts {
            let part = KeyPart::parse(text).unwrap();
            let mut spelled = String::from("k|");
            part.push_name(&mut spelled);
            assert_eq!(spelled, format!("k|{part}"), "{text}");
        }
    }

    #[test]
    fn ipv4_text_is_the_display_form() {
        for v4 in (0..=255u8).map(|o| [o, 255 - o, o / 2, o % 10]) {
            let v4 = Ipv4Addr::from(v4);
            assert_eq!(ipv4_text(v4), v4.to_string());
        }
    }

    #[test]
    fn ipv4_and_ipv6_prefixes() {
        assert_eq!(client_ip_key("203.0.113.7", 64).as_deref(), Some("203.0.113.7"));
        assert_eq!(
            client_ip_key("2001:db8:1:2:aaaa::1", 64).as_deref(),
            Some("2001:db8:1:2::/64")
        );
        assert_eq!(
            client_ip_key("2001:db8:1:2ff:aaaa::1", 56).as_deref(),
            Some("2001:db8:1:200::/56")
        );
        assert_eq!(client_ip_key("not an ip", 64), None);
    }

    #[test]
    fn spelling_variants_are_one_key() {
        let a = client_ip_key("2001:DB8:0:0:1::1", 64);
        let b = client_ip_key("2001:db8::1:0:0:2", 64);
        assert_eq!(a, b);
        assert_eq!(a.as_deref(), Some("2001:db8::/64"));
    }

    #[test]
    fn mapped_and_nat64_count_as_ipv4() {
        assert_eq!(client_ip_key("::ffff:203.0.113.7", 64).as_deref(), Some("203.0.113.7"));
        assert_eq!(client_ip_key("64:ff9b::203.0.113.7", 64).as_deref(), Some("203.0.113.7"));
        assert_eq!(client_ip_key("64:ff9b::cb00:7107", 64).as_deref(), Some("203.0.113.7"));
    }

    #[test]
    fn a_6to4_host_is_its_ipv4_address() {
        // 2002:c000:022d::/48 is the 6to4 prefix of 192.0.2.45 (RFC 3056 §2):
        // every /64 of it is one client, the IPv4 host itself.
        for raw in ["2002:c000:022d::1", "2002:c000:22d:1::1", "2002:C000:022D:ffff:1:2:3:4"] {
            assert_eq!(client_ip_key(raw, 64).as_deref(), Some("192.0.2.45"), "{raw}");
        }
        assert_eq!(client_ip_key("2002:cb00:7107::1", 48).as_deref(), Some("203.0.113.7"));
        assert_eq!(client_ip_key("2003:c000:022d::1", 64).as_deref(), Some("2003:c000:22d::/64"), "not 6to4");
    }

    #[test]
    fn a_teredo_client_is_its_public_ipv4_address() {
        // RFC 4380 §4's example: server 65.54.227.120, cone NAT, client seen
        // as 192.0.2.45 port 40000.
        let rfc = "2001:0000:4136:e378:8000:63bf:3fff:fdd2";
        assert_eq!(client_ip_key(rfc, 64).as_deref(), Some("192.0.2.45"), "the same bucket as the host over IPv4");
        // Another client of the same server (same /64): another key.
        let other = "2001:0:4136:e378:8000:63bf:3fff:fdd1";
        assert_eq!(client_ip_key(other, 64).as_deref(), Some("192.0.2.46"));
        // The same NAT, another port (a new mapping): the same key, so a
        // client cannot rotate ports past a limit or a ban of its address.
        assert_eq!(client_ip_key("2001:0:4136:e378:8000:ff3f:3fff:fdd2", 64).as_deref(), Some("192.0.2.45"));
        // The flags and server do not matter, only what identifies the client.
        assert_eq!(client_ip_key("2001:0:c633:6401:0:63bf:3fff:fdd2", 64), client_ip_key(rfc, 64));
        assert_eq!(client_ip_key("2001:1::1", 64).as_deref(), Some("2001:1::/64"), "not Teredo");
        assert_eq!(client_ip_key("2001:db8::1", 64).as_deref(), Some("2001:db8::/64"), "not Teredo");
    }

    fn inputs<'a>(
        header: &'a dyn Fn(&str) -> Option<String>,
        query: &'a CanonicalQuery,
        body: &'a dyn Fn(&str) -> Vec<String>,
    ) -> KeyInputs<'a> {
        KeyInputs {
            client_ip: Some("203.0.113.7"),
            header,
            query,
            path_groups: &[],
            fold_path_groups: false,
            body,
            country: Some("de"),
            asn: Some(64_500),
            ipv6_prefix: 64,
        }
    }

    fn part(text: &str) -> KeyPart {
        KeyPart::parse(text).unwrap()
    }

    #[test]
    fn key_parts_parse_and_combine() {
        assert_eq!(KeyPart::parse("header:X-Api-Key"), Ok(KeyPart::Header("x-api-key".into(), None)));
        assert_eq!(KeyPart::parse("path:school:int"), Ok(KeyPart::PathGroup("school".into(), Some(ValueType::Int))));
        assert_eq!(part("path:school:int").to_string(), "path:school:int");
        assert_eq!(
            KeyPart::parse("path:school:integer").map_err(|e| e.to_string()),
            Err("`path:school:integer`: unknown type `integer` (use raw, lower, int, uuid or email after the name)".to_string())
        );
        assert_eq!(
            KeyPart::parse("header:").map_err(|e| e.to_string()),
            Err("`header:` needs a name after `header:`".to_string())
        );
        assert_eq!(KeyPart::parse("ip:x"), Err(KeyPartError::Unknown("ip:x".into())));
        assert!(KeyPart::parse("colour").unwrap_err().to_string().starts_with("unknown key part `colour` (use ip,"));
        let query = CanonicalQuery::parse("tenant=t1");
        let header = |name: &str| match name {
            "x-api-key" => Some(" k1 ".to_string()),
            "cookie" => Some("a=1; sid=\"s2\"".to_string()),
            "x-forwarded-for" => Some("198.51.100.1".to_string()),
            _ => None,
        };
        let groups = [("school".to_string(), "s9".to_string())];
        let body = |field: &str| if field == "email" { vec![" User@Example.COM ".to_string()] } else { vec![] };
        let with_groups = KeyInputs { path_groups: &groups, ..inputs(&header, &query, &body) };
        let parts: Vec<KeyPart> = ["ip", "header:x-api-key", "cookie:sid", "query:tenant", "path:school", "global", "country", "asn"]
            .iter()
            .map(|p| part(p))
            .collect();
        assert_eq!(
            derive_keys(&parts, &with_groups).unwrap(),
            ["ip=203.0.113.7|header:x-api-key=k1|cookie:sid=s2|query:tenant=t1|path:school=s9|global=*|country=DE|asn=64500"]
        );
        let email = derive_key(&[part("body:email")], &with_groups).unwrap();
        assert_eq!(email, format!("body:email={}", hash_identity("user@example.com").unwrap()));
        assert!(!email.contains('@'), "no raw value in the key");
        assert_eq!(
            derive_keys(&[part("header:x-missing")], &with_groups),
            Err(KeyError::Missing(MissingPart(part("header:x-missing"))))
        );
        let no_ip = KeyInputs { client_ip: None, ..inputs(&header, &query, &body) };
        assert_eq!(derive_key(&[KeyPart::Ip], &no_ip), Err(MissingPart(KeyPart::Ip)), "X-Forwarded-For is never read");
        assert_eq!(derive_key(&[part("body:password")], &no_ip), Err(MissingPart(part("body:password"))));
    }

    /// When the origin might read any of several values, every
    /// one is charged, never "missing" (a fresh or skipped bucket).
    #[test]
    fn every_identity_an_origin_could_read_is_charged() {
        let none = |_: &str| None;
        let no_body = |_: &str| Vec::new();
        let rotating = CanonicalQuery::parse("token=random&token=real&token=real");
        assert_eq!(
            derive_keys(&[part("query:token")], &inputs(&none, &rotating, &no_body)).unwrap(),
            ["query:token=random", "query:token=real"]
        );
        let twice = |name: &str| (name == "x-api-key").then(|| "REAL, junk".to_string());
        let q = CanonicalQuery::parse("");
        assert_eq!(
            derive_keys(&[part("header:x-api-key")], &inputs(&twice, &q, &no_body)).unwrap(),
            ["header:x-api-key=REAL", "header:x-api-key=junk", "header:x-api-key=REAL, junk"],
            "Go reads the first, Node the joined line"
        );
        let underscore = |name: &str| match name {
            "x-api-key" => Some("junk".to_string()),
            "x_api_key" => Some("REAL".to_string()),
            _ => None,
        };
        assert_eq!(
            derive_keys(&[part("header:x-api-key")], &inputs(&underscore, &q, &no_body)).unwrap(),
            ["header:x-api-key=junk", "header:x-api-key=REAL"],
            "PHP reads X_Api_Key as X-Api-Key"
        );
        let php = |name: &str| (name == "cookie").then(|| "laravel.session=MINE; laravel_session=rnd".to_string());
        assert_eq!(
            derive_keys(&[part("cookie:laravel_session")], &inputs(&php, &q, &no_body)).unwrap(),
            ["cookie:laravel_session=MINE", "cookie:laravel_session=rnd"],
            "PHP reads `laravel.session` as `laravel_session`"
        );
        // Several parts: every combination, up to the cap.
        let many = CanonicalQuery::parse("a=1&a=2&b=x&b=y&b=z");
        let both = [part("query:a"), part("query:b")];
        assert_eq!(
            derive_keys(&both, &inputs(&none, &many, &no_body)),
            Err(KeyError::TooMany { part: part("query:b"), identities: 6 })
        );
        assert_eq!(derive_keys(&both[..1], &inputs(&none, &many, &no_body)).unwrap().len(), 2);
        let five = CanonicalQuery::parse("t=1&t=2&t=3&t=4&t=5");
        assert!(derive_keys(&[part("query:t")], &inputs(&none, &five, &no_body))
            .unwrap_err()
            .to_string()
            .contains("at most 4"));
    }

    #[test]
    fn typed_values_are_read_as_the_origin_reads_them() {
        for (spelling, read) in [("42", "42"), ("042", "42"), ("0042", "42"), ("+42", "42"), ("42 ", "42"), (" 42", "42"), ("42abc", "42"), ("0", "0"), ("-0", "0"), ("-7", "-7")] {
            assert_eq!(ValueType::Int.read(spelling).as_deref(), Some(read), "{spelling:?}");
        }
        for no_id in ["", "abc", "+", " - 4"] {
            assert_eq!(ValueType::Int.read(no_id), None, "{no_id:?}");
            assert!(ValueType::Int.readings(no_id).is_empty(), "{no_id:?}");
        }
        for (spelling, readings) in [
            ("42", &["42"][..]),
            ("042", &["42"]),
            ("4.2e1", &["4", "42"]),
            ("42e1", &["42", "420"]),
            ("42.9", &["42"]),
            ("-4.2E1", &["-4", "-42"]),
            ("+042.50e1", &["42", "425"]),
            (".5e2", &["50"]),
            ("0.29e2", &["0", "29"]),
            ("00", &["0"]),
            ("42.", &["42"]),
            ("0x2a", &["0", "42"]),
            ("0X2A", &["0", "42"]),
            ("0o52", &["0", "42"]),
            ("0b101010", &["0", "42"]),
            ("4_2", &["4", "42"]),
            ("1e400", &["1"]),
            ("0x", &["0"]),
            ("0x-2a", &["0"]),
            ("inf", &[]),
            ("NaN", &[]),
        ] {
            assert_eq!(ValueType::Int.readings(spelling), readings, "{spelling:?}");
        }
        let uuid = "6f1c2a6e-3c1b-4c7a-9f4e-0b1d2c3e4f50";
        for spelling in [uuid, &uuid.to_uppercase(), &format!("{{{uuid}}}"), &uuid.replace('-', ""), &format!("urn:uuid:{uuid}")] {
            assert_eq!(ValueType::Uuid.read(spelling).as_deref(), Some("6f1c2a6e3c1b4c7a9f4e0b1d2c3e4f50"), "{spelling}");
        }
        assert_eq!(ValueType::Uuid.read("not-a-uuid"), None);
        for spelling in ["victim@x.io", "Victim@X.io", " víctim@x.io", "vìctim@x.io", "vic\u{AD}tim@x.io", "\u{FF56}ictim@x.io", "vi\u{200B}ctim@x.io", "vi\u{301}ctim@x.io", "VÍCTIM@X.IO"] {
            assert_eq!(fold_email(spelling), "victim@x.io", "{spelling:?}");
        }
        assert_eq!(fold_email("straße@x.de"), "strasse@x.de");
        for compatible in ["\u{24E5}ictim@x.io", "\u{1D42F}ictim@x.io", "victim\u{FF20}x.io", "\u{1D5CF}\u{1D5C2}ctim@x.io"] {
            assert_eq!(fold_email(compatible), "victim@x.io", "{compatible:?}");
        }
        assert_eq!(fold_email("łukasz@x.pl"), "lukasz@x.pl");
        assert_ne!(fold_email("vector@x.io"), fold_email("victor@x.io"));
        let group = |name: &str, value: &str| {
            let groups = [(name.to_string(), value.to_string())];
            let q = CanonicalQuery::parse("");
            let keys = derive_keys(&[part(&format!("path:{name}:int"))], &KeyInputs { path_groups: &groups, ..inputs(&|_| None, &q, &|_| Vec::new()) });
            keys.map(|k| k.join(" "))
        };
        assert_eq!(group("school", "042"), Ok("path:school:int=42".into()));
        assert_eq!(group("school", "+42"), group("school", "42"));
        assert_eq!(group("school", "%2042"), group("school", "42"), "decoded, as the router hands it over");
        assert!(group("school", "abc").is_err(), "no integer: missing, the rule's policy applies");
    }

    #[test]
    fn untyped_ids_are_flagged() {
        for flagged in ["path:id", "path:school_id", "query:tenantId", "header:x-tenant-id", "body:user.id"] {
            assert!(part(flagged).untyped_id(), "{flagged}");
        }
        for fine in ["path:id:int", "path:school", "header:x-api-key", "ip", "body:email"] {
            assert!(!part(fine).untyped_id(), "{fine}");
        }
    }

    #[test]
    fn cookies_count_every_value() {
        assert_eq!(cookie_value("sid=abc", "sid").as_deref(), Some("abc"));
        assert_eq!(cookie_value("sid=%61bc", "sid").as_deref(), Some("abc"), "decoded as origins do");
        assert_eq!(cookie_value("a=1; sid=\"a%62c\"", "sid").as_deref(), Some("abc"));
        assert_eq!(cookie_values("sid=x; sid=abc", "sid"), ["x", "abc"], "either could be the one the origin reads");
        assert_eq!(cookie_values("sid=abc; sid=%61bc", "sid"), ["abc"]);
        assert_eq!(cookie_values("my.sid=1; my sid=2; my_sid=3; mysid=4", "my_sid"), ["1", "2", "3"]);
        assert_eq!(cookie_values("LARAVEL_SESSION=a; laravel_session=b", "laravel_session"), ["a", "b"], "nginx ignores case");
        assert_eq!(cookie_values("laravel[session=MINE; laravel_session=b", "laravel_session"), ["MINE", "b"], "PHP: an unmatched [ is _");
        assert_eq!(cookie_values("laravel[session]=x; laravel_session=b", "laravel_session"), ["b"], "a matched [ ] makes an array");
    }

    #[test]
    fn body_fields_from_json_and_forms() {
        let json = br#"{"email":" A@B.io ","user":{"id":42},"list":[1],"n":1.5}"#;
        let values = |ct: &str, body: &[u8], field: &str| body_field_values(ct, body, field);
        assert_eq!(values("application/json; charset=utf-8", json, "email"), [" A@B.io "]);
        assert_eq!(values("application/vnd.api+json", json, "user.id"), ["42"]);
        assert_eq!(values("application/json", json, "n"), ["1.5"]);
        assert!(values("application/json", json, "list").is_empty());
        assert!(values("application/json", b"{not json", "email").is_empty());
        // Duplicates and case-insensitive twins are all candidates.
        let dup = br#"{"email":"victim@x","password":"p","email":"decoy-1@x"}"#;
        assert_eq!(values("application/json", dup, "email"), ["victim@x", "decoy-1@x"]);
        let twin = br#"{"email":"decoy@x","Email":"victim@x","user":{"ID":7}}"#;
        assert_eq!(values("application/json", twin, "email"), ["decoy@x", "victim@x"]);
        assert_eq!(values("application/json", twin, "user.id"), ["7"]);
        let form = b"email=a%40b.io&password=x+y&email=c%40d.io";
        assert_eq!(values("application/x-www-form-urlencoded", form, "email"), ["a@b.io", "c@d.io"]);
        assert!(values("text/plain", form, "email").is_empty());
        let multipart = b"--xyz\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\nvictim@x.io\r\n--xyz\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\ndecoy@x.io\r\n--xyz--\r\n";
        assert_eq!(values("multipart/form-data; boundary=xyz", multipart, "email"), ["victim@x.io", "decoy@x.io"]);
        assert!(values("application/x-www-form-urlencoded", &[0xff, 0xfe], "email").is_empty());
        assert_eq!(hash_identity("  "), None);
        assert_eq!(hash_identity(" A@B.io "), hash_identity("a@b.io"));
    }

    /// Row 4 against PHP: `$_REQUEST['email']` is the cookie over
    /// the form body (and Symfony's `get()` the query over it), so a decoy
    /// in the body does not hide the victim named in a cookie or the query.
    #[test]
    fn a_body_field_is_also_read_from_the_query_and_cookies() {
        let email = |body: &str, query: &str, cookie: Option<&str>| {
            let query = CanonicalQuery::parse(query);
            let body_values = |_: &str| if body.is_empty() { Vec::new() } else { vec![body.to_string()] };
            let header = move |name: &str| (name == "cookie").then(|| cookie.map(str::to_string)).flatten();
            derive_keys(&[part("body:email:email")], &inputs(&header, &query, &body_values))
        };
        let victim = email("victim@x.test", "", None).unwrap();
        let both = email("decoy@x.test", "", Some("sid=1; email=victim%40x.test")).unwrap();
        assert_eq!(both.len(), 2);
        assert!(both.contains(&victim[0]), "the cookie's identity is charged");
        let both = email("decoy@x.test", "email=V%C3%ADctim@x.test", None).unwrap();
        assert!(both.contains(&victim[0]), "the query's, typed as the body's is");
        assert_eq!(email("", "", Some("email=victim@x.test")).unwrap(), victim, "a cookie alone");
        assert_eq!(email("victim@x.test", "email=victim@x.test", Some("email=victim@x.test")).unwrap(), victim, "one identity once");
        assert!(matches!(email("", "", Some("other=1")), Err(KeyError::Missing(_))));
    }

    /// An identity the origin names (a success's `success_identity_header`)
    /// gives the very key the request's own value gives.
    #[test]
    fn identity_keys_derive_as_request_keys_do() {
        let body = KeyPart::Body("email".into(), None);
        let from_body = derive_key(std::slice::from_ref(&body), &KeyInputs {
            client_ip: None,
            header: &|_| None,
            query: &CanonicalQuery::parse(""),
            path_groups: &[],
            fold_path_groups: false,
            body: &|_| vec![" Ann@Example.com".to_string()],
            country: None,
            asn: None,
            ipv6_prefix: 64,
        });
        assert_eq!(identity_key(&body, "ann@example.com").as_deref(), from_body.as_deref().ok());
        assert_ne!(identity_key(&body, "ann@example.org"), identity_key(&body, "ann@example.com"));
        let header = KeyPart::Header("x-user".into(), None);
        assert_eq!(identity_key(&header, " u1 ").as_deref(), Some("header:x-user=u1"));
        assert_eq!(identity_key(&header, "u1, u2"), None, "two identities are none");
        assert_eq!(identity_key(&KeyPart::PathGroup("school".into(), None), "s9").as_deref(), Some("path:school=s9"));
        assert_eq!(identity_key(&body, "  "), None);
        assert_eq!(identity_key(&KeyPart::Ip, "203.0.113.7"), None, "no response header names the client");
    }

    /// Anthropic's SDKs send `Authorization: Bearer`,
    /// older clients `x-api-key`, Gemini's `x-goog-api-key` or `?key=`:
    /// `credential` reads whichever are present, hashed, and a request
    /// carrying two different credentials is charged to both.
    #[test]
    fn a_credential_is_read_from_any_header_an_llm_api_reads_and_each_is_charged() {
        let keys = |pairs: &[(&str, &str)], query: &str| {
            let owned: Vec<(String, String)> = pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            let header = move |name: &str| owned.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
            let query = CanonicalQuery::parse(query);
            derive_keys(&[part("credential")], &inputs(&header, &query, &|_| Vec::new()))
        };
        let sk = format!("credential={}", sha256_hex("sk-ant-1"));
        assert_eq!(part("credential").to_string(), "credential");
        for (pairs, query) in [
            (&[("authorization", "Bearer sk-ant-1")][..], ""),
            (&[("authorization", "bearer   sk-ant-1 ")][..], ""),
            (&[("x-api-key", "sk-ant-1")][..], ""),
            (&[("x-goog-api-key", "sk-ant-1")][..], ""),
            (&[][..], "key=sk-ant-1"),
            (&[("authorization", "Bearer sk-ant-1"), ("x-api-key", "sk-ant-1")][..], ""),
        ] {
            assert_eq!(keys(pairs, query), Ok(vec![sk.clone()]), "{pairs:?} {query}: one credential, one identity");
        }
        assert!(!sk.contains("sk-ant"), "never the raw key");
        let two = keys(&[("authorization", "Bearer fresh"), ("x-api-key", "sk-ant-1")], "").unwrap();
        assert_eq!(two.len(), 2, "both charged: {two:?}");
        assert!(two.contains(&sk));
        let repeated = keys(&[("authorization", "Bearer a, Bearer b")], "").unwrap();
        assert_eq!(repeated.len(), 2, "{repeated:?}");
        for (pairs, query) in [(&[("authorization", "Basic dXNlcjpwYXNz")][..], ""), (&[("authorization", "Bearer ")][..], ""), (&[][..], "")] {
            assert!(matches!(keys(pairs, query), Err(KeyError::Missing(_))), "{pairs:?}: no credential");
        }
        let many = keys(&[("authorization", "Bearer a, Bearer b"), ("x-api-key", "c, d"), ("x-goog-api-key", "e")], "");
        assert!(matches!(many, Err(KeyError::TooMany { .. })), "{many:?}");
        assert_eq!(identity_key(&KeyPart::Credential, "sk-ant-1"), Some(sk), "an override names the key as a request does");
        assert!(KeyPart::Credential.identifies_client());
    }

    /// Normalizes an identity such as an email (trimmed, lowercased) and hashes
    /// it with SHA-256 (hex), as a `body:` key part holds it by default. `None`
    /// for a value that is empty once trimmed.
    pub(crate) fn hash_identity(raw: &str) -> Option<String> {
        ValueType::Lower.read(raw).map(|v| sha256_hex(&v))
    }
}

#[cfg(test)]
mod json_number_tests {
    use super::json_number;
    use proptest::prelude::*;

    /// What the usage scanner's `whole` relied on before it read numbers
    /// with [`json_number`]: `str::parse::<f64>`, finite values only.
    fn parsed(text: &str) -> Option<f64> {
        text.parse::<f64>().ok().filter(|f| f.is_finite())
    }

    #[test]
    fn reads_what_str_parse_reads() {
        for text in ["0", "-0", "1.", "007.0", "00.5e1", ".5e1", "1.e5", "1e05", "1E+5", "1e-400", "1e400", "inf", "NaN", "infinity", ".", "-", "e5", ".e1", "1.5e", "-+1", "1.0.0", "0x10", "12345678901234567890", "1.8e19"] {
            assert_eq!(json_number(text).filter(|f| f.is_finite()), parsed(text), "{text:?}");
        }
    }

    /// A whole number below 2^53 (every integer there is an f64), as the
    /// usage scanner keeps one.
    fn whole(f: Option<f64>) -> Option<u64> {
        f.filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 9_007_199_254_740_992.0).map(|f| f as u64)
    }

    proptest! {
        /// The same whole numbers below 2^53; any other value within one
        /// unit in the last place (serde_json's parser, without
        /// `float_roundtrip`, may round twice past 2^53 or with large
        /// exponents: `72.26E74`).
        #[test]
        fn reads_any_decimal_as_str_parse_does(text in "-?[0-9]{0,4}(\\.[0-9]{0,4})?([eE][-+]?[0-9]{1,3})?") {
            let (ours, std) = (json_number(&text).filter(|f| f.is_finite()), parsed(&text));
            prop_assert_eq!(whole(ours), whole(std), "{:?}", text);
            prop_assert_eq!(ours.is_some(), std.is_some(), "{:?}", text);
            if let (Some(a), Some(b)) = (ours, std) {
                prop_assert!((a - b).abs() <= b.abs() * f64::EPSILON, "{:?}: {} vs {}", text, a, b);
            }
        }
    }
}
