//! Placeholders inside split words: the grammar and the parsed form.
//!
//! Grammar of the text between `{` and the matching `}`:
//!
//! ```text
//! expr  := name [ "[" index "]" ] [ ":" type ] [ tail ]
//! name  := [A-Za-z_][A-Za-z0-9_]*
//! index := digits | name            (a name is looked up and must hold an integer)
//! type  := name [ "(" text ")" ]    (accepted and ignored: `{timeout:int=60000}`)
//! tail  := "=" default | "??" fallback | "?" yes [ ":" no ]
//! ```
//!
//! Text in braces that does not match this grammar is literal (`{}`, `awk '{print $1}'`).
//! A `{` written as `\{` never opens a placeholder.
//!
//! Resolution lives in [`crate::resolve`].

use crate::split::{Origin, RawWord};

/// How `{name[index]}` selects an item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Index {
    Literal(usize),
    Var(String),
}

/// What a placeholder does when its value is present or absent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `{name}`
    Required,
    /// `{name=default}`
    Default(String),
    /// `{name??fallback}`
    Fallback(String),
    /// `{name?yes:no}`
    Cond { yes: String, no: String },
}

/// One parsed placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Expr {
    pub(crate) name: String,
    pub(crate) index: Option<Index>,
    pub(crate) op: Op,
}

impl Expr {
    pub(crate) fn required(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            index: None,
            op: Op::Required,
        }
    }

    /// Whether this placeholder refers to `name`, directly or through a default that is itself
    /// a single placeholder.
    pub(crate) fn mentions(&self, name: &str) -> bool {
        if self.name == name || matches!(&self.index, Some(Index::Var(v)) if v == name) {
            return true;
        }
        let texts: Vec<&str> = match &self.op {
            Op::Required => vec![],
            Op::Default(t) | Op::Fallback(t) => vec![t],
            Op::Cond { yes, no } => vec![yes, no],
        };
        texts
            .into_iter()
            .any(|t| whole_placeholder(t).is_some_and(|e| e.mentions(name)))
    }
}

/// A piece of a word: literal text or a placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    Lit(String),
    Ph(Expr),
}

/// One command word, ready for substitution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    pub(crate) pieces: Vec<Piece>,
    /// The word is exactly one unquoted `{flag?yes:no}`: when it resolves to the empty string
    /// the word is dropped instead of becoming an empty argv item (optional flags).
    pub(crate) vanishing: bool,
    /// The word starts with an unquoted `~` followed by `/` or nothing.
    pub(crate) tilde: bool,
    /// Written without quotes or escapes.
    pub(crate) plain: bool,
}

impl Word {
    /// Builds a word from split characters, finding its placeholders.
    pub(crate) fn from_raw(raw: &RawWord) -> Self {
        let chars = &raw.chars;
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut i = 0;
        while i < chars.len() {
            let (c, origin) = chars[i];
            if c == '{'
                && origin != Origin::Escaped
                && let Some(close) = matching_close(chars, i)
            {
                let content: String = chars[i + 1..close].iter().map(|(c, _)| *c).collect();
                if let Some(expr) = parse_expr(&content) {
                    if !lit.is_empty() {
                        pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    pieces.push(Piece::Ph(expr));
                    i = close + 1;
                    continue;
                }
            }
            lit.push(c);
            i += 1;
        }
        if !lit.is_empty() || pieces.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        let all_plain = chars.iter().all(|(_, o)| *o == Origin::Plain);
        let vanishing = all_plain
            && matches!(
                pieces.as_slice(),
                [Piece::Ph(Expr {
                    op: Op::Cond { .. },
                    ..
                })]
            );
        let tilde = matches!(chars.first(), Some(('~', Origin::Plain)))
            && matches!(chars.get(1), None | Some(('/', _)));
        Self {
            pieces,
            vanishing,
            tilde,
            plain: all_plain,
        }
    }

    /// A word of plain text (for single-value fields such as `timeout` or `output`).
    pub(crate) fn from_plain(text: &str) -> Self {
        Self::from_raw(&RawWord::plain(text))
    }

    /// A word that is exactly `{name}`.
    pub(crate) fn placeholder(name: &str) -> Self {
        Self {
            pieces: vec![Piece::Ph(Expr::required(name))],
            vanishing: false,
            tilde: false,
            plain: true,
        }
    }

    /// The word's text when it has no placeholders.
    pub(crate) fn literal(&self) -> Option<String> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(s) => out.push_str(s),
                Piece::Ph(_) => return None,
            }
        }
        Some(out)
    }

    /// Whether the word contains at least one placeholder.
    pub(crate) fn has_placeholder(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Ph(_)))
    }

    /// Whether any placeholder of the word refers to `name`.
    pub(crate) fn mentions(&self, name: &str) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Ph(e) if e.mentions(name)))
    }

    /// The word as written, for diagnostics.
    pub(crate) fn display(&self) -> String {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Lit(s) => s.clone(),
                Piece::Ph(e) => format!("{{{}}}", e.name),
            })
            .collect()
    }
}

/// Index of the `}` matching the `{` at `open`, counting unescaped braces.
fn matching_close(chars: &[(char, Origin)], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, (c, origin)) in chars.iter().enumerate().skip(open) {
        if *origin == Origin::Escaped {
            continue;
        }
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// The placeholder when `text` is exactly one `{...}` expression.
pub(crate) fn whole_placeholder(text: &str) -> Option<Expr> {
    let raw = RawWord::plain(text);
    if raw.chars.first().map(|(c, _)| *c) != Some('{') {
        return None;
    }
    let close = matching_close(&raw.chars, 0)?;
    if close + 1 != raw.chars.len() {
        return None;
    }
    let inner = text.get(1..text.len() - 1)?;
    parse_expr(inner)
}

/// Whether `s` is a placeholder / declaration name.
pub(crate) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Length in bytes of the name at the start of `s` (0 when `s` does not start with one).
fn name_len(s: &str) -> usize {
    let mut len = 0;
    for (i, c) in s.char_indices() {
        let ok = if i == 0 {
            c.is_ascii_alphabetic() || c == '_'
        } else {
            c.is_ascii_alphanumeric() || c == '_'
        };
        if !ok {
            break;
        }
        len = i + c.len_utf8();
    }
    len
}

/// Length in bytes of a type annotation (`int`, `enum(check,fix)`) at the start of `s`.
pub(crate) fn type_len(s: &str) -> Option<usize> {
    let n = name_len(s);
    if n == 0 {
        return None;
    }
    let rest = &s[n..];
    if let Some(after) = rest.strip_prefix('(') {
        let close = after.find(')')?;
        if after[..close].contains('(') {
            return None;
        }
        Some(n + 1 + close + 1)
    } else {
        Some(n)
    }
}

/// Parses the text between the braces of a placeholder.
pub(crate) fn parse_expr(content: &str) -> Option<Expr> {
    let n = name_len(content);
    if n == 0 {
        return None;
    }
    let name = content[..n].to_owned();
    let mut rest = &content[n..];
    let mut index = None;
    if let Some(after) = rest.strip_prefix('[') {
        let close = after.find(']')?;
        let ix = &after[..close];
        index = Some(
            if !ix.is_empty() && ix.bytes().all(|b| b.is_ascii_digit()) {
                Index::Literal(ix.parse().ok()?)
            } else if is_name(ix) {
                Index::Var(ix.to_owned())
            } else {
                return None;
            },
        );
        rest = &after[close + 1..];
    }
    if let Some(after) = rest.strip_prefix(':') {
        rest = &after[type_len(after)?..];
    }
    let op = if rest.is_empty() {
        Op::Required
    } else if let Some(d) = rest.strip_prefix('=') {
        Op::Default(d.to_owned())
    } else if let Some(f) = rest.strip_prefix("??") {
        Op::Fallback(f.to_owned())
    } else if let Some(branches) = rest.strip_prefix('?') {
        let (yes, no) = split_branches(branches);
        Op::Cond { yes, no }
    } else {
        return None;
    };
    Some(Expr { name, index, op })
}

/// Splits `yes:no` at the first `:` outside braces; without a `:`, `no` is empty.
fn split_branches(s: &str) -> (String, String) {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ':' if depth == 0 => return (s[..i].to_owned(), s[i + 1..].to_owned()),
            _ => {}
        }
    }
    (s.to_owned(), String::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::split;

    fn word(s: &str) -> Word {
        let raw = split(s).expect("split");
        assert_eq!(raw.len(), 1, "{s:?} is one word");
        Word::from_raw(&raw[0])
    }

    #[test]
    fn expr_grammar() {
        let e = parse_expr("name").expect("name");
        assert_eq!((e.name.as_str(), &e.op), ("name", &Op::Required));
        assert_eq!(
            parse_expr("lang=ru").map(|e| e.op),
            Some(Op::Default("ru".into()))
        );
        assert_eq!(
            parse_expr("x=").map(|e| e.op),
            Some(Op::Default(String::new()))
        );
        assert_eq!(
            parse_expr("v??fb").map(|e| e.op),
            Some(Op::Fallback("fb".into()))
        );
        assert_eq!(
            parse_expr("f?yes:no").map(|e| e.op),
            Some(Op::Cond {
                yes: "yes".into(),
                no: "no".into()
            })
        );
        assert_eq!(
            parse_expr("f?--v").map(|e| e.op),
            Some(Op::Cond {
                yes: "--v".into(),
                no: String::new()
            })
        );
        assert_eq!(
            parse_expr("items[2]").and_then(|e| e.index),
            Some(Index::Literal(2))
        );
        assert_eq!(
            parse_expr("items[i]").and_then(|e| e.index),
            Some(Index::Var("i".into()))
        );
        let typed = parse_expr("mode:enum(check,fix)=check").expect("typed");
        assert_eq!(
            (typed.name.as_str(), typed.op),
            ("mode", Op::Default("check".into()))
        );
        assert_eq!(
            parse_expr("timeout:int=60000").map(|e| e.op),
            Some(Op::Default("60000".into()))
        );
        for not in [
            "",
            " x",
            "print $1",
            "1abc",
            "a b",
            "a[",
            "a[-1]",
            "a:",
            "x+1",
            "_(index+1)",
        ] {
            assert_eq!(parse_expr(not), None, "{not:?}");
        }
    }

    #[test]
    fn words_find_placeholders() {
        let w = word("--file={file}");
        assert_eq!(
            w.pieces,
            vec![
                Piece::Lit("--file=".into()),
                Piece::Ph(Expr::required("file"))
            ]
        );
        assert_eq!(word("{}").literal().as_deref(), Some("{}"));
        assert_eq!(
            word("'{print $1}'").literal().as_deref(),
            Some("{print $1}")
        );
        assert_eq!(word("\\{name}").literal().as_deref(), Some("{name}"));
        assert_eq!(word("\"\\{name}\"").literal().as_deref(), Some("{name}"));
        assert!(word("'{name}'").has_placeholder());
        assert!(word("{f?-v:}").vanishing);
        assert!(!word("'{f?-v:}'").vanishing);
        assert!(!word("{f}").vanishing);
        assert!(word("~").tilde && word("~/bin/x").tilde);
        assert!(!word("~user").tilde && !word("'~'/x").tilde && !word("a~").tilde);
    }
}
