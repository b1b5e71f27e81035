//! Checks of the programs around the hub: pi (for `spawn` and headless instances), Node.js
//! (pi runs on it) and the pi extension. Missing ones are warnings: the hub works without
//! them, and this shell's PATH may not be the one pi runs with.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{Check, Ctx, EmbeddedExtension};

const PI: (&str, &str) = ("pi", "pi");
const NODE: (&str, &str) = ("node", "Node.js");
const EXTENSION: (&str, &str) = ("extension", "pi extension");

/// The oldest Node.js pi supports (its package's `engines`).
const NODE_MIN: (u64, u64) = (22, 19);

/// Runs the tool checks.
pub(crate) async fn checks(ctx: &Ctx, checks: &mut Vec<Check>) {
    checks.push(pi(ctx.config.as_ref()).await);
    checks.push(node().await);
    checks.push(match ctx.opts.extension {
        Some(embedded) => extension(ctx, embedded),
        None => Check::skip(EXTENSION.0, EXTENSION.1, "this build carries no extension"),
    });
}

/// `name` as the shell would find it: a path with a `/` as it is, else the first executable
/// file of that name on PATH.
pub fn find_program(name: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.components().count() > 1 {
        return executable(name).then(|| name.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| executable(p))
}

/// The first line `<program> --version` prints, within 15 s.
async fn version(program: &Path) -> Result<String, String> {
    let run = tokio::process::Command::new(program)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(15), run).await {
        Err(_) => Err("`--version` did not answer within 15 s".into()),
        Ok(Err(e)) => Err(format!("cannot run it: {e}")),
        Ok(Ok(out)) if !out.status.success() => Err(format!("`--version` failed ({})", out.status)),
        Ok(Ok(out)) => Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()),
    }
}

/// `pi`: the pi the hub would start (`$PI_TELEGRAM_PI_BIN`, else `piBinary` in telegram.json,
/// else `pi` on PATH) and its version.
async fn pi(config: Option<&hub::config::ConfigFile>) -> Check {
    let bin = hub::pi::spawned::pi_binary(&[], config);
    let wanted = bin.path.clone();
    let named = wanted.components().count() > 1 || wanted.is_absolute();
    let Some(found) = find_program(&wanted) else {
        let detail = if named {
            format!(
                "{} names {}, which is not an executable file",
                bin.source,
                wanted.display()
            )
        } else {
            "pi is not on this shell's PATH".to_owned()
        };
        return Check::warn(
            PI.0,
            PI.1,
            detail,
            "install it (npm install -g @earendil-works/pi-coding-agent), or set PI_TELEGRAM_PI_BIN or \"piBinary\" in telegram.json; only headless pi (spawn, /new) need it here, pi with the extension connects by itself",
        );
    };
    match version(&found).await {
        Ok(v) => Check::pass(PI.0, PI.1, format!("{v} at {}", found.display())),
        Err(e) => Check::warn(
            PI.0,
            PI.1,
            format!("{}: {e}", found.display()),
            "reinstall pi (npm install -g @earendil-works/pi-coding-agent)",
        ),
    }
}

/// `v22.19.0` -> (22, 19).
fn parse_node_version(text: &str) -> Option<(u64, u64)> {
    let mut parts = text.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `node`: on PATH and new enough for pi.
async fn node() -> Check {
    let install = format!(
        "install Node.js {}.{} or newer (nodejs.org, or your package manager)",
        NODE_MIN.0, NODE_MIN.1
    );
    let Some(found) = find_program(Path::new("node")) else {
        return Check::warn(NODE.0, NODE.1, "node is not on this shell's PATH", install);
    };
    match version(&found).await {
        Ok(v) => match parse_node_version(&v) {
            Some(have) if have >= NODE_MIN => {
                Check::pass(NODE.0, NODE.1, format!("{v} at {}", found.display()))
            }
            Some(_) => Check::warn(
                NODE.0,
                NODE.1,
                format!(
                    "{v} at {} is older than pi needs ({}.{})",
                    found.display(),
                    NODE_MIN.0,
                    NODE_MIN.1
                ),
                install,
            ),
            None => Check::warn(
                NODE.0,
                NODE.1,
                format!("{} says {v:?}, not a version", found.display()),
                install,
            ),
        },
        Err(e) => Check::warn(NODE.0, NODE.1, format!("{}: {e}", found.display()), install),
    }
}

/// `extension`: installed where `install-extension` puts it, the same files as this binary's,
/// registered in pi's settings, and the hub binary it starts exists.
fn extension(ctx: &Ctx, embedded: EmbeddedExtension) -> Check {
    let agent = ctx.opts.agent_dir.path();
    let dir = agent.join("telegram").join("extension");
    let install = "run `pi-telegram install-extension`, then /reload in pi";
    let settings_path = agent.join("settings.json");
    let packages: Vec<String> = hub::regular::read_to_string(&settings_path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("packages").cloned())
        .and_then(|p| p.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| match p {
            Value::String(s) => Some(s.clone()),
            other => other
                .get("source")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
        .collect();
    let ours = dir.display().to_string();
    let registered_here = packages.iter().any(|p| p == &ours);
    // `pi install npm:pi-telegram` registers the npm package; `pi install extension/` from a
    // checkout registers that folder.
    let elsewhere = packages.iter().find(|p| {
        let npm = p.strip_prefix("npm:").map(|spec| {
            // `pi-telegram`, `pi-telegram@0.2.0` (not `pi-telegram-linux-x64-gnu`).
            spec.split('@').next() == Some("pi-telegram")
        });
        npm.unwrap_or_else(|| {
            hub::regular::read_to_string(&Path::new(p).join("package.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v.get("name").and_then(Value::as_str) == Some("pi-telegram"))
        })
    });
    if !dir.join("package.json").exists() {
        if let Some(other) = elsewhere.filter(|_| !registered_here) {
            return Check::pass(
                EXTENSION.0,
                EXTENSION.1,
                format!("registered from {other} (not compared with this binary's)"),
            );
        }
        return Check::warn(
            EXTENSION.0,
            EXTENSION.1,
            "not installed: pi cannot connect to the hub (/telegram-connect)",
            install,
        );
    }
    let differ = embedded
        .files
        .iter()
        .filter(|(rel, bytes)| {
            // Read no more than ours: a file that is longer differs anyway.
            hub::regular::read_up_to(&dir.join(rel), bytes.len() as u64 + 1)
                .map_or(true, |have| have != *bytes)
        })
        .count();
    let mut problems = Vec::new();
    if differ > 0 {
        problems.push(format!(
            "{differ} of its files differ from this binary's (installed by another version)"
        ));
    }
    if !registered_here && elsewhere.is_none() {
        problems.push(format!("not registered in {}", settings_path.display()));
    }
    let hub_binary = ctx
        .config
        .as_ref()
        .and_then(|c| c.setting(&ctx.opts.profile, "hubBinary"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(bin) = &hub_binary
        && find_program(Path::new(bin)).is_none()
    {
        problems.push(format!(
            "the hub binary it starts ({bin}, hubBinary in telegram.json) is not there"
        ));
    }
    if problems.is_empty() {
        Check::pass(
            EXTENSION.0,
            EXTENSION.1,
            format!("installed in {ours} and current"),
        )
    } else {
        Check::warn(
            EXTENSION.0,
            EXTENSION.1,
            format!("installed in {ours}, but {}", problems.join("; ")),
            install,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_versions() {
        assert_eq!(parse_node_version("v22.23.3"), Some((22, 23)));
        assert_eq!(parse_node_version("v18.0.0\n"), Some((18, 0)));
        assert_eq!(parse_node_version("node"), None);
        assert!((22, 23) >= NODE_MIN && (18, 0) < NODE_MIN && (22, 9) < NODE_MIN);
    }
}
