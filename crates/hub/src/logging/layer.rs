//! The JSON-lines layer: one object per event, `{"timestamp","level","target","message",
//! "fields"}`, written whole to the rotating file. Anything shaped like a bot token is replaced
//! on the way out, a last guard behind the rule that nothing logs one.

use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;

use super::rotate::RotatingFile;

/// Writes events as JSON lines to a [`RotatingFile`].
#[derive(Debug)]
pub struct JsonLayer {
    file: Mutex<RotatingFile>,
}

impl JsonLayer {
    /// A layer writing to `file`.
    pub fn new(file: RotatingFile) -> Self {
        Self {
            file: Mutex::new(file),
        }
    }
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    rest: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(s) => s,
                other => other.to_string(),
            });
        } else {
            self.rest.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%x` fields arrive here too, their Debug being their Display.
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}

/// One event as its JSON line (with the final `\n`).
pub fn line(now_ms: i64, level: &str, target: &str, event: &Event<'_>) -> String {
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut obj = Map::new();
    obj.insert("timestamp".into(), super::time::format_ms(now_ms).into());
    obj.insert("level".into(), level.into());
    obj.insert("target".into(), target.into());
    obj.insert("message".into(), fields.message.unwrap_or_default().into());
    if !fields.rest.is_empty() {
        obj.insert("fields".into(), Value::Object(fields.rest));
    }
    let mut text = redact(&Value::Object(obj).to_string());
    text.push('\n');
    text
}

/// Replaces bot tokens (`<bot id>:<35 secret characters>`) in `text`.
pub fn redact(text: &str) -> String {
    static TOKEN: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let re = TOKEN.get_or_init(|| regex::Regex::new(r"\b(\d{3,20}):[A-Za-z0-9_-]{30,}").ok());
    match re {
        Some(re) => re.replace_all(text, "$1:<redacted>").into_owned(),
        None => text.to_owned(),
    }
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for JsonLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let text = line(
            crate::clock::system_now_ms(),
            meta.level().as_str(),
            meta.target(),
            event,
        );
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A log that cannot be written must not stop the hub; stderr still has the line.
        let _ = file.write_line(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_redacted() {
        let t = "start bot=123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0 ok";
        assert_eq!(redact(t), "start bot=123456789:<redacted> ok");
        assert_eq!(redact("at 12:30:45"), "at 12:30:45");
    }
}
