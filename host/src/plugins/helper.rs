//! Helpers shared by several native plugins.

use std::fmt::Display;

use serde::de::DeserializeOwned;

use crate::framework::{NodeScore, Status, MAX_NODE_SCORE};

/// One error in a plugin's args, as upstream's `field.Error`: the field path inside the args and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The path inside the args, e.g. `scoringStrategy.resources[0].weight`; empty for the args as a whole.
    pub field: String,
    /// What is wrong, in upstream's words (`Invalid value: 0: ...`, `Required value: ...`).
    pub detail: String,
}

impl FieldError {
    /// An error at `field`.
    pub fn new(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), detail: detail.into() }
    }
}

impl Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.field.as_str() {
            "" => f.write_str(&self.detail),
            field => write!(f, "{field}: {}", self.detail),
        }
    }
}

/// Every error in a plugin's args (never empty), shown as upstream's aggregate: `[a, b]`, one error alone bare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsError(pub Vec<FieldError>);

impl Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let all: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        match all.as_slice() {
            [one] => f.write_str(one),
            _ => write!(f, "[{}]", all.join(", ")),
        }
    }
}

impl From<FieldError> for ArgsError {
    fn from(e: FieldError) -> ArgsError {
        ArgsError(vec![e])
    }
}

/// Plugin constructors report args errors as text.
impl From<ArgsError> for String {
    fn from(e: ArgsError) -> String {
        e.to_string()
    }
}

/// `path: Invalid value: value: detail`, as upstream's `field.Invalid`: args errors name the field they are about.
pub(crate) fn invalid(path: &str, value: impl Display, detail: &str) -> FieldError {
    FieldError::new(path, format!("Invalid value: {value}: {detail}"))
}

/// The errors as one result (upstream's aggregate).
pub(crate) fn aggregate(errs: Vec<FieldError>) -> Result<(), ArgsError> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ArgsError(errs))
    }
}

/// Decodes a plugin's args into its typed args (defaults when absent); a wrong type or an unknown field is an
/// error at its path inside the args.
pub(crate) fn decode<T: DeserializeOwned + Default>(args: Option<&serde_json::Value>) -> Result<T, ArgsError> {
    match args {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        // serde fills a struct from a sequence too ([] would mean "all defaults"); upstream's JSON decoding
        // wants an object.
        Some(v) if !v.is_object() => {
            Err(FieldError::new("", format!("invalid type: {}, expected an object of args", json_kind(v))).into())
        }
        Some(v) => serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { String::new() } else { path };
            FieldError::new(field, e.into_inner().to_string()).into()
        }),
    }
}

/// The JSON kind of a value, in serde's words.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "sequence",
        serde_json::Value::Object(_) => "map",
    }
}

/// Scales scores into [0, `max_priority`] by the highest score (upstream `DefaultNormalizeScore`); with `reverse`
/// the lowest raw score gets the highest normalized one. All zero stays zero (or all max when reversed).
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [NodeScore<'_>]) -> Status {
    // Upstream's maximum starts at 0, so scores all below 0 are left alone rather than divided by a negative.
    let max = scores.iter().map(|s| s.score).fold(0, i64::max);
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
            // Upstream's maximum starts at 0: scores all below it stay as they are (all 100 when reversed).
            (&[-5, -10], false, &[-5, -10]),
            (&[-5, -10], true, &[100, 100]),
            (&[-5, 10], false, &[-50, 100]),
        ];
        for (input, reverse, want) in cases {
            let mut v = s(input);
            default_normalize_score(100, *reverse, &mut v);
            assert_eq!(v.iter().map(|x| x.score).collect::<Vec<_>>(), *want, "{input:?} reverse={reverse}");
        }
    }
}
