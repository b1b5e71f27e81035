//! Bot API answers: `{"ok":true,"result":…}` or Telegram's error object.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A Bot API error as Telegram reports it. The HTTP status equals `error_code`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {description}")]
pub struct ApiError {
    /// `error_code`, also the HTTP status.
    pub code: u16,
    /// `description`, e.g. `Bad Request: message is too long`.
    pub description: String,
    /// `parameters` (`ResponseParameters`): `retry_after`, `migrate_to_chat_id`.
    pub parameters: Option<Value>,
}

impl ApiError {
    /// `400 Bad Request: {detail}`.
    pub fn bad_request(detail: impl std::fmt::Display) -> Self {
        Self {
            code: 400,
            description: format!("Bad Request: {detail}"),
            parameters: None,
        }
    }
    /// `401 Unauthorized`.
    pub fn unauthorized() -> Self {
        Self {
            code: 401,
            description: "Unauthorized".into(),
            parameters: None,
        }
    }
    /// `403 Forbidden: {detail}`.
    pub fn forbidden(detail: impl std::fmt::Display) -> Self {
        Self {
            code: 403,
            description: format!("Forbidden: {detail}"),
            parameters: None,
        }
    }
    /// `404 Not Found` (unknown method or file).
    pub fn not_found() -> Self {
        Self {
            code: 404,
            description: "Not Found".into(),
            parameters: None,
        }
    }
    /// `409 Conflict: {detail}`.
    pub fn conflict(detail: impl std::fmt::Display) -> Self {
        Self {
            code: 409,
            description: format!("Conflict: {detail}"),
            parameters: None,
        }
    }
    /// `429 Too Many Requests: retry after N` with `parameters.retry_after`.
    pub fn flood(retry_after: u64) -> Self {
        Self {
            code: 429,
            description: format!("Too Many Requests: retry after {retry_after}"),
            parameters: Some(json!({ "retry_after": retry_after })),
        }
    }
    /// `500 Internal Server Error`.
    pub fn internal() -> Self {
        Self {
            code: 500,
            description: "Internal Server Error".into(),
            parameters: None,
        }
    }
    /// `400 Bad Request: message thread not found`.
    pub fn thread_not_found() -> Self {
        Self::bad_request("message thread not found")
    }

    /// The JSON body Telegram sends.
    pub fn body(&self) -> Value {
        let mut v =
            json!({ "ok": false, "error_code": self.code, "description": self.description });
        if let Some(p) = &self.parameters {
            v["parameters"] = p.clone();
        }
        v
    }
}

/// Result of one Bot API method.
pub type ApiResult = Result<Value, ApiError>;

/// Renders a method result as Telegram's HTTP answer.
pub fn into_response(result: &ApiResult) -> Response {
    match result {
        Ok(v) => (
            StatusCode::OK,
            axum::Json(json!({ "ok": true, "result": v })),
        )
            .into_response(),
        Err(e) => {
            let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_REQUEST);
            let mut resp = (status, axum::Json(e.body())).into_response();
            if let Some(secs) = e.parameters.as_ref().and_then(|p| p.get("retry_after"))
                && let Ok(h) = secs.to_string().parse()
            {
                resp.headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, h);
            }
            resp
        }
    }
}
