//! The hand-over of an answer from the conductor to the sender (`sender::Handoff`) over a real
//! SQLite file and the real sender task: a claim takes only the head of its chat, a claimed row
//! is sent without a pick of the sender's own, and a stop puts claimed rows that were never
//! called back to `pending`.
#![allow(clippy::unwrap_used)]

use hub::db::Durability;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hub::bot_api::{BotApi, Call};
use hub::db::Db;
use hub::outgoing::sender::{self, Handoff, Opening};
use hub::wakes::Wakes;
use serde_json::{Value, json};
use store::outbox::{self, NewRow, State};
use store::{Store, StoreError};
use telegram::{Pacer, PacingConfig, RawUpdate, Upload};
use tokio::sync::watch;

const CHAT: i64 = 4242;

/// A Telegram that answers every call with a message id and remembers the calls' texts and
/// when each arrived. With `hold_first`, the first request is held up on its way that long.
#[derive(Default)]
struct Recorder {
    hold_first: Duration,
    texts: Mutex<Vec<String>>,
    arrivals: Mutex<Vec<std::time::Instant>>,
}

impl BotApi for Recorder {
    fn call<'a>(&'a self, _method: &'a str, params: &'a Value) -> Call<'a, Value> {
        let text = params["text"].as_str().unwrap_or_default().to_owned();
        Box::pin(async move {
            if self.texts.lock().unwrap().is_empty() && !self.hold_first.is_zero() {
                tokio::time::sleep(self.hold_first).await;
            }
            self.texts.lock().unwrap().push(text);
            self.arrivals
                .lock()
                .unwrap()
                .push(std::time::Instant::now());
            Ok(json!({ "message_id": 1 }))
        })
    }

    fn call_multipart<'a>(
        &'a self,
        method: &'a str,
        params: &'a Value,
        _files: Vec<Upload>,
    ) -> Call<'a, Value> {
        self.call(method, params)
    }

    fn get_updates<'a>(
        &'a self,
        _offset: Option<i64>,
        _limit: u32,
        _timeout: Duration,
        _allowed_updates: &'a [&'a str],
    ) -> Call<'a, Vec<RawUpdate>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

fn enqueue(tx: &store::Connection, turn: i64, text: &str) -> Result<i64, StoreError> {
    let params = json!({ "chat_id": CHAT, "text": text });
    let id = outbox::enqueue(
        tx,
        &NewRow {
            chat_id: CHAT,
            thread_id: None,
            delivery: &outbox::single("sendMessage", &params),
            purpose: &outbox::Purpose::Answer { turn }.piece(0),
            source_update_id: None,
            resend_if_unknown: true,
            identity: None,
            turn_id: Some(turn),
        },
        1_000,
    )?;
    Ok(id.unwrap())
}

/// Turn 7's answer queued and claimed in one commit, as the conductor does.
async fn queue_and_claim(
    db: &Db,
    opening: Opening,
) -> (Option<store::outbox::OutboxRow>, store::CommitNo) {
    db.write_numbered(
        Durability::BeforeTelling(hub::pi::instance::Reach::ThisMachine),
        move |tx| {
            enqueue(tx, 7, "the answer")?;
            Handoff::claim(tx, opening, 7, 1_000)
        },
        |_| false,
    )
    .await
    .unwrap()
}

fn state(db: &Db, id: i64) -> State {
    db.store()
        .read(|c| outbox::get(c, id))
        .unwrap()
        .unwrap()
        .state
}

struct Scene {
    _dir: tempfile::TempDir,
    db: Db,
    api: Arc<Recorder>,
    handoff: Handoff,
    claims: Option<sender::Claims>,
    pacer: Arc<tokio::sync::Mutex<Pacer>>,
}

fn scene() -> Scene {
    scene_with(PacingConfig::default(), Recorder::default())
}

fn scene_with(pacing: PacingConfig, api: Recorder) -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    let db = Db::new(Arc::new(store));
    let pacer = Arc::new(tokio::sync::Mutex::new(Pacer::new(pacing)));
    let (handoff, claims) = sender::handoff(pacer.clone());
    Scene {
        _dir: dir,
        db,
        api: Arc::new(api),
        handoff,
        claims: Some(claims),
        pacer,
    }
}

/// The scene's sender, running until the returned switch is set.
fn run_sender(
    s: &mut Scene,
) -> (
    watch::Sender<bool>,
    tokio::task::JoinHandle<Result<(), hub::HubError>>,
) {
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(sender::run(
        s.db.clone(),
        s.api.clone(),
        s.pacer.clone(),
        Wakes::default(),
        s.claims.take().unwrap(),
        std::sync::Arc::new(hub::assistant::Watched::new(
            "/nonexistent/telegram.json".into(),
            hub::paths::ProfileName::default_profile(),
        )),
        stop,
    ));
    (stop_tx, task)
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_answer_is_sent_without_a_pick_of_the_senders_own() {
    let mut s = scene();
    let (stop_tx, task) = run_sender(&mut s);
    // The sender has nothing to do: it waits, and a claim may be made.
    let handoff = s.handoff.clone();
    eventually("the sender to wait idle", || handoff.open().is_some()).await;
    let opening = s.handoff.open().unwrap();
    let (claimed, commit) = queue_and_claim(&s.db, opening).await;
    let row = claimed.expect("the head of its chat, with pacing free, is claimed");
    assert_eq!(
        state(&s.db, row.id),
        State::Sending,
        "claimed in that commit"
    );
    let id = row.id;
    // Nobody wakes the sender but the hand-over itself.
    s.handoff.give(row, commit);
    let api = s.api.clone();
    eventually("the claimed answer at Telegram", || {
        api.texts.lock().unwrap().as_slice() == ["the answer"]
    })
    .await;
    let db = s.db.clone();
    eventually("the send recorded", || state(&db, id) == State::Sent).await;
    // A commit is seen before `Store::write` has synced it: only once the sender is past its
    // record (waiting again) must the record be on disk.
    eventually("the sender to wait idle again", || {
        s.handoff.open().is_some()
    })
    .await;
    assert_eq!(
        s.db.store().unsynced_commits(),
        0,
        "the recorded send is durable"
    );
    stop_tx.send(true).unwrap();
    task.await.unwrap().unwrap();
    assert!(
        s.handoff.open().is_none(),
        "a sender stopped while it waited takes no more claims"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_takes_only_the_head_of_its_chat() {
    let s = scene();
    let opening = Opening::with_pacer(s.pacer.clone());
    let (claimed, older) =
        s.db.write(Durability::OnDisk, move |tx| {
            let older = enqueue(tx, 6, "an older message of the chat")?;
            enqueue(tx, 7, "the answer")?;
            Ok((Handoff::claim(tx, opening, 7, 1_000)?, older))
        })
        .await
        .unwrap();
    assert!(
        claimed.is_none(),
        "an older row of the chat goes first: nothing claimed past it"
    );
    assert_eq!(state(&s.db, older), State::Pending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_puts_claims_never_called_back_to_pending() {
    let mut s = scene();
    let opening = Opening::with_pacer(s.pacer.clone());
    let (claimed, commit) = queue_and_claim(&s.db, opening).await;
    let row = claimed.unwrap();
    let id = row.id;
    s.handoff.give(row, commit);
    // The hub stops before the sender looks at its claims.
    let (_stop_tx, stop) = watch::channel(true);
    sender::run(
        s.db.clone(),
        s.api.clone(),
        s.pacer.clone(),
        Wakes::default(),
        s.claims.take().unwrap(),
        std::sync::Arc::new(hub::assistant::Watched::new(
            "/nonexistent/telegram.json".into(),
            hub::paths::ProfileName::default_profile(),
        )),
        stop,
    )
    .await
    .unwrap();
    assert!(s.api.texts.lock().unwrap().is_empty(), "nothing was called");
    assert_eq!(
        state(&s.db, id),
        State::Pending,
        "sent normally at the next start, not again with a repeat mark"
    );
    assert!(
        s.handoff.open().is_none(),
        "a stopped sender takes no more claims"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_judged_by_the_pace_inside_its_transaction_not_at_its_opening() {
    let mut s = scene();
    let (stop_tx, task) = run_sender(&mut s);
    let handoff = s.handoff.clone();
    eventually("the sender to wait idle", || handoff.open().is_some()).await;
    let opening = s.handoff.open().unwrap();
    // Between the opening and the claim's transaction the chat's whole burst is spent (the
    // sender, woken meanwhile, sent three messages): the answer must wait its turn.
    {
        let mut p = s.pacer.lock().await;
        for _ in 0..PacingConfig::default().per_chat_burst {
            p.consume(Some(CHAT), 1_000);
        }
    }
    let (claimed, _) = queue_and_claim(&s.db, opening).await;
    assert!(
        claimed.is_none(),
        "claimed by a pace from before the sends: it would reach Telegram early"
    );
    stop_tx.send(true).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_held_up_on_its_way_still_arrives_a_paced_interval_before_the_next() {
    // One message per 100 ms in the chat, no burst; the first request takes 150 ms to arrive.
    let interval = Duration::from_millis(100);
    let cfg = PacingConfig {
        per_chat_per_sec: 10.0,
        per_chat_burst: 1,
        ..PacingConfig::default()
    };
    let mut s = scene_with(
        cfg,
        Recorder {
            hold_first: Duration::from_millis(150),
            ..Recorder::default()
        },
    );
    s.db.write(Durability::OnDisk, |tx| {
        enqueue(tx, 1, "first")?;
        enqueue(tx, 2, "second")
    })
    .await
    .unwrap();
    let (stop_tx, task) = run_sender(&mut s);
    let api = s.api.clone();
    eventually("both messages at Telegram", || {
        api.arrivals.lock().unwrap().len() == 2
    })
    .await;
    let arrivals = s.api.arrivals.lock().unwrap().clone();
    let gap = arrivals[1] - arrivals[0];
    // The pacer's own slack (2 %) and whole milliseconds aside: at least the interval. A send
    // counted when its request left let the second arrive right behind the first.
    assert!(
        gap >= interval.mul_f64(0.95),
        "the second message arrived {gap:?} after the first; the chat allows one per {interval:?}"
    );
    stop_tx.send(true).unwrap();
    task.await.unwrap().unwrap();
}
