//! Unix times as UTC calendar dates, without a calendar crate: run
//! directories are named by them and reports print them.

/// `(year, month, day, hour, minute, second)` of Unix time `secs`, in UTC.
pub fn date_time(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let day_secs = day_secs as u32;
    (
        year,
        month,
        day,
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60,
    )
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
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(date_time(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(date_time(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(date_time(1_796_029_242), (2026, 11, 30, 9, 0, 42));
    }
}
