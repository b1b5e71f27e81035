//! The blocks form: `InputRichBlock`s validated and rebuilt as typed blocks.
//!
//! Every field is checked in the order the Bot API documents it, so that the first wrong
//! field is the one named in the error; fields a type does not have are dropped.

use serde_json::{Map, Value};

use super::limits::{Limits, Result, RichError, parse_err};
use super::model::{
    BULLET, Block, Button, Caption, Cell, ListItem, RichText, TextObject, ordered_label,
};

/// The blocks of a `blocks` field; `depth` counts the container blocks around them.
pub(super) fn input_blocks(value: &Value, limits: &Limits, depth: usize) -> Result<Vec<Block>> {
    value
        .as_array()
        .ok_or_else(|| parse_err("field \"blocks\" must be an Array"))?
        .iter()
        .map(|block| input_block(block, limits, depth))
        .collect()
}

/// Reads fields of one input object, naming it in errors.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    what: String,
}

impl<'a> Fields<'a> {
    fn of(value: &'a Value, what: impl Into<String>) -> Result<Self> {
        let what = what.into();
        let obj = value
            .as_object()
            .ok_or_else(|| parse_err(format!("{what} must be an Object")))?;
        Ok(Fields { obj, what })
    }

    /// The same object, named differently once its type is known.
    fn renamed(&self, what: String) -> Self {
        Fields {
            obj: self.obj,
            what,
        }
    }

    /// A field's value; `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn required(&self, key: &str) -> Result<&'a Value> {
        self.get(key).ok_or_else(|| {
            parse_err(format!(
                "field \"{key}\" of {} must be specified",
                self.what
            ))
        })
    }

    fn wrong(&self, key: &str, expected: &str) -> RichError {
        parse_err(format!(
            "field \"{key}\" of {} must be {expected}",
            self.what
        ))
    }

    fn string(&self, key: &str) -> Result<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong(key, "a String")),
        }
    }

    fn required_string(&self, key: &str) -> Result<String> {
        self.required(key)?;
        self.string(key)?.ok_or_else(|| self.wrong(key, "a String"))
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong(key, "a Boolean")),
        }
    }

    fn integer(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .filter(|n| (min..=max).contains(n))
                .map(Some)
                .ok_or_else(|| self.wrong(key, &format!("an Integer between {min} and {max}"))),
        }
    }

    /// A required integer in `T`'s range, `min` and `max` included.
    fn required_integer<T: TryFrom<i64>>(&self, key: &str, min: i64, max: i64) -> Result<T> {
        self.required(key)?;
        self.integer(key, min, max)?
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| self.wrong(key, &format!("an Integer between {min} and {max}")))
    }

    fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(_) => Err(self.wrong(key, "an Object")),
        }
    }

    fn array(&self, key: &str) -> Result<&'a Vec<Value>> {
        self.required(key)?
            .as_array()
            .ok_or_else(|| self.wrong(key, "an Array"))
    }

    /// A required rich text at the top of a formatting nest.
    fn text(&self, key: &str, limits: &Limits) -> Result<RichText> {
        input_text(self.required(key)?, limits, 0)
    }

    fn optional_text(&self, key: &str, limits: &Limits) -> Result<Option<RichText>> {
        self.get(key).map(|t| input_text(t, limits, 0)).transpose()
    }
}

fn nested(depth: usize, limits: &Limits) -> Result<usize> {
    if depth + 1 > limits.max_depth {
        return Err(RichError::TooDeep);
    }
    Ok(depth + 1)
}

const MEDIA_BLOCKS: [&str; 8] = [
    "animation",
    "audio",
    "document",
    "photo",
    "video",
    "voice_note",
    "collage",
    "slideshow",
];

fn input_block(value: &Value, limits: &Limits, depth: usize) -> Result<Block> {
    let f = Fields::of(value, "rich block")?;
    let ty = f
        .get("type")
        .ok_or_else(|| parse_err("field \"type\" of rich block must be specified"))?
        .as_str()
        .ok_or_else(|| parse_err("field \"type\" of rich block must be a String"))?;
    if MEDIA_BLOCKS.contains(&ty) {
        return Err(RichError::MediaUnsupported);
    }
    let f = f.renamed(format!("{ty} block"));
    // Struct fields are evaluated in the order written, which is the order checked.
    Ok(match ty {
        "paragraph" => Block::Paragraph {
            text: f.text("text", limits)?,
        },
        "footer" => Block::Footer {
            text: f.text("text", limits)?,
        },
        "thinking" => Block::Thinking {
            text: f.text("text", limits)?,
        },
        "heading" => Block::Heading {
            text: f.text("text", limits)?,
            size: f.required_integer("size", 1, 6)?,
        },
        "pre" => Block::Pre {
            text: f.text("text", limits)?,
            language: f.string("language")?,
        },
        "divider" => Block::Divider,
        "mathematical_expression" => Block::MathematicalExpression {
            expression: f.required_string("expression")?,
        },
        "anchor" => Block::Anchor {
            name: f.required_string("name")?,
        },
        "list" => {
            let depth = nested(depth, limits)?;
            Block::List {
                items: input_items(f.array("items")?, limits, depth)?,
            }
        }
        "blockquote" => {
            let depth = nested(depth, limits)?;
            Block::Blockquote {
                blocks: input_blocks(f.required("blocks")?, limits, depth)?,
                credit: f.optional_text("credit", limits)?,
            }
        }
        "expandable_blockquote" => Block::ExpandableBlockquote {
            text: f.text("text", limits)?,
            credit: f.optional_text("credit", limits)?,
        },
        "pullquote" => Block::Pullquote {
            text: f.text("text", limits)?,
            credit: f.optional_text("credit", limits)?,
        },
        "details" => {
            let depth = nested(depth, limits)?;
            Block::Details {
                summary: f.text("summary", limits)?,
                blocks: input_blocks(f.required("blocks")?, limits, depth)?,
                is_open: f.boolean("is_open")?,
            }
        }
        "table" => {
            let mut rows = Vec::new();
            for row in f.array("cells")? {
                let cells = row
                    .as_array()
                    .ok_or_else(|| f.wrong("cells", "an Array of Arrays"))?;
                if cells.len() > limits.max_table_columns {
                    return Err(RichError::TooManyColumns);
                }
                let cells = cells
                    .iter()
                    .map(|cell| input_cell(cell, limits))
                    .collect::<Result<Vec<_>>>()?;
                rows.push(cells);
            }
            Block::Table {
                cells: rows,
                is_bordered: f.boolean("is_bordered")?,
                is_striped: f.boolean("is_striped")?,
                is_compact: f.boolean("is_compact")?,
                caption: f.optional_text("caption", limits)?,
            }
        }
        "map" => {
            let location = f
                .object("location")?
                .ok_or_else(|| parse_err("field \"location\" of map block must be specified"))?;
            if !["latitude", "longitude"]
                .iter()
                .all(|k| location.get(*k).is_some_and(Value::is_number))
            {
                return Err(f.wrong("location", "a Location"));
            }
            Block::Map {
                location: location.clone(),
                zoom: f.required_integer("zoom", 0, 255)?,
                width: f.required_integer("width", 0, i64::from(u32::MAX))?,
                height: f.required_integer("height", 0, i64::from(u32::MAX))?,
                caption: input_caption(f.get("caption"), limits)?,
            }
        }
        "buttons" => Block::Buttons {
            buttons: f
                .array("buttons")?
                .iter()
                .map(|b| input_button(b, limits))
                .collect::<Result<Vec<_>>>()?,
            align: f.string("align")?,
        },
        other => return Err(RichError::InvalidBlockType(other.to_string())),
    })
}

/// A list's items, labelled the way the markdown and html forms label them when the input
/// gives no label.
fn input_items(items: &[Value], limits: &Limits, depth: usize) -> Result<Vec<ListItem>> {
    let mut next = 1;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let i = Fields::of(item, "list item")?;
        let blocks = input_blocks(i.required("blocks")?, limits, depth)?;
        let value = i.integer("value", i32::MIN.into(), i32::MAX.into())?;
        let style = i.string("type")?;
        let n = value.unwrap_or(next);
        next = n.saturating_add(1);
        let label = match i.string("label")? {
            Some(label) => label,
            None if value.is_some() || style.is_some() => ordered_label(n, style.as_deref()),
            None => BULLET.to_string(),
        };
        let checkbox = match (i.boolean("has_checkbox")?, i.boolean("is_checked")?) {
            (Some(true), checked) => Some(checked == Some(true)),
            _ => None,
        };
        out.push(ListItem::new(label, blocks, checkbox, value, style));
    }
    Ok(out)
}

fn input_cell(value: &Value, limits: &Limits) -> Result<Cell> {
    let f = Fields::of(value, "table cell")?;
    Ok(Cell {
        align: f.string("align")?.unwrap_or_else(|| "left".into()),
        valign: f.string("valign")?.unwrap_or_else(|| "top".into()),
        text: f.optional_text("text", limits)?,
        is_header: f.boolean("is_header")?,
        colspan: unsigned(f.integer("colspan", 0, i64::from(u32::MAX))?),
        rowspan: unsigned(f.integer("rowspan", 0, i64::from(u32::MAX))?),
    })
}

/// A count already checked to be non-negative.
fn unsigned(n: Option<i64>) -> Option<u64> {
    n.and_then(|n| u64::try_from(n).ok())
}

fn input_caption(value: Option<&Value>, limits: &Limits) -> Result<Option<Caption>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let f = Fields::of(value, "caption")?;
    Ok(Some(Caption {
        text: f.text("text", limits)?,
        credit: f.optional_text("credit", limits)?,
    }))
}

fn input_button(value: &Value, limits: &Limits) -> Result<Button> {
    let f = Fields::of(value, "button")?;
    let object = |key: &str| Ok::<_, RichError>(f.object(key)?.cloned());
    Ok(Button {
        text: f.text("text", limits)?,
        style: f.string("style")?,
        url: f.string("url")?,
        callback_data: f.string("callback_data")?,
        switch_inline_query: f.string("switch_inline_query")?,
        switch_inline_query_current_chat: f.string("switch_inline_query_current_chat")?,
        web_app: object("web_app")?,
        login_url: object("login_url")?,
        switch_inline_query_chosen_chat: object("switch_inline_query_chosen_chat")?,
        copy_text: object("copy_text")?,
        disabled: object("disabled")?,
    })
}

/// Validates a rich text and rebuilds it with only the fields its type has. `depth` counts the
/// formatting objects around it.
fn input_text(value: &Value, limits: &Limits, depth: usize) -> Result<RichText> {
    match value {
        Value::String(s) => Ok(RichText::Plain(s.clone())),
        Value::Array(parts) => parts
            .iter()
            .map(|p| input_text(p, limits, depth))
            .collect::<Result<Vec<_>>>()
            .map(RichText::Concat),
        Value::Object(_) => {
            let depth = nested(depth, limits)?;
            let f = Fields::of(value, "rich text")?;
            let ty = f.required_string("type")?;
            input_text_object(
                &f.renamed(format!("rich text \"{ty}\"")),
                &ty,
                limits,
                depth,
            )
            .map(RichText::object)
        }
        _ => Err(parse_err(
            "rich text must be a String, an Array or an Object",
        )),
    }
}

fn input_text_object(f: &Fields, ty: &str, limits: &Limits, depth: usize) -> Result<TextObject> {
    let text = || input_text(f.required("text")?, limits, depth);
    let string = |key: &str| f.required_string(key);
    Ok(match ty {
        "bold" => TextObject::Bold { text: text()? },
        "italic" => TextObject::Italic { text: text()? },
        "underline" => TextObject::Underline { text: text()? },
        "strikethrough" => TextObject::Strikethrough { text: text()? },
        "spoiler" => TextObject::Spoiler { text: text()? },
        "subscript" => TextObject::Subscript { text: text()? },
        "superscript" => TextObject::Superscript { text: text()? },
        "marked" => TextObject::Marked { text: text()? },
        "code" => TextObject::Code { text: text()? },
        "date_time" => TextObject::DateTime {
            text: text()?,
            unix_time: f
                .required("unix_time")?
                .as_u64()
                .ok_or_else(|| f.wrong("unix_time", "a non-negative Integer"))?,
            date_time_format: string("date_time_format")?,
        },
        "text_mention" => TextObject::TextMention {
            text: text()?,
            user: input_user(f.required("user")?)?,
        },
        "custom_emoji" => TextObject::CustomEmoji {
            custom_emoji_id: string("custom_emoji_id")?,
            alternative_text: string("alternative_text")?,
        },
        "mathematical_expression" => TextObject::MathematicalExpression {
            expression: string("expression")?,
        },
        "url" => TextObject::Url {
            text: text()?,
            url: string("url")?,
        },
        "email_address" => TextObject::EmailAddress {
            text: text()?,
            email_address: string("email_address")?,
        },
        "phone_number" => TextObject::PhoneNumber {
            text: text()?,
            phone_number: string("phone_number")?,
        },
        "bank_card_number" => TextObject::BankCardNumber {
            text: text()?,
            bank_card_number: string("bank_card_number")?,
        },
        "mention" => TextObject::Mention {
            text: text()?,
            username: string("username")?,
        },
        "hashtag" => TextObject::Hashtag {
            text: text()?,
            hashtag: string("hashtag")?,
        },
        "cashtag" => TextObject::Cashtag {
            text: text()?,
            cashtag: string("cashtag")?,
        },
        "bot_command" => TextObject::BotCommand {
            text: text()?,
            bot_command: string("bot_command")?,
        },
        "button" => TextObject::Button {
            button: Box::new(input_button(f.required("button")?, limits)?),
        },
        "anchor" => TextObject::Anchor {
            name: string("name")?,
        },
        "anchor_link" => TextObject::AnchorLink {
            text: text()?,
            anchor_name: string("anchor_name")?,
        },
        "reference" => TextObject::Reference {
            text: text()?,
            name: string("name")?,
        },
        "reference_link" => TextObject::ReferenceLink {
            text: text()?,
            reference_name: string("reference_name")?,
        },
        _ => return Err(RichError::InvalidTextType(ty.to_string())),
    })
}

/// A `User`, kept as given once the fields a mention needs are there.
fn input_user(value: &Value) -> Result<Value> {
    let user = Fields::of(value, "user")?;
    if !value.get("id").is_some_and(Value::is_u64) {
        return Err(user.wrong("id", "a positive Integer"));
    }
    user.required_string("first_name")?;
    if user.boolean("is_bot")?.is_none() {
        return Err(user.wrong("is_bot", "a Boolean"));
    }
    Ok(value.clone())
}
