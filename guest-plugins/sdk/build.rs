//! Generates the SDK's bindings (`$OUT_DIR/bindings.rs`, included by src/bindings.rs) and encodes the component
//! type of every small plugin world the `export_*!` macros embed.
//!
//! The bindings are wit-bindgen 0.46's, generated here rather than by its `generate!` macro for one reason: the
//! macro always embeds a `component-type` custom section (the world with its exports removed), and a module built
//! with [`kws_plugin_sdk::export!`] must carry none, so `plugin componentize` derives its world from the module's
//! export names. The generator runs with the options the macro would pass, and that one static is compiled out.
//!
//! The small worlds' sections exist because wit-bindgen's own export macros cannot be used for more than one world
//! per crate (their helper macros share names): an `export_*!` macro embeds the section of the world it targets,
//! encoded exactly as wit-bindgen 0.46 encodes it.

use std::path::PathBuf;

/// The worlds a plugin can target with an `export_*!` macro.
const WORLDS: &[&str] = &["score-plugin", "filter-score-plugin", "score-post-bind-plugin", "queue-sort-plugin"];

/// The world the bindings are generated for: every extension point.
const ALL_POINTS: &str = "scheduler-plugin";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // `wit/` beside this file: in the repository a link to the contract, in the packaged crate a copy. A plugin
    // project written by `kube-wasm-scheduler plugin new` vendors this crate as `sdk/` beside its own `wit/`.
    let wit =
        ["wit", "../wit"].iter().map(|d| manifest.join(d)).find(|d| d.join("types.wit").is_file()).unwrap_or_else(
            || panic!("{}: no wit/ (the kws:plugin contract) here or in the parent folder", manifest.display()),
        );
    println!("cargo:rerun-if-changed={}", wit.display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));

    let mut resolve = wit_parser::Resolve::default();
    let (pkg, _) = resolve.push_dir(&wit).unwrap_or_else(|e| panic!("{}: {e:#}", wit.display()));
    for name in WORLDS {
        let world = resolve.select_world(&[pkg], Some(name)).unwrap_or_else(|e| panic!("world {name}: {e:#}"));
        let bytes = wit_component::metadata::encode(&resolve, world, wit_component::StringEncoding::UTF8, None)
            .unwrap_or_else(|e| panic!("encoding world {name}: {e:#}"));
        std::fs::write(out.join(format!("{name}.component-type")), bytes).expect("write component type");
    }

    let world = resolve.select_world(&[pkg], Some(ALL_POINTS)).unwrap_or_else(|e| panic!("world {ALL_POINTS}: {e:#}"));
    let opts = wit_bindgen_rust::Opts {
        pub_export_macro: true,
        export_macro_name: Some("__kws_export_all".into()),
        default_bindings_module: Some("kws_plugin_sdk::bindings".into()),
        additional_derive_attributes: ["PartialEq", "Eq", "Hash"].map(String::from).to_vec(),
        // Nothing refers to the section compiled out below.
        disable_custom_section_link_helpers: true,
        ..Default::default()
    };
    let mut files = Default::default();
    opts.build().generate(&resolve, world, &mut files).unwrap_or_else(|e| panic!("bindings for {ALL_POINTS}: {e:#}"));
    let (_, src) = files.iter().next().expect("wit-bindgen produced no file");
    let src = std::str::from_utf8(src).expect("bindings are UTF-8");
    std::fs::write(out.join("bindings.rs"), without_imports_section(src)).expect("write bindings");
}

/// `src` with the static that carries the imports-only world compiled out (its `cfg` made never true). Panics if
/// it is not found exactly once, so a wit-bindgen upgrade that changes its shape fails the build instead of
/// silently putting the section back.
fn without_imports_section(src: &str) -> String {
    let section = "-with-all-of-its-exports-removed:encoded world\")]";
    let wasm_only = "#[cfg(target_arch = \"wasm32\")]";
    let hits: Vec<usize> = src.match_indices(section).map(|(i, _)| i).collect();
    assert_eq!(hits.len(), 1, "expected one imports-only component-type section in wit-bindgen's output");
    let cfg = src[..hits[0]].rfind(wasm_only).expect("the section's #[cfg(target_arch = \"wasm32\")]");
    assert!(hits[0] - cfg < 300, "the #[cfg] found is not the section's");
    format!("{}#[cfg(any())]{}", &src[..cfg], &src[cfg + wasm_only.len()..])
}
