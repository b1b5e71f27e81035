//! What a rich message may contain, and why one is refused.

/// Why a rich message was refused. `Display` is the text that follows `Bad Request: ` in the
/// server's answer (Telegram's real texts are unknown, these are our own).
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum RichError {
    /// None, or more than one, of `blocks`, `html` and `markdown` was given.
    #[error("rich message must have exactly one of blocks, html, markdown")]
    SourceCount,
    /// The text content is longer than [`Limits::max_chars`].
    #[error("rich message is too long")]
    TooLong,
    /// More blocks (nested blocks, list items and table rows included) than [`Limits::max_blocks`].
    #[error("too many blocks in rich message")]
    TooManyBlocks,
    /// Blocks, or inline formatting, nested deeper than [`Limits::max_depth`].
    #[error("rich message nesting is too deep")]
    TooDeep,
    /// A table row has more cells than [`Limits::max_table_columns`].
    #[error("too many columns in rich message table")]
    TooManyColumns,
    /// The `media` list is longer than [`Limits::max_media`].
    #[error("too many media in rich message")]
    TooManyMedia,
    /// The message has a media block, an image, or a `media` list.
    #[error("tg-fake does not support media in rich messages")]
    MediaUnsupported,
    /// The input is malformed: wrong JSON shape, missing field, unfinished HTML tag...
    #[error("can't parse rich message: {0}")]
    Parse(String),
    /// A block of `blocks` has a `type` that does not exist.
    #[error("invalid block type \"{0}\"")]
    InvalidBlockType(String),
    /// A rich text object has a `type` that does not exist.
    #[error("invalid rich text type \"{0}\"")]
    InvalidTextType(String),
    /// Nothing would be shown.
    #[error("rich message text is empty")]
    Empty,
}

/// Limits a rich message must respect. The defaults are the documented Bot API ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum text content, counted by [`char_count`](super::char_count).
    pub max_chars: usize,
    /// Maximum blocks, counting nested blocks, list items and table rows.
    pub max_blocks: usize,
    /// Maximum nesting of container blocks (block quotes, lists, details), and separately of
    /// inline formatting.
    pub max_depth: usize,
    /// Maximum length of the `media` list.
    pub max_media: usize,
    /// Maximum cells in one table row.
    pub max_table_columns: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_chars: 32768,
            max_blocks: 500,
            max_depth: 16,
            max_media: 50,
            max_table_columns: 20,
        }
    }
}

pub(super) type Result<T> = std::result::Result<T, RichError>;

pub(super) fn parse_err(detail: impl Into<String>) -> RichError {
    RichError::Parse(detail.into())
}
