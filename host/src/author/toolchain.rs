//! The guest toolchains, found where `scripts/setup-wasm.sh` installs them (embedded here, so `plugin setup` works
//! without a checkout of the repository), and the one command per language that compiles a project.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{AuthorError, Language};

/// The repository's toolchain installer, run by `plugin setup`: the same script `make guests` runs.
const SETUP_WASM: &str = include_str!("../../../scripts/setup-wasm.sh");

/// The componentize-js driver (a file of its own so that it reads as JavaScript).
const JS_COMPONENTIZE: &str = include_str!("js-componentize.mjs");

/// The world the C, Python and JavaScript glue implements unless `plugin.yaml` names another.
pub(super) const GLUE_WORLD: &str = "filter-score-plugin";

/// `$KWS_CACHE` (default `~/.cache/kube-wasm-scheduler`), where setup-wasm.sh installs into `tools/`.
fn cache_dir() -> PathBuf {
    std::env::var_os("KWS_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"))
            .join(".cache/kube-wasm-scheduler")
    })
}

fn tools_dir() -> PathBuf {
    cache_dir().join("tools")
}

/// The command `plugin build` names when a tool is missing.
fn install_command(lang: Language) -> String {
    format!("kube-wasm-scheduler plugin setup --lang {}", lang.as_str())
}

fn missing(what: &str, lang: Language) -> AuthorError {
    AuthorError::MissingTool { missing: what.to_string(), install: install_command(lang) }
}

/// `name` in the installed tools, else on `PATH`.
fn find_tool(name: &str) -> Option<PathBuf> {
    let installed = tools_dir().join("bin").join(name);
    if installed.is_file() {
        return Some(installed);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// `plugin setup --lang X`: runs the repository's installer for that language (idempotent: what is there is
/// skipped). It may call `apt-get` (with sudo when not root), `cargo install`, `pip` and `npm`.
pub fn setup(lang: Language) -> Result<(), AuthorError> {
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(SETUP_WASM).arg("setup-wasm.sh").arg(lang.as_str());
    run(cmd, &format!("setup-wasm.sh {}", lang.as_str()))
}

/// The README's paragraph on what builds a project of `lang`.
pub(super) fn readme_note(lang: Language) -> String {
    let tools = match lang {
        Language::Rust => {
            "Rust for `wasm32-unknown-unknown`: rustup's target where it is installed, else Debian's `rustc-web` with \
             its library source and `lld` (the standard library is then built from source). `plugin build` builds into \
             `$CARGO_TARGET_DIR` when it is set, else `target/`; the core module becomes a component without `wasm-tools`."
        }
        Language::C => "clang with wasi-libc (Debian's `clang`, `lld`, `wasi-libc`) and `wit-bindgen` (C bindings, generated into `build/gen/`).",
        Language::Python => "`componentize-py` (the component embeds CPython, about 18 MB; the first load compiles it for ~20 s, later loads reuse the scheduler's plugin cache).",
        Language::Js => "`node` and `@bytecodealliance/componentize-js` (the component embeds a JavaScript engine, about 12 MB).",
    };
    format!(
        "What builds it: {tools} `kube-wasm-scheduler plugin setup --lang {}` installs what is missing (under \
         `~/.cache/kube-wasm-scheduler/tools`, or `$KWS_CACHE/tools`).",
        lang.as_str()
    )
}

/// Runs a build step, its output going to the user; a failure names the step.
fn run(mut cmd: Command, step: &str) -> Result<(), AuthorError> {
    let status =
        cmd.status().map_err(|e| AuthorError::BuildFailed { step: step.to_string(), status: e.to_string() })?;
    if status.success() {
        Ok(())
    } else {
        Err(AuthorError::BuildFailed { step: step.to_string(), status: status.to_string() })
    }
}

/// True when rustup is there with the `wasm32-unknown-unknown` standard library.
fn rustup_has_wasm() -> bool {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == "wasm32-unknown-unknown"))
}

/// Builds a Rust project's cdylib for `wasm32-unknown-unknown` with the `guest` profile and returns the core
/// module. The two ways are scripts/build-guests.sh's: rustup's target, else Debian's rustc with `-Zbuild-std`.
pub(super) fn build_rust(dir: &Path, name: &str) -> Result<PathBuf, AuthorError> {
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| dir.join("target"));
    let args = ["build", "--profile", "guest", "--target", "wasm32-unknown-unknown"];
    let mut cmd;
    if rustup_has_wasm() {
        cmd = Command::new("cargo");
        cmd.args(args);
    } else {
        // Debian's rustc-web knows wasm32 but ships no prebuilt standard library for it: build it from rust-web-src.
        let debian = ["/usr/bin/cargo", "/usr/bin/rustc", "/usr/lib/rustlib/src/rust/library"];
        if !debian.iter().all(|p| Path::new(p).exists()) || find_tool("wasm-ld").is_none() {
            return Err(AuthorError::MissingTool {
                missing: "a Rust toolchain for wasm32-unknown-unknown (rustup's target, or Debian's rustc-web, rust-web-src and lld)".into(),
                install: format!("{}` or `rustup target add wasm32-unknown-unknown", install_command(Language::Rust)),
            });
        }
        cmd = Command::new("/usr/bin/cargo");
        cmd.args(args)
            .arg("-Zbuild-std=std,panic_abort")
            .env("RUSTC", "/usr/bin/rustc")
            .env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER", "wasm-ld");
    }
    cmd.arg("--manifest-path").arg(dir.join("Cargo.toml")).env("CARGO_TARGET_DIR", &target_dir);
    run(cmd, "cargo build --profile guest --target wasm32-unknown-unknown")?;
    Ok(target_dir.join("wasm32-unknown-unknown/guest").join(format!("{}.wasm", name.replace('-', "_"))))
}

/// Compiles a C project (`plugin.c` with the glue) to a core module: wit-bindgen's C bindings of the glue's world,
/// then clang for wasm32-wasi as a reactor, with the repository's C guests' flags (scripts/c-guest.sh).
pub(super) fn build_c(dir: &Path, wit: &Path, world: &str, build: &Path, name: &str) -> Result<PathBuf, AuthorError> {
    let wit_bindgen = find_tool("wit-bindgen").ok_or_else(|| missing("wit-bindgen", Language::C))?;
    let clang = find_tool("clang").ok_or_else(|| missing("clang", Language::C))?;
    let sysroot = Path::new("/usr");
    if !sysroot.join("lib/wasm32-wasi/libc.a").is_file() {
        return Err(missing("wasi-libc (/usr/lib/wasm32-wasi/libc.a)", Language::C));
    }
    let gen = build.join("gen");
    let _ = std::fs::remove_dir_all(&gen);
    std::fs::create_dir_all(&gen).map_err(|source| AuthorError::Io { path: gen.clone(), source })?;
    let mut cmd = Command::new(wit_bindgen);
    cmd.arg("c").arg(wit).args(["--world", world, "--out-dir"]).arg(&gen);
    // Quiet unless it fails: it lists every file it generates.
    let step = "wit-bindgen c";
    let output = cmd.output().map_err(|e| AuthorError::BuildFailed { step: step.into(), status: e.to_string() })?;
    if !output.status.success() {
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(&output.stdout);
        let _ = std::io::stderr().write_all(&output.stderr);
        return Err(AuthorError::BuildFailed { step: step.into(), status: output.status.to_string() });
    }
    let world = world.replace('-', "_");
    let core = build.join(format!("{name}.core.wasm"));
    let mut cmd = Command::new(clang);
    cmd.args([
        "--target=wasm32-wasi",
        "--sysroot=/usr",
        "-isystem",
        "/usr/include/wasm32-wasi",
        "-L/usr/lib/wasm32-wasi",
    ])
    .args(["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-unused-function", "-mexec-model=reactor"])
    .arg("-Wl,--strip-debug")
    // The glue's types are named after the world (`filter_score_plugin_string_t`): it reads the name from here.
    .arg(format!("-DGLUE_WORLD={world}"))
    .arg("-I")
    .arg(&gen)
    .arg(dir.join("plugin.c"))
    .arg(gen.join(format!("{world}.c")))
    .arg(gen.join(format!("{world}_component_type.o")))
    .arg("-o")
    .arg(&core);
    run(cmd, "clang")?;
    Ok(core)
}

/// Builds a Python project (`app.py` and the modules beside it) into a component at `out` with componentize-py.
pub(super) fn build_python(dir: &Path, wit: &Path, world: &str, build: &Path, out: &Path) -> Result<(), AuthorError> {
    let componentize_py = find_tool("componentize-py").ok_or_else(|| missing("componentize-py", Language::Python))?;
    // Build from a copy of the modules: componentize-py leaves __pycache__ beside the modules it loads.
    let src = build.join("py-src");
    let _ = std::fs::remove_dir_all(&src);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AuthorError::Io { path, source }
    };
    std::fs::create_dir_all(&src).map_err(io(&src))?;
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.extension().is_some_and(|e| e == "py") {
            std::fs::copy(&path, src.join(path.file_name().unwrap_or_default())).map_err(io(&path))?;
        }
    }
    let mut cmd = Command::new(componentize_py);
    cmd.arg("-d").arg(wit).args(["-w", world, "componentize", "app", "-p"]).arg(&src).arg("-o").arg(out);
    let result = run(cmd, "componentize-py");
    let _ = std::fs::remove_dir_all(&src);
    result
}

/// Builds a JavaScript project (`plugin.js` and the modules beside it) into a component at `out` with
/// componentize-js, through its driver (js-componentize.mjs).
pub(super) fn build_js(dir: &Path, wit: &Path, world: &str, out: &Path) -> Result<(), AuthorError> {
    let node = find_tool("node").ok_or_else(|| missing("node", Language::Js))?;
    let modules = tools_dir().join("js/node_modules");
    if !modules.join("@bytecodealliance/componentize-js/package.json").is_file() {
        return Err(missing(&format!("componentize-js (in {})", modules.display()), Language::Js));
    }
    // componentize-js runs in the project (below): paths must not be relative to where the user is.
    let abs = |p: &Path| std::path::absolute(p).map_err(|source| AuthorError::Io { path: p.to_path_buf(), source });
    let (dir, wit, out) = (abs(dir)?, abs(wit)?, abs(out)?);
    let step = "componentize-js";
    let failed = |status: String| AuthorError::BuildFailed { step: step.to_string(), status };
    // The driver is read from stdin (`-`); argv is then as for a script file.
    // componentize-js maps the working directory into its build sandbox: run it in the project.
    let mut child = Command::new(node)
        .current_dir(&dir)
        .args(["--input-type=module", "-"])
        .arg(&modules)
        .arg(&wit)
        .arg(dir.join("plugin.js"))
        .arg(&out)
        .arg(world)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| failed(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write as _;
        stdin.write_all(JS_COMPONENTIZE.as_bytes()).map_err(|e| failed(e.to_string()))?;
    }
    let status = child.wait().map_err(|e| failed(e.to_string()))?;
    if status.success() {
        Ok(())
    } else {
        Err(failed(status.to_string()))
    }
}
