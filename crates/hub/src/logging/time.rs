//! UTC timestamps as RFC 3339 text and back, and `--since` values, without a date library:
//! the log needs only UTC, milliseconds and the proleptic Gregorian calendar.

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]` (a space may stand for `T`; no zone means
/// UTC) or a bare date `YYYY-MM-DD` (midnight UTC) into Unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let s = text.trim();
    let date = s.get(..10)?;
    let (y, m, d) = parse_date(date)?;
    let days = days_from_civil(y, m, d);
    let rest = &s[10..];
    if rest.is_empty() {
        return Some(days * 86_400_000);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let hh: i64 = digits(rest.get(0..2)?)?;
    let mm: i64 = digits(rest.get(3..5)?)?;
    let ss: i64 = digits(rest.get(6..8)?)?;
    if rest.get(2..3)? != ":" || rest.get(5..6)? != ":" || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let mut rest = &rest[8..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        // Three digits of the fraction matter; the rest only adds precision we do not keep.
        let first3 = format!("{:0<3}", &frac[..n.min(3)]);
        millis = digits(&first3)?;
        rest = &frac[n..];
    }
    let offset_s = match rest {
        "" | "Z" | "z" => 0,
        zone => {
            let sign = match zone.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let zone = &zone[1..];
            let (zh, zm) = zone
                .split_once(':')
                .unwrap_or((zone.get(..2)?, zone.get(2..)?));
            sign * (digits::<i64>(zh)? * 3600 + digits::<i64>(zm)? * 60)
        }
    };
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) - offset_s) * 1000 + millis)
}

/// A `--since` value: a duration back from `now_ms` (`30s`, `10m`, `2h`, `1d`, `1h30m`) or a
/// point in time (RFC 3339, or a date). Returns Unix milliseconds.
pub fn parse_since(text: &str, now_ms: i64) -> Result<i64, BadSince> {
    let t = text.trim();
    if let Some(ms) = parse_duration_ms(t) {
        return Ok(now_ms - ms);
    }
    parse_rfc3339(t).ok_or_else(|| BadSince(text.to_owned()))
}

/// A `--since` value that is neither a duration nor a time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--since takes a duration (30s, 10m, 2h, 1d, 1h30m) or a time (2026-11-30T18:00:00Z, 2026-11-30); {0:?} is neither"
)]
pub struct BadSince(pub String);

fn parse_duration_ms(t: &str) -> Option<i64> {
    if t.is_empty() {
        return None;
    }
    let mut total: i64 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let value: i64 = rest[..n].parse().ok()?;
        let unit = rest[n..].chars().next()?;
        let ms = match unit {
            's' => 1000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            _ => return None,
        };
        total = total.checked_add(value.checked_mul(ms)?)?;
        rest = &rest[n + 1..];
    }
    Some(total)
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_date(s: &str) -> Option<(i64, i64, i64)> {
    let y = digits(s.get(0..4)?)?;
    let m = digits(s.get(5..7)?)?;
    let d = digits(s.get(8..10)?)?;
    if s.get(4..5)? != "-"
        || s.get(7..8)? != "-"
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&d)
    {
        return None;
    }
    Some((y, m, d))
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_back() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        // 2026-11-30T18:03:04.123Z
        let ms = 1_796_061_784_123;
        assert_eq!(format_ms(ms), "2026-11-30T18:03:04.123Z");
        assert_eq!(parse_rfc3339("2026-11-30T18:03:04.123Z"), Some(ms));
        assert_eq!(parse_rfc3339("2026-11-30 18:03:04.123456Z"), Some(ms));
        assert_eq!(parse_rfc3339("2026-11-30T19:03:04.123+01:00"), Some(ms));
        assert_eq!(parse_rfc3339("2026-11-30T18:03:04"), Some(ms - 123));
        assert_eq!(
            parse_rfc3339("2026-11-30"),
            Some(ms - 123 - (18 * 3600 + 3 * 60 + 4) * 1000)
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-11-30T25:00:00Z",
            "2026-11-30T18:03",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        for days in [-1, 0, 59, 10_000, 2_000_000] {
            let ms = days * 86_400_000 + 45_296_789;
            assert_eq!(parse_rfc3339(&format_ms(ms)), Some(ms), "{days}");
        }
    }

    #[test]
    fn since_takes_durations_and_times() {
        let now = 1_000_000_000_000;
        assert_eq!(parse_since("10m", now), Ok(now - 600_000));
        assert_eq!(parse_since("1h30m", now), Ok(now - 5_400_000));
        assert_eq!(parse_since("2d", now), Ok(now - 2 * 86_400_000));
        assert_eq!(parse_since("1970-01-01T00:00:01Z", now), Ok(1000));
        assert!(parse_since("10 minutes", now).is_err());
        assert!(parse_since("m", now).is_err());
    }
}
