//! Reading the crate's source as the guards do (`tests/layers.rs`,
//! `tests/architecture.rs`): each file whole, its comments and literals
//! blanked, its `#[cfg(test)]` items dropped wherever they sit.

use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A file's code, read whole: comments and the insides of string and
/// char literals blanked (so a brace or a `crate::` in them counts for
/// nothing), then every `#[cfg(test)]` item dropped (a test module or a
/// test-only item, wherever it sits in the file), the production code
/// after it kept.
pub fn code_of(text: &str) -> String {
    let mut code = blank_literals(text);
    while let Some(at) = code.find("#[cfg(test)]") {
        let end = item_end(code.as_bytes(), at + "#[cfg(test)]".len());
        let kept_lines: String = code[at..end].chars().map(|c| if c == '\n' { c } else { ' ' }).collect();
        code.replace_range(at..end, &kept_lines);
    }
    code
}

/// `text` with its comments and the contents of its string, raw string and
/// char literals replaced by spaces (newlines kept): same length, same lines.
fn blank_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |k| i + k);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (0usize, i);
                while j < b.len() {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            b'r' if !ident_before && matches!(b.get(i + 1), Some(b'#' | b'"')) => {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                let start = i + 2 + hashes;
                let end = b[start..].windows(close.len()).position(|w| w == close.as_slice()).map_or(b.len(), |k| start + k);
                blank(&mut out, start, end);
                i = end + close.len();
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                let end = b[i + 2..].iter().position(|&c| c == b'\'').map_or(b.len(), |k| i + 2 + k);
                blank(&mut out, i + 1, end);
                i = end + 1;
            }
            b'\'' => {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                if b.get(i + 1 + len) == Some(&b'\'') {
                    blank(&mut out, i + 1, i + 1 + len);
                    i += len + 2;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the item that starts at `from` ends (after its attributes): at its
/// `;` (outside brackets: `mod x;`, `use ...;`) or its body's closing `}`.
fn item_end(code: &[u8], from: usize) -> usize {
    let (mut brackets, mut braces) = (0i32, 0i32);
    for (k, &c) in code.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => brackets += 1,
            b')' | b']' => brackets -= 1,
            b';' if brackets == 0 && braces == 0 => return k + 1,
            b'{' => braces += 1,
            b'}' => {
                braces -= 1;
                if braces == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

