//! The commands Telegram shows in its `/` menu: the hub's own (controls and menu shortcuts) and
//! the ones the live pi instances list (prompt templates, extension commands, skills), under
//! names Telegram accepts (`[a-z0-9_]{1,32}`).
//!
//! What is published lives in the store: each instance's list (`commands.of:<identity>`), the
//! map from Telegram names back to pi's ([`PI_COMMANDS`], read by the command handler), and the
//! list last queued for `setMyCommands` (so an unchanged list is not sent again).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use store::outbox::Purpose;
use store::{Connection, StoreError, instances, kv};

use crate::outgoing::message::BotCommand;
use crate::outgoing::outbound;

/// Key of the map from Telegram command names to pi's (`{"review_pr": "review-pr"}`).
pub const PI_COMMANDS: &str = "commands.pi";
/// Key of the list last queued for `setMyCommands`.
const PUBLISHED: &str = "commands.published";
/// Telegram shows at most this many commands.
const MAX_COMMANDS: usize = 100;

/// The hub's own commands, in the order Telegram lists them.
pub const OURS: &[(&str, &str)] = &[
    ("start", "Menu: instances, status, model, queue, settings"),
    ("abort", "Abort the running turn (the queue stays)"),
    ("stop", "Abort and drop everything waiting"),
    ("next", "Abort the running turn and go on with the next"),
    ("continue", "Ask pi to continue (goes first)"),
    ("compact", "Compact pi's session"),
    ("model", "Show or switch the model"),
    ("thinking", "Show or set the thinking level"),
    ("queue", "What waits, with buttons to reorder or skip"),
    ("status", "Model, context use, cost, queue"),
    ("settings", "Rendering, previews, activity, push"),
    ("new", "Start pi in a folder, or a new session"),
    ("sessions", "Resume one of pi's saved sessions"),
    ("close", "End a pi the hub started"),
    ("people", "Who else may use the bot; invite or remove"),
    ("help", "What the bot does and its commands"),
];

/// A command as pi lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiCommand {
    /// pi's name (`review-pr`, `skill:lint`).
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// `prompt`, `extension` or `skill`.
    pub source: String,
}

/// Reads pi's answer to a commands request; entries without a name are left out.
pub fn parse(answer: &Value) -> Vec<PiCommand> {
    answer
        .get("commands")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|c| {
                    let name = c.get("name").and_then(Value::as_str)?.trim();
                    (!name.is_empty()).then(|| PiCommand {
                        name: name.to_owned(),
                        description: c
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        source: c
                            .get("source")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// pi's command name as Telegram accepts it: lower case, every run of other characters one
/// `_`, at most 32 characters. `None` when nothing is left, or for the pi extension's own
/// `telegram-*` commands (they make no sense from the phone).
pub fn telegram_name(pi_name: &str) -> Option<String> {
    let lower = pi_name.to_ascii_lowercase();
    if lower.starts_with("telegram-") || lower.starts_with("telegram_") {
        return None;
    }
    let mut out = String::new();
    for ch in lower.chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            out.push(ch);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let out: String = out.trim_end_matches('_').chars().take(32).collect();
    let out = out.trim_end_matches('_').to_owned();
    (!out.is_empty()).then_some(out)
}

fn of_key(identity: &str) -> String {
    format!("commands.of:{identity}")
}

/// Stores what `identity` lists.
pub fn store_list(tx: &Connection, identity: &str, list: &[PiCommand]) -> Result<(), StoreError> {
    let v: Vec<Value> = list
        .iter()
        .map(|c| json!({ "name": c.name, "description": c.description, "source": c.source }))
        .collect();
    kv::set(tx, &of_key(identity), &Value::Array(v).to_string())
}

fn stored_list(tx: &Connection, identity: &str) -> Result<Vec<PiCommand>, StoreError> {
    let v: Value = kv::get(tx, &of_key(identity))?
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null);
    Ok(parse(&json!({ "commands": v })))
}

/// The commands to publish, given each live instance's list: ours first, then pi's (the first
/// instance to claim a Telegram name has it). Returns `(commands, telegram name -> pi name)`.
pub fn merge(lists: &[Vec<PiCommand>]) -> (Vec<(String, String)>, BTreeMap<String, String>) {
    let mut out: Vec<(String, String)> = OURS
        .iter()
        .map(|(c, d)| ((*c).to_owned(), (*d).to_owned()))
        .collect();
    let mut map = BTreeMap::new();
    for c in lists.iter().flatten() {
        if out.len() >= MAX_COMMANDS {
            break;
        }
        let Some(name) = telegram_name(&c.name) else {
            continue;
        };
        if out.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let description = c
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| d.chars().take(256).collect())
            .unwrap_or_else(|| match c.source.as_str() {
                "prompt" => format!("pi prompt template /{}", c.name),
                "skill" => format!("pi skill /{}", c.name),
                _ => format!("pi command /{}", c.name),
            });
        map.insert(name.clone(), c.name.clone());
        out.push((name, description));
    }
    (out, map)
}

/// Recomputes the published commands from the live instances' lists; when they changed,
/// queues a `setMyCommands` (in the queue of calls that are not chat messages, chat 0).
/// Returns whether a call was queued.
pub fn refresh(tx: &Connection, now: i64) -> Result<bool, StoreError> {
    let mut lists = Vec::new();
    for i in instances::live(tx)? {
        lists.push(stored_list(tx, &i.identity)?);
    }
    let (commands, map) = merge(&lists);
    let map_value: Value = map
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    kv::set(tx, PI_COMMANDS, &map_value.to_string())?;
    let list: Vec<Value> = commands
        .iter()
        .map(|(c, d)| json!({ "command": c, "description": d }))
        .collect();
    let list = Value::Array(list).to_string();
    if kv::get(tx, PUBLISHED)?.as_deref() == Some(list.as_str()) {
        return Ok(false);
    }
    kv::set(tx, PUBLISHED, &list)?;
    let n = kv::get_i64(tx, "commands.generation")?.unwrap_or(0) + 1;
    kv::set(tx, "commands.generation", &n.to_string())?;
    let commands = commands
        .into_iter()
        .map(|(command, description)| BotCommand {
            command,
            description,
        })
        .collect();
    outbound::commands(tx, commands, &Purpose::Commands { generation: n }, now)?;
    Ok(true)
}

/// Forgets what was published, so the next [`refresh`] publishes again (at start-up: the bot's
/// commands may have been changed by another program while the hub was down).
pub fn forget_published(tx: &Connection) -> Result<(), StoreError> {
    kv::delete(tx, PUBLISHED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(name: &str, source: &str) -> PiCommand {
        PiCommand {
            name: name.into(),
            description: None,
            source: source.into(),
        }
    }

    #[test]
    fn names_become_what_telegram_accepts() {
        assert_eq!(telegram_name("review-pr").as_deref(), Some("review_pr"));
        assert_eq!(
            telegram_name("skill:Lint.Fix").as_deref(),
            Some("skill_lint_fix")
        );
        assert_eq!(telegram_name("--x--").as_deref(), Some("x"));
        assert_eq!(telegram_name("ünïcode").as_deref(), Some("n_code"));
        assert_eq!(telegram_name("telegram-connect"), None);
        assert_eq!(telegram_name("::"), None);
        let long = "a".repeat(40);
        assert_eq!(telegram_name(&long).map(|n| n.len()), Some(32));
        assert_eq!(
            telegram_name(&format!("{}-b", "a".repeat(31))).as_deref(),
            Some("a".repeat(31).as_str())
        );
    }

    #[test]
    fn ours_come_first_and_keep_their_names() {
        let lists = vec![
            vec![cmd("review-pr", "prompt"), cmd("abort", "extension")],
            vec![cmd("review_pr", "prompt"), cmd("deploy", "extension")],
        ];
        let (commands, map) = merge(&lists);
        let names: Vec<&str> = commands.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            &names[..OURS.len()],
            OURS.iter().map(|(c, _)| *c).collect::<Vec<_>>()
        );
        assert_eq!(&names[OURS.len()..], ["review_pr", "deploy"]);
        assert_eq!(map.get("review_pr").map(String::as_str), Some("review-pr"));
        assert_eq!(map.get("abort"), None, "ours are never pi's");
        assert!(commands.iter().all(|(c, d)| {
            (1..=32).contains(&c.len())
                && c.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
                && (1..=256).contains(&d.chars().count())
        }));
    }

    #[test]
    fn at_most_a_hundred() {
        let list: Vec<PiCommand> = (0..300).map(|i| cmd(&format!("c{i}"), "prompt")).collect();
        let (commands, map) = merge(&[list]);
        assert_eq!(commands.len(), MAX_COMMANDS);
        assert_eq!(map.len(), MAX_COMMANDS - OURS.len());
    }
}
