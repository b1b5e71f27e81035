//! Soak: three real pi in Threaded Mode (two with the extension, one headless that the hub
//! spawned), a scripted conversation of plain, streamed, queued, aborted, reacted, edited and
//! file prompts, while the hub is SIGKILLed at random every few seconds and now and then a pi
//! with the extension is killed and started again. At the end, from the outside (tg-fake's
//! updates and transcript, the fake model's request log) and the store:
//!
//! - every update tg-fake issued is in the journal and handled (0 lost);
//! - no prompt reached pi twice (the model's request log: a prompt in one request's last user
//!   message at most once across requests, and never twice in one history), but for a headless
//!   turn the hub's crash cut off before pi started a tool, which the hub runs again and says
//!   so to pi ([`hub::outgoing::texts::SENT_AGAIN`]): counted apart;
//! - one topic per pi, none duplicated;
//! - every answer of a turn pi finished is in its topic; a second copy only as a marked resend
//!   (a send whose outcome was unknown), counted;
//! - `threads::invariants` clean.
//!
//! Beside the kills, tg-fake fails a share of the calls on the conversation's way
//! (`SOAK_FAULTS`, percent of calls, default 4): a `500`, a connection dropped before the
//! request is handled, one dropped after it is (the effect happened, the hub cannot know), a
//! delay. Not on topic calls, which the person would be asked about (the fault matrix covers
//! them), nor "thread not found", which would be a lie about a topic that is there.
//!
//! The CI run is short (`SOAK_TURNS`, default 40); `scripts/soak.sh` runs the long one and
//! prints the table. `SOAK_SEED` repeats a run's choices (the timing of the kills still varies).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::pi::{PiSetup, project, setup_threaded};
use common::{Env, Hub, OWNER, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};
use tg_fake::control::{EditText, MediaItem, React, SendMedia, SendText, ThreadFilter};

/// What marks the hub's second run of a turn its crash cut off, in what pi reads.
const RUN_AGAIN: &str = "it is sent again";
use tg_fake::world::{MediaKind, TopicState};

/// xorshift64*: the run's choices from one seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the script did with one prompt, and so what may become of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Streamed,
    Queued,
    Aborted,
    /// 👍: moved to the priority lane if still waiting.
    Prioritised,
    /// 👎: skipped if still waiting, else it runs.
    Skipped,
    /// Edited while (maybe) waiting: pi gets the first or the second text, never both.
    Edited,
    File,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Streamed => "streamed",
            Self::Queued => "queued",
            Self::Aborted => "aborted",
            Self::Prioritised => "reacted 👍",
            Self::Skipped => "reacted 👎",
            Self::Edited => "edited",
            Self::File => "file",
        }
    }
}

struct Prompt {
    tag: String,
    kind: Kind,
    /// The pi (index into `PIS`) whose topic it was written in.
    pi: usize,
    /// Its message at Telegram: the turn's answer replies to it.
    message: i64,
}

const PIS: [&str; 3] = ["alpha", "beta", "gamma"];
/// `gamma` is the headless one.
const HEADLESS: usize = 2;

/// The hub and the pi with the extension, killed and restarted by the chaos thread.
struct Cast {
    hubs: Vec<Hub>,
    pis: Vec<Option<PiRpc>>,
}

/// The pid of the hub holding the profile lock (a killed hub's pid stays in the file, and its
/// zombie in /proc until reaped: only the lock tells whether it runs).
fn hub_pid(env: &Env) -> Option<u32> {
    hub::lock::ProfileLock::holder(&env.profile_dir().join("hub.lock"))
        .ok()
        .flatten()
        .filter(|&pid| pid != 0)
}

fn sigkill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

fn start_ext_pi(s: &PiSetup, folder: &str) -> PiRpc {
    let mut cmd = s.pi.command(["--mode", "rpc", "--no-session"]);
    cmd.current_dir(folder);
    let mut pi = PiRpc::spawn(cmd).unwrap();
    pi.send(&json!({ "id": "connect", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    pi.read_until(
        Duration::from_secs(60),
        "the connect command",
        |v: &Value| v["type"] == "response" && v["id"] == "connect",
    )
    .unwrap();
    pi
}

/// The last user message of a model request, as text.
fn last_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// `tag` followed by a space or the end: `S12` must not match `S120`.
fn has_tag(text: &str, tag: &str) -> bool {
    text.match_indices(tag).any(|(i, _)| {
        !text[i + tag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

#[test]
fn soak_three_pi_in_threaded_mode_with_hub_and_pi_kills() {
    let Some(s) = setup_threaded() else { return };
    let turns = env_u64("SOAK_TURNS", 40) as usize;
    let seed = env_u64("SOAK_SEED", 0x5eed_50a4);
    let (kill_lo, kill_hi) = (
        env_u64("SOAK_KILL_MIN_MS", 1000),
        env_u64("SOAK_KILL_MAX_MS", 4000),
    );
    // Every n-th hub kill also kills a pi with the extension.
    let pi_kill_every = env_u64("SOAK_PI_KILL_EVERY", 8) as usize;
    let started = Instant::now();
    let env = &s.env;
    let out = env.run(&["install-extension"]);
    assert!(out.status.success());
    let folders: Vec<String> = PIS.iter().map(|p| project(&s.pi, p)).collect();

    let first_hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let cast = Mutex::new(Cast {
        hubs: vec![first_hub],
        pis: vec![None, None],
    });
    for (i, folder) in folders.iter().enumerate().take(2) {
        let pi = start_ext_pi(&s, folder);
        cast.lock().unwrap().pis[i] = Some(pi);
    }
    env.spawn_pi(&folders[HEADLESS]);
    let mut topic_of = [0i64; 3];
    for (i, name) in PIS.iter().enumerate() {
        wait_for(&format!("{name}'s topic"), 60, || {
            let found = env
                .fake
                .control()
                .topics(Some(OWNER), None)
                .unwrap()
                .into_iter()
                .find(|t| t.name.contains(name));
            if let Some(t) = found {
                topic_of[i] = t.thread_id;
            }
            topic_of[i] != 0
        });
    }
    // A topic is a pi's once the hub has bound it, a moment after Telegram created it: a
    // message written into it before that is, rightly, the person's to route (a chooser the
    // scripted person never answers).
    wait_for("every topic bound", 60, || {
        let st = env.status();
        topic_of.iter().all(|t| {
            st["threads"].as_array().is_some_and(|bs| {
                bs.iter()
                    .any(|b| b["thread_id"] == json!(t) && b["state"] == json!("active"))
            })
        })
    });

    let fault_percent = env_u64("SOAK_FAULTS", 4);
    common::faults::arm(env, fault_percent);

    // The chaos: SIGKILL the hub every few seconds and start one again (the extension may
    // start one first; the profile lock lets only one serve); now and then a pi too.
    let stop = AtomicBool::new(false);
    let hub_kills = AtomicUsize::new(0);
    let pi_kills = AtomicUsize::new(0);
    // The conversation, with the chaos thread beside it.
    let (prompts, updates, script_done) = std::thread::scope(|scope| {
        let chaos = {
            let mut rng = Rng(seed ^ 0xc4a0_5c4a);
            let (s, folders, stop, cast) = (&s, &folders, &stop, &cast);
            let (hub_kills, pi_kills) = (&hub_kills, &pi_kills);
            scope.spawn(move || {
                let env = &s.env;
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(rng.between(kill_lo, kill_hi)));
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Some(pid) = hub_pid(env) {
                        sigkill(pid);
                        let n = hub_kills.fetch_add(1, Ordering::SeqCst) + 1;
                        let deadline = Instant::now() + Duration::from_secs(5);
                        while hub_pid(env) == Some(pid) && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        // Reap the hubs that ended (ours that were killed, or lost the lock
                        // to one the extension started).
                        cast.lock().unwrap().hubs.retain_mut(|h| {
                            h.child
                                .as_mut()
                                .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
                        });
                        if pi_kill_every > 0 && n % pi_kill_every == 0 {
                            let i = rng.below(2) as usize;
                            let old = cast.lock().unwrap().pis[i].take();
                            if let Some(old) = old {
                                sigkill(old.id());
                                let _ = old.close(Duration::from_secs(1));
                                pi_kills.fetch_add(1, Ordering::SeqCst);
                            }
                            // Started after the hub below: its connect needs a hub.
                            let hub = env.serve();
                            cast.lock().unwrap().hubs.push(hub);
                            let pi = start_ext_pi(s, &folders[i]);
                            cast.lock().unwrap().pis[i] = Some(pi);
                            continue;
                        }
                    }
                    let hub = env.serve();
                    cast.lock().unwrap().hubs.push(hub);
                }
            })
        };
        let mut rng = Rng(seed);
        let mut prompts: Vec<Prompt> = Vec::new();
        let mut updates: Vec<i64> = Vec::new();
        let mut count = 0usize;
        let mut next_tag = || {
            count += 1;
            format!("S{count}")
        };
        let say = |thread: i64, text: &str, updates: &mut Vec<i64>| -> i64 {
            let sent = env
                .fake
                .control()
                .send_text(SendText {
                    text: text.into(),
                    thread_id: Some(thread),
                    ..SendText::default()
                })
                .unwrap();
            updates.extend(sent.update_id);
            sent.message_id
        };
        while prompts.len() < turns {
            let pi = rng.below(3) as usize;
            let topic = topic_of[pi];
            let roll = rng.below(100);
            match roll {
                0..=44 => {
                    let tag = next_tag();
                    let message = say(topic, &format!("{tag} plain question"), &mut updates);
                    prompts.push(Prompt {
                        tag,
                        kind: Kind::Plain,
                        pi,
                        message,
                    });
                }
                45..=59 => {
                    let tag = next_tag();
                    let message = say(
                        topic,
                        &format!("[[slow]] {tag} streamed a b c d e"),
                        &mut updates,
                    );
                    prompts.push(Prompt {
                        tag,
                        kind: Kind::Streamed,
                        pi,
                        message,
                    });
                }
                60..=69 => {
                    for _ in 0..3 {
                        let tag = next_tag();
                        let message =
                            say(topic, &format!("{tag} queued one of three"), &mut updates);
                        prompts.push(Prompt {
                            tag,
                            kind: Kind::Queued,
                            pi,
                            message,
                        });
                    }
                }
                70..=76 => {
                    let tag = next_tag();
                    let words: Vec<String> = (1..=30).map(|i| format!("w{i}")).collect();
                    let message = say(
                        topic,
                        &format!("[[slow]] {tag} long {}", words.join(" ")),
                        &mut updates,
                    );
                    std::thread::sleep(Duration::from_millis(rng.between(200, 800)));
                    say(topic, "/abort", &mut updates);
                    prompts.push(Prompt {
                        tag,
                        kind: Kind::Aborted,
                        pi,
                        message,
                    });
                }
                77..=86 => {
                    // A blocker, so the reacted prompt is likely still waiting.
                    let blocker = next_tag();
                    let message = say(
                        topic,
                        &format!("[[slow]] {blocker} blocker x y z"),
                        &mut updates,
                    );
                    prompts.push(Prompt {
                        tag: blocker,
                        kind: Kind::Streamed,
                        pi,
                        message,
                    });
                    let tag = next_tag();
                    let id = say(topic, &format!("{tag} reacted to"), &mut updates);
                    let (emoji, kind) = if rng.below(2) == 0 {
                        ("👍", Kind::Prioritised)
                    } else {
                        ("👎", Kind::Skipped)
                    };
                    let reacted = env.fake.control().react(React {
                        message_id: id,
                        emoji: Some(emoji.into()),
                        user_id: None,
                        token: None,
                    });
                    if let Ok(Some(u)) = reacted {
                        updates.push(u);
                    }
                    prompts.push(Prompt {
                        tag,
                        kind,
                        pi,
                        message: id,
                    });
                }
                87..=93 => {
                    let blocker = next_tag();
                    let message = say(
                        topic,
                        &format!("[[slow]] {blocker} blocker x y z"),
                        &mut updates,
                    );
                    prompts.push(Prompt {
                        tag: blocker,
                        kind: Kind::Streamed,
                        pi,
                        message,
                    });
                    let tag = next_tag();
                    let id = say(topic, &format!("{tag} before the edit"), &mut updates);
                    let edited = env.fake.control().edit_text(EditText {
                        message_id: id,
                        text: format!("{tag} after the edit"),
                        user_id: None,
                        token: None,
                    });
                    if let Ok(sent) = edited {
                        updates.extend(sent.update_id);
                    }
                    prompts.push(Prompt {
                        tag,
                        kind: Kind::Edited,
                        pi,
                        message: id,
                    });
                }
                _ => {
                    let tag = next_tag();
                    let bytes = format!("log line for {tag}\n").repeat(20);
                    let sent = env
                        .fake
                        .control()
                        .send_media(SendMedia {
                            item: MediaItem {
                                kind: MediaKind::Document,
                                data_base64: base64::engine::general_purpose::STANDARD
                                    .encode(bytes.as_bytes()),
                                filename: Some(format!("{tag}.log")),
                                mime_type: Some("text/plain".into()),
                                caption: Some(format!("{tag} file attached")),
                            },
                            thread_id: Some(topic),
                            user_id: None,
                            reply_to_message_id: None,
                            token: None,
                            chat_id: None,
                        })
                        .unwrap();
                    updates.extend(sent.update_id);
                    prompts.push(Prompt {
                        tag,
                        kind: Kind::File,
                        pi,
                        message: sent.message_id,
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(rng.between(20, 250)));
        }
        // A last word in every topic: what waits behind an /abort goes to pi with the next
        // message only, so none may be the last.
        for (pi, topic) in topic_of.iter().enumerate() {
            let tag = next_tag();
            let message = say(*topic, &format!("{tag} the last word"), &mut updates);
            prompts.push(Prompt {
                tag,
                kind: Kind::Plain,
                pi,
                message,
            });
        }
        let script_done = started.elapsed();
        stop.store(true, Ordering::SeqCst);
        chaos.join().unwrap();
        (prompts, updates, script_done)
    });
    // What the faults did, and then none: whatever they left must come right by itself.
    let faults_fired = common::faults::fired(env);
    env.fake.control().clear_faults();
    // A hub runs at the end, and everything settles: nothing queued, nothing in flight, the
    // outbox empty.
    if hub_pid(env).is_none() {
        let hub = env.serve();
        cast.lock().unwrap().hubs.push(hub);
    }
    let settled = |st: &Value| -> bool {
        let count = |map: &str, keys: &[&str]| -> i64 {
            keys.iter().map(|k| st[map][k].as_i64().unwrap_or(0)).sum()
        };
        st["hub"]["running"] == json!(true)
            && st["journal"]["pending"].as_i64() == Some(0)
            && count("turns", &["queued", "dispatched", "acked"]) == 0
            && count("outbox", &["pending", "sending"]) == 0
    };
    // Settling may take a while after a long run (the queues drain at pi's pace); it fails
    // when nothing moved for a minute: something is wedged.
    let mut last = Value::Null;
    let mut progress = (Value::Null, Instant::now());
    let mut unsettled = None;
    loop {
        let out = env.run(&["status", "--json"]);
        if out.status.success() {
            last = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            if settled(&last) {
                break;
            }
            // A long answer streaming is progress too (a prompt that took others along after
            // an /abort streams each of their words).
            let drafts = env
                .fake
                .control()
                .requests(0, None)
                .iter()
                .filter(|r| r.method.ends_with("Draft"))
                .count();
            let now = json!([last["turns"], drafts]);
            if now != progress.0 {
                progress = (now, Instant::now());
            }
        }
        if progress.1.elapsed() > Duration::from_secs(60) {
            unsettled = Some(last.clone());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // The hub's log and the extension's, for a look after a failure.
    if let Ok(keep) = std::env::var("SOAK_KEEP") {
        let keep = std::path::PathBuf::from(keep);
        let _ = std::fs::create_dir_all(&keep);
        let logs = env.profile_dir().join("logs");
        for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
            let _ = std::fs::copy(entry.path(), keep.join(entry.file_name()));
        }
        let _ = std::fs::copy(env.profile_dir().join("hub.log"), keep.join("hub.log"));
        // With its write-ahead log: the hub still runs, and the last commits are only there.
        let _ = std::fs::copy(env.state_db(), keep.join("state.db"));
        let mut wal = env.state_db().into_os_string();
        wal.push("-wal");
        let _ = std::fs::copy(&wal, keep.join("state.db-wal"));
        for (i, hub) in cast.lock().unwrap().hubs.iter().enumerate() {
            let _ = std::fs::copy(&hub.log, keep.join(format!("serve-{i}.log")));
        }
    }

    // Evidence.
    let store = env.open_store();
    let journal: HashMap<i64, bool> = store
        .read(|c| {
            let mut st = c.prepare("SELECT update_id, handled_ms IS NOT NULL FROM journal")?;
            let rows = st
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?)))?
                .collect::<Result<HashMap<_, _>, _>>()?;
            Ok::<_, store::StoreError>(rows)
        })
        .unwrap();
    let turns_by_text: Vec<(String, String)> = store
        .read(|c| {
            // In order: a prompt folded into a later one (after an /abort) is found as itself.
            let mut st = c.prepare("SELECT text, state FROM turns ORDER BY id")?;
            let rows = st
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, store::StoreError>(rows)
        })
        .unwrap();
    // Interrupted because the hub restarted (not because pi was killed): only a headless turn
    // that had started a tool, or whose session file could not tell.
    let restart = hub::state::HUB_RESTARTED.detail();
    let cut_by_hub: Vec<String> = store
        .read(|c| {
            let mut st = c.prepare("SELECT error FROM turns WHERE state = 'interrupted'")?;
            let rows = st
                .query_map([], |r| r.get::<_, Option<String>>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, store::StoreError>(rows)
        })
        .unwrap()
        .into_iter()
        .flatten()
        .filter(|e| e.starts_with(&restart))
        .collect();
    let lost: Vec<i64> = updates
        .iter()
        .copied()
        .filter(|u| journal.get(u) != Some(&true))
        .collect();
    let requests = s.llm.requests();
    let transcript = env
        .fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap();
    let bot: Vec<_> = transcript
        .iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect();

    // Each request once: its last user message, and the tags that appear in more than one of
    // its user messages (pi's history carries every earlier prompt: a prompt delivered twice
    // into one session shows there).
    let tag_re = regex::Regex::new(r"S[0-9]+").unwrap();
    let last_users: Vec<String> = requests.iter().map(last_user).collect();
    let mut in_history_twice = std::collections::HashSet::new();
    for r in &requests {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for m in r["messages"].as_array().into_iter().flatten() {
            if m["role"] != "user" {
                continue;
            }
            let text = m["content"].to_string();
            // The hub's run of a turn its crash cut off, told to pi as such: not a repeat.
            if text.contains(RUN_AGAIN) {
                continue;
            }
            let tags: std::collections::HashSet<&str> =
                tag_re.find_iter(&text).map(|t| t.as_str()).collect();
            for t in tags {
                *seen.entry(t.to_owned()).or_default() += 1;
            }
        }
        in_history_twice.extend(seen.into_iter().filter(|(_, n)| *n > 1).map(|(t, _)| t));
    }
    drop(requests);
    let mut twice = Vec::new();
    let mut missing_answers = Vec::new();
    let mut wrong_topic = Vec::new();
    let mut by_kind: BTreeMap<&str, [usize; 5]> = BTreeMap::new();
    let run_again = last_users.iter().filter(|u| u.contains(RUN_AGAIN)).count();
    let (mut delivered, mut answered, mut resent_copies) = (0, 0, 0);
    for p in &prompts {
        // A delivery marked as the hub's run again of a cut-off turn is not a repeat; the
        // prompt reached pi if any delivery carried it.
        let unmarked = last_users
            .iter()
            .filter(|u| has_tag(u, &p.tag) && !u.contains(RUN_AGAIN))
            .count();
        let deliveries = last_users.iter().filter(|u| has_tag(u, &p.tag)).count();
        if unmarked > 1 || in_history_twice.contains(&p.tag) {
            twice.push(p.tag.clone());
        }
        let state = turns_by_text
            .iter()
            .find(|(t, _)| has_tag(t, &p.tag))
            .map(|(_, s)| s.as_str());
        let answers: Vec<_> = bot
            .iter()
            .filter(|m| {
                m.text
                    .as_deref()
                    .is_some_and(|t| t.contains("echo:") && has_tag(t, &p.tag))
            })
            .collect();
        let marked = answers
            .iter()
            .filter(|m| m.text.as_deref().is_some_and(|t| t.contains("Sent again")))
            .count();
        resent_copies += marked;
        if answers.len() - marked > 1 {
            twice.push(format!("{} (answer)", p.tag));
        }
        if answers.iter().any(|m| m.thread_id != Some(topic_of[p.pi])) {
            wrong_topic.push(p.tag.clone());
        }
        // A turn pi finished has its answer (the echo, or what an /abort left), replying to
        // the prompt, in the pi's topic.
        let replies = bot
            .iter()
            .filter(|m| m.reply_to_message_id == Some(p.message))
            .count();
        if state == Some("done") && deliveries >= 1 && replies == 0 {
            missing_answers.push(p.tag.clone());
        }
        let row = by_kind.entry(p.kind.name()).or_default();
        row[0] += 1;
        if deliveries >= 1 {
            row[1] += 1;
            delivered += 1;
        }
        if !answers.is_empty() {
            row[2] += 1;
            answered += 1;
        }
        match state {
            Some("interrupted") => row[3] += 1,
            Some("cancelled") | None => row[4] += 1,
            _ => {}
        }
    }
    let topics = env.fake.control().topics(Some(OWNER), None).unwrap();
    let mut duplicate_topics = Vec::new();
    for name in PIS {
        let open = topics
            .iter()
            .filter(|t| t.name.contains(name) && t.state != TopicState::Deleted)
            .count();
        if open != 1 {
            duplicate_topics.push(format!("{name}: {open}"));
        }
    }
    let problems = threads::invariants::check(&store, None).unwrap();

    let kills = hub_kills.load(Ordering::SeqCst);
    println!();
    println!(
        "soak: {} prompts in {:.0} s (script {:.0} s), seed {seed:#x}",
        prompts.len(),
        started.elapsed().as_secs_f64(),
        script_done.as_secs_f64()
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| prompts written | {} |", prompts.len());
    println!(
        "| settled at the end (nothing queued, nothing in flight) | {} |",
        if unsettled.is_none() { "yes" } else { "no" }
    );
    println!("| updates issued by tg-fake | {} |", updates.len());
    println!("| hub SIGKILLs | {kills} |");
    let fired: Vec<String> = faults_fired
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    println!(
        "| tg-fake faults ({fault_percent} % of the conversation's calls) | {} |",
        if fired.is_empty() {
            "none".to_owned()
        } else {
            fired.join(", ")
        }
    );
    println!(
        "| pi (extension) SIGKILLs | {} |",
        pi_kills.load(Ordering::SeqCst)
    );
    println!(
        "| updates lost (not journaled and handled) | {} |",
        lost.len()
    );
    println!("| prompts delivered into pi | {delivered} |");
    println!("| prompts delivered twice | {} |", twice.len());
    println!(
        "| model requests of headless turns run again after a hub crash (no tool started; pi told) | {run_again} |"
    );
    println!(
        "| turns interrupted by a hub crash (not by pi's own death) | {} |",
        cut_by_hub.len()
    );
    println!("| answers delivered | {answered} |");
    println!(
        "| answers of finished turns missing | {} |",
        missing_answers.len()
    );
    println!("| answers in the wrong topic | {} |", wrong_topic.len());
    println!("| marked resends (commit-unknown windows) | {resent_copies} |");
    println!(
        "| topics per pi other than one | {} |",
        duplicate_topics.len()
    );
    println!("| threads::invariants problems | {} |", problems.len());
    println!();
    println!("| kind | prompts | reached pi | answered | interrupted | cancelled/skipped |");
    println!("|---|---|---|---|---|---|");
    for (k, r) in &by_kind {
        println!(
            "| {k} | {} | {} | {} | {} | {} |",
            r[0], r[1], r[2], r[3], r[4]
        );
    }

    assert!(
        unsettled.is_none(),
        "nothing moved for a minute: {:#}",
        unsettled.unwrap_or_default()
    );
    assert!(lost.is_empty(), "updates lost: {lost:?}");
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    // The conversation has no tools: a hub crash never costs a turn (it runs again or is
    // answered from pi's session file).
    assert!(
        cut_by_hub.is_empty(),
        "interrupted by a hub crash: {cut_by_hub:?}"
    );
    assert!(
        missing_answers.is_empty(),
        "answers missing: {missing_answers:?}"
    );
    assert!(
        wrong_topic.is_empty(),
        "answers in the wrong topic: {wrong_topic:?}"
    );
    assert!(duplicate_topics.is_empty(), "topics: {duplicate_topics:?}");
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        delivered > 0 && answered > 0,
        "the conversation did nothing"
    );

    // Leave nothing running: the extension pi first (they would start a hub again).
    let mut cast = cast.lock().unwrap();
    for pi in cast.pis.iter_mut().filter_map(Option::take) {
        sigkill(pi.id());
    }
    let _ = env.run(&["stop-instance", "--all"]);
    if let Some(pid) = hub_pid(env) {
        sigkill(pid);
    }
    cast.hubs.clear();
}
