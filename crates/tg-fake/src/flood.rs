//! Flood control: token buckets per chat and for the whole bot, and penalties that keep
//! refusing until their wait has passed, as Telegram's `429 retry after N` does.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The rate model. Disabled by default so that tests opt in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FloodConfig {
    /// Whether requests are counted at all.
    pub enabled: bool,
    /// Messages per second one chat sustains (Telegram: about 1).
    pub per_chat_per_sec: f64,
    /// Burst one chat may send at once.
    pub per_chat_burst: u32,
    /// Messages per minute one group sustains (Telegram: "no more than 20 messages per
    /// minute in the same group"); a group's chat has the lower of this and the chat rate.
    pub per_group_per_min: f64,
    /// Messages per second across all chats (Telegram: about 30).
    pub global_per_sec: f64,
    /// Burst across all chats.
    pub global_burst: u32,
    /// Seconds added to a running penalty by every request refused during it ("retries during
    /// the wait extend it").
    pub extend_on_retry_secs: u64,
    /// Draft updates (`sendMessageDraft`, `sendRichMessageDraft`) per second one chat
    /// sustains. Telegram made drafts for streaming and publishes no figure; the model gives
    /// them a budget of their own, so a stream never eats the chat's message budget, and a
    /// draft refused for going too fast penalizes only that chat's drafts.
    pub drafts_per_chat_per_sec: f64,
    /// Burst of draft updates one chat may send at once.
    pub drafts_burst: u32,
}

impl Default for FloodConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            per_chat_per_sec: 1.0,
            per_chat_burst: 3,
            per_group_per_min: 20.0,
            global_per_sec: 30.0,
            global_burst: 30,
            extend_on_retry_secs: 0,
            drafts_per_chat_per_sec: 4.0,
            drafts_burst: 4,
        }
    }
}

#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
    penalty_until_ms: u64,
}

/// Per-bot flood state.
#[derive(Debug, Default)]
pub struct Flood {
    chats: HashMap<i64, Bucket>,
    global: Option<Bucket>,
    drafts: HashMap<i64, Bucket>,
}

/// Where a flood wait applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One chat.
    Chat(i64),
    /// The whole bot.
    Global,
}

impl Flood {
    /// Counts one request to `chat` at `now_ms`; `Err(secs)` when it must be refused.
    pub fn admit(&mut self, cfg: &FloodConfig, chat: Option<i64>, now_ms: u64) -> Result<(), u64> {
        let global = self
            .global
            .get_or_insert_with(|| Bucket::full(cfg.global_burst, now_ms));
        // Penalties (also forced ones from fault injection) apply even with the rate model off.
        refuse_during_penalty(global, cfg, now_ms)?;
        let mut chat_bucket = match chat {
            Some(c) => {
                let b = self
                    .chats
                    .entry(c)
                    .or_insert_with(|| Bucket::full(cfg.per_chat_burst, now_ms));
                refuse_during_penalty(b, cfg, now_ms)?;
                Some(b)
            }
            None => None,
        };
        if !cfg.enabled {
            return Ok(());
        }
        if let Some(b) = chat_bucket.as_mut() {
            // Groups' chats have negative ids.
            let rate = match chat {
                Some(c) if c < 0 => cfg.per_chat_per_sec.min(cfg.per_group_per_min / 60.0),
                _ => cfg.per_chat_per_sec,
            };
            b.refill(rate, cfg.per_chat_burst, now_ms);
            if b.tokens < 1.0 {
                return Err(b.start_penalty(rate, now_ms));
            }
        }
        let global = self
            .global
            .get_or_insert_with(|| Bucket::full(cfg.global_burst, now_ms));
        global.refill(cfg.global_per_sec, cfg.global_burst, now_ms);
        if global.tokens < 1.0 {
            return Err(global.start_penalty(cfg.global_per_sec, now_ms));
        }
        global.tokens -= 1.0;
        if let Some(b) = chat.and_then(|c| self.chats.get_mut(&c)) {
            b.tokens -= 1.0;
        }
        Ok(())
    }

    /// Counts one draft update to `chat` at `now_ms` against the chat's draft budget (see
    /// [`FloodConfig::drafts_per_chat_per_sec`]); `Err(secs)` when it must be refused.
    pub fn admit_draft(&mut self, cfg: &FloodConfig, chat: i64, now_ms: u64) -> Result<(), u64> {
        // A forced or earned penalty on the chat or the bot stops drafts too.
        if let Some(g) = self.global.as_mut() {
            refuse_during_penalty(g, cfg, now_ms)?;
        }
        if let Some(c) = self.chats.get_mut(&chat) {
            refuse_during_penalty(c, cfg, now_ms)?;
        }
        let b = self
            .drafts
            .entry(chat)
            .or_insert_with(|| Bucket::full(cfg.drafts_burst, now_ms));
        refuse_during_penalty(b, cfg, now_ms)?;
        if !cfg.enabled {
            return Ok(());
        }
        b.refill(cfg.drafts_per_chat_per_sec, cfg.drafts_burst, now_ms);
        if b.tokens < 1.0 {
            return Err(b.start_penalty(cfg.drafts_per_chat_per_sec, now_ms));
        }
        b.tokens -= 1.0;
        Ok(())
    }

    /// Imposes a wait of `secs` on `scope` (fault injection).
    pub fn force(&mut self, scope: Scope, secs: u64, now_ms: u64) {
        let b = match scope {
            Scope::Chat(c) => self
                .chats
                .entry(c)
                .or_insert_with(|| Bucket::full(0, now_ms)),
            Scope::Global => self.global.get_or_insert_with(|| Bucket::full(0, now_ms)),
        };
        b.penalty_until_ms = b.penalty_until_ms.max(now_ms + secs * 1000);
    }

    /// Running penalties: `(scope, seconds left)`.
    pub fn penalties(&self, now_ms: u64) -> Vec<(Scope, u64)> {
        let mut out = Vec::new();
        if let Some(g) = self.global.as_ref().filter(|g| g.penalty_until_ms > now_ms) {
            out.push((Scope::Global, secs_left(g.penalty_until_ms, now_ms)));
        }
        let mut chats: Vec<_> = self.chats.iter().collect();
        chats.sort_by_key(|(c, _)| **c);
        for (c, b) in chats {
            if b.penalty_until_ms > now_ms {
                out.push((Scope::Chat(*c), secs_left(b.penalty_until_ms, now_ms)));
            }
        }
        out
    }
}

fn secs_left(until_ms: u64, now_ms: u64) -> u64 {
    until_ms.saturating_sub(now_ms).div_ceil(1000).max(1)
}

fn refuse_during_penalty(b: &mut Bucket, cfg: &FloodConfig, now_ms: u64) -> Result<(), u64> {
    if b.penalty_until_ms > now_ms {
        b.penalty_until_ms += cfg.extend_on_retry_secs * 1000;
        return Err(secs_left(b.penalty_until_ms, now_ms));
    }
    Ok(())
}

impl Bucket {
    fn full(burst: u32, now_ms: u64) -> Self {
        Self {
            tokens: f64::from(burst),
            at_ms: now_ms,
            penalty_until_ms: 0,
        }
    }

    fn refill(&mut self, per_sec: f64, burst: u32, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * per_sec).min(f64::from(burst.max(1)));
        self.at_ms = now_ms;
    }

    /// The wait until one token is back, in whole seconds (at least 1), enforced as a penalty.
    fn start_penalty(&mut self, per_sec: f64, now_ms: u64) -> u64 {
        let need = (1.0 - self.tokens).max(0.0);
        let wait_ms = if per_sec > 0.0 {
            (need / per_sec * 1000.0).ceil() as u64
        } else {
            3_600_000
        };
        let secs = wait_ms.div_ceil(1000).max(1);
        self.penalty_until_ms = now_ms + secs * 1000;
        secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_have_their_own_budget() {
        let cfg = on();
        let mut f = Flood::default();
        // Four drafts at once, then one every 250 ms, never touching the message budget.
        for i in 0..4 {
            assert_eq!(f.admit_draft(&cfg, 1, 0), Ok(()), "draft {i}");
        }
        assert!(f.admit_draft(&cfg, 1, 0).is_err());
        assert!(
            f.admit_draft(&cfg, 1, 500).is_err(),
            "the penalty runs its second"
        );
        assert_eq!(f.admit_draft(&cfg, 1, 1000), Ok(()));
        assert_eq!(f.admit(&cfg, Some(1), 1000), Ok(()), "messages unaffected");
        let mut f = Flood::default();
        for t in (0..10_000).step_by(250) {
            assert_eq!(f.admit_draft(&cfg, 2, t), Ok(()), "at {t} ms");
        }
    }

    fn on() -> FloodConfig {
        FloodConfig {
            enabled: true,
            ..FloodConfig::default()
        }
    }

    #[test]
    fn burst_then_refusal_until_the_wait_passes() {
        let cfg = on();
        let mut f = Flood::default();
        for _ in 0..3 {
            assert_eq!(f.admit(&cfg, Some(1), 0), Ok(()));
        }
        let wait = f.admit(&cfg, Some(1), 0).err();
        assert_eq!(wait, Some(1));
        // still refused just before the wait ends, even though a token has refilled by then
        assert_eq!(f.admit(&cfg, Some(1), 999), Err(1));
        assert_eq!(f.admit(&cfg, Some(1), 1000), Ok(()));
        // another chat is unaffected
        assert_eq!(f.admit(&cfg, Some(2), 0), Ok(()));
    }

    #[test]
    fn disabled_model_only_enforces_forced_penalties() {
        let cfg = FloodConfig::default();
        let mut f = Flood::default();
        for _ in 0..100 {
            assert_eq!(f.admit(&cfg, Some(1), 0), Ok(()));
        }
        f.force(Scope::Chat(1), 7, 0);
        assert_eq!(f.admit(&cfg, Some(1), 10), Err(7));
        assert_eq!(f.admit(&cfg, Some(2), 10), Ok(()));
        assert_eq!(f.penalties(10), vec![(Scope::Chat(1), 7)]);
        assert_eq!(f.admit(&cfg, Some(1), 7000), Ok(()));
        f.force(Scope::Global, 2, 8000);
        assert_eq!(f.admit(&cfg, Some(3), 8000), Err(2));
    }

    #[test]
    fn global_budget_and_extension_on_retry() {
        let cfg = FloodConfig {
            global_burst: 2,
            global_per_sec: 1.0,
            extend_on_retry_secs: 2,
            ..on()
        };
        let mut f = Flood::default();
        assert_eq!(f.admit(&cfg, Some(1), 0), Ok(()));
        assert_eq!(f.admit(&cfg, Some(2), 0), Ok(()));
        assert_eq!(f.admit(&cfg, Some(3), 0), Err(1));
        assert_eq!(f.admit(&cfg, Some(3), 500), Err(3)); // 1 s penalty + 2 s extension, 0.5 s in
    }
}
