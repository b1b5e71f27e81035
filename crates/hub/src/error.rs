//! The hub's errors, each with what the person should do about it.

use crate::config::ConfigError;
use crate::lock::LockError;

/// Why a hub command failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The config file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The state database.
    #[error("state database: {0}")]
    Store(#[from] store::StoreError),
    /// The profile lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The TLS identity of the listener for pi on other machines.
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// No token anywhere.
    #[error(
        "no bot token for profile {profile}: run `pi-telegram setup{flag}` (or set TELEGRAM_BOT_TOKEN)"
    )]
    NoToken {
        profile: String,
        /// ` --profile X` when not the default.
        flag: String,
    },
    /// Telegram rejected the token.
    #[error(
        "Telegram rejected the bot token (401 Unauthorized). Copy it again from @BotFather (/mybots → your bot → API Token) and run `pi-telegram setup`."
    )]
    Unauthorized,
    /// Someone else polls this bot, for longer than a network blip explains.
    #[error(
        "another program is receiving this bot's updates ({description}) and has been for {seconds} s. Only one program may poll a bot: stop the other one (another pi-telegram, the reference extension, or a webhook) and start again."
    )]
    Conflict {
        /// Telegram's text.
        description: String,
        /// How long it lasted.
        seconds: u64,
    },
    /// The profile's state belongs to another bot.
    #[error(
        "the state in {state} belongs to bot {stored}, but the token is for bot {token}. Use another profile (--profile) for the new bot, or move that folder away to start over."
    )]
    BotMismatch {
        /// The state folder.
        state: String,
        /// Bot id in the state.
        stored: i64,
        /// Bot id of the token.
        token: i64,
    },
    /// Telegram could not be reached or refused a call.
    #[error("{context}: {source}")]
    Telegram {
        /// What we were doing.
        context: String,
        /// Why it failed.
        #[source]
        source: telegram::CallError,
    },
    /// Anything else from the OS.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Bad input from the person at the terminal.
    #[error("{0}")]
    Usage(String),
    /// A fault of the hub's own: a task that should run for ever ended. Exit 1, which a
    /// service manager restarts (unlike a usage error's 2, which it leaves stopped).
    #[error("internal error: {0}")]
    Internal(String),
}

impl HubError {
    /// Process exit code: 2 usage/config, 3 lock held, 4 conflict, 5 unauthorized, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Config(_) | Self::Usage(_) | Self::NoToken { .. } | Self::BotMismatch { .. } => 2,
            // A state database from a newer version: run a matching binary.
            Self::Store(store::StoreError::TooNew { .. }) => 2,
            Self::Lock(LockError::Held { .. }) => 3,
            Self::Conflict { .. } => 4,
            // The extension's /telegram-setup tells this one apart by it (extension/lib/setup.ts).
            Self::Unauthorized => 5,
            _ => 1,
        }
    }

    /// Wraps an I/O error with context.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_ending_is_the_hubs_fault_and_restartable_a_usage_error_is_not() {
        // The systemd unit restarts on failure but for exits 2 to 5 (RestartPreventExitStatus).
        assert_eq!(HubError::Internal("a task ended".into()).exit_code(), 1);
        assert_eq!(HubError::Usage("bad flag".into()).exit_code(), 2);
        assert_eq!(HubError::Unauthorized.exit_code(), 5);
    }
}
