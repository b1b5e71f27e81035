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
use crate::buttons::{Button, Paged, QueueOp, Section};
use crate::clock::Clock;
use crate::outgoing::{outbound, texts};

/// How many entries a page of a long list shows (instances, the queue, sessions, the
/// chooser): with its controls a page stays far within Telegram's limits for a message (4096
/// characters, 100 buttons) and fits a phone's screen, at any number of pi.
pub const PER_PAGE: usize = 8;

/// How much of a label or folder a list line shows: a page's length is bounded whatever the
/// paths are.
const LINE_CHARS: usize = 120;

/// One page of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Counted from 0.
    pub index: usize,
    /// How many pages there are (at least 1).
    pub count: usize,
    per: usize,
}

impl Page {
    /// Page `wanted` of `len` entries, `per` a page; the last when `wanted` is past the end
    /// (the list shrank since the button was made).
    pub fn of(len: usize, per: usize, wanted: usize) -> Page {
        let per = per.max(1);
        let count = len.div_ceil(per).max(1);
        Page {
            index: wanted.min(count - 1),
            count,
            per,
        }
    }

    /// The page entry `n` is on.
    pub fn containing(n: usize, per: usize) -> usize {
        n / per.max(1)
    }

    /// Where this page starts in the list.
    pub fn first(self) -> usize {
        self.index * self.per
    }

    /// This page's entries of `items`.
    pub fn slice<T>(self, items: &[T]) -> &[T] {
        let start = self.first().min(items.len());
        let end = (start + self.per).min(items.len());
        &items[start..end]
    }

    /// `Page 2 of 13.`; `None` for a list that fits one page.
    pub fn line(self) -> Option<String> {
        (self.count > 1).then(|| texts::page_of(self.index, self.count))
    }

    /// ◀ n/N ▶ (round), the middle one going to page `middle`; `None` for a single page.
    pub fn row(self, middle: usize, to: impl Fn(usize) -> Button) -> Option<Vec<(String, Button)>> {
        (self.count > 1).then(|| {
            vec![
                ("◀".into(), to((self.index + self.count - 1) % self.count)),
                (format!("{}/{}", self.index + 1, self.count), to(middle)),
                ("▶".into(), to((self.index + 1) % self.count)),
            ]
        })
    }
}

/// A paging button of `list`.
pub fn to_page(list: &Paged) -> impl Fn(usize) -> Button + '_ {
    move |page| Button::Page {
        of: list.clone(),
        page,
    }
}

/// A label or folder as a list line shows it.
pub fn short(s: &str) -> String {
    crate::outgoing::activity::clip(s, LINE_CHARS)
}

/// A rendered section: text (plain, with Telegram's `entities` for what is formatted) and rows
/// of `(label, action)` buttons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The message text.
    pub text: String,
    /// Its formatting: Telegram `MessageEntity` objects (UTF-16 offsets into `text`).
    pub entities: Vec<Value>,
    /// Button rows.
    pub rows: Vec<Vec<(String, Button)>>,
}

impl View {
    /// Plain text and buttons.
    pub fn new(text: String, rows: Vec<Vec<(String, Button)>>) -> Self {
        Self {
            text,
            entities: Vec::new(),
            rows,
        }
    }
}

/// The waiting prompts of a pi as the menu counts them: those that will run, and those
/// skipped (dropped without a model turn when their turn comes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waiting {
    pub will_run: usize,
    pub skipped: usize,
}

impl Waiting {
    /// Counts `queue` (one pi's waiting turns).
    pub fn of(queue: &[Turn]) -> Self {
        let skipped = queue.iter().filter(|t| t.skip).count();
        Self {
            will_run: queue.len() - skipped,
            skipped,
        }
    }

    /// `2 waiting`, `2 waiting (1 skipped)`.
    fn short(self) -> String {
        match self.skipped {
            0 => format!("{} waiting", self.will_run),
            n => format!("{} waiting ({n} skipped)", self.will_run),
        }
    }

    /// `2`, `2, and 1 skipped`.
    fn count(self) -> String {
        match self.skipped {
            0 => self.will_run.to_string(),
            n => format!("{}, and {n} skipped", self.will_run),
        }
    }
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

/// Tokens of pi's model requests, as pi counts them: not cached, written, read from and
/// written to a prompt cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    /// pi's `{input, output, cacheRead, cacheWrite}` (session totals, or one message's
    /// usage); `None` when it is not such an object.
    pub fn of(v: &Value) -> Option<Usage> {
        let o = v.as_object()?;
        let n = |k: &str| o.get(k).and_then(Value::as_u64);
        if ["input", "output", "cacheRead", "cacheWrite"]
            .iter()
            .all(|k| n(k).is_none())
        {
            return None;
        }
        Some(Usage {
            input: n("input").unwrap_or(0),
            output: n("output").unwrap_or(0),
            cache_read: n("cacheRead").unwrap_or(0),
            cache_write: n("cacheWrite").unwrap_or(0),
        })
    }

    /// The share of the prompt that was read from the cache, in percent (`None` without a
    /// prompt).
    pub fn hit_percent(self) -> Option<u64> {
        let prompt = self.input + self.cache_read + self.cache_write;
        (prompt > 0).then(|| (self.cache_read * 100 + prompt / 2) / prompt)
    }
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
    /// The session's tokens so far.
    pub tokens: Option<Usage>,
    /// The latest model request's.
    pub latest: Option<Usage>,
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
            tokens: v.get("tokens").and_then(Usage::of),
            latest: v.get("latest").and_then(Usage::of),
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
    let bindings = if crate::state::topics_on(tx)? {
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

/// The overview: the live instances, [`PER_PAGE`] a page (with a switch in classic mode), and
/// the sections. `page` (from 0), or when `None` the one with the selected instance.
pub fn main(
    bot: &str,
    instances: &[Instance],
    current: Option<&Instance>,
    waiting: Waiting,
    threaded: bool,
    page: Option<usize>,
) -> View {
    let mut text = format!("pi-telegram for @{bot}.");
    let live: Vec<&Instance> = instances.iter().filter(|i| i.live).collect();
    let home = live
        .iter()
        .position(|i| i.selected)
        .map_or(0, |n| Page::containing(n, PER_PAGE));
    let page = Page::of(live.len(), PER_PAGE, page.unwrap_or(home));
    let shown = page.slice(&live);
    if live.is_empty() {
        text.push_str(
            "\n\nNo pi instance is connected yet. In a terminal where pi runs, type \
             /telegram-connect.",
        );
    } else {
        text.push_str("\n\nConnected pi instances (tap one to send your messages there):");
        for i in shown {
            let mark = if i.selected { "▶" } else { "•" };
            text.push_str(&format!("\n{mark} {}: {}", short(&i.label), short(&i.cwd)));
        }
        if page.count > 1 {
            text.push_str(&format!(
                "\n{}",
                texts::instances_counted(live.len(), page.index, page.count)
            ));
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
            "\n\nThis menu is about {}: {state}, {}.",
            c.label,
            waiting.short()
        ));
    }
    if !threaded {
        text.push_str(&format!("\n\n{}", crate::outgoing::texts::enable_tip()));
    }
    let id = current.map(|c| c.identity.as_str());
    let mut rows = Vec::new();
    if !threaded {
        for i in shown {
            let mark = if i.selected { "▶ " } else { "" };
            rows.push(vec![(
                format!("{mark}{}", short(&i.label)),
                Button::Select {
                    identity: i.identity.clone(),
                },
            )]);
        }
    }
    let list = Paged::Main {
        identity: id.map(str::to_owned),
    };
    rows.extend(page.row(home, to_page(&list)));
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
    View::new(text, rows)
}

/// A token count as a person reads it: exact below 10,000, then `12.3k`, `456k`, `1.2M`.
fn count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..100_000 => format!("{:.1}k", n as f64 / 1e3),
        100_000..1_000_000 => format!("{}k", (n + 500) / 1000),
        1_000_000..10_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{}M", (n + 500_000) / 1_000_000),
    }
}

/// Status: the instance and what pi reports: state, queue, model, thinking, context, the
/// session's tokens (in, out), its prompt cache (read, written, and how much of the latest
/// request's prompt came from it) and cost.
pub fn status(i: &Instance, r: &Reported, waiting: Waiting) -> View {
    let mut text = format!("Status of {} ({})", i.label, i.cwd);
    let state = if !i.live {
        "offline"
    } else if i.busy {
        "working on a turn"
    } else {
        "idle"
    };
    text.push_str(&format!("\nState: {state}"));
    text.push_str(&format!("\nWaiting: {}", waiting.count()));
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
    if let Some(u) = r.tokens {
        text.push_str(&format!(
            "\nTokens: {} in, {} out",
            count(u.input),
            count(u.output)
        ));
    }
    let hit = r.latest.and_then(Usage::hit_percent);
    match (r.tokens, hit) {
        (Some(u), Some(p)) => text.push_str(&format!(
            "\nCache: {} read, {} write (latest request: {p}% hit)",
            count(u.cache_read),
            count(u.cache_write)
        )),
        (Some(u), None) => text.push_str(&format!(
            "\nCache: {} read, {} write",
            count(u.cache_read),
            count(u.cache_write)
        )),
        (None, Some(p)) => text.push_str(&format!("\nCache: latest request {p}% hit")),
        (None, None) => {}
    }
    if let Some(c) = r.cost {
        text.push_str(&format!("\nCost: ${c:.4}"));
    }
    let id = Some(i.identity.as_str());
    View::new(
        text,
        vec![vec![section(id, Section::Status), back(id).remove(0)]],
    )
}

/// How many models a page of the model menu lists.
pub const MODELS_PER_PAGE: usize = 8;

/// The models pi offers to switch to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelList {
    /// `(provider, id, name)`, in pi's order.
    pub models: Vec<(String, String, String)>,
    /// `provider/id` of the model in use.
    pub current: Option<String>,
    /// The list is the models pi has enabled (`enabledModels`), not all it can use.
    pub scoped: bool,
    /// How many models pi can use in all.
    pub available: usize,
}

impl ModelList {
    /// From the answer to a models request (docs/wire-protocol.md, `get_models`).
    pub fn from_answer(v: &Value) -> ModelList {
        let models: Vec<(String, String, String)> = v
            .get("models")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|m| {
                        let p = m.get("provider").and_then(Value::as_str)?;
                        let id = m.get("id").and_then(Value::as_str)?;
                        let name = m.get("name").and_then(Value::as_str).unwrap_or(id);
                        Some((p.to_owned(), id.to_owned(), name.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let current = v.get("current").and_then(|m| {
            let p = m.get("provider").and_then(Value::as_str)?;
            let id = m.get("id").and_then(Value::as_str)?;
            Some(format!("{p}/{id}"))
        });
        ModelList {
            available: v
                .get("available")
                .and_then(Value::as_u64)
                .map_or(models.len(), |n| n as usize),
            scoped: v.get("scoped").and_then(Value::as_bool).unwrap_or(false),
            models,
            current,
        }
    }

    /// The page that lists the current model (the first when it is not listed).
    fn current_page(&self) -> usize {
        self.models
            .iter()
            .position(|(p, id, _)| self.current.as_deref() == Some(format!("{p}/{id}").as_str()))
            .map_or(0, |n| n / MODELS_PER_PAGE)
    }
}

/// Models to switch to, [`MODELS_PER_PAGE`] a page: `page` (counted from 0), or the one with
/// the current model (marked ✓) when `None`; ◀ and ▶ turn the pages (round), the page number
/// between them goes back to the current model's page.
pub fn models(i: &Instance, list: &ModelList, page: Option<usize>) -> View {
    let mut text = format!("Model of {}", i.label);
    if let Some(c) = &list.current {
        text.push_str(&format!(": {c}"));
    }
    let n = list.models.len();
    if n == 0 {
        text.push_str("\n\npi reports no models it can use.");
    } else if list.scoped {
        text.push_str(&format!(
            "\n\nThe {n} models pi has enabled (enabledModels), of {} it can use.",
            list.available
        ));
        let listed = list
            .models
            .iter()
            .any(|(p, id, _)| list.current.as_deref() == Some(format!("{p}/{id}").as_str()));
        if list.current.is_some() && !listed {
            text.push_str(" The current model is not one of them.");
        }
    } else {
        text.push_str(&format!("\n\nAll {n} models pi can use."));
    }
    let home = list.current_page();
    let page = Page::of(n, MODELS_PER_PAGE, page.unwrap_or(home));
    if let Some(line) = page.line() {
        text.push_str(&format!(" {line}"));
    }
    let name_count = |name: &str| list.models.iter().filter(|(_, _, m)| m == name).count();
    let mut rows: Vec<Vec<(String, Button)>> = page
        .slice(&list.models)
        .iter()
        .map(|(provider, id, name)| {
            let full = format!("{provider}/{id}");
            let mark = if list.current.as_deref() == Some(full.as_str()) {
                "✓ "
            } else {
                ""
            };
            // A name two providers share says whose it is.
            let label = if name_count(name) > 1 {
                format!("{mark}{name} · {provider}")
            } else {
                format!("{mark}{name}")
            };
            vec![(
                label,
                Button::Model {
                    identity: i.identity.clone(),
                    provider: provider.clone(),
                    id: id.clone(),
                },
            )]
        })
        .collect();
    rows.extend(page.row(home, |page| Button::ModelPage {
        identity: i.identity.clone(),
        page,
    }));
    rows.push(back(Some(&i.identity)));
    View::new(text, rows)
}

/// Thinking levels, the current one marked: `off` on a row of its own, the others three to a
/// row (the reference's compact layout).
pub fn thinking(i: &Instance, levels: &[String], current: Option<&str>) -> View {
    let mut text = format!("Thinking level of {}", i.label);
    if let Some(c) = current {
        text.push_str(&format!(": {c}"));
    }
    if levels.len() <= 1 {
        text.push_str("\n\nThe current model has no thinking levels to choose from.");
    }
    let button = |l: &String| {
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
    };
    let (off, graded): (Vec<&String>, Vec<&String>) = levels.iter().partition(|l| *l == "off");
    let mut rows: Vec<Vec<(String, Button)>> = Vec::new();
    if !off.is_empty() {
        rows.push(off.into_iter().map(button).collect());
    }
    rows.extend(
        graded
            .chunks(3)
            .map(|row| row.iter().map(|l| button(l)).collect()),
    );
    rows.push(back(Some(&i.identity)));
    View::new(text, rows)
}

/// How much of a waiting prompt the queue shows.
const PREVIEW_CHARS: usize = 60;
/// The waiting prompts, [`PER_PAGE`] a page (`page` from 0, the first when `None`), each with
/// its controls. A skipped one is struck through and not counted: it is dropped without a
/// model turn when its turn comes. `held`: after an `/abort`, they go to pi with the person's
/// next message (`state::Fold`).
pub fn queue(i: &Instance, waiting: &[Turn], held: bool, page: Option<usize>) -> View {
    let mut text = format!("Waiting for {}: {}", i.label, Waiting::of(waiting).count());
    let mut entities = Vec::new();
    if waiting.is_empty() {
        text.push_str("\n\nNothing is waiting.");
    } else if held {
        text.push_str(
            "\nAfter your /abort they go to pi with your next message, as said before it \
             (/next runs them one by one).",
        );
    }
    let page = Page::of(waiting.len(), PER_PAGE, page.unwrap_or(0));
    let mut rows = Vec::new();
    for (n, t) in page.slice(waiting).iter().enumerate() {
        // Numbered in the whole queue: the numbers say where each stands.
        let n = page.first() + n + 1;
        let lane = if t.lane == Lane::Priority { "⚡ " } else { "" };
        let words = crate::outgoing::activity::clip(&t.text.replace('\n', " "), PREVIEW_CHARS);
        text.push_str(&format!("\n{n}. {lane}"));
        if t.skip {
            entities.push(json!({
                "type": "strikethrough",
                "offset": tg_format::utf16::len(&text),
                "length": tg_format::utf16::len(&words),
            }));
            text.push_str(&format!("{words} (skipped)"));
        } else {
            text.push_str(&words);
        }
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
    if let Some(line) = page.line() {
        text.push_str(&format!("\n{line}"));
    }
    let list = Paged::Queue {
        identity: i.identity.clone(),
    };
    rows.extend(page.row(page.index, to_page(&list)));
    let id = Some(i.identity.as_str());
    rows.push(vec![section(id, Section::Queue), back(id).remove(0)]);
    View {
        text,
        entities,
        rows,
    }
}

/// The `assistant` settings, each value a button.
pub fn settings(identity: Option<&str>, s: &Settings) -> View {
    View::new(settings_text(s), settings_rows(identity, s))
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

/// The instances, [`PER_PAGE`] a page (`page` from 0, the first when `None`): in Threaded
/// Mode each with its topic, to pick the one the menu is about.
pub fn instances(list: &[Instance], page: Option<usize>) -> View {
    let mut text = "pi instances:".to_owned();
    let page = Page::of(list.len(), PER_PAGE, page.unwrap_or(0));
    let shown = page.slice(list);
    for i in shown {
        let state = if i.live { "connected" } else { "offline" };
        let topic = i
            .topic
            .as_deref()
            .map_or_else(String::new, |t| format!(", thread \"{}\"", short(t)));
        text.push_str(&format!(
            "\n• {}: {} ({state}{topic})",
            short(&i.label),
            short(&i.cwd)
        ));
    }
    if list.is_empty() {
        text.push_str("\nnone yet.");
    }
    if page.count > 1 {
        text.push_str(&format!(
            "\n{}",
            texts::instances_counted(list.len(), page.index, page.count)
        ));
    }
    let mut rows: Vec<Vec<(String, Button)>> = shown
        .iter()
        .filter(|i| i.live)
        .map(|i| {
            vec![(
                format!("Menu of {}", short(&i.label)),
                Button::Menu {
                    identity: Some(i.identity.clone()),
                    section: Section::Main,
                },
            )]
        })
        .collect();
    rows.extend(page.row(page.index, to_page(&Paged::Instances)));
    rows.push(back(None));
    View::new(text, rows)
}

/// `/sessions`: pi's saved sessions (`data` of `get_sessions`), [`PER_PAGE`] a page (`page`
/// from 0, the first when `None`), each a button to resume it (not the current one).
pub fn sessions(identity: &str, data: &Value, page: Option<usize>) -> View {
    let label = crate::names::label_of(identity);
    let current = data.get("current").and_then(Value::as_str);
    let list: Vec<(&str, &Value)> = data
        .get("sessions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s.get("path").and_then(Value::as_str)?, s)))
        .collect();
    let page = Page::of(list.len(), PER_PAGE, page.unwrap_or(0));
    let mut text = format!("Saved sessions of pi {label}:");
    let mut rows = Vec::new();
    for &(path, s) in page.slice(&list) {
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
    if let Some(line) = page.line() {
        text.push_str(&format!("\n{line}"));
    }
    let paged = Paged::Sessions {
        identity: identity.to_owned(),
    };
    rows.extend(page.row(page.index, to_page(&paged)));
    rows.push(vec![(
        "🆕 New session".into(),
        Button::NewSession {
            identity: identity.to_owned(),
        },
    )]);
    View::new(text, rows)
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
/// the offered folders, [`PER_PAGE`] a page (`page` from 0; a page past the end shows the
/// last).
pub fn new_picker(
    for_pi: Option<(&str, &str)>,
    folders: &[String],
    roots: &str,
    page: usize,
) -> View {
    let page = Page::of(folders.len(), PER_PAGE, page);
    let mut rows = Vec::new();
    if let Some((identity, label)) = for_pi {
        rows.push(vec![(
            format!("🆕 New session for {}", short(label)),
            Button::NewSession {
                identity: identity.to_owned(),
            },
        )]);
    }
    for f in page.slice(folders) {
        rows.push(vec![(
            format!("📁 {}", short(f)),
            Button::NewPi { cwd: f.clone() },
        )]);
    }
    rows.extend(page.row(page.index, to_page(&Paged::Folders)));
    let mut text = crate::outgoing::texts::new_picker(roots, for_pi.map(|(_, l)| l));
    if let Some(line) = page.line() {
        text.push_str(&format!("\n{line}"));
    }
    View::new(text, rows)
}

/// Help: what the bot does and its commands.
pub fn help(bot: &str, identity: Option<&str>) -> View {
    View::new(crate::outgoing::texts::help(bot), vec![back(identity)])
}

/// A live pi a waiting turn may be sent to: `(identity, label)`.
pub type Choice = (String, String);

/// The chooser's buttons for `turn`: "Send to" each of `live`, [`PER_PAGE`] a page (`page`
/// from 0), with "Move here" beside each in a topic (`thread`). `instead_of`: the pi the turn
/// waits for (not offered).
pub fn chooser(
    turn: i64,
    live: &[Choice],
    thread: Option<i64>,
    instead_of: Option<&str>,
    page: usize,
) -> Vec<Vec<(String, Button)>> {
    let offered: Vec<&Choice> = live
        .iter()
        .filter(|(identity, _)| Some(identity.as_str()) != instead_of)
        .collect();
    let page = Page::of(offered.len(), PER_PAGE, page);
    let mut rows: Vec<Vec<(String, Button)>> = page
        .slice(&offered)
        .iter()
        .map(|(identity, label)| {
            let send = Button::Send {
                turn,
                to: identity.clone(),
                instead_of: instead_of.map(str::to_owned),
            };
            let mut row = vec![(format!("Send to {}", short(label)), send)];
            if let Some(thread) = thread {
                let here = Button::Move {
                    turn,
                    identity: identity.clone(),
                    thread,
                };
                row.push((format!("Move {} here", short(label)), here));
            }
            row
        })
        .collect();
    let list = Paged::Chooser {
        turn,
        instead_of: instead_of.map(str::to_owned),
    };
    rows.extend(page.row(page.index, to_page(&list)));
    rows
}

/// The view's buttons as an inline keyboard of owner-bound tokens.
pub fn buttons_markup(
    tx: &Connection,
    clock: &Clock,
    owner: i64,
    view: &View,
    now: i64,
) -> Result<Option<Value>, StoreError> {
    keyboard(tx, clock, owner, &view.rows, now, outbound::BUTTON_TTL_MS)
}

/// `rows` as an inline keyboard of owner-bound tokens valid for `ttl_ms`; `None` without
/// buttons.
pub fn keyboard(
    tx: &Connection,
    clock: &Clock,
    owner: i64,
    rows_in: &[Vec<(String, Button)>],
    now: i64,
    ttl_ms: i64,
) -> Result<Option<Value>, StoreError> {
    if rows_in.is_empty() {
        return Ok(None);
    }
    let mut rows = Vec::new();
    for row in rows_in {
        let mut out = Vec::new();
        for (label, action) in row {
            out.push(outbound::button(
                tx, clock, owner, label, action, now, ttl_ms,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn web() -> Instance {
        Instance {
            identity: "/w/web".into(),
            label: "web".into(),
            cwd: "/w/web".into(),
            live: true,
            busy: false,
            selected: true,
            topic: None,
        }
    }

    fn labels(v: &View) -> Vec<Vec<String>> {
        v.rows
            .iter()
            .map(|r| r.iter().map(|(l, _)| l.clone()).collect())
            .collect()
    }

    #[test]
    fn status_has_tokens_the_cache_with_the_latest_hit_rate_and_cost() {
        let stats = json!({
            "model": { "provider": "fake", "id": "fake-reasoner" },
            "thinking_level": "high",
            "context": { "tokens": 640, "contextWindow": 64000, "percent": 1 },
            "cost": 0.01234,
            "tokens": { "input": 1200, "output": 340, "cacheRead": 25_600, "cacheWrite": 45, "total": 27_185 },
            "latest": { "input": 10, "output": 5, "cacheRead": 85, "cacheWrite": 5 },
        });
        let waiting = Waiting {
            will_run: 2,
            skipped: 1,
        };
        let v = status(&web(), &Reported::from_stats(&stats), waiting);
        assert_eq!(
            v.text,
            "Status of web (/w/web)\nState: idle\nWaiting: 2, and 1 skipped\nModel: \
             fake/fake-reasoner\nThinking: high\nContext: 640 of 64000 tokens (1%)\nTokens: 1200 \
             in, 340 out\nCache: 25.6k read, 45 write (latest request: 85% hit)\nCost: $0.0123"
        );
        // Without a latest request (a headless pi restarted) the cache row has no hit rate;
        // without token totals there are neither rows.
        let mut r = Reported::from_stats(&stats);
        r.latest = None;
        assert!(
            status(&web(), &r, Waiting::default())
                .text
                .contains("\nCache: 25.6k read, 45 write\n")
        );
        let bare = status(&web(), &Reported::default(), Waiting::default()).text;
        assert!(
            !bare.contains("Tokens") && !bare.contains("Cache"),
            "{bare}"
        );
        assert_eq!(Usage::default().hit_percent(), None);
    }

    #[test]
    fn token_counts_read_short() {
        assert_eq!(count(9_999), "9999");
        assert_eq!(count(12_345), "12.3k");
        assert_eq!(count(456_700), "457k");
        assert_eq!(count(1_234_567), "1.2M");
        assert_eq!(count(12_500_000), "13M");
    }

    fn sixty() -> ModelList {
        let models = (0..60)
            .map(|n| {
                let provider = format!("p{}", n / 15);
                (provider, format!("m{n:02}"), format!("Model {n:02}"))
            })
            .collect();
        ModelList {
            models,
            current: Some("p1/m20".into()),
            scoped: false,
            available: 60,
        }
    }

    #[test]
    fn the_model_menu_pages_and_opens_at_the_current_model() {
        let list = sixty();
        let v = models(&web(), &list, None);
        assert!(
            v.text.ends_with("All 60 models pi can use. Page 3 of 8."),
            "{}",
            v.text
        );
        let rows = labels(&v);
        assert_eq!(rows.len(), MODELS_PER_PAGE + 2);
        assert_eq!(rows[0], ["Model 16"]);
        assert_eq!(rows[4], ["✓ Model 20"]);
        assert_eq!(rows[8], ["◀", "3/8", "▶"]);
        assert_eq!(rows[9], ["« Menu"]);
        let page_of = |label: &str| {
            v.rows[8]
                .iter()
                .find(|(l, _)| l == label)
                .map(|(_, b)| b.clone())
                .unwrap()
        };
        let to = |page| Button::ModelPage {
            identity: "/w/web".into(),
            page,
        };
        assert_eq!(page_of("◀"), to(1));
        assert_eq!(page_of("▶"), to(3));
        assert_eq!(page_of("3/8"), to(2));
        // The last page, and round from there; a page past the end shows the last.
        let last = models(&web(), &list, Some(7));
        assert_eq!(labels(&last)[3], ["Model 59"]);
        assert_eq!(labels(&last)[4], ["◀", "8/8", "▶"]);
        assert_eq!(last.rows[4][2].1, to(0));
        assert_eq!(models(&web(), &list, Some(99)), last);
        // A pick is a model button.
        assert_eq!(
            v.rows[4][0].1,
            Button::Model {
                identity: "/w/web".into(),
                provider: "p1".into(),
                id: "m20".into()
            }
        );
    }

    #[test]
    fn a_scoped_list_says_so_and_names_shared_names_by_provider() {
        let list = ModelList {
            models: vec![
                ("openai".into(), "gpt-5".into(), "GPT-5".into()),
                ("openrouter".into(), "openai/gpt-5".into(), "GPT-5".into()),
            ],
            current: Some("zai/glm".into()),
            scoped: true,
            available: 60,
        };
        let v = models(&web(), &list, None);
        assert!(
            v.text.ends_with(
                "The 2 models pi has enabled (enabledModels), of 60 it can use. The current \
                 model is not one of them."
            ),
            "{}",
            v.text
        );
        assert_eq!(
            labels(&v),
            [
                vec!["GPT-5 · openai".to_owned()],
                vec!["GPT-5 · openrouter".to_owned()],
                vec!["« Menu".to_owned()],
            ]
        );
    }

    #[test]
    fn thinking_levels_sit_off_first_then_three_a_row() {
        let levels: Vec<String> = ["off", "minimal", "low", "medium", "high", "xhigh", "max"]
            .iter()
            .map(|l| (*l).to_owned())
            .collect();
        assert_eq!(
            labels(&thinking(&web(), &levels, Some("medium"))),
            [
                vec!["off"],
                vec!["minimal", "low", "✓ medium"],
                vec!["high", "xhigh", "max"],
                vec!["« Menu"],
            ]
        );
        let v = thinking(&web(), &levels[..1], Some("off"));
        assert_eq!(labels(&v), [vec!["✓ off"], vec!["« Menu"]]);
        assert!(v.text.ends_with("no thinking levels to choose from."));
    }

    fn turn(id: i64, text: &str, skip: bool, lane: Lane) -> Turn {
        Turn {
            id,
            source_update_id: None,
            chat_id: 1,
            thread_id: None,
            message_id: None,
            identity: Some("/w/web".into()),
            text: text.into(),
            state: store::turns::TurnState::Queued,
            instance_id: None,
            instance_pid: None,
            transport: None,
            result_text: None,
            waits: None,
            lane,
            skip,
            ready: true,
            context: None,
            group_key: None,
            gather_until_ms: 0,
            created_ms: 0,
            sent_ms: 0,
            held: None,
            stale_question: None,
            from_user: None,
            from_name: None,
        }
    }

    #[test]
    fn a_skipped_prompt_is_struck_through_and_not_counted() {
        let waiting = [
            turn(1, "first", false, Lane::Priority),
            turn(2, "ünïcode 😀 skipped", true, Lane::Normal),
            turn(3, "third", false, Lane::Normal),
        ];
        let v = queue(&web(), &waiting, false, None);
        assert_eq!(
            v.text,
            "Waiting for web: 2, and 1 skipped\n1. ⚡ first\n2. ünïcode 😀 skipped (skipped)\n3. \
             third"
        );
        // The struck words, in UTF-16 units (the emoji is two).
        let at = v.text.find("ünïcode").unwrap();
        assert_eq!(
            v.entities,
            [json!({
                "type": "strikethrough",
                "offset": tg_format::utf16::len(&v.text[..at]),
                "length": 18,
            })]
        );
        assert_eq!(labels(&v)[1], ["2 ⚡ first", "2 keep", "2 ✕"]);
        assert_eq!(Waiting::of(&waiting).short(), "2 waiting (1 skipped)");
        assert!(queue(&web(), &[], true, None).entities.is_empty());
        let held = queue(&web(), &waiting, true, None);
        assert!(
            held.text.starts_with(
                "Waiting for web: 2, and 1 skipped\nAfter your /abort they go to pi with your \
                 next message"
            ),
            "{}",
            held.text
        );
        // The struck words moved with the line before them.
        assert_ne!(held.entities, v.entities);
    }
    /// Telegram's limits for a message: its text and its inline keyboard.
    const TEXT_LIMIT: usize = 4096;
    const BUTTON_LIMIT: usize = 100;

    /// `n` live instances with long folders, the 150th selected.
    fn many(n: usize) -> Vec<Instance> {
        (0..n)
            .map(|k| Instance {
                identity: format!("/home/someone/projects/a-rather-long-folder-name/pi-{k:03}"),
                label: format!("pi-{k:03}"),
                cwd: format!("/home/someone/projects/a-rather-long-folder-name/pi-{k:03}"),
                live: true,
                busy: false,
                selected: k == 150,
                topic: Some(format!("pi-{k:03} · a-rather-long-folder-name")),
            })
            .collect()
    }

    /// Every page of a paged list through `view(page)`, checked against Telegram's limits;
    /// also that ▶ leads from each page to the next and round to the first.
    fn pages_of(view: impl Fn(usize) -> View, paged: impl Fn(&Button) -> bool) -> Vec<View> {
        let first = view(0);
        let count = first
            .rows
            .iter()
            .flatten()
            .filter(|(_, b)| paged(b))
            .find_map(|(l, _)| l.split_once('/').and_then(|(_, n)| n.parse::<usize>().ok()))
            .unwrap();
        let all: Vec<View> = (0..count).map(&view).collect();
        for (k, v) in all.iter().enumerate() {
            assert!(
                v.text.chars().count() <= TEXT_LIMIT,
                "page {k}: {}",
                v.text.len()
            );
            let buttons = v.rows.iter().map(Vec::len).sum::<usize>();
            assert!(buttons <= BUTTON_LIMIT, "page {k}: {buttons} buttons");
            assert!(v.rows.len() <= 15, "page {k}: {} rows", v.rows.len());
            let next = v.rows.iter().flatten().find(|(l, _)| l == "▶").unwrap();
            match &next.1 {
                Button::Page { page, .. } => assert_eq!(*page, (k + 1) % count),
                other => panic!("{other:?}"),
            }
            let previous = v.rows.iter().flatten().find(|(l, _)| l == "◀").unwrap();
            match &previous.1 {
                Button::Page { page, .. } => assert_eq!(*page, (k + count - 1) % count),
                other => panic!("{other:?}"),
            }
        }
        all
    }

    /// Each of `expected` once in all pages' `found`.
    fn exactly_once(found: Vec<String>, expected: &[String]) {
        let mut sorted = found.clone();
        sorted.sort();
        let mut want = expected.to_vec();
        want.sort();
        assert_eq!(sorted, want, "found {} entries", found.len());
    }

    fn is_page(b: &Button) -> bool {
        matches!(b, Button::Page { .. })
    }

    #[test]
    fn the_main_menu_pages_200_instances_and_opens_at_the_selected_one() {
        let list = many(200);
        let view = |page| {
            main(
                "bot",
                &list,
                Some(&list[150]),
                Waiting::default(),
                false,
                Some(page),
            )
        };
        let all = pages_of(view, is_page);
        assert_eq!(all.len(), 200usize.div_ceil(PER_PAGE));
        let identities: Vec<String> = list.iter().map(|i| i.identity.clone()).collect();
        let selects = all
            .iter()
            .flat_map(|v| v.rows.iter().flatten())
            .filter_map(|(_, b)| match b {
                Button::Select { identity } => Some(identity.clone()),
                _ => None,
            })
            .collect();
        exactly_once(selects, &identities);
        let lines = all
            .iter()
            .flat_map(|v| v.text.lines())
            .filter_map(|l| l.strip_prefix("• ").or_else(|| l.strip_prefix("▶ ")))
            .map(|l| l.split_once(": ").unwrap().1.to_owned())
            .collect();
        exactly_once(lines, &identities);
        // Opened without a page, the menu shows the selected instance's page.
        let home = main(
            "bot",
            &list,
            Some(&list[150]),
            Waiting::default(),
            false,
            None,
        );
        assert_eq!(home, all[150 / PER_PAGE]);
        assert!(home.text.contains("\n▶ pi-150: "), "{}", home.text);
        assert!(home.text.contains("200 pi instances. Page 19 of 25."));
        // In Threaded Mode there is no switch, and the list still pages.
        let threaded = main("bot", &list, None, Waiting::default(), true, Some(3));
        assert!(
            threaded
                .rows
                .iter()
                .flatten()
                .all(|(_, b)| !matches!(b, Button::Select { .. }))
        );
        assert!(threaded.text.contains("pi-024:"), "{}", threaded.text);
    }

    #[test]
    fn a_short_list_has_no_page_buttons() {
        let list = many(PER_PAGE);
        let v = main("bot", &list, None, Waiting::default(), false, None);
        assert!(!v.rows.iter().flatten().any(|(_, b)| is_page(b)));
        assert!(!v.text.contains("Page"));
        assert_eq!(v.text.matches("\n• ").count(), PER_PAGE);
    }

    #[test]
    fn the_instances_section_pages_200_instances() {
        let list = many(200);
        let all = pages_of(|page| instances(&list, Some(page)), is_page);
        let identities: Vec<String> = list.iter().map(|i| i.identity.clone()).collect();
        let menus = all
            .iter()
            .flat_map(|v| v.rows.iter().flatten())
            .filter_map(|(_, b)| match b {
                Button::Menu {
                    identity: Some(i), ..
                } => Some(i.clone()),
                _ => None,
            })
            .collect();
        exactly_once(menus, &identities);
        // A page past the end (the list shrank) shows the last.
        assert_eq!(instances(&list, Some(999)), all[all.len() - 1]);
    }

    #[test]
    fn the_queue_pages_200_waiting_prompts_numbered_in_the_whole_queue() {
        let long = "a long prompt ".repeat(40);
        let waiting: Vec<Turn> = (0..200)
            .map(|n| turn(n, &format!("{n}: {long}"), n % 7 == 0, Lane::Normal))
            .collect();
        let all = pages_of(|page| queue(&web(), &waiting, true, Some(page)), is_page);
        let removes = all
            .iter()
            .flat_map(|v| v.rows.iter().flatten())
            .filter_map(|(_, b)| match b {
                Button::Queue {
                    turn,
                    op: QueueOp::Remove,
                } => Some(turn.to_string()),
                _ => None,
            })
            .collect();
        let ids: Vec<String> = (0..200).map(|n: i64| n.to_string()).collect();
        exactly_once(removes, &ids);
        assert!(all[2].text.contains("\n17. 16: a long"), "{}", all[2].text);
        assert_eq!(labels(&all[2])[0], ["17 ⚡ first", "17 skip", "17 ✕"]);
        // Struck words stay on their own words.
        for v in &all {
            for e in &v.entities {
                let offset = e["offset"].as_u64().unwrap() as usize;
                let units: Vec<u16> = v.text.encode_utf16().collect();
                let struck = String::from_utf16(&units[offset..offset + 5]).unwrap();
                assert!(struck.chars().next().unwrap().is_ascii_digit(), "{struck}");
            }
        }
    }

    #[test]
    fn sessions_page_200_saved_sessions() {
        let sessions: Vec<Value> = (0..200)
            .map(|n| {
                json!({
                    "path": format!("/s/{n}.jsonl"),
                    "first_message": format!("session {n} {}", "words ".repeat(30)),
                    "modified_ms": 1_700_000_000_000i64 + n,
                })
            })
            .collect();
        let data = json!({ "current": "/s/5.jsonl", "sessions": sessions });
        let all = pages_of(|page| super::sessions("/w/web", &data, Some(page)), is_page);
        let resumes = all
            .iter()
            .flat_map(|v| v.rows.iter().flatten())
            .filter_map(|(_, b)| match b {
                Button::Resume { path, .. } => Some(path.clone()),
                _ => None,
            })
            .collect();
        let paths: Vec<String> = (0..200)
            .filter(|n| *n != 5)
            .map(|n| format!("/s/{n}.jsonl"))
            .collect();
        exactly_once(resumes, &paths);
        let listed = all
            .iter()
            .flat_map(|v| v.text.lines())
            .filter(|l| l.starts_with("• "));
        assert_eq!(listed.count(), 200);
        assert!(
            all.iter()
                .all(|v| labels(v).last().unwrap() == &["🆕 New session"])
        );
    }

    #[test]
    fn the_chooser_pages_200_pi_and_leaves_out_the_one_waited_for() {
        let live: Vec<Choice> = many(200)
            .into_iter()
            .map(|i| (i.identity, i.label))
            .collect();
        let identities: Vec<String> = live.iter().map(|(i, _)| i.clone()).collect();
        let view = |thread: Option<i64>| {
            let live = live.clone();
            move |page| View::new(String::new(), chooser(7, &live, thread, None, page))
        };
        let sends = |all: &[View]| -> Vec<String> {
            all.iter()
                .flat_map(|v| v.rows.iter().flatten())
                .filter_map(|(_, b)| match b {
                    Button::Send { turn: 7, to, .. } => Some(to.clone()),
                    _ => None,
                })
                .collect()
        };
        exactly_once(sends(&pages_of(view(None), is_page)), &identities);
        // In a topic every pi also has "Move here": still within the limits.
        let topic = pages_of(view(Some(41)), is_page);
        exactly_once(sends(&topic), &identities);
        assert_eq!(labels(&topic[0])[0], ["Send to pi-000", "Move pi-000 here"]);
        // Offered instead of a pi that is away: every other pi, and the paging keeps that.
        let away = &identities[3];
        let instead: Vec<View> = (0..25)
            .map(|page| View::new(String::new(), chooser(7, &live, None, Some(away), page)))
            .collect();
        let others: Vec<String> = identities.iter().filter(|i| *i != away).cloned().collect();
        exactly_once(sends(&instead), &others);
        assert_eq!(
            instead[0].rows.last().unwrap()[2].1,
            Button::Page {
                of: Paged::Chooser {
                    turn: 7,
                    instead_of: Some(away.clone())
                },
                page: 1
            }
        );
    }

    #[test]
    fn new_pages_200_folders_with_the_new_session_on_every_page() {
        let folders: Vec<String> = (0..200)
            .map(|k| {
                format!(
                    "/home/someone/code/{}-{k:03}",
                    "long-project-name".repeat(4)
                )
            })
            .collect();
        let all = pages_of(
            |page| new_picker(Some(("/w/web", "web")), &folders, "~/code", page),
            is_page,
        );
        assert_eq!(all.len(), 25);
        let offered = all
            .iter()
            .flat_map(|v| v.rows.iter().flatten())
            .filter_map(|(_, b)| match b {
                Button::NewPi { cwd } => Some(cwd.clone()),
                _ => None,
            })
            .collect();
        exactly_once(offered, &folders);
        for v in &all {
            assert_eq!(labels(v)[0], ["🆕 New session for web"]);
        }
        assert!(all[24].text.ends_with("Page 25 of 25."), "{}", all[24].text);
        // Few folders: one page, no paging row, no page line.
        let one = new_picker(None, &folders[..3], "~/code", 0);
        assert_eq!(one.rows.len(), 3);
        assert!(!one.text.contains("Page"));
    }
}
