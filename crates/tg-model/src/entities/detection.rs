//! Detection (TDLib's `find_entities`): commands, mentions, hashtags, cashtags and e-mail
//! addresses found in text a person typed; URLs are in [`super::urls`]. Matching works on byte
//! offsets, converted to UTF-16 at the end.

use super::model::{Entity, Kind, sort_entities};
use super::nesting::remove_intersecting_entities;
use super::urls::{is_domain_symbol, match_scheme_urls, match_telegram_domains, match_tg_urls};
use crate::utf16;

/// TDLib's `is_word_character`: letters, numbers and `_`.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// TDLib's `is_hashtag_letter`; the flag says whether `c` is a letter.
fn hashtag_letter(c: char) -> Option<bool> {
    if c.is_alphabetic() {
        return Some(true);
    }
    let extra =
        c == '_' || c == '\u{200c}' || c == '\u{b7}' || ('\u{d80}'..='\u{dff}').contains(&c);
    (extra || c.is_numeric()).then_some(false)
}

pub(super) fn prev_char(text: &str, byte: usize) -> Option<char> {
    text.get(..byte)?.chars().next_back()
}

pub(super) fn next_char(text: &str, byte: usize) -> Option<char> {
    text.get(byte..)?.chars().next()
}

pub(super) fn ascii_run(bytes: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    let mut i = from;
    while i < bytes.len() && pred(bytes[i]) {
        i += 1;
    }
    i
}

pub(super) fn is_alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub(super) type Span = (usize, usize, Kind);

fn match_mentions(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut result = Vec::new();
    for (at, _) in text.match_indices('@') {
        if prev_char(text, at).is_some_and(is_word_char) {
            continue;
        }
        let end = ascii_run(bytes, at + 1, is_alnum_underscore);
        let size = end - at - 1;
        if !(5..=32).contains(&size) || next_char(text, end).is_some_and(is_word_char) {
            continue;
        }
        result.push((at, end, Kind::Mention));
    }
    result
}

fn match_bot_commands(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let blocks = |c: char| is_word_char(c) || c == '/' || c == '<' || c == '>';
    let mut result = Vec::new();
    for (slash, _) in text.match_indices('/') {
        if prev_char(text, slash).is_some_and(blocks) {
            continue;
        }
        let mut end = ascii_run(bytes, slash + 1, is_alnum_underscore);
        if !(1..=64).contains(&(end - slash - 1)) {
            continue;
        }
        if bytes.get(end) == Some(&b'@') {
            let bot_end = ascii_run(bytes, end + 1, is_alnum_underscore);
            if !(3..=32).contains(&(bot_end - end - 1)) {
                continue;
            }
            end = bot_end;
        }
        if next_char(text, end).is_some_and(blocks) {
            continue;
        }
        result.push((slash, end, Kind::BotCommand));
    }
    result
}

fn match_hashtags(text: &str) -> Vec<Span> {
    let mut result = Vec::new();
    for (hash, _) in text.match_indices('#') {
        if prev_char(text, hash).and_then(hashtag_letter).is_some() {
            continue;
        }
        let mut size = 0;
        let mut was_letter = false;
        let mut run_end = hash + 1;
        let mut tag_end = None;
        for c in text[hash + 1..].chars() {
            let Some(is_letter) = hashtag_letter(c) else {
                break;
            };
            run_end += c.len_utf8();
            // A hashtag is cut after 256 characters, but the whole run is examined.
            if size == 255 {
                tag_end = Some(run_end);
            }
            if size != 256 {
                was_letter |= is_letter;
                size += 1;
            }
        }
        if size == 0 || text[run_end..].starts_with('#') || !was_letter {
            continue;
        }
        result.push((hash, tag_end.unwrap_or(run_end), Kind::Hashtag));
    }
    result
}

fn match_cashtags(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let blocks = |c: char| hashtag_letter(c).is_some() || c == '$';
    let mut result = Vec::new();
    for (dollar, _) in text.match_indices('$') {
        if prev_char(text, dollar).is_some_and(blocks) {
            continue;
        }
        let end = if text[dollar + 1..].starts_with("1INCH") {
            dollar + 6
        } else {
            ascii_run(bytes, dollar + 1, |b| b.is_ascii_uppercase())
        };
        if !(1..=8).contains(&(end - dollar - 1)) || next_char(text, end).is_some_and(blocks) {
            continue;
        }
        result.push((dollar, end, Kind::Cashtag));
    }
    result
}

/// TDLib's `is_email_address`:
/// `^([a-z0-9_-]{0,26}[.+]){0,10}[a-z0-9_-]{1,35}@(([a-z0-9][a-z0-9_-]{0,28})?[a-z0-9][.]){1,6}[a-z]{2,8}$`
/// (case-insensitive).
fn is_email_address(s: &str) -> bool {
    let Some((user, domain)) = s.split_once('@') else {
        return false;
    };
    if domain.is_empty() {
        return false;
    }
    let user_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let mut parts = 0;
    let mut prev = 0;
    for (i, b) in user.bytes().enumerate() {
        if b == b'.' || b == b'+' {
            if i - prev >= 27 {
                return false;
            }
            parts += 1;
            prev = i + 1;
        } else if !user_char(b) {
            return false;
        }
    }
    parts += 1;
    let last = user.len() - prev;
    if parts >= 12 || last == 0 || last >= 36 {
        return false;
    }
    let labels: Vec<&str> = domain.split('.').collect();
    let Some((tld, rest)) = labels.split_last() else {
        return false;
    };
    if labels.len() <= 1 || labels.len() > 7 {
        return false;
    }
    if tld.len() <= 1 || tld.len() >= 9 || !tld.bytes().all(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    rest.iter().all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.len() < 31
            && b.iter().all(|&c| user_char(c))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
    })
}

fn match_emails(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut result = Vec::new();
    for (at, _) in text.match_indices('@') {
        let mut start = at;
        while start > 0 && {
            let b = bytes[start - 1];
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+')
        } {
            start -= 1;
        }
        let raw_end = ascii_run(bytes, at + 1, |b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
        });
        let end = at + 1 + text[at + 1..raw_end].trim_end_matches('.').len();
        // Like TDLib, an address glued to a word, a path or another '@' is not an address.
        let glued_before =
            prev_char(text, start).is_some_and(|c| is_word_char(c) || matches!(c, '/' | '#' | '@'));
        let glued_after =
            next_char(text, raw_end).is_some_and(|c| !c.is_ascii() && is_domain_symbol(c));
        if start == at || glued_before || glued_after || !is_email_address(&text[start..end]) {
            continue;
        }
        result.push((start, end, Kind::Email));
    }
    result
}

/// TDLib's `find_entities` + `fix_entity_offsets`: all matches, sorted, overlaps removed,
/// converted to UTF-16.
pub(super) fn find_entities(text: &str) -> Vec<Entity> {
    let mut spans = Vec::new();
    spans.extend(match_mentions(text));
    spans.extend(match_bot_commands(text));
    spans.extend(match_hashtags(text));
    spans.extend(match_cashtags(text));
    spans.extend(match_tg_urls(text));
    spans.extend(match_scheme_urls(text));
    spans.extend(match_telegram_domains(text));
    spans.extend(match_emails(text));
    let mut entities: Vec<Entity> = spans
        .into_iter()
        .filter(|(start, end, _)| end > start)
        .map(|(start, end, kind)| Entity {
            kind,
            offset: start,
            length: end - start,
        })
        .collect();
    sort_entities(&mut entities);
    entities.dedup();
    let entities = remove_intersecting_entities(entities);
    entities
        .into_iter()
        .map(|e| {
            let offset = utf16::byte_to_utf16(text, e.offset);
            let end = utf16::byte_to_utf16(text, e.offset + e.length);
            Entity {
                kind: e.kind,
                offset,
                length: end - offset,
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::entities::detect;

    fn e(kind: &str, offset: usize, length: usize) -> Value {
        json!({"type": kind, "offset": offset, "length": length})
    }

    fn spans(text: &str) -> Vec<(String, &'static str)> {
        find_entities(text)
            .into_iter()
            .map(|e| {
                let s = utf16::slice(text, e.offset, e.length).unwrap().to_string();
                (s, e.kind.type_name())
            })
            .collect()
    }

    fn span(s: &str, kind: &'static str) -> (String, &'static str) {
        (s.to_string(), kind)
    }

    #[test]
    fn detect_bot_commands() {
        assert_eq!(spans("/start"), vec![span("/start", "bot_command")]);
        assert_eq!(
            spans("/start@my_bot hi"),
            vec![span("/start@my_bot", "bot_command")]
        );
        assert_eq!(spans("hi /help me"), vec![span("/help", "bot_command")]);
        assert_eq!(spans("(/help)"), vec![span("/help", "bot_command")]);
        assert!(spans("a/start").is_empty());
        assert!(spans("/start/x").is_empty());
        assert!(spans("</b>").is_empty());
        assert!(spans("/").is_empty());
        assert!(spans("/start@ab").is_empty(), "bot name too short");
        assert!(spans(&format!("/{}", "a".repeat(65))).is_empty());
        assert!(spans("/команда").is_empty());
    }

    #[test]
    fn detect_mentions() {
        assert_eq!(spans("@durov"), vec![span("@durov", "mention")]);
        assert_eq!(spans("hi @Some_User!"), vec![span("@Some_User", "mention")]);
        assert!(spans("@abcd").is_empty(), "shorter than 5");
        assert!(spans("a@durov").is_empty());
        assert!(spans("@durovж").is_empty());
        assert!(spans(&format!("@{}", "a".repeat(33))).is_empty());
    }

    #[test]
    fn detect_hashtags_and_cashtags() {
        assert_eq!(
            spans("#hashtag #тег"),
            vec![span("#hashtag", "hashtag"), span("#тег", "hashtag")]
        );
        assert_eq!(spans("#tag_1 x"), vec![span("#tag_1", "hashtag")]);
        assert!(spans("#123").is_empty(), "needs a letter");
        assert!(spans("a#b").is_empty());
        assert!(spans("#a#b").is_empty());
        let long = format!("#{}", "a".repeat(300));
        assert_eq!(spans(&long), vec![span(&long[..257], "hashtag")]);
        assert_eq!(
            spans("$USD and $EUR."),
            vec![span("$USD", "cashtag"), span("$EUR", "cashtag")]
        );
        assert_eq!(spans("$1INCH"), vec![span("$1INCH", "cashtag")]);
        assert!(spans("$usd $ABCDEFGHI a$USD $USDx $$USD").is_empty());
    }

    #[test]
    fn detect_urls() {
        assert_eq!(
            spans("see https://example.com/path."),
            vec![span("https://example.com/path", "url")]
        );
        assert_eq!(
            spans("(https://example.com/a)"),
            vec![span("https://example.com/a", "url")]
        );
        assert_eq!(
            spans("https://en.wikipedia.org/wiki/Rust_(language)"),
            vec![span("https://en.wikipedia.org/wiki/Rust_(language)", "url")]
        );
        assert_eq!(
            spans("HTTP://A.COM:8080/x?y=1#z!"),
            vec![span("HTTP://A.COM:8080/x?y=1#z", "url")]
        );
        assert_eq!(
            spans("ftp://files.example.org"),
            vec![span("ftp://files.example.org", "url")]
        );
        assert_eq!(spans("go t.me/durov, now"), vec![span("t.me/durov", "url")]);
        assert_eq!(spans("telegram.me"), vec![span("telegram.me", "url")]);
        assert_eq!(
            spans("tg://resolve?domain=x"),
            vec![span("tg://resolve?domain=x", "url")]
        );
        assert_eq!(
            spans("https://t.me/abc"),
            vec![span("https://t.me/abc", "url")]
        );
        assert_eq!(
            spans("https://пример.рф/путь"),
            vec![span("https://пример.рф/путь", "url")]
        );
        assert_eq!(
            spans("«https://a.com/x»"),
            vec![span("https://a.com/x", "url")]
        );
        assert!(spans("http://localhost/x").is_empty());
        assert!(spans("shttp://a.com").is_empty());
        assert!(spans("at.me/x").is_empty());
        assert!(
            spans("example.com").is_empty(),
            "bare domains other than Telegram's: not modelled"
        );
    }

    #[test]
    fn detect_emails() {
        assert_eq!(
            spans("mail a@example.com."),
            vec![span("a@example.com", "email")]
        );
        assert_eq!(
            spans("first.last+tag@sub.example.org"),
            vec![span("first.last+tag@sub.example.org", "email")]
        );
        assert!(spans("a@b").is_empty());
        assert!(spans("a@b.c").is_empty(), "TLD of one letter");
        // Glued to a path: not an address (here it is a command addressed to a bot instead).
        assert_eq!(
            spans("/x@example.com"),
            vec![span("/x@example", "bot_command")]
        );
        assert!(spans("a/x@example.com").is_empty());
        assert!(spans("a@-b.com").is_empty());
    }

    #[test]
    fn detect_offsets_are_utf16_and_sorted() {
        let found = detect("😀 @durov и #тег /start");
        assert_eq!(
            found,
            vec![
                e("mention", 3, 6),
                e("hashtag", 12, 4),
                e("bot_command", 17, 6)
            ]
        );
        // Overlapping matches: the earlier and longer one wins.
        assert_eq!(
            spans("https://t.me/durov@durov"),
            vec![span("https://t.me/durov@durov", "url")]
        );
        assert!(detect("").is_empty());
        assert!(detect("plain words only").is_empty());
    }
}
