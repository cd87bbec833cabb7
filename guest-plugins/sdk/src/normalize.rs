//! Helpers for NormalizeScore: map raw scores into `[0, MAX_NODE_SCORE]`.

/// The highest normalized score (kube-scheduler's `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

/// Scales scores by the maximum so the highest becomes `max_score`: `s * max_score / max`. Negative scores count
/// as 0; when no score is above 0, all become 0.
pub fn scale_to_max(scores: &mut [i64], max_score: i64) {
    let max = scores.iter().copied().max().unwrap_or(0);
    // 128-bit arithmetic (and i64's overflow-checked multiply) are slow library calls in Wasm: use them only for
    // scores so large that `s * max_score` could overflow.
    let safe = if max_score > 0 { i64::MAX / max_score } else { 0 };
    for s in scores.iter_mut() {
        let v = (*s).max(0);
        *s = if max <= 0 {
            0
        } else if v <= safe {
            v * max_score / max
        } else {
            (i128::from(v) * i128::from(max_score) / i128::from(max)) as i64
        };
    }
}

/// Reverses scores in `[0, max_score]`: `max_score - s` (for "lower is better" policies).
pub fn reverse(scores: &mut [i64], max_score: i64) {
    for s in scores.iter_mut() {
        *s = max_score.saturating_sub(*s);
    }
}

/// Clamps every score into `[lo, hi]`.
pub fn clamp(scores: &mut [i64], lo: i64, hi: i64) {
    for s in scores.iter_mut() {
        *s = (*s).clamp(lo, hi);
    }
}

/// kube-scheduler's `DefaultNormalizeScore`: scale by the maximum to `[0, max_score]`, optionally reversed; when
/// the maximum is 0 (or below), every node gets `max_score` if `reversed`, else 0.
pub fn default_normalize(scores: &mut [i64], max_score: i64, reversed: bool) {
    scale_to_max(scores, max_score);
    if reversed {
        reverse(scores, max_score);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_by_maximum() {
        let mut s = [10, 5, 0, -3, 7];
        scale_to_max(&mut s, MAX_NODE_SCORE);
        assert_eq!(s, [100, 50, 0, 0, 70]);
    }

    #[test]
    fn no_positive_score_gives_zero() {
        let mut s = [0, -1, -50];
        scale_to_max(&mut s, MAX_NODE_SCORE);
        assert_eq!(s, [0, 0, 0]);
        let mut empty: [i64; 0] = [];
        scale_to_max(&mut empty, MAX_NODE_SCORE);
    }

    #[test]
    fn huge_scores_do_not_overflow() {
        let mut s = [i64::MAX, i64::MAX / 2, 1];
        scale_to_max(&mut s, MAX_NODE_SCORE);
        assert_eq!(s, [100, 49, 0]);
    }

    #[test]
    fn reverse_and_clamp() {
        let mut s = [100, 30, 0];
        reverse(&mut s, MAX_NODE_SCORE);
        assert_eq!(s, [0, 70, 100]);
        let mut c = [-5, 50, 500];
        clamp(&mut c, 0, MAX_NODE_SCORE);
        assert_eq!(c, [0, 50, 100]);
        let mut d = [4, 2, 0];
        default_normalize(&mut d, MAX_NODE_SCORE, true);
        assert_eq!(d, [0, 50, 100]);
        let mut z = [0, 0];
        default_normalize(&mut z, MAX_NODE_SCORE, true);
        assert_eq!(z, [100, 100]);
    }
}
