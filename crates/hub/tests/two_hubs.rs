//! Two hubs on one database (the older one's lock was lost, say on a network file system): the
//! older hub loses the lease while its `createForumTopic` is on the wire. It may commit nothing
//! but recovery evidence; the newer hub adopts that evidence, and exactly one topic results.
//! Real SQLite file, real HTTP to tg-fake.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use hub::outgoing::topics::ClientTopics;
use store::Store;
use store::lease;
use telegram::{Client, ClientOptions, Pacer, PacingConfig, Token};
use tg_fake::world::TopicState;
use tg_fake::{FakeConfig, FakeServer, FaultKind, FaultSpec};
use threads::invariants::{SeenTopic, check};
use threads::provision::{self, Outcome, Request};
use threads::{Crash, Point};
use tokio::sync::Mutex;

const OWNER: i64 = tg_fake::DEFAULT_USER_ID;

fn topics_api(fake: &FakeServer) -> ClientTopics {
    let client = Client::new(
        fake.base_url(),
        Token::new(tg_fake::DEFAULT_TOKEN).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let pacer = Pacer::new(PacingConfig::default());
    ClientTopics::new(
        Arc::new(client),
        Arc::new(Mutex::new(pacer)),
        hub::clock::Clock::real(),
    )
}

fn seen(fake: &FakeServer) -> Vec<SeenTopic> {
    fake.control()
        .topics(Some(OWNER), None)
        .unwrap()
        .into_iter()
        .map(|t| SeenTopic {
            chat_id: OWNER,
            thread_id: t.thread_id,
            alive: t.state != TopicState::Deleted,
            by_bot: t.created_by_bot,
        })
        .collect()
}

/// A crash hook that never crashes.
fn no_crash(_: Point) -> Result<(), Crash> {
    Ok(())
}

fn request() -> Request<'static> {
    Request {
        identity: "/work/web",
        instance_id: Some("i1"),
        chat_id: OWNER,
        cwd: "/work/web",
        project: "web",
        title_template: threads::DEFAULT_TITLE,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newer_hub_adopts_the_topic_the_older_one_created_after_losing_the_lease() {
    let fake = FakeServer::start(FakeConfig {
        has_topics_enabled: true,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    // Make sure the chat exists at the fake.
    fake.control()
        .send_text(tg_fake::control::SendText {
            text: "hi".into(),
            ..Default::default()
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let older_store = Arc::new(Store::open(&path).unwrap());
    let newer_store = Store::open(&path).unwrap();
    let old_epoch = older_store
        .write(|tx| lease::acquire(tx, 1, 1_000))
        .unwrap();
    // The create takes a while on the wire; the newer hub starts meanwhile.
    fake.control()
        .add_fault(FaultSpec {
            method: "createForumTopic".into(),
            kind: FaultKind::Delay,
            count: Some(1),
            probability: None,
            retry_after: None,
            delay_ms: Some(700),
        })
        .unwrap();
    let older = {
        let store = older_store.clone();
        let api = topics_api(&fake);
        tokio::spawn(async move {
            let mut hook = no_crash;
            provision::provision(&store, &api, old_epoch, &request(), 2_000, &mut hook).await
        })
    };
    tokio::time::sleep(Duration::from_millis(250)).await;
    let new_epoch = newer_store
        .write(|tx| lease::acquire(tx, 2, 3_000))
        .unwrap();
    assert!(new_epoch > old_epoch);
    let outcome = older.await.unwrap().unwrap();
    assert_eq!(
        outcome,
        Outcome::LostLease,
        "the older hub commits no binding"
    );
    let evidence = newer_store
        .read(|c| store::threads::evidence(c, None))
        .unwrap();
    assert_eq!(evidence.len(), 1, "it left recovery evidence");
    assert!(
        newer_store
            .read(store::threads::bindings)
            .unwrap()
            .is_empty()
    );
    let created = fake.control().topics(Some(OWNER), None).unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(evidence[0].thread_id, created[0].thread_id);

    // The newer hub provisions the same identity: it adopts, it does not create.
    let api = topics_api(&fake);
    let mut hook = no_crash;
    let outcome = provision::provision(&newer_store, &api, new_epoch, &request(), 4_000, &mut hook)
        .await
        .unwrap();
    let Outcome::Adopted(b) = outcome else {
        panic!("expected adoption, got {outcome:?}");
    };
    assert_eq!(b.thread_id, created[0].thread_id);
    assert_eq!(b.epoch, new_epoch.0);
    assert_eq!(
        fake.control().requests(0, Some("createForumTopic")).len(),
        1,
        "exactly one createForumTopic in all"
    );
    let problems = check(&newer_store, Some(&seen(&fake))).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        newer_store
            .read(|c| store::threads::evidence(c, None))
            .unwrap()
            .is_empty(),
        "the evidence is used up"
    );
    // The older hub cannot change anything any more.
    let mut hook = no_crash;
    let late = provision::provision(
        &older_store,
        &api,
        old_epoch,
        &Request {
            identity: "/work/api",
            instance_id: Some("i2"),
            cwd: "/work/api",
            project: "api",
            ..request()
        },
        5_000,
        &mut hook,
    )
    .await
    .unwrap();
    assert_eq!(late, Outcome::LostLease);
    assert_eq!(
        fake.control().requests(0, Some("createForumTopic")).len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_that_lost_the_lease_before_calling_creates_nothing_and_the_intent_blocks() {
    let fake = FakeServer::start(FakeConfig {
        has_topics_enabled: true,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let older_store = Store::open(&path).unwrap();
    let newer_store = Store::open(&path).unwrap();
    let old_epoch = older_store
        .write(|tx| lease::acquire(tx, 1, 1_000))
        .unwrap();
    let api = topics_api(&fake);
    // The newer hub takes the lease right after the older one committed its intent.
    let mut hook = |p: Point| -> Result<(), Crash> {
        if p == Point::IntentCommitted {
            newer_store
                .write(|tx| lease::acquire(tx, 2, 2_000))
                .unwrap();
        }
        Ok(())
    };
    let outcome = provision::provision(&older_store, &api, old_epoch, &request(), 1_500, &mut hook)
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::LostLease);
    assert!(
        fake.control()
            .requests(0, Some("createForumTopic"))
            .is_empty()
    );
    // The newer hub does not guess: the intent of an older epoch blocks automatic creation
    // (the person decides), and nothing exists at Telegram.
    let new_epoch = newer_store.read(lease::current).unwrap().unwrap().epoch;
    let mut hook = no_crash;
    let outcome = provision::provision(&newer_store, &api, new_epoch, &request(), 3_000, &mut hook)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Blocked(_)), "{outcome:?}");
    assert!(
        fake.control()
            .requests(0, Some("createForumTopic"))
            .is_empty()
    );
    let problems = check(&newer_store, Some(&[])).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}
