//! The fault matrix (issue #13): every fault tg-fake injects × every Bot API call the hub makes.
//!
//! `MATRIX` is the one table of expected outcomes: a row per call (method and who makes it), a
//! cell per fault kind, each with an [`Expected`] outcome, a sentence, and the test below that
//! checks it. Each test drives the real hub (in-process, `hub::serve`) against tg-fake with the
//! fault armed once on that method, asserts the outcome from tg-fake's request log and
//! transcript and the hub's status, clears the fault and goes on to the next cell on the same
//! hub (start-up calls get a hub per cell: the fault must be armed before the hub starts).
//!
//! `docs/fault-matrix.md` is written from the same table: `FAULT_MATRIX_WRITE=1` (re)writes it,
//! otherwise `the_document_is_the_table` fails when the committed file differs, so the document
//! never says something the tests do not check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{OWNER, TestHub};
use serde_json::{Value, json};
use tg_fake::control::{MediaItem, Press, SendMedia, SendText, ThreadFilter, TranscriptEntry};
use tg_fake::log::RequestEntry;
use tg_fake::world::{MediaKind, TopicState};
use tg_fake::{FakeConfig, FaultKind, FaultSpec};
use tokio::io::AsyncWriteExt;

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

/// The fault kinds, in the table's column order.
const KINDS: [FaultKind; 8] = [
    FaultKind::Http500,
    FaultKind::Delay,
    FaultKind::DropBefore,
    FaultKind::CommitThenDrop,
    FaultKind::Flood,
    FaultKind::ThreadNotFound,
    FaultKind::BadRequest,
    FaultKind::Hang,
];

/// `retry_after` of an injected 429: long enough that a call made before it ends (a plain
/// one-second back-off) is told apart from one that waited.
const FLOOD_S: u64 = 2;
/// The same for `createForumTopic`: longer than the topics task's other wake-ups in the first
/// seconds after a pi connects, so that only the retry's own timer can make the topic. With
/// 2 s the cell passed in half the runs with that timer removed (another wake came after the
/// wait had ended); with 5 s it failed in three of three.
const TOPIC_FLOOD_S: u64 = 5;
/// The `delay` fault's wait.
const DELAY_MS: u64 = 500;
/// The hub's client timeout here (30 s in production, `PI_TELEGRAM_CLIENT_TIMEOUT_SECS`): a
/// `hang` is given up after it, so a hung call costs a cell this long, not half a minute.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);

/// The test hub's tuning with [`CLIENT_TIMEOUT`].
fn tuned() -> hub::serve::Tuning {
    hub::serve::Tuning {
        client_timeout: CLIENT_TIMEOUT,
        ..common::tuning()
    }
}

/// A hub on a fresh fake with `config` and `extra` profile settings, tuned for the matrix.
async fn hub_with(config: FakeConfig, extra: Value) -> TestHub {
    let mut hub = TestHub::prepare(config, extra).await;
    hub.launch_tuned(tuned()).await;
    hub
}

async fn plain_hub() -> TestHub {
    hub_with(FakeConfig::default(), json!({})).await
}

/// What the hub does about one fault on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    /// Called again after a back-off; the effect happens once.
    Retried,
    /// Answered late; nothing is repeated; the effect happens once.
    Late,
    /// No call before Telegram's `retry_after` ends; then the effect happens once.
    FloodWaited,
    /// The outcome is unknown and nothing had happened: sent again with the repeat mark, one
    /// copy arrives.
    ResentMarked,
    /// The outcome is unknown and it had happened: a second copy, with the repeat mark, counted
    /// (`resent`): the one duplicate the hub allows, for what must arrive.
    CountedDuplicate,
    /// The outcome is unknown: not sent again; the row is `ambiguous`, with an incident.
    Ambiguous,
    /// Refused as written: the same words go the next way (rich -> HTML -> plain text).
    FellBack,
    /// Refused, and there is nothing else to try: the row is `failed`, with an incident.
    Dropped,
    /// The topic is taken for deleted: a new topic (same letter), the message delivered there
    /// once, nothing sent to the old one again.
    TopicRecovered,
    /// A best-effort preview call: that frame is lost (or comes at the next pace); the final
    /// answer arrives once and nothing preview-like comes after it.
    PreviewSkipped,
    /// Start-up stops with the error: the hub does not run without knowing its bot.
    StartStops,
    /// The topic creation's outcome is unknown: the intent is `ambiguous`, holds its slot, the
    /// person is asked; no second creation on its own.
    AskedAboutTopic,
    /// The file is not saved and the person is told; the message still reaches pi.
    FileFailed,
    /// Start-up goes on; the poll meets the webhook's 409 and removes it then: every update is
    /// polled.
    WebhookLater,
    /// The cleanup is done: Telegram says the topic is not there.
    CleanupDone,
    /// A best-effort outbox call (a pin): not tried again after a retryable failure; the row
    /// is `failed`; what it decorates goes on as ever.
    TriedOnce,
    /// A best-effort call straight to the client (a reaction): that state is not shown (or
    /// late); the next one is set, so the message ends showing its final fate.
    Superseded,
    /// The working card stays in the chat after the answer: the hub cannot remove it.
    CardStays,
    /// Not a fault Telegram gives for this call (see the sentence): not tested.
    NotApplicable,
}

impl Expected {
    fn name(self) -> &'static str {
        match self {
            Self::Retried => "retried",
            Self::Late => "late",
            Self::FloodWaited => "flood wait honoured",
            Self::ResentMarked => "resent, marked",
            Self::CountedDuplicate => "counted duplicate",
            Self::Ambiguous => "ambiguous, not resent",
            Self::FellBack => "fell back",
            Self::Dropped => "dropped",
            Self::TopicRecovered => "topic recovered",
            Self::PreviewSkipped => "frame skipped",
            Self::StartStops => "start stops",
            Self::AskedAboutTopic => "person asked",
            Self::FileFailed => "file failed, told",
            Self::WebhookLater => "removed later",
            Self::CleanupDone => "cleanup done",
            Self::TriedOnce => "tried once",
            Self::Superseded => "superseded",
            Self::CardStays => "card stays",
            Self::NotApplicable => "n/a",
        }
    }
}

/// The tests that check cells (each runs every cell that names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Test {
    StartUp,
    Polling,
    AnswersHtml,
    AnswersRich,
    OwnTexts,
    PromptTexts,
    Topics,
    PreviewsHtml,
    PreviewsRich,
    Typing,
    Taps,
    PromptButtons,
    TopicCreation,
    TopicCleanup,
    FilesIn,
    FilesOut,
    Voice,
    Pins,
    Reactions,
    CardSent,
    CardDeleted,
    None,
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Self::StartUp => "start_up",
            Self::Polling => "polling",
            Self::AnswersHtml => "answers_html",
            Self::AnswersRich => "answers_rich",
            Self::OwnTexts => "own_texts",
            Self::PromptTexts => "prompt_texts",
            Self::Topics => "topics",
            Self::PreviewsHtml => "previews_html",
            Self::PreviewsRich => "previews_rich",
            Self::Typing => "typing",
            Self::Taps => "taps",
            Self::PromptButtons => "prompt_buttons",
            Self::TopicCreation => "topic_creation",
            Self::TopicCleanup => "topic_cleanup",
            Self::FilesIn => "files_in",
            Self::FilesOut => "files_out",
            Self::Voice => "voice",
            Self::Pins => "pins",
            Self::Reactions => "reactions",
            Self::CardSent => "card_sent",
            Self::CardDeleted => "card_deleted",
            Self::None => "",
        }
    }
}

/// One cell: the outcome, the test that checks it, and why.
struct Cell {
    expected: Expected,
    test: Test,
    why: &'static str,
}

const fn c(expected: Expected, test: Test, why: &'static str) -> Cell {
    Cell {
        expected,
        test,
        why,
    }
}

const fn na(why: &'static str) -> Cell {
    c(Expected::NotApplicable, Test::None, why)
}

/// One call the hub makes: its method, where it is made, a cell per kind (in `KINDS` order).
struct Row {
    method: &'static str,
    site: &'static str,
    cells: [Cell; 8],
}

use Expected as E;

const NO_TOPIC: &str = "Telegram answers `message thread not found` only to a call that names a topic, and this one names none";

const MATRIX: &[Row] = &[
    Row {
        method: "getUpdates",
        site: "poller (long poll)",
        cells: [
            c(
                E::Retried,
                Test::Polling,
                "the poll is repeated after a back-off from the confirmed offset; every update is journaled and answered once",
            ),
            c(
                E::Late,
                Test::Polling,
                "the poll returns late; updates are journaled once",
            ),
            c(
                E::Retried,
                Test::Polling,
                "the dropped poll confirmed nothing: polled again from the same offset, each update once",
            ),
            c(
                E::Retried,
                Test::Polling,
                "the answer with the updates is lost: polled again from the same offset, so the same updates come again and are journaled once",
            ),
            c(
                E::FloodWaited,
                Test::Polling,
                "the poller waits `retry_after` before the next poll; nothing is lost",
            ),
            na(NO_TOPIC),
            c(
                E::Retried,
                Test::Polling,
                "a refused poll is retried after a back-off; no update is lost",
            ),
            c(
                E::Retried,
                Test::Polling,
                "the poll hangs: given up at its deadline (the long-poll timeout + 3 s), polled again at once from the same offset; each update once",
            ),
        ],
    },
    Row {
        method: "getMe",
        site: "start-up (who am I, Threaded Mode)",
        cells: [
            c(
                E::Retried,
                Test::StartUp,
                "start-up waits and asks again (repeatable read)",
            ),
            c(E::Late, Test::StartUp, "start-up waits for the answer"),
            c(E::Retried, Test::StartUp, "start-up asks again"),
            c(
                E::Retried,
                Test::StartUp,
                "a read: asked again, the same answer",
            ),
            c(
                E::FloodWaited,
                Test::StartUp,
                "start-up asks again only after `retry_after` (was: after a 1 s back-off, refused again)",
            ),
            na(NO_TOPIC),
            c(
                E::StartStops,
                Test::StartUp,
                "Telegram refused the bot's own description: the hub stops with the error instead of guessing",
            ),
            c(
                E::Retried,
                Test::StartUp,
                "given up at the client's timeout; start-up asks again",
            ),
        ],
    },
    Row {
        method: "getWebhookInfo",
        site: "start-up (a webhook blocks polling)",
        cells: [
            c(
                E::Retried,
                Test::StartUp,
                "repeatable read: asked again after 1 s; the webhook is removed at start-up and recorded",
            ),
            c(
                E::Late,
                Test::StartUp,
                "start-up waits for the answer; the webhook is removed and recorded",
            ),
            c(
                E::Retried,
                Test::StartUp,
                "asked again; removed and recorded",
            ),
            c(
                E::Retried,
                Test::StartUp,
                "asked again; removed and recorded",
            ),
            c(
                E::FloodWaited,
                Test::StartUp,
                "asked again after `retry_after` (up to 30 s; a longer wait is left to the poller's 409)",
            ),
            na(NO_TOPIC),
            c(
                E::WebhookLater,
                Test::StartUp,
                "refused: start-up goes on; the first poll's 409 names the webhook and the poller removes it",
            ),
            c(
                E::Retried,
                Test::StartUp,
                "given up at the client's timeout, asked again; removed and recorded",
            ),
        ],
    },
    Row {
        method: "deleteWebhook",
        site: "start-up and the poller's 409",
        cells: [
            c(
                E::Retried,
                Test::StartUp,
                "repeatable: removed on the next try and recorded",
            ),
            c(E::Late, Test::StartUp, "removed late, at start-up"),
            c(E::Retried, Test::StartUp, "removed on the next try"),
            c(
                E::Retried,
                Test::StartUp,
                "removed, the answer lost: the repeat succeeds too and the removal is recorded (was: polling worked but `status` never said a webhook was removed)",
            ),
            c(E::FloodWaited, Test::StartUp, "removed after `retry_after`"),
            na(NO_TOPIC),
            c(
                E::WebhookLater,
                Test::StartUp,
                "refused: start-up goes on; the poller's 409 tries again and removes it",
            ),
            c(
                E::Retried,
                Test::StartUp,
                "given up at the client's timeout; removed on the next try and recorded",
            ),
        ],
    },
    Row {
        method: "setMyCommands",
        site: "outbox (the command menu, republished at start-up)",
        cells: [
            c(
                E::Retried,
                Test::StartUp,
                "repeatable: set again after a back-off, the same list",
            ),
            c(E::Late, Test::StartUp, "set once, late"),
            c(E::Retried, Test::StartUp, "set again after a back-off"),
            c(
                E::Retried,
                Test::StartUp,
                "set, the answer lost: set again, the same list (converges)",
            ),
            c(
                E::FloodWaited,
                Test::StartUp,
                "set once the bot-wide wait is over",
            ),
            na(NO_TOPIC),
            c(
                E::Dropped,
                Test::StartUp,
                "refused: recorded as an incident, the menu keeps its old list until the next change",
            ),
            c(
                E::Retried,
                Test::StartUp,
                "given up at the client's timeout (repeatable): set again after a back-off",
            ),
        ],
    },
    Row {
        method: "sendMessage",
        site: "outbox: pi's answer (HTML rendering)",
        cells: [
            c(
                E::ResentMarked,
                Test::AnswersHtml,
                "a 5xx may have been processed: the answer must arrive, so it is sent again, marked",
            ),
            c(E::Late, Test::AnswersHtml, "arrives once, late"),
            c(
                E::ResentMarked,
                Test::AnswersHtml,
                "the connection broke after the request left: sent again, marked",
            ),
            c(
                E::CountedDuplicate,
                Test::AnswersHtml,
                "it arrived but the hub cannot know: a second, marked copy, counted in `resent`",
            ),
            c(
                E::FloodWaited,
                Test::AnswersHtml,
                "sent once the chat's wait is over (recorded, kept across restarts)",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: the binding is lost, the row waits, a new topic is made and the answer arrives there",
            ),
            c(
                E::FellBack,
                Test::AnswersHtml,
                "HTML refused: the same words as plain text",
            ),
            c(
                E::ResentMarked,
                Test::AnswersHtml,
                "given up at the client's timeout, the outcome unknown: sent again, marked",
            ),
        ],
    },
    Row {
        method: "sendMessage",
        site: "outbox: the hub's own texts (replies, menus, notices)",
        cells: [
            c(
                E::Ambiguous,
                Test::OwnTexts,
                "not resent after an unknown outcome (a second menu or notice is worse than a missing one); `status` counts it",
            ),
            c(E::Late, Test::OwnTexts, "arrives once, late"),
            c(
                E::Ambiguous,
                Test::OwnTexts,
                "not resent after an unknown outcome",
            ),
            c(E::Ambiguous, Test::OwnTexts, "it arrived; not resent"),
            c(
                E::FloodWaited,
                Test::OwnTexts,
                "sent once the chat's wait is over",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: held with the pi's other output and delivered in its new topic",
            ),
            c(
                E::Dropped,
                Test::OwnTexts,
                "plain text refused: nothing else to try, an incident",
            ),
            c(
                E::Ambiguous,
                Test::OwnTexts,
                "given up at the client's timeout, the outcome unknown: not resent",
            ),
        ],
    },
    Row {
        method: "sendMessage",
        site: "outbox: the hub's texts that are all a person learns of their message (an interrupted turn's notice, a skipped prompt, a message no pi could take, the chooser a waiting message needs)",
        cells: [
            c(
                E::ResentMarked,
                Test::PromptTexts,
                "a 5xx may have been processed: without it the person never learns what became of the message, so it is sent again, marked, like an answer",
            ),
            c(E::Late, Test::PromptTexts, "arrives once, late"),
            c(
                E::ResentMarked,
                Test::PromptTexts,
                "the connection broke after the request left: sent again, marked",
            ),
            c(
                E::CountedDuplicate,
                Test::PromptTexts,
                "it arrived but the hub cannot know: a second, marked copy, counted in `resent`",
            ),
            c(
                E::FloodWaited,
                Test::PromptTexts,
                "sent once the chat's wait is over",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: held with the pi's other output and delivered in its new topic",
            ),
            c(
                E::Dropped,
                Test::PromptTexts,
                "plain text refused: nothing else to try, an incident",
            ),
            c(
                E::ResentMarked,
                Test::PromptTexts,
                "given up at the client's timeout, the outcome unknown: sent again, marked",
            ),
        ],
    },
    Row {
        method: "sendRichMessage",
        site: "outbox: pi's answer (rich rendering, the default)",
        cells: [
            c(
                E::ResentMarked,
                Test::AnswersRich,
                "sent again with the repeat mark (a Markdown line)",
            ),
            c(E::Late, Test::AnswersRich, "arrives once, late"),
            c(E::ResentMarked, Test::AnswersRich, "sent again, marked"),
            c(
                E::CountedDuplicate,
                Test::AnswersRich,
                "a second, marked copy, counted in `resent`",
            ),
            c(
                E::FloodWaited,
                Test::AnswersRich,
                "sent once the chat's wait is over",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: a new topic, the answer delivered there once",
            ),
            c(
                E::FellBack,
                Test::AnswersRich,
                "rich refused: the same words as HTML (`sendMessage`)",
            ),
            c(
                E::ResentMarked,
                Test::AnswersRich,
                "given up at the client's timeout, the outcome unknown: sent again, marked",
            ),
        ],
    },
    Row {
        method: "sendVoice",
        site: "outbox: a spoken answer (`voice.replyMode`, a text-to-speech template)",
        cells: [
            c(
                E::ResentMarked,
                Test::Voice,
                "a spoken answer must arrive too: sent again, the repeat mark in its caption",
            ),
            c(E::Late, Test::Voice, "arrives once, late"),
            c(E::ResentMarked, Test::Voice, "sent again, marked"),
            c(
                E::CountedDuplicate,
                Test::Voice,
                "a second voice message, the repeat mark in its caption, counted",
            ),
            c(
                E::FloodWaited,
                Test::Voice,
                "sent once the chat's wait is over",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: the spoken answer waits for the new topic and arrives there once",
            ),
            c(
                E::FellBack,
                Test::Voice,
                "the voice refused: the answer is written instead (rich)",
            ),
            c(
                E::ResentMarked,
                Test::Voice,
                "given up at the client's timeout, the outcome unknown: sent again, marked",
            ),
        ],
    },
    Row {
        method: "sendMessageDraft",
        site: "preview task (HTML rendering)",
        cells: [
            c(
                E::PreviewSkipped,
                Test::PreviewsHtml,
                "the frame is sent again at the next pace",
            ),
            c(
                E::Late,
                Test::PreviewsHtml,
                "the frame is late; the answer waits for the call in flight (the fence), then arrives once",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsHtml,
                "the frame is sent again at the next pace",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsHtml,
                "repeatable: the frame may be sent again, the same draft id",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsHtml,
                "that chat's previews slow down; the answer waits out the chat's wait",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsHtml,
                "a refused draft: drafts stop for the turn, typing instead; the answer goes its own way",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsHtml,
                "HTML drafts refused: drafts stop for the turn, typing instead",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsHtml,
                "the call hangs: the fence waits for it 2 s at most, then the answer goes out once; the call is given up at the client's timeout and nothing preview-like follows",
            ),
        ],
    },
    Row {
        method: "sendRichMessageDraft",
        site: "preview task (rich rendering)",
        cells: [
            c(
                E::PreviewSkipped,
                Test::PreviewsRich,
                "the frame is sent again at the next pace",
            ),
            c(
                E::Late,
                Test::PreviewsRich,
                "the frame is late; the answer waits for the call in flight, then arrives once",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsRich,
                "the frame is sent again at the next pace",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsRich,
                "repeatable: the frame may be sent again",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsRich,
                "that chat's previews slow down; the answer waits out the chat's wait",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsRich,
                "refused: HTML drafts from then on",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsRich,
                "rich drafts refused: HTML drafts from then on",
            ),
            c(
                E::PreviewSkipped,
                Test::PreviewsRich,
                "the call hangs: the fence waits for it 2 s at most, then the answer goes out once; the call is given up at the client's timeout and nothing preview-like follows",
            ),
        ],
    },
    Row {
        method: "sendChatAction",
        site: "preview task (typing, drafts off)",
        cells: [
            c(
                E::PreviewSkipped,
                Test::Typing,
                "no typing indicator this time; renewed later",
            ),
            c(
                E::Late,
                Test::Typing,
                "the indicator shows late; the answer waits for the call in flight",
            ),
            c(
                E::PreviewSkipped,
                Test::Typing,
                "no typing indicator this time",
            ),
            c(E::PreviewSkipped, Test::Typing, "the indicator shows"),
            c(
                E::PreviewSkipped,
                Test::Typing,
                "no indicator; the answer waits out the chat's wait",
            ),
            c(
                E::PreviewSkipped,
                Test::Typing,
                "no indicator; the answer goes its own way",
            ),
            c(
                E::PreviewSkipped,
                Test::Typing,
                "no indicator; the answer goes its own way",
            ),
            c(
                E::PreviewSkipped,
                Test::Typing,
                "the call hangs: the fence waits for it 2 s at most, then the answer goes out once; the call is given up at the client's timeout and nothing preview-like follows",
            ),
        ],
    },
    Row {
        method: "editMessageText",
        site: "outbox: a tapped menu shows its section",
        cells: [
            c(
                E::Retried,
                Test::Taps,
                "repeatable: edited again, the same text",
            ),
            c(E::Late, Test::Taps, "edited once, late"),
            c(E::Retried, Test::Taps, "edited again"),
            c(
                E::Retried,
                Test::Taps,
                "edited, the answer lost: the repeat is `message is not modified`, taken as done",
            ),
            c(
                E::FloodWaited,
                Test::Taps,
                "edited once the chat's wait is over",
            ),
            na(NO_TOPIC),
            c(
                E::Dropped,
                Test::Taps,
                "refused: the message keeps its old text, an incident",
            ),
            c(
                E::Retried,
                Test::Taps,
                "given up at the client's timeout (repeatable): edited again",
            ),
        ],
    },
    Row {
        method: "answerCallbackQuery",
        site: "outbox (chat 0): every tap is answered",
        cells: [
            c(E::Retried, Test::Taps, "repeatable: answered again"),
            c(E::Late, Test::Taps, "answered once, late"),
            c(E::Retried, Test::Taps, "answered again"),
            c(
                E::Retried,
                Test::Taps,
                "answered, the answer lost: the repeat is refused as already answered (recorded); the toast showed once",
            ),
            c(
                E::FloodWaited,
                Test::Taps,
                "answered once the bot-wide wait is over",
            ),
            na(NO_TOPIC),
            c(
                E::Dropped,
                Test::Taps,
                "refused: the button stops spinning on its own; an incident",
            ),
            c(
                E::Retried,
                Test::Taps,
                "given up at the client's timeout (repeatable): answered again; the toast shows once",
            ),
        ],
    },
    Row {
        method: "editMessageReplyMarkup",
        site: "outbox: a tapped button of pi's answer shows it was chosen",
        cells: [
            c(
                E::Retried,
                Test::PromptButtons,
                "repeatable: restyled again; the tap's prompt reaches pi once",
            ),
            c(E::Late, Test::PromptButtons, "restyled once, late"),
            c(E::Retried, Test::PromptButtons, "restyled again"),
            c(
                E::Retried,
                Test::PromptButtons,
                "restyled, the answer lost: the repeat is `message is not modified`, taken as done",
            ),
            c(
                E::FloodWaited,
                Test::PromptButtons,
                "restyled once the chat's wait is over",
            ),
            na(NO_TOPIC),
            c(
                E::Dropped,
                Test::PromptButtons,
                "refused: the buttons keep their look (an incident); the prompt still reaches pi once",
            ),
            c(
                E::Retried,
                Test::PromptButtons,
                "given up at the client's timeout (repeatable): restyled again; the prompt reaches pi once",
            ),
        ],
    },
    Row {
        method: "createForumTopic",
        site: "topics task: a topic for each live pi (Threaded Mode)",
        cells: [
            c(
                E::AskedAboutTopic,
                Test::TopicCreation,
                "a 5xx may have made the topic: never created again on its own; the person decides",
            ),
            c(
                E::Late,
                Test::TopicCreation,
                "created once, late; the greeting arrives in it",
            ),
            c(
                E::AskedAboutTopic,
                Test::TopicCreation,
                "the person decides",
            ),
            c(
                E::AskedAboutTopic,
                Test::TopicCreation,
                "the topic exists, the hub cannot know: the person decides",
            ),
            c(
                E::FloodWaited,
                Test::TopicCreation,
                "nothing was made: created once the wait is over, the retry due on its own (the capability probe is slowed to 10 min here, as in production)",
            ),
            na(NO_TOPIC),
            c(
                E::Dropped,
                Test::TopicCreation,
                "refused: the pi works in the main chat and the person is told; asked again when it reconnects",
            ),
            c(
                E::AskedAboutTopic,
                Test::TopicCreation,
                "given up at the client's timeout, the topic may exist: the person decides",
            ),
        ],
    },
    Row {
        method: "deleteForumTopic",
        site: "reconciler: the topic of a pi that disconnected",
        cells: [
            c(
                E::Retried,
                Test::TopicCleanup,
                "repeatable: the cleanup is retried with back-off",
            ),
            c(E::Late, Test::TopicCleanup, "deleted once, late"),
            c(E::Retried, Test::TopicCleanup, "the cleanup is retried"),
            c(
                E::CleanupDone,
                Test::TopicCleanup,
                "deleted, the answer lost: the repeat finds no topic, the cleanup is recorded done",
            ),
            c(
                E::FloodWaited,
                Test::TopicCleanup,
                "retried when the wait is over",
            ),
            c(
                E::CleanupDone,
                Test::TopicCleanup,
                "Telegram says the topic is gone: recorded done, not retried",
            ),
            c(
                E::Retried,
                Test::TopicCleanup,
                "refused: retried later with back-off (a minute, doubling), never in a loop",
            ),
            c(
                E::Retried,
                Test::TopicCleanup,
                "given up at the client's timeout (repeatable): the cleanup is retried with back-off",
            ),
        ],
    },
    Row {
        method: "getFile",
        site: "inbound: a file the person sent",
        cells: [
            c(
                E::Retried,
                Test::FilesIn,
                "repeatable read: asked again after a back-off; the file is saved once and pi prompted once",
            ),
            c(E::Late, Test::FilesIn, "saved once, late"),
            c(E::Retried, Test::FilesIn, "asked again"),
            c(E::Retried, Test::FilesIn, "asked again"),
            c(
                E::FloodWaited,
                Test::FilesIn,
                "asked again once the wait is over (was: after a 1 s back-off)",
            ),
            na(NO_TOPIC),
            c(
                E::FileFailed,
                Test::FilesIn,
                "refused: the file is marked failed, the person told, pi gets the message with the failure",
            ),
            c(
                E::Retried,
                Test::FilesIn,
                "given up at the client's timeout (repeatable): asked again; saved once",
            ),
        ],
    },
    Row {
        method: "download",
        site: "inbound: the file's bytes (`/file/bot…/path`)",
        cells: [
            c(
                E::Retried,
                Test::FilesIn,
                "downloaded again after a back-off; saved once",
            ),
            c(E::Late, Test::FilesIn, "saved once, late"),
            c(E::Retried, Test::FilesIn, "downloaded again"),
            c(
                E::Retried,
                Test::FilesIn,
                "downloaded again (a download changes nothing)",
            ),
            c(
                E::FloodWaited,
                Test::FilesIn,
                "a 429 is a wait, downloaded again after it (was: the file failed for good)",
            ),
            na(NO_TOPIC),
            c(
                E::FileFailed,
                Test::FilesIn,
                "refused: the file is marked failed, the person told, pi gets the message with the failure",
            ),
            c(
                E::Retried,
                Test::FilesIn,
                "given up at four times the client's timeout; downloaded again, saved once",
            ),
        ],
    },
    Row {
        method: "sendDocument",
        site: "outbox: a file pi attached",
        cells: [
            c(
                E::Ambiguous,
                Test::FilesOut,
                "an upload of unknown outcome is never repeated (a second copy of a file is worse than the report that one may be missing)",
            ),
            c(E::Late, Test::FilesOut, "uploaded once, late"),
            c(E::Ambiguous, Test::FilesOut, "not repeated"),
            c(E::Ambiguous, Test::FilesOut, "it arrived; not repeated"),
            c(
                E::FloodWaited,
                Test::FilesOut,
                "uploaded once the chat's wait is over",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: held with the pi's other output, uploaded once in its new topic",
            ),
            c(
                E::Dropped,
                Test::FilesOut,
                "refused: nothing else to try, an incident",
            ),
            c(
                E::Ambiguous,
                Test::FilesOut,
                "given up at the client's timeout, the outcome unknown: not repeated",
            ),
        ],
    },
    Row {
        method: "sendPhoto",
        site: "outbox: an image pi attached",
        cells: [
            c(E::Ambiguous, Test::FilesOut, "not repeated"),
            c(E::Late, Test::FilesOut, "uploaded once, late"),
            c(E::Ambiguous, Test::FilesOut, "not repeated"),
            c(E::Ambiguous, Test::FilesOut, "it arrived; not repeated"),
            c(
                E::FloodWaited,
                Test::FilesOut,
                "uploaded once the chat's wait is over",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: held with the pi's other output, uploaded once in its new topic",
            ),
            c(E::Dropped, Test::FilesOut, "refused: an incident"),
            c(
                E::Ambiguous,
                Test::FilesOut,
                "given up at the client's timeout, the outcome unknown: not repeated",
            ),
        ],
    },
    Row {
        method: "sendMediaGroup",
        site: "outbox: several files pi attached",
        cells: [
            c(E::Ambiguous, Test::FilesOut, "not repeated"),
            c(E::Late, Test::FilesOut, "uploaded once, late"),
            c(E::Ambiguous, Test::FilesOut, "not repeated"),
            c(E::Ambiguous, Test::FilesOut, "it arrived; not repeated"),
            c(
                E::FloodWaited,
                Test::FilesOut,
                "uploaded once the chat's wait is over",
            ),
            c(
                E::TopicRecovered,
                Test::Topics,
                "in a topic: held with the pi's other output, uploaded once in its new topic",
            ),
            c(E::Dropped, Test::FilesOut, "refused: an incident"),
            c(
                E::Ambiguous,
                Test::FilesOut,
                "given up at the client's timeout, the outcome unknown: not repeated",
            ),
        ],
    },
    Row {
        method: "pinChatMessage",
        site: "outbox (chat 0, best effort): a question that waits for the person is pinned once it is there",
        cells: [
            c(
                E::TriedOnce,
                Test::Pins,
                "best effort: not pinned, not tried again (a retry would hold up the taps behind it); the question works as ever",
            ),
            c(E::Late, Test::Pins, "pinned once, late"),
            c(E::TriedOnce, Test::Pins, "not pinned, not tried again"),
            c(
                E::TriedOnce,
                Test::Pins,
                "pinned, the answer lost: not tried again; unpinned when the question is settled",
            ),
            c(E::FloodWaited, Test::Pins, "pinned once the wait is over"),
            na(NO_TOPIC),
            c(
                E::Dropped,
                Test::Pins,
                "refused: not pinned, an incident; the question works as ever",
            ),
            c(
                E::TriedOnce,
                Test::Pins,
                "given up at the client's timeout: not pinned, not tried again",
            ),
        ],
    },
    Row {
        method: "unpinChatMessage",
        site: "outbox (chat 0, best effort): a pinned question is unpinned once settled",
        cells: [
            c(
                E::TriedOnce,
                Test::Pins,
                "best effort: still pinned, not tried again; the tap's prompt reaches pi once",
            ),
            c(E::Late, Test::Pins, "unpinned once, late"),
            c(E::TriedOnce, Test::Pins, "still pinned, not tried again"),
            c(
                E::TriedOnce,
                Test::Pins,
                "unpinned, the answer lost: not tried again",
            ),
            c(E::FloodWaited, Test::Pins, "unpinned once the wait is over"),
            na(NO_TOPIC),
            c(E::Dropped, Test::Pins, "refused: still pinned, an incident"),
            c(
                E::TriedOnce,
                Test::Pins,
                "given up at the client's timeout: still pinned, not tried again",
            ),
        ],
    },
    Row {
        method: "setMessageReaction",
        site: "reactions task (best effort, straight to the client): the person's message shows its fate",
        cells: [
            c(
                E::Superseded,
                Test::Reactions,
                "that fate (✍, running) is not shown; the next one (👌, answered) is set",
            ),
            c(E::Late, Test::Reactions, "✍ shows late, then 👌"),
            c(E::Superseded, Test::Reactions, "✍ is lost; 👌 is set"),
            c(
                E::Superseded,
                Test::Reactions,
                "✍ was set, the answer lost: not repeated; 👌 replaces it",
            ),
            c(
                E::FloodWaited,
                Test::Reactions,
                "the task waits `retry_after`; meanwhile 👌 replaced ✍, so 👌 is the one call after the wait",
            ),
            na(NO_TOPIC),
            c(
                E::Superseded,
                Test::Reactions,
                "refused: ✍ is not shown; 👌 is set",
            ),
            c(
                E::Superseded,
                Test::Reactions,
                "given up at the client's timeout: ✍ is not shown; 👌 is set after it",
            ),
        ],
    },
    Row {
        method: "sendMessage",
        site: "preview task (best effort, straight to the client): the working card, a silent message with ⏹ Stop for a turn that runs 5 s",
        cells: [
            c(
                E::PreviewSkipped,
                Test::CardSent,
                "no card for this turn (not tried again); the answer arrives once",
            ),
            c(
                E::Late,
                Test::CardSent,
                "the card shows late and is deleted after the answer",
            ),
            c(E::PreviewSkipped, Test::CardSent, "no card for this turn"),
            c(
                E::CardStays,
                Test::CardSent,
                "the card arrived, the hub never learnt its id: it stays after the answer (a message is not repeatable, so it is not sent again either)",
            ),
            c(
                E::PreviewSkipped,
                Test::CardSent,
                "no card for this turn; the answer waits out the chat's wait",
            ),
            c(
                E::PreviewSkipped,
                Test::CardSent,
                "refused: no card for this turn",
            ),
            c(
                E::PreviewSkipped,
                Test::CardSent,
                "refused: no card for this turn",
            ),
            c(
                E::PreviewSkipped,
                Test::CardSent,
                "no card; the fence waits for the hung call 2 s at most, then the answer goes out once",
            ),
        ],
    },
    Row {
        method: "deleteMessage",
        site: "preview task: the working card deleted after the answer's fence",
        cells: [
            c(
                E::Retried,
                Test::CardDeleted,
                "repeatable: deleted on a later try (was: tried once, the card stayed)",
            ),
            c(E::Late, Test::CardDeleted, "deleted once, late"),
            c(
                E::Retried,
                Test::CardDeleted,
                "deleted on a later try (was: the card stayed)",
            ),
            c(
                E::Retried,
                Test::CardDeleted,
                "deleted, the answer lost: the repeat finds no message and ends",
            ),
            c(
                E::FloodWaited,
                Test::CardDeleted,
                "deleted once the wait is over (was: the card stayed)",
            ),
            na(NO_TOPIC),
            c(
                E::CardStays,
                Test::CardDeleted,
                "refused (as a card too old to delete would be): the card stays, not tried again",
            ),
            c(
                E::Retried,
                Test::CardDeleted,
                "given up at the client's timeout: deleted on a later try",
            ),
        ],
    },
];

// ---------------------------------------------------------------------------------------------
// The document
// ---------------------------------------------------------------------------------------------

fn kind_name(kind: FaultKind) -> String {
    serde_json::to_value(kind)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

fn document() -> String {
    let mut out = String::new();
    out.push_str("# Fault matrix\n\n");
    out.push_str(
        "Every fault tg-fake injects (`crates/tg-fake/src/faults.rs`) on every Bot API call the hub \
         makes, and what the hub does about it. Each cell is checked by the named group in \
         `crates/hub/tests/fault_matrix.rs` (an async fn; the test `fault_matrix` runs every \
         group side by side, `FAULT_MATRIX_ONLY=<group>` one of them), which drives the real hub \
         (in-process) against tg-fake with that fault armed once on that call and asserts the \
         outcome from tg-fake's request log and transcript and the hub's status.\n\n",
    );
    out.push_str(
        "A `hang` is a request Telegram takes and never answers (a connection that died \
         silently): the hub gives up on it at its client's timeout (30 s, \
         `PI_TELEGRAM_CLIENT_TIMEOUT_SECS`; 3 s in these tests; four times that for a download) \
         or, for a long poll, at the poll's deadline (its timeout + 3 s), and takes it as any \
         failure after the request left: of unknown outcome. While an outbox call hangs the \
         sender waits for it, so a hang holds up the whole outbox for that long.\n\n",
    );
    out.push_str(
        "Best-effort calls count too: the preview task's (drafts, typing, the working card) and \
         the reactions task's go straight to the client, pins and unpins through the outbox, \
         tried once.\n\n",
    );
    out.push_str(
        "GENERATED from the table `MATRIX` in that file: `FAULT_MATRIX_WRITE=1 cargo test \
         -p pi-telegram-hub --test fault_matrix` rewrites it; otherwise the test fails when \
         this file differs.\n\n",
    );
    let total = MATRIX.len() * KINDS.len();
    let na_count = MATRIX
        .iter()
        .flat_map(|r| &r.cells)
        .filter(|c| c.expected == E::NotApplicable)
        .count();
    out.push_str(&format!(
        "{} calls × {} kinds = {total} cells: {} tested, {na_count} not applicable.\n\n",
        MATRIX.len(),
        KINDS.len(),
        total - na_count
    ));
    out.push_str("## Overview\n\n| call |");
    for k in KINDS {
        out.push_str(&format!(" `{}` |", kind_name(k)));
    }
    out.push_str("\n|---|");
    for _ in KINDS {
        out.push_str("---|");
    }
    out.push('\n');
    for r in MATRIX {
        out.push_str(&format!("| `{}`: {} |", r.method, r.site));
        for cell in &r.cells {
            out.push_str(&format!(" {} |", cell.expected.name()));
        }
        out.push('\n');
    }
    out.push_str("\n## Outcomes\n\n| outcome | meaning |\n|---|---|\n");
    for e in [
        E::Retried,
        E::Late,
        E::FloodWaited,
        E::ResentMarked,
        E::CountedDuplicate,
        E::Ambiguous,
        E::FellBack,
        E::Dropped,
        E::TopicRecovered,
        E::PreviewSkipped,
        E::StartStops,
        E::AskedAboutTopic,
        E::FileFailed,
        E::WebhookLater,
        E::CleanupDone,
        E::TriedOnce,
        E::Superseded,
        E::CardStays,
        E::NotApplicable,
    ] {
        out.push_str(&format!("| {} | {} |\n", e.name(), meaning(e)));
    }
    out.push_str("\n## Cells\n");
    for r in MATRIX {
        out.push_str(&format!("\n### `{}`: {}\n\n", r.method, r.site));
        out.push_str("| fault | outcome | checked by | why |\n|---|---|---|---|\n");
        for (k, cell) in KINDS.iter().zip(&r.cells) {
            let test = match cell.test {
                Test::None => "—".to_owned(),
                t => format!("`{}`", t.name()),
            };
            out.push_str(&format!(
                "| `{}` | {} | {test} | {} |\n",
                kind_name(*k),
                cell.expected.name(),
                cell.why
            ));
        }
    }
    out
}

fn meaning(e: Expected) -> &'static str {
    match e {
        E::Retried => "called again after a back-off; the effect happens once",
        E::Late => "answered late; nothing repeated; the effect happens once",
        E::FloodWaited => "no call before `retry_after` ends; then the effect happens once",
        E::ResentMarked => {
            "unknown outcome, nothing had happened: sent again with the repeat mark; one copy arrives"
        }
        E::CountedDuplicate => {
            "unknown outcome, it had happened: a second copy with the repeat mark, counted (`resent` in `status`)"
        }
        E::Ambiguous => "unknown outcome: not sent again; the row is `ambiguous`, an incident",
        E::FellBack => "refused as written: the same words the next way (rich -> HTML -> plain)",
        E::Dropped => "refused, nothing else to try: `failed`, an incident",
        E::TopicRecovered => {
            "the topic is taken for deleted: a new topic (same letter), delivered there once"
        }
        E::PreviewSkipped => {
            "best effort: that frame is lost or comes later; the answer arrives once, nothing preview-like after it"
        }
        E::StartStops => "start-up stops with the error",
        E::AskedAboutTopic => {
            "the intent is `ambiguous` and holds its slot; the person is asked; no second creation on its own"
        }
        E::FileFailed => "the file is not saved, the person is told, pi still gets the message",
        E::WebhookLater => "start-up goes on; the poll's 409 removes the webhook; updates arrive",
        E::CleanupDone => "Telegram says the topic is not there: the cleanup is recorded done",
        E::TriedOnce => {
            "best effort (outbox): not tried again after a retryable failure, the row `failed`; what it decorates goes on"
        }
        E::Superseded => {
            "best effort (straight to the client): that state is lost or late; the next one is set, the last one shows"
        }
        E::CardStays => {
            "the working card stays in the chat after the answer: the hub cannot remove it"
        }
        E::NotApplicable => "Telegram does not give this answer to this call: not tested",
    }
}

#[test]
fn the_document_is_the_table() {
    // Every kind tg-fake has is a column.
    assert_eq!(KINDS.len(), 8, "a new FaultKind needs a column");
    for r in MATRIX {
        for (k, cell) in KINDS.iter().zip(&r.cells) {
            assert_eq!(
                cell.expected == E::NotApplicable,
                cell.test == Test::None,
                "{} × {}: a tested cell names its test, an n/a cell none",
                r.method,
                kind_name(*k)
            );
        }
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/fault-matrix.md");
    let doc = document();
    if std::env::var("FAULT_MATRIX_WRITE").is_ok_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&path, &doc).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == doc,
        "docs/fault-matrix.md differs from the table in crates/hub/tests/fault_matrix.rs: run \
         FAULT_MATRIX_WRITE=1 cargo test -p pi-telegram-hub --test fault_matrix the_document_is_the_table"
    );
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The cells `test` checks: (method, site, kind, cell).
fn cells_of(test: Test) -> Vec<(&'static Row, FaultKind, &'static Cell)> {
    MATRIX
        .iter()
        .flat_map(|r| KINDS.iter().zip(&r.cells).map(move |(k, c)| (r, *k, c)))
        .filter(|(_, _, c)| c.test == test)
        .collect()
}

fn arm(hub: &TestHub, method: &str, kind: FaultKind) {
    hub.fake
        .control()
        .add_fault(FaultSpec {
            method: method.into(),
            kind,
            count: Some(1),
            probability: None,
            retry_after: Some(flood_s(method)),
            delay_ms: Some(DELAY_MS),
        })
        .unwrap();
}

fn last_seq(hub: &TestHub) -> u64 {
    hub.fake
        .control()
        .requests(0, None)
        .last()
        .map_or(0, |r| r.seq)
}

fn calls(hub: &TestHub, since: u64, method: &str) -> Vec<RequestEntry> {
    hub.fake.control().requests(since, Some(method))
}

fn transcript(hub: &TestHub) -> Vec<TranscriptEntry> {
    hub.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
}

fn status(hub: &TestHub) -> hub::status::Status {
    hub::status::status(
        &hub::paths::AgentDir::at(hub.dir.path()),
        &hub::paths::ProfileName::default_profile(),
    )
    .unwrap()
}

fn outbox(hub: &TestHub, state: &str) -> i64 {
    status(hub).outbox.get(state).copied().unwrap_or(0)
}

/// Waits until `probe` says yes. The deadline is only against a hang (no cell checks a time
/// with it): sixteen groups side by side on a loaded machine took more than 20 s for one.
async fn until(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !probe() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until nothing is pending or in flight in the outbox, then a little longer so that a
/// repeat that should not happen has the time to show.
async fn settle(hub: &TestHub) {
    until("the outbox to settle", || {
        outbox(hub, "pending") == 0 && outbox(hub, "sending") == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// What a cell waits for: bot messages (not deleted) newer than `floor` that `is` picks.
struct Want<'a> {
    floor: i64,
    is: &'a (dyn Fn(&TranscriptEntry) -> bool + Sync),
}

/// The newest message id in the chat (a cell counts only what comes after it).
fn floor(hub: &TestHub) -> i64 {
    transcript(hub)
        .iter()
        .map(|m| m.message_id)
        .max()
        .unwrap_or(0)
}

/// The copies of what `want` picks: (entry, marked as a repeat).
fn copies(hub: &TestHub, want: &Want<'_>) -> Vec<(TranscriptEntry, bool)> {
    transcript(hub)
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted && m.message_id > want.floor)
        .filter(|m| (want.is)(m))
        .map(|m| {
            let marked = m
                .text
                .as_deref()
                .is_some_and(|t| t.starts_with(hub::outgoing::texts::REPEAT_MARK.trim_end()));
            (m, marked)
        })
        .collect()
}

fn ends_with(text: &str) -> impl Fn(&TranscriptEntry) -> bool + Sync + '_ {
    move |m| m.text.as_deref().is_some_and(|t| t.ends_with(text))
}

fn replies_to(message: i64) -> impl Fn(&TranscriptEntry) -> bool + Sync {
    move |m| m.reply_to_message_id == Some(message)
}

/// The fault fired on one of `calls` (the scenario really met it).
fn assert_fired(calls: &[RequestEntry], kind: FaultKind, what: &str) {
    let name = kind_name(kind);
    assert!(
        calls
            .iter()
            .any(|c| c.fault.as_deref() == Some(name.as_str())),
        "{what}: the {name} fault never fired: {calls:#?}"
    );
    assert_held(calls, kind, what);
}

/// The `retry_after` of a 429 injected on `method`.
fn flood_s(method: &str) -> u64 {
    if method == "createForumTopic" {
        TOPIC_FLOOD_S
    } else {
        FLOOD_S
    }
}

/// The first call after the 429 came no sooner than `retry_after`.
fn assert_waited(calls: &[RequestEntry], what: &str) {
    let flooded = calls
        .iter()
        .position(|c| c.fault.as_deref() == Some("flood"))
        .unwrap_or_else(|| panic!("{what}: no 429"));
    let next = calls
        .get(flooded + 1)
        .unwrap_or_else(|| panic!("{what}: nothing called after the 429"));
    let gap = next.at_ms - calls[flooded].at_ms;
    let wait = flood_s(&next.method);
    assert!(
        gap + 150 >= wait * 1000,
        "{what}: called again {gap} ms after a 429 with retry_after {wait} s"
    );
}

/// The least time a hung call of `method` is held before the hub gives up on it: the client's
/// timeout (four times it for a download), or the poll's margin past its long-poll timeout.
fn held_ms(method: &str) -> u64 {
    let t = u64::try_from(CLIENT_TIMEOUT.as_millis()).unwrap();
    match method {
        "download" => 4 * t,
        "getUpdates" => u64::try_from(hub::incoming::reach::HUNG_MARGIN.as_millis()).unwrap(),
        _ => t,
    }
}

/// A hung call was given up only at its deadline: the next call of `calls` after it (if any)
/// came no sooner. Every other kind passes.
fn assert_held(calls: &[RequestEntry], kind: FaultKind, what: &str) {
    if kind != FaultKind::Hang {
        return;
    }
    let hung = calls
        .iter()
        .position(|c| c.fault.as_deref() == Some("hang"))
        .unwrap_or_else(|| panic!("{what}: nothing hung"));
    assert_eq!(
        calls[hung].status, None,
        "{what}: a hung call is never answered"
    );
    if let Some(next) = calls.get(hung + 1) {
        let gap = next.at_ms - calls[hung].at_ms;
        let held = held_ms(&next.method);
        assert!(
            gap + 150 >= held,
            "{what}: called again {gap} ms after a hung call (held at least {held} ms)"
        );
    }
}

fn what(row: &Row, kind: FaultKind) -> String {
    format!("{} ({}) × {}", row.method, row.site, kind_name(kind))
}

/// A scripted pi on `hub.sock` that answers every prompt with "answer to <prompt>", optionally
/// streaming a preview first; `attach` files are sent with `telegram_attach` outside a turn.
struct Pi {
    tx: tokio::sync::mpsc::UnboundedSender<Value>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Answer at once.
    Plain,
    /// Stream text for a while (previews), then answer.
    Streaming,
    /// Stream for longer than `preview::WORKING_CARD_AFTER` (the working card), then answer.
    Long,
}

impl Pi {
    async fn start(hub: &TestHub, cwd: &str, pid: i64, style: Style) -> Self {
        let shim = hub.shim(cwd, pid).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
        let common::Shim {
            mut lines, mut wr, ..
        } = shim;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    line = lines.next_line() => {
                        let Ok(Some(line)) = line else { return };
                        let m: Value = serde_json::from_str(&line).unwrap();
                        match m["type"].as_str() {
                            Some("get_commands") => {
                                let a = json!({ "type": "response", "id": m["id"], "ok": true, "data": { "commands": [] } });
                                let _ = wr.write_all(format!("{a}\n").as_bytes()).await;
                            }
                            Some("prompt") => {
                                for out in answer_lines(&m, style) {
                                    if let Some(ms) = out.get("sleep_ms").and_then(Value::as_u64) {
                                        tokio::time::sleep(Duration::from_millis(ms)).await;
                                        continue;
                                    }
                                    let _ = wr.write_all(format!("{out}\n").as_bytes()).await;
                                }
                            }
                            _ => {}
                        }
                    }
                    out = rx.recv() => {
                        let Some(out) = out else { return };
                        let _ = wr.write_all(format!("{out}\n").as_bytes()).await;
                    }
                }
            }
        });
        Self { tx }
    }

    fn send(&self, v: Value) {
        self.tx.send(v).unwrap();
    }
}

fn answer_lines(prompt: &Value, style: Style) -> Vec<Value> {
    let turn = prompt["turn_id"].clone();
    let text = prompt["text"].as_str().unwrap_or_default();
    let answer = format!("answer to {text}");
    let ev = |e: Value| json!({ "type": "event", "turn_id": turn, "event": e });
    let mut out = vec![
        json!({ "type": "ack", "turn_id": turn, "disposition": "started" }),
        ev(json!({ "type": "agent_start" })),
    ];
    if style != Style::Plain {
        let pause = if style == Style::Long { 3000 } else { 450 };
        out.push(ev(
            json!({ "type": "message_start", "message": { "role": "assistant", "content": [] } }),
        ));
        for part in ["answer ", "to "] {
            out.push(ev(json!({ "type": "message_update", "assistantMessageEvent": { "type": "text_delta", "delta": part } })));
            out.push(json!({ "sleep_ms": pause }));
        }
    }
    out.push(ev(
        json!({ "type": "message_end", "message": { "role": "assistant",
        "content": [{ "type": "text", "text": answer }], "stopReason": "stop" } }),
    ));
    out.push(ev(json!({ "type": "agent_settled", "aborted": false })));
    out.push(json!({ "type": "turn_done", "turn_id": turn, "text": answer, "aborted": false, "error": null }));
    out
}

fn say_in(hub: &TestHub, thread: Option<i64>, text: &str) -> tg_fake::control::Sent {
    hub.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            thread_id: thread,
            ..Default::default()
        })
        .unwrap()
}

/// Checks an answer-like cell: `want` is the text that must arrive; `method` the faulted call.
#[allow(clippy::too_many_arguments)]
async fn check_message(
    hub: &TestHub,
    row: &Row,
    kind: FaultKind,
    expected: Expected,
    since: u64,
    want: &Want<'_>,
    fallback: Option<(&str, Option<&str>)>,
    before: (i64, i64, i64),
) {
    let w = what(row, kind);
    match expected {
        E::Ambiguous | E::Dropped => {
            until(&format!("{w}: the row settled"), || {
                outbox(hub, "ambiguous") > before.1 || outbox(hub, "failed") > before.2
            })
            .await;
        }
        _ => {
            until(&format!("{w}: the message to arrive"), || {
                !copies(hub, want).is_empty()
            })
            .await;
        }
    }
    settle(hub).await;
    let made = calls(hub, since, row.method);
    assert_fired(&made, kind, &w);
    let got = copies(hub, want);
    let marked = got.iter().filter(|(_, m)| *m).count();
    let resent = outbox(hub, "resent") - before.0;
    match expected {
        E::Retried => {
            assert_eq!((got.len(), marked), (1, 0), "{w}: {got:#?}");
            assert!(made.len() >= 2, "{w}: not called again");
        }
        E::Late => {
            assert_eq!((got.len(), marked), (1, 0), "{w}");
            assert_eq!(made.len(), 1, "{w}: repeated: {made:#?}");
        }
        E::FloodWaited => {
            assert_eq!((got.len(), marked), (1, 0), "{w}");
            assert_waited(&made, &w);
            assert_eq!(made.len(), 2, "{w}: {made:#?}");
        }
        E::ResentMarked => {
            assert_eq!(
                (got.len(), marked),
                (1, 1),
                "{w}: one marked copy: {got:#?}"
            );
            assert_eq!(made.len(), 2, "{w}");
            assert_eq!(resent, 1, "{w}: counted");
        }
        E::CountedDuplicate => {
            assert_eq!((got.len(), marked), (2, 1), "{w}: {got:#?}");
            assert_eq!(made.len(), 2, "{w}");
            assert_eq!(resent, 1, "{w}: counted");
        }
        E::Ambiguous => {
            let arrived = usize::from(kind == FaultKind::CommitThenDrop);
            assert_eq!(got.len(), arrived, "{w}: {got:#?}");
            assert_eq!(made.len(), 1, "{w}: repeated: {made:#?}");
            assert_eq!(outbox(hub, "ambiguous"), before.1 + 1, "{w}");
        }
        E::Dropped => {
            assert!(got.is_empty(), "{w}: {got:#?}");
            assert_eq!(made.len(), 1, "{w}: repeated: {made:#?}");
            assert_eq!(outbox(hub, "failed"), before.2 + 1, "{w}");
        }
        E::FellBack => {
            assert_eq!((got.len(), marked), (1, 0), "{w}: {got:#?}");
            let (method, parse_mode) = fallback.expect("a fallback to check");
            let last = hub
                .fake
                .control()
                .requests(since, Some(method))
                .into_iter()
                .rfind(|r| r.status == Some(200))
                .unwrap_or_else(|| panic!("{w}: no {method} went through"));
            assert_eq!(
                last.params.get("parse_mode").and_then(Value::as_str),
                parse_mode,
                "{w}: {last:#?}"
            );
        }
        other => panic!("{w}: no check for {other:?} here"),
    }
}

fn before(hub: &TestHub) -> (i64, i64, i64) {
    (
        outbox(hub, "resent"),
        outbox(hub, "ambiguous"),
        outbox(hub, "failed"),
    )
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

type Group = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Every group of cells at once: each has its own hub and fake, and they mostly wait (back-offs,
/// flood waits, delays), so running them side by side keeps the matrix well under a minute on
/// two cores. `FAULT_MATRIX_ONLY=<test>` runs one group.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fault_matrix() {
    let groups: Vec<(Test, Group)> = vec![
        (Test::StartUp, Box::pin(start_up())),
        (Test::Polling, Box::pin(polling())),
        (Test::AnswersHtml, Box::pin(answers_html())),
        (Test::AnswersRich, Box::pin(answers_rich())),
        (Test::OwnTexts, Box::pin(own_texts())),
        (Test::PromptTexts, Box::pin(prompt_texts())),
        (Test::Topics, Box::pin(topics())),
        (Test::PreviewsHtml, Box::pin(previews_html())),
        (Test::PreviewsRich, Box::pin(previews_rich())),
        (Test::Typing, Box::pin(typing())),
        (Test::Taps, Box::pin(taps())),
        (Test::PromptButtons, Box::pin(prompt_buttons())),
        (Test::TopicCreation, Box::pin(topic_creation())),
        (Test::TopicCleanup, Box::pin(topic_cleanup())),
        (Test::FilesIn, Box::pin(files_in())),
        (Test::FilesOut, Box::pin(files_out())),
        (Test::Voice, Box::pin(voice())),
        (Test::Pins, Box::pin(pins())),
        (Test::Reactions, Box::pin(reactions())),
        (Test::CardSent, Box::pin(cards(Test::CardSent))),
        (Test::CardDeleted, Box::pin(cards(Test::CardDeleted))),
    ];
    // Every cell that names a test is run by one of these.
    for r in MATRIX {
        for cell in &r.cells {
            assert!(
                cell.test == Test::None || groups.iter().any(|(t, _)| *t == cell.test),
                "{:?} runs nowhere",
                cell.test
            );
        }
    }
    let only = std::env::var("FAULT_MATRIX_ONLY").ok();
    let started = Instant::now();
    let mut running = Vec::new();
    for (test, group) in groups {
        if only.as_deref().is_some_and(|o| o != test.name()) {
            continue;
        }
        running.push((
            test,
            tokio::spawn(async move {
                let t = Instant::now();
                group.await;
                t.elapsed()
            }),
        ));
    }
    let mut failed = Vec::new();
    for (test, task) in running {
        match task.await {
            Ok(took) => eprintln!("{}: ok in {:.1} s", test.name(), took.as_secs_f64()),
            Err(e) => {
                let why = e.try_into_panic().map_or_else(
                    |e| e.to_string(),
                    |p| {
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_default()
                    },
                );
                failed.push(format!("{}: {why}", test.name()));
            }
        }
    }
    eprintln!(
        "the fault matrix took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(failed.is_empty(), "failed cells:\n{}", failed.join("\n\n"));
}

async fn answers(test: Test, rendering: &str) {
    let mut hub = TestHub::prepare(
        FakeConfig::default(),
        json!({ "assistant": { "rendering": rendering, "draftPreviews": false } }),
    )
    .await;
    hub.launch_tuned(tuned()).await;
    let _pi = Pi::start(&hub, "/work/web", 5101, Style::Plain).await;
    for (n, (row, kind, cell)) in cells_of(test).into_iter().enumerate() {
        // Nothing else in flight: the fault is for this cell's call.
        settle(&hub).await;
        let b = before(&hub);
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let q = format!("question {n}");
        let answer = format!("answer to {q}");
        let want = Want {
            floor: floor(&hub),
            is: &ends_with(&answer),
        };
        hub.say(&q);
        let fallback = match row.method {
            "sendRichMessage" => Some(("sendMessage", Some("HTML"))),
            _ => Some(("sendMessage", None)),
        };
        check_message(&hub, row, kind, cell.expected, since, &want, fallback, b).await;
        hub.fake.control().clear_faults();
    }
    hub.stop().await;
}

async fn answers_html() {
    answers(Test::AnswersHtml, "html").await;
}

async fn answers_rich() {
    answers(Test::AnswersRich, "rich").await;
}

async fn own_texts() {
    let mut hub = plain_hub().await;
    for (row, kind, cell) in cells_of(Test::OwnTexts) {
        settle(&hub).await;
        let b = before(&hub);
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let sent = hub.say("/help");
        let want = Want {
            floor: floor(&hub),
            is: &replies_to(sent.message_id),
        };
        check_message(&hub, row, kind, cell.expected, since, &want, None, b).await;
        hub.fake.control().clear_faults();
    }
    hub.stop().await;
}

/// The reply to a command nobody knows stands for every text that is all a person learns of
/// their message (they are queued alike: `outbound::Text::resend`).
async fn prompt_texts() {
    let mut hub = plain_hub().await;
    for (n, (row, kind, cell)) in cells_of(Test::PromptTexts).into_iter().enumerate() {
        settle(&hub).await;
        let b = before(&hub);
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let sent = hub.say(&format!("/frobnicate{n}"));
        let want = Want {
            floor: floor(&hub),
            is: &replies_to(sent.message_id),
        };
        check_message(&hub, row, kind, cell.expected, since, &want, None, b).await;
        hub.fake.control().clear_faults();
    }
    hub.stop().await;
}

async fn topics() {
    for (n, (row, kind, cell)) in cells_of(Test::Topics).into_iter().enumerate() {
        assert_eq!(cell.expected, E::TopicRecovered);
        let w = what(row, kind);
        let rendering = if row.method == "sendRichMessage" {
            "rich"
        } else {
            "html"
        };
        let mut hub = TestHub::prepare(
            FakeConfig {
                has_topics_enabled: true,
                ..FakeConfig::default()
            },
            json!({ "assistant": { "rendering": rendering, "draftPreviews": false } }),
        )
        .await;
        if row.method == "sendVoice" {
            enable_voice(&hub);
        }
        hub.launch_tuned(tuned()).await;
        let pi = Pi::start(&hub, "/work/web", 5201 + n as i64, Style::Plain).await;
        let old = until_topic(&hub, None).await;
        settle(&hub).await;
        let since = last_seq(&hub);
        let trace = row.site.contains("all a person learns");
        let own = row.site.contains("own texts") || trace;
        let files = matches!(row.method, "sendDocument" | "sendPhoto" | "sendMediaGroup");
        let text = if trace {
            format!("/frobnicate{n}")
        } else if own {
            "/help".to_owned()
        } else {
            format!("question {n}")
        };
        let answer = format!("answer to {text}");
        arm(&hub, row.method, kind);
        let floor = floor(&hub);
        let mut parts = 1;
        let sent = if files {
            let paths = out_files(hub.dir.path(), row.method, n);
            parts = paths.len();
            pi.send(
                json!({ "type": "tool_call", "id": format!("t{n}"), "tool": "telegram_attach",
                "turn_id": null, "args": { "paths": paths } }),
            );
            None
        } else {
            Some(say_in(&hub, Some(old), &text))
        };
        let by_reply = replies_to(sent.as_ref().map_or(0, |s| s.message_id));
        let by_text = ends_with(&answer);
        let by_media = |m: &TranscriptEntry| m.media.is_some();
        let want = Want {
            floor,
            is: if own {
                &by_reply
            } else if files {
                &by_media
            } else {
                &by_text
            },
        };
        let new = until_topic(&hub, Some(old)).await;
        until(&format!("{w}: delivered in the new topic"), || {
            copies(&hub, &want)
                .iter()
                .any(|(m, _)| m.thread_id == Some(new))
        })
        .await;
        settle(&hub).await;
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        let got = copies(&hub, &want);
        assert_eq!(got.len(), parts, "{w}: delivered once: {got:#?}");
        assert!(
            got.iter().all(|(m, _)| m.thread_id == Some(new)),
            "{w}: {got:#?}"
        );
        let to_old = made
            .iter()
            .filter(|r| {
                // Multipart fields arrive as text.
                let t = r.params.get("message_thread_id");
                t.and_then(Value::as_i64)
                    .or_else(|| t.and_then(Value::as_str).and_then(|s| s.parse().ok()))
                    == Some(old)
            })
            .count();
        assert_eq!(to_old, 1, "{w}: one call met the lost topic: {made:#?}");
        assert_eq!(
            calls(&hub, 0, "createForumTopic").len(),
            2,
            "{w}: one new topic"
        );
        let st = status(&hub);
        assert_eq!(st.threads.len(), 1, "{w}: {:?}", st.threads);
        assert_eq!(st.threads[0].thread_id, new);
        assert_eq!(st.threads[0].slot, "A", "{w}: the same letter");
        hub.stop().await;
    }
}

/// The active topic binding (other than `not`), waiting for one.
async fn until_topic(hub: &TestHub, not: Option<i64>) -> i64 {
    let mut found = None;
    until("a bound topic", || {
        found = status(hub)
            .threads
            .iter()
            .find(|t| t.state == "active" && Some(t.thread_id) != not)
            .map(|t| t.thread_id);
        found.is_some()
    })
    .await;
    found.unwrap()
}

async fn polling() {
    let mut hub = plain_hub().await;
    let _pi = Pi::start(&hub, "/work/web", 5301, Style::Plain).await;
    for (n, (row, kind, cell)) in cells_of(Test::Polling).into_iter().enumerate() {
        let w = what(row, kind);
        settle(&hub).await;
        let since = last_seq(&hub);
        // The next poll waits a moment before the fault acts, so that the second message is
        // in the poll the fault hits (the first one ends the poll in flight).
        if kind != FaultKind::Delay {
            hub.fake
                .control()
                .add_fault(FaultSpec {
                    method: row.method.into(),
                    kind: FaultKind::Delay,
                    count: Some(1),
                    probability: None,
                    retry_after: None,
                    delay_ms: Some(600),
                })
                .unwrap();
        }
        arm(&hub, row.method, kind);
        let floor = floor(&hub);
        let first = format!("first {n}");
        let second = format!("second {n}");
        hub.say(&first);
        tokio::time::sleep(Duration::from_millis(200)).await;
        hub.say(&second);
        let (a1, a2) = (format!("answer to {first}"), format!("answer to {second}"));
        let (f1, f2) = (ends_with(&a1), ends_with(&a2));
        let (w1, w2) = (Want { floor, is: &f1 }, Want { floor, is: &f2 });
        until(&format!("{w}: both answers"), || {
            !copies(&hub, &w1).is_empty() && !copies(&hub, &w2).is_empty()
        })
        .await;
        settle(&hub).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        assert_eq!(copies(&hub, &w1).len(), 1, "{w}: the first answered once");
        assert_eq!(copies(&hub, &w2).len(), 1, "{w}: the second answered once");
        let faulted = made
            .iter()
            .position(|c| c.fault.as_deref() == Some(kind_name(kind).as_str()))
            .unwrap();
        match cell.expected {
            E::Retried => assert!(made.len() > faulted + 1, "{w}: not polled again"),
            E::Late => assert_eq!(made[faulted].status, Some(200), "{w}"),
            E::FloodWaited => assert_waited(&made, &w),
            other => panic!("{w}: no check for {other:?}"),
        }
        let st = status(&hub);
        assert_eq!(st.journal.pending, 0, "{w}: every update handled");
    }
    hub.stop().await;
}

/// Sets a webhook on the fake bot, as another tool would.
async fn set_webhook(hub: &TestHub) {
    let client = client(hub);
    client
        .call(
            "setWebhook",
            &json!({ "url": "https://hooks.example.org/bot/hook" }),
        )
        .await
        .unwrap();
}

fn client(hub: &TestHub) -> telegram::Client {
    telegram::Client::new(
        hub.fake.base_url(),
        telegram::Token::new(tg_fake::DEFAULT_TOKEN).unwrap(),
        telegram::ClientOptions::default(),
    )
    .unwrap()
}

/// Each cell its own hub, all at once (a start-up takes its time: back-offs, flood waits).
async fn start_up() {
    let cells: Vec<_> = cells_of(Test::StartUp)
        .into_iter()
        .enumerate()
        .map(|(n, (row, kind, cell))| tokio::spawn(start_up_cell(n, row, kind, cell)))
        .collect();
    for c in cells {
        if let Err(e) = c.await {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

async fn start_up_cell(n: usize, row: &'static Row, kind: FaultKind, cell: &'static Cell) {
    let w = what(row, kind);
    let mut hub = TestHub::prepare(FakeConfig::default(), json!({})).await;
    let webhook = row.method.contains("Webhook");
    if webhook {
        set_webhook(&hub).await;
    }
    let since = last_seq(&hub);
    arm(&hub, row.method, kind);
    if cell.expected == E::StartStops {
        let e = hub.launch_expecting_failure().await;
        assert!(matches!(e, hub::HubError::Telegram { .. }), "{w}: {e:?}");
        assert_eq!(calls(&hub, since, row.method).len(), 1, "{w}: not repeated");
        return;
    }
    hub.launch_tuned(tuned()).await;
    let _pi = Pi::start(&hub, "/work/web", 5401 + n as i64, Style::Plain).await;
    let floor = floor(&hub);
    hub.say("hello");
    let is = ends_with("answer to hello");
    let want = Want { floor, is: &is };
    until(&format!("{w}: the hub answers"), || {
        !copies(&hub, &want).is_empty()
    })
    .await;
    settle(&hub).await;
    let made = calls(&hub, since, row.method);
    assert_fired(&made, kind, &w);
    assert_eq!(copies(&hub, &want).len(), 1, "{w}: answered once");
    if cell.expected == E::Retried {
        assert!(
            made.len() >= 2 && made.last().unwrap().status == Some(200),
            "{w}: {made:#?}"
        );
    }
    // A webhook is removed (and recorded for `status`) whatever happened on the way.
    if webhook {
        let info = client(&hub)
            .call("getWebhookInfo", &json!({}))
            .await
            .unwrap();
        assert_eq!(info["url"], json!(""), "{w}: the webhook is gone");
        assert!(status(&hub).webhook_removed.is_some(), "{w}: recorded");
    }
    match cell.expected {
        E::Retried => {}
        E::Late => {
            assert_eq!(made[0].status, Some(200), "{w}");
            // getMe is asked again by the capability probe; nothing else is repeated.
            if row.method != "getMe" {
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
            }
        }
        E::FloodWaited => {
            assert_waited(&made, &w);
            assert_eq!(made.last().unwrap().status, Some(200), "{w}");
        }
        E::Dropped => {
            assert_eq!(made.len(), 1, "{w}: {made:#?}");
            assert_eq!(outbox(&hub, "failed"), 1, "{w}");
        }
        E::WebhookLater => {
            // Removed by the poller, after start-up: the poll met the webhook's 409.
            let polls = calls(&hub, since, "getUpdates");
            assert!(
                polls.iter().any(|p| p.status == Some(409)),
                "{w}: {polls:#?}"
            );
        }
        other => panic!("{w}: no check for {other:?}"),
    }
    hub.stop().await;
}

/// The rows of one preview test, with the hub's settings for them.
async fn previews(test: Test, assistant: Value) {
    let mut hub = TestHub::prepare(FakeConfig::default(), json!({ "assistant": assistant })).await;
    hub.launch_tuned(tuned()).await;
    let _pi = Pi::start(&hub, "/work/web", 5501, Style::Streaming).await;
    for (n, (row, kind, cell)) in cells_of(test).into_iter().enumerate() {
        let w = what(row, kind);
        settle(&hub).await;
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let q = format!("question {n}");
        let a = format!("answer to {q}");
        let is = ends_with(&a);
        let want = Want {
            floor: floor(&hub),
            is: &is,
        };
        hub.say(&q);
        until(&format!("{w}: the answer"), || {
            !copies(&hub, &want).is_empty()
        })
        .await;
        settle(&hub).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        let got = copies(&hub, &want);
        assert_eq!(got.len(), 1, "{w}: the answer once: {got:#?}");
        assert!(!got[0].1, "{w}: not marked");
        // The fence: nothing preview-like after the answer went out.
        let all = hub.fake.control().requests(since, None);
        let answered = all
            .iter()
            .filter(|r| {
                matches!(r.method.as_str(), "sendMessage" | "sendRichMessage")
                    && r.status == Some(200)
            })
            .map(|r| r.seq)
            .max()
            .unwrap();
        let late: Vec<_> = all
            .iter()
            .filter(|r| r.seq > answered)
            .filter(|r| {
                matches!(
                    r.method.as_str(),
                    "sendMessageDraft" | "sendRichMessageDraft" | "sendChatAction"
                )
            })
            .collect();
        assert!(
            late.is_empty(),
            "{w}: preview calls after the answer: {late:#?}"
        );
        match cell.expected {
            E::PreviewSkipped => {}
            E::Late => {
                let delayed = made.iter().find(|c| c.fault.as_deref() == Some("delay"));
                assert_eq!(delayed.unwrap().status, Some(200), "{w}");
            }
            other => panic!("{w}: no check for {other:?}"),
        }
    }
    hub.stop().await;
}

async fn previews_html() {
    previews(
        Test::PreviewsHtml,
        json!({ "rendering": "html", "draftPreviews": true }),
    )
    .await;
}

async fn previews_rich() {
    previews(
        Test::PreviewsRich,
        json!({ "rendering": "rich", "draftPreviews": true }),
    )
    .await;
}

async fn typing() {
    previews(Test::Typing, json!({ "draftPreviews": false })).await;
}

/// The button labelled `label` on message `id`: its callback data.
fn button(hub: &TestHub, id: i64, label: &str) -> Option<String> {
    let m = transcript(hub).into_iter().find(|m| m.message_id == id)?;
    let rows = m.reply_markup?.get("inline_keyboard")?.as_array()?.clone();
    rows.iter()
        .flat_map(|r| r.as_array().cloned().unwrap_or_default())
        .find(|b| b["text"] == json!(label))
        .and_then(|b| b["callback_data"].as_str().map(str::to_owned))
}

async fn taps() {
    let mut hub = plain_hub().await;
    for (row, kind, cell) in cells_of(Test::Taps) {
        let w = what(row, kind);
        let sent = hub.say("/start");
        let mut menu = None;
        until(&format!("{w}: the menu"), || {
            menu = transcript(&hub)
                .into_iter()
                .find(|m| m.reply_to_message_id == Some(sent.message_id))
                .map(|m| m.message_id);
            menu.is_some()
        })
        .await;
        let menu = menu.unwrap();
        settle(&hub).await;
        let b = before(&hub);
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let data = button(&hub, menu, "Help").unwrap();
        let pressed = hub
            .fake
            .control()
            .press(Press {
                message_id: menu,
                data,
                user_id: None,
                token: None,
                chat_id: None,
            })
            .unwrap();
        let edited = || {
            transcript(&hub)
                .into_iter()
                .find(|m| m.message_id == menu)
                .is_some_and(|m| m.edited)
        };
        let answers = || {
            hub.fake
                .control()
                .chat(None, None)
                .unwrap()
                .callback_answers
                .into_iter()
                .filter(|a| a.callback_query_id == pressed.callback_query_id)
                .count()
        };
        let done = || match row.method {
            "editMessageText" => edited(),
            _ => answers() > 0,
        };
        match cell.expected {
            E::Dropped => {
                until(&format!("{w}: refused"), || outbox(&hub, "failed") > b.2).await;
            }
            _ => until(&format!("{w}: the effect"), done).await,
        }
        settle(&hub).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        // The other half of the tap is unaffected.
        match row.method {
            "editMessageText" => assert_eq!(answers(), 1, "{w}: the tap answered once"),
            _ => assert!(edited(), "{w}: the menu edited"),
        }
        match cell.expected {
            E::Retried => {
                assert!(done(), "{w}");
                assert!(made.len() >= 2, "{w}: {made:#?}");
                if row.method == "answerCallbackQuery" {
                    assert_eq!(answers(), 1, "{w}: one toast");
                }
                // The repeat of what had happened: Telegram says so, and that is all.
                if kind == FaultKind::CommitThenDrop {
                    let again = made.last().unwrap().error.clone().unwrap_or_default();
                    let said = match row.method {
                        "editMessageText" => "message is not modified",
                        _ => "query is too old",
                    };
                    assert!(again.contains(said), "{w}: {made:#?}");
                }
            }
            E::Late => {
                assert!(done(), "{w}");
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
            }
            E::FloodWaited => {
                assert!(done(), "{w}");
                assert_waited(&made, &w);
            }
            E::Dropped => {
                assert!(!done(), "{w}");
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
            }
            other => panic!("{w}: no check for {other:?}"),
        }
    }
    hub.stop().await;
}

/// pi answers with a button; the person taps it: the tapped button is restyled
/// (`editMessageReplyMarkup`) and its prompt goes to pi.
async fn prompt_buttons() {
    let mut hub = plain_hub().await;
    let _pi = Pi::start(&hub, "/work/web", 6001, Style::Plain).await;
    for (n, (row, kind, cell)) in cells_of(Test::PromptButtons).into_iter().enumerate() {
        let w = what(row, kind);
        settle(&hub).await;
        let label = format!("Pick {n}");
        let q = format!("which {n}?\n\n<!-- telegram_button [[{{{label}|go {n}}}]] -->");
        let floor = floor(&hub);
        hub.say(&q);
        let mut with_button = None;
        until(&format!("{w}: the answer with its button"), || {
            with_button = transcript(&hub)
                .into_iter()
                .filter(|m| m.from_bot && m.message_id > floor)
                .find_map(|m| button(&hub, m.message_id, &label).map(|d| (m.message_id, d)));
            with_button.is_some()
        })
        .await;
        let (message, data) = with_button.unwrap();
        settle(&hub).await;
        let b = before(&hub);
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        hub.fake
            .control()
            .press(Press {
                message_id: message,
                data,
                user_id: None,
                token: None,
                chat_id: None,
            })
            .unwrap();
        let chosen = || {
            transcript(&hub)
                .into_iter()
                .find(|m| m.message_id == message)
                .and_then(|m| m.reply_markup)
                .is_some_and(|k| k.to_string().contains("\"style\""))
        };
        let answer = format!("answer to go {n}");
        let is = ends_with(&answer);
        let want = Want { floor, is: &is };
        until(&format!("{w}: the tap's prompt answered"), || {
            !copies(&hub, &want).is_empty()
        })
        .await;
        match cell.expected {
            E::Dropped => {
                until(&format!("{w}: refused"), || outbox(&hub, "failed") > b.2).await;
            }
            _ => until(&format!("{w}: restyled"), chosen).await,
        }
        settle(&hub).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        assert_eq!(
            copies(&hub, &want).len(),
            1,
            "{w}: the prompt reached pi once"
        );
        match cell.expected {
            E::Retried => {
                assert!(chosen(), "{w}");
                assert!(made.len() >= 2, "{w}: {made:#?}");
                if kind == FaultKind::CommitThenDrop {
                    let again = made.last().unwrap().error.clone().unwrap_or_default();
                    assert!(again.contains("message is not modified"), "{w}: {made:#?}");
                    assert_eq!(outbox(&hub, "failed"), b.2, "{w}: taken as done");
                }
            }
            E::Late => {
                assert!(chosen(), "{w}");
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
            }
            E::FloodWaited => {
                assert!(chosen(), "{w}");
                assert_waited(&made, &w);
            }
            E::Dropped => {
                assert!(!chosen(), "{w}");
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
            }
            other => panic!("{w}: no check for {other:?}"),
        }
    }
    hub.stop().await;
}

/// Spoken answers: `voice.replyMode` "always" with a template that "synthesizes" by copying a
/// small Ogg file; pi's answer goes out as `sendVoice` with its words as the caption.
async fn voice() {
    let mut hub = TestHub::prepare(FakeConfig::default(), json!({})).await;
    enable_voice(&hub);
    hub.launch_tuned(tuned()).await;
    let _pi = Pi::start(&hub, "/work/web", 6101, Style::Plain).await;
    for (n, (row, kind, cell)) in cells_of(Test::Voice).into_iter().enumerate() {
        let w = what(row, kind);
        settle(&hub).await;
        let b = before(&hub);
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let q = format!("question {n}");
        let answer = format!("answer to {q}");
        let floor = floor(&hub);
        let spoken = |m: &TranscriptEntry| {
            m.media.as_ref().is_some_and(|x| x.kind == MediaKind::Voice)
                && m.text.as_deref().is_some_and(|t| t.ends_with(&answer))
        };
        let written = |m: &TranscriptEntry| {
            m.media.is_none() && m.text.as_deref().is_some_and(|t| t.ends_with(&answer))
        };
        hub.say(&q);
        if cell.expected == E::FellBack {
            let want = Want {
                floor,
                is: &written,
            };
            until(&format!("{w}: the written answer"), || {
                !copies(&hub, &want).is_empty()
            })
            .await;
            settle(&hub).await;
            hub.fake.control().clear_faults();
            assert_eq!(copies(&hub, &want).len(), 1, "{w}: written once");
            let voices = Want { floor, is: &spoken };
            assert!(copies(&hub, &voices).is_empty(), "{w}: no voice");
            assert_fired(&calls(&hub, since, row.method), kind, &w);
            continue;
        }
        let want = Want { floor, is: &spoken };
        check_message(&hub, row, kind, cell.expected, since, &want, None, b).await;
        hub.fake.control().clear_faults();
        let text = Want {
            floor,
            is: &written,
        };
        assert!(copies(&hub, &text).is_empty(), "{w}: spoken, not written");
    }
    hub.stop().await;
}

fn live_topics(hub: &TestHub) -> usize {
    hub.fake
        .control()
        .topics(Some(OWNER), None)
        .unwrap()
        .into_iter()
        .filter(|t| t.state != TopicState::Deleted)
        .count()
}

async fn topic_creation() {
    for (n, (row, kind, cell)) in cells_of(Test::TopicCreation).into_iter().enumerate() {
        let w = what(row, kind);
        let mut hub = TestHub::prepare(
            FakeConfig {
                has_topics_enabled: true,
                ..FakeConfig::default()
            },
            json!({}),
        )
        .await;
        // The capability probe (the slow clock) as slow as in production: nothing may wait
        // for it.
        hub.launch_tuned(hub::serve::Tuning {
            probe_every: Duration::from_secs(600),
            ..tuned()
        })
        .await;
        arm(&hub, row.method, kind);
        let _pi = Pi::start(&hub, "/work/web", 5601 + n as i64, Style::Plain).await;
        match cell.expected {
            E::AskedAboutTopic => {
                until(&format!("{w}: the question"), || {
                    transcript(&hub).iter().any(|m| {
                        m.text
                            .as_deref()
                            .is_some_and(|t| t.contains("cannot tell whether it was made"))
                    })
                })
                .await;
                let st = status(&hub);
                assert_eq!(st.intents.len(), 1, "{w}");
                assert_eq!(st.intents[0].state, "ambiguous", "{w}");
                assert_eq!(st.intents[0].slot, "A", "{w}: the slot is held");
                let arrived = usize::from(kind == FaultKind::CommitThenDrop);
                tokio::time::sleep(Duration::from_millis(700)).await;
                assert_eq!(live_topics(&hub), arrived, "{w}");
            }
            E::Late | E::FloodWaited => {
                until_topic(&hub, None).await;
                until(&format!("{w}: the greeting"), || {
                    transcript(&hub)
                        .iter()
                        .any(|m| m.from_bot && m.thread_id.is_some())
                })
                .await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                assert_eq!(live_topics(&hub), 1, "{w}");
                if cell.expected == E::FloodWaited {
                    let made = calls(&hub, 0, row.method);
                    assert_waited(&made, &w);
                    // Due on its own: not whenever something else wakes the topics task.
                    let gap = made[1].at_ms - made[0].at_ms;
                    assert!(
                        gap <= TOPIC_FLOOD_S * 1000 + 4000,
                        "{w}: created again only {gap} ms after a 429 with retry_after {TOPIC_FLOOD_S} s"
                    );
                }
            }
            E::Dropped => {
                until(&format!("{w}: the person told"), || {
                    transcript(&hub).iter().any(|m| {
                        m.from_bot
                            && m.text
                                .as_deref()
                                .is_some_and(|t| t.starts_with("Telegram refused a thread for"))
                    }) && outbox(&hub, "pending") == 0
                })
                .await;
                tokio::time::sleep(Duration::from_millis(700)).await;
                assert!(status(&hub).threads.is_empty(), "{w}");
                assert_eq!(live_topics(&hub), 0, "{w}");
            }
            other => panic!("{w}: no check for {other:?}"),
        }
        let made = calls(&hub, 0, row.method);
        assert_fired(&made, kind, &w);
        let expected_calls = if cell.expected == E::FloodWaited {
            2
        } else {
            1
        };
        assert_eq!(made.len(), expected_calls, "{w}: {made:#?}");
        hub.stop().await;
    }
}

/// Makes every pending cleanup due now (the reconciler's back-off is a minute and more; the
/// test does not wait for it). The topics task runs them at its next round.
fn cleanups_due_now(hub: &TestHub) {
    let db = store::Store::open(&hub.paths.state_db()).unwrap();
    db.write(|tx| {
        tx.execute(
            "UPDATE cleanups SET next_ms = 0 WHERE state = 'pending'",
            (),
        )
        .map_err(store::StoreError::sqlite("test"))
    })
    .unwrap();
}

/// The first pending cleanup's failed attempts and when it is due next (Unix ms).
fn first_cleanup(hub: &TestHub) -> Option<(i64, i64)> {
    let db = store::Store::open_for_reading(&hub.paths.state_db())
        .unwrap()
        .unwrap();
    db.read(store::threads::pending_cleanups)
        .unwrap()
        .first()
        .map(|c| (c.attempts, c.next_ms))
}

fn hub_now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The failed tries of the one pending cleanup (`None`: not exactly one pending).
fn cleanup_attempts(hub: &TestHub) -> Option<i64> {
    let db = store::Store::open_for_reading(&hub.paths.state_db())
        .unwrap()
        .unwrap();
    match db
        .read(store::threads::pending_cleanups)
        .unwrap()
        .as_slice()
    {
        [c] => Some(c.attempts),
        _ => None,
    }
}

fn pending_cleanups(hub: &TestHub) -> usize {
    let db = store::Store::open_for_reading(&hub.paths.state_db())
        .unwrap()
        .unwrap();
    db.read(store::threads::pending_cleanups).unwrap().len()
}

async fn topic_cleanup() {
    let mut hub = hub_with(
        FakeConfig {
            has_topics_enabled: true,
            ..FakeConfig::default()
        },
        json!({}),
    )
    .await;
    for (n, (row, kind, cell)) in cells_of(Test::TopicCleanup).into_iter().enumerate() {
        let w = what(row, kind);
        let cwd = format!("/work/p{n}");
        let pi = Pi::start(&hub, &cwd, 5701 + n as i64, Style::Plain).await;
        let topic = until_topic(&hub, None).await;
        settle(&hub).await;
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        // No earlier than the reconciler's clock when it makes the call and its back-off.
        let before_call_ms = hub_now_ms();
        pi.send(json!({ "type": "bye", "reason": "disconnect" }));
        let gone = || {
            hub.fake
                .control()
                .topics(Some(OWNER), None)
                .unwrap()
                .into_iter()
                .any(|t| t.thread_id == topic && t.state == TopicState::Deleted)
        };
        until(&format!("{w}: the first call"), || {
            !calls(&hub, since, row.method).is_empty()
        })
        .await;
        match cell.expected {
            E::Retried | E::Late | E::FloodWaited => {
                if cell.expected == E::Retried {
                    // Recorded, not only called: tg-fake logs the call before the hub has
                    // its answer, and until the hub commits the failure the cleanup is
                    // still due at once.
                    until(&format!("{w}: the retry queued"), || {
                        pending_cleanups(&hub) == 1
                            && first_cleanup(&hub).is_some_and(|(attempts, _)| attempts == 1)
                    })
                    .await;
                    assert_eq!(calls(&hub, since, row.method).len(), 1, "{w}");
                    // Never in a loop: the next try is a minute after the failed one (the
                    // first back-off), measured from before the call however long the
                    // machine took to make it and to let this test look.
                    let (_, next) = first_cleanup(&hub).unwrap();
                    assert!(
                        next >= before_call_ms + 60_000,
                        "{w}: retried too soon: due {} ms after the call started",
                        next - before_call_ms
                    );
                    cleanups_due_now(&hub);
                }
                until(&format!("{w}: the topic deleted"), gone).await;
            }
            E::CleanupDone => {
                if kind == FaultKind::CommitThenDrop {
                    until(&format!("{w}: the retry queued"), || {
                        cleanup_attempts(&hub) == Some(1)
                    })
                    .await;
                    cleanups_due_now(&hub);
                }
            }
            other => panic!("{w}: no check for {other:?}"),
        }
        until(&format!("{w}: the cleanup done"), || {
            pending_cleanups(&hub) == 0
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        match (cell.expected, kind) {
            (E::Late, _) => assert_eq!(made.len(), 1, "{w}: {made:#?}"),
            (E::FloodWaited, _) => assert_waited(&made, &w),
            (E::CleanupDone, FaultKind::ThreadNotFound) => {
                assert_eq!(made.len(), 1, "{w}: not retried: {made:#?}");
            }
            _ => assert_eq!(made.len(), 2, "{w}: {made:#?}"),
        }
        assert!(
            status(&hub).threads.iter().all(|t| t.thread_id != topic),
            "{w}"
        );
    }
    hub.stop().await;
}

async fn files_in() {
    let mut hub = plain_hub().await;
    let _pi = Pi::start(&hub, "/work/web", 5801, Style::Plain).await;
    for (n, (row, kind, cell)) in cells_of(Test::FilesIn).into_iter().enumerate() {
        let w = what(row, kind);
        settle(&hub).await;
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let caption = format!("file {n}");
        let name = format!("notes-{n}.txt");
        let floor = floor(&hub);
        hub.fake
            .control()
            .send_media(SendMedia {
                item: MediaItem {
                    kind: MediaKind::Document,
                    data_base64: "aGVsbG8gd29ybGQK".into(),
                    filename: Some(name.clone()),
                    mime_type: Some("text/plain".into()),
                    caption: Some(caption.clone()),
                },
                thread_id: None,
                user_id: None,
                reply_to_message_id: None,
                token: None,
                chat_id: None,
            })
            .unwrap();
        // pi answers "answer to <prompt>": the prompt holds the caption and the file's fate.
        let is = |m: &TranscriptEntry| {
            m.text
                .as_deref()
                .is_some_and(|t| t.starts_with("answer to") && t.contains(&caption))
        };
        let want = Want { floor, is: &is };
        until(&format!("{w}: pi answered"), || {
            !copies(&hub, &want).is_empty()
        })
        .await;
        settle(&hub).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        let got = copies(&hub, &want);
        assert_eq!(got.len(), 1, "{w}: pi prompted once: {got:#?}");
        let prompt = got[0].0.text.clone().unwrap_or_default();
        let saved = std::fs::read_dir(hub.dir.path().join("tmp/telegram/default"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(&name))
                    .count()
            })
            .unwrap_or(0);
        let told = transcript(&hub).iter().any(|m| {
            m.from_bot
                && m.message_id > floor
                && m.text
                    .as_deref()
                    .is_some_and(|t| t.contains("was not downloaded"))
        });
        match cell.expected {
            E::Retried | E::Late | E::FloodWaited => {
                assert_eq!(saved, 1, "{w}: saved once");
                assert!(!told, "{w}");
                let last = made.last().unwrap();
                assert_eq!(last.status, Some(200), "{w}: {made:#?}");
                match cell.expected {
                    E::Retried => assert!(made.len() >= 2, "{w}: {made:#?}"),
                    E::Late => assert_eq!(made.len(), 1, "{w}: {made:#?}"),
                    _ => assert_waited(&made, &w),
                }
            }
            E::FileFailed => {
                assert_eq!(saved, 0, "{w}: nothing saved");
                assert!(told, "{w}: the person told");
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
                assert!(prompt.contains(&caption), "{w}");
            }
            other => panic!("{w}: no check for {other:?}"),
        }
    }
    hub.stop().await;
}

/// Files for pi to attach with `method`: a PNG for a photo, a text for a document, two texts
/// for an album. Their paths.
fn out_files(dir: &std::path::Path, method: &str, n: usize) -> Vec<String> {
    match method {
        "sendPhoto" => vec![format!("pic-{n}.png")],
        "sendDocument" => vec![format!("doc-{n}.txt")],
        _ => vec![format!("a-{n}.txt"), format!("b-{n}.txt")],
    }
    .into_iter()
    .map(|name| {
        let path = dir.join(&name);
        let bytes: Vec<u8> = if name.ends_with(".png") {
            PNG.to_vec()
        } else {
            format!("contents of {name}").into_bytes()
        };
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    })
    .collect()
}

/// Spoken answers for every answer (`voice.replyMode` "always", the words as the caption),
/// made by a script that writes an Ogg header and the words it reads.
fn enable_voice(hub: &TestHub) {
    let tts = hub.dir.path().join("tts.sh");
    std::fs::write(&tts, "#!/bin/sh\n{ printf 'OggS'; cat; } > \"$1\"\n").unwrap();
    let mut perms = std::fs::metadata(&tts).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&tts, perms).unwrap();
    let path = hub.dir.path().join("telegram.json");
    let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["outboundHandlers"] =
        // Run by sh: a script just written can be busy (ETXTBSY) while another test's child
        // still holds the writing descriptor.
        json!([{ "type": "voice", "template": format!("/bin/sh {} {{ogg}}", tts.display()) }]);
    cfg["voice"] = json!({ "replyMode": "always", "sendTranscript": true });
    std::fs::write(&path, cfg.to_string()).unwrap();
}

/// A 1×1 PNG.
const PNG: [u8; 70] = [
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0,
    0, 0, 31, 21, 196, 137, 0, 0, 0, 13, 73, 68, 65, 84, 120, 218, 99, 100, 96, 248, 95, 15, 0, 2,
    135, 1, 128, 235, 71, 186, 146, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

async fn files_out() {
    let mut hub = plain_hub().await;
    let pi = Pi::start(&hub, "/work/web", 5901, Style::Plain).await;
    let files = tempfile::tempdir().unwrap();
    for (n, (row, kind, cell)) in cells_of(Test::FilesOut).into_iter().enumerate() {
        let w = what(row, kind);
        let paths = out_files(files.path(), row.method, n);
        let parts = paths.len();
        settle(&hub).await;
        let b = before(&hub);
        let since = last_seq(&hub);
        let floor = floor(&hub);
        arm(&hub, row.method, kind);
        pi.send(
            json!({ "type": "tool_call", "id": format!("t{n}"), "tool": "telegram_attach",
            "turn_id": null, "args": { "paths": paths } }),
        );
        let arrived = || {
            transcript(&hub)
                .iter()
                .filter(|m| m.from_bot && m.message_id > floor && m.media.is_some())
                .count()
                / parts
        };
        match cell.expected {
            E::Ambiguous => {
                until(&format!("{w}: ambiguous"), || {
                    outbox(&hub, "ambiguous") > b.1
                })
                .await;
            }
            E::Dropped => until(&format!("{w}: failed"), || outbox(&hub, "failed") > b.2).await,
            _ => {
                until(&format!("{w}: uploaded"), || {
                    arrived() > 0 || {
                        let r = calls(&hub, since, row.method);
                        assert!(r.iter().all(|r| r.status != Some(400)), "{w}: {r:#?}");
                        false
                    }
                })
                .await;
            }
        }
        settle(&hub).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        match cell.expected {
            E::Ambiguous => {
                assert_eq!(
                    arrived(),
                    usize::from(kind == FaultKind::CommitThenDrop),
                    "{w}"
                );
                assert_eq!(made.len(), 1, "{w}: not repeated: {made:#?}");
            }
            E::Dropped => {
                assert_eq!(arrived(), 0, "{w}");
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
            }
            E::Late => {
                assert_eq!(arrived(), 1, "{w}");
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
            }
            E::FloodWaited => {
                assert_eq!(arrived(), 1, "{w}");
                assert_waited(&made, &w);
            }
            other => panic!("{w}: no check for {other:?}"),
        }
    }
    hub.stop().await;
}

/// Two pis in Threaded Mode: a message in the main chat waits for the person's choice, and its
/// chooser (a question that waits for the person) is pinned once it is there and unpinned
/// when a tap settles it. The pin's cells fault the pin, the unpin's cells the unpin.
async fn pins() {
    let mut hub = hub_with(
        FakeConfig {
            has_topics_enabled: true,
            ..FakeConfig::default()
        },
        json!({}),
    )
    .await;
    let _web = Pi::start(&hub, "/work/web", 6201, Style::Plain).await;
    let _api = Pi::start(&hub, "/work/api", 6202, Style::Plain).await;
    until("two topics", || live_topics(&hub) >= 2).await;
    for (n, (row, kind, cell)) in cells_of(Test::Pins).into_iter().enumerate() {
        let w = what(row, kind);
        let pin = row.method == "pinChatMessage";
        settle(&hub).await;
        let mut b = before(&hub);
        let mut since = last_seq(&hub);
        let floor = floor(&hub);
        if pin {
            arm(&hub, row.method, kind);
        }
        let text = format!("job {n}");
        say_in(&hub, None, &text);
        let mut chooser = None;
        until(&format!("{w}: the chooser"), || {
            chooser = transcript(&hub)
                .into_iter()
                .filter(|m| m.from_bot && m.message_id > floor)
                .find_map(|m| button(&hub, m.message_id, "Send to web").map(|d| (m.message_id, d)));
            chooser.is_some()
        })
        .await;
        let (chooser, data) = chooser.unwrap();
        let pinned = || {
            transcript(&hub)
                .iter()
                .any(|m| m.message_id == chooser && m.pinned)
        };
        let made = |since: u64| {
            calls(&hub, since, row.method)
                .into_iter()
                .filter(|r| r.params["message_id"].as_i64() == Some(chooser))
                .collect::<Vec<_>>()
        };
        if pin {
            until(&format!("{w}: the pin tried"), || !made(since).is_empty()).await;
        } else {
            until(&format!("{w}: pinned"), pinned).await;
            settle(&hub).await;
            b = before(&hub);
            since = last_seq(&hub);
            arm(&hub, row.method, kind);
        }
        let answer = format!("answer to {text}");
        let is = ends_with(&answer);
        let want = Want { floor, is: &is };
        let press = || {
            hub.fake
                .control()
                .press(Press {
                    message_id: chooser,
                    data: data.clone(),
                    user_id: None,
                    token: None,
                    chat_id: None,
                })
                .unwrap();
        };
        if !pin {
            press();
            until(&format!("{w}: the prompt answered"), || {
                !copies(&hub, &want).is_empty()
            })
            .await;
            until(&format!("{w}: the unpin tried"), || !made(since).is_empty()).await;
        }
        settle(&hub).await;
        // A pin (or an unpin) that went through: the chooser's state as it should be after it.
        let done = pin == pinned();
        let made = made(since);
        assert_fired(&made, kind, &w);
        let failed = outbox(&hub, "failed") - b.2;
        match cell.expected {
            E::TriedOnce => {
                assert_eq!(made.len(), 1, "{w}: not tried again: {made:#?}");
                assert_eq!(failed, 1, "{w}: the row failed");
                assert_eq!(done, kind == FaultKind::CommitThenDrop, "{w}");
            }
            E::Dropped => {
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
                assert_eq!(failed, 1, "{w}: the row failed");
                assert!(!done, "{w}");
            }
            E::Late => {
                assert_eq!(made.len(), 1, "{w}: {made:#?}");
                assert_eq!(failed, 0, "{w}");
                assert!(done, "{w}");
            }
            E::FloodWaited => {
                assert_waited(&made, &w);
                assert_eq!(made.len(), 2, "{w}: {made:#?}");
                assert!(done, "{w}");
            }
            other => panic!("{w}: no check for {other:?}"),
        }
        hub.fake.control().clear_faults();
        if pin {
            // The question works as ever: the tap's prompt reaches pi, and a pinned chooser
            // is unpinned.
            press();
            until(&format!("{w}: the prompt answered"), || {
                !copies(&hub, &want).is_empty()
            })
            .await;
            until(&format!("{w}: not pinned once settled"), || !pinned()).await;
        }
        settle(&hub).await;
        assert_eq!(
            copies(&hub, &want).len(),
            1,
            "{w}: the prompt answered once"
        );
    }
    hub.stop().await;
}

/// A turn that streams for a while: its message shows ✍ (running) at once and 👌 (answered)
/// after it; the fault meets the ✍.
async fn reactions() {
    let mut hub = hub_with(
        FakeConfig::default(),
        json!({ "assistant": { "draftPreviews": false } }),
    )
    .await;
    let _pi = Pi::start(&hub, "/work/web", 6301, Style::Streaming).await;
    let emoji = |r: &RequestEntry| {
        r.params
            .pointer("/reaction/0/emoji")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    for (n, (row, kind, cell)) in cells_of(Test::Reactions).into_iter().enumerate() {
        let w = what(row, kind);
        settle(&hub).await;
        let since = last_seq(&hub);
        arm(&hub, row.method, kind);
        let q = format!("question {n}");
        let a = format!("answer to {q}");
        let is = ends_with(&a);
        let want = Want {
            floor: floor(&hub),
            is: &is,
        };
        let sent = hub.say(&q);
        let shown = || {
            transcript(&hub)
                .into_iter()
                .find(|m| m.message_id == sent.message_id)
                .and_then(|m| {
                    m.bot_reactions
                        .first()
                        .and_then(|r| r["emoji"].as_str().map(str::to_owned))
                })
        };
        until(&format!("{w}: answered, 👌 shown"), || {
            !copies(&hub, &want).is_empty() && shown().as_deref() == Some("👌")
        })
        .await;
        settle(&hub).await;
        hub.fake.control().clear_faults();
        let made: Vec<_> = calls(&hub, since, row.method)
            .into_iter()
            .filter(|r| r.params["message_id"].as_i64() == Some(sent.message_id))
            .collect();
        assert_fired(&made, kind, &w);
        assert_eq!(copies(&hub, &want).len(), 1, "{w}: the answer once");
        let faulted = made
            .iter()
            .find(|c| c.fault.as_deref() == Some(kind_name(kind).as_str()))
            .unwrap();
        assert_eq!(emoji(faulted), "✍", "{w}: the fault met the running fate");
        let last = made.last().unwrap();
        assert_eq!(
            (emoji(last).as_str(), last.status),
            ("👌", Some(200)),
            "{w}"
        );
        assert_eq!(made.len(), 2, "{w}: ✍ then 👌, nothing repeated: {made:#?}");
        match cell.expected {
            E::Superseded => assert_ne!(faulted.status, Some(200), "{w}"),
            E::Late => assert_eq!(faulted.status, Some(200), "{w}"),
            E::FloodWaited => assert_waited(&made, &w),
            other => panic!("{w}: no check for {other:?}"),
        }
    }
    hub.stop().await;
}

/// A turn that runs 6 s gets the working card (a silent message with ⏹ Stop), deleted after
/// the answer; `test`'s cells fault the card's `sendMessage` or its `deleteMessage`.
async fn cards(test: Test) {
    let mut hub = plain_hub().await;
    let _pi = Pi::start(&hub, "/work/web", 6401, Style::Long).await;
    let working = hub::outgoing::texts::working();
    for (n, (row, kind, cell)) in cells_of(test).into_iter().enumerate() {
        let w = what(row, kind);
        settle(&hub).await;
        let since = last_seq(&hub);
        let floor = floor(&hub);
        arm(&hub, row.method, kind);
        let q = format!("long question {n}");
        let a = format!("answer to {q}");
        let is = ends_with(&a);
        let want = Want { floor, is: &is };
        hub.say(&q);
        until(&format!("{w}: the answer"), || {
            !copies(&hub, &want).is_empty()
        })
        .await;
        let card_calls = || {
            calls(&hub, since, "sendMessage")
                .into_iter()
                .filter(|r| r.params["text"].as_str() == Some(working.as_str()))
                .collect::<Vec<_>>()
        };
        let cards = || {
            transcript(&hub)
                .into_iter()
                .filter(|m| m.from_bot && m.message_id > floor)
                .filter(|m| m.text.as_deref() == Some(working.as_str()))
                .collect::<Vec<_>>()
        };
        let live = || cards().iter().filter(|m| !m.deleted).count();
        // The card's fate: shown and deleted, or the faulted call made.
        until(&format!("{w}: the card settled"), || match cell.expected {
            E::PreviewSkipped | E::CardStays => !calls(&hub, since, row.method).is_empty(),
            _ => !cards().is_empty() && live() == 0,
        })
        .await;
        settle(&hub).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        hub.fake.control().clear_faults();
        let made = calls(&hub, since, row.method);
        assert_fired(&made, kind, &w);
        assert_eq!(copies(&hub, &want).len(), 1, "{w}: the answer once");
        let sent = card_calls();
        assert_eq!(sent.len(), 1, "{w}: one card: {sent:#?}");
        if test == Test::CardSent {
            assert_eq!(
                sent[0].fault.as_deref(),
                Some(kind_name(kind).as_str()),
                "{w}: the fault met the card"
            );
        }
        match cell.expected {
            E::PreviewSkipped => {
                assert!(cards().is_empty(), "{w}: no card: {:#?}", cards());
            }
            E::CardStays => assert_eq!(live(), 1, "{w}: the card stays"),
            E::Late | E::Retried | E::FloodWaited => {
                assert_eq!(cards().len(), 1, "{w}: the card showed");
                assert_eq!(live(), 0, "{w}: the card deleted");
                let deletes = calls(&hub, since, "deleteMessage");
                match cell.expected {
                    E::Late => assert_eq!(deletes.len(), 1, "{w}: {deletes:#?}"),
                    E::Retried => assert!(deletes.len() >= 2, "{w}: {deletes:#?}"),
                    _ => assert_waited(&deletes, &w),
                }
            }
            other => panic!("{w}: no check for {other:?}"),
        }
        if cell.expected == E::CardStays && test == Test::CardDeleted {
            assert_eq!(made.len(), 1, "{w}: not tried again: {made:#?}");
        }
    }
    hub.stop().await;
}
