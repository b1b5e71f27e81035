//! Headless pi instances the hub starts (`pi-telegram spawn`, `/new` from Telegram) and starts
//! again after a hub restart or crash, on the same pi session (`--session <file>`), telling the
//! person which came back and which could not.
//!
//! Crash points: the request is recorded (`running`) before pi starts, so a hub that dies in
//! between starts it at the next start; a row ends (`exited`, `closed`, `lost`) in the
//! transaction that learns why, so an instance whose folder vanished is reported once and never
//! retried.

use crate::db::Durability;
use std::path::PathBuf;

use store::outbox::Purpose;
use store::spawned::{self, SpawnState};
use tokio::sync::mpsc;

use crate::config::ConfigFile;
use crate::db::Db;
use crate::pi::instance::ConductorMsg;
use crate::pi::links::rpc::{self, PiBinary, SpawnSpec, Started};
use crate::wakes::Wakes;

/// What the spawner needs.
#[derive(Debug, Clone)]
pub struct Spawner {
    /// The store.
    pub db: Db,
    /// Where instances register.
    pub conductor: mpsc::Sender<ConductorMsg>,
    /// `telegram.json` (for `piBinary`).
    pub config_path: PathBuf,
    /// To wake the sender after a notice.
    pub wakes: Wakes,
}

/// The pi to run: the request's `PI_TELEGRAM_PI_BIN`, else the hub's, else `piBinary` in
/// telegram.json, else `pi` on PATH (the request's PATH when it gave one).
pub fn pi_binary(env: &[(String, String)], config: Option<&ConfigFile>) -> PiBinary {
    let from_request = env
        .iter()
        .find(|(k, v)| k == "PI_TELEGRAM_PI_BIN" && !v.is_empty())
        .map(|(_, v)| v.clone());
    if let Some(p) = from_request {
        return PiBinary {
            path: p.into(),
            source: "PI_TELEGRAM_PI_BIN of the spawn request".into(),
        };
    }
    if let Some(p) = std::env::var_os("PI_TELEGRAM_PI_BIN").filter(|v| !v.is_empty()) {
        return PiBinary {
            path: p.into(),
            source: "the hub's PI_TELEGRAM_PI_BIN".into(),
        };
    }
    if let Some(p) = config.and_then(ConfigFile::pi_binary) {
        return PiBinary {
            path: p.into(),
            source: "\"piBinary\" in telegram.json".into(),
        };
    }
    let path_source = if env.iter().any(|(k, _)| k == "PATH") {
        "the PATH of the spawn request"
    } else {
        "the hub's PATH"
    };
    PiBinary {
        path: "pi".into(),
        source: path_source.into(),
    }
}

impl Spawner {
    fn bin(&self, env: &[(String, String)]) -> PiBinary {
        let config = ConfigFile::load(&self.config_path).ok();
        pi_binary(env, config.as_ref())
    }

    /// Starts a new headless pi in `cwd` with `env` added to the hub's environment and
    /// remembers both; a pi that does not start is forgotten (the requester is told why).
    pub async fn start_new(
        &self,
        cwd: String,
        env: Vec<(String, String)>,
    ) -> Result<Started, String> {
        let (c, e) = (cwd.clone(), env.clone());
        let now = self.db.now_ms();
        let row = self
            .db
            .write(Durability::OnDisk, move |tx| {
                spawned::insert(tx, &c, &e, now)
            })
            .await
            .map_err(|e| e.to_string())?;
        let spec = SpawnSpec {
            cwd,
            bin: self.bin(&env),
            env,
            session: None,
        };
        match rpc::spawn(self.conductor.clone(), spec).await {
            Ok(started) => {
                self.record_started(row, &started).await;
                Ok(started)
            }
            Err(e) => {
                let _ = self
                    .db
                    .write(Durability::OnDisk, move |tx| spawned::delete(tx, row))
                    .await;
                Err(e)
            }
        }
    }

    async fn record_started(&self, row: i64, started: &Started) {
        let (id, file) = (started.id.0.clone(), started.session_file.clone());
        let now = self.db.now_ms();
        if let Err(e) = self
            .db
            .write(Durability::OnDisk, move |tx| {
                spawned::started(tx, row, &id, file.as_deref(), now)
            })
            .await
        {
            tracing::warn!(error = %e, "could not record a started instance");
        }
    }

    /// The instances the last hub had running. Read at start before anything new is spawned,
    /// so an instance this hub starts is never started twice.
    pub async fn to_restore(&self) -> Vec<spawned::Spawned> {
        match self.db.read(spawned::running).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the spawned instances");
                Vec::new()
            }
        }
    }

    /// At start: starts again `rows` (from [`to_restore`](Self::to_restore)), then tells the
    /// person in one message which came back and which could not.
    pub async fn restore(&self, rows: Vec<spawned::Spawned>) {
        if rows.is_empty() {
            return;
        }
        let mut back = Vec::new();
        let mut lost = Vec::new();
        for row in rows {
            let dir = std::path::Path::new(&row.cwd);
            if !dir.is_dir() {
                lost.push((
                    row.id,
                    row.cwd.clone(),
                    "its folder no longer exists".to_owned(),
                ));
                continue;
            }
            let spec = SpawnSpec {
                cwd: row.cwd.clone(),
                bin: self.bin(&row.env),
                env: row.env.clone(),
                session: row.session_file.as_ref().map(PathBuf::from),
            };
            match rpc::spawn(self.conductor.clone(), spec).await {
                Ok(started) => {
                    self.record_started(row.id, &started).await;
                    let resumed =
                        row.session_file.is_some() && row.session_file == started.session_file;
                    back.push((row.cwd.clone(), resumed));
                }
                Err(e) => lost.push((row.id, row.cwd.clone(), e)),
            }
        }
        tracing::info!(
            back = back.len(),
            lost = lost.len(),
            "headless instances restored"
        );
        let now = self.db.now_ms();
        let text = crate::outgoing::texts::instances_restored(&back, &lost);
        let ends: Vec<(i64, String)> = lost.iter().map(|(id, _, why)| (*id, why.clone())).collect();
        let result = self
            .db
            .write(Durability::OnDisk, move |tx| {
                for (id, why) in &ends {
                    spawned::end(tx, *id, SpawnState::Lost, why, now)?;
                }
                if let Some(owner) = store::kv::get_i64(tx, store::kv::OWNER)? {
                    crate::outgoing::outbound::notice(
                        tx,
                        owner,
                        None,
                        &text,
                        &Purpose::NoticeRestored { at: now },
                        now,
                    )?;
                }
                Ok(())
            })
            .await;
        match result {
            Ok(()) => self.wakes.sender.notify_one(),
            Err(e) => tracing::warn!(error = %e, "could not record the restored instances"),
        }
    }
}

/// A hub-started instance exited by itself (not at a hub stop): it is not started again.
pub fn exited(tx: &store::Connection, instance_id: &str, why: &str, now: i64) -> store::Result<()> {
    if let Some(row) = spawned::by_instance(tx, instance_id)? {
        spawned::end(tx, row.id, SpawnState::Exited, why, now)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_pi_first() {
        let env = vec![("PI_TELEGRAM_PI_BIN".to_owned(), "/opt/pi".to_owned())];
        let b = pi_binary(&env, None);
        assert_eq!(b.path, PathBuf::from("/opt/pi"));
        assert!(b.source.contains("request"));
    }
}
