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
        // Replaced whole (written beside, synced, renamed): a file rewritten in place was
        // found empty after a power loss, and pi loads these at its next start.
        hub::atomic::replace(&path, bytes, 0o644)
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
    // pi reads it at every start: replaced whole and synced, and a link (dotfiles) kept.
    hub::atomic::replace(settings, format!("{body}\n").as_bytes(), 0o644)
        .map_err(HubError::io(format!("writing {}", settings.display())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A changed extension file is replaced by a rename, never rewritten in place: whoever
    /// holds the old file (pi reading it, or the disk after a power loss) has it whole.
    #[test]
    fn a_changed_extension_file_is_replaced_whole() {
        let agent = tempfile::tempdir().unwrap();
        let agent_dir = AgentDir::at(agent.path());
        let dir = write_files(&agent_dir).unwrap();
        let (rel, bytes) = EXTENSION_FILES[0];
        let path = dir.join(rel);
        std::fs::write(&path, "an older release").unwrap();
        let held = agent.path().join("held");
        std::fs::hard_link(&path, &held).unwrap();
        let before = names_in(path.parent().unwrap());

        write_files(&agent_dir).unwrap();

        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert_eq!(
            std::fs::read_to_string(&held).unwrap(),
            "an older release",
            "the file was rewritten in place"
        );
        assert_eq!(
            names_in(path.parent().unwrap()),
            before,
            "a temporary file is left"
        );
    }

    /// pi's settings.json kept in dotfiles, as a link: it stays a link, its target gets the
    /// package, and no temporary file is left.
    #[test]
    fn registering_keeps_a_linked_settings_file() {
        let agent = tempfile::tempdir().unwrap();
        let dotfiles = tempfile::tempdir().unwrap();
        let real = dotfiles.path().join("settings.json");
        std::fs::write(&real, r#"{"theme": "dark"}"#).unwrap();
        let settings = agent.path().join("settings.json");
        std::os::unix::fs::symlink(&real, &settings).unwrap();

        register_package(&settings, Path::new("/x/extension")).unwrap();

        assert!(
            std::fs::symlink_metadata(&settings)
                .unwrap()
                .file_type()
                .is_symlink(),
            "the link was replaced by a file"
        );
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
        assert_eq!(doc["theme"], "dark");
        assert_eq!(doc["packages"][0], "/x/extension");
        assert_eq!(names_in(agent.path()), ["settings.json"]);
        assert_eq!(names_in(dotfiles.path()), ["settings.json"]);
    }
}
