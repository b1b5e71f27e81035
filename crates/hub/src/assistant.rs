//! How pi's work is shown in Telegram: the reference system's `assistant` settings in
//! `telegram.json` (top level, or per profile), re-read when the file changes so that a change
//! applies to the next turn without a restart.
//!
//! ```json
//! { "assistant": { "rendering": "rich", "draftPreviews": true, "activity": "verbose",
//!                  "proactivePush": true, "timeInjection": "interval",
//!                  "reactions": true },
//!   "voice": { "replyMode": "manual" }, "time": { "interval": 1800000 },
//!   "staleAfterMinutes": 30, "notifications": "smart",
//!   "threads": { "automaticCleanup": true } }
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

/// When an answer is spoken (`voice.replyMode`; the reference's values, `hidden` being the
/// older name of `manual`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoiceReply {
    /// Only where pi writes a `telegram_voice` comment (the default).
    Manual,
    /// Answers to voice notes and audio are spoken.
    Mirror,
    /// Every answer is spoken.
    Always,
}

impl VoiceReply {
    /// Its name in telegram.json.
    pub fn name(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Mirror => "mirror",
            Self::Always => "always",
        }
    }
}

/// When pi is told the time with a Telegram prompt (`assistant.timeInjection`; the
/// reference's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeInjection {
    /// Never.
    Hidden,
    /// With every Telegram prompt.
    Always,
    /// With the first Telegram prompt a pi gets, and again once `time.interval` has passed
    /// since it was last told (the default).
    Interval,
}

impl TimeInjection {
    /// Its name in telegram.json.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hidden => "hidden",
            Self::Always => "always",
            Self::Interval => "interval",
        }
    }
}

/// Which messages make the phone buzz (`notifications`; the rest are sent with
/// `disable_notification`). What each kind of message gets is `outgoing::attention::of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notifications {
    /// Final answers, questions that wait for the person, and what pi sends of its own
    /// accord; everything intermediate is silent (the default).
    Smart,
    /// Every message notifies, as Telegram does by default.
    All,
    /// Only final answers, and the questions that hold up work until the person answers.
    Answers,
}

impl Notifications {
    /// Its name in telegram.json.
    pub fn name(self) -> &'static str {
        match self {
            Self::Smart => "smart",
            Self::All => "all",
            Self::Answers => "answers",
        }
    }
}

/// `time.interval` when absent: half an hour.
pub const DEFAULT_TIME_INTERVAL_MS: i64 = 30 * 60_000;
/// `staleAfterMinutes` when absent.
pub const DEFAULT_STALE_AFTER_MINUTES: f64 = 30.0;

/// The settings in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `voice.replyMode` (default manual).
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
    /// `assistant.timeInjection` (default interval).
    pub time_injection: TimeInjection,
    /// `time.interval` in ms (default half an hour).
    pub time_interval_ms: i64,
    /// `staleAfterMinutes` (profile or top level; default 30; 0 turns the guard off), in ms.
    pub stale_after_ms: i64,
    /// `notifications` (profile or top level; default smart).
    pub notifications: Notifications,
    /// `assistant.reactions` (default true): the bot reacts on the person's message to show
    /// its fate (queued, running, answered, skipped, interrupted).
    pub reactions: bool,
    /// `threads.automaticCleanup` (default true): the topic of a pi that quits on purpose is
    /// deleted once everything on its way there is delivered.
    pub thread_cleanup: bool,
}

impl Settings {
    /// The staleness threshold, `None` when the guard is off.
    pub fn stale_after(&self) -> Option<i64> {
        (self.stale_after_ms > 0).then_some(self.stale_after_ms)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            voice_reply: VoiceReply::Manual,
            voice_transcript: false,
            rendering: Rendering::Rich,
            draft_previews: true,
            activity: Activity::Verbose,
            proactive_push: true,
            time_injection: TimeInjection::Interval,
            time_interval_ms: DEFAULT_TIME_INTERVAL_MS,
            stale_after_ms: (DEFAULT_STALE_AFTER_MINUTES * 60_000.0) as i64,
            notifications: Notifications::Smart,
            reactions: true,
            thread_cleanup: true,
        }
    }
}

impl Settings {
    /// Reads the settings from a parsed file; returns them with a warning per value it did not
    /// understand.
    pub fn from_file(file: &ConfigFile, profile: &ProfileName) -> (Self, Vec<String>) {
        let mut s = Self::default();
        let mut warnings = file.unused_keys();
        if let Some(v) = file.setting(profile, "voice").and_then(Value::as_object) {
            match v.get("replyMode").and_then(Value::as_str) {
                None | Some("hidden" | "manual") => {}
                Some("mirror") => s.voice_reply = VoiceReply::Mirror,
                Some("always") => s.voice_reply = VoiceReply::Always,
                Some(other) => warnings.push(format!(
                    "voice.replyMode is {other:?}, expected \"manual\", \"mirror\" or \"always\"; using manual"
                )),
            }
            s.voice_transcript = v
                .get("sendTranscript")
                .and_then(Value::as_bool)
                .unwrap_or(false);
        }
        if let Some(v) = file.setting(profile, "time") {
            match v.get("interval") {
                None => {}
                Some(n) => match n.as_f64() {
                    Some(ms) if ms >= 1000.0 && ms.is_finite() => s.time_interval_ms = ms as i64,
                    _ => warnings.push(format!(
                        "time.interval is {n}, expected milliseconds (at least 1000); using {DEFAULT_TIME_INTERVAL_MS}"
                    )),
                },
            }
        }
        if let Some(v) = file.setting(profile, "staleAfterMinutes") {
            match v.as_f64() {
                Some(m) if m >= 0.0 && m.is_finite() => s.stale_after_ms = (m * 60_000.0) as i64,
                _ => warnings.push(format!(
                    "staleAfterMinutes is {v}, expected minutes (0 turns the guard off); using {DEFAULT_STALE_AFTER_MINUTES}"
                )),
            }
        }
        if let Some(v) = file.setting(profile, "notifications") {
            match v.as_str() {
                Some("smart") => s.notifications = Notifications::Smart,
                Some("all") => s.notifications = Notifications::All,
                Some("answers") => s.notifications = Notifications::Answers,
                _ => warnings.push(format!(
                    "notifications is {v}, expected \"smart\", \"all\" or \"answers\"; using smart"
                )),
            }
        }
        if let Some(t) = file.setting(profile, "threads") {
            match t.get("automaticCleanup") {
                None => {}
                Some(Value::Bool(b)) => s.thread_cleanup = *b,
                Some(v) => warnings.push(format!(
                    "threads.automaticCleanup is {v}, expected true or false; using true"
                )),
            }
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
        if let Some(v) = a.get("reactions") {
            match v.as_bool() {
                Some(b) => s.reactions = b,
                None => bad("reactions", v, "true or false"),
            }
        }
        if let Some(v) = a.get("timeInjection") {
            match v.as_str() {
                Some("hidden") => s.time_injection = TimeInjection::Hidden,
                Some("always") => s.time_injection = TimeInjection::Always,
                Some("interval") => s.time_injection = TimeInjection::Interval,
                _ => bad("timeInjection", v, "\"hidden\", \"always\" or \"interval\""),
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
            VoiceReply::Manual,
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
    fn what_buzzes_and_the_reactions() {
        let d = Settings::default();
        assert_eq!((d.notifications, d.reactions), (Notifications::Smart, true));
        let (s, w) = settings(r#"{"notifications": "answers", "assistant": {"reactions": false}}"#);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            (s.notifications, s.reactions),
            (Notifications::Answers, false)
        );
        let (s, _) = settings(
            r#"{"notifications": "answers", "profiles": {"default": {"notifications": "all"}}}"#,
        );
        assert_eq!(s.notifications, Notifications::All);
        let (s, w) = settings(r#"{"notifications": "loud", "assistant": {"reactions": "yes"}}"#);
        assert_eq!((s.notifications, s.reactions), (Notifications::Smart, true));
        assert_eq!(w.len(), 2, "{w:?}");
    }

    #[test]
    fn what_the_model_is_told_and_the_staleness_guard() {
        let d = Settings::default();
        assert_eq!(
            d.time_injection,
            TimeInjection::Interval,
            "the reference's default"
        );
        assert_eq!(d.time_interval_ms, DEFAULT_TIME_INTERVAL_MS);
        assert_eq!(d.stale_after(), Some(30 * 60_000));
        assert_eq!(d.voice_reply, VoiceReply::Manual);
        let (s, w) = settings(
            r#"{"assistant": {"timeInjection": "always"}, "time": {"interval": 600000},
                "voice": {"replyMode": "hidden"}, "staleAfterMinutes": 90}"#,
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(s.time_injection, TimeInjection::Always);
        assert_eq!(s.time_interval_ms, 600_000);
        assert_eq!(
            s.voice_reply,
            VoiceReply::Manual,
            "hidden is manual's older name"
        );
        assert_eq!(s.stale_after(), Some(90 * 60_000));
        // 0 turns the guard off; a profile's own value wins; fractions are minutes too.
        let (s, _) = settings(r#"{"staleAfterMinutes": 0}"#);
        assert_eq!(s.stale_after(), None);
        let (s, _) = settings(
            r#"{"staleAfterMinutes": 5, "profiles": {"default": {"staleAfterMinutes": 0.5}}}"#,
        );
        assert_eq!(s.stale_after(), Some(30_000));
        // Unknown values: named, and the default used.
        let (s, w) = settings(
            r#"{"assistant": {"timeInjection": "sometimes"}, "time": {"interval": "often"},
                "staleAfterMinutes": -1}"#,
        );
        assert_eq!(
            (s.time_injection, s.time_interval_ms, s.stale_after_ms),
            (d.time_injection, d.time_interval_ms, d.stale_after_ms)
        );
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w.iter()
                .any(|w| w.contains("assistant.timeInjection is \"sometimes\""))
        );
        assert!(
            w.iter()
                .any(|w| w.starts_with("time.interval is \"often\""))
        );
        assert!(w.iter().any(|w| w.starts_with("staleAfterMinutes is -1")));
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
