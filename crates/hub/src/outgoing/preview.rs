//! Live previews: while pi works on a Telegram turn, the person sees its answer grow in a draft
//! (`sendRichMessageDraft` or `sendMessageDraft`, one `draft_id` per turn, the latest text
//! wins), with a line about the tool running or the thinking going on; a typing action only
//! while no draft shows.
//!
//! Previews are best effort and never durable: they are not in the outbox, a crash loses
//! nothing that matters. What must hold:
//! - pacing per chat that stays inside Telegram's limits (a `429` slows that chat's previews,
//!   never anything else), near three updates a second;
//! - a frame is rendered only when it is sent (so a fast stream costs a render per update, not
//!   per token) and only a changed frame is sent;
//! - a draft lives 30 s: it is sent again before it expires while pi works;
//! - the fence: once a turn's final answer is about to be queued, nothing preview-like is sent
//!   for it. `End` is answered only when no call for that turn is in flight (calls are made
//!   from this task, one at a time), so no draft or typing can arrive after the answer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use telegram::{CallError, Client};
use tg_format::markdown::{self, RichBudget};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use wire::{EventKind, PiEvent, ToolPhase};

use crate::assistant::{Rendering, Watched};
use crate::error::HubError;
use crate::outgoing::activity::{self, short_args};
use crate::outgoing::delivery::escape_markdown;

/// What the conductor tells the preview task.
#[derive(Debug)]
pub enum PreviewMsg {
    /// A Telegram turn was handed to pi: show "Thinking…" at once.
    Begin {
        /// The turn (also the draft id).
        turn: i64,
        /// Where its answer will be.
        chat: i64,
        /// Its topic.
        thread: Option<i64>,
    },
    /// One of pi's events for that turn.
    Event { turn: i64, event: PiEvent },
    /// The working card's ⏹ Stop for a turn (its token bound by the conductor, off the way
    /// to pi): shown once the turn has run [`WORKING_CARD_AFTER`].
    StopButton {
        turn: i64,
        /// `reply_markup` with the button.
        markup: Value,
    },
    /// The final answer is about to be queued: nothing more for this turn. Answered once no
    /// call for it is in flight.
    End {
        turn: i64,
        /// Answered when fenced.
        fenced: oneshot::Sender<()>,
    },
}

/// How long a draft shows without being sent again (Telegram: about 30 s).
const DRAFT_LIFETIME: Duration = Duration::from_secs(30);
/// A draft is sent again this long after the last one, while pi works.
const KEEP_ALIVE: Duration = Duration::from_secs(20);
/// A typing action lasts about 5 s.
const TYPING_EVERY: Duration = Duration::from_millis(4500);
/// The first interval between two drafts to one chat, and the bounds it adapts within:
/// about three updates a second at most, which stays clear of the draft budgets seen (four a
/// second in tg-fake's model) even with network jitter.
const START_INTERVAL: Duration = Duration::from_millis(350);
const MIN_INTERVAL: Duration = Duration::from_millis(300);
const MAX_INTERVAL: Duration = Duration::from_secs(2);
/// After this long without a 429 the interval shrinks a step.
const CALM: Duration = Duration::from_secs(10);
/// A turn that has run this long gets the working card (⏹ Stop where the person looks; a
/// draft cannot carry buttons). Shorter turns are answered before a card would help.
pub const WORKING_CARD_AFTER: Duration = Duration::from_secs(5);
/// A stream silent this long is given up.
const ABANDONED: Duration = Duration::from_secs(600);
/// Drafts are cut below Telegram's 4096 like answers.
const DRAFT_LIMIT: usize = 4000;

/// One turn being previewed.
struct Stream {
    chat: i64,
    thread: Option<i64>,
    /// The assistant text of the message being written.
    text: String,
    /// Thinking of the message being written.
    thinking: String,
    /// The tool running now.
    running: Option<String>,
    /// Tools that finished in this turn.
    done_tools: Vec<(String, bool)>,
    /// Something changed since the last frame sent.
    dirty: bool,
    /// The last frame sent, to skip unchanged ones.
    last_frame: Option<Value>,
    /// When the last draft was accepted.
    shown_at: Option<Instant>,
    /// When the last typing action went out.
    typed_at: Option<Instant>,
    /// Rich drafts were refused: HTML drafts from now on.
    html_only: bool,
    /// Drafts do not work for this turn (refused twice): typing only.
    no_drafts: bool,
    /// The last sign of life from pi for this turn.
    heard_at: Instant,
    /// When the turn began.
    begun: Instant,
    /// The working card's buttons, once bound.
    stop: Option<Value>,
    /// The working card.
    card: Card,
}

/// The working card of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Card {
    /// Not sent.
    None,
    /// Sent as this message (deleted when the turn ends).
    Sent(i64),
    /// Tried and refused: not again.
    Tried,
}

/// Pacing of one chat's previews.
struct Pace {
    interval: Duration,
    next_at: Instant,
    calm_since: Instant,
}

impl Pace {
    fn new(now: Instant) -> Self {
        Self {
            interval: START_INTERVAL,
            next_at: now,
            calm_since: now,
        }
    }
}

/// The preview task's state.
pub struct Previews {
    client: Client,
    settings: Arc<Watched>,
    streams: HashMap<i64, Stream>,
    pace: HashMap<i64, Pace>,
    /// Counters for the benchmark and `status`: drafts sent, refused with 429.
    pub stats: Arc<PreviewStats>,
}

/// What the preview task did.
#[derive(Debug, Default)]
pub struct PreviewStats {
    /// Drafts Telegram accepted.
    pub drafts: std::sync::atomic::AtomicU64,
    /// Drafts refused with 429.
    pub floods: std::sync::atomic::AtomicU64,
    /// Typing actions sent.
    pub typing: std::sync::atomic::AtomicU64,
}

impl Previews {
    /// A preview task sending with `client`.
    pub fn new(client: Client, settings: Arc<Watched>) -> Self {
        Self {
            client,
            settings,
            streams: HashMap::new(),
            pace: HashMap::new(),
            stats: Arc::new(PreviewStats::default()),
        }
    }

    /// Runs until `stop`.
    pub async fn run(
        mut self,
        mut rx: mpsc::Receiver<PreviewMsg>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), HubError> {
        loop {
            let due = self.next_due();
            tokio::select! {
                _ = stop.changed() => return Ok(()),
                msg = rx.recv() => match msg {
                    Some(m) => self.handle(m),
                    None => return Ok(()),
                },
                () = sleep_until(due) => {}
            }
            // Everything already waiting first: a whole burst of deltas becomes one frame.
            while let Ok(m) = rx.try_recv() {
                self.handle(m);
            }
            self.send_due().await;
        }
    }

    fn handle(&mut self, msg: PreviewMsg) {
        match msg {
            PreviewMsg::Begin { turn, chat, thread } => {
                self.streams.entry(turn).or_insert(Stream {
                    chat,
                    thread,
                    text: String::new(),
                    thinking: String::new(),
                    running: None,
                    done_tools: Vec::new(),
                    dirty: true,
                    last_frame: None,
                    shown_at: None,
                    typed_at: None,
                    html_only: false,
                    // Drafts are for private chats (Bot API: "the target private chat"); a
                    // group's chat (negative id) sees typing.
                    no_drafts: chat < 0,
                    heard_at: Instant::now(),
                    begun: Instant::now(),
                    stop: None,
                    card: Card::None,
                });
            }
            PreviewMsg::Event { turn, event } => {
                if let Some(s) = self.streams.get_mut(&turn) {
                    s.heard_at = Instant::now();
                    reduce(s, &event);
                }
            }
            PreviewMsg::StopButton { turn, markup } => {
                if let Some(s) = self.streams.get_mut(&turn) {
                    s.stop = Some(markup);
                }
            }
            PreviewMsg::End { turn, fenced } => {
                // Calls are made from this task only, so none is in flight now.
                let ended = self.streams.remove(&turn);
                let _ = fenced.send(());
                // After the fence: the answer does not wait for the card to go.
                if let Some(Stream {
                    chat,
                    card: Card::Sent(message_id),
                    ..
                }) = ended
                {
                    let client = self.client.clone();
                    tokio::spawn(async move { delete_card(&client, chat, message_id).await });
                }
            }
        }
    }

    /// When something is due next: a changed stream once its chat may send, a draft about to
    /// expire, a typing action to renew.
    fn next_due(&self) -> Option<Instant> {
        let drafts = self.settings.current().draft_previews;
        let cards = self.streams.values().filter_map(card_due);
        self.streams
            .values()
            .filter_map(|s| {
                let pace = self.pace.get(&s.chat).map(|p| p.next_at);
                if drafts && !s.no_drafts {
                    let change = s.dirty.then(|| pace.unwrap_or_else(Instant::now));
                    let renew = s.shown_at.map(|t| t + KEEP_ALIVE);
                    // While no draft shows, typing says pi works.
                    let typing = (!self.draft_visible(s))
                        .then(|| s.typed_at.map_or_else(Instant::now, |t| t + TYPING_EVERY));
                    [change, renew, typing].into_iter().flatten().min()
                } else {
                    Some(s.typed_at.map_or_else(Instant::now, |t| t + TYPING_EVERY))
                }
            })
            .chain(cards)
            .min()
    }

    fn draft_visible(&self, s: &Stream) -> bool {
        s.shown_at.is_some_and(|t| t.elapsed() < DRAFT_LIFETIME)
    }

    async fn send_due(&mut self) {
        let settings = self.settings.current();
        let now = Instant::now();
        // A turn whose end never arrived (the conductor could not reach this task in time)
        // must not be kept alive for ever.
        self.streams
            .retain(|_, s| now.duration_since(s.heard_at) < ABANDONED);
        let turns: Vec<i64> = self.streams.keys().copied().collect();
        for turn in turns {
            if self
                .streams
                .get(&turn)
                .and_then(card_due)
                .is_some_and(|at| at <= now)
            {
                self.send_card(turn).await;
            }
            let Some(s) = self.streams.get(&turn) else {
                continue;
            };
            let chat = s.chat;
            let use_drafts = settings.draft_previews && !s.no_drafts;
            if use_drafts {
                let pace_ok = self.pace.get(&chat).is_none_or(|p| p.next_at <= now);
                let renew = s.shown_at.is_some_and(|t| now >= t + KEEP_ALIVE);
                if pace_ok && (s.dirty || renew) {
                    self.send_draft(turn, settings.rendering, settings.activity)
                        .await;
                    continue;
                }
                let Some(s) = self.streams.get(&turn) else {
                    continue;
                };
                if self.draft_visible(s) {
                    continue;
                }
            }
            let Some(s) = self.streams.get(&turn) else {
                continue;
            };
            if s.typed_at.is_none_or(|t| now >= t + TYPING_EVERY) {
                self.send_typing(turn).await;
            }
        }
    }

    async fn send_draft(
        &mut self,
        turn: i64,
        rendering: Rendering,
        activity: crate::assistant::Activity,
    ) {
        let Some(s) = self.streams.get_mut(&turn) else {
            return;
        };
        let rich = rendering == Rendering::Rich && !s.html_only;
        let frame = frame(s, rich, activity);
        s.dirty = false;
        let renew = s.shown_at.is_some_and(|t| t.elapsed() >= KEEP_ALIVE);
        if frame == s.last_frame && !renew {
            return;
        }
        let Some(body) = frame.clone() else {
            return;
        };
        let (method, mut params) = if rich {
            ("sendRichMessageDraft", json!({ "rich_message": body }))
        } else {
            ("sendMessageDraft", body)
        };
        params["chat_id"] = json!(s.chat);
        params["draft_id"] = json!(turn);
        if let Some(t) = s.thread {
            params["message_thread_id"] = json!(t);
        }
        let chat = s.chat;
        let result = self.client.call(method, &params).await;
        let now = Instant::now();
        let pace = self.pace.entry(chat).or_insert_with(|| Pace::new(now));
        let Some(s) = self.streams.get_mut(&turn) else {
            return;
        };
        match result {
            Ok(_) => {
                self.stats
                    .drafts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                s.last_frame = frame;
                s.shown_at = Some(now);
                if now.duration_since(pace.calm_since) >= CALM {
                    pace.interval = pace
                        .interval
                        .saturating_sub(Duration::from_millis(50))
                        .max(MIN_INTERVAL);
                    pace.calm_since = now;
                }
                pace.next_at = now + pace.interval;
            }
            Err(CallError::Flood { retry_after, .. }) => {
                self.stats
                    .floods
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Slower from now on, and nothing until Telegram's wait is over.
                pace.interval = (pace.interval * 2).min(MAX_INTERVAL);
                pace.calm_since = now;
                pace.next_at = now + retry_after.max(pace.interval);
                s.dirty = true;
                tracing::debug!(
                    chat,
                    retry_after_s = retry_after.as_secs(),
                    "a preview met a flood wait; slowing this chat's previews"
                );
            }
            Err(CallError::Api(e)) => {
                // Refused as written: rich drafts become HTML ones; HTML refused too means
                // drafts do not work here, and typing says pi works.
                tracing::debug!(error = %e, rich, "a draft was refused");
                if rich {
                    s.html_only = true;
                    s.dirty = true;
                } else {
                    s.no_drafts = true;
                }
                pace.next_at = now + pace.interval;
            }
            Err(e) => {
                tracing::debug!(error = %e, "a draft did not go out");
                s.dirty = true;
                pace.next_at = now + pace.interval;
            }
        }
    }

    /// The working card: a silent message with ⏹ Stop, under the person's message.
    async fn send_card(&mut self, turn: i64) {
        let Some(s) = self.streams.get_mut(&turn) else {
            return;
        };
        let Some(markup) = s.stop.clone() else {
            return;
        };
        s.card = Card::Tried;
        let mut params = json!({
            "chat_id": s.chat,
            "text": crate::outgoing::texts::working(),
            "reply_markup": markup,
            "disable_notification": true,
        });
        if let Some(t) = s.thread {
            params["message_thread_id"] = json!(t);
        }
        match self.client.call("sendMessage", &params).await {
            Ok(sent) => {
                if let (Some(s), Some(id)) = (
                    self.streams.get_mut(&turn),
                    sent.get("message_id").and_then(Value::as_i64),
                ) {
                    s.card = Card::Sent(id);
                }
            }
            Err(e) => tracing::debug!(error = %e, "a working card did not go out"),
        }
    }

    async fn send_typing(&mut self, turn: i64) {
        let Some(s) = self.streams.get_mut(&turn) else {
            return;
        };
        s.typed_at = Some(Instant::now());
        let mut params = json!({ "chat_id": s.chat, "action": "typing" });
        if let Some(t) = s.thread {
            params["message_thread_id"] = json!(t);
        }
        if self.client.call("sendChatAction", &params).await.is_ok() {
            self.stats
                .typing
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// How often a working card's delete is tried: a card left behind shows ⏹ Stop under an answered
/// message, so a failure that may pass is tried again (a delete is repeatable).
const CARD_DELETE_TRIES: u32 = 4;

/// Deletes a working card: after a failure that may pass (a 5xx, a broken or hung connection)
/// again after a back-off, after a 429 once Telegram's wait is over (60 s at most); a refusal
/// (already gone, too old to delete) ends it.
async fn delete_card(client: &Client, chat: i64, message_id: i64) {
    let params = json!({ "chat_id": chat, "message_id": message_id });
    let mut backoff = Duration::from_secs(1);
    for _ in 0..CARD_DELETE_TRIES {
        let wait = match client.call("deleteMessage", &params).await {
            Ok(_) => return,
            Err(CallError::Api(e)) => {
                tracing::debug!(error = %e, "a working card was not deleted");
                return;
            }
            Err(CallError::Flood { retry_after, .. }) => retry_after.min(Duration::from_secs(60)),
            Err(e) => {
                tracing::debug!(error = %e, "a working card's delete failed; trying again");
                backoff
            }
        };
        tokio::time::sleep(wait).await;
        backoff *= 2;
    }
    tracing::debug!("a working card was not deleted");
}

/// When the turn's working card is due, if it is to be sent.
fn card_due(s: &Stream) -> Option<Instant> {
    (s.stop.is_some() && s.card == Card::None).then_some(s.begun + WORKING_CARD_AFTER)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Folds one of pi's events into the stream.
fn reduce(s: &mut Stream, event: &PiEvent) {
    let e = &event.0;
    match event.kind() {
        EventKind::MessageStart if is_assistant(e.get("message")) => {
            // A new assistant message: the previous one was delivered as commentary (or is
            // the final answer to come); the preview shows the new one.
            s.text.clear();
            s.thinking.clear();
            s.dirty = true;
        }
        EventKind::MessageUpdate => {
            let Some(ame) = e.get("assistantMessageEvent") else {
                return;
            };
            let delta = ame.get("delta").and_then(Value::as_str).unwrap_or_default();
            match ame.get("type").and_then(Value::as_str).unwrap_or_default() {
                "text_delta" => {
                    s.text.push_str(delta);
                    s.dirty = true;
                }
                "text_end" => {
                    // The block's full text: corrects whatever deltas a full queue dropped.
                    if let Some(c) = ame.get("content").and_then(Value::as_str)
                        && !s.text.ends_with(c)
                    {
                        s.text = c.to_owned();
                        s.dirty = true;
                    }
                }
                "thinking_delta" => {
                    s.thinking.push_str(delta);
                    s.dirty = true;
                }
                _ => {}
            }
        }
        EventKind::ToolExecution(ToolPhase::Start) => {
            let name = e.get("toolName").and_then(Value::as_str).unwrap_or("tool");
            let args = short_args(name, e.get("args").unwrap_or(&Value::Null));
            s.running = Some(format!("{name} {}", activity::clip(&args, 120)));
            s.dirty = true;
        }
        EventKind::ToolExecution(ToolPhase::End) => {
            let name = e.get("toolName").and_then(Value::as_str).unwrap_or("tool");
            let ok = !e.get("isError").and_then(Value::as_bool).unwrap_or(false);
            s.done_tools.push((name.to_owned(), ok));
            s.running = None;
            s.dirty = true;
        }
        _ => {}
    }
}

fn is_assistant(m: Option<&Value>) -> bool {
    m.and_then(|m| m.get("role")).and_then(Value::as_str) == Some("assistant")
}

/// The frame for a stream: activity lines (as far as the settings show them) and the text so
/// far, rendered as the final answer will be; its latest part when it is long. `None` before
/// there is anything to show. The first frame of a turn is the "Thinking…" placeholder.
fn frame(s: &Stream, rich: bool, activity: crate::assistant::Activity) -> Option<Value> {
    let mut lines = Vec::new();
    if activity.tools() {
        if !s.done_tools.is_empty() {
            let done: Vec<String> = s
                .done_tools
                .iter()
                .rev()
                .take(6)
                .rev()
                .map(|(n, ok)| format!("{n} {}", if *ok { "✓" } else { "✗" }))
                .collect();
            lines.push(escape_markdown(&format!("🔧 {}", done.join(" · "))));
        }
        if let Some(r) = &s.running {
            lines.push(escape_markdown(&format!("⏳ {r}")));
        }
    }
    if activity.thinking() && !s.thinking.trim().is_empty() && s.text.trim().is_empty() {
        let t = activity::redact(&activity::tail(s.thinking.trim(), 280));
        lines.push(format!("> 💭 {}", escape_markdown(&t.replace('\n', " "))));
    }
    // pi's comments never show, not even the one being written.
    let visible = crate::outgoing::markup::visible_so_far(&s.text);
    let text = markdown::preview::closed_prefix(&visible);
    let nothing = lines.is_empty() && text.trim().is_empty();
    if nothing {
        // Thinking… until there is something: Telegram's own placeholder.
        return Some(if rich {
            json!({ "blocks": [{ "type": "thinking", "text": "Thinking…" }] })
        } else {
            json!({ "text": "" })
        });
    }
    let mut source = lines.join("\n\n");
    if !text.trim().is_empty() {
        if !source.is_empty() {
            source.push_str("\n\n");
        }
        source.push_str(text);
    }
    if rich {
        markdown::preview::rich_frame(&source, &RichBudget::default())
            .map(|md| json!({ "markdown": md, "skip_entity_detection": true }))
    } else {
        markdown::preview::html_frame(&source, DRAFT_LIMIT)
            .map(|p| json!({ "text": p.html, "parse_mode": "HTML" }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assistant::Activity;

    fn stream() -> Stream {
        Stream {
            chat: 1,
            thread: None,
            text: String::new(),
            thinking: String::new(),
            running: None,
            done_tools: Vec::new(),
            dirty: true,
            last_frame: None,
            shown_at: None,
            typed_at: None,
            html_only: false,
            no_drafts: false,
            heard_at: Instant::now(),
            begun: Instant::now(),
            stop: None,
            card: Card::None,
        }
    }

    fn ev(v: Value) -> PiEvent {
        PiEvent(v)
    }

    #[test]
    fn frames_grow_with_the_answer_and_show_activity() {
        let mut s = stream();
        assert_eq!(
            frame(&s, false, Activity::Verbose),
            Some(json!({ "text": "" })),
            "the Thinking… placeholder first"
        );
        reduce(
            &mut s,
            &ev(
                json!({ "type": "tool_execution_start", "toolName": "bash", "args": { "command": "ls" } }),
            ),
        );
        let f = frame(&s, false, Activity::Verbose).unwrap_or_default();
        assert!(
            f["text"].as_str().is_some_and(|t| t.contains("⏳ bash ls")),
            "{f}"
        );
        assert_eq!(
            frame(&s, false, Activity::Quiet),
            Some(json!({ "text": "" }))
        );
        reduce(
            &mut s,
            &ev(json!({ "type": "tool_execution_end", "toolName": "bash", "isError": false })),
        );
        for d in ["Hello **wor", "ld** and `co"] {
            reduce(
                &mut s,
                &ev(
                    json!({ "type": "message_update", "assistantMessageEvent": { "type": "text_delta", "delta": d } }),
                ),
            );
        }
        let f = frame(&s, false, Activity::Verbose).unwrap_or_default();
        let t = f["text"].as_str().unwrap_or_default();
        assert!(
            t.contains("<b>world</b>") && !t.contains('`') && t.contains("bash ✓"),
            "{t}"
        );
        let r = frame(&s, true, Activity::Quiet).unwrap_or_default();
        assert_eq!(r["markdown"], json!("Hello <b>world</b> and"));
        // A new assistant message starts a new preview text.
        reduce(
            &mut s,
            &ev(json!({ "type": "message_start", "message": { "role": "assistant" } })),
        );
        assert!(s.text.is_empty());
    }

    #[test]
    fn comments_never_show_in_a_preview() {
        let mut s = stream();
        let mut shown = Vec::new();
        for d in [
            "Done <!-- telegram_button [{Yes}",
            "{No}] --> now",
            "\n\n<",
            "!-",
            "- a note still being writ",
            "ten",
        ] {
            reduce(
                &mut s,
                &ev(
                    json!({ "type": "message_update", "assistantMessageEvent": { "type": "text_delta", "delta": d } }),
                ),
            );
            let f = frame(&s, false, Activity::Quiet).unwrap_or_default();
            shown.push(f["text"].as_str().unwrap_or_default().to_owned());
        }
        assert_eq!(shown[0], "Done");
        for frame in &shown {
            assert!(
                !frame.contains("&lt;!") && !frame.contains("telegram_button"),
                "{frame}"
            );
            assert!(!frame.ends_with("&lt;"), "{frame}");
        }
        assert_eq!(shown[5], "Done now");
        // In code, `<!--` is what pi shows.
        let mut s = stream();
        reduce(
            &mut s,
            &ev(
                json!({ "type": "message_update", "assistantMessageEvent": { "type": "text_delta", "delta": "Use `<!-- x -->` to hide." } }),
            ),
        );
        let f = frame(&s, false, Activity::Quiet).unwrap_or_default();
        assert!(
            f["text"]
                .as_str()
                .is_some_and(|t| t.contains("&lt;!-- x --&gt;")),
            "{f}"
        );
    }
}
