//! How the client reaches the API base: the address family names resolve to
//! (`PI_TELEGRAM_NETWORK_FAMILY`, the reference's variable and values) and the proxy the usual
//! environment variables name for it.
//!
//! The proxy is decided once per client, for its one API base ([`Route::for_base`]), and that
//! decision is the one reqwest is given (`Proxy::all` or no proxy at all), never reqwest's own
//! reading of the environment: what `doctor` and `status` report is what the client does. The
//! rules are hyper-util's (curl's): `HTTPS_PROXY`/`https_proxy` for an `https://` base,
//! `HTTP_PROXY`/`http_proxy` for `http://`, `ALL_PROXY`/`all_proxy` for either, `NO_PROXY`/
//! `no_proxy` exempting hosts; the upper-case name first.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use hyper_util::client::proxy::matcher::Matcher;

/// The environment variable that chooses the address family.
pub const FAMILY_ENV: &str = "PI_TELEGRAM_NETWORK_FAMILY";

/// Which addresses of a name the client connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    /// Every address, in the system's order (usually IPv6 first), each family tried 300 ms
    /// after the other starts (happy eyeballs).
    #[default]
    Auto,
    /// IPv4 addresses only: for hosts whose IPv6 is broken.
    Ipv4,
    /// IPv6 addresses only.
    Ipv6,
    /// IPv4 first, IPv6 when IPv4 fails (or is slow to connect).
    Ipv4Fallback,
}

/// A value of [`FAMILY_ENV`] that is none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{FAMILY_ENV}={value:?} is not one of auto, ipv4, ipv6, ipv4-fallback: using auto")]
pub struct UnknownFamily {
    /// What the variable said.
    pub value: String,
}

impl Family {
    /// Its name, as [`FAMILY_ENV`] spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
            Self::Ipv4Fallback => "ipv4-fallback",
        }
    }

    /// Reads a value (surrounding blanks and case ignored; empty is `auto`).
    pub fn parse(value: &str) -> Result<Self, UnknownFamily> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "ipv4" => Ok(Self::Ipv4),
            "ipv6" => Ok(Self::Ipv6),
            "ipv4-fallback" => Ok(Self::Ipv4Fallback),
            _ => Err(UnknownFamily {
                value: value.to_owned(),
            }),
        }
    }

    /// [`FAMILY_ENV`]: `auto` when unset; an unknown value is `auto` too, with the error to warn
    /// about.
    pub fn from_env() -> (Self, Option<UnknownFamily>) {
        match std::env::var(FAMILY_ENV) {
            Err(_) => (Self::Auto, None),
            Ok(v) => match Self::parse(&v) {
                Ok(f) => (f, None),
                Err(e) => (Self::Auto, Some(e)),
            },
        }
    }

    /// The addresses to try, in order; an error when none of this family is left.
    fn choose(self, host: &str, found: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, NoAddress> {
        let chosen: Vec<SocketAddr> = match self {
            Self::Auto => found.clone(),
            Self::Ipv4 => found.iter().copied().filter(SocketAddr::is_ipv4).collect(),
            Self::Ipv6 => found.iter().copied().filter(SocketAddr::is_ipv6).collect(),
            Self::Ipv4Fallback => {
                // Stable: each family keeps the system's order. hyper's connector tries the
                // first address's family first and the other as its fallback.
                let mut all = found.clone();
                all.sort_by_key(|a| a.is_ipv6());
                all
            }
        };
        if chosen.is_empty() {
            return Err(NoAddress {
                host: host.to_owned(),
                family: self,
                found: found.iter().map(SocketAddr::ip).collect(),
            });
        }
        Ok(chosen)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name with no address of the family asked for.
#[derive(Debug, Clone, thiserror::Error)]
pub struct NoAddress {
    host: String,
    family: Family,
    found: Vec<IpAddr>,
}

impl fmt::Display for NoAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let which = match self.family {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
            Family::Auto | Family::Ipv4Fallback => "usable",
        };
        write!(f, "{} has no {which} address", self.host)?;
        if !self.found.is_empty() {
            let found: Vec<String> = self.found.iter().map(IpAddr::to_string).collect();
            write!(f, " (it resolves to {})", found.join(", "))?;
        }
        write!(f, "; {FAMILY_ENV}={}", self.family)
    }
}

/// Names to answer from a fixed table instead of the system's resolver, like lines of
/// `/etc/hosts` (the family applied as to any name): a local Bot API server's name pinned, or a
/// name with both families on a machine whose `localhost` has one (tests).
pub type Hosts = Vec<(String, Vec<IpAddr>)>;

/// The client's resolver: the system's (getaddrinfo, on a blocking thread) or the fixed
/// table, then the family's filter and order.
#[derive(Debug, Clone)]
pub(crate) struct FamilyResolver {
    pub(crate) family: Family,
    pub(crate) hosts: Arc<Hosts>,
    pub(crate) hosts_file: Option<Arc<std::path::PathBuf>>,
}

/// The environment variable naming a hosts file that answers every name (tests).
pub const HOSTS_FILE_ENV: &str = "PI_TELEGRAM_HOSTS_FILE";

/// A name the hosts file does not list: it does not resolve.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{host} does not resolve (not in {HOSTS_FILE_ENV})")]
pub struct NotResolved {
    host: String,
}

/// The addresses `/etc/hosts`-form `text` gives `host` (none when it does not list it).
fn hosts_lookup(text: &str, host: &str) -> Vec<IpAddr> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let ip: IpAddr = words.next()?.parse().ok()?;
            words.any(|n| n.eq_ignore_ascii_case(host)).then_some(ip)
        })
        .collect()
}

impl reqwest::dns::Resolve for FamilyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let family = self.family;
        let host = name.as_str().to_owned();
        let fixed = self
            .hosts
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&host))
            .map(|(_, ips)| ips.clone());
        let file = self.hosts_file.clone();
        Box::pin(async move {
            let found: Vec<SocketAddr> = match (fixed, file) {
                (Some(ips), _) => ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect(),
                (None, Some(file)) => {
                    // A missing file lists nothing, as a resolver that answers nothing.
                    let text = tokio::fs::read_to_string(&*file).await.unwrap_or_default();
                    let ips = hosts_lookup(&text, &host);
                    if ips.is_empty() {
                        return Err(NotResolved { host }.into());
                    }
                    ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect()
                }
                (None, None) => tokio::net::lookup_host((host.as_str(), 0)).await?.collect(),
            };
            let chosen = family.choose(&host, found)?;
            let addrs: reqwest::dns::Addrs = Box::new(chosen.into_iter());
            Ok(addrs)
        })
    }
}

/// A proxy as it may be shown: `scheme://host:port`, never the credentials it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    /// The variable it came from (`HTTPS_PROXY`, `all_proxy`, ...).
    pub var: &'static str,
    /// `http://proxy.example:3128`: scheme, host and port only.
    pub shown: String,
    /// Whether the variable carries a user name or password (sent to the proxy, never shown).
    pub credentials: bool,
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (from {}", self.shown, self.var)?;
        if self.credentials {
            f.write_str(", with credentials")?;
        }
        f.write_str(")")
    }
}

/// How the client reaches its API base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// No proxy variable applies to the base's scheme.
    Direct,
    /// Through this proxy: a `CONNECT` tunnel for an `https://` base, the request handed to
    /// the proxy for `http://`, or SOCKS.
    Proxy(ProxyUrl),
    /// A proxy variable applies, but `NO_PROXY` names the base's host: direct.
    Exempt {
        /// The proxy it would have taken.
        proxy: ProxyUrl,
        /// The variable that exempts it (`NO_PROXY` or `no_proxy`).
        by: &'static str,
    },
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Direct => f.write_str("direct"),
            Self::Proxy(p) => write!(f, "through the proxy {p}"),
            Self::Exempt { proxy, by } => {
                write!(f, "direct: {by} exempts it from the proxy {proxy}")
            }
        }
    }
}

/// What [`Route::for_base`] found: the route, the URL to give reqwest (credentials included),
/// and the proxy variables it could not use.
#[derive(Debug, Clone)]
pub(crate) struct Decided {
    pub(crate) route: Route,
    /// The chosen variable's value, for `reqwest::Proxy::all` (secret: never logged).
    pub(crate) proxy_value: Option<String>,
    pub(crate) ignored: Vec<IgnoredProxy>,
}

/// A proxy variable that applies to the base's scheme but holds nothing the client can use
/// (a typo, an unknown scheme): it is ignored, and the person is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{var} is set but is not a proxy URL this client can use (http://, https://, socks4://, socks4a://, socks5:// or socks5h://, with a host): ignored"
)]
pub struct IgnoredProxy {
    /// The variable.
    pub var: &'static str,
}

const HTTPS_VARS: [&str; 2] = ["HTTPS_PROXY", "https_proxy"];
const HTTP_VARS: [&str; 2] = ["HTTP_PROXY", "http_proxy"];
const ALL_VARS: [&str; 2] = ["ALL_PROXY", "all_proxy"];
const NO_VARS: [&str; 2] = ["NO_PROXY", "no_proxy"];

/// The first of `names` that is set (as hyper-util reads them: an empty upper-case variable
/// still hides its lower-case twin).
fn first_set(names: [&'static str; 2]) -> Option<(&'static str, String)> {
    names
        .into_iter()
        .find_map(|n| std::env::var(n).ok().map(|v| (n, v)))
}

impl Route {
    /// The route to `base` under this process's environment.
    pub(crate) fn for_base(base: &str) -> Decided {
        let https = base
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
        let specific = if https { HTTPS_VARS } else { HTTP_VARS };
        let Ok(uri) = base.parse::<http::Uri>() else {
            // The request fails on its own with this base; no proxy to report.
            return Decided {
                route: Route::Direct,
                proxy_value: None,
                ignored: Vec::new(),
            };
        };
        // CGI: hyper-util ignores HTTP_PROXY there (a client could set it as a header).
        let cgi = std::env::var_os("REQUEST_METHOD").is_some();
        let mut ignored = Vec::new();
        let mut chosen = None;
        for group in [specific, ALL_VARS] {
            let Some((var, value)) = first_set(group) else {
                continue;
            };
            if value.trim().is_empty() {
                continue;
            }
            // hyper-util reads a value without a scheme as http://; reqwest's URL parser would
            // not (`proxy:3128` is scheme `proxy` to it): both get the same string.
            let value = if value.contains("://") {
                value.trim().to_owned()
            } else {
                format!("http://{}", value.trim())
            };
            match proxy_of(&value, &uri) {
                Some(shown) if !cgi => {
                    chosen = Some((var, value, shown));
                    break;
                }
                Some(_) => {}
                None => ignored.push(IgnoredProxy { var }),
            }
        }
        let Some((var, value, (shown, credentials))) = chosen else {
            return Decided {
                route: Route::Direct,
                proxy_value: None,
                ignored,
            };
        };
        let proxy = ProxyUrl {
            var,
            shown,
            credentials,
        };
        if let Some((by, no)) = first_set(NO_VARS) {
            let exempt = Matcher::builder()
                .all(value.clone())
                .no(no)
                .build()
                .intercept(&uri)
                .is_none();
            if exempt {
                return Decided {
                    route: Route::Exempt { proxy, by },
                    proxy_value: None,
                    ignored,
                };
            }
        }
        Decided {
            route: Route::Proxy(proxy),
            proxy_value: Some(value),
            ignored,
        }
    }
}

/// The proxy `value` names for `uri` as hyper-util reads it (what reqwest's connector then
/// uses): `(scheme://host:port, has credentials)`, or `None` when it is no usable proxy URL.
fn proxy_of(value: &str, uri: &http::Uri) -> Option<(String, bool)> {
    let intercept = Matcher::builder()
        .all(value.to_owned())
        .build()
        .intercept(uri)?;
    let proxy = intercept.uri();
    let scheme = proxy.scheme_str()?;
    let authority = proxy.authority()?;
    let credentials = intercept.basic_auth().is_some() || intercept.raw_auth().is_some();
    Some((format!("{scheme}://{authority}"), credentials))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter()
            .map(|a| SocketAddr::new(a.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])), 0))
            .collect()
    }

    #[test]
    fn a_hosts_file_lists_names_as_etc_hosts_does() {
        let text = "# comment\n127.0.0.1 telegram.test other # trailing\n::1 Telegram.Test\nnonsense here\n";
        let ip = |s: &str| s.parse::<IpAddr>().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        assert_eq!(
            hosts_lookup(text, "telegram.test"),
            [ip("127.0.0.1"), ip("::1")]
        );
        assert_eq!(hosts_lookup(text, "other"), [ip("127.0.0.1")]);
        assert!(hosts_lookup(text, "comment").is_empty());
        assert!(hosts_lookup("", "telegram.test").is_empty());
    }

    #[test]
    fn values_as_the_reference_spells_them() {
        for (text, family) in [
            ("auto", Family::Auto),
            ("", Family::Auto),
            (" IPv4 ", Family::Ipv4),
            ("ipv6", Family::Ipv6),
            ("ipv4-fallback", Family::Ipv4Fallback),
        ] {
            assert_eq!(Family::parse(text), Ok(family), "{text:?}");
        }
        for family in [
            Family::Auto,
            Family::Ipv4,
            Family::Ipv6,
            Family::Ipv4Fallback,
        ] {
            assert_eq!(Family::parse(family.as_str()), Ok(family));
        }
        let e = Family::parse("ipv5").err();
        assert_eq!(
            e.map(|e| e.to_string()).as_deref(),
            Some(
                "PI_TELEGRAM_NETWORK_FAMILY=\"ipv5\" is not one of auto, ipv4, ipv6, ipv4-fallback: using auto"
            )
        );
    }

    #[test]
    fn each_family_filters_and_orders() {
        let both = addrs(&["::1", "127.0.0.1", "fe80::1", "10.0.0.1"]);
        let ips = |v: Result<Vec<SocketAddr>, NoAddress>| -> Vec<String> {
            v.map(|v| v.iter().map(|a| a.ip().to_string()).collect())
                .unwrap_or_default()
        };
        assert_eq!(
            ips(Family::Auto.choose("h", both.clone())),
            ["::1", "127.0.0.1", "fe80::1", "10.0.0.1"]
        );
        assert_eq!(
            ips(Family::Ipv4.choose("h", both.clone())),
            ["127.0.0.1", "10.0.0.1"]
        );
        assert_eq!(
            ips(Family::Ipv6.choose("h", both.clone())),
            ["::1", "fe80::1"]
        );
        assert_eq!(
            ips(Family::Ipv4Fallback.choose("h", both)),
            ["127.0.0.1", "10.0.0.1", "::1", "fe80::1"]
        );
        let none = Family::Ipv6.choose("localhost", addrs(&["127.0.0.1"]));
        assert_eq!(
            none.err().map(|e| e.to_string()).as_deref(),
            Some(
                "localhost has no IPv6 address (it resolves to 127.0.0.1); PI_TELEGRAM_NETWORK_FAMILY=ipv6"
            )
        );
    }

    #[test]
    fn a_proxy_is_shown_without_its_credentials() {
        let uri: http::Uri = "https://api.telegram.org".parse().unwrap_or_default();
        assert_eq!(
            proxy_of("http://user:secret@proxy.example:3128", &uri),
            Some(("http://proxy.example:3128".to_owned(), true))
        );
        assert_eq!(
            proxy_of("socks5h://u:p@127.0.0.1:1080", &uri),
            Some(("socks5h://127.0.0.1:1080".to_owned(), true))
        );
        assert_eq!(
            proxy_of("proxy.example:8080", &uri),
            Some(("http://proxy.example:8080".to_owned(), false))
        );
        assert_eq!(proxy_of("ftp://proxy.example", &uri), None);
        let shown = ProxyUrl {
            var: "HTTPS_PROXY",
            shown: "http://proxy.example:3128".into(),
            credentials: true,
        };
        assert_eq!(
            Route::Proxy(shown).to_string(),
            "through the proxy http://proxy.example:3128 (from HTTPS_PROXY, with credentials)"
        );
    }
}
