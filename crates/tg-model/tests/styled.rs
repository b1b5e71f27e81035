//! The renderer's styled text written as HTML and cut into pieces (tg-format's
//! `markdown::styled`), read back by Telegram's HTML parser: the same text and styles, in every
//! piece.

use tg_format::markdown::styled::{Style, Styled, split};
use tg_model::html;

fn sample() -> Styled {
    let mut s = Styled::default();
    s.push("plain ");
    let b = s.open(Style::Bold);
    s.push("bold ");
    let l = s.open(Style::Link("https://example.com/?a=1&b=2".into()));
    s.push("link <x>");
    s.close(l);
    s.close(b);
    s.push(" & more");
    s
}

#[test]
fn html_parses_back_to_the_same_text_and_styles() {
    let s = sample();
    let parsed = html::parse(&s.to_html()).unwrap_or_default();
    assert_eq!(parsed.text, s.text);
    assert_eq!(parsed.entities.len(), 3, "{:?}", parsed.entities);
}

#[test]
fn a_cut_closes_and_reopens_what_crosses_it() {
    let mut s = Styled::default();
    let p = s.open(Style::Pre(Some("rust".into())));
    for i in 0..40 {
        s.push(&format!("let line_{i} = {i};\n"));
    }
    s.close(p);
    let pieces = split(&s, 200);
    assert!(pieces.len() > 1);
    for piece in &pieces {
        assert!(piece.utf16_len() <= 200);
        assert_eq!(piece.spans.len(), 1, "every piece is a code block");
        let parsed = html::parse(&piece.to_html()).unwrap_or_default();
        assert_eq!(parsed.text, piece.text);
        assert!(
            piece.text.starts_with("let line_"),
            "cut between lines: {:?}",
            piece.text
        );
    }
    let joined: Vec<&str> = pieces.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(joined.join("\n") + "\n", s.text);
}
