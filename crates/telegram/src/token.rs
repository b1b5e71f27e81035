//! The bot token: a secret that must never reach logs, status output or error messages.

use std::fmt;

/// A bot token. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

/// Why a string is not a bot token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Empty input.
    #[error("the bot token is empty")]
    Empty,
    /// Not `<digits>:<secret>`.
    #[error(
        "a bot token looks like 123456789:AA...; this one does not (it must be <bot id>:<secret>)"
    )]
    Malformed,
}

impl Token {
    /// Checks the shape `<bot id>:<secret>` (the secret has no whitespace or `/`).
    pub fn new(raw: &str) -> Result<Self, TokenError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(TokenError::Empty);
        }
        let (id, secret) = raw.split_once(':').ok_or(TokenError::Malformed)?;
        let id_ok = !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit());
        let secret_ok = !secret.is_empty()
            && secret
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'?' && b != b'#');
        if !(id_ok && secret_ok) {
            return Err(TokenError::Malformed);
        }
        Ok(Self(raw.to_owned()))
    }

    /// The bot's user id (the part before `:`).
    pub fn bot_id(&self) -> i64 {
        self.0
            .split(':')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// The secret itself, for the URL and for writing the config file. Nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({}:<redacted>)", self.bot_id())
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:<redacted>", self.bot_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_and_redaction() {
        let t = Token::new(" 123456:ABC-def_ghi ").map_err(|e| e.to_string());
        let t = match t {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(t.bot_id(), 123456);
        assert_eq!(
            format!("{t} {t:?}"),
            "123456:<redacted> Token(123456:<redacted>)"
        );
        assert_eq!(t.expose(), "123456:ABC-def_ghi");
        for bad in ["abc", "12:", ":x", "1a:b", "12:a b", "12:a/b"] {
            assert_eq!(Token::new(bad), Err(TokenError::Malformed), "{bad}");
        }
        assert_eq!(Token::new("  "), Err(TokenError::Empty));
    }
}
