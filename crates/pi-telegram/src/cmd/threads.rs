//! `pi-telegram threads ...`: settle Threaded Mode state from the shell.

use serde_json::Value;
use store::Store;

use hub::HubError;
use hub::lock::{LockError, ProfileLock};
use hub::outgoing::topics;
use hub::paths::ProfilePaths;

/// Settles intent `intent_id` (`create`: make a new topic anyway; else forget it). With a hub
/// running, the hub does it (and acts on it at once); otherwise the store is changed directly,
/// holding the profile lock so no hub starts meanwhile. Returns what was settled.
pub async fn resolve(
    paths: &ProfilePaths,
    intent_id: i64,
    create: bool,
) -> Result<Value, HubError> {
    if !paths.state_db().exists() {
        return Err(HubError::Usage(
            "this profile has no state yet: nothing to resolve".into(),
        ));
    }
    match ProfileLock::acquire(&paths.lock_file()) {
        Ok(_lock) => {
            let store = Store::open(&paths.state_db())?;
            let settled = store.write(|tx| topics::resolve_intent(tx, intent_id, create))?;
            match settled {
                Some(i) => Ok(
                    serde_json::json!({ "intent_id": i.id, "identity": i.identity, "slot": i.slot }),
                ),
                None => Err(HubError::Usage(format!(
                    "there is no intent #{intent_id} (settled already?); `pi-telegram status` lists them"
                ))),
            }
        }
        Err(LockError::Held { .. }) => {
            let msg = wire::ClientMsg::ResolveIntent {
                id: "resolve".into(),
                intent_id,
                create,
            };
            hub::control::request(paths, msg, "resolve").await
        }
        Err(e) => Err(e.into()),
    }
}
