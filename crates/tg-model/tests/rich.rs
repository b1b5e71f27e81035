//! Rich message conversion: every markdown and html construct, the blocks form, every error,
//! the limits, plain text, and the shape of every output against frankenstein's `RichMessage`.

#![allow(clippy::unwrap_used)]

use frankenstein::rich_message::{InputRichMessage, RichMessage};
use serde_json::{Value, json};
use tg_model::rich::{Limits, RichError, char_count, convert, plain_text};

/// Converts, and checks the answer has the shape of a Bot API `RichMessage`.
fn ok(input: Value) -> Value {
    let out =
        convert(&input, &Limits::default()).unwrap_or_else(|e| panic!("{input} was refused: {e}"));
    if let Err(e) = serde_json::from_value::<RichMessage>(out.clone()) {
        panic!("{out} is not a RichMessage: {e}");
    }
    out
}

fn err(input: Value) -> RichError {
    match convert(&input, &Limits::default()) {
        Ok(out) => panic!("{input} was accepted as {out}"),
        Err(e) => e,
    }
}

fn md(source: &str) -> Value {
    ok(json!({ "markdown": source }))["blocks"].clone()
}

fn html(source: &str) -> Value {
    ok(json!({ "html": source }))["blocks"].clone()
}

/// The text of the single paragraph `blocks` must be.
fn para_text(blocks: &Value) -> Value {
    assert_eq!(blocks.as_array().unwrap().len(), 1, "{blocks}");
    assert_eq!(blocks[0]["type"], "paragraph", "{blocks}");
    blocks[0]["text"].clone()
}

fn fmt(ty: &str, text: &str) -> Value {
    json!({"type": ty, "text": text})
}

// --- markdown ---------------------------------------------------------------------------------

#[test]
fn markdown_inline_formatting() {
    let cases = [
        ("**b**", fmt("bold", "b")),
        ("__b__", fmt("bold", "b")),
        ("*i*", fmt("italic", "i")),
        ("_i_", fmt("italic", "i")),
        ("~~s~~", fmt("strikethrough", "s")),
        ("`c`", fmt("code", "c")),
        ("==m==", fmt("marked", "m")),
        ("||s||", fmt("spoiler", "s")),
        ("<u>u</u>", fmt("underline", "u")),
        ("<ins>u</ins>", fmt("underline", "u")),
        ("<sup>2</sup>", fmt("superscript", "2")),
        ("<sub>2</sub>", fmt("subscript", "2")),
        ("<tg-spoiler>s</tg-spoiler>", fmt("spoiler", "s")),
        (
            "[t](https://e.com/x)",
            json!({"type": "url", "text": "t", "url": "https://e.com/x"}),
        ),
        (
            "<https://e.com>",
            json!({"type": "url", "text": "https://e.com", "url": "https://e.com"}),
        ),
        (
            "<a@b.co>",
            json!({"type": "email_address", "text": "a@b.co", "email_address": "a@b.co"}),
        ),
        (
            "$x^2$",
            json!({"type": "mathematical_expression", "expression": "x^2"}),
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(para_text(&md(source)), expected, "{source}");
    }
}

#[test]
fn markdown_nested_and_mixed_formatting() {
    assert_eq!(
        para_text(&md("a **b _c_** ==d `e`==")),
        json!([
            "a ",
            {"type": "bold", "text": ["b ", {"type": "italic", "text": "c"}]},
            " ",
            {"type": "marked", "text": ["d ", {"type": "code", "text": "e"}]},
        ])
    );
    assert_eq!(
        para_text(&md("||**x**||")),
        json!({"type": "spoiler", "text": {"type": "bold", "text": "x"}})
    );
}

#[test]
fn markdown_markers_need_partners_and_respect_escapes() {
    assert_eq!(para_text(&md("a == b || c")), json!("a == b || c"));
    assert_eq!(para_text(&md("x ==open")), json!("x ==open"));
    assert_eq!(
        para_text(&md(r"\=\=no\=\= \|\|no\|\|")),
        json!("==no== ||no||")
    );
    // A marker cannot close across a formatting boundary: it stays literal.
    assert_eq!(
        para_text(&md("==a **b== c**")),
        json!(["==a ", {"type": "bold", "text": "b== c"}])
    );
}

#[test]
fn markdown_headings_and_paragraphs() {
    let blocks =
        md("# One\n## Two\n### Three\n#### Four\n##### Five\n###### Six\n\nfirst\nline\n\nsecond");
    for (i, name) in ["One", "Two", "Three", "Four", "Five", "Six"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            blocks[i],
            json!({"type": "heading", "text": name, "size": i + 1})
        );
    }
    assert_eq!(
        blocks[6],
        json!({"type": "paragraph", "text": "first\nline"})
    );
    assert_eq!(blocks[7], json!({"type": "paragraph", "text": "second"}));
    assert_eq!(blocks.as_array().unwrap().len(), 8);
}

#[test]
fn markdown_code_blocks() {
    assert_eq!(
        md("```rust\nfn main() {}\n```"),
        json!([{"type": "pre", "text": "fn main() {}", "language": "rust"}])
    );
    assert_eq!(
        md("```\nplain\n  indented\n```"),
        json!([{"type": "pre", "text": "plain\n  indented"}])
    );
    assert_eq!(
        md("    indented code\n"),
        json!([{"type": "pre", "text": "indented code"}])
    );
}

#[test]
fn markdown_math_blocks() {
    let math = json!([{"type": "mathematical_expression", "expression": "E=mc^2"}]);
    assert_eq!(md("$$E=mc^2$$"), math);
    assert_eq!(md("```math\nE=mc^2\n```"), math);
    assert_eq!(
        md("before $$x$$ after"),
        json!([
            {"type": "paragraph", "text": "before"},
            {"type": "mathematical_expression", "expression": "x"},
            {"type": "paragraph", "text": "after"},
        ])
    );
}

#[test]
fn markdown_divider() {
    assert_eq!(
        md("a\n\n---\n\nb"),
        json!([
            {"type": "paragraph", "text": "a"},
            {"type": "divider"},
            {"type": "paragraph", "text": "b"},
        ])
    );
}

#[test]
fn markdown_bullet_lists() {
    for marker in ["-", "*", "+"] {
        let blocks = md(&format!("{marker} a\n{marker} b"));
        assert_eq!(
            blocks,
            json!([{"type": "list", "items": [
                {"label": "•", "blocks": [{"type": "paragraph", "text": "a"}]},
                {"label": "•", "blocks": [{"type": "paragraph", "text": "b"}]},
            ]}]),
            "{marker}"
        );
    }
}

#[test]
fn markdown_ordered_and_nested_lists() {
    assert_eq!(
        md("3. c\n4. d\n   - inner"),
        json!([{"type": "list", "items": [
            {"label": "3.", "value": 3, "blocks": [{"type": "paragraph", "text": "c"}]},
            {"label": "4.", "value": 4, "blocks": [
                {"type": "paragraph", "text": "d"},
                {"type": "list", "items": [
                    {"label": "•", "blocks": [{"type": "paragraph", "text": "inner"}]},
                ]},
            ]},
        ]}])
    );
}

#[test]
fn markdown_task_lists() {
    assert_eq!(
        md("- [ ] todo\n- [x] done\n- plain"),
        json!([{"type": "list", "items": [
            {"label": "•", "has_checkbox": true, "is_checked": false,
             "blocks": [{"type": "paragraph", "text": "todo"}]},
            {"label": "•", "has_checkbox": true, "is_checked": true,
             "blocks": [{"type": "paragraph", "text": "done"}]},
            {"label": "•", "blocks": [{"type": "paragraph", "text": "plain"}]},
        ]}])
    );
}

#[test]
fn markdown_block_quotes() {
    assert_eq!(
        md("> quoted **b**\n> more\n>\n> > deeper"),
        json!([{"type": "blockquote", "blocks": [
            {"type": "paragraph", "text": ["quoted ", {"type": "bold", "text": "b"}, "\nmore"]},
            {"type": "blockquote", "blocks": [{"type": "paragraph", "text": "deeper"}]},
        ]}])
    );
}

#[test]
fn markdown_tables_with_alignment() {
    let blocks = md("| A | B | C | D |\n|:--|:-:|--:|---|\n| 1 | **2** | 3 | |");
    assert_eq!(
        blocks,
        json!([{"type": "table", "cells": [
            [
                {"text": "A", "is_header": true, "align": "left", "valign": "top"},
                {"text": "B", "is_header": true, "align": "center", "valign": "top"},
                {"text": "C", "is_header": true, "align": "right", "valign": "top"},
                {"text": "D", "is_header": true, "align": "left", "valign": "top"},
            ],
            [
                {"text": "1", "align": "left", "valign": "top"},
                {"text": {"type": "bold", "text": "2"}, "align": "center", "valign": "top"},
                {"text": "3", "align": "right", "valign": "top"},
                {"align": "left", "valign": "top"},
            ],
        ]}])
    );
}

#[test]
fn markdown_footnotes() {
    assert_eq!(
        md("See[^a] and[^b].\n\n[^b]: Bee.\n[^a]: Ay *it*."),
        json!([
            {"type": "paragraph", "text": [
                "See",
                {"type": "reference_link", "text": "1", "reference_name": "a"},
                " and",
                {"type": "reference_link", "text": "2", "reference_name": "b"},
                ".",
            ]},
            {"type": "paragraph", "text": [
                {"type": "reference", "name": "b", "text": "2."},
                " Bee.",
            ]},
            {"type": "paragraph", "text": [
                {"type": "reference", "name": "a", "text": "1."},
                " Ay ",
                {"type": "italic", "text": "it"},
                ".",
            ]},
        ])
    );
}

#[test]
fn markdown_html_details_block() {
    assert_eq!(
        md("<details>\n<summary>More</summary>\n\nHidden **text**\n\n</details>\n\nAfter"),
        json!([
            {"type": "details", "summary": "More", "blocks": [
                {"type": "paragraph", "text": ["Hidden ", {"type": "bold", "text": "text"}]},
            ]},
            {"type": "paragraph", "text": "After"},
        ])
    );
}

#[test]
fn markdown_image_is_media() {
    assert_eq!(
        err(json!({"markdown": "![alt](https://e.com/p.png)"})),
        RichError::MediaUnsupported
    );
}

// --- html -------------------------------------------------------------------------------------

#[test]
fn html_inline_tags() {
    let cases = [
        ("<b>x</b>", "bold"),
        ("<strong>x</strong>", "bold"),
        ("<i>x</i>", "italic"),
        ("<em>x</em>", "italic"),
        ("<u>x</u>", "underline"),
        ("<ins>x</ins>", "underline"),
        ("<s>x</s>", "strikethrough"),
        ("<del>x</del>", "strikethrough"),
        ("<strike>x</strike>", "strikethrough"),
        ("<code>x</code>", "code"),
        ("<mark>x</mark>", "marked"),
        ("<sub>x</sub>", "subscript"),
        ("<sup>x</sup>", "superscript"),
        ("<tg-spoiler>x</tg-spoiler>", "spoiler"),
        ("<span class=\"tg-spoiler\">x</span>", "spoiler"),
    ];
    for (source, ty) in cases {
        assert_eq!(para_text(&html(source)), fmt(ty, "x"), "{source}");
        assert_eq!(
            para_text(&html(&format!("<p>{source}</p>"))),
            fmt(ty, "x"),
            "{source}"
        );
    }
}

#[test]
fn html_links_and_anchors() {
    assert_eq!(
        para_text(&html(
            "<a href=\"https://e.com/?a=1&amp;b=2\">l</a> <a href=\"mailto:a@b.co\">m</a> \
             <a href=\"#top\">up</a><a name=\"top\"></a>"
        )),
        json!([
            {"type": "url", "text": "l", "url": "https://e.com/?a=1&b=2"},
            " ",
            {"type": "email_address", "text": "m", "email_address": "a@b.co"},
            " ",
            {"type": "anchor_link", "text": "up", "anchor_name": "top"},
            {"type": "anchor", "name": "top"},
        ])
    );
}

#[test]
fn html_nested_inline_and_entities() {
    assert_eq!(
        para_text(&html(
            "<b>a <i>b</i></b> &lt;tag&gt; &amp; &#x41;&#66; &unknown; x < y"
        )),
        json!([
            {"type": "bold", "text": ["a ", {"type": "italic", "text": "b"}]},
            " <tag> & AB &unknown; x < y",
        ])
    );
}

#[test]
fn html_loose_text_becomes_paragraphs() {
    assert_eq!(
        html("one\nline <b>b</b>\n\ntwo\n  \nthree<h1>H</h1>four"),
        json!([
            {"type": "paragraph", "text": ["one\nline ", {"type": "bold", "text": "b"}]},
            {"type": "paragraph", "text": "two"},
            {"type": "paragraph", "text": "three"},
            {"type": "heading", "text": "H", "size": 1},
            {"type": "paragraph", "text": "four"},
        ])
    );
}

#[test]
fn html_block_tags() {
    assert_eq!(
        html(
            "<h1>A</h1><h2>B</h2><h3>C</h3><h4>D</h4><h5>E</h5><h6>F</h6>\
             <p> para </p><hr/><footer>foot <i>i</i></footer>"
        ),
        json!([
            {"type": "heading", "text": "A", "size": 1},
            {"type": "heading", "text": "B", "size": 2},
            {"type": "heading", "text": "C", "size": 3},
            {"type": "heading", "text": "D", "size": 4},
            {"type": "heading", "text": "E", "size": 5},
            {"type": "heading", "text": "F", "size": 6},
            {"type": "paragraph", "text": "para"},
            {"type": "divider"},
            {"type": "footer", "text": ["foot ", {"type": "italic", "text": "i"}]},
        ])
    );
}

#[test]
fn html_pre() {
    assert_eq!(
        html(
            "<pre><code class=\"language-python\">\nif a < b:\n    <b>print</b>(1)\n</code></pre>"
        ),
        json!([{"type": "pre", "text": "if a < b:\n    print(1)", "language": "python"}])
    );
    assert_eq!(
        html("<pre>plain</pre>"),
        json!([{"type": "pre", "text": "plain"}])
    );
}

#[test]
fn html_lists() {
    assert_eq!(
        html(
            "<ul>\n  <li>a</li>\n  <li><input type=\"checkbox\" checked> b\n    <ol start=\"2\" type=\"a\"><li>c<li value=\"5\">d</ol>\n  </li>\n</ul>"
        ),
        json!([{"type": "list", "items": [
            {"label": "•", "blocks": [{"type": "paragraph", "text": "a"}]},
            {"label": "•", "has_checkbox": true, "is_checked": true, "blocks": [
                {"type": "paragraph", "text": "b"},
                {"type": "list", "items": [
                    {"label": "b.", "value": 2, "type": "a",
                     "blocks": [{"type": "paragraph", "text": "c"}]},
                    {"label": "e.", "value": 5, "type": "a",
                     "blocks": [{"type": "paragraph", "text": "d"}]},
                ]},
            ]},
        ]}])
    );
}

#[test]
fn html_quotes() {
    assert_eq!(
        html(
            "<blockquote><p>q1</p>q2<cite>Author</cite></blockquote>\
             <blockquote expandable>long\n\nquote</blockquote><aside>pull</aside>"
        ),
        json!([
            {"type": "blockquote", "credit": "Author", "blocks": [
                {"type": "paragraph", "text": "q1"},
                {"type": "paragraph", "text": "q2"},
            ]},
            {"type": "expandable_blockquote", "text": "long\nquote"},
            {"type": "pullquote", "text": "pull"},
        ])
    );
}

#[test]
fn html_tables() {
    assert_eq!(
        html(
            "<table bordered striped>\n<caption>Cap</caption>\n<thead><tr><th>h1</th><th>h2</th></tr></thead>\n\
             <tbody><tr><td align=\"right\" valign=\"middle\" colspan=\"2\"><b>x</b></td></tr>\n\
             <tr><td>y<td>z</tr></tbody></table>"
        ),
        json!([{"type": "table", "is_bordered": true, "is_striped": true, "caption": "Cap", "cells": [
            [
                {"text": "h1", "is_header": true, "align": "left", "valign": "top"},
                {"text": "h2", "is_header": true, "align": "left", "valign": "top"},
            ],
            [
                {"text": {"type": "bold", "text": "x"}, "align": "right", "valign": "middle", "colspan": 2},
            ],
            [
                {"text": "y", "align": "left", "valign": "top"},
                {"text": "z", "align": "left", "valign": "top"},
            ],
        ]}])
    );
}

#[test]
fn html_details() {
    assert_eq!(
        html("<details open><summary>S <b>b</b></summary><p>d</p>loose</details>"),
        json!([{"type": "details", "is_open": true,
        "summary": ["S ", {"type": "bold", "text": "b"}],
        "blocks": [
            {"type": "paragraph", "text": "d"},
            {"type": "paragraph", "text": "loose"},
        ]}])
    );
    assert_eq!(
        html("<details><p>no summary</p></details>")[0]["summary"],
        "Details"
    );
}

#[test]
fn html_is_lenient_with_unknown_and_unbalanced_tags() {
    assert_eq!(
        html("<div><blink>a</blink> <b>b</p> c</div></b></i><p>d"),
        json!([
            {"type": "paragraph", "text": ["a ", {"type": "bold", "text": "b c"}]},
            {"type": "paragraph", "text": "d"},
        ])
    );
    assert_eq!(
        html("<!-- comment --><!DOCTYPE html>1 < 2"),
        json!([{"type": "paragraph", "text": "1 < 2"}])
    );
}

#[test]
fn html_math() {
    assert_eq!(
        html("<tg-math-block>E=mc^2</tg-math-block><p><tg-math>x^2</tg-math></p>"),
        json!([
            {"type": "mathematical_expression", "expression": "E=mc^2"},
            {"type": "paragraph", "text": {"type": "mathematical_expression", "expression": "x^2"}},
        ])
    );
}

#[test]
fn html_media_and_broken_markup_are_refused() {
    for source in [
        "<img src=\"x\">",
        "<p>a<video src=x></video></p>",
        "<tg-collage>",
    ] {
        assert_eq!(
            err(json!({"html": source})),
            RichError::MediaUnsupported,
            "{source}"
        );
    }
    for source in ["<b", "x<y", "<a href=\"x>", "x <!-- y", "</b"] {
        assert!(
            matches!(err(json!({"html": source})), RichError::Parse(_)),
            "{source}"
        );
    }
}

// --- blocks -----------------------------------------------------------------------------------

fn all_text_blocks() -> Value {
    json!([
        {"type": "heading", "text": "Title", "size": 2},
        {"type": "paragraph", "text": ["a ", {"type": "bold", "text": {"type": "italic", "text": "b"}}]},
        {"type": "pre", "text": "code", "language": "go"},
        {"type": "footer", "text": "f"},
        {"type": "divider"},
        {"type": "mathematical_expression", "expression": "x"},
        {"type": "anchor", "name": "here"},
        {"type": "list", "items": [
            {"blocks": [{"type": "paragraph", "text": "one"}]},
            {"blocks": [{"type": "paragraph", "text": "two"}], "has_checkbox": true, "is_checked": true},
        ]},
        {"type": "list", "items": [
            {"blocks": [{"type": "paragraph", "text": "three"}], "value": 3},
            {"blocks": [{"type": "paragraph", "text": "four"}], "type": "i"},
        ]},
        {"type": "blockquote", "blocks": [{"type": "paragraph", "text": "q"}], "credit": "c"},
        {"type": "expandable_blockquote", "text": "e", "credit": "c"},
        {"type": "pullquote", "text": "p"},
        {"type": "table", "is_bordered": true, "caption": "cap", "cells": [
            [{"text": "h", "is_header": true, "align": "center", "valign": "middle", "colspan": 2}],
            [{"text": "1", "align": "left", "valign": "top"}, {"align": "left", "valign": "top"}],
        ]},
        {"type": "details", "summary": "s", "blocks": [{"type": "paragraph", "text": "d"}], "is_open": false},
        {"type": "map", "location": {"latitude": 1.5, "longitude": 2.5}, "zoom": 10, "width": 300, "height": 200,
         "caption": {"text": "map", "credit": "osm"}},
        {"type": "buttons", "align": "center", "buttons": [
            {"text": "go", "url": "https://e.com"},
            {"text": "copy", "copy_text": {"text": "c"}},
        ]},
        {"type": "thinking", "text": "hmm"},
    ])
}

#[test]
fn blocks_are_accepted_as_frankenstein_sends_them() {
    let input = json!({"blocks": all_text_blocks(), "is_rtl": true});
    // The test input itself must be a valid InputRichMessage.
    serde_json::from_value::<InputRichMessage>(input.clone()).unwrap();
    let out = ok(input);
    assert_eq!(out["is_rtl"], true);
    let blocks = out["blocks"].as_array().unwrap();
    let expected = all_text_blocks();
    for (i, block) in blocks.iter().enumerate() {
        if block["type"] == "list" {
            continue;
        }
        assert_eq!(block, &expected[i], "block {i}");
    }
    assert_eq!(
        blocks[7]["items"],
        json!([
            {"label": "•", "blocks": [{"type": "paragraph", "text": "one"}]},
            {"label": "•", "has_checkbox": true, "is_checked": true,
             "blocks": [{"type": "paragraph", "text": "two"}]},
        ])
    );
    assert_eq!(
        blocks[8]["items"],
        json!([
            {"label": "3.", "value": 3, "blocks": [{"type": "paragraph", "text": "three"}]},
            {"label": "iv.", "type": "i", "blocks": [{"type": "paragraph", "text": "four"}]},
        ])
    );
}

#[test]
fn blocks_rich_text_of_every_kind() {
    let texts = json!([
        "plain",
        {"type": "underline", "text": "u"},
        {"type": "strikethrough", "text": "s"},
        {"type": "spoiler", "text": "s"},
        {"type": "subscript", "text": "s"},
        {"type": "superscript", "text": "s"},
        {"type": "marked", "text": "m"},
        {"type": "code", "text": "c"},
        {"type": "date_time", "text": "now", "unix_time": 1_700_000_000, "date_time_format": "r"},
        {"type": "text_mention", "text": "Ann", "user": {"id": 7, "is_bot": false, "first_name": "Ann"}},
        {"type": "custom_emoji", "custom_emoji_id": "5368324170671202286", "alternative_text": "👍"},
        {"type": "mathematical_expression", "expression": "x"},
        {"type": "url", "text": "u", "url": "https://e.com"},
        {"type": "email_address", "text": "e", "email_address": "a@b.co"},
        {"type": "phone_number", "text": "p", "phone_number": "+1"},
        {"type": "bank_card_number", "text": "b", "bank_card_number": "4242"},
        {"type": "mention", "text": "@a", "username": "a"},
        {"type": "hashtag", "text": "#h", "hashtag": "h"},
        {"type": "cashtag", "text": "$C", "cashtag": "C"},
        {"type": "bot_command", "text": "/s", "bot_command": "s"},
        {"type": "button", "button": {"text": "b", "callback_data": "d"}},
        {"type": "anchor", "name": "a"},
        {"type": "anchor_link", "text": "t", "anchor_name": "a"},
        {"type": "reference", "text": "t", "name": "r"},
        {"type": "reference_link", "text": "t", "reference_name": "r"},
    ]);
    let out = ok(json!({"blocks": [{"type": "paragraph", "text": texts}]}));
    assert_eq!(out["blocks"][0]["text"], texts);
}

#[test]
fn blocks_drop_unknown_fields() {
    let out = ok(json!({"blocks": [
        {"type": "paragraph", "text": {"type": "bold", "text": "b", "extra": 1}, "extra": 2},
    ]}));
    assert_eq!(
        out["blocks"],
        json!([{"type": "paragraph", "text": {"type": "bold", "text": "b"}}])
    );
}

#[test]
fn blocks_table_cells_get_default_alignment() {
    let out = ok(json!({"blocks": [{"type": "table", "cells": [[{"text": "x"}]]}]}));
    assert_eq!(
        out["blocks"][0]["cells"],
        json!([[{"text": "x", "align": "left", "valign": "top"}]])
    );
}

#[test]
fn blocks_errors() {
    let bad = |blocks: Value| err(json!({ "blocks": blocks }));
    assert_eq!(
        bad(json!([{"type": "marquee"}])),
        RichError::InvalidBlockType("marquee".into())
    );
    assert_eq!(
        bad(json!([{"type": "paragraph", "text": {"type": "blink", "text": "x"}}])),
        RichError::InvalidTextType("blink".into())
    );
    for media in [
        json!({"type": "photo", "photo": {"type": "photo", "media": "tg://photo?id=1"}}),
        json!({"type": "video", "video": {"type": "video", "media": "https://e.com/v.mp4"}}),
        json!({"type": "audio", "audio": {}}),
        json!({"type": "animation", "animation": {}}),
        json!({"type": "voice_note", "voice_note": {}}),
        json!({"type": "document", "document": {}}),
        json!({"type": "collage", "blocks": []}),
        json!({"type": "slideshow", "blocks": []}),
    ] {
        assert_eq!(bad(json!([media])), RichError::MediaUnsupported);
    }
    let parse_errors = [
        json!("not an array"),
        json!(["not an object"]),
        json!([{"text": "no type"}]),
        json!([{"type": "paragraph"}]),
        json!([{"type": "paragraph", "text": 5}]),
        json!([{"type": "heading", "text": "h"}]),
        json!([{"type": "heading", "text": "h", "size": 7}]),
        json!([{"type": "pre", "text": "x", "language": 1}]),
        json!([{"type": "list"}]),
        json!([{"type": "list", "items": [{"label": "x"}]}]),
        json!([{"type": "blockquote"}]),
        json!([{"type": "table", "cells": [{"text": "x"}]}]),
        json!([{"type": "details", "blocks": []}]),
        json!([{"type": "mathematical_expression"}]),
        json!([{"type": "map", "location": {"latitude": 1}, "zoom": 1, "width": 1, "height": 1}]),
        json!([{"type": "paragraph", "text": {"type": "url", "text": "x"}}]),
        json!([{"type": "paragraph", "text": {"type": "text_mention", "text": "x", "user": {"id": 1}}}]),
    ];
    for blocks in parse_errors {
        assert!(
            matches!(bad(blocks.clone()), RichError::Parse(_)),
            "{blocks}"
        );
    }
}

// --- the message as a whole -------------------------------------------------------------------

#[test]
fn exactly_one_source() {
    assert_eq!(err(json!({})), RichError::SourceCount);
    assert_eq!(err(json!({"markdown": null})), RichError::SourceCount);
    assert_eq!(
        err(json!({"markdown": "a", "html": "b"})),
        RichError::SourceCount
    );
    assert_eq!(
        err(json!({"blocks": [], "markdown": "a"})),
        RichError::SourceCount
    );
}

#[test]
fn malformed_message() {
    assert!(matches!(err(json!("markdown")), RichError::Parse(_)));
    assert!(matches!(err(json!({"markdown": 1})), RichError::Parse(_)));
    assert!(matches!(err(json!({"html": []})), RichError::Parse(_)));
    assert!(matches!(
        err(json!({"markdown": "a", "is_rtl": "yes"})),
        RichError::Parse(_)
    ));
    assert!(matches!(
        err(json!({"markdown": "a", "media": {}})),
        RichError::Parse(_)
    ));
}

#[test]
fn empty_messages() {
    for input in [
        json!({"markdown": ""}),
        json!({"markdown": "  \n\n "}),
        json!({"html": "<p> </p>\n\n<b></b>"}),
        json!({"blocks": []}),
        json!({"blocks": [{"type": "paragraph", "text": ""}]}),
        json!({"blocks": [{"type": "anchor", "name": "a"}]}),
    ] {
        assert_eq!(err(input.clone()), RichError::Empty, "{input}");
    }
    // A divider shows something.
    ok(json!({"markdown": "---"}));
}

#[test]
fn media_list() {
    let media = |n: usize| {
        let item = json!({"id": "p", "media": {"type": "photo", "media": "https://e.com/p.jpg"}});
        json!({"markdown": "x", "media": vec![item; n]})
    };
    serde_json::from_value::<InputRichMessage>(media(1)).unwrap();
    assert_eq!(err(media(1)), RichError::MediaUnsupported);
    assert_eq!(err(media(51)), RichError::TooManyMedia);
    ok(json!({"markdown": "x", "media": []}));
}

#[test]
fn length_limit() {
    let at_limit = "a".repeat(32768);
    ok(json!({ "markdown": at_limit }));
    let over = "é".repeat(32769);
    assert_eq!(err(json!({ "markdown": over })), RichError::TooLong);
    assert_eq!(
        err(json!({"markdown": "x".repeat(33_000)})),
        RichError::TooLong
    );
    // Content counts; markup and URLs do not.
    let long_url = format!("[a](https://e.com/{})", "x".repeat(40_000));
    ok(json!({ "markdown": long_url }));
}

#[test]
fn block_count_limit() {
    let paragraphs = |n: usize| vec!["p"; n].join("\n\n");
    ok(json!({"markdown": paragraphs(500)}));
    assert_eq!(
        err(json!({"markdown": paragraphs(501)})),
        RichError::TooManyBlocks
    );
    let blocks = vec![json!({"type": "paragraph", "text": "p"}); 501];
    assert_eq!(err(json!({ "blocks": blocks })), RichError::TooManyBlocks);
    // A list of 250 items is 1 list + 250 items + 250 paragraphs.
    let items = vec!["- i"; 250].join("\n");
    assert_eq!(err(json!({ "markdown": items })), RichError::TooManyBlocks);
    // Table rows count too.
    let rows = format!("| a |\n|---|\n{}", vec!["| b |"; 500].join("\n"));
    assert_eq!(err(json!({ "markdown": rows })), RichError::TooManyBlocks);
}

#[test]
fn depth_limit() {
    let quotes = |n: usize| format!("{} deep", ">".repeat(n));
    ok(json!({"markdown": quotes(16)}));
    assert_eq!(err(json!({"markdown": quotes(17)})), RichError::TooDeep);

    let html_quotes = |n: usize| format!("{}x", "<blockquote>".repeat(n));
    ok(json!({"html": html_quotes(16)}));
    assert_eq!(err(json!({"html": html_quotes(17)})), RichError::TooDeep);

    let nested = |n: usize| {
        let mut block = json!({"type": "paragraph", "text": "x"});
        for _ in 0..n {
            block = json!({"type": "blockquote", "blocks": [block]});
        }
        json!({ "blocks": [block] })
    };
    ok(nested(16));
    assert_eq!(err(nested(17)), RichError::TooDeep);

    let bold = |n: usize| format!("{}x{}", "<b>".repeat(n), "</b>".repeat(n));
    ok(json!({"html": bold(16)}));
    assert_eq!(err(json!({"html": bold(17)})), RichError::TooDeep);

    let mut text = json!("x");
    for _ in 0..17 {
        text = json!({"type": "bold", "text": text});
    }
    assert_eq!(
        err(json!({"blocks": [{"type": "paragraph", "text": text}]})),
        RichError::TooDeep
    );
}

#[test]
fn column_limit() {
    let table = |n: usize| {
        let row = format!("|{}", "a|".repeat(n));
        let rule = format!("|{}", "-|".repeat(n));
        format!("{row}\n{rule}\n{row}")
    };
    ok(json!({"markdown": table(20)}));
    assert_eq!(
        err(json!({"markdown": table(21)})),
        RichError::TooManyColumns
    );
    let cells = vec![json!({"text": "c", "align": "left", "valign": "top"}); 21];
    assert_eq!(
        err(json!({"blocks": [{"type": "table", "cells": [cells]}]})),
        RichError::TooManyColumns
    );
    let html_row = format!("<table><tr>{}</tr></table>", "<td>c</td>".repeat(21));
    assert_eq!(err(json!({ "html": html_row })), RichError::TooManyColumns);
}

#[test]
fn custom_limits() {
    let limits = Limits {
        max_chars: 3,
        ..Limits::default()
    };
    assert!(convert(&json!({"markdown": "abc"}), &limits).is_ok());
    assert_eq!(
        convert(&json!({"markdown": "abcd"}), &limits),
        Err(RichError::TooLong)
    );
    assert_eq!(
        Limits::default(),
        Limits {
            max_chars: 32768,
            max_blocks: 500,
            max_depth: 16,
            max_media: 50,
            max_table_columns: 20,
        }
    );
}

#[test]
fn error_texts() {
    let texts = [
        (
            RichError::SourceCount,
            "rich message must have exactly one of blocks, html, markdown",
        ),
        (RichError::TooLong, "rich message is too long"),
        (RichError::TooManyBlocks, "too many blocks in rich message"),
        (RichError::TooDeep, "rich message nesting is too deep"),
        (
            RichError::TooManyColumns,
            "too many columns in rich message table",
        ),
        (RichError::TooManyMedia, "too many media in rich message"),
        (
            RichError::MediaUnsupported,
            "tg-fake does not support media in rich messages",
        ),
        (
            RichError::Parse("unclosed start tag \"b\"".into()),
            "can't parse rich message: unclosed start tag \"b\"",
        ),
        (
            RichError::InvalidBlockType("x".into()),
            "invalid block type \"x\"",
        ),
        (
            RichError::InvalidTextType("x".into()),
            "invalid rich text type \"x\"",
        ),
        (RichError::Empty, "rich message text is empty"),
    ];
    for (error, text) in texts {
        assert_eq!(error.to_string(), text);
    }
}

// --- plain text and counting ------------------------------------------------------------------

#[test]
fn plain_text_of_markdown() {
    let out = ok(json!({"markdown":
        "# Title\n\nSome **bold** and [a link](https://e.com) and $x^2$.\n\n\
         - one\n- two\n  - nested\n\n1. first\n2. second\n\n- [x] done\n- [ ] todo\n\n\
         > quoted\n\n---\n\n| A | B |\n|---|---|\n| 1 | 2 |\n\n```\ncode\n```"
    }));
    assert_eq!(
        plain_text(&out),
        "Title\n\
         Some bold and a link and x^2.\n\
         - one\n- two\n  - nested\n\
         1. first\n2. second\n\
         - [x] done\n- [ ] todo\n\
         quoted\n\
         ---\n\
         A\tB\n1\t2\n\
         code"
    );
}

#[test]
fn plain_text_of_blocks() {
    let out = ok(json!({"blocks": all_text_blocks()}));
    assert_eq!(
        plain_text(&out),
        "Title\na b\ncode\nf\n---\nx\n\
         - one\n- [x] two\n3. three\niv. four\n\
         q\n— c\ne\n— c\np\n\
         cap\nh\n1\t\n\
         s\nd\n[map]\nmap\n— osm\n[go] [copy]\nhmm"
    );
    // A bare block array works too.
    assert_eq!(plain_text(&out["blocks"]), plain_text(&out));
}

#[test]
fn char_count_counts_content_only() {
    let out = ok(
        json!({"markdown": "**ab** [c](https://long.example.com) $x+1$\n\n- é\n\n| h |\n|---|\n| 🎉 |"}),
    );
    // "ab c x+1" + "é" + "h" + "🎉"
    assert_eq!(char_count(&out), 8 + 1 + 1 + 1);
    assert_eq!(char_count(&json!({"blocks": []})), 0);
    assert_eq!(char_count(&json!("garbage")), 0);
}

// --- shape ------------------------------------------------------------------------------------

#[test]
fn broad_sample_deserializes_into_rich_message() {
    let markdown = [
        "plain",
        "# h\n\ntext *i* **b** ***bi*** ~~s~~ `c` ==m== ||s|| <u>u</u> <sup>1</sup> <sub>2</sub>",
        "1. a\n   > quote in item\n   ```js\n   x\n   ```\n2. b",
        "- [ ] a\n  - [x] b\n    1. c",
        "> # heading in quote\n> - list in quote\n>\n> | t |\n> |---|\n> | c |",
        "| a | b |\n|---|:-:|\n| `x` | [l](https://e.com) |\n| only one |",
        "text[^1]\n\n[^1]: note with **bold**\n\n    and a second paragraph",
        "$$\\int x$$ and $y$\n\n```math\nz\n```",
        "<details open>\n<summary>**not md**</summary>\n\n- item\n\n</details>",
        "<table><tr><td>html table in md</td></tr></table>",
        "<b>unclosed bold\n\nnext",
        "Hard  \nbreak\\\nand soft\nbreak",
        "<a href=\"#x\">jump</a> <a name=\"x\"></a> <https://auto.link> <me@e.com>",
        "***\n\n___\n\n* * *",
        "- a\n\n  b\n- c",
        "<ul><li>html list in md</li></ul>",
        "text <br> with break <tg-emoji emoji-id=\"5368324170671202286\">👍</tg-emoji>",
        "> [!NOTE]\n> gfm alert",
    ];
    for source in markdown {
        ok(json!({ "markdown": source }));
    }
    let html_sources = [
        "plain",
        "<p>a</p><p>b</p>",
        "<ul><li><p>p</p><blockquote>q</blockquote></li><li><ul><li>deep</li></ul></li></ul>",
        "<ol><li>x</li>stray text<li>y</li></ol>",
        "<table><td>no tr</td>text outside cells<tr><th>h</table>",
        "<table><caption><b>c</b></caption><tr><td><p>p1</p><p>p2</p></td></tr></table>",
        "<details><summary>s</summary><details><summary>inner</summary>x</details></details>",
        "<li>orphan item</li><td>orphan cell</td><summary>orphan summary</summary><cite>c</cite><caption>x</caption>",
        "<blockquote><ul><li>l</li></ul><cite>c</cite></blockquote>",
        "<aside><p>pull</p><cite>who</cite></aside>",
        "<blockquote expandable><p>a</p><ul><li>b</li></ul><tg-math-block>m</tg-math-block></blockquote>",
        "<footer><p>f1</p><p>f2</p></footer>",
        "<pre>a<br>b</pre><pre><code>no lang</code></pre>",
        "<tg-time unix=\"1700000000\" format=\"wDT\">then</tg-time> <tg-emoji emoji-id=\"1\">🙂</tg-emoji>",
        "<a href=\"tel:+123\">call</a> <a href=\"\">empty</a> <a>bare</a>",
        "<b><p>block in inline</p></b>",
        "<h7>not a heading</h7><section>s</section>",
        "<ol type=\"I\" start=\"4\"><li>four</li><li>five</li></ol>",
        "<table><tr><td rowspan=\"2\" colspan=\"x\">r</td></tr></table>",
        "<p>&nbsp;</p>x",
    ];
    for source in html_sources {
        ok(json!({ "html": source }));
    }
}

/// Random soups of markup pieces: never a panic, and whatever is accepted is a `RichMessage`.
#[test]
fn random_markup_is_refused_or_well_formed() {
    const PIECES: [&str; 58] = [
        "a",
        "word ",
        " ",
        "\n",
        "\n\n",
        "**",
        "__",
        "*",
        "_",
        "~~",
        "`",
        "```",
        "```math\n",
        "==",
        "||",
        "$",
        "$$",
        "[",
        "](https://e.com)",
        "[^1]",
        "[^1]: ",
        "# ",
        "### ",
        "> ",
        "- ",
        "1. ",
        "- [ ] ",
        "- [x] ",
        "|",
        "|---|",
        "---",
        "\\",
        "<b>",
        "</b>",
        "<i>",
        "</i>",
        "<p>",
        "</p>",
        "<ul>",
        "<li>",
        "</li>",
        "</ul>",
        "<table>",
        "<tr>",
        "<td>",
        "<th>",
        "</table>",
        "<details>",
        "<summary>",
        "</summary>",
        "</details>",
        "<blockquote>",
        "</blockquote>",
        "<pre>",
        "</pre>",
        "&amp;",
        "<br>",
        "é🎉",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut accepted = 0;
    for round in 0..4000 {
        let len = 1 + next() % 40;
        let source: String = (0..len)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        let key = if round % 2 == 0 { "markdown" } else { "html" };
        let input = json!({ key: source });
        if let Ok(out) = convert(&input, &Limits::default()) {
            if let Err(e) = serde_json::from_value::<RichMessage>(out.clone()) {
                panic!("{input} gave {out}, not a RichMessage: {e}");
            }
            plain_text(&out);
            accepted += 1;
        }
    }
    assert!(accepted > 3000, "only {accepted} accepted");
}
