//! The examples of a spec file in the CommonMark spec format: a fence of 32 backticks with
//! `example` (and, in GFM's file, the extension's name), the Markdown, a line with a single
//! `.`, the expected HTML, the closing fence. `→` stands for a tab.

/// One example.
#[derive(Debug, Clone)]
pub struct Example {
    /// Which spec: `commonmark` or `gfm`.
    pub spec: &'static str,
    /// Its number in that spec (1-based, in file order, as the spec's own tests count).
    pub number: usize,
    /// The heading of the section it is in.
    pub section: String,
    /// The extension named after `example` (`table`, `autolink`, ...), if any.
    pub extension: Option<String>,
    pub markdown: String,
    /// The HTML the spec expects.
    pub html: String,
}

const FENCE: &str = "````````````````````````````````";

/// Every example of `text`.
pub fn read(spec: &'static str, text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix(FENCE) {
            let Some(kind) = rest.trim().strip_prefix("example") else {
                continue;
            };
            let extension = Some(kind.trim())
                .filter(|k| !k.is_empty())
                .map(str::to_owned);
            let mut markdown = String::new();
            let mut html = String::new();
            let mut in_html = false;
            for l in lines.by_ref() {
                if l == FENCE {
                    break;
                }
                if l == "." && !in_html {
                    in_html = true;
                    continue;
                }
                let target = if in_html { &mut html } else { &mut markdown };
                target.push_str(&l.replace('→', "\t"));
                target.push('\n');
            }
            out.push(Example {
                spec,
                number: out.len() + 1,
                section: section.clone(),
                extension,
                markdown,
                html,
            });
        } else if let Some(h) = line.strip_prefix('#') {
            section = h.trim_start_matches('#').trim().to_owned();
        }
    }
    out
}
