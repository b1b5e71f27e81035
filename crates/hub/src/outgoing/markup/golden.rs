//! Golden tables: every example of the reference's Compact Matrix Literal document (CML v3),
//! the forms 0.42.0–0.42.2 added (noisy envelopes, trailing commas, prompt-only cells, voice
//! cells, the comment membrane), each with what it must read as or why it is refused. A
//! refusal is named by its class (`ButtonError::class`, `VoiceError::class`), which is what
//! the log and `status` show.

use super::*;

/// A button as the tables write it: label, prompt, style ("" for none).
type B = (&'static str, &'static str, &'static str);

enum Want {
    Rows(&'static [&'static [B]]),
    Refused(&'static str),
}
use Want::{Refused, Rows as R};

fn spec(&(label, prompt, style): &B) -> ButtonSpec {
    ButtonSpec {
        label: label.into(),
        prompt: prompt.into(),
        selected_style: Style::from_name(style),
    }
}

fn want_rows(rows: &[&[B]]) -> Rows {
    rows.iter()
        .map(|row| row.iter().map(spec).collect())
        .collect()
}

const PAUSE_NEXT_STATUS: &[&[B]] = &[
    &[("Pause", "music::pause", ""), ("Next", "Next", "")],
    &[("Status", "Status", "")],
];
const UP_PAGES_ETC: &[&[B]] = &[
    &[("⬆️ Up", "/", "")],
    &[("⬅️", "page-1", ""), ("➡️", "page-3", "")],
    &[("📁 etc", "/etc", "")],
];

/// `telegram_button` payloads.
const BUTTONS: &[(&str, Want)] = &[
    // compact-matrix-literal.md, "Data Model": the four compression steps read the same.
    (
        r#"[[{"label":"Pause","prompt":"music::pause"},{"value":"Next"}],{"value":"Status"}]"#,
        R(PAUSE_NEXT_STATUS),
    ),
    (
        r#"[[{"label":"Pause","prompt":"music::pause"}{"value":"Next"}]{"value":"Status"}]"#,
        R(PAUSE_NEXT_STATUS),
    ),
    (
        r#"[[{"label":"Pause","prompt":"music::pause"},{Next}],{Status}]"#,
        R(PAUSE_NEXT_STATUS),
    ),
    (
        "[[{Pause|music::pause}{Next}]{Status}]",
        R(PAUSE_NEXT_STATUS),
    ),
    // Named and positional cells in one row.
    (
        r#"[[{"label":"Open","prompt":"/tmp"}{Back|/}]]"#,
        R(&[&[("Open", "/tmp", ""), ("Back", "/", "")]]),
    ),
    // "Positional Cells".
    ("{Next}", R(&[&[("Next", "Next", "")]])),
    (
        "{Pause|music::pause}",
        R(&[&[("Pause", "music::pause", "")]]),
    ),
    (
        "{Stop|music::stop|danger}",
        R(&[&[("Stop", "music::stop", "danger")]]),
    ),
    ("{Go|go|primary}", R(&[&[("Go", "go", "primary")]])),
    ("{Go|go|success}", R(&[&[("Go", "go", "success")]])),
    // "Telegram Profile" example.
    (
        r#"[{⬆️ Up|/},[{⬅️|page-1}{➡️|page-3}],{"label":"📁 etc","prompt":"/etc"}]"#,
        R(UP_PAGES_ETC),
    ),
    (
        "[{⬆️ Up|/}[{⬅️|page-1}{➡️|page-3}]{📁 etc|/etc}]",
        R(UP_PAGES_ETC),
    ),
    // "Atoms, Whitespace, And Escapes".
    (r"{a\|b|c\}d}", R(&[&[("a|b", "c}d", "")]])),
    (
        r"{back\\slash}",
        R(&[&[(r"back\slash", r"back\slash", "")]]),
    ),
    (
        "{  Hello   world \t| \n prompt  here \r\n}",
        R(&[&[("Hello   world", "prompt  here", "")]]),
    ),
    (
        r#"[{a, b: "c" [d]|e, f}]"#,
        R(&[&[(r#"a, b: "c" [d]"#, "e, f", "")]]),
    ),
    // "Conformance", accepted classes: commas, none, a mixture; Unicode; wide rows.
    (
        "[[{a},{b}],{c}]",
        R(&[&[("a", "a", ""), ("b", "b", "")], &[("c", "c", "")]]),
    ),
    (
        "[[{a}{b}]{c}]",
        R(&[&[("a", "a", ""), ("b", "b", "")], &[("c", "c", "")]]),
    ),
    (
        "[[{a} ,{b}]\n{c}]",
        R(&[&[("a", "a", ""), ("b", "b", "")], &[("c", "c", "")]]),
    ),
    ("{Привет 👋|日本語}", R(&[&[("Привет 👋", "日本語", "")]])),
    // Strict JSON.
    (
        r#"{"label":"Continue","prompt":"Continue with the current plan.","selected_style":"primary"}"#,
        R(&[&[("Continue", "Continue with the current plan.", "primary")]]),
    ),
    (r#"{"value":"Done"}"#, R(&[&[("Done", "Done", "")]])),
    (
        r#"[[{"value":"Approve"},{"value":"Reject"}]]"#,
        R(&[&[("Approve", "Approve", ""), ("Reject", "Reject", "")]]),
    ),
    (
        r#"label="Show risks" prompt="List the main risks first." selected_style="danger""#,
        R(&[&[("Show risks", "List the main risks first.", "danger")]]),
    ),
    // 0.42.1: prompt-only cells, the prompt also the label, as prompt-only JSON.
    (
        "{|Tell me more}",
        R(&[&[("Tell me more", "Tell me more", "")]]),
    ),
    (
        "{|ship it|success}",
        R(&[&[("ship it", "ship it", "success")]]),
    ),
    (
        r#"{"prompt":"ship it"}"#,
        R(&[&[("ship it", "ship it", "")]]),
    ),
    (
        "[[{|yes}{No|no|danger}]]",
        R(&[&[("yes", "yes", ""), ("No", "no", "danger")]]),
    ),
    // 0.42.0: one trailing comma before `]`.
    ("[{a},]", R(&[&[("a", "a", "")]])),
    (
        "[[{a},{b},],{c},]",
        R(&[&[("a", "a", ""), ("b", "b", "")], &[("c", "c", "")]]),
    ),
    (r#"[{"value":"a"},]"#, R(&[&[("a", "a", "")]])),
    // 0.42.0: noisy envelopes: text before the first bracket, noise after the payload.
    (
        "Pick one: [{Yes}{No}]",
        R(&[&[("Yes", "Yes", "")], &[("No", "No", "")]]),
    ),
    (
        "[{Yes}{No}] (two choices)",
        R(&[&[("Yes", "Yes", "")], &[("No", "No", "")]]),
    ),
    ("[{Yes}],", R(&[&[("Yes", "Yes", "")]])),
    ("{Yes},", R(&[&[("Yes", "Yes", "")]])),
    ("[[{a}{b}]]]", R(&[&[("a", "a", ""), ("b", "b", "")]])),
    ("[{a}]]] ,", R(&[&[("a", "a", "")]])),
    (r#"buttons: {"value":"Go"} ok"#, R(&[&[("Go", "Go", "")]])),
    // "Conformance", rejected classes.
    ("", Refused("empty payload")),
    ("[]", Refused("empty matrix")),
    ("[[]]", Refused("empty row")),
    ("[{a},[]]", Refused("empty row")),
    ("[{a}{}]", Refused("empty atom")),
    ("{x|}", Refused("empty atom")),
    ("{|}", Refused("empty atom")),
    ("{x|y|}", Refused("empty atom")),
    ("{|x|}", Refused("empty atom")),
    ("{x||primary}", Refused("empty atom")),
    (r#"{"label":"x","prompt":" "}"#, Refused("no prompt")),
    (r#"{"value":""}"#, Refused("no label")),
    ("[,{a}]", Refused("comma before the first element")),
    ("[{a},,{b}]", Refused("repeated comma")),
    ("[{a},,]", Refused("repeated comma")),
    (
        r#"{"label":"A" "prompt":"B"}"#,
        Refused("invalid JSON object"),
    ),
    (
        r#"[{"label":"A" "prompt":"B"}, {B}]"#,
        Refused("invalid JSON object"),
    ),
    (r#"[{"value":"x",}]"#, Refused("invalid JSON object")),
    ("[[[{a}]]]", Refused("a row nested in a row")),
    ("[[{a}[{b}]]]", Refused("a row nested in a row")),
    ("[{a}", Refused("unclosed bracket")),
    ("[[{a}]", Refused("unclosed bracket")),
    ("[{a]}", Refused("unclosed bracket")),
    ("{a", Refused("unclosed cell")),
    ("[{a|b]", Refused("unclosed cell")),
    ("[{a}}]", Refused("unexpected character")),
    ("[x]", Refused("unexpected character")),
    ("{a|b|primary|x}", Refused("too many `|` separators")),
    ("{a|b|blue}", Refused("unknown style")),
    ("{a|b|Primary}", Refused("unknown style")),
    (r"{a\nb}", Refused("unknown escape")),
    ("{a\\", Refused("trailing backslash")),
    ("{a\tb}", Refused("control character in a cell")),
    ("{a\u{7f}b}", Refused("control character in a cell")),
    ("{a} {b}", Refused("a second payload after the first")),
    ("[{a}] [{b}]", Refused("a second payload after the first")),
    ("Pick [one] [{a}]", Refused("unexpected character")),
    ("[1]", Refused("not a button")),
    (r#"["{a}"]"#, Refused("not a button")),
    (r#"{"foo":"bar"}"#, Refused("no label")),
    (
        r#"{"label":5,"prompt":"x"}"#,
        Refused("a field that is not a string"),
    ),
    ("Continue", Refused("no payload")),
    (
        "label='a' prompt='b'",
        Refused("malformed attributes: single quotes"),
    ),
    (
        "label=a prompt=b",
        Refused("malformed attributes: an unquoted value"),
    ),
];

/// `telegram_voice` payloads: text, lang, rate ("" for none).
/// A voice as the tables write it (text, lang, rate), or the class of its refusal.
type V = Result<(&'static str, &'static str, &'static str), &'static str>;

const VOICES: &[(&str, V)] = &[
    // outbound.md's two forms.
    (
        r#"{"value":"Short spoken companion summary.","lang":"ru","rate":"+30%"}"#,
        Ok(("Short spoken companion summary.", "ru", "+30%")),
    ),
    (
        r#"text="Short spoken companion summary." lang="ru" rate="+30%""#,
        Ok(("Short spoken companion summary.", "ru", "+30%")),
    ),
    // 0.42.0 voice cells.
    ("{Hello}", Ok(("Hello", "", ""))),
    ("{Привет|ru}", Ok(("Привет", "ru", ""))),
    ("{Hi|en|+20%}", Ok(("Hi", "en", "+20%"))),
    (r"{50\|50|en}", Ok(("50|50", "en", ""))),
    // Noisy envelopes.
    ("say: {Hello|en}", Ok(("Hello", "en", ""))),
    ("{Hello}, ]", Ok(("Hello", "", ""))),
    (r#"voice {"text":"Hi"} please"#, Ok(("Hi", "", ""))),
    // Refused.
    ("", Err("empty payload")),
    ("{}", Err("nothing to say")),
    ("{|en}", Err("empty atom")),
    ("{Hi|}", Err("empty atom")),
    ("{Hi|en|}", Err("empty atom")),
    ("[{Hi}]", Err("a matrix")),
    (r#"[{"text":"Hi"}]"#, Err("a matrix")),
    ("{Hi} {there}", Err("a second payload after the first")),
    (r#"{"text":"Hi",}"#, Err("invalid JSON object")),
    ("{a|b|c|d}", Err("too many `|` separators")),
    ("{Hi\nthere}", Err("control character in a cell")),
    ("Hello there", Err("no payload")),
    ("text='x'", Err("malformed attributes: single quotes")),
];

#[test]
fn button_payloads() {
    for (payload, want) in BUTTONS {
        let got = parse_buttons(payload);
        match (want, &got) {
            (R(rows), Ok(got)) => assert_eq!(got, &want_rows(rows), "{payload:?}"),
            (Refused(class), Err(e)) => assert_eq!(e.class(), *class, "{payload:?}: {e}"),
            _ => panic!("{payload:?}: got {got:?}"),
        }
        // The same payload in an answer: all or nothing, and the comment never shows.
        let answer = format!("Text\n\n<!-- telegram_button {payload} -->\n");
        let extracted = extract(&answer);
        assert_eq!(extracted.text, "Text\n", "{answer:?}");
        match want {
            R(rows) => assert_eq!(extracted.buttons, want_rows(rows), "{answer:?}"),
            Refused(class) => {
                assert!(extracted.buttons.is_empty(), "{answer:?}");
                let classes: Vec<_> = extracted
                    .rejected
                    .iter()
                    .map(|r| r.reason.class())
                    .collect();
                assert_eq!(classes, [*class], "{answer:?}");
            }
        }
    }
}

#[test]
fn voice_payloads() {
    for (payload, want) in VOICES {
        let got = parse_voice(payload);
        match (want, &got) {
            (Ok((text, lang, rate)), Ok(got)) => {
                let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
                assert_eq!(
                    got,
                    &VoiceSpec {
                        text: (*text).into(),
                        lang: opt(lang),
                        rate: opt(rate),
                    },
                    "{payload:?}"
                );
            }
            (Err(class), Err(e)) => assert_eq!(e.class(), *class, "{payload:?}: {e}"),
            _ => panic!("{payload:?}: got {got:?}"),
        }
        let extracted = extract(&format!("<!-- telegram_voice {payload} -->"));
        assert_eq!(extracted.text, "");
        assert_eq!(
            extracted.voices.len(),
            usize::from(want.is_ok()),
            "{payload:?}"
        );
    }
}

/// Answers through [`extract`]: the text the person gets, buttons (rows of labels), voices
/// (texts), and the refusals (`Rejected::summary`).
/// An answer, its text, button labels by row, voice texts, refusal summaries.
type A = (
    &'static str,
    &'static str,
    &'static [&'static [&'static str]],
    &'static [&'static str],
    &'static [&'static str],
);

const ANSWERS: &[A] = &[
    // A mid-line comment.
    (
        "Done <!-- a note --> here.\n",
        "Done here.\n",
        &[],
        &[],
        &[],
    ),
    ("Done. <!-- a note -->\n", "Done.\n", &[], &[], &[]),
    ("Done.<!--x-->\nNext\n", "Done.\nNext\n", &[], &[], &[]),
    // In a list item, and a list item that is only a comment.
    ("- one <!-- 1 -->\n- two\n", "- one\n- two\n", &[], &[], &[]),
    (
        "- one\n- <!-- gone -->\n- two\n",
        "- one\n- two\n",
        &[],
        &[],
        &[],
    ),
    (
        "1. one\n\n   <!-- in the item -->\n2. two\n",
        "1. one\n\n2. two\n",
        &[],
        &[],
        &[],
    ),
    // In a quote, a heading, a table cell.
    ("> a\n> <!-- q -->\n> b\n", "> a\n> b\n", &[], &[], &[]),
    ("# Title <!-- t -->\n", "# Title\n", &[], &[], &[]),
    (
        "| a | b <!-- c --> |\n|---|---|\n",
        "| a | b |\n|---|---|\n",
        &[],
        &[],
        &[],
    ),
    // In code it is what pi shows.
    (
        "```html\n<!-- kept -->\n```\n",
        "```html\n<!-- kept -->\n```\n",
        &[],
        &[],
        &[],
    ),
    (
        "Use `<!-- x -->` to hide.\n",
        "Use `<!-- x -->` to hide.\n",
        &[],
        &[],
        &[],
    ),
    (
        "Text\n\n    <!-- indented code -->\n",
        "Text\n\n    <!-- indented code -->\n",
        &[],
        &[],
        &[],
    ),
    (r"\<!-- escaped -->", r"\<!-- escaped -->", &[], &[], &[]),
    // Never closed: the rest stays hidden.
    (
        "Answer. <!-- being written\n\nmore text\n",
        "Answer.\n",
        &[],
        &[],
        &[],
    ),
    (
        "Answer.\n\n<!-- telegram_button [{a}\n",
        "Answer.\n",
        &[],
        &[],
        &["line 3: telegram_button: never closed"],
    ),
    // Comments only: nothing to show.
    ("<!-- a -->\n\n<!-- b -->\n", "", &[], &[], &[]),
    ("<!-- telegram_voice {Hi|en} -->", "", &[], &["Hi"], &[]),
    // Buttons only get the heading; a comment between does not matter.
    (
        "<!-- note -->\n<!-- telegram_button [{|yes}{|no}] -->",
        BUTTON_ONLY_HEADING,
        &[&["yes"], &["no"]],
        &[],
        &[],
    ),
    // A comment that swallowed a fence's opening line: what is left is read again.
    (
        "a <!-- x\n\n```\n--> b\n<!-- y -->\n",
        "a b\n",
        &[],
        &[],
        &[],
    ),
    // Action comments where they do not act: removed and named.
    (
        "Pick: <!-- telegram_button {Yes} -->\n",
        "Pick:\n",
        &[],
        &[],
        &["line 1: telegram_button: not at the start of a top-level line"],
    ),
    (
        "- <!-- telegram_voice {Hi} -->\n",
        "",
        &[],
        &[],
        &["line 1: telegram_voice: not at the start of a top-level line"],
    ),
    // A malformed one never shows and registers nothing; the good one beside it acts.
    (
        "Choose.\n<!-- telegram_button [{a}{b|c|nope}] -->\n<!-- telegram_button [{d},] -->\n",
        "Choose.\n",
        &[&["d"]],
        &[],
        &["line 2: telegram_button: unknown style"],
    ),
    // Noisy envelopes inside comments, glued markers.
    (
        "<!-- telegram_button Options: [{Yes},{No},] (pick) -->\nOK\n",
        "OK\n",
        &[&["Yes"], &["No"]],
        &[],
        &[],
    ),
    (
        "<!-- telegram_voice{Привет|ru} -->\nOK",
        "OK",
        &[],
        &["Привет"],
        &[],
    ),
];

#[test]
fn answers() {
    for (answer, text, buttons, voices, rejected) in ANSWERS {
        let got = extract(answer);
        assert_eq!(got.text, *text, "{answer:?}");
        let labels: Vec<Vec<&str>> = got
            .buttons
            .iter()
            .map(|row| row.iter().map(|b| b.label.as_str()).collect())
            .collect();
        assert_eq!(labels, *buttons, "{answer:?}");
        let said: Vec<&str> = got.voices.iter().map(|v| v.text.as_str()).collect();
        assert_eq!(said, *voices, "{answer:?}");
        let summaries: Vec<String> = got.rejected.iter().map(Rejected::summary).collect();
        assert_eq!(summaries, *rejected, "{answer:?}");
        // Nothing that reads as a comment is left, and `visible` agrees where nothing acts.
        assert!(
            comments::outside_code(&got.text).comments.is_empty(),
            "{answer:?}"
        );
        if got.buttons.is_empty() {
            assert_eq!(visible(answer), got.text, "{answer:?}");
        }
    }
}

#[test]
fn previews_hold_back_an_opener_being_typed() {
    for (partial, shown) in [
        ("Done <", "Done "),
        ("Done <!", "Done "),
        ("Done <!-", "Done "),
        ("Done <!--", "Done"),
        ("Done <!-- telegram_button [{a", "Done"),
        ("Done <!-- x --> and", "Done and"),
        ("a < b", "a < b"),
    ] {
        assert_eq!(visible_so_far(partial), shown, "{partial:?}");
    }
}
