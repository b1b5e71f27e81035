//! Property tests: `extract` never panics, leaves comment-free text untouched and leaves no
//! comment outside code; any button matrix reads the same whether written as JSON, CML, or a
//! mix, with any boundaries.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::*;

/// Text made of the pieces the scanner and parsers care about.
fn arb_answer() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<!--".to_owned()),
        Just("-->".to_owned()),
        Just("<!-- telegram_button ".to_owned()),
        Just("<!-- telegram_buttons ".to_owned()),
        Just("<!-- telegram_voice ".to_owned()),
        Just("telegram_button".to_owned()),
        Just(":".to_owned()),
        Just("\n".to_owned()),
        Just("\r\n".to_owned()),
        Just("\n\n".to_owned()),
        Just("```".to_owned()),
        Just("~~~".to_owned()),
        Just("    ".to_owned()),
        Just("\t".to_owned()),
        Just("> ".to_owned()),
        Just("- ".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("|".to_owned()),
        Just("\\".to_owned()),
        Just(",".to_owned()),
        Just("\"".to_owned()),
        Just("label=\"x\" ".to_owned()),
        Just("text=\"t\" ".to_owned()),
        Just("{\"value\":\"v\"}".to_owned()),
        Just("{\"label\":".to_owned()),
        Just("|primary".to_owned()),
        any::<char>().prop_map(String::from),
        "[a-z ]{0,6}",
    ];
    prop::collection::vec(piece, 0..48).prop_map(|pieces| pieces.concat())
}

/// One button as written: label, prompt, style, and whether it is written as JSON.
#[derive(Debug, Clone)]
struct Cell {
    label: String,
    prompt: String,
    style: Option<Style>,
    json: bool,
}

impl Cell {
    fn spec(&self) -> ButtonSpec {
        ButtonSpec {
            label: self.label.clone(),
            prompt: self.prompt.clone(),
            selected_style: self.style,
        }
    }

    fn to_json(&self) -> String {
        let mut map = Map::new();
        if self.label == self.prompt && self.style.is_none() {
            map.insert("value".into(), Value::String(self.label.clone()));
        } else {
            map.insert("label".into(), Value::String(self.label.clone()));
            map.insert("prompt".into(), Value::String(self.prompt.clone()));
        }
        if let Some(style) = self.style {
            map.insert("selected_style".into(), Value::String(style.name().into()));
        }
        Value::Object(map).to_string()
    }

    fn to_cml(&self) -> String {
        fn esc(s: &str) -> String {
            s.replace('\\', "\\\\")
                .replace('|', "\\|")
                .replace('}', "\\}")
        }
        match self.style {
            Some(style) => format!(
                "{{{}|{}|{}}}",
                esc(&self.label),
                esc(&self.prompt),
                style.name()
            ),
            None if self.label == self.prompt => format!("{{{}}}", esc(&self.label)),
            None => format!("{{{}|{}}}", esc(&self.label), esc(&self.prompt)),
        }
    }
}

#[derive(Debug, Clone)]
enum Element {
    Single(Cell),
    Row(Vec<Cell>),
}

/// A trimmed, non-empty atom of printable text, including the structural characters. It
/// does not start with `"` (a positional cell opening like `{"key":` would be taken as JSON).
fn arb_atom() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        10 => prop::char::range('a', 'z'),
        2 => Just(' '),
        1 => prop::sample::select(vec![
            '|', '}', '{', '\\', ',', '"', ':', '[', ']', '/', '\'', '<', '>', '&', '=',
            'é', 'Ж', '⬆', '\u{fe0f}', '📁', '👋',
        ]),
    ];
    prop::collection::vec(ch, 1..10)
        .prop_map(|chars| chars.into_iter().collect::<String>().trim().to_owned())
        .prop_filter("a usable atom", |s| !s.is_empty() && !s.starts_with('"'))
}

fn arb_cell() -> impl Strategy<Value = Cell> {
    (
        arb_atom(),
        prop::option::of(arb_atom()),
        prop::option::of(prop::sample::select(vec![
            Style::Primary,
            Style::Success,
            Style::Danger,
        ])),
        any::<bool>(),
    )
        .prop_map(|(label, prompt, style, json)| Cell {
            prompt: prompt.unwrap_or_else(|| label.clone()),
            label,
            style,
            json,
        })
}

fn arb_matrix() -> impl Strategy<Value = Vec<Element>> {
    let element = prop_oneof![
        arb_cell().prop_map(Element::Single),
        prop::collection::vec(arb_cell(), 1..6).prop_map(Element::Row),
    ];
    prop::collection::vec(element, 1..6)
}

/// Separators between elements, one per possible boundary (cycled).
fn arb_separators() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(
        prop::sample::select(vec![",", "", " ", ", ", "\n", " ,\n  ", "\t"]),
        1..8,
    )
}

#[derive(Debug, Clone, Copy)]
enum Form {
    /// Every cell JSON.
    Json,
    /// Every cell positional.
    Cml,
    /// Each cell as its `json` flag says.
    Mixed,
}

fn render(matrix: &[Element], form: Form, seps: &[&str]) -> String {
    let mut boundary = 0;
    let mut next_sep = || {
        boundary += 1;
        seps.get(boundary % seps.len().max(1))
            .copied()
            .unwrap_or(",")
    };
    let cell = |c: &Cell| match form {
        Form::Json => c.to_json(),
        Form::Cml => c.to_cml(),
        Form::Mixed if c.json => c.to_json(),
        Form::Mixed => c.to_cml(),
    };
    let mut out = String::from("[");
    for (i, element) in matrix.iter().enumerate() {
        if i > 0 {
            out.push_str(next_sep());
        }
        match element {
            Element::Single(c) => out.push_str(&cell(c)),
            Element::Row(cells) => {
                out.push('[');
                for (j, c) in cells.iter().enumerate() {
                    if j > 0 {
                        out.push_str(next_sep());
                    }
                    out.push_str(&cell(c));
                }
                out.push(']');
            }
        }
    }
    out.push(']');
    out
}

fn expected(matrix: &[Element]) -> Rows {
    matrix
        .iter()
        .map(|element| match element {
            Element::Single(c) => vec![c.spec()],
            Element::Row(cells) => cells.iter().map(Cell::spec).collect(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn extract_never_panics_and_keeps_comment_free_text(src in arb_answer()) {
        let got = extract(&src);
        if !src.contains("<!--") {
            prop_assert_eq!(&got.text, &src);
            prop_assert_eq!(got.hidden, 0);
        }
        // Nothing that reads as a comment is left for the person to see.
        prop_assert!(comments::outside_code(&got.text).comments.is_empty(), "{:?}", got.text);
        prop_assert!(comments::outside_code(&visible(&src)).comments.is_empty());
        if !got.buttons.is_empty() {
            prop_assert!(!got.text.trim().is_empty());
        }
    }

    #[test]
    fn extract_never_panics_on_arbitrary_text(src in any::<String>()) {
        let _ = extract(&src);
        let _ = parse_buttons(&src);
        let _ = parse_voice(&src);
    }

    #[test]
    fn every_form_reads_the_same(matrix in arb_matrix(), seps in arb_separators()) {
        let want = expected(&matrix);
        // Strict JSON (commas everywhere) and every adaptive rendering.
        let strict = render(&matrix, Form::Json, &[","]);
        prop_assert!(serde_json::from_str::<Value>(&strict).is_ok());
        let sources = [
            strict,
            render(&matrix, Form::Json, &seps),
            render(&matrix, Form::Cml, &seps),
            render(&matrix, Form::Cml, &[","]),
            render(&matrix, Form::Mixed, &seps),
        ];
        for source in &sources {
            match parse_buttons(source) {
                Ok(rows) => prop_assert_eq!(&rows, &want, "{}", source),
                Err(e) => prop_assert!(false, "{} refused: {}", source, e),
            }
            // The same payload inside an answer.
            let answer = format!("Text\n\n<!-- telegram_button {source} -->\n");
            let got = extract(&answer);
            prop_assert_eq!(&got.buttons, &want, "{}", answer);
            prop_assert_eq!(got.text, "Text\n");
        }
    }

    #[test]
    fn a_single_cell_reads_the_same_in_every_form(cell in arb_cell()) {
        let want = vec![vec![cell.spec()]];
        for source in [cell.to_json(), cell.to_cml()] {
            match parse_buttons(&source) {
                Ok(rows) => prop_assert_eq!(&rows, &want, "{}", source),
                Err(e) => prop_assert!(false, "{} refused: {}", source, e),
            }
        }
    }
}
