//! A streaming JSON scanner, sans-IO: fed one byte at a time, it keeps no
//! copy of the document, only the path from the root to where it is (a
//! few short keys) and what the reader asked for ([`Target`]): the whole
//! numbers of an object's members (`usage`'s `total_tokens`), a number at
//! a path, a short string (`type`), or that a value is there (`error`).
//! So a usage object is read wherever it sits in an event of any size (a
//! Gemini chunk carrying an image, a Responses `response.completed`
//! repeating the whole answer), in constant memory.
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

    fn matches(&self, at: &Step) -> bool {
        match (self, at) {
            (Seg::Name { text, .. }, Step::Key(Some(key))) => text.as_bytes() == key.as_slice(),
            (Seg::Name { index: Some(i), .. }, Step::Index(j)) => i == j,
            (Seg::Any, Step::Index(_)) => true,
            _ => false,
        }
    }
}

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
    /// A member; `None` when the key passed [`KEY_LIMIT`].
    Key(Option<Vec<u8>>),
    Index(usize),
}

#[derive(Debug)]
struct Frame {
    array: bool,
    /// The current member's key, or the current element's index.
    at: Step,
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
    targets: Vec<Target>,
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
    /// The scalar being read: `Some((literal, bytes read))` for `true`,
    /// `false` or `null`; `None` for a number.
    literal: Option<(&'static [u8], usize)>,
}

impl Scan {
    pub(crate) fn new(targets: Vec<Target>, elements: bool) -> Scan {
        Scan { targets, elements, stack: Vec::new(), state: State::Value { first: false }, want: Want::Nothing, token: Vec::new(), token_over: false, doc: Vec::new(), done: false, root_array: false, literal: None }
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
        self.literal = None;
    }

    /// Whether the root is an array whose elements are documents.
    pub(crate) fn in_elements(&self) -> bool {
        self.elements && self.stack.first().is_some_and(|f| f.array)
    }

    /// The document, if the bytes so far are one whole document (and the
    /// root was not an array of documents, whose elements
    /// [`Scan::byte`] already gave).
    pub(crate) fn finish(&mut self) -> Option<Doc> {
        if self.state == State::Scalar && self.stack.is_empty() {
            if self.literal.is_some_and(|(word, read)| read != word.len()) {
                self.state = State::Invalid;
            } else {
                let _ = self.end_scalar();
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
    /// of documents.
    pub(crate) fn byte(&mut self, b: u8) -> Option<Doc> {
        match self.state {
            State::Invalid => None,
            State::Str { key, escape } => self.string_byte(key, escape, b),
            State::Scalar => {
                if let Some((word, read)) = &mut self.literal {
                    if word.get(*read) == Some(&b) {
                        *read += 1;
                        return None;
                    }
                    if *read != word.len() {
                        self.state = State::Invalid;
                        return None;
                    }
                } else if matches!(b, b'0'..=b'9' | b'+' | b'-' | b'.' | b'e' | b'E') {
                    self.push_token(b);
                    return None;
                }
                let element = self.end_scalar();
                let more = self.structural(b);
                element.or(more)
            }
            _ => self.structural(b),
        }
    }

    fn structural(&mut self, b: u8) -> Option<Doc> {
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return None;
        }
        match self.state {
            State::Value { first } => {
                if first && b == b']' {
                    return self.close(true);
                }
                self.value(b);
                None
            }
            State::Key { first } => {
                match b {
                    b'}' if first => return self.close(false),
                    b'"' => self.begin_string(true, Want::Key),
                    _ => self.state = State::Invalid,
                }
                None
            }
            State::Colon => {
                self.state = if b == b':' { State::Value { first: false } } else { State::Invalid };
                None
            }
            State::After => match (b, self.stack.last().map(|f| f.array)) {
                (b',', Some(true)) => {
                    if let Some(Frame { at: Step::Index(i), .. }) = self.stack.last_mut() {
                        *i += 1;
                    }
                    self.state = State::Value { first: false };
                    None
                }
                (b',', Some(false)) => {
                    self.state = State::Key { first: false };
                    None
                }
                (b']', Some(true)) => self.close(true),
                (b'}', Some(false)) => self.close(false),
                _ => {
                    self.state = State::Invalid;
                    None
                }
            },
            State::Str { .. } | State::Scalar | State::Invalid => None,
        }
    }

    /// A value begins with `b`.
    fn value(&mut self, b: u8) {
        if self.done && self.stack.is_empty() {
            self.state = State::Invalid;
            return;
        }
        let target = self.matching();
        let probe = target.map(|t| &self.targets[t].probe);
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
                self.stack.push(Frame { array, at: if array { Step::Index(0) } else { Step::Key(None) }, figures });
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

    /// The target the value about to begin is at, if any.
    fn matching(&self) -> Option<usize> {
        let skip = usize::from(self.in_elements());
        let depth = self.stack.len().checked_sub(skip)?;
        self.targets.iter().position(|t| {
            t.path.len() == depth && depth > 0 && t.path.iter().zip(self.stack.iter().skip(skip)).all(|(seg, frame)| seg.matches(&frame.at))
        })
    }

    /// The index of the member about to be read in its `Figures` object.
    fn member(&self) -> Option<usize> {
        let frame = self.stack.last()?;
        let (target, _) = frame.figures.as_ref()?;
        let Step::Key(Some(key)) = &frame.at else { return None };
        match self.targets[*target].probe {
            Probe::Figures(names) => names.iter().position(|n| n.as_bytes() == key.as_slice()),
            _ => None,
        }
    }

    fn begin_string(&mut self, key: bool, want: Want) {
        self.want = if key { Want::Key } else { want };
        self.token.clear();
        self.token_over = false;
        self.state = State::Str { key, escape: Escape::None };
    }

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

    fn string_byte(&mut self, key: bool, escape: Escape, b: u8) -> Option<Doc> {
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
                    return None;
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
        None
    }

    fn end_string(&mut self, key: bool) -> Option<Doc> {
        let token = std::mem::take(&mut self.token);
        let over = std::mem::replace(&mut self.token_over, false);
        if key {
            if let Some(frame) = self.stack.last_mut() {
                frame.at = Step::Key((!over).then_some(token));
            }
            self.state = State::Colon;
            return None;
        }
        if let (Want::Target(t), false) = (self.want, over) {
            self.doc.push((t, Found::Text(token)));
        }
        self.after_value()
    }

    fn end_scalar(&mut self) -> Option<Doc> {
        let figure = (!self.token_over).then(|| whole(&self.token)).flatten();
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
    fn close(&mut self, array: bool) -> Option<Doc> {
        let Some(frame) = self.stack.pop() else {
            self.state = State::Invalid;
            return None;
        };
        if frame.array != array {
            self.state = State::Invalid;
            return None;
        }
        if let Some((target, members)) = frame.figures {
            self.doc.push((target, Found::Figures(members)));
        }
        self.after_value()
    }

    /// A value ended: the root is done, or an element of a root array of
    /// documents is (given back).
    fn after_value(&mut self) -> Option<Doc> {
        self.state = State::After;
        self.want = Want::Nothing;
        if self.stack.is_empty() {
            self.done = true;
            return None;
        }
        (self.stack.len() == 1 && self.in_elements()).then(|| std::mem::take(&mut self.doc))
    }
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
}
