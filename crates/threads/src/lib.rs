//! Threaded Mode, the heart of the product: each live pi instance gets its own topic in the
//! bot's private chat, created and cleaned up safely even when processes crash mid-call.
//!
//! - [`slots`]: `A`..`Z`, then `AA`..`ZZ`, handed out by a persisted cursor; [`title`]: topic names.
//! - [`provision`]: the provisioning steps (reuse, adopt, block on ambiguity, intent before
//!   effect, `createForumTopic` exactly once, commit-unknown -> ambiguous, lost lease ->
//!   recovery evidence), each commit fenced by the lease epoch.
//! - [`reconcile`]: the only code that deletes topics, only with a proof, never protected ones.
//! - [`invariants`]: the properties tests check after every step.
//!
//! The Telegram side is behind [`TopicApi`], so tests drive it with a fake or a simulation.

pub mod events;
pub mod invariants;
pub mod provision;
pub mod reconcile;
pub mod slots;

use std::time::Duration;

use store::{Connection, StoreError};

/// A crash point: the hub aborts there in crash tests; simulations stop the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Point {
    /// The intent is committed; `createForumTopic` not called yet.
    IntentCommitted,
    /// `createForumTopic` answered with a thread id; nothing recorded yet.
    TopicCreated,
    /// The binding is committed.
    Bound,
    /// The intent was marked ambiguous.
    AmbiguousCommitted,
    /// A cleanup is about to call `deleteForumTopic`.
    BeforeDelete,
    /// `deleteForumTopic` succeeded; the cleanup is not marked done yet.
    Deleted,
}

impl Point {
    /// Name for `PI_TELEGRAM_CRASH_AT`.
    pub fn name(self) -> &'static str {
        match self {
            Self::IntentCommitted => "provision.intent_committed",
            Self::TopicCreated => "provision.topic_created",
            Self::Bound => "provision.bound",
            Self::AmbiguousCommitted => "provision.ambiguous_committed",
            Self::BeforeDelete => "reconcile.before_delete",
            Self::Deleted => "reconcile.deleted",
        }
    }

    /// Every point, in the order an operation reaches them.
    pub const ALL: [Point; 6] = [
        Self::IntentCommitted,
        Self::TopicCreated,
        Self::Bound,
        Self::AmbiguousCommitted,
        Self::BeforeDelete,
        Self::Deleted,
    ];
}

/// The operation stopped at a crash point (simulated process death).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("crashed at {}", .0.name())]
pub struct Crash(pub Point);

/// Called at every crash point; `Err` stops the operation as a crash would.
pub type Hook<'a> = &'a mut (dyn FnMut(Point) -> Result<(), Crash> + Send);

/// Why a topic call failed, in the classes provisioning acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// Telegram refused it for good (a 4xx that is not a flood wait). Nothing happened.
    #[error("refused: {0}")]
    Refused(String),
    /// The topic is gone (`message thread not found`).
    #[error("the topic is gone")]
    Gone,
    /// `429`: nothing happened; wait.
    #[error("flood wait {0:?}")]
    Flood(Duration),
    /// Nothing happened (the request never left).
    #[error("temporary: {0}")]
    Transient(String),
    /// The effect may or may not have happened.
    #[error("outcome unknown: {0}")]
    Unknown(String),
}

/// The topic calls Threaded Mode makes.
pub trait TopicApi {
    /// `createForumTopic`; the new `message_thread_id`.
    fn create(
        &self,
        chat_id: i64,
        name: &str,
    ) -> impl std::future::Future<Output = Result<i64, TopicError>> + Send;
    /// `deleteForumTopic`.
    fn delete(
        &self,
        chat_id: i64,
        thread_id: i64,
    ) -> impl std::future::Future<Output = Result<(), TopicError>> + Send;
}

/// A store call in flight. Boxed and `'static` (it borrows nothing): the hub's futures that
/// await it must be `Send`, which the compiler cannot always prove for a future borrowing the
/// storage through a generic lifetime.
pub type StoreCall<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send>>;

/// Where provisioning and the reconciler read and commit. The hub's implementation runs each
/// call on a blocking thread (an fsync must not stall its runtime), so the closures own what
/// they use; [`store::Store`] itself runs them in place (tests, the CLI).
///
/// A call returns once its transaction committed (or failed): the crash points after a commit
/// see it on disk, whichever implementation ran it.
pub trait Storage: Sync {
    /// One durable transaction.
    fn write<T, F>(&self, f: F) -> StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static;

    /// One consistent read.
    fn read<T, F>(&self, f: F) -> StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static;
}

impl Storage for store::Store {
    fn write<T, F>(&self, f: F) -> StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        Box::pin(std::future::ready(store::Store::write(self, f)))
    }

    fn read<T, F>(&self, f: F) -> StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        Box::pin(std::future::ready(store::Store::read(self, f)))
    }
}

impl<S: Storage + Send> Storage for std::sync::Arc<S> {
    fn write<T, F>(&self, f: F) -> StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        S::write(self, f)
    }

    fn read<T, F>(&self, f: F) -> StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        S::read(self, f)
    }
}

/// What went wrong besides the outcomes provisioning reports.
#[derive(Debug, thiserror::Error)]
pub enum ThreadsError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// A simulated crash.
    #[error(transparent)]
    Crash(#[from] Crash),
}

/// Default topic title template.
pub const DEFAULT_TITLE: &str = "{slot} · {project}";

/// A topic title from a template (`{slot}`, `{project}`), trimmed to Telegram's 1-128
/// characters.
pub fn title(template: &str, slot: slots::Slot, project: &str) -> String {
    let project = if project.trim().is_empty() {
        "pi"
    } else {
        project.trim()
    };
    let t = template
        .replace("{slot}", &slot.to_string())
        .replace("{project}", project);
    let t = t.trim();
    if t.is_empty() && template != DEFAULT_TITLE {
        return title(DEFAULT_TITLE, slot, project);
    }
    t.chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(name: &str) -> slots::Slot {
        slots::parse(name).unwrap_or_else(|| panic!("{name}"))
    }

    #[test]
    fn titles() {
        assert_eq!(title(DEFAULT_TITLE, slot("QK"), "web"), "QK · web");
        assert_eq!(title(DEFAULT_TITLE, slot("A"), "web"), "A · web");
        assert_eq!(title("{project} ({slot})", slot("C"), "api"), "api (C)");
        assert_eq!(title("   ", slot("B"), ""), "B · pi");
        assert_eq!(
            title(DEFAULT_TITLE, slot("D"), &"x".repeat(300))
                .chars()
                .count(),
            128
        );
    }
}
