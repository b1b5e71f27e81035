//! Fault injection: per method (or every method), by count or by probability.

use serde::{Deserialize, Serialize};

/// What a fault does to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer `500 Internal Server Error` without doing anything.
    #[serde(rename = "http_500")]
    Http500,
    /// Wait `delay_ms` before handling the request normally.
    Delay,
    /// Close the connection before the request is handled: nothing happens.
    DropBefore,
    /// Handle the request (its effect happens), then close the connection instead of answering.
    CommitThenDrop,
    /// Answer `429 Too Many Requests` with `retry_after`, and keep refusing the chat (or, without
    /// a chat, the bot) until that wait has passed.
    Flood,
    /// Answer `400 Bad Request: message thread not found` without doing anything.
    ThreadNotFound,
    /// Answer `400 Bad Request: can't parse entities: ...` without doing anything: the request
    /// is refused as written (a renderer's fallback path).
    BadRequest,
    /// Take the request and never answer it, nor close the connection: nothing happens, as
    /// when a network drops a connection silently (a NAT that forgot it, a dead Wi-Fi). The
    /// request stays held after the rule is cleared, as a dead connection stays dead: only
    /// the client giving up ends it. With `probability: 1.0` every matching request hangs
    /// until the rule is cleared.
    Hang,
    /// Handle the request (its effect happens), answer `200` with the whole answer's
    /// `Content-Length`, write half of the body and close the connection: a connection reset
    /// while the answer was on its way (a client sees headers, then a body that ends early).
    ResetMidBody,
}

/// The name a fault rule uses for file downloads (`GET /file/bot<token>/<path>`), which are not
/// Bot API methods: only a rule naming it matches them (`*` means every method, and a download
/// is not one).
pub const DOWNLOAD: &str = "download";

/// A fault rule as the control API takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultSpec {
    /// Method name (case-insensitive), `*` for every method, or [`DOWNLOAD`] for file downloads.
    pub method: String,
    /// What happens.
    pub kind: FaultKind,
    /// Fire this many times, then retire. With neither `count` nor `probability`: once.
    #[serde(default)]
    pub count: Option<u32>,
    /// Fire with this probability on every matching request (seeded, reproducible).
    #[serde(default)]
    pub probability: Option<f64>,
    /// For `flood`: the wait in seconds (default 5).
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// For `delay`: milliseconds (default 1000).
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

/// A rule with its identity and remaining budget.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRule {
    /// Identity for listing.
    pub id: u64,
    /// The rule as given.
    #[serde(flatten)]
    pub spec: FaultSpec,
    /// Times it has fired.
    pub fired: u32,
}

/// The outcome of consulting the rules for one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultPlan {
    /// Total delay to apply first.
    pub delay_ms: u64,
    /// The first non-delay fault that fired.
    pub fault: Option<(FaultKind, u64)>,
}

/// Every active rule.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Vec<FaultRule>,
    next_id: u64,
}

impl Faults {
    /// Adds a rule; returns its id.
    pub fn add(&mut self, spec: FaultSpec) -> u64 {
        self.next_id += 1;
        self.rules.push(FaultRule {
            id: self.next_id,
            spec,
            fired: 0,
        });
        self.next_id
    }

    /// Active rules.
    pub fn list(&self) -> &[FaultRule] {
        &self.rules
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// Decides what happens to a request for `method`; `roll` yields uniform numbers in [0, 1).
    pub fn plan(&mut self, method: &str, mut roll: impl FnMut() -> f64) -> FaultPlan {
        let mut plan = FaultPlan::default();
        for rule in &mut self.rules {
            if plan.fault.is_some() && rule.spec.kind != FaultKind::Delay {
                continue;
            }
            let every = rule.spec.method == "*" && !method.eq_ignore_ascii_case(DOWNLOAD);
            if !every && !rule.spec.method.eq_ignore_ascii_case(method) {
                continue;
            }
            let fires = match (rule.spec.count, rule.spec.probability) {
                (Some(0), _) => false,
                (_, Some(p)) => roll() < p,
                (Some(_), None) => true,
                (None, None) => rule.fired == 0,
            };
            if !fires {
                continue;
            }
            rule.fired += 1;
            if let Some(c) = rule.spec.count.as_mut() {
                *c -= 1;
            }
            match rule.spec.kind {
                FaultKind::Delay => plan.delay_ms += rule.spec.delay_ms.unwrap_or(1000),
                kind => {
                    let arg = match kind {
                        FaultKind::Flood => rule.spec.retry_after.unwrap_or(5),
                        _ => 0,
                    };
                    plan.fault = Some((kind, arg));
                }
            }
        }
        self.rules
            .retain(|r| match (r.spec.count, r.spec.probability) {
                (Some(0), _) => false,
                (None, None) => r.fired == 0,
                _ => true,
            });
        plan
    }
}

/// SplitMix64: a small seeded generator so probabilistic faults replay exactly.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(method: &str, kind: FaultKind, count: Option<u32>, p: Option<f64>) -> FaultSpec {
        FaultSpec {
            method: method.into(),
            kind,
            count,
            probability: p,
            retry_after: None,
            delay_ms: None,
        }
    }

    #[test]
    fn count_rules_fire_exactly_count_times() {
        let mut f = Faults::default();
        f.add(spec("sendMessage", FaultKind::Http500, Some(2), None));
        let kinds: Vec<_> = (0..4)
            .map(|_| f.plan("SENDMESSAGE", || 0.0).fault)
            .collect();
        assert_eq!(
            kinds,
            vec![
                Some((FaultKind::Http500, 0)),
                Some((FaultKind::Http500, 0)),
                None,
                None
            ]
        );
        assert!(f.list().is_empty());
    }

    #[test]
    fn rule_without_count_or_probability_fires_once_and_only_for_its_method() {
        let mut f = Faults::default();
        f.add(spec("getMe", FaultKind::DropBefore, None, None));
        assert_eq!(f.plan("sendMessage", || 0.0).fault, None);
        assert_eq!(
            f.plan("getme", || 0.0).fault,
            Some((FaultKind::DropBefore, 0))
        );
        assert_eq!(f.plan("getMe", || 0.0).fault, None);
    }

    #[test]
    fn delays_add_up_and_combine_with_one_fault() {
        let mut f = Faults::default();
        let mut d = spec("*", FaultKind::Delay, Some(1), None);
        d.delay_ms = Some(30);
        f.add(d.clone());
        f.add(spec("*", FaultKind::Flood, Some(1), None));
        f.add(d);
        let plan = f.plan("x", || 0.0);
        assert_eq!(
            plan,
            FaultPlan {
                delay_ms: 60,
                fault: Some((FaultKind::Flood, 5))
            }
        );
    }

    #[test]
    fn downloads_match_only_a_rule_that_names_them() {
        let mut f = Faults::default();
        f.add(spec("*", FaultKind::Http500, Some(5), None));
        assert_eq!(f.plan(DOWNLOAD, || 0.0).fault, None);
        f.add(spec("Download", FaultKind::DropBefore, Some(1), None));
        assert_eq!(
            f.plan(DOWNLOAD, || 0.0).fault,
            Some((FaultKind::DropBefore, 0))
        );
    }

    #[test]
    fn hang_is_a_fault_of_its_own_and_reads_as_hang() {
        let mut f = Faults::default();
        f.add(spec("*", FaultKind::Hang, None, Some(1.0)));
        for m in ["getUpdates", "sendMessage"] {
            assert_eq!(f.plan(m, || 0.5).fault, Some((FaultKind::Hang, 0)), "{m}");
        }
        // A rule with a probability stays until it is cleared.
        assert_eq!(f.list().len(), 1);
        f.clear();
        assert_eq!(f.plan("getUpdates", || 0.5).fault, None);
        let read =
            serde_json::from_str::<FaultSpec>(r#"{"method":"*","kind":"hang","probability":1.0}"#);
        assert_eq!(read.map(|r| r.kind).ok(), Some(FaultKind::Hang));
    }

    #[test]
    fn probability_is_reproducible_with_a_seed() {
        let run = |seed| {
            let mut f = Faults::default();
            f.add(spec("*", FaultKind::Http500, None, Some(0.3)));
            let mut rng = Rng::new(seed);
            (0..1000)
                .filter(|_| f.plan("m", || rng.next_f64()).fault.is_some())
                .count()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert!((200..400).contains(&a), "0.3 of 1000 fired {a} times");
    }
}
