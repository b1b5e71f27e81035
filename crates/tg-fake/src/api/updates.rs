//! `getUpdates`: offsets confirm, `limit`, long polling that wakes as soon as an update
//! arrives, persisting `allowed_updates`, and `409 Conflict` for a superseded poll.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::shared::Shared;
use crate::world::Bot;

const TERMINATED: &str =
    "terminated by other getUpdates request; make sure that only one bot instance is running";
const WEBHOOK_ACTIVE: &str = "can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first";

fn batch(bot: &Bot, limit: usize) -> Vec<Value> {
    bot.updates
        .iter()
        .take(limit)
        .map(|u| u.to_json())
        .collect()
}

/// Runs `getUpdates` for bot `bot`.
pub async fn get_updates(shared: &Shared, bot: usize, p: &Params) -> ApiResult {
    let offset = p.int("offset")?;
    let limit = p.int("limit")?.unwrap_or(100).clamp(1, 100) as usize;
    let timeout = p.int("timeout")?.unwrap_or(0).max(0) as u64;
    let allowed = match p.json("allowed_updates")? {
        Some(v) => Some(
            serde_json::from_value::<Vec<String>>(v)
                .map_err(|_| ApiError::bad_request("can't parse allowed_updates JSON object"))?,
        ),
        None => None,
    };
    let (generation, notify) = {
        let mut w = shared.lock();
        let b = &mut w.bots[bot];
        if b.webhook.is_some() {
            return Err(ApiError::conflict(WEBHOOK_ACTIVE));
        }
        if let Some(a) = allowed {
            b.allowed_updates = Some(a);
        }
        if let Some(o) = offset {
            b.confirm(o);
        }
        // Any poll still waiting is superseded by this one and answers 409.
        b.supersede_polls();
        let now = batch(b, limit);
        if !now.is_empty() || timeout == 0 {
            return Ok(Value::Array(now));
        }
        (b.poll_generation, b.notify.clone())
    };
    let deadline = Instant::now() + Duration::from_secs(timeout);
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        // Registered before looking, so an update pushed in between still wakes us.
        notified.as_mut().enable();
        {
            let w = shared.lock();
            let b = &w.bots[bot];
            if b.poll_generation != generation {
                return Err(superseded(b));
            }
            let now = batch(b, limit);
            if !now.is_empty() {
                return Ok(Value::Array(now));
            }
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(deadline) => {
                let w = shared.lock();
                let b = &w.bots[bot];
                if b.poll_generation != generation {
                    return Err(superseded(b));
                }
                return Ok(Value::Array(batch(b, limit)));
            }
        }
    }
}

/// The conflict a superseded long poll answers.
fn superseded(b: &crate::world::Bot) -> ApiError {
    ApiError::conflict(if b.webhook.is_some() {
        WEBHOOK_ACTIVE
    } else {
        TERMINATED
    })
}
