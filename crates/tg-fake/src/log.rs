//! The request log: every Bot API request the fake received, with its outcome.

use std::collections::VecDeque;

use serde::Serialize;
use serde_json::Value;

/// Entries kept before the oldest are dropped (keeps benchmarks' memory flat).
pub const LOG_CAPACITY: usize = 20_000;

/// One logged request.
#[derive(Debug, Clone, Serialize)]
pub struct RequestEntry {
    /// Increasing sequence number, from 1.
    pub seq: u64,
    /// Fake clock time when the request arrived.
    pub at_ms: u64,
    /// The same moment in microseconds (when the request was handled, before its answer is
    /// written).
    #[serde(default)]
    pub at_us: u64,
    /// The bot's id (the token's numeric part; the token itself is never logged).
    pub bot_id: i64,
    /// The method as documented (`sendMessage`), or as called when unknown.
    pub method: String,
    /// Parameters, files summarised.
    pub params: Value,
    /// HTTP status answered; `null` when the connection was dropped instead.
    pub status: Option<u16>,
    /// `description` of an error answer.
    pub error: Option<String>,
    /// The injected fault, if any (`http_500`, `commit_then_drop`, ...).
    pub fault: Option<String>,
    /// Whether the method's effect happened (false for faults that act before handling).
    pub committed: bool,
}

/// Bounded log.
#[derive(Debug, Default)]
pub struct RequestLog {
    entries: VecDeque<RequestEntry>,
    next_seq: u64,
}

impl RequestLog {
    /// Records an entry, assigning its sequence number.
    pub fn push(&mut self, mut entry: RequestEntry) -> u64 {
        self.next_seq += 1;
        entry.seq = self.next_seq;
        if self.entries.len() == LOG_CAPACITY {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
        self.next_seq
    }

    /// Entries after `since` (a sequence number), optionally only for `method`.
    pub fn query(&self, since: u64, method: Option<&str>) -> Vec<RequestEntry> {
        self.entries
            .iter()
            .filter(|e| e.seq > since)
            .filter(|e| method.is_none_or(|m| e.method.eq_ignore_ascii_case(m)))
            .cloned()
            .collect()
    }

    /// Forgets everything (sequence numbers keep increasing).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
