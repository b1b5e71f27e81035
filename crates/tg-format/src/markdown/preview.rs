//! Preview frames: an answer still being written, shown the way it will look once finished.
//!
//! The renderer escapes everything it does not understand, so any prefix of an answer renders
//! to something valid; but `**bol` would flash as literal asterisks until the model closes the
//! bold. A frame is therefore cut back to before inline markers still open at its end. Code
//! fences still open are fine: the code block simply runs to the end of the frame.

use super::{RichBudget, TextPiece, render_html, render_rich};

/// The latest part of a partial answer as rich Markdown (what fits one rich message), or `None`
/// while nothing is visible yet.
pub fn rich_frame(partial: &str, budget: &RichBudget) -> Option<String> {
    let closed = closed_prefix(partial);
    render_rich(closed, super::TEXT_LIMIT, budget)
        .pop()
        .map(|p| p.markdown)
}

/// The latest part of a partial answer as an HTML message of at most `limit` units.
pub fn html_frame(partial: &str, limit: usize) -> Option<TextPiece> {
    render_html(closed_prefix(partial), limit).pop()
}

/// The longest prefix of `partial` with no inline marker left open at its end (see the module
/// docs).
pub fn closed_prefix(partial: &str) -> &str {
    if in_open_fence(partial) {
        return partial;
    }
    let start = last_paragraph_start(partial);
    let mut end = partial.len();
    loop {
        let tail = &partial[start..end];
        let Some(cut) = open_marker(tail) else {
            break;
        };
        end = start + cut;
    }
    partial[..end].trim_end()
}

/// Whether `text` ends inside a fenced code block.
fn in_open_fence(text: &str) -> bool {
    closing_fence(text).is_some()
}

/// The line that closes the fenced code block `text` ends in (the opening fence's indentation,
/// character and length), or `None` when it ends outside one. Text added after an answer cut
/// short (an aborted turn's mark) must come after this, or it shows as code.
pub fn closing_fence(text: &str) -> Option<String> {
    let mut open: Option<(&str, char, usize)> = None;
    for line in text.split('\n') {
        let t = line.trim_start();
        let Some(c) = t.chars().next().filter(|c| *c == '`' || *c == '~') else {
            continue;
        };
        let run = t.chars().take_while(|x| *x == c).count();
        if run < 3 {
            continue;
        }
        match open {
            None => open = Some((&line[..line.len() - t.len()], c, run)),
            Some((_, oc, orun)) if oc == c && run >= orun && t[run..].trim().is_empty() => {
                open = None;
            }
            Some(_) => {}
        }
    }
    open.map(|(indent, c, run)| format!("{indent}{}", c.to_string().repeat(run)))
}

/// Where the last paragraph starts (after the last blank line).
fn last_paragraph_start(text: &str) -> usize {
    text.rfind("\n\n").map_or(0, |i| i + 2)
}

/// The offset of the last inline marker in `tail` that is not closed, if any.
fn open_marker(tail: &str) -> Option<usize> {
    // Code spans first: inside them nothing else is a marker.
    let ticks: Vec<usize> = tail.match_indices('`').map(|(i, _)| i).collect();
    if ticks.len() % 2 == 1 {
        return ticks.last().copied();
    }
    let outside = strip_code_spans(tail);
    for marker in ["**", "__", "~~"] {
        let at: Vec<usize> = outside.match_indices(marker).map(|(i, _)| i).collect();
        if at.len() % 2 == 1 {
            return at.last().copied();
        }
    }
    let singles: Vec<usize> = outside
        .char_indices()
        .filter(|(i, c)| {
            let before = outside[..*i].chars().next_back();
            let after = outside[i + c.len_utf8()..].chars().next();
            match c {
                // A single `*` that is not half of `**` and not a bullet.
                '*' => {
                    before != Some('*')
                        && after != Some('*')
                        && !(after == Some(' ') && before.is_none_or(|b| b == '\n'))
                }
                // `_` between letters is part of a word (snake_case).
                '_' => {
                    before != Some('_')
                        && after != Some('_')
                        && !(before.is_some_and(char::is_alphanumeric)
                            && after.is_some_and(char::is_alphanumeric))
                }
                _ => false,
            }
        })
        .map(|(i, _)| i)
        .collect();
    let stars: Vec<usize> = singles
        .iter()
        .copied()
        .filter(|i| outside[*i..].starts_with('*'))
        .collect();
    if stars.len() % 2 == 1 {
        return stars.last().copied();
    }
    let unders: Vec<usize> = singles
        .iter()
        .copied()
        .filter(|i| outside[*i..].starts_with('_'))
        .collect();
    if unders.len() % 2 == 1 {
        return unders.last().copied();
    }
    // A link whose text or target is not finished.
    if let Some(open) = outside.rfind('[') {
        let rest = &outside[open..];
        let finished = rest.find("](").is_some_and(|i| rest[i..].contains(')'))
            || (rest.contains(']') && !rest.contains("]("));
        if !finished {
            return Some(open);
        }
    }
    None
}

/// `tail` with code spans blanked out (same length, so offsets stay valid).
fn strip_code_spans(tail: &str) -> String {
    let mut out = String::with_capacity(tail.len());
    let mut in_code = false;
    for c in tail.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if in_code {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_markers_wait_until_they_close() {
        assert_eq!(closed_prefix("Hello **wor"), "Hello");
        assert_eq!(closed_prefix("Hello **world**"), "Hello **world**");
        assert_eq!(closed_prefix("run `cargo te"), "run");
        assert_eq!(closed_prefix("see [the do"), "see");
        assert_eq!(closed_prefix("see [the docs](https://ex"), "see");
        assert_eq!(
            closed_prefix("a snake_case name and *it"),
            "a snake_case name and"
        );
        assert_eq!(closed_prefix("* bullet"), "* bullet");
        assert_eq!(
            closed_prefix("```rust\nfn main() {"),
            "```rust\nfn main() {"
        );
        assert_eq!(closed_prefix("done.\n\nnext **x"), "done.\n\nnext");
    }

    #[test]
    fn frames_render_the_latest_part() {
        let long = "word ".repeat(2000);
        let frame = html_frame(&long, 1000).unwrap_or_else(|| TextPiece {
            html: String::new(),
            plain: String::new(),
        });
        assert!(crate::utf16::len(&frame.plain) <= 1000);
        assert!(rich_frame("**Bold** start", &RichBudget::default()).is_some());
        assert!(rich_frame("", &RichBudget::default()).is_none());
    }
}
