//! Bot API `MessageEntity` JSON: written from and read into [`Entity`], as the Bot API server
//! (telegram-bot-api `get_text_entity`) and TDLib's JsonObject read it.

use serde_json::{Map, Value};

use super::model::{Entity, Kind};

impl Entity {
    /// The Bot API `MessageEntity` object.
    pub(crate) fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), self.kind.type_name().into());
        map.insert("offset".into(), self.offset.into());
        map.insert("length".into(), self.length.into());
        match &self.kind {
            Kind::Pre(Some(language)) => {
                map.insert("language".into(), language.clone().into());
            }
            Kind::TextLink(url) => {
                map.insert("url".into(), url.clone().into());
            }
            Kind::TextMention(user) => {
                map.insert("user".into(), user.clone());
            }
            Kind::CustomEmoji(id) => {
                map.insert("custom_emoji_id".into(), id.clone().into());
            }
            Kind::DateTime(unix_time, format) => {
                map.insert("unix_time".into(), (*unix_time).into());
                if let Some(format) = format {
                    map.insert("date_time_format".into(), format.clone().into());
                }
            }
            _ => {}
        }
        Value::Object(map)
    }

    /// Reads back an entity this crate produced (or any well-formed one); `None` for anything
    /// that isn't a valid `MessageEntity`.
    pub(crate) fn from_value(value: &Value) -> Option<Entity> {
        let Supplied {
            offset,
            length,
            kind,
        } = parse_entity_fields(value).ok()??;
        Some(Entity {
            kind,
            offset: usize::try_from(offset).ok()?,
            length: usize::try_from(length).ok()?,
        })
    }
}

/// An entity as a caller wrote it: the Bot API reads offset and length as 32-bit integers,
/// and TDLib checks their range only after every entity's data.
pub(super) struct Supplied {
    pub(super) offset: i64,
    pub(super) length: i64,
    pub(super) kind: Kind,
}

/// Parses a Bot API `MessageEntity` object as the Bot API server does (`Ok(None)` for
/// `bank_card_number`, which has no model here). Errors are the Bot API's texts.
pub(super) fn parse_entity_fields(value: &Value) -> Result<Option<Supplied>, String> {
    let Value::Object(object) = value else {
        return Err("expected an Object".into());
    };
    let offset = int_field(object, "offset")?;
    let length = int_field(object, "length")?;
    let type_name = string_field(object, "type")?;
    let kind = match type_name.as_str() {
        "" => return Err("Type is not specified".into()),
        "bold" => Kind::Bold,
        "italic" => Kind::Italic,
        "underline" => Kind::Underline,
        "strikethrough" => Kind::Strikethrough,
        "spoiler" => Kind::Spoiler,
        "code" => Kind::Code,
        "pre" => {
            let language = optional_string_field(object, "language")?;
            Kind::Pre((!language.is_empty()).then_some(language))
        }
        "text_link" => Kind::TextLink(string_field(object, "url")?),
        "text_mention" => {
            let user = match object.get("user") {
                None => return Err("Can't find field \"user\"".into()),
                Some(user @ Value::Object(fields)) => {
                    long_field(fields, "id")?;
                    user.clone()
                }
                Some(_) => return Err("Field \"user\" must be of type Object".into()),
            };
            Kind::TextMention(user)
        }
        "custom_emoji" => Kind::CustomEmoji(long_field(object, "custom_emoji_id")?.to_string()),
        "blockquote" => Kind::Blockquote,
        "expandable_blockquote" => Kind::ExpandableBlockquote,
        "date_time" => {
            let unix_time = long_field(object, "unix_time")?;
            let format = optional_string_field(object, "date_time_format")?;
            let format = normalize_date_format(&format).ok_or("Invalid date format used")?;
            Kind::DateTime(unix_time, format)
        }
        "mention" => Kind::Mention,
        "hashtag" => Kind::Hashtag,
        "cashtag" => Kind::Cashtag,
        "bot_command" => Kind::BotCommand,
        "url" => Kind::Url,
        "email" => Kind::Email,
        "phone_number" => Kind::PhoneNumber,
        "bank_card_number" => return Ok(None),
        _ => return Err("Unsupported type specified".into()),
    };
    Ok(Some(Supplied {
        offset,
        length,
        kind,
    }))
}

/// TDLib's `to_integer_safe`: the text must be exactly the decimal form of the number.
pub(super) fn parse_exact<T: std::str::FromStr + ToString>(text: &str) -> Option<T> {
    let n = text.parse::<T>().ok()?;
    (n.to_string() == text).then_some(n)
}

fn number_field<T: std::str::FromStr + ToString>(
    object: &Map<String, Value>,
    name: &str,
) -> Result<T, String> {
    let text = match object.get(name) {
        None => return Err(format!("Can't find field \"{name}\"")),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(format!("Field \"{name}\" must be a Number")),
    };
    parse_exact(&text).ok_or_else(|| format!("Field \"{name}\" must be a valid Number"))
}

/// A 32-bit integer field, widened so callers can range-check negative values.
fn int_field(object: &Map<String, Value>, name: &str) -> Result<i64, String> {
    number_field::<i32>(object, name).map(i64::from)
}

fn long_field(object: &Map<String, Value>, name: &str) -> Result<i64, String> {
    number_field::<i64>(object, name)
}

fn string_field(object: &Map<String, Value>, name: &str) -> Result<String, String> {
    match object.get(name) {
        None => Err(format!("Can't find field \"{name}\"")),
        Some(_) => optional_string_field(object, name),
    }
}

fn optional_string_field(object: &Map<String, Value>, name: &str) -> Result<String, String> {
    match object.get(name) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        // TDLib's JSON layer accepts a number where a string is expected.
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(format!("Field \"{name}\" must be of type String")),
    }
}

/// TDLib's `get_date_flags` (`r`/`R` alone, or any of `tTdDwW`), returned as the canonical
/// Bot API `date_time_format` (`r`, or `w?[dD]?[tT]?`; `None` for an empty format).
/// `None` from the outer option means the format is invalid. When both the short and the long
/// form of a part are given, TDLib keeps the short one.
pub(crate) fn normalize_date_format(format: &str) -> Option<Option<String>> {
    if format == "r" || format == "R" {
        return Some(Some("r".into()));
    }
    let (mut short_time, mut long_time, mut short_date, mut long_date, mut weekday) =
        (false, false, false, false, false);
    for c in format.chars() {
        match c {
            't' => short_time = true,
            'T' => long_time = true,
            'd' => short_date = true,
            'D' => long_date = true,
            'w' | 'W' => weekday = true,
            _ => return None,
        }
    }
    let mut normalized = String::new();
    if weekday {
        normalized.push('w');
    }
    if short_date {
        normalized.push('d');
    } else if long_date {
        normalized.push('D');
    }
    if short_time {
        normalized.push('t');
    } else if long_time {
        normalized.push('T');
    }
    Some((!normalized.is_empty()).then_some(normalized))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn e(kind: &str, offset: usize, length: usize) -> Value {
        json!({"type": kind, "offset": offset, "length": length})
    }

    #[test]
    fn date_format_normalisation() {
        assert_eq!(normalize_date_format(""), Some(None));
        assert_eq!(normalize_date_format("r"), Some(Some("r".into())));
        assert_eq!(normalize_date_format("TDW"), Some(Some("wDT".into())));
        assert_eq!(normalize_date_format("dD"), Some(Some("d".into())));
        assert_eq!(normalize_date_format("rt"), None);
        assert_eq!(normalize_date_format("x"), None);
    }

    #[test]
    fn from_value_reads_back_to_value() {
        for value in [
            e("bold", 1, 2),
            e("mention", 0, 6),
            json!({"type": "pre", "offset": 0, "length": 1, "language": "go"}),
            json!({"type": "date_time", "offset": 0, "length": 1, "unix_time": 9}),
        ] {
            assert_eq!(
                Entity::from_value(&value).map(|e| e.to_value()),
                Some(value)
            );
        }
        assert_eq!(Entity::from_value(&json!({"type": "bold"})), None);
        assert_eq!(
            Entity::from_value(&e("bold", 0, 1)).map(|e| e.kind),
            Some(Kind::Bold)
        );
    }
}
