//! The plugin's configuration: `pluginConfig[].args.config` from the scheduler's configuration, as JSON.
//!
//! The host hands it over as a JSON string (`{}` when none is given). A small parser is built in so plugins need no
//! JSON dependency; [`Config::raw`] gives the text for plugins that bring their own.

use std::fmt;

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, kept as written (see [`Value::as_i64`], [`Value::as_f64`]).
    Number(String),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, members in document order (a repeated key: the last one wins on lookup).
    Object(Vec<(String, Value)>),
}

impl Value {
    /// Member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number as an integer, if it is one (no fraction or exponent) and fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The number as a float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The members, in document order, if this is an object.
    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(members) => Some(members),
            _ => None,
        }
    }

    /// An error naming the first member of this object that is not in `known` (`what` names the object in the
    /// message: `config`, `config "quotas.team-a"`); Ok for a non-object.
    pub fn expect_keys(&self, what: &str, known: &[&str]) -> Result<(), String> {
        match self.as_object().and_then(|m| m.iter().find(|(k, _)| !known.contains(&k.as_str()))) {
            Some((k, _)) => Err(format!("{what}: unknown key {k:?} (known: {})", known.join(", "))),
            None => Ok(()),
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// The plugin's parsed configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The JSON text as the host sent it.
    raw: String,
    /// The parsed document.
    value: Value,
}

/// A JSON syntax error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the error.
    pub offset: usize,
    /// What was wrong.
    pub message: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for ParseError {}

impl Config {
    /// Parses the host's JSON text; empty or blank text means `{}`.
    pub fn parse(raw: &str) -> Result<Config, ParseError> {
        let value = if raw.trim().is_empty() { Value::Object(Vec::new()) } else { parse_json(raw)? };
        Ok(Config { raw: raw.to_string(), value })
    }

    /// The JSON text as the host sent it.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The whole document.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// Top-level member `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key)
    }

    /// Top-level string member `key`; `Ok(None)` when absent or null, an error when it is not a string.
    pub fn str(&self, key: &str) -> Result<Option<&str>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| format!("config {key:?}: expected a string")),
        }
    }

    /// An error naming the first top-level key not in `known`: a misspelt key fails loudly instead of being
    /// ignored.
    pub fn expect_keys(&self, known: &[&str]) -> Result<(), String> {
        self.value.expect_keys("config", known)
    }

    /// Top-level integer member `key`; `Ok(None)` when absent or null, an error when it is not an integer.
    pub fn i64(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| format!("config {key:?}: expected an integer")),
        }
    }

    /// Top-level boolean member `key`; `Ok(None)` when absent or null, an error when it is not a boolean.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| format!("config {key:?}: expected true or false")),
        }
    }
}

/// Nesting limit, so a hostile document cannot exhaust the guest's stack.
const MAX_DEPTH: usize = 64;

/// Parses one JSON document (RFC 8259), trailing whitespace allowed.
pub fn parse_json(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

/// A recursive-descent JSON parser over bytes.
struct Parser<'a> {
    /// The input.
    s: &'a [u8],
    /// The position.
    i: usize,
}

impl Parser<'_> {
    fn err(&self, message: &'static str) -> ParseError {
        ParseError { offset: self.i, message }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn literal(&mut self, word: &'static [u8], v: Value) -> Result<Value, ParseError> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("unknown literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.ws();
        match self.peek() {
            None => Err(self.err("unexpected end")),
            Some(b'n') => self.literal(b"null", Value::Null),
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Array(items));
                        }
                        _ => return Err(self.err("expected ',' or ']'")),
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Value::Object(members));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return Err(self.err("expected a member name"));
                    }
                    let key = self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return Err(self.err("expected ':'"));
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    members.push((key, v));
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Object(members));
                        }
                        _ => return Err(self.err("expected ',' or '}'")),
                    }
                }
            }
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("expected a digit after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("expected an exponent"));
            }
        }
        // The bytes are ASCII digits and signs, so this cannot fail.
        Ok(Value::Number(String::from_utf8_lossy(&self.s[start..self.i]).into_owned()))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(self.err("expected 4 hex digits")),
            };
            v = v * 16 + u32::from(d);
            self.i += 1;
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.i += 1; // opening quote
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else { return Err(self.err("unterminated string")) };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else { return Err(self.err("unterminated escape")) };
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if !self.s[self.i..].starts_with(b"\\u") {
                                    return Err(self.err("lone surrogate"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("invalid surrogate pair"));
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            char::from_u32(code).ok_or_else(|| self.err("invalid \\u escape"))?
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1f => return Err(self.err("control character in string")),
                _ => out.push(c),
            }
        }
        // The input is a &str and escapes produce whole chars, so the bytes are UTF-8.
        String::from_utf8(out).map_err(|_| self.err("invalid UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_config_members() {
        let c = Config::parse(
            r#" {"labelKey": "a.b/c", "n": -12, "f": 1.5e3, "on": true, "x": null,
            "list": [1, "two", [], {}], "esc": "q\"\\\/\n\u00e9\ud83d\ude00"} "#,
        )
        .unwrap();
        assert_eq!(c.str("labelKey"), Ok(Some("a.b/c")));
        assert_eq!(c.i64("n"), Ok(Some(-12)));
        assert_eq!(c.get("f").and_then(Value::as_f64), Some(1500.0));
        assert!(c.i64("f").is_err());
        assert_eq!(c.bool("on"), Ok(Some(true)));
        assert_eq!(c.str("x"), Ok(None));
        assert_eq!(c.str("missing"), Ok(None));
        assert!(c.str("n").is_err());
        assert_eq!(c.get("list").and_then(Value::as_array).map(<[Value]>::len), Some(4));
        assert_eq!(c.str("esc"), Ok(Some("q\"\\/\n\u{e9}\u{1f600}")));
    }

    #[test]
    fn unknown_keys_are_named() {
        let c = Config::parse(r#"{"a": 1, "nested": {"x": 1, "y": 2}, "b": 2}"#).unwrap();
        assert_eq!(c.expect_keys(&["a", "b", "nested"]), Ok(()));
        assert_eq!(c.expect_keys(&["a", "nested"]), Err(r#"config: unknown key "b" (known: a, nested)"#.into()));
        let nested = c.get("nested").unwrap();
        assert_eq!(nested.as_object().map(<[_]>::len), Some(2));
        assert_eq!(
            nested.expect_keys("config \"nested\"", &["x"]),
            Err(r#"config "nested": unknown key "y" (known: x)"#.into())
        );
        assert_eq!(Value::Null.expect_keys("x", &[]), Ok(()));
    }

    #[test]
    fn empty_means_empty_object() {
        assert_eq!(Config::parse("").unwrap().value(), &Value::Object(Vec::new()));
        assert_eq!(Config::parse("{}").unwrap().raw(), "{}");
    }

    #[test]
    fn rejects_bad_json() {
        for bad in ["{", "{\"a\"}", "{\"a\":}", "[1,]", "01", "1.", "\"abc", "tru", "{} x", "\"\\ud800\"", "-"] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(parse_json(&deep).is_err());
    }
}
