//! Unit tests: the button grammar (accepted and rejected classes), where comments count,
//! stripping, voice, and pathological inputs.

use super::*;

fn b(label: &str, prompt: &str) -> ButtonSpec {
    ButtonSpec {
        label: label.into(),
        prompt: prompt.into(),
        selected_style: None,
    }
}

fn styled(label: &str, prompt: &str, style: Style) -> ButtonSpec {
    ButtonSpec {
        selected_style: Some(style),
        ..b(label, prompt)
    }
}

fn v(value: &str) -> ButtonSpec {
    b(value, value)
}

fn rows(payload: &str) -> Rows {
    parse_buttons(payload).unwrap_or_else(|e| panic!("{payload:?}: {e}"))
}

fn err(payload: &str) -> ButtonError {
    match parse_buttons(payload) {
        Ok(rows) => panic!("{payload:?} was accepted: {rows:?}"),
        Err(e) => e,
    }
}

fn voice(text: &str, lang: Option<&str>, rate: Option<&str>) -> VoiceSpec {
    VoiceSpec {
        text: text.into(),
        lang: lang.map(Into::into),
        rate: rate.map(Into::into),
    }
}

mod accepted {
    use super::*;

    #[test]
    fn strict_json_object() {
        assert_eq!(
            rows(
                r#"{"label":"Continue","prompt":"Continue with the current plan.","selected_style":"primary"}"#
            ),
            [[styled(
                "Continue",
                "Continue with the current plan.",
                Style::Primary
            )]]
        );
        assert_eq!(rows(r#"{"value":"Done"}"#), [[v("Done")]]);
    }

    #[test]
    fn strict_json_matrices() {
        assert_eq!(
            rows(
                r#"[{"label":"⬆️ Up","prompt":"/"},[{"value":"⬅️ Previous"},{"value":"➡️ Next"}],{"label":"📁 etc","prompt":"/etc"}]"#
            ),
            vec![
                vec![b("⬆️ Up", "/")],
                vec![v("⬅️ Previous"), v("➡️ Next")],
                vec![b("📁 etc", "/etc")],
            ]
        );
        assert_eq!(
            rows(r#"[[{"value":"Approve"},{"value":"Reject"}]]"#),
            [[v("Approve"), v("Reject")]]
        );
    }

    #[test]
    fn json_value_fallback_and_precedence() {
        assert_eq!(rows(r#"{"label":"L","value":"V"}"#), [[b("L", "V")]]);
        assert_eq!(rows(r#"{"prompt":"P","value":"V"}"#), [[b("V", "P")]]);
        assert_eq!(
            rows(r#"{"label":"L","prompt":"P","value":"V"}"#),
            [[b("L", "P")]]
        );
        // Trimmed; an empty explicit field falls back to value.
        assert_eq!(
            rows(r#"{"label":"  L  ","prompt":" ","value":" V "}"#),
            [[b("L", "V")]]
        );
        // Unknown keys are ignored; multi-line prompts travel as JSON escapes.
        assert_eq!(
            rows(r#"{"value":"x","disabled":true,"extra":{"a":[1]}}"#),
            [[v("x")]]
        );
        assert_eq!(
            rows(r#"{"label":"x","prompt":"one\ntwo"}"#),
            [[b("x", "one\ntwo")]]
        );
    }

    #[test]
    fn invalid_named_style_falls_back_to_default() {
        for payload in [
            r#"{"value":"x","selected_style":"purple"}"#,
            r#"{"value":"x","selected_style":"Primary"}"#,
            r#"{"value":"x","selected_style":5}"#,
            r#"{"value":"x","selected_style":null}"#,
            r#"value="x" selected_style="blue""#,
            r#"value="x" selected_style="""#,
        ] {
            let got = rows(payload);
            assert_eq!(got, [[v("x")]], "{payload}");
            assert_eq!(got[0][0].style(), Style::Primary);
        }
        let got = rows(r#"{"value":"x","selected_style":" success "}"#);
        assert_eq!(got, [[styled("x", "x", Style::Success)]]);
    }

    #[test]
    fn attributes() {
        assert_eq!(
            rows(
                r#"label="Show risks" prompt="List the main risks first." selected_style="danger""#
            ),
            [[styled(
                "Show risks",
                "List the main risks first.",
                Style::Danger
            )]]
        );
        assert_eq!(rows(r#"value="Done""#), [[v("Done")]]);
        assert_eq!(rows(r#"  value = "Done"  "#), [[v("Done")]]);
        assert_eq!(rows(r#"prompt="p" value="V""#), [[b("V", "p")]]);
        assert_eq!(
            rows("label=\"a, {b}|[c]\"\nprompt=\"d\""),
            [[b("a, {b}|[c]", "d")]]
        );
    }

    #[test]
    fn positional_cells() {
        assert_eq!(rows("{Next}"), [[v("Next")]]);
        assert_eq!(rows("{Pause|music::pause}"), [[b("Pause", "music::pause")]]);
        assert_eq!(
            rows("{Stop|music::stop|danger}"),
            [[styled("Stop", "music::stop", Style::Danger)]]
        );
        assert_eq!(
            rows("[{a|b|primary}{c|d|success}{e|f|danger}]"),
            vec![
                vec![styled("a", "b", Style::Primary)],
                vec![styled("c", "d", Style::Success)],
                vec![styled("e", "f", Style::Danger)],
            ]
        );
    }

    #[test]
    fn commas_optional_between_elements() {
        let want = vec![vec![v("a"), v("b")], vec![v("c")], vec![v("d")]];
        for payload in [
            "[[{a},{b}],{c},{d}]",
            "[[{a}{b}]{c}{d}]",
            "[[{a} {b}] ,{c}\n{d}]",
            "[ [ {a} , {b} ] , {c} , {d} ]",
            "[\r\n\t[{a},\n{b}]\n\n{c}{d}\r\n]",
        ] {
            assert_eq!(rows(payload), want, "{payload:?}");
        }
    }

    #[test]
    fn named_and_positional_cells_mix_in_matrix_and_row() {
        assert_eq!(
            rows(r#"[[{"label":"Open","prompt":"/tmp"}{Back|/}]]"#),
            [[b("Open", "/tmp"), b("Back", "/")]]
        );
        assert_eq!(
            rows(r#"[{⬆️ Up|/},[{⬅️|page-1}{➡️|page-3}],{"label":"📁 etc","prompt":"/etc"}]"#),
            vec![
                vec![b("⬆️ Up", "/")],
                vec![b("⬅️", "page-1"), b("➡️", "page-3")],
                vec![b("📁 etc", "/etc")],
            ]
        );
        assert_eq!(
            rows(r#"[{"value":"a"} {b} , [{"value":"c"}{d|e|success}]]"#),
            vec![
                vec![v("a")],
                vec![v("b")],
                vec![v("c"), styled("d", "e", Style::Success)],
            ]
        );
    }

    #[test]
    fn literal_commas_in_atoms_and_json_strings() {
        assert_eq!(
            rows("[{Yes, please|Go on, then}]"),
            [[b("Yes, please", "Go on, then")]]
        );
        assert_eq!(
            rows(r#"[{"value":"a, b"},{c, d}]"#),
            [[v("a, b")], [v("c, d")]]
        );
    }

    #[test]
    fn other_printable_characters_are_literal_in_atoms() {
        assert_eq!(
            rows(r#"[{a: "quoted" [x] {y|'z' <b>&amp;}]"#),
            [[b(r#"a: "quoted" [x] {y"#, "'z' <b>&amp;")]]
        );
        // A quoted first atom without a following colon is still positional.
        assert_eq!(rows(r#"{"Yes" please}"#), [[v(r#""Yes" please"#)]]);
    }

    #[test]
    fn unicode_escapes_and_whitespace() {
        assert_eq!(rows(r"{a\|b|c\}d}"), [[b("a|b", "c}d")]]);
        assert_eq!(rows(r"{back\\slash}"), [[v(r"back\slash")]]);
        assert_eq!(rows(r"{\\|\|}"), [[b(r"\", "|")]]);
        assert_eq!(
            rows("{  Hello   world \t| \n prompt with  spaces \r\n}"),
            [[b("Hello   world", "prompt with  spaces")]]
        );
        assert_eq!(rows("{Привет 👋|日本語}"), [[b("Привет 👋", "日本語")]]);
        assert_eq!(rows("  \n [{a}] \n "), [[v("a")]]);
    }

    #[test]
    fn wide_rows() {
        let eight = format!("[[{}]]", "{x}".repeat(8));
        assert_eq!(rows(&eight), [vec![v("x"); 8]]);
        // No width cap in the grammar.
        let wide = format!("[[{}]]", "{y}".repeat(40));
        assert_eq!(rows(&wide)[0].len(), 40);
    }

    #[test]
    fn progressive_compression_steps_are_equivalent() {
        let want = vec![
            vec![b("Pause", "music::pause"), v("Next")],
            vec![v("Status")],
        ];
        for payload in [
            r#"[[{"label":"Pause","prompt":"music::pause"},{"value":"Next"}],{"value":"Status"}]"#,
            r#"[[{"label":"Pause","prompt":"music::pause"}{"value":"Next"}]{"value":"Status"}]"#,
            r#"[[{"label":"Pause","prompt":"music::pause"},{Next}],{Status}]"#,
            "[[{Pause|music::pause}{Next}]{Status}]",
        ] {
            assert_eq!(rows(payload), want, "{payload}");
        }
    }

    #[test]
    fn doc_example_matrices_are_equivalent() {
        let json = rows(
            r#"[{"label":"⬆️ Up","prompt":"/"},[{"label":"⬅️","prompt":"page-1"},{"label":"➡️","prompt":"page-3"}],{"label":"📁 etc","prompt":"/etc"}]"#,
        );
        assert_eq!(
            rows("[{⬆️ Up|/}[{⬅️|page-1}{➡️|page-3}]{📁 etc|/etc}]"),
            json
        );
        assert_eq!(
            rows(r#"[{⬆️ Up|/},[{⬅️|page-1}{➡️|page-3}],{"label":"📁 etc","prompt":"/etc"}]"#),
            json
        );
    }
}

mod rejected {
    use super::*;

    #[test]
    fn empty_things() {
        assert_eq!(err(""), ButtonError::Empty);
        assert_eq!(err(" \n\t "), ButtonError::Empty);
        assert_eq!(err("[]"), ButtonError::EmptyMatrix);
        assert_eq!(err("[ \n ]"), ButtonError::EmptyMatrix);
        assert_eq!(err("[[]]"), ButtonError::EmptyRow);
        assert_eq!(err("[{a},[ ]]"), ButtonError::EmptyRow);
        assert_eq!(err(r#"[{"value":"a"},[]]"#), ButtonError::EmptyRow);
        assert!(matches!(err("{}"), ButtonError::MissingLabel));
        // `{ }` is strict JSON (an empty object), so it fails the schema instead.
        assert!(matches!(err("{ }"), ButtonError::MissingLabel));
        assert!(matches!(err("[{a}{}]"), ButtonError::EmptyAtom { .. }));
    }

    #[test]
    fn empty_labels_prompts_and_styles() {
        // `{|x}` is the prompt-only cell since 0.42.1 (see `accepted`); an empty prompt or
        // style still is not.
        assert!(matches!(err("{|}"), ButtonError::EmptyAtom { .. }));
        assert!(matches!(err("{ | }"), ButtonError::EmptyAtom { .. }));
        assert!(matches!(err("{||success}"), ButtonError::EmptyAtom { .. }));
        assert!(matches!(err("{|x|}"), ButtonError::EmptyAtom { .. }));
        assert!(matches!(err("{x|}"), ButtonError::EmptyAtom { .. }));
        assert!(matches!(err("{x| \t }"), ButtonError::EmptyAtom { .. }));
        assert!(matches!(err("{x|y|}"), ButtonError::EmptyAtom { .. }));
        assert!(matches!(err("{x||primary}"), ButtonError::EmptyAtom { .. }));
        assert_eq!(
            err(r#"{"label":"x","prompt":"  "}"#),
            ButtonError::MissingPrompt
        );
        assert_eq!(err(r#"{"label":"x"}"#), ButtonError::MissingPrompt);
        assert_eq!(err(r#"{"value":""}"#), ButtonError::MissingLabel);
        assert_eq!(err(r#"{"prompt":" "}"#), ButtonError::MissingLabel);
        assert_eq!(err(r#"label="x" prompt="""#), ButtonError::MissingPrompt);
        assert_eq!(err(r#"label="x""#), ButtonError::MissingPrompt);
    }

    #[test]
    fn leading_repeated_and_trailing_commas() {
        assert_eq!(err("[,{a}]"), ButtonError::LeadingComma { at: 1 });
        assert_eq!(err("[[ ,{a}]]"), ButtonError::LeadingComma { at: 3 });
        assert_eq!(err("[{a},,{b}]"), ButtonError::RepeatedComma { at: 5 });
        assert_eq!(err("[{a}, ,{b}]"), ButtonError::RepeatedComma { at: 6 });
        assert_eq!(err("[[{a},,{b}]]"), ButtonError::RepeatedComma { at: 6 });
        assert_eq!(err("[{a},,]"), ButtonError::RepeatedComma { at: 5 });
        assert_eq!(err("[[{a}, ,]]"), ButtonError::RepeatedComma { at: 7 });
        assert_eq!(err("[,]"), ButtonError::LeadingComma { at: 1 });
    }

    #[test]
    fn missing_property_commas_inside_json_objects() {
        assert!(matches!(
            err(r#"{"label":"A" "prompt":"B"}"#),
            ButtonError::InvalidJson { at: 0, .. }
        ));
        assert!(matches!(
            err(r#"[{"label":"A" "prompt":"B"}]"#),
            ButtonError::InvalidJson { at: 1, .. }
        ));
        assert!(matches!(
            err(r#"[{a}{ "value" : "x",}]"#),
            ButtonError::InvalidJson { at: 4, .. }
        ));
        // Trailing commas inside objects stay strict JSON errors too.
        assert!(matches!(
            err(r#"[{"value":"x",}]"#),
            ButtonError::InvalidJson { .. }
        ));
    }

    #[test]
    fn deeper_nesting() {
        assert_eq!(err("[[[{a}]]]"), ButtonError::TooDeep);
        assert_eq!(err("[[{a}[{b}]]]"), ButtonError::TooDeep);
        assert_eq!(err(r#"[[[{"value":"a"}]]]"#), ButtonError::TooDeep);
    }

    #[test]
    fn missing_crossed_and_mismatched_delimiters() {
        assert_eq!(err("[{a}"), ButtonError::Unclosed { at: 0 });
        assert_eq!(err("[[{a}]"), ButtonError::Unclosed { at: 0 });
        assert_eq!(err("[[{a}"), ButtonError::Unclosed { at: 1 });
        assert_eq!(err("{a"), ButtonError::UnterminatedCell { at: 0 });
        assert_eq!(err("[{a|b]"), ButtonError::UnterminatedCell { at: 1 });
        assert_eq!(err("[{a]}"), ButtonError::Unclosed { at: 0 });
        assert_eq!(
            err("[[{a}]}"),
            ButtonError::Unexpected { at: 6, found: '}' }
        );
        assert_eq!(err("[{a}}]"), ButtonError::Unexpected { at: 4, found: '}' });
        assert_eq!(err("[{a})"), ButtonError::Unexpected { at: 4, found: ')' });
        assert_eq!(err("[x]"), ButtonError::Unexpected { at: 1, found: 'x' });
        assert_eq!(err("[[x]]"), ButtonError::Unexpected { at: 2, found: 'x' });
        // `{a}]` is a cell with an unmatched `]` after it: noise, accepted since 0.42.0.
        assert_eq!(err("{a}["), ButtonError::TrailingContent { at: 3 });
    }

    #[test]
    fn third_separator_unknown_style_and_escapes() {
        assert_eq!(err("{a|b|primary|x}"), ButtonError::TooManyAtoms { at: 12 });
        assert_eq!(err("{a|b|c|}"), ButtonError::TooManyAtoms { at: 6 });
        assert_eq!(
            err("{a|b|blue}"),
            ButtonError::UnknownStyle {
                style: "blue".into()
            }
        );
        assert_eq!(
            err("{a|b|Primary}"),
            ButtonError::UnknownStyle {
                style: "Primary".into()
            }
        );
        assert_eq!(
            err(r"{a\nb}"),
            ButtonError::UnknownEscape { at: 2, found: 'n' }
        );
        assert_eq!(
            err(r#"{a\"b}"#),
            ButtonError::UnknownEscape { at: 2, found: '"' }
        );
        assert_eq!(
            err("{a\\é}"),
            ButtonError::UnknownEscape { at: 2, found: 'é' }
        );
        assert_eq!(err("{a\\"), ButtonError::TrailingBackslash);
        assert_eq!(err("[{a|b\\"), ButtonError::TrailingBackslash);
        // An escaped closing brace leaves the cell open.
        assert_eq!(err(r"{a\}"), ButtonError::UnterminatedCell { at: 0 });
    }

    #[test]
    fn internal_control_characters() {
        for payload in [
            "{a\tb}",
            "{a\nb}",
            "{a\rb|c}",
            "{a|b\u{0}c}",
            "{a\u{7f}b}",
            "{a\u{85}b}",
            "{a\u{9f}b}",
            "{a|b|prim\u{1}ary}",
        ] {
            assert!(
                matches!(err(payload), ButtonError::ControlCharacter { .. }),
                "{payload:?}"
            );
        }
    }

    #[test]
    fn a_second_payload_after_the_first() {
        // Prose, commas and unmatched `]` after a payload are noise since 0.42.0 (see
        // `accepted::noisy_envelopes`); another cell or row is not.
        assert_eq!(err("{a} {b}"), ButtonError::TrailingContent { at: 4 });
        assert_eq!(err("[{a}] [{b}]"), ButtonError::TrailingContent { at: 6 });
        assert_eq!(err("[{a}] x {b}"), ButtonError::TrailingContent { at: 8 });
        assert_eq!(
            err(r#"{"value":"a"} x {"value":"b"}"#),
            ButtonError::TrailingContent { at: 16 }
        );
        assert_eq!(
            err(r#"[{"value":"a"}],[{"value":"b"}]"#),
            ButtonError::TrailingContent { at: 16 }
        );
    }

    #[test]
    fn valid_json_failing_the_schema_is_not_reinterpreted() {
        assert_eq!(
            err(r#"["{a}"]"#),
            ButtonError::NotAButton { found: "string" }
        );
        assert_eq!(err("[1]"), ButtonError::NotAButton { found: "number" });
        assert_eq!(err("[[null]]"), ButtonError::NotAButton { found: "null" });
        assert_eq!(err(r#"{"foo":"bar"}"#), ButtonError::MissingLabel);
        assert_eq!(
            err(r#"{"label":5,"prompt":"x"}"#),
            ButtonError::FieldNotString { field: "label" }
        );
        assert_eq!(
            err(r#"[{"value":["a"]}]"#),
            ButtonError::FieldNotString { field: "value" }
        );
        assert_eq!(
            err(r#"[{"value":"a"},{"value":true}]"#),
            ButtonError::FieldNotString { field: "value" }
        );
    }

    #[test]
    fn other_forms() {
        // Shorthand and bare words: no payload at all (an attribute error until 0.42.0);
        // single quotes, unquoted attributes.
        assert_eq!(err("Continue"), ButtonError::NoPayload);
        assert_eq!(err("Continue | continue"), ButtonError::NoPayload);
        assert_eq!(err("\"a\""), ButtonError::NoPayload);
        assert!(matches!(
            err("label='a' prompt='b'"),
            ButtonError::Attributes(AttributeError::SingleQuoted { .. })
        ));
        assert!(matches!(
            err("label=a prompt=b"),
            ButtonError::Attributes(AttributeError::Unquoted { .. })
        ));
        // A body after attributes.
        assert!(matches!(
            err("label=\"a\"\nThe prompt goes here."),
            ButtonError::Attributes(AttributeError::MissingValue { .. })
        ));
        // Attribute-shaped payloads are read as attributes only.
        assert!(matches!(
            err("label=\"a\" [{b}]"),
            ButtonError::Attributes(AttributeError::ExpectedName { at: 10 })
        ));
    }

    #[test]
    fn rejection_is_atomic() {
        // Valid cells before the fault do not survive.
        assert!(parse_buttons("[{a}{b}[{c}{d}]{e|f|nope}]").is_err());
        let got = extract("<!-- telegram_button [{a}{b}[{c}{d}]{e|f|nope}] -->\n");
        assert!(got.buttons.is_empty());
        assert_eq!(got.rejected.len(), 1);
    }
}

mod placement {
    use super::*;

    const BUTTON: &str = r#"<!-- telegram_button {"value":"Go"} -->"#;

    /// `src` is returned unchanged with no actions.
    fn literal(src: &str) {
        let got = extract(src);
        assert_eq!(got.text, src, "{src:?}");
        assert!(got.buttons.is_empty(), "{src:?}");
        assert!(got.voices.is_empty(), "{src:?}");
        assert!(got.rejected.is_empty(), "{src:?}");
        assert_eq!(got.hidden, 0, "{src:?}");
    }

    /// `src` loses its button comment, which does not act and is named as misplaced.
    fn misplaced(src: &str, text: &str) {
        let got = extract(src);
        assert_eq!(got.text, text, "{src:?}");
        assert!(got.buttons.is_empty(), "{src:?}");
        assert_eq!(got.hidden, 1, "{src:?}");
        assert_eq!(
            got.rejected
                .iter()
                .map(|r| (r.kind, &r.reason))
                .collect::<Vec<_>>(),
            [(ActionKind::Buttons, &RejectReason::NotTopLevel)],
            "{src:?}"
        );
    }

    // Until 0.42.2 these comments stayed as literal text; the membrane removes them, and they
    // still never act.
    #[test]
    fn comments_that_do_not_start_at_column_zero_are_removed_without_acting() {
        misplaced(&format!(" {BUTTON}\n"), "");
        misplaced(&format!("   {BUTTON}\n"), "");
        misplaced(&format!("Text {BUTTON}\n"), "Text\n");
        misplaced(&format!("Text {BUTTON} more\n"), "Text more\n");
        // A paragraph's continuation, however indented.
        misplaced(&format!("Text\n    {BUTTON}\n"), "Text\n");
        // After a blank line, four spaces or a tab make indented code: shown as written.
        literal(&format!("Text\n\n\t{BUTTON}\n"));
        literal(&format!("Text\n\n    {BUTTON}\n"));
    }

    #[test]
    fn quotes_and_lists_lose_them_too() {
        misplaced(&format!("> {BUTTON}\n"), "");
        misplaced(&format!("> Quote\n>\n> {BUTTON}\n"), "> Quote\n>\n");
        misplaced(
            &format!("> Quote\n> {BUTTON}\n> more\n"),
            "> Quote\n> more\n",
        );
        misplaced(&format!("- {BUTTON}\n"), "");
        misplaced(&format!("- a\n- {BUTTON}\n- b\n"), "- a\n- b\n");
        misplaced(&format!("* item\n  {BUTTON}\n"), "* item\n");
        misplaced(&format!("1. item\n\n   {BUTTON}\n"), "1. item\n");
        misplaced(&format!("1) {BUTTON}\n"), "");
        misplaced(&format!("- item {BUTTON}\n"), "- item\n");
    }

    #[test]
    fn fenced_code_stays() {
        literal(&format!("```\n{BUTTON}\n```\n"));
        literal(&format!("```markdown\n{BUTTON}\n```\n"));
        literal(&format!("~~~\n{BUTTON}\n~~~\n"));
        literal(&format!("````\n```\n{BUTTON}\n```\n````\n"));
        literal(&format!("~~~~\n~~~\n{BUTTON}\n~~~~\n"));
        literal(&format!("```\n~~~\n{BUTTON}\n```\n"));
        literal(&format!("Intro\n\n```\nunclosed\n{BUTTON}\n"));
        literal(&format!("1. Example:\n   ```md\n   {BUTTON}\n   ```\n"));
        literal(&format!("Inline `{BUTTON}` code\n"));
        literal(&format!("Inline ``a {BUTTON} ` b`` code\n"));
    }

    #[test]
    fn a_column_zero_line_ends_a_list_items_fence() {
        // The scan counts the fence (no action), but Markdown reads the line as ending the
        // list item, its fence with it: the renderer would show it as HTML, so it goes.
        misplaced(
            &format!("1. Example:\n   ```md\n{BUTTON}\n   ```\n"),
            "1. Example:\n   ```md\n   ```\n",
        );
    }

    #[test]
    fn after_a_fence_closes_comments_count_again() {
        let got = extract(&format!("```\n{BUTTON}\n```\n{BUTTON}\n"));
        assert_eq!(got.buttons, [[v("Go")]]);
        assert_eq!(got.text, format!("```\n{BUTTON}\n```\n"));
    }

    #[test]
    fn top_level_after_a_quote_or_list_counts() {
        let got = extract(&format!("> quote\n{BUTTON}\n"));
        assert_eq!(got.buttons, [[v("Go")]]);
        assert_eq!(got.text, "> quote\n");
        let got = extract(&format!("- item\n\n{BUTTON}\n"));
        assert_eq!(got.buttons, [[v("Go")]]);
        assert_eq!(got.text, "- item\n");
    }

    #[test]
    fn colon_after_the_marker_is_rejected_and_stripped() {
        for src in [
            r#"<!-- telegram_button: {"value":"Go"} -->"#,
            r#"<!-- telegram_buttons: [{Go}] -->"#,
            r#"<!-- telegram_button : label="Go" prompt="go" -->"#,
            "<!-- telegram_button:{Go} -->",
            "<!-- telegram_button: -->",
        ] {
            let got = extract(&format!("Answer\n\n{src}\n"));
            assert!(got.buttons.is_empty(), "{src}");
            assert_eq!(got.text, "Answer\n", "{src}");
            assert_eq!(
                got.rejected,
                [Rejected {
                    kind: ActionKind::Buttons,
                    line: 3,
                    reason: RejectReason::ColonAfterMarker
                }],
                "{src}"
            );
        }
        let got = extract(r#"<!-- telegram_voice: text="hi" -->"#);
        assert!(got.voices.is_empty());
        assert_eq!(got.rejected[0].kind, ActionKind::Voice);
        assert_eq!(got.rejected[0].reason, RejectReason::ColonAfterMarker);
        assert_eq!(got.text, "");
    }

    #[test]
    fn only_the_exact_marker_words_count() {
        for src in [
            "<!-- note -->\n",
            "<!-- telegram_buttonz {Go} -->\n",
            "<!-- telegram_buttons_x {Go} -->\n",
            "<!-- Telegram_Button {Go} -->\n",
            "<!-- telegram_voices text=\"x\" -->\n",
            "<!-- say telegram_button {Go} -->\n",
            "<!-- /telegram_button -->\n",
        ] {
            let got = extract(src);
            assert_eq!(got.text, "", "{src:?}");
            assert_eq!(got.hidden, 1, "{src:?}");
            assert!(got.buttons.is_empty() && got.voices.is_empty(), "{src:?}");
            assert!(got.rejected.is_empty(), "{src:?}");
        }
        // A payload's bracket may follow the marker directly.
        assert_eq!(extract("<!-- telegram_button{Go} -->").buttons, [[v("Go")]]);
        assert_eq!(
            extract("<!-- telegram_buttons[[{a}{b}]] -->").buttons,
            [[v("a"), v("b")]]
        );
        // The plural alias and odd spacing before the marker are fine.
        assert_eq!(extract("<!--telegram_buttons {Go}-->").buttons, [[v("Go")]]);
        assert_eq!(
            extract("<!--\n  telegram_button\n{Go}\n-->").buttons,
            [[v("Go")]]
        );
    }

    #[test]
    fn empty_payload_is_rejected() {
        let got = extract("<!-- telegram_button -->");
        assert_eq!(
            got.rejected[0].reason,
            RejectReason::Buttons(ButtonError::Empty)
        );
        let got = extract("<!--telegram_voice-->");
        assert_eq!(
            got.rejected[0].reason,
            RejectReason::Voice(VoiceError::Empty)
        );
        assert_eq!(got.text, "");
    }

    #[test]
    fn multi_line_payloads() {
        let src = "Pick one.\n\n<!-- telegram_button [\n  {\"label\": \"Yes\",\n   \"prompt\": \"yes\"},\n  [{No|no}\n   {Later|later|success}]\n] -->\nAfter.\n";
        let got = extract(src);
        assert!(got.rejected.is_empty(), "{:?}", got.rejected);
        assert_eq!(
            got.buttons,
            vec![
                vec![b("Yes", "yes")],
                vec![b("No", "no"), styled("Later", "later", Style::Success)],
            ]
        );
        assert_eq!(got.text, "Pick one.\n\nAfter.\n");
        let got = extract("<!-- telegram_voice {\n\"text\": \"Hi\",\n\"lang\": \"en\"\n} -->\n");
        assert_eq!(got.voices, [voice("Hi", Some("en"), None)]);
    }

    #[test]
    fn the_terminator_cannot_be_inside_a_payload() {
        let got =
            extract("<!-- telegram_button {\"label\":\"a-->b\",\"prompt\":\"x\"} -->\nNext\n");
        assert!(got.buttons.is_empty());
        assert_eq!(got.rejected.len(), 1);
        assert!(matches!(
            got.rejected[0].reason,
            RejectReason::Buttons(ButtonError::InvalidJson { .. })
        ));
        // The comment ended at the first `-->`; the rest of the line is ordinary text.
        assert_eq!(got.text, "b\",\"prompt\":\"x\"} -->\nNext\n");
    }

    #[test]
    fn unterminated_action_comment_takes_the_rest() {
        let got = extract("Answer.\n\n<!-- telegram_button [{a}\nmore\n");
        assert!(got.buttons.is_empty());
        assert_eq!(got.rejected[0].reason, RejectReason::Unterminated);
        assert_eq!(got.rejected[0].line, 3);
        assert_eq!(got.text, "Answer.\n");
        // An ordinary comment ends at the first `-->`, whatever it holds.
        let got = extract("Answer.\n<!-- note\n<!-- telegram_button {Go} -->\nAfter\n");
        assert_eq!(got.text, "Answer.\nAfter\n");
        assert!(got.buttons.is_empty() && got.rejected.is_empty());
        // Never closed, it hides the rest.
        let got = extract("Answer. <!-- note\n\nmore\n");
        assert_eq!(got.text, "Answer.\n");
        assert!(got.rejected.is_empty());
    }
}

mod order {
    use super::*;

    #[test]
    fn outbound_doc_button_example() {
        let src = r#"I can continue.

<!-- telegram_button {"label":"Continue","prompt":"Continue with the current plan.","selected_style":"primary"} -->

<!-- telegram_button label="Show risks" prompt="List the main risks first." selected_style="danger" -->

<!-- telegram_button {"value":"Done"} -->

<!-- telegram_button [{"label":"⬆️ Up","prompt":"/"},[{"value":"⬅️ Previous"},{"value":"➡️ Next"}],{"label":"📁 etc","prompt":"/etc"}] -->

<!-- telegram_buttons [[{"value":"Approve"},{"value":"Reject"}]] -->

<!-- telegram_button [{⬆️ Up|/}[{⬅️|page-1}{➡️|page-3}]{📁 etc|/etc}] -->
"#;
        let got = extract(src);
        assert!(got.rejected.is_empty(), "{:?}", got.rejected);
        assert_eq!(got.text, "I can continue.\n");
        assert_eq!(
            got.buttons,
            vec![
                vec![styled(
                    "Continue",
                    "Continue with the current plan.",
                    Style::Primary
                )],
                vec![styled(
                    "Show risks",
                    "List the main risks first.",
                    Style::Danger
                )],
                vec![v("Done")],
                vec![b("⬆️ Up", "/")],
                vec![v("⬅️ Previous"), v("➡️ Next")],
                vec![b("📁 etc", "/etc")],
                vec![v("Approve"), v("Reject")],
                vec![b("⬆️ Up", "/")],
                vec![b("⬅️", "page-1"), b("➡️", "page-3")],
                vec![b("📁 etc", "/etc")],
            ]
        );
    }

    #[test]
    fn outbound_doc_voice_example() {
        let src = r#"Full text answer stays here.

<!-- telegram_voice {"value":"Short spoken companion summary.","lang":"ru","rate":"+30%"} -->

<!-- telegram_voice text="Short spoken companion summary." lang="ru" rate="+30%" -->
"#;
        let got = extract(src);
        let one = voice("Short spoken companion summary.", Some("ru"), Some("+30%"));
        assert_eq!(got.voices, [one.clone(), one]);
        assert_eq!(got.text, "Full text answer stays here.\n");
        assert!(got.buttons.is_empty());
        assert!(got.rejected.is_empty());
    }

    #[test]
    fn several_comments_keep_source_order_and_bad_ones_are_skipped() {
        let src = "A\n\
                   <!-- telegram_voice text=\"one\" -->\n\
                   <!-- telegram_button {1} -->\n\
                   B\n\
                   <!-- telegram_button [{2}{x|y|nope}] -->\n\
                   <!-- telegram_voice {\"value\":\"two\",\"text\":\"2\"} -->\n\
                   <!-- telegram_buttons [[{3}{4}]] -->\n\
                   <!-- telegram_voice lang=\"en\" -->\n\
                   C\n";
        let got = extract(src);
        assert_eq!(got.buttons, vec![vec![v("1")], vec![v("3"), v("4")]]);
        assert_eq!(
            got.voices,
            [voice("one", None, None), voice("2", None, None)]
        );
        assert_eq!(
            got.rejected,
            vec![
                Rejected {
                    kind: ActionKind::Buttons,
                    line: 5,
                    reason: RejectReason::Buttons(ButtonError::UnknownStyle {
                        style: "nope".into()
                    })
                },
                Rejected {
                    kind: ActionKind::Voice,
                    line: 8,
                    reason: RejectReason::Voice(VoiceError::MissingText)
                },
            ]
        );
        assert_eq!(got.text, "A\nB\nC\n");
        assert_eq!(
            got.rejected[0].to_string(),
            "line 5: telegram_button: unknown style \"nope\""
        );
    }
}

mod stripping {
    use super::*;

    #[test]
    fn no_comments_means_byte_identical() {
        for src in [
            "",
            "   ",
            "\n\n\n",
            "Hello\r\n\r\n\r\nWorld  \n\n\n",
            "```\n<!-- telegram_button {a} -->\n```",
            "`<!-- note -->`",
        ] {
            assert_eq!(extract(src).text, src);
        }
    }

    #[test]
    fn the_rest_is_byte_identical() {
        let kept = [
            "# Title\n\n",
            "Some *text*  with trailing spaces  \n",
            "    indented code\n\tand a tab\n\n",
            "```rust\nlet x = 1;   \n\n\n```\n\n",
            "> quote\n\n",
            "| a | b |\n|---|---|\n",
            "Last line without newline",
        ];
        let comments = [
            "<!-- telegram_voice text=\"hi\" -->\n",
            "<!-- telegram_button {A} -->\n",
            "<!-- telegram_button [\n{B}\n] -->\n",
            "<!-- telegram_button nonsense -->\n",
            "<!-- telegram_buttons [{C}] -->\r\n> <!-- telegram_button {q} -->\n",
            "<!-- telegram_voice {\"text\":\"x\"} -->   \n",
        ];
        let mut src = String::new();
        for (i, piece) in kept.iter().enumerate() {
            if let Some(comment) = comments.get(i) {
                src.push_str(comment);
            }
            src.push_str(piece);
        }
        let got = extract(&src);
        assert_eq!(got.text, kept.concat());
        assert_eq!(got.buttons, vec![vec![v("A")], vec![v("B")], vec![v("C")]]);
        assert_eq!(got.voices.len(), 2);
        assert_eq!(got.rejected.len(), 2);
    }

    #[test]
    fn blank_lines_around_a_removed_comment_collapse() {
        let c = "<!-- telegram_voice text=\"x\" -->";
        let cases = [
            (format!("A\n\n{c}\n\nB"), "A\n\nB"),
            (format!("A\n{c}\nB"), "A\nB"),
            (format!("A\n\n{c}\nB"), "A\n\nB"),
            (format!("A\n{c}\n\nB"), "A\n\nB"),
            (format!("A\n\n\n{c}\n\n\nB"), "A\n\nB"),
            (format!("A\n  \n{c}\n\t\nB"), "A\n  \nB"),
            (format!("A\n\n{c}\n{c}\n\n{c}\n\nB\n"), "A\n\nB\n"),
            (format!("A\r\n\r\n{c}\r\n\r\nB\r\n"), "A\r\n\r\nB\r\n"),
        ];
        for (src, want) in &cases {
            let got = extract(src).text;
            assert_eq!(&got, want, "{src:?}");
            assert!(!got.contains("\n\n\n"));
        }
    }

    #[test]
    fn comments_at_the_start_and_end() {
        let c = "<!-- telegram_voice text=\"x\" -->";
        let cases = [
            (format!("{c}\nA"), "A"),
            (format!("{c}\n\nA\n"), "A\n"),
            (format!("\n\n{c}\n\n  A"), "  A"),
            (format!("A\n\n{c}"), "A"),
            (format!("A\n\n{c}\n"), "A\n"),
            (format!("A  \n\n{c}\n\n\n"), "A  \n"),
            (format!("A\r\n\r\n{c}\r\n"), "A\r\n"),
            (c.to_string(), ""),
            (format!("\n \n{c}\n \n"), ""),
            (format!("{c}\n{c}\n"), ""),
        ];
        for (src, want) in &cases {
            assert_eq!(&extract(src).text, want, "{src:?}");
        }
    }

    #[test]
    fn text_after_the_terminator_stays_on_its_line() {
        let got = extract("A\n<!-- telegram_button {x} -->  tail\nB");
        assert_eq!(got.text, "A\ntail\nB");
        assert_eq!(got.buttons, [[v("x")]]);
        // A second comment on the same line is not at column zero: removed, not acted on.
        let got = extract("<!-- telegram_voice text=\"a\" --> <!-- telegram_button {b} -->\n");
        assert_eq!(got.voices.len(), 1);
        assert!(got.buttons.is_empty());
        assert_eq!(got.rejected[0].reason, RejectReason::NotTopLevel);
        assert_eq!(got.text, "");
    }

    #[test]
    fn button_only_answers_get_the_heading() {
        assert_eq!(BUTTON_ONLY_HEADING, "☑️ **Choose an option:**");
        for src in [
            "<!-- telegram_button {Yes} -->",
            "\n\n<!-- telegram_button {Yes} -->\n\n",
            "<!-- telegram_button {Yes} -->\n<!-- telegram_voice text=\"x\" -->\n",
        ] {
            let got = extract(src);
            assert_eq!(got.text, BUTTON_ONLY_HEADING, "{src:?}");
            assert_eq!(got.buttons, [[v("Yes")]]);
        }
        // No heading without buttons, or with visible text.
        assert_eq!(extract("<!-- telegram_voice text=\"x\" -->\n").text, "");
        assert_eq!(extract("<!-- telegram_button {} -->\n").text, "");
        assert_eq!(extract("Hi\n<!-- telegram_button {Yes} -->\n").text, "Hi\n");
    }
}

mod pathological {
    use super::*;

    const N: usize = 100_000;

    #[test]
    fn huge_payloads_parse_quickly_or_fail() {
        let payloads = [
            "[".repeat(N),
            "{".repeat(N),
            "[{".repeat(N / 2),
            "\\".repeat(N),
            "|".repeat(N),
            format!("{{{}", "\\|".repeat(N / 2)),
            format!("[{}]", "{\"a".repeat(N / 3)),
            format!("[{}]", "{\"k\":".repeat(N / 5)),
            format!("[{}]", "{\"k\" ".repeat(N / 5)),
            format!("[{}", "{a}".repeat(N / 3)),
            format!("[{}]", "[{a}".repeat(N / 4)),
            format!("[{}]", ",".repeat(N)),
            format!("{{\"value\":\"{}\"}}", "a".repeat(N)),
            format!(
                "{{\"label\":\"x\",\"prompt\":{}1{}}}",
                "[".repeat(N / 2),
                "]".repeat(N / 2)
            ),
            "label=\"".repeat(N / 7),
            format!("value=\"{}", "x".repeat(N)),
            "a=\"\" ".repeat(N / 6),
        ];
        for payload in &payloads {
            let _ = parse_buttons(payload);
            let _ = parse_voice(payload);
        }
        // A large valid matrix.
        let big = format!("[{}]", "{a|b} ".repeat(N / 6));
        assert_eq!(rows(&big).len(), N / 6);
        let wide = format!("[[{}]]", "{\"value\":\"v\"}".repeat(N / 13));
        assert_eq!(rows(&wide)[0].len(), N / 13);
    }

    #[test]
    fn huge_answers_extract_quickly() {
        let answers = [
            "<!--\n".repeat(N / 5),
            "<!-- telegram_button [{a}] -->\n".repeat(N / 31),
            "```\n<!-- telegram_button [{a}] -->\n".repeat(N / 35),
            format!("<!-- telegram_button {} -->", "[".repeat(N)),
            format!("<!-- telegram_button {}", "{a|".repeat(N / 3)),
            format!(
                "X\n{}\n{}",
                " ".repeat(N / 2),
                "<!-- telegram_voice text=\"a\" -->\n\n".repeat(N / 40)
            ),
            format!(
                "X{}",
                "\n<!-- telegram_voice value=\"a\" -->\n \n".repeat(N / 40)
            ),
            "-->\n<!-- -->".repeat(N / 12),
        ];
        for answer in &answers {
            let got = extract(answer);
            assert!(!got.text.contains("\n\n\n\n"));
        }
    }
}
