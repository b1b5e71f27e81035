//! The document as Telegram's rich Markdown (Bot API 10.2 "Rich Markdown style").
//!
//! The dialect is GitHub's plus `==marked==`, `||spoiler||`, `$math$`, automatic entities and
//! embedded HTML, so text is written back with every character that could mean something
//! escaped: what Telegram parses is exactly the document. Inline formatting is written as the
//! HTML tags the dialect accepts (`<b>`, `<i>`, `<s>`), which have no flanking rules to trip
//! over (`a**"b"**c` is not bold in Markdown, `a<b>"b"</b>c` is).

use std::borrow::Cow;

use super::doc::{Align, Block, IMAGE_MARK, Inline, Item, Table, rich_target};
use super::layout::{clean_lang, grid};

/// Telegram's table column limit.
pub const MAX_COLUMNS: usize = 20;
/// Lists and quotes nested deeper than this are flattened (lists into indented lines, quotes
/// into their parent quote), well within Telegram's 16 levels of nesting.
const MAX_DEPTH: usize = 10;

/// One top-level block as rich Markdown.
pub fn block(b: &Block) -> String {
    let mut out = String::new();
    write_block(&mut out, b, 0);
    out
}

/// Top-level blocks as one rich message (lists in a row kept apart, see [`joined`]).
pub fn blocks(blocks: &[Block]) -> String {
    joined(blocks, 0)
}

fn write_block(out: &mut String, b: &Block, depth: usize) {
    match b {
        Block::Paragraph(inlines) => inline_all(out, inlines, Ctx::default()),
        Block::Heading { level, content } => {
            out.push_str(&"#".repeat(usize::from((*level).clamp(1, 6))));
            out.push(' ');
            inline_all(out, content, Ctx::default());
        }
        Block::Code { lang, text } => code_block(out, lang.as_deref(), text),
        // A quote in a quote nested this deep is shown at its parent's level (a hundred `>`
        // in a row were refused as too deep).
        Block::Quote(blocks) if depth >= MAX_DEPTH => out.push_str(&joined(blocks, depth)),
        Block::Quote(blocks) => {
            let inner = joined(blocks, depth + 1);
            out.push_str(&prefix_lines(&inner, "> ", ">"));
        }
        Block::List { start, items } => list(out, *start, items, depth, false),
        Block::Table(t) if t.columns() > MAX_COLUMNS || t.columns() == 0 => {
            code_block(out, None, &grid(t));
        }
        Block::Table(t) => table(out, t),
        Block::Rule => out.push_str("***"),
        Block::Footnote { label, blocks } => {
            let mut text = String::new();
            escape_into(&mut text, &format!("[^{label}]:"), false);
            out.push_str(&text);
            // Only a paragraph may share the label's line: a fence, a heading mark, a list
            // marker or a quote is block syntax only at the start of a line (written after the
            // label, a code block showed its fences as text).
            match blocks.first() {
                Some(Block::Paragraph(_)) => out.push(' '),
                Some(_) => out.push_str("\n\n"),
                None => {}
            }
            out.push_str(&joined(blocks, depth + 1));
        }
    }
}

fn joined(blocks: &[Block], depth: usize) -> String {
    let mut previous: Option<&Block> = None;
    let mut other_marker = false;
    let parts: Vec<String> = blocks
        .iter()
        .map(|b| {
            let mut s = String::new();
            match b {
                Block::List { start, items } => {
                    // Markdown reads two lists of the same kind in a row as one list (numbered
                    // on from the first: a list cut into pieces showed "4." for its item 3);
                    // the other marker (`)` for `.`, `+` for `-`) starts a new one.
                    let same_kind = matches!(previous,
                        Some(Block::List { start: p, .. }) if p.is_some() == start.is_some());
                    other_marker = same_kind && !other_marker;
                    list(&mut s, *start, items, depth, other_marker);
                }
                _ => write_block(&mut s, b, depth),
            }
            previous = Some(b);
            s
        })
        .collect();
    parts.join("\n\n")
}

/// `text` with `first` before its first line and `rest` before the others (empty lines get
/// `rest` trimmed, so no trailing spaces are written).
fn prefix_lines(text: &str, first_and_rest: &str, empty: &str) -> String {
    text.split('\n')
        .map(|l| {
            if l.is_empty() {
                empty.to_owned()
            } else {
                format!("{first_and_rest}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn code_block(out: &mut String, lang: Option<&str>, text: &str) {
    let longest = longest_run(text, '`');
    let fence = "`".repeat((longest + 1).max(3));
    out.push_str(&fence);
    if let Some(lang) = lang.and_then(clean_lang) {
        out.push_str(&lang);
    }
    out.push('\n');
    out.push_str(text);
    out.push('\n');
    out.push_str(&fence);
}

fn longest_run(text: &str, c: char) -> usize {
    let mut best = 0;
    let mut run = 0;
    for ch in text.chars() {
        if ch == c {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    best
}

fn list(out: &mut String, start: Option<u64>, items: &[Item], depth: usize, other_marker: bool) {
    if depth >= MAX_DEPTH {
        // Deeper than any answer needs: the items as indented text lines.
        let lines: Vec<String> = items
            .iter()
            .map(|i| {
                let mut s = String::new();
                escape_into(&mut s, "◦ ", true);
                s.push_str(&joined(&i.blocks, depth + 1).replace('\n', " "));
                s
            })
            .collect();
        out.push_str(&lines.join("\\\n"));
        return;
    }
    let mut rendered = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut marker = match start {
            // CommonMark allows at most nine digits.
            Some(n) => format!(
                "{}{} ",
                n.saturating_add(i as u64).min(999_999_999),
                if other_marker { ')' } else { '.' }
            ),
            None if other_marker => "+ ".to_owned(),
            None => "- ".to_owned(),
        };
        let pad = " ".repeat(marker.len());
        match item.checked {
            Some(true) => marker.push_str("[x] "),
            Some(false) => marker.push_str("[ ] "),
            None => {}
        }
        let body = joined(&item.blocks, depth + 1);
        let mut lines = body.split('\n');
        // A block's syntax (a fence, a heading, a nested list) may follow a list marker but not
        // a checkbox: after `[x] ` it would be read as paragraph text, so such a block starts
        // on the next line.
        let block_first = item.checked.is_some()
            && !matches!(item.blocks.first(), None | Some(Block::Paragraph(_)));
        let first = if block_first {
            ""
        } else {
            lines.next().unwrap_or_default()
        };
        let mut s = format!("{marker}{first}").trim_end().to_owned();
        for l in lines {
            s.push('\n');
            if !l.is_empty() {
                s.push_str(&pad);
                s.push_str(l);
            }
        }
        rendered.push(s);
    }
    // A loose list (blank lines between items) when an item has several blocks, so those
    // blocks stay in their item.
    let loose = items.iter().any(|i| i.blocks.len() > 1);
    out.push_str(&rendered.join(if loose { "\n\n" } else { "\n" }));
}

fn table(out: &mut String, t: &Table) {
    let columns = t.columns();
    let row = |cells: &[Vec<Inline>]| -> String {
        let parts: Vec<String> = (0..columns)
            .map(|i| {
                let mut s = String::new();
                if let Some(c) = cells.get(i) {
                    inline_all(
                        &mut s,
                        c,
                        Ctx {
                            in_table: true,
                            ..Ctx::default()
                        },
                    );
                }
                s
            })
            .collect();
        format!("| {} |", parts.join(" | "))
    };
    out.push_str(&row(&t.head));
    out.push('\n');
    let seps: Vec<&str> = (0..columns)
        .map(|i| match t.aligns.get(i).copied().unwrap_or(Align::None) {
            Align::None => "---",
            Align::Left => ":---",
            Align::Center => ":---:",
            Align::Right => "---:",
        })
        .collect();
    out.push_str(&format!("| {} |", seps.join(" | ")));
    for r in &t.rows {
        out.push('\n');
        out.push_str(&row(r));
    }
}

/// Where inline content is written.
#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Inside a link's text (links cannot nest).
    in_link: bool,
    /// Inside a table cell (`|` splits cells, even in code; breaks end rows).
    in_table: bool,
}

fn inline_all(out: &mut String, inlines: &[Inline], ctx: Ctx) {
    for i in as_written(inlines, ctx) {
        inline(out, &i, ctx);
    }
}

/// Where a link leads in rich Markdown, if it is written as a link at all.
fn link_target(url: &str, ctx: Ctx) -> Option<String> {
    rich_target(url).filter(|_| !ctx.in_link)
}

/// The inlines in the order they reach the output: a link written as its bare content gives
/// that content in its place, and what writes nothing (empty text, empty code, empty
/// formatting) is left out. Code spans that then touch are one span: Markdown cannot write
/// two side by side, the closing fence of one and the opening fence of the next would be a
/// single backtick run (`` `a``b` `` is one span, not two), and one monospace run shows the
/// same.
fn as_written(inlines: &[Inline], ctx: Ctx) -> Vec<Cow<'_, Inline>> {
    fn splice<'a>(inlines: &'a [Inline], ctx: Ctx, flat: &mut Vec<Cow<'a, Inline>>) {
        for i in inlines {
            match i {
                Inline::Link { url, content } if link_target(url, ctx).is_none() => {
                    splice(content, ctx, flat);
                }
                // Written as nothing, it would not keep code spans on either side apart.
                Inline::Text(t) | Inline::Code(t) if t.is_empty() => {}
                Inline::Emph(c) | Inline::Strong(c) | Inline::Strike(c) if c.is_empty() => {}
                Inline::Code(t) => match flat.last_mut() {
                    Some(last) if matches!(**last, Inline::Code(_)) => {
                        if let Inline::Code(previous) = last.to_mut() {
                            previous.push_str(t);
                        }
                    }
                    _ => flat.push(Cow::Borrowed(i)),
                },
                _ => flat.push(Cow::Borrowed(i)),
            }
        }
    }
    let mut flat = Vec::with_capacity(inlines.len());
    splice(inlines, ctx, &mut flat);
    flat
}

fn inline(out: &mut String, i: &Inline, ctx: Ctx) {
    match i {
        Inline::Text(t) => {
            let at_line_start = out.is_empty() || out.ends_with('\n');
            escape_into(out, t, at_line_start || line_is_digits(out));
        }
        Inline::Code(t) => code_span(out, t, ctx.in_table),
        Inline::Emph(c) => tagged(out, "i", c, ctx),
        Inline::Strong(c) => tagged(out, "b", c, ctx),
        Inline::Strike(c) => tagged(out, "s", c, ctx),
        Inline::Link { url, content } => match link_target(url, ctx) {
            Some(target) => {
                out.push('[');
                inline_all(
                    out,
                    content,
                    Ctx {
                        in_link: true,
                        ..ctx
                    },
                );
                out.push_str("](<");
                out.push_str(&target);
                out.push_str(">)");
            }
            None => inline_all(out, content, ctx),
        },
        Inline::Image { url, alt } => {
            let text = format!("{IMAGE_MARK}{}", if alt.is_empty() { url } else { alt });
            match link_target(url, ctx) {
                Some(target) => {
                    out.push('[');
                    escape_into(out, &text, false);
                    out.push_str("](<");
                    out.push_str(&target);
                    out.push_str(">)");
                }
                None => escape_into(out, &text, false),
            }
        }
        Inline::Break if ctx.in_table => out.push(' '),
        Inline::Break => out.push('\n'),
        Inline::FootnoteRef(label) => escape_into(out, &format!("[^{label}]"), false),
    }
}

/// `<tag>content</tag>`. A line break the content starts with goes before the tag: a line
/// that is only an opening tag would start an HTML block.
fn tagged(out: &mut String, tag: &str, content: &[Inline], ctx: Ctx) {
    let breaks = content
        .iter()
        .take_while(|i| matches!(i, Inline::Break))
        .count();
    for _ in 0..breaks {
        inline(out, &Inline::Break, ctx);
    }
    let content = &content[breaks..];
    if content.is_empty() {
        return;
    }
    out.push('<');
    out.push_str(tag);
    out.push('>');
    inline_all(out, content, ctx);
    out.push_str("</");
    out.push_str(tag);
    out.push('>');
}

fn code_span(out: &mut String, text: &str, in_table: bool) {
    if text.is_empty() {
        return;
    }
    let text = if in_table {
        text.replace('|', "\\|")
    } else {
        text.to_owned()
    };
    let fence = "`".repeat(longest_run(&text, '`') + 1);
    // CommonMark strips one space at each end when both are there, and a backtick next to
    // the fence would merge with it: pad in those cases.
    let pad = text.starts_with('`')
        || text.ends_with('`')
        || (text.starts_with(' ') && text.ends_with(' ') && !text.trim().is_empty());
    out.push_str(&fence);
    if pad {
        out.push(' ');
    }
    out.push_str(&text);
    if pad {
        out.push(' ');
    }
    out.push_str(&fence);
}

/// Whether the current output line holds only digits (so a `.` or `)` would make it a list
/// marker).
fn line_is_digits(out: &str) -> bool {
    let line = out.rsplit('\n').next().unwrap_or(out);
    line.bytes().all(|b| b.is_ascii_digit())
}

/// Writes `text` escaped: ASCII punctuation that can mean something in Telegram's dialect gets
/// a backslash; `.` and `)` do where they could end a list marker.
fn escape_into(out: &mut String, text: &str, mut marker_context: bool) {
    // Spaces at the start of a line are indentation to Markdown (four make the rest a code
    // block: a list item whose text began with control characters, cleaned to spaces, showed
    // its escapes literally); as character references they are text.
    let mut line_start = marker_context;
    for c in text.chars() {
        match c {
            ' ' if line_start => out.push_str("&#32;"),
            '\t' if line_start => out.push_str("&#9;"),
            '\\' | '`' | '*' | '_' | '{' | '}' | '[' | ']' | '<' | '>' | '(' | '#' | '+' | '-'
            | '!' | '|' | '~' | '=' | '$' | '&' | '^' => {
                out.push('\\');
                out.push(c);
            }
            '.' | ')' if marker_context => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
        marker_context = match c {
            '\n' => true,
            d if d.is_ascii_digit() => marker_context,
            _ => false,
        };
        line_start = match c {
            '\n' => true,
            ' ' | '\t' => line_start,
            _ => false,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    fn rich(md: &str) -> String {
        parse(md).iter().map(block).collect::<Vec<_>>().join("\n\n")
    }

    #[test]
    fn dialect_characters_are_escaped() {
        assert_eq!(
            rich("costs $5 and $10, a == b || c"),
            "costs \\$5 and \\$10, a \\=\\= b \\|\\| c"
        );
        assert_eq!(rich("1\\. not a list"), "1\\. not a list");
        assert_eq!(rich("**a**b"), "<b>a</b>b");
    }

    /// Found by the markdown fuzz target: `- [x] ```` reads as a paragraph of backticks.
    #[test]
    fn a_task_item_that_opens_with_a_block_puts_the_block_under_its_checkbox() {
        assert_eq!(
            rich("- [x] \n  ```\n  a\n  ```\n"),
            "- [x]\n  ```\n  a\n  ```"
        );
        assert_eq!(rich("- [ ] \n  - sub\n"), "- [ ]\n  - sub");
        assert_eq!(rich("- [x] done\n"), "- [x] done");
    }

    /// The code spans a Markdown reader finds in `rich`.
    fn code_read_back(rich: &str) -> Vec<String> {
        pulldown_cmark::Parser::new(rich)
            .filter_map(|e| match e {
                pulldown_cmark::Event::Code(t) => Some(t.into_string()),
                _ => None,
            })
            .collect()
    }

    /// Found by the markdown fuzz target: two code spans with nothing written between them
    /// (a link that is no rich target is written as its bare content; a U+2028 between them
    /// is removed as Telegram removes it) had their fences read as one backtick run, which
    /// showed backticks that are not in the text.
    #[test]
    fn code_spans_that_touch_are_one_span() {
        let out = rich("[`a()`](https:)`. b[`");
        assert_eq!(out, "`a(). b[`");
        assert_eq!(code_read_back(&out), ["a(). b["]);
        assert_eq!(code_read_back(&rich("`a`[`b`](./relative)")), ["ab"]);
        let out = rich("> a `b`\u{2028}` ``` ` c\n");
        assert_eq!(out, "> a ```` b``` ```` c");
        assert_eq!(code_read_back(&out), ["b```"]);
        let out = rich("`a`\u{2028}`` ` ``");
        assert_eq!(out, "`` a` ``");
        assert_eq!(code_read_back(&out), ["a`"]);
    }

    /// Found by the markdown fuzz target: a link's text that cleaning emptied (a U+2028 in
    /// a link that is no rich target) stayed between two code spans as an empty text, which
    /// writes nothing, and the spans' fences merged.
    #[test]
    fn code_spans_with_only_emptied_text_between_are_one_span() {
        let out = rich("`a`[\u{2028}`c`](./x)");
        assert_eq!(out, "`ac`");
        assert_eq!(code_read_back(&out), ["ac"]);
    }

    #[test]
    fn structure_is_written_back() {
        assert_eq!(rich("- a\n- [x] b\n"), "- a\n- [x] b");
        assert_eq!(rich("3. a\n4. b\n"), "3. a\n4. b");
        assert_eq!(rich("> q\n>\n> r\n"), "> q\n>\n> r");
        assert_eq!(
            rich("| a | b |\n|:-|-:|\n| `x\\|y` | 2 |\n"),
            "| a | b |\n| :--- | ---: |\n| `x\\|y` | 2 |"
        );
        assert_eq!(
            rich("```rust\nlet a = \"```\";\n```\n"),
            "````rust\nlet a = \"```\";\n````"
        );
        assert_eq!(
            rich("see [the *docs*](https://x.example/a_(b))"),
            "see [the <i>docs</i>](<https://x.example/a_(b)>)"
        );
    }
}
