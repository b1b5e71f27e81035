//! The `telegram_voice` payload: a strict JSON object, a compact cell, or double-quoted
//! attributes. Each comment is one voice message.
//!
//! Routing, after trimming structural whitespace:
//!
//! - A payload that starts with an attribute name and `=` is the attribute form; its errors
//!   are final.
//! - Anything else is a noisy envelope, read from its first `{` or `[` as the button payload
//!   is ([`super::cells`]): text before it is ignored, and after the one payload anything but
//!   a `{` or `[` ([`VoiceError::TrailingContent`]: one comment, one voice). No `{` or `[`:
//!   [`VoiceError::NoPayload`]. A `[` there is refused ([`VoiceError::Matrix`]): a voice is
//!   never a matrix.
//! - A strict JSON object is used as is. A `{` that opens like a named JSON object (a string
//!   key and a colon) but is not strict JSON is refused ([`VoiceError::InvalidJson`]), never
//!   read as a cell.
//! - Otherwise a compact cell: `{text}`, `{text|lang}` or `{text|lang|rate}`, with the
//!   positional atoms of the button cells (trimmed; escapes `\|`, `\}`, `\\`; no control
//!   characters, so line breaks travel in the JSON form as `\n`). No atom may be empty.
//!
//! JSON keys and attributes: `text`, `value`, `lang`, `rate`; others are ignored. Known keys
//! must be strings. Every value is trimmed and an empty one counts as absent; `text` wins over
//! `value`, and one of them must be present.

use serde_json::{Map, Value};

use super::attrs::{self, AttributeError};
use super::cells::{self, CellError};
use super::present;

/// One voice message to synthesise.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VoiceSpec {
    /// What to say (non-empty, trimmed).
    pub text: String,
    /// Language hint for the synthesiser (`"ru"`, say).
    pub lang: Option<String>,
    /// Rate hint for the synthesiser (`"+30%"`, say).
    pub rate: Option<String>,
}

/// Why a voice payload was refused. Offsets are byte offsets into the payload as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoiceError {
    /// Nothing after the marker.
    #[error("empty payload")]
    Empty,
    /// Not attribute-shaped, and no `{` anywhere.
    #[error("no JSON, cell or attribute payload")]
    NoPayload,
    /// A `[`: matrices are for buttons.
    #[error("a matrix at byte {at} where one voice was expected")]
    Matrix {
        /// Offset of the `[`.
        at: usize,
    },
    /// Opens like a named JSON object but is not strict JSON.
    #[error("invalid JSON: {message}")]
    InvalidJson {
        /// serde_json's account.
        message: String,
    },
    /// A known key whose value is not a string.
    #[error("`{field}` is not a string")]
    FieldNotString {
        /// The key.
        field: &'static str,
    },
    /// Neither `text` nor `value`.
    #[error("nothing to say (no `text` or `value`)")]
    MissingText,
    /// An empty atom in a compact cell.
    #[error("empty atom in the cell at byte {at}")]
    EmptyAtom {
        /// Offset of the cell's `{`.
        at: usize,
    },
    /// The compact cell is malformed.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// A `{` or `[` after the payload.
    #[error("trailing content at byte {at}")]
    TrailingContent {
        /// Offset.
        at: usize,
    },
    /// The attribute form is malformed.
    #[error(transparent)]
    Attributes(#[from] AttributeError),
}

impl VoiceError {
    /// What went wrong, without any of pi's words or offsets (for the log and `status`).
    pub fn class(&self) -> &'static str {
        match self {
            VoiceError::Empty => "empty payload",
            VoiceError::NoPayload => "no payload",
            VoiceError::Matrix { .. } => "a matrix",
            VoiceError::InvalidJson { .. } => "invalid JSON object",
            VoiceError::FieldNotString { .. } => "a field that is not a string",
            VoiceError::MissingText => "nothing to say",
            VoiceError::EmptyAtom { .. } => "empty atom",
            VoiceError::Cell(e) => e.class(),
            VoiceError::TrailingContent { .. } => "a second payload after the first",
            VoiceError::Attributes(e) => e.class(),
        }
    }
}

/// Parses a voice payload (what follows the marker word).
pub fn parse_voice(payload: &str) -> Result<VoiceSpec, VoiceError> {
    let bytes = payload.as_bytes();
    let start = bytes.iter().take_while(|&&b| cells::is_ws(b)).count();
    let end = bytes.len() - bytes.iter().rev().take_while(|&&b| cells::is_ws(b)).count();
    if start >= end {
        return Err(VoiceError::Empty);
    }
    if cells::attribute_shaped(&payload[start..end]) {
        let [text, value, lang, rate] = attrs::parse(payload, ["text", "value", "lang", "rate"])?;
        return build(text, value, lang, rate);
    }
    let src = &payload[..end];
    let at = cells::first_bracket(src, start).ok_or(VoiceError::NoPayload)?;
    if src.as_bytes()[at] == b'[' {
        return Err(VoiceError::Matrix { at });
    }
    let mut json = serde_json::Deserializer::from_str(&src[at..]).into_iter::<Map<String, Value>>();
    let (spec, after) = match json.next() {
        Some(Ok(map)) => (from_json(&map)?, at + json.byte_offset()),
        Some(Err(e)) if cells::opens_named_json(src, at) => {
            return Err(VoiceError::InvalidJson {
                message: e.to_string(),
            });
        }
        _ => {
            let cell = cells::positional(src, at)?;
            if cell.atoms.iter().any(String::is_empty) {
                return Err(VoiceError::EmptyAtom { at });
            }
            let atom = |i: usize| cell.atoms.get(i).map(String::as_str);
            (build(atom(0), None, atom(1), atom(2))?, cell.end)
        }
    };
    if let Some(at) = cells::first_bracket(src, after) {
        return Err(VoiceError::TrailingContent { at });
    }
    Ok(spec)
}

fn from_json(map: &Map<String, Value>) -> Result<VoiceSpec, VoiceError> {
    fn field<'a>(
        map: &'a Map<String, Value>,
        field: &'static str,
    ) -> Result<Option<&'a str>, VoiceError> {
        match map.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(VoiceError::FieldNotString { field }),
        }
    }
    build(
        field(map, "text")?,
        field(map, "value")?,
        field(map, "lang")?,
        field(map, "rate")?,
    )
}

fn build(
    text: Option<&str>,
    value: Option<&str>,
    lang: Option<&str>,
    rate: Option<&str>,
) -> Result<VoiceSpec, VoiceError> {
    let text = present(text)
        .or(present(value))
        .ok_or(VoiceError::MissingText)?;
    Ok(VoiceSpec {
        text: text.to_owned(),
        lang: present(lang).map(str::to_owned),
        rate: present(rate).map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voice(payload: &str) -> VoiceSpec {
        parse_voice(payload).unwrap_or_else(|e| panic!("{payload:?}: {e}"))
    }

    fn spec(text: &str, lang: Option<&str>, rate: Option<&str>) -> VoiceSpec {
        VoiceSpec {
            text: text.into(),
            lang: lang.map(Into::into),
            rate: rate.map(Into::into),
        }
    }

    #[test]
    fn json_and_attribute_forms_agree() {
        let want = spec("Short spoken companion summary.", Some("ru"), Some("+30%"));
        assert_eq!(
            voice(r#"{"value":"Short spoken companion summary.","lang":"ru","rate":"+30%"}"#),
            want
        );
        assert_eq!(
            voice(r#"text="Short spoken companion summary." lang="ru" rate="+30%""#),
            want
        );
        assert_eq!(
            voice(r#"value="Short spoken companion summary." rate="+30%" lang="ru""#),
            want
        );
    }

    #[test]
    fn text_wins_over_value_and_hints_are_optional() {
        assert_eq!(voice(r#"{"value":"v","text":"t"}"#), spec("t", None, None));
        assert_eq!(voice(r#"value="v" text="t""#), spec("t", None, None));
        // An empty text falls back to value; empty hints are absent.
        assert_eq!(
            voice(r#"{"text":" ","value":"v","lang":""}"#),
            spec("v", None, None)
        );
        assert_eq!(
            voice("{\"text\":\"line one\\nline two\"}"),
            spec("line one\nline two", None, None)
        );
        assert_eq!(
            voice(r#"{"text":"  padded  ","extra":1}"#),
            spec("padded", None, None)
        );
        assert_eq!(voice("\n  {\"text\":\"x\"}\n"), spec("x", None, None));
    }

    #[test]
    fn compact_cells() {
        assert_eq!(voice("{Hello}"), spec("Hello", None, None));
        assert_eq!(voice("{Привет|ru}"), spec("Привет", Some("ru"), None));
        assert_eq!(voice("{Hi|en|+20%}"), spec("Hi", Some("en"), Some("+20%")));
        assert_eq!(
            voice("{ Hi, there: \"x\" | en }"),
            spec("Hi, there: \"x\"", Some("en"), None)
        );
        assert_eq!(voice(r"{a\|b\}c\\}"), spec(r"a|b}c\", None, None));
        // What was JSON-looking but not named JSON is a cell now.
        assert_eq!(voice("{text|ru}"), spec("text", Some("ru"), None));
    }

    #[test]
    fn noisy_envelopes() {
        assert_eq!(voice("Say: {Hello}"), spec("Hello", None, None));
        assert_eq!(voice("{Hello}, (short)"), spec("Hello", None, None));
        assert_eq!(voice("{Hello}]"), spec("Hello", None, None));
        assert_eq!(
            voice(r#"spoken: {"text":"x","lang":"en"} ,"#),
            spec("x", Some("en"), None)
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(parse_voice(""), Err(VoiceError::Empty));
        assert_eq!(parse_voice("  \n "), Err(VoiceError::Empty));
        assert_eq!(parse_voice("{}"), Err(VoiceError::MissingText));
        assert_eq!(parse_voice(r#"lang="ru""#), Err(VoiceError::MissingText));
        assert_eq!(
            parse_voice(r#"[{"text":"x"}]"#),
            Err(VoiceError::Matrix { at: 0 })
        );
        assert_eq!(parse_voice("[{Hi}]"), Err(VoiceError::Matrix { at: 0 }));
        assert_eq!(parse_voice("say [{Hi}]"), Err(VoiceError::Matrix { at: 4 }));
        assert_eq!(
            parse_voice(r#"{"text":5}"#),
            Err(VoiceError::FieldNotString { field: "text" })
        );
        assert_eq!(
            parse_voice(r#"{"text":"x","lang":null}"#),
            Err(VoiceError::FieldNotString { field: "lang" })
        );
        assert!(matches!(
            parse_voice(r#"{"text":"x",}"#),
            Err(VoiceError::InvalidJson { .. })
        ));
        assert!(matches!(
            parse_voice(r#"{"text":"x" "lang":"en"}"#),
            Err(VoiceError::InvalidJson { .. })
        ));
        for empty in ["{ }x", "{|en}", "{Hi|}", "{Hi|en|}", "{Hi| |+5%}"] {
            assert!(
                matches!(
                    parse_voice(empty),
                    Err(VoiceError::EmptyAtom { .. } | VoiceError::MissingText)
                ),
                "{empty}"
            );
        }
        assert_eq!(
            parse_voice("{a|b|c|d}"),
            Err(VoiceError::Cell(CellError::TooManyAtoms { at: 6 }))
        );
        assert_eq!(
            parse_voice("{a\nb}"),
            Err(VoiceError::Cell(CellError::ControlCharacter { at: 0 }))
        );
        assert_eq!(
            parse_voice("{Hi"),
            Err(VoiceError::Cell(CellError::Unterminated { at: 0 }))
        );
        assert_eq!(
            parse_voice("{Hi} {There}"),
            Err(VoiceError::TrailingContent { at: 5 })
        );
        assert!(matches!(
            parse_voice("text='x'"),
            Err(VoiceError::Attributes(AttributeError::SingleQuoted { .. }))
        ));
        assert!(matches!(
            parse_voice("text=x"),
            Err(VoiceError::Attributes(AttributeError::Unquoted { .. }))
        ));
        assert_eq!(parse_voice("Hello there"), Err(VoiceError::NoPayload));
    }
}
