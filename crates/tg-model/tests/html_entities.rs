//! Cross-module checks: everything `html` and `entities` produce is a Bot API `MessageEntity`
//! that a third-party client (frankenstein) reads, and the whole send pipeline fits together.

#![allow(clippy::unwrap_used)]

use frankenstein::types::{MessageEntity, MessageEntityType};
use serde_json::{Value, json};
use tg_model::{entities, html, utf16};

/// Deserialises as frankenstein's `Vec<MessageEntity>` and checks every type is a known one.
fn assert_bot_api_entities(text: &str, values: &[Value]) {
    let parsed: Vec<MessageEntity> = serde_json::from_value(Value::Array(values.to_vec()))
        .unwrap_or_else(|e| panic!("{values:?} is not a MessageEntity list: {e}"));
    assert_eq!(parsed.len(), values.len());
    for entity in &parsed {
        assert_ne!(entity.type_field, MessageEntityType::Unknown, "{values:?}");
        let (offset, length) = (usize::from(entity.offset), usize::from(entity.length));
        assert!(length > 0);
        assert!(
            utf16::slice(text, offset, length).is_some(),
            "{entity:?} does not fit {text:?}"
        );
    }
}

const HTML_SAMPLES: &[&str] = &[
    "😀 <b>x</b>",
    "<b>bold</b> <i>italic</i> <u>u</u> <s>s</s> <tg-spoiler>sp</tg-spoiler>",
    "<span class=\"tg-spoiler\">спойлер</span>",
    "<b>a<i>b<u>c</u></i>d</b>",
    "<a href=\"https://example.com\">link</a> <a href=\"tg://user?id=42\">user</a>",
    "<code>code</code> <pre>pre</pre>",
    "<pre><code class=\"language-python\">print(1)</code></pre>",
    "<blockquote>quote</blockquote>\n<blockquote expandable>long\nquote</blockquote>",
    "<tg-emoji emoji-id=\"5368324170671202286\">👍</tg-emoji>",
    "<tg-time unix=\"1647531900\" format=\"wDT\">soon</tg-time> <tg-time unix=\"1\">then</tg-time>",
    "<b>Привет, <a href=\"https://t.me/durov\">Павел</a>!</b> 🇺🇦",
];

#[test]
fn html_output_is_valid_bot_api_json() {
    for sample in HTML_SAMPLES {
        let parsed = html::parse(sample).unwrap();
        assert!(!parsed.entities.is_empty(), "{sample}");
        assert_bot_api_entities(&parsed.text, &parsed.entities);
    }
}

#[test]
fn detect_output_is_valid_bot_api_json() {
    let text = "/start@my_bot hi @durov #тег $USD https://example.com/a, t.me/x, tg://resolve?domain=x \
                mail me@example.org 😀";
    let found = entities::detect(text);
    let types: Vec<&str> = found.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "bot_command",
            "mention",
            "hashtag",
            "cashtag",
            "url",
            "url",
            "url",
            "email"
        ]
    );
    assert_bot_api_entities(text, &found);
}

#[test]
fn validate_output_is_valid_bot_api_json() {
    let text = "abcdefghij";
    let out = entities::validate(
        text,
        &json!([
            {"type": "bold", "offset": 0, "length": 2},
            {"type": "pre", "offset": 2, "length": 2, "language": "sh"},
            {"type": "text_link", "offset": 4, "length": 1, "url": "example.com"},
            {"type": "custom_emoji", "offset": 5, "length": 1, "custom_emoji_id": "5"},
            {"type": "text_mention", "offset": 6, "length": 1,
             "user": {"id": 7, "is_bot": false, "first_name": "U"}},
            {"type": "date_time", "offset": 7, "length": 1, "unix_time": 9, "date_time_format": "r"},
            {"type": "expandable_blockquote", "offset": 8, "length": 2},
        ]),
    )
    .unwrap();
    assert_eq!(out.len(), 7);
    assert_bot_api_entities(text, &out);
}

/// What the fake server does for `sendMessage` with `parse_mode=HTML`.
fn send_html(input: &str) -> html::Parsed {
    let parsed = html::trim(html::clean(html::parse(input).unwrap()));
    let entities = entities::merge_detected(&parsed.text, parsed.entities);
    html::Parsed {
        text: parsed.text,
        entities,
    }
}

#[test]
fn full_pipeline() {
    let sent = send_html("\n  <b>Hi</b> @durov,\r\n\tsee https://t.me/x.  \n");
    assert_eq!(sent.text, "Hi @durov,\n see https://t.me/x.");
    assert_eq!(
        sent.entities,
        vec![
            json!({"type": "bold", "offset": 0, "length": 2}),
            json!({"type": "mention", "offset": 3, "length": 6}),
            json!({"type": "url", "offset": 16, "length": 14}),
        ]
    );
    assert_bot_api_entities(&sent.text, &sent.entities);

    // Validated caller entities follow the same path.
    let text = "see https://x.com now";
    let caller = entities::validate(
        text,
        &json!([{"type": "italic", "offset": 0, "length": 21}]),
    )
    .unwrap();
    let merged = entities::merge_detected(text, caller);
    assert_eq!(
        merged,
        vec![
            json!({"type": "italic", "offset": 0, "length": 4}),
            json!({"type": "url", "offset": 4, "length": 13}),
            json!({"type": "italic", "offset": 4, "length": 13}),
            json!({"type": "italic", "offset": 17, "length": 4}),
        ]
    );
}

#[test]
fn escaped_text_survives_the_pipeline() {
    let original = "if a < b && c > d { print(\"<b>\") }";
    let sent = send_html(&html::escape(original));
    assert_eq!(sent.text, original);
    assert!(sent.entities.is_empty());
}
