//! What a request body holds as parameters, as origins read it (pure).
//!
//! Three kinds of body hold parameters:
//! - `application/x-www-form-urlencoded` and `multipart/form-data` (RFC
//!   7578): PHP (`$_POST`, `$_REQUEST`), Laravel (`input()`), Symfony,
//!   Rails (`params`), Spring (`@RequestParam`), Flask/Werkzeug
//!   (`request.form`) and Express with multer or busboy (`req.body`) read
//!   both as parameters;
//! - `application/json` and `+json` types: Rails merges a JSON object's
//!   members into `params`, Laravel into `input()` (and reads `_method`
//!   from them), and Express's `req.body` is the object, where the
//!   method-override README's custom logic finds `_method`. Its top-level
//!   scalar members (and an array member's scalar elements) are the
//!   parameters ([`crate::request::json::Json::parameters`]).
//!
//! Rule conditions and `_method` look in all three (`pipeline::plan`). The
//! media type is read as PHP reads it: up to the first `;`, `,` or space,
//! in any case.
//!
//! Multipart is read leniently, so that tollgate sees at least every field
//! a lenient origin sees (a field seen that an origin does not see only
//! makes a limit stricter):
//! - a delimiter is any line that *starts* with `--` and the boundary (PHP
//!   compares only that prefix; RFC 2046 §5.1.1 allows only whitespace
//!   after it), lines ending in CRLF or a bare LF; a close delimiter
//!   (`--boundary--`) ends the parts, but parts after it are read too;
//! - the boundary is every value the content type gives it: each
//!   `boundary` parameter, and PHP's reading (the first `boundary`
//!   substring, then what follows the next `=`); the fields of every
//!   reading are kept;
//! - a field's name is read with quotes and backslash escapes (RFC 7578
//!   §4.2, busboy) and also as PHP reads it (only `\\` and `\"` escaped, or
//!   in single quotes), both when they differ;
//! - a part with a `filename` is a file (PHP's `$_FILES`, multer's
//!   `req.files`), never a parameter value. Its *name* counts, with the
//!   empty value: Laravel's `has()` and Rails' `params` see the name
//!   present, never a string that could equal a condition's value.
//!
//! A body that may hold parameters but cannot be read is reported as
//! [`Unreadable`], never taken as empty: over the cap, compressed, in a
//! charset whose ASCII bytes may not be ASCII, with a transfer-encoded
//! part, malformed multipart or malformed JSON (a lenient origin parser,
//! JSON5 or one that stops at the first complete value, may still read
//! members from it).

use crate::request::canon::{form_pairs, CanonicalQuery, Source};
use std::fmt;

/// What a request body holds as parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyParams {
    /// Every `(name, value)` it holds, decoded, names as sent (not yet
    /// normalized: see [`CanonicalQuery::join`]), in order; a file part
    /// gives its name with the empty value.
    Pairs(Vec<(String, String)>),
    /// It may hold parameters, but they cannot be read.
    Unreadable(Unreadable),
    /// Not a body that holds parameters (text, none, ...).
    NotParameters,
}

/// Why a body that may hold parameters cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Larger than `body_limit` (announced or streamed): not buffered.
    TooLarge,
    /// A `Content-Encoding` other than `identity` (as sent): origins behind
    /// a decompressing server or middleware read the decoded parameters.
    Compressed(String),
    /// A charset in which ASCII bytes may not be ASCII characters (as sent:
    /// `utf-16`, `ibm037`, which ASP.NET decodes).
    Charset(String),
    /// A part's `Content-Transfer-Encoding` other than `7bit`, `8bit` or
    /// `binary` (as sent: `base64`, `quoted-printable`).
    TransferEncoded(String),
    /// Multipart that does not parse.
    Malformed(Malformed),
    /// A JSON body that does not parse.
    MalformedJson,
}

/// How a multipart body is malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// The content type names no boundary.
    NoBoundary,
    /// The content type gives more than [`MAX_BOUNDARIES`] boundaries.
    TooManyBoundaries,
    /// A body that is not blank has no delimiter line.
    NoDelimiter,
    /// The last delimiter is not a close delimiter (`--boundary--`).
    NoEnd,
    /// A part has no blank line after its headers.
    PartHeaders,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::TooLarge => f.write_str("larger than body_limit"),
            Unreadable::Compressed(encoding) => write!(f, "Content-Encoding `{encoding}`"),
            Unreadable::Charset(charset) => write!(f, "charset `{charset}`"),
            Unreadable::TransferEncoded(encoding) => write!(f, "a part's Content-Transfer-Encoding `{encoding}`"),
            Unreadable::MalformedJson => f.write_str("malformed JSON"),
            Unreadable::Malformed(why) => {
                let why = match why {
                    Malformed::NoBoundary => "no boundary in the content type",
                    Malformed::TooManyBoundaries => "more than 4 boundaries in the content type",
                    Malformed::NoDelimiter => "no boundary line",
                    Malformed::NoEnd => "no closing boundary line",
                    Malformed::PartHeaders => "a part without a blank line after its headers",
                };
                write!(f, "malformed multipart: {why}")
            }
        }
    }
}

impl std::error::Error for Unreadable {}

/// The kinds of body that hold parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Form,
    Multipart,
    Json,
}

/// What the headers say: the kind of parameter body, `None` for a body
/// that holds no parameters, or why it cannot be read whatever its bytes.
fn announced(content_type: &str, content_encoding: Option<&str>) -> Result<Option<BodyKind>, Unreadable> {
    let trimmed = content_type.trim_start();
    let end = trimmed.bytes().position(|b| matches!(b, b';' | b',' | b' ' | b'\t')).unwrap_or(trimmed.len());
    let media = &trimmed[..end];
    let kind = if media.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
        BodyKind::Form
    } else if media.eq_ignore_ascii_case("multipart/form-data") {
        BodyKind::Multipart
    } else if is_json(media) {
        BodyKind::Json
    } else {
        return Ok(None);
    };
    for coding in content_encoding.unwrap_or_default().split(',') {
        let coding = coding.trim();
        if !coding.is_empty() && !coding.eq_ignore_ascii_case("identity") {
            return Err(Unreadable::Compressed(content_encoding.unwrap_or_default().trim().to_string()));
        }
    }
    check_charset(content_type)?;
    Ok(Some(kind))
}

/// Whether [`parameters`] needs the body's bytes: the headers announce a
/// parameter body and do not already make it unreadable.
pub fn needs_bytes(content_type: &str, content_encoding: Option<&str>) -> bool {
    matches!(announced(content_type, content_encoding), Ok(Some(_)))
}

/// What a body holds as parameters, from its `Content-Type`, its
/// `Content-Encoding` and its bytes (`None`: larger than `body_limit`, not
/// buffered). The headers are judged first: a body they make unreadable or
/// parameter-free needs no bytes ([`needs_bytes`]).
pub fn parameters(content_type: &str, content_encoding: Option<&str>, bytes: Option<&[u8]>) -> BodyParams {
    let kind = match announced(content_type, content_encoding) {
        Ok(Some(kind)) => kind,
        Ok(None) => return BodyParams::NotParameters,
        Err(why) => return BodyParams::Unreadable(why),
    };
    let Some(bytes) = bytes else { return BodyParams::Unreadable(Unreadable::TooLarge) };
    match kind {
        BodyKind::Form => BodyParams::Pairs(form_pairs(&String::from_utf8_lossy(bytes))),
        BodyKind::Multipart => match multipart(content_type, bytes) {
            (_, Some(why)) => BodyParams::Unreadable(why),
            (fields, None) => BodyParams::Pairs(fields.into_iter().map(|(name, value)| (name, value.unwrap_or_default())).collect()),
        },
        BodyKind::Json => match crate::request::json::parse(bytes) {
            Some(json) => BodyParams::Pairs(json.parameters()),
            None => BodyParams::Unreadable(Unreadable::MalformedJson),
        },
    }
}

/// Whether a media type (without parameters) is JSON: `application/json`
/// or a structured `+json` type (RFC 6839), in any case.
pub(crate) fn is_json(media: &str) -> bool {
    let media = media.trim();
    media.eq_ignore_ascii_case("application/json")
        || media.len() > 5 && media.is_char_boundary(media.len() - 5) && media[media.len() - 5..].eq_ignore_ascii_case("+json")
}

/// Every value of the form field `name` (compared as query keys are, see
/// [`CanonicalQuery::values`]) in a urlencoded or multipart body, in order
/// of appearance, each once; files are not values. Empty for other bodies
/// and for an unknown charset. Malformed multipart gives what its parts
/// hold, an unterminated last part included: every value an origin might
/// read. The caller judges `Content-Encoding` (see [`parameters`]).
pub fn form_field_values(content_type: &str, bytes: &[u8], name: &str) -> Vec<String> {
    let pairs = match announced(content_type, None) {
        Ok(Some(BodyKind::Form)) => form_pairs(&String::from_utf8_lossy(bytes)),
        Ok(Some(BodyKind::Multipart)) => multipart(content_type, bytes).0.into_iter().filter_map(|(name, value)| Some((name, value?))).collect(),
        _ => return Vec::new(),
    };
    let mut fields = CanonicalQuery::default();
    fields.join(Source::Body, pairs);
    let mut out: Vec<String> = Vec::new();
    for value in fields.values(name) {
        if !out.iter().any(|seen| seen == value) {
            out.push(value.to_string());
        }
    }
    out
}

/// Refuses a `charset` parameter whose ASCII bytes may not be ASCII
/// characters. Accepted: UTF-8, US-ASCII, the ISO-8859 and windows-125x
/// families (Latin-1 among them), where a name or value tollgate reads as
/// ASCII is what the origin reads.
fn check_charset(header: &str) -> Result<(), Unreadable> {
    for charset in param(header, "charset") {
        let c = charset.trim().as_bytes();
        let named = ["utf-8", "utf8", "us-ascii", "ascii", "latin1", "latin-1"].iter().any(|n| c.eq_ignore_ascii_case(n.as_bytes()));
        let numbered = ["iso-8859-", "iso8859-", "windows-125", "cp125"].iter().any(|prefix| {
            let (head, tail) = c.split_at(prefix.len().min(c.len()));
            head.eq_ignore_ascii_case(prefix.as_bytes()) && !tail.is_empty() && tail.iter().all(u8::is_ascii_digit)
        });
        if !named && !numbered {
            return Err(Unreadable::Charset(charset));
        }
    }
    Ok(())
}

/// An RFC 8187 (formerly 5987) extended parameter value,
/// `charset'language'percent-encoded`, decoded: Werkzeug (Flask) and
/// busboy read a part's `name*=UTF-8''mo%64e` as the field `mode`, and
/// prefer it to a plain `name`. ISO-8859-1 bytes are read as Latin-1,
/// anything else as UTF-8 (invalid bytes as U+FFFD). `None` without the
/// two `'`.
fn extended_value(value: &str) -> Option<String> {
    let mut pieces = value.splitn(3, '\'');
    let charset = pieces.next()?.trim();
    let _language = pieces.next()?;
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(pieces.next()?).collect();
    Some(decode_charset(charset, &bytes))
}

/// Most RFC 2231 continuation segments (`name*0`, `name*1`, ...) joined.
const MAX_CONTINUATIONS: usize = 16;

/// A `name` split into RFC 2231 continuations (`name*0=em; name*1=ail`,
/// or extended: `name*0*=UTF-8''em; name*1*=%61il`), joined in order up to
/// the first missing segment, as Werkzeug joins them (and prefers the
/// result to a plain `name`). `None` without a `name*0`.
fn continued_name(disposition: &str) -> Option<String> {
    let mut charset = String::new();
    let mut bytes = Vec::new();
    for n in 0..MAX_CONTINUATIONS {
        if let Some(segment) = param(disposition, &format!("name*{n}*")).into_iter().next() {
            let encoded = if n == 0 {
                let mut pieces = segment.splitn(3, '\'');
                charset = pieces.next().unwrap_or_default().to_string();
                pieces.nth(1).unwrap_or_default().to_string()
            } else {
                segment
            };
            bytes.extend(percent_encoding::percent_decode_str(&encoded));
        } else if let Some(segment) = param(disposition, &format!("name*{n}")).into_iter().next() {
            bytes.extend(segment.bytes());
        } else {
            break;
        }
    }
    (!bytes.is_empty()).then(|| decode_charset(&charset, &bytes))
}

/// `bytes` in `charset`: ISO-8859-1 as Latin-1, anything else as UTF-8
/// (invalid bytes as U+FFFD).
fn decode_charset(charset: &str, bytes: &[u8]) -> String {
    let charset = charset.trim();
    if charset.eq_ignore_ascii_case("iso-8859-1") || charset.eq_ignore_ascii_case("latin1") {
        bytes.iter().map(|&b| char::from(b)).collect()
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// Every reading of the parameter `wanted` (in any case) of a header
/// value, after its first `;` (`form-data; name="a"; filename="b"`):
/// trimmed, or unquoted. A quoted value is read with every backslash
/// escape (RFC 7578 §4.2, busboy) and, when that differs, once more as PHP
/// reads it (only `\\` and `\"` escaped); a value in single quotes also
/// without them (PHP).
fn param(header: &str, wanted: &str) -> Vec<String> {
    let bytes = header.as_bytes();
    let mut out = Vec::new();
    let Some(mut at) = bytes.iter().position(|&b| b == b';') else { return out };
    while at < bytes.len() {
        // `at` is on a `;`: a parameter follows. Slices start and end at
        // ASCII bytes, so on character boundaries.
        let start = at + 1;
        at = start;
        while at < bytes.len() && !matches!(bytes[at], b'=' | b';') {
            at += 1;
        }
        let name = header[start..at].trim();
        let found = name.eq_ignore_ascii_case(wanted);
        if bytes.get(at) != Some(&b'=') {
            continue;
        }
        at += 1;
        while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        let quoted = bytes.get(at) == Some(&b'"');
        if quoted {
            let (escaped, php, end) = read_quoted(bytes, at + 1);
            at = end;
            if found {
                out.push(String::from_utf8_lossy(&escaped).into_owned());
                if php != escaped {
                    out.push(String::from_utf8_lossy(&php).into_owned());
                }
            }
        }
        let value_start = at;
        while at < bytes.len() && bytes[at] != b';' {
            at += 1;
        }
        if found && !quoted {
            let token = header[value_start..at].trim();
            out.push(token.to_string());
            if let Some(inner) = token.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
                out.push(inner.to_string());
            }
        }
    }
    out
}

/// A quoted parameter value from `at` (just past its opening `"`) to its
/// closing `"` (or the end): read with every backslash escape (RFC 7578
/// §4.2, busboy), and as PHP reads it (only `\\` and `\"` escaped); and
/// where reading goes on (past the closing `"`).
fn read_quoted(bytes: &[u8], mut at: usize) -> (Vec<u8>, Vec<u8>, usize) {
    let (mut escaped, mut php) = (Vec::new(), Vec::new());
    while let Some(&b) = bytes.get(at) {
        at += 1;
        match b {
            b'"' => break,
            b'\\' => {
                let next = bytes.get(at).copied();
                at += usize::from(next.is_some());
                if !matches!(next, Some(b'\\' | b'"')) {
                    php.push(b'\\');
                }
                escaped.extend(next);
                php.extend(next);
            }
            b => {
                escaped.push(b);
                php.push(b);
            }
        }
    }
    (escaped, php, at)
}

/// Every boundary the content type gives: each `boundary` parameter, then
/// PHP's reading (the first `boundary` substring, case-sensitive first;
/// then what follows its next `=`, up to a closing quote, or else up to a
/// `,` or `;`), each once.
fn boundaries(content_type: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let php = || {
        let bytes = content_type.as_bytes();
        let named = |w: &[u8]| w == b"boundary";
        let at = bytes.windows(8).position(named).or_else(|| bytes.windows(8).position(|w| w.eq_ignore_ascii_case(b"boundary")))?;
        let rest = &content_type[at + bytes[at..].iter().position(|&b| b == b'=')? + 1..];
        let end = match rest.strip_prefix('"') {
            Some(quoted) => 1 + quoted.bytes().position(|b| b == b'"')?,
            None => rest.bytes().position(|b| b == b',' || b == b';').unwrap_or(rest.len()),
        };
        Some(rest[usize::from(rest.starts_with('"'))..end].to_string())
    };
    for boundary in param(content_type, "boundary").into_iter().chain(php()) {
        if !boundary.is_empty() && !out.contains(&boundary) {
            out.push(boundary);
        }
    }
    out
}

/// The most boundary readings a multipart body is parsed under: each is a
/// pass over the body, and a content type can repeat `boundary` hundreds of
/// times. Browsers and curl give one; more is malformed (fail safe).
pub(crate) const MAX_BOUNDARIES: usize = 4;

/// One reading of a multipart field's name, and its value (`None` for a
/// file).
type FormField = (String, Option<String>);

/// The fields of a multipart body under every boundary its content type
/// gives, and the first reason found that it is unreadable.
fn multipart(content_type: &str, bytes: &[u8]) -> (Vec<FormField>, Option<Unreadable>) {
    let boundaries = boundaries(content_type);
    let mut fields = Vec::new();
    let malformed = match boundaries.len() {
        0 => Some(Malformed::NoBoundary),
        n if n > MAX_BOUNDARIES => Some(Malformed::TooManyBoundaries),
        _ => None,
    };
    let mut problem = malformed.map(Unreadable::Malformed);
    if problem.is_none() {
        for boundary in &boundaries {
            if let Err(why) = parts(bytes, boundary.as_bytes(), &mut fields) {
                problem.get_or_insert(why);
            }
        }
    }
    (fields, problem)
}

/// Adds the fields of a multipart body under one boundary (see the module
/// doc for how leniently) to `fields`; `Err` says why it is unreadable,
/// once every part it could read was added.
fn parts(bytes: &[u8], boundary: &[u8], fields: &mut Vec<FormField>) -> Result<(), Unreadable> {
    let delimiter = [b"--", boundary].concat();
    // Where each delimiter line starts (`at` is always 0 or just after a
    // line feed, so within the body).
    let mut starts = Vec::new();
    let mut at = 0;
    loop {
        if bytes[at..].starts_with(&delimiter) {
            starts.push(at);
        }
        match bytes[at..].iter().position(|&b| b == b'\n') {
            Some(len) => at += len + 1,
            None => break,
        }
    }
    let closing = |at: usize| bytes[at + delimiter.len()..].starts_with(b"--");
    let Some(&last) = starts.last() else {
        let blank = bytes.iter().all(u8::is_ascii_whitespace);
        return if blank { Ok(()) } else { Err(Unreadable::Malformed(Malformed::NoDelimiter)) };
    };
    let mut result = if closing(last) { Ok(()) } else { Err(Unreadable::Malformed(Malformed::NoEnd)) };
    for (i, &at) in starts.iter().enumerate() {
        let next = starts.get(i + 1).copied();
        // After the last close delimiter: the epilogue, not a part.
        if next.is_none() && closing(at) {
            break;
        }
        // The part starts on the line after its delimiter and ends before
        // the line break of the next one (or at the end of the body: an
        // unterminated last part).
        let Some(len) = bytes[at..].iter().position(|&b| b == b'\n') else { break };
        let start = at + len + 1;
        let mut end = next.unwrap_or(bytes.len());
        for byte in [b'\n', b'\r'] {
            if end > start && bytes[end - 1] == byte {
                end -= 1;
            }
        }
        // Between a close delimiter and a later delimiter, what does not
        // read as a part is ignored.
        if let (Err(why), false, true) = (part(&bytes[start..end], fields), closing(at), result.is_ok()) {
            result = Err(why);
        }
    }
    result
}

/// Adds one part's field (each reading of its name) to `fields`, if it has
/// a name; `Err` says why it is unreadable.
fn part(segment: &[u8], fields: &mut Vec<FormField>) -> Result<(), Unreadable> {
    let mut names = Vec::new();
    let mut file = false;
    let mut at = 0;
    loop {
        let Some(len) = segment[at..].iter().position(|&b| b == b'\n') else {
            return Err(Unreadable::Malformed(Malformed::PartHeaders));
        };
        let line = &segment[at..at + len];
        at += len + 1;
        let line = String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line));
        if line.is_empty() {
            break;
        }
        let Some((header, value)) = line.split_once(':') else { continue };
        let header = header.trim();
        if header.eq_ignore_ascii_case("content-disposition") {
            names.extend(param(value, "name"));
            names.extend(param(value, "name*").iter().filter_map(|v| extended_value(v)));
            names.extend(continued_name(value));
            file |= !param(value, "filename").is_empty() || !param(value, "filename*").is_empty();
        } else if header.eq_ignore_ascii_case("content-type") {
            check_charset(value)?;
        } else if header.eq_ignore_ascii_case("content-transfer-encoding") {
            let encoding = value.trim();
            if !["7bit", "8bit", "binary"].iter().any(|e| e.eq_ignore_ascii_case(encoding)) {
                return Err(Unreadable::TransferEncoded(encoding.to_string()));
            }
        }
    }
    let value = (!file).then(|| String::from_utf8_lossy(&segment[at..]).into_owned());
    for name in names {
        fields.push((name, value.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &str = "application/x-www-form-urlencoded";

    fn pairs(content_type: &str, body: &[u8]) -> Vec<(String, String)> {
        match parameters(content_type, None, Some(body)) {
            BodyParams::Pairs(pairs) => pairs,
            other => panic!("{other:?}"),
        }
    }

    fn pair(name: &str, value: &str) -> (String, String) {
        (name.to_string(), value.to_string())
    }

    fn unreadable(content_type: &str, encoding: Option<&str>, body: Option<&[u8]>) -> Unreadable {
        match parameters(content_type, encoding, body) {
            BodyParams::Unreadable(why) => why,
            other => panic!("{other:?}"),
        }
    }

    /// `curl -F mode=heavy -F 'upload=@notes.txt' URL` (curl 8).
    const CURL_TYPE: &str = "multipart/form-data; boundary=------------------------d74496d66958873e";
    const CURL: &[u8] = b"--------------------------d74496d66958873e\r\n\
Content-Disposition: form-data; name=\"mode\"\r\n\
\r\n\
heavy\r\n\
--------------------------d74496d66958873e\r\n\
Content-Disposition: form-data; name=\"upload\"; filename=\"notes.txt\"\r\n\
Content-Type: text/plain\r\n\
\r\n\
mode=heavy\r\n\
--------------------------d74496d66958873e--\r\n";

    /// A form Chrome submits (`enctype="multipart/form-data"`), with an
    /// empty file input and a value spanning lines.
    const CHROME_TYPE: &str = "multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW";
    const CHROME: &[u8] = b"------WebKitFormBoundary7MA4YWxkTrZu0gW\r\n\
Content-Disposition: form-data; name=\"_method\"\r\n\
\r\n\
DELETE\r\n\
------WebKitFormBoundary7MA4YWxkTrZu0gW\r\n\
Content-Disposition: form-data; name=\"note\"\r\n\
\r\n\
line one\r\n\
line two\r\n\
------WebKitFormBoundary7MA4YWxkTrZu0gW\r\n\
Content-Disposition: form-data; name=\"avatar\"; filename=\"\"\r\n\
Content-Type: application/octet-stream\r\n\
\r\n\
\r\n\
------WebKitFormBoundary7MA4YWxkTrZu0gW--\r\n";

    /// Firefox's boundary, a UTF-8 value, no trailing line break.
    const FIREFOX_TYPE: &str = "multipart/form-data; boundary=---------------------------974767299852498929531610575";
    const FIREFOX: &[u8] = "-----------------------------974767299852498929531610575\r\n\
Content-Disposition: form-data; name=\"city\"\r\n\
\r\n\
Zürich\r\n\
-----------------------------974767299852498929531610575--"
        .as_bytes();

    #[test]
    fn multipart_as_curl_and_browsers_send_it() {
        assert_eq!(pairs(CURL_TYPE, CURL), [pair("mode", "heavy"), pair("upload", "")], "a file's name, never its content");
        assert_eq!(
            pairs(CHROME_TYPE, CHROME),
            [pair("_method", "DELETE"), pair("note", "line one\r\nline two"), pair("avatar", "")]
        );
        assert_eq!(pairs(FIREFOX_TYPE, FIREFOX), [pair("city", "Zürich")]);
        assert_eq!(pairs("Multipart/Form-Data;boundary=\"simple boundary\"", b"--simple boundary\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--simple boundary--"), [pair("a", "1")], "quoted boundary, any case");
    }

    #[test]
    fn multipart_lines_preamble_epilogue_and_boundaries_inside_values() {
        let lf = b"preamble\n--b\nContent-Disposition: form-data; name=\"mode\"\n\nheavy\n--b--\nepilogue";
        assert_eq!(pairs("multipart/form-data; boundary=b", lf), [pair("mode", "heavy")], "bare LF, preamble and epilogue");
        let inside = b"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nsee --b and\r\n -b--\r\n--b--\r\n";
        assert_eq!(pairs("multipart/form-data; boundary=b", inside), [pair("x", "see --b and\r\n -b--")], "not at a line start");
        // PHP ends a part at any line starting with `--boundary`: what
        // follows `--bjunk` is a part to PHP, so it is one here too.
        let prefixed = b"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nfoo\r\n--bjunk\r\nContent-Disposition: form-data; name=\"mode\"\r\n\r\nheavy\r\n--b--\r\n";
        assert_eq!(pairs("multipart/form-data; boundary=b", prefixed), [pair("x", "foo"), pair("mode", "heavy")]);
        let after_close = b"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--b--\r\n--b\r\nContent-Disposition: form-data; name=\"mode\"\r\n\r\nheavy\r\n--b--\r\n";
        assert_eq!(pairs("multipart/form-data; boundary=b", after_close), [pair("x", "1"), pair("mode", "heavy")], "parts after a close delimiter");
        assert_eq!(pairs("multipart/form-data; boundary=b", b""), [], "an empty body holds nothing");
        assert_eq!(pairs("multipart/form-data; boundary=b", b"--b--\r\n"), []);
    }

    #[test]
    fn every_boundary_reading_is_read() {
        let body = b"--one\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--one--\r\n--two\r\nContent-Disposition: form-data; name=\"mode\"\r\n\r\nheavy\r\n--two--\r\n";
        assert_eq!(boundaries("multipart/form-data; boundary=one; boundary=two"), ["one", "two"]);
        assert_eq!(pairs("multipart/form-data; boundary=one; boundary=two", body), [pair("a", "1"), pair("mode", "heavy")]);
        // PHP takes the first `boundary` substring, even inside another name.
        assert_eq!(boundaries("multipart/form-data; xboundary=two; boundary=one"), ["one", "two"]);
        assert_eq!(boundaries("multipart/form-data; BOUNDARY=\"a;b\", x"), ["a;b"]);
        let many: String = (0..5).map(|i| format!("; boundary=b{i}")).collect();
        let why = unreadable(&format!("multipart/form-data{many}"), None, Some(b"--b0\r\n\r\n--b0--"));
        assert_eq!(why, Unreadable::Malformed(Malformed::TooManyBoundaries));
    }

    #[test]
    fn field_names_as_each_parser_reads_them() {
        let body = |disposition: &str| {
            format!("--b\r\nContent-Disposition: {disposition}\r\n\r\nv\r\n--b--\r\n").into_bytes()
        };
        let names = |disposition: &str| -> Vec<String> {
            pairs("multipart/form-data; boundary=b", &body(disposition)).into_iter().map(|(n, _)| n).collect()
        };
        assert_eq!(names("form-data; name=\"a\\\"b\""), ["a\"b"]);
        assert_eq!(names("form-data; name=\"mo\\de\""), ["mode", "mo\\de"], "busboy unescapes, PHP keeps the backslash");
        assert_eq!(names("form-data; name='mode'"), ["'mode'", "mode"], "PHP's single quotes");
        assert_eq!(names("form-data; NAME = mode ; filename*=UTF-8''x"), ["mode"]);
        assert_eq!(names("form-data; name=\"a;b\"; name=\"c\""), ["a;b", "c"]);
        assert_eq!(names("form-data"), Vec::<String>::new(), "a part without a name is no field");
        assert_eq!(names("form-data; name*=UTF-8''mo%64e"), ["mode"], "RFC 8187, as Werkzeug reads it");
        assert_eq!(names("form-data; name=\"x\"; name*=utf-8'en'%C3%A9"), ["x", "é"], "both names count");
        assert_eq!(names("form-data; name*=iso-8859-1''%E9"), ["é"]);
        assert_eq!(names("form-data; name*=mode"), Vec::<String>::new(), "no charset: not an extended value");
        assert_eq!(names("form-data; name*0=em; name*1=ail"), ["email"], "RFC 2231 continuations, joined as Werkzeug joins them");
        assert_eq!(names("form-data; name*0*=UTF-8''em; name*1*=%61il"), ["email"]);
        assert_eq!(names("form-data; name=\"x\"; name*0=\"em\"; name*1=\"ail\""), ["x", "email"]);
        assert_eq!(names("form-data; name*1=ail"), Vec::<String>::new(), "no segment 0: nothing joined");
    }

    #[test]
    fn a_missing_end_boundary_is_malformed_but_its_values_are_read() {
        let open = b"--b\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\nvictim@x\r\n--b\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\ndecoy@x";
        assert_eq!(unreadable("multipart/form-data; boundary=b", None, Some(open)), Unreadable::Malformed(Malformed::NoEnd));
        assert_eq!(form_field_values("multipart/form-data; boundary=b", open, "email"), ["victim@x", "decoy@x"]);
        assert_eq!(unreadable("multipart/form-data", None, Some(b"x")), Unreadable::Malformed(Malformed::NoBoundary));
        assert_eq!(unreadable("multipart/form-data; boundary=b", None, Some(b"mode=heavy")), Unreadable::Malformed(Malformed::NoDelimiter));
        let headless = b"--b\r\nContent-Disposition: form-data; name=\"mode\"\r\nheavy\r\n--b--\r\n";
        assert_eq!(unreadable("multipart/form-data; boundary=b", None, Some(headless)), Unreadable::Malformed(Malformed::PartHeaders));
        assert_eq!(
            unreadable("multipart/form-data; boundary=one; boundary=two", None, Some(b"--one\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--one--")),
            Unreadable::Malformed(Malformed::NoDelimiter),
            "one reading finds nothing: another origin may read it"
        );
    }

    #[test]
    fn bodies_the_headers_make_unreadable() {
        assert_eq!(unreadable(FORM, Some("gzip"), Some(b"mode=heavy")), Unreadable::Compressed("gzip".into()));
        assert_eq!(unreadable(FORM, Some("identity, br"), None), Unreadable::Compressed("identity, br".into()));
        assert_eq!(pairs(FORM, b"mode=heavy"), [pair("mode", "heavy")]);
        assert!(matches!(parameters(FORM, Some(" Identity "), Some(b"a=1")), BodyParams::Pairs(_)));
        assert_eq!(unreadable("application/x-www-form-urlencoded; charset=ibm037", None, Some(b"")), Unreadable::Charset("ibm037".into()));
        assert_eq!(unreadable("multipart/form-data; boundary=b; charset=\"UTF-16\"", None, None), Unreadable::Charset("UTF-16".into()));
        for charset in ["utf-8", "UTF8", "us-ascii", "ISO-8859-1", "iso-8859-15", "windows-1252", "latin1"] {
            assert!(needs_bytes(&format!("{FORM}; charset={charset}"), None), "{charset}");
        }
        assert_eq!(unreadable(FORM, None, None), Unreadable::TooLarge);
        assert!(!needs_bytes(FORM, Some("gzip")) && needs_bytes(CURL_TYPE, Some("identity")));
        let base64 = b"--b\r\nContent-Disposition: form-data; name=\"mode\"\r\nContent-Transfer-Encoding: base64\r\n\r\naGVhdnk=\r\n--b--\r\n";
        assert_eq!(unreadable("multipart/form-data; boundary=b", None, Some(base64)), Unreadable::TransferEncoded("base64".into()));
        let utf16 = b"--b\r\nContent-Disposition: form-data; name=\"mode\"\r\nContent-Type: text/plain; charset=utf-16\r\n\r\nx\r\n--b--\r\n";
        assert_eq!(unreadable("multipart/form-data; boundary=b", None, Some(utf16)), Unreadable::Charset("utf-16".into()));
        assert_eq!(Unreadable::Compressed("gzip".into()).to_string(), "Content-Encoding `gzip`");
    }

    #[test]
    fn media_types_as_php_reads_them() {
        assert_eq!(pairs("application/x-www-form-urlencoded, text/plain", b"a=1"), [pair("a", "1")]);
        assert_eq!(pairs("APPLICATION/X-WWW-FORM-URLENCODED ", b"a=%31+2"), [pair("a", "1 2")]);
        assert_eq!(pairs("Application/Vnd.Api+JSON; charset=utf-8", br#"{"a":1}"#), [pair("a", "1")]);
        assert_eq!(parameters("application/json", None, Some(b"{\"a\":")), BodyParams::Unreadable(Unreadable::MalformedJson));
        assert_eq!(parameters("application/json", Some("gzip"), None), BodyParams::Unreadable(Unreadable::Compressed("gzip".into())));
        for other in ["text/plain", "", "multipart/mixed; boundary=b", "application/x-www-form-urlencodedx", "application/jsonx", "+json"] {
            assert_eq!(parameters(other, Some("gzip"), None), BodyParams::NotParameters, "{other}");
            assert!(!needs_bytes(other, None));
        }
    }

    fn piece() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let tokens = [
            "--b", "--b--", "\r\n", "\n", "Content-Disposition: form-data; name=", "\"m\"", "'m'", "\"a\\\"b\"", "; filename=\"f\"",
            "heavy", "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: binary", ";", "=", "&", "%00", "\0",
        ];
        prop_oneof![proptest::sample::select(tokens.to_vec()).prop_map(str::to_string), "[ -~]{0,3}"]
    }

    proptest::proptest! {
        /// What the `body` fuzz target checks, on bodies made of multipart
        /// and urlencoded pieces: no panic; without its bytes a body never
        /// reads as pairs; every value read is a field value of its name.
        #[test]
        fn every_value_read_is_a_field_value(
            pieces in proptest::collection::vec(piece(), 0..16),
            content_type in proptest::sample::select(vec![
                "multipart/form-data; boundary=b", "multipart/form-data; boundary=\"b\"; boundary=c", FORM, "text/plain",
            ]),
        ) {
            let body = pieces.concat();
            proptest::prop_assert!(!matches!(parameters(content_type, None, None), BodyParams::Pairs(_)));
            if let BodyParams::Pairs(pairs) = parameters(content_type, None, Some(body.as_bytes())) {
                for (name, value) in pairs.iter().filter(|(_, v)| !v.is_empty() && !v.contains('\0')) {
                    let mut named = CanonicalQuery::default();
                    named.join(Source::Body, vec![(name.clone(), value.clone())]);
                    let Some((stored, _)) = named.pairs().first() else { continue };
                    let values = form_field_values(content_type, body.as_bytes(), stored);
                    proptest::prop_assert!(values.contains(value), "{name}: {value:?} not in {values:?}");
                }
            }
        }
    }

    #[test]
    fn form_field_values_read_both_kinds() {
        assert_eq!(form_field_values(FORM, b"Email=a%40x&email=b@x&email=a@x", "email"), ["a@x", "b@x"]);
        assert_eq!(form_field_values(CURL_TYPE, CURL, "MODE"), ["heavy"]);
        assert!(form_field_values(CURL_TYPE, CURL, "upload").is_empty(), "a file is no value");
        assert!(form_field_values("application/json", br#"{"email":"a@x"}"#, "email").is_empty());
        assert!(form_field_values("application/x-www-form-urlencoded; charset=utf-16", b"email=a", "email").is_empty());
    }
}
