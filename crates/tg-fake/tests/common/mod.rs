//! A minimal bot-side client for driving the fake over real HTTP, as a bot would.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use serde_json::{Value, json};
use tg_fake::{DEFAULT_TOKEN, FakeConfig, FakeServer};

/// Makes ring the process's rustls crypto provider: reqwest is built without one of its own
/// (`rustls-no-provider` in the workspace's Cargo.toml).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A started fake plus an HTTP client.
pub struct Harness {
    pub fake: FakeServer,
    pub http: reqwest::Client,
    pub token: String,
}

/// An API answer: HTTP status and body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    pub fn ok(&self) -> bool {
        self.body["ok"] == json!(true)
    }
    pub fn result(&self) -> &Value {
        assert!(self.ok(), "expected ok, got {} {}", self.status, self.body);
        &self.body["result"]
    }
    pub fn description(&self) -> &str {
        self.body["description"].as_str().unwrap_or_default()
    }
    /// Asserts an error answer with this code and description.
    pub fn expect_error(&self, code: u16, description: &str) {
        assert_eq!(
            (
                self.status,
                self.body["error_code"].as_u64(),
                self.description()
            ),
            (code, Some(u64::from(code)), description),
            "full answer: {}",
            self.body
        );
        assert_eq!(self.body["ok"], json!(false));
    }
}

impl Harness {
    pub async fn start() -> Self {
        Self::with(FakeConfig::default()).await
    }

    pub async fn with(config: FakeConfig) -> Self {
        let fake = FakeServer::start(config).await.unwrap();
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        Self {
            fake,
            http,
            token: DEFAULT_TOKEN.to_owned(),
        }
    }

    pub fn url(&self, method: &str) -> String {
        self.fake.method_url(&self.token, method)
    }

    async fn answer(resp: reqwest::Response) -> Answer {
        let status = resp.status().as_u16();
        let body = resp.json::<Value>().await.unwrap();
        Answer { status, body }
    }

    /// POST with a JSON body.
    pub async fn call(&self, method: &str, params: Value) -> Answer {
        let resp = self
            .http
            .post(self.url(method))
            .json(&params)
            .send()
            .await
            .unwrap();
        Self::answer(resp).await
    }

    /// POST that may fail at the transport level.
    pub async fn try_call(&self, method: &str, params: Value) -> Result<Answer, reqwest::Error> {
        let resp = self
            .http
            .post(self.url(method))
            .json(&params)
            .send()
            .await?;
        let status = resp.status().as_u16();
        let body = resp.json::<Value>().await?;
        Ok(Answer { status, body })
    }

    /// POST urlencoded.
    pub async fn call_form(&self, method: &str, params: &[(&str, &str)]) -> Answer {
        let resp = self
            .http
            .post(self.url(method))
            .form(params)
            .send()
            .await
            .unwrap();
        Self::answer(resp).await
    }

    /// GET with a query string.
    pub async fn call_get(&self, method: &str, params: &[(&str, &str)]) -> Answer {
        let resp = self
            .http
            .get(self.url(method))
            .query(params)
            .send()
            .await
            .unwrap();
        Self::answer(resp).await
    }

    /// POST multipart.
    pub async fn call_multipart(&self, method: &str, form: reqwest::multipart::Form) -> Answer {
        let resp = self
            .http
            .post(self.url(method))
            .multipart(form)
            .send()
            .await
            .unwrap();
        Self::answer(resp).await
    }

    /// The person's text, via the in-process control handle.
    pub fn person_says(&self, text: &str) -> tg_fake::control::Sent {
        self.fake
            .control()
            .send_text(tg_fake::control::SendText {
                text: text.into(),
                ..Default::default()
            })
            .unwrap()
    }

    pub fn person_says_in(&self, thread: i64, text: &str) -> tg_fake::control::Sent {
        self.fake
            .control()
            .send_text(tg_fake::control::SendText {
                text: text.into(),
                thread_id: Some(thread),
                ..Default::default()
            })
            .unwrap()
    }

    pub fn enable_topics(&self) {
        self.fake
            .control()
            .settings(tg_fake::control::SettingsChange {
                has_topics_enabled: Some(true),
                ..Default::default()
            })
            .unwrap();
    }

    /// The default person's chat id.
    pub fn chat(&self) -> i64 {
        tg_fake::DEFAULT_USER_ID
    }
}
