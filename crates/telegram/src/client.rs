//! The HTTP side: one `reqwest` client, Telegram's answer format, and the error classes.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::{ApiError, ApiErrorKind, CallError};
use crate::method::{Safety, safety};
use crate::network::{Family, FamilyResolver, Hosts, IgnoredProxy, Route};
use crate::token::Token;
use crate::update::{RawUpdate, parse_updates};

/// Telegram's cloud Bot API.
pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";

/// Timeouts and the way to the API base.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Whole-request timeout for ordinary calls (long polls add their own wait to it).
    pub timeout: Duration,
    /// Connection establishment timeout.
    pub connect_timeout: Duration,
    /// Which addresses of the API base's name to connect to (callers read
    /// [`Family::from_env`]). Behind a proxy it applies to the proxy's name (and a SOCKS
    /// proxy's target, unless `socks5h`/`socks4a` leave that to the proxy): the proxy resolves
    /// the rest.
    pub family: Family,
    /// Names answered from this table instead of the system's resolver ([`Hosts`]).
    pub hosts: Hosts,
    /// A file in `/etc/hosts` form that answers every name instead of the system's resolver,
    /// read again at each resolution (`PI_TELEGRAM_HOSTS_FILE`, tests: a name that stops
    /// resolving and resolves again). A name it does not list does not resolve.
    pub hosts_file: Option<std::path::PathBuf>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            family: Family::Auto,
            hosts: Hosts::new(),
            hosts_file: None,
        }
    }
}

/// A file to upload in a multipart call.
#[derive(Debug, Clone)]
pub struct Upload {
    /// The form field (`document`, `photo`, ...).
    pub field: String,
    /// File name shown to the person.
    pub file_name: String,
    /// MIME type, if known.
    pub mime_type: Option<String>,
    /// Content.
    pub bytes: Bytes,
}

/// A Bot API client for one bot.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Token,
    opts: ClientOptions,
    route: Route,
    ignored: Vec<IgnoredProxy>,
}

#[derive(Deserialize)]
struct Answer<'a> {
    ok: bool,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize, Default)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// Which side of "the request left" a failure happened on.
enum Stage {
    /// Nothing reached Telegram.
    NotSent,
    /// It may have been processed.
    MaybeProcessed,
}

/// Makes ring the process's rustls crypto provider, the one reqwest takes (it is built without
/// one of its own: `rustls-no-provider` in the workspace's Cargo.toml). Once per process; a
/// provider installed before stays.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Client {
    /// A client for `token` at `api_base` (`https://api.telegram.org`, a local Bot API server,
    /// or a fake). The proxy comes from `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`/`NO_PROXY` (and
    /// their lower-case forms), decided here once for this base ([`Client::route`]); every
    /// request of this client, file downloads too, goes that way.
    pub fn new(api_base: &str, token: Token, opts: ClientOptions) -> Result<Self, CallError> {
        install_crypto_provider();
        let base = api_base.trim_end_matches('/').to_owned();
        let decided = Route::for_base(&base);
        let resolver = FamilyResolver {
            family: opts.family,
            hosts: std::sync::Arc::new(opts.hosts.clone()),
            hosts_file: opts.hosts_file.clone().map(std::sync::Arc::new),
        };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .tcp_nodelay(true)
            .user_agent(concat!("pi-telegram/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(resolver);
        // The route decided above, and no other: reqwest would otherwise read the environment
        // again on its own.
        builder = match &decided.proxy_value {
            Some(value) => builder.proxy(reqwest::Proxy::all(value.as_str()).map_err(|e| {
                CallError::Retryable(format!(
                    "the proxy in {}: {}",
                    proxy_var(&decided.route),
                    e.without_url()
                ))
            })?),
            None => builder.no_proxy(),
        };
        let http = builder.build().map_err(|e| {
            CallError::Retryable(format!("building the HTTP client: {}", e.without_url()))
        })?;
        Ok(Self {
            http,
            base,
            token,
            opts,
            route: decided.route,
            ignored: decided.ignored,
        })
    }

    /// How this client reaches its API base: direct, through a proxy (shown without its
    /// credentials), or exempted by `NO_PROXY`.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The address family it connects with.
    pub fn family(&self) -> Family {
        self.opts.family
    }

    /// Proxy variables that apply to the base but hold no usable proxy URL, so were ignored
    /// (the caller warns: a typo must not mean a silent direct connection).
    pub fn ignored_proxies(&self) -> &[IgnoredProxy] {
        &self.ignored
    }

    /// A transport error without its URL (which carries the token), with its causes, and the
    /// proxy it went through: "connection refused" from a proxy that is down must not read as
    /// Telegram refusing.
    fn describe(&self, e: &reqwest::Error) -> String {
        let text = describe(e);
        match &self.route {
            Route::Proxy(p) => format!("{text} (through the proxy {p})"),
            Route::Direct | Route::Exempt { .. } => text,
        }
    }

    /// The token (for its bot id; `Display` is redacted).
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The API base this client talks to.
    pub fn api_base(&self) -> &str {
        &self.base
    }

    fn url(&self, method: &str) -> String {
        format!("{}/bot{}/{}", self.base, self.token.expose(), method)
    }

    /// Calls `method` with a JSON object of parameters; returns `result`.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value, CallError> {
        self.call_dated(method, params).await.map(|(v, _)| v)
    }

    /// [`Client::call`], also returning the time in the answer's `Date` header (when it has a
    /// readable one): a way to compare this machine's clock with Telegram's.
    pub async fn call_dated(
        &self,
        method: &str,
        params: &Value,
    ) -> Result<(Value, Option<SystemTime>), CallError> {
        let req = self
            .http
            .post(self.url(method))
            .json(params)
            .timeout(self.opts.timeout);
        let answer = self.send(method, chat_of(params), req).await?;
        parse_result(method, &answer.body).map(|v| (v, answer.date))
    }

    /// Calls `method` with multipart form data: `params` as text fields (objects JSON-encoded)
    /// plus files.
    pub async fn call_multipart(
        &self,
        method: &str,
        params: &Value,
        files: Vec<Upload>,
    ) -> Result<Value, CallError> {
        let mut form = reqwest::multipart::Form::new();
        if let Some(map) = params.as_object() {
            for (k, v) in map {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => continue,
                    other => other.to_string(),
                };
                form = form.text(k.clone(), text);
            }
        }
        for f in files {
            let mut part = reqwest::multipart::Part::stream(f.bytes).file_name(f.file_name);
            if let Some(m) = f.mime_type {
                part = part.mime_str(&m).map_err(|e| {
                    CallError::Retryable(format!("bad MIME type: {}", e.without_url()))
                })?;
            }
            form = form.part(f.field, part);
        }
        let req = self
            .http
            .post(self.url(method))
            .multipart(form)
            .timeout(self.opts.timeout);
        let answer = self.send(method, chat_of(params), req).await?;
        parse_result(method, &answer.body)
    }

    /// `getUpdates` with a long-poll `timeout`; every update is kept as Telegram sent it.
    pub async fn get_updates(
        &self,
        offset: Option<i64>,
        limit: u32,
        timeout: Duration,
        allowed_updates: &[&str],
    ) -> Result<Vec<RawUpdate>, CallError> {
        let mut params = serde_json::json!({
            "timeout": timeout.as_secs(),
            "limit": limit.clamp(1, 100),
            "allowed_updates": allowed_updates,
        });
        if let Some(o) = offset {
            params["offset"] = Value::from(o);
        }
        let req = self
            .http
            .post(self.url("getUpdates"))
            .json(&params)
            .timeout(timeout + self.opts.timeout);
        let body = self.send("getUpdates", None, req).await?.body;
        let answer: Answer<'_> = serde_json::from_slice(&body)
            .map_err(|e| CallError::Retryable(format!("getUpdates: unreadable answer: {e}")))?;
        if !answer.ok {
            return Err(api_error(&answer));
        }
        let raw = answer.result.map(RawValue::get).unwrap_or("[]");
        parse_updates(raw).map_err(|e| CallError::Retryable(format!("getUpdates: {e}")))
    }

    /// Downloads a file by its `file_path` (from `getFile`).
    pub async fn download(&self, file_path: &str) -> Result<Bytes, CallError> {
        let url = format!(
            "{}/file/bot{}/{}",
            self.base,
            self.token.expose(),
            file_path
        );
        let resp = self
            .http
            .get(url)
            .timeout(self.opts.timeout * 4)
            .send()
            .await
            .map_err(|e| CallError::Retryable(format!("download: {}", self.describe(&e))))?;
        let status = resp.status().as_u16();
        let header_wait = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = resp
            .bytes()
            .await
            .map_err(|e| CallError::Retryable(format!("download: {}", self.describe(&e))))?;
        if status == 200 {
            return Ok(body);
        }
        // A rate limit on the file server is a wait, not a refusal of the file.
        if status == 429 {
            let from_body = serde_json::from_slice::<Answer<'_>>(&body)
                .ok()
                .and_then(|a| a.parameters.and_then(|p| p.retry_after));
            let secs = from_body.or(header_wait).unwrap_or(1).max(1);
            return Err(CallError::Flood {
                retry_after: Duration::from_secs(secs),
                chat_id: None,
            });
        }
        if status >= 500 {
            return Err(CallError::Retryable(format!("download: HTTP {status}")));
        }
        let description = format!("download failed with HTTP {status}");
        Err(CallError::Api(ApiError {
            code: status,
            kind: ApiErrorKind::classify(status, &description),
            description,
        }))
    }

    /// Sends a request and returns the body of any answer that is not a transport failure, 5xx
    /// or 429, classifying those.
    async fn send(
        &self,
        method: &str,
        chat_id: Option<i64>,
        req: reqwest::RequestBuilder,
    ) -> Result<Answered, CallError> {
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let stage = if e.is_connect() {
                    Stage::NotSent
                } else {
                    Stage::MaybeProcessed
                };
                return Err(unknown_outcome(method, stage, self.describe(&e)));
            }
        };
        let status = resp.status().as_u16();
        let header_wait = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let date = resp
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok());
        let body = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => {
                return Err(unknown_outcome(
                    method,
                    Stage::MaybeProcessed,
                    self.describe(&e),
                ));
            }
        };
        if status == 429 {
            let from_body = serde_json::from_slice::<Answer<'_>>(&body)
                .ok()
                .and_then(|a| a.parameters.and_then(|p| p.retry_after));
            let secs = from_body.or(header_wait).unwrap_or(1).max(1);
            return Err(CallError::Flood {
                retry_after: Duration::from_secs(secs),
                chat_id,
            });
        }
        if status >= 500 {
            return Err(unknown_outcome(
                method,
                Stage::MaybeProcessed,
                format!("HTTP {status}"),
            ));
        }
        Ok(Answered { body, date })
    }
}

/// An answer's body and the server's clock.
struct Answered {
    body: Bytes,
    date: Option<SystemTime>,
}

fn chat_of(params: &Value) -> Option<i64> {
    params
        .get("chat_id")
        .and_then(|c| c.as_i64().or_else(|| c.as_str()?.parse().ok()))
}

/// A failure where Telegram may have done the work: retryable only for repeatable methods.
fn unknown_outcome(method: &str, stage: Stage, detail: String) -> CallError {
    match (stage, safety(method)) {
        (Stage::NotSent, _) | (_, Safety::Repeatable) => {
            CallError::Retryable(format!("{method}: {detail}"))
        }
        (Stage::MaybeProcessed, Safety::NonRepeatable) => {
            CallError::CommitUnknown(format!("{method}: {detail}"))
        }
    }
}

/// The variable a route's proxy came from, for an error about it.
fn proxy_var(route: &Route) -> &'static str {
    match route {
        Route::Proxy(p) | Route::Exempt { proxy: p, .. } => p.var,
        Route::Direct => "the proxy variables",
    }
}

/// A transport error without its URL (which carries the token) but with its causes.
fn describe(e: &reqwest::Error) -> String {
    use std::error::Error;
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else {
        "transport failure".to_owned()
    };
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !part.contains("/bot") {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

fn api_error(answer: &Answer<'_>) -> CallError {
    let code = answer.error_code.unwrap_or(400);
    let description = answer
        .description
        .clone()
        .unwrap_or_else(|| format!("error {code}"));
    CallError::Api(ApiError {
        code,
        kind: ApiErrorKind::classify(code, &description),
        description,
    })
}

fn parse_result(method: &str, body: &[u8]) -> Result<Value, CallError> {
    let answer: Answer<'_> = match serde_json::from_slice(body) {
        Ok(a) => a,
        // A 2xx/4xx that is not Telegram's JSON: a proxy or a broken answer. For a send, the
        // effect may have happened.
        Err(e) => {
            return Err(unknown_outcome(
                method,
                Stage::MaybeProcessed,
                format!("unreadable answer: {e}"),
            ));
        }
    };
    if !answer.ok {
        return Err(api_error(&answer));
    }
    match answer.result {
        Some(raw) => serde_json::from_str(raw.get()).map_err(|e| {
            unknown_outcome(
                method,
                Stage::MaybeProcessed,
                format!("unreadable result: {e}"),
            )
        }),
        None => Err(unknown_outcome(
            method,
            Stage::MaybeProcessed,
            "success without a result".into(),
        )),
    }
}
