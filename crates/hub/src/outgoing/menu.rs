//! The menu: one message, edited in place as the person moves between its sections. Each
//! section is rendered from what is known about one pi instance (the one of the topic, or the
//! selected one): what the store knows (instances, the queue, settings) and what pi reports
//! (model, thinking, context, cost: asked when the section opens).
//!
//! Rendering is pure: a [`View`] of text and button rows with typed actions; turning actions into
//! owner-bound tokens happens where the view is sent ([`buttons_markup`]).

use serde_json::{Value, json};
use store::turns::{self, Lane, Turn};
use store::{Connection, StoreError};

use crate::assistant::{Activity, Notifications, Rendering, Settings, TimeInjection, VoiceReply};
use crate::buttons::{Button, QueueOp, Section};
use crate::clock::Clock;
use crate::outgoing::outbound;

/// A rendered section: text and rows of `(label, action)` buttons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The message text.
    pub text: String,
    /// Button rows.
    pub rows: Vec<Vec<(String, Button)>>,
}

/// One pi instance as the menu shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub identity: String,
    pub label: String,
    /// Folder.
    pub cwd: String,
    /// Connected.
    pub live: bool,
    /// Working on a turn.
    pub busy: bool,
    /// Selected (classic mode).
    pub selected: bool,
    /// Its topic, in Threaded Mode.
    pub topic: Option<String>,
}

/// What pi reported about itself (any part may be missing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reported {
    /// `provider/id`.
    pub model: Option<String>,
    /// Thinking level.
    pub thinking: Option<String>,
    /// `(tokens, window)`.
    pub context: Option<(Option<u64>, u64)>,
    /// Cost so far, in dollars.
    pub cost: Option<f64>,
}

impl Reported {
    /// From the answer to a stats request.
    pub fn from_stats(v: &Value) -> Reported {
        let model = v.get("model").and_then(|m| {
            let p = m.get("provider").and_then(Value::as_str)?;
            let id = m.get("id").and_then(Value::as_str)?;
            Some(format!("{p}/{id}"))
        });
        let context = v.get("context").and_then(|c| {
            let window = c.get("contextWindow").and_then(Value::as_u64)?;
            Some((c.get("tokens").and_then(Value::as_u64), window))
        });
        let cost = v.get("cost").and_then(|c| {
            c.as_f64()
                .or_else(|| c.get("total").and_then(Value::as_f64))
        });
        Reported {
            model,
            thinking: v
                .get("thinking_level")
                .and_then(Value::as_str)
                .map(str::to_owned),
            context,
            cost,
        }
    }
}

fn back(identity: Option<&str>) -> Vec<(String, Button)> {
    vec![(
        "« Menu".into(),
        Button::Menu {
            identity: identity.map(str::to_owned),
            section: Section::Main,
        },
    )]
}

fn section(identity: Option<&str>, s: Section) -> (String, Button) {
    (
        s.title().into(),
        Button::Menu {
            identity: identity.map(str::to_owned),
            section: s,
        },
    )
}

/// Every instance the menu knows: the live ones, and in Threaded Mode the offline ones that
/// keep a topic.
pub fn instances_of(tx: &Connection) -> Result<Vec<Instance>, StoreError> {
    let selected = crate::state::selected(tx)?;
    let bindings = if crate::state::threaded(tx)? {
        store::threads::bindings(tx)?
    } else {
        Vec::new()
    };
    let mut list: Vec<Instance> = store::instances::live(tx)?
        .into_iter()
        .map(|i| Instance {
            topic: bindings
                .iter()
                .find(|b| b.identity == i.identity)
                .map(|b| b.title.clone()),
            selected: selected.as_deref() == Some(i.identity.as_str()),
            busy: i.state == store::instances::InstanceState::Busy
                || turns::outstanding(tx)
                    .map(|o| o.iter().any(|t| t.identity.as_deref() == Some(&i.identity)))
                    .unwrap_or(false),
            live: true,
            label: i.label,
            cwd: i.cwd,
            identity: i.identity,
        })
        .collect();
    for b in bindings {
        if !list.iter().any(|i| i.identity == b.identity) {
            list.push(Instance {
                label: crate::names::label_of(&b.identity),
                identity: b.identity,
                cwd: b.cwd,
                live: false,
                busy: false,
                selected: false,
                topic: Some(b.title),
            });
        }
    }
    Ok(list)
}

/// The overview: the instances (with a switch in classic mode) and the sections.
pub fn main(
    bot: &str,
    instances: &[Instance],
    current: Option<&Instance>,
    waiting: usize,
    threaded: bool,
) -> View {
    let mut text = format!("pi-telegram for @{bot}.");
    let live: Vec<&Instance> = instances.iter().filter(|i| i.live).collect();
    if live.is_empty() {
        text.push_str(
            "\n\nNo pi instance is connected yet. In a terminal where pi runs, type \
             /telegram-connect.",
        );
    } else {
        text.push_str("\n\nConnected pi instances (tap one to send your messages there):");
        for i in &live {
            let mark = if i.selected { "▶" } else { "•" };
            text.push_str(&format!("\n{mark} {}: {}", i.label, i.cwd));
        }
    }
    if let Some(c) = current {
        let state = if !c.live {
            "offline"
        } else if c.busy {
            "working"
        } else {
            "idle"
        };
        text.push_str(&format!(
            "\n\nThis menu is about {}: {state}, {waiting} waiting.",
            c.label
        ));
    }
    if !threaded {
        text.push_str(&format!("\n\n{}", crate::outgoing::texts::enable_tip()));
    }
    let id = current.map(|c| c.identity.as_str());
    let mut rows = Vec::new();
    if !threaded {
        for i in &live {
            let mark = if i.selected { "▶ " } else { "" };
            rows.push(vec![(
                format!("{mark}{}", i.label),
                Button::Select {
                    identity: i.identity.clone(),
                },
            )]);
        }
    }
    if current.is_some() {
        rows.push(vec![
            section(id, Section::Status),
            section(id, Section::Model),
            section(id, Section::Thinking),
        ]);
        rows.push(vec![
            section(id, Section::Queue),
            section(id, Section::Settings),
        ]);
    } else {
        rows.push(vec![section(id, Section::Settings)]);
    }
    let mut last = vec![section(id, Section::Help)];
    if threaded {
        last.insert(0, section(id, Section::Instances));
    }
    rows.push(last);
    View { text, rows }
}

/// Status: the instance and what pi reports.
pub fn status(i: &Instance, r: &Reported, waiting: usize) -> View {
    let mut text = format!("Status of {} ({})", i.label, i.cwd);
    let state = if !i.live {
        "offline"
    } else if i.busy {
        "working on a turn"
    } else {
        "idle"
    };
    text.push_str(&format!("\nState: {state}"));
    text.push_str(&format!("\nWaiting: {waiting}"));
    if let Some(m) = &r.model {
        text.push_str(&format!("\nModel: {m}"));
    }
    if let Some(t) = &r.thinking {
        text.push_str(&format!("\nThinking: {t}"));
    }
    if let Some((tokens, window)) = r.context {
        match tokens {
            Some(t) => text.push_str(&format!(
                "\nContext: {t} of {window} tokens ({}%)",
                t * 100 / window.max(1)
            )),
            None => text.push_str(&format!("\nContext: ? of {window} tokens")),
        }
    }
    if let Some(c) = r.cost {
        text.push_str(&format!("\nCost: ${c:.4}"));
    }
    let id = Some(i.identity.as_str());
    View {
        text,
        rows: vec![vec![section(id, Section::Status), back(id).remove(0)]],
    }
}

/// Models to switch to, the current one marked.
pub fn models(i: &Instance, models: &[(String, String, String)], current: Option<&str>) -> View {
    let mut text = format!("Model of {}", i.label);
    if let Some(c) = current {
        text.push_str(&format!(": {c}"));
    }
    if models.is_empty() {
        text.push_str("\n\npi reports no models it can use.");
    }
    let mut rows: Vec<Vec<(String, Button)>> = models
        .iter()
        .map(|(provider, id, name)| {
            let full = format!("{provider}/{id}");
            let mark = if current == Some(full.as_str()) {
                "✓ "
            } else {
                ""
            };
            vec![(
                format!("{mark}{name}"),
                Button::Model {
                    identity: i.identity.clone(),
                    provider: provider.clone(),
                    id: id.clone(),
                },
            )]
        })
        .collect();
    rows.push(back(Some(&i.identity)));
    View { text, rows }
}

/// Thinking levels, the current one marked.
pub fn thinking(i: &Instance, levels: &[String], current: Option<&str>) -> View {
    let mut text = format!("Thinking level of {}", i.label);
    if let Some(c) = current {
        text.push_str(&format!(": {c}"));
    }
    if levels.len() <= 1 {
        text.push_str("\n\nThe current model has no thinking levels to choose from.");
    }
    let buttons: Vec<(String, Button)> = levels
        .iter()
        .map(|l| {
            let mark = if current == Some(l.as_str()) {
                "✓ "
            } else {
                ""
            };
            (
                format!("{mark}{l}"),
                Button::Thinking {
                    identity: i.identity.clone(),
                    level: l.clone(),
                },
            )
        })
        .collect();
    let mut rows: Vec<Vec<(String, Button)>> = buttons
        .chunks(3)
        .map(<[(String, Button)]>::to_vec)
        .collect();
    rows.push(back(Some(&i.identity)));
    View { text, rows }
}

/// How much of a waiting prompt the queue shows.
const PREVIEW_CHARS: usize = 60;
/// How many waiting prompts the queue shows.
const SHOWN: usize = 8;

/// The waiting prompts, each with its controls.
pub fn queue(i: &Instance, waiting: &[Turn]) -> View {
    let mut text = format!("Waiting for {}: {}", i.label, waiting.len());
    if waiting.is_empty() {
        text.push_str("\n\nNothing is waiting.");
    }
    let mut rows = Vec::new();
    for (n, t) in waiting.iter().take(SHOWN).enumerate() {
        let n = n + 1;
        let lane = if t.lane == Lane::Priority { "⚡ " } else { "" };
        let skip = if t.skip { " (skipped)" } else { "" };
        text.push_str(&format!(
            "\n{n}. {lane}{}{skip}",
            crate::outgoing::activity::clip(&t.text.replace('\n', " "), PREVIEW_CHARS)
        ));
        let op = |label: String, op: QueueOp| (label, Button::Queue { turn: t.id, op });
        rows.push(vec![
            if t.lane == Lane::Priority {
                op(format!("{n} ⬇ normal"), QueueOp::Normal)
            } else {
                op(format!("{n} ⚡ first"), QueueOp::Priority)
            },
            if t.skip {
                op(format!("{n} keep"), QueueOp::Keep)
            } else {
                op(format!("{n} skip"), QueueOp::Skip)
            },
            op(format!("{n} ✕"), QueueOp::Remove),
        ]);
    }
    if waiting.len() > SHOWN {
        text.push_str(&format!("\n… and {} more", waiting.len() - SHOWN));
    }
    let id = Some(i.identity.as_str());
    rows.push(vec![section(id, Section::Queue), back(id).remove(0)]);
    View { text, rows }
}

/// The `assistant` settings, each value a button.
pub fn settings(identity: Option<&str>, s: &Settings) -> View {
    View {
        text: settings_text(s),
        rows: settings_rows(identity, s),
    }
}

/// What the settings are now, one line each.
fn settings_text(s: &Settings) -> String {
    format!(
        "Settings (telegram.json, for every pi)\nAnswers: {}\nLive previews: {}\nActivity: {}\nWork from the terminal: {}\nSpoken answers: {}\nTime told to pi: {}\nAsk before running prompts that waited: {}\nBuzzes: {}\nReactions on your messages: {}\nTopic of a pi that quits: {}",
        match s.rendering {
            Rendering::Rich => "rich messages",
            Rendering::Html => "HTML",
        },
        if s.draft_previews { "on" } else { "off" },
        activity_name(s.activity),
        if s.proactive_push {
            "sent here"
        } else {
            "not sent"
        },
        match s.voice_reply {
            VoiceReply::Manual => "only where pi asks",
            VoiceReply::Mirror => "when you speak",
            VoiceReply::Always => "always",
        },
        match s.time_injection {
            TimeInjection::Hidden => "never".to_owned(),
            TimeInjection::Always => "with every prompt".to_owned(),
            TimeInjection::Interval =>
                format!("every {}", crate::when::duration(s.time_interval_ms)),
        },
        match s.stale_after() {
            Some(ms) => format!("after {}", crate::when::duration(ms)),
            None => "never".to_owned(),
        },
        match s.notifications {
            Notifications::Smart => "answers and questions",
            Notifications::All => "every message",
            Notifications::Answers => "only answers (and questions)",
        },
        if s.reactions { "on" } else { "off" },
        if s.thread_cleanup { "deleted" } else { "kept" },
    )
}

/// A row of buttons per setting, the current value marked.
fn settings_rows(identity: Option<&str>, s: &Settings) -> Vec<Vec<(String, Button)>> {
    let on_off = |key: &str, label: &str, on: bool| {
        vec![
            setting(label, on, key, "true"),
            setting("off", !on, key, "false"),
        ]
    };
    let rendering = match s.rendering {
        Rendering::Rich => "rich",
        Rendering::Html => "html",
    };
    vec![
        choices(
            "assistant.rendering",
            rendering,
            &[("Rich", "rich"), ("HTML", "html")],
        ),
        on_off("assistant.draftPreviews", "Previews on", s.draft_previews),
        choices(
            "assistant.activity",
            activity_name(s.activity),
            &[
                ("quiet", "quiet"),
                ("thinking", "thinking"),
                ("tools", "tools"),
                ("verbose", "verbose"),
            ],
        ),
        on_off("assistant.proactivePush", "Push on", s.proactive_push),
        choices(
            "voice.replyMode",
            s.voice_reply.name(),
            &[
                ("🔇 manual", "manual"),
                ("🔁 mirror", "mirror"),
                ("🔊 always", "always"),
            ],
        ),
        choices(
            "assistant.timeInjection",
            s.time_injection.name(),
            &[
                ("🕐 off", "hidden"),
                ("each prompt", "always"),
                ("at intervals", "interval"),
            ],
        ),
        [
            ("every 15 min", 15),
            ("30 min", 30),
            ("1 h", 60),
            ("4 h", 240),
        ]
        .iter()
        .map(|(label, m)| {
            let ms = m * 60_000;
            let on = s.time_injection == TimeInjection::Interval && s.time_interval_ms == ms;
            setting(label, on, "time.interval", &ms.to_string())
        })
        .collect(),
        [("⏳ off", 0), ("15 min", 15), ("30 min", 30), ("2 h", 120)]
            .iter()
            .map(|(label, m)| {
                let on = s.stale_after_ms == m * 60_000;
                setting(label, on, "staleAfterMinutes", &m.to_string())
            })
            .collect(),
        choices(
            "notifications",
            s.notifications.name(),
            &[
                ("🔔 smart", "smart"),
                ("all", "all"),
                ("answers", "answers"),
            ],
        ),
        on_off("assistant.reactions", "Reactions on", s.reactions),
        vec![
            setting(
                "🧹 delete topics of pis that quit",
                s.thread_cleanup,
                "threads.automaticCleanup",
                "true",
            ),
            setting(
                "keep",
                !s.thread_cleanup,
                "threads.automaticCleanup",
                "false",
            ),
        ],
        back(identity),
    ]
}

/// A settings button: `key` (dotted, as in telegram.json) gets `value` (JSON), marked when it
/// is the value in force.
fn setting(label: &str, on: bool, key: &str, value: &str) -> (String, Button) {
    (
        format!("{}{label}", if on { "✓ " } else { "" }),
        Button::Setting {
            key: key.into(),
            value: value.into(),
        },
    )
}

/// One button per named value of `key` (a JSON string each).
fn choices(key: &str, current: &str, names: &[(&str, &str)]) -> Vec<(String, Button)> {
    names
        .iter()
        .map(|(label, name)| setting(label, current == *name, key, &format!("\"{name}\"")))
        .collect()
}

fn activity_name(a: Activity) -> &'static str {
    match a {
        Activity::Quiet => "quiet",
        Activity::Thinking => "thinking",
        Activity::Tools => "tools",
        Activity::Verbose => "verbose",
    }
}

/// The instances: in Threaded Mode each with its topic, to pick the one the menu is about.
pub fn instances(list: &[Instance]) -> View {
    let mut text = "pi instances:".to_owned();
    for i in list {
        let state = if i.live { "connected" } else { "offline" };
        let topic = i
            .topic
            .as_deref()
            .map_or_else(String::new, |t| format!(", thread \"{t}\""));
        text.push_str(&format!("\n• {}: {} ({state}{topic})", i.label, i.cwd));
    }
    if list.is_empty() {
        text.push_str("\nnone yet.");
    }
    let mut rows: Vec<Vec<(String, Button)>> = list
        .iter()
        .filter(|i| i.live)
        .map(|i| {
            vec![(
                format!("Menu of {}", i.label),
                Button::Menu {
                    identity: Some(i.identity.clone()),
                    section: Section::Main,
                },
            )]
        })
        .collect();
    rows.push(back(None));
    View { text, rows }
}

/// `/sessions`: pi's saved sessions (`data` of `get_sessions`), each a button to resume it
/// (not the current one).
pub fn sessions(identity: &str, data: &Value) -> View {
    let label = crate::names::label_of(identity);
    let current = data.get("current").and_then(Value::as_str);
    let list = data
        .get("sessions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut text = format!("Saved sessions of pi {label}:");
    let mut rows = Vec::new();
    for s in &list {
        let Some(path) = s.get("path").and_then(Value::as_str) else {
            continue;
        };
        let name = s.get("name").and_then(Value::as_str);
        let first = s
            .get("first_message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let when = s
            .get("modified_ms")
            .and_then(Value::as_i64)
            .map(short_time)
            .unwrap_or_default();
        let title = name.unwrap_or(if first.is_empty() { "(empty)" } else { first });
        let title: String = title.chars().take(40).collect();
        let is_current = Some(path) == current;
        text.push_str(&format!(
            "\n• {when} {title}{}",
            if is_current { " (current)" } else { "" }
        ));
        if !is_current {
            rows.push(vec![(
                format!("▶ {when} {title}"),
                Button::Resume {
                    identity: identity.to_owned(),
                    path: path.to_owned(),
                },
            )]);
        }
    }
    if list.is_empty() {
        text.push_str("\nnone saved yet.");
    }
    rows.push(vec![(
        "🆕 New session".into(),
        Button::NewSession {
            identity: identity.to_owned(),
        },
    )]);
    View { text, rows }
}

/// `MM-DD HH:MM` (UTC) of a Unix ms time.
fn short_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    format!("{m:02}-{d:02} {:02}:{:02}", rem / 3600, rem % 3600 / 60)
}

/// `/new` without a folder: a new session for the pi of this place (if any), or pi in one of
/// the offered folders.
pub fn new_picker(for_pi: Option<(&str, &str)>, folders: &[String], roots: &str) -> View {
    let mut rows = Vec::new();
    if let Some((identity, label)) = for_pi {
        rows.push(vec![(
            format!("🆕 New session for {label}"),
            Button::NewSession {
                identity: identity.to_owned(),
            },
        )]);
    }
    for f in folders {
        rows.push(vec![(format!("📁 {f}"), Button::NewPi { cwd: f.clone() })]);
    }
    View {
        text: crate::outgoing::texts::new_picker(roots, for_pi.map(|(_, l)| l)),
        rows,
    }
}

/// Help: what the bot does and its commands.
pub fn help(bot: &str, identity: Option<&str>) -> View {
    View {
        text: crate::outgoing::texts::help(bot),
        rows: vec![back(identity)],
    }
}

/// The view's buttons as an inline keyboard of owner-bound tokens.
pub fn buttons_markup(
    tx: &Connection,
    clock: &Clock,
    owner: i64,
    view: &View,
    now: i64,
) -> Result<Option<Value>, StoreError> {
    if view.rows.is_empty() {
        return Ok(None);
    }
    let mut rows = Vec::new();
    for row in &view.rows {
        let mut out = Vec::new();
        for (label, action) in row {
            out.push(outbound::button(
                tx,
                clock,
                owner,
                label,
                action,
                now,
                outbound::BUTTON_TTL_MS,
            )?);
        }
        rows.push(Value::Array(out));
    }
    Ok(Some(json!({ "inline_keyboard": rows })))
}

/// The inline keyboard for buttons pi wrote (`telegram_button`): each a token for a
/// [`Button::Prompt`] to `identity`, bound to `owner`. `None` without buttons.
pub fn prompt_buttons(
    tx: &Connection,
    clock: &Clock,
    owner: i64,
    identity: &str,
    rows: &[Vec<crate::outgoing::markup::ButtonSpec>],
    now: i64,
) -> Result<Option<Value>, StoreError> {
    if rows.is_empty() {
        return Ok(None);
    }
    let mut keyboard = Vec::new();
    for row in rows {
        let mut out = Vec::new();
        for b in row {
            let action = Button::Prompt {
                identity: identity.to_owned(),
                prompt: b.prompt.clone(),
                style: Some(b.style().name().to_owned()),
            };
            out.push(outbound::button(
                tx,
                clock,
                owner,
                &b.label,
                &action,
                now,
                outbound::QUESTION_TTL_MS,
            )?);
        }
        keyboard.push(Value::Array(out));
    }
    Ok(Some(json!({ "inline_keyboard": keyboard })))
}
