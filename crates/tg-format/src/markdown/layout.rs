//! The document as a Telegram text message: text with entities (HTML, and its visible text as
//! the plain fallback). Telegram messages have no lists or tables, so those are laid out in
//! text: bullets and numbers, indentation, and tables as aligned monospaced grids.

use unicode_width::UnicodeWidthStr;

use super::doc::{
    Align, Block, IMAGE_MARK, Inline, Item, Table, inline_text, shown_address, text_target,
};
use super::styled::{Style, Styled};

/// Bullets by list depth.
const BULLETS: [&str; 3] = ["•", "◦", "▪"];
/// A thematic break.
pub const RULE: &str = "──────────";

/// Lays out blocks, marking the places between top-level blocks as preferred cuts.
pub fn layout(blocks: &[Block]) -> Styled {
    let mut out = Styled::default();
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            out.push("\n\n");
            out.mark_break();
        }
        block(&mut out, b, &Ctx::default());
    }
    out
}

/// Where a block is.
#[derive(Clone, Default)]
struct Ctx {
    /// List nesting.
    depth: usize,
    /// Inside a quote (Telegram cannot nest them).
    in_quote: bool,
}

fn block(out: &mut Styled, b: &Block, ctx: &Ctx) {
    match b {
        Block::Paragraph(inlines) => inline_all(out, inlines),
        Block::Heading { content, .. } => {
            let o = out.open(Style::Bold);
            inline_all(out, content);
            out.close(o);
        }
        Block::Code { lang, text } => {
            let o = out.open(Style::Pre(lang.as_deref().and_then(clean_lang)));
            out.push(text);
            out.close(o);
        }
        Block::Quote(blocks) => {
            let inner = Ctx {
                in_quote: true,
                ..ctx.clone()
            };
            let o = (!ctx.in_quote).then(|| out.open(Style::Quote));
            blocks_joined(out, blocks, &inner, "\n");
            if let Some(o) = o {
                out.close(o);
            }
        }
        Block::List { start, items } => list(out, *start, items, ctx),
        Block::Table(t) => {
            let o = out.open(Style::Pre(None));
            out.push(&grid(t));
            out.close(o);
        }
        Block::Rule => out.push(RULE),
        Block::Footnote { label, blocks } => {
            out.push(&format!("[^{label}]: "));
            blocks_joined(out, blocks, ctx, "\n");
        }
    }
}

fn blocks_joined(out: &mut Styled, blocks: &[Block], ctx: &Ctx, sep: &str) {
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            out.push(sep);
        }
        block(out, b, ctx);
    }
}

fn list(out: &mut Styled, start: Option<u64>, items: &[Item], ctx: &Ctx) {
    let indent = "   ".repeat(ctx.depth);
    let inner = Ctx {
        depth: ctx.depth + 1,
        ..ctx.clone()
    };
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push("\n");
        }
        let mut marker = match start {
            Some(n) => format!("{}.", n.saturating_add(i as u64)),
            None => BULLETS[ctx.depth.min(BULLETS.len() - 1)].to_owned(),
        };
        match (item.checked, start) {
            (Some(done), None) => marker = if done { "☑" } else { "☐" }.to_owned(),
            (Some(done), Some(_)) => marker.push_str(if done { " ☑" } else { " ☐" }),
            (None, _) => {}
        }
        out.push(&indent);
        out.push(&marker);
        for (j, b) in item.blocks.iter().enumerate() {
            match (j, b) {
                // A nested list starts on its own line.
                (_, Block::List { .. }) => out.push("\n"),
                // Code and tables are blocks of their own: no indentation before them.
                (_, Block::Code { .. } | Block::Table(_)) => out.push("\n"),
                (0, _) => out.push(" "),
                _ => {
                    out.push("\n");
                    out.push(&indent);
                    out.push("   ");
                }
            }
            block(out, b, &inner);
        }
    }
}

fn inline_all(out: &mut Styled, inlines: &[Inline]) {
    for i in inlines {
        inline(out, i, false);
    }
}

fn inline(out: &mut Styled, i: &Inline, in_link: bool) {
    match i {
        Inline::Text(t) => out.push(t),
        Inline::Code(t) => {
            let o = out.open(Style::Code);
            out.push(t);
            out.close(o);
        }
        Inline::Emph(c) => styled(out, Style::Italic, c, in_link),
        Inline::Strong(c) => styled(out, Style::Bold, c, in_link),
        Inline::Strike(c) => styled(out, Style::Strike, c, in_link),
        Inline::Link { url, content } => match text_target(url).filter(|_| !in_link) {
            Some(target) => {
                let o = out.open(Style::Link(target));
                for c in content {
                    inline(out, c, true);
                }
                out.close(o);
            }
            None => {
                for c in content {
                    inline(out, c, in_link);
                }
                // An e-mail address Telegram links by itself once it is in the text.
                if let Some(address) = shown_address(url) {
                    let text = inline_text(content).to_lowercase();
                    if !text.contains(&address.to_lowercase()) {
                        out.push(&format!(" ({address})"));
                    }
                }
            }
        },
        Inline::Image { url, alt } => {
            let text = format!("{IMAGE_MARK}{}", if alt.is_empty() { url } else { alt });
            match text_target(url).filter(|_| !in_link) {
                Some(target) => {
                    let o = out.open(Style::Link(target));
                    out.push(&text);
                    out.close(o);
                }
                None => out.push(&text),
            }
        }
        Inline::Break => out.push("\n"),
        Inline::FootnoteRef(label) => out.push(&format!("[^{label}]")),
    }
}

fn styled(out: &mut Styled, style: Style, content: &[Inline], in_link: bool) {
    let o = out.open(style);
    for c in content {
        inline(out, c, in_link);
    }
    out.close(o);
}

/// A code block's language as Telegram takes it (`language-<x>`): letters, digits and
/// `+-_#.`, at most 32 characters.
pub(crate) fn clean_lang(lang: &str) -> Option<String> {
    let clean: String = lang
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '+' | '-' | '_' | '#' | '.'))
        .take(32)
        .collect();
    (!clean.is_empty()).then_some(clean)
}

/// A table as an aligned grid of its cells' text:
///
/// ```text
/// Name  │ Value
/// ──────┼──────
/// alpha │     1
/// ```
pub fn grid(t: &Table) -> String {
    let columns = t.columns();
    let cell_text = |row: &[Vec<Inline>], i: usize| {
        row.get(i)
            .map(|c| inline_text(c).replace('\n', " ").trim().to_owned())
            .unwrap_or_default()
    };
    let head: Vec<String> = (0..columns).map(|i| cell_text(&t.head, i)).collect();
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| (0..columns).map(|i| cell_text(r, i)).collect())
        .collect();
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].width())
                .chain([head[i].width(), 1])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let line = |cells: &[String]| -> String {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let align = t.aligns.get(i).copied().unwrap_or(Align::None);
                pad(c, widths[i], align)
            })
            .collect();
        parts.join(" │ ").trim_end().to_owned()
    };
    let mut out = vec![line(&head)];
    let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
    out.push(rule.join("─┼─"));
    out.extend(rows.iter().map(|r| line(r)));
    out.join("\n")
}

fn pad(cell: &str, width: usize, align: Align) -> String {
    let gap = width.saturating_sub(cell.width());
    match align {
        Align::Right => format!("{}{cell}", " ".repeat(gap)),
        Align::Center => format!("{}{cell}{}", " ".repeat(gap / 2), " ".repeat(gap - gap / 2)),
        Align::Left | Align::None => format!("{cell}{}", " ".repeat(gap)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    #[test]
    fn lists_tables_and_quotes_are_laid_out_in_text() {
        let s = layout(&parse(
            "1. one\n2. two\n   - inner\n   - [x] done\n\n> quoted **bold**\n\n| a | bb |\n|---|---:|\n| ccc | 1 |\n",
        ));
        assert_eq!(
            s.text,
            "1. one\n2. two\n   ◦ inner\n   ☑ done\n\nquoted bold\n\na   │ bb\n────┼───\nccc │  1"
        );
        let styles: Vec<&Style> = s.spans.iter().map(|s| &s.style).collect();
        assert_eq!(styles, vec![&Style::Quote, &Style::Bold, &Style::Pre(None)]);
    }

    #[test]
    fn links_only_where_telegram_takes_them() {
        let s = layout(&parse(
            "[site](https://a.example) [file](./x.md) ![pic](https://a.example/p.png)",
        ));
        assert_eq!(s.text, "site file 🖼 pic");
        assert_eq!(s.spans.len(), 2);
    }
}
