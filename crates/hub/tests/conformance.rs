//! Conformance with the Markdown pi writes: every example of the CommonMark spec (0.31.2) and
//! of GitHub's extensions (GFM 0.29: tables, task lists, strikethrough, autolinks, disallowed
//! raw HTML) goes through the hub's answer path (action comments taken out, the answer's
//! Markdown, the delivery plan) in both renderings, and what Telegram shows of the messages
//! (read back as tg-fake reads them) is compared with the spec's HTML: visible text, bold,
//! italic, strike, code, code blocks and their language, links and their address, headings,
//! quotes, list numbering and task boxes, table cells, line breaks.
//!
//! Each example ends in one of three ways: the same (exact), the same once the renderer's
//! documented choices are applied (`expected.rs` lists them; each is counted), or a failure.
//! Examples with raw HTML are shown as written, so for them every visible character of the
//! spec's rendering must appear, in order, in what the person sees. An answer that shows
//! nothing says so and shows what pi wrote.
//!
//! `docs/commonmark-conformance.md` is written from the results: `CONFORMANCE_WRITE=1`
//! rewrites it; otherwise the test fails when it differs. `CONFORMANCE_SHOW=<n>` prints the
//! tokens of CommonMark example n (`gfm:<n>` for GFM's) in both modes.
#![allow(clippy::unwrap_used)]

#[path = "conformance/examples.rs"]
mod examples;
#[path = "conformance/expected.rs"]
mod expected;
#[path = "conformance/rendered.rs"]
mod rendered;
#[path = "conformance/seen.rs"]
mod seen;

use std::collections::BTreeMap;

use examples::Example;
use expected::{Choice, Mode};
use hub::assistant::Rendering;
use hub::outgoing::delivery::{self, Target};
use seen::Tok;

const COMMONMARK: &str = include_str!("spec/commonmark-0.31.2.txt");
const GFM: &str = include_str!("spec/gfm-0.29.txt");

/// How one example came out in one mode.
enum Outcome {
    Exact,
    Documented(Vec<Choice>),
    Failed(String),
}

fn examples() -> Vec<Example> {
    let mut all = examples::read("commonmark", COMMONMARK);
    all.extend(
        examples::read("gfm", GFM)
            .into_iter()
            .filter(|e| e.extension.is_some()),
    );
    all
}

/// The messages the hub sends for an answer `markdown` from pi.
fn plans(markdown: &str, mode: Mode) -> Vec<delivery::Plan> {
    let extracted = hub::outgoing::markup::extract(markdown);
    let answer = hub::outgoing::texts::answer_markdown(None, &extracted.text, false, None, None);
    let rendering = match mode {
        Mode::Rich => Rendering::Rich,
        Mode::Html => Rendering::Html,
    };
    delivery::plans(
        &answer,
        rendering,
        &Target {
            chat_id: 1,
            thread_id: None,
            reply_to: None,
        },
    )
}

/// Whether the Markdown holds raw HTML (as the renderer's parser reads it).
fn has_raw_html(markdown: &str) -> bool {
    use pulldown_cmark::{Event, Options, Parser};
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    Parser::new_ext(markdown, options).any(|e| matches!(e, Event::Html(_) | Event::InlineHtml(_)))
}

fn judge(ex: &Example, mode: Mode) -> (Outcome, Vec<Tok>, Vec<Tok>) {
    let raw = has_raw_html(&ex.markdown);
    let (want, mut choices) = expected::seen(&ex.html, mode, raw);
    let got = match rendered::seen(&plans(&ex.markdown, mode), mode) {
        Ok(t) => t,
        Err(e) => return (Outcome::Failed(e), want, Vec::new()),
    };
    let outcome = if want == got {
        if choices.is_empty() {
            Outcome::Exact
        } else {
            Outcome::Documented(choices)
        }
    } else if raw && seen::is_subsequence(&seen::visible_chars(&want), &seen::visible_chars(&got)) {
        Outcome::Documented(vec![Choice::RawHtml])
    } else if raw
        && ex.markdown.contains("<!--")
        && seen::is_subsequence(&seen::visible_chars(&got), &seen::visible_chars(&want))
    {
        // pi's comments never show: what followed one on its line reads as Markdown.
        choices.push(Choice::CommentRemoved);
        Outcome::Documented(choices)
    } else if want.is_empty() && got == nothing_visible(&ex.markdown, mode) {
        choices.push(Choice::NothingVisible);
        Outcome::Documented(choices)
    } else if ex.spec == "commonmark" && seen::without_self_links(&got) == want {
        // CommonMark has no bare autolinks; GFM, which pi writes, does.
        choices.push(Choice::GfmAutolink);
        Outcome::Documented(choices)
    } else {
        Outcome::Failed(seen::diff(&want, &got))
    };
    (outcome, want, got)
}

/// What the person sees of an answer that shows nothing: the hub's note, then the answer as
/// pi wrote it in a code block.
fn nothing_visible(markdown: &str, mode: Mode) -> Vec<Tok> {
    let mut b = seen::Builder::default();
    b.text(hub::outgoing::texts::NOTHING_VISIBLE, &seen::Fmt::default());
    b.push(Tok::Code {
        lang: None,
        text: hub::outgoing::texts::trim_invisible(markdown).to_owned(),
        quote: 0,
    });
    b.finish(mode == Mode::Html)
}

#[derive(Default)]
struct Tally {
    examples: usize,
    exact: usize,
    documented: BTreeMap<Choice, Vec<String>>,
    documented_examples: usize,
    failed: Vec<String>,
}

fn name(ex: &Example) -> String {
    match ex.spec {
        "gfm" => format!("gfm:{}", ex.number),
        _ => ex.number.to_string(),
    }
}

#[test]
fn every_spec_example_shows_what_the_spec_means() {
    let all = examples();
    if let Ok(which) = std::env::var("CONFORMANCE_SHOW") {
        for ex in all.iter().filter(|e| name(e) == which) {
            println!(
                "{} ({}):\n{}\n---\n{}",
                name(ex),
                ex.section,
                ex.markdown,
                ex.html
            );
            for mode in [Mode::Rich, Mode::Html] {
                let (outcome, want, got) = judge(ex, mode);
                println!(
                    "{mode:?}: {}",
                    match outcome {
                        Outcome::Exact => "exact".to_owned(),
                        Outcome::Documented(c) => format!("documented {c:?}"),
                        Outcome::Failed(_) => "FAILED".to_owned(),
                    }
                );
                println!(
                    "  want: {}",
                    want.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                println!(
                    "  got:  {}",
                    got.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                for p in plans(&ex.markdown, mode) {
                    println!(
                        "  sent: {}",
                        p.current()
                            .and_then(|m| serde_json::to_string(m).ok())
                            .unwrap_or_default()
                    );
                }
            }
        }
    }
    let mut tallies: Vec<(Mode, Tally)> = Vec::new();
    for mode in [Mode::Rich, Mode::Html] {
        let mut t = Tally::default();
        for ex in &all {
            t.examples += 1;
            match judge(ex, mode).0 {
                Outcome::Exact => t.exact += 1,
                Outcome::Documented(choices) => {
                    t.documented_examples += 1;
                    for c in choices {
                        t.documented.entry(c).or_default().push(name(ex));
                    }
                }
                Outcome::Failed(diff) => t.failed.push(format!(
                    "{mode:?} example {} ({}):\n{}\n  spec {:?}\n  want | got\n{diff}",
                    name(ex),
                    ex.section,
                    ex.markdown,
                    ex.html
                )),
            }
        }
        tallies.push((mode, t));
    }
    let doc = report(&all, &tallies);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/commonmark-conformance.md");
    let failures: Vec<&String> = tallies.iter().flat_map(|(_, t)| &t.failed).collect();
    let summary: Vec<String> = tallies
        .iter()
        .map(|(m, t)| {
            format!(
                "{m:?}: {} examples, {} exact, {} documented, {} failed",
                t.examples,
                t.exact,
                t.documented_examples,
                t.failed.len()
            )
        })
        .collect();
    println!("{}", summary.join("\n"));
    assert!(
        failures.is_empty(),
        "{} failures ({}):\n{}",
        failures.len(),
        summary.join("; "),
        failures
            .iter()
            .take(if std::env::var("CONFORMANCE_ALL").is_ok() {
                usize::MAX
            } else {
                40
            })
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    if std::env::var("CONFORMANCE_WRITE").is_ok_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&path, &doc).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == doc,
        "docs/commonmark-conformance.md differs from this run: run CONFORMANCE_WRITE=1 cargo \
         test -p pi-telegram-hub --test conformance and commit it"
    );
}

fn report(all: &[Example], tallies: &[(Mode, Tally)]) -> String {
    let commonmark = all.iter().filter(|e| e.spec == "commonmark").count();
    let gfm = all.len() - commonmark;
    let mut out = String::new();
    out.push_str("# CommonMark and GFM conformance\n\n");
    out.push_str(&format!(
        "Every example of the CommonMark spec 0.31.2 ({commonmark}) and of GitHub's extensions in \
         the GFM spec 0.29 ({gfm}: tables, task lists, strikethrough, autolinks, disallowed raw \
         HTML) sent through the hub's answer path in both renderings and compared with the \
         spec's HTML by what a person sees: visible text, bold, italic, strike, code, code \
         blocks and their language, links and their address, headings, quotes, list \
         numbering and task boxes, table cells and line breaks.\n\n"
    ));
    out.push_str(
        "GENERATED by `crates/hub/tests/conformance.rs` (in the README's test command): \
         `CONFORMANCE_WRITE=1 cargo test -p pi-telegram-hub --test conformance` rewrites it; \
         otherwise the test fails when this file differs, and whenever an example fails.\n\n",
    );
    out.push_str("| rendering | examples | exact | documented differences | failures |\n|---|---|---|---|---|\n");
    for (mode, t) in tallies {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            mode_name(*mode),
            t.examples,
            t.exact,
            t.documented_examples,
            t.failed.len()
        ));
    }
    out.push_str(
        "\nAn example differs from the spec only by the renderer's documented choices (it may \
         show under several):\n\n| choice | rich | HTML |\n|---|---|---|\n",
    );
    let mut kinds: Vec<Choice> = tallies
        .iter()
        .flat_map(|(_, t)| t.documented.keys().copied())
        .collect();
    kinds.sort();
    kinds.dedup();
    for k in &kinds {
        let count = |m: Mode| {
            tallies
                .iter()
                .find(|(mm, _)| *mm == m)
                .and_then(|(_, t)| t.documented.get(k))
                .map_or(0, Vec::len)
        };
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            k.describe(),
            count(Mode::Rich),
            count(Mode::Html)
        ));
    }
    out.push_str("\nThe examples under each choice:\n\n");
    for (mode, t) in tallies {
        for (k, list) in &t.documented {
            out.push_str(&format!(
                "- {}, {}: {}\n",
                mode_name(*mode),
                k.describe(),
                list.join(", ")
            ));
        }
    }
    out
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Rich => "rich (`sendRichMessage`)",
        Mode::Html => "HTML (`sendMessage`, `parse_mode: HTML`)",
    }
}

/// The spec example whose Markdown is `markdown`.
fn example(markdown: &str) -> Example {
    examples()
        .into_iter()
        .find(|e| e.markdown == markdown)
        .unwrap_or_else(|| panic!("no spec example is {markdown:?}"))
}

/// Asserts that `markdown` (a spec example) shows exactly what the spec means in `modes`.
fn assert_exact(markdown: &str, modes: &[Mode]) {
    let ex = example(markdown);
    for &mode in modes {
        let (outcome, want, got) = judge(&ex, mode);
        let show = |t: &[Tok]| {
            t.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(
            matches!(outcome, Outcome::Exact),
            "{mode:?}, example {}: {markdown:?}\n  want {}\n  got  {}",
            name(&ex),
            show(&want),
            show(&got)
        );
    }
}

const BOTH: &[Mode] = &[Mode::Rich, Mode::Html];

#[test]
fn an_answer_keeps_its_leading_indentation() {
    // Trimmed, each of these became something else: a paragraph, a heading, a quote.
    assert_exact("    a simple\n      indented code block\n", BOTH);
    assert_exact("    # foo\n", BOTH);
    assert_exact("    > # Foo\n    > bar\n    > baz\n", BOTH);
    // A tab at the start of the answer: still a code block (its tabs shown as spaces).
    for markdown in ["\tfoo\tbaz\t\tbim\n", "  \tfoo\tbaz\t\tbim\n"] {
        let ex = example(markdown);
        for mode in BOTH {
            let outcome = judge(&ex, *mode).0;
            assert!(
                matches!(&outcome, Outcome::Documented(c) if c == &[Choice::TabInCode]),
                "{markdown:?} in {mode:?}"
            );
        }
    }
}

#[test]
fn bare_addresses_are_links_in_every_rendering() {
    let gfm: Vec<Example> = examples()
        .into_iter()
        .filter(|e| e.extension.as_deref() == Some("autolink"))
        .collect();
    assert_eq!(gfm.len(), 11);
    for ex in &gfm {
        assert_exact(&ex.markdown, &[Mode::Rich]);
    }
    for ex in &gfm {
        match judge(ex, Mode::Html).0 {
            Outcome::Exact => {}
            // a.b-c_d@a.b: Telegram's own e-mail rules do not take a one-letter domain.
            Outcome::Documented(c) if c == [Choice::EmailInText] => {}
            Outcome::Documented(c) => panic!("{}: {c:?}", ex.markdown),
            Outcome::Failed(d) => panic!("{}:\n{d}", ex.markdown),
        }
    }
    // Rich messages go out with Telegram's detection off: commands, hashtags and numbers in
    // technical text stay text.
    for p in plans("run /start, see #42 and $PATH, v1.2.3 at 10:30", Mode::Rich) {
        let params = serde_json::to_value(p.current().unwrap()).unwrap();
        assert_eq!(params["rich_message"]["skip_entity_detection"], true);
        assert!(!params.to_string().contains("]("), "no link: {params}");
    }
}

#[test]
fn an_email_autolink_is_a_mailto_link() {
    assert_exact("<foo@bar.example.com>\n", BOTH);
    assert_exact("<foo+special@Bar.baz-bar0.com>\n", BOTH);
}

#[test]
fn a_setext_heading_keeps_all_its_lines() {
    assert_exact("Foo *bar\nbaz*\n====\n", BOTH);
    assert_exact("Foo\nBar\n---\n", BOTH);
}

#[test]
fn an_answer_that_shows_nothing_says_so() {
    for markdown in ["[foo]: /url\n", "```\n", ">\n", "## \n#\n### ###\n"] {
        let ex = example(markdown);
        for mode in BOTH {
            let (outcome, _, got) = judge(&ex, *mode);
            assert!(
                matches!(&outcome, Outcome::Documented(c) if c.contains(&Choice::NothingVisible)),
                "{markdown:?} in {mode:?}: {}",
                got.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
}
