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

#[cfg(test)]
mod tests {
    use super::*;

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
