//! What the button and voice payloads share: positional cells, the test that tells a named
//! JSON object from a positional cell, and the noisy envelope around a payload.
//!
//! A positional cell is `{` atom (`|` atom){0,2} `}`. Atoms are trimmed (Unicode
//! whitespace); their only escapes are `\|`, `\}` and `\\`; a control
//! character left after trimming is refused. Whether an atom may be empty is the caller's
//! rule (a button's first atom may be, a voice atom may not).
//!
//! The envelope: a payload that is not attribute-shaped is read from the first `{` or `[` of
//! the comment's content. What comes before it (`lead`) holds no `{` or `[` by construction;
//! what comes after the one payload read (`tail`) may be anything but a `{` or `[`, so noise
//! such as prose, a trailing comma or an unmatched `]` is ignored while a second cell or row
//! is refused (pi meant it, and reading only the first would drop it silently). Only that one
//! candidate is read: trying later brackets could pick a cell out of a rejected matrix.

/// Why a positional cell was refused. Offsets are byte offsets into the payload as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CellError {
    /// No closing `}`.
    #[error("the cell at byte {at} is never closed")]
    Unterminated {
        /// Offset of the `{`.
        at: usize,
    },
    /// A third unescaped `|`.
    #[error("too many `|` separators at byte {at}")]
    TooManyAtoms {
        /// Offset of the separator.
        at: usize,
    },
    /// A backslash before anything but `|`, `}` or `\`.
    #[error("unknown escape \\{found} at byte {at}")]
    UnknownEscape {
        /// Offset of the backslash.
        at: usize,
        /// The escaped character.
        found: char,
    },
    /// A backslash at the very end.
    #[error("trailing backslash")]
    TrailingBackslash,
    /// A control character inside an atom.
    #[error("control character in the cell at byte {at}")]
    ControlCharacter {
        /// Offset of the cell's `{`.
        at: usize,
    },
}

impl CellError {
    /// What went wrong, without offsets.
    pub fn class(&self) -> &'static str {
        match self {
            CellError::Unterminated { .. } => "unclosed cell",
            CellError::TooManyAtoms { .. } => "too many `|` separators",
            CellError::UnknownEscape { .. } => "unknown escape",
            CellError::TrailingBackslash => "trailing backslash",
            CellError::ControlCharacter { .. } => "control character in a cell",
        }
    }
}

/// A positional cell's atoms (trimmed, possibly empty) and the offset just after its `}`.
pub(crate) struct Cell {
    pub atoms: Vec<String>,
    pub end: usize,
}

pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The character at `at` (for error messages).
pub(crate) fn char_at(src: &str, at: usize) -> char {
    src.get(at..)
        .and_then(|s| s.chars().next())
        .unwrap_or('\u{fffd}')
}

/// Reads the positional cell whose `{` is at `open`. Linear in the cell's length.
pub(crate) fn positional(src: &str, open: usize) -> Result<Cell, CellError> {
    let bytes = src.as_bytes();
    let mut atoms: Vec<String> = vec![String::new()];
    let mut i = open + 1;
    let mut seg = i;
    loop {
        let Some(&b) = bytes.get(i) else {
            return Err(CellError::Unterminated { at: open });
        };
        match b {
            b'\\' => {
                push(&mut atoms, &src[seg..i]);
                match bytes.get(i + 1) {
                    Some(b'|' | b'}' | b'\\') => push(&mut atoms, &src[i + 1..i + 2]),
                    Some(_) => {
                        return Err(CellError::UnknownEscape {
                            at: i,
                            found: char_at(src, i + 1),
                        });
                    }
                    None => return Err(CellError::TrailingBackslash),
                }
                i += 2;
                seg = i;
            }
            b'|' => {
                push(&mut atoms, &src[seg..i]);
                if atoms.len() == 3 {
                    return Err(CellError::TooManyAtoms { at: i });
                }
                atoms.push(String::new());
                i += 1;
                seg = i;
            }
            b'}' => {
                push(&mut atoms, &src[seg..i]);
                i += 1;
                break;
            }
            _ => i += 1,
        }
    }
    let mut trimmed = Vec::with_capacity(atoms.len());
    for atom in &atoms {
        let atom = atom.trim();
        if atom.chars().any(char::is_control) {
            return Err(CellError::ControlCharacter { at: open });
        }
        trimmed.push(atom.to_owned());
    }
    Ok(Cell {
        atoms: trimmed,
        end: i,
    })
}

/// Appends to the last atom.
fn push(atoms: &mut [String], s: &str) {
    if let Some(last) = atoms.last_mut() {
        last.push_str(s);
    }
}

/// Whether the `{` at `pos` is followed by a JSON string key and a colon. The key scan stops
/// at the first unescaped quote, which is at latest the opening quote of the next cell that
/// could be scanned, so scans never overlap.
pub(crate) fn opens_named_json(src: &str, pos: usize) -> bool {
    let bytes = src.as_bytes();
    let mut i = pos + 1;
    while bytes.get(i).copied().is_some_and(is_ws) {
        i += 1;
    }
    if bytes.get(i) != Some(&b'"') {
        return false;
    }
    i += 1;
    loop {
        match bytes.get(i) {
            None => return false,
            Some(b'\\') => i += 2,
            Some(b'"') => break,
            Some(_) => i += 1,
        }
    }
    i += 1;
    while bytes.get(i).copied().is_some_and(is_ws) {
        i += 1;
    }
    bytes.get(i) == Some(&b':')
}

/// Whether the payload (trimmed) is the attribute form: it starts with an attribute name and
/// `=`. Such a payload is read as attributes only, and their errors are final.
pub(crate) fn attribute_shaped(src: &str) -> bool {
    let bytes = src.as_bytes();
    if !bytes
        .first()
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
    {
        return false;
    }
    let mut i = bytes
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        .count();
    while bytes.get(i).copied().is_some_and(is_ws) {
        i += 1;
    }
    bytes.get(i) == Some(&b'=')
}

/// The first `{` or `[` at or after `from`: where the payload of a noisy envelope starts.
pub(crate) fn first_bracket(src: &str, from: usize) -> Option<usize> {
    src.as_bytes()
        .get(from..)?
        .iter()
        .position(|&b| b == b'{' || b == b'[')
        .map(|i| from + i)
}
