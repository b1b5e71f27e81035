//! What can go wrong with a call, in the classes a caller acts on.

use std::time::Duration;

/// A terminal error Telegram answered, with the kinds that need their own handling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {description}")]
pub struct ApiError {
    /// `error_code` (also the HTTP status).
    pub code: u16,
    /// `description` as Telegram wrote it (never contains the token).
    pub description: String,
    /// What it means for the caller.
    pub kind: ApiErrorKind,
}

/// Kinds of terminal API errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// The topic is gone (`message thread not found`, `TOPIC_DELETED`, ...): terminal for that
    /// binding, never retried in a loop.
    ThreadNotFound,
    /// `TOPIC_CLOSED`.
    TopicClosed,
    /// `message is not modified`: the edit already shows; treat as success.
    NotModified,
    /// `can't parse entities`: the markup is bad; resending it can never work.
    ParseEntities,
    /// `message is too long` / caption too long.
    TooLong,
    /// The message to edit or delete is gone.
    MessageGone,
    /// A callback query is too old or was answered.
    QueryExpired,
    /// `chat not found`.
    ChatNotFound,
    /// 401: the token is wrong or revoked.
    Unauthorized,
    /// 403: blocked by the person, or not allowed.
    Forbidden,
    /// 409: another `getUpdates` or a webhook.
    Conflict,
    /// 404: unknown method (or file).
    NotFound,
    /// 413: too large.
    TooLarge,
    /// Any other 4xx.
    BadRequest,
}

impl ApiErrorKind {
    /// Classifies an error answer.
    pub fn classify(code: u16, description: &str) -> Self {
        let d = description.to_ascii_lowercase();
        match code {
            401 => return Self::Unauthorized,
            403 => return Self::Forbidden,
            404 => return Self::NotFound,
            409 => return Self::Conflict,
            413 => return Self::TooLarge,
            _ => {}
        }
        if d.contains("message thread not found")
            || d.contains("topic_deleted")
            || d.contains("message_thread_invalid")
            || d.contains("invalid message thread id")
            || d.contains("topic not found")
        {
            Self::ThreadNotFound
        } else if d.contains("topic_closed") {
            Self::TopicClosed
        } else if d.contains("message is not modified") {
            Self::NotModified
        } else if d.contains("can't parse entities") || d.contains("can't find end of the entity") {
            Self::ParseEntities
        } else if d.contains("is too long") || d.contains("message_too_long") {
            Self::TooLong
        } else if d.contains("message to edit not found")
            || d.contains("message to delete not found")
            || d.contains("message can't be edited")
            || d.contains("message can't be deleted")
        {
            Self::MessageGone
        } else if d.contains("query is too old") {
            Self::QueryExpired
        } else if d.contains("chat not found") {
            Self::ChatNotFound
        } else {
            Self::BadRequest
        }
    }
}

/// Why a call did not return a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// `429`: wait `retry_after` before calling this chat (or the bot) again. Nothing happened.
    #[error("flood wait: retry after {} s", retry_after.as_secs())]
    Flood {
        /// The wait Telegram asked for.
        retry_after: Duration,
        /// The chat the refused call targeted, if any.
        chat_id: Option<i64>,
    },
    /// Nothing happened, or the method is safe to repeat: try again later.
    #[error("temporary failure: {0}")]
    Retryable(String),
    /// A non-repeatable call whose effect may or may not have happened (transport failure after
    /// the request left, 5xx, or a success answer that could not be read). Repeating it blindly
    /// may duplicate what the person sees.
    #[error("outcome unknown: {0}")]
    CommitUnknown(String),
    /// Telegram refused the call. Repeating the same call gives the same answer.
    #[error("telegram refused: {0}")]
    Api(ApiError),
}

impl CallError {
    /// The API error kind, for terminal errors.
    pub fn api_kind(&self) -> Option<ApiErrorKind> {
        match self {
            Self::Api(e) => Some(e.kind),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_telegram_texts() {
        let cases = [
            (
                400,
                "Bad Request: message thread not found",
                ApiErrorKind::ThreadNotFound,
            ),
            (
                400,
                "Bad Request: TOPIC_DELETED",
                ApiErrorKind::ThreadNotFound,
            ),
            (400, "Bad Request: TOPIC_CLOSED", ApiErrorKind::TopicClosed),
            (
                400,
                "Bad Request: message is not modified: specified new message content",
                ApiErrorKind::NotModified,
            ),
            (
                400,
                "Bad Request: can't parse entities: Unsupported start tag",
                ApiErrorKind::ParseEntities,
            ),
            (
                400,
                "Bad Request: message is too long",
                ApiErrorKind::TooLong,
            ),
            (
                400,
                "Bad Request: message caption is too long",
                ApiErrorKind::TooLong,
            ),
            (
                400,
                "Bad Request: message to edit not found",
                ApiErrorKind::MessageGone,
            ),
            (
                400,
                "Bad Request: query is too old and response timeout expired",
                ApiErrorKind::QueryExpired,
            ),
            (
                400,
                "Bad Request: chat not found",
                ApiErrorKind::ChatNotFound,
            ),
            (400, "Bad Request: something else", ApiErrorKind::BadRequest),
            (401, "Unauthorized", ApiErrorKind::Unauthorized),
            (
                403,
                "Forbidden: bot was blocked by the user",
                ApiErrorKind::Forbidden,
            ),
            (
                409,
                "Conflict: terminated by other getUpdates request",
                ApiErrorKind::Conflict,
            ),
        ];
        for (code, text, kind) in cases {
            assert_eq!(ApiErrorKind::classify(code, text), kind, "{text}");
        }
    }
}
