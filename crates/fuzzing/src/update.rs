//! Telegram updates through the worker's handlers on a real SQLite store.
//!
//! The input is one update per line (`getUpdates` sends compact JSON). Lines starting with `#`
//! set up the hub first: `#threaded` (Threaded Mode), `#no-owner` (nobody paired yet),
//! `#first-contact` (that pairing mode). Each line is journaled as the poller does (its kind
//! as the poller names it) and handled as the worker does, all in one transaction like a
//! worker batch, which is then rolled back so every input starts from the same store.

use std::cell::RefCell;
use std::path::PathBuf;

use hub::buttons::{Button, QueueOp, Section};
use hub::config::PairingMode;
use hub::incoming::handlers::{self, AfterCommit, HandlerCtx};
use store::instances::{self, InstanceRow};
use store::lease::{self, Epoch};
use store::{Store, StoreError, callbacks, journal, kv};

/// The owner's user id (and their private chat's id).
pub const OWNER: i64 = 4242;
/// The clock of every input (buttons were made just before).
const NOW: i64 = 1_700_000_000_000;
/// The two pi that are connected.
const PROJ: &str = "/home/ann/proj";
const WEB: &str = "/home/ann/web";
/// Updates handled per input at most (a worker batch is larger; this keeps inputs fast).
const MAX_UPDATES: usize = 16;
/// The first update id.
const FIRST_UPDATE: i64 = 1000;

/// Buttons in the store under fixed tokens, so that callback queries in the corpus (and the
/// fuzzer's mutations of them) reach every kind of tap. Turn ids 1, 2, 3 are the turns the
/// first messages of an input create.
pub fn buttons() -> Vec<(&'static str, Button)> {
    let proj = || PROJ.to_owned();
    vec![
        (
            "tkSelect",
            Button::Select {
                identity: WEB.into(),
            },
        ),
        (
            "tkSend",
            Button::Send {
                turn: 1,
                to: proj(),
                instead_of: None,
            },
        ),
        (
            "tkSendAway",
            Button::Send {
                turn: 1,
                to: WEB.into(),
                instead_of: Some(proj()),
            },
        ),
        (
            "tkMove",
            Button::Move {
                turn: 1,
                identity: proj(),
                thread: 77,
            },
        ),
        (
            "tkIntent",
            Button::Intent {
                id: 1,
                create: true,
            },
        ),
        (
            "tkStale",
            Button::Stale {
                question: 1,
                run: true,
            },
        ),
        (
            "tkMenu",
            Button::Menu {
                identity: None,
                section: Section::Main,
            },
        ),
        (
            "tkStatus",
            Button::Menu {
                identity: Some(proj()),
                section: Section::Status,
            },
        ),
        (
            "tkQueueMenu",
            Button::Menu {
                identity: Some(proj()),
                section: Section::Queue,
            },
        ),
        (
            "tkSettings",
            Button::Menu {
                identity: Some(proj()),
                section: Section::Settings,
            },
        ),
        (
            "tkModel",
            Button::Model {
                identity: proj(),
                provider: "p".into(),
                id: "m".into(),
            },
        ),
        (
            "tkThinking",
            Button::Thinking {
                identity: proj(),
                level: "high".into(),
            },
        ),
        (
            "tkPriority",
            Button::Queue {
                turn: 1,
                op: QueueOp::Priority,
            },
        ),
        (
            "tkSkip",
            Button::Queue {
                turn: 2,
                op: QueueOp::Skip,
            },
        ),
        (
            "tkRemove",
            Button::Queue {
                turn: 1,
                op: QueueOp::Remove,
            },
        ),
        (
            "tkSetting",
            Button::Setting {
                key: "rendering".into(),
                value: "\"html\"".into(),
            },
        ),
        ("tkCompact", Button::Compact { identity: proj() }),
        ("tkDismiss", Button::Dismiss),
        (
            "tkNewPi",
            Button::NewPi {
                cwd: "/home/ann/other".into(),
            },
        ),
        ("tkNewSession", Button::NewSession { identity: proj() }),
        (
            "tkResume",
            Button::Resume {
                identity: proj(),
                path: "/s/1.jsonl".into(),
            },
        ),
        (
            "tkPrompt",
            Button::Prompt {
                identity: proj(),
                prompt: "go on".into(),
                style: Some("success".into()),
            },
        ),
        (
            "tkSettled",
            Button::Settled {
                answer: "done".into(),
            },
        ),
    ]
}

/// The store every input starts from.
struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    epoch: Epoch,
    config: PathBuf,
}

/// Why the transaction ended without a commit.
#[derive(Debug, thiserror::Error)]
enum End {
    /// Every input is rolled back on purpose.
    #[error("rolled back")]
    Rollback,
    #[error(transparent)]
    Store(#[from] StoreError),
}

thread_local! {
    static FIXTURE: RefCell<Option<Fixture>> = const { RefCell::new(None) };
}

fn fixture() -> Fixture {
    // In memory where the machine has it: the store is opened once, but a tap on a setting
    // writes telegram.json (with fsync) next to it.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("pi-telegram-fuzz")
            .tempdir_in(shm)
    } else {
        tempfile::Builder::new()
            .prefix("pi-telegram-fuzz")
            .tempdir()
    }
    .unwrap_or_else(|e| panic!("no temporary folder: {e}"));
    let store = Store::open(&dir.path().join("state.db"))
        .unwrap_or_else(|e| panic!("the store does not open: {e}"));
    let epoch = store
        .write(|tx| {
            kv::set_i64(tx, kv::OWNER, OWNER)?;
            let epoch = lease::acquire(tx, 1, NOW - 60_000)?;
            for (n, identity) in [PROJ, WEB].into_iter().enumerate() {
                let n = n as i64 + 1;
                instances::insert(
                    tx,
                    &InstanceRow {
                        id: format!("i{n}"),
                        identity: identity.into(),
                        transport: store::instances::Transport::Shim,
                        pid: Some(4000 + n),
                        cwd: identity.into(),
                        label: hub::names::label_of(identity),
                        session_id: None,
                        state: store::instances::InstanceState::Idle,
                        connected_ms: NOW - 10_000 + n,
                        gone_ms: None,
                        gone_reason: None,
                    },
                )?;
            }
            kv::set(tx, hub::state::SELECTED, PROJ)?;
            for (token, button) in buttons() {
                callbacks::create(tx, token, OWNER, &button.encode(), NOW - 1000, 86_400_000)?;
            }
            Ok::<_, StoreError>(epoch)
        })
        .unwrap_or_else(|e| panic!("the store cannot be set up: {e}"));
    let config = dir.path().join("telegram.json");
    Fixture {
        _dir: dir,
        store,
        epoch,
        config,
    }
}

/// Never a panic; every update handled gets its outcome recorded in the journal in the same
/// transaction; an update that fails leaves a usable connection (the worker then handles the
/// batch one by one, recording the failure).
pub fn update(data: &[u8]) {
    let text = crate::text(data);
    let mut threaded = false;
    let mut owner = true;
    let mut pairing = PairingMode::Code;
    let mut updates = Vec::new();
    for line in text.split('\n') {
        match line.trim_end() {
            "#threaded" => threaded = true,
            "#no-owner" => owner = false,
            "#first-contact" => pairing = PairingMode::FirstContact,
            l if l.starts_with('#') || l.trim().is_empty() => {}
            l => updates.push(l),
        }
    }
    updates.truncate(MAX_UPDATES);
    FIXTURE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let f = cell.get_or_insert_with(fixture);
        let ctx = HandlerCtx {
            bot_username: "pibot".into(),
            pairing,
            now_ms: NOW,
            epoch: f.epoch,
            title_template: "{slot} · {project}".into(),
            config_path: f.config.clone(),
            profile: hub::paths::ProfileName::default_profile(),
            // Seeded: the button tokens a handler draws are the same on every run of an input.
            clock: hub::clock::Clock::simulated(NOW, 1),
        };
        let result = f.store.write(|tx| {
            if threaded {
                kv::set(tx, store::threads::MODE, "threaded")?;
            }
            if !owner {
                kv::delete(tx, kv::OWNER)?;
            }
            let mut after = AfterCommit::default();
            for (n, raw) in updates.iter().enumerate() {
                let update_id = FIRST_UPDATE + n as i64;
                let kind = hub::incoming::poller::kind_name(raw);
                journal::append_batch(
                    tx,
                    &[journal::Incoming {
                        update_id,
                        kind: &kind,
                        raw,
                    }],
                    update_id + 1,
                    NOW,
                )?;
                let Some(entry) = journal::pending(tx, MAX_UPDATES + 1)?
                    .into_iter()
                    .find(|e| e.update_id == update_id)
                else {
                    panic!("update {update_id} was journaled but is not pending");
                };
                match handlers::handle(tx, &ctx, &entry, &mut after) {
                    Ok(outcome) => {
                        assert!(!outcome.text().is_empty(), "an empty outcome for {raw}");
                        if verbose() {
                            eprintln!("update {update_id} ({kind}): {outcome}");
                        }
                        let recorded = journal::outcome(tx, update_id)?.map(|(_, o)| o);
                        assert_eq!(
                            recorded.as_ref(),
                            Some(&outcome),
                            "the journal records the outcome of {raw}"
                        );
                    }
                    Err(e) => {
                        // The worker rolls the batch back and handles it one by one; the
                        // connection must still work for that.
                        let n: i64 = tx
                            .query_row("SELECT count(*) FROM journal", [], |r| r.get(0))
                            .unwrap_or_else(|q| panic!("after '{e}' the store fails: {q}"));
                        assert!(n > 0);
                        note_error(&e);
                        return Err(End::Rollback);
                    }
                }
            }
            Err::<(), _>(End::Rollback)
        });
        match result {
            Err(End::Rollback) => {}
            Ok(()) => unreachable!("every input is rolled back"),
            Err(End::Store(e)) => panic!("the store failed around the handlers: {e}"),
        }
    });
}

/// A handler's store error is not a crash (the worker isolates the update), but each kind is
/// worth a look: printed once per process.
fn note_error(e: &StoreError) {
    thread_local! {
        static SEEN: RefCell<std::collections::BTreeSet<String>> = const { RefCell::new(std::collections::BTreeSet::new()) };
    }
    let message = e.to_string();
    SEEN.with(|seen| {
        if seen.borrow_mut().insert(message.clone()) {
            eprintln!("fuzzing::update: a handler failed (isolated by the worker): {message}");
        }
    });
}

/// `FUZZ_VERBOSE=1` prints every outcome (to see what a corpus entry reaches).
fn verbose() -> bool {
    static VERBOSE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("FUZZ_VERBOSE").is_some())
}
