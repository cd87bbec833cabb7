//! Bounded YAML input for every file a user hands us (cluster files, scheduler configurations): a size limit and
//! a nesting limit checked by one linear pre-scan before serde_yaml sees the text, because libyaml's scanner is
//! quadratic in flow and indentation depth (100 KB of `[` takes tens of seconds). The limits play the part of
//! apimachinery's (3 MiB request bodies, JSON depth 10,000), set far above any real Kubernetes file.

use thiserror::Error;

/// The largest file read: a 15,000-node cluster with its pods is tens of MiB; this is far beyond it.
pub const MAX_BYTES: usize = 128 << 20;

/// The deepest nesting (collections inside collections, block or flow) accepted. Kubernetes objects nest about
/// 15 deep; serde_yaml itself stops at 128, so this keeps the refusal ours and cheap.
pub const MAX_DEPTH: usize = 100;

/// YAML text that cannot be read; the message names the file (and the document for syntax errors).
#[derive(Debug, Error)]
pub enum YamlError {
    /// The text is larger than [`MAX_BYTES`].
    #[error("{file}: larger than {} MiB", MAX_BYTES >> 20)]
    TooLarge {
        /// The file.
        file: String,
    },
    /// Collections nest deeper than [`MAX_DEPTH`].
    #[error("{file}: nesting deeper than {MAX_DEPTH} (line {line})")]
    TooDeep {
        /// The file.
        file: String,
        /// One-based line where the limit was crossed.
        line: usize,
    },
    /// A document is not valid YAML.
    #[error("{file}: document {index}: not valid YAML: {source}")]
    Invalid {
        /// The file.
        file: String,
        /// Zero-based index of the document.
        index: usize,
        /// The parser's complaint.
        #[source]
        source: serde_yaml::Error,
    },
}

/// Splits `text` (the contents of `file`, named in errors) into its YAML documents, in order and including empty
/// (null) ones so that indexes match the file, after checking size and nesting depth. A leading UTF-8 byte order
/// mark is skipped, as kubectl's YAML decoder does.
pub fn documents(file: &str, text: &str) -> Result<Vec<serde_yaml::Value>, YamlError> {
    if text.len() > MAX_BYTES {
        return Err(YamlError::TooLarge { file: file.to_string() });
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Err(line) = check_depth(text, MAX_DEPTH) {
        return Err(YamlError::TooDeep { file: file.to_string(), line });
    }
    serde_yaml::Deserializer::from_str(text)
        .enumerate()
        .map(|(index, d)| {
            <serde_yaml::Value as serde::Deserialize>::deserialize(d).map_err(|source| YamlError::Invalid {
                file: file.to_string(),
                index,
                source,
            })
        })
        .collect()
}

/// `value` as block YAML that every reader takes the same way: YAML 1.1 readers (kubectl's sigs.k8s.io/yaml,
/// PyYAML) as well as YAML 1.2 ones. A string is written plain only when no reader could take it for anything
/// else (a letter first, then letters, digits and `._/-`, and not one of YAML 1.1's words for booleans and null,
/// such as `yes`, `on`, `n` or `Off`); every other string is double-quoted, so a taint value `yes` stays a string.
pub fn to_portable_yaml(value: &serde_json::Value) -> String {
    let mut out = String::new();
    match value {
        serde_json::Value::Object(m) if !m.is_empty() => write_map(&mut out, m, 0),
        serde_json::Value::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        v => {
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
    out
}

/// YAML 1.1's plain words for booleans and null (all spellings its resolver accepts).
const YAML11_WORDS: &[&str] = &[
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE", "on",
    "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL",
];

fn plain_is_string(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !YAML11_WORDS.contains(&s)
}

fn string(s: &str) -> String {
    if plain_is_string(s) {
        s.to_string()
    } else {
        // A JSON string is a YAML double-quoted scalar with the same meaning.
        serde_json::Value::String(s.to_string()).to_string()
    }
}

/// A scalar, or an empty collection in flow style.
fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => string(s),
        serde_json::Value::Object(_) => "{}".into(),
        serde_json::Value::Array(_) => "[]".into(),
        v => v.to_string(),
    }
}

fn is_block(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => !m.is_empty(),
        serde_json::Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn write_map(out: &mut String, m: &serde_json::Map<String, serde_json::Value>, indent: usize) {
    for (i, (k, v)) in m.iter().enumerate() {
        // The first entry of a map that is a sequence item follows its `- ` on the same line.
        if i > 0 || out.ends_with('\n') || out.is_empty() {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&string(k));
        out.push(':');
        write_value(out, v, indent, false);
    }
}

fn write_seq(out: &mut String, a: &[serde_json::Value], indent: usize) {
    for (i, v) in a.iter().enumerate() {
        if i > 0 || out.ends_with('\n') || out.is_empty() {
            out.push_str(&" ".repeat(indent));
        }
        out.push('-');
        write_value(out, v, indent, true);
    }
}

/// Writes `v` after a `key:` (or a `-`, `in_seq`), whose line is at `indent`.
fn write_value(out: &mut String, v: &serde_json::Value, indent: usize, in_seq: bool) {
    match v {
        serde_json::Value::Object(m) if is_block(v) && in_seq => {
            out.push(' ');
            write_map(out, m, indent + 2);
        }
        serde_json::Value::Object(m) if is_block(v) => {
            out.push('\n');
            write_map(out, m, indent + 2);
        }
        // A sequence under a key sits at the key's indentation, as kubectl writes it.
        serde_json::Value::Array(a) if is_block(v) && !in_seq => {
            out.push('\n');
            write_seq(out, a, indent);
        }
        serde_json::Value::Array(a) if is_block(v) => {
            out.push(' ');
            write_seq(out, a, indent + 2);
        }
        v => {
            out.push(' ');
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

/// One pass over the text that over-estimates how deep collections nest: open flow brackets, plus block
/// indentation levels, plus `- `/`? ` entries that open a collection on the same line. Quoted scalars, block
/// scalars and comments are skipped only where YAML itself starts them (at a node's start, after whitespace),
/// so brackets hidden in them cannot lower the count. Returns the one-based line where `max` is exceeded.
fn check_depth(text: &str, max: usize) -> Result<(), usize> {
    let mut s = Scan { b: text.as_bytes(), pos: 0, line: 1, max };
    // Open block indentation columns, innermost last.
    let mut indents: Vec<usize> = Vec::new();
    while s.pos < s.b.len() {
        let start = s.pos;
        let col = s.skip_spaces() - start;
        match s.peek() {
            None => break,
            Some(b'\n') | Some(b'#') => {
                s.skip_line();
                continue;
            }
            _ => {}
        }
        if col == 0 && (s.starts_with(b"---") || s.starts_with(b"...")) && s.is_blank_at(s.pos + 3) {
            indents.clear();
            s.pos += 3;
        } else if col == 0 && s.peek() == Some(b'%') {
            s.skip_line();
            continue;
        } else {
            while indents.last().is_some_and(|&t| t > col) {
                indents.pop();
            }
            if indents.last() != Some(&col) {
                indents.push(col);
            }
        }
        s.block_line(col, indents.len())?;
    }
    Ok(())
}

struct Scan<'a> {
    b: &'a [u8],
    pos: usize,
    line: usize,
    max: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn starts_with(&self, p: &[u8]) -> bool {
        self.b[self.pos..].starts_with(p)
    }

    fn is_blank_at(&self, i: usize) -> bool {
        matches!(self.b.get(i), None | Some(b' ' | b'\t' | b'\r' | b'\n'))
    }

    /// Skips spaces and tabs; returns the new position.
    fn skip_spaces(&mut self) -> usize {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r')) {
            self.pos += 1;
        }
        self.pos
    }

    /// Moves past the end of the current line.
    fn skip_line(&mut self) {
        match self.b[self.pos..].iter().position(|&c| c == b'\n') {
            Some(i) => {
                self.pos += i + 1;
                self.line += 1;
            }
            None => self.pos = self.b.len(),
        }
    }

    fn deeper(&self, depth: usize) -> Result<(), usize> {
        if depth > self.max {
            Err(self.line)
        } else {
            Ok(())
        }
    }

    /// The rest of a block-context line whose content starts at column `col`, inside `depth` open levels.
    fn block_line(&mut self, col: usize, mut depth: usize) -> Result<(), usize> {
        self.deeper(depth)?;
        let mut node_start = true;
        loop {
            self.skip_spaces();
            let Some(c) = self.peek() else { return Ok(()) };
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    return Ok(());
                }
                b'#' => {
                    self.skip_line();
                    return Ok(());
                }
                b'-' | b'?' | b':' if node_start && self.is_blank_at(self.pos + 1) => {
                    // `- - x` or `? - x`: each indicator opens a collection inside the one before.
                    depth += 1;
                    self.deeper(depth)?;
                    self.pos += 1;
                }
                b'[' | b'{' if node_start => {
                    self.flow(depth)?;
                    node_start = false;
                }
                b'\'' | b'"' if node_start => {
                    self.quoted(c);
                    node_start = false;
                }
                b'|' | b'>' if node_start => {
                    self.skip_line();
                    self.block_scalar(col);
                    return Ok(());
                }
                b'&' | b'!' if node_start => {
                    // An anchor or tag: the node itself follows.
                    while !self.is_blank_at(self.pos) {
                        self.pos += 1;
                    }
                }
                _ => {
                    // A plain scalar up to `: ` (a key, after which a node starts) or ` #` or the end of the line.
                    node_start = false;
                    while let Some(c) = self.peek() {
                        if c == b'\n' || (c == b'#' && matches!(self.b[self.pos - 1], b' ' | b'\t')) {
                            break;
                        }
                        self.pos += 1;
                        if c == b':' && self.is_blank_at(self.pos) {
                            node_start = true;
                            break;
                        }
                    }
                }
            }
        }
    }

    /// A flow collection starting at `[` or `{`, to its matching close (or the end of the text).
    fn flow(&mut self, outer: usize) -> Result<(), usize> {
        let mut depth = 0usize;
        // After `[`, `{`, `,`, `:` or `?` a node may start, and only there does a quote open a quoted scalar.
        let mut node_start = true;
        while let Some(c) = self.peek() {
            match c {
                b'[' | b'{' => {
                    depth += 1;
                    self.deeper(outer + depth)?;
                    node_start = true;
                }
                b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos += 1;
                        return Ok(());
                    }
                    node_start = false;
                }
                b',' | b':' | b'?' => node_start = true,
                b'\'' | b'"' if node_start => {
                    self.quoted(c);
                    node_start = false;
                    continue;
                }
                b'#' if matches!(self.b[self.pos - 1], b' ' | b'\t' | b'\n') => {
                    self.skip_line();
                    continue;
                }
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => node_start = false,
            }
            self.pos += 1;
        }
        Ok(())
    }

    /// A quoted scalar starting at the quote under the cursor, to its closing quote (or the end of the text).
    fn quoted(&mut self, quote: u8) {
        self.pos += 1;
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                b'\n' => self.line += 1,
                b'\\' if quote == b'"' => {
                    if self.peek() == Some(b'\n') {
                        self.line += 1;
                    }
                    self.pos += 1;
                }
                // `''` is an escaped quote inside a single-quoted scalar.
                b'\'' if quote == b'\'' && self.peek() == Some(b'\'') => self.pos += 1,
                c if c == quote => return,
                _ => {}
            }
        }
    }

    /// The content lines of a `|` or `>` scalar whose parent starts at column `parent`: as libyaml, the first
    /// non-empty line sets the content indentation, and the scalar ends at the first line indented less.
    fn block_scalar(&mut self, parent: usize) {
        let mut indent: Option<usize> = None;
        while self.pos < self.b.len() {
            let start = self.pos;
            let col = self.b[start..].iter().take_while(|&&c| c == b' ').count();
            let rest = &self.b[start + col..];
            let blank = rest.iter().take_while(|&&c| c != b'\n').all(|&c| c == b' ' || c == b'\t' || c == b'\r');
            if !blank {
                let need = *indent.get_or_insert(col);
                if col < need || col <= parent {
                    return;
                }
            }
            self.skip_line();
        }
    }
}

/// `s` with control characters (line breaks, tabs) written as escapes, so an error naming a field or key the user
/// wrote stays on one line.
pub fn escape_controls(s: &str) -> String {
    s.chars().fold(String::with_capacity(s.len()), |mut out, c| {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_controls_keep_an_error_on_one_line() {
        assert_eq!(escape_controls("metadata.labels.a/\nb: x\ty"), "metadata.labels.a/\\nb: x\\ty");
        assert_eq!(escape_controls("plain"), "plain");
    }

    #[test]
    fn portable_yaml_reads_back_the_same_and_quotes_what_yaml_1_1_would_retype() {
        let v = serde_json::json!({
            "metadata": {"name": "node-a", "labels": {"on": "off", "zone": "yes", "n": "N", "empty": "", "num": "16Gi"}},
            "spec": {"taints": [{"key": "dedicated", "value": "yes", "effect": "NoSchedule"}, {"key": "k"}],
                     "nested": [[1, "two"], [], {}], "none": null, "flag": true, "ratio": 1.5,
                     "text": "line one\nline \"two\": #x", "path": "/var/lib/x_y-z.1"},
            "list": ["a", {"b": [{"c": "d"}]}],
        });
        let text = to_portable_yaml(&v);
        let back: serde_json::Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, v, "{text}");
        for word in ["\"yes\"", "\"off\"", "\"N\"", "\"on\":", "\"16Gi\"", "\"\""] {
            assert!(text.contains(word), "{word} not quoted in:\n{text}");
        }
        assert!(text.contains("name: node-a\n") && text.contains("path: \"/var/lib/x_y-z.1\"\n"), "{text}");
        for w in YAML11_WORDS {
            assert!(!plain_is_string(w), "{w}");
        }
        assert_eq!(to_portable_yaml(&serde_json::json!({})), "{}\n");
    }

    fn depth_error(text: &str) -> Option<String> {
        match documents("f.yaml", text) {
            Err(e @ YamlError::TooDeep { .. }) => Some(e.to_string()),
            _ => None,
        }
    }

    /// The probe's inputs: deep flow and block nesting must be refused by the pre-scan, not parsed for minutes.
    #[test]
    fn deep_nesting_fails_fast() {
        let block: String = (0..5_000).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        let dashes = "- ".repeat(50_000) + "x\n";
        let rows = [
            ("open_brackets", "[".repeat(100_000)),
            ("open_braces", "{".repeat(100_000)),
            ("brackets_with_quoted_closes", "[']', ".repeat(20_000)),
            ("mixed_in_a_mapping", format!("a: {}", "{b: [".repeat(20_000))),
            ("indented_block", block),
            ("compact_sequences", dashes),
        ];
        for (name, text) in rows {
            let e = depth_error(&text).unwrap_or_else(|| panic!("{name}: not refused for depth"));
            assert!(e.starts_with("f.yaml: nesting deeper than 100 (line "), "{name}: {e}");
        }
    }

    #[test]
    fn real_files_pass() {
        let text = "# c\napiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {a: '[', b: \"{\"}}\nspec:\n  containers:\n  - name: c\n    command: [sh, -c, 'echo [[[[[[[[[']\n    args:\n    - |\n      [[[[[[[[[[[[[[[[[[[[\n      {{{{{{{{{{\n    - x # [[[[[[\n---\n- - - a\n";
        let docs = documents("f.yaml", text).unwrap();
        assert_eq!(docs.len(), 2);
        let mut deep = String::new();
        for i in 0..MAX_DEPTH - 1 {
            deep.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        deep.push_str(&format!("{}leaf: 1\n", " ".repeat(MAX_DEPTH - 1)));
        assert!(check_depth(&deep, MAX_DEPTH).is_ok());
        // A line's own indentation level counts once more than strictly needed: a harmless over-estimate.
        assert_eq!(check_depth(&"[".repeat(MAX_DEPTH - 1), MAX_DEPTH), Ok(()));
        assert_eq!(check_depth(&"[".repeat(MAX_DEPTH + 1), MAX_DEPTH), Err(1));
    }

    #[test]
    fn size_and_bom() {
        let big = " ".repeat(MAX_BYTES + 1);
        assert_eq!(documents("f.yaml", &big).unwrap_err().to_string(), "f.yaml: larger than 128 MiB");
        let docs = documents("f.yaml", "\u{feff}a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
        let e = documents("f.yaml", "a: 1\n---\nb: [\n").unwrap_err().to_string();
        assert!(e.starts_with("f.yaml: document 1: not valid YAML: "), "{e}");
    }
}
