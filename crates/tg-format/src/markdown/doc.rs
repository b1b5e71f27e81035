//! The document model: what pi's Markdown means, independent of how Telegram shows it. The
//! parser fills it; each output form (rich Markdown, HTML, plain text) is a function of it.

/// A block of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// Running text.
    Paragraph(Vec<Inline>),
    /// A heading, level 1..=6.
    Heading {
        /// 1..=6.
        level: u8,
        /// Its text.
        content: Vec<Inline>,
    },
    /// A code block (also raw HTML blocks, shown as the source they are). The text has no
    /// trailing newline.
    Code {
        /// The fence's language, if any.
        lang: Option<String>,
        /// The code.
        text: String,
    },
    /// A block quotation.
    Quote(Vec<Block>),
    List {
        /// The first number of an ordered list; `None` for bullets.
        start: Option<u64>,
        items: Vec<Item>,
    },
    Table(Table),
    /// A thematic break.
    Rule,
    /// A footnote definition.
    Footnote {
        label: String,
        /// Its content.
        blocks: Vec<Block>,
    },
}

/// A list item.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Item {
    /// `Some(done)` for a task list item.
    pub checked: Option<bool>,
    /// Its content.
    pub blocks: Vec<Block>,
}

/// A table: a header row and body rows of inline cells.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    /// Column alignments.
    pub aligns: Vec<Align>,
    /// Header cells.
    pub head: Vec<Vec<Inline>>,
    /// Body rows.
    pub rows: Vec<Vec<Vec<Inline>>>,
}

impl Table {
    /// The number of columns: the widest row.
    pub fn columns(&self) -> usize {
        self.rows
            .iter()
            .map(Vec::len)
            .chain([self.head.len(), self.aligns.len()])
            .max()
            .unwrap_or(0)
    }
}

/// A column's alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Not given.
    None,
    /// `:---`
    Left,
    /// `:---:`
    Center,
    /// `---:`
    Right,
}

/// Inline content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inline {
    /// Text (inline HTML included: it is shown as written).
    Text(String),
    /// A code span.
    Code(String),
    /// `*emphasis*`
    Emph(Vec<Inline>),
    /// `**strong**`
    Strong(Vec<Inline>),
    /// `~~strikethrough~~`
    Strike(Vec<Inline>),
    Link {
        /// Its target, as written.
        url: String,
        /// Its text.
        content: Vec<Inline>,
    },
    /// An image (Telegram shows it as a link).
    Image {
        /// Its source.
        url: String,
        /// Its alternative text.
        alt: String,
    },
    /// A line break inside a paragraph (soft or hard: a chat shows both as one).
    Break,
    /// `[^label]`
    FootnoteRef(String),
}

/// The visible text of inline content, formatting dropped (links show their text).
pub fn inline_text(inlines: &[Inline]) -> String {
    let mut out = String::new();
    push_inline_text(inlines, &mut out);
    out
}

fn push_inline_text(inlines: &[Inline], out: &mut String) {
    for i in inlines {
        match i {
            Inline::Text(t) | Inline::Code(t) => out.push_str(t),
            Inline::Emph(c) | Inline::Strong(c) | Inline::Strike(c) => push_inline_text(c, out),
            Inline::Link { content, .. } => push_inline_text(content, out),
            Inline::Image { url, alt } => {
                out.push_str(IMAGE_MARK);
                out.push_str(if alt.is_empty() { url } else { alt });
            }
            Inline::Break => out.push('\n'),
            Inline::FootnoteRef(label) => {
                out.push_str("[^");
                out.push_str(label);
                out.push(']');
            }
        }
    }
}

/// What an image's text starts with, so a person sees that a picture was meant there.
pub const IMAGE_MARK: &str = "🖼 ";

/// Where a link in a rich message leads (`http`, `https`, `ftp`, `tg`, `mailto`, `tel`), as
/// written: the scheme in lower case (`MAILTO:` is not a scheme Telegram knows), the characters
/// no address may hold percent-encoded. `None` for what Telegram cannot open (a relative
/// path, an anchor, another scheme): such a link is its text.
pub fn rich_target(url: &str) -> Option<String> {
    target(
        url,
        &["http://", "https://", "ftp://", "tg:", "mailto:", "tel:"],
    )
}

/// Where a link in a text message (`parse_mode: HTML`) leads: only `http`, `https` and `tg`,
/// the links Telegram takes in `<a href>` (an e-mail or `ftp://` address there became an
/// `http://` link to nowhere). E-mail and `ftp://` addresses in the text are linked by
/// Telegram itself.
pub fn text_target(url: &str) -> Option<String> {
    target(url, &["http://", "https://", "tg:"])
}

/// For a link [`rich_target`] takes and [`text_target`] does not: the address to show after
/// its text in a text message (`a@b.c` for `mailto:a@b.c`), so it is not lost.
pub fn shown_address(url: &str) -> Option<String> {
    let t = rich_target(url)?;
    if text_target(url).is_some() {
        return None;
    }
    Some(
        t.strip_prefix("mailto:")
            .or_else(|| t.strip_prefix("tel:"))
            .unwrap_or(&t)
            .to_owned(),
    )
}

fn target(url: &str, schemes: &[&str]) -> Option<String> {
    let url = url.trim();
    if url.chars().any(char::is_whitespace) {
        return None;
    }
    let scheme = schemes.iter().find(|s| {
        url.len() > s.len()
            && url
                .get(..s.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(s))
    })?;
    let mut out = scheme.to_string();
    for c in url[scheme.len()..].chars() {
        match c {
            c if c.is_ascii_alphanumeric() => out.push(c),
            '-' | '_' | '.' | '+' | '!' | '*' | '\'' | '(' | ')' | ',' | '%' | '#' | '@' | '?'
            | '=' | ';' | ':' | '/' | '&' | '$' | '~' | '[' | ']' => out.push(c),
            c if c.is_ascii() => out.push_str(&format!("%{:02X}", u32::from(c))),
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rendering_links_what_telegram_opens_there() {
        assert_eq!(rich_target("MAILTO:a@b.c").as_deref(), Some("mailto:a@b.c"));
        assert_eq!(rich_target("HTTPS://x.y/a b"), None);
        assert_eq!(
            rich_target("https://x.y/`q`\"").as_deref(),
            Some("https://x.y/%60q%60%22")
        );
        assert_eq!(rich_target("ftp://f.g").as_deref(), Some("ftp://f.g"));
        assert_eq!(rich_target("/relative"), None);
        assert_eq!(rich_target("#anchor"), None);
        assert_eq!(rich_target("irc://x.y"), None);
        assert_eq!(text_target("mailto:a@b.c"), None);
        assert_eq!(text_target("ftp://f.g"), None);
        assert_eq!(
            text_target("tg://user?id=1").as_deref(),
            Some("tg://user?id=1")
        );
        assert_eq!(shown_address("mailto:a@b.c").as_deref(), Some("a@b.c"));
        assert_eq!(shown_address("tel:+123").as_deref(), Some("+123"));
        assert_eq!(shown_address("https://x.y"), None);
        assert_eq!(shown_address("/relative"), None);
    }
}
