//! `pi-telegram install-extension`: writes the extension that matches this binary into
//! `<agent-dir>/telegram/extension/` and registers it as a pi package in pi's `settings.json`
//! (what `pi install <dir>` does), and records this binary as the hub pi should start.

use std::path::{Path, PathBuf};

use hub::HubError;
use hub::config::ConfigFile;
use hub::paths::AgentDir;
use serde_json::{Map, Value};

include!(concat!(env!("OUT_DIR"), "/extension_files.rs"));

/// The extension files this binary carries (for `doctor`'s "installed and current").
pub fn embedded() -> crate::cmd::doctor::EmbeddedExtension {
    crate::cmd::doctor::EmbeddedExtension {
        files: EXTENSION_FILES,
    }
}

/// Installs the extension; returns its folder.
pub fn install(agent_dir: &AgentDir) -> Result<PathBuf, HubError> {
    let dir = write_files(agent_dir)?;
    register_package(&agent_dir.path().join("settings.json"), &dir)?;
    // The extension starts the hub when none runs: tell it which binary.
    let mut config = ConfigFile::load(&agent_dir.config_file())?;
    if let Ok(exe) = std::env::current_exe() {
        config.set_hub_binary(&exe.display().to_string());
        config.save()?;
    }
    Ok(dir)
}

/// The entry file of the extension that matches this binary, written to the agent dir when
/// it is not there in this version: headless children load it for pi's Telegram tools. It is
/// the compiled `dist/index.js` (what `pi.extensions` in its package.json names): pi would
/// transpile `index.ts`, which costs each child about 40 MB.
pub fn child_extension(agent_dir: &AgentDir) -> Option<PathBuf> {
    match write_files(agent_dir) {
        Ok(dir) => Some(dir.join("dist").join("index.js")),
        Err(e) => {
            tracing::warn!(error = %e, "could not write the extension for headless pi: they run without pi's Telegram tools");
            None
        }
    }
}

/// Writes the embedded extension files into `<agent-dir>/telegram/extension/`.
fn write_files(agent_dir: &AgentDir) -> Result<PathBuf, HubError> {
    let dir = agent_dir.path().join("telegram").join("extension");
    for (rel, bytes) in EXTENSION_FILES {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(HubError::io(format!("creating {}", parent.display())))?;
        }
        // Unchanged files are left alone: a running pi may be reading them.
        if std::fs::read(&path).is_ok_and(|old| old == *bytes) {
            continue;
        }
        std::fs::write(&path, bytes)
            .map_err(HubError::io(format!("writing {}", path.display())))?;
    }
    Ok(dir)
}

/// Adds `dir` to `packages` in pi's settings, keeping everything else.
fn register_package(settings: &Path, dir: &Path) -> Result<(), HubError> {
    let text = match std::fs::read_to_string(settings) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "{}".into(),
        Err(e) => return Err(HubError::io(format!("reading {}", settings.display()))(e)),
    };
    let mut doc: Map<String, Value> = match serde_json::from_str(if text.trim().is_empty() {
        "{}"
    } else {
        &text
    }) {
        Ok(Value::Object(m)) => m,
        _ => {
            return Err(HubError::Usage(format!(
                "{} is not a JSON object; fix it (it was not changed), then run install-extension again",
                settings.display()
            )));
        }
    };
    let entry = Value::String(dir.display().to_string());
    let packages = doc
        .entry("packages")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(list) = packages else {
        return Err(HubError::Usage(format!(
            "\"packages\" in {} is not a list",
            settings.display()
        )));
    };
    if !list.contains(&entry) {
        list.push(entry);
    }
    let body = serde_json::to_string_pretty(&Value::Object(doc))
        .map_err(|e| HubError::io("writing pi settings")(std::io::Error::other(e)))?;
    let tmp = settings.with_extension("json.tmp");
    std::fs::write(&tmp, format!("{body}\n"))
        .map_err(HubError::io(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, settings).map_err(HubError::io(format!("writing {}", settings.display())))
}
