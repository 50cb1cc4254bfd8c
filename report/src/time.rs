//! Store times (Unix seconds) as people read them, without a calendar crate.

/// `2026-11-30 09:00:42 UTC`.
pub fn utc(unix: f64) -> String {
    let secs = unix.floor() as i64;
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
}

/// `1 h 02 min 05 s`, `3 min 07 s`, `12 s`.
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec} s"),
        (0, min, sec) => format!("{min} min {sec:02} s"),
        (h, min, sec) => format!("{h} h {min:02} min {sec:02} s"),
    }
}

/// The proleptic Gregorian date of a day count from 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_read_as_utc_dates() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400.5), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_796_029_242.0), "2026-11-30 09:00:42 UTC");
    }

    #[test]
    fn durations_read_in_the_largest_units() {
        assert_eq!(duration(12.4), "12 s");
        assert_eq!(duration(187.0), "3 min 07 s");
        assert_eq!(duration(3725.0), "1 h 02 min 05 s");
    }
}
