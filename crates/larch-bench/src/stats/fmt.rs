//! Human formatting of durations, byte sizes, counts and rates for the report tables.

/// A duration in seconds with a unit that keeps 3 significant digits: `1.23 s`, `45.6 ms`,
/// `789 µs`, `12 ns`.
pub fn duration(seconds: f64) -> String {
    let abs = seconds.abs();
    if !seconds.is_finite() {
        "n/a".to_string()
    } else if abs >= 1.0 || abs == 0.0 {
        format!("{} s", sig3(seconds))
    } else if abs >= 1e-3 {
        format!("{} ms", sig3(seconds * 1e3))
    } else if abs >= 1e-6 {
        format!("{} µs", sig3(seconds * 1e6))
    } else {
        format!("{} ns", sig3(seconds * 1e9))
    }
}

/// A byte size with binary units: `512 B`, `1.50 KiB`, `12.3 MiB`, `1.02 GiB`.
pub fn bytes(value: f64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if !value.is_finite() {
        return "n/a".to_string();
    }
    if value.abs() < 1024.0 {
        return format!("{} B", sig3(value));
    }
    let mut scaled = value / 1024.0;
    let mut unit = 0;
    while scaled.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{} {}", sig3(scaled), UNITS[unit])
}

/// An integer with thousands separators: `1,234,567`.
pub fn count(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate or other real number: 3 significant digits below 1000, else a rounded integer with
/// thousands separators.
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        "n/a".to_string()
    } else if value.abs() >= 1000.0 {
        let rounded = value.abs().round() as u64;
        if value < 0.0 { format!("-{}", count(rounded)) } else { count(rounded) }
    } else {
        sig3(value)
    }
}

/// A ratio as a percentage with one decimal: `98.2%`.
pub fn percent(ratio: f64) -> String {
    if ratio.is_finite() { format!("{:.1}%", ratio * 100.0) } else { "n/a".to_string() }
}

/// Three significant digits, without exponent (for values below 10^6 or so).
pub fn sig3(value: f64) -> String {
    let abs = value.abs();
    if abs == 0.0 {
        "0".to_string()
    } else if abs >= 100.0 {
        format!("{value:.0}")
    } else if abs >= 10.0 {
        format!("{value:.1}")
    } else if abs >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(duration(1.5), "1.50 s");
        assert_eq!(duration(0.0123), "12.3 ms");
        assert_eq!(duration(0.000_045_6), "45.6 µs");
        assert_eq!(duration(0.000_000_5), "500 ns");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.00 GiB");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(999), "999");
        assert_eq!(number(12_345.6), "12,346");
        assert_eq!(number(0.5), "0.500");
        assert_eq!(percent(0.982), "98.2%");
    }
}
