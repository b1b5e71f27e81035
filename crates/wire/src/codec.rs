//! Line framing: one JSON object per `\n`-terminated line, at most [`MAX_LINE`] bytes, split on
//! `\n` only (never on U+2028/2029), an optional `\r` before the `\n` ignored. Lines are read
//! leniently: a lone UTF-16 surrogate escape becomes U+FFFD ([`repair_surrogates`]).

use std::borrow::Cow;

use serde::Serialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Longest line either side accepts.
pub const MAX_LINE: usize = 1 << 20;

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// The peer sent more than the limit without a newline.
    #[error("line longer than {0} bytes")]
    TooLong(usize),
    /// Not UTF-8.
    #[error("line is not UTF-8")]
    NotUtf8,
    /// The connection failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads lines with a size limit.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: R,
    max: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader with the default limit.
    pub fn new(reader: R) -> Self {
        Self::with_limit(reader, MAX_LINE)
    }

    /// A reader with `max` bytes per line.
    pub fn with_limit(reader: R, max: usize) -> Self {
        Self {
            reader,
            max,
            buf: Vec::new(),
        }
    }

    /// The next non-empty line, `None` at end of stream. A partial last line is returned too.
    pub async fn next_line(&mut self) -> Result<Option<String>, LineError> {
        loop {
            self.buf.clear();
            let mut eof = false;
            loop {
                let available = self.reader.fill_buf().await?;
                if available.is_empty() {
                    eof = true;
                    break;
                }
                match available.iter().position(|b| *b == b'\n') {
                    Some(i) => {
                        if self.buf.len() + i > self.max {
                            return Err(LineError::TooLong(self.max));
                        }
                        self.buf.extend_from_slice(&available[..i]);
                        self.reader.consume(i + 1);
                        break;
                    }
                    None => {
                        let n = available.len();
                        if self.buf.len() + n > self.max {
                            return Err(LineError::TooLong(self.max));
                        }
                        self.buf.extend_from_slice(available);
                        self.reader.consume(n);
                    }
                }
            }
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                if eof {
                    return Ok(None);
                }
                continue;
            }
            let line =
                String::from_utf8(std::mem::take(&mut self.buf)).map_err(|_| LineError::NotUtf8)?;
            return Ok(Some(match repair_surrogates(&line) {
                Cow::Borrowed(_) => line,
                Cow::Owned(repaired) => repaired,
            }));
        }
    }
}

/// `line` with every lone UTF-16 surrogate escape (`\ud800` without its other half, a low half
/// without a high one before it) replaced by `\ufffd`; a pair stays the character it encodes.
///
/// JavaScript strings are UTF-16 and may hold half a character (a provider that streams an
/// emoji's two halves in separate chunks, a string cut at a length), and `JSON.stringify` writes
/// such a half as an escape. serde_json refuses it, and the line with it would be lost, or
/// worse, refused every time it is sent again (a hello's `completed_turns`).
pub fn repair_surrogates(line: &str) -> Cow<'_, str> {
    if !line.contains("\\u") {
        return Cow::Borrowed(line);
    }
    let bytes = line.as_bytes();
    let unit_at = |i: usize| -> Option<u16> {
        let escape = bytes.get(i..i + 6)?;
        if escape[0] != b'\\' || escape[1] != b'u' {
            return None;
        }
        escape[2..].iter().try_fold(0u16, |unit, b| {
            Some((unit << 4) | (*b as char).to_digit(16)? as u16)
        })
    };
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = unit_at(i) else {
            // Another escape (`\\` included: what follows it is text), or a broken one that
            // the JSON reader reports.
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                if unit_at(i + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            out.push_str(&line[copied..i]);
            out.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    if copied == 0 {
        return Cow::Borrowed(line);
    }
    out.push_str(&line[copied..]);
    Cow::Owned(out)
}

/// One message as a line (with its `\n`).
pub fn encode<T: Serialize>(msg: &T) -> String {
    // Serializing our own message types cannot fail (no maps with non-string keys).
    let mut line = serde_json::to_string(msg).unwrap_or_else(|_| "{}".to_owned());
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_on_newline_only_and_enforces_the_limit() {
        let input = "{\"a\":\"x\u{2028}y\"}\r\n\n{\"b\":1}\n{\"partial\":true}".as_bytes();
        let mut r = LineReader::new(tokio::io::BufReader::new(input));
        let mut lines = Vec::new();
        while let Some(l) = r
            .next_line()
            .await
            .map_err(|e| e.to_string())
            .unwrap_or(None)
        {
            lines.push(l);
        }
        assert_eq!(
            lines,
            vec!["{\"a\":\"x\u{2028}y\"}", "{\"b\":1}", "{\"partial\":true}"]
        );
        let long = format!("{}\n", "x".repeat(100));
        let mut r =
            LineReader::with_limit(tokio::io::BufReader::with_capacity(16, long.as_bytes()), 50);
        assert!(matches!(r.next_line().await, Err(LineError::TooLong(50))));
    }

    /// What serde_json makes of `line` after the repair (`{"t": ...}`).
    fn text_of(line: &str) -> Result<String, String> {
        let v: serde_json::Value =
            serde_json::from_str(&repair_surrogates(line)).map_err(|e| e.to_string())?;
        v["t"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "no t".into())
    }

    #[test]
    fn lone_surrogates_become_replacement_characters_and_pairs_stay() {
        // serde_json alone refuses a lone half.
        assert!(serde_json::from_str::<serde_json::Value>(r#"{"t":"a\ud800b"}"#).is_err());
        assert_eq!(
            text_of(r#"{"t":"a\ud800b"}"#),
            Ok("a\u{FFFD}b".into()),
            "lone high"
        );
        assert_eq!(
            text_of(r#"{"t":"a\uDC00b"}"#),
            Ok("a\u{FFFD}b".into()),
            "lone low"
        );
        assert_eq!(
            text_of(r#"{"t":"\ude00\ud83d"}"#),
            Ok("\u{FFFD}\u{FFFD}".into()),
            "a reversed pair"
        );
        assert_eq!(
            text_of(r#"{"t":"x\ud83d"}"#),
            Ok("x\u{FFFD}".into()),
            "high at the end"
        );
        assert_eq!(
            text_of(r#"{"t":"\ud83d\ud83d\ude00"}"#),
            Ok("\u{FFFD}😀".into()),
            "a high half, then a pair"
        );
        assert_eq!(
            text_of(r#"{"t":"\ud83d\ude00"}"#),
            Ok("😀".into()),
            "a pair"
        );
        assert_eq!(text_of(r#"{"t":"\uD83D\uDE00 \u00e9"}"#), Ok("😀 é".into()));
        // An escaped backslash: what follows is text, not an escape.
        assert_eq!(text_of(r#"{"t":"\\ud800"}"#), Ok("\\ud800".into()));
        assert_eq!(text_of(r#"{"t":"\\\ud800"}"#), Ok("\\\u{FFFD}".into()));
        assert!(matches!(
            repair_surrogates(r#"{"t":"\\ud800 \ud83d\ude00 \n"}"#),
            Cow::Borrowed(_)
        ));
        // Broken escapes are left for the JSON reader to refuse.
        assert!(text_of(r#"{"t":"\ud8"}"#).is_err());
        assert!(text_of(r#"{"t":"\u+800"}"#).is_err());
    }

    #[tokio::test]
    async fn the_reader_repairs_what_it_reads() {
        let input = "{\"t\":\"\\ud800\"}\n{\"t\":\"ok\"}\n".as_bytes();
        let mut r = LineReader::new(tokio::io::BufReader::new(input));
        let first = r.next_line().await.map_err(|e| e.to_string());
        assert_eq!(first, Ok(Some("{\"t\":\"\\ufffd\"}".to_owned())));
        let second = r.next_line().await.map_err(|e| e.to_string());
        assert_eq!(second, Ok(Some("{\"t\":\"ok\"}".to_owned())));
    }
}
