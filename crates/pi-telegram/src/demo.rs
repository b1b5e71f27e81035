//! `pi-telegram demo`: everything on this machine, no bot token needed. A fake Telegram, the hub,
//! and one instance: real pi against a local fake model when pi is available, else the built-in
//! echo agent (and it says so). You type as the Telegram user; the bot's replies are printed.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

use hub::HubError;
use hub::paths::{AgentDir, ProfileName};
use hub::serve::{ServeOptions, StartInstance, Tuning, serve};
use serde_json::json;
use tg_fake::control::{EditText, Press, React, SendText, ThreadFilter};
use tg_fake::{FakeConfig, FakeServer};
use tokio::sync::{mpsc, oneshot};

/// The pi binary, if one runs here: `$PI_TELEGRAM_PI_BIN`, else `pi` on PATH.
fn find_pi() -> Option<PathBuf> {
    let bin = hub::pi::links::rpc::pi_binary();
    let out = std::process::Command::new(&bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(bin)
}

fn io(context: &str) -> impl FnOnce(std::io::Error) -> HubError + '_ {
    move |e| HubError::io(context)(e)
}

/// Runs the demo until the person types `/quit` or closes the input.
pub async fn run() -> Result<(), HubError> {
    let dir = tempfile::Builder::new()
        .prefix("pi-telegram-demo-")
        .tempdir()
        .map_err(io("creating the demo folder"))?;
    let agent = dir.path().join("agent");
    let project = dir.path().join("demo-project");
    for d in [&agent, &project] {
        std::fs::create_dir_all(d).map_err(io("creating the demo folder"))?;
    }
    let fake = FakeServer::start(FakeConfig::default())
        .await
        .map_err(io("starting the fake Telegram"))?;
    let config = json!({ "profiles": { "default": {
        "botToken": tg_fake::DEFAULT_TOKEN, "allowedUserId": tg_fake::DEFAULT_USER_ID, "apiBase": fake.base_url() } } });
    std::fs::write(agent.join("telegram.json"), config.to_string())
        .map_err(io("writing the demo config"))?;

    let mut _llm = None;
    let instance = match find_pi() {
        Some(pi) => {
            let llm = fake_llm::FakeLlm::start(fake_llm::FakeLlmConfig::default())
                .map_err(|e| HubError::Usage(format!("starting the fake model: {e}")))?;
            fake_llm::write_pi_agent_config(&agent, llm.base_url())
                .map_err(io("writing pi's model config"))?;
            let env = vec![
                (
                    "PI_CODING_AGENT_DIR".to_owned(),
                    agent.display().to_string(),
                ),
                (
                    "PI_CODING_AGENT_SESSION_DIR".to_owned(),
                    dir.path().join("sessions").display().to_string(),
                ),
                ("PI_OFFLINE".to_owned(), "1".to_owned()),
                ("PI_SKIP_VERSION_CHECK".to_owned(), "1".to_owned()),
                ("PI_TELEMETRY".to_owned(), "0".to_owned()),
            ];
            println!(
                "pi: {} (real pi, talking to a local fake model that echoes; no API key needed)",
                pi.display()
            );
            _llm = Some(llm);
            StartInstance::Rpc(project.display().to_string(), env)
        }
        None => {
            println!(
                "pi was not found, so a built-in echo agent stands in for it (it is NOT pi).\n\
                 To use real pi: bash scripts/install-test-deps.sh, then run with\n\
                 PI_TELEGRAM_PI_BIN=.cache/test-deps/bin/pi"
            );
            StartInstance::Echo(project.display().to_string())
        }
    };

    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let opts = ServeOptions {
        agent_dir: AgentDir::at(&agent),
        profile: ProfileName::default_profile(),
        tuning: Tuning::from_env(),
        instances_at_start: vec![instance],
        child_extension: crate::install::child_extension(&AgentDir::at(&agent)),
        version: env!("PI_TELEGRAM_VERSION"),
    };
    let hub = tokio::spawn(serve(opts, async move {
        let _ = stop_rx.await;
    }));

    // Let the instance connect first, so the first message does not wait for it.
    let control = fake.control().clone();
    let mut changes = control.changes();
    let mut shown = Shown::default();
    let mut drafts_shown = 0u64;
    let mut seen = Seen::default();
    // A message being written over several lines (each ending with `\`).
    let mut pending: Vec<String> = Vec::new();
    // The person's messages, numbered as the terminal shows them (for :react and :edit).
    let mut mine: Vec<i64> = Vec::new();
    let mut buttons: Vec<(i64, String)> = Vec::new();
    let connected = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let up = control
                .transcript(None, ThreadFilter::All, None)
                .is_ok_and(|t| {
                    t.iter().any(|m| {
                        m.from_bot && m.text.as_deref().unwrap_or("").starts_with("pi connected")
                    })
                });
            if up || changes.changed().await.is_err() {
                return up;
            }
        }
    })
    .await;
    if !matches!(connected, Ok(true)) {
        println!("(the instance has not connected yet; your messages will wait for it)");
    }
    show_new(&control, &mut shown, &mut buttons);

    println!(
        "\nYou are Ada, chatting with the bot @fake_1000_bot in a fake Telegram ({}).\n\
         Type a message and press Enter; each is numbered (#N). !N presses button N;\n\
         :react N 👍 reacts to your message N (👍 first, 👎 skip; :react N alone removes it);\n\
         :edit N new text edits it; :file PATH [caption] sends a file (:photo for an image).\n\
         /start opens the menu, /help lists the commands.\n\
         Try: hello   or   [[bash:ls -la]]   (pi runs the tool)   or   [[slow]] a slow answer\n\
         A line ending with \\ goes on in the next line (one message of several lines).\n\
         Type /quit (or Ctrl-D, Ctrl-C) to leave. Everything lives in {} and is removed at the end.\n",
        fake.base_url(),
        dir.path().display()
    );

    let (lines_tx, mut lines) = mpsc::channel::<String>(16);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.blocking_send(line).is_err() {
                break;
            }
        }
    });

    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            _ = &mut interrupted => {
                println!();
                break;
            }
            line = lines.recv() => {
                let Some(line) = line else { break };
                // `text \` goes on in the next line.
                if let Some(head) = line.strip_suffix('\\') {
                    pending.push(head.to_owned());
                    println!("  (… go on; a line without \\ at its end sends it)");
                    continue;
                }
                let line = if pending.is_empty() {
                    line.trim().to_owned()
                } else {
                    pending.push(line);
                    std::mem::take(&mut pending).join("\n").trim().to_owned()
                };
                if line == "/quit" {
                    break;
                }
                if line.is_empty() {
                    continue;
                }
                if let Some(n) = line.strip_prefix('!').and_then(|n| n.parse::<usize>().ok()) {
                    match n.checked_sub(1).and_then(|i| buttons.get(i)).cloned() {
                        Some((message_id, data)) => {
                            if let Err(e) = control.press(Press { message_id, data, user_id: None, token: None, chat_id: None }) {
                                println!("(could not press: {e})");
                            }
                        }
                        None => println!("(no button {n})"),
                    }
                    continue;
                }
                if let Some(rest) = line.strip_prefix(":react") {
                    let mut parts = rest.split_whitespace();
                    let target = parts.next().and_then(|n| n.parse::<usize>().ok());
                    match target.and_then(|n| n.checked_sub(1)).and_then(|i| mine.get(i)) {
                        Some(&message_id) => {
                            let emoji = parts.next().map(str::to_owned);
                            if let Err(e) = control.react(React { message_id, emoji, user_id: None, token: None }) {
                                println!("(could not react: {e})");
                            }
                        }
                        None => println!("(usage: :react N [emoji], N is one of your message numbers)"),
                    }
                    continue;
                }
                if let Some((kind, rest)) = line
                    .strip_prefix(":file ")
                    .map(|r| (tg_fake::world::MediaKind::Document, r))
                    .or_else(|| line.strip_prefix(":photo ").map(|r| (tg_fake::world::MediaKind::Photo, r)))
                {
                    let (path, caption) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
                    match std::fs::read(path) {
                        Ok(bytes) => {
                            use base64::Engine as _;
                            let item = tg_fake::control::MediaItem {
                                kind,
                                data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
                                filename: std::path::Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()),
                                mime_type: None,
                                caption: (!caption.is_empty()).then(|| caption.to_owned()),
                            };
                            let sent = control.send_media(tg_fake::control::SendMedia {
                                item, thread_id: None, user_id: None, reply_to_message_id: None, token: None, chat_id: None });
                            match sent {
                                Ok(sent) => {
                                    mine.push(sent.message_id);
                                    println!("  (#{})", mine.len());
                                }
                                Err(e) => println!("(could not send: {e})"),
                            }
                        }
                        Err(e) => println!("(cannot read {path}: {e})"),
                    }
                    continue;
                }
                if let Some(rest) = line.strip_prefix(":edit") {
                    let rest = rest.trim_start();
                    let (n, text) = rest.split_once(' ').unwrap_or((rest, ""));
                    match n.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| mine.get(i)) {
                        Some(&message_id) if !text.trim().is_empty() => {
                            if let Err(e) = control.edit_text(EditText { message_id, text: text.trim().to_owned(), user_id: None, token: None }) {
                                println!("(could not edit: {e})");
                            }
                        }
                        _ => println!("(usage: :edit N new text, N is one of your message numbers)"),
                    }
                    continue;
                }
                // Telegram takes at most 4096 characters in a message; its apps send a longer
                // text as several messages, and so does the demo (the hub joins them again).
                let parts = split_message(&line, TELEGRAM_TEXT_LIMIT);
                if parts.len() > 1 {
                    println!(
                        "  ({} characters: more than Telegram's {TELEGRAM_TEXT_LIMIT} in one message, sent as {} messages as the Telegram app does)",
                        line.chars().count(),
                        parts.len()
                    );
                }
                for part in parts {
                    match control.send_text(SendText { text: part, ..Default::default() }) {
                        Ok(sent) => {
                            mine.push(sent.message_id);
                            println!("  (#{})", mine.len());
                        }
                        Err(e) => println!("(could not send: {e})"),
                    }
                }
            }
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
                show_drafts(&control, &mut drafts_shown);
                show_toasts_and_typing(&control, &mut seen);
                show_new(&control, &mut shown, &mut buttons);
            }
        }
    }
    println!("stopping…");
    let _ = stop_tx.send(());
    if let Ok(Ok(Err(e))) = tokio::time::timeout(Duration::from_secs(15), hub).await {
        println!("the hub stopped with an error: {e}");
    }
    fake.shutdown().await;
    Ok(())
}

/// Telegram's limit for one text message (characters).
const TELEGRAM_TEXT_LIMIT: usize = 4096;

/// `text` in pieces of at most `limit` characters, cut at a line break or space when one is
/// near the limit.
fn split_message(text: &str, limit: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    while chars.len() - start > limit {
        let window = &chars[start..start + limit];
        let cut = window
            .iter()
            .rposition(|c| *c == '\n')
            .or_else(|| window.iter().rposition(|c| *c == ' '))
            .filter(|p| *p > limit / 2)
            .map_or(limit, |p| p + 1);
        out.push(chars[start..start + cut].iter().collect());
        start += cut;
    }
    out.push(chars[start..].iter().collect());
    out
}

/// What the terminal has shown of the bot's button answers and chat actions.
#[derive(Default)]
struct Seen {
    toasts: usize,
    last_action_seq: u64,
}

/// Prints the answers to button taps (Telegram shows them as a toast or an alert) and, once per
/// action, that the bot is typing.
fn show_toasts_and_typing(control: &tg_fake::Control, seen: &mut Seen) {
    let Ok(chat) = control.chat(None, None) else {
        return;
    };
    for a in chat.callback_answers.iter().skip(seen.toasts) {
        if let Some(text) = a.text.as_deref().filter(|t| !t.is_empty()) {
            let kind = if a.show_alert { "alert" } else { "toast" };
            println!("  ({kind}: {text})");
        }
    }
    seen.toasts = chat.callback_answers.len();
    let since = seen.last_action_seq;
    for a in chat.chat_actions.iter().filter(|a| a.action.seq > since) {
        seen.last_action_seq = seen.last_action_seq.max(a.action.seq);
        if a.visible {
            println!("  (… bot is {})", a.action.action.replace('_', " "));
        }
    }
}

/// Prints the live preview (the draft the bot streams while pi works), each new state on a
/// line of its own, as the tail of what it shows.
fn show_drafts(control: &tg_fake::Control, shown: &mut u64) {
    let Ok(chat) = control.chat(None, None) else {
        return;
    };
    let since = *shown;
    for d in chat.drafts.iter().filter(|d| d.draft.seq > since) {
        *shown = d.draft.seq;
        let text = d.draft.text.replace('\n', " ");
        let n = text.chars().count();
        let tail: String = text.chars().skip(n.saturating_sub(70)).collect();
        let more = if n > 70 { "…" } else { "" };
        println!("  ✎ {more}{tail}");
    }
}

/// What the terminal has shown of each bot message (its text and buttons), so a message the
/// bot edits (the menu, a settled question) is shown again.
#[derive(Default)]
struct Shown(HashMap<i64, String>);

/// Prints the bot's messages that are new or changed since they were shown, with their buttons
/// numbered.
fn show_new(control: &tg_fake::Control, shown: &mut Shown, buttons: &mut Vec<(i64, String)>) {
    let Ok(messages) = control.transcript(None, ThreadFilter::All, None) else {
        return;
    };
    for m in messages.into_iter().filter(|m| m.from_bot && !m.deleted) {
        let text = m.text.clone().unwrap_or_default();
        let form = format!("{text}\u{0}{:?}", m.reply_markup);
        let before = shown.0.insert(m.message_id, form.clone());
        if before.as_deref() == Some(form.as_str()) {
            continue;
        }
        let who = if before.is_some() {
            "bot (edited)"
        } else {
            "bot"
        };
        if let Some(media) = &m.media {
            let name = media.file_name.clone().unwrap_or_default();
            println!("{who}: 📎 {:?} {name} ({} bytes)", media.kind, media.size);
        }
        if !text.is_empty() {
            println!("{who}: {}", text.replace('\n', "\n     "));
        }
        if let Some(rows) = m
            .reply_markup
            .as_ref()
            .and_then(|r| r["inline_keyboard"].as_array())
            .filter(|rows| !rows.is_empty())
        {
            buttons.clear();
            for b in rows.iter().filter_map(|r| r.as_array()).flatten() {
                if let (Some(label), Some(data)) = (b["text"].as_str(), b["callback_data"].as_str())
                {
                    buttons.push((m.message_id, data.to_owned()));
                    println!("     [!{}] {label}", buttons.len());
                }
            }
        }
    }
    let _ = std::io::stdout().flush();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::split_message;

    #[test]
    fn long_messages_are_split_like_the_app_does() {
        assert_eq!(split_message("short", 10), vec!["short"]);
        let text = format!("{} {}", "a".repeat(8), "b".repeat(8));
        assert_eq!(split_message(&text, 10), vec!["aaaaaaaa ", "bbbbbbbb"]);
        let long = "x".repeat(25);
        let parts = split_message(&long, 10);
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            [10, 10, 5]
        );
        assert_eq!(parts.concat(), long);
    }
}
