//! The contract's compatibility promise, tested on components built before the current version: the files under
//! tests/data/contract-<version>-*.wasm were built from this repository's guests when that version was current
//! and are kept unchanged. Each must load and decide exactly as the same guest built today does, on the examples
//! that exercise it (QueueSort by key, Filter and Score, PostBind, PreFilter, Permit with waiting pods and the pod
//! view).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::root;
use crate::wasm::guest;

/// A kept component of contract `version`, built from guest `name`.
fn fixture(version: &str, name: &str) -> PathBuf {
    root().join("tests/data").join(format!("contract-{version}-{name}.wasm"))
}

/// `simulate` of example `dir` with its component (the file's `guest-plugins/build/<from>.wasm`) replaced by
/// `component`: pod → node (or the pending message), in report order.
fn placements(dir: &str, from: &str, component: &Path) -> Vec<(String, String)> {
    let example = root().join("examples").join(dir);
    let profile = std::fs::read_to_string(example.join("profile.yaml")).unwrap();
    let built = format!("../../guest-plugins/build/{from}.wasm");
    assert!(profile.contains(&built), "{dir}/profile.yaml names {built}");
    let tmp = std::env::temp_dir().join(format!("kws-contract-{}-{dir}-{}", std::process::id(), from));
    std::fs::create_dir_all(&tmp).unwrap();
    let cfg = tmp.join("profile.yaml");
    std::fs::write(&cfg, profile.replace(&built, &component.display().to_string())).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args(["simulate", "--output", "json", "--config"])
        .arg(&cfg)
        .arg("--cluster")
        .arg(example.join("cluster.yaml"))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&tmp).ok();
    assert!(out.status.success(), "{dir} with {}: {}", component.display(), String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let at = p["node"].as_str().map(str::to_string).unwrap_or_else(|| format!("pending: {}", p["message"]));
            (p["pod"].as_str().unwrap().to_string(), at)
        })
        .collect()
}

/// What `plugin check` says of a component (stdout), failing on a refusal.
fn check(component: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args(["plugin", "check"])
        .arg(component)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {}", component.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn components_of_contract_0_2_0_and_0_1_0_load_and_decide_as_the_same_guests_built_today() {
    assert_ne!(kube_wasm_scheduler::wasm::CONTRACT_VERSION, "0.2.0", "the fixtures test an earlier patch");
    for (dir, from, kept) in [
        ("wasm-qos-sort", "qos-sort", "qos-sort"),
        ("wasm-priority-label", "priority-label", "priority-label-c"),
        ("wasm-coscheduling", "coscheduling", "coscheduling"),
    ] {
        let old = fixture("0.2.0", kept);
        let info = check(&old);
        assert!(info.contains("kws:plugin/host@0.2.0"), "{kept}: built against 0.2.0: {info}");
        assert!(
            info.contains("contract:         kws:plugin@0.2.0 (an earlier patch, served by this host's 0.2."),
            "{info}"
        );
        let today = placements(dir, from, &guest(kept));
        assert!(today.iter().any(|(_, at)| !at.starts_with("pending")), "{dir}: something is placed: {today:?}");
        assert_eq!(placements(dir, from, &old), today, "{dir}: the 0.2.0 build of {kept} decides as today's");
    }
    // The previous minor, through the adapter: priority-label-c built from its 0.1.0 sources with the 0.1.0 WIT
    // (wit-bindgen c, clang, the host's componentize), as 0.1.0 shipped it.
    let old = fixture("0.1.0", "priority-label-c");
    let info = check(&old);
    assert!(info.contains("kws:plugin@0.1.0 (the previous minor, served through an adapter"), "{info}");
    let today = placements("wasm-priority-label", "priority-label", &guest("priority-label-c"));
    assert_eq!(placements("wasm-priority-label", "priority-label", &old), today, "the 0.1.0 build decides as today's");
    // RandomScore (Score and PostBind by reference): loads and serves the points it declares.
    let info = check(&fixture("0.2.0", "random-score"));
    assert!(info.contains("Score") && info.contains("PostBind"), "{info}");
}

#[test]
fn metrics_name_the_plugins_still_on_the_previous_contract() {
    use kube_wasm_scheduler::live::metrics::{Metrics, SchedulerState};
    use kube_wasm_scheduler::wasm::{WasmArgs, WasmPlugin};
    let load = |name: &str, component: &Path| {
        let args = WasmArgs::parse(
            &serde_json::json!({"component": component, "config": {"labelKey": "rank"}}),
            Path::new("/"),
        );
        WasmPlugin::load(name, args.unwrap(), 0).unwrap()
    };
    let _old = load("OldPriorityLabel", &fixture("0.1.0", "priority-label-c"));
    let _today = load("PriorityLabelToday", &guest("priority-label-c"));
    let out = Metrics::default().render_state(&SchedulerState::default());
    assert!(
        out.contains(r#"kws_wasm_plugin_previous_contract{contract="0.1.0",plugin="OldPriorityLabel"} 1"#),
        "{out}"
    );
    assert!(!out.contains(r#"kws_wasm_plugin_previous_contract{contract="0.1.0",plugin="PriorityLabelToday"}"#));
}
