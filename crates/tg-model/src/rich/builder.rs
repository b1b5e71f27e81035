//! The block tree builder shared by the markdown and html forms.
//!
//! Both forms drive the same builder, so HTML embedded in markdown (`<u>`, `<details>`...)
//! behaves exactly like it does in the html form. The builder's vocabulary is blocks,
//! containers and inline frames; what opens and closes them is the business of
//! [`super::markdown`] and [`super::html`].

use super::containers::{Container, Kind};
use super::inline::{Closer, Frame, FrameKind, TextBlock, TextKind};
use super::limits::{Limits, Result, RichError};
use super::model::{Block, Parts, RichText, TextObject};

/// Builds the block tree from block and inline events, whichever markup they come from.
///
/// Inline content arriving where no text block is open starts an implicit paragraph; content
/// arriving directly in a list or a table gets an implicit item or cell. That keeps the tree
/// well formed whatever the input, so every output has the shape of a `RichMessage`.
pub(super) struct Builder<'l> {
    pub(super) limits: &'l Limits,
    root: Vec<Block>,
    pub(super) stack: Vec<Container>,
    pub(super) text: Option<TextBlock>,
    /// Footnote labels in order of first use, for their numbers.
    pub(super) footnotes: Vec<String>,
}

impl<'l> Builder<'l> {
    pub(super) fn new(limits: &'l Limits) -> Self {
        Self {
            limits,
            root: Vec::new(),
            stack: Vec::new(),
            text: None,
            footnotes: Vec::new(),
        }
    }

    pub(super) fn finish(mut self) -> Result<Vec<Block>> {
        self.finish_text();
        while !self.stack.is_empty() {
            self.pop_container()?;
        }
        Ok(self.root)
    }

    fn top_blocks(&mut self) -> &mut Vec<Block> {
        match self.stack.last_mut() {
            Some(container) => &mut container.blocks,
            None => &mut self.root,
        }
    }

    pub(super) fn nearest(&self, pred: impl Fn(&Kind) -> bool) -> Option<usize> {
        self.stack.iter().rposition(|c| pred(&c.kind))
    }

    pub(super) fn pop_to(&mut self, index: usize) -> Result<()> {
        while self.stack.len() > index + 1 {
            self.pop_container()?;
        }
        Ok(())
    }

    // -- blocks ---------------------------------------------------------------------------

    /// Makes the innermost container one that holds blocks.
    fn ensure_flow(&mut self) -> Result<()> {
        match self.stack.last().map(|c| &c.kind) {
            Some(Kind::List { .. }) => self.open_item(None, Closer::Implicit),
            Some(Kind::Table { .. }) => {
                self.open_cell(false, "left", "top", None, None, Closer::Implicit);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    pub(super) fn add_block(&mut self, block: Block) -> Result<()> {
        self.finish_text();
        self.ensure_flow()?;
        self.top_blocks().push(block);
        Ok(())
    }

    pub(super) fn push_container(&mut self, kind: Kind, closer: Closer) -> Result<()> {
        self.finish_text();
        self.ensure_flow()?;
        self.stack.push(Container {
            kind,
            blocks: Vec::new(),
            closer,
        });
        let depth = self.stack.iter().filter(|c| c.kind.nests()).count();
        if depth > self.limits.max_depth {
            return Err(RichError::TooDeep);
        }
        Ok(())
    }

    /// Opens a container where it stands, without the implicit item or cell `push_container`
    /// would add: for a table's caption, which belongs to the table itself.
    pub(super) fn push_container_here(&mut self, kind: Kind, closer: Closer) {
        self.stack.push(Container {
            kind,
            blocks: Vec::new(),
            closer,
        });
    }

    /// Closes the innermost container with this closer and everything opened inside it.
    pub(super) fn end_container(&mut self, closer: &Closer) -> Result<()> {
        self.finish_text();
        if let Some(index) = self.stack.iter().rposition(|c| c.closer == *closer) {
            self.pop_to(index)?;
            self.pop_container()?;
        }
        Ok(())
    }

    // -- text blocks ------------------------------------------------------------------------

    pub(super) fn start_text(&mut self, kind: TextKind, closer: Closer) -> Result<()> {
        self.finish_text();
        self.ensure_flow()?;
        self.text = Some(TextBlock::new(kind, closer));
        Ok(())
    }

    pub(super) fn finish_text(&mut self) {
        if let Some(block) = self.text.take().and_then(TextBlock::into_block) {
            // The container cannot have changed since the block started: opening or closing
            // one finishes the text block first.
            self.top_blocks().push(block);
        }
    }

    pub(super) fn text_block(&mut self) -> Result<&mut TextBlock> {
        if self.text.is_none() {
            self.ensure_flow()?;
        }
        Ok(self.text.get_or_insert_with(|| {
            TextBlock::new(TextKind::Paragraph { implicit: true }, Closer::Implicit)
        }))
    }

    pub(super) fn in_raw_block(&self) -> bool {
        self.text.as_ref().is_some_and(TextBlock::is_raw)
    }

    pub(super) fn in_implicit_paragraph(&self) -> bool {
        matches!(
            &self.text,
            Some(TextBlock { kind: TextKind::Paragraph { implicit: true }, frames, .. }) if frames.len() == 1
        )
    }

    // -- inline content ---------------------------------------------------------------------

    pub(super) fn inline_str(&mut self, s: &str) -> Result<()> {
        let block = self.text_block()?;
        if block.is_raw() {
            block.raw.push_str(s);
        } else {
            block.push_str(s);
        }
        Ok(())
    }

    pub(super) fn inline(&mut self, text: RichText) -> Result<()> {
        let block = self.text_block()?;
        if block.is_raw() {
            text.push_plain(&mut block.raw);
        } else {
            block.push(text);
        }
        Ok(())
    }

    /// Text with no markup in it. Whitespace between blocks is dropped; in the html form a
    /// blank line outside any block tag separates paragraphs.
    pub(super) fn text_run(&mut self, s: &str, split_paragraphs: bool) -> Result<()> {
        if self.in_raw_block() {
            return self.inline_str(s);
        }
        if !split_paragraphs || !(self.text.is_none() || self.in_implicit_paragraph()) {
            if self.text.is_none() && s.trim().is_empty() {
                return Ok(());
            }
            return self.inline_str(s);
        }
        for (i, part) in split_blank_lines(s).into_iter().enumerate() {
            if i > 0 && self.in_implicit_paragraph() {
                self.finish_text();
            }
            if self.text.is_none() && part.trim().is_empty() {
                continue;
            }
            self.inline_str(part)?;
        }
        Ok(())
    }

    pub(super) fn open_frame(&mut self, kind: FrameKind, closer: Closer) -> Result<()> {
        let max_depth = self.limits.max_depth;
        let block = self.text_block()?;
        if block.is_raw() {
            return Ok(());
        }
        if block.frames.len() > max_depth {
            return Err(RichError::TooDeep);
        }
        block.frames.push(Frame {
            kind,
            closer,
            parts: Parts::default(),
        });
        Ok(())
    }

    pub(super) fn close_frame(&mut self, closer: &Closer) -> bool {
        self.text
            .as_mut()
            .is_some_and(|block| block.close_matching(closer))
    }

    pub(super) fn footnote_reference(&mut self, label: &str) -> Result<()> {
        let number = self.footnote_number(label);
        self.inline(RichText::object(TextObject::ReferenceLink {
            text: RichText::Plain(number.to_string()),
            reference_name: label.to_string(),
        }))
    }
}

/// Splits at blank lines (a newline, optional spaces or tabs, a newline).
fn split_blank_lines(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(off) = s[search..].find('\n') {
        let nl = search + off;
        let after = &s[nl + 1..];
        let gap = after.len() - after.trim_start_matches([' ', '\t']).len();
        if after[gap..].starts_with('\n') {
            parts.push(&s[start..nl]);
            start = nl + 1 + gap + 1;
            search = start;
        } else {
            search = nl + 1;
        }
    }
    parts.push(&s[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_split() {
        assert_eq!(split_blank_lines("a\n \nb\nc\n\n"), vec!["a", "b\nc", ""]);
    }
}
