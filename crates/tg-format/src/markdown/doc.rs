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
    /// A list.
    List {
        /// The first number of an ordered list; `None` for bullets.
        start: Option<u64>,
        /// Its items.
        items: Vec<Item>,
    },
    /// A table.
    Table(Table),
    /// A thematic break.
    Rule,
    /// A footnote definition.
    Footnote {
        /// Its label.
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
    /// A link.
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

/// Whether Telegram accepts `url` as a link target. Relative paths, anchors and other schemes
/// stay text.
pub fn linkable(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["http://", "https://", "tg://", "mailto:", "tel:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme) && lower.len() > scheme.len())
        && !url.chars().any(char::is_whitespace)
}
