//! The Bot API calls the durable path makes (poller, sender, topics, webhook), behind a trait:
//! the hub uses [`telegram::Client`]; a simulation puts an in-memory Telegram behind it, with
//! the same error classes ([`CallError`]) the client reports.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use telegram::{CallError, Client, RawUpdate, Upload};

/// A boxed call in flight (the trait is used as `dyn`, so its futures are boxed).
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, CallError>> + Send + 'a>>;

/// The calls of the durable path.
pub trait BotApi: Send + Sync {
    /// A JSON call.
    fn call<'a>(&'a self, method: &'a str, params: &'a Value) -> Call<'a, Value>;
    /// A call that uploads files.
    fn call_multipart<'a>(
        &'a self,
        method: &'a str,
        params: &'a Value,
        files: Vec<Upload>,
    ) -> Call<'a, Value>;
    /// `getUpdates` with a long-poll `timeout`.
    fn get_updates<'a>(
        &'a self,
        offset: Option<i64>,
        limit: u32,
        timeout: Duration,
        allowed_updates: &'a [&'a str],
    ) -> Call<'a, Vec<RawUpdate>>;
}

/// A shared Bot API.
pub type Api = Arc<dyn BotApi>;

impl BotApi for Client {
    fn call<'a>(&'a self, method: &'a str, params: &'a Value) -> Call<'a, Value> {
        Box::pin(Client::call(self, method, params))
    }

    fn call_multipart<'a>(
        &'a self,
        method: &'a str,
        params: &'a Value,
        files: Vec<Upload>,
    ) -> Call<'a, Value> {
        Box::pin(Client::call_multipart(self, method, params, files))
    }

    fn get_updates<'a>(
        &'a self,
        offset: Option<i64>,
        limit: u32,
        timeout: Duration,
        allowed_updates: &'a [&'a str],
    ) -> Call<'a, Vec<RawUpdate>> {
        Box::pin(Client::get_updates(
            self,
            offset,
            limit,
            timeout,
            allowed_updates,
        ))
    }
}
