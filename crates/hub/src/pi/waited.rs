//! How long a prompt waited before it reached pi, and how much of that its pi or the hub was
//! away: the part the person could not see. A prompt that queued behind work the person saw
//! running waited, but it was never stale: they knew. One that sat at Telegram while the hub
//! was stopped, or in the queue while its pi was gone, may be an order nobody means any more,
//! and is asked about before it runs ([`Waited::is_stale`]).
//!
//! What counts as away, from the store alone (no timers, no heartbeat):
//! - the time between the person sending it (Telegram's `date`) and the hub making its turn:
//!   the hub was stopped, or its network gone, and Telegram held it;
//! - when the turn was made before its pi's current connection began: the time from the later
//!   of (the turn's making, that pi's last leaving before) to the connection's start.
//!
//! Not counted, and said so in the README: a hub stopped while a turn already waited in its
//! queue for a pi that stayed away from the hub for no longer than the hub was stopped (the
//! store cannot tell a hub that was stopped for two hours from one that was idle), and a pi
//! that was connected but stuck.

/// A prompt's wait, as dispatch judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waited {
    /// When the person sent it (ms).
    pub sent_ms: i64,
    /// From sending to now (ms).
    pub total_ms: i64,
    /// The part of it its pi or the hub was away (ms).
    pub away_ms: i64,
}

impl Waited {
    /// Whether it must be asked about before it runs, with threshold `limit_ms` (`None`: the
    /// guard is off).
    pub fn is_stale(&self, limit_ms: Option<i64>) -> bool {
        limit_ms.is_some_and(|l| self.away_ms >= l)
    }
}

/// When a turn was sent and made, and when its pi's connection began and it last left before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// When the person sent it.
    pub sent_ms: i64,
    /// When the hub made its turn.
    pub created_ms: i64,
    /// When the pi it goes to connected (this connection).
    pub attached_ms: i64,
    /// When that pi (its identity) last went away before `attached_ms`, if ever.
    pub left_ms: Option<i64>,
}

/// Judges a wait at `now_ms`. Pure.
pub fn judge(t: Times, now_ms: i64) -> Waited {
    let sent = t.sent_ms.min(t.created_ms);
    let held_at_telegram = t.created_ms - sent;
    let pi_away = if t.created_ms < t.attached_ms {
        let from = t.left_ms.map_or(t.created_ms, |l| l.max(t.created_ms));
        (t.attached_ms - from).max(0)
    } else {
        0
    };
    Waited {
        sent_ms: sent,
        total_ms: (now_ms - sent).max(0),
        away_ms: held_at_telegram + pi_away,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;
    const LIMIT: Option<i64> = Some(30 * MIN);

    #[test]
    fn a_prompt_held_by_telegram_while_the_hub_was_stopped_is_stale() {
        let w = judge(
            Times {
                sent_ms: 0,
                created_ms: 2 * HOUR,
                attached_ms: 2 * HOUR - MIN,
                left_ms: None,
            },
            2 * HOUR + 1000,
        );
        assert_eq!(w.away_ms, 2 * HOUR);
        assert_eq!(w.total_ms, 2 * HOUR + 1000);
        assert!(w.is_stale(LIMIT));
        assert!(!w.is_stale(None), "the guard off asks about nothing");
    }

    #[test]
    fn a_prompt_behind_work_the_person_saw_is_not_stale() {
        // Its pi was connected when it arrived and stayed: two hours behind a running turn.
        let w = judge(
            Times {
                sent_ms: HOUR,
                created_ms: HOUR,
                attached_ms: 0,
                left_ms: None,
            },
            3 * HOUR,
        );
        assert_eq!(w.away_ms, 0);
        assert_eq!(w.total_ms, 2 * HOUR);
        assert!(!w.is_stale(LIMIT));
    }

    #[test]
    fn a_prompt_for_a_pi_that_was_away_counts_the_absence_only() {
        // Arrived at 1 h while its pi was gone since 0.5 h; the pi came back at 4 h.
        let w = judge(
            Times {
                sent_ms: HOUR,
                created_ms: HOUR,
                attached_ms: 4 * HOUR,
                left_ms: Some(HOUR / 2),
            },
            4 * HOUR,
        );
        assert_eq!(w.away_ms, 3 * HOUR);
        assert!(w.is_stale(LIMIT));
    }

    #[test]
    fn a_pi_that_left_after_the_prompt_arrived_counts_from_its_leaving() {
        // Queued at 1 h behind a running turn; the pi crashed at 2 h and came back at 2 h 5 min.
        let w = judge(
            Times {
                sent_ms: HOUR,
                created_ms: HOUR,
                attached_ms: 2 * HOUR + 5 * MIN,
                left_ms: Some(2 * HOUR),
            },
            2 * HOUR + 6 * MIN,
        );
        assert_eq!(w.away_ms, 5 * MIN);
        assert!(!w.is_stale(LIMIT));
        // The same pi away for three hours instead.
        let w = judge(
            Times {
                sent_ms: HOUR,
                created_ms: HOUR,
                attached_ms: 5 * HOUR,
                left_ms: Some(2 * HOUR),
            },
            5 * HOUR,
        );
        assert_eq!(w.away_ms, 3 * HOUR);
        assert!(w.is_stale(LIMIT));
    }

    #[test]
    fn a_date_after_the_making_or_a_clock_step_never_counts_negative() {
        let w = judge(
            Times {
                sent_ms: 10 * MIN,
                created_ms: 5 * MIN,
                attached_ms: 0,
                left_ms: None,
            },
            0,
        );
        assert_eq!((w.away_ms, w.total_ms), (0, 0));
        assert!(!w.is_stale(Some(1)));
    }

    #[test]
    fn the_threshold_is_inclusive() {
        let w = judge(
            Times {
                sent_ms: 0,
                created_ms: 30 * MIN,
                attached_ms: 0,
                left_ms: None,
            },
            30 * MIN,
        );
        assert!(w.is_stale(LIMIT));
        assert!(!w.is_stale(Some(30 * MIN + 1)));
    }
}
