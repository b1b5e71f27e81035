//! The markdown form: pulldown-cmark events driving the builder.
//!
//! CommonMark with GitHub's extensions (tables, strikethrough, task lists, footnotes) and
//! `$math$`; `==marked==` and `||spoiler||`, which pulldown-cmark does not know, are found in
//! the text here. HTML in the markdown goes through the html form's tokenizer.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

use super::builder::Builder;
use super::containers::{Container, Kind};
use super::inline::{Closer, FrameKind, TextKind, href_kind};
use super::limits::{Limits, Result, RichError};
use super::model::{Block, RichText, Style};

/// Consecutive markdown text events, joined so that a `==` or `||` split across events is
/// still found.
#[derive(Default)]
struct PendingText {
    text: String,
    /// Byte offsets in `text` of characters that came from escapes or entities.
    protected: Vec<usize>,
}

impl PendingText {
    fn push(&mut self, text: &str, source: &str, range: std::ops::Range<usize>) {
        let base = self.text.len();
        if source.get(range.clone()) == Some(text) {
            // An escape ends the previous event; the escaped character starts this one.
            if range.start > 0 && source.as_bytes().get(range.start - 1) == Some(&b'\\') {
                self.protected.push(base);
            }
        } else {
            self.protected.extend((0..text.len()).map(|i| base + i));
        }
        self.text.push_str(text);
    }

    fn flush(&mut self, builder: &mut Builder) -> Result<()> {
        if self.text.is_empty() {
            return Ok(());
        }
        let text = std::mem::take(&mut self.text);
        let protected = std::mem::take(&mut self.protected);
        markdown_text(builder, &text, &protected)
    }
}

fn markdown_options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_MATH
        | Options::ENABLE_GFM
}

/// The blocks of a markdown source.
pub(super) fn to_blocks(source: &str, limits: &Limits) -> Result<Vec<Block>> {
    let mut builder = Builder::new(limits);
    let mut pending = PendingText::default();
    // An HTML block arrives line by line; a tag may span lines, so it is tokenized whole.
    let mut html_block: Option<String> = None;
    for (event, range) in Parser::new_ext(source, markdown_options()).into_offset_iter() {
        if let Event::Text(text) = &event {
            pending.push(text, source, range);
            continue;
        }
        pending.flush(&mut builder)?;
        match event {
            Event::Start(tag) => start_tag(&mut builder, tag, &mut html_block)?,
            Event::End(end) => end_tag(&mut builder, end, &mut html_block)?,
            Event::Code(code) => {
                builder.inline(Style::Code.apply(RichText::Plain(code.to_string())))?;
            }
            Event::InlineMath(math) => builder.inline(RichText::math(math.trim()))?,
            Event::DisplayMath(math) => {
                // A formula block; the paragraph around it, if any, goes on after it.
                let math = math.trim();
                if !math.is_empty() {
                    builder.add_block(Block::MathematicalExpression {
                        expression: math.to_string(),
                    })?;
                }
            }
            Event::Html(html) => match html_block.as_mut() {
                Some(block) => block.push_str(&html),
                None => builder.html_fragment(&html)?,
            },
            Event::InlineHtml(html) => builder.html_fragment(&html)?,
            Event::FootnoteReference(label) => builder.footnote_reference(&label)?,
            Event::SoftBreak | Event::HardBreak => builder.inline_str("\n")?,
            Event::Rule => builder.add_block(Block::Divider)?,
            Event::TaskListMarker(checked) => builder.set_checkbox(checked),
            Event::Text(_) => {}
        }
    }
    pending.flush(&mut builder)?;
    builder.finish()
}

/// Markdown text, where `==marked==` and `||spoiler||` are ours to find. `protected` holds
/// byte offsets of characters that came from escapes or entities and are never markers.
fn markdown_text(builder: &mut Builder, s: &str, protected: &[usize]) -> Result<()> {
    if builder.in_raw_block() || (builder.text.is_none() && s.trim().is_empty()) {
        return builder.text_run(s, false);
    }
    let bytes = s.as_bytes();
    let mut last = 0;
    let mut i = 0;
    while i + 1 < bytes.len() {
        let marker = match &bytes[i..i + 2] {
            b"==" => "==",
            b"||" => "||",
            _ => {
                i += 1;
                continue;
            }
        };
        if protected.binary_search(&i).is_ok() || protected.binary_search(&(i + 1)).is_ok() {
            i += 1;
            continue;
        }
        builder.inline_str(&s[last..i])?;
        let block = builder.text_block()?;
        let space_before = s[..i]
            .chars()
            .next_back()
            .map_or_else(|| block.ends_with_space(), char::is_whitespace);
        let space_after = s[i + 2..].chars().next().is_some_and(char::is_whitespace);
        if block.top_is_marker(marker) && !space_before {
            block.close_top(true);
        } else if !space_after {
            builder.open_frame(FrameKind::Marker(marker), Closer::Marker)?;
        } else {
            block.push_str(marker);
        }
        i += 2;
        last = i;
    }
    builder.inline_str(&s[last..])
}

fn start_tag(builder: &mut Builder, tag: Tag, html_block: &mut Option<String>) -> Result<()> {
    let closer = Closer::Md(tag.to_end());
    match tag {
        Tag::Paragraph => builder.start_text(TextKind::Paragraph { implicit: false }, closer),
        Tag::Heading { level, .. } => builder.start_text(TextKind::Heading(level as u8), closer),
        Tag::CodeBlock(kind) => {
            let language = match kind {
                CodeBlockKind::Fenced(info) => info.split_whitespace().next().map(str::to_string),
                CodeBlockKind::Indented => None,
            };
            if language.as_deref() == Some("math") {
                builder.start_text(TextKind::Math, closer)
            } else {
                builder.start_text(
                    TextKind::Pre {
                        language,
                        html: false,
                    },
                    closer,
                )
            }
        }
        Tag::HtmlBlock => {
            builder.finish_text();
            *html_block = Some(String::new());
            Ok(())
        }
        Tag::BlockQuote(_) => builder.push_container(
            Kind::Quote {
                credit: None,
                expandable: false,
            },
            closer,
        ),
        Tag::List(start) => builder.push_container(
            Kind::List {
                ordered: start.is_some(),
                next: start.map_or(1, |s| i64::try_from(s).unwrap_or(i64::MAX)),
                style: None,
                items: Vec::new(),
            },
            closer,
        ),
        Tag::Item => {
            builder.finish_text();
            builder.open_item(None, closer)
        }
        Tag::FootnoteDefinition(label) => builder.push_container(
            Kind::Footnote {
                label: label.to_string(),
            },
            closer,
        ),
        Tag::Table(aligns) => builder.push_container(
            Kind::Table {
                rows: Vec::new(),
                row: None,
                head: false,
                aligns: aligns
                    .iter()
                    .map(|a| match a {
                        Alignment::Center => "center",
                        Alignment::Right => "right",
                        Alignment::None | Alignment::Left => "left",
                    })
                    .collect(),
                caption: None,
                flags: [false; 3],
            },
            closer,
        ),
        Tag::TableHead => builder.start_row(true),
        Tag::TableRow => builder.start_row(false),
        Tag::TableCell => {
            let align = match builder.stack.last() {
                Some(Container {
                    kind: Kind::Table { aligns, row, .. },
                    ..
                }) => aligns
                    .get(row.as_ref().map_or(0, Vec::len))
                    .copied()
                    .unwrap_or("left"),
                _ => "left",
            };
            builder.open_cell(false, align, "top", None, None, closer);
            Ok(())
        }
        Tag::Emphasis => builder.open_frame(FrameKind::Format(Style::Italic), closer),
        Tag::Strong => builder.open_frame(FrameKind::Format(Style::Bold), closer),
        Tag::Strikethrough => builder.open_frame(FrameKind::Format(Style::Strikethrough), closer),
        Tag::Superscript => builder.open_frame(FrameKind::Format(Style::Superscript), closer),
        Tag::Subscript => builder.open_frame(FrameKind::Format(Style::Subscript), closer),
        Tag::Link {
            link_type,
            dest_url,
            ..
        } => {
            let kind = if link_type == LinkType::Email {
                FrameKind::Email(dest_url.to_string())
            } else {
                href_kind(&dest_url)
            };
            builder.open_frame(kind, closer)
        }
        Tag::Image { .. } => Err(RichError::MediaUnsupported),
        Tag::MetadataBlock(_)
        | Tag::DefinitionList
        | Tag::DefinitionListTitle
        | Tag::DefinitionListDefinition => Ok(()),
    }
}

fn end_tag(builder: &mut Builder, end: TagEnd, html_block: &mut Option<String>) -> Result<()> {
    let closer = Closer::Md(end);
    match end {
        TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock => {
            builder.finish_text();
            Ok(())
        }
        TagEnd::HtmlBlock => {
            if let Some(html) = html_block.take() {
                builder.html_fragment(&html)?;
            }
            // Loose text of an HTML block ends with it; an explicit <p> may go on.
            if builder.in_implicit_paragraph() {
                builder.finish_text();
            }
            Ok(())
        }
        TagEnd::BlockQuote(_)
        | TagEnd::List(_)
        | TagEnd::Item
        | TagEnd::FootnoteDefinition
        | TagEnd::Table
        | TagEnd::TableCell => builder.end_container(&closer),
        TagEnd::TableHead | TagEnd::TableRow => builder.end_row(),
        TagEnd::Emphasis
        | TagEnd::Strong
        | TagEnd::Strikethrough
        | TagEnd::Superscript
        | TagEnd::Subscript
        | TagEnd::Link => {
            builder.close_frame(&closer);
            Ok(())
        }
        TagEnd::Image
        | TagEnd::MetadataBlock(_)
        | TagEnd::DefinitionList
        | TagEnd::DefinitionListTitle
        | TagEnd::DefinitionListDefinition => Ok(()),
    }
}
