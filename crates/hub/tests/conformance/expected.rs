//! The spec's HTML as what a person would see of it in each rendering, with the renderer's
//! documented choices applied (each application counted, so the report can say how often a
//! choice made a difference):
//!
//! - an image is shown as a link with `🖼 ` and its alternative text (its address when it has
//!   none), since a chat message cannot hold an inline picture;
//! - a link Telegram cannot open (a relative address, an anchor, a scheme other than `http`,
//!   `https`, `tg`, `mailto`, `tel`) is its text;
//! - a tab in a code block is spaces to the next multiple of four columns.
//!
//! What a rendering can express decides the rest: in HTML mode (a Telegram text message) a
//! heading is bold, quotes do not nest, and a table is an aligned grid of its cells' text (no
//! formatting in a monospaced block).
//!
//! The HTML is cmark's output, so the reader is small: tags with quoted attributes, `&amp;`
//! `&lt;` `&gt;` `&quot;` and numeric references. Raw HTML the Markdown held passes through
//! into it; examples with raw HTML are checked differently (see `conformance.rs`).

use super::seen::{Builder, Fmt, Marker, Tok, url_key};

/// Which rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `assistant.rendering: "rich"`: Telegram rich messages.
    Rich,
    /// `assistant.rendering: "html"`: Telegram text messages with `parse_mode: HTML`.
    Html,
}

/// A documented choice that changed what an example shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    RawHtml,
    Image,
    LinkAsText,
    EmptyLinkText,
    TabInCode,
    EmptyCode,
    TableAsGrid,
    CodeInFormatting,
    EmailInText,
    GfmAutolink,
    NothingVisible,
    CommentRemoved,
}

impl Choice {
    pub fn describe(self) -> &'static str {
        match self {
            Choice::RawHtml => "raw HTML shown as written",
            Choice::CommentRemoved => {
                "HTML comment removed (pi's comments never show; text after one on its line is Markdown)"
            }
            Choice::Image => "image shown as a link (🖼 and its text)",
            Choice::LinkAsText => {
                "link Telegram cannot open (relative, anchor, other scheme) shown as its text"
            }
            Choice::TabInCode => "tab in code shown as spaces (4 columns)",
            Choice::EmptyLinkText => "link without text shows its address",
            Choice::EmptyCode => {
                "empty code block shows nothing (Telegram has no empty code block)"
            }
            Choice::TableAsGrid => "table cell formatting dropped in the aligned grid (HTML mode)",
            Choice::CodeInFormatting => {
                "code inside bold, italic or strike loses them (Telegram text messages cannot nest them)"
            }
            Choice::EmailInText => {
                "e-mail link in a text message: the address in it is linked by Telegram's own detection, or follows it (HTML mode)"
            }
            Choice::GfmAutolink => {
                "bare address shown as a link to itself (GFM's extended autolinks; pi writes GFM)"
            }
            Choice::NothingVisible => "answer that shows nothing says so and shows what pi wrote",
        }
    }
}

/// Whether Telegram opens `url` as a link in `mode`: the schemes the renderer documents. In
/// text messages Telegram links e-mail and `ftp://` addresses that are the link's text
/// itself; a `tel:` link there is its text.
pub fn opens(url: &str, mode: Mode) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    let schemes: &[&str] = match mode {
        Mode::Rich => &["http://", "https://", "ftp://", "tg:", "mailto:", "tel:"],
        Mode::Html => &["http://", "https://", "ftp://", "tg:", "mailto:"],
    };
    schemes
        .iter()
        .any(|s| lower.starts_with(s) && lower.len() > s.len())
        && !url.chars().any(char::is_whitespace)
}

/// The tokens of `html` in `mode`, and the choices that applied. `raw_html`: the Markdown
/// held raw HTML, so an `<img>` in the HTML may be one it wrote (shown as written, not as a
/// picture).
pub fn seen(html: &str, mode: Mode, raw_html: bool) -> (Vec<Tok>, Vec<Choice>) {
    let mut w = Walker {
        raw_html,
        mail: None,
        links: Vec::new(),
        heading: false,
        mode,
        b: Builder::default(),
        choices: Vec::new(),
        fmt: vec![Fmt::default()],
        lists: Vec::new(),
        pending_marker: None,
        pre: None,
        row: 0,
        col: 0,
        in_table: false,
        in_head: false,
        in_cell: false,
    };
    for token in tokenize(html) {
        w.token(token);
    }
    let mut choices = w.choices;
    choices.sort();
    choices.dedup();
    (w.b.finish(mode == Mode::Html), choices)
}

#[derive(Debug)]
enum Html {
    Open {
        name: String,
        attrs: Vec<(String, String)>,
    },
    Close(String),
    Text(String),
}

struct List {
    ordered: bool,
    next: u64,
}

struct Pre {
    lang: Option<String>,
    text: String,
}

struct Walker {
    raw_html: bool,
    /// In HTML mode, an e-mail link being read: its address and its text, shown at its end.
    mail: Option<(String, Vec<(char, Fmt)>)>,
    /// Open links: the address, and whether anything visible came in them yet.
    links: Vec<(String, bool)>,
    /// In a heading: a line break there is a space.
    heading: bool,
    mode: Mode,
    b: Builder,
    choices: Vec<Choice>,
    /// Formatting, innermost last.
    fmt: Vec<Fmt>,
    lists: Vec<List>,
    /// A list item's marker, written with its first content (a task box may come first).
    pending_marker: Option<Marker>,
    pre: Option<Pre>,
    row: usize,
    col: usize,
    in_table: bool,
    in_head: bool,
    /// In a table cell in HTML mode: monospaced grid text, no formatting.
    in_cell: bool,
}

impl Walker {
    fn cur(&self) -> Fmt {
        self.fmt.last().cloned().unwrap_or_default()
    }

    fn push_fmt(&mut self, f: impl FnOnce(&mut Fmt)) {
        let mut next = self.cur();
        f(&mut next);
        self.fmt.push(next);
    }

    fn pop_fmt(&mut self) {
        if self.fmt.len() > 1 {
            self.fmt.pop();
        }
    }

    fn flush_marker(&mut self) {
        if let Some(m) = self.pending_marker.take() {
            self.b.push(Tok::Marker(m));
        }
    }

    fn token(&mut self, t: Html) {
        if let Some(pre) = &mut self.pre {
            match t {
                Html::Text(s) => pre.text.push_str(&s),
                Html::Open { name, attrs } if name == "code" => {
                    pre.lang = attrs
                        .iter()
                        .find(|(k, _)| k == "class")
                        .and_then(|(_, v)| v.strip_prefix("language-"))
                        .map(str::to_owned);
                }
                Html::Close(name) if name == "pre" => self.end_pre(),
                _ => {}
            }
            return;
        }
        match t {
            Html::Text(s) => {
                if !s.trim().is_empty() {
                    self.flush_marker();
                    if let Some(l) = self.links.last_mut() {
                        l.1 = true;
                    }
                }
                let fmt = self.cur();
                let s = if self.heading {
                    s.replace('\n', " ")
                } else {
                    s
                };
                self.text(&s, &fmt);
            }
            Html::Open { name, attrs } => self.open(&name, &attrs),
            Html::Close(name) => self.close(&name),
        }
    }

    /// Running text. In a text message code cannot be inside bold, italic or strike.
    fn text(&mut self, s: &str, fmt: &Fmt) {
        if let Some((_, chars)) = &mut self.mail {
            chars.extend(s.chars().map(|c| (c, fmt.clone())));
            return;
        }
        if self.mode == Mode::Html && fmt.code && (fmt.bold || fmt.italic || fmt.strike) {
            self.choices.push(Choice::CodeInFormatting);
            let plain = Fmt {
                bold: false,
                italic: false,
                strike: false,
                ..fmt.clone()
            };
            self.b.text(s, &plain);
        } else {
            self.b.text(s, fmt);
        }
    }

    fn open(&mut self, name: &str, attrs: &[(String, String)]) {
        let attr = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        match name {
            "p" | "div" => self.b.brk(),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.flush_marker();
                self.b.brk();
                self.heading = true;
                let level = name[1..].parse().unwrap_or(1);
                let mode = self.mode;
                self.push_fmt(|f| match mode {
                    Mode::Rich => f.heading = Some(level),
                    Mode::Html => f.bold = true,
                });
            }
            "pre" => {
                self.flush_marker();
                self.pre = Some(Pre {
                    lang: None,
                    text: String::new(),
                });
            }
            "blockquote" => {
                self.flush_marker();
                self.b.brk();
                let mode = self.mode;
                self.push_fmt(|f| {
                    f.quote = match mode {
                        Mode::Rich => f.quote + 1,
                        Mode::Html => 1,
                    }
                });
            }
            "ul" | "ol" => {
                self.flush_marker();
                self.b.brk();
                self.lists.push(List {
                    ordered: name == "ol",
                    next: attr("start").and_then(|s| s.parse().ok()).unwrap_or(1),
                });
            }
            "li" => {
                self.flush_marker();
                self.b.brk();
                self.pending_marker = self.lists.last_mut().map(|l| {
                    if l.ordered {
                        l.next += 1;
                        Marker::Number(l.next - 1)
                    } else {
                        Marker::Bullet
                    }
                });
            }
            "input" if attr("type") == Some("checkbox") => {
                let done = attr("checked").is_some();
                match self.pending_marker.take() {
                    Some(Marker::Number(n)) => {
                        self.b.push(Tok::Marker(Marker::Number(n)));
                        self.b.push(Tok::Marker(Marker::Task(done)));
                    }
                    _ => self.b.push(Tok::Marker(Marker::Task(done))),
                }
            }
            "hr" => {
                self.flush_marker();
                self.b.push(Tok::Rule);
            }
            "br" if self.heading => self.b.text(" ", &Fmt::default()),
            "br" => self.b.brk(),
            "table" => {
                self.flush_marker();
                self.in_table = true;
                self.row = 0;
            }
            "thead" => self.in_head = true,
            "tbody" => self.in_head = false,
            "tr" => self.col = 0,
            "th" | "td" => {
                let head = self.in_head;
                self.b.push(Tok::Cell {
                    head: head && self.mode == Mode::Rich,
                    row: self.row,
                    col: self.col,
                });
                self.col += 1;
                self.in_cell = self.mode == Mode::Html;
                self.push_fmt(|_| {});
            }
            "em" | "strong" | "del" | "s" | "code" | "a" if self.in_cell => {
                self.choices.push(Choice::TableAsGrid);
                self.push_fmt(|_| {});
            }
            "em" => self.push_fmt(|f| f.italic = true),
            "strong" => self.push_fmt(|f| f.bold = true),
            "del" | "s" => self.push_fmt(|f| f.strike = true),
            "code" => self.push_fmt(|f| f.code = true),
            "a" if self.mode == Mode::Html
                && attr("href").is_some_and(|h| h.to_ascii_lowercase().starts_with("mailto:")) =>
            {
                let href = attr("href").unwrap_or_default();
                self.mail = Some((href["mailto:".len()..].to_owned(), Vec::new()));
                self.links.push((href.to_owned(), true));
                self.push_fmt(|_| {});
            }
            "a" => {
                let href = attr("href").unwrap_or_default().to_owned();
                self.links.push((href.clone(), false));
                if opens(&href, self.mode) {
                    self.push_fmt(|f| f.link = Some(url_key(&href)));
                } else {
                    self.choices.push(Choice::LinkAsText);
                    self.push_fmt(|_| {});
                }
            }
            "img" if self.raw_html => {}
            "img" => {
                self.flush_marker();
                if let Some(l) = self.links.last_mut() {
                    l.1 = true;
                }
                self.choices.push(Choice::Image);
                let src = attr("src").unwrap_or_default();
                let alt = attr("alt").unwrap_or_default();
                let text = format!("🖼 {}", if alt.is_empty() { src } else { alt });
                let mut fmt = self.cur();
                if opens(src, self.mode) && fmt.link.is_none() {
                    fmt.link = Some(url_key(src));
                } else if !opens(src, self.mode) {
                    self.choices.push(Choice::LinkAsText);
                }
                self.text(&text, &fmt);
            }
            // Raw HTML: its tags show nothing here.
            _ => {}
        }
    }

    fn close(&mut self, name: &str) {
        match name {
            "p" | "div" => self.b.brk(),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.heading = false;
                self.pop_fmt();
                self.b.brk();
            }
            "blockquote" => {
                self.flush_marker();
                self.pop_fmt();
                self.b.brk();
            }
            "ul" | "ol" => {
                self.flush_marker();
                self.lists.pop();
                self.b.brk();
            }
            "li" => {
                self.flush_marker();
                self.b.brk();
            }
            "table" => {
                self.in_table = false;
                self.b.brk();
            }
            "tr" if self.in_table => self.row += 1,
            "th" | "td" => {
                self.in_cell = false;
                self.pop_fmt();
            }
            "a" if self.mail.is_some() => {
                self.links.pop();
                self.pop_fmt();
                self.end_mail();
            }
            "a" => {
                // Nothing to click on: the address is the text.
                if let Some((href, false)) = self.links.pop() {
                    self.choices.push(Choice::EmptyLinkText);
                    let fmt = self.cur();
                    self.text(&href, &fmt);
                }
                self.pop_fmt();
            }
            "em" | "strong" | "del" | "s" | "code" => self.pop_fmt(),
            _ => {}
        }
    }

    /// An e-mail link in a text message: Telegram cannot take it as a link, so the renderer
    /// writes its text, and its address after it unless the text holds it; Telegram links an
    /// address it recognises.
    fn end_mail(&mut self) {
        let Some((address, mut chars)) = self.mail.take() else {
            return;
        };
        let text: String = chars.iter().map(|(c, _)| *c).collect();
        let lower = text.to_lowercase();
        let at = lower.find(&address.to_lowercase());
        if at.is_none() {
            let fmt = self.cur();
            chars.extend(format!(" ({address})").chars().map(|c| (c, fmt.clone())));
        }
        let shown: String = chars.iter().map(|(c, _)| *c).collect();
        let key = url_key(&format!("mailto:{address}"));
        let mut full_link = true;
        // Where Telegram finds the address in what is shown.
        let detected: Vec<(usize, usize)> = tg_model::entities::detect(&shown)
            .iter()
            .filter(|e| e["type"] == "email")
            .filter_map(|e| {
                Some((
                    e["offset"].as_u64()? as usize,
                    e["length"].as_u64()? as usize,
                ))
            })
            .collect();
        let mut unit = 0;
        for (c, f) in &mut chars {
            let linked = detected.iter().any(|(o, l)| unit >= *o && unit < o + l);
            if linked {
                f.link = Some(key.clone());
            } else {
                full_link = false;
            }
            unit += c.len_utf16();
        }
        if !full_link || at != Some(0) || text.len() != address.len() {
            self.choices.push(Choice::EmailInText);
        }
        let mut word = String::new();
        for (c, f) in chars {
            word.clear();
            word.push(c);
            self.b.text(&word, &f);
        }
    }

    fn end_pre(&mut self) {
        let Some(pre) = self.pre.take() else {
            return;
        };
        let mut text = pre.text;
        if text.ends_with('\n') {
            text.pop();
        }
        if text.contains('\t') {
            self.choices.push(Choice::TabInCode);
            text = expand_tabs(&text);
        }
        if text.trim().is_empty() {
            self.choices.push(Choice::EmptyCode);
            return;
        }
        let quote = self.cur().quote;
        self.b.push(Tok::Code {
            lang: pre.lang,
            text,
            quote,
        });
    }
}

/// Tabs as spaces to the next multiple of four columns.
fn expand_tabs(s: &str) -> String {
    let mut out = String::new();
    let mut col = 0;
    for c in s.chars() {
        match c {
            '\t' => {
                let n = 4 - col % 4;
                out.extend(std::iter::repeat_n(' ', n));
                col += n;
            }
            '\n' => {
                out.push('\n');
                col = 0;
            }
            _ => {
                out.push(c);
                col += 1;
            }
        }
    }
    out
}

/// cmark's HTML as tags and text (comments, processing instructions, declarations and CDATA
/// dropped: they show nothing).
fn tokenize(html: &str) -> Vec<Html> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        text.push_str(&rest[..i]);
        rest = &rest[i..];
        let skip = ["<!--", "<?", "<![CDATA[", "<!"]
            .iter()
            .zip(["-->", "?>", "]]>", ">"])
            .find(|(open, _)| rest.starts_with(**open));
        if let Some((_, close)) = skip {
            match rest.find(close) {
                Some(end) => rest = &rest[end + close.len()..],
                None => rest = "",
            }
            continue;
        }
        match tag(rest) {
            Some((t, len)) => {
                if !text.is_empty() {
                    out.push(Html::Text(decode(&std::mem::take(&mut text))));
                }
                out.push(t);
                rest = &rest[len..];
            }
            None => {
                text.push('<');
                rest = &rest[1..];
            }
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        out.push(Html::Text(decode(&text)));
    }
    out
}

/// A tag at the start of `s`, and its length.
fn tag(s: &str) -> Option<(Html, usize)> {
    let bytes = s.as_bytes();
    let mut i = 1;
    let closing = bytes.get(i) == Some(&b'/');
    if closing {
        i += 1;
    }
    let start = i;
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'-') {
        i += 1;
    }
    if i == start || !bytes[start].is_ascii_alphabetic() {
        return None;
    }
    let name = s[start..i].to_ascii_lowercase();
    let mut attrs = Vec::new();
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        match bytes.get(i)? {
            b'>' => {
                i += 1;
                break;
            }
            b'/' if bytes.get(i + 1) == Some(&b'>') => {
                i += 2;
                break;
            }
            _ => {}
        }
        let a = i;
        while i < bytes.len()
            && !matches!(bytes[i], b'=' | b'>' | b'/')
            && !bytes[i].is_ascii_whitespace()
        {
            i += 1;
        }
        if i == a {
            return None;
        }
        let key = s[a..i].to_ascii_lowercase();
        let mut value = String::new();
        if bytes.get(i) == Some(&b'=') {
            i += 1;
            match bytes.get(i)? {
                q @ (b'"' | b'\'') => {
                    let end = s[i + 1..].find(*q as char)? + i + 1;
                    value = decode(&s[i + 1..end]);
                    i = end + 1;
                }
                _ => {
                    let v = i;
                    while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'>' {
                        i += 1;
                    }
                    value = decode(&s[v..i]);
                }
            }
        }
        attrs.push((key, value));
    }
    let t = if closing {
        Html::Close(name)
    } else {
        Html::Open { name, attrs }
    };
    Some((t, i))
}

/// The references cmark writes; any other stays as written (raw HTML may hold them).
fn decode(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|e| *e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..end];
        let c = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            _ => name
                .strip_prefix("#x")
                .or_else(|| name.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                .map(|n| char::from_u32(n).filter(|_| n != 0).unwrap_or('\u{fffd}')),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}
