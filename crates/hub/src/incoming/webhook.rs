//! A webhook and `getUpdates` exclude each other: while one is set, every poll answers 409.
//! The hub is the bot's only client, so a webhook it finds (left by another tool, or by the
//! bot's earlier life) is removed, keeping the updates that wait, and the removal is recorded
//! for `status`.

use crate::db::Durability;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use store::{incidents, kv};
use telegram::CallError;

use crate::bot_api::BotApi;
use crate::db::Db;
use crate::error::HubError;

/// Key of the last removal.
pub const REMOVED: &str = "webhook.removed";

/// A webhook the hub removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// When (Unix ms).
    pub at_ms: i64,
    /// The host it pointed at (never the path, which may hold a secret).
    pub host: String,
    /// Updates Telegram held for it (they are kept and polled now).
    pub pending_updates: i64,
}

/// Why a webhook could not be checked or removed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// A call failed.
    #[error("{0}")]
    Call(#[from] CallError),
    /// Recording it failed.
    #[error(transparent)]
    Hub(#[from] HubError),
}

/// Tries a call this often when Telegram did not answer or asked to wait.
const ATTEMPTS: u32 = 3;
/// The longest flood wait honoured here; a longer one is left to the poller's 409.
const LONGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Calls a repeatable method, again after a failure without an answer (a removal whose answer
/// was lost must still be recorded) or after a short flood wait.
async fn call(client: &dyn BotApi, method: &str, params: &Value) -> Result<Value, CallError> {
    let mut attempt = 1;
    loop {
        let wait = match client.call(method, params).await {
            Err(CallError::Retryable(e)) if attempt < ATTEMPTS => {
                tracing::debug!(method, error = %e, "no answer; asking again");
                std::time::Duration::from_secs(1)
            }
            Err(CallError::Flood { retry_after, .. })
                if attempt < ATTEMPTS && retry_after <= LONGEST_WAIT =>
            {
                retry_after
            }
            other => return other,
        };
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// Removes the bot's webhook if one is set. `Ok(None)` when none was.
pub async fn clear(client: &dyn BotApi, db: &Db) -> Result<Option<Removed>, WebhookError> {
    let info = call(client, "getWebhookInfo", &json!({})).await?;
    let url = info.get("url").and_then(Value::as_str).unwrap_or_default();
    if url.is_empty() {
        return Ok(None);
    }
    call(
        client,
        "deleteWebhook",
        &json!({ "drop_pending_updates": false }),
    )
    .await?;
    let removed = Removed {
        at_ms: db.now_ms(),
        host: host_of(url).to_owned(),
        pending_updates: info
            .get("pending_update_count")
            .and_then(Value::as_i64)
            .unwrap_or(0),
    };
    tracing::warn!(host = %removed.host, pending = removed.pending_updates, "removed the bot's webhook so that polling works (pending updates kept)");
    let r = removed.clone();
    db.write(Durability::OnDisk, move |tx| {
        kv::set(tx, REMOVED, &serde_json::to_string(&r).unwrap_or_default())?;
        incidents::record(
            tx,
            r.at_ms,
            "webhook",
            &format!(
                "removed a webhook to {} so that polling works; its {} pending update(s) are kept",
                r.host, r.pending_updates
            ),
        )
    })
    .await
    .map_err(HubError::from)?;
    Ok(Some(removed))
}

/// The host of a URL, without scheme, credentials, port or path.
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.split(':').next().unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_host_is_kept() {
        assert_eq!(
            host_of("https://user:pw@hooks.example.org:8443/bot/SECRET?x=1"),
            "hooks.example.org"
        );
        assert_eq!(host_of("https://example.com"), "example.com");
        assert_eq!(host_of("nonsense"), "nonsense");
    }
}
