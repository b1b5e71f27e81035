//! The `telegram_button` payload: JSON, the adaptive JSON/CML matrix, or attributes.
//!
//! Routing, after trimming structural whitespace (space, tab, CR, LF):
//!
//! - A payload that starts with an attribute name and `=` is the attribute form
//!   (`label="…" prompt="…" value="…" selected_style="…"`), which makes one full-width row.
//!   Its errors are final: nothing else is tried.
//! - Anything else is a noisy envelope ([`super::cells`]): the payload starts at the first
//!   `{` or `[`; text before it is ignored. No `{` or `[` at all: [`ButtonError::NoPayload`].
//! - From there, one strict JSON value is tried first. If it parses, it is checked against the
//!   button schema and used as is (never re-read as CML).
//! - Otherwise the adaptive grammar reads one payload there: a JSON object, a positional cell,
//!   or a matrix `[ … ]` whose elements are cells or rows `[ cell … ]` (a row never holds a
//!   row). Cells are strict JSON objects or positional cells `{value}`, `{label|prompt}`,
//!   `{label|prompt|style}`, `{|prompt}`, `{|prompt|style}`. A comma between two elements
//!   may be left out, and one comma may stand before a `]`; a comma before the first element
//!   or two in a row are refused.
//! - After the payload, anything but a `{` or `[` is ignored (prose, a comma, an unmatched
//!   `]`); a `{` or `[` there is [`ButtonError::TrailingContent`] (a second cell or row pi
//!   meant to show). A `[` never closed stays [`ButtonError::Unclosed`].
//!
//! Positional atoms are trimmed; their only escapes are `\|`, `\}` and `\\`; they may not
//! hold a control character. Empty atoms are refused, except the first of a two- or
//! three-atom cell: `{|prompt}` is the prompt-only button, its prompt also its label (as
//! `{"prompt":"…"}`). The third atom must be `primary`, `success` or `danger`.
//!
//! A cell that opens like a named JSON object (`{`, optional whitespace, a JSON string,
//! optional whitespace, `:`) is JSON: if it is not a complete strict JSON object the payload
//! is refused rather than read as one positional atom. This is what makes a JSON object with
//! a missing property comma a rejection instead of a button labelled with its source text;
//! JSON object internals stay strict (a trailing comma inside one is refused too).
//!
//! JSON objects (whole payload, matrix cells) and attributes share one schema: `label`,
//! `prompt` and `value` are strings when present (other keys are ignored); each is trimmed,
//! and an empty one counts as absent. The label is `label`, else `value`, else `prompt`; the
//! prompt is `prompt`, else `value`. `selected_style` outside the three known names (or not a
//! string) is ignored, leaving the default style.
//!
//! Parsing is linear in the payload: every byte is visited a bounded number of times, and a
//! cell committed to JSON either parses once or ends the parse. All or nothing: an error means
//! no buttons at all.

use serde_json::{Map, Value};

use super::attrs::{self, AttributeError};
use super::cells::{self, CellError};
use super::present;

/// A button's colour once it has been chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// Blue (the default).
    Primary,
    /// Green.
    Success,
    /// Red.
    Danger,
}

impl Style {
    /// The style named `name` (exact, lowercase).
    pub fn from_name(name: &str) -> Option<Style> {
        match name {
            "primary" => Some(Style::Primary),
            "success" => Some(Style::Success),
            "danger" => Some(Style::Danger),
            _ => None,
        }
    }

    /// Its name in the markup.
    pub fn name(self) -> &'static str {
        match self {
            Style::Primary => "primary",
            Style::Success => "success",
            Style::Danger => "danger",
        }
    }
}

/// One button: what it shows and the prompt a tap queues.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ButtonSpec {
    /// The visible label (non-empty, trimmed).
    pub label: String,
    /// The prompt a tap sends to pi (non-empty, trimmed).
    pub prompt: String,
    /// The style the button takes once tapped; `None` when not given (or not one of the
    /// three names in the JSON and attribute forms): see [`ButtonSpec::style`].
    pub selected_style: Option<Style>,
}

impl ButtonSpec {
    /// The style to show once tapped: the given one, otherwise [`Style::Primary`].
    pub fn style(&self) -> Style {
        self.selected_style.unwrap_or(Style::Primary)
    }
}

/// Rows of buttons, top to bottom; each row left to right and never empty.
pub type Rows = Vec<Vec<ButtonSpec>>;

/// Why a button payload was refused. Offsets are byte offsets into the payload as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ButtonError {
    /// Nothing after the marker.
    #[error("empty payload")]
    Empty,
    /// Not attribute-shaped, and no `{` or `[` anywhere.
    #[error("no JSON, CML or attribute payload")]
    NoPayload,
    /// `[]`.
    #[error("empty matrix")]
    EmptyMatrix,
    /// `[[]]` or `[{a}, []]`.
    #[error("empty row")]
    EmptyRow,
    /// A row inside a row.
    #[error("a row nested in a row")]
    TooDeep,
    /// A JSON value that is neither a button object nor (in a matrix) a row.
    #[error("a {found} where a button was expected")]
    NotAButton {
        /// The JSON type found.
        found: &'static str,
    },
    /// `label`, `prompt` or `value` that is not a string.
    #[error("`{field}` is not a string")]
    FieldNotString {
        /// The key.
        field: &'static str,
    },
    /// Neither `label` nor `value`.
    #[error("the button has no label")]
    MissingLabel,
    /// Neither `prompt` nor `value`.
    #[error("the button has no prompt")]
    MissingPrompt,
    /// `[,{a}]`.
    #[error("comma before the first element at byte {at}")]
    LeadingComma {
        /// Offset.
        at: usize,
    },
    /// `[{a},,{b}]`.
    #[error("repeated comma at byte {at}")]
    RepeatedComma {
        /// Offset of the second comma.
        at: usize,
    },
    /// A character that cannot start or end an element here.
    #[error("unexpected {found:?} at byte {at}")]
    Unexpected {
        /// Offset.
        at: usize,
        /// The character.
        found: char,
    },
    /// A `[` that is never closed.
    #[error("the bracket at byte {at} is never closed")]
    Unclosed {
        /// Offset of the `[`.
        at: usize,
    },
    /// A `{` or `[` after one complete payload.
    #[error("trailing content at byte {at}")]
    TrailingContent {
        /// Offset.
        at: usize,
    },
    /// A `{` that is never closed (positional cell).
    #[error("the cell at byte {at} is never closed")]
    UnterminatedCell {
        /// Offset of the `{`.
        at: usize,
    },
    /// A third unescaped `|` in a positional cell.
    #[error("too many `|` separators at byte {at}")]
    TooManyAtoms {
        /// Offset of the separator.
        at: usize,
    },
    /// An empty (or all-whitespace) positional atom where one is needed.
    #[error("empty atom in the cell at byte {at}")]
    EmptyAtom {
        /// Offset of the cell's `{`.
        at: usize,
    },
    /// A third atom other than `primary`, `success`, `danger`.
    #[error("unknown style {style:?}")]
    UnknownStyle {
        /// The atom.
        style: String,
    },
    /// A backslash before anything but `|`, `}` or `\`.
    #[error("unknown escape \\{found} at byte {at}")]
    UnknownEscape {
        /// Offset of the backslash.
        at: usize,
        /// The escaped character.
        found: char,
    },
    /// A backslash at the very end.
    #[error("trailing backslash")]
    TrailingBackslash,
    /// A control character inside a positional atom.
    #[error("control character in the cell at byte {at}")]
    ControlCharacter {
        /// Offset of the cell's `{`.
        at: usize,
    },
    /// A cell that opens like a named JSON object but is not strict JSON.
    #[error("invalid JSON object at byte {at}: {message}")]
    InvalidJson {
        /// Offset of the `{`.
        at: usize,
        /// serde_json's account.
        message: String,
    },
    /// The attribute form is malformed.
    #[error(transparent)]
    Attributes(#[from] AttributeError),
}

impl From<CellError> for ButtonError {
    fn from(e: CellError) -> Self {
        match e {
            CellError::Unterminated { at } => ButtonError::UnterminatedCell { at },
            CellError::TooManyAtoms { at } => ButtonError::TooManyAtoms { at },
            CellError::UnknownEscape { at, found } => ButtonError::UnknownEscape { at, found },
            CellError::TrailingBackslash => ButtonError::TrailingBackslash,
            CellError::ControlCharacter { at } => ButtonError::ControlCharacter { at },
        }
    }
}

impl ButtonError {
    /// What went wrong, without any of pi's words or offsets (for the log and `status`).
    pub fn class(&self) -> &'static str {
        match self {
            ButtonError::Empty => "empty payload",
            ButtonError::NoPayload => "no payload",
            ButtonError::EmptyMatrix => "empty matrix",
            ButtonError::EmptyRow => "empty row",
            ButtonError::TooDeep => "a row nested in a row",
            ButtonError::NotAButton { .. } => "not a button",
            ButtonError::FieldNotString { .. } => "a field that is not a string",
            ButtonError::MissingLabel => "no label",
            ButtonError::MissingPrompt => "no prompt",
            ButtonError::LeadingComma { .. } => "comma before the first element",
            ButtonError::RepeatedComma { .. } => "repeated comma",
            ButtonError::Unexpected { .. } => "unexpected character",
            ButtonError::Unclosed { .. } => "unclosed bracket",
            ButtonError::TrailingContent { .. } => "a second payload after the first",
            ButtonError::UnterminatedCell { .. } => "unclosed cell",
            ButtonError::TooManyAtoms { .. } => "too many `|` separators",
            ButtonError::EmptyAtom { .. } => "empty atom",
            ButtonError::UnknownStyle { .. } => "unknown style",
            ButtonError::UnknownEscape { .. } => "unknown escape",
            ButtonError::TrailingBackslash => "trailing backslash",
            ButtonError::ControlCharacter { .. } => "control character in a cell",
            ButtonError::InvalidJson { .. } => "invalid JSON object",
            ButtonError::Attributes(e) => e.class(),
        }
    }
}

fn is_ws(b: u8) -> bool {
    cells::is_ws(b)
}

/// Parses a button payload (what follows the marker word) into rows. All or nothing: an
/// error means no buttons.
pub fn parse_buttons(payload: &str) -> Result<Rows, ButtonError> {
    let bytes = payload.as_bytes();
    let start = bytes.iter().take_while(|&&b| is_ws(b)).count();
    let end = bytes.len() - bytes.iter().rev().take_while(|&&b| is_ws(b)).count();
    if start >= end {
        return Err(ButtonError::Empty);
    }
    if cells::attribute_shaped(&payload[start..end]) {
        return from_attributes(payload);
    }
    // Offsets in errors stay offsets into the payload as given.
    let src = &payload[..end];
    let at = cells::first_bracket(src, start).ok_or(ButtonError::NoPayload)?;
    let mut json = serde_json::Deserializer::from_str(&src[at..]).into_iter::<Value>();
    if let Some(Ok(value)) = json.next() {
        let rows = rows_from_json(&value)?;
        tail(src, at + json.byte_offset())?;
        return Ok(rows);
    }
    let mut adaptive = Adaptive { src, pos: at };
    let rows = adaptive.payload()?;
    tail(src, adaptive.pos)?;
    Ok(rows)
}

/// The envelope after the payload: anything but another cell or row.
fn tail(src: &str, from: usize) -> Result<(), ButtonError> {
    match cells::first_bracket(src, from) {
        Some(at) => Err(ButtonError::TrailingContent { at }),
        None => Ok(()),
    }
}

fn from_attributes(payload: &str) -> Result<Rows, ButtonError> {
    let [label, prompt, value, style] =
        attrs::parse(payload, ["label", "prompt", "value", "selected_style"])?;
    let button = resolve(
        present(label),
        present(prompt),
        present(value),
        style.and_then(|s| Style::from_name(s.trim())),
    )?;
    Ok(vec![vec![button]])
}

fn resolve(
    label: Option<&str>,
    prompt: Option<&str>,
    value: Option<&str>,
    selected_style: Option<Style>,
) -> Result<ButtonSpec, ButtonError> {
    let label = label
        .or(value)
        .or(prompt)
        .ok_or(ButtonError::MissingLabel)?;
    let prompt = prompt.or(value).ok_or(ButtonError::MissingPrompt)?;
    Ok(ButtonSpec {
        label: label.to_owned(),
        prompt: prompt.to_owned(),
        selected_style,
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn button_from_json(map: &Map<String, Value>) -> Result<ButtonSpec, ButtonError> {
    fn field<'a>(
        map: &'a Map<String, Value>,
        field: &'static str,
    ) -> Result<Option<&'a str>, ButtonError> {
        match map.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(present(Some(s))),
            Some(_) => Err(ButtonError::FieldNotString { field }),
        }
    }
    let label = field(map, "label")?;
    let prompt = field(map, "prompt")?;
    let value = field(map, "value")?;
    let style = match map.get("selected_style") {
        Some(Value::String(s)) => Style::from_name(s.trim()),
        _ => None,
    };
    resolve(label, prompt, value, style)
}

fn rows_from_json(value: &Value) -> Result<Rows, ButtonError> {
    match value {
        Value::Object(map) => Ok(vec![vec![button_from_json(map)?]]),
        Value::Array(elements) => {
            if elements.is_empty() {
                return Err(ButtonError::EmptyMatrix);
            }
            elements
                .iter()
                .map(|element| match element {
                    Value::Object(map) => Ok(vec![button_from_json(map)?]),
                    Value::Array(cells) => {
                        if cells.is_empty() {
                            return Err(ButtonError::EmptyRow);
                        }
                        cells
                            .iter()
                            .map(|cell| match cell {
                                Value::Object(map) => button_from_json(map),
                                Value::Array(_) => Err(ButtonError::TooDeep),
                                other => Err(ButtonError::NotAButton {
                                    found: json_type(other),
                                }),
                            })
                            .collect()
                    }
                    other => Err(ButtonError::NotAButton {
                        found: json_type(other),
                    }),
                })
                .collect()
        }
        other => Err(ButtonError::NotAButton {
            found: json_type(other),
        }),
    }
}

/// The adaptive grammar over `src[pos..]` (`src` ends where the trimmed payload ends).
struct Adaptive<'a> {
    src: &'a str,
    pos: usize,
}

impl Adaptive<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.pos += 1;
        }
    }

    fn unexpected(&self) -> ButtonError {
        ButtonError::Unexpected {
            at: self.pos,
            found: cells::char_at(self.src, self.pos),
        }
    }

    /// One payload at `pos` (a `{` or `[`); `pos` ends just after it.
    fn payload(&mut self) -> Result<Rows, ButtonError> {
        match self.peek() {
            Some(b'[') => self.sequence(Self::matrix_element, ButtonError::EmptyMatrix),
            Some(b'{') => Ok(vec![vec![self.cell()?]]),
            Some(_) => Err(self.unexpected()),
            None => Err(ButtonError::Empty),
        }
    }

    /// `[` element (boundary element)* [`,`] `]`, at a `[`.
    fn sequence<T>(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Result<T, ButtonError>,
        empty: ButtonError,
    ) -> Result<Vec<T>, ButtonError> {
        let open = self.pos;
        self.pos += 1;
        self.skip_ws();
        let mut items = Vec::new();
        loop {
            match self.peek() {
                None => return Err(ButtonError::Unclosed { at: open }),
                Some(b']') => {
                    self.pos += 1;
                    return if items.is_empty() {
                        Err(empty)
                    } else {
                        Ok(items)
                    };
                }
                // Only reachable before the first element: the boundary below consumes the
                // single comma allowed after one.
                Some(b',') => return Err(ButtonError::LeadingComma { at: self.pos }),
                Some(_) => items.push(element(self)?),
            }
            self.skip_ws();
            if self.peek() == Some(b',') {
                self.pos += 1;
                self.skip_ws();
                // One comma before `]` is the trailing comma models write; the loop closes.
                if self.peek() == Some(b',') {
                    return Err(ButtonError::RepeatedComma { at: self.pos });
                }
            }
        }
    }

    fn matrix_element(&mut self) -> Result<Vec<ButtonSpec>, ButtonError> {
        match self.peek() {
            Some(b'{') => Ok(vec![self.cell()?]),
            Some(b'[') => self.sequence(Self::row_element, ButtonError::EmptyRow),
            _ => Err(self.unexpected()),
        }
    }

    fn row_element(&mut self) -> Result<ButtonSpec, ButtonError> {
        match self.peek() {
            Some(b'{') => self.cell(),
            Some(b'[') => Err(ButtonError::TooDeep),
            _ => Err(self.unexpected()),
        }
    }

    /// A cell, at a `{`.
    fn cell(&mut self) -> Result<ButtonSpec, ButtonError> {
        if cells::opens_named_json(self.src, self.pos) {
            self.json_cell()
        } else {
            self.positional_cell()
        }
    }

    fn json_cell(&mut self) -> Result<ButtonSpec, ButtonError> {
        let at = self.pos;
        let mut stream =
            serde_json::Deserializer::from_str(&self.src[at..]).into_iter::<Map<String, Value>>();
        match stream.next() {
            Some(Ok(map)) => {
                self.pos = at + stream.byte_offset();
                button_from_json(&map)
            }
            Some(Err(e)) => Err(ButtonError::InvalidJson {
                at,
                message: e.to_string(),
            }),
            None => Err(ButtonError::UnterminatedCell { at }),
        }
    }

    fn positional_cell(&mut self) -> Result<ButtonSpec, ButtonError> {
        let open = self.pos;
        let cell = cells::positional(self.src, open)?;
        self.pos = cell.end;
        let empty = ButtonError::EmptyAtom { at: open };
        fn given(atom: &str) -> Option<&str> {
            (!atom.is_empty()).then_some(atom)
        }
        match &cell.atoms[..] {
            [value] => resolve(None, None, Some(given(value).ok_or(empty)?), None),
            [label, prompt] => resolve(given(label), Some(given(prompt).ok_or(empty)?), None, None),
            [label, prompt, style] => {
                let prompt = given(prompt).ok_or(empty.clone())?;
                let style = given(style).ok_or(empty)?;
                let style = Style::from_name(style).ok_or_else(|| ButtonError::UnknownStyle {
                    style: style.to_owned(),
                })?;
                resolve(given(label), Some(prompt), None, Some(style))
            }
            // The separator check caps the count at three; an empty list cannot occur.
            _ => Err(ButtonError::TooManyAtoms { at: open }),
        }
    }
}

/// Whether a button's prompt is the reference system's Generative App action,
/// `app::method` or `app::method(<JSON>)`: there it bypasses the model; this hub does not run
/// Generative Apps, so such a button is refused when tapped instead of reaching pi as a prompt.
pub fn is_app_action(prompt: &str) -> bool {
    let p = prompt.trim();
    let Some((app, rest)) = p.split_once("::") else {
        return false;
    };
    let name = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    };
    let method = match rest.split_once('(') {
        Some((m, args)) if args.ends_with(')') => m,
        Some(_) => return false,
        None => rest,
    };
    name(app) && name(method)
}

#[cfg(test)]
mod app_action_tests {
    use super::is_app_action;

    #[test]
    fn tells_a_generative_app_action_from_a_prompt() {
        for yes in [
            "todo::add",
            "todo::add({\"text\":\"milk\"})",
            " game-2::move(3) ",
        ] {
            assert!(is_app_action(yes), "{yes}");
        }
        for no in [
            "run the tests",
            "std::mem::take is what?",
            "::add",
            "todo::",
            "todo::add(",
            "see a::b for details",
            "1x::y",
        ] {
            assert!(!is_app_action(no), "{no}");
        }
    }
}
