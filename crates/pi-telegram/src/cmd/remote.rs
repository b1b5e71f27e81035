//! `pi-telegram remote-config`: what the other machine puts in its `telegram.json` to reach
//! this hub over TLS (see `hub::remote` for the certificate it pins).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use hub::HubError;
use hub::config::{ConfigFile, REMOTE_PORT};
use hub::paths::{AgentDir, ProfileName};
use hub::remote::ensure_identity;
use serde_json::{Value, json};

/// What `pi-telegram remote-config` found: the snippet for the other machine and what it is
/// made of.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    pub profile: ProfileName,
    /// Where the hub listens (`remote.listen`).
    pub listen: SocketAddr,
    /// The certificate's fingerprint.
    pub fingerprint: String,
    /// `{"profiles": {"<p>": {"remote": {"connect", "fingerprint", "secret"}}}}`.
    pub snippet: Value,
}

/// Makes (when needed) the certificate and the secret, and builds the snippet for the other
/// machine. `host` names this machine as the other one reaches it; by default the listen
/// address, or this machine's host name when the hub listens on every address.
pub fn remote_config(
    agent_dir: &AgentDir,
    profile: &ProfileName,
    host: Option<&str>,
) -> Result<RemoteConfig, HubError> {
    let config_path = agent_dir.config_file();
    let file = ConfigFile::load(&config_path)?;
    let settings = file.profile(profile);
    if settings.remote_client {
        return Err(HubError::Usage(format!(
            "profile {profile} in {} connects to a hub on another machine (remote.connect or remote.socket): run remote-config on the hub's machine",
            config_path.display()
        )));
    }
    let Some(listen) = settings.remote_listen else {
        return Err(HubError::Usage(format!(
            "the hub of profile {profile} does not listen for other machines. Add \"remote\": {{\"listen\": \"0.0.0.0:{REMOTE_PORT}\"}} to profiles.{profile} in {} (or \"127.0.0.1:{REMOTE_PORT}\" to reach it only through an SSH tunnel), restart the hub, and run this again",
            config_path.display()
        )));
    };
    let paths = agent_dir.profile(profile);
    let identity = ensure_identity(&paths)?;
    let secret = hub::secret::ensure(&paths.secret()).map_err(HubError::io(format!(
        "creating {}",
        paths.secret().display()
    )))?;
    let host = match host {
        Some(h) => h.to_owned(),
        None if listen.ip().is_unspecified() => host_name(),
        None => listen.ip().to_string(),
    };
    let snippet = json!({ "profiles": { profile.as_str(): { "remote": {
        "connect": join_host_port(&host, listen.port()),
        "fingerprint": identity.fingerprint(),
        "secret": secret,
    } } } });
    Ok(RemoteConfig {
        profile: profile.clone(),
        listen,
        fingerprint: identity.fingerprint().to_owned(),
        snippet,
    })
}

/// What `remote-config` says around the snippet (to stderr, so the snippet alone can be piped).
pub fn explain(rc: &RemoteConfig, config_file: &Path) -> String {
    let connect_cmd = if rc.profile == ProfileName::default_profile() {
        "/telegram-connect".to_owned()
    } else {
        format!("/telegram-connect {}", rc.profile)
    };
    let mut text = format!(
        "On the other machine: put this in <agent-dir>/telegram.json (usually ~/.pi/agent/telegram.json; merge it into one that exists) with mode 0600, as it holds the hub secret; install the extension there; then run {connect_cmd} in pi.\nThe hub listens on {} (remote.listen in {}); the other machine pins its certificate {}.\n",
        rc.listen,
        config_file.display(),
        rc.fingerprint,
    );
    if rc.listen.ip().is_loopback() {
        text.push_str(&format!(
            "It listens on loopback only: from another machine, forward the port first, e.g. `ssh -N -L {port}:127.0.0.1:{port} <this host>` there (then connect stays 127.0.0.1:{port}).\n",
            port = rc.listen.port()
        ));
    }
    text
}

/// `host:port`, with an IPv6 address in brackets.
fn join_host_port(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// This machine's name, for a hub listening on every address.
fn host_name() -> String {
    let name = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use hub::remote::Identity;

    use super::*;

    #[test]
    fn addresses_for_the_other_machine() {
        assert_eq!(join_host_port("10.0.0.2", 7391), "10.0.0.2:7391");
        assert_eq!(join_host_port("::1", 7391), "[::1]:7391");
        assert_eq!(join_host_port("hub.lan", 7391), "hub.lan:7391");
        assert!(!host_name().is_empty());
    }

    /// What the other machine connects to (`host:port`), as the snippet says.
    fn connect(rc: &RemoteConfig) -> String {
        rc.snippet["profiles"][rc.profile.as_str()]["remote"]["connect"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn write_config(dir: &Path, remote: Value) -> AgentDir {
        let cfg = json!({ "profiles": { "default": { "remote": remote } } });
        std::fs::write(dir.join("telegram.json"), cfg.to_string()).unwrap();
        AgentDir::at(dir)
    }

    #[test]
    fn remote_config_prints_the_snippet_or_says_how_to_turn_it_on() {
        let dir = tempfile::tempdir().unwrap();
        let profile = ProfileName::default_profile();
        let agent = AgentDir::at(dir.path());
        let err = remote_config(&agent, &profile, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"listen\""), "{err}");

        let agent = write_config(dir.path(), json!({ "listen": "127.0.0.1:7391" }));
        let rc = remote_config(&agent, &profile, None).unwrap();
        assert_eq!(connect(&rc), "127.0.0.1:7391");
        let remote = &rc.snippet["profiles"]["default"]["remote"];
        assert_eq!(remote["connect"], "127.0.0.1:7391");
        assert_eq!(remote["fingerprint"], rc.fingerprint.as_str());
        let secret =
            std::fs::read_to_string(dir.path().join("telegram/default/hub.secret")).unwrap();
        assert_eq!(remote["secret"], secret.trim());
        // The same certificate the hub serves.
        let id = Identity::load(&dir.path().join("telegram/default/remote.pem"))
            .unwrap()
            .unwrap();
        assert_eq!(id.fingerprint(), rc.fingerprint);
        assert!(explain(&rc, &agent.config_file()).contains("ssh -N -L 7391:127.0.0.1:7391"));

        let rc = remote_config(&agent, &profile, Some("hub.lan")).unwrap();
        assert_eq!(connect(&rc), "hub.lan:7391");
        let agent = write_config(dir.path(), json!({ "listen": "0.0.0.0:7400" }));
        let rc = remote_config(&agent, &profile, None).unwrap();
        assert!(connect(&rc).ends_with(":7400") && !connect(&rc).starts_with("0.0.0.0"));
        assert_eq!(rc.fingerprint, id.fingerprint());

        let agent = write_config(
            dir.path(),
            json!({ "connect": "hub.lan:7391", "fingerprint": "sha256:00", "secret": "s" }),
        );
        let err = remote_config(&agent, &profile, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("hub's machine"), "{err}");
    }
}
