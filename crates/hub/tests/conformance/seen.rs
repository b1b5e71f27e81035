//! What a person sees, in a form both sides can be brought to: the spec's HTML and what
//! Telegram shows of the hub's messages. Words (runs of characters that are not whitespace),
//! each character with its formatting; breaks between lines and blocks; code blocks with their
//! text as it is; rules; list markers; table cells.
//!
//! Whitespace inside a line is not compared (HTML collapses it, and so does the eye); where
//! lines break is, but not whether the break is a paragraph's or a line's (a chat shows a
//! Markdown soft break as a new line, a deliberate choice).

use std::fmt;

/// How a character is formatted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fmt {
    pub bold: bool,
    pub italic: bool,
    pub strike: bool,
    pub code: bool,
    /// A link's target (percent-decoded, so that `%20` and ` ` compare equal).
    pub link: Option<String>,
    /// A heading's level.
    pub heading: Option<u8>,
    /// Block quotes around it.
    pub quote: u8,
}

impl fmt::Display for Fmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.bold {
            parts.push("b".to_owned());
        }
        if self.italic {
            parts.push("i".to_owned());
        }
        if self.strike {
            parts.push("s".to_owned());
        }
        if self.code {
            parts.push("code".to_owned());
        }
        if let Some(l) = &self.link {
            parts.push(format!("link={l}"));
        }
        if let Some(h) = self.heading {
            parts.push(format!("h{h}"));
        }
        if self.quote > 0 {
            parts.push(format!("quote{}", self.quote));
        }
        write!(f, "{}", parts.join(","))
    }
}

/// A list item's marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    Bullet,
    Number(u64),
    /// A task list item, and whether it is done.
    Task(bool),
}

/// One thing seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Word(Vec<(char, Fmt)>),
    Break,
    Code {
        lang: Option<String>,
        text: String,
        quote: u8,
    },
    Rule,
    Marker(Marker),
    Cell {
        head: bool,
        row: usize,
        col: usize,
    },
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(chars) => {
                // Runs of one format, `text{fmt}`.
                let mut i = 0;
                while i < chars.len() {
                    let fmt = &chars[i].1;
                    let mut j = i;
                    let mut s = String::new();
                    while j < chars.len() && &chars[j].1 == fmt {
                        s.push(chars[j].0);
                        j += 1;
                    }
                    let shown = fmt.to_string();
                    if shown.is_empty() {
                        write!(f, "{s:?}")?;
                    } else {
                        write!(f, "{s:?}{{{shown}}}")?;
                    }
                    i = j;
                }
                Ok(())
            }
            Tok::Break => write!(f, "⏎"),
            Tok::Code { lang, text, quote } => write!(
                f,
                "code[{}{}]{text:?}",
                lang.as_deref().unwrap_or(""),
                if *quote > 0 { ",quote" } else { "" }
            ),
            Tok::Rule => write!(f, "rule"),
            Tok::Marker(m) => write!(f, "marker:{m:?}"),
            Tok::Cell { head, row, col } => {
                write!(f, "cell{}({row},{col})", if *head { "h" } else { "" })
            }
        }
    }
}

/// Builds the tokens from a stream of characters and structure.
#[derive(Default)]
pub struct Builder {
    toks: Vec<Tok>,
    word: Vec<(char, Fmt)>,
    /// A word that is a thematic break (the renderer's rule in a text message).
    pub rule: Option<&'static str>,
}

impl Builder {
    /// A character of running text.
    pub fn ch(&mut self, c: char, fmt: &Fmt) {
        if c == '\n' {
            self.brk();
        } else if c.is_whitespace() {
            self.end_word();
        } else {
            self.word.push((c, fmt.clone()));
        }
    }

    pub fn text(&mut self, s: &str, fmt: &Fmt) {
        for c in s.chars() {
            self.ch(c, fmt);
        }
    }

    pub fn brk(&mut self) {
        self.push(Tok::Break);
    }

    pub fn push(&mut self, t: Tok) {
        self.end_word();
        self.toks.push(t);
    }

    fn end_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        let word = std::mem::take(&mut self.word);
        let is_rule = self.rule.is_some_and(|r| {
            word.iter().all(|(_, f)| *f == Fmt::default())
                && word.iter().map(|(c, _)| *c).eq(r.chars())
        });
        self.toks
            .push(if is_rule { Tok::Rule } else { Tok::Word(word) });
    }

    /// The tokens. `markers`: list markers are text at the start of a line (a text message
    /// has no lists), so a line's first word that looks like one is one, on either side.
    pub fn finish(mut self, markers: bool) -> Vec<Tok> {
        self.end_word();
        let toks = if markers {
            markerize(self.toks)
        } else {
            self.toks
        };
        normalize(toks)
    }
}

/// A word that starts a line and reads as a list marker (`•`, `◦`, `▪`, `☑`, `☐`, `12.`)
/// becomes one. A marker may follow a marker (`1. ☑`).
fn markerize(toks: Vec<Tok>) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    for t in toks {
        let line_start = matches!(out.last(), None | Some(Tok::Break | Tok::Marker(_)));
        if let (true, Tok::Word(w)) = (line_start, &t)
            && let Some(m) = marker_of(w)
        {
            out.push(Tok::Marker(m));
            continue;
        }
        out.push(t);
    }
    out
}

fn marker_of(w: &[(char, Fmt)]) -> Option<Marker> {
    if w.iter().any(|(_, f)| {
        *f != Fmt {
            quote: f.quote,
            ..Fmt::default()
        }
    }) {
        return None;
    }
    let s: String = w.iter().map(|(c, _)| *c).collect();
    match s.as_str() {
        "•" | "◦" | "▪" => Some(Marker::Bullet),
        "☑" => Some(Marker::Task(true)),
        "☐" => Some(Marker::Task(false)),
        _ => {
            let digits = s.strip_suffix('.')?;
            if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            digits.parse().ok().map(Marker::Number)
        }
    }
}

/// Breaks collapsed; none at the ends, none next to a block that is its own line (code, a
/// rule, a table cell), none right after a list marker.
fn normalize(toks: Vec<Tok>) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    for t in toks {
        let is_break = t == Tok::Break;
        if is_break {
            match out.last() {
                None | Some(Tok::Break) => continue,
                Some(Tok::Code { .. } | Tok::Rule | Tok::Cell { .. } | Tok::Marker(_)) => {
                    continue;
                }
                _ => {}
            }
        }
        if matches!(t, Tok::Code { .. } | Tok::Rule | Tok::Cell { .. })
            && out.last() == Some(&Tok::Break)
        {
            out.pop();
        }
        // Spaces at the end of a code line and blank lines at the end of a block show nothing.
        let t = match t {
            Tok::Code { lang, text, quote } => Tok::Code {
                lang,
                text: text
                    .split('\n')
                    .map(str::trim_end)
                    .collect::<Vec<_>>()
                    .join("\n")
                    .trim_end_matches('\n')
                    .to_owned(),
                quote,
            },
            t => t,
        };
        out.push(t);
    }
    while out.last() == Some(&Tok::Break) {
        out.pop();
    }
    out
}

/// An address as what it means: `%XX` decoded, the scheme and an `http`/`https`/`ftp` host in
/// lower case, `/` as the path of such an address without one (`https://a.com#x` and
/// `https://a.com/#x` are one address, as a browser reads them).
pub fn url_key(s: &str) -> String {
    let d = percent_decode(s.trim());
    let Some(colon) = d.find(':') else {
        return d;
    };
    let scheme = d[..colon].to_ascii_lowercase();
    let rest = &d[colon..];
    if !matches!(scheme.as_str(), "http" | "https" | "ftp") {
        return format!("{scheme}{rest}");
    }
    let Some(after) = rest.strip_prefix("://") else {
        return format!("{scheme}{rest}");
    };
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (host, path) = after.split_at(end);
    let slash = if path.starts_with('/') { "" } else { "/" };
    format!("{scheme}://{}{slash}{path}", host.to_lowercase())
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `toks` with every link that leads to its own text (`https://a.b`, `www.a.b` to
/// `http://www.a.b`, `a@b.c` to `mailto:a@b.c`) made plain text.
pub fn without_self_links(toks: &[Tok]) -> Vec<Tok> {
    toks.iter()
        .map(|t| match t {
            Tok::Word(w) => {
                let mut w = w.clone();
                let mut i = 0;
                while i < w.len() {
                    let Some(link) = w[i].1.link.clone() else {
                        i += 1;
                        continue;
                    };
                    let mut j = i;
                    while j < w.len() && w[j].1.link.as_ref() == Some(&link) {
                        j += 1;
                    }
                    let text: String = w[i..j].iter().map(|(c, _)| *c).collect();
                    let own = [
                        text.clone(),
                        format!("http://{text}"),
                        format!("mailto:{text}"),
                    ]
                    .iter()
                    .any(|t| url_key(t) == link);
                    if own {
                        for c in &mut w[i..j] {
                            c.1.link = None;
                        }
                    }
                    i = j;
                }
                Tok::Word(w)
            }
            t => t.clone(),
        })
        .collect()
}

/// The visible characters of `toks`, whitespace left out (for checks that only ask whether
/// nothing was lost).
pub fn visible_chars(toks: &[Tok]) -> Vec<char> {
    let mut out = Vec::new();
    for t in toks {
        match t {
            Tok::Word(w) => out.extend(w.iter().map(|(c, _)| *c)),
            Tok::Code { text, .. } => out.extend(text.chars().filter(|c| !c.is_whitespace())),
            _ => {}
        }
    }
    out
}

/// Whether `needle` appears in `hay` in order (not necessarily together).
pub fn is_subsequence(needle: &[char], hay: &[char]) -> bool {
    let mut it = hay.iter();
    needle.iter().all(|c| it.any(|h| h == c))
}

/// Both token lists, one per line, side by side where they differ.
pub fn diff(expected: &[Tok], seen: &[Tok]) -> String {
    let mut out = String::new();
    let n = expected.len().max(seen.len());
    let first = (0..n)
        .find(|&i| expected.get(i) != seen.get(i))
        .unwrap_or(n);
    let from = first.saturating_sub(2);
    for i in from..n.min(first + 6) {
        let e = expected.get(i).map_or("-".to_owned(), ToString::to_string);
        let s = seen.get(i).map_or("-".to_owned(), ToString::to_string);
        let mark = if expected.get(i) == seen.get(i) {
            " "
        } else {
            "≠"
        };
        out.push_str(&format!("    {mark} {e:<50} | {s}\n"));
    }
    out
}
