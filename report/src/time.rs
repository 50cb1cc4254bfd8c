//! Store times (Unix seconds) as people read them.

/// `2026-11-30 09:00:42 UTC`.
pub fn utc(unix: f64) -> String {
    match chrono::DateTime::from_timestamp(unix.floor() as i64, 0) {
        Some(time) => time.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        None => format!("{unix} s after 1970"),
    }
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
