//! Lists of 200 through the real binary and tg-fake (which refuses a text over 4096 characters
//! and a keyboard over 100 buttons, as Telegram does): `/start` with 200 pi connected, `/new`
//! with 200 folders under a workspace root and `/queue` with 200 prompts waiting for a busy
//! pi. Every page is turned with ▶, every entry is found on exactly one of them, and tg-fake
//! refused nothing. (`/model` and `/sessions` with 200: `menus.rs`, `phone_sessions.rs`.)
#![allow(clippy::unwrap_used)]

mod common;

use common::chat::{buttons, message, press, refused, wait_message};
use common::shim::{Shim, hello};
use common::{Env, wait_for};
use serde_json::{Value, json};

/// Turns the pages of menu `id` with ▶ from page 1 of `pages` round to page 1 again; returns
/// every page's text and button labels.
fn page_through(env: &Env, id: i64, pages: usize) -> Vec<(String, Vec<String>)> {
    let mut seen = Vec::new();
    for page in 1..=pages {
        let m = message(env, id);
        let text = m.text.clone().unwrap();
        assert!(text.contains(&format!("Page {page} of {pages}.")), "{text}");
        seen.push((text, buttons(&m).into_iter().map(|(l, _)| l).collect()));
        press(env, id, "▶");
        let next = format!("Page {} of {pages}.", page % pages + 1);
        wait_for(&next, 30, || {
            message(env, id).text.is_some_and(|t| t.contains(&next))
        });
    }
    seen
}

#[test]
fn start_new_and_queue_with_200_entries_page_within_telegrams_limits() {
    let env = Env::new();
    env.preset_owner();
    let root = env.profile_dir().join("code");
    let mut folders: Vec<String> = (0..200)
        .map(|k| {
            let f = root.join(format!("project-{k:03}-with-a-longer-name"));
            std::fs::create_dir_all(&f).unwrap();
            f.canonicalize().unwrap().display().to_string()
        })
        .collect();
    folders.sort();
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    cfg["profiles"]["default"]["workspaces"] = json!([root.display().to_string()]);
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let labels: Vec<String> = (0..200).map(|k| format!("pi{k:03}")).collect();
    // Connected, and deaf to the turns they are given: the first keeps its pi busy for good.
    let _pis: Vec<Shim> = labels
        .iter()
        .enumerate()
        .map(|(k, l)| {
            let pid = 7000 + k as i64;
            Shim::connect(
                &env,
                &hello(&env, &format!("/work/{l}"), pid, json!([]), json!([])),
            )
        })
        .collect();
    // (`status` shows the 20 most recent instances: the store has them all.)
    let live = || env.open_store().read(store::instances::live).unwrap();
    wait_for("200 pi", 30, || live().len() == 200);

    // /start: 200 pi, each a button on one of 25 pages.
    env.say("/start");
    let menu = wait_message(&env, "the menu", |t| t.contains("Page 1 of 25."));
    let pages = page_through(&env, menu.message_id, 25);
    let mut offered: Vec<String> = pages
        .iter()
        .flat_map(|(_, b)| b.iter())
        // The selected one is marked: the first to connect is selected.
        .map(|l| l.trim_start_matches("▶ ").to_owned())
        .filter(|l| l.starts_with("pi") && l.len() == 5)
        .collect();
    offered.sort();
    assert_eq!(offered, labels, "every pi once in 25 pages");
    // Select pi155 on page 20 (numbers sort as they are named).
    for page in 2..=20 {
        press(&env, menu.message_id, "▶");
        let next = format!("Page {page} of 25.");
        wait_for(&next, 30, || {
            message(&env, menu.message_id)
                .text
                .is_some_and(|t| t.contains(&next))
        });
    }
    press(&env, menu.message_id, "pi155");
    wait_for("pi155 selected", 30, || {
        message(&env, menu.message_id)
            .text
            .is_some_and(|t| t.contains("▶ pi155"))
    });

    // /new: 200 folders, each on one of 25 pages.
    env.say("/new");
    let picker = wait_message(&env, "the folders", |t| {
        t.starts_with("Start a new session for pi pi155") && t.contains("Page 1 of 25.")
    });
    let pages = page_through(&env, picker.message_id, 25);
    let mut offered: Vec<String> = pages
        .iter()
        .flat_map(|(_, b)| b.iter())
        .filter_map(|l| l.strip_prefix("📁 ").map(str::to_owned))
        .collect();
    offered.sort();
    assert_eq!(offered, folders, "every folder once in 25 pages");

    // /queue: the first prompt keeps pi155 busy (this pi never answers); 200 more wait.
    env.say("the first");
    wait_for("the first handed to pi155", 30, || {
        env.open_store()
            .read(store::turns::outstanding)
            .unwrap()
            .iter()
            .any(|t| t.identity.as_deref() == Some("/work/pi155"))
    });
    let prompts: Vec<String> = (0..200).map(|k| format!("waiting {k:03}")).collect();
    for p in &prompts {
        env.say(p);
    }
    wait_for("200 waiting", 60, || {
        env.open_store()
            .read(|c| store::turns::queue_of(c, "/work/pi155"))
            .unwrap()
            .len()
            == 200
    });
    env.say("/queue");
    let queue = wait_message(&env, "the queue", |t| {
        t.starts_with("Waiting for pi155: 200")
    });
    let pages = page_through(&env, queue.message_id, 25);
    let mut listed: Vec<String> = pages
        .iter()
        .flat_map(|(t, _)| t.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|l| l.split_once(". ").map(|(_, p)| p.to_owned()))
        .filter(|p| p.starts_with("waiting "))
        .collect();
    listed.sort();
    assert_eq!(listed, prompts, "every waiting prompt once in 25 pages");
    assert!(
        refused(&env).is_empty(),
        "tg-fake refused {:?}",
        refused(&env)
    );
    assert_eq!(hub.stop(), Some(0), "{}", hub.log_text());
}
