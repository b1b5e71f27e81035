//! The text block the builder is filling: a paragraph, heading, code block or formula, with
//! the inline formatting still open in it.

use pulldown_cmark::TagEnd;

use super::model::{Block, Parts, RichText, Style, TextObject};

/// What may close an open container, text block or inline frame: a markdown end event, an
/// HTML end tag, nothing but an enclosing close (implicit), or a `==`/`||` marker.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Closer {
    Implicit,
    Md(TagEnd),
    Html(String),
    Marker,
}

impl Closer {
    pub(super) fn html(name: &str) -> Self {
        Closer::Html(name.to_string())
    }
}

#[derive(Debug)]
pub(super) enum TextKind {
    /// `implicit` when no markup opened it: text found outside any block.
    Paragraph {
        implicit: bool,
    },
    Heading(u8),
    /// `html` when it came from `<pre>`, whose first newline is not content.
    Pre {
        language: Option<String>,
        html: bool,
    },
    Math,
}

/// Open inline formatting, and what it becomes once closed.
#[derive(Debug)]
pub(super) enum FrameKind {
    Root,
    Format(Style),
    Url(String),
    Email(String),
    Phone(String),
    AnchorLink(String),
    Math,
    Emoji(String),
    DateTime(u64, String),
    /// A `==` or `||` still waiting for its partner.
    Marker(&'static str),
    /// An unknown tag: its content stays, the tag goes.
    Transparent,
}

/// The frame kind of a link target: `#anchor`, `mailto:`, `tel:` or any other URL.
pub(super) fn href_kind(href: &str) -> FrameKind {
    let href = href.trim();
    if href.is_empty() {
        FrameKind::Transparent
    } else if let Some(anchor) = href.strip_prefix('#') {
        FrameKind::AnchorLink(anchor.to_string())
    } else if let Some(email) = strip_prefix_ci(href, "mailto:") {
        FrameKind::Email(email.to_string())
    } else if let Some(phone) = strip_prefix_ci(href, "tel:") {
        FrameKind::Phone(phone.to_string())
    } else {
        FrameKind::Url(href.to_string())
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[derive(Debug)]
pub(super) struct Frame {
    pub(super) kind: FrameKind,
    pub(super) closer: Closer,
    pub(super) parts: Parts,
}

impl Frame {
    fn root() -> Self {
        Frame {
            kind: FrameKind::Root,
            closer: Closer::Implicit,
            parts: Parts::default(),
        }
    }
}

/// The one block currently taking inline content: a paragraph, heading, code block or formula.
#[derive(Debug)]
pub(super) struct TextBlock {
    pub(super) kind: TextKind,
    pub(super) closer: Closer,
    /// Open inline formatting; `frames[0]` is the block's own root frame.
    pub(super) frames: Vec<Frame>,
    /// Content of code blocks and formulas, which take no formatting.
    pub(super) raw: String,
}

impl TextBlock {
    pub(super) fn new(kind: TextKind, closer: Closer) -> Self {
        Self {
            kind,
            closer,
            frames: vec![Frame::root()],
            raw: String::new(),
        }
    }

    pub(super) fn is_raw(&self) -> bool {
        matches!(self.kind, TextKind::Pre { .. } | TextKind::Math)
    }

    fn top(&mut self) -> &mut Parts {
        // The root frame is never popped; recreating it keeps this total without a panic path.
        let frames = &mut self.frames;
        if frames.is_empty() {
            frames.push(Frame::root());
        }
        let last = frames.len() - 1;
        &mut frames[last].parts
    }

    pub(super) fn push_str(&mut self, s: &str) {
        self.top().push_str(s);
    }

    pub(super) fn push(&mut self, text: RichText) {
        self.top().push(text);
    }

    pub(super) fn ends_with_space(&self) -> bool {
        match self.frames.last().and_then(|f| f.parts.last()) {
            Some(RichText::Plain(s)) => s.ends_with(char::is_whitespace),
            Some(_) => false,
            None => true,
        }
    }

    pub(super) fn top_is_marker(&self, marker: &str) -> bool {
        matches!(self.frames.last(), Some(Frame { kind: FrameKind::Marker(m), .. }) if *m == marker)
    }

    /// Closes the innermost frame into its parent. An unmatched marker closed without
    /// `proper` goes back to being the literal text it was.
    pub(super) fn close_top(&mut self, proper: bool) {
        if self.frames.len() < 2 {
            return;
        }
        let Some(frame) = self.frames.pop() else {
            return;
        };
        let parts = frame.parts;
        let text = match frame.kind {
            FrameKind::Root => None,
            FrameKind::Transparent => {
                parts
                    .into_vec()
                    .into_iter()
                    .for_each(|part| self.push(part));
                None
            }
            FrameKind::Marker(marker) if !proper => {
                self.push_str(marker);
                parts
                    .into_vec()
                    .into_iter()
                    .for_each(|part| self.push(part));
                None
            }
            FrameKind::Marker(marker) => {
                let style = if marker == "==" {
                    Style::Marked
                } else {
                    Style::Spoiler
                };
                (!parts.is_empty()).then(|| style.apply(parts.into_text()))
            }
            FrameKind::Format(style) => (!parts.is_empty()).then(|| style.apply(parts.into_text())),
            FrameKind::Url(url) => Some(RichText::object(TextObject::Url {
                text: text_or(parts, &url),
                url,
            })),
            FrameKind::Email(email) => Some(RichText::object(TextObject::EmailAddress {
                text: text_or(parts, &email),
                email_address: email,
            })),
            FrameKind::Phone(phone) => Some(RichText::object(TextObject::PhoneNumber {
                text: text_or(parts, &phone),
                phone_number: phone,
            })),
            FrameKind::AnchorLink(name) => (!parts.is_empty()).then(|| {
                RichText::object(TextObject::AnchorLink {
                    text: parts.into_text(),
                    anchor_name: name,
                })
            }),
            FrameKind::Math => {
                let source = RichText::plain_of(parts.as_slice());
                let source = source.trim();
                (!source.is_empty()).then(|| RichText::math(source))
            }
            FrameKind::Emoji(id) => Some(RichText::object(TextObject::CustomEmoji {
                custom_emoji_id: id,
                alternative_text: RichText::plain_of(parts.as_slice()),
            })),
            FrameKind::DateTime(unix_time, format) => (!parts.is_empty()).then(|| {
                RichText::object(TextObject::DateTime {
                    text: parts.into_text(),
                    unix_time,
                    date_time_format: format,
                })
            }),
        };
        if let Some(text) = text {
            self.push(text);
        }
    }

    /// Closes the innermost frame with this closer and every frame opened after it; `false`
    /// when there is none.
    pub(super) fn close_matching(&mut self, closer: &Closer) -> bool {
        let Some(index) = self.frames.iter().rposition(|f| f.closer == *closer) else {
            return false;
        };
        if index == 0 {
            return false;
        }
        while self.frames.len() > index + 1 {
            // Markers still open inside a closing element never found their partner.
            self.close_top(false);
        }
        self.close_top(true);
        true
    }

    /// The finished block; `None` when it would show nothing.
    pub(super) fn into_block(mut self) -> Option<Block> {
        while self.frames.len() > 1 {
            self.close_top(false);
        }
        match self.kind {
            TextKind::Pre { language, html } => {
                let mut raw = self.raw;
                if html && raw.starts_with('\n') {
                    raw.remove(0);
                }
                if raw.ends_with('\n') {
                    raw.pop();
                }
                if raw.trim().is_empty() {
                    return None;
                }
                Some(Block::Pre {
                    text: RichText::Plain(raw),
                    language,
                })
            }
            TextKind::Math => {
                let source = self.raw.trim();
                (!source.is_empty()).then(|| Block::MathematicalExpression {
                    expression: source.to_string(),
                })
            }
            TextKind::Paragraph { .. } | TextKind::Heading(_) => {
                let mut parts = self.frames.pop().map(|f| f.parts).unwrap_or_default();
                parts.trim();
                let text = parts.into_text();
                if text.is_empty() {
                    return None;
                }
                Some(match self.kind {
                    TextKind::Heading(size) => Block::Heading { text, size },
                    _ => Block::Paragraph { text },
                })
            }
        }
    }
}

/// The link's text, or its target when it has none.
fn text_or(parts: Parts, target: &str) -> RichText {
    if parts.is_empty() {
        RichText::Plain(target.to_string())
    } else {
        parts.into_text()
    }
}
