//! The handlers over a real SQLite store: journaled Telegram updates (messages, edits, reactions,
//! button taps) go through `hub::incoming::handlers::handle` exactly as the worker calls it, and
//! each test asserts on what the store holds afterwards (turns, controls, outbox rows, journal
//! outcomes). No transport, no conductor, no sender: only what one update does.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use hub::buttons::{Button, QueueOp};
use hub::config::PairingMode;
use hub::incoming::handlers::{self, AfterCommit, HandlerCtx};
use hub::outgoing::outbound::{self, BUTTON_TTL_MS};
use hub::outgoing::texts;
use hub::state::SELECTED;
use serde_json::{Value, json};
use store::controls::{self, Control};
use store::instances::{self, InstanceRow};
use store::lease::{self, Epoch};
use store::outbox::{self, OutboxRow, Purpose};
use store::threads::{self as tables, Binding, BindingState};
use store::turns::{self, Lane, Turn, TurnState};
use store::{Store, StoreError, callbacks, journal, kv};

/// The owner's user id (and their private chat's id).
const OWNER: i64 = 4242;
/// Someone else who writes to the bot.
const STRANGER: i64 = 777;
/// The bot's own user id (the author of the messages that carry buttons).
const BOT: i64 = 99;
/// The clock at the start of every test.
const NOW: i64 = 1_700_000_000_000;
/// The pi most tests talk to, and the name people see for it.
const PROJ: &str = "/home/ann/proj";
const PROJ_LABEL: &str = "proj";

/// What handling one update did.
#[derive(Debug)]
struct Done {
    update_id: i64,
    outcome: String,
    after: AfterCommit,
}

/// A store with an owner and a lease, and a Telegram that makes up update and message ids.
struct Hub {
    _dir: tempfile::TempDir,
    store: Store,
    epoch: Epoch,
    config: PathBuf,
    now: i64,
    next_update: i64,
    next_message: i64,
    next_instance: i64,
}

fn user(id: i64) -> Value {
    json!({ "id": id, "is_bot": false, "first_name": "Ann" })
}

fn private_chat(id: i64) -> Value {
    json!({ "id": id, "type": "private", "first_name": "Ann" })
}

fn reactions(emojis: &[&str]) -> Value {
    Value::Array(
        emojis
            .iter()
            .map(|e| json!({ "type": "emoji", "emoji": e }))
            .collect(),
    )
}

impl Hub {
    fn new() -> Hub {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let epoch = store
            .write(|tx| {
                kv::set_i64(tx, kv::OWNER, OWNER)?;
                lease::acquire(tx, 1, NOW)
            })
            .unwrap();
        // No telegram.json: the settings menu shows the defaults.
        let config = dir.path().join("telegram.json");
        Hub {
            _dir: dir,
            store,
            epoch,
            config,
            now: NOW,
            next_update: 1000,
            next_message: 100,
            next_instance: 1,
        }
    }

    /// A store without an owner yet, with the pairing code `code` open (as `setup` opens it).
    fn unpaired(code: &str) -> Hub {
        let h = Hub::new();
        h.store
            .write(|tx| {
                kv::delete(tx, kv::OWNER)?;
                store::pairing::open(
                    tx,
                    &hub::pairing::hash(code),
                    NOW,
                    hub::pairing::CODE_TTL_MS,
                    hub::pairing::CODE_ATTEMPTS,
                )
            })
            .unwrap();
        h
    }

    /// A hub with `PROJ` connected and selected (classic mode).
    fn with_proj() -> Hub {
        let mut h = Hub::new();
        h.connect(PROJ);
        h.select(PROJ);
        h
    }

    /// A live pi instance of `identity`; returns its instance id.
    fn connect(&mut self, identity: &str) -> String {
        let id = format!("i{}", self.next_instance);
        self.next_instance += 1;
        let label = hub::names::label_of(identity);
        let row = InstanceRow {
            id: id.clone(),
            identity: identity.into(),
            transport: store::instances::Transport::Shim,
            pid: Some(4000 + self.next_instance),
            cwd: identity.into(),
            label,
            session_id: None,
            state: store::instances::InstanceState::Idle,
            connected_ms: self.now + self.next_instance,
            gone_ms: None,
            gone_reason: None,
        };
        self.store.write(|tx| instances::insert(tx, &row)).unwrap();
        id
    }

    fn select(&self, identity: &str) {
        self.store
            .write(|tx| kv::set(tx, SELECTED, identity))
            .unwrap();
    }

    fn ctx(&self) -> HandlerCtx {
        HandlerCtx {
            bot_username: "pibot".into(),
            pairing: PairingMode::Code,
            now_ms: self.now,
            clock: hub::clock::Clock::real(),
            epoch: self.epoch,
            title_template: "{slot} · {project}".into(),
            config_path: self.config.clone(),
            profile: hub::paths::ProfileName::default_profile(),
        }
    }

    /// Journals `{update_id, <kind>: body}` (as the poller does) and handles it (as the worker
    /// does: effects and the "handled" mark in one transaction).
    fn deliver(&mut self, kind: &str, body: Value) -> Done {
        let update_id = self.next_update;
        self.next_update += 1;
        let raw = json!({ "update_id": update_id, kind: body }).to_string();
        let ctx = self.ctx();
        let (outcome, after) = self
            .store
            .write(|tx| {
                journal::append_batch(
                    tx,
                    &[journal::Incoming {
                        update_id,
                        kind,
                        raw: &raw,
                    }],
                    update_id + 1,
                    ctx.now_ms,
                )?;
                let entry = journal::pending(tx, 100)?
                    .into_iter()
                    .find(|e| e.update_id == update_id)
                    .unwrap();
                let mut after = AfterCommit::default();
                let outcome = handlers::handle(tx, &ctx, &entry, &mut after)?;
                Ok::<_, StoreError>((outcome, after))
            })
            .unwrap();
        let recorded = self.store.read(|c| journal::outcome(c, update_id)).unwrap();
        assert_eq!(
            recorded.map(|(_, o)| o),
            Some(outcome.clone()),
            "the journal records the outcome"
        );
        // The text in the journal's column, which the tests below compare.
        let stored: String = self
            .store
            .read(|c| {
                c.query_row(
                    "SELECT outcome FROM journal WHERE update_id = ?1",
                    [update_id],
                    |r| r.get(0),
                )
                .map_err(StoreError::from)
            })
            .unwrap();
        assert_eq!(stored, outcome.to_string());
        Done {
            update_id,
            outcome: stored,
            after,
        }
    }

    /// A new message from `from` in their private chat (in topic `thread` if given).
    fn write_in(&mut self, from: i64, thread: Option<i64>, text: &str) -> (i64, Done) {
        let message_id = self.next_message;
        self.next_message += 1;
        let mut m = json!({
            "message_id": message_id,
            "from": user(from),
            "chat": private_chat(from),
            "date": self.now / 1000,
            "text": text,
        });
        if let Some(t) = thread {
            m["message_thread_id"] = json!(t);
            m["is_topic_message"] = json!(true);
        }
        if text.starts_with('/') {
            let len = text.split_whitespace().next().unwrap_or("").len();
            m["entities"] = json!([{ "type": "bot_command", "offset": 0, "length": len }]);
        }
        (message_id, self.deliver("message", m))
    }

    /// A new message from the owner in the main chat.
    fn write(&mut self, text: &str) -> (i64, Done) {
        self.write_in(OWNER, None, text)
    }

    /// A prompt from the owner and the turn it became.
    fn prompt(&mut self, text: &str) -> (i64, Turn) {
        let (mid, d) = self.write(text);
        assert!(d.outcome.starts_with("queued"), "{}", d.outcome);
        (mid, self.turn_of(mid))
    }

    /// The owner edits message `message_id`.
    fn edit(&mut self, message_id: i64, text: &str) -> Done {
        self.deliver(
            "edited_message",
            json!({
                "message_id": message_id,
                "from": user(OWNER),
                "chat": private_chat(OWNER),
                "date": self.now / 1000 - 5,
                "edit_date": self.now / 1000,
                "text": text,
            }),
        )
    }

    /// `from` changes their reaction on message `message_id` of the owner's chat.
    fn react(&mut self, from: i64, message_id: i64, old: &[&str], new: &[&str]) -> Done {
        self.deliver(
            "message_reaction",
            json!({
                "chat": private_chat(OWNER),
                "message_id": message_id,
                "user": user(from),
                "date": self.now / 1000,
                "old_reaction": reactions(old),
                "new_reaction": reactions(new),
            }),
        )
    }

    /// `from` taps a button with `data` on the bot's message `message_id` (whose text is
    /// `text`) in `from`'s chat. Returns the callback query id with the outcome.
    fn tap(&mut self, from: i64, message_id: i64, text: &str, data: &str) -> (String, Done) {
        let query = format!("q{}", self.next_update);
        let d = self.deliver(
            "callback_query",
            json!({
                "id": query,
                "from": user(from),
                "message": {
                    "message_id": message_id,
                    "from": { "id": BOT, "is_bot": true, "first_name": "pi", "username": "pibot" },
                    "chat": private_chat(from),
                    "date": self.now / 1000 - 60,
                    "text": text,
                },
                "chat_instance": "-123456789",
                "data": data,
            }),
        );
        (query, d)
    }

    fn turn(&self, id: i64) -> Turn {
        self.store.read(|c| turns::get(c, id)).unwrap().unwrap()
    }

    fn turn_of(&self, message_id: i64) -> Turn {
        self.turn_in(OWNER, message_id)
    }

    /// The turn message `message_id` of `chat` became.
    fn turn_in(&self, chat: i64, message_id: i64) -> Turn {
        self.store
            .read(|c| turns::by_message(c, chat, message_id))
            .unwrap()
            .unwrap()
    }

    fn turn_count(&self) -> i64 {
        self.store
            .read(|c| {
                c.query_row("SELECT count(*) FROM turns", [], |r| r.get(0))
                    .map_err(StoreError::from)
            })
            .unwrap()
    }

    fn queue(&self, identity: &str) -> Vec<i64> {
        self.store
            .read(|c| turns::queue_of(c, identity))
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect()
    }

    /// The outbox rows update `update_id` queued.
    fn rows_of(&self, update_id: i64) -> Vec<OutboxRow> {
        self.store
            .read(outbox::all)
            .unwrap()
            .into_iter()
            .filter(|r| r.source_update_id == Some(update_id))
            .collect()
    }

    /// The single outbox row update `update_id` queued.
    fn only_row_of(&self, update_id: i64) -> OutboxRow {
        let rows = self.rows_of(update_id);
        assert_eq!(rows.len(), 1, "one row: {rows:#?}");
        rows.into_iter().next().unwrap()
    }

    fn all_rows(&self) -> Vec<OutboxRow> {
        self.store.read(outbox::all).unwrap()
    }

    fn controls(&self) -> Vec<Control> {
        self.store.read(controls::open).unwrap()
    }

    /// `queued -> dispatched` to `PROJ`'s instance, as the conductor does.
    fn dispatch(&self, turn: i64) {
        self.store
            .write(|tx| {
                turns::mark_dispatched(
                    tx,
                    turn,
                    "i1",
                    Some(4002),
                    store::instances::Transport::Shim,
                    self.now,
                )
            })
            .unwrap();
    }

    /// The button `action` for `owner`, as a token (made like the hub makes them).
    fn token_for(&self, owner: i64, action: &Button, ttl: i64) -> String {
        let b = self
            .store
            .write(|tx| {
                outbound::button(
                    tx,
                    &hub::clock::Clock::real(),
                    owner,
                    "label",
                    action,
                    self.now,
                    ttl,
                )
            })
            .unwrap();
        b["callback_data"].as_str().unwrap().to_owned()
    }

    /// The action a token stands for, if the owner may use it now.
    fn action_of(&self, token: &str) -> Option<Button> {
        self.store
            .read(|c| callbacks::lookup(c, token, OWNER, self.now))
            .unwrap()
            .and_then(|a| Button::decode(&a))
    }
}

/// The `(label, token)` of every button of a `sendMessage`/`editMessageText` row.
fn buttons_of(row: &OutboxRow) -> Vec<(String, String)> {
    row.params()["reply_markup"]["inline_keyboard"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .flat_map(|r| r.as_array().cloned().unwrap_or_default())
                .map(|b| {
                    (
                        b["text"].as_str().unwrap_or_default().to_owned(),
                        b["callback_data"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The token of the button labelled `label`.
fn token(row: &OutboxRow, label: &str) -> String {
    buttons_of(row)
        .into_iter()
        .find(|(l, _)| l == label)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no button {label:?} in {:#?}", buttons_of(row)))
}

fn text_of(row: &OutboxRow) -> &str {
    row.params()["text"].as_str().unwrap_or_default()
}

/// Asserts that a tap did nothing but get `unknown_button` as its answer.
fn assert_only_answered(h: &Hub, query: &str, d: &Done) {
    let row = h.only_row_of(d.update_id);
    assert_eq!(row.method(), "answerCallbackQuery");
    assert_eq!(
        row.chat_id, 0,
        "tap answers are not chat messages: their own queue"
    );
    assert_eq!(row.params()["callback_query_id"], json!(query));
    assert_eq!(row.params()["text"], json!(texts::unknown_button()));
    assert!(!d.after.turns, "{d:?}");
}

// ---------------------------------------------------------------------------------------------
// Reactions
// ---------------------------------------------------------------------------------------------

#[test]
fn positive_reactions_move_a_waiting_prompt_to_the_front_and_removing_them_undoes_it() {
    let mut h = Hub::with_proj();
    let (_, ahead) = h.prompt("already waiting");
    // ❤ comes with a variation selector from most clients.
    for emoji in ["👍", "❤️", "❤", "🔥", "⚡"] {
        let (mid, t) = h.prompt(&format!("prompt for {emoji}"));
        assert_eq!(t.lane, Lane::Normal);
        assert_eq!(h.queue(PROJ).last(), Some(&t.id));

        let d = h.react(OWNER, mid, &[], &[emoji]);
        assert_eq!(d.outcome, "reaction:priority", "{emoji}");
        assert!(d.after.turns, "the conductor is woken");
        let now = h.turn(t.id);
        assert_eq!(now.lane, Lane::Priority, "{emoji}");
        assert!(!now.skip);
        assert_eq!(
            h.queue(PROJ).first(),
            Some(&t.id),
            "{emoji}: dispatch takes it first"
        );
        assert!(h.rows_of(d.update_id).is_empty(), "a reaction says nothing");

        let d = h.react(OWNER, mid, &[emoji], &[]);
        assert_eq!(d.outcome, "reaction:normal", "{emoji}");
        assert_eq!(h.turn(t.id).lane, Lane::Normal, "{emoji}: undone");
        assert_eq!(h.queue(PROJ).first(), Some(&ahead.id));
        assert!(h.rows_of(d.update_id).is_empty());
    }
}

#[test]
fn a_thumbs_down_marks_a_waiting_prompt_skipped_and_removing_it_keeps_it() {
    let mut h = Hub::with_proj();
    let (mid, t) = h.prompt("maybe not");

    let d = h.react(OWNER, mid, &[], &["👎"]);
    assert_eq!(d.outcome, "reaction:skip");
    let now = h.turn(t.id);
    assert!(now.skip);
    assert_eq!(now.lane, Lane::Normal, "a skip keeps the lane");
    assert_eq!(
        now.state,
        TurnState::Queued,
        "skipped when dispatch reaches it"
    );
    assert!(h.rows_of(d.update_id).is_empty());

    let d = h.react(OWNER, mid, &["👎"], &[]);
    assert_eq!(d.outcome, "reaction:keep");
    assert!(!h.turn(t.id).skip, "undone");
}

#[test]
fn changing_a_reaction_moves_only_the_category_that_changed() {
    let mut h = Hub::with_proj();
    let (mid, t) = h.prompt("hmm");
    h.react(OWNER, mid, &[], &["👍"]);
    // 👍 -> 👎: out of the priority lane, and skipped.
    let d = h.react(OWNER, mid, &["👍"], &["👎"]);
    assert_eq!(d.outcome, "reaction:normal+skip");
    let now = h.turn(t.id);
    assert_eq!((now.lane, now.skip), (Lane::Normal, true));
    // 👎 -> 👎 🔥: the skip stays, the priority comes back.
    let d = h.react(OWNER, mid, &["👎"], &["👎", "🔥"]);
    assert_eq!(d.outcome, "reaction:priority");
    let now = h.turn(t.id);
    assert_eq!((now.lane, now.skip), (Lane::Priority, true));
    // A reaction of neither kind changes nothing.
    let d = h.react(OWNER, mid, &["👎", "🔥"], &["👎", "🔥", "🤔"]);
    assert_eq!(d.outcome, "reaction:unchanged");
    let now = h.turn(t.id);
    assert_eq!((now.lane, now.skip), (Lane::Priority, true));
}

#[test]
fn a_reaction_on_a_prompt_pi_has_changes_nothing_and_says_nothing() {
    let mut h = Hub::with_proj();
    let (running_mid, running) = h.prompt("running");
    h.dispatch(running.id);
    let (done_mid, done) = h.prompt("answered");
    h.store
        .write(|tx| {
            turns::mark_dispatched(
                tx,
                done.id,
                "i1",
                Some(4002),
                store::instances::Transport::Shim,
                NOW,
            )?;
            turns::mark_done(tx, done.id, "the answer", false, None, NOW)
        })
        .unwrap();
    let rows_before = h.all_rows().len();

    for (mid, id, state) in [
        (running_mid, running.id, TurnState::Dispatched),
        (done_mid, done.id, TurnState::Done),
    ] {
        for (old, new) in [(&[][..], &["👍"][..]), (&[][..], &["👎"][..])] {
            let d = h.react(OWNER, mid, old, new);
            assert_eq!(d.outcome, "reaction:too-late");
            assert_eq!(d.after, AfterCommit::default(), "nothing to wake");
            let t = h.turn(id);
            assert_eq!((t.state, t.lane, t.skip), (state, Lane::Normal, false));
        }
    }
    assert_eq!(h.all_rows().len(), rows_before, "nothing queued");

    // A reaction on a message that is no prompt (one of the bot's) is no shortcut either.
    let d = h.react(OWNER, 9999, &[], &["👍"]);
    assert_eq!(d.outcome, "reaction:not-a-prompt");
    assert_eq!(h.all_rows().len(), rows_before);
}

#[test]
fn a_strangers_reaction_does_nothing() {
    let mut h = Hub::with_proj();
    let (mid, t) = h.prompt("mine");
    let d = h.react(STRANGER, mid, &[], &["👍"]);
    assert_eq!(d.outcome, "ignored:not-owner");
    let d2 = h.react(STRANGER, mid, &[], &["👎"]);
    assert_eq!(d2.outcome, "ignored:not-owner");
    let now = h.turn(t.id);
    assert_eq!((now.lane, now.skip), (Lane::Normal, false));
    assert!(h.rows_of(d.update_id).is_empty() && h.rows_of(d2.update_id).is_empty());
    assert_eq!(d.after, AfterCommit::default());
}

// ---------------------------------------------------------------------------------------------
// Edits
// ---------------------------------------------------------------------------------------------

#[test]
fn editing_a_waiting_prompt_changes_what_pi_gets() {
    let mut h = Hub::with_proj();
    let (mid, t) = h.prompt("fix the tset");
    let d = h.edit(mid, "fix the test");
    assert_eq!(d.outcome, "edit:applied");
    let now = h.turn(t.id);
    assert_eq!(now.text, "fix the test");
    assert_eq!(now.state, TurnState::Queued);
    assert!(
        h.rows_of(d.update_id).is_empty(),
        "an applied edit is silent"
    );
    assert_eq!(h.turn_count(), 1, "an edit is no new prompt");
}

#[test]
fn editing_a_prompt_pi_has_leaves_it_and_says_so() {
    let mut h = Hub::with_proj();
    let (mid, t) = h.prompt("original");
    h.dispatch(t.id);
    let d = h.edit(mid, "changed my mind");
    assert_eq!(d.outcome, "edit:too-late");
    let now = h.turn(t.id);
    assert_eq!(now.text, "original");
    assert_eq!(now.state, TurnState::Dispatched);
    let row = h.only_row_of(d.update_id);
    assert_eq!(row.method(), "sendMessage");
    assert_eq!(row.chat_id, OWNER);
    assert_eq!(text_of(&row), texts::edit_too_late());
    assert_eq!(row.params()["reply_parameters"]["message_id"], json!(mid));
    assert!(d.after.outbox, "the sender is woken");
}

#[test]
fn editing_a_message_that_is_no_prompt_is_ignored() {
    let mut h = Hub::with_proj();
    let (mid, _) = h.write("/help");
    let d = h.edit(mid, "/help me");
    assert_eq!(d.outcome, "ignored:edit");
    assert!(h.rows_of(d.update_id).is_empty());
    assert_eq!(h.turn_count(), 0);
}

/// An edit goes through the same command mapping as a new message: a pi command keeps pi's
/// name for it.
#[test]
fn editing_a_pi_command_keeps_pis_name_for_it() {
    let mut h = Hub::with_proj();
    h.store
        .write(|tx| {
            kv::set(
                tx,
                hub::outgoing::bot_commands::PI_COMMANDS,
                &json!({ "review_pr": "review-pr" }).to_string(),
            )
        })
        .unwrap();
    let (mid, _) = h.write("/review_pr 42");
    assert_eq!(h.turn_of(mid).text, "/review-pr 42");
    h.edit(mid, "/review_pr 43");
    assert_eq!(h.turn_of(mid).text, "/review-pr 43");
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

#[test]
fn abort_with_a_running_turn_records_an_abort_for_that_turn() {
    let mut h = Hub::with_proj();
    let (_, running) = h.prompt("long job");
    h.dispatch(running.id);
    let (_, waiting) = h.prompt("after that");

    let (mid, d) = h.write("/abort");
    assert_eq!(d.outcome, "abort:running");
    assert!(d.after.turns, "the conductor is woken");
    let c = h.controls();
    assert_eq!(c.len(), 1, "{c:#?}");
    assert_eq!(c[0].kind, "abort");
    assert_eq!(c[0].identity.as_deref(), Some(PROJ));
    assert_eq!(c[0].turn_id, Some(running.id), "bound to the running turn");
    assert_eq!(c[0].source_update_id, Some(d.update_id));
    assert_eq!((c[0].chat_id, c[0].message_id), (OWNER, Some(mid)));

    let row = h.only_row_of(d.update_id);
    assert_eq!(row.method(), "sendMessage");
    assert_eq!(
        text_of(&row),
        texts::stopped(PROJ_LABEL, false, true, 0, 1, false, true)
    );
    assert!(text_of(&row).contains("Aborting proj"));
    assert_eq!(row.params()["reply_parameters"]["message_id"], json!(mid));
    // /abort keeps the queue, and is no prompt itself.
    assert_eq!(h.turn(waiting.id).state, TurnState::Queued);
    assert_eq!(h.turn_count(), 2);
    // What waits behind the aborted turn waits for the person's next message.
    let fold = h.store.read(|c| hub::state::fold_of(c, PROJ)).unwrap();
    assert_eq!(
        fold,
        Some(hub::state::Fold {
            aborted: running.id,
            upto: waiting.id
        })
    );
    // Another /abort keeps it; /next runs the queue one by one instead.
    h.write("/abort");
    assert!(
        h.store
            .read(|c| hub::state::fold_of(c, PROJ))
            .unwrap()
            .is_some()
    );
    h.write("/next");
    assert_eq!(
        h.store.read(|c| hub::state::fold_of(c, PROJ)).unwrap(),
        None
    );
}

/// A turn a hub crash cut off and queued to run again is what /abort stops: cancelled before
/// pi gets it again, and the person told something was aborted.
#[test]
fn abort_stops_a_turn_queued_to_run_again_after_a_crash() {
    let mut h = Hub::with_proj();
    let (_, cut) = h.prompt("long job");
    h.dispatch(cut.id);
    let (_, waiting) = h.prompt("after that");
    h.store.write(|tx| turns::run_again(tx, cut.id)).unwrap();
    assert_eq!(h.turn(cut.id).state, TurnState::Queued);

    let (_, d) = h.write("/abort");
    assert_eq!(d.outcome, "abort:running");
    assert_eq!(h.turn(cut.id).state, TurnState::Cancelled);
    // Nothing to tell pi: it does not have the turn.
    assert!(h.controls().is_empty());
    assert_eq!(h.turn(waiting.id).state, TurnState::Queued);
    assert!(text_of(&h.only_row_of(d.update_id)).contains("Aborting proj"));
    // Only the cut-off one: a second /abort finds nothing running.
    let (_, d) = h.write("/abort");
    assert_eq!(d.outcome, "abort:idle");
}

#[test]
fn abort_when_idle_records_no_control() {
    let mut h = Hub::with_proj();
    let (_, d) = h.write("/abort");
    assert_eq!(d.outcome, "abort:idle");
    assert!(h.controls().is_empty());
    let row = h.only_row_of(d.update_id);
    assert_eq!(
        text_of(&row),
        texts::stopped(PROJ_LABEL, false, false, 0, 0, false, false)
    );
    assert!(text_of(&row).starts_with("Nothing is running on proj"));
    assert_eq!(h.turn_count(), 0);
}

#[test]
fn stop_drops_everything_waiting_for_that_pi_and_says_how_much() {
    let mut h = Hub::with_proj();
    let (_, running) = h.prompt("running");
    h.dispatch(running.id);
    let waiting: Vec<i64> = ["one", "two", "three"]
        .iter()
        .map(|t| h.prompt(t).1.id)
        .collect();
    // A prompt for another pi (offline) is not this /stop's business.
    h.select("/home/ann/other");
    let (_, other) = h.prompt("for the other one");
    assert_eq!(other.identity.as_deref(), Some("/home/ann/other"));
    h.select(PROJ);

    let (_, d) = h.write("/stop");
    assert_eq!(d.outcome, "stop:running");
    for id in &waiting {
        assert_eq!(h.turn(*id).state, TurnState::Cancelled, "turn {id}");
    }
    assert!(h.queue(PROJ).is_empty());
    assert_eq!(h.turn(other.id).state, TurnState::Queued);
    assert_eq!(h.turn(running.id).state, TurnState::Dispatched);
    let c = h.controls();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].kind.as_str(), c[0].turn_id),
        ("abort", Some(running.id))
    );
    let row = h.only_row_of(d.update_id);
    assert_eq!(
        text_of(&row),
        texts::stopped(PROJ_LABEL, true, true, 3, 0, false, false)
    );
    assert!(text_of(&row).contains("Dropped 3 waiting message(s)."));
}

#[test]
fn stop_when_idle_still_drops_the_queue() {
    let mut h = Hub::with_proj();
    let a = h.prompt("a").1.id;
    let b = h.prompt("b").1.id;
    let (_, d) = h.write("/stop");
    assert_eq!(d.outcome, "stop:idle");
    assert!(h.controls().is_empty(), "nothing runs: nothing to abort");
    assert_eq!(h.turn(a).state, TurnState::Cancelled);
    assert_eq!(h.turn(b).state, TurnState::Cancelled);
    assert!(text_of(&h.only_row_of(d.update_id)).contains("Dropped 2 waiting message(s)."));
}

#[test]
fn continue_is_a_prompt_at_the_front() {
    let mut h = Hub::with_proj();
    let (_, earlier) = h.prompt("earlier");
    let (mid, d) = h.write("/continue");
    assert_eq!(d.outcome, "continue");
    let t = h.turn_of(mid);
    assert_eq!(t.text, "continue");
    assert_eq!(t.lane, Lane::Priority);
    assert_eq!(t.identity.as_deref(), Some(PROJ));
    assert_eq!(t.state, TurnState::Queued);
    assert_eq!(h.queue(PROJ), vec![t.id, earlier.id]);
}

#[test]
fn compact_asks_first_with_two_buttons() {
    let mut h = Hub::with_proj();
    let (mid, d) = h.write("/compact");
    assert_eq!(d.outcome, "compact:asked");
    assert!(
        h.controls().is_empty(),
        "nothing happens before the person confirms"
    );
    let row = h.only_row_of(d.update_id);
    assert_eq!(text_of(&row), texts::compact_question(PROJ_LABEL));
    assert_eq!(row.params()["reply_parameters"]["message_id"], json!(mid));
    let keyboard = row.params()["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap();
    assert_eq!(keyboard.len(), 1, "one row");
    let buttons = buttons_of(&row);
    assert_eq!(
        buttons.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(),
        ["Compact", "Cancel"]
    );
    assert_eq!(
        h.action_of(&buttons[0].1),
        Some(Button::Compact {
            identity: PROJ.into()
        })
    );
    assert_eq!(h.action_of(&buttons[1].1), Some(Button::Dismiss));

    // Confirming records the compaction for the conductor and settles the question.
    let question = text_of(&row).to_owned();
    let (query, d) = h.tap(OWNER, 555, &question, &buttons[0].1);
    assert_eq!(d.outcome, "control:compact");
    let c = h.controls();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].kind, "compact");
    assert_eq!(c[0].identity.as_deref(), Some(PROJ));
    assert_eq!(c[0].message_id, Some(555));
    let rows = h.rows_of(d.update_id);
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[0].method(), "answerCallbackQuery");
    assert_eq!(rows[0].params()["callback_query_id"], json!(query));
    assert_eq!(rows[1].method(), "editMessageText");
    assert_eq!(rows[1].params()["message_id"], json!(555));
    assert_eq!(
        text_of(&rows[1]),
        format!("{question}\n\n→ Compacting…"),
        "settled"
    );
    assert_eq!(
        rows[1].params()["reply_markup"],
        json!({ "inline_keyboard": [] })
    );
}

/// A settled question's tokens are used up: a second tap on "Compact" (a double tap before the
/// edit removes the buttons reaches the hub as two callback queries) records no second
/// compaction.
#[test]
fn a_double_tap_on_compact_compacts_once() {
    let mut h = Hub::with_proj();
    let (_, d) = h.write("/compact");
    let row = h.only_row_of(d.update_id);
    let question = text_of(&row).to_owned();
    let compact = token(&row, "Compact");
    h.tap(OWNER, 555, &question, &compact);
    h.tap(OWNER, 555, &question, &compact);
    assert_eq!(h.controls().len(), 1, "{:#?}", h.controls());
}

#[test]
fn an_unknown_command_is_not_sent_to_pi() {
    let mut h = Hub::with_proj();
    let (mid, d) = h.write("/foo bar");
    assert_eq!(d.outcome, "command:unknown");
    assert_eq!(h.turn_count(), 0, "no turn");
    assert!(h.controls().is_empty());
    let row = h.only_row_of(d.update_id);
    assert_eq!(text_of(&row), texts::unknown_command("foo"));
    assert_eq!(row.params()["reply_parameters"]["message_id"], json!(mid));
    assert!(
        row.resend_if_unknown,
        "the only trace of the message: sent again after an unknown outcome"
    );
}

#[test]
fn a_pi_command_becomes_a_prompt_under_pis_name() {
    let mut h = Hub::with_proj();
    h.store
        .write(|tx| {
            kv::set(
                tx,
                hub::outgoing::bot_commands::PI_COMMANDS,
                &json!({ "review_pr": "review-pr" }).to_string(),
            )
        })
        .unwrap();
    for (sent, pi_gets) in [
        ("/review_pr args", "/review-pr args"),
        ("/review_pr@pibot 12 now", "/review-pr 12 now"),
        ("/Review_PR", "/review-pr"),
    ] {
        let (mid, d) = h.write(sent);
        assert_eq!(d.outcome, "command:pi", "{sent}");
        let t = h.turn_of(mid);
        assert_eq!(t.text, pi_gets, "{sent}");
        assert_eq!((t.lane, t.state), (Lane::Normal, TurnState::Queued));
        assert_eq!(t.identity.as_deref(), Some(PROJ));
        assert!(h.rows_of(d.update_id).is_empty(), "{sent}: no reply");
    }
    // A name the map does not hold is still unknown.
    let (_, d) = h.write("/review");
    assert_eq!(d.outcome, "command:unknown");
    assert_eq!(h.turn_count(), 3);
}

#[test]
fn menu_commands_reply_with_a_menu_of_owner_bound_buttons() {
    let mut h = Hub::with_proj();
    let (_, waiting) = h.prompt("waiting prompt");
    for (cmd, outcome, purpose, starts) in [
        (
            "/start",
            "menu:menu",
            "reply:menu:Menu",
            "pi-telegram for @pibot.",
        ),
        (
            "/queue",
            "menu:queue",
            "reply:menu:Queue",
            "Waiting for proj: 1",
        ),
        (
            "/settings",
            "menu:settings",
            "reply:menu:Settings",
            "Settings (telegram.json, for every pi)",
        ),
        (
            "/help",
            "menu:help",
            "reply:menu:Help",
            "pi-telegram is running for @pibot.",
        ),
    ] {
        let (mid, d) = h.write(cmd);
        assert_eq!(d.outcome, outcome, "{cmd}");
        let row = h.only_row_of(d.update_id);
        assert_eq!(row.method(), "sendMessage", "{cmd}");
        assert_eq!(row.purpose.to_string(), purpose, "{cmd}");
        assert!(
            text_of(&row).starts_with(starts),
            "{cmd}: {}",
            text_of(&row)
        );
        assert_eq!(row.params()["reply_parameters"]["message_id"], json!(mid));
        let buttons = buttons_of(&row);
        assert!(!buttons.is_empty(), "{cmd}: a menu has buttons");
        for (label, t) in &buttons {
            assert!(
                h.action_of(t).is_some(),
                "{cmd}: {label} works for the owner"
            );
            let strangers = h
                .store
                .read(|c| callbacks::lookup(c, t, STRANGER, h.now))
                .unwrap();
            assert_eq!(strangers, None, "{cmd}: {label} is the owner's only");
        }
    }
    // The start menu offers to switch to the selected pi; the queue shows the waiting prompt.
    let (_, d) = h.write("/start");
    let row = h.only_row_of(d.update_id);
    assert_eq!(
        h.action_of(&token(&row, "▶ proj")),
        Some(Button::Select {
            identity: PROJ.into()
        })
    );
    let (_, d) = h.write("/queue");
    let row = h.only_row_of(d.update_id);
    assert!(text_of(&row).contains("1. waiting prompt"));
    assert_eq!(
        h.action_of(&token(&row, "1 ⚡ first")),
        Some(Button::Queue {
            turn: waiting.id,
            op: QueueOp::Priority
        })
    );
    assert_eq!(h.turn_count(), 1, "menu commands are no prompts");
    assert!(h.controls().is_empty(), "the store knows all of it");
}

#[test]
fn model_asks_pi_through_a_control_when_the_instance_is_live() {
    let mut h = Hub::with_proj();
    let (mid, d) = h.write("/model");
    assert_eq!(d.outcome, "menu:model");
    assert!(
        h.rows_of(d.update_id).is_empty(),
        "the conductor sends the menu"
    );
    let c = h.controls();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].kind, "menu");
    assert_eq!(c[0].identity.as_deref(), Some(PROJ));
    assert_eq!(c[0].params, json!({ "section": "model", "reply_to": mid }));
    assert_eq!(c[0].source_update_id, Some(d.update_id));
    assert!(d.after.turns, "the conductor is woken");

    // When that pi has gone: said at once, nothing for the conductor.
    let id = h.connect("/home/ann/gone");
    h.select("/home/ann/gone");
    h.store
        .write(|tx| instances::mark_gone(tx, &id, &store::instances::GoneReason::Disconnected, NOW))
        .unwrap();
    let (_, d) = h.write("/model");
    assert_eq!(d.outcome, "menu:model");
    assert_eq!(h.controls().len(), 1, "no second control");
    let row = h.only_row_of(d.update_id);
    assert_eq!(text_of(&row), texts::no_instance_here());
}

// ---------------------------------------------------------------------------------------------
// Buttons
// ---------------------------------------------------------------------------------------------

/// A hub with a running turn and three waiting ones, and the `/queue` menu as message 5000.
fn queue_menu() -> (Hub, [i64; 3], OutboxRow) {
    let mut h = Hub::with_proj();
    let (_, running) = h.prompt("running");
    h.dispatch(running.id);
    let ids = [
        h.prompt("second").1.id,
        h.prompt("third").1.id,
        h.prompt("fourth").1.id,
    ];
    let (_, d) = h.write("/queue");
    let menu = h.only_row_of(d.update_id);
    assert!(text_of(&menu).starts_with("Waiting for proj: 3"));
    (h, ids, menu)
}

const MENU_MESSAGE: i64 = 5000;

#[test]
fn queue_buttons_change_a_waiting_prompt_and_redraw_the_queue() {
    let (mut h, [second, third, fourth], menu) = queue_menu();
    let shown = text_of(&menu).to_owned();

    // "3 ⚡ first": the fourth prompt goes first.
    let (query, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, "3 ⚡ first"));
    assert_eq!(d.outcome, "menu:queue");
    assert!(d.after.turns && d.after.outbox);
    assert_eq!(h.turn(fourth).lane, Lane::Priority);
    assert_eq!(h.queue(PROJ), vec![fourth, second, third]);
    let rows = h.rows_of(d.update_id);
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[0].method(), "answerCallbackQuery");
    assert_eq!(rows[0].params()["callback_query_id"], json!(query));
    assert_eq!(
        rows[0].params()["text"],
        json!(texts::queue_changed(QueueOp::Priority))
    );
    let edit = &rows[1];
    assert_eq!(edit.method(), "editMessageText");
    assert_eq!(
        (
            edit.params()["chat_id"].clone(),
            edit.params()["message_id"].clone()
        ),
        (json!(OWNER), json!(MENU_MESSAGE))
    );
    assert!(
        text_of(edit).contains("1. ⚡ fourth\n2. second\n3. third"),
        "{}",
        text_of(edit)
    );
    // The redrawn menu offers the way back for the prompt now first.
    assert_eq!(
        h.action_of(&token(edit, "1 ⬇ normal")),
        Some(Button::Queue {
            turn: fourth,
            op: QueueOp::Normal
        })
    );

    // "1 skip" of the first menu: the second prompt will be skipped, and keeps its place.
    let (_, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, "1 skip"));
    assert!(h.turn(second).skip);
    assert_eq!(h.turn(second).state, TurnState::Queued);
    assert_eq!(h.queue(PROJ), vec![fourth, second, third]);
    let rows = h.rows_of(d.update_id);
    assert_eq!(
        rows[0].params()["text"],
        json!(texts::queue_changed(QueueOp::Skip))
    );
    let redrawn = text_of(&rows[1]).to_owned();
    assert!(redrawn.contains("2. second (skipped)"), "{redrawn}");
    // Struck through, and not counted among those that will run.
    assert!(
        redrawn.starts_with("Waiting for proj: 2, and 1 skipped"),
        "{redrawn}"
    );
    let at = redrawn.find("second").unwrap();
    assert_eq!(
        rows[1].params()["entities"],
        json!([{ "type": "strikethrough", "offset": redrawn[..at].encode_utf16().count(), "length": 6 }])
    );

    // "2 ✕": the third prompt is removed.
    let (_, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, "2 ✕"));
    assert_eq!(h.turn(third).state, TurnState::Cancelled);
    assert_eq!(h.queue(PROJ), vec![fourth, second]);
    let rows = h.rows_of(d.update_id);
    assert_eq!(
        rows[0].params()["text"],
        json!(texts::queue_changed(QueueOp::Remove))
    );
    assert!(text_of(&rows[1]).starts_with("Waiting for proj: 1, and 1 skipped"));
    assert!(!text_of(&rows[1]).contains("third"));
}

#[test]
fn a_queue_button_for_a_prompt_pi_has_says_too_late() {
    let (mut h, [second, ..], menu) = queue_menu();
    h.dispatch(second);
    let shown = text_of(&menu).to_owned();
    for label in ["1 ⚡ first", "1 skip", "1 ✕"] {
        let (_, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, label));
        let t = h.turn(second);
        assert_eq!(
            (t.state, t.lane, t.skip),
            (TurnState::Dispatched, Lane::Normal, false),
            "{label}"
        );
        let rows = h.rows_of(d.update_id);
        assert_eq!(rows[0].method(), "answerCallbackQuery");
        assert_eq!(
            rows[0].params()["text"],
            json!(texts::queue_too_late()),
            "{label}"
        );
    }
}

#[test]
fn forged_foreign_expired_and_strangers_taps_only_get_an_answer() {
    let (mut h, [second, ..], menu) = queue_menu();
    let shown = text_of(&menu).to_owned();
    let rows_before = h.all_rows().len();
    let unchanged = |h: &Hub| {
        let t = h.turn(second);
        assert_eq!(
            (t.state, t.lane, t.skip),
            (TurnState::Queued, Lane::Normal, false)
        );
    };

    // Forged: a token the hub never made.
    let (q, d) = h.tap(OWNER, MENU_MESSAGE, &shown, "AAAAAAAA");
    assert_eq!(d.outcome, "button:unknown");
    assert_only_answered(&h, &q, &d);
    unchanged(&h);

    // Another user's: a real token, bound to someone who is not the owner.
    let theirs = h.token_for(
        STRANGER,
        &Button::Queue {
            turn: second,
            op: QueueOp::Remove,
        },
        BUTTON_TTL_MS,
    );
    let (q, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &theirs);
    assert_eq!(d.outcome, "button:unknown");
    assert_only_answered(&h, &q, &d);
    unchanged(&h);

    // A stranger tapping the owner's real token, or their own: answered once a minute, under
    // the stranger's chat, after the owner's.
    for (n, data) in [token(&menu, "1 ✕"), theirs].into_iter().enumerate() {
        let (q, d) = h.tap(STRANGER, MENU_MESSAGE, &shown, &data);
        assert_eq!(d.outcome, "ignored:not-owner");
        if n == 0 {
            let row = h.only_row_of(d.update_id);
            assert_eq!(row.method(), "answerCallbackQuery");
            assert_eq!(
                (row.chat_id, &row.purpose),
                (STRANGER, &Purpose::AnswerStranger)
            );
            assert_eq!(row.params()["callback_query_id"], json!(q));
        } else {
            assert!(
                h.rows_of(d.update_id).is_empty(),
                "a second tap within the minute"
            );
        }
        assert!(!d.after.turns, "{d:?}");
        unchanged(&h);
    }

    // Expired: the owner's own menu, a moment after its buttons' time is up.
    h.now = NOW + BUTTON_TTL_MS;
    let (q, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, "1 ✕"));
    assert_eq!(d.outcome, "button:unknown");
    assert_only_answered(&h, &q, &d);
    h.now = NOW + BUTTON_TTL_MS + 60_000;
    let (q, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, "1 skip"));
    assert_only_answered(&h, &q, &d);
    unchanged(&h);

    // Six taps, five answers (the stranger's second tap went unanswered), and nothing else.
    let after: Vec<OutboxRow> = h.all_rows().into_iter().skip(rows_before).collect();
    assert_eq!(after.len(), 5);
    assert!(after.iter().all(|r| r.method() == "answerCallbackQuery"));
}

#[test]
fn a_button_works_until_its_time_is_up() {
    let (mut h, [second, third, _], menu) = queue_menu();
    let shown = text_of(&menu).to_owned();
    h.now = NOW + BUTTON_TTL_MS - 1;
    let (_, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, "1 skip"));
    assert_eq!(d.outcome, "menu:queue");
    assert!(h.turn(second).skip, "still valid a millisecond before");
    h.now = NOW + BUTTON_TTL_MS + 1;
    let (q, d) = h.tap(OWNER, MENU_MESSAGE, &shown, &token(&menu, "2 skip"));
    assert_eq!(d.outcome, "button:unknown");
    assert_only_answered(&h, &q, &d);
    assert!(!h.turn(third).skip, "expired a millisecond after");
}

// ---------------------------------------------------------------------------------------------
// Replays
// ---------------------------------------------------------------------------------------------

/// Journals `raw` again, as a poller that saw the same update twice would.
fn journal_again(h: &Hub, update_id: i64, raw: &str) -> usize {
    h.store
        .write(|tx| {
            journal::append_batch(
                tx,
                &[journal::Incoming {
                    update_id,
                    kind: "message",
                    raw,
                }],
                update_id + 1,
                NOW,
            )
        })
        .unwrap()
}

#[test]
fn the_same_update_twice_has_its_effect_once() {
    let mut h = Hub::with_proj();
    let (_, running) = h.prompt("running");
    h.dispatch(running.id);
    let (mid, d) = h.write("/abort");
    let (pmid, p) = h.write("a prompt");
    let turns_before = h.turn_count();
    let rows_before = h.all_rows();
    let controls_before = h.controls();
    assert_eq!(controls_before.len(), 1);

    // Telegram sends them again: the journal keeps the first copy, nothing is pending.
    for (update_id, message_id, text) in [
        (d.update_id, mid, "/abort"),
        (p.update_id, pmid, "a prompt"),
    ] {
        let raw = json!({ "update_id": update_id, "message": {
            "message_id": message_id, "from": user(OWNER), "chat": private_chat(OWNER),
            "date": NOW / 1000, "text": text } })
        .to_string();
        assert_eq!(journal_again(&h, update_id, &raw), 0);
    }
    assert!(
        h.store
            .read(|c| journal::pending(c, 10))
            .unwrap()
            .is_empty()
    );

    // A worker that handled an entry twice is refused, and its transaction rolls back.
    let ctx = h.ctx();
    for update_id in [d.update_id, p.update_id] {
        let raw: String = h
            .store
            .read(|c| {
                c.query_row(
                    "SELECT raw FROM journal WHERE update_id = ?1",
                    [update_id],
                    |r| r.get(0),
                )
                .map_err(StoreError::from)
            })
            .unwrap();
        let entry = journal::Entry {
            update_id,
            kind: "message".into(),
            raw,
            received_ms: NOW,
        };
        let again = h.store.write(|tx| {
            let mut after = AfterCommit::default();
            handlers::handle(tx, &ctx, &entry, &mut after)
        });
        assert!(again.is_err(), "handled twice: {again:?}");
    }
    assert_eq!(h.turn_count(), turns_before);
    assert_eq!(h.all_rows(), rows_before);
    assert_eq!(h.controls(), controls_before);
}

#[test]
fn unique_keys_keep_effects_once_even_without_the_journal_mark() {
    // Defence in depth: were an update's "handled" mark lost with its effects kept, handling it
    // again still makes one turn, one control, one reply per cause.
    let mut h = Hub::with_proj();
    let (_, running) = h.prompt("running");
    h.dispatch(running.id);
    let (_, abort) = h.write("/abort");
    let (_, prompt) = h.write("a prompt");
    let (_, cont) = h.write("/continue");
    let (_, unknown) = h.write("/foo");
    let turns_before = h.turn_count();
    let rows_before = h.all_rows();
    let controls_before = h.controls();

    let ctx = h.ctx();
    for d in [&abort, &prompt, &cont, &unknown] {
        let outcome = h
            .store
            .write(|tx| {
                tx.execute(
                    "UPDATE journal SET handled_ms = NULL, outcome = NULL WHERE update_id = ?1",
                    [d.update_id],
                )
                .map_err(StoreError::from)?;
                let entry = journal::pending(tx, 10)?.pop().unwrap();
                assert_eq!(entry.update_id, d.update_id);
                let mut after = AfterCommit::default();
                handlers::handle(tx, &ctx, &entry, &mut after)
            })
            .unwrap();
        assert_eq!(outcome.to_string(), d.outcome);
    }
    assert_eq!(h.turn_count(), turns_before);
    assert_eq!(h.all_rows(), rows_before);
    assert_eq!(h.controls(), controls_before);
}

// ---------------------------------------------------------------------------------------------
// Threaded Mode
// ---------------------------------------------------------------------------------------------

#[test]
fn in_threaded_mode_a_topic_speaks_to_its_own_pi() {
    const API: &str = "/home/ann/api";
    const WEB: &str = "/home/ann/web";
    let mut h = Hub::new();
    let api = h.connect(API);
    let web = h.connect(WEB);
    let epoch = h.epoch.0;
    h.store
        .write(|tx| {
            kv::set(tx, tables::MODE, "threaded")?;
            kv::set(tx, kv::BOT_TOPICS, "true")?;
            for (slot, identity, instance, thread) in [("A", API, &api, 10), ("B", WEB, &web, 20)] {
                tables::insert_binding(
                    tx,
                    &Binding {
                        identity: identity.into(),
                        chat_id: OWNER,
                        thread_id: thread,
                        slot: slot.into(),
                        title: format!("{slot} · {}", hub::names::label_of(identity)),
                        state: BindingState::Active,
                        instance_id: Some(instance.clone()),
                        cwd: identity.into(),
                        epoch,
                        created_ms: NOW,
                        updated_ms: NOW,
                        offline_since_ms: None,
                    },
                )?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();

    // A message in web's topic is web's, whatever the classic selection says.
    h.select(API);
    let (mid, d) = h.write_in(OWNER, Some(20), "build it");
    assert_eq!(d.outcome, "queued");
    let t = h.turn_of(mid);
    assert_eq!(t.identity.as_deref(), Some(WEB));
    assert_eq!(t.thread_id, Some(20));
    h.store
        .write(|tx| {
            turns::mark_dispatched(
                tx,
                t.id,
                &web,
                Some(1),
                store::instances::Transport::Shim,
                NOW,
            )
        })
        .unwrap();

    // /abort in api's topic: api runs nothing.
    let (_, d) = h.write_in(OWNER, Some(10), "/abort");
    assert_eq!(d.outcome, "abort:idle");
    assert!(h.controls().is_empty());
    let row = h.only_row_of(d.update_id);
    assert_eq!(row.params()["message_thread_id"], json!(10));
    assert!(text_of(&row).starts_with("Nothing is running on api"));

    // In the main chat, with two pi, it is not clear which one.
    let (_, d) = h.write_in(OWNER, None, "/abort");
    assert_eq!(d.outcome, "abort:which");
    assert!(h.controls().is_empty());
    assert_eq!(
        text_of(&h.only_row_of(d.update_id)),
        texts::which_pi("abort")
    );

    // /abort in web's topic aborts web's turn, and answers in that topic.
    let (amid, d) = h.write_in(OWNER, Some(20), "/abort");
    assert_eq!(d.outcome, "abort:running");
    let c = h.controls();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].identity.as_deref(), Some(WEB));
    assert_eq!(c[0].turn_id, Some(t.id));
    assert_eq!((c[0].thread_id, c[0].message_id), (Some(20), Some(amid)));
    let row = h.only_row_of(d.update_id);
    assert_eq!(row.thread_id, Some(20));
    assert_eq!(row.params()["message_thread_id"], json!(20));

    // A reaction on a waiting prompt in api's topic works there as in the main chat.
    let (pmid, _) = h.write_in(OWNER, Some(10), "then this");
    let waiting = h.turn_of(pmid);
    assert_eq!(waiting.identity.as_deref(), Some(API));
    let d = h.react(OWNER, pmid, &[], &["👍"]);
    assert_eq!(d.outcome, "reaction:priority");
    assert_eq!(h.turn(waiting.id).lane, Lane::Priority);

    // A prompt in the main chat waits for the person's choice; the question is all that moves
    // it on, so it must arrive like an answer.
    let (_, d) = h.write_in(OWNER, None, "which of you?");
    assert_eq!(d.outcome, "chooser");
    let row = h.only_row_of(d.update_id);
    assert_eq!(text_of(&row), texts::main_chat_chooser());
    assert!(row.resend_if_unknown, "sent again after an unknown outcome");
}

#[test]
fn a_waiting_prompt_cannot_be_edited_into_one_of_our_commands() {
    let mut h = Hub::with_proj();
    let (mid, _) = h.prompt("do the thing");
    let d = h.edit(mid, "/abort");
    assert_eq!(d.outcome, "edit:command-refused");
    assert_eq!(
        h.turn_of(mid).text,
        "do the thing",
        "the prompt stays as it was"
    );
    assert!(h.controls().is_empty(), "and nothing was aborted");
    assert_eq!(
        text_of(&h.only_row_of(d.update_id)),
        texts::edit_into_command()
    );
}

// ---------------------------------------------------------------------------------------------
// What is not plain text
// ---------------------------------------------------------------------------------------------

impl Hub {
    /// A message from the owner with extra fields (`photo`, `document`, `location`,
    /// `media_group_id`, `forward_origin`...).
    fn send_fields(&mut self, fields: Value) -> (i64, Done) {
        let message_id = self.next_message;
        self.next_message += 1;
        let mut m = json!({
            "message_id": message_id,
            "from": user(OWNER),
            "chat": private_chat(OWNER),
            "date": self.now / 1000,
        });
        for (k, v) in fields.as_object().unwrap() {
            m[k] = v.clone();
        }
        (message_id, self.deliver("message", m))
    }

    fn files_of(&self, turn: i64) -> Vec<store::files::File> {
        self.store.read(|c| store::files::of_turn(c, turn)).unwrap()
    }
}

#[test]
fn a_location_is_explained_and_nothing_reaches_pi() {
    let mut h = Hub::with_proj();
    let (mid, d) = h.send_fields(json!({ "location": { "latitude": 52.5, "longitude": 13.4 } }));
    assert_eq!(d.outcome, "replied:text-only");
    assert_eq!(h.turn_count(), 0);
    let row = h.only_row_of(d.update_id);
    assert_eq!(
        text_of(&row),
        texts::attachment_not_delivered("location", false)
    );
    assert_eq!(row.params()["reply_parameters"]["message_id"], json!(mid));
    assert!(
        row.resend_if_unknown,
        "the only trace of the message: sent again after an unknown outcome"
    );
}

#[test]
fn a_document_makes_a_turn_that_waits_for_its_file() {
    let mut h = Hub::with_proj();
    let (mid, d) = h.send_fields(json!({
        "document": { "file_id": "F1", "file_unique_id": "U1", "file_name": "../../x.pdf",
                      "mime_type": "application/pdf", "file_size": 1234 },
        "caption": "read this",
    }));
    assert_eq!(d.outcome, "queued");
    assert!(d.after.inbound, "the inbound task is woken");
    let t = h.turn_of(mid);
    assert!(!t.ready, "not ready before its file is settled");
    assert_eq!(t.text, "read this");
    let files = h.files_of(t.id);
    assert_eq!(files.len(), 1);
    assert_eq!(
        files[0].name.as_deref(),
        Some("../../x.pdf"),
        "kept as sent; sanitised on save"
    );
    assert_eq!(files[0].state, store::files::FileState::Pending);
    // A turn that is not ready is not dispatched, but does not hold the ones behind it.
    let (_, behind) = h.prompt("plain text behind it");
    let next = h
        .store
        .read(|c| store::turns::next_queued(c, PROJ))
        .unwrap()
        .unwrap();
    assert_eq!(next.id, behind.id);
}

#[test]
fn album_parts_join_one_turn_and_a_long_text_gathers_its_continuation() {
    let mut h = Hub::with_proj();
    let photo = |id: &str| json!([{ "file_id": id, "width": 100, "height": 100, "file_size": 10 }]);
    let (first, d1) =
        h.send_fields(json!({ "photo": photo("P1"), "media_group_id": "G", "caption": "look" }));
    let (_, d2) = h.send_fields(json!({ "photo": photo("P2"), "media_group_id": "G" }));
    let (_, d3) = h.send_fields(json!({ "photo": photo("P3"), "media_group_id": "G" }));
    assert_eq!(d1.outcome, "queued");
    assert_eq!(
        (d2.outcome.as_str(), d3.outcome.as_str()),
        ("joined:album", "joined:album")
    );
    let t = h.turn_of(first);
    assert_eq!(t.text, "look");
    assert!(t.gather_until_ms > 0, "still gathering");
    assert_eq!(h.files_of(t.id).len(), 3);
    assert_eq!(h.turn_count(), 1);
    // A text at Telegram's limit waits for its continuation; the short rest closes it.
    let long = "x".repeat(4050);
    let (lid, _) = h.write(&long);
    let (_, d) = h.write("the end");
    assert_eq!(d.outcome, "joined:long-text");
    let lt = h.turn_of(lid);
    assert_eq!(lt.text, format!("{long}\nthe end"));
    assert_eq!(lt.gather_until_ms, 0, "complete");
    // An ordinary message opens nothing and is ready at once.
    let (oid, _) = h.write("short and sweet");
    let o = h.turn_of(oid);
    assert!(o.ready && o.group_key.is_none());
}

#[test]
fn a_forward_and_the_comment_after_it_are_one_turn() {
    let mut h = Hub::with_proj();
    let (fid, d) = h.send_fields(json!({
        "text": "the build broke",
        "forward_origin": { "type": "hidden_user", "sender_user_name": "Grace", "date": 0 },
    }));
    assert_eq!(d.outcome, "queued");
    let (_, c) = h.write("what now?");
    assert_eq!(c.outcome, "joined:comment");
    let t = h.turn_of(fid);
    assert_eq!(t.text, "what now?");
    assert_eq!(
        t.context.as_deref(),
        Some("[forward|from:Grace]\nthe build broke")
    );
    assert_eq!(t.gather_until_ms, 0, "the comment closed the group");
}

// ---------------------------------------------------------------------------------------------
// Pairing
// ---------------------------------------------------------------------------------------------

#[test]
fn a_strangers_wrong_codes_never_spend_the_owners_attempts() {
    const CODE: &str = "ABCD2345";
    let mut h = Hub::unpaired(CODE);
    let attempts = hub::pairing::CODE_ATTEMPTS as usize;
    let mut said = Vec::new();
    for i in 0..20 {
        let (_, d) = h.write_in(STRANGER, None, &format!("/start WRONG{i:03}"));
        let texts: Vec<String> = h
            .rows_of(d.update_id)
            .iter()
            .map(|r| text_of(r).to_owned())
            .collect();
        said.push((d.outcome, texts));
    }
    // The owner has all of theirs with the same code: a typo costs one of their own.
    let (_, d) = h.write_in(OWNER, None, "/start NOTTHIS2");
    assert_eq!(
        d.outcome, "pairing:wrong-code",
        "the owner's attempts are their own"
    );
    assert_eq!(
        text_of(&h.only_row_of(d.update_id)),
        texts::wrong_code(hub::pairing::CODE_ATTEMPTS - 1)
    );
    // The stranger is refused even with the right code, and silently.
    let (_, d) = h.write_in(STRANGER, None, &format!("/start {CODE}"));
    assert_eq!(d.outcome, "ignored:pairing-refused");
    assert!(h.rows_of(d.update_id).is_empty());
    assert_eq!(h.store.read(|c| kv::get_i64(c, kv::OWNER)).unwrap(), None);
    // The owner pairs with the code.
    let (_, d) = h.write_in(OWNER, None, &format!("/start {}", CODE.to_lowercase()));
    assert_eq!(d.outcome, "paired:code");
    assert_eq!(d.after.new_owner, Some(OWNER));
    assert_eq!(
        h.store.read(|c| kv::get_i64(c, kv::OWNER)).unwrap(),
        Some(OWNER)
    );
    // Each wrong code is answered with what this sender has left; the last is said once;
    // after it nothing is answered, so a flood makes the bot say nothing more.
    for (i, (outcome, texts)) in said.iter().enumerate() {
        let left = attempts.saturating_sub(i + 1) as i64;
        match i {
            _ if i + 1 < attempts => {
                assert_eq!(outcome, "pairing:wrong-code", "attempt {i}");
                assert_eq!(texts, &[texts::wrong_code(left)], "attempt {i}");
            }
            _ if i + 1 == attempts => {
                assert_eq!(outcome, "pairing:refused", "attempt {i}");
                assert_eq!(texts, &[texts::wrong_code(0)], "attempt {i}");
            }
            _ => {
                assert_eq!(outcome, "ignored:pairing-refused", "attempt {i}");
                assert!(texts.is_empty(), "attempt {i}: {texts:?}");
            }
        }
    }
}

#[test]
fn the_settings_menu_writes_what_the_model_is_told_and_the_staleness_guard() {
    let mut h = Hub::new();
    let (_, d) = h.write("/settings");
    let row = h.only_row_of(d.update_id);
    let text = text_of(&row).to_owned();
    assert!(
        text.contains("Spoken answers: only where pi asks"),
        "{text}"
    );
    assert!(text.contains("Time told to pi: every 30 min"), "{text}");
    assert!(
        text.contains("Ask before running prompts that waited: after 30 min"),
        "{text}"
    );
    let buttons = buttons_of(&row);
    let token = |label: &str| {
        buttons
            .iter()
            .find(|(l, _)| l.ends_with(label))
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("no {label} in {buttons:?}"))
    };
    for (label, key, value) in [
        ("mirror", "/voice/replyMode", json!("mirror")),
        ("each prompt", "/assistant/timeInjection", json!("always")),
        ("1 h", "/time/interval", json!(3_600_000)),
        ("2 h", "/staleAfterMinutes", json!(120)),
        ("⏳ off", "/staleAfterMinutes", json!(0)),
    ] {
        let (_, d) = h.tap(OWNER, 555, &text, &token(label));
        assert_eq!(d.outcome, "menu:settings", "{label}");
        let saved: Value =
            serde_json::from_str(&std::fs::read_to_string(&h.config).unwrap()).unwrap();
        assert_eq!(saved.pointer(key), Some(&value), "{label}: {saved}");
    }
}

// ---------------------------------------------------------------------------------------------
// People: invites, members, removal
// ---------------------------------------------------------------------------------------------

/// The owner's `/people`, a tap on `label`: the invite's code (from the message it posts).
fn open_invite(h: &mut Hub, label: &str) -> String {
    let (mid, d) = h.write("/people");
    assert_eq!(d.outcome, "people:list");
    let list = h.only_row_of(d.update_id);
    let (_, tap) = h.tap(OWNER, mid + 1, text_of(&list), &token(&list, label));
    assert_eq!(tap.outcome, "people:invite");
    let posted = h
        .rows_of(tap.update_id)
        .into_iter()
        .find(|r| text_of(r).contains("/start "))
        .unwrap();
    assert_eq!(posted.chat_id, OWNER);
    text_of(&posted)
        .lines()
        .find_map(|l| l.strip_prefix("/start "))
        .unwrap()
        .to_owned()
}

#[test]
fn an_invite_lets_one_person_in_once_and_only_for_ten_minutes() {
    let mut h = Hub::with_proj();
    let code = open_invite(&mut h, "➕ Invite a member");
    let (_, d) = h.write_in(STRANGER, None, &format!("/start {}", code.to_lowercase()));
    assert_eq!(
        d.outcome, "people:joined",
        "codes are read as typed, any case"
    );
    let rows = h.rows_of(d.update_id);
    assert!(
        rows.iter()
            .any(|r| r.chat_id == STRANGER && text_of(r).starts_with("Welcome"))
    );
    assert!(
        rows.iter()
            .any(|r| r.chat_id == OWNER && text_of(r).contains("joined as a member"))
    );
    // Two people racing for one code: the worker handles one update after the other, and the
    // second finds it used.
    let (_, d) = h.write_in(STRANGER + 1, None, &format!("/start {code}"));
    assert_eq!(d.outcome, "people:invite-spent");
    assert!(text_of(&h.only_row_of(d.update_id)).contains("was used already"));
    // The one who joined sending it again is told they are in.
    let (_, d) = h.write_in(STRANGER, None, &format!("/start {code}"));
    assert_eq!(d.outcome, "people:already-in");

    let late = open_invite(&mut h, "➕ Invite a viewer");
    h.now += hub::pairing::CODE_TTL_MS;
    let (_, d) = h.write_in(STRANGER + 2, None, &format!("/start {late}"));
    assert_eq!(d.outcome, "people:invite-spent");
    assert!(text_of(&h.only_row_of(d.update_id)).contains("expired"));
    // No invite open and a code that is none: a stranger's message, nothing said.
    let (_, d) = h.write_in(STRANGER + 3, None, "/start NOTACODE");
    assert_eq!(d.outcome, "ignored:not-owner");
    assert!(h.rows_of(d.update_id).is_empty());
}

#[test]
fn wrong_invite_codes_are_counted_per_sender_and_then_not_answered() {
    let mut h = Hub::with_proj();
    let code = open_invite(&mut h, "➕ Invite a member");
    for left in (0..hub::pairing::CODE_ATTEMPTS).rev() {
        let (_, d) = h.write_in(STRANGER, None, "/start WRONGONE");
        assert_eq!(d.outcome, "people:wrong-code");
        let said = text_of(&h.only_row_of(d.update_id)).to_owned();
        assert!(left > 0 || said.contains("last try"), "{said}");
    }
    let (_, d) = h.write_in(STRANGER, None, &format!("/start {code}"));
    assert_eq!(
        d.outcome, "ignored:invite-refused",
        "not even the right code"
    );
    assert!(h.rows_of(d.update_id).is_empty());
    // Another sender's attempts are their own.
    let (_, d) = h.write_in(STRANGER + 1, None, &format!("/start {code}"));
    assert_eq!(d.outcome, "people:joined");
}

#[test]
fn a_member_writes_prompts_of_their_own_and_is_refused_the_owners_controls() {
    let mut h = Hub::with_proj();
    let code = open_invite(&mut h, "➕ Invite a member");
    h.write_in(STRANGER, None, &format!("/start {code}"));
    let (mid, d) = h.write_in(STRANGER, None, "fix the build");
    assert_eq!(d.outcome, "queued");
    let t = h.turn_in(STRANGER, mid);
    assert_eq!((t.chat_id, t.from_user), (STRANGER, Some(STRANGER)));
    assert_eq!(t.from_name.as_deref(), Some("Ann"));
    for (cmd, outcome) in [
        ("/abort", "people:owner-only"),
        ("/model", "people:owner-only"),
        ("/people", "people:owner-only"),
        ("/help", "people:help"),
        ("/status", "people:status"),
    ] {
        let (_, d) = h.write_in(STRANGER, None, cmd);
        assert_eq!(d.outcome, outcome, "{cmd}");
        assert!(h.controls().is_empty(), "{cmd} made no control");
    }
    // The owner's button, sent from the member's client: not theirs.
    let owners = h.token_for(
        OWNER,
        &Button::Compact {
            identity: PROJ.into(),
        },
        BUTTON_TTL_MS,
    );
    let (_, d) = h.tap(STRANGER, 1, "x", &owners);
    assert_eq!(d.outcome, "button:unknown");
    // A button bound to the member that acts on pi: refused all the same.
    let theirs = h.token_for(
        STRANGER,
        &Button::Compact {
            identity: PROJ.into(),
        },
        BUTTON_TTL_MS,
    );
    let (_, d) = h.tap(STRANGER, 1, "x", &theirs);
    assert_eq!(d.outcome, "people:owner-only");
    // The chooser's button for their own prompt works; one for the owner's prompt does not,
    // nor does the queue's (it shows everyone's prompts).
    let (_, owners_turn) = h.prompt("the owner's");
    let send = |turn| Button::Send {
        turn,
        to: PROJ.into(),
        instead_of: None,
    };
    let (_, d) = h.tap(
        STRANGER,
        1,
        "x",
        &h.token_for(STRANGER, &send(t.id), BUTTON_TTL_MS),
    );
    assert_ne!(d.outcome, "people:owner-only");
    for b in [
        send(owners_turn.id),
        Button::Queue {
            turn: t.id,
            op: QueueOp::Skip,
        },
    ] {
        let (_, d) = h.tap(STRANGER, 1, "x", &h.token_for(STRANGER, &b, BUTTON_TTL_MS));
        assert_eq!(d.outcome, "people:owner-only", "{b:?}");
    }
    assert!(!h.turn(owners_turn.id).skip && !h.turn(t.id).skip);
}

#[test]
fn removing_a_member_drops_their_waiting_prompts_and_buttons_at_once() {
    let mut h = Hub::with_proj();
    let code = open_invite(&mut h, "➕ Invite a member");
    h.write_in(STRANGER, None, &format!("/start {code}"));
    let (mid, _) = h.write_in(STRANGER, None, "waits for pi");
    let theirs = h.token_for(
        STRANGER,
        &Button::Queue {
            turn: h.turn_in(STRANGER, mid).id,
            op: QueueOp::Skip,
        },
        BUTTON_TTL_MS,
    );
    let (owner_mid, _) = h.prompt("the owner's stays");
    let (lmid, d) = h.write("/people");
    let list = h.only_row_of(d.update_id);
    assert!(
        text_of(&list).contains(&format!("Ann (id {STRANGER}): member")),
        "{}",
        text_of(&list)
    );
    let (_, d) = h.tap(
        OWNER,
        lmid + 1,
        text_of(&list),
        &token(&list, "✖ Remove Ann"),
    );
    assert_eq!(d.outcome, "people:removed");
    assert!(d.after.turns);
    assert_eq!(h.turn_in(STRANGER, mid).state, TurnState::Cancelled);
    assert_eq!(h.turn_of(owner_mid).state, TurnState::Queued);
    assert!(
        h.rows_of(d.update_id)
            .iter()
            .any(|r| r.chat_id == STRANGER && text_of(r).contains("removed your access"))
    );
    // Their old button and their next message: a stranger's.
    let (_, d) = h.tap(STRANGER, 1, "x", &theirs);
    assert_eq!(d.outcome, "ignored:not-owner");
    let (_, d) = h.write_in(STRANGER, None, "still there?");
    assert_eq!(d.outcome, "ignored:not-owner");
}

#[test]
fn people_in_telegram_json_are_known_by_id_and_removing_one_edits_the_file() {
    let mut h = Hub::with_proj();
    std::fs::write(
        &h.config,
        json!({ "people": { STRANGER.to_string(): "viewer" }, "other": 1 }).to_string(),
    )
    .unwrap();
    let (_, d) = h.write_in(STRANGER, None, "can I write?");
    assert_eq!(d.outcome, "people:viewer-read-only");
    assert_eq!(h.turn_count(), 0);
    let (lmid, d) = h.write("/people");
    let list = h.only_row_of(d.update_id);
    assert!(
        text_of(&list).contains("viewer, from telegram.json"),
        "{}",
        text_of(&list)
    );
    // Known by the name they wrote with (kept for the list: the file has only the id).
    assert!(
        text_of(&list).contains(&format!("Ann (id {STRANGER})")),
        "{}",
        text_of(&list)
    );
    let label = "✖ Remove Ann".to_owned();
    let (_, d) = h.tap(OWNER, lmid + 1, text_of(&list), &token(&list, &label));
    assert_eq!(d.outcome, "people:removed");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&h.config).unwrap()).unwrap();
    assert_eq!(file["people"], json!({}));
    assert_eq!(file["other"], json!(1), "the rest of the file kept");
    let (_, d) = h.write_in(STRANGER, None, "and now?");
    assert_eq!(d.outcome, "ignored:not-owner");
}

#[test]
fn member_controls_let_members_stop_and_switch_pi_but_not_more() {
    let mut h = Hub::with_proj();
    let write = |h: &Hub, controls: bool| {
        let cfg =
            json!({ "people": { STRANGER.to_string(): "member" }, "memberControls": controls });
        std::fs::write(&h.config, cfg.to_string()).unwrap();
    };
    write(&h, false);
    let (_, d) = h.write_in(STRANGER, None, "/abort");
    assert_eq!(d.outcome, "people:owner-only");
    write(&h, true);
    let (_, d) = h.write_in(STRANGER, None, "/abort");
    assert!(d.outcome.starts_with("abort:"), "{}", d.outcome);
    let (_, d) = h.write_in(STRANGER, None, "/model");
    assert_eq!(d.outcome, "menu:model");
    for cmd in ["/settings", "/people", "/queue", "/new"] {
        let (_, d) = h.write_in(STRANGER, None, cmd);
        assert_eq!(d.outcome, "people:owner-only", "{cmd}");
    }
    let compact = Button::Compact {
        identity: PROJ.into(),
    };
    let (_, d) = h.tap(
        STRANGER,
        1,
        "x",
        &h.token_for(STRANGER, &compact, BUTTON_TTL_MS),
    );
    assert_ne!(d.outcome, "people:owner-only");
    let setting = Button::Setting {
        key: "notifications".into(),
        value: "\"all\"".into(),
    };
    let (_, d) = h.tap(
        STRANGER,
        1,
        "x",
        &h.token_for(STRANGER, &setting, BUTTON_TTL_MS),
    );
    assert_eq!(d.outcome, "people:owner-only");
}

#[test]
fn a_message_in_a_group_reaches_nothing_even_from_the_owner_or_a_member() {
    let mut h = Hub::with_proj();
    std::fs::write(
        &h.config,
        json!({ "people": { STRANGER.to_string(): "member" } }).to_string(),
    )
    .unwrap();
    for from in [OWNER, STRANGER] {
        let d = h.deliver(
            "message",
            json!({
                "message_id": 5,
                "from": user(from),
                "chat": { "id": -100_123, "type": "supergroup", "title": "team", "is_forum": true },
                "date": h.now / 1000,
                "text": "hello group",
            }),
        );
        assert_eq!(d.outcome, "ignored:not-private");
        assert!(h.rows_of(d.update_id).is_empty());
    }
    assert_eq!(h.turn_count(), 0);
}

/// A hub with `n` live pi and none selected (classic mode).
fn with_many(n: usize) -> (Hub, Vec<String>) {
    let mut h = Hub::new();
    let all: Vec<String> = (0..n)
        .map(|k| format!("/home/ann/projects/some-longer-folder/p{k:03}"))
        .collect();
    for identity in &all {
        h.connect(identity);
    }
    (h, all)
}

/// The edit a tap queued (besides its answer).
fn edit_of(h: &Hub, d: &Done) -> OutboxRow {
    let mut rows: Vec<OutboxRow> = h
        .rows_of(d.update_id)
        .into_iter()
        .filter(|r| r.method() != "answerCallbackQuery")
        .collect();
    assert_eq!(rows.len(), 1, "one edit: {rows:#?}");
    rows.remove(0)
}

/// Turns the pages of the list in `first` (a message of the bot) with ▶ until it is back at
/// the first page; every page within Telegram's limits. Returns every page's outbox row.
fn page_through(h: &mut Hub, message: i64, first: OutboxRow) -> Vec<OutboxRow> {
    let mut pages = vec![first];
    loop {
        let page = pages.last().unwrap().clone();
        assert!(text_of(&page).chars().count() <= 4096, "{}", text_of(&page));
        assert!(buttons_of(&page).len() <= 100);
        let (_, d) = h.tap(OWNER, message, text_of(&page), &token(&page, "▶"));
        assert_ne!(d.outcome, "button:unknown");
        let next = edit_of(h, &d);
        if buttons_of(&next)
            .iter()
            .map(|(l, _)| l)
            .eq(buttons_of(&pages[0]).iter().map(|(l, _)| l))
        {
            return pages;
        }
        assert!(pages.len() < 100, "the pages go round");
        pages.push(next);
    }
}

/// What `pick` finds among the buttons of every page, sorted.
fn found_on<T: Ord>(h: &Hub, pages: &[OutboxRow], pick: impl Fn(Button) -> Option<T>) -> Vec<T> {
    let mut found: Vec<T> = pages
        .iter()
        .flat_map(buttons_of)
        .filter_map(|(_, t)| h.action_of(&t).and_then(&pick))
        .collect();
    found.sort();
    found
}

#[test]
fn start_with_200_pi_pages_the_instances_and_every_one_can_be_selected() {
    let (mut h, all) = with_many(200);
    let (mid, d) = h.write("/start");
    assert_eq!(d.outcome, "menu:menu");
    let first = h.only_row_of(d.update_id);
    assert!(text_of(&first).contains("200 pi instances. Page 1 of 25."));
    let pages = page_through(&mut h, mid, first.clone());
    assert_eq!(pages.len(), 25);
    let selectable: Vec<String> = found_on(&h, &pages, |b| match b {
        Button::Select { identity } => Some(identity),
        _ => None,
    });
    assert_eq!(selectable, all, "every pi once, by paging");
    // ◀ on the first page goes round to the last.
    let (_, d) = h.tap(OWNER, mid, text_of(&first), &token(&first, "◀"));
    let last = edit_of(&h, &d);
    assert_eq!(last.method(), "editMessageText");
    assert!(
        text_of(&last).contains("Page 25 of 25."),
        "{}",
        text_of(&last)
    );
    assert!(text_of(&last).contains("p199"));
    // Selecting one on page 13 keeps the menu at that page, the pi marked.
    let page = &pages[12];
    let (_, d) = h.tap(OWNER, mid, text_of(page), &token(page, "p100"));
    assert_eq!(d.outcome, "selected");
    let after = edit_of(&h, &d);
    assert!(text_of(&after).contains("▶ p100:"), "{}", text_of(&after));
    assert!(text_of(&after).contains("Page 13 of 25."));
    // /start again opens at the selected pi's page.
    let (_, d) = h.write("/start");
    assert!(text_of(&h.only_row_of(d.update_id)).contains("Page 13 of 25."));
}

#[test]
fn the_chooser_for_200_pi_pages_and_any_page_can_send() {
    let (mut h, all) = with_many(200);
    let (mid, d) = h.write("which one?");
    assert_eq!(d.outcome, "chooser");
    let turn = h.turn_of(mid);
    let first = h.only_row_of(d.update_id);
    let question = h.next_message;
    assert_eq!(buttons_of(&first).len(), 8 + 3);
    let pages = page_through(&mut h, question, first);
    assert_eq!(pages.len(), 25);
    assert!(
        pages[1..]
            .iter()
            .all(|p| p.method() == "editMessageReplyMarkup")
    );
    let offered: Vec<String> = found_on(&h, &pages, |b| match b {
        Button::Send { to, turn: n, .. } if n == turn.id => Some(to),
        _ => None,
    });
    assert_eq!(offered, all, "every pi once, by paging");
    // A pi on page 20 takes it; a page tap after that only hears where it went.
    let page = &pages[19];
    let (_, d) = h.tap(OWNER, question, "", &token(page, "Send to p155"));
    assert_eq!(d.outcome, "sent");
    assert_eq!(h.turn(turn.id).identity.as_deref(), Some(all[155].as_str()));
    let (_, d) = h.tap(OWNER, question, "", &token(&pages[3], "▶"));
    assert_eq!(d.outcome, "send:taken");
}

#[test]
fn the_queue_of_200_waiting_prompts_pages_and_every_one_can_be_changed() {
    let mut h = Hub::with_proj();
    let (_, running) = h.prompt("running");
    h.dispatch(running.id);
    let waiting: Vec<i64> = (0..200)
        .map(|k| {
            h.prompt(&format!("prompt {k:03} {}", "word ".repeat(40)))
                .1
                .id
        })
        .collect();
    let (mid, d) = h.write("/queue");
    let first = h.only_row_of(d.update_id);
    assert!(text_of(&first).starts_with("Waiting for proj: 200"));
    let pages = page_through(&mut h, mid, first);
    assert_eq!(pages.len(), 25);
    let offered: Vec<i64> = found_on(&h, &pages, |b| match b {
        Button::Queue {
            turn,
            op: QueueOp::Priority,
        } => Some(turn),
        _ => None,
    });
    assert_eq!(offered, waiting, "every waiting prompt once, by paging");
    // The numbers count through the whole queue: page 20 starts at 153.
    assert!(
        text_of(&pages[19]).contains("\n153. prompt 152"),
        "{}",
        text_of(&pages[19])
    );
    // A prompt on page 20 goes first; the queue says so on its first page.
    let label = buttons_of(&pages[19])
        .into_iter()
        .map(|(l, _)| l)
        .find(|l| l.starts_with("155 ⚡"))
        .unwrap();
    let (_, d) = h.tap(OWNER, mid, text_of(&pages[19]), &token(&pages[19], &label));
    assert_eq!(d.outcome, "menu:queue");
    assert_eq!(h.queue(PROJ)[0], waiting[154]);
}

#[test]
fn new_with_200_folders_pages_and_any_page_starts_pi() {
    let mut h = Hub::with_proj();
    let root = h._dir.path().join("code");
    let mut folders: Vec<String> = (0..200)
        .map(|k| {
            let f = root.join(format!("project-{k:03}-with-a-longer-name"));
            std::fs::create_dir_all(&f).unwrap();
            f.canonicalize().unwrap().display().to_string()
        })
        .collect();
    folders.sort();
    let cfg = json!({ "workspaces": [root.display().to_string()] });
    std::fs::write(&h.config, cfg.to_string()).unwrap();
    let (mid, d) = h.write("/new");
    assert_eq!(d.outcome, "command:new:picker");
    let first = h.only_row_of(d.update_id);
    assert!(
        text_of(&first).ends_with("Page 1 of 25."),
        "{}",
        text_of(&first)
    );
    let pages = page_through(&mut h, mid, first);
    assert_eq!(pages.len(), 25);
    let offered: Vec<String> = found_on(&h, &pages, |b| match b {
        Button::NewPi { cwd } => Some(cwd),
        _ => None,
    });
    assert_eq!(offered, folders, "every folder once, by paging");
    // Every page offers a new session for the pi of this place, too.
    assert!(
        pages
            .iter()
            .all(|p| buttons_of(p)[0].0 == "🆕 New session for proj")
    );
    // A folder on page 20 starts pi there.
    let label = format!("📁 {}", folders[155]);
    let (_, d) = h.tap(OWNER, mid, text_of(&pages[19]), &token(&pages[19], &label));
    assert_eq!(d.outcome, "control:spawn", "{d:?}");
}

#[test]
fn people_with_200_people_page_and_removing_one_keeps_its_page() {
    let mut h = Hub::with_proj();
    let ids: Vec<i64> = (0..200).map(|k| 7_000_000 + k).collect();
    let people: serde_json::Map<String, Value> = ids
        .iter()
        .map(|id| (id.to_string(), json!("member")))
        .collect();
    std::fs::write(&h.config, json!({ "people": people }).to_string()).unwrap();
    let (mid, d) = h.write("/people");
    let first = h.only_row_of(d.update_id);
    assert!(
        text_of(&first).ends_with("Page 1 of 25."),
        "{}",
        text_of(&first)
    );
    let pages = page_through(&mut h, mid, first);
    assert_eq!(pages.len(), 25);
    let removable: Vec<i64> = found_on(&h, &pages, |b| match b {
        Button::RemovePerson { user, .. } => Some(user),
        _ => None,
    });
    assert_eq!(removable, ids, "every person once, by paging");
    let listed = pages
        .iter()
        .flat_map(|p| text_of(p).lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.contains("member, from telegram.json"))
        .count();
    assert_eq!(listed, 200);
    // Removing one on page 20 shows page 20 again, without them.
    let page = &pages[19];
    let label = format!("✖ Remove user {}", ids[155]);
    let (_, d) = h.tap(OWNER, mid, text_of(page), &token(page, &label));
    assert_eq!(d.outcome, "people:removed");
    // The person removed is told; the list is edited.
    let rows = h.rows_of(d.update_id);
    assert!(rows.iter().any(|r| r.chat_id == ids[155]), "{rows:#?}");
    let after = rows
        .into_iter()
        .find(|r| r.method() == "editMessageText")
        .unwrap();
    assert!(
        text_of(&after).contains("Page 20 of 25."),
        "{}",
        text_of(&after)
    );
    assert!(!text_of(&after).contains(&ids[155].to_string()));
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&h.config).unwrap()).unwrap();
    assert_eq!(file["people"].as_object().unwrap().len(), 199);
}
