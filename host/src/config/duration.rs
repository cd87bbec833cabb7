//! Go duration strings ("15s", "1m30s", "500ms") as used in upstream configuration.

use std::time::Duration;

/// The longest Go duration: `time.Duration` is an int64 of nanoseconds (about 292 years).
pub const MAX_GO_DURATION: Duration = Duration::from_nanos(i64::MAX as u64);

/// Parses a Go duration as `time.ParseDuration` does ("15s", "1m30s", "1.5h", "+2s"), with its limit: past
/// [`MAX_GO_DURATION`] is an error, as in Go. Negative durations are refused (no setting here takes one).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (use Go syntax such as 15s, 1m30s, 500ms)");
    let rest = s.strip_prefix('+').unwrap_or(s);
    if rest.starts_with('-') {
        return Err(format!("invalid duration {s:?}: must not be negative"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let too_long = || format!("invalid duration {s:?}: longer than Go's limit of 2562047h47m16.854775807s");
    // Whole nanoseconds in u128, so no component can overflow before the limit check (Go checks each step).
    let mut total: u128 = 0;
    let mut rest = rest;
    while !rest.is_empty() {
        let digits = |t: &str| t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let n = digits(rest);
        let (int, after) = rest.split_at(n);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => a.split_at(digits(a)),
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return Err(bad());
        }
        let u = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let unit: u128 = match &after[..u] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        rest = &after[u..];
        // More than 20 integer digits exceeds u64, which Go refuses before looking at the unit's size.
        let whole: u128 = if int.is_empty() { 0 } else { int.parse::<u64>().map_err(|_| too_long())?.into() };
        // Fraction digits past the 19th cannot change the nanoseconds of any unit up to an hour.
        let frac = &frac[..frac.len().min(19)];
        let part = if frac.is_empty() {
            0
        } else {
            let f: u128 = frac.parse().map_err(|_| bad())?;
            f * unit / 10u128.pow(frac.len() as u32)
        };
        total += whole * unit + part;
        if total > MAX_GO_DURATION.as_nanos() {
            return Err(too_long());
        }
    }
    Ok(Duration::from_nanos(total as u64))
}

/// Checks that a number of seconds fits a Go `time.Duration` (upstream multiplies `*Seconds` fields by
/// `time.Second`; past this Go overflows silently, here it is refused).
pub fn check_go_seconds(seconds: i64) -> Result<Duration, String> {
    match u64::try_from(seconds) {
        Ok(s) if s <= MAX_GO_DURATION.as_secs() => Ok(Duration::from_secs(s)),
        _ if seconds < 0 => Err(format!("must not be negative, got {seconds}")),
        _ => Err(format!(
            "must be at most {} (Go's time.Duration limit, about 292 years), got {seconds}",
            MAX_GO_DURATION.as_secs()
        )),
    }
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
        assert_eq!(parse_go_duration("+.5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_go_duration("1.s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_go_duration("1.0000000001s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_go_duration("3μs2µs").unwrap(), Duration::from_micros(5));
        for bad in ["", "15", "s", "-1s", "1x", ".s", "1..5s", "1h-5m"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    /// Values past Go's limit (2^63-1 ns, about 292 years) panicked in `Duration::from_secs_f64`.
    #[test]
    fn regression_huge_durations_are_refused_not_a_panic() {
        for s in ["99999999999999999h", "2562048h", "9223372037s", "9223372036854775808ns", "18446744073709551616ns"] {
            let got = std::panic::catch_unwind(|| parse_go_duration(s));
            assert!(matches!(got, Ok(Err(_))), "{s}: {got:?}");
        }
        let max = Duration::from_nanos(i64::MAX as u64);
        assert_eq!(parse_go_duration("9223372036854775807ns"), Ok(max));
        assert_eq!(parse_go_duration("2562047h47m16.854775807s"), Ok(max));
    }
}
