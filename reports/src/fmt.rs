//! Numbers as `aorta overlap` prints them, so a value on the page can be found verbatim in
//! the terminal output: milliseconds and ratios with 3 decimals, percentages with 1, `-` for
//! a null.

/// Integer nanoseconds as milliseconds, 3 decimals.
pub fn ms_ns(ns: i64) -> String {
    ms(ns as f64 / 1e6)
}

/// Milliseconds, 3 decimals.
pub fn ms(x: f64) -> String {
    format!("{x:.3}")
}

/// A ratio, 3 decimals.
pub fn ratio(x: f64) -> String {
    format!("{x:.3}")
}

/// A percentage, 1 decimal.
pub fn pct(x: f64) -> String {
    format!("{x:.1}")
}

/// A bandwidth in GB/s, 2 decimals.
pub fn gbps(x: f64) -> String {
    format!("{x:.2}")
}

/// TFLOP/s (and FLOP per byte), 1 decimal.
pub fn tflops(x: f64) -> String {
    format!("{x:.1}")
}

/// TB/s, 3 decimals.
pub fn tbps(x: f64) -> String {
    format!("{x:.3}")
}

/// `f` of the value, or `-` for a null.
pub(crate) fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// A value in its unit (`ms`, `ratio`, `pct`, `GB/s`), as the compare tables label them.
pub(crate) fn unit(x: f64, unit: &str) -> String {
    match unit {
        "pct" => pct(x),
        "GB/s" => gbps(x),
        _ => ms(x),
    }
}

/// A byte count in binary units, as people read message sizes: `512 B`, `64 KiB`,
/// `1.5 MiB`, `2 GiB` (at most 3 significant decimals, trailing zeros dropped).
pub fn bytes(b: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    // Compared as printed (2 decimals), so that 1 MiB - 1 B reads `1 MiB`, not `1024 KiB`.
    while (x.abs() * 100.0).round() >= 1024.0 * 100.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {}", UNITS[u])
}

/// A duration in the largest unit that keeps it at least 1: `850 ns`, `12.5 µs`, `3.25 ms`,
/// `1.5 s`, `2 min 5.5 s`, `1 h 2 min` (at most 3 decimals, trailing zeros dropped).
pub fn duration_ns(ns: i64) -> String {
    let trim = |x: f64| {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    let a = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    // Units chosen as printed (3 decimals): 999.9996 ms reads `1 s`, not `1000 ms`.
    let below = |x: f64, limit: f64| (x * 1000.0).round() < limit * 1000.0;
    let text = if a < 1_000 {
        format!("{a} ns")
    } else if below(a as f64 / 1e3, 1000.0) {
        format!("{} µs", trim(a as f64 / 1e3))
    } else if below(a as f64 / 1e6, 1000.0) {
        format!("{} ms", trim(a as f64 / 1e6))
    } else if below(a as f64 / 1e9, 60.0) {
        format!("{} s", trim(a as f64 / 1e9))
    } else if (a + 50_000_000) / 100_000_000 < 36_000 {
        // Rounded to tenths of a second first, so the seconds never read `60`.
        let tenths = (a + 50_000_000) / 100_000_000;
        let s = trim((tenths % 600) as f64 / 10.0);
        format!("{} min {s} s", tenths / 600)
    } else {
        let min = (a + 30_000_000_000) / 60_000_000_000;
        format!("{} h {} min", min / 60, min % 60)
    };
    format!("{sign}{text}")
}

/// Nanoseconds since the Unix epoch as a UTC date and time to the microsecond,
/// `2024-04-04 01:51:35.507889 UTC`. A time before 2000 is no wall-clock time (a trace whose
/// clock starts at its own zero): `None`.
pub fn utc_ns(ns: i64) -> Option<String> {
    const Y2000_NS: i64 = 946_684_800 * 1_000_000_000;
    if ns < Y2000_NS {
        return None;
    }
    let secs = ns.div_euclid(1_000_000_000);
    let us = ns.rem_euclid(1_000_000_000) / 1_000;
    let (days, day_s) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (proleptic Gregorian; H. Hinnant's `civil_from_days`).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    Some(format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{us:06} UTC",
        day_s / 3_600,
        day_s / 60 % 60,
        day_s % 60
    ))
}

/// The time unit for an axis whose values reach `max_ms`: milliseconds up to 10 s, seconds
/// beyond (a 15 s capture reads `15 s`, not `15000 ms`). Returns the divisor and the unit.
pub(crate) fn time_axis(max_ms: f64) -> (f64, &'static str) {
    if max_ms >= 10_000.0 {
        (1000.0, "s")
    } else {
        (1.0, "ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_byte_units_and_time_axis() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(67_108_864), "64 MiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024), "3 GiB");
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(time_axis(9_999.0), (1.0, "ms"));
        assert_eq!(time_axis(15_000.0), (1000.0, "s"));
    }

    /// Each unit's first value and the last value below it, computed from powers of 1024.
    #[test]
    fn byte_units_at_their_boundaries() {
        let (k, m, g) = (1i64 << 10, 1i64 << 20, 1i64 << 30);
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(k - 1), "1023 B");
        assert_eq!(bytes(k), "1 KiB");
        assert_eq!(bytes(k + k / 2), "1.5 KiB");
        // 1023.999 KiB printed with 2 decimals would be `1024 KiB`: it is 1 MiB.
        assert_eq!(bytes(m - 1), "1 MiB");
        assert_eq!(bytes(m + m / 2), "1.5 MiB");
        assert_eq!(bytes(g), "1 GiB");
        assert_eq!(bytes(5 * g / 4), "1.25 GiB");
        // The size the first hour met raw: 256 MiB + 40,960 B = 256.039 MiB.
        assert_eq!(bytes(268_476_416), "256.04 MiB");
        assert_eq!(bytes(-(m + m / 2)), "-1.5 MiB");
    }

    #[test]
    fn durations_in_the_largest_unit_at_least_one() {
        assert_eq!(duration_ns(0), "0 ns");
        assert_eq!(duration_ns(999), "999 ns");
        assert_eq!(duration_ns(1_000), "1 µs");
        assert_eq!(duration_ns(12_500), "12.5 µs");
        assert_eq!(duration_ns(999_999), "999.999 µs");
        assert_eq!(duration_ns(1_000_000), "1 ms");
        assert_eq!(duration_ns(3_250_000), "3.25 ms");
        assert_eq!(duration_ns(999_999_600), "1 s");
        assert_eq!(duration_ns(1_500_000_000), "1.5 s");
        assert_eq!(duration_ns(59_999_600_000), "1 min 0 s");
        assert_eq!(duration_ns(59_999_000_000), "59.999 s");
        assert_eq!(duration_ns(125_500_000_000), "2 min 5.5 s");
        assert_eq!(duration_ns(3_599_999_000_000), "1 h 0 min");
        assert_eq!(duration_ns(3_720_000_000_000), "1 h 2 min");
        assert_eq!(duration_ns(-2_000), "-2 µs");
    }

    /// Against dates known independently (`date -u -d @SECONDS`).
    #[test]
    fn epoch_nanoseconds_as_utc() {
        // 2024-04-04 01:51:35 UTC = 1712195495 s; a Kineto start with its nanoseconds.
        assert_eq!(
            utc_ns(1_712_195_495_507_888_958).as_deref(),
            Some("2024-04-04 01:51:35.507888 UTC")
        );
        // A leap day and the last second of a year.
        assert_eq!(
            utc_ns(1_709_164_800_000_000_000).as_deref(),
            Some("2024-02-29 00:00:00.000000 UTC")
        );
        assert_eq!(
            utc_ns(1_735_689_599_999_999_999).as_deref(),
            Some("2024-12-31 23:59:59.999999 UTC")
        );
        assert_eq!(
            utc_ns(946_684_800_000_000_000).as_deref(),
            Some("2000-01-01 00:00:00.000000 UTC")
        );
        // A trace clock that starts at its own zero is no date.
        assert_eq!(utc_ns(5_000_000_000), None);
        assert_eq!(utc_ns(946_684_799_999_999_999), None);
    }

    #[test]
    fn same_decimals_as_the_overlap_table() {
        assert_eq!(ms_ns(1_234_567), "1.235");
        assert_eq!(ms_ns(0), "0.000");
        assert_eq!(ratio(0.5), "0.500");
        assert_eq!(pct(12.345), "12.3");
        assert_eq!(opt(None::<f64>, ratio), "-");
        assert_eq!(unit(2.0, "GB/s"), "2.00");
        assert_eq!(
            (tflops(796.96), tbps(3.3512)),
            ("797.0".into(), "3.351".into())
        );
    }
}
