//! The renderer and the splitters: any text as pi's Markdown, in every mode, against
//! Telegram's parsers as tg-fake implements them (tg-model). The properties are the renderer's
//! own (tg-model's `tests/render.rs`): every piece is accepted and within limits, shows exactly
//! its text, and the pieces together show the document once.

use serde_json::json;
use tg_format::markdown::visible::{rich_visible, words};
use tg_format::markdown::{self, RichBudget, TEXT_LIMIT, TextPiece, layout, parse, preview};
use tg_format::{split, utf16};
use tg_model::{html, rich};

/// What the hub uses: a margin below 4096 for a label and a repeat mark.
const LIMIT: usize = 4000;
/// A small limit and budget as well, so that short inputs are cut too.
const SMALL_LIMIT: usize = 120;
const SMALL_BUDGET: RichBudget = RichBudget {
    chars: 300,
    blocks: 12,
};

/// Never a panic; with the hub's limits and with small ones, the HTML pieces, their plain text,
/// the rich pieces and their fallbacks, plain splitting and preview frames keep the properties
/// above.
pub fn markdown(data: &[u8]) {
    let text = crate::text(data);
    render(&text, LIMIT, &RichBudget::default());
    render(&text, SMALL_LIMIT, &SMALL_BUDGET);
    plain(&text, TEXT_LIMIT);
    plain(&text, SMALL_LIMIT);
    frames(&text);
}

/// Runs of whitespace as one space: layout whitespace at piece boundaries is not content.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `got` shows `want`: the same words in the same order. With a small limit a line without
/// spaces (a table grid, a long word) is cut where it has to be, which puts a piece boundary
/// inside a word: there only the characters are compared.
fn same_text(got: &str, want: &str, limit: usize, what: &str) {
    let (g, w) = if limit < LIMIT {
        let solid = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        (solid(got), solid(want))
    } else {
        (squash(got), squash(want))
    };
    assert!(g == w, "{what}\n got: {g:?}\nwant: {w:?}");
}

fn render(markdown: &str, limit: usize, budget: &RichBudget) {
    let doc = parse::parse(markdown);
    let pieces = markdown::render_html(markdown, limit);
    check_text_pieces(&pieces, limit);
    let shown: Vec<&str> = pieces.iter().map(|p| p.plain.as_str()).collect();
    same_text(
        &shown.join("\n"),
        &layout::layout(&doc).text,
        limit,
        "the HTML pieces show the document's text",
    );
    let rich_pieces = markdown::render_rich(markdown, limit, budget);
    for (i, p) in rich_pieces.iter().enumerate() {
        let converted = rich::convert(&json!({ "markdown": p.markdown }), &rich::Limits::default())
            .unwrap_or_else(|e| panic!("rich piece {i} refused: {e}\n{}", p.markdown));
        assert!(
            rich::char_count(&converted) <= 32768,
            "rich piece {i} too long"
        );
        let (chars, blocks) = p
            .blocks
            .iter()
            .map(markdown::rich_metrics)
            .fold((0, 0), |(c, n), (bc, bn)| (c + bc, n + bn));
        // A piece over the budget is allowed only when it is a single block that could not be
        // cut further.
        assert!(
            (chars <= budget.chars && blocks <= budget.blocks) || p.blocks.len() == 1,
            "rich piece {i} over the budget: {chars} chars, {blocks} blocks"
        );
        same_text(
            &rich::plain_text(&converted),
            &rich_visible(&p.blocks),
            limit,
            &format!("rich piece {i} shows its blocks"),
        );
        check_text_pieces(&p.fallback, limit);
        let fallback: Vec<&str> = p.fallback.iter().map(|f| f.plain.as_str()).collect();
        same_text(
            &fallback.join("\n"),
            &layout::layout(&p.blocks).text,
            limit,
            &format!("the fallback of rich piece {i} shows its blocks"),
        );
    }
    let pieces_words: Vec<String> = rich_pieces.iter().map(|p| words(&p.blocks)).collect();
    if *budget == RichBudget::default() {
        same_text(
            &pieces_words.join(" "),
            &words(&doc),
            limit,
            "the rich pieces hold every word once",
        );
    } else {
        // A table cut by a small budget repeats its head in every piece: every word is still
        // there, in order, and nothing else was made up than those heads.
        let solid = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        let got = solid(&pieces_words.concat());
        let want = solid(&words(&doc));
        let mut rest = got.chars();
        assert!(
            want.chars().all(|c| rest.any(|g| g == c)),
            "the rich pieces lost words\n got: {got:?}\nwant: {want:?}"
        );
    }
}

fn check_text_pieces(pieces: &[TextPiece], limit: usize) {
    for (i, p) in pieces.iter().enumerate() {
        let parsed = html::parse(&p.html)
            .unwrap_or_else(|e| panic!("HTML piece {i} refused: {e}\n{}", p.html));
        let shown = html::trim(html::clean(parsed));
        assert_eq!(shown.text, p.plain, "HTML piece {i} shows its plain text");
        assert!(!p.plain.is_empty(), "piece {i} is empty");
        assert!(
            utf16::len(&p.plain) <= TEXT_LIMIT.min(limit),
            "piece {i} is {} units (limit {limit})",
            utf16::len(&p.plain)
        );
    }
}

/// Plain splitting: pieces within the limit, non-empty, trimmed, and nothing but whitespace
/// lost or added.
fn plain(text: &str, limit: usize) {
    let pieces = split::plain(text, limit);
    for p in &pieces {
        assert!(
            utf16::len(p) <= limit,
            "a plain piece of {} units",
            utf16::len(p)
        );
        assert!(!p.is_empty(), "an empty plain piece");
        assert_eq!(p.trim(), p.as_str(), "an untrimmed plain piece");
    }
    let solid = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    assert_eq!(
        solid(&pieces.concat()),
        solid(text),
        "plain splitting lost or added text"
    );
}

/// Preview frames of every prefix length class: the closed prefix is a prefix, an HTML frame
/// is a valid piece, a rich frame is accepted.
fn frames(text: &str) {
    let cuts = [text.len() / 3, text.len() / 2, text.len()];
    for cut in cuts {
        let Some(partial) = text.get(..cut) else {
            continue;
        };
        let closed = preview::closed_prefix(partial);
        assert!(
            partial.starts_with(closed),
            "the closed prefix is not a prefix"
        );
        if let Some(frame) = preview::html_frame(partial, LIMIT) {
            check_text_pieces(&[frame], LIMIT);
        }
        if let Some(rich_md) = preview::rich_frame(partial, &RichBudget::default()) {
            rich::convert(&json!({ "markdown": rich_md }), &rich::Limits::default())
                .unwrap_or_else(|e| panic!("a rich frame refused: {e}\n{rich_md}"));
        }
    }
}
