//! `pi-telegram service install|uninstall|status`: the hub as a `systemd --user` unit (Linux) or
//! a launchd agent (macOS), restarted on failure but never in a loop on an error a restart cannot
//! fix (the exit codes of [`HubError::exit_code`]: configuration, another hub, another poller, a
//! refused token).
//!
//! Installing leaves `service.json` in the profile folder: a hub that a pi's extension tries to
//! start then starts the service instead (see `serve`), so there is never a second hub beside
//! the service's.

use std::path::{Path, PathBuf};

use serde::Serialize;

use hub::HubError;
use hub::lifecycle::{
    Installed, Manager, STARTED_BY_ENV, StartedBy, checked, gui_domain, installed, manager_cmd,
    service_marker as marker,
};
use hub::paths::{AgentDir, ProfileName, ProfilePaths};

use crate::cli::ServiceCommand;

/// Exit codes after which restarting cannot help (see `HubError::exit_code`).
pub const NO_RESTART_EXIT_CODES: [i32; 4] = [2, 3, 4, 5];

/// What `install` puts in the unit: the binary, the profile, and the environment the hub needs
/// to find pi and the agent folder as the installing shell does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitSpec {
    /// The `pi-telegram` binary (absolute).
    pub exe: PathBuf,
    pub profile: ProfileName,
    /// Environment for the hub (besides `PI_TELEGRAM_STARTED_BY=service`).
    pub env: Vec<(String, String)>,
}

/// The variables copied from the installing shell when set: where pi's agent folder is, where
/// `pi` and Node are found, the log filter, and the way to Telegram (a proxy, the address
/// family, the certificates trusted: a hub that reaches Telegram from the shell must from the
/// service too).
pub const COPIED_ENV: [&str; 16] = [
    "PI_CODING_AGENT_DIR",
    "PI_TELEGRAM_PI_BIN",
    "PI_TELEGRAM_LOG",
    "PATH",
    "HOME",
    "PI_TELEGRAM_NETWORK_FAMILY",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

impl UnitSpec {
    /// The spec for this process's binary and environment.
    pub fn current(profile: &ProfileName) -> Result<Self, HubError> {
        let exe = std::env::current_exe().map_err(HubError::io("finding this binary"))?;
        let env = COPIED_ENV
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        Ok(Self {
            exe,
            profile: profile.clone(),
            env,
        })
    }

    /// `pi-telegram` (default profile) or `pi-telegram-<profile>`.
    pub fn unit_name(&self) -> String {
        unit_name(&self.profile)
    }

    fn all_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            STARTED_BY_ENV.to_owned(),
            StartedBy::Service.as_str().to_owned(),
        )];
        env.extend(self.env.iter().cloned());
        env
    }
}

/// `pi-telegram` (default profile) or `pi-telegram-<profile>`.
pub fn unit_name(profile: &ProfileName) -> String {
    if *profile == ProfileName::default_profile() {
        "pi-telegram".into()
    } else {
        format!("pi-telegram-{profile}")
    }
}

/// A value in systemd's quoting: double quotes, backslash escapes, `%` doubled (specifiers).
fn systemd_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '%' => out.push_str("%%"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `systemd --user` unit.
pub fn systemd_unit(spec: &UnitSpec) -> String {
    let mut env = String::new();
    for (k, v) in spec.all_env() {
        env.push_str(&format!(
            "Environment={}\n",
            systemd_quote(&format!("{k}={v}"))
        ));
    }
    let codes = NO_RESTART_EXIT_CODES.map(|c| c.to_string()).join(" ");
    format!(
        "[Unit]\n\
         Description=pi-telegram hub (profile {profile})\n\
         After=network-online.target\n\
         Wants=network-online.target\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={exe} serve --profile {profile}\n\
         {env}\
         Restart=on-failure\n\
         RestartSec=5\n\
         # Restarting cannot fix these: bad configuration, another hub, another poller, a refused token.\n\
         RestartPreventExitStatus={codes}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        profile = spec.profile,
        exe = systemd_quote(&spec.exe.display().to_string()),
    )
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn launchd_label(profile: &ProfileName) -> String {
    format!("dev.pi-telegram.{profile}")
}

/// The launchd agent. launchd cannot tell exit codes apart: it restarts after a failed exit
/// (`SuccessfulExit` false), throttled to once a minute so a lasting error is no busy loop.
pub fn launchd_plist(spec: &UnitSpec, log: &Path) -> String {
    let mut env = String::new();
    for (k, v) in spec.all_env() {
        env.push_str(&format!(
            "      <key>{}</key><string>{}</string>\n",
            xml_escape(&k),
            xml_escape(&v)
        ));
    }
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
  <dict>
    <key>Label</key><string>{label}</string>
    <key>ProgramArguments</key>
    <array>
      <string>{exe}</string><string>serve</string><string>--profile</string><string>{profile}</string>
    </array>
    <key>EnvironmentVariables</key>
    <dict>
{env}    </dict>
    <key>RunAtLoad</key><true/>
    <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
    <key>ThrottleInterval</key><integer>60</integer>
    <key>StandardErrorPath</key><string>{log}</string>
  </dict>
</plist>
"#,
        label = launchd_label(&spec.profile),
        exe = xml_escape(&spec.exe.display().to_string()),
        profile = spec.profile,
        log = xml_escape(&log.display().to_string()),
    )
}
/// Where the unit or plist goes.
pub fn unit_file(manager: Manager, profile: &ProfileName) -> Result<PathBuf, HubError> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| HubError::Usage("HOME is not set".into()))?;
    Ok(match manager {
        Manager::Systemd => std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"))
            .join("systemd/user")
            .join(format!("{}.service", unit_name(profile))),
        Manager::Launchd => home
            .join("Library/LaunchAgents")
            .join(format!("{}.plist", launchd_label(profile))),
    })
}

/// The text `install` writes (also what `install --dry-run` prints).
pub fn unit_text(manager: Manager, spec: &UnitSpec, paths: &ProfilePaths) -> String {
    match manager {
        Manager::Systemd => systemd_unit(spec),
        Manager::Launchd => launchd_plist(spec, &paths.log_file()),
    }
}
/// Writes the unit, enables it and starts it now.
pub fn install(
    agent_dir: &AgentDir,
    manager: Manager,
    spec: &UnitSpec,
) -> Result<Installed, HubError> {
    let paths = agent_dir.profile(&spec.profile);
    paths
        .ensure()
        .map_err(HubError::io(format!("creating {}", paths.dir.display())))?;
    let file = unit_file(manager, &spec.profile)?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(HubError::io(format!("creating {}", dir.display())))?;
    }
    let text = unit_text(manager, spec, &paths);
    let tmp = file.with_extension("tmp");
    // 0600: the environment it carries may hold a proxy's password.
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&tmp);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(HubError::io(format!("writing {}", tmp.display())))?;
    }
    std::fs::rename(&tmp, &file).map_err(HubError::io(format!("writing {}", file.display())))?;
    let name = match manager {
        Manager::Systemd => {
            let name = spec.unit_name();
            checked(manager, &["daemon-reload"])?;
            checked(manager, &["enable", "--now", &format!("{name}.service")])?;
            name
        }
        Manager::Launchd => {
            let label = launchd_label(&spec.profile);
            // Replacing an earlier install: unload it first (an error means it was not loaded).
            let _ = manager_cmd(manager, &["bootout", &format!("{}/{label}", gui_domain())]);
            checked(
                manager,
                &["bootstrap", &gui_domain(), &file.display().to_string()],
            )?;
            label
        }
    };
    let installed = Installed {
        manager,
        name,
        file,
    };
    let text = serde_json::to_string(&installed).map_err(std::io::Error::other);
    // Read at every start (a hub started by hand starts the service instead): replaced whole.
    text.and_then(|t| hub::atomic::replace(&marker(&paths), t.as_bytes(), 0o600))
        .map_err(HubError::io(format!(
            "writing {}",
            marker(&paths).display()
        )))?;
    Ok(installed)
}

/// Stops and disables the service and removes its unit. `None` when none was installed.
pub fn uninstall(
    agent_dir: &AgentDir,
    profile: &ProfileName,
) -> Result<Option<Installed>, HubError> {
    let paths = agent_dir.profile(profile);
    let Some(found) = installed(&paths) else {
        return Ok(None);
    };
    match found.manager {
        Manager::Systemd => {
            checked(
                found.manager,
                &["disable", "--now", &format!("{}.service", found.name)],
            )?;
        }
        Manager::Launchd => {
            let _ = manager_cmd(
                found.manager,
                &["bootout", &format!("{}/{}", gui_domain(), found.name)],
            );
        }
    }
    for f in [found.file.clone(), marker(&paths)] {
        match std::fs::remove_file(&f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(HubError::io(format!("removing {}", f.display()))(e));
            }
            _ => {}
        }
    }
    if found.manager == Manager::Systemd {
        checked(found.manager, &["daemon-reload"])?;
    }
    Ok(Some(found))
}
/// What `service status` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceStatus {
    /// The installed service, if any.
    pub installed: Option<Installed>,
    /// Enabled (starts at login).
    pub enabled: bool,
    /// Running now.
    pub running: bool,
    /// What the manager said, when it could be asked.
    pub detail: Option<String>,
}

/// Asks the manager about the profile's service.
pub fn status(paths: &ProfilePaths) -> ServiceStatus {
    let Some(found) = installed(paths) else {
        return ServiceStatus {
            installed: None,
            enabled: false,
            running: false,
            detail: None,
        };
    };
    let (enabled, running, detail) = match found.manager {
        Manager::Systemd => {
            let unit = format!("{}.service", found.name);
            let ask = |what: &str| {
                manager_cmd(found.manager, &[what, &unit])
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                    .unwrap_or_else(|e| e.to_string())
            };
            let enabled = ask("is-enabled");
            let active = ask("is-active");
            (
                enabled == "enabled",
                active == "active",
                Some(format!("{enabled}, {active}")),
            )
        }
        Manager::Launchd => {
            let out = manager_cmd(
                found.manager,
                &["print", &format!("{}/{}", gui_domain(), found.name)],
            );
            match out {
                Ok(o) if o.status.success() => {
                    let text = String::from_utf8_lossy(&o.stdout);
                    let running = text.contains("state = running");
                    (
                        true,
                        running,
                        Some(if running { "running" } else { "loaded" }.into()),
                    )
                }
                Ok(_) => (false, false, Some("not loaded".into())),
                Err(e) => (false, false, Some(e.to_string())),
            }
        }
    };
    ServiceStatus {
        installed: Some(found),
        enabled,
        running,
        detail,
    }
}

/// Carries out `pi-telegram service …` and prints what it did.
pub fn run(
    agent_dir: &AgentDir,
    profile: &ProfileName,
    command: ServiceCommand,
) -> Result<(), HubError> {
    let manager = Manager::here();
    let paths = agent_dir.profile(profile);
    match command {
        ServiceCommand::Install { dry_run } => {
            let spec = UnitSpec::current(profile)?;
            if dry_run {
                let file = unit_file(manager, profile)?;
                println!("# {}", file.display());
                print!("{}", unit_text(manager, &spec, &paths));
                return Ok(());
            }
            let done = install(agent_dir, manager, &spec)?;
            println!(
                "Installed and started {} ({}). It starts at login and restarts after a crash.\nStatus: pi-telegram service status{}; stop it for now: pi-telegram stop{}",
                done.name,
                done.file.display(),
                flag(profile),
                flag(profile),
            );
        }
        ServiceCommand::Uninstall => match uninstall(agent_dir, profile)? {
            Some(done) => println!(
                "Stopped and removed {} ({}).",
                done.name,
                done.file.display()
            ),
            None => println!("No service is installed for profile {profile}."),
        },
        ServiceCommand::Status { json } => {
            let st = status(&paths);
            if json {
                let out = serde_json::to_string_pretty(&st)
                    .map_err(|e| HubError::io("printing")(std::io::Error::other(e)))?;
                println!("{out}");
            } else {
                match &st.installed {
                    None => println!(
                        "No service installed for profile {profile} (pi-telegram service install{}).",
                        flag(profile)
                    ),
                    Some(found) => println!(
                        "{} ({})\nenabled      {}\nrunning      {}\nmanager says {}",
                        found.name,
                        found.file.display(),
                        if st.enabled { "yes" } else { "no" },
                        if st.running { "yes" } else { "no" },
                        st.detail.as_deref().unwrap_or("-"),
                    ),
                }
            }
        }
    }
    Ok(())
}

fn flag(profile: &ProfileName) -> String {
    if *profile == ProfileName::default_profile() {
        String::new()
    } else {
        format!(" --profile {profile}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec() -> UnitSpec {
        UnitSpec {
            exe: "/opt/pi tg/pi-telegram".into(),
            profile: ProfileName::new("work").unwrap(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("PI_CODING_AGENT_DIR".into(), "/home/a/100% \"x\"".into()),
            ],
        }
    }

    /// Compares with `crates/hub/tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites it (review the
    /// diff).
    fn golden(name: &str, text: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
        }
        assert_eq!(text, std::fs::read_to_string(&path).unwrap(), "{name}");
    }

    #[test]
    fn the_systemd_unit_matches_the_golden_file() {
        let text = systemd_unit(&spec());
        golden("pi-telegram-work.service", &text);
        assert!(text.contains("RestartPreventExitStatus=2 3 4 5\n"));
        assert!(text.contains(r#"Environment="PI_CODING_AGENT_DIR=/home/a/100%% \"x\"""#));
    }

    #[test]
    fn the_launchd_plist_matches_the_golden_file() {
        let text = launchd_plist(
            &spec(),
            Path::new("/home/a/.pi/agent/telegram/work/hub.log"),
        );
        golden("dev.pi-telegram.work.plist", &text);
    }

    #[test]
    fn unit_names() {
        assert_eq!(unit_name(&ProfileName::default_profile()), "pi-telegram");
        assert_eq!(
            unit_name(&ProfileName::new("work").unwrap()),
            "pi-telegram-work"
        );
    }
}
