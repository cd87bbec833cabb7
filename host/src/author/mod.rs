//! The plugin author's path, outside this repository: `plugin new` writes a self-contained project (the contract,
//! the language's SDK or glue, a sample policy, a profile and a cluster to try it on), `plugin build` turns it into
//! a checked component with the toolchains `plugin setup` installs, and `plugin test` simulates it.
//!
//! The languages are the ones the repository's own sample guests are written in (Rust with `guest-plugins/sdk`, C,
//! Python and JavaScript with the glue beside `guest-plugins/priority-label-*`); the files a project gets are those
//! files, embedded in the binary, so a project and the samples cannot drift apart.

mod project;
mod scaffold;
mod toolchain;

use std::path::PathBuf;

use thiserror::Error;

pub use project::{Built, Project, MANIFEST};
pub use scaffold::{new_project, NewProject};
pub use toolchain::setup;

/// Something the plugin author's commands cannot do.
#[derive(Debug, Error)]
pub enum AuthorError {
    /// The plugin name cannot name a plugin, a crate and a file.
    #[error("plugin name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Not one of the languages a project can be written in.
    #[error("unknown language {0:?} (rust, c, python, js)")]
    UnknownLanguage(String),
    /// Not an extension point, or not one this language's glue serves.
    #[error("--points: {0}")]
    Points(String),
    /// `plugin new` writes only into a missing or empty directory.
    #[error("{}: exists and is not empty (plugin new writes a new project only into a missing or empty directory)", .0.display())]
    NotEmpty(PathBuf),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The directory holds no project `plugin new` wrote, or its manifest is broken.
    #[error("{}: {message}", path.display())]
    Manifest {
        /// The manifest (or the directory that lacks one).
        path: PathBuf,
        /// What is wrong, with the field.
        message: String,
    },
    /// A tool the build needs is not installed.
    #[error("{missing} not found; install it with `{install}`")]
    MissingTool {
        /// What is missing.
        missing: String,
        /// The command that installs it.
        install: String,
    },
    /// A build step (a compiler) failed; it printed its own diagnostics.
    #[error("{step} failed ({status})")]
    BuildFailed {
        /// The step, as a command line.
        step: String,
        /// Its exit status.
        status: String,
    },
    /// The built module could not be turned into a component the host accepts.
    #[error("{}: {source}", path.display())]
    Component {
        /// The module or component.
        path: PathBuf,
        /// Why (as `plugin componentize` and `plugin check` say it).
        #[source]
        source: crate::wasm::WasmError,
    },
}

impl AuthorError {
    /// True for errors in what the user typed or wrote (exit code 2), false for a failed compiler run.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, AuthorError::BuildFailed { .. })
    }
}

/// The languages a plugin project can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// Rust with the SDK (`kws-plugin-sdk`), built for `wasm32-unknown-unknown`.
    Rust,
    /// C with wit-bindgen's bindings and clang for `wasm32-wasi`.
    C,
    /// Python with componentize-py.
    Python,
    /// JavaScript with componentize-js.
    Js,
}

impl Language {
    /// Every language, in the order the help lists them.
    pub const ALL: [Language; 4] = [Language::Rust, Language::C, Language::Python, Language::Js];

    /// The name `--lang` and `plugin.yaml` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::C => "c",
            Language::Python => "python",
            Language::Js => "js",
        }
    }

    /// Parses `--lang`.
    pub fn parse(s: &str) -> Result<Language, AuthorError> {
        Language::ALL.into_iter().find(|l| l.as_str() == s).ok_or_else(|| AuthorError::UnknownLanguage(s.to_string()))
    }

    /// The extension points `plugin new` writes a project of this language for. C, Python and JavaScript projects
    /// start in the contract's `filter-score-plugin` world (their bindings are generated for one world), so they
    /// serve exactly Filter and Score until `plugin.yaml` names another world (`gang-plugin`: the pod view,
    /// events, PreFilter, Reserve, Permit); the Rust SDK exports any mix of points.
    pub fn points(self) -> &'static [Point] {
        match self {
            Language::Rust => &Point::ALL,
            _ => &[Point::Filter, Point::Score],
        }
    }
}

/// The extension points a plugin can serve: the framework's own list, named on the command line as in the
/// contract (`pre-filter`).
pub use crate::framework::ExtensionPoint as Point;

/// What the author's commands need of an extension point beyond the framework's names.
impl Point {
    /// The name the SDK's `export!` takes (`pre_filter`).
    pub fn rust_name(self) -> String {
        self.wit_interface().replace('-', "_")
    }

    /// One point by its contract name, its SDK name or upstream's (`pre-filter`, `pre_filter`, `PreFilter`).
    pub fn parse(s: &str) -> Option<Point> {
        let squash = |s: &str| s.chars().filter(|c| *c != '-' && *c != '_').collect::<String>().to_ascii_lowercase();
        let want = squash(s.trim());
        Point::ALL.into_iter().find(|p| squash(p.wit_interface()) == want)
    }

    /// `--points` for `lang`: a comma-separated list (none given: Filter and Score). Each point once, in cycle
    /// order.
    pub fn parse_list(list: Option<&str>, lang: Language) -> Result<Vec<Point>, AuthorError> {
        let Some(list) = list else { return Ok(vec![Point::Filter, Point::Score]) };
        let mut points = Vec::new();
        for item in list.split(',') {
            let p = Point::parse(item).ok_or_else(|| {
                AuthorError::Points(format!(
                    "unknown extension point {:?} (known: {})",
                    item.trim(),
                    Point::ALL.map(Point::wit_interface).join(", ")
                ))
            })?;
            if !lang.points().contains(&p) {
                return Err(AuthorError::Points(format!(
                    "{} is not served by {} plugins, whose glue implements the world filter-score-plugin (points: filter,score; plugin.yaml's world: gang-plugin serves pre-filter,reserve,permit with the pod view and events); the Rust SDK serves any mix",
                    p.wit_interface(),
                    lang.as_str()
                )));
            }
            if !points.contains(&p) {
                points.push(p);
            }
        }
        if lang != Language::Rust && points.len() != lang.points().len() {
            return Err(AuthorError::Points(format!(
                "{} plugins serve filter and score together (the glue implements the world filter-score-plugin); the Rust SDK serves any mix",
                lang.as_str()
            )));
        }
        points.sort();
        Ok(points)
    }
}

/// Checks a plugin name: it names the project directory, the component file, the Rust crate and (in CamelCase) the
/// plugin in the profile, so it is a DNS-1123 label, as a Kubernetes object name, that also starts with a letter
/// (a crate name cannot start with a digit) and is not a name Cargo or Rust reserves.
pub fn validate_name(name: &str) -> Result<(), AuthorError> {
    let bad = |reason: &str| Err(AuthorError::InvalidName { name: name.to_string(), reason: reason.to_string() });
    if name.is_empty() || name.len() > 63 {
        return bad("must be 1 to 63 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return bad("must consist of lower case letters, digits and '-' (a DNS-1123 label, e.g. my-filter)");
    }
    if !name.as_bytes()[0].is_ascii_lowercase() {
        return bad("must start with a letter");
    }
    if name.ends_with('-') {
        return bad("must end with a letter or a digit");
    }
    // Rust keywords and the names Cargo refuses for a package, plus the SDK's own name (the project depends on it).
    const RESERVED: &[&str] = &[
        "as",
        "async",
        "await",
        "break",
        "const",
        "continue",
        "crate",
        "dyn",
        "else",
        "enum",
        "extern",
        "false",
        "fn",
        "for",
        "if",
        "impl",
        "in",
        "let",
        "loop",
        "match",
        "mod",
        "move",
        "mut",
        "pub",
        "ref",
        "return",
        "self",
        "static",
        "struct",
        "super",
        "trait",
        "true",
        "type",
        "unsafe",
        "use",
        "where",
        "while",
        "abstract",
        "become",
        "box",
        "do",
        "final",
        "gen",
        "macro",
        "override",
        "priv",
        "try",
        "typeof",
        "unsized",
        "virtual",
        "yield",
        "test",
        "core",
        "std",
        "alloc",
        "proc-macro",
        "build",
        "deps",
        "examples",
        "incremental",
        "kws-plugin-sdk",
    ];
    if RESERVED.contains(&name) {
        return bad("is reserved by Rust or Cargo");
    }
    Ok(())
}

/// The plugin's name in a profile: the project name in CamelCase (`my-filter` is `MyFilter`), as upstream's plugins
/// are named.
pub fn plugin_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut c = part.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["my-filter", "a", "plugin2", "a-b-c"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "My", "1abc", "-a", "a-", "a_b", "a.b", "fn", "test", "kws-plugin-sdk", &"a".repeat(64)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert_eq!(plugin_name("my-filter"), "MyFilter");
        assert_eq!(plugin_name("a2-b"), "A2B");
    }

    #[test]
    fn points() {
        let all =
            |s: &str, l| Point::parse_list(Some(s), l).map(|v| v.iter().map(|p| p.wit_interface()).collect::<Vec<_>>());
        assert_eq!(Point::parse_list(None, Language::C).unwrap(), [Point::Filter, Point::Score]);
        assert_eq!(all("score, PreFilter,filter,score", Language::Rust).unwrap(), ["pre-filter", "filter", "score"]);
        assert_eq!(all("post_bind", Language::Rust).unwrap(), ["post-bind"]);
        assert!(all("filtre", Language::Rust).unwrap_err().to_string().contains("unknown extension point \"filtre\""));
        assert!(all("permit", Language::Python).is_err());
        assert!(all("filter", Language::Js).is_err());
        assert_eq!(all("score,filter", Language::Js).unwrap(), ["filter", "score"]);
    }
}
