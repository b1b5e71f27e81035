//! How the hub reaches Telegram, as a person reads it: the route its client took (direct, a
//! proxy shown without credentials, or `NO_PROXY`'s exemption) and the address family. Recorded
//! in kv by `serve` for `status` (a hub started by the service or a pi's extension may have
//! another environment than the shell that asks), and built the same way by `doctor` for the
//! client it makes itself.

use serde::{Deserialize, Serialize};
use telegram::{Client, Family, Route};

/// kv: the running (else the last) hub's [`NetworkStatus`], as JSON.
pub const KV: &str = "hub.network";

/// The way to the API base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkStatus {
    /// `direct`, `proxy` or `exempt` (a proxy variable applies, `NO_PROXY` names the host).
    pub route: String,
    /// The proxy (`scheme://host:port`, never its credentials), taken or exempted from.
    pub proxy: Option<String>,
    /// The variable it came from (`HTTPS_PROXY`, `all_proxy`, ...).
    pub proxy_var: Option<String>,
    /// The variable that exempts the API base (`NO_PROXY` or `no_proxy`).
    pub exempt_by: Option<String>,
    /// `auto`, `ipv4`, `ipv6` or `ipv4-fallback` (`PI_TELEGRAM_NETWORK_FAMILY`).
    pub family: String,
    /// Both in a sentence: "through the proxy http://… (from HTTPS_PROXY); address family auto".
    pub summary: String,
}

impl NetworkStatus {
    /// What `client` does.
    pub fn of(client: &Client) -> Self {
        let route = client.route();
        let (kind, proxy, exempt_by) = match route {
            Route::Direct => ("direct", None, None),
            Route::Proxy(p) => ("proxy", Some(p), None),
            Route::Exempt { proxy, by } => ("exempt", Some(proxy), Some(*by)),
        };
        let family = client.family();
        let mut summary = format!("{route}; address family {family}");
        // An HTTP proxy (CONNECT or forwarding) resolves Telegram's name itself, and so do
        // socks5h and socks4a; plain socks5/socks4 get the address from the hub.
        let proxy_resolves = matches!(route, Route::Proxy(p)
            if !(p.shown.starts_with("socks5://") || p.shown.starts_with("socks4://")));
        if family != Family::Auto && proxy_resolves {
            summary.push_str(" (for reaching the proxy: the proxy resolves Telegram's name)");
        }
        Self {
            route: kind.to_owned(),
            proxy: proxy.map(|p| p.shown.clone()),
            proxy_var: proxy.map(|p| p.var.to_owned()),
            exempt_by: exempt_by.map(str::to_owned),
            family: family.as_str().to_owned(),
            summary,
        }
    }

    /// Read back from kv (`None` for a hub of an earlier release, or an unreadable value).
    pub fn parse(json: &str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }
}

/// `PI_TELEGRAM_NETWORK_FAMILY`, with the one warning an unknown value gets (it means auto).
pub fn family_from_env() -> Family {
    let (family, unknown) = Family::from_env();
    if let Some(e) = unknown {
        tracing::warn!("{e}");
    }
    family
}

/// Logs the way `client` takes, and a warning for each proxy variable it had to ignore.
pub fn log_route(client: &Client) {
    for ignored in client.ignored_proxies() {
        tracing::warn!("{ignored}");
    }
    tracing::info!(
        route = %client.route(),
        family = %client.family(),
        "reaching Telegram"
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_client_reads_back() {
        let client = Client::new(
            "http://127.0.0.1:9",
            telegram::Token::new("1:abc").unwrap(),
            telegram::ClientOptions {
                family: Family::Ipv4,
                ..Default::default()
            },
        )
        .unwrap();
        let n = NetworkStatus::of(&client);
        // The environment of a test run may name a proxy; the family is ours.
        assert_eq!(n.family, "ipv4");
        assert!(n.summary.ends_with("address family ipv4"), "{}", n.summary);
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(NetworkStatus::parse(&json), Some(n));
        assert_eq!(NetworkStatus::parse("nonsense"), None);
    }
}
