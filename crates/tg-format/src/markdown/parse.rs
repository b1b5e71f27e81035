//! pi's Markdown (GitHub-flavoured) into the document model, with pulldown-cmark.
//!
//! Choices:
//! - no math: models write `$5 and $10` far more often than LaTeX, and a `$` shown as written
//!   is never wrong;
//! - raw HTML is shown as written: a block as an `html` code block, inline HTML as text;
//! - GitHub's extended autolinks (bare `www.`, `https://` and e-mail addresses) are links;
//! - a line break inside a heading is a space (a heading is one line in a chat);
//! - text is normalized the way Telegram stores it (line ends, tabs, the control characters it
//!   drops), so what the person sees is exactly the document's text.

use pulldown_cmark::{
    Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd, TextMergeStream,
};

use super::autolink;
use super::doc::{Align, Block, Inline, Item, Table};

/// The Markdown extensions pi's answers are read with.
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
}

/// Parses Markdown into blocks. Never fails: anything Markdown does not make into structure is
/// text.
pub fn parse(markdown: &str) -> Vec<Block> {
    let source = normalize_line_ends(markdown);
    let mut b = Builder::default();
    // Text in one piece, so that an autolink is found whole.
    for event in TextMergeStream::new(Parser::new_ext(&source, options())) {
        b.event(event);
    }
    b.finish()
}

/// Where [`parse`] reads `markdown` as code (a fenced or indented code block, an inline code
/// span), as byte ranges of `markdown` in order, disjoint. Line ends are read as they are
/// (`\r\n` ends a line for the parser as `\n` does), so the ranges are `markdown`'s own.
pub fn code_ranges(markdown: &str) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        let code = matches!(event, Event::Start(Tag::CodeBlock(_)) | Event::Code(_));
        // Nothing nests in code; a range that is not after the last one is skipped rather
        // than trusted to be.
        if code && out.last().is_none_or(|last| last.end <= range.start) {
            out.push(range);
        }
    }
    out
}

/// `\r\n` and lone `\r` become `\n`.
fn normalize_line_ends(s: &str) -> String {
    if !s.contains('\r') {
        return s.to_owned();
    }
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// Text as Telegram keeps it: characters it removes are removed here, other control characters
/// become spaces, so the document's text is what the person sees. Tabs are expanded to four
/// columns in code (where alignment matters) and become a space elsewhere.
pub(crate) fn clean_text(s: &str, code: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut column = 0usize;
    for c in s.chars() {
        match c {
            '\n' => {
                out.push('\n');
                column = 0;
                continue;
            }
            '\t' if code => {
                let n = 4 - column % 4;
                out.extend(std::iter::repeat_n(' ', n));
                column += n;
                continue;
            }
            '\r' | '\u{2028}'..='\u{202e}' | '\u{30a}' | '\u{333}' | '\u{33f}' => continue,
            '\0'..='\u{1f}' | '\u{7f}' => out.push(' '),
            _ => out.push(c),
        }
        column += 1;
    }
    out
}

/// A link's address without the characters no URL may hold (control characters, and those
/// Telegram removes from text): left in, they broke the HTML piece's attribute.
pub(crate) fn clean_url(s: &str) -> String {
    s.chars()
        .filter(|c| {
            !matches!(c, '\0'..='\u{1f}' | '\u{7f}' | '\u{2028}'..='\u{202e}' | '\u{30a}' | '\u{333}' | '\u{33f}')
        })
        .collect()
}

/// One open container.
enum Frame {
    /// Blocks: the root, a quote, a list item, a footnote. Inline events that arrive directly
    /// (a tight list item) gather in `loose` until the next block.
    Blocks {
        kind: BlocksKind,
        blocks: Vec<Block>,
        loose: Vec<Inline>,
    },
    List {
        start: Option<u64>,
        items: Vec<Item>,
    },
    Inlines {
        kind: InlineKind,
        content: Vec<Inline>,
    },
    Code {
        lang: Option<String>,
        text: String,
    },
    Table {
        table: Table,
        row: Vec<Vec<Inline>>,
        in_head: bool,
    },
}

enum BlocksKind {
    Root,
    Quote,
    Item { checked: Option<bool> },
    Footnote(String),
}

enum InlineKind {
    Paragraph,
    Heading(u8),
    Emph,
    Strong,
    Strike,
    Link(String),
    Image(String),
    Cell,
}

struct Builder {
    stack: Vec<Frame>,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            stack: vec![Frame::Blocks {
                kind: BlocksKind::Root,
                blocks: Vec::new(),
                loose: Vec::new(),
            }],
        }
    }
}

impl Builder {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(end) => self.end(end),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => self.inline(Inline::Code(clean_text(&t, true))),
            Event::Html(t) => self.html_block_text(&t),
            Event::InlineHtml(t) => self.inline(Inline::Text(clean_text(&t, false))),
            Event::SoftBreak | Event::HardBreak => self.inline(Inline::Break),
            Event::Rule => self.block(Block::Rule),
            Event::FootnoteReference(label) => {
                self.inline(Inline::FootnoteRef(clean_text(&label, false)))
            }
            Event::TaskListMarker(done) => {
                if let Some(Frame::Blocks {
                    kind: BlocksKind::Item { checked },
                    ..
                }) = self.stack.last_mut()
                {
                    *checked = Some(done);
                }
            }
            // Not enabled; if they appear anyway, their source is text.
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                self.inline(Inline::Text(clean_text(&t, false)));
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let frame = match tag {
            Tag::Paragraph => Frame::Inlines {
                kind: InlineKind::Paragraph,
                content: Vec::new(),
            },
            Tag::Heading { level, .. } => Frame::Inlines {
                kind: InlineKind::Heading(level as u8),
                content: Vec::new(),
            },
            Tag::BlockQuote(_) => Frame::Blocks {
                kind: BlocksKind::Quote,
                blocks: Vec::new(),
                loose: Vec::new(),
            },
            Tag::CodeBlock(kind) => Frame::Code {
                lang: match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned),
                    CodeBlockKind::Indented => None,
                },
                text: String::new(),
            },
            Tag::HtmlBlock => Frame::Code {
                lang: Some("html".into()),
                text: String::new(),
            },
            Tag::List(start) => Frame::List {
                start,
                items: Vec::new(),
            },
            Tag::Item => Frame::Blocks {
                kind: BlocksKind::Item { checked: None },
                blocks: Vec::new(),
                loose: Vec::new(),
            },
            Tag::FootnoteDefinition(label) => Frame::Blocks {
                kind: BlocksKind::Footnote(clean_text(&label, false)),
                blocks: Vec::new(),
                loose: Vec::new(),
            },
            Tag::Table(aligns) => Frame::Table {
                table: Table {
                    aligns: aligns
                        .into_iter()
                        .map(|a| match a {
                            Alignment::None => Align::None,
                            Alignment::Left => Align::Left,
                            Alignment::Center => Align::Center,
                            Alignment::Right => Align::Right,
                        })
                        .collect(),
                    head: Vec::new(),
                    rows: Vec::new(),
                },
                row: Vec::new(),
                in_head: false,
            },
            Tag::TableHead => {
                if let Some(Frame::Table { in_head, row, .. }) = self.stack.last_mut() {
                    *in_head = true;
                    row.clear();
                }
                return;
            }
            Tag::TableRow => {
                if let Some(Frame::Table { row, .. }) = self.stack.last_mut() {
                    row.clear();
                }
                return;
            }
            Tag::TableCell => Frame::Inlines {
                kind: InlineKind::Cell,
                content: Vec::new(),
            },
            Tag::Emphasis => Frame::Inlines {
                kind: InlineKind::Emph,
                content: Vec::new(),
            },
            Tag::Strong => Frame::Inlines {
                kind: InlineKind::Strong,
                content: Vec::new(),
            },
            Tag::Strikethrough => Frame::Inlines {
                kind: InlineKind::Strike,
                content: Vec::new(),
            },
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => Frame::Inlines {
                // `<foo@bar.example.com>` gives the bare address.
                kind: InlineKind::Link(match link_type {
                    LinkType::Email => format!("mailto:{}", clean_url(&dest_url)),
                    _ => clean_url(&dest_url),
                }),
                content: Vec::new(),
            },
            Tag::Image { dest_url, .. } => Frame::Inlines {
                kind: InlineKind::Image(clean_url(&dest_url)),
                content: Vec::new(),
            },
            // Not enabled (definition lists, metadata, sub/superscript): their content is
            // kept as it comes.
            _ => return,
        };
        self.stack.push(frame);
    }

    fn end(&mut self, end: TagEnd) {
        match end {
            TagEnd::TableHead => {
                if let Some(Frame::Table {
                    table,
                    row,
                    in_head,
                }) = self.stack.last_mut()
                {
                    table.head = std::mem::take(row);
                    *in_head = false;
                }
                return;
            }
            TagEnd::TableRow => {
                if let Some(Frame::Table { table, row, .. }) = self.stack.last_mut() {
                    table.rows.push(std::mem::take(row));
                }
                return;
            }
            TagEnd::Paragraph
            | TagEnd::Heading(_)
            | TagEnd::BlockQuote(_)
            | TagEnd::CodeBlock
            | TagEnd::HtmlBlock
            | TagEnd::List(_)
            | TagEnd::Item
            | TagEnd::FootnoteDefinition
            | TagEnd::Table
            | TagEnd::TableCell
            | TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Link
            | TagEnd::Image => {}
            _ => return,
        }
        // The root never closes; an unbalanced end (never from pulldown) is ignored.
        if self.stack.len() < 2 {
            return;
        }
        let Some(frame) = self.stack.pop() else {
            return;
        };
        self.close(frame);
    }

    fn close(&mut self, frame: Frame) {
        match frame {
            Frame::Blocks {
                kind,
                mut blocks,
                loose,
            } => {
                if !loose.is_empty() {
                    blocks.push(Block::Paragraph(loose));
                }
                match kind {
                    BlocksKind::Root => {}
                    BlocksKind::Quote => self.block(Block::Quote(blocks)),
                    BlocksKind::Item { checked } => {
                        if let Some(Frame::List { items, .. }) = self.stack.last_mut() {
                            items.push(Item { checked, blocks });
                        }
                    }
                    BlocksKind::Footnote(label) => self.block(Block::Footnote { label, blocks }),
                }
            }
            Frame::List { start, items } => self.block(Block::List { start, items }),
            Frame::Code { lang, mut text } => {
                while text.ends_with('\n') {
                    text.pop();
                }
                self.block(Block::Code { lang, text });
            }
            Frame::Table { table, .. } => self.block(Block::Table(table)),
            Frame::Inlines { kind, content } => match kind {
                InlineKind::Paragraph => {
                    if !content.is_empty() {
                        self.block(Block::Paragraph(content));
                    }
                }
                InlineKind::Heading(level) => self.block(Block::Heading {
                    level,
                    content: unbroken(content),
                }),
                InlineKind::Cell => {
                    if let Some(Frame::Table { row, .. }) = self.stack.last_mut() {
                        row.push(content);
                    }
                }
                InlineKind::Emph => self.inline(Inline::Emph(content)),
                InlineKind::Strong => self.inline(Inline::Strong(content)),
                InlineKind::Strike => self.inline(Inline::Strike(content)),
                InlineKind::Link(url) => {
                    // A link without text shows nothing in HTML and its address in Telegram's
                    // rich Markdown: its address is its text, the same in every rendering.
                    let content = if super::doc::inline_text(&content).trim().is_empty() {
                        vec![Inline::Text(clean_text(&url, false))]
                    } else {
                        content
                    };
                    self.inline(Inline::Link { url, content })
                }
                InlineKind::Image(url) => {
                    let alt = alt_text(&content);
                    self.inline(Inline::Image { url, alt });
                }
            },
        }
    }

    fn text(&mut self, t: &str) {
        if let Some(Frame::Code { text, .. }) = self.stack.last_mut() {
            text.push_str(&clean_text(t, true));
            return;
        }
        let text = clean_text(t, false);
        let in_link = self.stack.iter().any(|f| {
            matches!(
                f,
                Frame::Inlines {
                    kind: InlineKind::Link(_) | InlineKind::Image(_),
                    ..
                }
            )
        });
        if in_link {
            self.inline(Inline::Text(text));
            return;
        }
        let found = autolink::find(&text, self.char_before());
        let mut at = 0;
        for f in found {
            if f.range.start > at {
                self.inline(Inline::Text(text[at..f.range.start].to_owned()));
            }
            self.inline(Inline::Link {
                url: f.url,
                content: vec![Inline::Text(text[f.range.clone()].to_owned())],
            });
            at = f.range.end;
        }
        if at < text.len() {
            self.inline(Inline::Text(text[at..].to_owned()));
        }
    }

    /// The character before new text in the open inline content, `None` at the start of a line
    /// (an autolink may start there); anything that is not text counts as a letter.
    fn char_before(&self) -> Option<char> {
        let content = match self.stack.last()? {
            // Right after `*`, `_` or `~`: a boundary.
            Frame::Inlines {
                kind: InlineKind::Emph | InlineKind::Strong | InlineKind::Strike,
                content,
            } if content.is_empty() => return Some('*'),
            Frame::Inlines { content, .. } => content,
            Frame::Blocks { loose, .. } => loose,
            _ => return None,
        };
        match content.last() {
            None | Some(Inline::Break) => None,
            Some(Inline::Text(t)) => t.chars().next_back(),
            Some(_) => Some('x'),
        }
    }

    fn html_block_text(&mut self, t: &str) {
        match self.stack.last_mut() {
            Some(Frame::Code { text, .. }) => text.push_str(&clean_text(t, true)),
            _ => self.inline(Inline::Text(clean_text(t, false))),
        }
    }

    fn inline(&mut self, inline: Inline) {
        match self.stack.last_mut() {
            Some(Frame::Inlines { content, .. }) => push_inline(content, inline),
            Some(Frame::Blocks { loose, .. }) => push_inline(loose, inline),
            // Inline content where no inline content can be (never from pulldown): dropped
            // rather than misplaced.
            _ => {}
        }
    }

    fn block(&mut self, block: Block) {
        match self.stack.last_mut() {
            Some(Frame::Blocks { blocks, loose, .. }) => {
                if !loose.is_empty() {
                    blocks.push(Block::Paragraph(std::mem::take(loose)));
                }
                blocks.push(block);
            }
            // A block inside inline content (never from pulldown): its text is kept.
            Some(Frame::Inlines { content, .. }) => {
                content.push(Inline::Text(
                    super::layout::layout(std::slice::from_ref(&block)).text,
                ));
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Vec<Block> {
        while self.stack.len() > 1 {
            if let Some(frame) = self.stack.pop() {
                self.close(frame);
            }
        }
        match self.stack.pop() {
            Some(Frame::Blocks {
                mut blocks, loose, ..
            }) => {
                if !loose.is_empty() {
                    blocks.push(Block::Paragraph(loose));
                }
                blocks
            }
            _ => Vec::new(),
        }
    }
}

/// Inline content with its line breaks as spaces.
fn unbroken(content: Vec<Inline>) -> Vec<Inline> {
    let mut out = Vec::with_capacity(content.len());
    for i in content {
        let i = match i {
            Inline::Break => Inline::Text(" ".into()),
            Inline::Emph(c) => Inline::Emph(unbroken(c)),
            Inline::Strong(c) => Inline::Strong(unbroken(c)),
            Inline::Strike(c) => Inline::Strike(unbroken(c)),
            Inline::Link { url, content } => Inline::Link {
                url,
                content: unbroken(content),
            },
            other => other,
        };
        push_inline(&mut out, i);
    }
    out
}

/// An image's alternative text: the plain text of its description (an image in it gives its
/// own alternative text, as in HTML's `alt`).
fn alt_text(content: &[Inline]) -> String {
    let mut out = String::new();
    for i in content {
        match i {
            Inline::Text(t) | Inline::Code(t) => out.push_str(t),
            Inline::Emph(c) | Inline::Strong(c) | Inline::Strike(c) => out.push_str(&alt_text(c)),
            Inline::Link { content, .. } => out.push_str(&alt_text(content)),
            Inline::Image { alt, .. } => out.push_str(alt),
            Inline::Break => out.push(' '),
            Inline::FootnoteRef(label) => out.push_str(&format!("[^{label}]")),
        }
    }
    out
}

/// Appends, merging adjacent text.
fn push_inline(content: &mut Vec<Inline>, inline: Inline) {
    if let (Some(Inline::Text(last)), Inline::Text(t)) = (content.last_mut(), &inline) {
        last.push_str(t);
        return;
    }
    content.push(inline);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Inline {
        Inline::Text(s.into())
    }

    #[test]
    fn structure_comes_out_typed() {
        let doc = parse(
            "# Title\n\nSome **bold** and `code`.\n\n- a\n- [x] b\n\n| h | i |\n|:-|-:|\n| 1 | 2 |\n\n```rust\nfn x() {}\n```\n",
        );
        assert_eq!(
            doc[0],
            Block::Heading {
                level: 1,
                content: vec![text("Title")]
            }
        );
        assert_eq!(
            doc[1],
            Block::Paragraph(vec![
                text("Some "),
                Inline::Strong(vec![text("bold")]),
                text(" and "),
                Inline::Code("code".into()),
                text("."),
            ])
        );
        let Block::List { start: None, items } = &doc[2] else {
            panic!("{:?}", doc[2]);
        };
        assert_eq!(items[1].checked, Some(true));
        assert_eq!(items[0].blocks, vec![Block::Paragraph(vec![text("a")])]);
        let Block::Table(t) = &doc[3] else {
            panic!("{:?}", doc[3]);
        };
        assert_eq!(t.aligns, vec![Align::Left, Align::Right]);
        assert_eq!(t.rows.len(), 1);
        assert_eq!(
            doc[4],
            Block::Code {
                lang: Some("rust".into()),
                text: "fn x() {}".into()
            }
        );
    }

    #[test]
    fn dollars_html_and_control_characters_are_text() {
        let doc =
            parse("costs $5 and $10, use <div>\tnow\r\n\r\n<details>\n<b>x</b>\n</details>\n");
        assert_eq!(
            doc[0],
            Block::Paragraph(vec![text("costs $5 and $10, use <div> now")])
        );
        assert!(
            matches!(&doc[1], Block::Code { lang: Some(l), text } if l == "html" && text.contains("<b>x</b>"))
        );
    }

    #[test]
    fn tabs_in_code_keep_their_columns() {
        assert_eq!(clean_text("a\tb\n\tc", true), "a   b\n    c");
        assert_eq!(clean_text("x\u{202b}y\u{7}", false), "xy ");
    }
}
