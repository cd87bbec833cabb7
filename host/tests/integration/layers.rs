//! The crate's modules stand in layers: each imports only modules below it, so there is no import circle among
//! `host/src/`'s modules. The test reads the sources (every `crate::<module>` path, tests included) and checks each
//! against the order below; a new module has to be given its place here.

use std::collections::BTreeMap;
use std::path::Path;

/// The top-level modules of `host/src/`, lowest first: YAML reading and the configuration at the floor, the
/// framework's types and runners on it, the cluster seam, queue and cache, then the plugins (native, extenders,
/// Wasm, tenants'), the scheduler, and what serves or drives it.
const LAYERS: &[&str] = &[
    "yaml",
    "config",
    "framework",
    "cluster",
    "queue",
    "cache",
    "extender",
    "plugins",
    "wasm",
    "tenancy",
    "author",
    "scheduler",
    "server",
    "options",
    "sim",
    "live",
];

/// Every `crate::<module>` path a source text names, `crate::{a, b::c}` groups included.
fn crate_paths(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let preceded = rest[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !preceded {
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    out.push(name);
                }
            } else {
                out.push(after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
            }
        }
        rest = after;
    }
    out
}

/// The imports that go up or sideways: (importing file, its module, the module it names).
fn upward_imports(files: &[(String, String)]) -> Vec<(String, String, String)> {
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let mut bad = Vec::new();
    for (path, src) in files {
        let module = path.split('/').next().unwrap_or(path).trim_end_matches(".rs");
        if module == "lib" || module == "main" {
            continue;
        }
        let own =
            *rank.get(module).unwrap_or_else(|| panic!("host/src/{path}: module {module:?} has no layer in LAYERS"));
        for target in crate_paths(src) {
            if let Some(&r) = rank.get(target.as_str()) {
                if r >= own && target != module {
                    bad.push((path.clone(), module.to_string(), target));
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

#[test]
fn every_module_imports_only_modules_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    assert!(files.len() > 100, "read only {} files under {}", files.len(), root.display());
    let bad = upward_imports(&files);
    let lines: Vec<String> =
        bad.iter().map(|(p, m, t)| format!("host/src/{p}: {m} imports {t}, which is not below it")).collect();
    assert!(lines.is_empty(), "{} imports against the layers:\n{}", lines.len(), lines.join("\n"));
}

#[test]
fn the_check_sees_plain_grouped_and_qualified_paths() {
    let src =
        "use crate::framework::X;\nuse crate::{wasm::Y, plugins};\nfn f() { crate::live::run(); my_crate::sim::z(); }";
    assert_eq!(crate_paths(src), ["framework", "wasm", "plugins", "live"]);
    let files = vec![
        ("cluster/a.rs".to_string(), src.to_string()),
        ("framework/b.rs".to_string(), "use crate::config::C;".into()),
    ];
    let bad = upward_imports(&files);
    let named: Vec<&str> = bad.iter().map(|(_, _, t)| t.as_str()).collect();
    assert_eq!(named, ["live", "plugins", "wasm"]);
}
