//! Text with nested styles: a Telegram message as text plus entities, before it is written as
//! HTML. Cutting it into messages closes the styles that cross the cut and opens them again in
//! the next piece, so every piece renders on its own.

use crate::{html, utf16};

/// A Telegram entity type, as far as the renderer uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Style {
    /// `<b>`
    Bold,
    /// `<i>`
    Italic,
    /// `<s>`
    Strike,
    /// `<code>`
    Code,
    /// `<pre>`, with a language.
    Pre(Option<String>),
    /// `<a href>`
    Link(String),
    /// `<blockquote>`
    Quote,
    /// `<blockquote expandable>`
    ExpandableQuote,
}

/// A style over `start..end` (byte offsets into the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// What it is.
    pub style: Style,
}

/// Text and its spans. Spans are kept in the order they were opened, so an outer span always
/// comes before the spans inside it; they nest and never overlap otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Styled {
    /// The visible text.
    pub text: String,
    /// The styles over it.
    pub spans: Vec<Span>,
    /// Offsets between top-level blocks: the best places to cut.
    pub breaks: Vec<usize>,
}

/// Where an open span is, for [`Styled::close`].
#[derive(Debug, Clone, Copy)]
pub struct Open(usize);

impl Styled {
    /// Appends text.
    pub fn push(&mut self, s: &str) {
        self.text.push_str(s);
    }

    /// Opens a style at the end of the text.
    pub fn open(&mut self, style: Style) -> Open {
        self.spans.push(Span {
            start: self.text.len(),
            end: usize::MAX,
            style,
        });
        Open(self.spans.len() - 1)
    }

    /// Closes a style at the end of the text; an empty one is dropped (Telegram drops them
    /// too). Spans opened after it must be closed already.
    pub fn close(&mut self, open: Open) {
        let end = self.text.len();
        if let Some(span) = self.spans.get_mut(open.0) {
            span.end = end;
            if span.start == end {
                self.spans.remove(open.0);
            }
        }
    }

    /// Marks the end of the text as a place to cut between blocks.
    pub fn mark_break(&mut self) {
        self.breaks.push(self.text.len());
    }

    /// Length in UTF-16 code units, Telegram's measure.
    pub fn utf16_len(&self) -> usize {
        utf16::len(&self.text)
    }

    /// The part `from..to` (byte offsets on char boundaries), spans clipped to it.
    pub fn slice(&self, from: usize, to: usize) -> Styled {
        let spans = self
            .spans
            .iter()
            .filter(|s| s.start < to && s.end > from)
            .map(|s| Span {
                start: s.start.max(from) - from,
                end: s.end.min(to) - from,
                style: s.style.clone(),
            })
            .filter(|s| s.start < s.end)
            .collect();
        Styled {
            text: self.text[from..to].to_owned(),
            spans,
            breaks: self
                .breaks
                .iter()
                .filter(|b| **b > from && **b < to)
                .map(|b| b - from)
                .collect(),
        }
    }

    /// Removes whitespace at both ends as Telegram does when it stores a message: all trailing
    /// spaces and line feeds, leading ones only up to the first span (whitespace a code block
    /// starts with is kept). What is left is exactly what the person sees.
    pub fn trimmed(&self) -> Styled {
        let is_ws = |c: char| c == ' ' || c == '\n';
        let end = self.text.trim_end_matches(is_ws).len();
        let first_span = self.spans.iter().map(|s| s.start).min().unwrap_or(end);
        let lead = self.text[..end]
            .bytes()
            .take_while(|b| *b == b' ' || *b == b'\n')
            .count()
            .min(first_span);
        self.slice(lead, end)
    }

    /// Telegram HTML for this text: Telegram's HTML parser (tg-model's `html::parse`) gives back
    /// exactly `text` and these styles.
    pub fn to_html(&self) -> String {
        let mut out = String::with_capacity(self.text.len() + self.spans.len() * 16);
        // Boundaries: closes before opens at one offset; inner spans close first.
        let mut events: Vec<(usize, bool, usize)> = Vec::with_capacity(self.spans.len() * 2);
        for (i, s) in self.spans.iter().enumerate() {
            events.push((s.start, true, i));
            events.push((s.end, false, i));
        }
        events.sort_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| match (a.1, b.1) {
                (false, true) => std::cmp::Ordering::Less,
                (true, false) => std::cmp::Ordering::Greater,
                (true, true) => a.2.cmp(&b.2),
                (false, false) => b.2.cmp(&a.2),
            })
        });
        let mut at = 0;
        for (pos, open, i) in events {
            if pos > at {
                out.push_str(&html::escape(&self.text[at..pos]));
                at = pos;
            }
            let style = &self.spans[i].style;
            if open {
                out.push_str(&open_tag(style));
            } else {
                out.push_str(close_tag(style));
            }
        }
        out.push_str(&html::escape(&self.text[at..]));
        out
    }
}

fn open_tag(style: &Style) -> String {
    match style {
        Style::Bold => "<b>".into(),
        Style::Italic => "<i>".into(),
        Style::Strike => "<s>".into(),
        Style::Code => "<code>".into(),
        Style::Pre(None) => "<pre>".into(),
        Style::Pre(Some(lang)) => format!("<pre><code class=\"language-{}\">", html::escape(lang)),
        Style::Link(url) => format!("<a href=\"{}\">", html::escape(url)),
        Style::Quote => "<blockquote>".into(),
        Style::ExpandableQuote => "<blockquote expandable>".into(),
    }
}

fn close_tag(style: &Style) -> &'static str {
    match style {
        Style::Bold => "</b>",
        Style::Italic => "</i>",
        Style::Strike => "</s>",
        Style::Code => "</code>",
        Style::Pre(None) => "</pre>",
        Style::Pre(Some(_)) => "</code></pre>",
        Style::Link(_) => "</a>",
        Style::Quote | Style::ExpandableQuote => "</blockquote>",
    }
}

/// Cuts `text` into pieces of at most `limit` UTF-16 units of visible text each (after
/// Telegram's trimming), preferring, in this order, a break between blocks, a line break, a
/// space outside code and links, any space, and finally any character boundary that does not
/// split a grapheme's joiners. Styles crossing a cut continue in the next piece; a code block
/// cut between two lines is closed and reopened, a table (a code block) is cut between rows.
pub fn split(text: &Styled, limit: usize) -> Vec<Styled> {
    let limit = limit.max(16);
    let mut out = Vec::new();
    let mut rest = text.trimmed();
    while !rest.text.is_empty() {
        if rest.utf16_len() <= limit {
            out.push(rest);
            break;
        }
        let cut = cut_point(&rest, limit);
        let piece = rest.slice(0, cut).trimmed();
        if !piece.text.is_empty() {
            out.push(piece);
        }
        rest = rest.slice(cut, rest.text.len()).trimmed();
    }
    out
}

/// The byte offset to cut `text` at (`text` is longer than `limit`).
fn cut_point(text: &Styled, limit: usize) -> usize {
    // The longest prefix within the limit.
    let mut fit = 0;
    let mut units = 0;
    for (i, c) in text.text.char_indices() {
        if units + c.len_utf16() > limit {
            break;
        }
        units += c.len_utf16();
        fit = i + c.len_utf8();
    }
    // Pieces that are too small are worse than a cut at a lesser place.
    let min = fit / 3;
    let inside = |pos: usize, pred: &dyn Fn(&Style) -> bool| {
        text.spans
            .iter()
            .any(|s| s.start < pos && pos < s.end && pred(&s.style))
    };
    let atomic = |s: &Style| matches!(s, Style::Link(_) | Style::Code);
    let in_code = |s: &Style| matches!(s, Style::Link(_) | Style::Code | Style::Pre(_));
    if let Some(b) = text.breaks.iter().rev().find(|b| **b <= fit && **b > min) {
        return *b;
    }
    let window = &text.text[..fit];
    let last = |sep: char, ok: &dyn Fn(usize) -> bool| {
        window
            .char_indices()
            .rev()
            .filter(|(i, c)| *c == sep && *i > min && ok(*i))
            // After the separator: it ends the piece (and is trimmed there) instead of
            // starting the next one, where a code block would keep it.
            .map(|(i, _)| i + 1)
            .next()
    };
    if let Some(i) = last('\n', &|i| !inside(i, &atomic)) {
        return i;
    }
    if let Some(i) = last(' ', &|i| !inside(i, &in_code)) {
        return i;
    }
    if let Some(i) = last(' ', &|_| true) {
        return i;
    }
    // Anywhere: back off so a joiner, a variation selector or a combining mark stays with the
    // character before it.
    let mut cut = fit;
    while cut > 0 {
        match text.text[cut..].chars().next() {
            Some(c) if joins_previous(c) => {
                cut = text.text[..cut]
                    .char_indices()
                    .next_back()
                    .map_or(0, |(i, _)| i);
            }
            _ => break,
        }
    }
    // Flags are pairs of regional indicators: never cut between the two of a pair.
    let indicators = text.text[..cut]
        .chars()
        .rev()
        .take_while(|c| is_regional_indicator(*c))
        .count();
    if indicators % 2 == 1
        && text.text[cut..]
            .chars()
            .next()
            .is_some_and(is_regional_indicator)
    {
        cut -= '\u{1f1e6}'.len_utf8();
    }
    if cut == 0 {
        // A single cluster longer than the limit: cut it anyway.
        fit.max(text.text.chars().next().map_or(1, char::len_utf8))
    } else {
        cut
    }
}

fn is_regional_indicator(c: char) -> bool {
    ('\u{1f1e6}'..='\u{1f1ff}').contains(&c)
}

/// Characters that belong to the character before them.
fn joins_previous(c: char) -> bool {
    matches!(c,
        '\u{200d}' | '\u{fe00}'..='\u{fe0f}' | '\u{20e3}' | '\u{1f3fb}'..='\u{1f3ff}'
        | '\u{e0020}'..='\u{e007f}' | '\u{0300}'..='\u{036f}' | '\u{1ab0}'..='\u{1aff}'
        | '\u{1dc0}'..='\u{1dff}' | '\u{20d0}'..='\u{20ff}' | '\u{fe20}'..='\u{fe2f}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_or_a_family_is_never_cut_in_half() {
        let mut s = Styled::default();
        s.push(&"👩‍👩‍👧‍👦".repeat(30));
        for piece in split(&s, 20) {
            assert!(piece.utf16_len() <= 20);
            assert!(!piece.text.starts_with('\u{200d}'));
        }
        let mut s = Styled::default();
        s.push(&"🇺🇦".repeat(30));
        for piece in split(&s, 21) {
            assert!(piece.utf16_len() <= 21);
            assert_eq!(
                piece.text.chars().count() % 2,
                0,
                "whole flags: {}",
                piece.text
            );
        }
    }

    #[test]
    fn trimming_keeps_the_indentation_a_code_block_starts_with() {
        let mut s = Styled::default();
        s.push("\n\n");
        let p = s.open(Style::Pre(None));
        s.push("    indented\n");
        s.close(p);
        s.push("  \n");
        let t = s.trimmed();
        assert_eq!(t.text, "    indented");
        assert_eq!(t.spans[0].start, 0);
    }
}
