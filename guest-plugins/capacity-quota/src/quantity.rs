//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource.Quantity`): `2`, `500m`, `1.5`, `4Gi`,
//! `1e3`, as CPU millicores or bytes, rounded up as `Quantity.MilliValue()` and `Value()` are.

/// A quantity as an exact fraction of the base unit (cores, bytes): `num / den`.
struct Exact {
    num: u128,
    den: u128,
}

/// Parses a non-negative quantity exactly.
fn parse(s: &str) -> Result<Exact, String> {
    let bad = |why: &str| format!("quantity {s:?}: {why}");
    let digits_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(digits_end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err(bad("expected a number, as in 2, 500m or 4Gi"));
    }
    if frac.contains('.') || frac.len() > 18 {
        return Err(bad("malformed number"));
    }
    let too_large = || bad("too large");
    let mut num: u128 = 0;
    for d in whole.bytes().chain(frac.bytes()) {
        num = num.checked_mul(10).and_then(|n| n.checked_add(u128::from(d - b'0'))).ok_or_else(too_large)?;
    }
    let mut den: u128 = 10u128.pow(frac.len() as u32);
    let (mul, div): (u128, u128) = match suffix {
        "" => (1, 1),
        "m" => (1, 1000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        e if e.starts_with(['e', 'E']) => match e[1..].parse::<u32>() {
            Ok(x) if x <= 18 => (10u128.pow(x), 1),
            _ => return Err(bad("the exponent must be an integer from 0 to 18")),
        },
        _ => return Err(bad("unknown suffix (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei)")),
    };
    num = num.checked_mul(mul).ok_or_else(too_large)?;
    den *= div;
    Ok(Exact { num, den })
}

/// `n / d` rounded up, as an i64.
fn ceil(num: u128, den: u128, s: &str) -> Result<i64, String> {
    i64::try_from(num.div_ceil(den)).map_err(|_| format!("quantity {s:?}: too large"))
}

/// A CPU quantity in millicores (`500m` → 500, `2` → 2000, `0.0001` → 1).
pub fn milli_cpu(s: &str) -> Result<i64, String> {
    let q = parse(s.trim())?;
    ceil(q.num.checked_mul(1000).ok_or_else(|| format!("quantity {s:?}: too large"))?, q.den, s)
}

/// A memory quantity in bytes (`4Gi` → 4294967296, `1.5k` → 1500).
pub fn bytes(s: &str) -> Result<i64, String> {
    let q = parse(s.trim())?;
    ceil(q.num, q.den, s)
}

/// Millicores as people write them: `2` for whole cores, else `1500m`.
pub fn show_milli_cpu(m: i64) -> String {
    if m % 1000 == 0 {
        format!("{}", m / 1000)
    } else {
        format!("{m}m")
    }
}

/// Bytes as people write them: the largest binary suffix that divides them (`4Gi`, `1536Mi`), else bytes.
pub fn show_bytes(b: i64) -> String {
    for (shift, suffix) in [(60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")] {
        if b != 0 && b % (1i64 << shift) == 0 {
            return format!("{}{suffix}", b >> shift);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_in_millicores_rounded_up() {
        for (s, want) in [("2", 2000), ("500m", 500), ("1.5", 1500), ("0.1", 100), ("0.0001", 1), ("1k", 1_000_000)] {
            assert_eq!(milli_cpu(s), Ok(want), "{s}");
        }
        assert_eq!(milli_cpu("1e3"), Ok(1_000_000));
        assert_eq!(milli_cpu("1.5m"), Ok(2));
    }

    #[test]
    fn memory_in_bytes() {
        for (s, want) in
            [("4Gi", 4 << 30), ("8Gi", 8 << 30), ("1.5Gi", 3 << 29), ("128974848", 128974848), ("129M", 129_000_000)]
        {
            assert_eq!(bytes(s), Ok(want), "{s}");
        }
        assert_eq!(bytes("123Mi"), Ok(123 << 20));
        assert_eq!(bytes("1500m"), Ok(2), "a fraction of a byte rounds up");
    }

    #[test]
    fn bad_quantities_are_named() {
        assert_eq!(
            bytes("4GB"),
            Err(r#"quantity "4GB": unknown suffix (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei)"#.to_string())
        );
        assert_eq!(milli_cpu("-1"), Err(r#"quantity "-1": expected a number, as in 2, 500m or 4Gi"#.to_string()));
        assert!(milli_cpu("").is_err());
        assert!(milli_cpu("1.2.3").is_err());
        assert!(bytes("99999999999Ei").unwrap_err().ends_with("too large"));
        assert!(bytes("1e99").is_err());
    }

    #[test]
    fn shown_as_written() {
        assert_eq!(
            (show_milli_cpu(2000), show_milli_cpu(1500), show_milli_cpu(0)),
            ("2".into(), "1500m".into(), "0".into())
        );
        assert_eq!(
            (show_bytes(4 << 30), show_bytes(1536 << 20), show_bytes(1000)),
            ("4Gi".into(), "1536Mi".into(), "1000".into())
        );
    }
}
