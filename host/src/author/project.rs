//! A plugin project on disk (`plugin.yaml` names it and its language) and `plugin build`, which compiles it with
//! the language's toolchain and then makes and checks the component as `plugin componentize` does.

use std::path::{Path, PathBuf};

use super::{toolchain, validate_name, AuthorError, Language};
use crate::wasm::{self, ComponentInfo};

/// The project's manifest file, in the project's root.
pub const MANIFEST: &str = "plugin.yaml";

/// What `plugin.yaml` says.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    /// The plugin's name.
    pub name: String,
    /// Its language.
    pub language: Language,
    /// Where the contract is, relative to the project (default `wit`; C, Python and JavaScript builds read it):
    /// the repository's own samples name the repository's `wit/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wit: Option<PathBuf>,
    /// The contract's world the C, Python and JavaScript bindings are generated for (default
    /// `filter-score-plugin`, the world `plugin new` writes for): a plugin that keeps the pod view or registers
    /// events names a world that exports them (`gang-plugin`), and one that does not pays nothing for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
}

/// A project `plugin new` wrote.
#[derive(Debug, Clone)]
pub struct Project {
    /// Its directory.
    pub dir: PathBuf,
    /// The plugin's name (`plugin.yaml`'s `name`).
    pub name: String,
    /// Its language (`plugin.yaml`'s `language`).
    pub language: Language,
    /// The contract (`plugin.yaml`'s `wit`, default `wit/` in the project).
    pub wit: PathBuf,
    /// The world its bindings are generated for (`plugin.yaml`'s `world`, default `filter-score-plugin`).
    pub world: String,
}

/// What `plugin build` made.
#[derive(Debug, Clone)]
pub struct Built {
    /// The component.
    pub component: PathBuf,
    /// What it serves and imports, as `plugin check` reads it.
    pub info: ComponentInfo,
}

/// Folders of generated files: never inputs of the build.
const GENERATED: &[&str] = &["build", "target", "node_modules", "__pycache__", ".git"];

impl Project {
    /// Reads the project in `dir` (its `plugin.yaml`).
    pub fn open(dir: &Path) -> Result<Project, AuthorError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| AuthorError::Manifest {
            path: path.clone(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                "not found: not a plugin project (`kube-wasm-scheduler plugin new NAME --lang LANG` writes one)".into()
            } else {
                e.to_string()
            },
        })?;
        let manifest: Manifest = serde_path_to_error::deserialize(serde_yaml::Deserializer::from_str(&text))
            .map_err(|e| AuthorError::Manifest { path: path.clone(), message: e.to_string() })?;
        validate_name(&manifest.name)
            .map_err(|e| AuthorError::Manifest { path: path.clone(), message: format!("name: {e}") })?;
        let wit = dir.join(manifest.wit.as_deref().unwrap_or(Path::new("wit")));
        let world = manifest.world.unwrap_or_else(|| toolchain::GLUE_WORLD.to_string());
        // A world name reaches wit-bindgen, componentize-py and clang's file names: a WIT identifier only.
        if world.is_empty() || !world.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            return Err(AuthorError::Manifest {
                path,
                message: format!("world: {world:?} is not a world name of the contract (e.g. filter-score-plugin)"),
            });
        }
        Ok(Project { dir: dir.to_path_buf(), name: manifest.name, language: manifest.language, wit, world })
    }

    /// Where `plugin build` writes the component: `build/NAME.wasm`.
    pub fn component(&self) -> PathBuf {
        self.dir.join("build").join(format!("{}.wasm", self.name))
    }

    /// The profile `plugin test` simulates with.
    pub fn profile(&self) -> PathBuf {
        self.dir.join("profile.yaml")
    }

    /// The cluster `plugin test` simulates.
    pub fn cluster(&self) -> PathBuf {
        self.dir.join("cluster.yaml")
    }

    /// True when the component exists and is newer than every file of the project (generated folders aside).
    pub fn is_built(&self) -> bool {
        let Ok(built) = std::fs::metadata(self.component()).and_then(|m| m.modified()) else { return false };
        fn newest(dir: &Path, top: bool) -> Option<std::time::SystemTime> {
            let mut latest = None;
            for entry in std::fs::read_dir(dir).ok()?.flatten() {
                let path = entry.path();
                let name = entry.file_name();
                let t = if path.is_dir() {
                    if (top && GENERATED.iter().any(|g| name == *g)) || name == "__pycache__" {
                        continue;
                    }
                    newest(&path, false)
                } else {
                    entry.metadata().and_then(|m| m.modified()).ok()
                };
                latest = latest.max(t);
            }
            latest
        }
        newest(&self.dir, true).is_none_or(|t| t <= built)
    }

    /// `plugin build`: compiles the project and writes the component (to `out`, default [`Project::component`])
    /// only once it passed the checks `plugin check` makes (a failed build leaves the previous component in place,
    /// so a running `simulate --watch` keeps it). Intermediate files go to the project's `build/`.
    pub fn build(&self, out: Option<&Path>) -> Result<Built, AuthorError> {
        let build = self.dir.join("build");
        std::fs::create_dir_all(&build).map_err(|source| AuthorError::Io { path: build.clone(), source })?;
        let out = out.map(Path::to_path_buf).unwrap_or_else(|| self.component());
        let component_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| AuthorError::Component { path, source }
        };
        let info = match self.language {
            // A core module made by the SDK or wit-bindgen: the same step as `plugin componentize`.
            Language::Rust | Language::C => {
                let core = match self.language {
                    Language::Rust => toolchain::build_rust(&self.dir, &self.name)?,
                    _ => toolchain::build_c(&self.dir, &self.wit, &self.world, &build, &self.name)?,
                };
                wasm::componentize(&core, None, &out).map_err(component_err(&core))?
            }
            // The tools write a component: it is checked as `plugin check` does before it replaces the old one.
            Language::Python | Language::Js => {
                let tmp = build.join(format!("{}.wasm.new", self.name));
                match self.language {
                    Language::Python => toolchain::build_python(&self.dir, &self.wit, &self.world, &build, &tmp)?,
                    _ => toolchain::build_js(&self.dir, &self.wit, &self.world, &tmp)?,
                }
                wasm::check_and_install(&tmp, &out).map_err(component_err(&tmp))?
            }
        };
        Ok(Built { component: out, info })
    }
}
