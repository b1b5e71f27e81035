//! The address family (`PI_TELEGRAM_NETWORK_FAMILY`'s values) against tg-fake listening on one
//! family only, through the client's real resolver and reqwest's connector: a name that has both
//! an IPv4 and an IPv6 loopback address comes from the client's host table (this machine's
//! `localhost` may have one family only; `crates/pi-telegram/tests/network.rs` uses the system's
//! own names).
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use serde_json::json;
use telegram::{CallError, Client, ClientOptions, Family, Token};
use tg_fake::{FakeConfig, FakeServer};

const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

async fn fake_on(host: IpAddr) -> Option<FakeServer> {
    match FakeServer::start(FakeConfig {
        host,
        ..Default::default()
    })
    .await
    {
        Ok(f) => Some(f),
        Err(e) => {
            println!("skipped: cannot listen on {host} ({e}): no IPv6 loopback here");
            None
        }
    }
}

/// A client for `http://<name>:<the fake's port>`, `name` resolving to `ips`.
fn client(fake: &FakeServer, name: &str, ips: &[IpAddr], family: Family) -> Client {
    Client::new(
        &format!("http://{name}:{}", fake.addr().port()),
        Token::new(tg_fake::DEFAULT_TOKEN).unwrap(),
        ClientOptions {
            family,
            hosts: vec![(name.to_owned(), ips.to_vec())],
            connect_timeout: Duration::from_secs(5),
            ..ClientOptions::default()
        },
    )
    .unwrap()
}

async fn get_me(c: &Client) -> Result<serde_json::Value, CallError> {
    c.call("getMe", &json!({})).await
}

#[tokio::test]
async fn a_fake_on_ipv4_only() {
    let fake = fake_on(V4).await.unwrap();
    let both = [V6, V4];
    for family in [Family::Auto, Family::Ipv4, Family::Ipv4Fallback] {
        let c = client(&fake, "dual.test", &both, family);
        assert_eq!(c.family(), family);
        let me = get_me(&c).await;
        assert!(me.is_ok(), "{family}: {me:?}");
    }
    // IPv6 only: the one address it may use refuses.
    let c = client(&fake, "dual.test", &both, Family::Ipv6);
    let e = get_me(&c).await.unwrap_err().to_string();
    assert!(e.contains("refused"), "{e}");
    // A name with no IPv6 address at all says so, and which setting made it matter.
    let c = client(&fake, "v4only.test", &[V4], Family::Ipv6);
    let e = get_me(&c).await.unwrap_err();
    assert!(matches!(e, CallError::Retryable(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains(
            "v4only.test has no IPv6 address (it resolves to 127.0.0.1); PI_TELEGRAM_NETWORK_FAMILY=ipv6"
        ),
        "{e}"
    );
    assert!(!e.contains(tg_fake::DEFAULT_TOKEN), "{e}");
}

#[tokio::test]
async fn a_fake_on_ipv6_only() {
    let Some(fake) = fake_on(V6).await else {
        return;
    };
    // IPv4 first, as the name lists it: ipv4-fallback must get past the refusal.
    let both = [V4, V6];
    for family in [Family::Auto, Family::Ipv6, Family::Ipv4Fallback] {
        let c = client(&fake, "dual.test", &both, family);
        let me = get_me(&c).await;
        assert!(me.is_ok(), "{family}: {me:?}");
    }
    let c = client(&fake, "dual.test", &both, Family::Ipv4);
    let e = get_me(&c).await.unwrap_err().to_string();
    assert!(e.contains("refused"), "{e}");
    let c = client(&fake, "v6only.test", &[V6], Family::Ipv4);
    let e = get_me(&c).await.unwrap_err().to_string();
    assert!(
        e.contains("v6only.test has no IPv4 address (it resolves to ::1)"),
        "{e}"
    );
}

/// Downloads take the same way as calls (one client, one resolver).
#[tokio::test]
async fn downloads_use_the_family_too() {
    let fake = fake_on(V4).await.unwrap();
    let c = client(&fake, "v4only.test", &[V4], Family::Ipv6);
    let e = c
        .download("documents/file_0.txt")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("v4only.test has no IPv6 address"), "{e}");
}
