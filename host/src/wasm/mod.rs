//! The WebAssembly boundary: components implementing the `kws:plugin@0.2.1` contract (`wit/`) served at the
//! extension points they export, sandboxed (deadline, memory cap, no ambient authority) and hot-reloadable.

mod adapters;
mod args;
pub mod bindings;
pub mod cache;
mod convert;
pub mod engine;
mod epoch;
mod failure;
mod host;
mod instance;
mod output;
mod plugin;
mod reload;
pub mod source;

use std::path::Path;
use std::sync::Arc;

use thiserror::Error;
use wasmtime::component::Component;

pub use args::{CircuitBreakerArgs, FailurePolicy, WasmArgs, DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT, MAX_TIMEOUT};
pub use plugin::{loaded_plugins, observe_refusals, RefusalObserver, RefusedVersion, WasmPlugin, WasmStats};
pub use source::{PullArgs, PullPolicy, Source};

use crate::framework::Registry;
use crate::framework::{ExtensionPoint, Plugin};

/// The contract version this host offers.
pub const CONTRACT_VERSION: &str = "0.2.1";
/// The contract's package.
pub const CONTRACT_PACKAGE: &str = "kws:plugin";

/// The previous contract minor, served through [`adapt_previous_contract`].
pub const PREVIOUS_CONTRACT_VERSION: &str = "0.1.0";

/// A component built against [`PREVIOUS_CONTRACT_VERSION`], made one of this contract; None when `bytes` name no
/// `kws:plugin` interface of that version. 0.1.0 → 0.2.0 only added interfaces, functions and types, so the adapter
/// renames the component's contract names (`kws:plugin/…@0.1.0` → `@0.2.0`, the same length, so every
/// length-prefixed name and section stays well-formed) and wasmtime then links it as an earlier 0.2 patch, checking
/// every function's shape as it does for any component.
pub fn adapt_previous_contract(bytes: &[u8]) -> Option<Vec<u8>> {
    const PKG: &[u8] = b"kws:plugin";
    let (from, to) = (PREVIOUS_CONTRACT_VERSION.as_bytes(), b"0.2.0");
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while let Some(at) = bytes[i..].windows(PKG.len()).position(|w| w == PKG).map(|p| p + i) {
        let mut j = at + PKG.len();
        if bytes.get(j) == Some(&b'/') {
            j += 1;
            while bytes.get(j).is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-') {
                j += 1;
            }
        }
        let version = j + 1..j + 1 + from.len();
        let ends = !bytes.get(version.end).is_some_and(|b| b.is_ascii_digit() || *b == b'.');
        if bytes.get(j) == Some(&b'@') && bytes.get(version.clone()) == Some(from) && ends {
            out.get_or_insert_with(|| bytes.to_vec())[version.clone()].copy_from_slice(to);
        }
        i = at + PKG.len();
    }
    out
}

/// Why a component built against contract `version` is not served, None when it is. The contract follows semver
/// as WASI 0.2 does: a patch only adds (a new optional export, a new host function), so a component built against
/// any earlier patch of this host's `0.minor` loads unchanged, wasmtime matching its `@0.2.0` names to the host's
/// semver-compatibly; a new minor may change shapes, and a newer patch may import what this host lacks.
pub fn contract_refusal(version: &str) -> Option<String> {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut it = v.split('.').map(|p| p.parse::<u64>().ok());
        let t = (it.next()??, it.next()??, it.next()??);
        it.next().is_none().then_some(t)
    };
    let ours = parse(CONTRACT_VERSION).expect("the host's version is x.y.z");
    match parse(version) {
        Some((0, minor, patch)) if minor == ours.1 && patch <= ours.2 => None,
        Some((0, minor, _)) if minor == ours.1 => Some(format!(
            "contract version {version} is newer than this host's {CONTRACT_PACKAGE}@{CONTRACT_VERSION}: run a \
             scheduler that offers {version}, or build against {CONTRACT_VERSION} or an earlier 0.{minor} patch"
        )),
        _ => Some(format!(
            "it targets contract version {version}; this host offers {CONTRACT_PACKAGE}@{CONTRACT_VERSION} (and every \
             earlier 0.{}.x): rebuild it against that version (the wit/ folder of this release)",
            ours.1
        )),
    }
}

/// A component that cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WasmError {
    /// The file could not be read.
    #[error("reading {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The file's digest is not the pinned one.
    #[error("{path}: sha256 is {got}, the profile pins {want}")]
    Digest {
        /// The file.
        path: String,
        /// Pinned digest.
        want: String,
        /// Actual digest.
        got: String,
    },
    /// Not a WebAssembly component.
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    /// It imports something the host does not offer.
    #[error("imports {0}, which this host does not offer (it offers kws:plugin/host@0.2.1 and WASI 0.2 with no files, network or environment)")]
    UnsupportedImport(String),
    /// It does not fit the contract (version, missing exports).
    #[error("{0}")]
    Contract(String),
    /// Linking failed.
    #[error("cannot link: {0}")]
    Link(String),
    /// The guest refused its configuration (`config.validate`).
    #[error("the plugin refused its configuration: {0}")]
    Config(String),
    /// A core module could not be turned into a component.
    #[error("cannot make a component of it: {0}")]
    Componentize(String),
    /// A remote source could not be fetched (unreachable, refused, not a Wasm artifact).
    #[error(transparent)]
    Source(#[from] source::SourceError),
    /// A source named on the command line that cannot be used.
    #[error("{0}")]
    InvalidSource(String),
    /// The output could not be written.
    #[error("writing {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// What a component exports and imports, as `plugin check` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ComponentInfo {
    /// The contract version it targets.
    pub contract_version: String,
    /// Extension points it serves (upstream names).
    pub points: Vec<&'static str>,
    /// Contract interfaces it exports.
    pub exports: Vec<String>,
    /// Everything it imports.
    pub imports: Vec<String>,
    /// True when it imports WASI (it then gets a context with no files, network or environment).
    pub imports_wasi: bool,
    /// The cluster events it registers (upstream's labels, as `NodeAdd`), asked with its configuration `{}`;
    /// `None` when it does not export `events` (then every event retries the pods it rejects).
    pub events: Option<Vec<String>>,
    /// What it promises (`declarations.declare`, WIT flag names), asked with its configuration `{}`; `None` when it
    /// does not export `declarations`.
    pub declared: Option<Vec<String>>,
}

fn split_name(name: &str) -> Option<(&str, &str, &str)> {
    let (pkg_iface, version) = name.split_once('@')?;
    let (pkg, iface) = pkg_iface.split_once('/')?;
    Some((pkg, iface, version))
}

/// Reads a component's exports and imports and checks them against the contract.
pub fn describe(component: &Component) -> Result<ComponentInfo, WasmError> {
    let engine = engine::WasmEngine::shared().engine();
    let ty = component.component_type();
    let mut info = ComponentInfo::default();
    let mut points = Vec::new();
    for (name, _) in ty.exports(engine) {
        let Some((pkg, iface, version)) = split_name(name) else { continue };
        if pkg != CONTRACT_PACKAGE {
            continue;
        }
        if let Some(why) = contract_refusal(version) {
            return Err(WasmError::Contract(format!("{name}: {why}")));
        }
        info.contract_version = version.to_string();
        info.exports.push(name.to_string());
        // A point's by-reference form serves that point.
        points.extend(ExtensionPoint::from_wit_interface(if iface == "post-bind-ref" { "post-bind" } else { iface }));
    }
    for (name, _) in ty.imports(engine) {
        info.imports.push(name.to_string());
        match split_name(name) {
            Some((CONTRACT_PACKAGE, "host" | "types", v)) if contract_refusal(v).is_none() => {}
            Some((CONTRACT_PACKAGE, _, v)) => {
                let why = contract_refusal(v).unwrap_or_else(|| {
                    format!("this host offers no such interface in {CONTRACT_PACKAGE}@{CONTRACT_VERSION}")
                });
                return Err(WasmError::Contract(format!("it imports {name}: {why}")));
            }
            Some((pkg, _, v)) if pkg.starts_with("wasi:") && v.starts_with("0.2.") => info.imports_wasi = true,
            _ => return Err(WasmError::UnsupportedImport(name.to_string())),
        }
    }
    // In upstream's order, whatever order the component lists its exports in.
    points.sort();
    points.dedup();
    info.points = points.into_iter().map(ExtensionPoint::metric_name).collect();
    if info.points.is_empty() {
        return Err(WasmError::Contract(format!(
            "it exports no {CONTRACT_PACKAGE}@{CONTRACT_VERSION} extension point (exports: {})",
            ty.exports(engine).map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(info)
}

/// An event as `plugin check` names it: upstream's label per action (`NodeAdd`), a mix of updates spelled out
/// (`NodeUpdate(label,taint)`), several actions comma-separated.
fn event_label(e: &crate::framework::ClusterEvent) -> String {
    use crate::framework::{action, ClusterEvent};
    let one = |actions: u8| ClusterEvent::new(e.resource, actions).label();
    let mut parts = Vec::new();
    for bit in [action::ADD, action::DELETE] {
        if e.actions & bit != 0 {
            parts.push(one(bit).to_string());
        }
    }
    let updates = e.actions & action::UPDATE;
    if updates == action::UPDATE {
        parts.push(one(updates).to_string());
    } else if updates != 0 {
        let kinds: Vec<&str> = [
            (action::UPDATE_LABEL, "label"),
            (action::UPDATE_TAINT, "taint"),
            (action::UPDATE_RESOURCES, "resources"),
            (action::UPDATE_OTHER, "other"),
        ]
        .into_iter()
        .filter(|(bit, _)| updates & bit != 0)
        .map(|(_, name)| name)
        .collect();
        parts.push(format!("{}({})", one(updates), kinds.join(",")));
    }
    parts.join(", ")
}

/// `plugin check`: loads a file the way the scheduler would and describes it.
pub fn check_file(path: &Path) -> Result<ComponentInfo, WasmError> {
    let version = reload::load_version(&WasmArgs::for_file(path))?;
    let mut info = describe(&version.component)?;
    if std::fs::read(path).ok().and_then(|b| adapt_previous_contract(&b)).is_some() {
        info.contract_version = PREVIOUS_CONTRACT_VERSION.to_string();
    }
    // Linking proves every import is really satisfied (WASI versions included). The file is checked, not a
    // configuration: the guest is not asked to validate the empty one.
    let p = WasmPlugin::load_unvalidated("check", WasmArgs::for_file(path), 0, Default::default())?;
    let loaded = p.current();
    p.ready_version(&loaded)?;
    info.events = loaded.events.get().map(|evs| evs.iter().map(event_label).collect());
    info.declared = loaded.declared.get().map(|d| instance::declared_names(*d));
    Ok(info)
}

/// The contract's WIT, compiled in: `plugin componentize --world` embeds one of its worlds in a core module that
/// cannot carry its component-type section itself (Go's `wasip1` output has no way to add a custom section).
/// The contract's files, as the host checks components against them (and `plugin new` copies them).
pub(crate) const CONTRACT_WIT: [(&str, &str); 4] = [
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("host.wit", include_str!("../../../wit/host.wit")),
    ("points.wit", include_str!("../../../wit/points.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
];

/// The `wasi_snapshot_preview1` imports of Go's runtime, implemented with the contract's host imports (the file
/// says why wasmtime's preview1 adapter cannot serve Go), and the world that says so to wit-component.
const WASIP1_FOR_GO: &str = include_str!("wasip1_for_go.wat");
const WASIP1_FOR_GO_WIT: &str = "package kws:wasip1-for-go;\nworld adapter { import kws:plugin/host@0.2.1; }\n";

/// The adapter's text for `module`: wasip1_for_go.wat, plus a stub answering ENOSYS, of the module's exact type,
/// for every other `wasi_snapshot_preview1` function the module imports (files, sockets: a plugin has none), so a
/// Go guest whose libraries merely link such functions still builds, and a call fails in Go as an error.
fn wasip1_for_go(module: &[u8]) -> Result<String, WasmError> {
    use wasmparser::{Payload, TypeRef, ValType};
    let bad = |e: wasmparser::BinaryReaderError| WasmError::Componentize(format!("reading the module: {e}"));
    let mut text = WASIP1_FOR_GO.trim_end().strip_suffix(')').unwrap_or(WASIP1_FOR_GO).to_string();
    let mut types = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        match payload.map_err(bad)? {
            Payload::TypeSection(section) => {
                for group in section {
                    types.extend(group.map_err(bad)?.into_types());
                }
            }
            Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    let import = import.map_err(bad)?;
                    let (TypeRef::Func(ty), "wasi_snapshot_preview1") = (import.ty, import.module) else { continue };
                    if text.contains(&format!("(export \"{}\")", import.name)) {
                        continue; // implemented, or already stubbed (Go may import a function twice)
                    }
                    let Some(wasmparser::CompositeInnerType::Func(func)) =
                        types.get(ty as usize).map(|t| &t.composite_type.inner)
                    else {
                        continue; // an invalid module: wit-component says why
                    };
                    let names = |v: &[ValType]| v.iter().map(|t| format!(" {t}")).collect::<String>();
                    let body = if func.results() == [ValType::I32] { "i32.const 52" } else { "unreachable" };
                    text += &format!(
                        "  (func (export \"{}\") (param{}) (result{}) {body})\n",
                        import.name,
                        names(func.params()),
                        names(func.results())
                    );
                }
            }
            _ => {}
        }
    }
    Ok(text + ")\n")
}

/// A WIT package group parsed into `resolve`; the texts are the host's own, so an error is a build defect.
fn push_wit(resolve: &mut wit_parser::Resolve, files: &[(&str, &str)]) -> Result<wit_parser::PackageId, WasmError> {
    let mut map = wit_parser::SourceMap::new();
    for (name, text) in files {
        map.push_str(name, *text);
    }
    let group = map.parse().map_err(|(_, e)| WasmError::Componentize(format!("the host's WIT: {e}")))?;
    resolve.push_group(group).map_err(|e| WasmError::Componentize(format!("the host's WIT: {e}")))
}

/// Appends the component-type section of `world` (in package `pkg`) to a core module.
fn embed_world(
    module: &mut Vec<u8>,
    resolve: &wit_parser::Resolve,
    pkg: wit_parser::PackageId,
    world: &str,
) -> Result<(), WasmError> {
    let id = resolve.select_world(&[pkg], Some(world)).map_err(|_| {
        let worlds = resolve.packages[pkg].worlds.keys().cloned().collect::<Vec<_>>().join(", ");
        WasmError::Componentize(format!(
            "{CONTRACT_PACKAGE}@{CONTRACT_VERSION} has no world {world:?} (it has {worlds})"
        ))
    })?;
    wit_component::embed_component_metadata(module, resolve, id, wit_component::StringEncoding::UTF8)
        .map_err(|e| WasmError::Componentize(format!("embedding world {world}: {e:#}")))
}

/// `plugin componentize`: wraps a core module into a component, checks the result as `plugin check` does, and
/// only then writes `out`, so a failed build leaves no half-made plugin behind. The module names its world with
/// a component-type section (wit-bindgen puts one in), or `world` names one of this host's contract to embed.
/// A module that imports `wasi_snapshot_preview1` (Go's `GOOS=wasip1` reactor) gets the host's adapter for Go
/// (`wasip1_for_go.wat`), so the component imports only `kws:plugin/host`.
pub fn componentize(core: &Path, world: Option<&str>, out: &Path) -> Result<ComponentInfo, WasmError> {
    let mut bytes = std::fs::read(core)
        .map_err(|e| WasmError::Read { path: core.display().to_string(), message: e.to_string() })?;
    if !engine::is_core_module(&bytes) {
        return Err(WasmError::Componentize(if bytes.starts_with(b"\0asm") {
            "it is already a component (plugin check describes it)".into()
        } else {
            "not a WebAssembly core module".into()
        }));
    }
    let mut resolve = wit_parser::Resolve::default();
    let contract = push_wit(&mut resolve, &CONTRACT_WIT)?;
    match world {
        Some(world) => embed_world(&mut bytes, &resolve, contract, world)?,
        None if !has_component_type(&bytes)? => {
            let (pkg, world) = exported_world(&mut resolve, &bytes)?;
            embed_world(&mut bytes, &resolve, pkg, &world)?;
        }
        None => {}
    }
    let adapter_pkg = push_wit(&mut resolve, &[("wasip1-for-go.wit", WASIP1_FOR_GO_WIT)])?;
    let mut adapter = wat::parse_str(wasip1_for_go(&bytes)?)
        .map_err(|e| WasmError::Componentize(format!("the host's wasip1 adapter for Go: {e}")))?;
    embed_world(&mut adapter, &resolve, adapter_pkg, "adapter")?;
    // wit-component builds the adapter into the component only when the module imports from it.
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&bytes)
        .and_then(|e| e.adapter("wasi_snapshot_preview1", &adapter))
        .and_then(|mut encoder| encoder.encode())
        // One line: some decoder messages span several.
        .map_err(|e| WasmError::Componentize(format!("{e:#}").split_whitespace().collect::<Vec<_>>().join(" ")))?;
    write_checked(&component, out)
}

/// True when a core module names its world itself (a `component-type` custom section, as wit-bindgen's own export
/// macros write).
fn has_component_type(module: &[u8]) -> Result<bool, WasmError> {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload = payload.map_err(|e| WasmError::Componentize(format!("reading the module: {e}")))?;
        if let wasmparser::Payload::CustomSection(c) = payload {
            if c.name().starts_with("component-type") {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The world a module that names none serves, read from its exports (`kws:plugin/<interface>@<version>#<function>`,
/// as the Rust SDK's `export!` writes them): the host import and exactly the contract interfaces it exports, so a
/// plugin serving any mix of extension points needs no world of its own in the contract.
fn exported_world(
    resolve: &mut wit_parser::Resolve,
    module: &[u8],
) -> Result<(wit_parser::PackageId, String), WasmError> {
    let mut interfaces = std::collections::BTreeSet::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload = payload.map_err(|e| WasmError::Componentize(format!("reading the module: {e}")))?;
        if let wasmparser::Payload::ExportSection(section) = payload {
            for export in section {
                let export = export.map_err(|e| WasmError::Componentize(format!("reading the module: {e}")))?;
                let Some((iface, _)) = export.name.split_once('#') else { continue };
                // `cabi_post_…` exports follow their function; the function's own export is enough.
                let Some((pkg, name, version)) = split_name(iface) else { continue };
                if pkg == CONTRACT_PACKAGE {
                    if version != CONTRACT_VERSION {
                        return Err(WasmError::Componentize(format!(
                            "it exports {iface}; this host offers {CONTRACT_PACKAGE}@{CONTRACT_VERSION}: rebuild it against that version"
                        )));
                    }
                    interfaces.insert(name.to_string());
                }
            }
        }
    }
    if interfaces.is_empty() {
        return Err(WasmError::Componentize(format!(
            "it names no world and exports no {CONTRACT_PACKAGE}@{CONTRACT_VERSION} function: build it with the SDK's export macro, or name a world with --world"
        )));
    }
    let exports: String =
        interfaces.iter().map(|i| format!("    export {CONTRACT_PACKAGE}/{i}@{CONTRACT_VERSION};\n")).collect();
    let wit = format!(
        "package kws:derived;\nworld plugin {{\n    import {CONTRACT_PACKAGE}/host@{CONTRACT_VERSION};\n{exports}}}\n"
    );
    let pkg = push_wit(resolve, &[("derived.wit", wit.as_str())])?;
    Ok((pkg, "plugin".to_string()))
}

/// Writes a component to `out` only once it passed `plugin check`'s checks (a temporary file, checked, renamed).
fn write_checked(component: &[u8], out: &Path) -> Result<ComponentInfo, WasmError> {
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, component)
        .map_err(|e| WasmError::Write { path: tmp.display().to_string(), message: e.to_string() })?;
    check_and_install(&tmp, out)
}

/// Checks the component in `new` as `plugin check` does and renames it to `out`; a component that fails is
/// removed, so `out` is only ever replaced by a component the host accepts (a running `simulate --watch` or
/// scheduler never sees a half-made one).
pub fn check_and_install(new: &Path, out: &Path) -> Result<ComponentInfo, WasmError> {
    let info = check_file(new).inspect_err(|_| {
        let _ = std::fs::remove_file(new);
    })?;
    std::fs::rename(new, out)
        .map_err(|e| WasmError::Write { path: out.display().to_string(), message: e.to_string() })?;
    Ok(info)
}

/// An `oci://` reference given on the command line.
fn oci_reference(reference: &str) -> Result<source::OciRef, WasmError> {
    match Source::parse(reference, Path::new(".")) {
        Ok(Source::Oci(r)) => Ok(r),
        Ok(_) => Err(WasmError::InvalidSource(format!("{reference:?} is not an oci:// reference"))),
        Err(e) => Err(WasmError::InvalidSource(e)),
    }
}

/// `plugin push`: checks a component file as `plugin check` does, then pushes it to an OCI registry as a CNCF Wasm
/// artifact. Returns what it serves and the pushed manifest's digest.
pub fn push_file(
    file: &Path,
    reference: &str,
    docker_config: Option<&Path>,
) -> Result<(ComponentInfo, String), WasmError> {
    let r = oci_reference(reference)?;
    let info = check_file(file)?;
    let bytes = std::fs::read(file)
        .map_err(|e| WasmError::Read { path: file.display().to_string(), message: e.to_string() })?;
    let digest = source::oci::push(bytes, &info, &r, docker_config)?;
    Ok((info, digest))
}

/// `plugin pull`: pulls a component from an OCI registry and writes it to `out` once it passed `plugin check`'s
/// checks. Returns what it serves and its SHA-256 (what a profile's `sha256` pins).
pub fn pull_file(
    reference: &str,
    out: &Path,
    docker_config: Option<&Path>,
) -> Result<(ComponentInfo, String), WasmError> {
    let r = oci_reference(reference)?;
    let fetched = source::oci::pull(&r, docker_config)?;
    let info = write_checked(&fetched.bytes, out)?;
    Ok((info, fetched.digest))
}

/// Checks the args of every plugin a profile declares as Wasm (a `component` in its args) as loading it would,
/// before anything is fetched: one line naming the entry (`profiles[0].pluginConfig[1].args`) and the field.
pub fn check_config_args(cfg: &crate::config::SchedulerConfig) -> Result<(), crate::config::ConfigError> {
    for (i, p) in cfg.profiles.iter().enumerate() {
        for (name, args) in &p.plugin_args {
            let Some(j) = p.plugin_config_index.get(name).filter(|_| WasmArgs::is_wasm(Some(args))) else { continue };
            WasmArgs::parse(args, Path::new(".")).map_err(|message| crate::config::ConfigError {
                file: cfg.source.clone(),
                field: format!("profiles[{i}].pluginConfig[{j}].args"),
                message,
            })?;
        }
    }
    Ok(())
}

/// Registers a factory for every plugin that a profile declares as Wasm (a `pluginConfig` entry whose args name
/// a `component`). Relative component paths resolve against `base` (the configuration file's directory).
///
/// A component that cannot be loaded at start (unreadable, a failed pull, an unreachable source, a digest that
/// does not match the pin, not a component) fails the profile with one line naming the plugin and the source,
/// unless the plugin's `failurePolicy` is `Ignore`: then the profile runs without it, and that is logged. A guest
/// that refuses its configuration fails the profile whatever the policy: that is the profile's mistake.
pub fn register_plugins(registry: &mut Registry, config: &crate::config::SchedulerConfig, base: &Path) {
    for profile in &config.profiles {
        for (name, args) in &profile.plugin_args {
            if !WasmArgs::is_wasm(Some(args)) || registry.get(name).is_some() {
                continue;
            }
            let base = base.to_path_buf();
            let plugin_name = name.clone();
            let _ = registry.register(
                name,
                Arc::new(move |args, ctx| {
                    let args = WasmArgs::parse(args.unwrap_or(&serde_json::Value::Null), &base)?;
                    let component = args.component.to_string();
                    let policy = args.failure_policy;
                    let p = match WasmPlugin::load_in(&plugin_name, args, ctx) {
                        Ok(p) => p,
                        Err(e) if policy == FailurePolicy::Ignore && !matches!(e, WasmError::Config(_)) => {
                            tracing::warn!(plugin = %plugin_name, source = %component, error = %e, "wasm plugin unavailable; failurePolicy Ignore: the profile runs without it");
                            return Ok(Arc::new(plugin::Unavailable::new(&plugin_name, e.to_string())) as Arc<dyn Plugin>);
                        }
                        Err(e @ (WasmError::Read { .. } | WasmError::Digest { .. } | WasmError::Source(_))) => {
                            return Err(format!("component: {e}"))
                        }
                        Err(e) => return Err(format!("component: {component}: {e}")),
                    };
                    if let Some(period) = ctx.reload_period {
                        p.watch(period);
                    }
                    Ok(p as Arc<dyn Plugin>)
                }),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_renames_only_the_previous_contract_s_names() {
        let bytes = b"\x16kws:plugin/host@0.1.0\x00kws:plugin@0.1.0;kws:plugin/x@0.1.01 acme:plugin/y@0.1.0 \
                      kws:plugin/score@0.1.0#score";
        let out = adapt_previous_contract(bytes).expect("names of 0.1.0");
        assert_eq!(
            out.as_slice(),
            &b"\x16kws:plugin/host@0.2.0\x00kws:plugin@0.2.0;kws:plugin/x@0.1.01 acme:plugin/y@0.1.0 \
               kws:plugin/score@0.2.0#score"[..]
        );
        assert_eq!(adapt_previous_contract(b"kws:plugin/host@0.2.0 kws:plugin/host@0.1.0.1"), None);
    }

    #[test]
    fn earlier_patches_are_served_newer_ones_and_other_minors_refused() {
        assert_eq!(contract_refusal("0.2.0"), None);
        assert_eq!(contract_refusal(CONTRACT_VERSION), None);
        assert!(contract_refusal("0.2.99").unwrap().contains("is newer than this host's"));
        assert!(contract_refusal("0.3.0").unwrap().contains("rebuild it against that version"));
        assert!(contract_refusal("0.1.0").is_some(), "the previous minor only through the adapter");
        assert!(contract_refusal("0.2").is_some() && contract_refusal("x").is_some());
    }
}
