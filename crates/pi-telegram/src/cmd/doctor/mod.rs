//! `pi-telegram doctor`: every check a person needs when the bot does not answer, each with
//! its outcome and what to do. One module per group of checks: [`local`] (config, state,
//! folders, the hub process, disk), [`telegram`] (reachability, token, webhook, other pollers,
//! clock, Threaded Mode), [`state`] (owner, flood waits, topic intents) and [`tools`] (pi,
//! Node.js, the extension).
//!
//! The doctor changes nothing: it never writes the config or the store, never confirms an
//! update, and does not call `getUpdates` while a hub of ours runs (that would interrupt its
//! long poll). The JSON form is a stable interface: `{"profile","checks":[{"id","title",
//! "outcome","detail","fix"}],"ok"}`.

pub mod local;
pub mod state;
pub mod telegram;
pub mod tools;

use std::time::Duration;

use serde::Serialize;

use hub::config::{ConfigFile, ProfileSettings};
use hub::paths::{AgentDir, ProfileName, ProfilePaths};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Fine.
    Pass,
    /// Worth fixing; the bot works meanwhile.
    Warn,
    /// The bot cannot work until this is fixed (`doctor` exits 1).
    Fail,
    /// Not checked: what it needs failed or does not apply (the detail says which).
    Skip,
}

impl Outcome {
    fn mark(self) -> &'static str {
        match self {
            Self::Pass => "[ok]  ",
            Self::Warn => "[warn]",
            Self::Fail => "[FAIL]",
            Self::Skip => "[skip]",
        }
    }
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable identifier (`config`, `token`, `poller`, ...).
    pub id: &'static str,
    /// What was checked, for people.
    pub title: &'static str,
    /// How it came out.
    pub outcome: Outcome,
    /// What was found.
    pub detail: String,
    /// What to do about it.
    pub fix: Option<String>,
}

impl Check {
    /// A passed check.
    pub fn pass(id: &'static str, title: &'static str, detail: impl Into<String>) -> Self {
        Self {
            id,
            title,
            outcome: Outcome::Pass,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A warning with its fix.
    pub fn warn(
        id: &'static str,
        title: &'static str,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            id,
            title,
            outcome: Outcome::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A failure with its fix.
    pub fn fail(
        id: &'static str,
        title: &'static str,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            id,
            title,
            outcome: Outcome::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A check that was not made, and why.
    pub fn skip(id: &'static str, title: &'static str, why: impl Into<String>) -> Self {
        Self {
            id,
            title,
            outcome: Outcome::Skip,
            detail: why.into(),
            fix: None,
        }
    }
}

/// Everything `doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The profile checked.
    pub profile: String,
    /// The checks, in the order they are shown.
    pub checks: Vec<Check>,
    /// No check failed.
    pub ok: bool,
}

impl Report {
    /// 0 when nothing failed, 1 otherwise (warnings do not change it).
    pub fn exit_code(&self) -> i32 {
        if self.ok { 0 } else { 1 }
    }
}

/// The extension files this binary carries, for "installed and current".
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedExtension {
    /// `(relative path, contents)`.
    pub files: &'static [(&'static str, &'static [u8])],
}

/// What `doctor` looks at.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// pi's agent dir.
    pub agent_dir: AgentDir,
    pub profile: ProfileName,
    /// The extension this binary would install (`None`: not checked).
    pub extension: Option<EmbeddedExtension>,
    /// How long the probe for another poller waits for a competing poll.
    pub poll_probe: Duration,
    /// Less free disk space than this fails (less than 1 GiB, or four times this, warns).
    pub min_free_bytes: u64,
}

impl DoctorOptions {
    /// Defaults, with `$PI_TELEGRAM_DOCTOR_POLL_SECS` and `$PI_TELEGRAM_DOCTOR_MIN_FREE_MB`
    /// (for tests and odd machines).
    pub fn new(agent_dir: AgentDir, profile: ProfileName) -> Self {
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        Self {
            agent_dir,
            profile,
            extension: None,
            poll_probe: Duration::from_secs(env("PI_TELEGRAM_DOCTOR_POLL_SECS").unwrap_or(3)),
            min_free_bytes: env("PI_TELEGRAM_DOCTOR_MIN_FREE_MB").unwrap_or(64) * 1024 * 1024,
        }
    }
}

/// What several checks share, gathered once.
pub(crate) struct Ctx {
    pub opts: DoctorOptions,
    pub paths: ProfilePaths,
    /// The config, when it loaded.
    pub config: Option<ConfigFile>,
    /// The profile's settings (empty ones when the config did not load).
    pub settings: Option<ProfileSettings>,
    /// The hub holding the profile lock: `Some(pid)` (0 when its pid is unreadable).
    pub hub_pid: Option<u32>,
    /// The state database, opened for reading, when there is one and it is readable.
    pub store: Option<store::Store>,
}

/// Runs every check.
pub async fn run(opts: DoctorOptions) -> Report {
    let paths = opts.agent_dir.profile(&opts.profile);
    let mut checks = Vec::new();
    let config = local::config(&opts, &mut checks);
    let settings = config.as_ref().map(|c| c.profile(&opts.profile));
    let mut ctx = Ctx {
        paths,
        config,
        settings,
        hub_pid: None,
        store: None,
        opts,
    };
    ctx.store = local::state(&ctx, &mut checks);
    local::permissions(&ctx, &mut checks);
    ctx.hub_pid = local::hub(&ctx, &mut checks);
    local::socket(&ctx, &mut checks);
    local::disk(&ctx, &mut checks);
    telegram::checks(&ctx, &mut checks).await;
    state::checks(&ctx, &mut checks);
    tools::checks(&ctx, &mut checks).await;
    let ok = checks.iter().all(|c| c.outcome != Outcome::Fail);
    Report {
        profile: ctx.opts.profile.to_string(),
        checks,
        ok,
    }
}

/// The text form: one line per check, its fix indented under it, and a verdict.
pub fn render(report: &Report) -> String {
    let width = report
        .checks
        .iter()
        .map(|c| c.title.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = format!("pi-telegram doctor, profile {}\n\n", report.profile);
    for c in &report.checks {
        out.push_str(&format!(
            "{} {:<width$}  {}\n",
            c.outcome.mark(),
            c.title,
            c.detail
        ));
        if let Some(fix) = &c.fix {
            for line in fix.lines() {
                out.push_str(&format!("         → {line}\n"));
            }
        }
    }
    let count = |o: Outcome| report.checks.iter().filter(|c| c.outcome == o).count();
    let (fails, warns) = (count(Outcome::Fail), count(Outcome::Warn));
    out.push('\n');
    out.push_str(&match (fails, warns) {
        (0, 0) => "Everything looks right.\n".to_owned(),
        (0, w) => format!("No failures; {w} warning(s) worth a look.\n"),
        (f, w) => format!(
            "{f} failure(s) stop the bot from working; {w} warning(s). Fix the failures first.\n"
        ),
    });
    out
}

/// `n` bytes for people: `512 B`, `3.4 MiB`, `12.0 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// ` --profile X` when the profile is not the default one, for commands in fixes.
pub(crate) fn profile_flag(profile: &ProfileName) -> String {
    if *profile == ProfileName::default_profile() {
        String::new()
    } else {
        format!(" --profile {profile}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_shows_fixes_under_their_check() {
        let report = Report {
            profile: "default".into(),
            checks: vec![
                Check::pass("config", "Configuration", "valid"),
                Check::fail("token", "Bot token", "rejected", "run setup\nthen serve"),
            ],
            ok: false,
        };
        let text = render(&report);
        assert!(text.contains("[ok]   Configuration  valid\n"), "{text}");
        assert!(text.contains("[FAIL] Bot token      rejected\n"), "{text}");
        assert!(text.contains("         → run setup\n         → then serve\n"));
        assert!(text.contains("1 failure(s)"));
        assert_eq!(report.exit_code(), 1);
        let json = serde_json::to_value(&report).unwrap_or_default();
        assert_eq!(json["checks"][1]["outcome"], "fail");
        assert_eq!(json["checks"][0]["fix"], serde_json::Value::Null);
        assert_eq!(json["ok"], false);
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024 + 400 * 1024), "3.4 MiB");
    }
}
