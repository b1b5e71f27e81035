//! People besides the owner, end to end with real pi (headless, against the fake LLM) and
//! tg-fake's several users: the owner invites a member with `/people`, the member joins with
//! the code in their own private chat and talks to pi there (told to pi as `from:`, answered
//! as replies to them), is refused the owner's controls, cannot use a button of the owner's,
//! and once removed their waiting message and their buttons do nothing. A stranger reaches
//! nothing; invites count wrong codes per sender and work once (their expiry, with the hub's
//! clock moved, is in crates/hub/tests/handlers.rs).
#![allow(clippy::unwrap_used)]

mod common;

use common::chat::{buttons, wait_message};
use common::pi::{PiSetup, project, prompts_containing, setup};
use common::{Env, OWNER, wait_for};
use tg_fake::control::{Press, ThreadFilter, TranscriptEntry};

const ANN: i64 = OWNER + 1_000;
const BO: i64 = OWNER + 2_000;
const STRANGER: i64 = OWNER + 3_000;

/// The bot's messages in `chat`.
fn bot_messages_in(env: &Env, chat: i64) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(chat), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

fn wait_in(env: &Env, chat: i64, what: &str, pred: impl Fn(&str) -> bool) -> TranscriptEntry {
    let mut found = None;
    wait_for(what, 60, || {
        found = bot_messages_in(env, chat)
            .into_iter()
            .find(|m| m.text.as_deref().is_some_and(&pred));
        found.is_some()
    });
    found.unwrap()
}

/// Presses `label` on message `id` of `user`'s chat, as `user`.
fn press_as(env: &Env, user: i64, id: i64, label: &str) {
    let m = bot_messages_in(env, if user == OWNER { OWNER } else { user })
        .into_iter()
        .find(|m| m.message_id == id)
        .unwrap();
    let (_, data) = buttons(&m)
        .into_iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("no button {label:?} on {:?}", m.text));
    env.fake
        .control()
        .press(Press {
            message_id: id,
            data,
            user_id: Some(user),
            token: None,
            chat_id: None,
        })
        .unwrap();
}

/// The callback answers `user` was shown.
fn toasts(env: &Env, user: i64) -> Vec<String> {
    env.fake
        .control()
        .chat(Some(user), None)
        .unwrap()
        .callback_answers
        .into_iter()
        .filter_map(|a| a.text)
        .collect()
}

/// The owner's `/people`, then a tap on `label`: the new invite's code.
fn invite(env: &Env, label: &str) -> String {
    let before = bot_messages_in(env, OWNER).len();
    env.say("/people");
    let list = wait_message(env, "the people list", |t| {
        t.starts_with("People who may use this bot")
    });
    let list = bot_messages_in(env, OWNER)
        .into_iter()
        .skip(before)
        .find(|m| m.text == list.text)
        .unwrap_or(list);
    press_as(env, OWNER, list.message_id, label);
    let mut code = None;
    wait_for("the invite's code", 30, || {
        code = bot_messages_in(env, OWNER)
            .into_iter()
            .skip(before)
            .filter_map(|m| m.text)
            .find_map(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("/start "))
                    .map(str::to_owned)
            });
        code.is_some()
    });
    code.unwrap()
}

fn started(s: &PiSetup) -> common::Hub {
    let env = &s.env;
    let hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    env.spawn_pi(&project(&s.pi, "web"));
    wait_for("the connected notice", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected: web"))
    });
    hub
}

#[test]
fn an_invited_member_talks_to_pi_is_refused_the_owners_controls_and_a_stranger_reaches_nothing() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = started(&s);
    let code = invite(env, "➕ Invite a member");
    env.say_as(ANN, &format!("/start {code}"));
    wait_in(env, ANN, "Ann's welcome", |t| {
        t.starts_with("Welcome: you are a member")
    });
    wait_message(env, "the owner told", |t| {
        t.contains(&format!("(id {ANN}) joined as a member"))
    });
    // The same code again, by someone else: used (two people racing for one code meet the
    // same: the worker handles their updates one after the other).
    env.say_as(STRANGER, &format!("/start {code}"));
    wait_in(env, STRANGER, "the used code refused", |t| {
        t.contains("was used already")
    });

    // Ann's prompt reaches pi, told as hers, and pi's answer replies to her message.
    let sent = env.say_as(ANN, "hello from ann");
    let answer = wait_in(env, ANN, "pi's answer to Ann", |t| {
        t.ends_with("hello from ann") && t.contains("echo")
    });
    assert_eq!(answer.reply_to_message_id, Some(sent.message_id));
    assert_eq!(prompts_containing(&s.llm, &format!("from:User {ANN}")), 1);
    assert!(
        !env.bot_texts(OWNER)
            .iter()
            .any(|t| t.contains("hello from ann")),
        "the owner's chat does not get Ann's answer"
    );

    // The owner's controls are the owner's.
    env.say_as(ANN, "/abort");
    wait_in(env, ANN, "the abort refused", |t| {
        t == "Only the owner can use /abort."
    });
    env.say_as(ANN, "/settings");
    wait_in(env, ANN, "the settings refused", |t| {
        t == "Only the owner can use /settings."
    });
    env.say_as(ANN, "/status");
    wait_in(env, ANN, "Ann's status", |t| {
        t.starts_with("pi instances:") && t.contains("web")
    });

    // A button of the owner's (`/people`'s invite), sent by Ann's client: nothing.
    let list = bot_messages_in(env, OWNER)
        .into_iter()
        .rfind(|m| {
            m.text
                .as_deref()
                .is_some_and(|t| t.starts_with("People who may"))
        })
        .unwrap();
    let (_, owners) = buttons(&list)
        .into_iter()
        .find(|(l, _)| l == "➕ Invite a member")
        .unwrap();
    let invites_before = env
        .bot_texts(OWNER)
        .iter()
        .filter(|t| t.contains("/start "))
        .count();
    let toasts_before = toasts(env, ANN).len();
    env.fake
        .control()
        .forge_press(Press {
            message_id: answer.message_id,
            data: owners,
            user_id: Some(ANN),
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("Ann's forged press answered", 20, || {
        toasts(env, ANN).len() > toasts_before
    });
    assert_eq!(
        toasts(env, ANN).last().map(String::as_str),
        Some("This button is no longer active.")
    );
    assert_eq!(
        env.bot_texts(OWNER)
            .iter()
            .filter(|t| t.contains("/start "))
            .count(),
        invites_before,
        "no invite was made"
    );

    // A stranger's message reaches nothing and is not answered.
    env.say_as(STRANGER, "let me in");
    env.say("after the stranger");
    wait_message(env, "the owner's answer", |t| {
        t.ends_with("after the stranger")
    });
    assert_eq!(prompts_containing(&s.llm, "let me in"), 0);
    assert_eq!(
        bot_messages_in(env, STRANGER).len(),
        1,
        "only the used-code reply"
    );
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_removed_members_waiting_message_and_buttons_do_nothing() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = started(&s);
    let code = invite(env, "➕ Invite a member");
    env.say_as(ANN, &format!("/start {code}"));
    wait_in(env, ANN, "Ann's welcome", |t| t.starts_with("Welcome"));
    // pi works on the owner's slow prompt; Ann's waits behind it.
    env.say("[[slow]] one two three four five six seven eight");
    wait_for("pi to start the slow one", 30, || {
        prompts_containing(&s.llm, "one two three") == 1
    });
    let waiting = env.say_as(ANN, "should never run");
    wait_for("Ann's message queued", 30, || {
        env.status()["turns"]["queued"].as_i64().unwrap_or(0) >= 1
    });
    let list_before = bot_messages_in(env, OWNER).len();
    env.say("/people");
    let list = wait_message(env, "the people list with Ann", |t| {
        t.contains(&format!("User {ANN} (id {ANN}): member"))
    });
    let list = bot_messages_in(env, OWNER)
        .into_iter()
        .skip(list_before)
        .find(|m| m.text == list.text)
        .unwrap_or(list);
    press_as(env, OWNER, list.message_id, &format!("✖ Remove User {ANN}"));
    wait_in(env, ANN, "Ann told", |t| t.contains("removed your access"));
    wait_for("the owner's slow answer", 60, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.contains("one two three four five six seven eight") && t.contains("echo"))
    });
    // Ann's message was dropped, not run, and she is a stranger now.
    env.say("after the removal");
    wait_message(env, "the next answer", |t| t.ends_with("after the removal"));
    assert_eq!(prompts_containing(&s.llm, "should never run"), 0);
    let store = env.open_store();
    let turn = store
        .read(|c| store::turns::by_message(c, ANN, waiting.message_id))
        .unwrap()
        .unwrap();
    assert_eq!(turn.state, store::turns::TurnState::Cancelled);
    let before = bot_messages_in(env, ANN).len();
    env.say_as(ANN, "still there?");
    env.say("and now");
    wait_message(env, "the answer after Ann's try", |t| {
        t.ends_with("and now")
    });
    assert_eq!(prompts_containing(&s.llm, "still there?"), 0);
    assert_eq!(
        bot_messages_in(env, ANN).len(),
        before,
        "nothing visible to her"
    );
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn wrong_invite_codes_are_counted_per_sender_and_a_viewer_reads_only() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = started(&s);
    let code = invite(env, "➕ Invite a viewer");
    // Five wrong codes: told each time, then nothing, not even for the right code.
    for n in 1..=5 {
        env.say_as(STRANGER, &format!("/start WRONG{n}"));
        wait_for("the wrong code answered", 30, || {
            bot_messages_in(env, STRANGER).len() == n
        });
    }
    assert!(
        bot_messages_in(env, STRANGER)
            .last()
            .and_then(|m| m.text.clone())
            .is_some_and(|t| t.contains("your last try"))
    );
    env.say_as(STRANGER, &format!("/start {code}"));
    // Bo's attempts are his own: the right code lets him in as a viewer.
    env.say_as(BO, &format!("/start {code}"));
    wait_in(env, BO, "Bo's welcome", |t| {
        t.starts_with("Welcome: you are a viewer")
    });
    assert_eq!(bot_messages_in(env, STRANGER).len(), 5, "refused silently");
    env.say_as(BO, "can I write?");
    wait_in(env, BO, "read only", |t| {
        t.starts_with("You are a viewer here")
    });
    assert_eq!(prompts_containing(&s.llm, "can I write?"), 0);
    assert_eq!(hub.stop(), Some(0));
}
