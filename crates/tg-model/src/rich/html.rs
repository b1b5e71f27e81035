//! The html form: a small tolerant tokenizer driving the builder.
//!
//! Unlike Telegram's `parse_mode` HTML ([`crate::html`]), this reads HTML as a person or a
//! model writes it: a `<` that starts no tag is text, unknown tags are dropped with their
//! content kept, and block tags (`<p>`, `<ul>`, `<table>`, `<details>`...) shape blocks. Only a
//! tag or comment left unfinished at the end is an error, since nothing sensible can be made
//! of it.

use crate::html::charref::{self, Dialect};

use super::builder::Builder;
use super::containers::{Flat, Kind};
use super::inline::{Closer, FrameKind, TextKind, href_kind};
use super::limits::{Limits, Result, RichError, parse_err};
use super::model::{Block, RichText, Style, TextObject};

#[derive(Debug, PartialEq)]
pub(super) enum Token {
    /// Text with character references decoded.
    Text(String),
    /// A start tag; names are lowercased, attribute values decoded.
    Start {
        name: String,
        attrs: Vec<(String, String)>,
        self_closing: bool,
    },
    End(String),
}

/// The blocks of an html source.
pub(super) fn to_blocks(source: &str, limits: &Limits) -> Result<Vec<Block>> {
    let mut builder = Builder::new(limits);
    for token in tokenize(source)? {
        builder.html_token(token)?;
    }
    builder.finish()
}

fn decode(s: &str) -> String {
    charref::decode(s, Dialect::Rich)
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':')
}

fn read_name(source: &str, start: usize) -> (String, usize) {
    let bytes = source.as_bytes();
    let mut end = start;
    while bytes.get(end).copied().is_some_and(is_name_byte) {
        end += 1;
    }
    (source[start..end].to_ascii_lowercase(), end)
}

fn skip_spaces(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Tokenizes HTML leniently: a `<` that does not start a tag is text, and unknown tags are the
/// builder's business.
pub(super) fn tokenize(source: &str) -> Result<Vec<Token>> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while let Some(off) = source[i..].find('<') {
        let lt = i + off;
        let next = bytes.get(lt + 1).copied();
        let parsed: Option<(Option<Token>, usize)> = if source[lt..].starts_with("<!--") {
            let end = source[lt + 4..]
                .find("-->")
                .ok_or_else(|| parse_err(format!("unclosed comment at byte offset {lt}")))?;
            Some((None, lt + 4 + end + 3))
        } else if matches!(next, Some(b'!' | b'?')) {
            source[lt..].find('>').map(|e| (None, lt + e + 1))
        } else if next == Some(b'/') && bytes.get(lt + 2).is_some_and(u8::is_ascii_alphabetic) {
            let (name, after) = read_name(source, lt + 2);
            let end = source[after..]
                .find('>')
                .ok_or_else(|| parse_err(format!("unclosed end tag \"{name}\"")))?;
            Some((Some(Token::End(name)), after + end + 1))
        } else if next.is_some_and(|b| b.is_ascii_alphabetic()) {
            let (token, end) = start_tag(source, lt + 1)?;
            Some((Some(token), end))
        } else {
            None
        };
        match parsed {
            Some((token, end)) => {
                if text_start < lt {
                    tokens.push(Token::Text(decode(&source[text_start..lt])));
                }
                tokens.extend(token);
                text_start = end;
                i = end;
            }
            None => i = lt + 1,
        }
    }
    if text_start < source.len() {
        tokens.push(Token::Text(decode(&source[text_start..])));
    }
    Ok(tokens)
}

fn start_tag(source: &str, name_start: usize) -> Result<(Token, usize)> {
    let bytes = source.as_bytes();
    let (name, mut i) = read_name(source, name_start);
    let unfinished = || parse_err(format!("unclosed start tag \"{name}\""));
    let mut attrs = Vec::new();
    loop {
        i = skip_spaces(bytes, i);
        match bytes.get(i) {
            None => return Err(unfinished()),
            Some(b'>') => {
                let token = Token::Start {
                    name,
                    attrs,
                    self_closing: false,
                };
                return Ok((token, i + 1));
            }
            Some(b'/') => {
                i += 1;
                if bytes.get(i) == Some(&b'>') {
                    let token = Token::Start {
                        name,
                        attrs,
                        self_closing: true,
                    };
                    return Ok((token, i + 1));
                }
            }
            Some(b'=') => i += 1,
            Some(_) => {
                let key_start = i;
                while bytes
                    .get(i)
                    .is_some_and(|b| !b.is_ascii_whitespace() && !matches!(b, b'=' | b'>' | b'/'))
                {
                    i += 1;
                }
                let key = source[key_start..i].to_ascii_lowercase();
                let after_key = skip_spaces(bytes, i);
                let mut value = String::new();
                if bytes.get(after_key) == Some(&b'=') {
                    i = skip_spaces(bytes, after_key + 1);
                    match bytes.get(i) {
                        Some(&quote @ (b'"' | b'\'')) => {
                            let len = source[i + 1..].find(quote as char).ok_or_else(|| {
                                parse_err(format!("unclosed attribute value in tag \"{name}\""))
                            })?;
                            value = decode(&source[i + 1..i + 1 + len]);
                            i += len + 2;
                        }
                        _ => {
                            let value_start = i;
                            while bytes
                                .get(i)
                                .is_some_and(|b| !b.is_ascii_whitespace() && *b != b'>')
                            {
                                i += 1;
                            }
                            value = decode(&source[value_start..i]);
                        }
                    }
                }
                attrs.push((key, value));
            }
        }
    }
}

/// Tags that never have content, so never an end tag to wait for.
const VOID_TAGS: [&str; 9] = [
    "area", "base", "embed", "link", "meta", "param", "source", "track", "wbr",
];

/// Tags that only group blocks: they end the paragraph in progress and are otherwise ignored.
const SECTION_TAGS: [&str; 11] = [
    "div",
    "section",
    "article",
    "header",
    "main",
    "nav",
    "figure",
    "figcaption",
    "html",
    "head",
    "body",
];

fn attr_of<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn inline_tag_kind(name: &str, attrs: &[(String, String)]) -> FrameKind {
    let attr = |key: &str| attr_of(attrs, key);
    match name {
        "b" | "strong" => FrameKind::Format(Style::Bold),
        "i" | "em" | "cite" | "var" => FrameKind::Format(Style::Italic),
        "u" | "ins" => FrameKind::Format(Style::Underline),
        "s" | "strike" | "del" => FrameKind::Format(Style::Strikethrough),
        "tg-spoiler" => FrameKind::Format(Style::Spoiler),
        "span"
            if attr("class").is_some_and(|c| c.split_whitespace().any(|c| c == "tg-spoiler")) =>
        {
            FrameKind::Format(Style::Spoiler)
        }
        "sub" => FrameKind::Format(Style::Subscript),
        "sup" => FrameKind::Format(Style::Superscript),
        "mark" => FrameKind::Format(Style::Marked),
        "code" | "kbd" | "samp" | "tt" => FrameKind::Format(Style::Code),
        "a" => attr("href").map_or(FrameKind::Transparent, href_kind),
        "tg-math" => FrameKind::Math,
        "tg-emoji" => attr("emoji-id").map_or(FrameKind::Transparent, |id| {
            FrameKind::Emoji(id.to_string())
        }),
        "tg-time" => match attr("unix").and_then(|u| u.trim().parse().ok()) {
            Some(unix) => FrameKind::DateTime(unix, attr("format").unwrap_or_default().to_string()),
            None => FrameKind::Transparent,
        },
        _ => FrameKind::Transparent,
    }
}

fn class_language(class: &str) -> Option<String> {
    class
        .split_whitespace()
        .find_map(|c| c.strip_prefix("language-"))
        .filter(|l| !l.is_empty())
        .map(str::to_string)
}

impl Builder<'_> {
    fn html_token(&mut self, token: Token) -> Result<()> {
        match token {
            Token::Text(text) => self.text_run(&text, true),
            Token::Start {
                name,
                attrs,
                self_closing,
            } => self.html_start(&name, &attrs, self_closing),
            Token::End(name) => self.html_end(&name),
        }
    }

    fn html_start(
        &mut self,
        name: &str,
        attrs: &[(String, String)],
        self_closing: bool,
    ) -> Result<()> {
        let attr = |key: &str| attr_of(attrs, key);
        // Inside code and formulas tags are not markup, except those that shape the block.
        if let Some(block) = self.text.as_mut().filter(|b| b.is_raw()) {
            match (name, &mut block.kind) {
                ("br", _) => block.raw.push('\n'),
                ("code", TextKind::Pre { language, .. }) if language.is_none() => {
                    *language = attr("class").and_then(class_language);
                }
                _ => {}
            }
            return Ok(());
        }
        let closer = Closer::html(name);
        match name {
            "p" => self.start_text(TextKind::Paragraph { implicit: false }, closer),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let size = name[1..].parse().unwrap_or(1);
                self.start_text(TextKind::Heading(size), closer)
            }
            "pre" => {
                let language = attr("language").map(str::to_string);
                self.start_text(
                    TextKind::Pre {
                        language,
                        html: true,
                    },
                    closer,
                )
            }
            "tg-math-block" => self.start_text(TextKind::Math, closer),
            "blockquote" => {
                let expandable = attr("expandable").is_some();
                self.push_container(
                    Kind::Quote {
                        credit: None,
                        expandable,
                    },
                    closer,
                )
            }
            "aside" => self.push_container(Kind::Pullquote { credit: None }, closer),
            "ul" | "ol" => {
                let ordered = name == "ol";
                let next = attr("start")
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(1);
                let style = attr("type")
                    .filter(|t| ordered && ["1", "a", "A", "i", "I"].contains(t))
                    .map(str::to_string);
                self.push_container(
                    Kind::List {
                        ordered,
                        next,
                        style,
                        items: Vec::new(),
                    },
                    closer,
                )
            }
            "li" => {
                self.finish_text();
                if let Some(index) = self.nearest(|k| matches!(k, Kind::List { .. })) {
                    self.pop_to(index)?;
                }
                let value = attr("value").and_then(|v| v.trim().parse().ok());
                self.open_item(value, closer)
            }
            "input" => {
                if attr("type").is_some_and(|t| t.eq_ignore_ascii_case("checkbox")) {
                    self.set_checkbox(attr("checked").is_some());
                }
                Ok(())
            }
            "table" => {
                let flags = ["bordered", "striped", "compact"].map(|f| attr(f).is_some());
                self.push_container(
                    Kind::Table {
                        rows: Vec::new(),
                        row: None,
                        head: false,
                        aligns: Vec::new(),
                        caption: None,
                        flags,
                    },
                    closer,
                )
            }
            "tr" => self.start_row(false),
            "td" | "th" => {
                if self.close_to_table()?.is_some() {
                    let align = attr("align")
                        .filter(|a| ["left", "center", "right"].contains(a))
                        .unwrap_or("left");
                    let valign = attr("valign")
                        .filter(|a| ["top", "middle", "bottom"].contains(a))
                        .unwrap_or("top");
                    let span = |key| {
                        attr(key)
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .filter(|n| *n > 1 && *n <= u64::from(u32::MAX))
                    };
                    self.open_cell(
                        name == "th",
                        align,
                        valign,
                        span("colspan"),
                        span("rowspan"),
                        closer,
                    );
                }
                Ok(())
            }
            "caption" => {
                if self.close_to_table()?.is_some() {
                    self.push_container_here(Kind::Flat(Flat::Caption), closer);
                }
                Ok(())
            }
            "thead" | "tbody" | "tfoot" | "colgroup" | "col" => Ok(()),
            "details" => {
                let open = attr("open").is_some();
                self.push_container(
                    Kind::Details {
                        summary: None,
                        open,
                    },
                    closer,
                )
            }
            "summary" => self.push_container(Kind::Flat(Flat::Summary), closer),
            "footer" => self.push_container(Kind::Flat(Flat::Footer), closer),
            "cite" if self.quote_is_nearest() => {
                self.push_container(Kind::Flat(Flat::Credit), closer)
            }
            "hr" => self.add_block(Block::Divider),
            "br" => self.inline_str("\n"),
            "img" | "video" | "audio" | "tg-collage" | "tg-slideshow" | "picture" => {
                Err(RichError::MediaUnsupported)
            }
            _ if SECTION_TAGS.contains(&name) => {
                self.finish_text();
                Ok(())
            }
            _ if self_closing || VOID_TAGS.contains(&name) => Ok(()),
            _ => {
                let kind = inline_tag_kind(name, attrs);
                if let (FrameKind::Transparent, Some(anchor), "a") = (&kind, attr("name"), name) {
                    self.inline(RichText::object(TextObject::Anchor {
                        name: anchor.to_string(),
                    }))?;
                }
                self.open_frame(kind, closer)
            }
        }
    }

    /// Whether a `<cite>` here is a quote's credit rather than an italic title.
    fn quote_is_nearest(&self) -> bool {
        self.stack
            .iter()
            .rev()
            .find(|c| !matches!(c.kind, Kind::Flat(_)))
            .is_some_and(|c| matches!(c.kind, Kind::Quote { .. } | Kind::Pullquote { .. }))
    }

    fn html_end(&mut self, name: &str) -> Result<()> {
        let closer = Closer::html(name);
        if let Some(block) = &self.text
            && (block.is_raw() || matches!(name, "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6"))
        {
            if block.closer == closer {
                self.finish_text();
            }
            return Ok(());
        }
        match name {
            "tr" => self.end_row(),
            "cite" => {
                if !self.close_frame(&closer) {
                    self.end_container(&closer)?;
                }
                Ok(())
            }
            "li" | "ul" | "ol" | "blockquote" | "aside" | "table" | "td" | "th" | "caption"
            | "details" | "summary" | "footer" => self.end_container(&closer),
            _ if SECTION_TAGS.contains(&name) => {
                self.finish_text();
                Ok(())
            }
            _ => {
                self.close_frame(&closer);
                Ok(())
            }
        }
    }

    /// HTML inside markdown: a fragment pulldown-cmark found. One that does not tokenize is
    /// shown as it was written.
    pub(super) fn html_fragment(&mut self, html: &str) -> Result<()> {
        match tokenize(html) {
            Ok(tokens) => {
                for token in tokens {
                    self.html_token(token)?;
                }
                Ok(())
            }
            Err(_) => self.inline_str(html),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tokenizer_is_lenient_with_stray_brackets() {
        let tokens = tokenize("a < b <b class=\"x\" open>c</b> &lt;&#65;&bogus;").unwrap();
        assert_eq!(
            tokens,
            vec![
                Token::Text("a < b ".into()),
                Token::Start {
                    name: "b".into(),
                    attrs: vec![("class".into(), "x".into()), ("open".into(), String::new())],
                    self_closing: false,
                },
                Token::Text("c".into()),
                Token::End("b".into()),
                Token::Text(" <A&bogus;".into()),
            ]
        );
    }

    #[test]
    fn tokenizer_rejects_unfinished_tags() {
        assert!(matches!(tokenize("x <b"), Err(RichError::Parse(_))));
        assert!(matches!(tokenize("<!-- x"), Err(RichError::Parse(_))));
        assert!(matches!(
            tokenize("<a href=\"x>y"),
            Err(RichError::Parse(_))
        ));
    }
}
