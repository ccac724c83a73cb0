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
pub fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// A value in its unit (`ms`, `ratio`, `pct`, `GB/s`), as the compare tables label them.
pub fn unit(x: f64, unit: &str) -> String {
    match unit {
        "pct" => pct(x),
        "GB/s" => gbps(x),
        _ => ms(x),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
