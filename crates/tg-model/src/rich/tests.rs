//! Checks of the typed model against the JSON it stands for.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::model::{Block, Button, ListItem, RichText, Style, TextObject, ordered_label};
use super::plain::text_plain;
use super::{Limits, convert};

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

#[test]
fn labels() {
    assert_eq!(ordered_label(3, None), "3.");
    assert_eq!(ordered_label(28, Some("a")), "ab.");
    assert_eq!(ordered_label(14, Some("I")), "XIV.");
    assert_eq!(ordered_label(0, Some("i")), "0.");
}

/// Every rich text object, each holding a little text.
fn every_text_object() -> Vec<RichText> {
    let t = || {
        RichText::Concat(vec![
            RichText::Plain("a".into()),
            Style::Bold.apply("b".into()),
        ])
    };
    let s = || "s".to_string();
    let mut texts: Vec<RichText> = [
        Style::Bold,
        Style::Italic,
        Style::Underline,
        Style::Strikethrough,
        Style::Spoiler,
        Style::Subscript,
        Style::Superscript,
        Style::Marked,
        Style::Code,
    ]
    .into_iter()
    .map(|style| style.apply(t()))
    .collect();
    texts.extend(
        [
            TextObject::DateTime {
                text: t(),
                unix_time: 5,
                date_time_format: s(),
            },
            TextObject::TextMention {
                text: t(),
                user: json!({"id": 1, "is_bot": false, "first_name": "A"}),
            },
            TextObject::CustomEmoji {
                custom_emoji_id: "1".into(),
                alternative_text: "👍".into(),
            },
            TextObject::MathematicalExpression {
                expression: "x^2".into(),
            },
            TextObject::Url {
                text: t(),
                url: s(),
            },
            TextObject::EmailAddress {
                text: t(),
                email_address: s(),
            },
            TextObject::PhoneNumber {
                text: t(),
                phone_number: s(),
            },
            TextObject::BankCardNumber {
                text: t(),
                bank_card_number: s(),
            },
            TextObject::Mention {
                text: t(),
                username: s(),
            },
            TextObject::Hashtag {
                text: t(),
                hashtag: s(),
            },
            TextObject::Cashtag {
                text: t(),
                cashtag: s(),
            },
            TextObject::BotCommand {
                text: t(),
                bot_command: s(),
            },
            TextObject::Button {
                button: Box::new(Button {
                    text: t(),
                    ..Button::default()
                }),
            },
            TextObject::Anchor { name: s() },
            TextObject::AnchorLink {
                text: t(),
                anchor_name: s(),
            },
            TextObject::Reference {
                text: t(),
                name: s(),
            },
            TextObject::FootnoteLabel {
                name: s(),
                text: t(),
            },
            TextObject::ReferenceLink {
                text: t(),
                reference_name: s(),
            },
        ]
        .into_iter()
        .map(RichText::object),
    );
    texts
}

impl From<&str> for RichText {
    fn from(s: &str) -> Self {
        RichText::Plain(s.into())
    }
}

#[test]
fn typed_plain_text_reads_like_the_json_reader() {
    for text in every_text_object() {
        let mut typed = String::new();
        text.push_plain(&mut typed);
        let mut read = String::new();
        text_plain(&serde_json::to_value(&text).unwrap(), &mut read);
        assert_eq!(typed, read, "{}", to_json(&text));
    }
}

#[test]
fn objects_serialize_with_their_type_first() {
    for text in every_text_object() {
        let value = serde_json::to_value(&text).unwrap();
        assert_eq!(
            value
                .as_object()
                .and_then(|o| o.keys().next())
                .map(String::as_str),
            Some("type"),
            "{value}"
        );
    }
    assert_eq!(
        to_json(&RichText::Concat(vec![
            "a".into(),
            Style::Code.apply("b".into())
        ])),
        r#"["a",{"type":"code","text":"b"}]"#
    );
}

#[test]
fn references_keep_the_field_order_of_their_source() {
    // A footnote's label has always been answered with `name` first, a `reference` given in
    // the blocks form with `text` first.
    let footnote = convert(
        &json!({"markdown": "a[^n]\n\n[^n]: note"}),
        &Limits::default(),
    );
    let footnote = serde_json::to_string(&footnote.unwrap()).unwrap();
    assert!(
        footnote.contains(r#"{"type":"reference","name":"n","text":"1."}"#),
        "{footnote}"
    );
    let input = json!({"blocks": [{"type": "paragraph",
        "text": {"type": "reference", "name": "n", "text": "x"}}]});
    let given = serde_json::to_string(&convert(&input, &Limits::default()).unwrap()).unwrap();
    assert!(
        given.contains(r#"{"type":"reference","text":"x","name":"n"}"#),
        "{given}"
    );
}

#[test]
fn optional_fields_are_left_out() {
    let item = ListItem::new("•".into(), vec![Block::Divider], None, None, None);
    assert_eq!(
        to_json(&item),
        r#"{"label":"•","blocks":[{"type":"divider"}]}"#
    );
    let item = ListItem::new("3.".into(), vec![], Some(false), Some(3), Some("a".into()));
    assert_eq!(
        to_json(&item),
        r#"{"label":"3.","blocks":[],"has_checkbox":true,"is_checked":false,"value":3,"type":"a"}"#
    );
    // A value past 32 bits is shown by the label only.
    let item = ListItem::new("x".into(), vec![], None, Some(1 << 40), None);
    assert_eq!(to_json(&item), r#"{"label":"x","blocks":[]}"#);
    let pre = Block::Pre {
        text: "x".into(),
        language: None,
    };
    assert_eq!(to_json(&pre), r#"{"type":"pre","text":"x"}"#);
}

#[test]
fn flattening_joins_blocks_with_newlines() {
    let blocks = vec![
        Block::Paragraph { text: "a".into() },
        Block::Divider,
        Block::MathematicalExpression {
            expression: "x".into(),
        },
        Block::List {
            items: vec![ListItem::new(
                "1.".into(),
                vec![Block::Paragraph { text: "b".into() }],
                None,
                Some(1),
                None,
            )],
        },
    ];
    let flat: Value = serde_json::to_value(Block::flatten(&blocks).unwrap()).unwrap();
    assert_eq!(
        flat,
        json!(["a\n", {"type": "mathematical_expression", "expression": "x"}, "\n1. b"])
    );
    assert_eq!(Block::flatten(&[Block::Divider]), None);
}
