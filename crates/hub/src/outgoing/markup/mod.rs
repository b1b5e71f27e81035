//! Hidden action comments in pi's answers: `telegram_button` (and its exact alias
//! `telegram_buttons`) and `telegram_voice`.
//!
//! pi writes an ordinary Markdown answer plus HTML comments such as
//! `<!-- telegram_button [{Yes|yes}{No|no}] -->` or `<!-- telegram_voice text="Done." -->`.
//! [`extract`] finds them, parses their payloads and returns the answer without them. Pure:
//! no I/O, no state, linear time.
//!
//! Where a comment counts ([`scan`]): its `<!--` must be the first thing on a line, and that
//! line must not lie inside a fenced code block. Quotes, list items and indented code can only
//! hold a comment after some prefix or indentation, so those stay literal text, as does any
//! comment that starts mid-line. A comment ends at the first `-->`, across lines if needed,
//! so a payload can never contain `-->`.
//!
//! What the comment says: after optional whitespace, one of the marker words, then
//! whitespace or the end of the comment. Any other comment (a marker glued to more letters,
//! `<!-- note -->`) is not an action and is left alone. A colon after the marker is refused
//! (whatever follows the marker word is the payload itself, in any form). An action comment is
//! removed from the text whether or not its payload is valid; invalid ones produce no actions at
//! all (no partial rows) and are listed in [`Extracted::rejected`].
//!
//! Payloads: see [`buttons`] ([`parse_buttons`]) and [`voice`] ([`parse_voice`]).

mod attrs;
pub mod buttons;
mod scan;
pub mod voice;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Range;

pub use attrs::AttributeError;
pub use buttons::{ButtonError, ButtonSpec, Rows, Style, parse_buttons};
pub use voice::{VoiceError, VoiceSpec, parse_voice};

/// The text shown when an answer is nothing but buttons (Telegram needs a message to attach
/// a keyboard to).
pub const BUTTON_ONLY_HEADING: &str = "\u{2611}\u{fe0f} **Choose an option:**";

pub const BUTTON_MARKER: &str = "telegram_button";
/// The plural alias of [`BUTTON_MARKER`].
pub const BUTTONS_MARKER: &str = "telegram_buttons";
pub const VOICE_MARKER: &str = "telegram_voice";

/// An answer with its action comments taken out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extracted {
    /// The answer without its action comments. Byte-identical to the input when there were
    /// none. Otherwise each removed comment takes its whole line when nothing else is on it
    /// (or, when text follows `-->`, the comment and the spaces after it), and the blank lines
    /// that met where it was are cut to at most one (no run of more than two line breaks);
    /// blank lines at the start, and at the end after the last content line, go. Empty when
    /// nothing visible remains, or [`BUTTON_ONLY_HEADING`] if there are buttons.
    pub text: String,
    /// Button rows, in source order across every valid button comment.
    pub buttons: Vec<Vec<ButtonSpec>>,
    /// Voice messages, in source order.
    pub voices: Vec<VoiceSpec>,
    /// Action comments that were removed but refused (for logs).
    pub rejected: Vec<Rejected>,
}

/// Which action a comment asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionKind {
    /// `telegram_button` or `telegram_buttons`.
    Buttons,
    /// `telegram_voice`.
    Voice,
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ActionKind::Buttons => BUTTON_MARKER,
            ActionKind::Voice => VOICE_MARKER,
        })
    }
}

/// An action comment that was refused; it was still removed from the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// What it asked for.
    pub kind: ActionKind,
    /// 1-based line of its `<!--`.
    pub line: usize,
    /// Why.
    pub reason: RejectReason,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: {}", self.line, self.kind, self.reason)
    }
}

/// Why an action comment was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RejectReason {
    /// `telegram_button: …`.
    #[error("colon after the marker")]
    ColonAfterMarker,
    /// No `-->` anywhere after the `<!--` (the rest of the answer was taken with it).
    #[error("the comment is never closed")]
    Unterminated,
    /// The button payload.
    #[error(transparent)]
    Buttons(#[from] ButtonError),
    /// The voice payload.
    #[error(transparent)]
    Voice(#[from] VoiceError),
}

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// A field's value trimmed, or `None` when absent or blank.
fn present(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|s| !s.is_empty())
}

/// The action a comment's content names, and the rest of the content after the marker word.
fn marker(content: &str) -> Option<(ActionKind, &str)> {
    let body = content.trim_start_matches(is_ws);
    [
        (BUTTONS_MARKER, ActionKind::Buttons),
        (BUTTON_MARKER, ActionKind::Buttons),
        (VOICE_MARKER, ActionKind::Voice),
    ]
    .into_iter()
    .find_map(|(word, kind)| {
        let rest = body.strip_prefix(word)?;
        match rest.chars().next() {
            None | Some(':') => Some((kind, rest)),
            Some(c) if is_ws(c) => Some((kind, rest)),
            Some(_) => None,
        }
    })
}

/// Finds, parses and removes the answer's action comments.
pub fn extract(markdown: &str) -> Extracted {
    let mut out = Extracted::default();
    let mut spans = Vec::new();
    for comment in scan::top_level_comments(markdown) {
        let Some((kind, rest)) = marker(comment.content) else {
            continue;
        };
        let outcome = if !comment.terminated {
            Err(RejectReason::Unterminated)
        } else if rest.trim_start_matches(is_ws).starts_with(':') {
            Err(RejectReason::ColonAfterMarker)
        } else {
            match kind {
                ActionKind::Buttons => parse_buttons(rest)
                    .map(|rows| out.buttons.extend(rows))
                    .map_err(RejectReason::from),
                ActionKind::Voice => parse_voice(rest)
                    .map(|voice| out.voices.push(voice))
                    .map_err(RejectReason::from),
            }
        };
        if let Err(reason) = outcome {
            out.rejected.push(Rejected {
                kind,
                line: comment.line,
                reason,
            });
        }
        spans.push(removal(markdown, comment.start, comment.end));
    }
    out.text = if spans.is_empty() {
        markdown.to_owned()
    } else {
        without(markdown, &spans)
    };
    if !out.buttons.is_empty() && out.text.trim().is_empty() {
        out.text = BUTTON_ONLY_HEADING.to_owned();
    }
    out
}

/// What to cut for a comment at `start..end`: through the end of its last line when only
/// whitespace follows `-->` there, else the comment and the spaces or tabs after it.
fn removal(src: &str, start: usize, end: usize) -> Range<usize> {
    let after = &src[end..];
    let line_end = after.find('\n').map_or(src.len(), |i| end + i + 1);
    if src[end..line_end].chars().all(is_ws) {
        return start..line_end;
    }
    let spaces = after
        .bytes()
        .take_while(|&b| b == b' ' || b == b'\t')
        .count();
    start..end + spaces
}

/// `src` without `spans` (sorted, disjoint, each starting at a line start), tidied.
fn without(src: &str, spans: &[Range<usize>]) -> String {
    let mut text = Text::default();
    let mut from = 0;
    for span in spans {
        text.join(&src[from..span.start], from == 0);
        from = span.end;
    }
    let last = &src[from..];
    if last.chars().all(is_ws) {
        text.finish(src)
    } else {
        text.join(last, false);
        text.finish_plain()
    }
}

/// The text being rebuilt.
#[derive(Default)]
struct Text {
    out: String,
    /// Whether anything but whitespace has been written.
    content: bool,
    /// Line breaks in the whitespace at the end of `out`.
    tail_breaks: usize,
}

impl Text {
    /// Appends `piece` verbatim.
    fn push(&mut self, piece: &str) {
        let kept = piece.trim_end_matches(is_ws);
        if kept.is_empty() {
            self.tail_breaks += count_breaks(piece);
        } else {
            self.content = true;
            self.tail_breaks = count_breaks(&piece[kept.len()..]);
        }
        self.out.push_str(piece);
    }

    /// Appends the text between two removed comments (`first`: the text before the first).
    fn join(&mut self, piece: &str, first: bool) {
        if first {
            self.push(piece);
            return;
        }
        if piece.is_empty() {
            return;
        }
        if !self.content {
            // Only blank lines so far: drop them and the ones after the comment.
            self.out.clear();
            self.tail_breaks = 0;
            self.push(skip_blank_lines(piece, usize::MAX).0);
            return;
        }
        let (_, blank) = skip_blank_lines(piece, usize::MAX);
        let total = self.tail_breaks + blank;
        if total <= 2 {
            self.push(piece);
            return;
        }
        let excess = total - 2;
        let from_piece = excess.min(blank);
        self.drop_tail_lines(excess - from_piece);
        self.push(skip_blank_lines(piece, from_piece).0);
    }

    /// Removes `n` blank lines from the end (there are more than `n` line breaks there).
    fn drop_tail_lines(&mut self, n: usize) {
        for _ in 0..n {
            let body = self.out.strip_suffix('\n').unwrap_or(&self.out);
            let cut = body.rfind('\n').map_or(0, |i| i + 1);
            self.out.truncate(cut);
            self.tail_breaks = self.tail_breaks.saturating_sub(1);
        }
    }

    /// The result when only whitespace followed the last comment: everything after the last
    /// visible line goes, and that line ends with a line break only if the input did.
    fn finish(mut self, src: &str) -> String {
        if !self.content {
            return String::new();
        }
        let visible = self.out.trim_end_matches(is_ws).len();
        if let Some(i) = self.out[visible..].find('\n') {
            let mut cut = visible + i;
            if self.out[..cut].ends_with('\r') {
                cut -= 1;
            }
            self.out.truncate(cut);
        }
        if src.ends_with("\r\n") {
            self.out.push_str("\r\n");
        } else if src.ends_with('\n') {
            self.out.push('\n');
        }
        self.out
    }

    /// The result when the text after the last comment was joined as is.
    fn finish_plain(self) -> String {
        if self.content {
            self.out
        } else {
            String::new()
        }
    }
}

fn count_breaks(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'\n').count()
}

/// `s` without up to `max` leading whitespace-only lines, and how many were skipped.
fn skip_blank_lines(s: &str, max: usize) -> (&str, usize) {
    let mut rest = s;
    let mut skipped = 0;
    while skipped < max {
        let Some(i) = rest.find(|c: char| !matches!(c, ' ' | '\t' | '\r')) else {
            break;
        };
        if rest.as_bytes()[i] != b'\n' {
            break;
        }
        rest = &rest[i + 1..];
        skipped += 1;
    }
    (rest, skipped)
}
