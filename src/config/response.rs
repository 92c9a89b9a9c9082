//! Custom block responses, pure: a rule's own status, content type and
//! body for the requests it blocks, and the content negotiation that picks
//! between it and the RFC 9457 problem.
//!
//! ```toml
//! response = { status = 503, content_type = "text/html; charset=utf-8",
//!              body = "<p>Busy: try again in {retry_after} s ({rule}).</p>" }
//! ```
//!
//! The body is a template prepared once, when the config is parsed
//! ([`CustomResponse::new`]): the exact tokens `{retry_after}` (whole
//! seconds, as `Retry-After`) and `{rule}` (the rule's name, which holds only
//! `A-Z a-z 0-9 - _ .`, so nothing needs escaping in HTML) are its only
//! placeholders; every other character, braces included (CSS), is text.
//!
//! Negotiation ([`Prefers::from_accept`]): a client that asks for JSON
//! (`application/json`, `application/problem+json` or any `+json` type, at a
//! quality at least that of `text/html`) gets problem+json, with the rule's
//! status, unless the rule's own body is JSON itself (its `content_type`
//! `application/json` or `+json`: an app's own error shape, such as
//! Laravel's `{"message": …}`), which every client gets; anything else (a
//! browser's `text/html`, `*/*`, no `Accept`) gets the custom body.
//! `Retry-After` and the `RateLimit` fields are on both.

use crate::config::cost::Provider;
use crate::config::headers::{self, OwnResponse};
use crate::config::policy::Named;
use crate::count::algorithm::push_u64;

/// How a rule words its refusals (`metering.refusal`): the RFC 9457
/// problem, or the error object of the LLM API it meters, which that API's
/// SDKs read (on problem+json Python `openai` showed only
/// "Error code: 429", `@google/genai` double-encoded it, and the Anthropic
/// SDK's `error.type` was `about:blank`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnRefusal {
    /// `application/problem+json` (the default but for a provider's usage).
    Problem,
    /// The metered API's own error JSON, and `x-should-retry: false` when
    /// the wait is longer than [`SDK_RETRY_WAIT_S`] (the default for
    /// `usage = "openai" | "anthropic" | "gemini"`).
    Provider,
}

impl Named for OwnRefusal {
    const NAMES: &'static [(&'static str, Self)] = &[("provider", OwnRefusal::Provider), ("problem", OwnRefusal::Problem)];
}

/// The longest wait after which a provider-shaped refusal lets an SDK
/// retry: past it, `x-should-retry: false`. openai-node and Python
/// `openai` already ignore a `Retry-After` over 60 s (they retry after
/// their own short backoff, in vain); both Anthropic SDKs sleep for
/// whatever it says, so a spent daily budget held a call silently for
/// about 24 h. openai-node and both Anthropic SDKs obey `x-should-retry`
/// before anything else, and raise their rate-limit error at once.
pub(crate) const SDK_RETRY_WAIT_S: u64 = 60;

/// A rule's refusal bodies (429 and 503), prepared once when the rule is
/// compiled ([`crate::config::rules::Rule::compile`]): a block then only
/// writes its retry-after into them. problem+json, or the error JSON of
/// the API the rule meters ([`OwnRefusal::Provider`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problems {
    too_many: ProblemTemplate,
    unavailable: ProblemTemplate,
    /// The API whose shape the bodies have (`None`: problem+json).
    provider: Option<Provider>,
}

impl Problems {
    /// The bodies of `provider`'s error shape (`None`: problem+json).
    pub(crate) fn shaped(rule: &str, provider: Option<Provider>) -> Problems {
        let (too_many, unavailable) = match provider {
            None => (ProblemTemplate::problem(rule, 429, "Too Many Requests"), ProblemTemplate::problem(rule, 503, "Service Unavailable")),
            Some(p) => (ProblemTemplate::provider(rule, p, 429), ProblemTemplate::provider(rule, p, 503)),
        };
        Problems { too_many, unavailable, provider }
    }

    /// The body of a block answered with `status` (429, or 503).
    pub(crate) fn body(&self, status: u16, retry_after_s: u64) -> String {
        let template = if status == 429 { &self.too_many } else { &self.unavailable };
        template.render(retry_after_s)
    }

    /// The bodies' media type.
    pub(crate) fn content_type(&self) -> &'static str {
        match self.provider {
            None => "application/problem+json",
            Some(_) => "application/json",
        }
    }

    /// `x-should-retry: false` for a provider-shaped refusal whose wait is
    /// longer than [`SDK_RETRY_WAIT_S`]; nothing otherwise (an SDK retries
    /// a 429 or a 503 by default, after `Retry-After`: `true` would add
    /// nothing).
    fn should_retry(&self, retry_after_s: u64) -> Option<(String, String)> {
        (self.provider.is_some() && retry_after_s > SDK_RETRY_WAIT_S).then(|| ("x-should-retry".to_string(), "false".to_string()))
    }
}

/// What fills a gap of a prepared body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// The wait in whole seconds (`86400`).
    Seconds,
    /// The wait for a reader ([`push_wait`]: `42 s`, `23 h 59 min`).
    Wait,
}

/// One refusal body around the places its retry-after goes: `head`, then
/// each gap filled and the text after it. problem+json is
/// `{"detail":"Rate limit `RULE` exceeded; retry in N s.","retry_after":N,
/// "rule":"RULE","status":429,"title":"Too Many Requests","type":"about:blank"}`
/// (members in the order `serde_json` writes them).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProblemTemplate {
    head: String,
    rest: Vec<(Gap, String)>,
}

impl ProblemTemplate {
    fn problem(rule: &str, status: u16, title: &str) -> ProblemTemplate {
        let detail = quoted(&format!("Rate limit `{rule}` exceeded; retry in "));
        ProblemTemplate {
            // The detail's JSON string, left open for the number.
            head: format!("{{\"detail\":{}", &detail[..detail.len() - 1]),
            rest: vec![
                (Gap::Seconds, " s.\",\"retry_after\":".to_string()),
                (Gap::Seconds, format!(",\"rule\":{},\"status\":{status},\"title\":{},\"type\":\"about:blank\"}}", quoted(rule), quoted(title))),
            ],
        }
    }

    /// `provider`'s error JSON for `status` (429, or 503), as the API
    /// sends it: OpenAI's token limit (`type` `tokens`, `code`
    /// `rate_limit_exceeded`), Anthropic's `rate_limit_error` (503:
    /// `overloaded_error`), Gemini's `RESOURCE_EXHAUSTED` (503:
    /// `UNAVAILABLE`); the message names the rule and when to retry.
    fn provider(rule: &str, provider: Provider, status: u16) -> ProblemTemplate {
        let message = quoted(&format!("Rate limit `{rule}` exceeded; retry in "));
        // The message's JSON string, left open for the wait.
        let message = &message[..message.len() - 1];
        let busy = status != 429;
        let (head, tail) = match provider {
            Provider::OpenAi => {
                let (kind, code) = if busy { ("server_error", "\"service_unavailable\"") } else { ("tokens", "\"rate_limit_exceeded\"") };
                (format!("{{\"error\":{{\"message\":{message}"), format!(".\",\"type\":\"{kind}\",\"param\":null,\"code\":{code}}}}}"))
            }
            Provider::Anthropic => {
                let kind = if busy { "overloaded_error" } else { "rate_limit_error" };
                (format!("{{\"type\":\"error\",\"error\":{{\"type\":\"{kind}\",\"message\":{message}"), ".\"}}".to_string())
            }
            Provider::Gemini => {
                let state = if busy { "UNAVAILABLE" } else { "RESOURCE_EXHAUSTED" };
                (format!("{{\"error\":{{\"code\":{status},\"message\":{message}"), format!(".\",\"status\":\"{state}\"}}}}"))
            }
        };
        ProblemTemplate { head, rest: vec![(Gap::Wait, tail)] }
    }

    fn render(&self, retry_after_s: u64) -> String {
        let mut body = String::with_capacity(self.head.len() + self.rest.iter().map(|(_, t)| t.len() + 20).sum::<usize>());
        body.push_str(&self.head);
        for (gap, text) in &self.rest {
            match gap {
                Gap::Seconds => push_u64(&mut body, retry_after_s),
                Gap::Wait => push_wait(&mut body, retry_after_s),
            }
            body.push_str(text);
        }
        body
    }
}

/// `text` as a JSON string, quotes included.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// A wait for a reader: `42 s` under 2 minutes, else whole minutes
/// rounded up (`5 min`, `23 h 59 min`, `3 h`).
fn push_wait(out: &mut String, seconds: u64) {
    if seconds < 120 {
        push_u64(out, seconds);
        return out.push_str(" s");
    }
    let minutes = seconds.div_ceil(60);
    let (hours, minutes) = (minutes / 60, minutes % 60);
    if hours > 0 {
        push_u64(out, hours);
        out.push_str(" h");
    }
    if minutes > 0 {
        if hours > 0 {
            out.push(' ');
        }
        push_u64(out, minutes);
        out.push_str(" min");
    }
}

/// The statuses a block may answer with: 429 (Too Many Requests, RFC 6585
/// §4) or 503 (Service Unavailable, RFC 9110 §15.6.4), both of which
/// `Retry-After` applies to.
pub(crate) const STATUSES: [u16; 2] = [429, 503];

/// The largest custom body, in bytes: a page, not an asset.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;

/// The default content type of a custom body.
pub(crate) const DEFAULT_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// One piece of a prepared body.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    RetryAfter,
    Rule,
}

/// A rule's own block response, its body prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CustomResponse {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    /// `None`: only the status is the rule's; the body stays problem+json.
    body: Option<Vec<Piece>>,
}

/// What the client asked for in `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prefers {
    /// JSON ranks at least as high as HTML: problem+json.
    Json,
    /// Anything else: the rule's custom body, if it has one.
    Other,
}

impl Prefers {
    /// Reads `Accept` (RFC 9110 §12.5.1): the highest quality given to a
    /// JSON type against the highest given to `text/html` or
    /// `application/xhtml+xml`; wildcards favour neither. Malformed
    /// parameters read as quality 1.
    pub(crate) fn from_accept(accept: Option<&str>) -> Prefers {
        let Some(accept) = accept else { return Prefers::Other };
        let (mut json, mut html) = (0u16, 0u16);
        for range in accept.split(',') {
            let mut params = range.split(';');
            let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = params
                .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
                .map(quality)
                .next()
                .unwrap_or(1000);
            if is_json_media(&media) {
                json = json.max(q);
            } else if media == "text/html" || media == "application/xhtml+xml" {
                html = html.max(q);
            }
        }
        if json > 0 && json >= html {
            Prefers::Json
        } else {
            Prefers::Other
        }
    }
}

/// Whether a lowercased media type (no parameters) is JSON:
/// `application/json` or any `application/…+json` (RFC 6839 §3.1).
fn is_json_media(media: &str) -> bool {
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

/// A quality value in thousandths (`0.8` is 800), as RFC 9110 §12.4.2
/// writes it (`0`, `0.5`, `1.000`); anything else reads as 1000. Parsed by
/// hand: no float parsing in the Worker.
fn quality(text: &str) -> u16 {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !(whole == "0" || whole == "1") || fraction.len() > 3 || !digits(fraction) {
        return 1000;
    }
    let thousandths = fraction.bytes().chain(std::iter::repeat(b'0')).take(3).fold(0u16, |acc, b| acc * 10 + u16::from(b - b'0'));
    if whole == "1" {
        1000
    } else {
        thousandths
    }
}

impl CustomResponse {
    /// Prepares a rule's response: `status` one of [`STATUSES`], `body` at
    /// most [`MAX_BODY_BYTES`] (`None`: keep the problem+json body). The
    /// error says what is wrong.
    pub(crate) fn new(status: u16, content_type: Option<String>, body: Option<&str>) -> Result<CustomResponse, String> {
        if !STATUSES.contains(&status) {
            return Err(format!("status must be 429 or 503 (both carry Retry-After), not {status}"));
        }
        if let Some(body) = body {
            if body.len() > MAX_BODY_BYTES {
                return Err(format!("body is {} bytes; at most {MAX_BODY_BYTES}", body.len()));
            }
        }
        let content_type = content_type.unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string());
        Ok(CustomResponse { status, content_type, body: body.map(prepare) })
    }

    /// Whether the rule has a body of its own (else only its status).
    #[cfg(any(not(target_arch = "wasm32"), feature = "cli"))]
    pub(crate) fn has_body(&self) -> bool {
        self.body.is_some()
    }

    /// Whether the body is JSON (`application/json` or a `+json` type,
    /// parameters aside): a JSON client then gets it rather than
    /// problem+json.
    pub(crate) fn is_json(&self) -> bool {
        is_json_media(&self.content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
    }

    /// The body as the config wrote it, placeholders and all (`None`: the
    /// problem+json body is kept).
    pub(crate) fn template(&self) -> Option<String> {
        let pieces = self.body.as_ref()?;
        Some(pieces.iter().map(|piece| match piece {
            Piece::Text(text) => text.as_str(),
            Piece::RetryAfter => "{retry_after}",
            Piece::Rule => "{rule}",
        }).collect())
    }

    /// The body for `rule`, `retry_after_s` seconds to wait.
    pub(crate) fn render(&self, rule: &str, retry_after_s: u64) -> Option<String> {
        let pieces = self.body.as_ref()?;
        let mut out = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::RetryAfter => out.push_str(&retry_after_s.to_string()),
                Piece::Rule => out.push_str(rule),
            }
        }
        Some(out)
    }
}

/// Splits a body into text and the two placeholders.
fn prepare(body: &str) -> Vec<Piece> {
    const TOKENS: [(&str, Piece); 2] = [("{retry_after}", Piece::RetryAfter), ("{rule}", Piece::Rule)];
    let mut pieces = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let next = TOKENS.iter().filter_map(|(token, piece)| rest.find(token).map(|at| (at, *token, piece))).min_by_key(|(at, ..)| *at);
        match next {
            Some((at, token, piece)) => {
                if at > 0 {
                    pieces.push(Piece::Text(rest[..at].to_string()));
                }
                pieces.push(piece.clone());
                rest = &rest[at + token.len()..];
            }
            None => {
                pieces.push(Piece::Text(rest.to_string()));
                rest = "";
            }
        }
    }
    pieces
}

/// A block's response for `rule`: `Retry-After` in whole seconds (at
/// least 1) and the rule's `RateLimit` fields (`fields`,
/// [`headers::rate_fields`] of what refused) always; the status and body
/// the rule's `custom` response and the client's preference choose, else
/// the rule's `problems` (problem+json or its API's error shape; with the
/// latter, `x-should-retry: false` past [`SDK_RETRY_WAIT_S`], whatever the
/// body).
pub(crate) fn blocked(
    rule: &str,
    custom: Option<&CustomResponse>,
    problems: &Problems,
    prefers: Prefers,
    retry_after_ms: u64,
    fields: Vec<(String, String)>,
) -> OwnResponse {
    let retry_after_s = headers::seconds_ceil(retry_after_ms).max(1);
    let status = custom.map_or(429, |c| c.status);
    let own_body = custom
        .filter(|c| prefers == Prefers::Other || c.is_json())
        .and_then(|c| Some((c.content_type.clone(), c.render(rule, retry_after_s)?)));
    let (content_type, body) = match own_body {
        Some(own) => own,
        None => (problems.content_type().to_string(), problems.body(status, retry_after_s)),
    };
    let mut retry_after = String::with_capacity(6);
    push_u64(&mut retry_after, retry_after_s);
    let mut out = Vec::with_capacity(3 + fields.len());
    out.push(("content-type".to_string(), content_type));
    out.push(("retry-after".to_string(), retry_after));
    out.extend(problems.should_retry(retry_after_s));
    out.extend(fields);
    OwnResponse { status, headers: out, body }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The prepared bodies are byte for byte the JSON `serde_json` writes,
    /// for any rule name (quotes and non-ASCII escaped as JSON requires).
    #[test]
    fn prepared_problem_bodies_equal_the_json_written_per_block() {
        for rule in ["heavy-example", "a\"b\\c", "tollgate:admin-auth", "é\u{1}"] {
            let problems = Problems::shaped(rule, None);
            for (status, title) in [(429, "Too Many Requests"), (503, "Service Unavailable")] {
                for retry in [1, 60, 86_400] {
                    let expected = json!({
                        "type": "about:blank",
                        "title": title,
                        "status": status,
                        "detail": format!("Rate limit `{rule}` exceeded; retry in {retry} s."),
                        "rule": rule,
                        "retry_after": retry,
                    })
                    .to_string();
                    assert_eq!(problems.body(status, retry), expected);
                }
            }
        }
    }

    /// A rule metering an LLM refuses in its API's own
    /// error shape, which the SDKs read (their rate-limit error, its
    /// `error.type`), readable, and says when a retry is pointless.
    #[test]
    fn a_provider_refusal_has_the_apis_shape_and_says_when_not_to_retry() {
        let windows = [crate::count::protocol::WireWindow { limit: 10_000, window_ms: 86_400_000, used: 10_000, remaining: 0, reset_ms: 0, calendar: None }];
        for (provider, status, expected) in [
            (Provider::OpenAi, 429, json!({ "error": { "message": "Rate limit `chat` exceeded; retry in 23 h 59 min.", "type": "tokens", "param": null, "code": "rate_limit_exceeded" } })),
            (Provider::OpenAi, 503, json!({ "error": { "message": "Rate limit `chat` exceeded; retry in 23 h 59 min.", "type": "server_error", "param": null, "code": "service_unavailable" } })),
            (Provider::Anthropic, 429, json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "Rate limit `chat` exceeded; retry in 23 h 59 min." } })),
            (Provider::Anthropic, 503, json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Rate limit `chat` exceeded; retry in 23 h 59 min." } })),
            (Provider::Gemini, 429, json!({ "error": { "code": 429, "message": "Rate limit `chat` exceeded; retry in 23 h 59 min.", "status": "RESOURCE_EXHAUSTED" } })),
            (Provider::Gemini, 503, json!({ "error": { "code": 503, "message": "Rate limit `chat` exceeded; retry in 23 h 59 min.", "status": "UNAVAILABLE" } })),
        ] {
            let problems = Problems::shaped("chat", Some(provider));
            let custom = CustomResponse::new(status, None, None).unwrap();
            let retry_ms = 86_340_000;
            let fields = headers::rate_fields(&headers::Policies::of_requests("chat"), &windows, headers::RateReport::Window { index: 0, retry_after_ms: retry_ms });
            let r = blocked("chat", Some(&custom), &problems, Prefers::Json, retry_ms, fields);
            let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
            assert_eq!((r.status, body), (status, expected), "{provider:?}");
            assert_eq!((r.header("content-type"), r.header("retry-after"), r.header("x-should-retry")), (Some("application/json"), Some("86340"), Some("false")));
            assert!(r.header("ratelimit").is_some() && r.header("ratelimit-policy").is_some());
        }
        let fields = || headers::rate_fields(&headers::Policies::of_requests("chat"), &windows, headers::RateReport::Window { index: 0, retry_after_ms: 60_000 });
        let anthropic = Problems::shaped("chat", Some(Provider::Anthropic));
        let short = blocked("chat", None, &anthropic, Prefers::Other, 60_000, fields());
        assert_eq!((short.header("x-should-retry"), short.header("retry-after")), (None, Some("60")), "a minute: the SDK's retry may wait it");
        assert!(short.body.contains("retry in 60 s."), "{}", short.body);
        let long = blocked("chat", None, &anthropic, Prefers::Other, 60_001, fields());
        assert_eq!(long.header("x-should-retry"), Some("false"));
        let problem = blocked("chat", None, &Problems::shaped("chat", None), Prefers::Json, 86_340_000, fields());
        assert_eq!((problem.header("content-type"), problem.header("x-should-retry")), (Some("application/problem+json"), None), "problem+json as before");
        let page = CustomResponse::new(429, None, Some("<p>{rule}</p>")).unwrap();
        let own = blocked("chat", Some(&page), &anthropic, Prefers::Other, 86_340_000, fields());
        assert_eq!((own.body.as_str(), own.header("x-should-retry")), ("<p>chat</p>", Some("false")), "the rule's own body is kept");
        let quoted = Problems::shaped("a\"b", Some(Provider::OpenAi)).body(429, 5);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&quoted).unwrap()["error"]["message"], "Rate limit `a\"b` exceeded; retry in 5 s.");
    }

    #[test]
    fn a_wait_reads_in_seconds_then_minutes_and_hours() {
        let wait = |s: u64| {
            let mut out = String::new();
            push_wait(&mut out, s);
            out
        };
        assert_eq!([wait(1), wait(119), wait(120), wait(121), wait(3_600), wait(3_660), wait(86_400)], ["1 s", "119 s", "2 min", "3 min", "1 h", "1 h 1 min", "24 h"]);
    }

    const CHROME: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

    #[test]
    fn negotiation_serves_json_to_json_clients_and_the_page_to_browsers() {
        assert_eq!(Prefers::from_accept(Some(CHROME)), Prefers::Other);
        assert_eq!(Prefers::from_accept(Some("application/json")), Prefers::Json);
        assert_eq!(Prefers::from_accept(Some("application/json, text/plain, */*")), Prefers::Json, "axios");
        assert_eq!(Prefers::from_accept(Some("application/problem+json")), Prefers::Json);
        assert_eq!(Prefers::from_accept(Some("Application/JSON; charset=utf-8")), Prefers::Json);
        assert_eq!(Prefers::from_accept(Some("*/*")), Prefers::Other, "curl, fetch()");
        assert_eq!(Prefers::from_accept(None), Prefers::Other);
        assert_eq!(Prefers::from_accept(Some("text/html, application/json;q=0.5")), Prefers::Other);
        assert_eq!(Prefers::from_accept(Some("text/html;q=0.5, application/json")), Prefers::Json);
        assert_eq!(Prefers::from_accept(Some("application/json;q=0")), Prefers::Other, "q=0: not acceptable");
        assert_eq!(Prefers::from_accept(Some("application/json;q=junk")), Prefers::Json);
        assert_eq!(Prefers::from_accept(Some("text/html;q=0.9, application/json;q=0.95")), Prefers::Json);
        assert_eq!(Prefers::from_accept(Some("text/html;q=0.951, application/json;q=0.95")), Prefers::Other);
        assert_eq!((quality("0"), quality("0.5"), quality("0.05"), quality("1.000"), quality("0.1234")), (0, 500, 50, 1000, 1000));
    }

    #[test]
    fn the_template_is_prepared_once_and_only_two_tokens_are_placeholders() {
        let body = "<style>p { color: red }</style><p>{rule}: wait {retry_after} s, {retry_after}s. {other} {rule</p>";
        let c = CustomResponse::new(503, None, Some(body)).unwrap();
        assert_eq!(
            c.render("api-general", 42).unwrap(),
            "<style>p { color: red }</style><p>api-general: wait 42 s, 42s. {other} {rule</p>"
        );
        assert_eq!(c.content_type, DEFAULT_CONTENT_TYPE);
        assert_eq!(CustomResponse::new(429, None, Some("")).unwrap().render("r", 1).unwrap(), "");
        assert_eq!(CustomResponse::new(429, None, Some("{rule}{rule}")).unwrap().render("r", 1).unwrap(), "rr");
        assert!(CustomResponse::new(418, None, None).unwrap_err().contains("429 or 503"));
        assert!(CustomResponse::new(429, None, Some(&"x".repeat(MAX_BODY_BYTES + 1))).is_err());
    }

    /// An app's own JSON error shape reaches a JSON client; an
    /// HTML page does not (problem+json stays the default).
    #[test]
    fn a_json_body_of_the_rules_own_wins_over_problem_json() {
        let windows = [crate::count::protocol::WireWindow { limit: 10, window_ms: 60_000, used: 10, remaining: 0, reset_ms: 1_500, calendar: None }];
        let fields = || headers::rate_fields(&headers::Policies::of_requests("login"), &windows, headers::RateReport::Window { index: 0, retry_after_ms: 1_500 });
        let laravel = CustomResponse::new(429, Some("application/json".into()), Some(r#"{"message":"Too Many Attempts.","retry":{retry_after}}"#)).unwrap();
        let vendor = CustomResponse::new(429, Some("Application/Vnd.Api+JSON; charset=utf-8".into()), Some("{}")).unwrap();
        let page = CustomResponse::new(429, None, Some("<p>wait</p>")).unwrap();
        assert!(laravel.is_json() && vendor.is_json() && !page.is_json());
        for prefers in [Prefers::Json, Prefers::Other] {
            let r = blocked("login", Some(&laravel), &Problems::shaped("login", None), prefers, 1_500, fields());
            assert_eq!((r.status, r.header("content-type")), (429, Some("application/json")));
            assert_eq!(r.body, r#"{"message":"Too Many Attempts.","retry":2}"#);
            assert_eq!((r.header("retry-after"), r.header("ratelimit")), (Some("2"), Some("\"login\";r=0;t=2")));
            let v = blocked("login", Some(&vendor), &Problems::shaped("login", None), prefers, 1_500, fields());
            assert_eq!(v.body, "{}");
        }
        let to_json = blocked("login", Some(&page), &Problems::shaped("login", None), Prefers::Json, 1_500, fields());
        assert_eq!(to_json.header("content-type"), Some("application/problem+json"));
    }

    #[test]
    fn a_block_always_carries_retry_after_and_the_ratelimit_fields() {
        let windows = [crate::count::protocol::WireWindow { limit: 10, window_ms: 60_000, used: 10, remaining: 0, reset_ms: 1_500, calendar: None }];
        let fields = || headers::rate_fields(&headers::Policies::of_requests("api"), &windows, headers::RateReport::Window { index: 0, retry_after_ms: 1_500 });
        let page = CustomResponse::new(503, Some("text/plain".into()), Some("busy, {retry_after}s")).unwrap();
        for (prefers, custom, status, content_type) in [
            (Prefers::Other, Some(&page), 503, "text/plain"),
            (Prefers::Json, Some(&page), 503, "application/problem+json"),
            (Prefers::Other, None, 429, "application/problem+json"),
        ] {
            let r = blocked("api", custom, &Problems::shaped("api", None), prefers, 1_500, fields());
            assert_eq!(r.status, status);
            assert_eq!(r.header("content-type"), Some(content_type));
            assert_eq!(r.header("retry-after"), Some("2"));
            assert_eq!(r.header("ratelimit-policy"), Some("\"api\";q=10;w=60"));
            assert_eq!(r.header("ratelimit"), Some("\"api\";r=0;t=2"));
        }
        let json = blocked("api", Some(&page), &Problems::shaped("api", None), Prefers::Json, 1_500, fields());
        let body: serde_json::Value = serde_json::from_str(&json.body).unwrap();
        assert_eq!((body["status"].as_u64(), body["title"].as_str()), (Some(503), Some("Service Unavailable")));
        assert_eq!(blocked("api", Some(&page), &Problems::shaped("api", None), Prefers::Other, 1_500, fields()).body, "busy, 2s");
        let status_only = CustomResponse::new(503, None, None).unwrap();
        assert!(!status_only.is_json());
        assert_eq!(blocked("api", Some(&status_only), &Problems::shaped("api", None), Prefers::Other, 1_500, fields()).header("content-type"), Some("application/problem+json"));
    }
}
