//! `<agent-dir>/telegram.json`, in the reference system's format, so people can switch:
//!
//! ```json
//! { "profiles": { "default": { "botToken": "123:AA…", "allowedUserId": 42 } } }
//! ```
//!
//! Per profile (or at the top level, as a default for every profile): `apiBase`, `pairing`
//! (`"code"`, the default, or `"first-contact"`), `pacing`, `historyRetentionDays`, `workspaces`. Per profile only: `remote` (pi on
//! other machines: `listen` on the hub's machine; `connect`/`socket`, `fingerprint`, `secret` on
//! the other machine, read by the extension). Unknown keys anywhere are kept as they are. The file is written atomically with mode 0600; a malformed file is reported with
//! its line and never overwritten.

mod keys;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use store::people::Role;
use telegram::{PacingConfig, Token};

use crate::paths::ProfileName;

/// Environment variables a token may come from, in order (the reference system's names).
pub const TOKEN_ENV: [&str; 4] = [
    "TELEGRAM_BOT_TOKEN",
    "TELEGRAM_BOT_KEY",
    "TELEGRAM_TOKEN",
    "TELEGRAM_KEY",
];
/// Environment variable overriding the API base.
pub const API_BASE_ENV: &str = "TELEGRAM_API_BASE";

/// What is wrong with the config file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not JSON.
    #[error("{path} line {line}, column {column}: {message}. Fix the file (it was not changed).")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A value has the wrong type.
    #[error("{path}: {key} {problem}. Fix the file (it was not changed).")]
    Value {
        /// The file.
        path: PathBuf,
        /// Dotted key.
        key: String,
        /// What is wrong.
        problem: String,
    },
}

/// How the owner is established when none is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingMode {
    /// A one-time code printed by `setup`, sent as `/start CODE`.
    Code,
    /// The first person who writes becomes the owner (the reference system's behaviour).
    FirstContact,
}

/// One profile's settings, resolved from the file (profile keys over top-level keys).
#[derive(Debug, Clone)]
pub struct ProfileSettings {
    /// `botToken`.
    pub bot_token: Option<Token>,
    /// `allowedUserId`.
    pub allowed_user_id: Option<i64>,
    /// `apiBase`.
    pub api_base: Option<String>,
    /// `pairing`.
    pub pairing: PairingMode,
    /// `pacing`.
    pub pacing: PacingConfig,
    /// `threadTitle`: topic title template (`{slot}`, `{project}`).
    pub thread_title: String,
    /// `threadRetentionDays`: offline bindings release their slot after this many days.
    pub thread_retention_days: u64,
    /// Largest file taken from Telegram: `PI_TELEGRAM_INBOUND_FILE_MAX_BYTES` or
    /// `TELEGRAM_MAX_FILE_SIZE_BYTES` (the reference's variables), else `inboundFileMaxBytes`,
    /// else 50 MiB.
    pub inbound_max_bytes: u64,
    /// Largest file sent to Telegram: `PI_TELEGRAM_OUTBOUND_ATTACHMENT_MAX_BYTES` or
    /// `TELEGRAM_MAX_ATTACHMENT_SIZE_BYTES`, else `outboundAttachmentMaxBytes`, else 50 MiB
    /// (what the cloud Bot API accepts from bots).
    pub outbound_max_bytes: u64,
    /// `fileRetentionDays`: downloaded files of finished turns are removed after this many days.
    pub file_retention_days: u64,
    /// `workspaces`: the folders under which `/new` may start pi (`~/` is the home folder).
    pub workspaces: Vec<PathBuf>,
    /// `remote.listen`: where the hub also listens (TCP + TLS) for pi on other machines; off
    /// when absent.
    pub remote_listen: Option<SocketAddr>,
    /// `remote.connect` or `remote.socket` is set: this machine's pi reach a hub elsewhere
    /// (the extension's business; the hub only refuses to be set up for it here).
    pub remote_client: bool,
    /// `historyRetentionDays`: handled updates, sent messages, finished turns, reply routes and
    /// other finished rows leave the state database after this many days (default 14).
    pub history_retention_days: u64,
    /// `people`: who besides the owner may use the bot, by user id, with their role (those
    /// added by an invite are in the store).
    pub people: Vec<(i64, Role)>,
    /// `memberControls`: members may also stop pi's work, compact its session and switch its
    /// model and thinking level (default: only the owner).
    pub member_controls: bool,
}

/// `people`: an object of Telegram user ids (as keys) and roles (`"member"`, `"viewer"`).
fn parse_people(v: &Value) -> Result<Vec<(i64, Role)>, String> {
    let Some(obj) = v.as_object() else {
        return Err(r#"must be an object of user ids and roles ({"123456789": "member"})"#.into());
    };
    obj.iter()
        .map(|(id, role)| {
            let user =
                id.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("{id:?} is not a Telegram user id (a positive number)")
                })?;
            let role = role
                .as_str()
                .and_then(Role::parse)
                .ok_or_else(|| format!("{id}: the role must be \"member\" or \"viewer\""))?;
            Ok((user, role))
        })
        .collect()
}

/// The first of `vars` that is set to a number.
fn env_bytes(vars: &[&str]) -> Option<u64> {
    vars.iter()
        .filter_map(|v| std::env::var(v).ok())
        .find_map(|v| v.trim().parse().ok())
}

/// The parsed file, keeping every key.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    doc: Map<String, Value>,
    /// The older top-level identity was moved into `profiles.default` at load.
    migrated: bool,
}

/// The bot identity the reference's older layout kept at the top level.
const LEGACY_ROOT_KEYS: [&str; 5] = [
    "botToken",
    "botUsername",
    "botId",
    "allowedUserId",
    "lastUpdateId",
];

impl ConfigFile {
    /// Reads the file; a missing file is an empty config. Anything but a regular file (a FIFO
    /// would block the read until a writer came) is an error.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = match crate::regular::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(ConfigError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        Self::parse(path, &text)
    }

    /// Reads `text` as the contents of the file at `path` (which is only named in errors and
    /// used by [`save`]); the same checks and migration as [`load`]. Separate from the file
    /// system so the parser can be fuzzed without I/O.
    ///
    /// [`save`]: Self::save
    /// [`load`]: Self::load
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        // Editors on some systems save UTF-8 with a byte-order mark; JSON parsers refuse it.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if text.trim().is_empty() {
            return Ok(Self {
                path: path.to_owned(),
                doc: Map::new(),
                migrated: false,
            });
        }
        let value: Value = serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
        })?;
        let Value::Object(doc) = value else {
            return Err(ConfigError::Value {
                path: path.to_owned(),
                key: "(top level)".into(),
                problem: "must be a JSON object".into(),
            });
        };
        let mut file = Self {
            path: path.to_owned(),
            doc,
            migrated: false,
        };
        file.check()?;
        file.migrate_legacy()?;
        Ok(file)
    }

    /// The reference's older layout kept the bot's identity at the top level; it belongs to
    /// `profiles.default`. Moved in memory here (a writer saves it: [`migrated`]); identical
    /// duplicates collapse, complementary keys merge, and a conflict fails closed, the file
    /// untouched.
    ///
    /// [`migrated`]: Self::migrated
    fn migrate_legacy(&mut self) -> Result<(), ConfigError> {
        let present: Vec<&str> = LEGACY_ROOT_KEYS
            .iter()
            .copied()
            .filter(|k| self.doc.contains_key(*k))
            .collect();
        if present.is_empty() {
            return Ok(());
        }
        let default = ProfileName::default_profile();
        let existing = self.profile_obj(&default).cloned().unwrap_or_default();
        for key in &present {
            if let (Some(root), Some(prof)) = (self.doc.get(*key), existing.get(*key))
                && root != prof
            {
                return Err(self.bad(
                    (*key).to_owned(),
                    "is set both at the top level (the older layout) and in profiles.default, \
                     with different values; keep one of them (nothing was changed)",
                ));
            }
        }
        for key in present {
            if let Some(v) = self.doc.remove(key)
                && !existing.contains_key(key)
            {
                self.set_profile_key(&default, key, v);
            }
        }
        self.migrated = true;
        Ok(())
    }

    /// Whether loading moved the older top-level layout into `profiles.default` (save it).
    pub fn migrated(&self) -> bool {
        self.migrated
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn bad(&self, key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError::Value {
            path: self.path.clone(),
            key: key.into(),
            problem: problem.into(),
        }
    }

    /// Validates the keys we read, so a typo is reported at load rather than ignored.
    fn check(&self) -> Result<(), ConfigError> {
        if let Some(p) = self.doc.get("profiles") {
            let Some(profiles) = p.as_object() else {
                return Err(self.bad("profiles", "must be an object of profiles"));
            };
            for (name, prof) in profiles {
                if ProfileName::new(name).is_err() {
                    return Err(self.bad(
                        format!("profiles.{name}"),
                        "is not a valid profile name ([a-z0-9]{1,32})",
                    ));
                }
                if !prof.is_object() {
                    return Err(self.bad(format!("profiles.{name}"), "must be an object"));
                }
                self.check_keys(&format!("profiles.{name}."), prof)?;
            }
        }
        self.check_keys("", &Value::Object(self.doc.clone()))
    }

    fn check_keys(&self, prefix: &str, obj: &Value) -> Result<(), ConfigError> {
        if let Some(t) = obj.get("botToken") {
            match t.as_str() {
                Some(s) => {
                    Token::new(s)
                        .map_err(|e| self.bad(format!("{prefix}botToken"), e.to_string()))?;
                }
                None => return Err(self.bad(format!("{prefix}botToken"), "must be a string")),
            }
        }
        if let Some(id) = obj.get("allowedUserId")
            && parse_user_id(id).is_none()
        {
            return Err(self.bad(
                format!("{prefix}allowedUserId"),
                "must be a Telegram user id (a positive number)",
            ));
        }
        if let Some(base) = obj.get("apiBase") {
            let ok = base
                .as_str()
                .is_some_and(|b| b.starts_with("http://") || b.starts_with("https://"));
            if !ok {
                return Err(self.bad(format!("{prefix}apiBase"), "must be an http(s) URL"));
            }
        }
        if let Some(p) = obj.get("pairing")
            && !matches!(p.as_str(), Some("code" | "first-contact"))
        {
            return Err(self.bad(
                format!("{prefix}pairing"),
                "must be \"code\" or \"first-contact\"",
            ));
        }
        if let Some(d) = obj.get("historyRetentionDays")
            && d.as_u64().is_none()
        {
            return Err(self.bad(
                format!("{prefix}historyRetentionDays"),
                "must be a whole number of days",
            ));
        }
        if let Some(p) = obj.get("pacing") {
            serde_json::from_value::<PacingConfig>(p.clone())
                .map_err(|e| self.bad(format!("{prefix}pacing"), e.to_string()))?;
        }
        if let Some(c) = obj.get("memberControls")
            && !c.is_boolean()
        {
            return Err(self.bad(format!("{prefix}memberControls"), "must be true or false"));
        }
        if let Some(p) = obj.get("people") {
            parse_people(p).map_err(|problem| self.bad(format!("{prefix}people"), problem))?;
        }
        if let Some(w) = obj.get("workspaces") {
            let ok = w.as_array().is_some_and(|a| {
                a.iter().all(|r| {
                    r.as_str()
                        .is_some_and(|r| r.starts_with('/') || r.starts_with("~/"))
                })
            });
            if !ok {
                return Err(self.bad(
                    format!("{prefix}workspaces"),
                    "must be a list of absolute folders (\"/srv/code\" or \"~/code\")",
                ));
            }
        }
        if let Some(remote) = obj.get("remote") {
            if prefix.is_empty() {
                return Err(self.bad(
                    "remote",
                    "belongs to one profile (profiles.<name>.remote): two hubs cannot listen on one address",
                ));
            }
            check_remote(remote).map_err(|problem| self.bad(format!("{prefix}remote"), problem))?;
        }
        Ok(())
    }

    /// One warning per key this hub does not use (a setting of the reference system it does
    /// not have, or a typo); the keys stay in the file.
    pub fn unused_keys(&self) -> Vec<String> {
        keys::unused(&self.doc)
    }

    fn profile_obj(&self, name: &ProfileName) -> Option<&Map<String, Value>> {
        self.doc.get("profiles")?.get(name.as_str())?.as_object()
    }

    /// Names of the profiles in the file.
    pub fn profile_names(&self) -> Vec<String> {
        self.doc
            .get("profiles")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// A setting for profile `name`: the profile's own, else the top-level default.
    pub fn setting(&self, name: &ProfileName, key: &str) -> Option<&Value> {
        self.lookup(name, key)
    }

    fn lookup(&self, name: &ProfileName, key: &str) -> Option<&Value> {
        self.profile_obj(name)
            .and_then(|p| p.get(key))
            .or_else(|| self.doc.get(key))
    }

    /// The settings of profile `name` (`check` already validated the shapes).
    pub fn profile(&self, name: &ProfileName) -> ProfileSettings {
        let bot_token = self
            .profile_obj(name)
            .and_then(|p| p.get("botToken"))
            .and_then(Value::as_str)
            .and_then(|t| Token::new(t).ok());
        let allowed_user_id = self
            .profile_obj(name)
            .and_then(|p| p.get("allowedUserId"))
            .and_then(parse_user_id);
        let api_base = self
            .lookup(name, "apiBase")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let pairing = match self.lookup(name, "pairing").and_then(Value::as_str) {
            Some("first-contact") => PairingMode::FirstContact,
            _ => PairingMode::Code,
        };
        let pacing = self
            .lookup(name, "pacing")
            .and_then(|p| serde_json::from_value(p.clone()).ok())
            .unwrap_or_default();
        let thread_title = self
            .lookup(name, "threadTitle")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(threads::DEFAULT_TITLE)
            .to_owned();
        let thread_retention_days = self
            .lookup(name, "threadRetentionDays")
            .and_then(Value::as_u64)
            .unwrap_or(7);
        let bytes = |vars: &[&str], key: &str| {
            env_bytes(vars)
                .or_else(|| self.lookup(name, key).and_then(Value::as_u64))
                .unwrap_or(50 * 1024 * 1024)
        };
        let inbound_max_bytes = bytes(
            &[
                "PI_TELEGRAM_INBOUND_FILE_MAX_BYTES",
                "TELEGRAM_MAX_FILE_SIZE_BYTES",
            ],
            "inboundFileMaxBytes",
        );
        let outbound_max_bytes = bytes(
            &[
                "PI_TELEGRAM_OUTBOUND_ATTACHMENT_MAX_BYTES",
                "TELEGRAM_MAX_ATTACHMENT_SIZE_BYTES",
            ],
            "outboundAttachmentMaxBytes",
        );
        let file_retention_days = self
            .lookup(name, "fileRetentionDays")
            .and_then(Value::as_u64)
            .unwrap_or(7);
        let history_retention_days = self
            .lookup(name, "historyRetentionDays")
            .and_then(Value::as_u64)
            .unwrap_or(14);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let workspaces = self
            .lookup(name, "workspaces")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .filter_map(|r| match (r.strip_prefix("~/"), &home) {
                        (Some(rest), Some(h)) => Some(h.join(rest)),
                        (Some(_), None) => None,
                        (None, _) => Some(PathBuf::from(r)),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let remote = self.profile_obj(name).and_then(|p| p.get("remote"));
        let remote_listen = remote
            .and_then(|r| r.get("listen"))
            .and_then(|l| parse_listen(l).ok());
        let remote_client =
            remote.is_some_and(|r| r.get("connect").is_some() || r.get("socket").is_some());
        let people = self
            .lookup(name, "people")
            .and_then(|p| parse_people(p).ok())
            .unwrap_or_default();
        let member_controls = self
            .lookup(name, "memberControls")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        ProfileSettings {
            people,
            member_controls,
            history_retention_days,
            workspaces,
            remote_listen,
            remote_client,
            thread_title,
            thread_retention_days,
            inbound_max_bytes,
            outbound_max_bytes,
            file_retention_days,
            bot_token,
            allowed_user_id,
            api_base,
            pairing,
            pacing,
        }
    }

    /// Sets `profiles.<name>.<key>`, keeping every other key where it was.
    fn set_profile_key(&mut self, name: &ProfileName, key: &str, value: Value) {
        if !matches!(self.doc.get("profiles"), Some(Value::Object(_))) {
            self.doc
                .insert("profiles".into(), Value::Object(Map::new()));
        }
        if let Some(Value::Object(profiles)) = self.doc.get_mut("profiles") {
            if !matches!(profiles.get(name.as_str()), Some(Value::Object(_))) {
                profiles.insert(name.as_str().into(), Value::Object(Map::new()));
            }
            if let Some(Value::Object(p)) = profiles.get_mut(name.as_str()) {
                p.insert(key.into(), value);
            }
        }
    }

    /// Sets `profiles.<name>.botToken`.
    pub fn set_bot_token(&mut self, name: &ProfileName, token: &Token) {
        self.set_profile_key(name, "botToken", Value::String(token.expose().to_owned()));
    }

    /// Sets `profiles.<name>.allowedUserId`.
    pub fn set_allowed_user_id(&mut self, name: &ProfileName, user_id: i64) {
        self.set_profile_key(name, "allowedUserId", Value::from(user_id));
    }

    /// Takes `user_id` out of `people`, the profile's and the top level's; `false` when
    /// neither listed them.
    pub fn remove_person(&mut self, name: &ProfileName, user_id: i64) -> bool {
        let key = user_id.to_string();
        let mut removed = false;
        if let Some(Value::Object(people)) = self.doc.get_mut("people") {
            removed |= people.remove(&key).is_some();
        }
        if let Some(Value::Object(profiles)) = self.doc.get_mut("profiles")
            && let Some(Value::Object(p)) = profiles.get_mut(name.as_str())
            && let Some(Value::Object(people)) = p.get_mut("people")
        {
            removed |= people.remove(&key).is_some();
        }
        removed
    }

    /// Sets `profiles.<name>.apiBase`.
    pub fn set_api_base(&mut self, name: &ProfileName, base: &str) {
        self.set_profile_key(name, "apiBase", Value::String(base.to_owned()));
    }

    /// Sets a shared setting at the top level (where the reference keeps them), keeping every
    /// other key: `key` is `section.name` (`assistant.rendering`, `voice.replyMode`) or a
    /// top-level name (`staleAfterMinutes`). The profile's own value would hide it, so that one
    /// goes.
    pub fn set_shared(&mut self, profile: &ProfileName, key: &str, value: Value) {
        let (section, name) = match key.split_once('.') {
            Some((section, name)) => (Some(section), name),
            None => (None, key),
        };
        let Some(section) = section else {
            self.doc.insert(name.into(), value);
            if let Some(Value::Object(profiles)) = self.doc.get_mut("profiles")
                && let Some(Value::Object(p)) = profiles.get_mut(profile.as_str())
            {
                p.remove(name);
            }
            return;
        };
        if !matches!(self.doc.get(section), Some(Value::Object(_))) {
            self.doc.insert(section.into(), Value::Object(Map::new()));
        }
        if let Some(Value::Object(a)) = self.doc.get_mut(section) {
            a.insert(name.into(), value);
        }
        if let Some(Value::Object(profiles)) = self.doc.get_mut("profiles")
            && let Some(Value::Object(p)) = profiles.get_mut(profile.as_str())
            && let Some(Value::Object(a)) = p.get_mut(section)
        {
            a.remove(name);
        }
    }

    /// The top-level `piBinary`: the pi the hub runs for headless instances (else
    /// `PI_TELEGRAM_PI_BIN`, else `pi` from the hub's PATH).
    pub fn pi_binary(&self) -> Option<String> {
        self.doc
            .get("piBinary")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }

    /// Sets the top-level `hubBinary` (the binary the extension starts when no hub runs).
    pub fn set_hub_binary(&mut self, path: &str) {
        self.doc
            .insert("hubBinary".into(), Value::String(path.to_owned()));
    }

    /// Every key, as it stays in memory (the migration applied).
    pub fn document(&self) -> &Map<String, Value> {
        &self.doc
    }

    /// What [`save`] writes (without the final newline).
    ///
    /// [`save`]: Self::save
    pub fn to_text(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(&Value::Object(self.doc.clone()))
    }

    /// Writes the file atomically (temporary file, fsync, rename, fsync of the folder) with
    /// mode 0600: the one way telegram.json is written (setup, the settings menu, pairing's
    /// `allowedUserId`, the profile migration, `install-extension`). A `telegram.json` that is
    /// a link (dotfiles kept in a repository) stays one: the file it leads to is replaced
    /// ([`write_target`](crate::atomic::write_target)).
    pub fn save(&self) -> Result<(), ConfigError> {
        use std::os::unix::fs::OpenOptionsExt;
        let target = crate::atomic::write_target(&self.path).map_err(|source| ConfigError::Io {
            path: self.path.clone(),
            source,
        })?;
        let io = |source| ConfigError::Io {
            path: target.clone(),
            source,
        };
        let dir = target.parent().unwrap_or(Path::new("."));
        if target == self.path {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // Beside the file it replaces: a rename never crosses file systems.
        let tmp = target.with_file_name(format!(
            ".{}.tmp{}",
            target
                .file_name()
                .map_or_else(|| "telegram.json".into(), |n| n.to_string_lossy()),
            std::process::id()
        ));
        let text = self.to_text().map_err(|e| io(std::io::Error::other(e)))?;
        let result = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &target)?;
            std::fs::File::open(dir)?.sync_all()
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

/// Warnings about who can read the config file (it holds the bot token): empty when only its
/// owner can.
pub fn permission_warnings(path: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(m) if m.permissions().mode() & 0o077 != 0 => vec![format!(
            "{} holds the bot token and others can read it (mode {:o}): run chmod 600 {}",
            path.display(),
            m.permissions().mode() & 0o777,
            path.display()
        )],
        _ => Vec::new(),
    }
}

/// The port the hub suggests in messages about `remote.listen`.
pub const REMOTE_PORT: u16 = 7391;

/// `remote.listen`: `"IP:port"` (`"[::1]:7391"` for IPv6), or a port alone (a number or a string
/// of digits), which means loopback: nothing beyond this machine reaches the hub unless an
/// address says so.
pub fn parse_listen(v: &Value) -> Result<SocketAddr, String> {
    let loopback = |port: u64| -> Result<SocketAddr, String> {
        u16::try_from(port)
            .ok()
            .filter(|p| *p != 0)
            .map(|p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p))
            .ok_or_else(|| format!("{port} is not a port (1-65535)"))
    };
    let addr = match v {
        Value::Number(n) => loopback(n.as_u64().unwrap_or(0))?,
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            loopback(s.parse().unwrap_or(0))?
        }
        Value::String(s) => s.trim().parse::<SocketAddr>().map_err(|_| {
            format!(
                "{s:?} is not an IP address with a port, like \"127.0.0.1:{REMOTE_PORT}\" (or \"0.0.0.0:{REMOTE_PORT}\" for every address of this machine)"
            )
        })?,
        _ => return Err(format!("must be an address like \"127.0.0.1:{REMOTE_PORT}\"")),
    };
    if addr.port() == 0 {
        return Err("needs a fixed port: the other machine connects to it".into());
    }
    Ok(addr)
}

/// The shape of a profile's `remote` object. `listen` is the hub's; `connect`/`socket`,
/// `fingerprint` and `secret` are read by the extension on the other machine, checked here
/// only for their types and for a mix-up of the two sides.
fn check_remote(remote: &Value) -> Result<(), String> {
    let Some(obj) = remote.as_object() else {
        return Err("must be an object, like {\"listen\": \"127.0.0.1:7391\"}".into());
    };
    if let Some(listen) = obj.get("listen") {
        parse_listen(listen).map_err(|e| format!("listen: {e}"))?;
    }
    for key in ["connect", "socket", "fingerprint", "secret"] {
        if let Some(v) = obj.get(key)
            && v.as_str().is_none_or(|s| s.trim().is_empty())
        {
            return Err(format!("{key} must be a non-empty string"));
        }
    }
    if obj.contains_key("connect") && obj.contains_key("socket") {
        return Err("has both connect (TLS) and socket (a forwarded hub.sock): keep one".into());
    }
    if obj.contains_key("listen") && (obj.contains_key("connect") || obj.contains_key("socket")) {
        return Err(
            "has both listen (this machine runs the hub) and connect/socket (this machine's pi use \
             a hub elsewhere): keep the one that fits this machine"
                .into(),
        );
    }
    Ok(())
}

fn parse_user_id(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        .filter(|id| *id > 0)
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

/// The bot token for a profile: the file's, else the first of [`TOKEN_ENV`] that is set.
/// Returns the token and where it came from.
pub fn resolve_token(settings: &ProfileSettings) -> Option<(Token, String)> {
    if let Some(t) = &settings.bot_token {
        return Some((t.clone(), "telegram.json".into()));
    }
    TOKEN_ENV.iter().find_map(|var| {
        let v = std::env::var(var).ok()?;
        Token::new(&v).ok().map(|t| (t, format!("${var}")))
    })
}

/// The API base: `$TELEGRAM_API_BASE`, else the file's, else Telegram's.
pub fn resolve_api_base(settings: &ProfileSettings) -> String {
    std::env::var(API_BASE_ENV)
        .ok()
        .filter(|b| !b.is_empty())
        .or_else(|| settings.api_base.clone())
        .unwrap_or_else(|| telegram::DEFAULT_API_BASE.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod legacy_tests {
    use super::*;

    fn load(text: &str) -> (tempfile::TempDir, Result<ConfigFile, ConfigError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("telegram.json");
        std::fs::write(&path, text).unwrap();
        let r = ConfigFile::load(&path);
        (dir, r)
    }

    const TOKEN: &str = "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

    #[test]
    fn the_older_layout_moves_into_the_default_profile_keeping_other_keys() {
        let text = format!(
            r#"{{ "botToken": "{TOKEN}", "allowedUserId": 42, "lastUpdateId": 7,
                 "assistant": {{ "rendering": "html" }}, "somethingOfOurs": [1, 2],
                 "profiles": {{ "work": {{ "apiBase": "http://x" }} }} }}"#
        );
        let (_dir, file) = load(&text);
        let file = file.unwrap();
        assert!(file.migrated());
        let p = file.profile(&ProfileName::default_profile());
        assert_eq!(
            p.bot_token.map(|t| t.expose().to_owned()).as_deref(),
            Some(TOKEN)
        );
        assert_eq!(p.allowed_user_id, Some(42));
        file.save().unwrap();
        let saved: Value =
            serde_json::from_str(&std::fs::read_to_string(file.path()).unwrap()).unwrap();
        assert_eq!(saved["profiles"]["default"]["botToken"], TOKEN);
        assert_eq!(saved["profiles"]["default"]["lastUpdateId"], 7);
        assert_eq!(saved["profiles"]["work"]["apiBase"], "http://x");
        assert_eq!(saved["assistant"]["rendering"], "html");
        assert_eq!(saved["somethingOfOurs"], serde_json::json!([1, 2]));
        assert!(saved.get("botToken").is_none() && saved.get("allowedUserId").is_none());
        // Loading the migrated file changes nothing more.
        assert!(!ConfigFile::load(file.path()).unwrap().migrated());
    }

    #[test]
    fn duplicates_collapse_and_complements_merge() {
        let text = format!(
            r#"{{ "botToken": "{TOKEN}", "allowedUserId": 42,
                 "profiles": {{ "default": {{ "botToken": "{TOKEN}", "botId": 123456 }} }} }}"#
        );
        let (_dir, file) = load(&text);
        let file = file.unwrap();
        let p = file.profile(&ProfileName::default_profile());
        assert_eq!(p.allowed_user_id, Some(42));
        assert!(p.bot_token.is_some());
    }

    #[test]
    fn a_conflict_fails_closed_and_leaves_the_file_alone() {
        let text = format!(
            r#"{{ "allowedUserId": 42, "profiles": {{ "default": {{ "botToken": "{TOKEN}", "allowedUserId": 43 }} }} }}"#
        );
        let (dir, file) = load(&text);
        let err = file.unwrap_err().to_string();
        assert!(
            err.contains("allowedUserId") && err.contains("profiles.default"),
            "{err}"
        );
        let after = std::fs::read_to_string(dir.path().join("telegram.json")).unwrap();
        assert_eq!(after, text);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod remote_tests {
    use super::*;

    fn load(remote: Value) -> Result<ConfigFile, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("telegram.json");
        let doc = serde_json::json!({ "profiles": { "default": { "remote": remote } } });
        std::fs::write(&path, doc.to_string()).unwrap();
        ConfigFile::load(&path)
    }

    fn listen(remote: Value) -> Option<SocketAddr> {
        load(remote)
            .unwrap()
            .profile(&ProfileName::default_profile())
            .remote_listen
    }

    #[test]
    fn remote_listen_is_off_unless_set_and_loopback_for_a_bare_port() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("telegram.json");
        std::fs::write(&path, r#"{ "profiles": { "default": {} } }"#).unwrap();
        let p = ConfigFile::load(&path)
            .unwrap()
            .profile(&ProfileName::default_profile());
        assert_eq!(p.remote_listen, None);
        assert!(!p.remote_client);

        let lo: SocketAddr = "127.0.0.1:7391".parse().unwrap();
        assert_eq!(listen(serde_json::json!({ "listen": 7391 })), Some(lo));
        assert_eq!(listen(serde_json::json!({ "listen": "7391" })), Some(lo));
        assert_eq!(
            listen(serde_json::json!({ "listen": "127.0.0.1:7391" })),
            Some(lo)
        );
        assert_eq!(
            listen(serde_json::json!({ "listen": "0.0.0.0:7400" })),
            Some("0.0.0.0:7400".parse().unwrap())
        );
        assert_eq!(
            listen(serde_json::json!({ "listen": "[::1]:7391" })),
            Some("[::1]:7391".parse().unwrap())
        );
        // The other machine's keys turn nothing on here.
        let p = load(
            serde_json::json!({ "connect": "hub:7391", "fingerprint": "sha256:ab", "secret": "x" }),
        )
        .unwrap()
        .profile(&ProfileName::default_profile());
        assert_eq!(p.remote_listen, None);
        assert!(p.remote_client);
    }

    #[test]
    fn remote_mistakes_are_reported_with_the_key() {
        for (remote, needle) in [
            (serde_json::json!("127.0.0.1:7391"), "must be an object"),
            (
                serde_json::json!({ "listen": "hub.lan:7391" }),
                "not an IP address",
            ),
            (serde_json::json!({ "listen": "127.0.0.1:0" }), "fixed port"),
            (serde_json::json!({ "listen": 70000 }), "not a port"),
            (serde_json::json!({ "listen": 0 }), "not a port"),
            (serde_json::json!({ "listen": true }), "address like"),
            (serde_json::json!({ "connect": 7391 }), "connect must be"),
            (
                serde_json::json!({ "connect": "h:1", "socket": "/s" }),
                "keep one",
            ),
            (
                serde_json::json!({ "listen": 7391, "connect": "h:1" }),
                "fits this machine",
            ),
        ] {
            let err = load(remote.clone()).unwrap_err().to_string();
            assert!(
                err.contains("profiles.default.remote") && err.contains(needle),
                "{remote}: {err}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("telegram.json");
        std::fs::write(&path, r#"{ "remote": { "listen": 7391 } }"#).unwrap();
        let err = ConfigFile::load(&path).unwrap_err().to_string();
        assert!(err.contains("belongs to one profile"), "{err}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod write_tests {
    use super::*;

    #[test]
    fn a_linked_file_stays_a_link_and_its_target_gets_the_change() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir(&dotfiles).unwrap();
        let target = dotfiles.join("telegram.json");
        std::fs::write(
            &target,
            r#"{ "profiles": { "default": { "botToken": "1:t" } }, "mine": 1 }"#,
        )
        .unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        // A relative link, through a second one: both stay.
        let agent = dir.path().join("agent");
        std::fs::create_dir(&agent).unwrap();
        std::os::unix::fs::symlink("../dotfiles/telegram.json", agent.join("middle.json")).unwrap();
        let path = agent.join("telegram.json");
        std::os::unix::fs::symlink("middle.json", &path).unwrap();

        let mut file = ConfigFile::load(&path).unwrap();
        file.set_allowed_user_id(&ProfileName::default_profile(), 42);
        file.save().unwrap();

        for link in [&path, &agent.join("middle.json")] {
            assert!(
                std::fs::symlink_metadata(link)
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "{} is still a link",
                link.display()
            );
        }
        let saved: Value =
            serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
        assert_eq!(saved["profiles"]["default"]["allowedUserId"], 42);
        assert_eq!(saved["mine"], 1, "other keys kept");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let left: Vec<_> = std::fs::read_dir(&dotfiles)
            .unwrap()
            .chain(std::fs::read_dir(&agent).unwrap())
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "no temporary file left: {left:?}");

        // A link to a file not written yet: the file appears where it leads.
        let fresh = agent.join("fresh.json");
        std::os::unix::fs::symlink(dotfiles.join("new.json"), &fresh).unwrap();
        let mut file = ConfigFile::load(&fresh).unwrap();
        file.set_allowed_user_id(&ProfileName::default_profile(), 7);
        file.save().unwrap();
        assert!(
            std::fs::symlink_metadata(&fresh)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(dotfiles.join("new.json").is_file());

        // A loop is an error, and nothing is written.
        let a = agent.join("a.json");
        std::os::unix::fs::symlink("b.json", &a).unwrap();
        std::os::unix::fs::symlink("a.json", agent.join("b.json")).unwrap();
        let err = ConfigFile::parse(&a, "{}")
            .unwrap()
            .save()
            .unwrap_err()
            .to_string();
        assert!(err.contains("links"), "{err}");
    }

    #[test]
    fn a_fifo_in_its_place_is_an_error_not_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("telegram.json");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &path,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let err = ConfigFile::load(&path).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
