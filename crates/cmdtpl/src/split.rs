//! Shell-like word splitting without a shell.
//!
//! Rules (a deliberately small subset of POSIX `sh`):
//! - unquoted spaces, tabs and newlines separate words;
//! - `'...'` keeps everything literally up to the next `'` (no escapes inside);
//! - `"..."` keeps everything literally except `\"`, `\\`, `\{`, `\}`, `\$` and `` \` ``,
//!   which drop the backslash; any other backslash inside double quotes stays as written;
//! - outside quotes, `\x` is the character `x` for any `x`;
//! - a backslash before a newline joins the lines (both characters disappear);
//! - `''` and `""` make an empty word; quotes next to other text join it (`a'b c'd` is one word).
//!
//! `|`, `>`, `&&`, `;`, `$VAR`, globs and `#` have no meaning: they are ordinary characters.
//! Every character remembers whether it was written plainly, inside quotes, or escaped with a
//! backslash, because placeholders and `~` care: an escaped `\{` never opens a placeholder, `~`
//! is only expanded when written plainly, and only a plain conditional placeholder may vanish.

/// How a character of a word was written in the template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Outside any quotes, not escaped.
    Plain,
    /// Inside single or double quotes.
    Quoted,
    /// Produced by a backslash escape.
    Escaped,
}

/// One word after splitting and unquoting, before placeholder substitution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RawWord {
    pub(crate) chars: Vec<(char, Origin)>,
}

impl RawWord {
    /// A word made of plain characters (used for single-value fields such as `timeout`).
    pub(crate) fn plain(text: &str) -> Self {
        Self {
            chars: text.chars().map(|c| (c, Origin::Plain)).collect(),
        }
    }

    /// The word's text, origins dropped.
    #[cfg(test)]
    pub(crate) fn text(&self) -> String {
        self.chars.iter().map(|(c, _)| *c).collect()
    }
}

/// Why a template string could not be split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SplitError {
    /// A quote was opened and never closed; the quote character.
    UnterminatedQuote(char),
    /// The template ends with a lone backslash.
    TrailingBackslash,
}

/// Splits `template` into words.
pub(crate) fn split(template: &str) -> Result<Vec<RawWord>, SplitError> {
    let mut words = Vec::new();
    let mut cur = RawWord::default();
    // A word exists once any character or quote pair was seen, so `''` yields an empty word.
    let mut in_word = false;
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => cur.chars.push((q, Origin::Quoted)),
                        None => return Err(SplitError::UnterminatedQuote('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek().copied() {
                            Some(e @ ('"' | '\\' | '{' | '}' | '$' | '`')) => {
                                chars.next();
                                cur.chars.push((e, Origin::Escaped));
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            Some(_) => cur.chars.push(('\\', Origin::Quoted)),
                            None => return Err(SplitError::UnterminatedQuote('"')),
                        },
                        Some(q) => cur.chars.push((q, Origin::Quoted)),
                        None => return Err(SplitError::UnterminatedQuote('"')),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(e) => {
                    in_word = true;
                    cur.chars.push((e, Origin::Escaped));
                }
                None => return Err(SplitError::TrailingBackslash),
            },
            other => {
                in_word = true;
                cur.chars.push((other, Origin::Plain));
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<String> {
        match split(s) {
            Ok(words) => words.iter().map(RawWord::text).collect(),
            Err(e) => panic!("split({s:?}) failed: {e:?}"),
        }
    }

    #[test]
    fn split_table() {
        let table: &[(&str, &[&str])] = &[
            ("", &[]),
            ("   ", &[]),
            ("echo", &["echo"]),
            ("echo hi there", &["echo", "hi", "there"]),
            ("  echo \t hi\n", &["echo", "hi"]),
            ("echo 'a b' c", &["echo", "a b", "c"]),
            ("echo \"a b\" c", &["echo", "a b", "c"]),
            ("echo a\\ b", &["echo", "a b"]),
            ("echo ''", &["echo", ""]),
            ("echo \"\" x", &["echo", "", "x"]),
            ("echo a'b c'd", &["echo", "ab cd"]),
            ("echo 'it'\\''s'", &["echo", "it's"]),
            ("echo \"say \\\"hi\\\"\"", &["echo", "say \"hi\""]),
            ("echo \"a\\\\b\"", &["echo", "a\\b"]),
            ("echo \"C:\\dir\"", &["echo", "C:\\dir"]),
            ("echo 'no \\escape'", &["echo", "no \\escape"]),
            ("echo \\'", &["echo", "'"]),
            ("a \\\n b", &["a", "b"]),
            (
                "echo a|b > c && d; $HOME #x",
                &["echo", "a|b", ">", "c", "&&", "d;", "$HOME", "#x"],
            ),
            ("--text \"{text}\"", &["--text", "{text}"]),
            ("ünï 'cödé'", &["ünï", "cödé"]),
        ];
        for (input, want) in table {
            assert_eq!(texts(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn split_errors() {
        assert_eq!(split("echo 'x"), Err(SplitError::UnterminatedQuote('\'')));
        assert_eq!(split("echo \"x"), Err(SplitError::UnterminatedQuote('"')));
        assert_eq!(split("echo \"x\\"), Err(SplitError::UnterminatedQuote('"')));
        assert_eq!(split("echo x\\"), Err(SplitError::TrailingBackslash));
    }

    #[test]
    fn split_origins() {
        let words = split("a'b'\\c\"d\"").unwrap_or_default();
        assert_eq!(words.len(), 1);
        let origins: Vec<Origin> = words[0].chars.iter().map(|(_, o)| *o).collect();
        assert_eq!(
            origins,
            [
                Origin::Plain,
                Origin::Quoted,
                Origin::Escaped,
                Origin::Quoted
            ]
        );
    }
}
