//! Telegram HTML (`parse_mode: HTML`), written: what the renderer and the hub's own HTML
//! messages escape their text with. Reading it back, as Telegram does, is tg-model's `html`.

/// Escapes `&`, `<`, `>` and `"` so that Telegram's HTML parser (tg-model's `html::parse`)
/// gives back `text` with no entities.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            _ => escaped.push(c),
        }
    }
    escaped
}
