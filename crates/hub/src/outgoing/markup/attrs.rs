//! The HTML-like attribute payload: `name="value"` pairs separated by whitespace.
//!
//! Values are double-quoted and taken literally: there are no escapes or entities, so a value
//! cannot contain `"`, and control characters (line breaks included) are refused; such text
//! belongs in the JSON form. Whitespace is allowed around `=`. Names the caller does not know
//! are skipped (their syntax is still checked); a known name given twice is refused.

/// Why an attribute payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeError {
    /// Something other than an attribute name where one was expected (a bare word list, say).
    #[error("expected an attribute name at byte {at}")]
    ExpectedName {
        /// Byte offset in the payload.
        at: usize,
    },
    /// A name with no `=` after it.
    #[error("attribute `{name}` has no value")]
    MissingValue {
        /// The attribute.
        name: String,
    },
    /// `name='value'`.
    #[error("attribute `{name}` is single-quoted (only double quotes are accepted)")]
    SingleQuoted {
        /// The attribute.
        name: String,
    },
    /// `name=value`.
    #[error("attribute `{name}` is unquoted (only double quotes are accepted)")]
    Unquoted {
        /// The attribute.
        name: String,
    },
    /// `name="value` with no closing quote.
    #[error("attribute `{name}` has no closing quote")]
    Unterminated {
        /// The attribute.
        name: String,
    },
    /// `a="x"b="y"`: no whitespace after a value.
    #[error("attribute `{name}` is followed by {found:?} instead of whitespace")]
    MissingSeparator {
        /// The attribute.
        name: String,
        /// What follows its closing quote.
        found: char,
    },
    /// A known attribute given twice.
    #[error("attribute `{name}` is given twice")]
    Duplicate {
        /// The attribute.
        name: String,
    },
    /// A control character (a line break, say) inside a value.
    #[error("attribute `{name}` contains a control character")]
    ControlCharacter {
        /// The attribute.
        name: String,
    },
}

impl AttributeError {
    /// What went wrong, without the attribute's name (for the log and `status`).
    pub fn class(&self) -> &'static str {
        match self {
            AttributeError::ExpectedName { .. } => "malformed attributes: a name expected",
            AttributeError::MissingValue { .. } => "malformed attributes: a name without a value",
            AttributeError::SingleQuoted { .. } => "malformed attributes: single quotes",
            AttributeError::Unquoted { .. } => "malformed attributes: an unquoted value",
            AttributeError::Unterminated { .. } => "malformed attributes: an unclosed quote",
            AttributeError::MissingSeparator { .. } => "malformed attributes: no space between",
            AttributeError::Duplicate { .. } => "malformed attributes: a name given twice",
            AttributeError::ControlCharacter { .. } => "malformed attributes: a control character",
        }
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Parses `src` and returns, for each of `known`, its raw value if given.
pub(crate) fn parse<'a, const N: usize>(
    src: &'a str,
    known: [&str; N],
) -> Result<[Option<&'a str>; N], AttributeError> {
    let bytes = src.as_bytes();
    let mut values: [Option<&'a str>; N] = [None; N];
    let mut i = 0;
    loop {
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        if i == bytes.len() {
            return Ok(values);
        }
        if !is_name_start(bytes[i]) {
            return Err(AttributeError::ExpectedName { at: i });
        }
        let name_start = i;
        while i < bytes.len() && is_name_byte(bytes[i]) {
            i += 1;
        }
        let name = &src[name_start..i];
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        if bytes.get(i) != Some(&b'=') {
            return Err(AttributeError::MissingValue { name: name.into() });
        }
        i += 1;
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'"') => {}
            Some(b'\'') => return Err(AttributeError::SingleQuoted { name: name.into() }),
            _ => return Err(AttributeError::Unquoted { name: name.into() }),
        }
        let value_start = i + 1;
        let Some(len) = src[value_start..].find('"') else {
            return Err(AttributeError::Unterminated { name: name.into() });
        };
        let value = &src[value_start..value_start + len];
        i = value_start + len + 1;
        if value.chars().any(char::is_control) {
            return Err(AttributeError::ControlCharacter { name: name.into() });
        }
        if let Some(&b) = bytes.get(i)
            && !is_space(b)
        {
            let found = src[i..].chars().next().unwrap_or('\u{fffd}');
            return Err(AttributeError::MissingSeparator {
                name: name.into(),
                found,
            });
        }
        if let Some(slot) = known.iter().position(|k| *k == name) {
            if values[slot].is_some() {
                return Err(AttributeError::Duplicate { name: name.into() });
            }
            values[slot] = Some(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok<'a, const N: usize>(src: &'a str, known: [&str; N]) -> [Option<&'a str>; N] {
        parse(src, known).unwrap_or_else(|e| panic!("{src:?}: {e}"))
    }

    #[test]
    fn parses_double_quoted_pairs() {
        assert_eq!(
            ok(
                r#"label="Show risks" prompt="List, the: risks." x="y""#,
                ["label", "prompt", "z"]
            ),
            [Some("Show risks"), Some("List, the: risks."), None]
        );
        assert_eq!(
            ok(" a = \"1\"\n\tb=\"\" ", ["a", "b"]),
            [Some("1"), Some("")]
        );
        assert_eq!(
            ok(r#"a="it's <b>&amp;</b>""#, ["a"]),
            [Some("it's <b>&amp;</b>")]
        );
        assert_eq!(ok("", ["a"]), [None]);
    }

    #[test]
    fn refuses_other_quoting_and_shapes() {
        let err = |src: &str| parse(src, ["a", "b"]).err();
        assert_eq!(
            err("a='x'"),
            Some(AttributeError::SingleQuoted { name: "a".into() })
        );
        assert_eq!(
            err("a=x"),
            Some(AttributeError::Unquoted { name: "a".into() })
        );
        assert_eq!(
            err("a="),
            Some(AttributeError::Unquoted { name: "a".into() })
        );
        assert_eq!(
            err("a"),
            Some(AttributeError::MissingValue { name: "a".into() })
        );
        assert_eq!(
            err("Continue please"),
            Some(AttributeError::MissingValue {
                name: "Continue".into()
            })
        );
        assert_eq!(
            err("a=\"x"),
            Some(AttributeError::Unterminated { name: "a".into() })
        );
        assert_eq!(
            err("a=\"x\"b=\"y\""),
            Some(AttributeError::MissingSeparator {
                name: "a".into(),
                found: 'b'
            })
        );
        assert_eq!(
            err("a=\"x\" a=\"y\""),
            Some(AttributeError::Duplicate { name: "a".into() })
        );
        assert_eq!(
            err("a=\"x\ny\""),
            Some(AttributeError::ControlCharacter { name: "a".into() })
        );
        assert_eq!(
            err("\"a\"=\"x\""),
            Some(AttributeError::ExpectedName { at: 0 })
        );
        assert_eq!(
            err("a=\"x\" , b=\"y\""),
            Some(AttributeError::ExpectedName { at: 6 })
        );
        // Unknown names are skipped but must still be well-formed.
        assert_eq!(
            err("c=x"),
            Some(AttributeError::Unquoted { name: "c".into() })
        );
        assert_eq!(parse("c=\"1\" c=\"2\"", ["a"]), Ok([None]));
    }
}
