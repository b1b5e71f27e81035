//! `FakeConfig::tls`: the fake over HTTPS, verified against the authority it made (by name and
//! by address), and refused by a client that does not trust it.
#![allow(clippy::unwrap_used)]

use tg_fake::{FakeConfig, FakeServer};

fn client(trusting: Option<&str>) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder();
    if let Some(pem) = trusting {
        b = b.tls_certs_only([reqwest::Certificate::from_pem(pem.as_bytes()).unwrap()]);
    }
    b.build().unwrap()
}

#[tokio::test]
async fn https_with_a_certificate_its_authority_signed() {
    let fake = FakeServer::start(FakeConfig {
        tls: true,
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(fake.base_url().starts_with("https://127.0.0.1:"));
    let ca = fake.ca_pem().unwrap().to_owned();
    let trusting = client(Some(&ca));
    let port = fake.addr().port();
    for base in [
        fake.base_url().to_owned(),
        format!("https://localhost:{port}"),
    ] {
        let me: serde_json::Value = trusting
            .get(format!("{base}/bot{}/getMe", tg_fake::DEFAULT_TOKEN))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(me["ok"], true, "{base}: {me}");
    }
    // Plain HTTP to it, or a client without the authority: no answer.
    let plain = client(None);
    let refused = plain
        .get(format!(
            "{}/bot{}/getMe",
            fake.base_url(),
            tg_fake::DEFAULT_TOKEN
        ))
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let http = plain
        .get(format!(
            "http://127.0.0.1:{port}/bot{}/getMe",
            tg_fake::DEFAULT_TOKEN
        ))
        .send()
        .await;
    assert!(http.is_err() || http.is_ok_and(|r| !r.status().is_success()));
}

#[tokio::test]
async fn plain_http_by_default() {
    let fake = FakeServer::start(FakeConfig::default()).await.unwrap();
    assert!(fake.base_url().starts_with("http://"));
    assert!(fake.ca_pem().is_none());
}
