//! `plugin new`: writes a plugin project, self-contained, wherever the author wants it (compare `cargo new`).
//!
//! Every file comes from the binary: the contract is the one the host checks components against, the Rust SDK and
//! the C, Python and JavaScript glue and sample policies are the repository's own files (`include_str!` of their
//! paths), so a project gets exactly what the repository's guests are built and tested with.

use std::path::{Path, PathBuf};

use super::project::{Manifest, MANIFEST};
use super::{plugin_name, validate_name, AuthorError, Language, Point};

/// What `plugin new` was asked for.
#[derive(Debug, Clone)]
pub struct NewProject {
    /// The plugin's name (a DNS-1123 label): the crate, the component file and, in CamelCase, the profile's plugin.
    pub name: String,
    /// The language.
    pub language: Language,
    /// The extension points the sample policy serves.
    pub points: Vec<Point>,
    /// Where to write it (a missing or empty directory).
    pub dir: PathBuf,
}

/// The contract, as the host's own copy (`wasm::CONTRACT_WIT`).
fn contract() -> impl Iterator<Item = (String, &'static str)> {
    crate::wasm::CONTRACT_WIT.iter().map(|(file, text)| (format!("wit/{file}"), *text))
}

/// The Rust SDK's files, vendored as the project's `sdk/` crate. The test below checks that this list is the whole
/// SDK, so a file added to the SDK cannot be left out of projects.
const RUST_SDK: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../../guest-plugins/sdk/Cargo.toml")),
    ("build.rs", include_str!("../../../guest-plugins/sdk/build.rs")),
    ("src/batch.rs", include_str!("../../../guest-plugins/sdk/src/batch.rs")),
    ("src/bindings.rs", include_str!("../../../guest-plugins/sdk/src/bindings.rs")),
    ("src/config.rs", include_str!("../../../guest-plugins/sdk/src/config.rs")),
    ("src/host.rs", include_str!("../../../guest-plugins/sdk/src/host.rs")),
    ("src/lib.rs", include_str!("../../../guest-plugins/sdk/src/lib.rs")),
    ("src/normalize.rs", include_str!("../../../guest-plugins/sdk/src/normalize.rs")),
    ("src/runtime.rs", include_str!("../../../guest-plugins/sdk/src/runtime.rs")),
    ("src/sort_key.rs", include_str!("../../../guest-plugins/sdk/src/sort_key.rs")),
    ("src/table.rs", include_str!("../../../guest-plugins/sdk/src/table.rs")),
    ("src/testing.rs", include_str!("../../../guest-plugins/sdk/src/testing.rs")),
    ("src/types.rs", include_str!("../../../guest-plugins/sdk/src/types.rs")),
    ("src/view.rs", include_str!("../../../guest-plugins/sdk/src/view.rs")),
];

/// The sample guests' glue and policy per language, as (file in the project, text). The policy is the
/// repository's priority-label, the same in every language.
const C_FILES: &[(&str, &str)] = &[
    ("plugin.c", include_str!("../../../guest-plugins/priority-label-c/plugin.c")),
    ("plugin_glue.h", include_str!("../../../guest-plugins/priority-label-c/plugin_glue.h")),
];
const PYTHON_FILES: &[(&str, &str)] = &[
    ("app.py", include_str!("../../../guest-plugins/priority-label-py/app.py")),
    ("plugin_glue.py", include_str!("../../../guest-plugins/priority-label-py/plugin_glue.py")),
];
const JS_FILES: &[(&str, &str)] = &[
    ("plugin.js", include_str!("../../../guest-plugins/priority-label-js/plugin.js")),
    ("glue.js", include_str!("../../../guest-plugins/priority-label-js/glue.js")),
];

const RUST_LIB: &str = include_str!("templates/rust/lib.rs");
const RUST_CARGO: &str = include_str!("templates/rust/Cargo.toml");
const README: &str = include_str!("templates/README.md");
const PROFILE: &str = include_str!("templates/profile.yaml");
const CLUSTER: &str = include_str!("templates/cluster.yaml");

/// `plugin new`: checks the request, then writes the project into `dir` (created if missing). Returns the files
/// written, relative to `dir`.
pub fn new_project(req: &NewProject) -> Result<Vec<String>, AuthorError> {
    validate_name(&req.name)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AuthorError::Io { path, source }
    };
    match std::fs::read_dir(&req.dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(AuthorError::NotEmpty(req.dir.clone()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Err(AuthorError::NotEmpty(req.dir.clone())),
        Err(e) => return Err(io(&req.dir)(e)),
    }
    let files = render(req);
    for (file, text) in &files {
        let path = req.dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(files.into_iter().map(|(f, _)| f).collect())
}

/// Every file of the project, as (path relative to the project, text).
fn render(req: &NewProject) -> Vec<(String, String)> {
    let plugin = plugin_name(&req.name);
    let subst = |text: &str| text.replace("{{name}}", &req.name).replace("{{Plugin}}", &plugin);
    let mut files: Vec<(String, String)> = Vec::new();
    let manifest = Manifest { name: req.name.clone(), language: req.language, wit: None, world: None };
    files.push((
        MANIFEST.to_string(),
        format!(
            "# Written by `kube-wasm-scheduler plugin new`; `plugin build` and `plugin test` read it.\n{}",
            serde_yaml::to_string(&manifest).unwrap_or_default()
        ),
    ));
    files.extend(contract().map(|(f, t)| (f, t.to_string())));
    let (policy, file_list) = match req.language {
        Language::Rust => {
            files.push(("Cargo.toml".into(), subst(RUST_CARGO)));
            files.push(("src/lib.rs".into(), rust_lib(&plugin, &req.points)));
            files.extend(RUST_SDK.iter().map(|(f, t)| (format!("sdk/{f}"), t.to_string())));
            files.push((".gitignore".into(), "/target/\n/build/\n".into()));
            (
                "src/lib.rs",
                "- `src/lib.rs`: the policy, a `Plugin` implementation and the one `export!` line naming its points.\n\
                 - `sdk/`: the Rust SDK (`kws-plugin-sdk`), vendored; `Cargo.toml` depends on it by path.",
            )
        }
        Language::C => {
            files.extend(C_FILES.iter().map(|(f, t)| (f.to_string(), t.to_string())));
            files.push((".gitignore".into(), "/build/\n".into()));
            (
                "plugin.c",
                "- `plugin.c`: the policy (the Filter decision and the Score of one node; kube-wasm-scheduler's sample priority-label).\n\
                 - `plugin_glue.h`: the contract's glue (node table, the cycle's pod, statuses, config, Filter's batched answer).",
            )
        }
        Language::Python => {
            files.extend(PYTHON_FILES.iter().map(|(f, t)| (f.to_string(), t.to_string())));
            files.push((".gitignore".into(), "/build/\n__pycache__/\n".into()));
            (
                "app.py",
                "- `app.py`: the policy (the module componentize-py builds; kube-wasm-scheduler's sample priority-label).\n\
                 - `plugin_glue.py`: the contract's glue (node table, the cycle's pod, statuses, config, Filter's batched answer).",
            )
        }
        Language::Js => {
            files.extend(JS_FILES.iter().map(|(f, t)| (f.to_string(), t.to_string())));
            files.push((".gitignore".into(), "/build/\n".into()));
            (
                "plugin.js",
                "- `plugin.js`: the policy (the module componentize-js builds; kube-wasm-scheduler's sample priority-label).\n\
                 - `glue.js`: the contract's glue (node table, the cycle's pod, statuses, config, Filter's batched answer).",
            )
        }
    };
    let points: Vec<&str> = req.points.iter().map(|p| p.wit_interface()).collect();
    let readme = subst(README)
        .replace("{{Language}}", language_title(req.language))
        .replace("{{lang}}", req.language.as_str())
        .replace("{{points}}", &points.join(", "))
        .replace("{{policy}}", policy)
        .replace("{{files}}", file_list)
        .replace("{{toolchain}}", &super::toolchain::readme_note(req.language));
    files.push(("README.md".into(), readme));
    // A QueueSort plugin replaces PrioritySort: a profile has exactly one.
    let queue_sort = if req.points.contains(&Point::QueueSort) {
        format!("    queueSort:\n      enabled: [{{name: {plugin}}}]\n      disabled: [{{name: '*'}}]\n")
    } else {
        String::new()
    };
    files.push(("profile.yaml".into(), subst(PROFILE).replace("{{queueSort}}", &queue_sort)));
    files.push(("cluster.yaml".into(), subst(CLUSTER)));
    files
}

fn language_title(lang: Language) -> &'static str {
    match lang {
        Language::Rust => "Rust",
        Language::C => "C",
        Language::Python => "Python",
        Language::Js => "JavaScript",
    }
}

/// The Rust sample policy for `points`: the template's sections (`//@ point` up to the next marker) for the
/// points chosen, the `use` line for what they name, and the export line.
fn rust_lib(plugin: &str, points: &[Point]) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in RUST_LIB.lines() {
        if let Some(section) = line.trim().strip_prefix("//@ ") {
            keep = section == "end" || Point::parse(section).is_some_and(|p| points.contains(&p));
            continue;
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    let mut uses = vec!["Config", "Declared", "Node", "Plugin"];
    for p in points {
        uses.extend_from_slice(match p {
            Point::PreEnqueue => &["Pod", "Status"][..],
            Point::QueueSort => &["QueuedPod"],
            Point::PreFilter => &["Pod", "PreFilterResult"],
            Point::Filter => &["CyclePod", "NodeInfo", "Status"],
            Point::PostFilter => &["Pod", "NodeInfo", "Status", "PostFilterResult"],
            Point::PreScore => &["Pod", "NodeInfo", "Status"],
            Point::Score => &["CyclePod", "NodeInfo", "Status", "normalize", "MAX_NODE_SCORE"],
            Point::Reserve => &["Pod", "Status"],
            Point::Permit => &["Pod", "Permit"],
            Point::PreBind => &["Pod", "Status"],
            Point::Bind => &["Pod", "Status"],
            Point::PostBind => &["PodRef"],
        });
    }
    // rustfmt's order: modules, then types, then constants.
    uses.sort_by_key(|u| (u.starts_with(char::is_uppercase) as u8 + u.chars().all(|c| !c.is_lowercase()) as u8, *u));
    uses.dedup();
    let exports: Vec<String> = points.iter().map(|p| p.rust_name()).collect();
    out.replace("{{Plugin}}", plugin)
        .replace("{{uses}}", &format!("{{{}}}", uses.join(", ")))
        .replace("{{exports}}", &exports.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendored SDK is the whole SDK: a file added to `guest-plugins/sdk` must be listed in [`RUST_SDK`].
    #[test]
    fn vendored_sdk_is_complete() {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-plugins/sdk");
        let mut on_disk = vec!["Cargo.toml".to_string(), "build.rs".to_string()];
        for e in std::fs::read_dir(sdk.join("src")).unwrap() {
            on_disk.push(format!("src/{}", e.unwrap().file_name().to_string_lossy()));
        }
        on_disk.sort();
        let mut listed: Vec<String> = RUST_SDK.iter().map(|(f, _)| f.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    #[test]
    fn rust_sample_exports_the_points_chosen() {
        let lib = rust_lib("OnlyFilter", &[Point::Filter]);
        assert!(lib.contains("kws_plugin_sdk::export!(OnlyFilter: filter);"), "{lib}");
        assert!(
            lib.contains("use kws_plugin_sdk::{Config, CyclePod, Declared, Node, NodeInfo, Plugin, Status};"),
            "{lib}"
        );
        assert!(!lib.contains("fn score"), "{lib}");
        assert!(!lib.contains("//@"), "{lib}");
        let lib = rust_lib("Every", &Point::ALL);
        assert!(lib.contains("fn post_bind") && lib.contains("fn less") && lib.contains("normalize, Config"), "{lib}");
    }
}
