//! Callback data: the stored action behind a button token (`Button::decode`, which also reads
//! the colon form of earlier versions) and pi's `telegram_button` payloads that become buttons.

use hub::buttons::Button;
use hub::outgoing::markup::{self, buttons::parse_buttons};

/// Any text as a stored action and as a button payload: never a panic; a decoded action
/// encodes to something that decodes to the same action; parsed buttons keep the documented
/// shape (rows never empty, labels and prompts non-empty and trimmed).
pub fn callback(data: &[u8]) {
    let text = crate::text(data);
    if let Some(button) = Button::decode(&text) {
        let stored = button.encode();
        assert_eq!(
            Button::decode(&stored).as_ref(),
            Some(&button),
            "decode(encode(b)) == b for {stored}"
        );
    }
    if let Ok(rows) = parse_buttons(&text) {
        for row in &rows {
            assert!(!row.is_empty(), "an empty row in {rows:?}");
            for b in row {
                for (what, s) in [("label", &b.label), ("prompt", &b.prompt)] {
                    assert!(!s.is_empty(), "an empty {what} in {rows:?}");
                    assert_eq!(s.trim(), s.as_str(), "an untrimmed {what} in {rows:?}");
                }
            }
        }
    }
    let _ = markup::voice::parse_voice(&text);
    // The same text as an answer that may hold comments: one without any comes back byte for
    // byte.
    let extracted = markup::extract(&text);
    if !text.contains("<!--") {
        assert_eq!(extracted.text, text, "an answer without comments changed");
    }
}
