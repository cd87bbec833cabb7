//! Go duration strings ("15s", "1m30s", "500ms") as used in upstream configuration.

use std::time::Duration;

/// Parses a Go duration; negative durations are refused.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (use Go syntax such as 15s, 1m30s, 500ms)");
    if s.is_empty() {
        return Err(bad());
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        if n == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * unit;
        rest = &rest[u..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// Formats a duration as Go's `time.Duration.String` does: "15s", "1m30s", "500ms", "5m0s".
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", trim(nanos as f64 / 1e3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", trim(nanos as f64 / 1e6));
    }
    let secs = d.as_secs();
    let (h, m) = (secs / 3600, secs % 3600 / 60);
    let s = trim((secs % 60) as f64 + f64::from(d.subsec_nanos()) / 1e9);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// A number without trailing zeros after the decimal point (Go prints 1.5s, not 1.500000000s).
fn trim(v: f64) -> String {
    let s = format!("{v:.9}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Serializes a duration as a Go duration string (serde `serialize_with`).
pub fn serialize_go_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_go_duration(*d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_go() {
        for (d, want) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(5400), "1h30m0s"),
        ] {
            assert_eq!(format_go_duration(d), want);
            assert_eq!(parse_go_duration(want).unwrap(), d, "{want} parses back");
        }
    }

    #[test]
    fn table() {
        assert_eq!(parse_go_duration("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_go_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_go_duration("1.5h").unwrap(), Duration::from_secs(5400));
        for bad in ["", "15", "s", "-1s", "1x"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }
}
