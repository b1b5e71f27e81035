//! GitHub's extended autolinks (GFM 0.29, "Autolinks (extension)"): bare `www.` addresses,
//! `http://`, `https://` and `ftp://` URLs and e-mail addresses in running text become links,
//! as they do where pi's Markdown is usually read. The renderer finds them itself because rich
//! messages go out with Telegram's own entity detection off (it would also make `/commands`,
//! `#hashtags` and numbers in technical text into entities).

use std::ops::Range;

/// A link found in text: where it is, and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Byte range of the link's text.
    pub range: Range<usize>,
    /// Its address (`http://` added to `www.`, `mailto:` to an e-mail address).
    pub url: String,
}

/// The extended autolinks of `text`. `before` is the character just before `text` (`None`
/// at the start of a line or of a paragraph): a `www.` or URL autolink starts only at the
/// start of a line, after whitespace, or after `*`, `_`, `~` or `(`.
pub fn find(text: &str, before: Option<char>) -> Vec<Found> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let prev = text[..i]
            .chars()
            .next_back()
            .or(if i == 0 { before } else { None });
        let rest = &text[i..];
        let at_boundary = i == 0 && before.is_none()
            || prev.is_some_and(|c| c.is_whitespace() || matches!(c, '*' | '_' | '~' | '('));
        let found = if at_boundary {
            url_at(rest)
                .map(|len| (len, rest[..len].to_owned()))
                .or_else(|| www_at(rest).map(|len| (len, format!("http://{}", &rest[..len]))))
        } else {
            None
        };
        if let Some((len, url)) = found {
            out.push(Found {
                range: i..i + len,
                url,
            });
            i += len;
            continue;
        }
        // An address starts where its local part does, never inside a link found already.
        if rest.starts_with('@')
            && let Some((start, end)) = email_around(text, i)
            && out.last().is_none_or(|f| f.range.end <= start)
        {
            out.push(Found {
                range: start..end,
                url: format!("mailto:{}", &text[start..end]),
            });
            i = end;
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// `www.` + a valid domain + the path, at the start of `s`: its length.
fn www_at(s: &str) -> Option<usize> {
    if !s.starts_with("www.") {
        return None;
    }
    let domain = valid_domain(s)?;
    Some(domain + path_len(&s[domain..]))
}

/// `http://`, `https://` or `ftp://` + a valid domain + the path: its length.
fn url_at(s: &str) -> Option<usize> {
    let scheme = ["http://", "https://", "ftp://"].iter().find(|p| {
        s.len() > p.len() && s.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p))
    })?;
    let domain = valid_domain(&s[scheme.len()..])?;
    let end = scheme.len() + domain;
    Some(end + path_len(&s[end..]))
}

/// Segments of alphanumerics, `_` and `-` separated by `.`: at least one period, no `_` in
/// the last two segments. Its length.
fn valid_domain(s: &str) -> Option<usize> {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .map_or(s.len(), |(i, _)| i);
    let mut domain = &s[..end];
    // A period at the end is punctuation after the domain, not part of it.
    while let Some(d) = domain.strip_suffix('.') {
        domain = d;
    }
    let segments: Vec<&str> = domain.split('.').collect();
    if segments.len() < 2 || segments.iter().any(|s| s.is_empty()) {
        return None;
    }
    if segments.iter().rev().take(2).any(|s| s.contains('_')) {
        return None;
    }
    Some(domain.len())
}

/// How much of `s` (what follows a domain) belongs to the link: up to whitespace or `<`,
/// without trailing punctuation, unmatched closing parentheses or an entity-like `&name;`.
fn path_len(s: &str) -> usize {
    let mut end = s
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || *c == '<')
        .map_or(s.len(), |(i, _)| i);
    loop {
        let path = &s[..end];
        let Some(last) = path.chars().next_back() else {
            return 0;
        };
        if matches!(last, '?' | '!' | '.' | ',' | ':' | '*' | '_' | '~') {
            end -= 1;
            continue;
        }
        if last == ')' {
            let open = path.matches('(').count();
            let close = path.matches(')').count();
            if close > open {
                end -= 1;
                continue;
            }
        }
        if last == ';'
            && let Some(amp) = path.rfind('&')
            && path[amp + 1..path.len() - 1]
                .chars()
                .all(|c| c.is_ascii_alphanumeric())
            && amp + 2 < path.len()
        {
            end = amp;
            continue;
        }
        return end;
    }
}

/// The e-mail address whose `@` is at byte `at` of `text`, as a byte range.
fn email_around(text: &str, at: usize) -> Option<(usize, usize)> {
    let local = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+');
    let start = text[..at]
        .char_indices()
        .rev()
        .take_while(|(_, c)| local(*c))
        .last()
        .map(|(i, _)| i)?;
    let after = &text[at + 1..];
    let mut end = after
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .map_or(after.len(), |(i, _)| i);
    while after[..end].ends_with('.') {
        end -= 1;
    }
    let domain = &after[..end];
    if !domain.contains('.') || domain.split('.').any(str::is_empty) || domain.ends_with(['-', '_'])
    {
        return None;
    }
    // An address is not part of a word: `a+b@c.d` after a letter starts at the letter.
    Some((start, at + 1 + end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(text: &str) -> Vec<(String, String)> {
        find(text, None)
            .into_iter()
            .map(|f| (text[f.range].to_owned(), f.url))
            .collect()
    }

    fn one(text: &str, shown: &str, url: &str) {
        assert_eq!(
            links(text),
            vec![(shown.to_owned(), url.to_owned())],
            "{text}"
        );
    }

    #[test]
    fn gfm_examples() {
        one(
            "www.commonmark.org",
            "www.commonmark.org",
            "http://www.commonmark.org",
        );
        one(
            "Visit www.commonmark.org/help for more information.",
            "www.commonmark.org/help",
            "http://www.commonmark.org/help",
        );
        one(
            "Visit www.commonmark.org.",
            "www.commonmark.org",
            "http://www.commonmark.org",
        );
        one(
            "Visit www.commonmark.org/a.b.",
            "www.commonmark.org/a.b",
            "http://www.commonmark.org/a.b",
        );
        let q = "www.google.com/search?q=Markup+(business)";
        for text in [q, &format!("{q}))"), &format!("({q})"), &format!("({q}")] {
            one(text, q, &format!("http://{q}"));
        }
        one(
            "www.google.com/search?q=(business))+ok",
            "www.google.com/search?q=(business))+ok",
            "http://www.google.com/search?q=(business))+ok",
        );
        one(
            "www.google.com/search?q=commonmark&hl;",
            "www.google.com/search?q=commonmark",
            "http://www.google.com/search?q=commonmark",
        );
        one(
            "www.commonmark.org/he<lp",
            "www.commonmark.org/he",
            "http://www.commonmark.org/he",
        );
        one(
            "ftp://foo.bar.baz.",
            "ftp://foo.bar.baz",
            "ftp://foo.bar.baz",
        );
        one("foo@bar.baz", "foo@bar.baz", "mailto:foo@bar.baz");
        one(
            "hello@mail+xyz.example isn't valid, but hello+xyz@mail.example is.",
            "hello+xyz@mail.example",
            "mailto:hello+xyz@mail.example",
        );
        one("a.b-c_d@a.b.", "a.b-c_d@a.b", "mailto:a.b-c_d@a.b");
        assert_eq!(links("a.b-c_d@a.b-"), vec![]);
        assert_eq!(links("a.b-c_d@a.b_"), vec![]);
    }

    #[test]
    fn only_at_a_boundary() {
        assert_eq!(links("xwww.a.com"), vec![]);
        assert_eq!(links("<https://a.com"), vec![]);
        assert_eq!(find("www.a.com", Some('x')), vec![]);
        assert_eq!(find("www.a.com", Some(' ')).len(), 1);
        one("(https://a.com)", "https://a.com", "https://a.com");
        // A domain needs a period, and no underscore near its end.
        assert_eq!(links("www.a_b.c_d"), vec![]);
        assert_eq!(links("https://localhost/x"), vec![]);
    }

    #[test]
    fn commands_hashtags_and_numbers_stay_text() {
        assert_eq!(links("run /start #tag 1.2.3 v2.0 $PATH a.b"), vec![]);
    }
}
