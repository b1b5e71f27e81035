//! Send pacing: token buckets per chat and for the bot, plus flood waits (`retry_after`) that
//! the caller persists so a restart does not hammer Telegram during a penalty. Times are Unix
//! milliseconds supplied by the caller, so the whole thing is deterministic.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Budgets. Telegram allows about one message per second per chat with short bursts and about
/// 30 per second across chats; a local Bot API server or a fake may allow more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PacingConfig {
    /// Sustained sends per second to one chat.
    pub per_chat_per_sec: f64,
    /// Burst to one chat.
    pub per_chat_burst: u32,
    /// Sustained sends per minute to one group (Telegram: 20); a group's chat (negative id)
    /// gets the lower of this and the chat rate.
    pub per_group_per_min: f64,
    /// Sustained sends per second overall.
    pub global_per_sec: f64,
    /// Burst overall.
    pub global_burst: u32,
}

impl Default for PacingConfig {
    fn default() -> Self {
        Self {
            per_chat_per_sec: 1.0,
            per_chat_burst: 3,
            per_group_per_min: 20.0,
            global_per_sec: 25.0,
            global_burst: 25,
        }
    }
}

/// Where a flood wait applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FloodScope {
    /// The whole bot.
    Global,
    /// One chat.
    Chat(i64),
}

impl FloodScope {
    /// Stable text form for storage: `global` or `chat:<id>`.
    pub fn key(&self) -> String {
        match self {
            Self::Global => "global".into(),
            Self::Chat(c) => format!("chat:{c}"),
        }
    }

    /// The scope of a wait Telegram imposed on `chat` (`None`: the whole bot).
    pub fn of(chat: Option<i64>) -> Self {
        chat.map_or(Self::Global, Self::Chat)
    }

    /// Parses [`FloodScope::key`].
    pub fn from_key(key: &str) -> Option<Self> {
        if key == "global" {
            return Some(Self::Global);
        }
        key.strip_prefix("chat:")?.parse().ok().map(Self::Chat)
    }
}

#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

impl Bucket {
    fn refill(&mut self, per_sec: f64, burst: u32, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * per_sec).min(f64::from(burst.max(1)));
        self.at_ms = now_ms.max(self.at_ms);
    }

    /// How long until a token is free while `held` are held by calls under way.
    fn wait_ms_holding(&self, per_sec: f64, held: u32) -> u64 {
        let tokens = self.tokens - f64::from(held);
        if tokens >= 1.0 {
            0
        } else if per_sec <= 0.0 {
            u64::MAX / 4
        } else {
            ((1.0 - tokens) / per_sec * 1000.0).ceil() as u64
        }
    }
}

/// The share of each configured rate the pacer keeps unused: two sends counted a second apart
/// can reach Telegram a few milliseconds closer together (the first one slowed on its way),
/// and a server that counts exactly refuses the second. 2 % is 20 ms a second.
pub const RATE_SLACK: f64 = 0.02;

/// Budgets and flood waits for one bot.
#[derive(Debug, Clone)]
pub struct Pacer {
    cfg: PacingConfig,
    chats: HashMap<i64, Bucket>,
    global: Option<Bucket>,
    waits: HashMap<FloodScope, u64>,
    /// Calls under way per chat (`None`: without a chat): each is counted when it is over
    /// ([`Pacer::end`]), and until then it holds a token, so that whoever else calls (the
    /// sender, the topics task) sees it.
    in_flight: HashMap<Option<i64>, u32>,
}

impl Pacer {
    /// A pacer with full buckets.
    pub fn new(cfg: PacingConfig) -> Self {
        Self {
            cfg,
            chats: HashMap::new(),
            global: None,
            waits: HashMap::new(),
            in_flight: HashMap::new(),
        }
    }

    /// Records a flood wait until `until_ms` (keeps the later of two).
    pub fn impose(&mut self, scope: FloodScope, until_ms: u64) {
        let e = self.waits.entry(scope).or_insert(0);
        *e = (*e).max(until_ms);
    }

    /// Flood waits still running at `now_ms`, with their end.
    pub fn waits(&self, now_ms: u64) -> Vec<(FloodScope, u64)> {
        let mut v: Vec<_> = self
            .waits
            .iter()
            .filter(|(_, u)| **u > now_ms)
            .map(|(s, u)| (*s, *u))
            .collect();
        v.sort();
        v
    }

    /// How long a send to `chat` must wait (zero: go now).
    pub fn ready_in(&mut self, chat: Option<i64>, now_ms: u64) -> Duration {
        let mut wait = 0u64;
        for scope in [Some(FloodScope::Global), chat.map(FloodScope::Chat)]
            .into_iter()
            .flatten()
        {
            if let Some(until) = self.waits.get(&scope) {
                wait = wait.max(until.saturating_sub(now_ms));
            }
        }
        let cfg = &self.cfg;
        let g = self.global.get_or_insert_with(|| Bucket {
            tokens: f64::from(cfg.global_burst),
            at_ms: now_ms,
        });
        let global_rate = cfg.global_per_sec * (1.0 - RATE_SLACK);
        g.refill(global_rate, cfg.global_burst, now_ms);
        let all_flying: u32 = self.in_flight.values().sum();
        wait = wait.max(g.wait_ms_holding(global_rate, all_flying));
        if let Some(c) = chat {
            let b = self.chats.entry(c).or_insert_with(|| Bucket {
                tokens: f64::from(cfg.per_chat_burst),
                at_ms: now_ms,
            });
            let per_sec = if c < 0 {
                cfg.per_chat_per_sec.min(cfg.per_group_per_min / 60.0)
            } else {
                cfg.per_chat_per_sec
            };
            let chat_rate = per_sec * (1.0 - RATE_SLACK);
            b.refill(chat_rate, cfg.per_chat_burst, now_ms);
            let flying = self.in_flight.get(&chat).copied().unwrap_or(0);
            wait = wait.max(b.wait_ms_holding(chat_rate, flying));
        }
        Duration::from_millis(wait)
    }

    /// A call to `chat` starts (once `ready_in` is zero): it holds a token until [`Pacer::end`]
    /// counts it.
    pub fn begin(&mut self, chat: Option<i64>) {
        *self.in_flight.entry(chat).or_insert(0) += 1;
    }

    /// A call [`Pacer::begin`] started is over: counted now, when Telegram has counted it.
    pub fn end(&mut self, chat: Option<i64>, now_ms: u64) {
        self.release(chat);
        self.consume(chat, now_ms);
    }

    /// A call [`Pacer::begin`] started was not made after all (its files were gone, it could
    /// not be read): its token is free again, uncounted.
    pub fn release(&mut self, chat: Option<i64>) {
        if let Some(n) = self.in_flight.get_mut(&chat) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(&chat);
            }
        }
    }

    /// Counts a send to `chat` (call once `ready_in` is zero).
    pub fn consume(&mut self, chat: Option<i64>, now_ms: u64) {
        let _ = self.ready_in(chat, now_ms);
        if let Some(g) = self.global.as_mut() {
            g.tokens -= 1.0;
        }
        if let Some(b) = chat.and_then(|c| self.chats.get_mut(&c)) {
            b.tokens -= 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_chat_burst_then_one_per_second() {
        let mut p = Pacer::new(PacingConfig::default());
        for _ in 0..3 {
            assert_eq!(p.ready_in(Some(1), 0), Duration::ZERO);
            p.consume(Some(1), 0);
        }
        // A second, and the slack: 1000 / 0.98.
        assert_eq!(p.ready_in(Some(1), 0), Duration::from_millis(1021));
        assert_eq!(
            p.ready_in(Some(2), 0),
            Duration::ZERO,
            "other chats have their own budget"
        );
        assert!(p.ready_in(Some(1), 1000) > Duration::ZERO);
        assert_eq!(p.ready_in(Some(1), 1021), Duration::ZERO);
    }

    /// Two tasks calling one chat (the sender, the topics task): a call under way holds its
    /// token, so the other waits for the budget instead of arriving in the same millisecond.
    #[test]
    fn a_call_under_way_holds_its_token_until_it_is_counted() {
        let mut p = Pacer::new(PacingConfig::default());
        for _ in 0..2 {
            p.consume(Some(1), 0);
        }
        assert_eq!(p.ready_in(Some(1), 0), Duration::ZERO, "one token left");
        p.begin(Some(1));
        assert!(
            p.ready_in(Some(1), 0) > Duration::ZERO,
            "the call under way holds the last token"
        );
        assert_eq!(p.ready_in(Some(2), 0), Duration::ZERO, "not another chat's");
        p.end(Some(1), 400);
        // Counted at its end: the next token is a paced interval after it.
        assert_eq!(p.ready_in(Some(1), 400), Duration::from_millis(1021 - 400));
        assert!(p.in_flight.is_empty());
        // A call begun and not made gives its token back, uncounted.
        let before = p.ready_in(Some(1), 1500);
        assert_eq!(before, Duration::ZERO, "one token again");
        p.begin(Some(1));
        assert!(p.ready_in(Some(1), 1500) > before);
        p.release(Some(1));
        assert_eq!(p.ready_in(Some(1), 1500), before);
        assert!(p.in_flight.is_empty());
    }

    #[test]
    fn a_group_gets_twenty_a_minute_after_its_burst() {
        let mut p = Pacer::new(PacingConfig::default());
        for _ in 0..3 {
            assert_eq!(p.ready_in(Some(-100), 0), Duration::ZERO);
            p.consume(Some(-100), 0);
        }
        // Three seconds, and the slack: 3000 / 0.98.
        assert_eq!(p.ready_in(Some(-100), 0), Duration::from_millis(3062));
        assert_eq!(
            p.ready_in(Some(100), 0),
            Duration::ZERO,
            "a private chat is not a group"
        );
    }

    /// The pacer's time never goes back: a caller's clock may step back (the wall clock, a
    /// claim judged with a time read before the sender's last count), and an earlier time
    /// neither refills a bucket nor moves its time back, so the pace holds.
    #[test]
    fn an_earlier_time_neither_refills_nor_moves_the_bucket_back() {
        let mut p = Pacer::new(PacingConfig::default());
        for _ in 0..3 {
            p.consume(Some(1), 10_000);
        }
        let wait = p.ready_in(Some(1), 10_000);
        assert_eq!(wait, Duration::from_millis(1021));
        assert_eq!(p.ready_in(Some(1), 5_000), wait, "no refill from the past");
        p.consume(Some(1), 5_000);
        // Counted at the bucket's own time (10 s), not at 5 s: the next send is two intervals on.
        assert_eq!(p.ready_in(Some(1), 10_000), Duration::from_millis(2041));
        assert_eq!(p.ready_in(Some(1), 12_041), Duration::ZERO);
    }

    #[test]
    fn flood_waits_dominate_and_expire() {
        let mut p = Pacer::new(PacingConfig::default());
        p.impose(FloodScope::Chat(1), 10_000);
        p.impose(FloodScope::Chat(1), 5_000);
        assert_eq!(p.ready_in(Some(1), 2_000), Duration::from_millis(8_000));
        assert_eq!(p.waits(2_000), vec![(FloodScope::Chat(1), 10_000)]);
        p.impose(FloodScope::Global, 3_000);
        assert_eq!(p.ready_in(Some(2), 2_000), Duration::from_millis(1_000));
        assert_eq!(p.ready_in(Some(1), 10_000), Duration::ZERO);
        assert!(p.waits(10_000).is_empty());
        assert_eq!(
            FloodScope::from_key(&FloodScope::Chat(-5).key()),
            Some(FloodScope::Chat(-5))
        );
        assert_eq!(FloodScope::from_key("global"), Some(FloodScope::Global));
    }
}
