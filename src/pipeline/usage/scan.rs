//! A streaming JSON scanner, sans-IO: fed bytes as they come
//! ([`Scan::bytes`]), it keeps no copy of the document, only the path from
//! the root to where it is and what the reader asked for ([`Target`]): the
//! whole numbers of an object's members (`usage`'s `total_tokens`), a
//! number at a path, a short string (`type`), or that a value is there
//! (`error`). So a usage object is read wherever it sits in an event of
//! any size (a Gemini chunk carrying an image, a Responses
//! `response.completed` repeating the whole answer), in constant memory.
//!
//! It costs about a microsecond for a 300-byte OpenAI chunk (native,
//! `opt-level = "z"`; 3.4 µs byte by byte before): a string's plain bytes
//! are passed over eight at a time ([`find_either`]); a key is kept and
//! compared only inside a container some target's path leads through (each
//! container knows which targets still can be below it, a bit each), and
//! then as the index of a name the targets use, never a copy; below a
//! container no target can be in, only the grammar is checked. Fed one
//! byte at a time (`Scan::byte`, the tests' reference) it reads the same.
//!
//! What it accepts is JSON (RFC 8259) with two leniencies that never hide
//! a report: a number is any run of `0-9 + - . e E` after a digit or `-`
//! (read as [`whole`] reads it), and a raw control character inside a
//! string is taken as it is. A document whose brackets do not balance, or with
//! anything but whitespace after its root, reports nothing
//! ([`Scan::finish`]), as a JSON parser would refuse it.
//!
//! Keys are compared after their escapes are decoded (`"us\u0061ge"` is
//! `usage`); a key longer than [`KEY_LIMIT`] bytes matches no target, and a
//! number or string longer than [`SCALAR_LIMIT`] bytes is not read.

/// The longest key compared with a target's names, in bytes.
pub(crate) const KEY_LIMIT: usize = 64;

/// The longest number or string kept, in bytes.
pub(crate) const SCALAR_LIMIT: usize = 64;

/// One name in a target's path: a member name, or (in an array) an index;
/// `Any` is every index of an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Name { text: String, index: Option<usize> },
    Any,
}

impl Seg {
    pub(crate) fn name(text: &str) -> Seg {
        Seg::Name { text: text.to_string(), index: text.parse().ok() }
    }
}

/// A [`Seg`] as the scanner compares it: its name as an index in the
/// scanner's names ([`Name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    Name { name: u16, index: Option<usize> },
    Any,
}

impl Hop {
    fn matches(self, at: &Step) -> bool {
        match (self, at) {
            (Hop::Name { name, .. }, Step::Key(Some(key))) => name == *key,
            (Hop::Name { index: Some(i), .. }, Step::Index(j)) => i == *j,
            (Hop::Any, Step::Index(_)) => true,
            _ => false,
        }
    }
}

/// A key as the scanner keeps it: the index of the name it spells among
/// the names the targets use (paths and `Figures` members), or `None`
/// (another key, one past [`KEY_LIMIT`], or one no target could be
/// looking at).
type Name = Option<u16>;

/// What a reader wants at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    /// An object: the whole numbers of these direct members.
    Figures(&'static [&'static str]),
    /// A whole number.
    Number,
    /// A string (at most [`SCALAR_LIMIT`] bytes, escapes decoded; a
    /// character outside ASCII reads as `0xFF`).
    Text,
    /// Any value but `null`.
    Present,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) path: Vec<Seg>,
    pub(crate) probe: Probe,
}

impl Target {
    pub(crate) fn new(path: &[&str], probe: Probe) -> Target {
        Target { path: path.iter().map(|name| if *name == "*" { Seg::Any } else { Seg::name(name) }).collect(), probe }
    }
}

/// What a document held at one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// (member's index in the probe's list, its whole number).
    Figures(Vec<(usize, u64)>),
    Number(u64),
    Text(Vec<u8>),
    Present,
}

/// What one document held: (target index, what was found), in order.
pub(crate) type Doc = Vec<(usize, Found)>;

/// Where a value sits in its container.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A member, by its key's [`Name`].
    Key(Name),
    Index(usize),
}

#[derive(Debug)]
struct Frame {
    array: bool,
    /// The current member's key, or the current element's index.
    at: Step,
    /// The targets whose path leads through this container (bit `t` for
    /// target `t`): their segments before `hop` matched the containers
    /// above. Empty: nothing below is read, only its grammar checked.
    live: u64,
    /// The segment of a live target's path that `at` is compared with.
    hop: usize,
    /// The root array of a body whose elements are documents: its
    /// elements are roots.
    elements: bool,
    /// This object is a `Figures` target's: (target, members read).
    figures: Option<(usize, Vec<(usize, u64)>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is expected (`first`: right after `[`, where `]` may come).
    Value { first: bool },
    /// A key is expected (`first`: right after `{`, where `}` may come).
    Key { first: bool },
    Colon,
    /// After a value: `,`, a closing bracket, or (at the root) the end.
    After,
    Str { key: bool, escape: Escape },
    Scalar,
    Invalid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    Backslash,
    /// `\u` and the hex digits read so far: (count, value).
    Unicode(u8, u32),
}

/// What the scalar or string being read is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Nothing,
    /// A key (compared with the targets' names).
    Key,
    /// A target's value.
    Target(usize),
    /// A member of the enclosing `Figures` object: the member's index.
    Member(usize),
}

/// The scanner of one document (an SSE event's data) or of a sequence of
/// documents (a body whose root is an array: each element is one, as
/// Gemini streams without `alt=sse`).
#[derive(Debug)]
pub(crate) struct Scan {
    /// What each target wants at its path.
    probes: Vec<Probe>,
    /// Each target's path as [`Hop`]s.
    paths: Vec<Vec<Hop>>,
    /// Each `Figures` target's member names (empty for the others).
    members: Vec<Vec<u16>>,
    /// The names of the targets' paths and members, each once.
    names: Vec<Vec<u8>>,
    /// The targets a root's container starts with: every target with a
    /// path (a bit each).
    roots: u64,
    /// The elements of a root array are documents.
    elements: bool,
    stack: Vec<Frame>,
    state: State,
    want: Want,
    /// The key, number or string being read (bounded).
    token: Vec<u8>,
    token_over: bool,
    /// What the current document held so far.
    doc: Doc,
    /// The root value is complete.
    done: bool,
    /// The root is an array.
    root_array: bool,
    /// An element of a root array of documents just completed.
    element: Option<Doc>,
    /// The scalar being read: `Some((literal, bytes read))` for `true`,
    /// `false` or `null`; `None` for a number.
    literal: Option<(&'static [u8], usize)>,
}

impl Scan {
    /// A scanner for `targets` (at most 64); `elements`: a root array's
    /// elements are documents.
    pub(crate) fn new(targets: Vec<Target>, elements: bool) -> Scan {
        let mut names: Vec<Vec<u8>> = Vec::new();
        let mut name = |text: &str| {
            let at = names.iter().position(|n| n == text.as_bytes()).unwrap_or_else(|| {
                names.push(text.as_bytes().to_vec());
                names.len() - 1
            });
            u16::try_from(at).unwrap_or(u16::MAX)
        };
        let paths: Vec<Vec<Hop>> = targets
            .iter()
            .map(|t| t.path.iter().map(|seg| match seg { Seg::Name { text, index } => Hop::Name { name: name(text), index: *index }, Seg::Any => Hop::Any }).collect())
            .collect();
        let members = targets.iter().map(|t| if let Probe::Figures(list) = t.probe { list.iter().map(|m| name(m)).collect() } else { Vec::new() }).collect();
        debug_assert!(targets.len() <= 64, "a scan reads at most 64 targets");
        let roots = (0..targets.len().min(64)).filter(|&t| !paths[t].is_empty()).fold(0, |bits, t| bits | 1 << t);
        let probes = targets.into_iter().map(|t| t.probe).collect();
        let state = State::Value { first: false };
        Scan { probes, paths, members, names, roots, elements, stack: Vec::new(), state, want: Want::Nothing, token: Vec::new(), token_over: false, doc: Vec::new(), done: false, root_array: false, element: None, literal: None }
    }

    /// Ready for the next document.
    pub(crate) fn reset(&mut self) {
        self.stack.clear();
        self.state = State::Value { first: false };
        self.want = Want::Nothing;
        self.token.clear();
        self.token_over = false;
        self.doc.clear();
        self.done = false;
        self.root_array = false;
        self.element = None;
        self.literal = None;
    }

    /// Whether the root is an array whose elements are documents.
    fn in_elements(&self) -> bool {
        self.stack.first().is_some_and(|f| f.elements)
    }

    /// The document, if the bytes so far are one whole document (and the
    /// root was not an array of documents, whose elements
    /// [`Scan::bytes`] already gave).
    pub(crate) fn finish(&mut self) -> Option<Doc> {
        if self.state == State::Scalar && self.stack.is_empty() {
            if self.literal.is_some_and(|(word, read)| read != word.len()) {
                self.state = State::Invalid;
            } else {
                self.end_scalar();
            }
        }
        let whole = self.done && self.state == State::After && self.stack.is_empty();
        let doc = std::mem::take(&mut self.doc);
        (whole && !self.was_elements()).then_some(doc)
    }

    fn was_elements(&self) -> bool {
        // A root array of documents left nothing in `doc` at its end: its
        // elements were given one by one.
        self.elements && self.root_array
    }

    /// One byte; a document when it completes an element of a root array
    /// of documents (the reference [`Scan::bytes`] is tested against).
    #[cfg(test)]
    pub(crate) fn byte(&mut self, b: u8) -> Option<Doc> {
        self.step(b);
        self.element.take()
    }

    /// One byte, an element it completes left in `element`.
    #[inline(always)]
    fn step(&mut self, b: u8) {
        match self.state {
            State::Invalid => {}
            State::Str { key, escape } => self.string_byte(key, escape, b),
            State::Scalar => {
                if let Some((word, read)) = &mut self.literal {
                    if word.get(*read) == Some(&b) {
                        *read += 1;
                        return;
                    }
                    if *read != word.len() {
                        self.state = State::Invalid;
                        return;
                    }
                } else if matches!(b, b'0'..=b'9' | b'+' | b'-' | b'.' | b'e' | b'E') {
                    self.push_token(b);
                    return;
                }
                self.end_scalar();
                self.structural(b);
            }
            _ => self.structural(b),
        }
    }

    /// Bytes, read as `Scan::byte` reads them one by one, a string's
    /// run of plain bytes taken at once: `(read, None)` once all are read,
    /// or `(read, Some(doc))` right after the byte that completed an
    /// element of a root array of documents (the rest not read yet).
    ///
    /// The steps it takes per byte and per run are `#[inline(always)]`:
    /// the release profile's `opt-level = "z"` would otherwise call each
    /// (a 298-byte OpenAI event natively: 1.8 µs called, 1.2 inlined,
    /// 0.4 KiB more of gzipped Wasm).
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> (usize, Option<Doc>) {
        let mut at = 0;
        while at < bytes.len() {
            if let State::Str { escape: Escape::None, .. } = self.state {
                let rest = &bytes[at..];
                let plain = find_either(rest, b'"', b'\\').unwrap_or(rest.len());
                self.push_run(&rest[..plain]);
                at += plain;
            }
            let Some(&b) = bytes.get(at) else { break };
            at += 1;
            self.step(b);
            if self.element.is_some() {
                return (at, self.element.take());
            }
        }
        (bytes.len(), None)
    }

    #[inline(always)]
    fn structural(&mut self, b: u8) {
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return;
        }
        match self.state {
            State::Value { first: true } if b == b']' => self.close(true),
            State::Value { .. } => self.value(b),
            State::Key { first: true } if b == b'}' => self.close(false),
            State::Key { .. } if b == b'"' => {
                // A key is kept only where a target could be looking (a
                // live path, a `Figures` object).
                let wanted = self.stack.last().is_some_and(|f| f.live != 0 || f.figures.is_some());
                self.begin_string(true, if wanted { Want::Key } else { Want::Nothing });
            }
            State::Colon if b == b':' => self.state = State::Value { first: false },
            State::After => match (b, self.stack.last_mut()) {
                (b',', Some(Frame { array: true, at, .. })) => {
                    if let Step::Index(i) = at {
                        *i += 1;
                    }
                    self.state = State::Value { first: false };
                }
                (b',', Some(Frame { array: false, .. })) => self.state = State::Key { first: false },
                (b']', Some(Frame { array: true, .. })) => self.close(true),
                (b'}', Some(Frame { array: false, .. })) => self.close(false),
                _ => self.state = State::Invalid,
            },
            State::Key { .. } | State::Colon => self.state = State::Invalid,
            State::Str { .. } | State::Scalar | State::Invalid => {}
        }
    }

    /// A value begins with `b`.
    fn value(&mut self, b: u8) {
        if self.done && self.stack.is_empty() {
            self.state = State::Invalid;
            return;
        }
        let (target, below) = self.matching();
        let probe = target.map(|t| &self.probes[t]);
        if let Some(Probe::Present) = probe {
            if b != b'n' {
                self.doc.push((target.unwrap_or(0), Found::Present));
            }
        }
        let member = self.member();
        match b {
            b'{' | b'[' => {
                let array = b == b'[';
                let figures = match (probe, array) {
                    (Some(Probe::Figures(_)), false) => target.map(|t| (t, Vec::new())),
                    _ => None,
                };
                if self.stack.is_empty() {
                    self.root_array = array;
                }
                let elements = self.elements && array && self.stack.is_empty();
                let hop = self.stack.last().map_or(0, |f| if f.elements { 0 } else { f.hop + 1 });
                let at = if array { Step::Index(0) } else { Step::Key(None) };
                self.stack.push(Frame { array, at, live: if elements { 0 } else { below }, hop, elements, figures });
                self.state = if array { State::Value { first: true } } else { State::Key { first: true } };
            }
            b'"' => {
                let want = match (probe, target) {
                    (Some(Probe::Text), Some(t)) => Want::Target(t),
                    _ => Want::Nothing,
                };
                self.begin_string(false, want);
            }
            b't' | b'f' | b'n' | b'0'..=b'9' | b'-' => {
                self.literal = match b {
                    b't' => Some((b"true", 1)),
                    b'f' => Some((b"false", 1)),
                    b'n' => Some((b"null", 1)),
                    _ => None,
                };
                self.want = match (probe, target, member) {
                    (Some(Probe::Number), Some(t), _) => Want::Target(t),
                    (_, _, Some(m)) => Want::Member(m),
                    _ => Want::Nothing,
                };
                self.token.clear();
                self.token_over = false;
                self.push_token(b);
                self.state = State::Scalar;
            }
            _ => self.state = State::Invalid,
        }
    }

    /// For the value about to begin: the first target it is at, if any,
    /// and the targets whose paths go on below it (for a container).
    fn matching(&self) -> (Option<usize>, u64) {
        let Some(frame) = self.stack.last().filter(|f| !f.elements) else { return (None, self.roots) };
        let (mut at, mut below, mut bits) = (None, 0, frame.live);
        while bits != 0 {
            let t = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let path = &self.paths[t];
            if path.get(frame.hop).is_some_and(|hop| hop.matches(&frame.at)) {
                if path.len() == frame.hop + 1 {
                    at = at.or(Some(t));
                } else {
                    below |= 1 << t;
                }
            }
        }
        (at, below)
    }

    /// The index of the member about to be read in its `Figures` object.
    fn member(&self) -> Option<usize> {
        let frame = self.stack.last()?;
        let (target, _) = frame.figures.as_ref()?;
        let Step::Key(Some(key)) = frame.at else { return None };
        self.members[*target].iter().position(|&name| name == key)
    }

    fn begin_string(&mut self, key: bool, want: Want) {
        self.want = want;
        self.token.clear();
        self.token_over = false;
        self.state = State::Str { key, escape: Escape::None };
    }

    #[inline(always)]
    fn push_token(&mut self, b: u8) {
        let limit = if self.want == Want::Key { KEY_LIMIT } else { SCALAR_LIMIT };
        if self.want == Want::Nothing {
            return;
        }
        if self.token.len() >= limit {
            self.token_over = true;
        } else {
            self.token.push(b);
        }
    }

    /// [`Scan::push_token`] for each byte of `run`.
    #[inline(always)]
    fn push_run(&mut self, run: &[u8]) {
        if self.want == Want::Nothing {
            return;
        }
        let limit = if self.want == Want::Key { KEY_LIMIT } else { SCALAR_LIMIT };
        let room = limit.saturating_sub(self.token.len());
        self.token.extend_from_slice(&run[..run.len().min(room)]);
        self.token_over |= run.len() > room;
    }

    #[inline(always)]
    fn string_byte(&mut self, key: bool, escape: Escape, b: u8) {
        let next = match escape {
            Escape::None => match b {
                b'"' => return self.end_string(key),
                b'\\' => Escape::Backslash,
                _ => {
                    self.push_token(b);
                    Escape::None
                }
            },
            Escape::Backslash => match b {
                b'u' => Escape::Unicode(0, 0),
                _ => {
                    let decoded = match b {
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        other => other,
                    };
                    self.push_token(decoded);
                    Escape::None
                }
            },
            Escape::Unicode(count, value) => {
                let Some(digit) = (b as char).to_digit(16) else {
                    self.state = State::Invalid;
                    return;
                };
                let value = value * 16 + digit;
                if count < 3 {
                    Escape::Unicode(count + 1, value)
                } else {
                    self.push_token(u8::try_from(value).ok().filter(u8::is_ascii).unwrap_or(0xFF));
                    Escape::None
                }
            }
        };
        self.state = State::Str { key, escape: next };
    }

    #[inline(always)]
    fn end_string(&mut self, key: bool) {
        let over = std::mem::replace(&mut self.token_over, false);
        if key {
            let name = if over || self.want != Want::Key { None } else { self.names.iter().position(|n| *n == self.token) };
            self.token.clear();
            if let Some(frame) = self.stack.last_mut() {
                frame.at = Step::Key(name.and_then(|at| u16::try_from(at).ok()));
            }
            self.state = State::Colon;
            return;
        }
        if let (Want::Target(t), false) = (self.want, over) {
            self.doc.push((t, Found::Text(self.token.clone())));
        }
        self.token.clear();
        self.after_value()
    }

    #[inline(always)]
    fn end_scalar(&mut self) {
        let figure = (self.want != Want::Nothing && !self.token_over).then(|| whole(&self.token)).flatten();
        match (self.want, figure) {
            (Want::Target(t), Some(n)) => self.doc.push((t, Found::Number(n))),
            (Want::Member(m), Some(n)) => {
                if let Some((_, members)) = self.stack.last_mut().and_then(|f| f.figures.as_mut()) {
                    members.push((m, n));
                }
            }
            _ => {}
        }
        self.token.clear();
        self.after_value()
    }

    /// A container closes.
    fn close(&mut self, array: bool) {
        let Some(frame) = self.stack.pop() else {
            self.state = State::Invalid;
            return;
        };
        if frame.array != array {
            self.state = State::Invalid;
            return;
        }
        if let Some((target, members)) = frame.figures {
            self.doc.push((target, Found::Figures(members)));
        }
        self.after_value()
    }

    /// A value ended: the root is done, or an element of a root array of
    /// documents is (left in `element`).
    #[inline(always)]
    fn after_value(&mut self) {
        self.state = State::After;
        self.want = Want::Nothing;
        if self.stack.is_empty() {
            self.done = true;
        } else if self.stack.len() == 1 && self.in_elements() {
            self.element = Some(std::mem::take(&mut self.doc));
        }
    }
}

/// Where the first `a` or `b` is in `bytes`, looked for eight bytes at a
/// time (a string's plain run, a line's value: most of an event).
#[inline(always)]
pub(crate) fn find_either(bytes: &[u8], a: u8, b: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let (aa, bb) = (ONES * u64::from(a), ONES * u64::from(b));
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    for (i, word) in words.enumerate() {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let (x, y) = (u64::from_le_bytes(eight) ^ aa, u64::from_le_bytes(eight) ^ bb);
        // A zero byte of x or y is a match; the lowest flagged byte is
        // always one (a borrow only flags bytes above a true zero).
        let zero = (x.wrapping_sub(ONES) & !x | y.wrapping_sub(ONES) & !y) & HIGH;
        if zero != 0 {
            return Some(i * 8 + zero.trailing_zeros() as usize / 8);
        }
    }
    let from = bytes.len() - tail.len();
    tail.iter().position(|&c| c == a || c == b).map(|i| from + i)
}

/// A whole number written as JSON writes numbers (a float with no
/// fraction too), never negative.
pub(crate) fn whole(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    if text.starts_with('+') || text.is_empty() {
        return None;
    }
    if let Ok(n) = text.parse::<u64>() {
        return Some(n);
    }
    // Not `str::parse::<f64>`: its tables weigh 14 KiB gzip in the upload.
    let f: f64 = crate::request::key::json_number(text).filter(|f| f.is_finite())?;
    (f >= 0.0 && f.fract() == 0.0 && f < 1.8e19).then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIGURES: &[&str] = &["a", "b"];

    fn scan(targets: Vec<Target>, elements: bool, text: &str) -> (Vec<Doc>, Option<Doc>) {
        let mut scan = Scan::new(targets, elements);
        let docs: Vec<Doc> = text.bytes().filter_map(|b| scan.byte(b)).collect();
        (docs, scan.finish())
    }

    fn usage() -> Vec<Target> {
        vec![Target::new(&["usage"], Probe::Figures(FIGURES)), Target::new(&["type"], Probe::Text), Target::new(&["error"], Probe::Present)]
    }

    #[test]
    fn figures_are_read_where_the_path_is_and_nowhere_else() {
        let text = r#" { "x" : {"usage":{"a":1}}, "usage" : { "a" : 7 , "b" : 2.0, "c": 5, "d": {"a": 9}, "a2": 3 }, "type":"message_delta" } "#;
        let (_, doc) = scan(usage(), false, text);
        assert_eq!(doc, Some(vec![(0, Found::Figures(vec![(0, 7), (1, 2)])), (1, Found::Text(b"message_delta".to_vec()))]));
    }

    #[test]
    fn keys_are_compared_with_their_escapes_decoded_and_strings_are_text() {
        let (_, doc) = scan(usage(), false, r#"{"us\u0061ge":{"\u0061":4},"t":"{\"usage\":{\"a\":1}}","type":"a\"b\u00e9"}"#);
        assert_eq!(doc, Some(vec![(0, Found::Figures(vec![(0, 4)])), (1, Found::Text(b"a\"b\xFF".to_vec()))]));
    }

    #[test]
    fn present_is_any_value_but_null() {
        for (text, present) in [(r#"{"error":null}"#, false), (r#"{"error":{"x":1}}"#, true), (r#"{"error":"x"}"#, true), (r#"{"error":0}"#, true)] {
            let (_, doc) = scan(usage(), false, text);
            assert_eq!(doc.unwrap().contains(&(2, Found::Present)), present, "{text}");
        }
    }

    #[test]
    fn a_malformed_or_unfinished_document_reports_nothing() {
        for text in [r#"{"usage":{"a":1}"#, r#"{"usage":{"a":1}}}"#, r#"{"usage":{"a":1}} x"#, r#"{"usage":{"a":1]}"#, r#"{"usage" {"a":1}}"#, r#"{"usage":{"a":1},}x"#, "[DONE]", "", "tru", r#"{"a":nul}"#, r#"{"a":truex}"#, r#"{"a":x}"#, r#"{"a":1x}"#] {
            assert_eq!(scan(usage(), false, text).1, None, "{text}");
        }
        assert_eq!(scan(usage(), false, "{}").1, Some(vec![]));
    }

    #[test]
    fn numbers_are_whole_and_bounded() {
        for (number, read) in [("5", Some(5)), ("5.0", Some(5)), ("1e3", Some(1_000)), ("-5", None), ("1.5", None), ("\"9\"", None), ("true", None), (&"9".repeat(80), None)] {
            let (_, doc) = scan(usage(), false, &format!("{{\"usage\":{{\"a\":{number}}}}}"));
            let want = read.map_or(vec![], |n| vec![(0, n)]);
            assert_eq!(doc, Some(vec![(0, Found::Figures(want))]), "{number}");
        }
    }

    #[test]
    fn a_root_array_gives_each_element_as_a_document() {
        let text = r#"[{"usage":{"a":1}} , {"x":[1,{"usage":{"a":9}}]},{"usage":{"b":2}}, 5, "s"]"#;
        let (docs, last) = scan(usage(), true, text);
        assert_eq!(docs.len(), 5);
        assert_eq!(docs[0], vec![(0, Found::Figures(vec![(0, 1)]))]);
        assert_eq!(docs[1], vec![], "a usage deeper down is not the element's");
        assert_eq!(docs[2], vec![(0, Found::Figures(vec![(1, 2)]))]);
        assert_eq!(last, None, "the array's elements were given one by one");
        let (docs, last) = scan(usage(), false, text);
        assert!(docs.is_empty() && last == Some(vec![]), "without elements, an array is one document with nothing at the paths");
    }

    #[test]
    fn any_index_and_numbered_names_match_array_elements() {
        let targets = vec![Target::new(&["c", "*", "f"], Probe::Text), Target::new(&["m", "1", "n"], Probe::Number)];
        let (_, doc) = scan(targets, false, r#"{"c":[{"f":"STOP"},{"g":1,"f":"MAX"}],"m":[{"n":1},{"n":2}],"f":"x"}"#);
        assert_eq!(doc, Some(vec![(0, Found::Text(b"STOP".to_vec())), (0, Found::Text(b"MAX".to_vec())), (1, Found::Number(2))]));
    }

    /// A number below `n` (xorshift).
    fn pick(seed: &mut u64, n: usize) -> usize {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        usize::try_from(*seed % n as u64).unwrap_or(0)
    }

    /// A random JSON value (`depth` deep at most), the names the targets
    /// look for among its keys, escapes, every kind of number and literal.
    fn random_value(seed: &mut u64, depth: u32, out: &mut String) {
        const KEYS: &[&str] = &["usage", "a", "b", "type", "error", "c", "f", "m", "n", "1", "x", "us\\u0061ge", "ty\\\"pe"];
        const SCALARS: &[&str] = &["0", "7", "12.0", "1e3", "-5", "1.5", "99999999999999999999", "true", "false", "null", "\"message_stop\"", "\"a\\\"b\"", "\"\\u00e9\"", "\"\""];
        let space = [" ", "", "", "\n ", "\r\n"];
        out.push_str(space[pick(seed, space.len())]);
        match if depth == 0 { 2 } else { pick(seed, 4) } {
            0 => {
                out.push('{');
                for i in 0..pick(seed, 4) {
                    out.push_str(if i > 0 { ",\"" } else { "\"" });
                    out.push_str(KEYS[pick(seed, KEYS.len())]);
                    out.push_str("\" : ");
                    random_value(seed, depth - 1, out);
                }
                out.push('}');
            }
            1 => {
                out.push('[');
                for i in 0..pick(seed, 4) {
                    out.push_str(if i > 0 { "," } else { "" });
                    random_value(seed, depth - 1, out);
                }
                out.push(']');
            }
            _ => out.push_str(SCALARS[pick(seed, SCALARS.len())]),
        }
    }

    /// [`Scan::bytes`] (runs taken at once, any split) reads as
    /// [`Scan::byte`] one byte at a time: well-formed documents and ones
    /// with a byte dropped, added or changed, as one document or a root
    /// array of them.
    #[test]
    fn bytes_read_in_runs_as_one_by_one() {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let mut finds = 0;
        for round in 0..20_000_u64 {
            let mut text = String::new();
            random_value(&mut seed, 4, &mut text);
            let mut bytes = text.into_bytes();
            let at = usize::try_from(seed % (bytes.len() as u64 + 1)).unwrap_or(0);
            match round % 4 {
                1 if at < bytes.len() => drop(bytes.remove(at)),
                2 => bytes.insert(at, b"{}[]\",:\\ 1n"[at % 11]),
                _ => {}
            }
            let targets = || [usage(), vec![Target::new(&["c", "*", "f"], Probe::Text), Target::new(&["m", "1", "n"], Probe::Number)]][usize::from(round % 3 == 0)].clone();
            let elements = round % 5 < 2;
            let mut one = Scan::new(targets(), elements);
            let by_byte: Vec<Doc> = bytes.iter().filter_map(|&b| one.byte(b)).collect();
            let mut runs = Scan::new(targets(), elements);
            let mut by_run = Vec::new();
            for part in bytes.chunks(1 + usize::try_from(seed % 37).unwrap_or(0)) {
                let mut rest = part;
                while !rest.is_empty() {
                    let (read, doc) = runs.bytes(rest);
                    by_run.extend(doc);
                    rest = &rest[read..];
                }
            }
            let last = one.finish();
            finds += usize::from(last.as_ref().is_some_and(|d| !d.is_empty()) || !by_byte.is_empty());
            assert_eq!((by_run, runs.finish()), (by_byte, last), "{}", String::from_utf8_lossy(&bytes));
        }
        assert!(finds > 1_000, "the documents find something often enough to test it ({finds})");
    }

    #[test]
    fn find_either_finds_the_first_of_two_bytes_anywhere() {
        let text = b"ab\"cd\\efghijklmnopqrstuv\"wxyz0123456789";
        for from in 0..text.len() {
            for to in from..=text.len() {
                let part = &text[from..to];
                for (a, b) in [(b'"', b'\\'), (b'z', b'0'), (b'#', b'%'), (b'a', b'a')] {
                    assert_eq!(find_either(part, a, b), part.iter().position(|&c| c == a || c == b), "{from}..{to} {a} {b}");
                }
            }
        }
        assert_eq!(find_either(&[0x80, 0x01, 0x22, 0xFF, 0x00, 0x5C, 0x7F, 0x81, 0x22], b'"', b'\\'), Some(2), "high and low bytes around");
    }
}
