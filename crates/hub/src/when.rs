//! Times and durations as a person reads them: "2 h 12 min", "14:05", in the machine's time
//! zone (the person's, as a rule: the hub runs on their computer). Pure but for the zone, which
//! is read once from the system (`TZ`, `/etc/localtime`); UTC when there is none.

use std::sync::OnceLock;

use jiff::Timestamp;
use jiff::tz::TimeZone;

fn zone() -> &'static TimeZone {
    static ZONE: OnceLock<TimeZone> = OnceLock::new();
    ZONE.get_or_init(TimeZone::system)
}

/// A duration, rounded down to what matters at its size: `45 s`, `12 min`, `3 h 12 min`,
/// `2 d 5 h`.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    let (d, h, m) = (s / 86_400, s / 3600 % 24, s / 60 % 60);
    match () {
        _ if s < 60 => format!("{s} s"),
        _ if s < 3600 => format!("{m} min"),
        _ if d == 0 && m == 0 => format!("{h} h"),
        _ if d == 0 => format!("{h} h {m} min"),
        _ if h == 0 => format!("{d} d"),
        _ => format!("{d} d {h} h"),
    }
}

/// A moment in local time.
#[derive(Debug, Clone)]
pub struct Local(jiff::Zoned);

impl Local {
    /// `ms` since the Unix epoch, in the machine's zone (`None`: out of range).
    pub fn at(ms: i64) -> Option<Local> {
        Self::in_zone(ms, zone().clone())
    }

    /// `ms` in `zone` (tests).
    pub fn in_zone(ms: i64, zone: TimeZone) -> Option<Local> {
        Some(Local(Timestamp::from_millisecond(ms).ok()?.to_zoned(zone)))
    }

    /// `14:05`.
    pub fn clock(&self) -> String {
        self.0.strftime("%H:%M").to_string()
    }

    /// `2026-12-02`.
    pub fn day(&self) -> String {
        self.0.strftime("%Y-%m-%d").to_string()
    }

    /// `2026-12-02 14:05 Wed (UTC+01:00)`.
    pub fn stamp(&self) -> String {
        self.0.strftime("%Y-%m-%d %H:%M %a (UTC%:z)").to_string()
    }

    /// `14:05` when on the same day as `other`, else `2026-12-01 14:05`.
    pub fn clock_or_day(&self, other: &Local) -> String {
        if self.day() == other.day() {
            self.clock()
        } else {
            format!("{} {}", self.day(), self.clock())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_person_says_them() {
        let cases = [
            (0, "0 s"),
            (59_999, "59 s"),
            (60_000, "1 min"),
            (59 * 60_000, "59 min"),
            (3_600_000, "1 h"),
            (3 * 3_600_000 + 12 * 60_000 + 30_000, "3 h 12 min"),
            (86_400_000, "1 d"),
            (2 * 86_400_000 + 5 * 3_600_000 + 7 * 60_000, "2 d 5 h"),
            (-5, "0 s"),
        ];
        for (ms, want) in cases {
            assert_eq!(duration(ms), want, "{ms} ms");
        }
    }

    #[test]
    fn local_times_carry_their_zone() {
        let zone = TimeZone::fixed(jiff::tz::offset(1));
        // 2026-12-02 13:05 UTC
        let ms = 1_796_216_700_000;
        let t = Local::in_zone(ms, zone.clone()).unwrap_or_else(|| panic!("in range"));
        assert_eq!(t.stamp(), "2026-12-02 14:05 Wed (UTC+01:00)");
        assert_eq!(t.clock(), "14:05");
        let later = Local::in_zone(ms + 3_600_000, zone.clone()).unwrap_or_else(|| panic!());
        assert_eq!(t.clock_or_day(&later), "14:05");
        let next_day = Local::in_zone(ms + 86_400_000, zone).unwrap_or_else(|| panic!());
        assert_eq!(t.clock_or_day(&next_day), "2026-12-02 14:05");
    }
}
