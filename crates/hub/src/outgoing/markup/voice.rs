//! The `telegram_voice` payload: a strict JSON object or double-quoted attributes.
//!
//! Keys (attributes) `text`, `value`, `lang`, `rate`; others are ignored. Known keys must be
//! strings. Every value is trimmed and an empty one counts as absent; `text` wins over
//! `value`, and one of them must be present. Line breaks travel as `\n` inside JSON strings
//! (attribute values cannot hold control characters).

use serde_json::{Map, Value};

use super::attrs::{self, AttributeError};
use super::{is_ws, present};

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

/// Why a voice payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoiceError {
    /// Nothing after the marker.
    #[error("empty payload")]
    Empty,
    /// Starts like JSON but is not strict JSON.
    #[error("invalid JSON: {message}")]
    InvalidJson {
        /// serde_json's account.
        message: String,
    },
    /// Valid JSON that is not an object (an array, say).
    #[error("the payload is not a JSON object")]
    NotAnObject,
    /// A known key whose value is not a string.
    #[error("`{field}` is not a string")]
    FieldNotString {
        /// The key.
        field: &'static str,
    },
    /// Neither `text` nor `value`.
    #[error("nothing to say (no `text` or `value`)")]
    MissingText,
    /// The attribute form is malformed.
    #[error(transparent)]
    Attributes(#[from] AttributeError),
}

/// Parses a voice payload (what follows the marker word).
pub fn parse_voice(payload: &str) -> Result<VoiceSpec, VoiceError> {
    let src = payload.trim_matches(is_ws);
    match src.as_bytes().first() {
        None => Err(VoiceError::Empty),
        Some(b'{' | b'[') => match serde_json::from_str::<Value>(src) {
            Ok(Value::Object(map)) => from_json(&map),
            Ok(_) => Err(VoiceError::NotAnObject),
            Err(e) => Err(VoiceError::InvalidJson {
                message: e.to_string(),
            }),
        },
        Some(_) => {
            let [text, value, lang, rate] = attrs::parse(src, ["text", "value", "lang", "rate"])?;
            build(text, value, lang, rate)
        }
    }
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
    fn refusals() {
        assert_eq!(parse_voice(""), Err(VoiceError::Empty));
        assert_eq!(parse_voice("  \n "), Err(VoiceError::Empty));
        assert_eq!(parse_voice("{}"), Err(VoiceError::MissingText));
        assert_eq!(parse_voice(r#"lang="ru""#), Err(VoiceError::MissingText));
        assert_eq!(
            parse_voice(r#"[{"text":"x"}]"#),
            Err(VoiceError::NotAnObject)
        );
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
            parse_voice("{text|ru}"),
            Err(VoiceError::InvalidJson { .. })
        ));
        assert!(matches!(
            parse_voice("text='x'"),
            Err(VoiceError::Attributes(AttributeError::SingleQuoted { .. }))
        ));
        assert!(matches!(
            parse_voice("text=x"),
            Err(VoiceError::Attributes(AttributeError::Unquoted { .. }))
        ));
        assert!(matches!(
            parse_voice("Hello there"),
            Err(VoiceError::Attributes(_))
        ));
    }
}
