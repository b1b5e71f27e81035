//! Inbound handlers: local commands (command templates, `crate cmdtpl`) that turn a downloaded
//! file into text for pi, configured in `telegram.json` as the reference does:
//! `inboundHandlers`, then the older `attachmentHandlers`, each `{type?, mime?, match?,
//! template, args?, defaults?, ...}`. For each file the matching handlers run in order and the
//! first that succeeds with output wins; a failing one is logged and the next is tried. Text
//! files have a built-in fallback: their content, when no handler produced any.
//!
//! Placeholders: `{file}` (the saved path), `{mime}`, `{type}` (`voice`, `audio`, `document`,
//! `photo`, ...), `{text}` (empty for files). A one-command template without `{file}` gets the
//! path as its last argument.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// How long one handler command may run unless its template sets a `timeout`: a voice note
/// of a few minutes is transcribed in well under that by the usual engines, and a person who
/// sent one would rather pi get the file than wait longer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Most text a handler (or a text file) gives pi.
const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// One configured handler.
#[derive(Debug)]
pub struct Handler {
    kind: Option<String>,
    mime: Option<String>,
    matches: Option<String>,
    template: cmdtpl::Template,
    /// Where it was configured (`inboundHandlers[2]`), for logs.
    pub origin: String,
}

/// The handlers configured in the file at `config` (unreadable or invalid entries are logged
/// and left out). Blocks on the disk.
pub fn load(config: &Path) -> Vec<Handler> {
    let doc: Value = match crate::regular::read_to_string(config) {
        Ok(t) => serde_json::from_str(&t).unwrap_or(Value::Null),
        Err(_) => return Vec::new(),
    };
    let mut out = Vec::new();
    for key in ["inboundHandlers", "attachmentHandlers"] {
        let Some(list) = doc.get(key).and_then(Value::as_array) else {
            continue;
        };
        for (i, entry) in list.iter().enumerate() {
            let origin = format!("{key}[{i}]");
            match parse(entry) {
                Ok(template) => out.push(Handler {
                    kind: text_field(entry, "type"),
                    mime: text_field(entry, "mime"),
                    matches: text_field(entry, "match"),
                    template,
                    origin,
                }),
                Err(e) => {
                    tracing::warn!(handler = %origin, error = %e, "an inbound handler is invalid; ignored")
                }
            }
        }
    }
    out
}

fn parse(entry: &Value) -> Result<cmdtpl::Template, cmdtpl::TemplateError> {
    let t = cmdtpl::Template::parse_with_host_keys(entry, &["type", "mime", "match"])?;
    for warning in t.risky() {
        tracing::info!(warning = %warning, "an inbound handler runs something worth reviewing");
    }
    Ok(t)
}

fn text_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// `pattern` (`audio/*`, `application/pdf`, `*`) matches `value`.
fn glob(pattern: &str, value: &str) -> bool {
    let (p, v) = (pattern.to_ascii_lowercase(), value.to_ascii_lowercase());
    match p.strip_suffix('*') {
        Some(prefix) => v.starts_with(prefix),
        None => p == v,
    }
}

impl Handler {
    /// Whether it handles a file of `kind` and `mime`. A handler with no selector handles
    /// nothing (text handlers are `type: "text"` and are not for files).
    pub fn matches(&self, kind: &str, mime: Option<&str>) -> bool {
        if self.kind.is_none() && self.mime.is_none() && self.matches.is_none() {
            return false;
        }
        if self.kind.as_deref() == Some("text") {
            return false;
        }
        let kind_ok = self.kind.as_deref().is_none_or(|k| k == kind);
        let mime_ok = self
            .mime
            .as_deref()
            .is_none_or(|p| mime.is_some_and(|m| glob(p, m)));
        let match_ok = self
            .matches
            .as_deref()
            .is_none_or(|p| glob(p, kind) || mime.is_some_and(|m| glob(p, m)));
        kind_ok && mime_ok && match_ok
    }
}

/// What the handlers made of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Made {
    /// Text for pi.
    Text(String),
    /// Nothing: the file stays a file for pi.
    Nothing,
    /// Nothing, and a handler ran out of time: the file stays a file for pi, and the person
    /// who waited is told.
    TooSlow,
}

/// What the handlers make of the file at `path`: the first non-empty output of a matching
/// handler, else (text files) its content.
pub async fn output_for(handlers: &[Handler], path: &Path, kind: &str, mime: Option<&str>) -> Made {
    let mut too_slow = false;
    for h in handlers.iter().filter(|h| h.matches(kind, mime)) {
        let values = cmdtpl::Values::new()
            .with("file", path.display().to_string())
            .with("mime", mime.unwrap_or_default())
            .with("type", kind)
            .with("text", "");
        let opts = cmdtpl::RunOptions {
            max_stdout: MAX_OUTPUT_BYTES,
            default_timeout: Some(DEFAULT_TIMEOUT),
            append_file_if_absent: Some(path.to_owned()),
            ..cmdtpl::RunOptions::default()
        };
        match h.template.run(&values, None, &opts).await {
            Ok(outcome) => {
                let text = match outcome.output {
                    cmdtpl::OutputValue::Stdout(bytes) => {
                        String::from_utf8_lossy(&bytes).into_owned()
                    }
                    cmdtpl::OutputValue::File(p) => match read_off_runtime(p).await {
                        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                        Err(e) => {
                            tracing::warn!(handler = %h.origin, error = %e, "an inbound handler's output file is unreadable");
                            continue;
                        }
                    },
                };
                if !text.trim().is_empty() {
                    tracing::info!(handler = %h.origin, kind, bytes = text.len(), "an inbound handler made text of a file");
                    return Made::Text(text.trim().to_owned());
                }
                tracing::info!(handler = %h.origin, "an inbound handler produced nothing; trying the next");
            }
            Err(e) => {
                too_slow |= matches!(e.kind, cmdtpl::RunErrorKind::Timeout { .. });
                // What the command printed may quote the file's words: only at debug.
                tracing::warn!(handler = %h.origin, error = %e.without_output(), "an inbound handler failed; trying the next");
                tracing::debug!(handler = %h.origin, error = %e, "the inbound handler's failure in full");
            }
        }
    }
    // Text files speak for themselves.
    if mime.is_some_and(|m| m.starts_with("text/"))
        && let Ok(bytes) = read_off_runtime(path.to_owned()).await
    {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !text.trim().is_empty() {
            return Made::Text(text);
        }
    }
    if too_slow {
        Made::TooSlow
    } else {
        Made::Nothing
    }
}

/// At most [`MAX_OUTPUT_BYTES`] of the regular file at `path`, read off the runtime (what a
/// template names as its output may be anything: a FIFO would block the read for ever).
async fn read_off_runtime(path: std::path::PathBuf) -> std::io::Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || crate::regular::read_up_to(&path, MAX_OUTPUT_BYTES as u64))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn handler(v: Value) -> Handler {
        Handler {
            kind: text_field(&v, "type"),
            mime: text_field(&v, "mime"),
            matches: text_field(&v, "match"),
            template: parse(&v).unwrap(),
            origin: "test".into(),
        }
    }

    #[test]
    fn selectors_match_by_type_mime_and_wildcards() {
        let voice = handler(json!({ "type": "voice", "template": "stt" }));
        assert!(voice.matches("voice", Some("audio/ogg")));
        assert!(!voice.matches("audio", Some("audio/mpeg")));
        let audio = handler(json!({ "mime": "audio/*", "template": "stt" }));
        assert!(audio.matches("voice", Some("audio/ogg")));
        assert!(audio.matches("audio", Some("AUDIO/MPEG")));
        assert!(!audio.matches("document", Some("application/pdf")));
        let pdf = handler(json!({ "match": "application/pdf", "template": "pdftotext" }));
        assert!(pdf.matches("document", Some("application/pdf")));
        let text = handler(json!({ "type": "text", "template": "translate" }));
        assert!(!text.matches("document", Some("text/plain")));
        let none = handler(json!({ "template": "x" }));
        assert!(!none.matches("voice", None));
    }

    #[tokio::test]
    async fn the_first_handler_with_output_wins_and_text_files_fall_back_to_content() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("note.ogg");
        std::fs::write(&file, b"sound").unwrap();
        let list = vec![
            handler(json!({ "type": "voice", "template": "false" })),
            handler(json!({ "type": "voice", "template": "printf %s" })),
            handler(json!({ "type": "voice", "template": "echo never" })),
        ];
        // `printf %s <file>` prints the path: the path reached the command as its last arg.
        let out = output_for(&list, &file, "voice", Some("audio/ogg")).await;
        assert_eq!(out, Made::Text(file.display().to_string()));
        let txt = dir.path().join("a.txt");
        std::fs::write(&txt, "plain words\n").unwrap();
        assert_eq!(
            output_for(&[], &txt, "document", Some("text/plain")).await,
            Made::Text("plain words\n".into())
        );
        assert_eq!(
            output_for(&[], &file, "voice", Some("audio/ogg")).await,
            Made::Nothing
        );
        // A handler that runs out of time: the file stays a file, and that is said.
        let slow = vec![handler(
            json!({ "type": "voice", "template": "sh -c 'sleep 30' {file}", "timeout": 100 }),
        )];
        assert_eq!(
            output_for(&slow, &file, "voice", Some("audio/ogg")).await,
            Made::TooSlow
        );
    }

    #[test]
    fn both_keys_are_read_in_order_and_bad_entries_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("telegram.json");
        std::fs::write(
            &cfg,
            json!({
                "inboundHandlers": [{ "type": "voice", "template": "a" }, { "type": "voice" }],
                "attachmentHandlers": [{ "mime": "audio/*", "template": "b", "parallel": true }, { "mime": "audio/*", "template": "c" }],
            })
            .to_string(),
        )
        .unwrap();
        let list = load(&cfg);
        let origins: Vec<&str> = list.iter().map(|h| h.origin.as_str()).collect();
        assert_eq!(origins, ["inboundHandlers[0]", "attachmentHandlers[1]"]);
    }
}
