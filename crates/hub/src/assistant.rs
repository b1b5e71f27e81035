//! How pi's work is shown in Telegram: the reference system's `assistant` settings in
//! `telegram.json` (top level, or per profile), re-read when the file changes so that a change
//! applies to the next turn without a restart.
//!
//! ```json
//! { "assistant": { "rendering": "rich", "draftPreviews": true, "activity": "verbose",
//!                  "proactivePush": true } }
//! ```
//!
//! A value the hub does not know is named in a warning (log and `status`) and the default is
//! used; it never stops the hub.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use serde_json::Value;

use crate::config::ConfigFile;
use crate::paths::ProfileName;

/// How final answers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// `sendRichMessage` with rich Markdown (falls back to HTML, then plain text).
    Rich,
    /// `sendMessage` with `parse_mode: HTML` (falls back to plain text).
    Html,
}

/// Which of pi's technical activity is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Neither thinking nor tools.
    Quiet,
    /// Thinking only.
    Thinking,
    /// Completed tool calls only.
    Tools,
    /// Both.
    Verbose,
}

impl Activity {
    /// Whether thinking is shown.
    pub fn thinking(self) -> bool {
        matches!(self, Self::Thinking | Self::Verbose)
    }

    /// Whether tools are shown.
    pub fn tools(self) -> bool {
        matches!(self, Self::Tools | Self::Verbose)
    }
}

/// When an answer is spoken (`voice.replyMode`; the reference's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoiceReply {
    /// Only where pi writes a `telegram_voice` comment (the default).
    Hidden,
    /// Answers to voice notes and audio are spoken.
    Mirror,
    /// Every answer is spoken.
    Always,
}

/// The settings in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `voice.replyMode` (default hidden).
    pub voice_reply: VoiceReply,
    /// `voice.sendTranscript` (default false): a spoken answer carries its words as caption.
    pub voice_transcript: bool,
    /// `assistant.rendering` (default rich).
    pub rendering: Rendering,
    /// `assistant.draftPreviews` (default true).
    pub draft_previews: bool,
    /// `assistant.activity` (default verbose).
    pub activity: Activity,
    /// `assistant.proactivePush` (default true): work started outside Telegram is shown too.
    pub proactive_push: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            voice_reply: VoiceReply::Hidden,
            voice_transcript: false,
            rendering: Rendering::Rich,
            draft_previews: true,
            activity: Activity::Verbose,
            proactive_push: true,
        }
    }
}

impl Settings {
    /// Reads the settings from a parsed file; returns them with a warning per value it did not
    /// understand.
    pub fn from_file(file: &ConfigFile, profile: &ProfileName) -> (Self, Vec<String>) {
        let mut s = Self::default();
        let mut warnings = Vec::new();
        if let Some(v) = file.setting(profile, "voice").and_then(Value::as_object) {
            match v.get("replyMode").and_then(Value::as_str) {
                None | Some("hidden" | "manual") => {}
                Some("mirror") => s.voice_reply = VoiceReply::Mirror,
                Some("always") => s.voice_reply = VoiceReply::Always,
                Some(other) => warnings.push(format!(
                    "voice.replyMode is {other:?}, expected \"hidden\", \"mirror\" or \"always\"; using hidden"
                )),
            }
            s.voice_transcript = v
                .get("sendTranscript")
                .and_then(Value::as_bool)
                .unwrap_or(false);
        }
        let Some(a) = file.setting(profile, "assistant") else {
            return (s, warnings);
        };
        let Some(a) = a.as_object() else {
            warnings.push("assistant must be an object; using the defaults".to_owned());
            return (s, warnings);
        };
        let mut bad = |key: &str, v: &Value, expected: &str| {
            warnings.push(format!(
                "assistant.{key} is {v}, expected {expected}; using the default"
            ));
        };
        if let Some(v) = a.get("rendering") {
            match v.as_str() {
                Some("rich") => s.rendering = Rendering::Rich,
                Some("html") => s.rendering = Rendering::Html,
                _ => bad("rendering", v, "\"rich\" or \"html\""),
            }
        }
        if let Some(v) = a.get("draftPreviews") {
            match v.as_bool() {
                Some(b) => s.draft_previews = b,
                None => bad("draftPreviews", v, "true or false"),
            }
        }
        if let Some(v) = a.get("activity") {
            match v.as_str() {
                Some("quiet") => s.activity = Activity::Quiet,
                Some("thinking") => s.activity = Activity::Thinking,
                Some("tools") => s.activity = Activity::Tools,
                Some("verbose") => s.activity = Activity::Verbose,
                _ => bad(
                    "activity",
                    v,
                    "\"quiet\", \"thinking\", \"tools\" or \"verbose\"",
                ),
            }
        }
        if let Some(v) = a.get("proactivePush") {
            match v.as_bool() {
                Some(b) => s.proactive_push = b,
                None => bad("proactivePush", v, "true or false"),
            }
        }
        (s, warnings)
    }
}

/// The settings, re-read when `telegram.json` changes (its modification time or size): a
/// `stat` per turn, a parse only after an edit.
#[derive(Debug)]
pub struct Watched {
    path: PathBuf,
    profile: ProfileName,
    state: Mutex<(Option<(SystemTime, u64)>, Settings)>,
}

impl Watched {
    /// Watches `path` for `profile`'s settings.
    pub fn new(path: PathBuf, profile: ProfileName) -> Self {
        let w = Self {
            path,
            profile,
            state: Mutex::new((None, Settings::default())),
        };
        w.current();
        w
    }

    /// The settings in force now.
    pub fn current(&self) -> Settings {
        let stamp = std::fs::metadata(&self.path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.0.is_some() && state.0 == stamp {
            return state.1.clone();
        }
        let settings = match ConfigFile::load(&self.path) {
            Ok(file) => {
                let (s, warnings) = Settings::from_file(&file, &self.profile);
                for w in warnings {
                    tracing::warn!("{w}");
                }
                s
            }
            // A file being edited may be invalid for a moment: keep what was in force.
            Err(e) => {
                tracing::warn!(error = %e, "telegram.json could not be read; keeping the settings in force");
                state.1.clone()
            }
        };
        if settings != state.1 {
            tracing::info!(?settings, "assistant settings");
        }
        *state = (stamp, settings.clone());
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(json: &str) -> (Settings, Vec<String>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("telegram.json");
        std::fs::write(&path, json).unwrap_or_else(|e| panic!("{e}"));
        let file = ConfigFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        Settings::from_file(&file, &ProfileName::default_profile())
    }

    #[test]
    fn defaults_values_and_warnings() {
        assert_eq!(settings("{}"), (Settings::default(), vec![]));
        let (s, w) = settings(
            r#"{"assistant": {"rendering": "html", "draftPreviews": false, "activity": "tools", "proactivePush": false}}"#,
        );
        assert_eq!(
            s,
            Settings {
                rendering: Rendering::Html,
                draft_previews: false,
                activity: Activity::Tools,
                proactive_push: false,
                ..Settings::default()
            }
        );
        assert!(w.is_empty());
        let (s, w) = settings(r#"{"voice": {"replyMode": "mirror", "sendTranscript": true}}"#);
        assert_eq!(
            (s.voice_reply, s.voice_transcript),
            (VoiceReply::Mirror, true)
        );
        assert!(w.is_empty());
        let (s, w) = settings(r#"{"voice": {"replyMode": "manual"}}"#);
        assert_eq!(
            s.voice_reply,
            VoiceReply::Hidden,
            "the reference's legacy value"
        );
        assert!(w.is_empty());
        let (_, w) = settings(r#"{"voice": {"replyMode": "loud"}}"#);
        assert_eq!(w.len(), 1);
        let (s, w) = settings(r#"{"assistant": {"rendering": "fancy", "activity": 3}}"#);
        assert_eq!(s, Settings::default());
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("assistant.rendering is \"fancy\""), "{w:?}");
        // A profile's own value wins over the top level.
        let (s, _) = settings(
            r#"{"assistant": {"rendering": "html"}, "profiles": {"default": {"assistant": {"rendering": "rich"}}}}"#,
        );
        assert_eq!(s.rendering, Rendering::Rich);
    }

    #[test]
    fn a_change_applies_without_a_restart() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("telegram.json");
        std::fs::write(&path, "{}").unwrap_or_else(|e| panic!("{e}"));
        let w = Watched::new(path.clone(), ProfileName::default_profile());
        assert_eq!(w.current().rendering, Rendering::Rich);
        std::fs::write(&path, r#"{"assistant": {"rendering": "html"}}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.current().rendering, Rendering::Html);
        // Broken while being edited: the last good settings stay.
        std::fs::write(&path, r#"{"assistant": "#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.current().rendering, Rendering::Html);
    }
}
