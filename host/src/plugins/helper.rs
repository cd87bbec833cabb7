//! Helpers shared by several native plugins.

use std::fmt::Display;

use crate::framework::{NodeScore, Status, MAX_NODE_SCORE};

/// `path: Invalid value: value: detail`, as upstream's `field.Invalid`: args errors name the field they are about.
pub(crate) fn invalid(path: &str, value: impl Display, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// Joins several args errors as upstream's aggregate does (`[a, b]`; one error alone is bare).
pub(crate) fn aggregate(errs: Vec<String>) -> Result<(), String> {
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.into_iter().next().unwrap_or_default()),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// Scales scores into [0, `max_priority`] by the highest score (upstream `DefaultNormalizeScore`); with `reverse`
/// the lowest raw score gets the highest normalized one. All zero stays zero (or all max when reversed).
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [NodeScore<'_>]) -> Status {
    let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
    if max == 0 {
        if reverse {
            for s in scores.iter_mut() {
                s.score = max_priority;
            }
        }
        return Status::success();
    }
    for s in scores.iter_mut() {
        let mut v = max_priority * s.score / max;
        if reverse {
            v = max_priority - v;
        }
        s.score = v;
    }
    Status::success()
}

/// `default_normalize_score` with the framework's maximum node score.
pub fn normalize_to_max(reverse: bool, scores: &mut [NodeScore<'_>]) -> Status {
    default_normalize_score(MAX_NODE_SCORE, reverse, scores)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[i64]) -> Vec<NodeScore<'static>> {
        v.iter().map(|&score| NodeScore { name: "n", id: 0, score }).collect()
    }

    #[test]
    fn table() {
        let cases: &[(&[i64], bool, &[i64])] = &[
            (&[10, 20, 30], false, &[33, 66, 100]),
            (&[10, 20, 30], true, &[67, 34, 0]),
            (&[0, 0], false, &[0, 0]),
            (&[0, 0], true, &[100, 100]),
        ];
        for (input, reverse, want) in cases {
            let mut v = s(input);
            default_normalize_score(100, *reverse, &mut v);
            assert_eq!(v.iter().map(|x| x.score).collect::<Vec<_>>(), *want, "{input:?} reverse={reverse}");
        }
    }
}
