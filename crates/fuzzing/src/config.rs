//! telegram.json: any bytes through the checks and the migration of the older layout; a file
//! that loads survives the writer with every key it had.

use std::path::Path;

use hub::assistant::Settings;
use hub::config::ConfigFile;
use hub::paths::ProfileName;
use serde_json::{Map, Value};

/// The identity keys the older layout kept at the top level (moved into `profiles.default`).
const LEGACY: [&str; 5] = [
    "botToken",
    "botUsername",
    "botId",
    "allowedUserId",
    "lastUpdateId",
];

/// Never a panic; a config that loads reads its settings for every profile, writes as text
/// that loads again to the same keys (a fixpoint, nothing to migrate any more), keeps every key
/// of the input (legacy identity keys under `profiles.default`), and stays valid after the
/// writers the hub uses (owner, assistant setting).
pub fn config(data: &[u8]) {
    let path = Path::new("/nonexistent/telegram.json");
    let text = crate::text(data);
    let Ok(file) = ConfigFile::parse(path, &text) else {
        return;
    };
    read_settings(&file);
    let written = written(&file);
    let again = match ConfigFile::parse(path, &written) {
        Ok(again) => again,
        Err(e) => panic!("the written config does not load: {e}\n{written}"),
    };
    assert!(
        !again.migrated(),
        "a written config still needed a migration"
    );
    assert_eq!(
        again.document(),
        file.document(),
        "the keys changed through the writer"
    );
    assert_eq!(self::written(&again), written, "writing is not a fixpoint");
    kept_every_key(&text, file.document());

    let default = ProfileName::default_profile();
    let mut changed = again;
    changed.set_allowed_user_id(&default, 4242);
    changed.set_shared(
        &default,
        "assistant.rendering",
        Value::String("html".into()),
    );
    let after = self::written(&changed);
    match ConfigFile::parse(path, &after) {
        Ok(reloaded) => {
            assert_eq!(
                reloaded.profile(&default).allowed_user_id,
                Some(4242),
                "the owner written is not the owner read"
            );
            for (key, value) in file.document() {
                if key != "assistant" && key != "profiles" {
                    assert_eq!(reloaded.document().get(key), Some(value), "{key} lost");
                }
            }
        }
        Err(e) => panic!("a config no longer loads after the hub's writers: {e}\n{after}"),
    }
}

fn written(file: &ConfigFile) -> String {
    file.to_text()
        .unwrap_or_else(|e| panic!("a loaded config does not serialise: {e}"))
}

/// Every profile's settings and the assistant settings are read without a panic.
fn read_settings(file: &ConfigFile) {
    let mut names: Vec<ProfileName> = file
        .profile_names()
        .iter()
        .filter_map(|n| ProfileName::new(n).ok())
        .collect();
    names.push(ProfileName::default_profile());
    for name in &names {
        let _ = file.profile(name);
        let _ = Settings::from_file(file, name);
        let _ = file.pi_binary();
    }
}

/// The input's keys are all in the loaded document: top-level ones as they were (the legacy
/// identity ones moved into `profiles.default`), every profile's own keys as they were.
fn kept_every_key(text: &str, doc: &Map<String, Value>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Ok(Value::Object(input)) = serde_json::from_str::<Value>(text) else {
        return;
    };
    for (key, value) in &input {
        if key == "profiles" {
            continue;
        }
        if LEGACY.contains(&key.as_str()) {
            let moved = doc
                .get("profiles")
                .and_then(|p| p.get("default"))
                .and_then(|p| p.get(key));
            assert_eq!(moved, Some(value), "the legacy {key} was not moved");
        } else {
            assert_eq!(doc.get(key), Some(value), "the top-level {key} was lost");
        }
    }
    if let Some(Value::Object(profiles)) = input.get("profiles") {
        for (name, profile) in profiles {
            let Some(profile) = profile.as_object() else {
                continue;
            };
            for (key, value) in profile {
                let kept = doc
                    .get("profiles")
                    .and_then(|p| p.get(name))
                    .and_then(|p| p.get(key));
                assert_eq!(kept, Some(value), "profiles.{name}.{key} was lost");
            }
        }
    }
}
