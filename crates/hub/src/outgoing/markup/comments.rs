//! The comment membrane: every HTML comment pi wrote, wherever it stands in the Markdown,
//! except where Markdown shows `<!--` as code.
//!
//! Code is what the renderer's parser reads as a fenced or indented code block or an inline
//! code span (`tg_format::markdown::parse::code_ranges`: the same parser, the same options); there `<!--` is text the person
//! should see. A `<!--` right after an odd number of backslashes is escaped (Markdown shows
//! it) and stays too. Anywhere else a `<!--` opens a comment: `<!-->` and `<!--->` are whole
//! (empty) ones, as CommonMark reads them; any other runs to the first `-->` after it, across lines and blocks if need be (what lies inside is the comment's, code
//! included); without a `-->` it runs to the end of the text, so a comment being written, or
//! one never closed, is never shown raw.
//!
//! Linear: one parse, then one pass over the text and the sorted code ranges.

use tg_format::markdown::parse::code_ranges;

/// One comment outside code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Comment<'a> {
    /// Byte offset of `<!--`.
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

/// Whether the byte at `at` follows an odd number of backslashes.
fn escaped(src: &str, at: usize) -> bool {
    let run = src.as_bytes()[..at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count();
    run % 2 == 1
}

/// The comments outside code.
#[derive(Debug, Default)]
pub(crate) struct Found<'a> {
    /// In source order; an unterminated one is the last.
    pub comments: Vec<Comment<'a>>,
    /// Whether a comment swallowed the start of some code (a fence's opening line, a code
    /// span's backticks): without it the rest reads differently.
    pub crossed_code: bool,
}

/// Every comment outside code.
pub(crate) fn outside_code(src: &str) -> Found<'_> {
    let mut out = Found::default();
    if !src.contains(OPEN) {
        return out;
    }
    let code = code_ranges(src);
    let mut next_code = code.iter().peekable();
    let mut pos = 0;
    let mut line = 1;
    let mut counted = 0;
    while let Some(rel) = src[pos..].find(OPEN) {
        let at = pos + rel;
        while next_code.next_if(|c| c.end <= at).is_some() {}
        if let Some(c) = next_code.peek()
            && c.start <= at
        {
            pos = c.end;
            continue;
        }
        if escaped(src, at) {
            pos = at + 1;
            continue;
        }
        line += count_newlines(&src[counted..at]);
        counted = at;
        let body = at + OPEN.len();
        // `<!-->` and `<!--->` are whole (empty) comments, as CommonMark and HTML read them.
        let abrupt = [">", "->"].into_iter().find(|t| src[body..].starts_with(t));
        if let Some(t) = abrupt {
            out.comments.push(Comment {
                start: at,
                end: body + t.len(),
                content: "",
                terminated: true,
                line,
            });
            pos = body + t.len();
            continue;
        }
        match src[body..].find(CLOSE) {
            Some(r) => {
                let end = body + r + CLOSE.len();
                if next_code.peek().is_some_and(|c| c.start < end) {
                    out.crossed_code = true;
                }
                out.comments.push(Comment {
                    start: at,
                    end,
                    content: &src[body..body + r],
                    terminated: true,
                    line,
                });
                pos = end;
            }
            None => {
                out.comments.push(Comment {
                    start: at,
                    end: src.len(),
                    content: &src[body..],
                    terminated: false,
                    line,
                });
                break;
            }
        }
    }
    out
}

fn count_newlines(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'\n').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(src: &str) -> Vec<&str> {
        outside_code(src)
            .comments
            .iter()
            .map(|c| c.content)
            .collect()
    }

    #[test]
    fn finds_comments_anywhere_outside_code() {
        assert_eq!(contents("a <!-- x --> b"), [" x "]);
        assert_eq!(contents("- item <!-- x -->\n- <!-- y -->"), [" x ", " y "]);
        assert_eq!(contents("> quoted <!--q-->"), ["q"]);
        assert_eq!(contents("| a | <!-- t --> |\n|---|---|\n"), [" t "]);
        assert_eq!(contents("# Title <!-- h -->"), [" h "]);
        assert_eq!(contents("<div>\n<!-- in html -->\n</div>\n"), [" in html "]);
    }

    #[test]
    fn code_keeps_its_comments() {
        assert!(contents("```\n<!-- x -->\n```").is_empty());
        assert!(contents("~~~md\n<!-- x -->\n").is_empty());
        assert!(contents("para\n\n    <!-- x -->\n").is_empty());
        assert!(contents("use `<!-- x -->` here").is_empty());
        assert!(contents("use ``a <!-- ` --> b`` here").is_empty());
        assert!(contents("- item\n\n  ```\n  <!-- x -->\n  ```\n").is_empty());
        assert_eq!(
            contents("`<!--` opens, <!-- hidden --> and\n```\n<!-- kept -->\n```"),
            [" hidden "]
        );
    }

    #[test]
    fn indented_continuation_is_not_code() {
        // Four spaces after a paragraph line continue the paragraph.
        assert_eq!(contents("para\n    <!-- x -->\n"), [" x "]);
        // Four spaces under a list item are its content.
        assert_eq!(contents("1. item\n\n    <!-- x -->\n"), [" x "]);
    }

    #[test]
    fn escaped_openers_stay() {
        assert!(contents(r"\<!-- x -->").is_empty());
        assert_eq!(contents(r"\\<!-- x -->"), [" x "]);
    }

    #[test]
    fn unterminated_runs_to_the_end() {
        let found = outside_code("a\nb <!-- x\n\nmore").comments;
        assert_eq!(found.len(), 1);
        assert!(!found[0].terminated);
        assert_eq!(found[0].line, 2);
        assert_eq!(found[0].content, " x\n\nmore");
    }

    #[test]
    fn a_comment_runs_across_blocks_to_the_first_terminator() {
        // The fence opened inside the comment: `<!-- y -->` is code as this text reads, and
        // the caller looks again once the comment is gone.
        let found = outside_code("a <!-- x\n\n```\ncode --> b\n<!-- y -->\n");
        assert_eq!(found.comments.len(), 1);
        assert_eq!(found.comments[0].content, " x\n\n```\ncode ");
        assert!(found.crossed_code);
        assert!(!outside_code("a <!-- x --> `b`").crossed_code);
    }

    #[test]
    fn abrupt_empty_comments() {
        assert_eq!(contents("foo <!--> foo -->"), [""]);
        assert_eq!(contents("foo <!---> foo -->"), [""]);
        assert_eq!(contents("<!---->"), [""]);
    }

    #[test]
    fn lines_count() {
        let found = outside_code("x\n<!-- a\nb -->\ny <!-- c -->\n\n<!-- d").comments;
        assert_eq!(found.iter().map(|c| c.line).collect::<Vec<_>>(), [2, 4, 6]);
    }
}
