//! Line framing: one JSON object per `\n`-terminated line, at most [`MAX_LINE`] bytes, split on
//! `\n` only (never on U+2028/2029), an optional `\r` before the `\n` ignored.

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
            return String::from_utf8(std::mem::take(&mut self.buf))
                .map(Some)
                .map_err(|_| LineError::NotUtf8);
        }
    }
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
}
