//! How a fake server starts.

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use crate::flood::FloodConfig;

/// The token a fake bot has unless told otherwise.
pub const DEFAULT_TOKEN: &str = "1000:fake-token";
/// The default person's user id, which is also their private chat id.
pub const DEFAULT_USER_ID: i64 = 1001;

/// The person who talks to the bots unless a control call names another `user_id`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PersonConfig {
    /// User id and private chat id.
    pub id: i64,
    pub first_name: String,
    pub last_name: Option<String>,
    /// Username without `@`.
    pub username: Option<String>,
}

impl Default for PersonConfig {
    fn default() -> Self {
        Self {
            id: DEFAULT_USER_ID,
            first_name: "Ada".into(),
            last_name: Some("Lovelace".into()),
            username: Some("ada".into()),
        }
    }
}

/// Start-up configuration. `Default` is what tests want: loopback, any port, one bot, strict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FakeConfig {
    /// Address to bind (loopback by default).
    pub host: IpAddr,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// Bot tokens; the first bot is the default target of control calls.
    pub tokens: Vec<String>,
    /// Reject parameters the Bot API documentation does not list for a method.
    pub strict: bool,
    /// `getMe.has_topics_enabled` at start (Threaded Mode).
    pub has_topics_enabled: bool,
    /// `getMe.allows_users_to_create_topics` at start.
    pub allows_users_to_create_topics: bool,
    /// The flood model.
    pub flood: FloodConfig,
    /// Seed for probabilistic faults.
    pub seed: u64,
    /// The first bot's first `update_id`.
    pub first_update_id: i64,
    /// The default person.
    pub person: PersonConfig,
    /// Serve HTTPS with a certificate from an authority made at start
    /// (`FakeServer::ca_pem`): for clients that must verify the server, as through a proxy's
    /// `CONNECT` tunnel.
    #[serde(default)]
    pub tls: bool,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            tokens: vec![DEFAULT_TOKEN.into()],
            strict: true,
            has_topics_enabled: false,
            allows_users_to_create_topics: true,
            flood: FloodConfig::default(),
            seed: 0x5EED,
            first_update_id: 700_000_001,
            person: PersonConfig::default(),
            tls: false,
        }
    }
}
