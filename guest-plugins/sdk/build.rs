//! Encodes the component type of every plugin world the SDK exports (see `export_*!` in src/lib.rs).
//!
//! wit-bindgen's own export macros cannot be used for more than one world per crate (their helper macros share
//! names), so the SDK generates bindings once for the all-points world and embeds, per plugin, the component-type
//! custom section of the smaller world the plugin targets. This is that section's content, encoded exactly as
//! wit-bindgen 0.46 encodes it.

use std::path::PathBuf;

/// The worlds a plugin can target with an `export_*!` macro.
const WORLDS: &[&str] = &["score-plugin", "filter-score-plugin", "score-post-bind-plugin", "queue-sort-plugin"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let wit = manifest.join("../../wit");
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
}
