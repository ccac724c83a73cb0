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
    while x.abs() >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {}", UNITS[u])
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
