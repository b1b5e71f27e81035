//! What pi is told with a Telegram prompt, before the person's words: where it comes from, the
//! time, how long it waited, whether the answer will be spoken. The same lines for both
//! transports (the extension's pi and the headless children), in the reference's compact
//! `[tag|key:value]` shape, and as few as can be: a line only when it says something (the
//! skill the extension ships, `telegram-bridge`, explains them to the model).
//!
//! ```text
//! [telegram|thread:B · api|from:Ann]
//! [time] 2026-12-02 14:05 Wed (UTC+01:00)
//! [waited] sent 11:53, reached pi 2 h 12 min later
//! [voice] delivery: automatic voice
//!
//! <the person's words, then attachments and what they replied to>
//! ```
//!
//! The lines travel beside the prompt's text (`wire`'s `prompt.context`, the headless link's
//! RPC message), so the person's words stay apart from them in the hub and its protocol; the
//! extension and the RPC link put them together for pi. A prompt that is a command (`/name
//! args`: a prompt template, a skill, an extension's command) goes as it is: pi expands or runs it by its first word and hands the rest to it as
//! arguments, so lines before it would stop it being a command.

use crate::pi::waited::Waited;
use crate::when::{self, Local};

/// A prompt shows how long it waited once that is at least this long.
pub const SHOW_WAIT_FROM_MS: i64 = 60_000;

/// What the lines say.
#[derive(Debug, Clone, Default)]
pub struct Preamble<'a> {
    /// The label of the pi's topic when the prompt came in it (Threaded Mode).
    pub thread: Option<&'a str>,
    /// The time to tell pi (ms), when it is told.
    pub time_ms: Option<i64>,
    /// How long the prompt waited.
    pub waited: Option<Waited>,
    /// The answer will be spoken by the hub.
    pub spoken: bool,
    /// Who wrote it, when not the owner (a member's name).
    pub from: Option<&'a str>,
}

impl Preamble<'_> {
    /// The lines, ending in a blank line. Pure but for the machine's time zone.
    pub fn lines(&self, now_ms: i64) -> String {
        // `|` and `]` would end the tag's value early: a label or a name never needs them.
        let value = |v: &str| v.replace(['|', ']', '\n'], " ");
        let mut out = "[telegram".to_owned();
        if let Some(label) = self.thread {
            out.push_str(&format!("|thread:{}", value(label)));
        }
        if let Some(name) = self.from {
            out.push_str(&format!("|from:{}", value(name)));
        }
        out.push_str("]\n");
        if let Some(stamp) = self.time_ms.and_then(Local::at).map(|t| t.stamp()) {
            out.push_str(&format!("[time] {stamp}\n"));
        }
        if let Some(w) = self.waited.filter(|w| w.total_ms >= SHOW_WAIT_FROM_MS)
            && let (Some(sent), Some(now)) = (Local::at(w.sent_ms), Local::at(now_ms))
        {
            out.push_str(&format!(
                "[waited] sent {}, reached pi {} later\n",
                sent.clock_or_day(&now),
                when::duration(w.total_ms)
            ));
        }
        if self.spoken {
            out.push_str("[voice] delivery: automatic voice\n");
        }
        out.push('\n');
        out
    }

    /// The lines to put before `prompt`: none before a command.
    pub fn context_for(&self, prompt: &str, now_ms: i64) -> String {
        if is_command(prompt) {
            return String::new();
        }
        self.lines(now_ms)
    }
}

/// `text` without the lines [`Preamble::lines`] put before it (a session's first message, as
/// pi stored it, named in the sessions list by the person's words).
pub fn without(text: &str) -> &str {
    const TAGS: [&str; 4] = ["[telegram", "[time] ", "[waited] ", "[voice] "];
    if !text.starts_with("[telegram") {
        return text;
    }
    let mut rest = text;
    while let Some((line, after)) = rest.split_once('\n') {
        if line.is_empty() {
            return after;
        }
        if !TAGS.iter().any(|t| line.starts_with(t)) {
            return text;
        }
        rest = after;
    }
    text
}

/// Whether pi takes `prompt` as a command (`/name …`).
pub fn is_command(prompt: &str) -> bool {
    prompt
        .strip_prefix('/')
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| !c.is_whitespace() && c != '/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_takes_off_the_lines_and_nothing_else() {
        assert_eq!(
            without("[telegram|thread:web]\n[time] 2026-12-02 15:57 Wed (UTC)\n\nfix it"),
            "fix it"
        );
        assert_eq!(without("[telegram]\n\nhi\n\nthere"), "hi\n\nthere");
        assert_eq!(
            without("[telegram] is a word\nno blank"),
            "[telegram] is a word\nno blank"
        );
        assert_eq!(
            without("[telegram]\nnot a tag\n\nwords"),
            "[telegram]\nnot a tag\n\nwords"
        );
        assert_eq!(without("plain words"), "plain words");
        assert_eq!(without("[telegram|from:Ann]\n\nhi"), "hi");
    }

    /// The prompt as pi gets it (the links put the two together).
    fn wrap(p: &Preamble<'_>, prompt: &str, now_ms: i64) -> String {
        format!("{}{prompt}", p.context_for(prompt, now_ms))
    }

    #[test]
    fn the_origin_alone_when_nothing_else_applies() {
        let p = Preamble::default();
        assert_eq!(wrap(&p, "hello", 0), "[telegram]\n\nhello");
        let p = Preamble {
            thread: Some("B · api|x]"),
            ..Preamble::default()
        };
        assert_eq!(
            wrap(&p, "hello", 0),
            "[telegram|thread:B · api x ]\n\nhello"
        );
    }

    #[test]
    fn every_line_when_all_apply() {
        let now = 1_796_216_700_000;
        let p = Preamble {
            thread: Some("A"),
            time_ms: Some(now),
            waited: Some(Waited {
                sent_ms: now - 2 * 3_600_000 - 12 * 60_000,
                total_ms: 2 * 3_600_000 + 12 * 60_000,
                away_ms: 0,
            }),
            spoken: true,
            from: Some("Ann [B]"),
        };
        let text = wrap(&p, "go on", now);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "[telegram|thread:A|from:Ann [B ]");
        assert!(lines[1].starts_with("[time] 2026-12-0"), "{text}");
        assert!(
            lines[2].starts_with("[waited] sent ")
                && lines[2].ends_with(", reached pi 2 h 12 min later"),
            "{text}"
        );
        assert_eq!(lines[3], "[voice] delivery: automatic voice");
        assert_eq!(lines[4], "");
        assert_eq!(lines[5], "go on");
        // A few hundred tokens at most: here well under fifty (about four characters a token).
        let chars = p.lines(now).chars().count();
        assert!(chars.div_ceil(4) < 50, "{chars} characters");
    }

    #[test]
    fn a_members_prompt_says_who_wrote_it() {
        let p = Preamble {
            from: Some("Ann"),
            ..Preamble::default()
        };
        assert_eq!(wrap(&p, "hi", 0), "[telegram|from:Ann]\n\nhi");
    }

    #[test]
    fn a_short_wait_is_not_mentioned() {
        let p = Preamble {
            waited: Some(Waited {
                sent_ms: 0,
                total_ms: SHOW_WAIT_FROM_MS - 1,
                away_ms: 0,
            }),
            ..Preamble::default()
        };
        assert_eq!(p.lines(SHOW_WAIT_FROM_MS - 1), "[telegram]\n\n");
    }

    #[test]
    fn commands_go_as_they_are() {
        let p = Preamble::default();
        for command in ["/review src", "/skill:telegram-bridge", "/compact"] {
            assert!(is_command(command));
            assert_eq!(wrap(&p, command, 0), command);
        }
        for words in ["/ not a command", "// comment", "/", "a /b"] {
            assert!(!is_command(words), "{words}");
            assert!(wrap(&p, words, 0).starts_with("[telegram]\n\n"));
        }
    }
}
