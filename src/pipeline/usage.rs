//! Usage read from the origin's answer as it passes,
//! sans-IO: the driver hands every chunk of the response body to
//! [`BodyUsage::feed`] and passes the chunk on unchanged (nothing is
//! buffered on the client's way: the chunk timing is the origin's), then
//! says how the body ended ([`End`]) and asks [`BodyUsage::tokens`] what
//! each rule commits.
//!
//! # Framing
//! - `text/event-stream` (any case, any parameters): SSE events as the
//!   WHATWG HTML standard frames them (§9.2.6): lines end at CRLF, LF or CR
//!   (a CR at a chunk's end and an LF at the next one's start are one
//!   ending), `data:` lines joined with LF, one space after the colon
//!   dropped, `:` comments and other fields ignored, an event dispatched at
//!   a blank line; `[DONE]` and events that are not JSON carry nothing. The
//!   last event, if the stream ends cleanly without its blank line, is read
//!   too.
//! - anything else: one JSON body; a root array (Gemini's
//!   `streamGenerateContent` without `alt=sse`) is read element by
//!   element, each element a document as an SSE event is.
//!
//! Each event's data (each element) goes through a streaming scanner
//! ([`scan`]) that keeps no copy of it: an event of any size is read (a
//! Gemini chunk carrying an image, a Responses `response.completed`
//! repeating a long answer), in memory that does not grow with it.
//! Before, an event over 64 KiB was skipped and an earlier, smaller report
//! committed.
//!
//! # What is read ([`Reading`])
//! - `openai`: `usage` (Chat Completions: the final chunk with
//!   `stream_options.include_usage`, or the JSON body) or `response.usage`
//!   (the Responses API's `response.completed`, `incomplete`, `failed`):
//!   `prompt_tokens` / `input_tokens` (input), `completion_tokens` /
//!   `output_tokens` (output), `total_tokens`. Final when read.
//! - `anthropic`: `message.usage` (`message_start`: revised later, never
//!   final) and `usage` (`message_delta`, a JSON body: final): input =
//!   `input_tokens` + `cache_creation_input_tokens` +
//!   `cache_read_input_tokens`, output = `output_tokens`, cumulative (never
//!   summed across events).
//! - `gemini`: `usageMetadata`: `promptTokenCount` (input),
//!   `candidatesTokenCount` + `thoughtsTokenCount` (output, as billed),
//!   `totalTokenCount`; final in the chunk that carries a candidate's
//!   `finishReason` (or `promptFeedback.blockReason`) and in any after it,
//!   revised in the chunks before it.
//! - `{ json = "a.b" }`: the whole number at that path, as a total, final
//!   when read.
//!
//! Each figure is the largest reported so far (in a well-formed stream,
//! the last: every provider's counts only grow), so a stream never commits
//! less than any report it made. `count` picks the units ([`Count`]); the
//! total is the provider's, else input + output. An error event (an
//! `error` member, or a `type` of `error`) makes the figures before it
//! not final: the provider may have spent past them.
//!
//! Only the response is read: usage the client writes into its request
//! (a forged `data: {"usage": …}` in a prompt) is never seen here, and a
//! usage object inside a string (a prompt echoed in the answer) is text.
//!
//! # How each end is charged, and its bound
//! The reservation (`reserve`) was made before forwarding. What is
//! committed is what was reported, never clamped to `max` (a report is what was spent, and what is recorded past the budget
//! blocks what comes after until the window has paid it back):
//! - **clean end with a final report** ([`End::Ended`]): the usage read.
//! - **clean end without one** (no usage, only figures the provider still
//!   revises, as an Anthropic stream without its `message_delta` or a
//!   Gemini stream without its last chunk; an error event after the last
//!   report): `max`, or the largest figures read when they pass it.
//!   `usage_missing` is logged.
//! - **the client went away** ([`End::Cancelled`]; the origin's body is
//!   cancelled with it), **the origin failed mid-stream**
//!   ([`End::Failed`]), **past `reservation_ttl`** ([`End::Lapsed`]: cut
//!   one second before its reservation lapses, while it still holds the
//!   room): `max`, or the largest figures read when they pass it.
//! - **cut** ([`End::Cut`], `cut = true`): the stream is cut only while it
//!   still runs: once figures the provider still revises pass `reserve`
//!   (at the end of that event), or once content follows a report that
//!   passed it (at the end of that content's event). A report that ends
//!   the answer (OpenAI's usage, Anthropic's last `message_delta`,
//!   Gemini's chunk with its `finishReason`, followed by `[DONE]`,
//!   `message_stop` or the end) is never cut: the answer is whole and
//!   nothing more is spent. A provider-shaped error follows the kept bytes
//!   (an SSE event, its lines ended as the stream's; for a root array its
//!   last element and `]`), the origin's body is cancelled, and `max` (or
//!   the figures read, when above) is committed.
//!
//! The overspend, over the budget *as the origin counts it*: each stream in
//! flight when the budget runs out may pass it by what it reports beyond
//! its `reserve` (`Σ (reported − reserve)`, over the streams admitted on
//! the last room); none when every answer reports at most `reserve` (so
//! `reserve = max`, with the origin capping answers at `max` in the units
//! counted: under `count = "total"` that cap includes the input). It is
//! recorded, so it is paid back before anything more is admitted. A cut
//! stream spends at most what the report that passed `reserve` said, plus
//! one event, plus what the origin made before the cancel reached it.

use crate::config::cost::{Count, Provider, Reading, UsageSource, Usage};
use crate::config::cost::Priced;
use crate::config::price::{Billed, Price, PriceTable, Unpriced};
use crate::config::rules::Rule;
use crate::pipeline::applied::Applied;
use scan::{Doc, Found, Probe, Scan, Seg, Target};
use serde_json::Value;

mod scan;

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
    /// Of the input, read from a cache (read only for a priced rule).
    pub(crate) cached: Option<u64>,
    /// Of the input, written to a cache (Anthropic's cache creation).
    pub(crate) cache_write: Option<u64>,
}

impl Tokens {
    fn merge(&mut self, seen: Tokens) {
        let most = |a: Option<u64>, b: Option<u64>| a.max(b);
        self.input = most(self.input, seen.input);
        self.output = most(self.output, seen.output);
        self.total = most(self.total, seen.total);
        self.cached = most(self.cached, seen.cached);
        self.cache_write = most(self.cache_write, seen.cache_write);
    }

    /// What these tokens cost at `price`, in micro-units; a total reported
    /// alone is priced at the table's ceiling (its kinds are unknown).
    /// `None` when nothing was reported.
    fn charge(&self, table: &PriceTable, price: Price) -> Option<u64> {
        if self.input.is_none() && self.output.is_none() {
            return self.total.map(|t| PriceTable::charge(Price { output: table.ceiling(), ..Price::default() }, Billed { output: t, ..Billed::default() }));
        }
        let billed = Billed { input: self.input.unwrap_or(0), cached: self.cached.unwrap_or(0), cache_write: self.cache_write.unwrap_or(0), output: self.output.unwrap_or(0) };
        Some(PriceTable::charge(price, billed))
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
    /// Where `type` sits in the reading's targets (`error` is next).
    type_at: usize,
    /// Where a priced rule's targets (cached input, the model) begin.
    extra_at: usize,
    /// A priced rule's table and unit, and what it read of the model.
    price: Option<Priced>,
    model: Model,
    count: Count,
    /// The rule's `max`: what a body without a final report commits, at
    /// least.
    max: u64,
    /// `Some(reserve)` with `cut = true`: cut once the units pass it.
    cut_above: Option<u64>,
    framing: Framing,
    tokens: Tokens,
    /// A final report was read, and no error came after it.
    settled: bool,
    /// The provider said the answer is finished ([`Seen::finished`]).
    finished: bool,
    /// A report that may be the last passed the reserve: the stream is cut
    /// if content follows it ([`Seen::terminal`] says what does not).
    pending: bool,
    /// The stream is OpenAI's Responses API (an event's `type` begins
    /// `response.`): its cut event is in that API's shape.
    responses: bool,
    cut: bool,
    /// Cut because the answer named a model the table cannot price
    /// (`unpriced = "refuse"`).
    refused: bool,
    /// The events (or array elements) read so far.
    events: u64,
}

#[derive(Debug)]
enum Framing {
    Sse(Sse),
    /// One JSON body, or a root array of documents.
    Json(Scan),
}

/// The SSE framer's state between chunks. Nothing of an event is kept but
/// its first bytes ([`DONE`]) and its scan.
#[derive(Debug)]
struct Sse {
    /// The current line's field name so far (a `data` line's is 4 bytes).
    field: Vec<u8>,
    line: Line,
    /// The last byte was a CR: an LF next is part of its line ending.
    after_cr: bool,
    /// The last line ending was CRLF: the cut event is written so too.
    crlf: bool,
    has_data: bool,
    /// The first bytes of the event's data (to tell `[DONE]`).
    head: Vec<u8>,
    scan: Scan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Reading the field name.
    Field,
    /// Right after `data:`: one space is dropped.
    Space,
    /// A `data` line's value: to the scan.
    Data,
    /// A comment, another field, or a field name too long to be `data`.
    Ignore,
}

/// OpenAI's end of a stream's data.
const DONE: &[u8] = b"[DONE]";

/// One event (or element of a root array) as read.
#[derive(Debug, Default)]
struct Seen {
    tokens: Tokens,
    /// It reported figures: `Some(true)` when the provider will not revise
    /// them (a `message_delta`, OpenAI's usage, a Gemini chunk with its
    /// `finishReason`), `Some(false)` when it will (`message_start`, a
    /// Gemini chunk before its last).
    report: Option<bool>,
    /// The stream ends here: `[DONE]`, `message_stop`, Responses'
    /// `response.completed` / `incomplete` / `failed`, an error.
    terminal: bool,
    /// An error event: the figures before it are not final.
    error: bool,
    /// The answer is finished (Gemini's `finishReason`, `blockReason`):
    /// figures reported with it or after it are final.
    finished: bool,
    /// The event's `type` begins `response.`.
    responses: bool,
    /// A model it named, priced (`None` in it: the table cannot price it).
    model: Option<Option<Price>>,
    /// The table's pattern(s) that priced the models it named.
    pattern: Option<Which>,
}

/// Which of a price table's patterns priced an answer (the label of its
/// spend by model: bounded by the config, never the answer's own text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    /// `models[i]` priced every model named.
    One(usize),
    /// Models priced by two patterns or more (each kind at the dearest).
    Several,
}

impl Which {
    fn and(self, other: Which) -> Which {
        if self == other { self } else { Which::Several }
    }
}

/// The model(s) an answer named, as a price table prices them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Model {
    /// The dearest price, kind by kind, of the models named and priced.
    priced: Option<Price>,
    /// A model the table cannot price was named.
    unpriced: bool,
    /// The pattern(s) that priced the models named.
    which: Option<Which>,
}

/// The `type`s that end a stream, by provider.
const TERMINAL_TYPES: [&[u8]; 5] = [b"message_stop", b"response.completed", b"response.incomplete", b"response.failed", b"error"];

/// A usage object's members each provider reports.
const OPENAI_FIGURES: &[&str] = &["prompt_tokens", "input_tokens", "completion_tokens", "output_tokens", "total_tokens"];
const ANTHROPIC_FIGURES: &[&str] = &["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"];
const GEMINI_FIGURES: &[&str] = &["promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount", "cachedContentTokenCount"];

/// What a priced reading also looks for, after its usage
/// targets: the input read from a cache (OpenAI's; Anthropic's and
/// Gemini's are usage members), and the model the answer names.
fn priced_targets(reading: &Reading) -> Vec<Target> {
    let paths: &[&[&str]] = match reading {
        Reading::Provider(Provider::OpenAi) => {
            &[&["usage", "prompt_tokens_details"], &["usage", "input_tokens_details"], &["response", "usage", "input_tokens_details"], &["model"], &["response", "model"]]
        }
        Reading::Provider(Provider::Anthropic) => &[&["model"], &["message", "model"]],
        Reading::Provider(Provider::Gemini) => &[&["modelVersion"]],
        Reading::Json(_) => &[],
    };
    let probe = |path: &[&str]| if path.last().is_some_and(|name| name.starts_with("model")) { Probe::Text } else { Probe::Figures(&["cached_tokens"]) };
    paths.iter().map(|path| Target::new(path, probe(path))).collect()
}

/// What a reading looks for in every event: its usage targets first, then
/// a priced rule's ([`priced_targets`], from the returned index), then
/// `type` and `error` (the last two).
fn targets(reading: &Reading, priced: bool) -> (Vec<Target>, usize) {
    let mut targets = match reading {
        Reading::Provider(Provider::OpenAi) => {
            vec![Target::new(&["usage"], Probe::Figures(OPENAI_FIGURES)), Target::new(&["response", "usage"], Probe::Figures(OPENAI_FIGURES))]
        }
        Reading::Provider(Provider::Anthropic) => {
            vec![Target::new(&["usage"], Probe::Figures(ANTHROPIC_FIGURES)), Target::new(&["message", "usage"], Probe::Figures(ANTHROPIC_FIGURES))]
        }
        Reading::Provider(Provider::Gemini) => vec![
            Target::new(&["usageMetadata"], Probe::Figures(GEMINI_FIGURES)),
            Target::new(&["candidates", "*", "finishReason"], Probe::Text),
            Target::new(&["promptFeedback", "blockReason"], Probe::Present),
        ],
        Reading::Json(path) => vec![Target { path: path.split('.').map(Seg::name).collect(), probe: Probe::Number }],
    };
    let extra_at = targets.len();
    if priced {
        targets.extend(priced_targets(reading));
    }
    targets.push(Target::new(&["type"], Probe::Text));
    targets.push(Target::new(&["error"], Probe::Present));
    (targets, extra_at)
}

impl UsageReader {
    /// A reader for `usage` (a body source) of a body whose `content-type`
    /// is `content_type`.
    pub(crate) fn new(usage: &Usage, reading: &Reading, content_type: Option<&str>) -> UsageReader {
        let (targets, extra_at) = targets(reading, usage.price.is_some());
        let type_at = targets.len() - 2;
        let framing = if is_event_stream(content_type) {
            let scan = Scan::new(targets, false);
            Framing::Sse(Sse { field: Vec::new(), line: Line::Field, after_cr: false, crlf: false, has_data: false, head: Vec::new(), scan })
        } else {
            Framing::Json(Scan::new(targets, true))
        };
        let cut_above = usage.cut.then_some(u64::from(usage.reserve));
        UsageReader {
            reading: reading.clone(),
            type_at,
            extra_at,
            price: usage.price.clone(),
            model: Model::default(),
            count: usage.count,
            max: u64::from(usage.max),
            cut_above,
            framing,
            tokens: Tokens::default(),
            settled: false,
            finished: false,
            pending: false,
            responses: false,
            cut: false,
            refused: false,
            events: 0,
        }
    }

    /// Reads one chunk; `Some((keep, lf))` once a `cut` rule's usage passed
    /// its reserve while the stream still runs: the chunk's bytes up to the
    /// end of the event (or array element) after which it is cut, and
    /// whether the event must begin with an LF (the blank line's CR ended
    /// the chunk, its LF is in the next one). Nothing is read after a cut.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Option<(usize, bool)> {
        if self.cut {
            return None;
        }
        let mut from = 0;
        while from < chunk.len() {
            let rest = &chunk[from..];
            let (read, seen) = match &mut self.framing {
                Framing::Sse(sse) => {
                    let (read, event) = sse.bytes(rest);
                    (read, event.map(|(doc, done)| (doc, done, true)))
                }
                Framing::Json(scan) => {
                    let (read, doc) = scan.bytes(rest);
                    (read, doc.map(|doc| (Some(doc), false, false)))
                }
            };
            from += read;
            let Some((doc, done, sse)) = seen else { continue };
            self.events += 1;
            if self.read(doc.as_ref(), done) {
                self.cut = true;
                // The byte that dispatched it, and whether it is a CR: a
                // CRLF stream's blank line dispatches at its CR, and its LF
                // goes with the kept bytes, or first in the cut event.
                let at = from - 1;
                let lf_next = chunk.get(at + 1) == Some(&b'\n');
                let cr = sse && chunk.get(at) == Some(&b'\r');
                return Some((if cr && lf_next { at + 2 } else { at + 1 }, cr && !lf_next));
            }
        }
        None
    }

    /// The events (SSE events, or a JSON array's elements) read so far.
    pub(crate) fn events(&self) -> u64 {
        self.events
    }

    /// The body ended cleanly: the last event without its blank line, or
    /// the JSON body, read.
    pub(crate) fn finish(&mut self) {
        let last = match &mut self.framing {
            Framing::Sse(sse) => {
                let _ = sse.end_line();
                sse.dispatch()
            }
            Framing::Json(scan) => scan.finish().map(|doc| (Some(doc), false)),
        };
        if let Some((doc, done)) = last {
            let _ = self.read(doc.as_ref(), done);
        }
    }

    /// The units seen so far (`count` applied), if a final report was read.
    pub(crate) fn units(&self) -> Option<u64> {
        self.settled.then(|| self.amount()).flatten()
    }

    /// The units of the figures seen so far: `count` applied, or for a
    /// priced rule their cost in its unit (micro- or milli-, rounded up) at the price of the model the
    /// answer named ([`Model`]; the table's highest when it named none, or
    /// one the table cannot price).
    fn amount(&self) -> Option<u64> {
        let Some(priced) = &self.price else { return self.tokens.units(self.count) };
        let price = match self.model {
            Model { priced: Some(price), unpriced: false, .. } => price,
            _ => priced.table.highest(),
        };
        self.tokens.charge(&priced.table, price).map(|micro| priced.counted(micro))
    }

    /// A priced rule's answer by model, for its spend by model: the
    /// table's pattern that priced the model it named (`gpt-4o*`), or
    /// `(several)`, `(unpriced)` (a model the table cannot price was
    /// named: charged at its highest), `(none named)`; `None` for a rule
    /// with no price. A label is the config's, never the answer's text, so
    /// an origin (or a client it echoes) cannot make labels without end.
    fn model_label(&self) -> Option<String> {
        let priced = self.price.as_ref()?;
        Some(match (self.model.unpriced, self.model.which) {
            (true, _) => "(unpriced)".to_string(),
            (false, None) => "(none named)".to_string(),
            (false, Some(Which::Several)) => "(several)".to_string(),
            (false, Some(Which::One(i))) => priced.table.models.get(i).map_or_else(String::new, |(pattern, _)| pattern.clone()),
        })
    }

    /// What the rule commits for a body that ended so (`None`: none was
    /// read, `max` is committed): after a clean end with a final report,
    /// the units read, above `max` too (a report is
    /// what was spent, and what is recorded past the budget blocks what
    /// comes after); after any other end, or without a final report, the
    /// largest figures read when they pass `max` (the provider had spent
    /// at least that), else `None`.
    fn commits(&self, end: End) -> Option<u64> {
        if end == End::Ended && self.settled {
            return self.units();
        }
        self.amount().filter(|&units| units > self.max)
    }

    /// One event (or element): `true` when the stream must be cut after it.
    fn read(&mut self, doc: Option<&Doc>, done: bool) -> bool {
        let seen = doc.map_or_else(Seen::default, |doc| self.seen(doc));
        self.responses |= seen.responses;
        let settled_before = self.settled;
        if seen.error {
            self.settled = false;
        }
        self.tokens.merge(seen.tokens);
        self.finished |= seen.finished;
        if let Some(named) = seen.model {
            self.model.unpriced |= named.is_none();
            self.model.priced = named.map(|p| self.model.priced.map_or(p, |q| q.dearest(p)));
        }
        if let Some(w) = seen.pattern {
            self.model.which = Some(self.model.which.map_or(w, |v| v.and(w)));
        }
        let report = seen.report.map(|last| last || self.finished);
        if report == Some(true) {
            self.settled = true;
        }
        let refused = seen.model == Some(None) && self.price.as_ref().is_some_and(|p| p.table.unpriced == Unpriced::Refuse);
        if refused && !seen.terminal && !done {
            self.refused = true;
            return true;
        }
        let passed = self.cut_above.is_some_and(|reserve| self.amount().is_some_and(|units| units > reserve));
        if seen.terminal || done || !passed {
            self.pending = false;
            return false;
        }
        match report {
            // Figures the provider still revises, before any final one: the
            // stream runs on.
            Some(false) => !settled_before,
            // Maybe the last report: cut only if content follows.
            Some(true) => {
                self.pending = true;
                false
            }
            None => std::mem::take(&mut self.pending),
        }
    }

    /// What one document says, as this reading reads it.
    fn seen(&self, doc: &Doc) -> Seen {
        let mut seen = Seen::default();
        for (target, found) in doc {
            match (*target, found) {
                (t, Found::Text(text)) if t == self.type_at => {
                    seen.terminal |= TERMINAL_TYPES.contains(&text.as_slice());
                    seen.error |= text == b"error";
                    seen.responses |= text.starts_with(b"response.");
                }
                (t, Found::Present) if t == self.type_at + 1 => {
                    seen.terminal = true;
                    seen.error = true;
                }
                (t, found) if t >= self.extra_at => self.priced(found, &mut seen),
                (t, found) => seen.finished |= self.figures(t, found, &mut seen),
            }
        }
        seen
    }

    /// A priced rule's find into `seen`: OpenAI's cached input, or the
    /// model named (priced by the table, `None` when it cannot be).
    fn priced(&self, found: &Found, seen: &mut Seen) {
        match found {
            Found::Figures(m) => seen.tokens.cached = seen.tokens.cached.max(m.iter().map(|(_, n)| *n).max()),
            Found::Text(model) => {
                let table = self.price.as_ref().map(|p| &p.table);
                let at = table.and_then(|t| t.pattern(model));
                let price = at.zip(table).map(|(i, t)| t.models[i].1);
                if let Some(i) = at {
                    seen.pattern = Some(seen.pattern.map_or(Which::One(i), |w| w.and(Which::One(i))));
                }
                seen.model = Some(match (seen.model, price) {
                    (Some(Some(a)), Some(b)) => Some(a.dearest(b)),
                    (None, price) => price,
                    _ => None,
                });
            }
            _ => {}
        }
    }

    /// A usage target's find into `seen`; `true` when it says the answer
    /// is finished (Gemini's `finishReason`, `blockReason`).
    fn figures(&self, target: usize, found: &Found, seen: &mut Seen) -> bool {
        let report = |seen: &mut Seen, tokens: Tokens, last: bool| {
            if tokens != Tokens::default() {
                seen.tokens.merge(tokens);
                seen.report = Some(seen.report.unwrap_or(false) || last);
            }
        };
        let figure = |members: &[(usize, u64)], i: usize| members.iter().filter(|(m, _)| *m == i).map(|(_, n)| *n).max();
        match (&self.reading, found) {
            (Reading::Provider(Provider::OpenAi), Found::Figures(m)) => {
                let tokens = Tokens { input: figure(m, 0).or(figure(m, 1)), output: figure(m, 2).or(figure(m, 3)), total: figure(m, 4), ..Tokens::default() };
                report(seen, tokens, true);
            }
            (Reading::Provider(Provider::Anthropic), Found::Figures(m)) => {
                let input = [0, 1, 2].iter().filter_map(|&i| figure(m, i)).reduce(u64::saturating_add);
                // `usage` at the top (`message_delta`, a JSON body) is
                // final; `message.usage` (`message_start`) is revised.
                let tokens = Tokens { input, output: figure(m, 3), total: None, cached: figure(m, 2), cache_write: figure(m, 1) };
                report(seen, tokens, target == 0);
            }
            (Reading::Provider(Provider::Gemini), Found::Figures(m)) => {
                let output = match (figure(m, 1), figure(m, 2)) {
                    (None, None) => None,
                    (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
                };
                report(seen, Tokens { input: figure(m, 0), output, total: figure(m, 3), cached: figure(m, 4), cache_write: None }, false);
            }
            (Reading::Provider(Provider::Gemini), Found::Text(reason)) => return !reason.is_empty(),
            (Reading::Provider(Provider::Gemini), Found::Present) => return true,
            (Reading::Json(_), Found::Number(n)) => report(seen, Tokens { total: Some(*n), ..Tokens::default() }, true),
            _ => {}
        }
        false
    }

    /// The provider-shaped error a cut ends the stream with: an SSE event
    /// (its lines ended as the stream's are, after an LF when `lf`), or for
    /// a root array of documents the last element and the array's end.
    pub(crate) fn cut_event(&self, lf: bool) -> Vec<u8> {
        let message = match (&self.price, self.refused) {
            (_, true) => "tollgate: this answer's model has no price in its rule's table; the stream was ended".to_string(),
            (Some(p), false) => format!("tollgate: this answer cost more than the {} {} its rule reserved; the stream was ended", self.cut_above.unwrap_or(0), p.unit),
            (None, false) => format!("tollgate: this answer used more than the {} tokens its rule reserved; the stream was ended", self.cut_above.unwrap_or(0)),
        };
        let text = Value::String(message).to_string();
        let gemini = format!("{{\"error\":{{\"code\":429,\"message\":{text},\"status\":\"RESOURCE_EXHAUSTED\"}}}}");
        let eol = match &self.framing {
            Framing::Json(_) => return format!(",\n{gemini}\n]").into_bytes(),
            Framing::Sse(sse) => if sse.crlf { "\r\n" } else { "\n" },
        };
        let (event, data) = match &self.reading {
            Reading::Provider(Provider::Anthropic) => (Some("error"), format!("{{\"type\":\"error\",\"error\":{{\"type\":\"rate_limit_error\",\"message\":{text}}}}}")),
            Reading::Provider(Provider::Gemini) => (None, gemini),
            Reading::Provider(Provider::OpenAi) | Reading::Json(_) if self.responses => {
                (Some("error"), format!("{{\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":{text},\"param\":null}}"))
            }
            Reading::Provider(Provider::OpenAi) | Reading::Json(_) => {
                (None, format!("{{\"error\":{{\"message\":{text},\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}}}"))
            }
        };
        let mut out = String::new();
        if lf {
            out.push('\n');
        }
        if let Some(name) = event {
            out.push_str(&format!("event: {name}{eol}"));
        }
        out.push_str(&format!("data: {data}{eol}{eol}"));
        out.into_bytes()
    }
}

impl Sse {
    /// Bytes, read as [`Sse::byte`] reads them one by one, a line's value
    /// taken at once: `(read, None)` once all are read, or `(read,
    /// Some(event))` right after the byte that dispatched an event (the
    /// rest not read yet).
    fn bytes(&mut self, bytes: &[u8]) -> (usize, Option<(Option<Doc>, bool)>) {
        let mut at = 0;
        while at < bytes.len() {
            // Inside a line (never right after a CR: a CR ends the line).
            if matches!(self.line, Line::Data | Line::Ignore) {
                let rest = &bytes[at..];
                let value = scan::find_either(rest, b'\n', b'\r').unwrap_or(rest.len());
                if self.line == Line::Data {
                    self.data_bytes(&rest[..value]);
                }
                at += value;
            }
            let Some(&b) = bytes.get(at) else { break };
            at += 1;
            if let Some(event) = self.byte(b) {
                return (at, Some(event));
            }
        }
        (bytes.len(), None)
    }

    /// One byte; the event (its document, if its data is one whole JSON
    /// document, and whether it is `[DONE]`) when the byte dispatches one.
    fn byte(&mut self, byte: u8) -> Option<(Option<Doc>, bool)> {
        let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
        if after_cr && byte != b'\n' {
            self.crlf = false;
        }
        match byte {
            b'\n' if after_cr => {
                self.crlf = true;
                None
            }
            b'\n' => {
                self.crlf = false;
                self.end_line()
            }
            b'\r' => self.end_line(),
            _ => {
                match self.line {
                    Line::Field if byte == b':' => {
                        if self.field == b"data" {
                            self.line = Line::Space;
                            self.data_line();
                        } else {
                            self.line = Line::Ignore;
                        }
                    }
                    Line::Field if self.field.len() < 4 => self.field.push(byte),
                    Line::Field => self.line = Line::Ignore,
                    Line::Space => {
                        self.line = Line::Data;
                        if byte != b' ' {
                            self.data_byte(byte);
                        }
                    }
                    Line::Data => self.data_byte(byte),
                    Line::Ignore => {}
                }
                None
            }
        }
    }

    /// A `data` line begins: lines after the first are joined with an LF.
    fn data_line(&mut self) {
        if self.has_data {
            self.data_byte(b'\n');
        }
        self.has_data = true;
    }

    fn data_byte(&mut self, byte: u8) {
        self.data_bytes(&[byte]);
    }

    /// Bytes of a `data` line's value (no line ending among them).
    fn data_bytes(&mut self, bytes: &[u8]) {
        let head = (DONE.len() + 1).saturating_sub(self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..head]);
        // An event's scan is never of documents' elements: it reads all.
        let _ = self.scan.bytes(bytes);
    }

    /// The line ended: a blank line dispatches the event.
    fn end_line(&mut self) -> Option<(Option<Doc>, bool)> {
        let line = std::mem::replace(&mut self.line, Line::Field);
        let field = (self.field.is_empty(), self.field == b"data");
        self.field.clear();
        match (line, field) {
            (Line::Field, (true, _)) => self.dispatch(),
            // A line that is only `data` is a data line with no value.
            (Line::Field, (_, true)) => {
                self.data_line();
                None
            }
            _ => None,
        }
    }

    fn dispatch(&mut self) -> Option<(Option<Doc>, bool)> {
        if !std::mem::replace(&mut self.has_data, false) {
            return None;
        }
        let done = self.head == DONE;
        let doc = self.scan.finish();
        self.scan.reset();
        self.head.clear();
        Some((doc, done))
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
        let mut cut: Option<(usize, usize, bool)> = None;
        for (i, (_, reader)) in self.readers.iter_mut().enumerate() {
            if let Some((keep, lf)) = reader.feed(chunk) {
                cut = Some(cut.map_or((i, keep, lf), |(j, k, l)| if keep < k { (i, keep, lf) } else { (j, k, l) }));
            }
        }
        let (i, keep, lf) = cut?;
        self.cut_by = Some(i);
        Some(Cut { keep, event: self.readers[i].1.cut_event(lf) })
    }

    /// The rules reading the body, by name.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &str> {
        self.readers.iter().map(|(name, _)| name.as_str())
    }

    /// The events its first reader has read so far (every reader reads
    /// the same bytes; 0 with none).
    pub(crate) fn events(&self) -> u64 {
        self.readers.first().map_or(0, |(_, r)| r.events())
    }

    /// How the body ended; readers finish on a clean end.
    pub(crate) fn end(&mut self, end: End) {
        let end = if self.cut_by.is_some() { End::Cut } else { end };
        if end == End::Ended {
            self.readers.iter_mut().for_each(|(_, r)| r.finish());
        }
        self.end = Some(end);
    }

    /// The tokens `rule` commits ([`UsageReader::commits`]); `None` (the
    /// rule's `max`) when it has no final report, or the body was not
    /// read.
    pub(crate) fn tokens(&self, rule: &str) -> Option<u64> {
        let end = self.end?;
        self.readers.iter().find(|(name, _)| name == rule).and_then(|(_, r)| r.commits(end))
    }

    /// The model label of `rule`'s answer ([`UsageReader::model_label`]:
    /// the price pattern that priced it), once the body ended; `None` for
    /// a rule with no price.
    pub(crate) fn model(&self, rule: &str) -> Option<String> {
        self.end?;
        self.readers.iter().find(|(name, _)| name == rule).and_then(|(_, r)| r.model_label())
    }
}

/// Whether `rule`'s usage is read from the answer's body.
pub(crate) fn reads_body(rule: &Rule) -> bool {
    rule.usage.as_ref().is_some_and(|u| matches!(u.source, UsageSource::Body(_)))
}

/// The readers of an answer of `status` and `content_type` for the
/// `applied` rules that read usage from the body and count the status;
/// `None` when none does (the body is then not read).
pub(crate) fn body_usage(applied: &[Applied<'_>], status: u16, content_type: Option<&str>) -> Option<BodyUsage> {
    let rules: Vec<(&str, &Usage, &Reading)> = applied
        .iter()
        .filter(|a| a.rule.counting.counts(status))
        .filter_map(|a| match a.rule.usage.as_ref() {
            Some(u @ Usage { source: UsageSource::Body(reading), .. }) => Some((a.rule.name.as_str(), u, reading)),
            _ => None,
        })
        .collect();
    (!rules.is_empty()).then(|| BodyUsage::new(rules, content_type))
}

fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("text/event-stream"))
}

#[cfg(test)]
mod tests;

impl UsageReader {
    /// Whether this reader may end the stream: past its reserve (`cut`),
    /// or at an event naming a model its table refuses.
    fn may_cut(&self) -> bool {
        self.cut_above.is_some() || self.price.as_ref().is_some_and(|p| p.table.unpriced == Unpriced::Refuse)
    }
}

impl BodyUsage {
    /// Whether a reader may cut the stream (`cut = true`, or a price
    /// table that refuses an unpriced model): then no byte may reach the
    /// client before it was read (the driver may otherwise read a copy of
    /// the answer behind the client).
    pub(crate) fn cuts(&self) -> bool {
        self.readers.iter().any(|(_, r)| r.may_cut())
    }
}
