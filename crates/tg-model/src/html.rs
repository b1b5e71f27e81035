//! Telegram's HTML `parse_mode`: markup in, plain text plus `MessageEntity` objects out, with
//! the error texts Telegram gives.
//!
//! This is a port of TDLib's `parse_html` (what the Bot API server runs for
//! `parse_mode=HTML`), so it accepts and rejects exactly what Telegram does, including its
//! quirks:
//! - Tags: `b`/`strong`, `i`/`em`, `u`/`ins`, `s`/`strike`/`del`, `tg-spoiler` and
//!   `<span class="tg-spoiler">`, `a href`, `code`, `pre` (with `<pre><code class="language-x">`
//!   giving one `pre` entity with `language`), `blockquote` (`expandable` attribute for
//!   `expandable_blockquote`), `tg-emoji emoji-id`, `tg-time unix format`. Tag names are
//!   case-insensitive; anything else (`<br>`, `<p>`, a bare `<` as in `a < b`) is an error.
//! - Attribute names are case-sensitive (`HREF` is ignored), unknown attributes are ignored.
//!   Values are quoted (`"` or `'`, character references decoded) or an unquoted token of
//!   letters, digits, `.` and `-`, which is lowercased.
//! - Character references: `&lt;`, `&gt;`, `&amp;`, `&quot;` (the `;` is optional) and numeric
//!   ones (`&#123;`, `&#x1F600;`, lowercase `x` only). Anything else, like `&nbsp;` or a bare
//!   `&`, stays literal.
//! - `</>` closes the innermost open tag.
//! - A link's `href` is checked and normalised like Telegram does (`https://example.com`
//!   becomes `https://example.com/`, `example.com` becomes `http://example.com/`); a link
//!   Telegram rejects (e.g. `href="foo"`, `javascript:...`) keeps its text but gets no entity.
//!   `<a>` without `href` uses its text as the URL. `tg://user?id=N` links stay `text_link`
//!   entities (Telegram turns them into `text_mention` with the user; not modelled).
//! - Empty elements produce no entity (and are not checked: `<tg-emoji></tg-emoji>` is fine).
//! - Entities then go through Telegram's nesting rules (see [`parse`]).
//!
//! The whole Bot API pipeline for a message text is [`parse`], [`clean`], [`trim`], then
//! [`crate::entities::merge_detected`]; an empty text after that is Telegram's
//! `Bad Request: message text is empty`.

use serde_json::Value;

use crate::entities::{
    Entity, Kind, check_link, fix_entities, is_td_space, normalize_date_format, sort_entities,
};
use crate::utf16;

use self::charref::Dialect;

/// Escapes `&`, `<`, `>` and `"` so that `parse(&escape(x))` gives back `x` with no entities:
/// the renderer's (tg-format), which writes the HTML this module reads.
pub use tg_format::html::escape;

/// Text with entities, as Telegram stores a formatted message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    /// The plain text, markup removed and character references decoded.
    pub text: String,
    /// Bot API `MessageEntity` objects, offsets and lengths in UTF-16 code units, sorted by
    /// offset, then outer (longer) first.
    pub entities: Vec<Value>,
}

/// Markup Telegram refuses. The text is what follows
/// `"Bad Request: can't parse entities: "` in Telegram's error description.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[error("{0}")]
pub struct EntityParseError(pub String);

/// Tags Telegram's HTML parser knows.
const SUPPORTED_TAGS: [&str; 17] = [
    "a",
    "b",
    "strong",
    "i",
    "em",
    "s",
    "strike",
    "del",
    "u",
    "ins",
    "tg-spoiler",
    "tg-emoji",
    "tg-time",
    "span",
    "pre",
    "code",
    "blockquote",
];

/// A start tag waiting for its end tag.
struct OpenTag {
    name: String,
    /// `href`, the code language, the span class without `tg-`, `emoji-id`, the `tg-time`
    /// format, or `"1"` for an expandable blockquote.
    argument: String,
    /// `tg-time`'s `unix`.
    date: i32,
    /// UTF-16 offset of the element's text.
    offset: usize,
    /// Byte offset of the element's text in the output.
    text_begin: usize,
}

/// Parses Telegram HTML into text and entities.
///
/// The entities are already fixed up the way Telegram stores them, following TDLib's
/// `fix_entities`:
/// - Links, code, pre, custom emoji and dates can't contain or overlap one another: the one
///   sorting first is kept, that is the outer one, or for the same text the one of higher
///   priority (pre, code, date, link, custom emoji): `<a href="...">x<code>y</code></a>` gives
///   only the link but `<a href="..."><code>y</code></a>` only the code.
/// - Nothing survives inside `code` or `pre`: `<pre><b>x</b></pre>` gives only `pre`.
/// - Blockquotes can't be nested: the inner one is dropped (Telegram does not report an error).
/// - Bold, italic, underline, strikethrough and spoiler entities that contain other entities
///   are split at their boundaries, and touching ones of one type are merged:
///   `<b>a<i>b</i>c</b>` gives bold 0..1, bold 1..3, italic 1..2.
///
/// The text is not trimmed ([`trim`]) nor cleaned ([`clean`]).
///
/// # Errors
///
/// Telegram's texts, with byte offsets into `input`: `Unsupported start tag "br" at byte offset
/// 5`, `Unclosed start tag at byte offset 0`, `Unexpected end tag at byte offset 3`,
/// `Unmatched end tag at byte offset 6, expected "</i>", found "</b>"`, `Can't find end tag
/// corresponding to start tag "b"`, `Tag "span" must have class "tg-spoiler" at byte offset 0`,
/// `Empty attribute name in the tag "a" at byte offset 0`, `Unexpected end of name token at byte
/// offset 8`, `Unclosed end tag at byte offset 4`, `Invalid custom emoji identifier specified`,
/// `Invalid date format used`, and `Text contains invalid Unicode characters after decoding HTML
/// entities, check for unmatched surrogate code units` for `&#xD83D;`.
pub fn parse(input: &str) -> Result<Parsed, EntityParseError> {
    let bytes = input.as_bytes();
    // TDLib walks a NUL-terminated string: reading past the end yields 0.
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let fail = |message: String| Err(EntityParseError(message));

    let mut text = String::with_capacity(input.len());
    let mut utf16_offset = 0;
    let mut stack: Vec<OpenTag> = Vec::new();
    // Entities in the order their end tags close, with the code language for `code`.
    let mut raw: Vec<(Entity, String)> = Vec::new();
    let mut lone_surrogate = false;

    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'&'
            && let Some((code, next)) = charref::decode_at(input, i, Dialect::Telegram)
        {
            match char::from_u32(code) {
                Some(ch) => {
                    text.push(ch);
                    utf16_offset += ch.len_utf16();
                }
                None => {
                    // Half of a surrogate pair: Telegram fails once the whole input has been
                    // parsed (other errors win), so keep a placeholder until then.
                    lone_surrogate = true;
                    text.push(char::REPLACEMENT_CHARACTER);
                    utf16_offset += 1;
                }
            }
            i = next;
            continue;
        }
        if c != b'<' {
            let run_end = bytes[i + 1..]
                .iter()
                .position(|&b| b == b'&' || b == b'<')
                .map_or(bytes.len(), |p| i + 1 + p);
            let run = &input[i..run_end];
            text.push_str(run);
            utf16_offset += utf16::len(run);
            i = run_end;
            continue;
        }

        let begin = i;
        i += 1;
        if at(i) != b'/' {
            while !is_td_space(at(i)) && at(i) != b'>' {
                i += 1;
            }
            if at(i) == 0 {
                return fail(format!("Unclosed start tag at byte offset {begin}"));
            }
            let name = input[begin + 1..i].to_ascii_lowercase();
            if !SUPPORTED_TAGS.contains(&name.as_str()) {
                return fail(format!(
                    "Unsupported start tag \"{name}\" at byte offset {begin}"
                ));
            }
            let mut argument = String::new();
            let mut date = 0;
            while at(i) != b'>' {
                while at(i) != 0 && is_td_space(at(i)) {
                    i += 1;
                }
                if at(i) == b'>' {
                    break;
                }
                let attribute_begin = i;
                while !is_td_space(at(i)) && !matches!(at(i), b'=' | b'>' | b'/' | b'"' | b'\'') {
                    i += 1;
                }
                let attribute = &input[attribute_begin..i];
                if attribute.is_empty() {
                    return fail(format!(
                        "Empty attribute name in the tag \"{name}\" at byte offset {begin}"
                    ));
                }
                while at(i) != 0 && is_td_space(at(i)) {
                    i += 1;
                }
                if at(i) != b'=' {
                    if at(i) == 0 {
                        return fail(format!(
                            "Unclosed start tag \"{name}\" at byte offset {begin}"
                        ));
                    }
                    if name == "blockquote" && attribute == "expandable" {
                        argument = "1".into();
                    }
                    continue;
                }
                i += 1;
                while at(i) != 0 && is_td_space(at(i)) {
                    i += 1;
                }
                if at(i) == 0 {
                    return fail(format!(
                        "Unclosed start tag \"{name}\" at byte offset {begin}"
                    ));
                }
                let value = if at(i) != b'\'' && at(i) != b'"' {
                    // An SGML name token; those are case-insensitive, hence the lowercasing.
                    let token_begin = i;
                    while at(i).is_ascii_alphanumeric() || at(i) == b'.' || at(i) == b'-' {
                        i += 1;
                    }
                    if !is_td_space(at(i)) && at(i) != b'>' {
                        return fail(format!(
                            "Unexpected end of name token at byte offset {token_begin}"
                        ));
                    }
                    input[token_begin..i].to_ascii_lowercase()
                } else {
                    let quote = at(i);
                    i += 1;
                    let mut value = String::new();
                    while at(i) != quote && at(i) != 0 {
                        if at(i) == b'&'
                            && let Some((code, next)) =
                                charref::decode_at(input, i, Dialect::Telegram)
                        {
                            // A lone surrogate can't be kept in a Rust string; Telegram would
                            // keep invalid UTF-8 here, which no valid link or id contains.
                            value.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                            i = next;
                            continue;
                        }
                        let Some(ch) = input[i..].chars().next() else {
                            break;
                        };
                        value.push(ch);
                        i += ch.len_utf8();
                    }
                    if at(i) == quote {
                        i += 1;
                    }
                    value
                };
                if at(i) == 0 {
                    return fail(format!("Unclosed start tag at byte offset {begin}"));
                }
                match (name.as_str(), attribute) {
                    ("a", "href") | ("tg-emoji", "emoji-id") | ("tg-time", "format") => {
                        argument = value;
                    }
                    ("code", "class") => {
                        if let Some(language) = value.strip_prefix("language-") {
                            argument = language.to_string();
                        }
                    }
                    ("span", "class") => {
                        if let Some(class) = value.strip_prefix("tg-") {
                            argument = class.to_string();
                        }
                    }
                    ("blockquote", "expandable") => argument = "1".into(),
                    ("tg-time", "unix") => date = td_to_i32(&value),
                    _ => {}
                }
            }
            if name == "span" && argument != "spoiler" {
                return fail(format!(
                    "Tag \"span\" must have class \"tg-spoiler\" at byte offset {begin}"
                ));
            }
            stack.push(OpenTag {
                name,
                argument,
                date,
                offset: utf16_offset,
                text_begin: text.len(),
            });
        } else {
            let Some(open) = stack.pop() else {
                return fail(format!("Unexpected end tag at byte offset {begin}"));
            };
            while !is_td_space(at(i)) && at(i) != b'>' {
                i += 1;
            }
            let end_name = input[begin + 2..i].to_ascii_lowercase();
            while is_td_space(at(i)) && at(i) != 0 {
                i += 1;
            }
            if at(i) != b'>' {
                return fail(format!("Unclosed end tag at byte offset {begin}"));
            }
            if !end_name.is_empty() && end_name != open.name {
                return fail(format!(
                    "Unmatched end tag at byte offset {begin}, expected \"</{}>\", found \
                     \"</{end_name}>\"",
                    open.name
                ));
            }
            if utf16_offset > open.offset {
                close_element(open, utf16_offset, &text, &mut raw)?;
            }
        }
        // Past the '>'.
        i += 1;
    }
    if let Some(open) = stack.last() {
        return fail(format!(
            "Can't find end tag corresponding to start tag \"{}\"",
            open.name
        ));
    }
    if lone_surrogate {
        return fail(
            "Text contains invalid Unicode characters after decoding HTML entities, check for \
             unmatched surrogate code units"
                .into(),
        );
    }
    let entities = fix_entities(raw.into_iter().map(|(entity, _)| entity).collect());
    Ok(Parsed {
        text,
        entities: entities.iter().map(Entity::to_value).collect(),
    })
}

/// Records the entity of a closed, non-empty element.
fn close_element(
    open: OpenTag,
    utf16_offset: usize,
    text: &str,
    raw: &mut Vec<(Entity, String)>,
) -> Result<(), EntityParseError> {
    let offset = open.offset;
    let length = utf16_offset - offset;
    let entity = |kind| Entity {
        kind,
        offset,
        length,
    };
    let same_range = |e: &Entity| e.offset == offset && e.length == length;
    let kind = match open.name.as_str() {
        "b" | "strong" => Kind::Bold,
        "i" | "em" => Kind::Italic,
        "u" | "ins" => Kind::Underline,
        "s" | "strike" | "del" => Kind::Strikethrough,
        "tg-spoiler" | "span" => Kind::Spoiler,
        "blockquote" if open.argument.is_empty() => Kind::Blockquote,
        "blockquote" => Kind::ExpandableBlockquote,
        "tg-emoji" => match open.argument.parse::<i64>() {
            Ok(id) if id != 0 && id.to_string() == open.argument => {
                Kind::CustomEmoji(open.argument)
            }
            _ => {
                return Err(EntityParseError(
                    "Invalid custom emoji identifier specified".into(),
                ));
            }
        },
        "tg-time" => {
            let format = normalize_date_format(&open.argument)
                .ok_or_else(|| EntityParseError("Invalid date format used".into()))?;
            if open.date <= 0 {
                return Ok(());
            }
            Kind::DateTime(i64::from(open.date), format)
        }
        "a" => {
            let url = if open.argument.is_empty() {
                text.get(open.text_begin..).unwrap_or_default()
            } else {
                open.argument.as_str()
            };
            match check_link(url) {
                Ok(url) => Kind::TextLink(url),
                // Telegram keeps the text and silently drops a link it can't accept.
                Err(_) => return Ok(()),
            }
        }
        "pre" => {
            // `<pre><code class="language-x">...</code></pre>`: the code closed just before,
            // over the same text, becomes the pre's language.
            if let Some((last, language)) = raw.last_mut()
                && last.kind == Kind::Code
                && same_range(last)
                && !language.is_empty()
            {
                last.kind = Kind::Pre(Some(std::mem::take(language)));
                return Ok(());
            }
            Kind::Pre(None)
        }
        "code" => {
            if let Some((last, _)) = raw.last_mut()
                && last.kind == Kind::Pre(None)
                && same_range(last)
                && !open.argument.is_empty()
            {
                last.kind = Kind::Pre(Some(open.argument));
                return Ok(());
            }
            raw.push((entity(Kind::Code), open.argument));
            return Ok(());
        }
        // Every supported tag is handled above.
        _ => return Ok(()),
    };
    raw.push((entity(kind), String::new()));
    Ok(())
}

/// HTML character references (`&lt;`, `&#123;`, `&#x1F600;`), decoded for both HTML readers of
/// the crate: Telegram's `parse_mode` ([`crate::html::parse`]) and the rich message tokenizer
/// ([`crate::rich`]).
///
/// The two readers accept different references on purpose, see [`Dialect`]:
/// `parse` must accept and reject exactly what Telegram does, while rich messages keep the
/// readings their answers have always had. One function decodes both, so that the rules sit
/// side by side and differ only where stated.
pub(crate) mod charref {
    /// Whose rules decide what a reference is.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Dialect {
        /// TDLib's `decode_html_entity`, what Telegram runs for `parse_mode=HTML`: names `lt`,
        /// `gt`, `amp` and `quot` only, case-sensitive; the `;` is optional; numeric
        /// references are decimal or hexadecimal with a lowercase `x`, shorter than 10 bytes
        /// with the `&`, and between 1 and 0x10FFFE. Surrogates are returned as code points:
        /// Telegram rejects a text containing one, which only the caller can report.
        Telegram,
        /// The rich message html form's lenient reading: the `;` is required within 32 bytes
        /// of the `&`; `apos` and `nbsp` are known too; hexadecimal takes `x` or `X`; numbers
        /// read as Rust reads a `u32` (a leading `+` is accepted) and must be a Unicode scalar
        /// value (`&#0;` is one).
        Rich,
    }

    /// Named references, and whether Telegram knows each (rich messages know all of them).
    const NAMED: [(&str, char, bool); 6] = [
        ("lt", '<', true),
        ("gt", '>', true),
        ("amp", '&', true),
        ("quot", '"', true),
        ("apos", '\'', false),
        ("nbsp", '\u{a0}', false),
    ];

    /// The reference starting at `s[pos]`, an `&`: its code point and the byte offset just
    /// after it, or `None` when the `&` is literal.
    pub(crate) fn decode_at(s: &str, pos: usize, dialect: Dialect) -> Option<(u32, usize)> {
        let (body, next) = match dialect {
            Dialect::Telegram => telegram_extent(s, pos),
            Dialect::Rich => rich_extent(s, pos)?,
        };
        let code = match body.strip_prefix('#') {
            Some(number) => match dialect {
                Dialect::Telegram => telegram_number(number)?,
                Dialect::Rich => rich_number(number)?,
            },
            None => NAMED
                .iter()
                .find(|&&(name, _, telegram)| {
                    name == body && (telegram || dialect == Dialect::Rich)
                })
                .map(|&(_, c, _)| u32::from(c))?,
        };
        Some((code, next))
    }

    /// `s` with its references decoded; an `&` that starts none, or one whose code point is
    /// not a `char` (a surrogate, in the Telegram dialect), stays as written.
    pub(crate) fn decode(s: &str, dialect: Dialect) -> String {
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while let Some(off) = s[i..].find('&') {
            let amp = i + off;
            out.push_str(&s[i..amp]);
            let decoded = decode_at(s, amp, dialect)
                .and_then(|(code, next)| Some((char::from_u32(code)?, next)));
            match decoded {
                Some((c, next)) => {
                    out.push(c);
                    i = next;
                }
                None => {
                    out.push('&');
                    i = amp + 1;
                }
            }
        }
        out.push_str(&s[i..]);
        out
    }

    /// TDLib reads `&` then `#x` hex digits, `#` decimal digits or letters, then an optional
    /// `;`: the text after the `&` up to the `;`, and where the reference ends.
    fn telegram_extent(s: &str, pos: usize) -> (&str, usize) {
        let bytes = s.as_bytes();
        // TDLib walks a NUL-terminated string: reading past the end yields 0.
        let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let mut end = pos + 1;
        if at(end) == b'#' {
            end += 1;
            if at(end) == b'x' {
                end += 1;
                while at(end).is_ascii_hexdigit() {
                    end += 1;
                }
            } else {
                while at(end).is_ascii_digit() {
                    end += 1;
                }
            }
        } else {
            while at(end).is_ascii_alphabetic() {
                end += 1;
            }
        }
        // Only ASCII was read, so `end` is a character boundary.
        let body = s.get(pos + 1..end).unwrap_or_default();
        let next = if at(end) == b';' { end + 1 } else { end };
        (body, next)
    }

    /// `number` is what follows `&#`; TDLib's digits were checked by [`telegram_extent`].
    fn telegram_number(number: &str) -> Option<u32> {
        let (digits, radix) = match number.strip_prefix('x') {
            Some(hex) => (hex, 16),
            None => (number, 10),
        };
        let mut code: u32 = 0;
        for digit in digits.chars().filter_map(|c| c.to_digit(radix)) {
            code = code.wrapping_mul(radix).wrapping_add(digit);
        }
        // `&#` and the number make 10 bytes or more: rejected whatever the value, so the
        // wrapping above is harmless.
        let length = 2 + number.len();
        if code == 0 || code >= 0x10ffff || length >= 10 {
            return None;
        }
        Some(code)
    }

    /// The rich reading: everything between the `&` and the first `;`, if that `;` is close.
    fn rich_extent(s: &str, pos: usize) -> Option<(&str, usize)> {
        let rest = s.get(pos..)?;
        let semi = rest.find(';').filter(|&semi| semi <= 32)?;
        Some((rest.get(1..semi)?, pos + semi + 1))
    }

    fn rich_number(number: &str) -> Option<u32> {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        char::from_u32(code).map(u32::from)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn both(s: &str) -> (String, String) {
            (decode(s, Dialect::Telegram), decode(s, Dialect::Rich))
        }

        #[test]
        fn dialects_agree_on_the_common_references() {
            for (input, decoded) in [
                ("&lt;&gt;&amp;&quot;", "<>&\""),
                ("&#65;&#x41;&#128512;", "AA\u{1F600}"),
                ("a & b", "a & b"),
                ("&bogus;", "&bogus;"),
            ] {
                assert_eq!(both(input), (decoded.into(), decoded.into()), "{input}");
            }
        }

        #[test]
        fn dialects_differ_where_documented() {
            let cases = [
                // Telegram's `;` is optional, the rich one required.
                ("&lt", "<", "&lt"),
                ("&#65x", "Ax", "&#65x"),
                // Names only the rich reading knows.
                ("&nbsp;&apos;", "&nbsp;&apos;", "\u{a0}'"),
                // Uppercase X, a leading +, zero, long zero padding.
                ("&#X41;", "&#X41;", "A"),
                ("&#+65;", "&#+65;", "A"),
                ("&#0;", "&#0;", "\0"),
                ("&#00000000065;", "&#00000000065;", "A"),
                // Telegram's upper bound excludes U+10FFFF.
                ("&#1114111;", "&#1114111;", "\u{10FFFF}"),
                // A surrogate is no char: literal in both strings, Telegram's caller sees it.
                ("&#xD83D;", "&#xD83D;", "&#xD83D;"),
            ];
            for (input, telegram, rich) in cases {
                assert_eq!(both(input), (telegram.into(), rich.into()), "{input}");
            }
            assert_eq!(
                decode_at("&#xD83D;", 0, Dialect::Telegram),
                Some((0xD83D, 8))
            );
            assert_eq!(decode_at("&#xD83D;", 0, Dialect::Rich), None);
        }

        #[test]
        fn rich_semicolon_must_be_near() {
            let far = format!("&{};", "a".repeat(31));
            assert_eq!(rich_extent(&far, 0).map(|(_, next)| next), Some(33));
            let too_far = format!("&{};", "a".repeat(32));
            assert_eq!(rich_extent(&too_far, 0), None);
        }
    }
}

/// TDLib's `to_integer<int32>`: optional `-`, leading digits, wrapping on overflow; 0 when
/// there are none.
fn td_to_i32(text: &str) -> i32 {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut value: u32 = 0;
    for digit in digits.chars().map_while(|c| c.to_digit(10)) {
        value = value.wrapping_mul(10).wrapping_add(digit);
    }
    if negative {
        value = value.wrapping_neg();
    }
    i32::from_ne_bytes(value.to_ne_bytes())
}

/// Reads entities back; those that aren't valid `MessageEntity` objects are dropped.
fn typed_entities(entities: &[Value]) -> Vec<Entity> {
    let mut typed: Vec<Entity> = entities.iter().filter_map(Entity::from_value).collect();
    sort_entities(&mut typed);
    typed
}

/// Removes leading and trailing whitespace as Telegram does for a message text (TDLib's
/// `fix_formatted_text`):
/// - only spaces and line feeds count (Telegram turns other control characters into spaces
///   beforehand, see [`clean`]; Unicode spaces such as U+00A0 are kept);
/// - trailing whitespace always goes, entities are clipped to the new end and those left
///   starting after it are dropped;
/// - leading whitespace goes only up to the first entity: whitespace inside an entity (say a
///   `pre` block starting with a space) is kept.
///
/// A text of only whitespace becomes empty, with no entities (Telegram then rejects the
/// message).
pub fn trim(parsed: Parsed) -> Parsed {
    let mut entities = typed_entities(&parsed.entities);
    let mut text = parsed.text;
    let Some((last, ch)) = text
        .char_indices()
        .rev()
        .find(|&(_, c)| c != ' ' && c != '\n')
    else {
        return Parsed::default();
    };
    let keep = last + ch.len_utf8();
    let end = utf16::byte_to_utf16(&text, keep);
    text.truncate(keep);
    entities.retain(|e| e.offset < end);
    let mut clipped = false;
    for entity in &mut entities {
        if entity.offset + entity.length > end {
            entity.length = end - entity.offset;
            clipped = true;
        }
    }
    if clipped {
        sort_entities(&mut entities);
    }

    let first_entity = entities.first().map_or(usize::MAX, |e| e.offset);
    // Leading spaces and line feeds are one byte and one UTF-16 unit each.
    let strip = text
        .bytes()
        .take_while(|&b| b == b' ' || b == b'\n')
        .count()
        .min(first_entity);
    if strip > 0 {
        text.drain(..strip);
        for entity in &mut entities {
            entity.offset -= strip;
        }
    }
    Parsed {
        text,
        entities: entities.iter().map(Entity::to_value).collect(),
    }
}

/// Cleans a message text as Telegram does before storing it (TDLib's
/// `clean_input_string_with_entities`), moving entities along:
/// - control characters other than `\n` (tabs included) become spaces;
/// - `\r` is removed;
/// - U+2028..U+202E (line/paragraph separators and bidirectional embedding/override controls)
///   are removed;
/// - the combining marks U+030A, U+0333 and U+033F are removed.
///
/// Entities left empty are dropped and the nesting rules applied again.
pub fn clean(parsed: Parsed) -> Parsed {
    let entities = typed_entities(&parsed.entities);
    let mut text = String::with_capacity(parsed.text.len());
    // UTF-16 offsets (in the input) where removed characters start, each removed character
    // being one UTF-16 unit.
    let mut removed = Vec::new();
    let mut pos = 0;
    for c in parsed.text.chars() {
        match c {
            '\n' => text.push(c),
            '\r' | '\u{2028}'..='\u{202e}' | '\u{30a}' | '\u{333}' | '\u{33f}' => {
                removed.push(pos);
            }
            '\0'..='\u{20}' => text.push(' '),
            _ => text.push(c),
        }
        pos += c.len_utf16();
    }
    // New position of an old offset: minus the removed units before it.
    let shift = |offset: usize| offset - removed.partition_point(|&r| r < offset);
    let entities = entities
        .into_iter()
        .filter_map(|e| {
            let offset = shift(e.offset);
            let length = shift(e.offset + e.length) - offset;
            (length > 0).then_some(Entity {
                kind: e.kind,
                offset,
                length,
            })
        })
        .collect();
    Parsed {
        text,
        entities: fix_entities(entities)
            .iter()
            .map(Entity::to_value)
            .collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ok(input: &str) -> Parsed {
        match parse(input) {
            Ok(parsed) => parsed,
            Err(e) => panic!("{input:?} failed: {e}"),
        }
    }

    fn err(input: &str) -> String {
        match parse(input) {
            Ok(parsed) => panic!("{input:?} parsed: {parsed:?}"),
            Err(e) => e.0,
        }
    }

    fn e(kind: &str, offset: usize, length: usize) -> Value {
        json!({"type": kind, "offset": offset, "length": length})
    }

    #[test]
    fn plain_text_passes_through() {
        assert_eq!(
            ok("hello"),
            Parsed {
                text: "hello".into(),
                entities: vec![]
            }
        );
        assert_eq!(ok(""), Parsed::default());
        // Not trimmed.
        assert_eq!(ok("  x \n").text, "  x \n");
    }

    #[test]
    fn every_simple_tag() {
        for (tag, kind) in [
            ("b", "bold"),
            ("strong", "bold"),
            ("i", "italic"),
            ("em", "italic"),
            ("u", "underline"),
            ("ins", "underline"),
            ("s", "strikethrough"),
            ("strike", "strikethrough"),
            ("del", "strikethrough"),
            ("tg-spoiler", "spoiler"),
            ("code", "code"),
            ("pre", "pre"),
            ("blockquote", "blockquote"),
        ] {
            let parsed = ok(&format!("a<{tag}>bc</{tag}>d"));
            assert_eq!(parsed.text, "abcd", "{tag}");
            assert_eq!(parsed.entities, vec![e(kind, 1, 2)], "{tag}");
        }
        let parsed = ok(r#"<span class="tg-spoiler">s</span>"#);
        assert_eq!(parsed.entities, vec![e("spoiler", 0, 1)]);
        let parsed = ok("<blockquote expandable>q</blockquote>");
        assert_eq!(parsed.entities, vec![e("expandable_blockquote", 0, 1)]);
    }

    #[test]
    fn tag_names_are_case_insensitive() {
        assert_eq!(ok("<B>x</B>").entities, vec![e("bold", 0, 1)]);
        assert_eq!(ok("<Strong>x</sTRONG>").entities, vec![e("bold", 0, 1)]);
        assert_eq!(
            ok("<BLOCKQUOTE expandable>x</blockquote>").entities,
            vec![e("expandable_blockquote", 0, 1)]
        );
    }

    #[test]
    fn offsets_are_utf16() {
        let parsed = ok("😀 <b>x</b>");
        assert_eq!(parsed.text, "😀 x");
        assert_eq!(parsed.entities, vec![e("bold", 3, 1)]);
        let parsed = ok("<b>😀</b><i>🇺🇦</i>");
        assert_eq!(parsed.entities, vec![e("bold", 0, 2), e("italic", 2, 4)]);
        let parsed = ok("<b>Привет</b>, <i>мир</i>");
        assert_eq!(parsed.text, "Привет, мир");
        assert_eq!(parsed.entities, vec![e("bold", 0, 6), e("italic", 8, 3)]);
        // A decoded astral reference counts two units.
        assert_eq!(ok("&#x1F600;<b>x</b>").entities, vec![e("bold", 2, 1)]);
    }

    #[test]
    fn nested_tags_follow_telegram_splitting() {
        // Telegram splits a bold run at the start of anything nested inside it.
        assert_eq!(
            ok("<b>a<i>b</i>c</b>").entities,
            vec![e("bold", 0, 1), e("bold", 1, 2), e("italic", 1, 1)]
        );
        // Same range: sorted by type priority, bold before italic.
        assert_eq!(
            ok("<i><b>x</b></i>").entities,
            vec![e("bold", 0, 1), e("italic", 0, 1)]
        );
        // A link inside bold cuts the bold in three.
        let parsed = ok(r#"<b>a<a href="https://t.me">b</a>c</b>"#);
        assert_eq!(
            parsed.entities,
            vec![
                e("bold", 0, 1),
                json!({"type": "text_link", "offset": 1, "length": 1, "url": "https://t.me/"}),
                e("bold", 1, 1),
                e("bold", 2, 1),
            ]
        );
        // Bold inside a link is fine as it is.
        let parsed = ok(r#"<a href="https://t.me">a<b>b</b></a>"#);
        assert_eq!(
            parsed.entities,
            vec![
                json!({"type": "text_link", "offset": 0, "length": 2, "url": "https://t.me/"}),
                e("bold", 1, 1),
            ]
        );
        // Touching entities of one type merge.
        assert_eq!(ok("<b>a</b><b>b</b>").entities, vec![e("bold", 0, 2)]);
        assert_eq!(
            ok("<b>a</b><strong>b</strong>").entities,
            vec![e("bold", 0, 2)]
        );
        // Blockquote holding formatting.
        assert_eq!(
            ok("<blockquote>a<b>b</b></blockquote>").entities,
            vec![e("blockquote", 0, 2), e("bold", 1, 1)]
        );
    }

    #[test]
    fn nothing_survives_inside_code_or_pre() {
        assert_eq!(ok("<code><b>x</b></code>").entities, vec![e("code", 0, 1)]);
        assert_eq!(ok("<pre>a<b>b</b>c</pre>").entities, vec![e("pre", 0, 3)]);
        assert_eq!(ok("<pre>a<i>b</i></pre>").entities, vec![e("pre", 0, 2)]);
        // Bold around a pre keeps the parts outside it.
        assert_eq!(
            ok("<b>a<pre>b</pre>c</b>").entities,
            vec![e("bold", 0, 1), e("pre", 1, 1), e("bold", 2, 1)]
        );
    }

    #[test]
    fn continuous_entities_do_not_nest() {
        // The outer link wins over a shorter code inside it...
        let parsed = ok(r#"<a href="https://t.me">x<code>y</code></a>"#);
        assert_eq!(
            parsed.entities,
            vec![json!(
                {"type": "text_link", "offset": 0, "length": 2, "url": "https://t.me/"}
            )]
        );
        // ...but on the same text code has the higher priority.
        assert_eq!(
            ok(r#"<a href="https://t.me"><code>y</code></a>"#).entities,
            vec![e("code", 0, 1)]
        );
    }

    #[test]
    fn nested_blockquote_keeps_the_outer_one() {
        let parsed = ok("<blockquote>a<blockquote>b</blockquote></blockquote>");
        assert_eq!(parsed.text, "ab");
        assert_eq!(parsed.entities, vec![e("blockquote", 0, 2)]);
    }

    #[test]
    fn pre_with_language() {
        let parsed = ok(r#"<pre><code class="language-rust">fn main() {}</code></pre>"#);
        assert_eq!(parsed.text, "fn main() {}");
        assert_eq!(
            parsed.entities,
            vec![json!(
                {"type": "pre", "offset": 0, "length": 12, "language": "rust"}
            )]
        );
        // Without a class it is a plain pre (the code is dropped as nested).
        assert_eq!(
            ok("<pre><code>x</code></pre>").entities,
            vec![e("pre", 0, 1)]
        );
        // A language class on code outside pre is ignored.
        assert_eq!(
            ok(r#"<code class="language-rust">x</code>"#).entities,
            vec![e("code", 0, 1)]
        );
        // Text between pre and code: no language, the code is dropped.
        let parsed = ok(r#"<pre>a<code class="language-rust">b</code></pre>"#);
        assert_eq!(parsed.entities, vec![e("pre", 0, 2)]);
    }

    #[test]
    fn links() {
        let link = |input: &str| ok(input).entities;
        let text_link = |offset: usize, length: usize, url: &str| json!({"type": "text_link", "offset": offset, "length": length, "url": url});
        assert_eq!(
            link(r#"<a href="https://example.com">x</a>"#),
            vec![text_link(0, 1, "https://example.com/")]
        );
        assert_eq!(
            link(r#"<a href='https://example.com/a?b=1'>x</a>"#),
            vec![text_link(0, 1, "https://example.com/a?b=1")]
        );
        // Unquoted values are lowercased name tokens.
        assert_eq!(
            link("<a href=Example.COM>x</a>"),
            vec![text_link(0, 1, "http://example.com/")]
        );
        // References in quoted values are decoded.
        assert_eq!(
            link(r#"<a href="https://e.com/?a=1&amp;b=2">x</a>"#),
            vec![text_link(0, 1, "https://e.com/?a=1&b=2")]
        );
        assert_eq!(
            link(r#"<a href="tg://user?id=123">x</a>"#),
            vec![text_link(0, 1, "tg://user?id=123")]
        );
        // No href: the text is the URL.
        assert_eq!(
            link("<a>https://t.me/durov</a>"),
            vec![text_link(0, 18, "https://t.me/durov")]
        );
        let parsed = ok("<a>just text</a>");
        assert_eq!(parsed.text, "just text");
        assert!(parsed.entities.is_empty());
        // Links Telegram refuses keep their text without an entity.
        assert!(link(r#"<a href="javascript:alert(1)">x</a>"#).is_empty());
        assert!(link(r#"<a href="foo">x</a>"#).is_empty());
        assert!(link(r#"<a href="http://localhost/">x</a>"#).is_empty());
        // Attribute names are case-sensitive: HREF is ignored, so "x" is the (bad) URL.
        assert!(link(r#"<a HREF="https://e.com">x</a>"#).is_empty());
        // Unknown attributes are ignored.
        assert_eq!(
            link(r#"<a target="_blank" href="https://e.com">x</a>"#),
            vec![text_link(0, 1, "https://e.com/")]
        );
    }

    #[test]
    fn custom_emoji() {
        let parsed = ok(r#"<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>"#);
        assert_eq!(parsed.text, "👍");
        assert_eq!(
            parsed.entities,
            vec![json!({
                "type": "custom_emoji", "offset": 0, "length": 2,
                "custom_emoji_id": "5368324170671202286"
            })]
        );
        for bad in [
            "<tg-emoji>x</tg-emoji>",
            r#"<tg-emoji emoji-id="abc">x</tg-emoji>"#,
            r#"<tg-emoji emoji-id="0">x</tg-emoji>"#,
            r#"<tg-emoji emoji-id="012">x</tg-emoji>"#,
        ] {
            assert_eq!(
                err(bad),
                "Invalid custom emoji identifier specified",
                "{bad}"
            );
        }
        // Empty elements are not checked.
        assert_eq!(ok("<tg-emoji></tg-emoji>"), Parsed::default());
    }

    #[test]
    fn date_time() {
        let parsed = ok(r#"<tg-time unix="1647531900" format="wDT">22:45 tomorrow</tg-time>"#);
        assert_eq!(
            parsed.entities,
            vec![json!({
                "type": "date_time", "offset": 0, "length": 14,
                "unix_time": 1647531900, "date_time_format": "wDT"
            })]
        );
        // No format: no date_time_format field.
        let parsed = ok(r#"<tg-time unix="1647531900">x</tg-time>"#);
        assert_eq!(
            parsed.entities,
            vec![json!({
                "type": "date_time", "offset": 0, "length": 1, "unix_time": 1647531900
            })]
        );
        // The format is normalised to r|w?[dD]?[tT]?.
        let format = |f: &str| {
            ok(&format!(r#"<tg-time unix="5" format="{f}">x</tg-time>"#)).entities[0]
                .get("date_time_format")
                .cloned()
        };
        assert_eq!(format("R"), Some(json!("r")));
        assert_eq!(format("Tdw"), Some(json!("wdT")));
        assert_eq!(format("tT"), Some(json!("t")));
        assert_eq!(format(""), None);
        assert_eq!(
            err(r#"<tg-time unix="5" format="x">y</tg-time>"#),
            "Invalid date format used"
        );
        assert_eq!(
            err(r#"<tg-time unix="5" format="rt">y</tg-time>"#),
            "Invalid date format used"
        );
        // No or non-positive unix time: no entity, no error.
        assert!(ok(r#"<tg-time format="r">x</tg-time>"#).entities.is_empty());
        assert!(ok(r#"<tg-time unix="-5">x</tg-time>"#).entities.is_empty());
        assert!(ok(r#"<tg-time unix="abc">x</tg-time>"#).entities.is_empty());
    }

    #[test]
    fn character_references() {
        let text = |input: &str| ok(input).text;
        assert_eq!(text("&lt;b&gt; &amp; &quot;"), "<b> & \"");
        assert_eq!(text("&lt&gt"), "<>", "the semicolon is optional");
        assert_eq!(text("&amp;amp;"), "&amp;");
        assert_eq!(text("&#128512;&#x1F600;&#65;"), "😀😀A");
        // Unknown, malformed or out-of-range references stay literal.
        for literal in [
            "&nbsp;",
            "a & b",
            "&",
            "&LT;",
            "&#X41;",
            "&#;",
            "&#x;",
            "&#0;",
            "&#1114111;",
            "&#00000000065;",
            "&apos;",
        ] {
            assert_eq!(text(literal), literal);
        }
        assert_eq!(
            err("&#xD83D;&#xDE00;"),
            "Text contains invalid Unicode characters after decoding HTML entities, check for \
             unmatched surrogate code units"
        );
        // Tag errors come first.
        assert_eq!(
            err("&#xD83D;<br>"),
            "Unsupported start tag \"br\" at byte offset 8"
        );
    }

    #[test]
    fn error_texts() {
        assert_eq!(err("a < b"), "Unsupported start tag \"\" at byte offset 2");
        assert_eq!(err("<br>"), "Unsupported start tag \"br\" at byte offset 0");
        assert_eq!(
            err("x<BR/>"),
            "Unsupported start tag \"br/\" at byte offset 1"
        );
        assert_eq!(
            err("<p>x</p>"),
            "Unsupported start tag \"p\" at byte offset 0"
        );
        // Byte offsets count UTF-8 bytes.
        assert_eq!(
            err("Привет <br>"),
            "Unsupported start tag \"br\" at byte offset 13"
        );
        assert_eq!(err("😀<x>"), "Unsupported start tag \"x\" at byte offset 4");
        assert_eq!(err("x</b>"), "Unexpected end tag at byte offset 1");
        assert_eq!(
            err("<b>x</i>"),
            "Unmatched end tag at byte offset 4, expected \"</b>\", found \"</i>\""
        );
        assert_eq!(
            err("<b><i>x</b></i>"),
            "Unmatched end tag at byte offset 7, expected \"</i>\", found \"</b>\""
        );
        assert_eq!(
            err("<b>x"),
            "Can't find end tag corresponding to start tag \"b\""
        );
        assert_eq!(
            err("<b><i>x</i>"),
            "Can't find end tag corresponding to start tag \"b\""
        );
        assert_eq!(err("<b"), "Unclosed start tag at byte offset 0");
        assert_eq!(err("x <"), "Unclosed start tag at byte offset 2");
        assert_eq!(err("<b>x</b"), "Unclosed end tag at byte offset 4");
        assert_eq!(err("<b>x</b x>"), "Unclosed end tag at byte offset 4");
        assert_eq!(err("<a href"), "Unclosed start tag \"a\" at byte offset 0");
        assert_eq!(err("<a href="), "Unclosed start tag \"a\" at byte offset 0");
        assert_eq!(err("<a href=\"x"), "Unclosed start tag at byte offset 0");
        assert_eq!(
            err("<b "),
            "Empty attribute name in the tag \"b\" at byte offset 0"
        );
        assert_eq!(
            err("<a =\"x\">"),
            "Empty attribute name in the tag \"a\" at byte offset 0"
        );
        assert_eq!(
            err("<a href=http://x>y</a>"),
            "Unexpected end of name token at byte offset 8"
        );
        assert_eq!(
            err("<span>x</span>"),
            "Tag \"span\" must have class \"tg-spoiler\" at byte offset 0"
        );
        assert_eq!(
            err("x<span class=\"bold\">x</span>"),
            "Tag \"span\" must have class \"tg-spoiler\" at byte offset 1"
        );
    }

    #[test]
    fn end_tag_quirks() {
        // `</>` closes the innermost element; spaces before '>' are allowed.
        assert_eq!(ok("<b>x</>").entities, vec![e("bold", 0, 1)]);
        assert_eq!(ok("<b>x</b >").entities, vec![e("bold", 0, 1)]);
        // Attribute whitespace.
        assert_eq!(ok("<b\n>x</b>").entities, vec![e("bold", 0, 1)]);
        assert_eq!(ok("<b class = 'y' >x</b>").entities, vec![e("bold", 0, 1)]);
    }

    #[test]
    fn empty_elements_give_no_entity() {
        assert_eq!(
            ok("<b></b>x"),
            Parsed {
                text: "x".into(),
                entities: vec![]
            }
        );
        assert_eq!(ok(r#"<a href="https://t.me"></a>"#), Parsed::default());
        assert_eq!(
            ok("<pre><code class=\"language-x\"></code></pre>"),
            Parsed::default()
        );
    }

    #[test]
    fn escape_round_trips() {
        for original in [
            "<b>&\"'>",
            "a & b < c > d",
            "😀&amp;",
            "&#65;",
            "",
            "plain",
            "</>",
        ] {
            let parsed = ok(&escape(original));
            assert_eq!(parsed.text, original);
            assert!(parsed.entities.is_empty());
        }
        assert_eq!(
            escape("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn trim_strips_spaces_and_newlines() {
        assert_eq!(trim(ok("  hello \n ")).text, "hello");
        let parsed = trim(ok(" \n<b>x</b> \n"));
        assert_eq!(parsed.text, "x");
        assert_eq!(parsed.entities, vec![e("bold", 0, 1)]);
        // Other whitespace is not trimmed (Telegram's clean step turns tabs into spaces).
        assert_eq!(trim(ok("\tx\t")).text, "\tx\t");
        assert_eq!(trim(ok("\u{a0}x\u{a0}")).text, "\u{a0}x\u{a0}");
        assert_eq!(trim(ok("x😀 ")).text, "x😀");
        assert_eq!(trim(ok(" \n ")), Parsed::default());
        assert_eq!(trim(Parsed::default()), Parsed::default());
    }

    #[test]
    fn trim_moves_and_clips_entities() {
        // Trailing whitespace inside an entity is clipped.
        let parsed = trim(ok("<b>x  </b>"));
        assert_eq!(
            (parsed.text.as_str(), parsed.entities),
            ("x", vec![e("bold", 0, 1)])
        );
        // An entity over trailing whitespace only disappears.
        let parsed = trim(ok("x<b>  </b>"));
        assert_eq!((parsed.text.as_str(), parsed.entities), ("x", vec![]));
        // Leading whitespace goes up to the first entity only.
        let parsed = trim(ok("  a <b>b</b>"));
        assert_eq!(
            (parsed.text.as_str(), parsed.entities),
            ("a b", vec![e("bold", 2, 1)])
        );
        let parsed = trim(ok("<pre>  code</pre>"));
        assert_eq!(
            (parsed.text.as_str(), parsed.entities),
            ("  code", vec![e("pre", 0, 6)])
        );
        let parsed = trim(ok(" <b> x</b>"));
        assert_eq!(
            (parsed.text.as_str(), parsed.entities),
            (" x", vec![e("bold", 0, 2)])
        );
        // Clipping re-sorts: the shortened outer entity keeps its place.
        let parsed = trim(ok("<i>a<b>b  </b></i>"));
        assert_eq!(parsed.text, "ab");
        assert_eq!(
            parsed.entities,
            vec![e("italic", 0, 1), e("bold", 1, 1), e("italic", 1, 1)]
        );
    }

    #[test]
    fn clean_replaces_controls_and_removes_some_characters() {
        assert_eq!(clean(ok("a\tb\u{1}c")).text, "a b c");
        let parsed = clean(ok("a\r\nb<b>c\r</b>d"));
        assert_eq!(parsed.text, "a\nbcd");
        assert_eq!(parsed.entities, vec![e("bold", 3, 1)]);
        assert_eq!(clean(ok("\u{202e}x\u{2028}y")).text, "xy");
        assert_eq!(clean(ok("a\u{333}")).text, "a");
        // An entity left empty disappears.
        assert_eq!(
            clean(ok("x<b>\r</b>")),
            Parsed {
                text: "x".into(),
                entities: vec![]
            }
        );
        // Astral characters are untouched and offsets stay right.
        let parsed = clean(ok("\r😀<i>x</i>"));
        assert_eq!(parsed.entities, vec![e("italic", 2, 1)]);
    }

    #[test]
    fn td_integer_parsing() {
        assert_eq!(td_to_i32("123"), 123);
        assert_eq!(td_to_i32("-5"), -5);
        assert_eq!(td_to_i32("12ab"), 12);
        assert_eq!(td_to_i32("abc"), 0);
        assert_eq!(td_to_i32(""), 0);
        assert_eq!(td_to_i32("4294967297"), 1, "wraps like TDLib");
    }

    #[test]
    fn every_entity_serialises_with_type_offset_length() {
        let parsed = ok(concat!(
            "<b>b</b><i>i</i><u>u</u><s>s</s><tg-spoiler>p</tg-spoiler><code>c</code>",
            "<pre>p</pre><a href=\"https://t.me\">a</a>",
            "<tg-emoji emoji-id=\"1\">e</tg-emoji><tg-time unix=\"1\">t</tg-time>",
            "<blockquote>q</blockquote>"
        ));
        assert_eq!(parsed.entities.len(), 11);
        for (i, entity) in parsed.entities.iter().enumerate() {
            assert_eq!(entity["offset"], json!(i));
            assert_eq!(entity["length"], json!(1));
        }
    }

    #[test]
    fn unwrap_free_on_odd_input() {
        // Inputs that end mid-construct or contain NUL must not panic.
        for input in [
            "&",
            "&#",
            "&#x",
            "<",
            "</",
            "<a href='",
            "<b>\0</b>",
            "a\0<b",
            "<tg-emoji",
        ] {
            let _ = parse(input);
        }
        assert_eq!(err("<b\0>"), "Unclosed start tag at byte offset 0");
    }
}
