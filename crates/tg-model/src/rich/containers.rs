//! Containers: blocks that hold blocks (quotes, lists, details, tables, footnotes) and those
//! whose content becomes a text field (a summary, a credit, a caption, a footer), and what
//! each makes of its content once closed.

use super::builder::Builder;
use super::inline::Closer;
use super::limits::{Result, RichError};
use super::model::{BULLET, Block, Cell, ListItem, Parts, RichText, TextObject, ordered_label};

/// Containers whose content ends up as a text field of their parent or of a text-only block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Flat {
    Footer,
    Summary,
    Credit,
    Caption,
}

/// An open container, with what it has collected besides its blocks.
#[derive(Debug)]
pub(super) enum Kind {
    Quote {
        credit: Option<RichText>,
        expandable: bool,
    },
    Pullquote {
        credit: Option<RichText>,
    },
    List {
        ordered: bool,
        next: i64,
        style: Option<String>,
        items: Vec<ListItem>,
    },
    Item {
        label: String,
        value: Option<i64>,
        style: Option<String>,
        checkbox: Option<bool>,
    },
    Details {
        summary: Option<RichText>,
        open: bool,
    },
    Table {
        rows: Vec<Vec<Cell>>,
        row: Option<Vec<Cell>>,
        head: bool,
        /// Markdown's column alignments.
        aligns: Vec<&'static str>,
        caption: Option<RichText>,
        /// `is_bordered`, `is_striped`, `is_compact`.
        flags: [bool; 3],
    },
    Cell {
        header: bool,
        align: String,
        valign: String,
        colspan: Option<u64>,
        rowspan: Option<u64>,
    },
    Footnote {
        label: String,
    },
    Flat(Flat),
}

impl Kind {
    /// Whether this container nests blocks in the output, and so counts towards `max_depth`.
    pub(super) fn nests(&self) -> bool {
        matches!(
            self,
            Kind::Quote {
                expandable: false,
                ..
            } | Kind::List { .. }
                | Kind::Details { .. }
        )
    }
}

/// An open container: its content so far, and what closes it.
#[derive(Debug)]
pub(super) struct Container {
    pub(super) kind: Kind,
    pub(super) blocks: Vec<Block>,
    pub(super) closer: Closer,
}

impl Builder<'_> {
    pub(super) fn open_item(&mut self, value: Option<i64>, closer: Closer) -> Result<()> {
        let (label, value, style) = match self.stack.last_mut() {
            Some(Container {
                kind:
                    Kind::List {
                        ordered: true,
                        next,
                        style,
                        ..
                    },
                ..
            }) => {
                if let Some(value) = value {
                    *next = value;
                }
                let n = *next;
                *next = n.saturating_add(1);
                (ordered_label(n, style.as_deref()), Some(n), style.clone())
            }
            Some(Container {
                kind: Kind::List { .. },
                ..
            }) => (BULLET.to_string(), None, None),
            _ => {
                // An item outside any list gets a list of its own.
                self.push_container(
                    Kind::List {
                        ordered: false,
                        next: 1,
                        style: None,
                        items: Vec::new(),
                    },
                    Closer::Implicit,
                )?;
                (BULLET.to_string(), None, None)
            }
        };
        self.stack.push(Container {
            kind: Kind::Item {
                label,
                value,
                style,
                checkbox: None,
            },
            blocks: Vec::new(),
            closer,
        });
        Ok(())
    }

    pub(super) fn set_checkbox(&mut self, checked: bool) {
        if let Some(Kind::Item { checkbox, .. }) = self
            .stack
            .iter_mut()
            .rev()
            .map(|c| &mut c.kind)
            .find(|k| matches!(k, Kind::Item { .. }))
        {
            *checkbox = Some(checked);
        }
    }

    pub(super) fn open_cell(
        &mut self,
        header: bool,
        align: &str,
        valign: &str,
        colspan: Option<u64>,
        rowspan: Option<u64>,
        closer: Closer,
    ) {
        let header = match self.stack.last_mut() {
            Some(Container {
                kind: Kind::Table { row, head, .. },
                ..
            }) => {
                row.get_or_insert_with(Vec::new);
                header || *head
            }
            _ => header,
        };
        self.stack.push(Container {
            kind: Kind::Cell {
                header,
                align: align.to_string(),
                valign: valign.to_string(),
                colspan,
                rowspan,
            },
            blocks: Vec::new(),
            closer,
        });
    }

    /// Closes everything inside the innermost table and returns its index.
    pub(super) fn close_to_table(&mut self) -> Result<Option<usize>> {
        self.finish_text();
        let Some(index) = self.nearest(|k| matches!(k, Kind::Table { .. })) else {
            return Ok(None);
        };
        self.pop_to(index)?;
        Ok(Some(index))
    }

    fn finish_row(&mut self) -> Result<()> {
        let max = self.limits.max_table_columns;
        if let Some(Container {
            kind: Kind::Table { rows, row, .. },
            ..
        }) = self.stack.last_mut()
            && let Some(cells) = row.take()
            && !cells.is_empty()
        {
            if cells.len() > max {
                return Err(RichError::TooManyColumns);
            }
            rows.push(cells);
        }
        Ok(())
    }

    pub(super) fn start_row(&mut self, is_head: bool) -> Result<()> {
        if self.close_to_table()?.is_none() {
            return Ok(());
        }
        self.finish_row()?;
        if let Some(Container {
            kind: Kind::Table { row, head, .. },
            ..
        }) = self.stack.last_mut()
        {
            *row = Some(Vec::new());
            *head = is_head;
        }
        Ok(())
    }

    pub(super) fn end_row(&mut self) -> Result<()> {
        if self.close_to_table()?.is_some() {
            self.finish_row()?;
            if let Some(Container {
                kind: Kind::Table { head, .. },
                ..
            }) = self.stack.last_mut()
            {
                *head = false;
            }
        }
        Ok(())
    }

    pub(super) fn footnote_number(&mut self, label: &str) -> usize {
        match self.footnotes.iter().position(|l| l == label) {
            Some(i) => i + 1,
            None => {
                self.footnotes.push(label.to_string());
                self.footnotes.len()
            }
        }
    }

    /// Closes the innermost container and attaches what it made to its parent.
    pub(super) fn pop_container(&mut self) -> Result<()> {
        self.finish_text();
        let Some(Container { kind, blocks, .. }) = self.stack.pop() else {
            return Ok(());
        };
        match kind {
            Kind::Quote {
                credit,
                expandable: true,
            } => {
                if let Some(text) = Block::flatten(&blocks) {
                    self.add_block(Block::ExpandableBlockquote { text, credit })?;
                }
            }
            Kind::Quote { credit, .. } => {
                if !blocks.is_empty() {
                    self.add_block(Block::Blockquote { blocks, credit })?;
                }
            }
            Kind::Pullquote { credit } => {
                if let Some(text) = Block::flatten(&blocks) {
                    self.add_block(Block::Pullquote { text, credit })?;
                }
            }
            Kind::List { items, .. } => {
                if !items.is_empty() {
                    self.add_block(Block::List { items })?;
                }
            }
            Kind::Item {
                label,
                value,
                style,
                checkbox,
            } => match self.stack.last_mut() {
                Some(Container {
                    kind: Kind::List { items, .. },
                    ..
                }) => items.push(ListItem::new(label, blocks, checkbox, value, style)),
                _ => {
                    for block in blocks {
                        self.add_block(block)?;
                    }
                }
            },
            Kind::Details { summary, open } => {
                let summary = summary.unwrap_or_else(|| RichText::Plain("Details".into()));
                self.add_block(Block::Details {
                    summary,
                    blocks,
                    is_open: open.then_some(true),
                })?;
            }
            Kind::Table {
                mut rows,
                row,
                caption,
                flags: [bordered, striped, compact],
                ..
            } => {
                if let Some(cells) = row.filter(|r| !r.is_empty()) {
                    if cells.len() > self.limits.max_table_columns {
                        return Err(RichError::TooManyColumns);
                    }
                    rows.push(cells);
                }
                if !rows.is_empty() {
                    self.add_block(Block::Table {
                        cells: rows,
                        is_bordered: bordered.then_some(true),
                        is_striped: striped.then_some(true),
                        is_compact: compact.then_some(true),
                        caption,
                    })?;
                }
            }
            Kind::Cell {
                header,
                align,
                valign,
                colspan,
                rowspan,
            } => match self.stack.last_mut() {
                Some(Container {
                    kind: Kind::Table { row, .. },
                    ..
                }) => row.get_or_insert_with(Vec::new).push(Cell {
                    align,
                    valign,
                    text: Block::flatten(&blocks),
                    is_header: header.then_some(true),
                    colspan,
                    rowspan,
                }),
                _ => {
                    for block in blocks {
                        self.add_block(block)?;
                    }
                }
            },
            Kind::Footnote { label } => {
                let number = self.footnote_number(&label);
                let mut parts = Parts::default();
                parts.push(RichText::object(TextObject::FootnoteLabel {
                    name: label,
                    text: RichText::Plain(format!("{number}.")),
                }));
                parts.push_str(" ");
                if let Some(text) = Block::flatten(&blocks) {
                    parts.push(text);
                }
                self.add_block(Block::Paragraph {
                    text: parts.into_text(),
                })?;
            }
            Kind::Flat(flat) => {
                let Some(text) = Block::flatten(&blocks) else {
                    return Ok(());
                };
                let slot = match (flat, self.stack.last_mut().map(|c| &mut c.kind)) {
                    (Flat::Summary, Some(Kind::Details { summary, .. })) => Some(summary),
                    (
                        Flat::Credit,
                        Some(Kind::Quote { credit, .. } | Kind::Pullquote { credit }),
                    ) => Some(credit),
                    (Flat::Caption, Some(Kind::Table { caption, .. })) => Some(caption),
                    _ => None,
                };
                match slot {
                    Some(slot) => *slot = Some(text),
                    None if flat == Flat::Footer => self.add_block(Block::Footer { text })?,
                    None => self.add_block(Block::Paragraph { text })?,
                }
            }
        }
        Ok(())
    }
}
