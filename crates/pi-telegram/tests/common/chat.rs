//! The bot's side of the owner's chat as tg-fake shows it, for tests that read menus and tap
//! their buttons.

use std::time::Duration;

use tg_fake::control::{Press, ThreadFilter, TranscriptEntry};

use super::{Env, OWNER, wait_for};

pub fn bot_messages(env: &Env) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

/// The first bot message whose text satisfies `pred` (waiting up to 60 s).
pub fn wait_message(env: &Env, what: &str, pred: impl Fn(&str) -> bool) -> TranscriptEntry {
    let mut found = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(59);
    wait_for(what, 60, || {
        if std::time::Instant::now() > deadline {
            let texts: Vec<String> = bot_messages(env)
                .into_iter()
                .filter_map(|m| m.text)
                .collect();
            panic!("{what}: not among {texts:#?}");
        }
        found = bot_messages(env)
            .into_iter()
            .find(|m| m.text.as_deref().is_some_and(&pred));
        found.is_some()
    });
    found.unwrap()
}

pub fn wait_text(env: &Env, what: &str, pred: impl Fn(&str) -> bool) -> String {
    wait_message(env, what, pred).text.unwrap()
}

/// The buttons of a message: `(label, callback data)`.
pub fn buttons(m: &TranscriptEntry) -> Vec<(String, String)> {
    m.reply_markup
        .as_ref()
        .and_then(|r| r["inline_keyboard"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .filter_map(|b| {
            Some((
                b["text"].as_str()?.to_owned(),
                b["callback_data"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// The current form of message `id` (menus are edited in place).
pub fn message(env: &Env, id: i64) -> TranscriptEntry {
    bot_messages(env)
        .into_iter()
        .find(|m| m.message_id == id)
        .unwrap()
}

/// Presses the button labelled `label` (exactly, or after a `✓ ` mark) on message `id`.
pub fn press(env: &Env, id: i64, label: &str) {
    let m = message(env, id);
    let (_, data) = buttons(&m)
        .into_iter()
        .find(|(l, _)| l == label || l.trim_start_matches("✓ ") == label)
        .unwrap_or_else(|| panic!("no button {label:?} on {:?}", m.text));
    env.fake
        .control()
        .press(Press {
            message_id: id,
            data,
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
}

/// Every call tg-fake answered with an error: `(method, description)`.
pub fn refused(env: &Env) -> Vec<(String, Option<String>)> {
    env.fake
        .control()
        .requests(0, None)
        .into_iter()
        .filter(|r| r.status != Some(200) && r.method != "getUpdates")
        .map(|r| (r.method, r.error))
        .collect()
}
