//! Deterministic simulation: thousands of random interleavings of connect, disconnect, lost
//! connections, hub crashes at every crash point and restarts, topics deleted by the person,
//! API faults (including commit-then-lose-the-answer) and capability flips, with the
//! invariants checked after every step.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use ::threads::invariants::{SeenTopic, check};
use ::threads::provision::{self, Outcome, Request};
use ::threads::{Crash, Point, TopicApi, TopicError, events, reconcile};
use store::Store;
use store::lease::{self, Epoch};
use store::threads::{self as tables, BindingState};

const CHAT: i64 = 1001;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// The fake Telegram side: topics, and faults drawn from the shared generator.
struct SimApi {
    topics: Mutex<BTreeMap<i64, bool>>,
    next: Mutex<i64>,
    enabled: Mutex<bool>,
    rng: Mutex<Rng>,
}

impl SimApi {
    fn fault(&self) -> u64 {
        self.rng.lock().unwrap().below(1000)
    }
}

impl TopicApi for SimApi {
    async fn create(&self, _chat: i64, _name: &str) -> Result<i64, TopicError> {
        if !*self.enabled.lock().unwrap() {
            return Err(TopicError::Refused("the chat is not a forum".into()));
        }
        let f = self.fault();
        if f < 40 {
            return Err(TopicError::Transient("connection refused".into()));
        }
        if f < 60 {
            return Err(TopicError::Flood(Duration::from_secs(3)));
        }
        if f < 80 {
            return Err(TopicError::Unknown("timed out before sending".into()));
        }
        let mut next = self.next.lock().unwrap();
        *next += 1;
        self.topics.lock().unwrap().insert(*next, true);
        if f < 140 {
            // The topic exists, the answer is lost.
            return Err(TopicError::Unknown("connection closed".into()));
        }
        Ok(*next)
    }

    async fn delete(&self, _chat: i64, thread: i64) -> Result<(), TopicError> {
        let f = self.fault();
        if f < 50 {
            return Err(TopicError::Transient("connection refused".into()));
        }
        let mut topics = self.topics.lock().unwrap();
        match topics.get_mut(&thread) {
            Some(alive) if *alive => {
                *alive = false;
                if f < 100 {
                    return Err(TopicError::Unknown("connection closed".into()));
                }
                Ok(())
            }
            _ => Err(TopicError::Gone),
        }
    }
}

struct Sim {
    store: Store,
    api: SimApi,
    epoch: Epoch,
    live: BTreeSet<String>,
    orphans_by_decision: BTreeSet<i64>,
    now: i64,
    steps: usize,
    crashes: usize,
}

impl Sim {
    fn topics(&self) -> Vec<SeenTopic> {
        self.api
            .topics
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| !self.orphans_by_decision.contains(t))
            .map(|(t, alive)| SeenTopic {
                chat_id: CHAT,
                thread_id: *t,
                alive: *alive,
                by_bot: true,
            })
            .collect()
    }

    /// After the person settled an intent of unknown outcome without naming its topic, a topic
    /// it may have made is unknown to the hub by their decision (theirs to delete).
    fn orphan_unknown_topics(&mut self) {
        let known: BTreeSet<i64> = self
            .store
            .read(tables::bindings)
            .unwrap()
            .iter()
            .map(|b| b.thread_id)
            .collect();
        let pending: BTreeSet<i64> = self
            .store
            .read(tables::pending_cleanups)
            .unwrap()
            .iter()
            .map(|c| c.thread_id)
            .collect();
        let unknown: Vec<i64> = self
            .api
            .topics
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, a)| **a && !known.contains(t) && !pending.contains(t))
            .map(|(t, _)| *t)
            .collect();
        self.orphans_by_decision.extend(unknown);
    }

    fn restart(&mut self) {
        self.epoch = self
            .store
            .write(|tx| lease::acquire(tx, 1, self.now))
            .unwrap();
        provision::mark_interrupted_intents(&self.store, self.epoch).unwrap();
        // Every connection died with the hub.
        for id in std::mem::take(&mut self.live) {
            self.store
                .write(|tx| events::went_offline(tx, &id, self.now))
                .unwrap();
        }
        self.crashes += 1;
    }

    async fn connect(&mut self, identity: &str, rng: &mut Rng) {
        let crash_at = rng.chance(150).then(|| Point::ALL[rng.below(4) as usize]);
        let mut hook = |p: Point| {
            if Some(p) == crash_at {
                Err(Crash(p))
            } else {
                Ok(())
            }
        };
        let req = Request {
            identity,
            instance_id: Some("i"),
            chat_id: CHAT,
            cwd: identity,
            project: identity,
            title_template: ::threads::DEFAULT_TITLE,
        };
        match provision::provision(
            &self.store,
            &self.api,
            self.epoch,
            &req,
            self.now,
            &mut hook,
        )
        .await
        {
            Ok(outcome) => {
                if outcome.binding().is_some() {
                    self.live.insert(identity.to_owned());
                }
                if let Outcome::Ambiguous(_) | Outcome::Blocked(_) = outcome {
                    self.live.insert(identity.to_owned());
                }
            }
            Err(::threads::ThreadsError::Crash(_)) => self.restart(),
            Err(e) => panic!("store failure: {e}"),
        }
    }
}

async fn run(seed: u64, steps: usize) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    let epoch = store.write(|tx| lease::acquire(tx, 1, 0)).unwrap();
    let mut rng = Rng(seed);
    let api = SimApi {
        topics: Mutex::new(BTreeMap::new()),
        next: Mutex::new(100),
        enabled: Mutex::new(true),
        rng: Mutex::new(Rng(seed ^ 0xABCD)),
    };
    let mut sim = Sim {
        store,
        api,
        epoch,
        live: BTreeSet::new(),
        orphans_by_decision: BTreeSet::new(),
        now: 1_000,
        steps: 0,
        crashes: 0,
    };
    let identities = ["/w/a", "/w/b", "/w/c", "/w/d", "/w/e"];
    let mut history: Vec<String> = Vec::new();
    for _ in 0..steps {
        sim.now += 1 + rng.below(5_000) as i64;
        let id = identities[rng.below(identities.len() as u64) as usize];
        let op = rng.below(100);
        history.push(format!("{op} {id}"));
        match op {
            0..=34 => sim.connect(id, &mut rng).await,
            35..=44 => {
                sim.store
                    .write(|tx| events::disconnected(tx, id, sim.epoch, sim.now))
                    .unwrap();
                sim.live.remove(id);
            }
            45..=54 => {
                sim.store
                    .write(|tx| events::went_offline(tx, id, sim.now))
                    .unwrap();
                sim.live.remove(id);
            }
            55..=64 => {
                // The person deletes a topic; the hub learns it at its next send there.
                let alive: Vec<i64> = sim
                    .api
                    .topics
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(_, a)| **a)
                    .map(|(t, _)| *t)
                    .collect();
                if !alive.is_empty() {
                    let t = alive[rng.below(alive.len() as u64) as usize];
                    sim.api.topics.lock().unwrap().insert(t, false);
                    sim.store
                        .write(|tx| events::topic_gone(tx, CHAT, t, sim.now))
                        .unwrap();
                }
            }
            65..=79 => {
                let crash_at = rng.chance(100).then(|| {
                    if rng.chance(500) {
                        Point::BeforeDelete
                    } else {
                        Point::Deleted
                    }
                });
                let mut hook = |p: Point| {
                    if Some(p) == crash_at {
                        Err(Crash(p))
                    } else {
                        Ok(())
                    }
                };
                match reconcile::reconcile(&sim.store, &sim.api, sim.epoch, sim.now, &mut hook)
                    .await
                {
                    Ok(_) => {}
                    Err(::threads::ThreadsError::Crash(_)) => sim.restart(),
                    Err(e) => panic!("{e}"),
                }
            }
            80..=84 => sim.restart(),
            85..=92 => {
                // The person settles an ambiguous intent.
                let ambiguous = sim.store.read(tables::intents).unwrap();
                if let Some(i) = ambiguous
                    .into_iter()
                    .find(|i| i.thread_id.is_none() && i.state == tables::IntentState::Ambiguous)
                {
                    // Both answers remove the intent; "create anyway" provisions again at once.
                    let create_anyway = rng.chance(500);
                    sim.store
                        .write(|tx| tables::delete_intent(tx, i.id))
                        .unwrap();
                    sim.orphan_unknown_topics();
                    if create_anyway && sim.live.contains(&i.identity) {
                        let identity = i.identity.clone();
                        sim.connect(&identity, &mut rng).await;
                    }
                }
            }
            93..=94 => {
                // A stale cleanup for a topic that is in use (a race elsewhere): the reconciler
                // must refuse to delete a bound topic.
                let bound = sim.store.read(tables::bindings).unwrap();
                if let Some(b) = bound.first() {
                    sim.store
                        .write(|tx| {
                            tables::add_cleanup(tx, b.chat_id, b.thread_id, "stale", sim.now)
                        })
                        .unwrap();
                }
            }
            95..=96 => {
                // "Move here": the person made a topic and moves an instance into it.
                let mut next = sim.api.next.lock().unwrap();
                *next += 1;
                let t = *next;
                drop(next);
                sim.api.topics.lock().unwrap().insert(t, true);
                let live = sim.live.contains(id);
                // An intent of unknown outcome and no binding: "move here" adopts the intent.
                let adopts = sim
                    .store
                    .read(|c| {
                        Ok::<_, store::StoreError>(
                            tables::binding(c, id)?.is_none()
                                && tables::intent_for(c, id)?
                                    .is_some_and(|i| i.thread_id.is_none()),
                        )
                    })
                    .unwrap();
                let newcomer = live.then_some(events::Newcomer {
                    identity: id,
                    instance_id: Some("sim"),
                    cwd: id,
                    project: id,
                    title_template: ::threads::DEFAULT_TITLE,
                });
                let moved = sim
                    .store
                    .write(|tx| {
                        events::bind_topic(tx, id, newcomer.as_ref(), CHAT, t, sim.epoch, sim.now)
                    })
                    .unwrap();
                match moved {
                    // Nothing to move: the person's topic stays theirs.
                    None => {
                        sim.orphans_by_decision.insert(t);
                    }
                    // The person put it in their own topic instead of the one the intent may
                    // have made: that one is theirs to delete, by decision.
                    Some(_) if adopts => sim.orphan_unknown_topics(),
                    Some(_) => {}
                }
            }
            _ => {
                let mut enabled = sim.api.enabled.lock().unwrap();
                *enabled = !*enabled || rng.chance(700);
            }
        }
        sim.steps += 1;
        if std::env::var("SIM_TRACE").is_ok() && sim.steps > 360 {
            eprintln!(
                "step {} op {op} {id}: intents {:?} topics alive {:?}",
                sim.steps,
                sim.store
                    .read(tables::intents)
                    .unwrap()
                    .iter()
                    .map(|i| (i.id, i.identity.clone(), i.state, i.thread_id))
                    .collect::<Vec<_>>(),
                sim.api
                    .topics
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(_, a)| **a)
                    .map(|(t, _)| *t)
                    .collect::<Vec<_>>()
            );
        }
        let violations = check(&sim.store, Some(&sim.topics())).unwrap();
        if !violations.is_empty() {
            let from = history.len().saturating_sub(40);
            panic!(
                "seed {seed}, step {}: {violations:#?}\norphans {:?}\nlast ops: {:?}\nbindings: {:#?}\nintents: {:#?}\ncleanups: {:#?}\ntopics: {:?}",
                sim.steps,
                sim.orphans_by_decision,
                &history[from..],
                sim.store.read(tables::bindings).unwrap(),
                sim.store.read(tables::intents).unwrap(),
                sim.store.read(tables::pending_cleanups).unwrap(),
                sim.api.topics.lock().unwrap()
            );
        }
    }
    // Finally everything settles: all topics reconciled, no binding points to a dead topic.
    for b in sim.store.read(tables::bindings).unwrap() {
        if b.state == BindingState::Active {
            let alive = sim
                .api
                .topics
                .lock()
                .unwrap()
                .get(&b.thread_id)
                .copied()
                .unwrap_or(false);
            assert!(
                alive,
                "seed {seed}: {} bound to dead thread {}",
                b.identity, b.thread_id
            );
        }
    }
    (sim.steps, sim.crashes)
}

#[tokio::test]
async fn thousands_of_random_interleavings_keep_the_invariants() {
    let seeds: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let mut total = 0;
    let mut crashes = 0;
    for seed in 0..seeds {
        let (steps, c) = run(seed * 7919 + 1, 400).await;
        total += steps;
        crashes += c;
    }
    eprintln!(
        "{total} steps over {seeds} seeds, {crashes} hub crashes/restarts, invariants held after every step"
    );
    assert!(total >= 10_000);
}
