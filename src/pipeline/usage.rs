//! Usage read from the origin's answer as it passes (issue 37), sans-IO:
//! the driver hands every chunk of the response body to [`BodyUsage::feed`]
//! and passes the chunk on unchanged (nothing is buffered on the client's
//! way: the chunk timing is the origin's), then says how the body ended
//! ([`End`]) and asks [`BodyUsage::tokens`] what each rule commits.
//!
//! # Framing
//! - `text/event-stream` (any case, any parameters): SSE events as the
//!   WHATWG HTML standard frames them (§9.2.6): lines end at CRLF, LF or CR
//!   (a CR at a chunk's end and an LF at the next one's start are one
//!   ending), `data:` lines joined with LF, one space after the colon
//!   dropped, `:` comments and other fields ignored, an event dispatched at
//!   a blank line; `[DONE]` and events that are not JSON carry nothing. An
//!   event whose data passes [`EVENT_LIMIT`] (64 KiB) is skipped; the last
//!   event, if the stream ends cleanly without its blank line, is read too.
//!   Only events whose data mentions the usage's member (`usage`,
//!   `usageMetadata`, the path's first name) are parsed.
//! - anything else: one JSON body, read up to [`JSON_LIMIT`] (1 MiB; a
//!   body over it reports no usage); a top-level array (Gemini's
//!   `streamGenerateContent` without `alt=sse`) is read element by element.
//!
//! # What is read ([`Reading`])
//! - `openai`: `usage` (Chat Completions: the final chunk with
//!   `stream_options.include_usage`, or the JSON body) or `response.usage`
//!   (the Responses API's `response.completed`): `prompt_tokens` /
//!   `input_tokens` (input), `completion_tokens` / `output_tokens`
//!   (output), `total_tokens`.
//! - `anthropic`: `message.usage` (`message_start`) and `usage`
//!   (`message_delta`, a JSON body): input = `input_tokens` +
//!   `cache_creation_input_tokens` + `cache_read_input_tokens`, output =
//!   `output_tokens`, cumulative (never summed across events).
//! - `gemini`: `usageMetadata`: `promptTokenCount` (input),
//!   `candidatesTokenCount` + `thoughtsTokenCount` (output, as billed),
//!   `totalTokenCount`.
//! - `{ json = "a.b" }`: the whole number at that path, as a total.
//!
//! Each figure is the largest reported so far (in a well-formed stream,
//! the last: every provider's counts only grow), so a stream never commits
//! less than any report it made. `count` picks the units ([`Count`]); the
//! total is the provider's, else input + output.
//!
//! Only the response is read: usage the client writes into its request
//! (a forged `data: {"usage": …}` in a prompt) is never seen here.
//!
//! # How each end is charged, and its bound
//! The reservation (`reserve`) was made before forwarding; the commit is
//! clamped to `[0, max]` ([`crate::config::cost::Usage::clamp`]). Over the
//! budget *as the origin counts it*, with `reserve = max`:
//! - **clean end with usage** ([`End::Ended`]): the usage read. Exact
//!   (overspend 0), as long as the origin reports what it counts.
//! - **clean end without usage** (no usage event, an error event, a body
//!   too large to read): `max`. Charging `reserve` could admit past the
//!   budget when `reserve < max`; `max` never does, for an origin that caps
//!   an answer at `max`. Overspend 0; under-use up to `max − used`.
//! - **the client went away** ([`End::Cancelled`]; the origin's body is
//!   cancelled with it): `max`: the origin may have spent past the last
//!   report before the cancel reached it. Overspend 0.
//! - **the origin failed mid-stream** ([`End::Failed`]): `max`. Overspend 0.
//! - **past `reservation_ttl`** ([`End::Lapsed`]): the stream is cut one
//!   second before its reservation lapses ([`crate::count::slots`]'s
//!   margin) and commits `max` while the reservation still holds the room:
//!   no other request is admitted on it. Overspend 0 (the 0.2 bound of 4
//!   streams spending 16,000 of 10,000 came from reservations lapsing
//!   while their streams ran).
//! - **cut** ([`End::Cut`], `cut = true`): once the usage reported as the
//!   stream goes passes `reserve`, the chunk is passed up to the end of the
//!   event that said so, a provider-shaped SSE error event follows, the
//!   origin's body is cancelled, and `max` is committed. As the origin
//!   counts, a cut stream spends at most `reserve` plus one report's
//!   increment plus what it made before the cancel reached it; tollgate
//!   charges `max`.
//!
//! With `reserve < max`, each end may also over-commit by `max − reserve`
//! per stream in flight ([`crate::config::cost`]'s bound).

use crate::config::cost::{Count, Provider, Reading, Source, Usage};
use crate::config::rules::Rule;
use crate::pipeline::applied::Applied;
use serde_json::Value;

/// The most bytes of one SSE event's data (or one line) kept; a larger
/// event is skipped (its usage, if any, unread: the stream then commits as
/// one without usage, `max`).
pub(crate) const EVENT_LIMIT: usize = 64 * 1024;

/// The most bytes of a JSON body read; a larger body reports no usage.
pub(crate) const JSON_LIMIT: usize = 1024 * 1024;

/// How the body ended, as the driver saw it (the word of its watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The origin's body ended and every chunk was passed on.
    Ended,
    /// A reader asked to cut it ([`Cut`]).
    Cut,
    /// The client went away.
    Cancelled,
    /// The origin's stream failed.
    Failed,
    /// Cut before its reservation lapsed (or a chunk waited unread).
    Lapsed,
}

impl End {
    /// The word of the driver's watch (`ended`, `cut`, `cancelled`,
    /// `failed`, `lapsed`, `idle`); an unknown word is a failure.
    pub(crate) fn from_word(word: &str) -> End {
        match word {
            "ended" => End::Ended,
            "cut" => End::Cut,
            "cancelled" => End::Cancelled,
            "lapsed" | "idle" => End::Lapsed,
            _ => End::Failed,
        }
    }
}

/// What the driver must do after a chunk: pass its first `keep` bytes,
/// then `event`, then end the client's stream and cancel the origin's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    pub(crate) keep: usize,
    pub(crate) event: Vec<u8>,
}

/// Token figures seen so far: the largest of each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub(crate) input: Option<u64>,
    pub(crate) output: Option<u64>,
    pub(crate) total: Option<u64>,
}

impl Tokens {
    fn merge(&mut self, seen: Tokens) {
        let most = |a: Option<u64>, b: Option<u64>| a.max(b);
        self.input = most(self.input, seen.input);
        self.output = most(self.output, seen.output);
        self.total = most(self.total, seen.total);
    }

    /// The units `count` picks; `None` when the figure it needs was never
    /// reported.
    pub(crate) fn units(&self, count: Count) -> Option<u64> {
        let sum = match (self.input, self.output) {
            (None, None) => None,
            (i, o) => Some(i.unwrap_or(0).saturating_add(o.unwrap_or(0))),
        };
        match count {
            Count::Total => self.total.or(sum),
            Count::Input => self.input,
            Count::Output => self.output,
            Count::Weighted { input, output } => sum.map(|_| {
                let i = self.input.unwrap_or(0).saturating_mul(u64::from(input));
                i.saturating_add(self.output.unwrap_or(0).saturating_mul(u64::from(output)))
            }),
        }
    }
}

/// One rule's reader of one body.
#[derive(Debug)]
pub(crate) struct UsageReader {
    reading: Reading,
    count: Count,
    /// `Some(reserve)` with `cut = true`: cut once the units pass it.
    cut_above: Option<u64>,
    framing: Framing,
    tokens: Tokens,
    cut: bool,
}

#[derive(Debug)]
enum Framing {
    Sse(Sse),
    /// The body so far; `None` once it passed [`JSON_LIMIT`].
    Json(Option<Vec<u8>>),
}

/// The SSE framer's state between chunks.
#[derive(Debug, Default)]
struct Sse {
    line: Vec<u8>,
    /// The current line passed [`EVENT_LIMIT`]: dropped to its end.
    line_over: bool,
    /// The last byte was a CR: an LF next is part of its line ending.
    after_cr: bool,
    data: Vec<u8>,
    /// The event's data passed [`EVENT_LIMIT`]: skipped at dispatch.
    data_over: bool,
    has_data: bool,
}

impl UsageReader {
    /// A reader for `usage` (a body source) of a body whose `content-type`
    /// is `content_type`.
    pub(crate) fn new(usage: &Usage, reading: &Reading, content_type: Option<&str>) -> UsageReader {
        let framing = if is_event_stream(content_type) { Framing::Sse(Sse::default()) } else { Framing::Json(Some(Vec::new())) };
        let cut_above = usage.cut.then_some(u64::from(usage.reserve));
        UsageReader { reading: reading.clone(), count: usage.count, cut_above, framing, tokens: Tokens::default(), cut: false }
    }

    /// Reads one chunk; `Some(keep)` once the usage passed the reserve of a
    /// `cut` rule: the chunk's bytes up to the end of the event that said
    /// so. Nothing is read after a cut.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Option<usize> {
        if self.cut {
            return None;
        }
        match &mut self.framing {
            Framing::Json(body) => {
                if let Some(bytes) = body {
                    if bytes.len() + chunk.len() > JSON_LIMIT {
                        *body = None;
                    } else {
                        bytes.extend_from_slice(chunk);
                    }
                }
                None
            }
            Framing::Sse(_) => self.feed_sse(chunk),
        }
    }

    fn feed_sse(&mut self, chunk: &[u8]) -> Option<usize> {
        for (at, &byte) in chunk.iter().enumerate() {
            let Framing::Sse(sse) = &mut self.framing else { return None };
            let Some(event) = sse.byte(byte) else { continue };
            self.read_event(&event);
            if self.passed_reserve() {
                self.cut = true;
                return Some(at + 1);
            }
        }
        None
    }

    /// The body ended cleanly: the last event without its blank line, or
    /// the JSON body, read.
    pub(crate) fn finish(&mut self) {
        match std::mem::replace(&mut self.framing, Framing::Json(None)) {
            Framing::Sse(mut sse) => {
                if let Some(event) = sse.end_line().or_else(|| sse.dispatch()) {
                    self.read_event(&event);
                }
            }
            Framing::Json(Some(body)) => {
                if let Some(value) = parse(&body) {
                    match value {
                        Value::Array(items) => items.iter().for_each(|item| self.read_value(item)),
                        other => self.read_value(&other),
                    }
                }
            }
            Framing::Json(None) => {}
        }
    }

    /// The units seen so far (`count` applied).
    pub(crate) fn units(&self) -> Option<u64> {
        self.tokens.units(self.count)
    }

    fn passed_reserve(&self) -> bool {
        self.cut_above.is_some_and(|reserve| self.units().is_some_and(|units| units > reserve))
    }

    fn read_event(&mut self, data: &[u8]) {
        if !contains(data, self.needle().as_bytes()) {
            return;
        }
        if let Some(value) = parse(data) {
            self.read_value(&value);
        }
    }

    /// The text an event's data must hold to be parsed at all.
    fn needle(&self) -> &str {
        match &self.reading {
            Reading::Provider(Provider::Gemini) => "usageMetadata",
            Reading::Provider(_) => "usage",
            Reading::Json(path) => path.split('.').next().unwrap_or(path),
        }
    }

    fn read_value(&mut self, value: &Value) {
        let seen = match &self.reading {
            Reading::Provider(Provider::OpenAi) => openai(value),
            Reading::Provider(Provider::Anthropic) => anthropic(value),
            Reading::Provider(Provider::Gemini) => gemini(value),
            Reading::Json(path) => Tokens { total: at_path(value, path).and_then(whole), ..Tokens::default() },
        };
        self.tokens.merge(seen);
    }

    /// The provider-shaped SSE error event a cut ends the stream with.
    pub(crate) fn cut_event(&self) -> Vec<u8> {
        let message = format!("tollgate: this answer used more than the {} tokens its rule reserved; the stream was ended", self.cut_above.unwrap_or(0));
        let text = Value::String(message).to_string();
        let event = match &self.reading {
            Reading::Provider(Provider::Anthropic) => {
                format!("event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"rate_limit_error\",\"message\":{text}}}}}\n\n")
            }
            Reading::Provider(Provider::Gemini) => {
                format!("data: {{\"error\":{{\"code\":429,\"message\":{text},\"status\":\"RESOURCE_EXHAUSTED\"}}}}\n\n")
            }
            Reading::Provider(Provider::OpenAi) | Reading::Json(_) => {
                format!("data: {{\"error\":{{\"message\":{text},\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}}}\n\n")
            }
        };
        event.into_bytes()
    }
}

impl Sse {
    /// One byte; the data of an event when it completes one.
    fn byte(&mut self, byte: u8) -> Option<Vec<u8>> {
        let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
        match byte {
            b'\n' if after_cr => None,
            b'\n' | b'\r' => self.end_line(),
            _ => {
                if self.line.len() >= EVENT_LIMIT {
                    self.line_over = true;
                } else if !self.line_over {
                    self.line.push(byte);
                }
                None
            }
        }
    }

    /// The line ended: a blank line dispatches the event.
    fn end_line(&mut self) -> Option<Vec<u8>> {
        let line = std::mem::take(&mut self.line);
        if std::mem::replace(&mut self.line_over, false) {
            self.data_over = true;
            return None;
        }
        if line.is_empty() {
            return self.dispatch();
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(at) => (&line[..at], line[at + 1..].strip_prefix(b" ").unwrap_or(&line[at + 1..])),
            None => (&line[..], &b""[..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > EVENT_LIMIT {
                self.data_over = true;
            } else {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            self.has_data = true;
        }
        None
    }

    fn dispatch(&mut self) -> Option<Vec<u8>> {
        let mut data = std::mem::take(&mut self.data);
        let (has, over) = (std::mem::replace(&mut self.has_data, false), std::mem::replace(&mut self.data_over, false));
        if !has || over {
            return None;
        }
        data.pop();
        Some(data)
    }
}

/// The usage of every rule reading one body.
#[derive(Debug)]
pub(crate) struct BodyUsage {
    readers: Vec<(String, UsageReader)>,
    end: Option<End>,
    /// The rule whose reader cut the stream.
    cut_by: Option<usize>,
}

impl BodyUsage {
    /// Readers for `rules` (name, usage, its body reading) over a body of
    /// `content_type`.
    pub(crate) fn new<'a>(rules: impl IntoIterator<Item = (&'a str, &'a Usage, &'a Reading)>, content_type: Option<&str>) -> BodyUsage {
        let readers = rules.into_iter().map(|(name, usage, reading)| (name.to_string(), UsageReader::new(usage, reading, content_type))).collect();
        BodyUsage { readers, end: None, cut_by: None }
    }

    /// Reads a chunk into every reader; a [`Cut`] once one asks for it
    /// (nothing more is read afterwards).
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Option<Cut> {
        if self.cut_by.is_some() {
            return None;
        }
        let mut cut: Option<(usize, usize)> = None;
        for (i, (_, reader)) in self.readers.iter_mut().enumerate() {
            if let Some(keep) = reader.feed(chunk) {
                cut = Some(cut.map_or((i, keep), |(j, k)| if keep < k { (i, keep) } else { (j, k) }));
            }
        }
        let (i, keep) = cut?;
        self.cut_by = Some(i);
        Some(Cut { keep, event: self.readers[i].1.cut_event() })
    }

    /// How the body ended; readers finish on a clean end.
    pub(crate) fn end(&mut self, end: End) {
        let end = if self.cut_by.is_some() { End::Cut } else { end };
        if end == End::Ended {
            self.readers.iter_mut().for_each(|(_, r)| r.finish());
        }
        self.end = Some(end);
    }

    /// The tokens `rule` commits (before clamping): what it read after a
    /// clean end; `None` (the rule's `max`) for any other end, or when it
    /// read none.
    pub(crate) fn tokens(&self, rule: &str) -> Option<u64> {
        if self.end != Some(End::Ended) {
            return None;
        }
        self.readers.iter().find(|(name, _)| name == rule).and_then(|(_, r)| r.units())
    }
}

/// Whether `rule`'s usage is read from the answer's body.
pub(crate) fn reads_body(rule: &Rule) -> bool {
    rule.usage.as_ref().is_some_and(|u| matches!(u.source, Source::Body(_)))
}

/// The readers of an answer of `status` and `content_type` for the
/// `applied` rules that read usage from the body and count the status;
/// `None` when none does (the body is then not read).
pub(crate) fn body_usage(applied: &[Applied<'_>], status: u16, content_type: Option<&str>) -> Option<BodyUsage> {
    let rules: Vec<(&str, &Usage, &Reading)> = applied
        .iter()
        .filter(|a| a.rule.counting.counts(status))
        .filter_map(|a| match a.rule.usage.as_ref() {
            Some(u @ Usage { source: Source::Body(reading), .. }) => Some((a.rule.name.as_str(), u, reading)),
            _ => None,
        })
        .collect();
    (!rules.is_empty()).then(|| BodyUsage::new(rules, content_type))
}

fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("text/event-stream"))
}

/// A JSON value (UTF-8 only, as JSON is: RFC 8259 §8.1). Read as a `str`:
/// the Worker already carries serde_json's `str` reader of a `Value`.
fn parse(bytes: &[u8]) -> Option<Value> {
    serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// A whole number (a float with no fraction too), never negative.
fn whole(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| value.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19).map(|f| f as u64))
}

/// The value at a dotted path: member names, or indexes into arrays.
fn at_path<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |v, name| match v {
        Value::Array(items) => name.parse::<usize>().ok().and_then(|i| items.get(i)),
        other => other.get(name),
    })
}

/// A member's whole number.
fn figure(object: &Value, name: &str) -> Option<u64> {
    object.get(name).and_then(whole)
}

fn openai(value: &Value) -> Tokens {
    let Some(usage) = value.get("usage").filter(|u| u.is_object()).or_else(|| value.get("response")?.get("usage").filter(|u| u.is_object())) else {
        return Tokens::default();
    };
    Tokens {
        input: figure(usage, "prompt_tokens").or_else(|| figure(usage, "input_tokens")),
        output: figure(usage, "completion_tokens").or_else(|| figure(usage, "output_tokens")),
        total: figure(usage, "total_tokens"),
    }
}

fn anthropic(value: &Value) -> Tokens {
    let Some(usage) = value.get("usage").filter(|u| u.is_object()).or_else(|| value.get("message")?.get("usage").filter(|u| u.is_object())) else {
        return Tokens::default();
    };
    let parts = ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"].map(|name| figure(usage, name));
    let input = parts.iter().flatten().copied().reduce(u64::saturating_add);
    Tokens { input, output: figure(usage, "output_tokens"), total: None }
}

fn gemini(value: &Value) -> Tokens {
    let Some(meta) = value.get("usageMetadata").filter(|u| u.is_object()) else { return Tokens::default() };
    let output = match (figure(meta, "candidatesTokenCount"), figure(meta, "thoughtsTokenCount")) {
        (None, None) => None,
        (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
    };
    Tokens { input: figure(meta, "promptTokenCount"), output, total: figure(meta, "totalTokenCount") }
}

#[cfg(test)]
mod tests;
