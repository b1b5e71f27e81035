//! The renderer against Telegram's parsers (the ones tg-fake answers with): every piece of
//! every mode is accepted and within limits, and what it shows is exactly the document's
//! text. Golden over a corpus of real-world answers (tests/corpus), and a property test over
//! random Markdown.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::json;
use tg_format::markdown::doc::{Block, Inline};
use tg_format::markdown::visible::{rich_visible, words};
use tg_format::markdown::{self, RichBudget, TEXT_LIMIT, layout, parse};
use tg_model::{html, rich, utf16};

/// What the hub uses: a margin below 4096 for a label and a repeat mark.
const LIMIT: usize = 4000;

/// Runs of whitespace as one space: layout whitespace at piece boundaries is not content.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Asserts `got == want` (whitespace squashed), showing where they first differ.
fn same_text(got: &str, want: &str, what: &str) {
    let (g, w) = (squash(got), squash(want));
    if g == w {
        return;
    }
    let at = g
        .char_indices()
        .zip(w.chars())
        .find(|((_, a), b)| a != b)
        .map_or(g.len().min(w.len()), |((i, _), _)| i);
    let from = g[..at].char_indices().rev().nth(60).map_or(0, |(i, _)| i);
    let wfrom = w
        .char_indices()
        .map(|(i, _)| i)
        .find(|i| *i >= from)
        .unwrap_or(w.len());
    let show = |s: &str, f: usize| s[f..].chars().take(160).collect::<String>();
    panic!(
        "{what}: first difference after {at} bytes\n got: {:?}\nwant: {:?}",
        show(&g, from),
        show(&w, wfrom.min(w.len()))
    );
}

/// A fuzz input kept in `fuzz/corpus/markdown/` (as the fuzzer reads it: lossy UTF-8).
fn corpus_input(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/markdown")
        .join(format!("{name}.md"));
    String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
}

/// Checks every mode for one answer; returns the number of pieces per mode.
fn check(name: &str, markdown: &str) -> (usize, usize) {
    let doc = parse::parse(markdown);
    // HTML, and its plain fallback.
    let pieces = markdown::render_html(markdown, LIMIT);
    check_text_pieces(name, &pieces);
    let shown: Vec<&str> = pieces.iter().map(|p| p.plain.as_str()).collect();
    same_text(
        &shown.join("\n"),
        &layout::layout(&doc).text,
        &format!("{name}: the HTML pieces show the document's text"),
    );
    // Rich, and its HTML fallback: each piece shows exactly its blocks, and the pieces
    // together hold every word of the answer once.
    let rich_pieces = markdown::render_rich(markdown, LIMIT, &RichBudget::default());
    for (i, p) in rich_pieces.iter().enumerate() {
        let converted = rich::convert(&json!({ "markdown": p.markdown }), &rich::Limits::default())
            .unwrap_or_else(|e| panic!("{name}: rich piece {i} refused: {e}\n{}", p.markdown));
        assert!(
            rich::char_count(&converted) <= 32768,
            "{name}: rich piece {i} too long"
        );
        same_text(
            &rich::plain_text(&converted),
            &rich_visible(&p.blocks),
            &format!("{name}: rich piece {i} shows its blocks"),
        );
        check_text_pieces(name, &p.fallback);
        let fallback: Vec<&str> = p.fallback.iter().map(|f| f.plain.as_str()).collect();
        same_text(
            &fallback.join("\n"),
            &layout::layout(&p.blocks).text,
            &format!("{name}: the fallback of rich piece {i} shows its blocks"),
        );
    }
    let pieces_words: Vec<String> = rich_pieces.iter().map(|p| words(&p.blocks)).collect();
    same_text(
        &pieces_words.join(" "),
        &words(&doc),
        &format!("{name}: the rich pieces hold every word once"),
    );
    (pieces.len(), rich_pieces.len())
}

fn check_text_pieces(name: &str, pieces: &[markdown::TextPiece]) {
    for (i, p) in pieces.iter().enumerate() {
        let parsed = html::parse(&p.html)
            .unwrap_or_else(|e| panic!("{name}: piece {i} refused: {e}\n{}", p.html));
        let shown = html::trim(html::clean(parsed));
        assert_eq!(
            shown.text, p.plain,
            "{name}: piece {i} shows its plain text"
        );
        assert!(!p.plain.is_empty(), "{name}: piece {i} is empty");
        assert!(
            utf16::len(&p.plain) <= TEXT_LIMIT.min(LIMIT),
            "{name}: piece {i} is {} units",
            utf16::len(&p.plain)
        );
    }
}

fn corpus() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".md") && n.as_bytes()[0].is_ascii_digit())
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

#[test]
fn every_corpus_answer_renders_in_every_mode() {
    let answers = corpus();
    assert!(
        answers.len() >= 40,
        "the corpus has {} answers",
        answers.len()
    );
    let mut report = Vec::new();
    for (name, md) in &answers {
        let (html_n, rich_n) = check(name, md);
        report.push(format!("{name}: {html_n} html, {rich_n} rich"));
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn long_answers_split_where_they_should() {
    let answers = corpus();
    let long = answers
        .iter()
        .find(|(n, _)| n.contains("long-answer"))
        .unwrap();
    assert!(long.1.chars().count() > 11_000);
    // 12,000 characters: one rich message, several text messages.
    assert_eq!(
        markdown::render_rich(&long.1, LIMIT, &RichBudget::default()).len(),
        1
    );
    assert!(markdown::render_html(&long.1, LIMIT).len() >= 3);
    // A 300-line code block is cut between lines, each piece still a code block.
    let code = answers
        .iter()
        .find(|(n, _)| n.contains("300-line"))
        .unwrap();
    let pieces = markdown::render_html(&code.1, LIMIT);
    assert!(pieces.len() >= 3);
    for p in &pieces[1..] {
        assert!(
            p.html.starts_with("<pre><code class=\"language-"),
            "{}",
            &p.html[..40]
        );
    }
    // A tight rich budget cuts the code block too, into code blocks.
    let tight = RichBudget {
        chars: 2000,
        blocks: 450,
    };
    let rich = markdown::render_rich(&code.1, LIMIT, &tight);
    assert!(rich.len() >= 5);
    for p in &rich[1..] {
        assert!(p.markdown.starts_with("```"), "{}", &p.markdown[..20]);
    }
}

/// Random Markdown from pieces that stress the dialect: markers, escapes, HTML, dollars,
/// pipes, unicode, and every block kind, nested.
fn arb_inline() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        "[a-zA-Z0-9 ]{1,12}",
        Just("**bold**".to_owned()),
        Just("*it*".to_owned()),
        Just("_u_".to_owned()),
        Just("~~gone~~".to_owned()),
        Just("`co|de`".to_owned()),
        Just("``a`b``".to_owned()),
        Just("$5 and $10".to_owned()),
        Just("a == b || c".to_owned()),
        Just("<div> & </div>".to_owned()),
        Just("[link](https://example.com/a_(b))".to_owned()),
        Just("[rel](./x.md)".to_owned()),
        Just("![img](https://example.com/p.png)".to_owned()),
        Just("snake_case_name".to_owned()),
        Just("2*3*4".to_owned()),
        Just("\\* \\_ \\# \\[".to_owned()),
        Just("👩‍💻🇺🇦 مرحبا שלום 漢字".to_owned()),
        Just("&amp; &copy; &#65;".to_owned()),
        Just("1. x".to_owned()),
        Just("#tag @user /cmd".to_owned()),
        Just("||spoiler|| ==mark==".to_owned()),
        Just("<b>x</b>".to_owned()),
        Just("footnote[^1]".to_owned()),
    ];
    prop::collection::vec(atom, 1..6).prop_map(|v| v.join(" "))
}

fn arb_block(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        arb_inline(),
        arb_inline().prop_map(|t| format!("## {t}")),
        "[a-z<>&`|*\n\t ]{0,80}".prop_map(|c| format!("```rust\n{c}\n```")),
        prop::collection::vec(arb_inline(), 1..4).prop_map(|cells| {
            let n = cells.len();
            let head = cells
                .iter()
                .map(|c| c.replace('|', "\\|"))
                .collect::<Vec<_>>()
                .join(" | ");
            format!(
                "| {head} |\n|{}\n| {} |",
                "---|".repeat(n),
                vec!["x"; n].join(" | ")
            )
        }),
        Just("---".to_owned()),
        Just("[^1]: the note".to_owned()),
        Just("<details>\n<summary>s</summary>\nbody\n</details>".to_owned()),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let inner = arb_block(depth - 1);
    prop_oneof![
        4 => leaf,
        1 => prop::collection::vec(inner.clone(), 1..4).prop_map(|items| {
            items
                .iter()
                .map(|i| format!("- {}", i.replace('\n', "\n  ")))
                .collect::<Vec<_>>()
                .join("\n")
        }),
        1 => prop::collection::vec(inner.clone(), 1..4).prop_map(|items| {
            items
                .iter()
                .enumerate()
                .map(|(n, i)| format!("{}. [x] {}", n + 1, i.replace('\n', "\n      ")))
                .collect::<Vec<_>>()
                .join("\n")
        }),
        1 => inner.prop_map(|b| format!("> {}", b.replace('\n', "\n> "))),
    ]
    .boxed()
}

fn arb_markdown() -> impl Strategy<Value = String> {
    (prop::collection::vec(arb_block(3), 1..12), 0usize..3).prop_map(|(blocks, scale)| {
        // Now and then long enough to need several pieces.
        let doc = blocks.join("\n\n");
        vec![doc; 1 + scale * scale * 40].join("\n\n")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_markdown_renders_in_every_mode(md in arb_markdown()) {
        check("random", &md);
    }
}

/// Found by fuzzing (fuzz/corpus/markdown/crash-list-from-zero.md): a list cut into rich
/// pieces left two ordered lists in a row in one piece, which Markdown reads as one list, so
/// item 3 showed as "4.". Lists in a row now alternate their markers.
#[test]
fn lists_in_a_row_keep_their_own_numbers() {
    let show = |md: &str| -> Vec<String> {
        markdown::render_rich(md, LIMIT, &RichBudget::default())
            .iter()
            .map(|p| {
                let converted =
                    rich::convert(&json!({ "markdown": p.markdown }), &rich::Limits::default())
                        .unwrap();
                rich::plain_text(&converted)
            })
            .collect()
    };
    // `.` then `)`: two lists in the document, each numbered from 1.
    let two = show("1. a\n2. b\n\n1) c\n2) d\n\n3) e\n");
    assert_eq!(squash(&two.join("\n")), "1. a 2. b 1. c 2. d 3. e");
    let bullets = show("- a\n\n* b\n\n+ c\n");
    assert_eq!(squash(&bullets.join("\n")), "- a - b - c");
    let md = corpus_input("crash-list-from-zero");
    for (limit, budget) in [
        (LIMIT, RichBudget::default()),
        (
            120,
            RichBudget {
                chars: 300,
                blocks: 12,
            },
        ),
    ] {
        for (i, p) in markdown::render_rich(&md, limit, &budget)
            .iter()
            .enumerate()
        {
            let converted =
                rich::convert(&json!({ "markdown": p.markdown }), &rich::Limits::default())
                    .unwrap();
            same_text(
                &rich::plain_text(&converted),
                &rich_visible(&p.blocks),
                &format!("piece {i}"),
            );
        }
    }
}

/// Found by fuzzing (fuzz/corpus/markdown/crash-nul-before-stars.md): control characters at the
/// start of a list item are cleaned to spaces, and four spaces after the marker made the rest
/// an indented code block, its escapes shown literally. Leading spaces are written as text.
#[test]
fn spaces_at_the_start_of_a_line_are_text() {
    let md = "1. \0\0\0\0\0\0**Read the fi";
    for p in markdown::render_rich(md, LIMIT, &RichBudget::default()) {
        let converted =
            rich::convert(&json!({ "markdown": p.markdown }), &rich::Limits::default()).unwrap();
        same_text(
            &rich::plain_text(&converted),
            &rich_visible(&p.blocks),
            "the item shows its text",
        );
    }
    check(
        "crash-nul-before-stars",
        &corpus_input("crash-nul-before-stars"),
    );
}

/// Found by fuzzing (fuzz/corpus/markdown/crash-nul-in-link-url.md): a NUL in a link address
/// broke the HTML piece's `href`. Addresses lose control characters.
#[test]
fn control_characters_leave_link_addresses() {
    check(
        "nul-in-link",
        "[a link](https://x.example/a\0b) and ![pic](https://x.example/\u{1}p.png) end\n",
    );
    check(
        "crash-nul-in-link-url",
        &corpus_input("crash-nul-in-link-url"),
    );
}

/// Found by fuzzing (fuzz/corpus/markdown/crash-empty-link-text.md, in CI's short run): a link
/// without text (`[](url)`) showed its address in the rich piece and nothing in the HTML one.
/// Its address is its text now, in every rendering.
#[test]
fn a_link_without_text_shows_its_address() {
    check(
        "empty-link-text",
        "see [](https://example.com/x) here, [ ](https://example.com/y) and []() too\n",
    );
    let doc = parse::parse("see [](https://example.com/x) here\n");
    assert!(
        layout::layout(&doc).text.contains("https://example.com/x"),
        "{doc:?}"
    );
    check(
        "crash-empty-link-text",
        &corpus_input("crash-empty-link-text"),
    );
}

/// Found by fuzzing (fuzz/corpus/markdown/crash-nul-in-footnote-label.md): a footnote label
/// kept its control characters, which Telegram's HTML parser shows as spaces, so the HTML
/// piece and its plain fallback differed. Labels are cleaned like all other text.
#[test]
fn footnote_labels_are_cleaned_like_text() {
    check(
        "nul-in-footnote-label",
        "See[^a\0b].\n\n[^a\0b]: the note\n",
    );
    check(
        "crash-nul-in-footnote-label",
        &corpus_input("crash-nul-in-footnote-label"),
    );
}

/// Found by fuzzing (fuzz/corpus/markdown/crash-footnote-code-block.md): a footnote whose body
/// starts with a code block had its fence written on the label's line, where it is text, so the
/// rich piece showed the fences and the code ran on into the next blocks.
#[test]
fn a_footnote_body_that_is_not_a_paragraph_starts_on_its_own_line() {
    for body in [
        "    indented code",
        "```\nfenced code\n```",
        "- a list",
        "> a quote",
        "# a heading",
    ] {
        let md = format!("See[^n].\n\n[^n]:\n{body}\n\nAfter.\n");
        check("footnote-body", &md);
        let rich = markdown::render_rich(&md, 4000, &RichBudget::default());
        let written: String = rich.iter().map(|p| p.markdown.as_str()).collect();
        assert!(
            !written.contains("]: ```") && !written.contains("]: -") && !written.contains("]: >"),
            "block syntax after the label: {written}"
        );
    }
    check(
        "crash-footnote-code-block",
        &corpus_input("crash-footnote-code-block"),
    );
}

/// Found by fuzzing (fuzz/corpus/markdown/crash-quotes-too-deep.md): a hundred `>` in a row made
/// a rich piece Telegram refuses (more than 16 levels of nesting). Quotes, like lists, stop
/// nesting at ten levels.
#[test]
fn quotes_nested_too_deep_are_flattened() {
    for (name, md) in [
        ("quotes", format!("{} deep\n", "> ".repeat(100))),
        ("quotes in lists", format!("{}deep\n", "- > ".repeat(40))),
    ] {
        check(name, &md);
        // A budget the nesting alone exceeds: every level is cut (this took 2^depth steps).
        let small = RichBudget {
            chars: 300,
            blocks: 12,
        };
        let pieces = markdown::render_rich(&md, 120, &small);
        assert!(!pieces.is_empty(), "{name}: no piece");
    }
    check(
        "crash-quotes-too-deep",
        &corpus_input("crash-quotes-too-deep"),
    );
}

#[test]
fn an_image_in_an_image_gives_its_alternative_text() {
    // CommonMark example 574.
    let blocks = parse::parse("![foo ![bar](/url)](/url2)\n");
    assert_eq!(
        blocks,
        vec![Block::Paragraph(vec![Inline::Image {
            url: "/url2".into(),
            alt: "foo bar".into()
        }])]
    );
}

#[test]
fn an_email_link_in_a_text_message_keeps_its_address() {
    let html = markdown::render_html("[write to me](mailto:a@b.example) or <c@d.example>", 4000);
    assert_eq!(html[0].plain, "write to me (a@b.example) or c@d.example");
    assert!(!html[0].html.contains("mailto"), "{}", html[0].html);
    let rich = markdown::render_rich(
        "[write to me](mailto:a@b.example)",
        4000,
        &Default::default(),
    );
    assert!(
        rich[0].markdown.contains("](<mailto:a@b.example>)"),
        "{}",
        rich[0].markdown
    );
}
