//! Canonical view of a request URL, used only for matching and keying.
//!
//! The request forwarded to the origin is never modified: this module only
//! answers "which protected action could the origin route this to?". Its
//! guiding principle is *when in doubt, match*: over-matching only makes a
//! limit stricter, under-matching is a bypass. Every step below therefore
//! folds together the spellings that some common origin treats as the same.
//!
//! The canonical path is a `/`-separated string whose bytes are fully
//! percent-decoded and then re-encoded with [`CANONICAL_PATH_ENCODE`] (the
//! WHATWG path percent-encode set plus `%`), so it is always ASCII, printable,
//! and spelled the way a URLPattern pathname is canonicalized.

use percent_encoding::{percent_decode, percent_encode, AsciiSet, CONTROLS};
use std::borrow::Cow;
use std::fmt;

/// How many rounds of percent-decoding are applied at most.
///
/// Decoding is repeated until the bytes stop changing (`%252e` → `%2e` → `.`),
/// so that an origin (or a proxy in front of it) that decodes twice cannot be
/// shown a protected path that tollgate missed. Four rounds cover any chain
/// seen in practice while bounding work on hostile input.
pub(crate) const MAX_DECODE_ROUNDS: usize = 4;

/// Bytes re-encoded in the canonical path: the WHATWG URL "path
/// percent-encode set" (C0 controls, space, `"`, `#`, `<`, `>`, `?`, `` ` ``,
/// `{`, `}`), plus `%` itself so that a literal percent left by an invalid
/// escape is unambiguous. Bytes ≥ 0x80 are always encoded.
pub(crate) const CANONICAL_PATH_ENCODE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'%');

/// Why a request URL has no canonical view. The Worker answers 400 and the
/// request never reaches the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanonError {
    /// A decoded path byte is NUL, another C0 control character or DEL.
    ///
    /// No sane origin routes such a path; origins written in C may truncate
    /// at NUL (`/api/example%00.png` seen as `/api/example`), so the request
    /// is refused rather than guessed at.
    ControlCharacter { byte: u8 },
}

impl fmt::Display for CanonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanonError::ControlCharacter { byte } => {
                write!(f, "path contains control character 0x{byte:02x} after decoding")
            }
        }
    }
}

impl std::error::Error for CanonError {}

/// Percent-decodes `input` until it stops changing, at most
/// [`MAX_DECODE_ROUNDS`] times.
///
/// Hex digits are case-insensitive (`%2e` = `%2E`, RFC 3986 §2.1). Invalid
/// escapes (`%zz`, a lone `%`) are kept literally, as the WHATWG URL parser
/// and most servers do.
pub fn decode_fully(input: &[u8]) -> Cow<'_, [u8]> {
    let mut current: Cow<'_, [u8]> = Cow::Borrowed(input);
    for _ in 0..MAX_DECODE_ROUNDS {
        if !current.contains(&b'%') {
            break;
        }
        let next: Vec<u8> = percent_decode(&current).collect();
        if next.as_slice() == current.as_ref() {
            break;
        }
        current = Cow::Owned(next);
    }
    current
}

/// Builds the canonical path from a raw URL path (the part between the
/// authority and `?`).
///
/// In order:
/// 1. percent-decode to a fixpoint ([`decode_fully`]); encoded separators
///    (`%2f`, `%5c`) thus become separators, as in nginx location matching
///    and Apache with `AllowEncodedSlashes`;
/// 2. refuse NUL, C0 control characters and DEL ([`CanonError`]);
/// 3. split on `/` and `\` (WHATWG URL treats `\` as `/` for http(s));
///    empty segments (repeated slashes, trailing slash) are dropped;
/// 4. strip `;` path parameters from each segment (`example;jsessionid=1`,
///    Tomcat / Servlet §3.5), before dot-segment removal;
/// 5. remove dot segments, never climbing above the root (RFC 3986 §5.2.4);
/// 6. re-encode each segment with [`CANONICAL_PATH_ENCODE`]; bytes that are
///    not UTF-8 survive as `%XX`, so no two byte strings collide.
///
/// The result always starts with `/` and never ends with `/` unless it is
/// the root.
pub fn canonical_path(raw_path: &str) -> Result<String, CanonError> {
    canonical_walk(raw_path, &[]).map(|(path, _)| path)
}

/// [`canonical_path`], and whether the walk to it ever stood on `prefix`
/// (a canonical path such as `/.tollgate`, compared in any ASCII case):
/// after some segment, the segments kept so far were exactly the prefix's.
/// `/.tollgate/..%2fapi`, `/.TOLLGATE/..;/x` and `/a/..%2f.tollgate/..%2fx`
/// enter it (and leave); `/api` and `/.tollgatex` do not. A browser scopes a
/// cookie of `Path=/.tollgate` by the raw path, so every request it sends
/// such a cookie with enters the prefix, wherever its dot segments lead
///. An empty prefix (`/`) is never entered.
pub(crate) fn canonical_path_entering(raw_path: &str, prefix: &str) -> Result<(String, bool), CanonError> {
    let prefix = decode_fully(prefix.as_bytes());
    let prefix: Vec<&[u8]> = prefix.split(|&b| b == b'/').filter(|s| !s.is_empty()).collect();
    canonical_walk(raw_path, &prefix)
}

fn canonical_walk(raw_path: &str, prefix: &[&[u8]]) -> Result<(String, bool), CanonError> {
    let decoded = decode_fully(raw_path.as_bytes());
    if let Some(&byte) = decoded.iter().find(|&&b| b < 0x20 || b == 0x7f) {
        return Err(CanonError::ControlCharacter { byte });
    }
    let mut segments: Vec<&[u8]> = Vec::new();
    let mut entered = false;
    for segment in decoded.split(|&b| b == b'/' || b == b'\\') {
        let segment = match segment.iter().position(|&b| b == b';') {
            Some(end) => &segment[..end],
            None => segment,
        };
        match segment {
            b"" | b"." => {}
            b".." => {
                segments.pop();
            }
            _ => {
                segments.push(segment);
                entered = entered
                    || (!prefix.is_empty()
                        && segments.len() == prefix.len()
                        && segments.iter().zip(prefix).all(|(s, p)| s.eq_ignore_ascii_case(p)));
            }
        }
    }
    let mut path = String::with_capacity(decoded.len() + 1);
    if segments.is_empty() {
        path.push('/');
    }
    for segment in segments {
        path.push('/');
        path.extend(percent_encode(segment, CANONICAL_PATH_ENCODE));
    }
    Ok((path, entered))
}

/// What follows `prefix` in `canonical_path` (`""` or `/...`), the prefix
/// compared in any ASCII case; `None` when the path is not under it
/// (`/.tollgatex` is not under `/.tollgate`).
pub(crate) fn under_prefix<'p>(prefix: &str, canonical_path: &'p str) -> Option<&'p str> {
    let head = canonical_path.get(..prefix.len())?;
    let rest = canonical_path.get(prefix.len()..)?;
    (head.eq_ignore_ascii_case(prefix) && (rest.is_empty() || rest.starts_with('/'))).then_some(rest)
}

/// Where a request parameter came from. A rule's `query_sources` says
/// which of them its query conditions read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The URL query.
    Query,
    /// A urlencoded or multipart form body ([`crate::request::body`]).
    Body,
    /// A cookie (PHP's `$_REQUEST` with `variables_order = "EGPCS"` and no
    /// `request_order`).
    Cookie,
}

impl Source {
    /// The name a config and `explain` use: `query`, `body`, `cookie`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Query => "query",
            Source::Body => "body",
            Source::Cookie => "cookie",
        }
    }
}

/// A set of [`Source`]s: a rule's `query_sources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources(u8);

impl Sources {
    /// `["query", "body"]`, the default: what PHP's `$_REQUEST` holds under
    /// php.ini-production's `request_order = "GP"`, Laravel's `input()`,
    /// Rails' `params`.
    pub(crate) const DEFAULT: Sources = Sources(1 | 2);
    pub(crate) const NONE: Sources = Sources(0);

    fn bit(source: Source) -> u8 {
        match source {
            Source::Query => 1,
            Source::Body => 2,
            Source::Cookie => 4,
        }
    }

    /// This set and `source`.
    pub(crate) fn with(self, source: Source) -> Sources {
        Sources(self.0 | Sources::bit(source))
    }

    pub(crate) fn contains(self, source: Source) -> bool {
        self.0 & Sources::bit(source) != 0
    }
}

/// The canonical query: a multimap of decoded keys to every value they
/// carry, each tagged with its [`Source`]. It starts as the URL query;
/// the plan joins the parameters of a form body and, for rules that read
/// them, the cookies ([`CanonicalQuery::join`], [`CanonicalQuery::join_cookies`]),
/// or marks the body unreadable ([`CanonicalQuery::mark_body_unreadable`]).
///
/// Origins disagree on repeated keys (Rack and PHP take the last value,
/// Express builds an array, Go and Flask the first), so conditions match if
/// *any* value matches, whatever the order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CanonicalQuery {
    pairs: Vec<(String, String)>,
    /// The source of each pair, index for index.
    sources: Vec<Source>,
    /// The body may hold parameters that could not be read.
    body_unreadable: bool,
}

impl CanonicalQuery {
    /// Parses a raw query string (without the leading `?`).
    ///
    /// Following the WHATWG `application/x-www-form-urlencoded` parser:
    /// pairs split on `&`, `+` is a space, keys and values percent-decoded
    /// (to a fixpoint, as for paths), a key without `=` has the empty value.
    /// Beyond it, so that no framework's reading slips past:
    /// - a pair containing `;` is also read split on `;` (Rack before 2.x,
    ///   Python's `cgi` before 3.9.2), both readings kept;
    /// - a decoded NUL ends a key or value (`mode%00x=heavy%00y` is
    ///   `mode=heavy`), as C-string readers such as PHP's key parser see it;
    /// - keys are normalized as described at [`CanonicalQuery::values`];
    /// - a query that starts with `?` (`/x??mode=heavy`) is also read
    ///   without its leading `?`s, as PHP's built-in server hands it to
    ///   `$_GET`: both readings of its first pair are kept.
    pub fn parse(raw: &str) -> CanonicalQuery {
        let mut query = CanonicalQuery::default();
        query.join(Source::Query, form_pairs(raw));
        let unmarked = raw.trim_start_matches('?');
        if unmarked.len() != raw.len() {
            let first = unmarked.split('&').next().unwrap_or_default();
            query.join(Source::Query, form_pairs(first));
        }
        query
    }

    /// Adds decoded `(name, value)` pairs from `source`: names normalized
    /// as at [`CanonicalQuery::values`], names and values ending at a NUL.
    pub fn join(&mut self, source: Source, pairs: Vec<(String, String)>) {
        for (raw_key, value) in pairs {
            let raw_key = until_nul(raw_key);
            let key = normalize_key(&raw_key);
            if key.is_empty() {
                continue;
            }
            let value = until_nul(value);
            if let Some(php_key) = php_unmatched_bracket_key(&raw_key).filter(|k| *k != key) {
                self.push(key, value.clone(), source);
                self.push(php_key, value, source);
            } else {
                self.push(key, value, source);
            }
        }
    }

    /// Adds the cookies of a `Cookie` header as PHP reads them into
    /// `$_COOKIE` (and `$_REQUEST`): pairs split on `;`, each trimmed, names
    /// and values decoded as form fields (`+` a space, percent-decoded),
    /// names normalized (`laravel.session` is `laravel_session`).
    pub fn join_cookies(&mut self, header: &str) {
        self.join(Source::Cookie, header.split(';').filter_map(|piece| decode_pair(piece.trim())).collect());
    }

    /// Marks the body as one that may hold parameters tollgate could not
    /// read (over the cap, compressed, an unknown charset, malformed): a
    /// rule whose query conditions read the body then matches them (fail
    /// safe, see `config::rules::Condition::holds_in_query`).
    pub fn mark_body_unreadable(&mut self) {
        self.body_unreadable = true;
    }

    /// Whether [`CanonicalQuery::mark_body_unreadable`] was called.
    pub fn body_unreadable(&self) -> bool {
        self.body_unreadable
    }

    fn push(&mut self, key: String, value: String, source: Source) {
        self.pairs.push((key, value));
        self.sources.push(source);
    }

    /// Every value given for `key` in the URL query or the body (never a
    /// cookie: keys and `_method` read these two), in order of appearance.
    ///
    /// `key` is compared after the same normalization as the stored keys,
    /// which folds together every spelling some framework reads as the key:
    /// - leading spaces are dropped (PHP: ` mode` and `+mode` are `mode`);
    /// - leading `[` / `]` are skipped and the name ends at the next `[` or
    ///   `]`: `mode[]`, `mode[0]`, `mode[a][b]`, `mode[]x` are `mode` (PHP,
    ///   Rack and qs build arrays and hashes from them), and so are `[mode]`
    ///   and `mode]` (Rack 2 strips stray brackets);
    /// - a space or `.` reads as `_` (PHP: `page.size` is `page_size`);
    /// - ASCII letters compare case-insensitively (ASP.NET) and are stored
    ///   lowercased.
    ///
    /// A key whose first `[` has no `]` after it is also stored under PHP's
    /// reading, that `[` as `_` (`page[size` is both `page` and `page_size`).
    pub fn values<'a>(&'a self, key: &str) -> impl Iterator<Item = &'a str> + 'a {
        let key = normalize_key(key);
        self.pairs_from(Sources::DEFAULT).filter(move |(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    /// The pairs from `sources`, in order of appearance. Allocates nothing.
    pub fn pairs_from(&self, sources: Sources) -> impl Iterator<Item = &(String, String)> + '_ {
        self.pairs.iter().zip(&self.sources).filter(move |(_, s)| sources.contains(**s)).map(|(pair, _)| pair)
    }

    /// Whether `key` appears at all, with or without a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.values(key).next().is_some()
    }

    /// All pairs (cookies too), normalized, in order of appearance.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The source of each of [`CanonicalQuery::pairs`], index for index.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
}

/// The decoded `(name, value)` pairs of an
/// `application/x-www-form-urlencoded` string (a URL query or a form
/// body), names not yet normalized: pieces split on `&`, and a piece
/// holding `;` read a second time split on `;` (see
/// [`CanonicalQuery::parse`]).
pub(crate) fn form_pairs(raw: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for piece in split_ascii(raw, b'&') {
        pairs.extend(decode_pair(piece));
        if find_byte(piece, b';').is_some() {
            pairs.extend(split_ascii(piece, b';').filter_map(decode_pair));
        }
    }
    pairs
}

/// One `name=value` piece, decoded ([`decode_form`]); `None` when empty.
fn decode_pair(piece: &str) -> Option<(String, String)> {
    if piece.is_empty() {
        return None;
    }
    let (raw_key, raw_value) = split_once_ascii(piece, b'=').unwrap_or((piece, ""));
    Some((decode_form(raw_key), decode_form(raw_value)))
}

/// `text` up to its first NUL, as C-string readers such as PHP's see it.
fn until_nul(mut text: String) -> String {
    if let Some(end) = find_byte(&text, 0) {
        text.truncate(end);
    }
    text
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, then
/// percent-decoding to a fixpoint; invalid UTF-8 becomes U+FFFD.
fn decode_form(raw: &str) -> String {
    let spaced: Cow<'_, str> = if find_byte(raw, b'+').is_some() {
        Cow::Owned(raw.replace('+', " "))
    } else {
        Cow::Borrowed(raw)
    };
    String::from_utf8_lossy(&decode_fully(spaced.as_bytes())).into_owned()
}

/// The normalized form of a query key (see [`CanonicalQuery::values`]):
/// `Mode[0]` → `mode`, `[mode]` → `mode`, ` page.size` → `page_size`. A key
/// that would normalize to nothing (`[]`) is only lowercased.
pub(crate) fn normalize_key(key: &str) -> String {
    let name = key.trim_start_matches(' ').trim_start_matches(['[', ']']);
    let name = &name[..name.bytes().position(|b| b == b'[' || b == b']').unwrap_or(name.len())];
    let name = if name.is_empty() { key } else { name };
    name.chars()
        .map(|c| match c {
            ' ' | '.' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// PHP's reading of a key whose first `[` has no `]` after it: that `[` is
/// an `_` (`page[size=1` sets `$_GET['page_size']`). `None` for other keys.
fn php_unmatched_bracket_key(key: &str) -> Option<String> {
    let key = key.trim_start_matches(' ');
    let at = find_byte(key, b'[').filter(|&at| at > 0 && find_byte(&key[at..], b']').is_none())?;
    Some(normalize_key(&format!("{}_{}", &key[..at], &key[at + 1..])))
}

/// The host as rules match it: lowercased, one trailing dot removed
/// (`api.example.com.` is the same fully qualified name, and Cloudflare
/// serves it from the same zone).
pub fn canonical_host(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.to_ascii_lowercase()
}

/// The byte index of the first of the ASCII bytes `any` in `s`: what
/// `str::find` with those chars answers (an ASCII byte never occurs inside
/// a multi-byte UTF-8 sequence, so the index is a char boundary), without
/// decoding every char (`RawUrl::split` runs twice per counted request).
fn find_ascii(s: &str, any: &[u8]) -> Option<usize> {
    // Compared in a loop rather than with `<[u8]>::contains`, which calls
    // `memchr` on `any` for every byte of `s`.
    for (at, b) in s.bytes().enumerate() {
        for &a in any {
            if a == b {
                return Some(at);
            }
        }
    }
    None
}

/// Where the ASCII byte `byte` first occurs in `s`: `s.find(char::from(byte))`,
/// a byte at a time (no char searcher set up for a short text).
pub(crate) fn find_byte(s: &str, byte: u8) -> Option<usize> {
    s.bytes().position(|b| b == byte)
}

/// `s.split_once(char::from(separator))` for an ASCII `separator`
/// ([`find_byte`]).
pub(crate) fn split_once_ascii(s: &str, separator: u8) -> Option<(&str, &str)> {
    let at = find_byte(s, separator)?;
    Some((s.get(..at)?, s.get(at + 1..)?))
}

/// The pieces of `s` between the ASCII byte `separator`s: what
/// `s.split(char::from(separator))` yields (an empty piece at either end
/// or between two separators included), found a byte at a time instead of
/// through a char searcher set up per call (short, many pieces: a reply
/// line, a row, the header lines).
pub(crate) fn split_ascii(s: &str, separator: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.bytes().position(|b| b == separator) {
            Some(at) => {
                rest = text.get(at + 1..);
                text.get(..at)
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

/// Where `://` first occurs in `s`: `s.find("://")`, found from the `:`s
/// (a `memchr` each) instead of a substring searcher built per call.
pub(crate) fn scheme_end(s: &str) -> Option<usize> {
    s.match_indices(':').map(|(at, _)| at).find(|&at| s[at..].starts_with("://"))
}

/// The parts of a raw request URL that matching needs, split without
/// normalizing anything (so that `explain` can show the raw forms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawUrl<'a> {
    /// Lowercased host without port, or empty for a path-only input.
    pub host: String,
    pub path: &'a str,
    pub query: &'a str,
}

impl<'a> RawUrl<'a> {
    /// Splits `scheme://host[:port]/path?query#fragment`, or a bare
    /// `/path?query`. Never fails: anything unrecognised is read as a path.
    pub fn split(url: &'a str) -> RawUrl<'a> {
        let without_fragment = match find_byte(url, b'#') {
            Some(at) => &url[..at],
            None => url,
        };
        let (before_query, query) = match find_byte(without_fragment, b'?') {
            Some(at) => (&without_fragment[..at], &without_fragment[at + 1..]),
            None => (without_fragment, ""),
        };
        // A path-only input may hold `://` in a segment (`/a/x=://../b`):
        // only an input that does not start with a separator has a scheme.
        let absolute = !before_query.starts_with(['/', '\\']);
        let (host, path) = match scheme_end(before_query).filter(|_| absolute) {
            Some(at) => {
                let rest = &before_query[at + 3..];
                let path_start = find_ascii(rest, b"/\\").unwrap_or(rest.len());
                let authority = &rest[..path_start];
                let host_port = authority.rsplit('@').next().unwrap_or(authority);
                let host = if host_port.starts_with('[') {
                    canonical_host(&host_port.split(']').next().map(|h| format!("{h}]")).unwrap_or_default())
                } else {
                    canonical_host(host_port.split(':').next().unwrap_or(""))
                };
                (host, &rest[path_start..])
            }
            None => (String::new(), before_query),
        };
        RawUrl { host, path, query }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(raw: &str) -> String {
        canonical_path(raw).unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn decodes_with_either_hex_case() {
        assert_eq!(path("/api/example%2ejson"), "/api/example.json");
        assert_eq!(path("/api/example%2Ejson"), "/api/example.json");
        assert_eq!(path("/%61pi/ex%61mple"), "/api/example");
    }

    #[test]
    fn trailing_and_repeated_slashes_and_backslashes() {
        assert_eq!(path("/api/example/"), "/api/example");
        assert_eq!(path("//api///example//"), "/api/example");
        assert_eq!(path("/api\\example"), "/api/example");
        assert_eq!(path("/api%5cexample"), "/api/example");
        assert_eq!(path("/api%2fexample"), "/api/example");
        assert_eq!(path(""), "/");
        assert_eq!(path("/"), "/");
    }

    #[test]
    fn a_walk_that_stands_on_the_admin_prefix_is_told_apart() {
        let enters = |raw: &str| canonical_path_entering(raw, "/.tollgate").unwrap();
        for (raw, canonical) in [
            ("/.tollgate/..%2fapi/echo", "/api/echo"),
            ("/.tollgate/..;/x", "/x"),
            ("/.tollgate/..%5cx", "/x"),
            ("/.tollgate/..%252fx", "/x"),
            ("/.tollgate/ui/..%2f..%2fx", "/x"),
            ("/.TOLLGATE/..%2fx", "/x"),
            ("/%2etollgate/..%2fx", "/x"),
            ("/a/..%2f.tollgate/..%2fx", "/x"),
            ("/.Tollgate/status", "/.Tollgate/status"),
            ("/.tollgate", "/.tollgate"),
        ] {
            assert_eq!(enters(raw), (canonical.to_string(), true), "{raw}");
        }
        for raw in ["/api", "/.tollgatex/y", "/x/.tollgate", "/", "/a/b/../c"] {
            assert!(!enters(raw).1, "{raw}");
        }
        assert_eq!(canonical_path_entering("/x", "/").unwrap(), ("/x".to_string(), false), "no prefix, never entered");
        assert_eq!(canonical_path_entering("/%00", "/.tollgate"), Err(CanonError::ControlCharacter { byte: 0 }));
        assert_eq!(under_prefix("/.tollgate", "/.TollGate/ui/keys"), Some("/ui/keys"));
        assert_eq!(under_prefix("/.tollgate", "/.tollgate"), Some(""));
        assert_eq!(under_prefix("/.tollgate", "/.tollgatex"), None);
        assert_eq!(under_prefix("/.tollgate", "/.toll"), None);
    }

    #[test]
    fn dot_segments_never_climb_above_root() {
        assert_eq!(path("/api/./example"), "/api/example");
        assert_eq!(path("/api/x/../example"), "/api/example");
        assert_eq!(path("/../../api/example"), "/api/example");
        assert_eq!(path("/api/x/%2e%2e/example"), "/api/example");
        assert_eq!(path("/api/x/.%2e/example"), "/api/example");
        assert_eq!(path("/api/%2e/example"), "/api/example");
    }

    #[test]
    fn path_parameters_are_stripped_before_dot_segments() {
        assert_eq!(path("/api/example;jsessionid=1"), "/api/example");
        assert_eq!(path("/api;x=1/example"), "/api/example");
        assert_eq!(path("/api/x/..;/example"), "/api/example");
    }

    #[test]
    fn double_encoding_is_decoded() {
        assert_eq!(path("/api/example%252ejson"), "/api/example.json");
        assert_eq!(path("/api%252fexample"), "/api/example");
    }

    #[test]
    fn invalid_escapes_are_kept_literally() {
        assert_eq!(path("/api/%zz"), "/api/%25zz");
        assert_eq!(path("/api/100%"), "/api/100%25");
    }

    #[test]
    fn control_characters_are_refused() {
        assert_eq!(
            canonical_path("/api/example%00.png"),
            Err(CanonError::ControlCharacter { byte: 0 })
        );
        assert!(canonical_path("/api/%0aexample").is_err());
        assert!(canonical_path("/api/%7f").is_err());
    }

    #[test]
    fn non_utf8_bytes_survive_encoded() {
        assert_eq!(path("/api/%ff%fe"), "/api/%FF%FE");
        assert_eq!(path("/caf%C3%A9"), "/caf%C3%A9");
        assert_eq!(path("/café"), "/caf%C3%A9");
    }

    #[test]
    fn query_plus_is_space_and_escapes_decode() {
        let q = CanonicalQuery::parse("mo%64e=h%65avy&q=a+b");
        assert_eq!(q.values("mode").collect::<Vec<_>>(), ["heavy"]);
        assert_eq!(q.values("q").collect::<Vec<_>>(), ["a b"]);
    }

    #[test]
    fn query_repeated_keys_keep_every_value() {
        let q = CanonicalQuery::parse("mode=normal&mode=heavy");
        assert_eq!(q.values("mode").collect::<Vec<_>>(), ["normal", "heavy"]);
    }

    #[test]
    fn query_brackets_case_and_semicolons() {
        let q = CanonicalQuery::parse("mode[]=heavy&MODE[0]=x&Mode[a][b]=y&k=v;mode=z");
        assert_eq!(q.values("mode").collect::<Vec<_>>(), ["heavy", "x", "y", "z"]);
        assert_eq!(q.values("k").collect::<Vec<_>>(), ["v;mode=z", "v"]);
    }

    #[test]
    fn query_keys_as_php_and_rack_read_them() {
        // PHP drops leading spaces, truncates names at NUL and reads `.` and
        // ` ` as `_`; Rack 2 strips stray brackets; PHP reads an unmatched
        // `[` as `_`.
        let q = CanonicalQuery::parse("%20mode=a&+mode=b&mode%00x=c&[mode]=d&mode]=e&mode[]x=f&mode=g%00h");
        assert_eq!(q.values("mode").collect::<Vec<_>>(), ["a", "b", "c", "d", "e", "f", "g"]);
        let q = CanonicalQuery::parse("page.size=1&page+size=2&page[size=3&PAGE_SIZE=4");
        assert_eq!(q.values("page_size").collect::<Vec<_>>(), ["1", "2", "3", "4"]);
        assert_eq!(q.values("page.size").collect::<Vec<_>>(), ["1", "2", "3", "4"]);
        assert_eq!(q.values("page").collect::<Vec<_>>(), ["3"]);
        let q = CanonicalQuery::parse("[]=x&%5B=y");
        assert_eq!(q.pairs(), [("[]".to_string(), "x".to_string()), ("[".to_string(), "y".to_string())]);
    }

    #[test]
    fn query_keys_without_values() {
        let q = CanonicalQuery::parse("debug&x=&&=y");
        assert!(q.contains_key("debug"));
        assert_eq!(q.values("debug").collect::<Vec<_>>(), [""]);
        assert_eq!(q.values("x").collect::<Vec<_>>(), [""]);
        assert_eq!(q.pairs().len(), 2);
    }

    #[test]
    fn joined_parameters_keep_their_source() {
        let mut q = CanonicalQuery::parse("mode=a");
        q.join(Source::Body, vec![("Mode[]".to_string(), "b".to_string()), ("page[size".to_string(), "c\0d".to_string())]);
        q.join_cookies(" laravel.session=x ; MODE=c%2b+d;;junk");
        assert_eq!(q.values("mode").collect::<Vec<_>>(), ["a", "b"], "keys and _method never read cookies");
        let cookies = Sources::NONE.with(Source::Cookie);
        let from = |sources: Sources| q.pairs_from(sources).map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>();
        assert_eq!(from(cookies), ["laravel_session=x", "mode=c+ d", "junk="]);
        assert_eq!(from(Sources::DEFAULT), ["mode=a", "mode=b", "page=c", "page_size=c"]);
        assert_eq!(q.sources()[..4], [Source::Query, Source::Body, Source::Body, Source::Body]);
        assert!(!q.body_unreadable());
        q.mark_body_unreadable();
        assert!(q.body_unreadable());
    }

    #[test]
    fn raw_url_split() {
        let u = RawUrl::split("https://User@Example.COM:8443/a/b?x=1#frag");
        assert_eq!(u.host, "example.com");
        assert_eq!(u.path, "/a/b");
        assert_eq!(u.query, "x=1");
        let u = RawUrl::split("/only/path?q");
        assert_eq!((u.host.as_str(), u.path, u.query), ("", "/only/path", "q"));
        let u = RawUrl::split("http://[::1]:8787/p");
        assert_eq!(u.host, "[::1]");
        let u = RawUrl::split("/api/x=://../example?q=http://h/");
        assert_eq!((u.host.as_str(), u.path, u.query), ("", "/api/x=://../example", "q=http://h/"));
    }

    #[test]
    fn split_once_ascii_and_find_byte_answer_as_str() {
        for s in ["", "=", "a=b", "a==b", "é=ü=", "日本", "x*2", "?#", "a\0b"] {
            for byte in [b'=', b'*', b'#', b'?', 0] {
                assert_eq!(split_once_ascii(s, byte), s.split_once(char::from(byte)), "{s:?}");
                assert_eq!(find_byte(s, byte), s.find(char::from(byte)), "{s:?}");
            }
        }
    }

    #[test]
    fn split_ascii_answers_as_str_split() {
        let inputs = ["", " ", "  ", "a", "a b", " a", "a ", "a  b", "1 a 0 - 0 0 0 1 1 0 - 0 10/60000/1/9/60000", "é ü\n日 本", "\n\n"];
        for s in inputs {
            for separator in [b' ', b'\n', b',', b'/'] {
                let ours: Vec<&str> = split_ascii(s, separator).collect();
                let std: Vec<&str> = s.split(char::from(separator)).collect();
                assert_eq!(ours, std, "{s:?} by {separator}");
            }
        }
    }

    #[test]
    fn find_ascii_answers_as_str_find() {
        let inputs = ["", "#", "a#b?c", "é?#", "/ü/x\\y/z", "日本://h/p?q#f", "x:/://", "::://", "ab", "?é#"];
        for s in inputs {
            assert_eq!(find_ascii(s, b"#"), s.find('#'), "{s:?}");
            assert_eq!(find_ascii(s, b"?"), s.find('?'), "{s:?}");
            assert_eq!(find_ascii(s, b"/\\"), s.find(['/', '\\']), "{s:?}");
            assert_eq!(scheme_end(s), s.find("://"), "{s:?}");
        }
        let u = RawUrl::split("https://日本.example/ü?é=1#x");
        assert_eq!((u.host.as_str(), u.path, u.query), ("日本.example", "/ü", "é=1"));
    }
}
