//! pi's HTML comments: the hidden actions `telegram_button` (and its exact alias
//! `telegram_buttons`) and `telegram_voice`, and the membrane that keeps every comment out of
//! what the person sees.
//!
//! pi writes an ordinary Markdown answer plus HTML comments such as
//! `<!-- telegram_button [{Yes|yes}{No|no}] -->` or `<!-- telegram_voice {Done.|en} -->`.
//! [`extract`] finds them, parses the actions' payloads and returns the answer without any
//! comment; [`visible`] only removes the comments (commentary, pushed work, previews). Pure:
//! no I/O, no state, linear time.
//!
//! Which comments are removed ([`comments`]): every `<!-- … -->` outside code, wherever it
//! stands (mid-line, in a list item, a quote, a table, an HTML block). Code is what the
//! renderer reads as a code block or an inline code span; there `<!--` stays, as does a `\<!--`
//! (escaped). A comment ends at the first `-->` after its `<!--`, across lines if needed, so a
//! payload can never contain `-->`; one that never closes takes the rest of the text with it.
//!
//! Which comments act ([`scan`]): only an action comment whose `<!--` is the first thing on a
//! line, and that line not inside a fenced code block. Quotes, list items and indented code
//! can only hold a comment after some prefix or indentation, so comments there never act, nor
//! does one that starts mid-line: they are removed like any comment, and one that names an
//! action is listed in [`Extracted::rejected`] ([`RejectReason::NotTopLevel`]).
//!
//! What an action comment says: after optional whitespace, one of the marker words, then
//! whitespace, the end of the comment, or the `{` or `[` its payload starts with. Any other
//! comment (a marker glued to more letters, `<!-- note -->`) is not an action. A colon after
//! the marker is refused (whatever follows the marker word is the payload itself, in any
//! form). Invalid action comments produce no actions at all (no partial rows) and are listed
//! in [`Extracted::rejected`].
//!
//! Payloads: see [`buttons`] ([`parse_buttons`]) and [`voice`] ([`parse_voice`]); both read
//! noisy envelopes the same way ([`cells`]).

mod attrs;
pub mod buttons;
mod cells;
mod comments;
mod scan;
pub mod voice;

#[cfg(test)]
mod golden;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

pub use attrs::AttributeError;
pub use buttons::{ButtonError, ButtonSpec, Rows, Style, parse_buttons};
pub use cells::CellError;
pub use voice::{VoiceError, VoiceSpec, parse_voice};

/// The text shown when an answer is nothing but buttons (Telegram needs a message to attach
/// a keyboard to).
pub const BUTTON_ONLY_HEADING: &str = "\u{2611}\u{fe0f} **Choose an option:**";

pub const BUTTON_MARKER: &str = "telegram_button";
/// The plural alias of [`BUTTON_MARKER`].
pub const BUTTONS_MARKER: &str = "telegram_buttons";
pub const VOICE_MARKER: &str = "telegram_voice";

/// An answer with its comments taken out and its actions read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extracted {
    /// The answer without any comment. Byte-identical to the input when there were none.
    /// Otherwise each removed comment takes its whole line when nothing else is on it but
    /// spaces, quote markers (`>`) and list markers (`-`, `1.`); when text precedes it and nothing follows, the spaces
    /// before it go (the line break stays); else the comment and the spaces or tabs after it
    /// go. The blank lines that met where it was are cut to at most one (no run of more than
    /// two line breaks); blank lines at the start, and at the end after the last content line,
    /// go. Empty when nothing visible remains, or [`BUTTON_ONLY_HEADING`] if there are
    /// buttons.
    pub text: String,
    /// Button rows, in source order across every valid button comment.
    pub buttons: Vec<Vec<ButtonSpec>>,
    /// Voice messages, in source order.
    pub voices: Vec<VoiceSpec>,
    /// Action comments that were removed but refused (for logs and `status`).
    pub rejected: Vec<Rejected>,
    /// How many comments were removed (action comments included): an answer whose text is
    /// empty with some removed said nothing visible on purpose.
    pub hidden: usize,
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

impl Rejected {
    /// The rejection without any of pi's words: what the log at `info` and above and
    /// `status` may hold (`line 3: telegram_button: unknown style`).
    pub fn summary(&self) -> String {
        format!("line {}: {}: {}", self.line, self.kind, self.reason.class())
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
    /// Not at the start of a top-level line outside code (mid-line, in a list item or a
    /// quote): removed, never acted on.
    #[error("not at the start of a top-level line")]
    NotTopLevel,
    /// The button payload.
    #[error(transparent)]
    Buttons(#[from] ButtonError),
    /// The voice payload.
    #[error(transparent)]
    Voice(#[from] VoiceError),
}

impl RejectReason {
    /// What went wrong, without any of pi's words or offsets.
    pub fn class(&self) -> &'static str {
        match self {
            RejectReason::ColonAfterMarker => "colon after the marker",
            RejectReason::Unterminated => "never closed",
            RejectReason::NotTopLevel => "not at the start of a top-level line",
            RejectReason::Buttons(e) => e.class(),
            RejectReason::Voice(e) => e.class(),
        }
    }
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
            None | Some(':' | '{' | '[') => Some((kind, rest)),
            Some(c) if is_ws(c) => Some((kind, rest)),
            Some(_) => None,
        }
    })
}

/// How many times a text is looked at for comments: once they are removed, what is left may
/// read differently (a line that was an HTML block becomes a paragraph, code whose start a
/// comment swallowed is no longer code), so it is looked at again. Each look is linear; the
/// first finds everything but in made-up texts.
const LOOKS: usize = 4;

/// Finds and parses the answer's action comments and removes every comment.
pub fn extract(markdown: &str) -> Extracted {
    let mut out = Extracted::default();
    let actions: Vec<_> = scan::top_level_comments(markdown)
        .into_iter()
        .filter_map(|c| marker(c.content).map(|(kind, rest)| (c, kind, rest)))
        .collect();
    let found = comments::outside_code(markdown);
    let mut spans = Vec::new();
    for (comment, kind, rest) in &actions {
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
                kind: *kind,
                line: comment.line,
                reason,
            });
        }
        spans.push(removal(markdown, comment.start, comment.end));
    }
    let inside_an_action = |at: usize| actions.iter().any(|(c, _, _)| c.start <= at && at < c.end);
    for comment in &found.comments {
        if inside_an_action(comment.start) {
            continue;
        }
        if let Some((kind, _)) = marker(comment.content) {
            out.rejected.push(Rejected {
                kind,
                line: comment.line,
                reason: RejectReason::NotTopLevel,
            });
        }
        spans.push(removal(markdown, comment.start, comment.end));
    }
    // Source order, as the actions were read.
    out.rejected.sort_by_key(|r| r.line);
    out.hidden = actions.len() + found.comments.len()
        - found
            .comments
            .iter()
            .filter(|c| inside_an_action(c.start))
            .count();
    out.text = if spans.is_empty() {
        markdown.to_owned()
    } else {
        // What is left may read differently (a comment's line was an HTML block, or it
        // swallowed the start of some code): it is looked at again.
        let text = without(markdown, &merged(spans));
        match visible(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(again) => again,
        }
    };
    if !out.buttons.is_empty() && out.text.trim().is_empty() {
        out.text = BUTTON_ONLY_HEADING.to_owned();
    }
    out
}

/// `markdown` without any comment (action comments included, their payloads not read), tidied
/// as [`Extracted::text`] is; no heading. Borrowed when there was none.
pub fn visible(markdown: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(markdown);
    for _ in 0..LOOKS {
        let found = comments::outside_code(&text);
        if found.comments.is_empty() {
            break;
        }
        let spans = found
            .comments
            .iter()
            .map(|c| removal(&text, c.start, c.end))
            .collect();
        text = Cow::Owned(without(&text, &merged(spans)));
    }
    text
}

/// [`visible`] for text still being written (a live preview): a `<!--` being typed (`<`,
/// `<!` or `<!-` at the very end) is held back too, so it never shows for a moment.
pub fn visible_so_far(partial: &str) -> Cow<'_, str> {
    let held = ["<!-", "<!", "<"]
        .into_iter()
        .find(|p| partial.ends_with(p))
        .map_or(0, str::len);
    visible(&partial[..partial.len() - held])
}

/// `spans` sorted, with overlapping or touching ones joined.
fn merged(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.sort_by_key(|s| s.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match out.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => out.push(span),
        }
    }
    out
}

/// What to cut for a comment at `start..end`: its whole lines when nothing but spaces, tabs,
/// quote and list markers precede it and only whitespace follows `-->`; when text precedes it and
/// only whitespace follows, the spaces before it through the end of the line (its line break
/// kept); else the comment and the spaces or tabs after it.
fn removal(src: &str, start: usize, end: usize) -> Range<usize> {
    let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
    let before = &src[line_start..start];
    let after = &src[end..];
    let line_end = after.find('\n').map_or(src.len(), |i| end + i + 1);
    if src[end..line_end].chars().all(is_ws) {
        if only_markers(before) {
            return line_start..line_end;
        }
        let from = line_start + before.trim_end_matches([' ', '\t']).len();
        let kept = src[..line_end]
            .strip_suffix('\n')
            .map_or(line_end, |s| s.strip_suffix('\r').unwrap_or(s).len());
        return from..kept.max(end);
    }
    let spaces = after
        .bytes()
        .take_while(|&b| b == b' ' || b == b'\t')
        .count();
    start..end + spaces
}

/// Whether a line's start holds nothing but indentation, quote markers and list markers: a
/// comment after them is all the line says.
fn only_markers(before: &str) -> bool {
    before
        .split([' ', '\t'])
        .filter(|t| !t.is_empty())
        .all(|t| {
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            t.bytes().all(|b| b == b'>')
                || matches!(t, "-" | "*" | "+")
                || ((1..=9).contains(&digits) && matches!(&t[digits..], "." | ")"))
        })
}

/// `src` without `spans` (sorted, disjoint), tidied.
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
