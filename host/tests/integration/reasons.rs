//! Every reason string a native plugin writes into PodScheduled conditions and FailedScheduling events, checked
//! against kube-scheduler's own source at the reference version (the k8s.io/kubernetes module that
//! scripts/build-kube.sh downloads to build the test control plane). Users grep these messages and alert on them,
//! so the words must be upstream's, and a new upstream reason must not go unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use kube_wasm_scheduler::framework::diagnosis;
use kube_wasm_scheduler::plugins::{
    default_preemption, dynamic_resources, inter_pod_affinity, node_affinity, node_declared_features, node_name,
    node_ports, node_resources::fit, node_unschedulable, node_volume_limits, pod_topology_spread, taint_toleration,
    volume_binding, volume_restrictions, volume_zone,
};

/// Where upstream says it: a named Go constant, or a literal written inline (Go format verbs such as `%v` stand for
/// the part our code appends).
enum Upstream {
    Const(&'static str),
    Literal(&'static str),
}
use Upstream::{Const, Literal};

/// (file under the k8s.io/kubernetes module, where upstream says it, our string).
const REASONS: &[(&str, Upstream, &str)] = &[
    ("pkg/scheduler/scheduler.go", Literal("no nodes available to schedule pods"), diagnosis::NO_NODES_AVAILABLE),
    (
        "pkg/scheduler/framework/plugins/interpodaffinity/filtering.go",
        Const("ErrReasonExistingAntiAffinityRulesNotMatch"),
        inter_pod_affinity::ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    ),
    (
        "pkg/scheduler/framework/plugins/interpodaffinity/filtering.go",
        Const("ErrReasonAffinityRulesNotMatch"),
        inter_pod_affinity::ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ),
    (
        "pkg/scheduler/framework/plugins/interpodaffinity/filtering.go",
        Const("ErrReasonAntiAffinityRulesNotMatch"),
        inter_pod_affinity::ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ),
    ("pkg/scheduler/framework/plugins/nodename/node_name.go", Const("ErrReason"), node_name::ERR_REASON),
    ("pkg/scheduler/framework/plugins/nodeports/node_ports.go", Const("ErrReason"), node_ports::ERR_REASON),
    (
        "pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go",
        Const("ErrReasonPod"),
        node_affinity::ERR_REASON_POD,
    ),
    (
        "pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go",
        Const("errReasonEnforced"),
        node_affinity::ERR_REASON_ENFORCED,
    ),
    (
        "pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go",
        Const("errReasonConflict"),
        node_affinity::ERR_REASON_CONFLICT,
    ),
    (
        "pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures.go",
        Const("errReasonUnsatisfiedRequirements"),
        node_declared_features::ERR_REASON,
    ),
    (
        "pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go",
        Const("ErrReasonUnschedulable"),
        node_unschedulable::ERR_REASON_UNSCHEDULABLE,
    ),
    (
        "pkg/scheduler/framework/plugins/nodevolumelimits/csi.go",
        Const("ErrReasonMaxVolumeCountExceeded"),
        node_volume_limits::ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    ),
    (
        "pkg/scheduler/framework/plugins/podtopologyspread/plugin.go",
        Const("ErrReasonConstraintsNotMatch"),
        pod_topology_spread::ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ),
    (
        "pkg/scheduler/framework/plugins/podtopologyspread/plugin.go",
        Const("ErrReasonNodeLabelNotMatch"),
        pod_topology_spread::ERR_REASON_NODE_LABEL_NOT_MATCH,
    ),
    (
        "pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go",
        Literal("node(s) had untolerated taint(s)"),
        taint_toleration::ERR_REASON_UNTOLERATED,
    ),
    (
        "pkg/scheduler/framework/plugins/volumebinding/volume_binding.go",
        Literal("pod has unbound immediate PersistentVolumeClaims"),
        volume_binding::ERR_REASON_UNBOUND_IMMEDIATE,
    ),
    (
        "pkg/scheduler/framework/plugins/volumebinding/binder.go",
        Const("ErrReasonBindConflict"),
        volume_binding::ERR_REASON_BIND_CONFLICT,
    ),
    (
        "pkg/scheduler/framework/plugins/volumebinding/binder.go",
        Const("ErrReasonNodeConflict"),
        volume_binding::ERR_REASON_NODE_CONFLICT,
    ),
    (
        "pkg/scheduler/framework/plugins/volumebinding/binder.go",
        Const("ErrReasonNotEnoughSpace"),
        volume_binding::ERR_REASON_NOT_ENOUGH_SPACE,
    ),
    (
        "pkg/scheduler/framework/plugins/volumebinding/binder.go",
        Const("ErrReasonPVNotExist"),
        volume_binding::ERR_REASON_PV_NOT_EXIST,
    ),
    (
        "pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go",
        Const("ErrReasonDiskConflict"),
        volume_restrictions::ERR_REASON_DISK_CONFLICT,
    ),
    (
        "pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go",
        Const("ErrReasonReadWriteOncePodConflict"),
        volume_restrictions::ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    ),
    (
        "pkg/scheduler/framework/plugins/volumezone/volume_zone.go",
        Const("ErrReasonConflict"),
        volume_zone::ERR_REASON_CONFLICT,
    ),
    (
        "pkg/scheduler/framework/plugins/volumezone/volume_zone.go",
        Literal("PersistentVolumeClaim had no pv name and storageClass name"),
        volume_zone::ERR_REASON_NO_PV_NOR_CLASS,
    ),
    ("pkg/scheduler/framework/plugins/noderesources/fit.go", Literal("Too many pods"), fit::REASON_TOO_MANY_PODS),
    ("pkg/scheduler/framework/plugins/noderesources/fit.go", Literal("Insufficient cpu"), fit::REASON_INSUFFICIENT_CPU),
    (
        "pkg/scheduler/framework/plugins/noderesources/fit.go",
        Literal("Insufficient memory"),
        fit::REASON_INSUFFICIENT_MEMORY,
    ),
    (
        "pkg/scheduler/framework/plugins/noderesources/fit.go",
        Literal("Insufficient ephemeral-storage"),
        fit::REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
    ),
    (
        "pkg/scheduler/framework/plugins/noderesources/fit.go",
        Literal("Insufficient %v"),
        fit::REASON_INSUFFICIENT_PREFIX,
    ),
    (
        "pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go",
        Literal("cannot allocate all claims"),
        dynamic_resources::ERR_REASON_CANNOT_ALLOCATE,
    ),
    (
        "pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go",
        Literal("resourceclaim not available on the node"),
        dynamic_resources::ERR_REASON_NOT_AVAILABLE,
    ),
    (
        "pkg/scheduler/framework/preemption/preemption.go",
        Literal("Preemption is not helpful for scheduling"),
        default_preemption::NOT_HELPFUL,
    ),
    (
        "pkg/scheduler/framework/preemption/preemption.go",
        Literal("no candidate node for preemption"),
        default_preemption::NO_CANDIDATE,
    ),
    (
        "pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go",
        Literal("No preemption victims found for incoming pod"),
        default_preemption::NO_VICTIMS,
    ),
    (
        "pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go",
        Literal("not eligible due to preemptionPolicy=Never."),
        default_preemption::POLICY_NEVER,
    ),
    (
        "pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go",
        Literal("preemption: "),
        default_preemption::MESSAGE_PREFIX,
    ),
];

/// Upstream's `ErrReason…` constants that no plugin of ours writes, each with why.
const NOT_SERVED: &[(&str, &str)] = &[
    (
        "ErrReasonNotMatch",
        "tainttoleration: declared but unused upstream; its Filter writes \"node(s) had untolerated taint(s)\"",
    ),
    ("ErrReasonUnknownCondition", "nodeunschedulable: declared but unused upstream since the predicate was removed"),
    (
        "ErrReasonNodeDisablesResizePreemption",
        "deferredpodscheduling: the DeferredPodScheduling plugin is behind an alpha gate, off by default, not served",
    ),
];

/// The reference version: the default of scripts/build-kube.sh, which builds the test control plane from it.
fn reference_version() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-kube.sh");
    let text = std::fs::read_to_string(&script).unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let line = text.lines().find(|l| l.starts_with("KUBE_VERSION=")).expect("KUBE_VERSION= in build-kube.sh");
    line.split(":-").nth(1).and_then(|s| s.split('}').next()).expect("KUBE_VERSION default").to_string()
}

/// The go command the project's scripts use.
fn go() -> String {
    std::env::var("GO").ok().unwrap_or_else(|| {
        let on_path = Command::new("go").arg("version").output().map(|o| o.status.success()).unwrap_or(false);
        if on_path {
            "go".into()
        } else {
            "/usr/local/go/bin/go".into()
        }
    })
}

/// The k8s.io/kubernetes module's source directory at `version`, downloaded through the Go module proxy when it is
/// not in the module cache yet.
fn upstream_source(version: &str) -> PathBuf {
    let out = Command::new(go())
        .args(["mod", "download", "-json", &format!("k8s.io/kubernetes@{version}")])
        .current_dir(std::env::temp_dir())
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("run go mod download (scripts/install-go.sh installs Go)");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("go mod download k8s.io/kubernetes@{version}: {e}: {}", String::from_utf8_lossy(&out.stderr))
    });
    let dir = json["Dir"].as_str().unwrap_or_else(|| panic!("go mod download gave no Dir: {json}"));
    PathBuf::from(dir)
}

/// The string constants a Go file declares (`Name = "…"` and `Name = Other + "…"`), by name.
fn go_string_consts(src: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for line in src.lines() {
        let line = line.trim().trim_start_matches("const ").trim_start_matches("var ");
        let Some((name, value)) = line.split_once('=') else { continue };
        // `Name`, `Name string` or `Name SomeType`: the first word is the name.
        let name = name.split_whitespace().next().unwrap_or_default();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let mut text = String::new();
        let mut whole = true;
        for part in value.split('+').map(str::trim) {
            if let Some(lit) = part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
                text.push_str(&lit.replace("\\\"", "\""));
            } else if let Some(prior) = out.get(part) {
                text.push_str(prior.as_str());
            } else {
                whole = false;
            }
        }
        if whole {
            out.insert(name.to_string(), text);
        }
    }
    out
}

/// Whether our string says what upstream's literal says; a trailing Go verb stands for what follows our prefix.
fn literal_matches(upstream: &str, ours: &str) -> bool {
    match upstream.strip_suffix("%v").or_else(|| upstream.strip_suffix("%s")) {
        Some(prefix) => prefix == ours,
        None => upstream == ours,
    }
}

#[test]
fn every_reason_string_is_upstreams_word_for_word() {
    let version = reference_version();
    let root = upstream_source(&version);
    let mut wrong = Vec::new();
    for (file, upstream, ours) in REASONS {
        let path = root.join(file);
        let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match upstream {
            Const(name) => match go_string_consts(&src).get(*name) {
                Some(theirs) if theirs == ours => {}
                Some(theirs) => wrong.push(format!("{file} {name}:\n  upstream: {theirs}\n  ours:     {ours}")),
                None => wrong.push(format!("{file}: no string constant {name} at {version}")),
            },
            Literal(lit) => {
                if !src.contains(&format!("\"{lit}\"")) {
                    wrong.push(format!("{file}: no literal \"{lit}\" at {version}"));
                } else if !literal_matches(lit, ours) {
                    wrong.push(format!("{file} \"{lit}\":\n  upstream: {lit}\n  ours:     {ours}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "reason strings differ from kube-scheduler {version}:\n{}", wrong.join("\n"));
}

#[test]
fn every_upstream_filter_reason_is_accounted_for() {
    let version = reference_version();
    let plugins = upstream_source(&version).join("pkg/scheduler/framework/plugins");
    let known: BTreeSet<(String, String)> = REASONS
        .iter()
        .filter_map(|(file, up, _)| match up {
            Const(name) => Some((file.rsplit('/').nth(1).unwrap_or_default().to_string(), name.to_string())),
            Literal(_) => None,
        })
        .collect();
    let not_served: BTreeSet<&str> = NOT_SERVED.iter().map(|(n, _)| *n).collect();
    let mut unaccounted = Vec::new();
    for dir in std::fs::read_dir(&plugins).expect("upstream plugins dir").flatten() {
        let Ok(files) = std::fs::read_dir(dir.path()) else { continue };
        let plugin = dir.file_name().to_string_lossy().to_string();
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            if !name.ends_with(".go") || name.ends_with("_test.go") {
                continue;
            }
            let src = std::fs::read_to_string(f.path()).unwrap_or_default();
            for (konst, value) in go_string_consts(&src) {
                let is_reason = konst.starts_with("ErrReason") || konst.starts_with("errReason");
                if is_reason
                    && !known.contains(&(plugin.clone(), konst.clone()))
                    && !not_served.contains(konst.as_str())
                {
                    unaccounted.push(format!("{plugin}/{name} {konst} = {value:?}"));
                }
            }
        }
    }
    assert!(
        unaccounted.is_empty(),
        "kube-scheduler {version} declares reasons this project neither writes nor lists as not served:\n{}",
        unaccounted.join("\n")
    );
}

#[test]
fn go_constants_are_read_with_concatenation() {
    let src = "const (\n\tA = \"node(s) x\"\n\t// B is …\n\tB = A + \" (y)\"\n\tc string = \"q\\\"z\"\n)\nvar D = fmt.Errorf(\"e\")\n";
    let consts = go_string_consts(src);
    assert_eq!(consts["A"], "node(s) x");
    assert_eq!(consts["B"], "node(s) x (y)");
    assert_eq!(consts["c"], "q\"z");
    assert!(!consts.contains_key("D"));
    assert!(literal_matches("Insufficient %v", "Insufficient "));
    assert!(!literal_matches("Insufficient %v", "Insufficient"));
}
