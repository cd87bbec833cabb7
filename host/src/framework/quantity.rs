//! Kubernetes resource quantities ("100m", "2Gi", "1.5", "1e3") as integers, the way the scheduler compares them:
//! CPU in millicores, everything else in whole units rounded up.

use thiserror::Error;

/// A quantity string that is not a Kubernetes quantity.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid quantity {0:?}")]
pub struct QuantityError(pub String);

/// Parses a quantity and returns it scaled by 1000 (milli-units), rounded up, saturating at i64::MAX.
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    let bad = || QuantityError(s.to_string());
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let (sign, t) = match t.as_bytes()[0] {
        b'-' => (-1i128, &t[1..]),
        b'+' => (1, &t[1..]),
        _ => (1, t),
    };
    let num_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return Err(bad());
    }
    // Value as a fraction mantissa / 10^scale.
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(bad());
    }
    let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| bad())? };
    let mut dec_exp: i32 = -(frac_part.len() as i32);
    let mut bin_mult: i128 = 1;
    match suffix {
        "" => {}
        "n" => dec_exp -= 9,
        "u" => dec_exp -= 6,
        "m" => dec_exp -= 3,
        "k" => dec_exp += 3,
        "M" => dec_exp += 6,
        "G" => dec_exp += 9,
        "T" => dec_exp += 12,
        "P" => dec_exp += 15,
        "E" => dec_exp += 18,
        "Ki" => bin_mult = 1 << 10,
        "Mi" => bin_mult = 1 << 20,
        "Gi" => bin_mult = 1 << 30,
        "Ti" => bin_mult = 1 << 40,
        "Pi" => bin_mult = 1 << 50,
        "Ei" => bin_mult = 1 << 60,
        e if e.starts_with(['e', 'E']) => {
            dec_exp += e[1..].parse::<i32>().map_err(|_| bad())?;
        }
        _ => return Err(bad()),
    }
    // milli: multiply by 1000.
    dec_exp += 3;
    let mut v: i128 = mantissa.saturating_mul(bin_mult);
    if dec_exp >= 0 {
        for _ in 0..dec_exp.min(40) {
            v = v.saturating_mul(10);
        }
    } else {
        let mut div: i128 = 1;
        for _ in 0..(-dec_exp).min(38) {
            div = div.saturating_mul(10);
        }
        // Round up, as resource.Quantity's MilliValue/Value do for positive amounts.
        v = (v + div - 1) / div;
    }
    let v = sign * v;
    Ok(v.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
}

/// Parses a quantity in whole units, rounded up (upstream's `Quantity.Value()`).
pub fn parse_value(s: &str) -> Result<i64, QuantityError> {
    let m = parse_milli(s)?;
    Ok(if m >= 0 { m / 1000 + i64::from(m % 1000 != 0) } else { m / 1000 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, i64, i64)] = &[
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("1.5", 1500, 2),
            ("0.1", 100, 1),
            ("2Gi", 2 * 1024 * 1024 * 1024 * 1000, 2 * 1024 * 1024 * 1024),
            ("512Mi", 512 * 1024 * 1024 * 1000, 512 * 1024 * 1024),
            ("1k", 1_000_000, 1000),
            ("1M", 1_000_000_000, 1_000_000),
            ("1e3", 1_000_000, 1000),
            ("1E3", 1_000_000, 1000),
            ("0", 0, 0),
            ("250u", 1, 1),
            ("110", 110_000, 110),
        ];
        for (s, milli, value) in cases {
            assert_eq!(parse_milli(s).unwrap(), *milli, "{s}");
            assert_eq!(parse_value(s).unwrap(), *value, "{s}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "abc", "1x", "1..2", ".", "Gi", "1e"] {
            assert!(parse_milli(s).is_err(), "{s}");
        }
    }
}
