//! The pi agent-dir files that point pi at the fake.

use std::io;
use std::path::Path;

use serde_json::{Map, Value, json};

/// The provider name the written `models.json` declares.
pub const PROVIDER: &str = "fake";

/// The model id the written `models.json` declares (and the fake's default model id).
pub const MODEL_ID: &str = "fake-model";

/// A second model the written `models.json` declares, with reasoning (thinking levels).
pub const REASONING_MODEL_ID: &str = "fake-reasoner";

/// Writes `models.json` and `settings.json` into pi's agent dir (`PI_CODING_AGENT_DIR`, created
/// if missing) so that pi uses the fake at `base_url` (e.g. [`crate::FakeLlm::base_url`]) by
/// default, with no thinking, no project trust, a quiet startup, and compaction settings small
/// enough that `compact` works on a tiny session.
///
/// Both files are merged into: keys this function does not set survive (other providers, the
/// `packages` a test installed, …). Each file is replaced atomically. An existing file that is
/// not a JSON object is an `InvalidData` error rather than being overwritten.
pub fn write_pi_agent_config(agent_dir: &Path, base_url: &str) -> io::Result<()> {
    std::fs::create_dir_all(agent_dir)?;

    let models_path = agent_dir.join("models.json");
    let mut models = read_object(&models_path)?;
    let fake_provider = json!({
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": "fake-key",
        "compat": {
            "supportsDeveloperRole": false,
            "supportsReasoningEffort": true,
            "supportsStore": false,
        },
        "models": [{
            "id": MODEL_ID,
            "name": "Fake Model",
            "reasoning": false,
            "input": ["text", "image"],
            "contextWindow": 32000,
            "maxTokens": 4096,
            "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0 },
        }, {
            // A second model, with reasoning: something to switch to, and thinking levels.
            "id": REASONING_MODEL_ID,
            "name": "Fake Reasoner",
            "reasoning": true,
            "input": ["text"],
            "contextWindow": 64000,
            "maxTokens": 4096,
            "cost": { "input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0 },
        }],
    });
    update_object(&mut models, "providers", |providers| {
        providers.insert(PROVIDER.to_owned(), fake_provider);
    });
    write_atomically(&models_path, &Value::Object(models))?;

    let settings_path = agent_dir.join("settings.json");
    let mut settings = read_object(&settings_path)?;
    for (key, value) in [
        ("defaultProvider", json!(PROVIDER)),
        ("defaultModel", json!(MODEL_ID)),
        ("defaultThinkingLevel", json!("off")),
        ("defaultProjectTrust", json!("never")),
        ("quietStartup", json!(true)),
    ] {
        settings.insert(key.to_owned(), value);
    }
    update_object(&mut settings, "compaction", |compaction| {
        compaction.insert("enabled".to_owned(), json!(true));
        compaction.insert("reserveTokens".to_owned(), json!(1000));
        compaction.insert("keepRecentTokens".to_owned(), json!(50));
    });
    write_atomically(&settings_path, &Value::Object(settings))
}

/// The JSON object in `path`, or an empty one when the file does not exist.
fn read_object(path: &Path) -> io::Result<Map<String, Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(e),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a JSON object", path.display()),
        )),
        Err(e) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not valid JSON: {e}", path.display()),
        )),
    }
}

/// Applies `f` to the object `map[key]`, which is created (or replaces a non-object) if needed.
fn update_object(map: &mut Map<String, Value>, key: &str, f: impl FnOnce(&mut Map<String, Value>)) {
    let slot = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(inner) = slot {
        f(inner);
    } else {
        let mut inner = Map::new();
        f(&mut inner);
        *slot = Value::Object(inner);
    }
}

fn write_atomically(path: &Path, value: &Value) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    text.push('\n');
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn read(path: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn writes_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        write_pi_agent_config(&agent, "http://127.0.0.1:9/v1").unwrap();
        let models = read(&agent.join("models.json"));
        let fake = &models["providers"]["fake"];
        assert_eq!(fake["baseUrl"], "http://127.0.0.1:9/v1");
        assert_eq!(fake["api"], "openai-completions");
        assert_eq!(fake["apiKey"], "fake-key");
        assert_eq!(fake["compat"]["supportsStore"], false);
        assert_eq!(fake["models"][0]["id"], "fake-model");
        assert_eq!(fake["models"][0]["input"], json!(["text", "image"]));
        assert_eq!(fake["models"][0]["contextWindow"], 32000);
        assert_eq!(fake["models"][0]["maxTokens"], 4096);
        let settings = read(&agent.join("settings.json"));
        assert_eq!(
            settings,
            json!({
                "defaultProvider": "fake",
                "defaultModel": "fake-model",
                "defaultThinkingLevel": "off",
                "defaultProjectTrust": "never",
                "quietStartup": true,
                "compaction": { "enabled": true, "reserveTokens": 1000, "keepRecentTokens": 50 },
            })
        );
    }

    #[test]
    fn merges_into_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("settings.json"),
            r#"{"packages":["./ext"],"defaultModel":"old","compaction":{"other":1}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("models.json"),
            r#"{"providers":{"other":{"baseUrl":"x"}}}"#,
        )
        .unwrap();
        write_pi_agent_config(dir.path(), "http://127.0.0.1:1/v1").unwrap();
        write_pi_agent_config(dir.path(), "http://127.0.0.1:2/v1").unwrap();
        let settings = read(&dir.path().join("settings.json"));
        assert_eq!(settings["packages"], json!(["./ext"]));
        assert_eq!(settings["defaultModel"], "fake-model");
        assert_eq!(settings["compaction"]["other"], 1);
        assert_eq!(settings["compaction"]["keepRecentTokens"], 50);
        let models = read(&dir.path().join("models.json"));
        assert_eq!(models["providers"]["other"]["baseUrl"], "x");
        assert_eq!(
            models["providers"]["fake"]["baseUrl"],
            "http://127.0.0.1:2/v1"
        );
    }

    #[test]
    fn refuses_to_clobber_a_broken_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("settings.json"), "{ not json").unwrap();
        let err = write_pi_agent_config(dir.path(), "http://x/v1").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("settings.json")).unwrap(),
            "{ not json"
        );
    }
}
