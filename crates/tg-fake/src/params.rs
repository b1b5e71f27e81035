//! Method parameters from any of the four ways Telegram accepts them: URL query string,
//! `application/x-www-form-urlencoded`, `application/json` and `multipart/form-data`.
//!
//! Values keep the form they arrived in; typed getters accept what Telegram accepts (a number
//! may come as a JSON number or as text, an object as JSON or as a JSON-serialized string).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;

use crate::error::ApiError;

/// A file part of a multipart request.
#[derive(Debug, Clone)]
pub struct Upload {
    /// `filename` of the part, if any.
    pub filename: Option<String>,
    /// `Content-Type` of the part, if any.
    pub content_type: Option<String>,
    pub bytes: Bytes,
}

/// One parameter value as received.
#[derive(Debug, Clone)]
pub enum ParamValue {
    /// From a JSON body: any JSON value.
    Json(Value),
    /// From a query string, urlencoded body or non-file multipart part.
    Text(String),
    /// A multipart file part.
    File(Upload),
}

/// All parameters of one request.
#[derive(Debug, Clone, Default)]
pub struct Params {
    values: BTreeMap<String, ParamValue>,
}

/// A reference to a file in a send method: a fresh upload, an existing `file_id`, or a URL.
#[derive(Debug, Clone)]
pub enum FileRef {
    /// Bytes uploaded with this request.
    Upload(Upload),
    /// A `file_id` the bot received earlier.
    FileId(String),
    /// An HTTP(S) URL for Telegram to fetch.
    Url(String),
}

impl Params {
    /// Names of all parameters present.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Inserts or replaces a value (later sources win, as in Telegram: body over query).
    pub fn insert(&mut self, name: impl Into<String>, value: ParamValue) {
        self.values.insert(name.into(), value);
    }

    /// Whether `name` is present. An empty text value counts as absent, as in Telegram.
    pub fn has(&self, name: &str) -> bool {
        match self.values.get(name) {
            None | Some(ParamValue::Json(Value::Null)) => false,
            Some(ParamValue::Text(t)) => !t.is_empty(),
            Some(_) => true,
        }
    }

    /// An integer parameter; numbers may arrive as text.
    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        let bad = || ApiError::bad_request(format!("invalid {name} specified"));
        match self.values.get(name) {
            None | Some(ParamValue::Json(Value::Null)) => Ok(None),
            Some(ParamValue::Json(Value::Number(n))) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .map(Some)
                .ok_or_else(bad),
            Some(ParamValue::Json(Value::String(s))) | Some(ParamValue::Text(s)) => {
                if s.trim().is_empty() {
                    Ok(None)
                } else {
                    s.trim().parse().map(Some).map_err(|_| bad())
                }
            }
            Some(_) => Err(bad()),
        }
    }

    /// A string parameter; JSON numbers and booleans are accepted in their text form.
    pub fn string(&self, name: &str) -> Result<Option<String>, ApiError> {
        match self.values.get(name) {
            None | Some(ParamValue::Json(Value::Null)) => Ok(None),
            Some(ParamValue::Json(Value::String(s))) | Some(ParamValue::Text(s)) => {
                Ok(Some(s.clone()))
            }
            Some(ParamValue::Json(v @ (Value::Number(_) | Value::Bool(_)))) => {
                Ok(Some(v.to_string()))
            }
            Some(_) => Err(ApiError::bad_request(format!("invalid {name} specified"))),
        }
    }

    /// A boolean parameter: JSON `true`/`false`, or text `true`/`false`/`1`/`0`.
    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.values.get(name) {
            None | Some(ParamValue::Json(Value::Null)) => Ok(None),
            Some(ParamValue::Json(Value::Bool(b))) => Ok(Some(*b)),
            Some(ParamValue::Json(Value::String(s))) | Some(ParamValue::Text(s)) => {
                match s.trim().to_ascii_lowercase().as_str() {
                    "true" | "1" => Ok(Some(true)),
                    "false" | "0" | "" => Ok(Some(false)),
                    _ => Err(ApiError::bad_request(format!("invalid {name} specified"))),
                }
            }
            Some(ParamValue::Json(Value::Number(n))) => Ok(Some(n.as_i64() != Some(0))),
            Some(_) => Err(ApiError::bad_request(format!("invalid {name} specified"))),
        }
    }

    /// A JSON-serialized object or array; as text it must parse as JSON.
    pub fn json(&self, name: &str) -> Result<Option<Value>, ApiError> {
        match self.values.get(name) {
            None | Some(ParamValue::Json(Value::Null)) => Ok(None),
            Some(ParamValue::Json(Value::String(s))) | Some(ParamValue::Text(s)) => {
                if s.is_empty() {
                    return Ok(None);
                }
                serde_json::from_str(s)
                    .map(Some)
                    .map_err(|_| ApiError::bad_request(format!("can't parse {name} JSON object")))
            }
            Some(ParamValue::Json(v)) => Ok(Some(v.clone())),
            Some(ParamValue::File(_)) => Err(ApiError::bad_request(format!(
                "can't parse {name} JSON object"
            ))),
        }
    }

    /// A file parameter (`InputFile or String`): an upload, `attach://<name>`, a URL or a
    /// `file_id`.
    pub fn file(&self, name: &str) -> Result<Option<FileRef>, ApiError> {
        let text = match self.values.get(name) {
            None | Some(ParamValue::Json(Value::Null)) => return Ok(None),
            Some(ParamValue::File(u)) => return Ok(Some(FileRef::Upload(u.clone()))),
            Some(ParamValue::Json(Value::String(s))) | Some(ParamValue::Text(s)) => s.clone(),
            Some(_) => return Err(ApiError::bad_request(format!("invalid {name} specified"))),
        };
        if let Some(part) = text.strip_prefix("attach://") {
            return match self.values.get(part) {
                Some(ParamValue::File(u)) => Ok(Some(FileRef::Upload(u.clone()))),
                _ => Err(ApiError::bad_request(format!(
                    "file {part} not found in the request"
                ))),
            };
        }
        if text.is_empty() {
            return Ok(None);
        }
        if text.starts_with("http://") || text.starts_with("https://") {
            return Ok(Some(FileRef::Url(text)));
        }
        Ok(Some(FileRef::FileId(text)))
    }

    /// Names referenced as `attach://<name>` anywhere in the parameters (also inside
    /// JSON-serialized media arrays).
    pub fn attached_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for v in self.values.values() {
            let text = match v {
                ParamValue::Json(j) => j.to_string(),
                ParamValue::Text(t) => t.clone(),
                ParamValue::File(_) => continue,
            };
            let mut rest = text.as_str();
            while let Some(i) = rest.find("attach://") {
                rest = &rest[i + "attach://".len()..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
                    .unwrap_or(rest.len());
                out.push(rest[..end].to_owned());
            }
        }
        out
    }

    /// A summary for the request log: values as JSON, files as `{filename, size}`.
    pub fn summary(&self) -> Value {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.values {
            let shown = match v {
                ParamValue::Json(j) => j.clone(),
                ParamValue::Text(t) => Value::String(t.clone()),
                ParamValue::File(u) => serde_json::json!({
                    "file": true,
                    "filename": u.filename,
                    "content_type": u.content_type,
                    "size": u.bytes.len(),
                }),
            };
            map.insert(k.clone(), shown);
        }
        Value::Object(map)
    }
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The JSON body is not an object or not JSON.
    #[error("Bad Request: can't parse JSON request body")]
    Json,
    /// The multipart body is malformed.
    #[error("Bad Request: can't parse multipart request body: {0}")]
    Multipart(String),
}

/// Adds `key=value` pairs from a query string or urlencoded body.
pub fn add_urlencoded(params: &mut Params, data: &[u8]) {
    for (k, v) in form_urlencoded::parse(data) {
        params.insert(k.into_owned(), ParamValue::Text(v.into_owned()));
    }
}

/// Adds the fields of a JSON object body. An empty body adds nothing.
pub fn add_json(params: &mut Params, body: &[u8]) -> Result<(), BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => {
            for (k, v) in map {
                params.insert(k, ParamValue::Json(v));
            }
            Ok(())
        }
        _ => Err(BodyError::Json),
    }
}

/// Adds the parts of a multipart body. Parts with a file name are files; others are text.
pub async fn add_multipart(
    params: &mut Params,
    boundary: &str,
    body: Bytes,
) -> Result<(), BodyError> {
    let stream = futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut mp = multer::Multipart::new(stream, boundary);
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(()),
            Err(e) => return Err(BodyError::Multipart(e.to_string())),
        };
        let Some(name) = field.name().map(str::to_owned) else {
            continue;
        };
        let filename = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(|m| m.to_string());
        let bytes = field
            .bytes()
            .await
            .map_err(|e| BodyError::Multipart(e.to_string()))?;
        if filename.is_some() {
            params.insert(
                name,
                ParamValue::File(Upload {
                    filename,
                    content_type,
                    bytes,
                }),
            );
        } else {
            match String::from_utf8(bytes.to_vec()) {
                Ok(text) => params.insert(name, ParamValue::Text(text)),
                Err(_) => params.insert(
                    name,
                    ParamValue::File(Upload {
                        filename: None,
                        content_type,
                        bytes,
                    }),
                ),
            }
        }
    }
}
