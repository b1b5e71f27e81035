//! URL detection: `http`, `https` and `ftp` URLs, Telegram's own bare domains, and `tg://` and
//! `ton://` links (a subset of TDLib's `match_urls` and `fix_url`).

use super::detection::{Span, ascii_run, is_alnum_underscore, next_char, prev_char};
use super::model::Kind;

/// TDLib's `is_url_unicode_symbol`: not a separator, and of General Punctuation only the zero
/// width (non-)joiners and dashes.
fn is_url_unicode_symbol(c: char) -> bool {
    if ('\u{2000}'..='\u{206f}').contains(&c) {
        return c == '\u{200c}' || c == '\u{200d}' || ('\u{2010}'..='\u{2015}').contains(&c);
    }
    !c.is_whitespace()
}

fn is_url_path_symbol(c: char) -> bool {
    !matches!(c, '\n' | '<' | '>' | '"' | '\u{ab}' | '\u{bb}') && is_url_unicode_symbol(c)
}

pub(super) fn is_domain_symbol(c: char) -> bool {
    if u32::from(c) < 0xc0 {
        return c == '.' || c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '~';
    }
    is_url_unicode_symbol(c)
}

const BAD_PATH_END_CHARS: &str = ".:;,('?!`";

/// Extends a URL ending at `end` over an optional path (`/`, `?` or `#` and what follows),
/// dropping trailing punctuation and anything after an unmatched closing bracket.
fn url_path_end(text: &str, end: usize) -> usize {
    let Some(first) = next_char(text, end).filter(|c| matches!(c, '/' | '?' | '#')) else {
        return end;
    };
    let mut path_end = end + 1;
    for c in text[end + 1..].chars() {
        if !is_url_path_symbol(c) {
            break;
        }
        path_end += c.len_utf8();
    }
    // Cut at the first closing bracket without its opening one, so "(see http://x.com/a)"
    // does not swallow the ")".
    let mut open = Vec::new();
    for (i, c) in text[end..path_end].char_indices() {
        let opening = match c {
            ')' => '(',
            ']' => '[',
            '}' => '{',
            '(' | '[' | '{' => {
                open.push(c);
                continue;
            }
            _ => continue,
        };
        if open.pop() != Some(opening) {
            path_end = end + i;
            break;
        }
    }
    while path_end > end + 1 && text[..path_end].ends_with(|c| BAD_PATH_END_CHARS.contains(c)) {
        path_end -= 1;
    }
    if first == '/' || path_end > end + 1 {
        path_end
    } else {
        end
    }
}

/// `:port` after a host, when it is a valid port number.
fn url_port_end(text: &str, end: usize) -> usize {
    let bytes = text.as_bytes();
    if bytes.get(end) != Some(&b':') {
        return end;
    }
    let digits_end = ascii_run(bytes, end + 1, |b| b.is_ascii_digit());
    let significant = text[end + 1..digits_end].trim_start_matches('0');
    if significant.is_empty() || significant.len() > 5 {
        return end;
    }
    match significant.parse::<u32>() {
        Ok(port) if port <= 65535 => digits_end,
        _ => end,
    }
}

/// `http://`, `https://` and `ftp://` URLs (a subset of TDLib's `match_urls`/`fix_url`).
pub(super) fn match_scheme_urls(text: &str) -> Vec<Span> {
    let mut result = Vec::new();
    for (sep, _) in text.match_indices("://") {
        // The protocol is the run of protocol characters before "://"; like TDLib, a longer
        // run ending in a supported protocol name (e.g. "xhttp") still yields that protocol.
        let before = &text[..sep];
        let protocol_start = before
            .char_indices()
            .rev()
            .take_while(|&(_, c)| {
                if c.is_ascii() {
                    c.is_ascii_alphanumeric() || c == '+' || c == '-'
                } else {
                    !c.is_whitespace()
                }
            })
            .last()
            .map_or(sep, |(i, _)| i);
        let protocol = before[protocol_start..].to_ascii_lowercase();
        let name_len = if protocol.ends_with("https") {
            5
        } else if protocol.ends_with("http") && protocol != "shttp" {
            4
        } else if protocol.ends_with("ftp") && protocol != "tftp" && protocol != "sftp" {
            3
        } else {
            continue;
        };
        let start = sep - name_len;
        let host_start = sep + 3;
        let mut host_end = host_start;
        for c in text[host_start..].chars() {
            if !is_domain_symbol(c) {
                break;
            }
            host_end += c.len_utf8();
        }
        let host = text[host_start..host_end].trim_end_matches('.');
        host_end = host_start + host.len();
        if host.starts_with('.') || !host.contains('.') || host.split('.').any(str::is_empty) {
            continue;
        }
        let end = url_path_end(text, url_port_end(text, host_end));
        result.push((start, end, Kind::Url));
    }
    result
}

/// Bare `t.me/...` style links (TDLib links every bare domain with a known TLD; only
/// Telegram's own domains are modelled).
pub(super) fn match_telegram_domains(text: &str) -> Vec<Span> {
    let lower = text.to_ascii_lowercase();
    let mut result = Vec::new();
    for domain in ["t.me", "telegram.me", "telegram.dog"] {
        for (start, _) in lower.match_indices(domain) {
            let blocked = |c: char| is_domain_symbol(c) || matches!(c, '/' | '#' | '@');
            if prev_char(text, start).is_some_and(blocked) {
                continue;
            }
            let host_end = start + domain.len();
            if next_char(text, host_end).is_some_and(|c| is_domain_symbol(c) && c != '.') {
                continue;
            }
            let end = url_path_end(text, url_port_end(text, host_end));
            result.push((start, end, Kind::Url));
        }
    }
    result
}

/// TDLib's `match_tg_urls`: `tg://` and `ton://` links.
pub(super) fn match_tg_urls(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut result = Vec::new();
    for (colon, _) in text.match_indices("://") {
        let start = if colon >= 2 && bytes[colon - 2..colon].eq_ignore_ascii_case(b"tg") {
            colon - 2
        } else if colon >= 3 && bytes[colon - 3..colon].eq_ignore_ascii_case(b"ton") {
            colon - 3
        } else {
            continue;
        };
        let host_start = colon + 3;
        let mut host_end = host_start;
        while host_end < bytes.len()
            && host_end - host_start != 253
            && (is_alnum_underscore(bytes[host_end]) || bytes[host_end] == b'-')
        {
            host_end += 1;
        }
        if host_end == host_start {
            continue;
        }
        let end = url_path_end(text, host_end);
        result.push((start, end, Kind::Url));
    }
    result
}
