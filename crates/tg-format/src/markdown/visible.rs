//! What a person sees of a document, written independently of the renderer: the model the
//! renderer's tests and the Markdown fuzz target check every piece against. It follows
//! tg-fake's rich `plain_text` rules and the renderer's documented choices (lists and quotes
//! stop nesting at ten levels, wide tables become a grid), not the renderer's code.

use super::doc::{Block, inline_text};
use super::layout;
use super::to_rich::MAX_COLUMNS;

/// Nesting levels of lists and quotes kept (the renderer's documented limit).
const MAX_DEPTH: usize = 10;

/// The text tg-fake's rich parser shows for these blocks (its `plain_text` rules: blocks on
/// their own lines, list items as `- ` or `N. `, table cells separated by tabs).
pub fn rich_visible(blocks: &[Block]) -> String {
    let mut lines = Vec::new();
    for b in blocks {
        rich_lines(b, &mut lines, 0);
    }
    lines.join("\n")
}

fn rich_lines(b: &Block, lines: &mut Vec<String>, depth: usize) {
    match b {
        Block::Paragraph(i) | Block::Heading { content: i, .. } => lines.push(inline_text(i)),
        Block::Code { text, .. } => lines.push(text.clone()),
        Block::Quote(blocks) => {
            let inner = if depth < MAX_DEPTH { depth + 1 } else { depth };
            blocks.iter().for_each(|b| rich_lines(b, lines, inner));
        }
        Block::List { start, items } if depth < MAX_DEPTH => {
            for (n, item) in items.iter().enumerate() {
                let mut prefix = match start {
                    Some(s) => format!("{}. ", s.saturating_add(n as u64).min(999_999_999)),
                    None => "- ".into(),
                };
                match item.checked {
                    Some(true) => prefix.push_str("[x] "),
                    Some(false) => prefix.push_str("[ ] "),
                    None => {}
                }
                let mut inner = Vec::new();
                item.blocks
                    .iter()
                    .for_each(|b| rich_lines(b, &mut inner, depth + 1));
                lines.push(format!("{prefix}{}", inner.join("\n")));
            }
        }
        Block::List { items, .. } => {
            let text: Vec<String> = items
                .iter()
                .map(|i| {
                    let mut inner = Vec::new();
                    i.blocks
                        .iter()
                        .for_each(|b| rich_lines(b, &mut inner, depth + 1));
                    format!("◦ {}", inner.join(" "))
                })
                .collect();
            lines.push(text.join("\n"));
        }
        Block::Table(t) if t.columns() > MAX_COLUMNS || t.columns() == 0 => {
            lines.push(layout::grid(t))
        }
        Block::Table(t) => {
            for row in std::iter::once(&t.head).chain(&t.rows) {
                let cells: Vec<String> = (0..t.columns())
                    .map(|i| {
                        row.get(i)
                            .map(|c| inline_text(c).replace('\n', " "))
                            .unwrap_or_default()
                    })
                    .collect();
                lines.push(cells.join("\t"));
            }
        }
        Block::Rule => lines.push("---".into()),
        Block::Footnote { label, blocks } => {
            let mut inner = Vec::new();
            blocks
                .iter()
                .for_each(|b| rich_lines(b, &mut inner, depth + 1));
            lines.push(format!("[^{label}]: {}", inner.join("\n")));
        }
    }
}

/// The words of blocks: every text and code character, without any markers or layout.
pub fn words(blocks: &[Block]) -> String {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            Block::Paragraph(i) | Block::Heading { content: i, .. } => out.push(inline_text(i)),
            Block::Code { text, .. } => out.push(text.clone()),
            Block::Quote(inner) | Block::Footnote { blocks: inner, .. } => out.push(words(inner)),
            Block::List { items, .. } => {
                for i in items {
                    out.push(words(&i.blocks));
                }
            }
            Block::Table(t) => {
                for row in std::iter::once(&t.head).chain(&t.rows) {
                    for c in row {
                        out.push(inline_text(c));
                    }
                }
            }
            Block::Rule => {}
        }
    }
    out.join(" ")
}
