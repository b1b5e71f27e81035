//! Finding the HTML comments that open at column zero of a top-level Markdown line.
//!
//! The scan is line based and linear. A line whose first four bytes are `<!--` opens a
//! comment unless it lies inside a fenced code block; the comment runs to the first `-->`
//! after its opener, across lines if needed, and scanning resumes on the line after that
//! terminator. Lines inside a comment are never examined, so a nested `<!--` is content.
//!
//! Being at column zero already keeps comments in block quotes (`> <!--`), list items
//! (`- <!--`, or a continuation indented under the item) and indented code (four spaces or
//! a tab) out: none of those starts with `<!--`. Fences need state: a fence opens on a line
//! with at most three leading spaces and a run of at least three backticks or tildes (a
//! backtick fence's info string may not contain a backtick), and closes on a line with at
//! most three leading spaces and a run of the same character at least as long, followed only
//! by spaces or tabs. A fence that never closes runs to the end of the text. Fence lines are
//! recognised the same way whether or not they sit under a list item, so a code example
//! inside a list (indented by up to three spaces) protects its column-zero lines too.

/// One comment that opens at column zero of a top-level line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Comment<'a> {
    /// Byte offset of `<!--` (always at the start of a line).
    pub start: usize,
    /// Byte offset just after `-->`; the length of the text when unterminated.
    pub end: usize,
    /// What lies between `<!--` and `-->` (or the end of the text).
    pub content: &'a str,
    /// Whether a `-->` was found.
    pub terminated: bool,
    /// 1-based line number of `<!--`.
    pub line: usize,
}

const OPEN: &str = "<!--";
const CLOSE: &str = "-->";

/// A code fence that is open: its character and run length.
#[derive(Debug, Clone, Copy)]
struct Fence {
    ch: u8,
    len: usize,
}

/// Every comment whose `<!--` starts a line that is not fenced code, in source order. An
/// unterminated one is the last (it swallows the rest of the text).
pub(crate) fn top_level_comments(src: &str) -> Vec<Comment<'_>> {
    let mut out = Vec::new();
    let mut fence: Option<Fence> = None;
    let mut offset = 0;
    let mut line_no = 1;
    while offset < src.len() {
        let rest = &src[offset..];
        let line_len = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let line = strip_eol(&rest[..line_len]);
        if let Some(open) = fence {
            if closes(line, open) {
                fence = None;
            }
        } else if line.starts_with(OPEN) {
            let body_from = offset + OPEN.len();
            match src[body_from..].find(CLOSE) {
                Some(rel) => {
                    let end = body_from + rel + CLOSE.len();
                    out.push(Comment {
                        start: offset,
                        end,
                        content: &src[body_from..body_from + rel],
                        terminated: true,
                        line: line_no,
                    });
                    // Resume on the line after the one holding `-->`.
                    let after = &src[end..];
                    let next = after.find('\n').map_or(src.len(), |i| end + i + 1);
                    line_no += count_newlines(&src[offset..next]);
                    offset = next;
                    continue;
                }
                None => {
                    out.push(Comment {
                        start: offset,
                        end: src.len(),
                        content: &src[body_from..],
                        terminated: false,
                        line: line_no,
                    });
                    return out;
                }
            }
        } else {
            fence = opening_fence(line);
        }
        offset += line_len;
        line_no += 1;
    }
    out
}

fn count_newlines(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'\n').count()
}

/// The line without its `\n` or `\r\n`.
fn strip_eol(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

/// The line after at most three leading spaces, or `None` when it is indented further (four
/// spaces or a leading tab make indented code, which is never a fence).
fn after_fence_indent(line: &str) -> Option<&str> {
    let spaces = line.bytes().take_while(|&b| b == b' ').count();
    if spaces > 3 {
        return None;
    }
    Some(&line[spaces..])
}

fn opening_fence(line: &str) -> Option<Fence> {
    let rest = after_fence_indent(line)?;
    let ch = *rest.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|&b| b == ch).count();
    if len < 3 {
        return None;
    }
    if ch == b'`' && rest[len..].contains('`') {
        // Inline code such as ```x```, not a fence.
        return None;
    }
    Some(Fence { ch, len })
}

fn closes(line: &str, fence: Fence) -> bool {
    let Some(rest) = after_fence_indent(line) else {
        return false;
    };
    let len = rest.bytes().take_while(|&b| b == fence.ch).count();
    len >= fence.len && rest[len..].bytes().all(|b| b == b' ' || b == b'\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(src: &str) -> Vec<&str> {
        top_level_comments(src).iter().map(|c| c.content).collect()
    }

    #[test]
    fn finds_column_zero_comments_with_offsets_and_lines() {
        let src = "intro\n<!-- a -->\ntext\n\n<!-- b\nmore -->\nend";
        let found = top_level_comments(src);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].content, " a ");
        assert_eq!(found[0].line, 2);
        assert_eq!(&src[found[0].start..found[0].end], "<!-- a -->");
        assert_eq!(found[1].content, " b\nmore ");
        assert_eq!(found[1].line, 5);
        assert!(found.iter().all(|c| c.terminated));
    }

    #[test]
    fn line_numbers_continue_after_multi_line_comments() {
        let src = "<!-- a\nb\nc -->\n<!-- d -->\n";
        let found = top_level_comments(src);
        assert_eq!(found.iter().map(|c| c.line).collect::<Vec<_>>(), [1, 4]);
    }

    #[test]
    fn only_column_zero_counts() {
        assert!(contents(" <!-- a -->").is_empty());
        assert!(contents("   <!-- a -->").is_empty());
        assert!(contents("    <!-- a -->").is_empty());
        assert!(contents("\t<!-- a -->").is_empty());
        assert!(contents("text <!-- a -->").is_empty());
        assert!(contents("> <!-- a -->").is_empty());
        assert!(contents(">\n> <!-- a -->").is_empty());
        assert!(contents("- <!-- a -->").is_empty());
        assert!(contents("1. <!-- a -->").is_empty());
        assert!(contents("- item\n  <!-- a -->").is_empty());
        assert!(contents("para\n\n    <!-- a -->\n").is_empty());
    }

    #[test]
    fn fences_hide_comments_until_closed() {
        assert!(contents("```\n<!-- a -->\n```").is_empty());
        assert!(contents("~~~md\n<!-- a -->\n~~~").is_empty());
        assert_eq!(contents("```\n<!-- a -->\n```\n<!-- b -->"), [" b "]);
        assert_eq!(contents("   ```\n<!-- a -->\n  ```\n<!-- b -->"), [" b "]);
    }

    #[test]
    fn fence_length_and_character_must_match_to_close() {
        // A shorter run or the other character does not close.
        assert!(contents("````\n```\n<!-- a -->\n````").is_empty());
        assert!(contents("~~~\n```\n<!-- a -->\n~~~").is_empty());
        assert!(contents("```\n~~~\n<!-- a -->\n```").is_empty());
        // A longer run closes; a closing line with text after the run does not.
        assert_eq!(contents("```\n`````\n<!-- a -->"), [" a "]);
        assert!(contents("```\n``` x\n<!-- a -->").is_empty());
        // Trailing spaces and CRLF are fine on a closing line.
        assert_eq!(contents("```\r\n```  \r\n<!-- a -->\r\n"), [" a "]);
    }

    #[test]
    fn unclosed_fence_runs_to_the_end() {
        assert!(contents("text\n```rust\nfn x() {}\n<!-- a -->\n").is_empty());
    }

    #[test]
    fn not_fences() {
        // Two backticks, four-space indent, a tab, inline code with backticks after the run.
        assert_eq!(contents("``\n<!-- a -->"), [" a "]);
        assert_eq!(contents("    ```\n<!-- a -->"), [" a "]);
        assert_eq!(contents("\t```\n<!-- a -->"), [" a "]);
        assert_eq!(contents("```inline```\n<!-- a -->"), [" a "]);
        // Inside a quote or after a list marker the run is not at the fence position.
        assert_eq!(contents("> ```\n<!-- a -->"), [" a "]);
        assert_eq!(contents("- ```\n<!-- a -->"), [" a "]);
    }

    #[test]
    fn fence_inside_a_list_item_protects_its_lines() {
        let src = "1. Example:\n   ```md\n<!-- a -->\n   ```\n<!-- b -->\n";
        assert_eq!(contents(src), [" b "]);
    }

    #[test]
    fn a_comment_hides_fences_and_openers_inside_it() {
        assert_eq!(
            contents("<!-- a\n```\n-->\n<!-- b -->"),
            [" a\n```\n", " b "]
        );
        assert_eq!(
            contents("<!-- a\n<!-- b -->\n<!-- c -->"),
            [" a\n<!-- b ", " c "]
        );
    }

    #[test]
    fn text_after_the_terminator_is_not_scanned() {
        assert_eq!(contents("<!-- a --> ```\n<!-- b -->"), [" a ", " b "]);
        assert_eq!(contents("<!-- a --><!-- b -->"), [" a "]);
    }

    #[test]
    fn unterminated_comment_swallows_the_rest() {
        let found = top_level_comments("x\n<!-- a\n<!-- b\n");
        assert_eq!(found.len(), 1);
        assert!(!found[0].terminated);
        assert_eq!(found[0].content, " a\n<!-- b\n");
        assert_eq!(found[0].end, "x\n<!-- a\n<!-- b\n".len());
    }

    #[test]
    fn opener_is_not_its_own_terminator() {
        let found = top_level_comments("<!-->\nx -->");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].content, ">\nx ");
    }
}
