//! The renderer: pi's Markdown as Telegram messages.
//!
//! ```text
//! markdown --parse--> [doc::Block]  --to_rich--> rich Markdown pieces (sendRichMessage)
//!                                   --layout---> Styled --split--> HTML pieces (parse_mode HTML)
//!                                                                  + their visible text (plain)
//! ```
//!
//! Every form comes from the same document, so a refused rich piece falls back to the HTML
//! pieces of the same blocks, and HTML to their plain text, without losing or repeating a word.
//! Pieces are within Telegram's limits after parsing: [`TEXT_LIMIT`] UTF-16 units of visible
//! text for HTML and plain text; [`RichBudget`] for rich messages.

pub mod autolink;
pub mod doc;
pub mod layout;
pub mod parse;
pub mod preview;
pub mod styled;
pub mod to_rich;
pub mod visible;

use doc::Block;

/// Telegram's message text limit, in UTF-16 code units after entity parsing.
pub const TEXT_LIMIT: usize = 4096;

/// How much of Telegram's rich message limits one piece may use (a margin below the 32768
/// characters and 500 blocks the Bot API allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RichBudget {
    /// Characters of text content.
    pub chars: usize,
    /// Blocks, counting nested blocks, list items and table rows.
    pub blocks: usize,
}

impl Default for RichBudget {
    fn default() -> Self {
        Self {
            chars: 30_000,
            blocks: 450,
        }
    }
}

/// A text message: Telegram HTML, and the plain text it shows (the last fallback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextPiece {
    /// For `parse_mode: HTML`.
    pub html: String,
    /// What the person sees; sent as is when HTML is refused.
    pub plain: String,
}

/// A rich message and the text messages that say the same if it is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RichPiece {
    /// For `InputRichMessage.markdown`.
    pub markdown: String,
    /// The same blocks as HTML pieces.
    pub fallback: Vec<TextPiece>,
    /// The blocks it shows (a block too big for one message is cut into several).
    pub blocks: Vec<Block>,
}

/// Renders `markdown` as HTML pieces of at most `limit` UTF-16 units of visible text.
pub fn render_html(markdown: &str, limit: usize) -> Vec<TextPiece> {
    html_pieces(&parse::parse(markdown), limit)
}

/// Renders `markdown` as rich pieces within `budget`, each with its HTML fallback (pieces of
/// at most `limit` units).
pub fn render_rich(markdown: &str, limit: usize, budget: &RichBudget) -> Vec<RichPiece> {
    let blocks = parse::parse(markdown);
    group(blocks, budget)
        .into_iter()
        .map(|blocks| RichPiece {
            markdown: to_rich::blocks(&blocks),
            fallback: html_pieces(&blocks, limit),
            blocks,
        })
        .filter(|p| !p.fallback.is_empty())
        .collect()
}

fn html_pieces(blocks: &[Block], limit: usize) -> Vec<TextPiece> {
    styled::split(&layout::layout(blocks), limit)
        .into_iter()
        .map(|s| TextPiece {
            html: s.to_html(),
            plain: s.text,
        })
        .collect()
}

/// Whether `markdown` shows nothing once rendered (a lone link definition, an empty fence,
/// `>` or `## ` alone): sent as it is, the person would get no message at all.
pub fn shows_nothing(markdown: &str) -> bool {
    layout::layout(&parse::parse(markdown))
        .text
        .trim()
        .is_empty()
}

/// Characters of text content and blocks a block counts for in a rich message.
pub fn rich_metrics(b: &Block) -> (usize, usize) {
    match b {
        Block::Paragraph(i) | Block::Heading { content: i, .. } => {
            (doc::inline_text(i).chars().count(), 1)
        }
        Block::Code { text, .. } => (text.chars().count(), 1),
        Block::Quote(blocks) => sum(blocks, 1),
        Block::List { items, .. } => items.iter().fold((0, 1), |(c, n), item| {
            let (ic, inn) = sum(&item.blocks, 1);
            (c + ic, n + inn)
        }),
        Block::Table(t) if t.columns() > to_rich::MAX_COLUMNS => {
            (layout::grid(t).chars().count(), 1)
        }
        Block::Table(t) => {
            let chars: usize = t
                .rows
                .iter()
                .chain([&t.head])
                .flat_map(|r| r.iter().map(|c| doc::inline_text(c).chars().count()))
                .sum();
            (chars, 1 + 1 + t.rows.len())
        }
        Block::Rule => (0, 1),
        Block::Footnote { label, blocks } => {
            let (c, n) = sum(blocks, 1);
            (c + label.chars().count() + 5, n)
        }
    }
}

fn sum(blocks: &[Block], own: usize) -> (usize, usize) {
    blocks
        .iter()
        .map(rich_metrics)
        .fold((0, own), |(c, n), (bc, bn)| (c + bc, n + bn))
}

/// Groups blocks into rich pieces within `budget`, cutting blocks that alone exceed it.
fn group(blocks: Vec<Block>, budget: &RichBudget) -> Vec<Vec<Block>> {
    let fitted = blocks.into_iter().flat_map(|b| fit(b, budget)).collect();
    group_fitted(fitted, budget)
}

/// Groups blocks that each fit `budget` already. [`fit`] calls this for a quote's content,
/// which it has fitted itself: fitting it again made every level of nested quotes fit its
/// content twice (2^depth calls; a hundred `>` never finished).
fn group_fitted(blocks: Vec<Block>, budget: &RichBudget) -> Vec<Vec<Block>> {
    let mut out: Vec<Vec<Block>> = Vec::new();
    let mut current = Vec::new();
    let (mut chars, mut count) = (0, 0);
    for b in blocks {
        let (c, n) = rich_metrics(&b);
        if !current.is_empty() && (chars + c > budget.chars || count + n > budget.blocks) {
            out.push(std::mem::take(&mut current));
            chars = 0;
            count = 0;
        }
        chars += c;
        count += n;
        current.push(b);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A block cut into blocks that each fit `budget`.
fn fit(b: Block, budget: &RichBudget) -> Vec<Block> {
    let (c, n) = rich_metrics(&b);
    if c <= budget.chars && n <= budget.blocks {
        return vec![b];
    }
    match b {
        Block::Code { lang, text } => chunk_lines(&text, budget.chars)
            .into_iter()
            .map(|text| Block::Code {
                lang: lang.clone(),
                text,
            })
            .collect(),
        Block::List { start, items } => {
            let mut out = Vec::new();
            let mut chunk: Vec<doc::Item> = Vec::new();
            let mut first = 0u64;
            let (mut cc, mut cn) = (0, 1);
            for (i, item) in items.into_iter().enumerate() {
                let (ic, inn) = sum(&item.blocks, 1);
                if !chunk.is_empty() && (cc + ic > budget.chars || cn + inn > budget.blocks) {
                    out.push(Block::List {
                        start: start.map(|s| s.saturating_add(first)),
                        items: std::mem::take(&mut chunk),
                    });
                    first = i as u64;
                    cc = 0;
                    cn = 1;
                }
                if ic > budget.chars || inn + 1 > budget.blocks {
                    // One item alone is too big: its blocks, without the list around them.
                    out.extend(item.blocks.into_iter().flat_map(|b| fit(b, budget)));
                    first = i as u64 + 1;
                    continue;
                }
                cc += ic;
                cn += inn;
                chunk.push(item);
            }
            if !chunk.is_empty() {
                out.push(Block::List {
                    start: start.map(|s| s.saturating_add(first)),
                    items: chunk,
                });
            }
            out
        }
        Block::Table(t) if t.columns() <= to_rich::MAX_COLUMNS => {
            let per_row: Vec<usize> = t
                .rows
                .iter()
                .map(|r| r.iter().map(|c| doc::inline_text(c).chars().count()).sum())
                .collect();
            let head_chars: usize = t
                .head
                .iter()
                .map(|c| doc::inline_text(c).chars().count())
                .sum();
            let mut out = Vec::new();
            let mut rows = Vec::new();
            let mut cc = head_chars;
            for (row, rc) in t.rows.into_iter().zip(per_row) {
                if !rows.is_empty() && (cc + rc > budget.chars || rows.len() + 3 > budget.blocks) {
                    out.push(Block::Table(doc::Table {
                        aligns: t.aligns.clone(),
                        head: t.head.clone(),
                        rows: std::mem::take(&mut rows),
                    }));
                    cc = head_chars;
                }
                cc += rc;
                rows.push(row);
            }
            if !rows.is_empty() {
                out.push(Block::Table(doc::Table {
                    aligns: t.aligns,
                    head: t.head,
                    rows,
                }));
            }
            out
        }
        Block::Quote(blocks) => {
            let inner: Vec<Block> = blocks.into_iter().flat_map(|b| fit(b, budget)).collect();
            group_fitted(inner, budget)
                .into_iter()
                .map(Block::Quote)
                .collect()
        }
        // Text too long for one message (tens of thousands of characters in one paragraph):
        // cut into paragraphs of its text.
        other => {
            let text = layout::layout(std::slice::from_ref(&other)).text;
            chunk_words(&text, budget.chars)
                .into_iter()
                .map(|t| Block::Paragraph(vec![doc::Inline::Text(t)]))
                .collect()
        }
    }
}

/// Lines of `text` in chunks of at most `max` characters (a longer line is cut).
fn chunk_lines(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut count = 0;
    for line in text.split('\n') {
        let n = line.chars().count();
        if n > max {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
                count = 0;
            }
            let chars: Vec<char> = line.chars().collect();
            out.extend(chars.chunks(max).map(|c| c.iter().collect::<String>()));
            continue;
        }
        if !current.is_empty() && count + n + 1 > max {
            out.push(std::mem::take(&mut current));
            count = 0;
        }
        if !current.is_empty() {
            current.push('\n');
            count += 1;
        }
        current.push_str(line);
        count += n;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `text` in chunks of at most `max` characters, cut at whitespace where possible.
fn chunk_words(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let fit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        if fit == rest.len() {
            out.push(rest.to_owned());
            break;
        }
        let cut = rest[..fit]
            .rfind(char::is_whitespace)
            .filter(|i| *i > fit / 2)
            .unwrap_or(fit);
        out.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].trim_start();
    }
    out
}
