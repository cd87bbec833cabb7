//! What a failing or noisy guest costs, with the hostile fixtures (guest-plugins/hostile, built as `hostile` and
//! `hostile-sort`): the failure policy applied to every kind of failure, output and logs drained and rate-limited,
//! trap reasons kept whole, the circuit breaker, and the sha256 pin at reload.

use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kube_wasm_scheduler::sim::{self, Report, SimOptions, Simulation};
use kube_wasm_scheduler::wasm;

use crate::util::*;
use crate::wasm::guest;

/// One profile whose only extra plugin is the hostile guest `component` under `name`, misbehaving as `mode`;
/// `extra` is more of its args (indented six spaces) and `queue_sort` replaces PrioritySort with it.
fn hostile_profile(name: &str, component: &str, mode: &str, policy: &str, extra: &str, queue_sort: bool) -> String {
    let plugins = if queue_sort {
        format!("    queueSort:\n      enabled: [{{name: {name}}}]\n      disabled: [{{name: '*'}}]\n")
    } else {
        format!("    multiPoint:\n      enabled: [{{name: {name}}}]\n")
    };
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n{plugins}  pluginConfig:\n  - name: {name}\n    args:\n      component: {}\n      config: {{mode: {mode}}}\n      timeout: 100ms\n      memoryLimit: 16Mi\n      failurePolicy: {policy}\n{extra}",
        guest(component).display()
    )
}

/// Runs `pods` pods under the profile on enough nodes for them (at least three); the report and the plugin's
/// counters.
fn run(profile: &str, name: &str, pods: usize) -> (Report, Arc<wasm::WasmPlugin>) {
    let mut reg = registry_with(vec![]);
    let cfg = config(&reg, profile);
    wasm::register_plugins(&mut reg, &cfg, std::path::Path::new("/"));
    let mut cluster = nodes_yaml((pods / 30).max(3));
    for i in 0..pods {
        cluster += &pod_yaml(&format!("p-{i}"), "");
    }
    let file = sim::load::parse("c.yaml", &cluster).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).unwrap();
    let r = s.run();
    let plugin =
        wasm::loaded_plugins().into_iter().find(|p| kube_wasm_scheduler::framework::Plugin::name(&**p) == name);
    (r, plugin.expect("the plugin is loaded"))
}

fn all_placed(r: &Report, pods: usize) -> usize {
    (0..pods).filter(|i| node_of(r, &format!("default/p-{i}")).is_some()).count()
}

#[test]
fn ignore_applies_to_normalized_scores_out_of_range() {
    // An invalid answer is a failure like a trap: under Ignore the plugin's scores become 0 and pods are placed.
    let (r, _) = run(
        &hostile_profile("HostileOutOfRange", "hostile", "score-1000", "Ignore", "", false),
        "HostileOutOfRange",
        3,
    );
    assert_eq!(all_placed(&r, 3), 3, "{:?}", message_of(&r, "default/p-0"));
    // Under Fail it is the plugin's Error, naming the call and the score.
    let (r, _) = run(
        &hostile_profile("HostileOutOfRangeFail", "hostile", "score-1000", "Fail", "", false),
        "HostileOutOfRangeFail",
        1,
    );
    let m = message_of(&r, "default/p-0");
    assert!(
        m.contains("wasm plugin \"HostileOutOfRangeFail\" at NormalizeScore: returned an invalid score 1000"),
        "{m}"
    );
}

#[test]
fn a_guest_printing_on_every_call_never_traps() {
    // 200 bytes to stdout and to stderr per Filter call, one instance (parallelism 1): past 64 KiB in all, about
    // 330 calls, an instance's output buffer used to be full and every later write trapped.
    let profile = hostile_profile("ChattyPrint", "chatty-py", "ok", "Fail", "", false).replacen(
        "kind: KubeSchedulerConfiguration\n",
        "kind: KubeSchedulerConfiguration\nparallelism: 1\n",
        1,
    );
    let (r, p) = run(&profile, "ChattyPrint", 500);
    assert_eq!(all_placed(&r, 500), 500, "{}", message_of(&r, "default/p-499"));
    assert_eq!(p.stats.traps.load(Ordering::Relaxed), 0);
    assert_eq!(p.stats.output_bytes_dropped.load(Ordering::Relaxed), 0, "each call's output fits the per-call cap");
}

#[test]
fn a_guest_flooding_its_log_is_rate_limited_and_counted() {
    // 100 host.log lines per Filter call, 60 pods: 6,000 lines offered in well under a second.
    let dir = std::env::temp_dir().join(format!("kws-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("profile.yaml");
    std::fs::write(&profile, hostile_profile("HostileFlood", "hostile", "log-flood", "Fail", "", false)).unwrap();
    let mut cluster = nodes_yaml(3);
    for i in 0..60 {
        cluster += &pod_yaml(&format!("p-{i}"), "");
    }
    std::fs::write(dir.join("cluster.yaml"), cluster).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args(["simulate", "--config"])
        .arg(&profile)
        .arg("--cluster")
        .arg(dir.join("cluster.yaml"))
        .env("KWS_LOG", "info")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logged = stderr.lines().filter(|l| l.contains("hostile guest: line")).count();
    assert!((1_000..=3_000).contains(&logged), "{logged} of 6,000 guest lines reached the log");
    assert!(stderr.contains("wasm plugin log rate limit:"), "the drop is reported");
    let placed = String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("default/p-")).count();
    assert_eq!(placed, 60);
}

#[test]
fn trap_messages_keep_the_reason_and_the_guest_backtrace() {
    let (r, _) = run(&hostile_profile("HostileTrap", "hostile", "trap-filter", "Fail", "", false), "HostileTrap", 1);
    let m = message_of(&r, "default/p-0");
    assert!(m.contains("Filter: trapped: wasm trap: wasm `unreachable` instruction executed"), "{m}");
    assert!(m.contains("(guest backtrace: "), "{m}");
    let (r, _) = run(&hostile_profile("HostileGrow", "hostile", "grow", "Fail", "", false), "HostileGrow", 1);
    let m = message_of(&r, "default/p-0");
    assert!(m.contains("Score: trapped: memory limit reached (growing memory to "), "{m}");
    // One line each: a status message is one line in events and in `simulate` output.
    assert!(!m.contains('\n'), "{m}");
}

#[test]
fn a_stuck_queue_sort_costs_a_few_deadlines_not_one_per_comparison() {
    // 60 pods sorted by a QueueSort that never returns: several hundred comparisons, each a 100ms deadline
    // without the breaker. With it, three deadlines and then arrival order for the back-off.
    let (r, p) =
        run(&hostile_profile("HostileSortLoop", "hostile-sort", "loop", "Fail", "", true), "HostileSortLoop", 60);
    assert_eq!(all_placed(&r, 60), 60, "a sort cannot reject a pod");
    assert_eq!(p.stats.timeouts.load(Ordering::Relaxed), 3, "consecutiveFailures (3) deadlines, then none");
    assert_eq!(p.stats.circuit_opens.load(Ordering::Relaxed), 1);
    assert!(p.stats.short_circuited.load(Ordering::Relaxed) > 50);
}

#[test]
fn the_breaker_answers_the_failure_policy_and_names_itself() {
    // consecutiveFailures 1: the first trap opens it; later pods get the breaker's Error without a call.
    let extra = "      circuitBreaker: {consecutiveFailures: 1, backoff: 1h}\n";
    let (r, p) =
        run(&hostile_profile("HostileBreaker", "hostile", "trap-filter", "Fail", extra, false), "HostileBreaker", 5);
    assert_eq!(p.stats.traps.load(Ordering::Relaxed), 1);
    let m = message_of(&r, "default/p-4");
    assert!(m.contains("wasm plugin \"HostileBreaker\" at Filter: not called, its circuit breaker is open"), "{m}");
    // Under Ignore the open breaker leaves the plugin out, as any failure does.
    let (r, _) = run(
        &hostile_profile("HostileBreakerIgnore", "hostile", "trap-filter", "Ignore", extra, false),
        "HostileBreakerIgnore",
        5,
    );
    assert_eq!(all_placed(&r, 5), 5);
}

#[test]
fn a_reload_that_does_not_match_the_pin_is_refused() {
    let dir = std::env::temp_dir().join(format!("kws-pin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plugin.wasm");
    std::fs::copy(guest("priority-label"), &file).unwrap();
    let pinned = wasm::engine::sha256_hex(&std::fs::read(&file).unwrap());
    let args =
        wasm::WasmArgs::parse(&serde_json::json!({"component": file, "sha256": pinned}), std::path::Path::new("/"))
            .unwrap();
    let p = wasm::WasmPlugin::load("PinnedLabel", args, 0).unwrap();
    // Anyone who can write the file replaces it: the pin still holds.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&file, std::fs::read(guest("priority-label-inverted")).unwrap()).unwrap();
    let e = p.reload_if_changed().unwrap_err();
    assert!(matches!(e, wasm::WasmError::Digest { .. }), "{e}");
    assert_eq!(p.digest(), pinned, "the pinned version keeps serving");
    assert_eq!(p.stats.reload_failures.load(Ordering::Relaxed), 1);
    assert_eq!(p.stats.reloads.load(Ordering::Relaxed), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_guest_that_refuses_its_config_stops_the_run_before_it_starts() {
    // The same policy in four languages, each asked to validate `labelKey: 7` when it loads: exit 2, one line
    // naming the plugin and the guest's reason, no placements (it used to start and fail every pod).
    let dir = std::env::temp_dir().join(format!("kws-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), nodes_yaml(2) + &pod_yaml("p", "")).unwrap();
    for g in ["priority-label", "priority-label-c", "priority-label-py", "priority-label-js"] {
        let profile = dir.join(format!("{g}.yaml"));
        std::fs::write(
            &profile,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: PriorityLabel}}]\n  pluginConfig:\n  - name: PriorityLabel\n    args:\n      component: {}\n      config: {{labelKey: 7}}\n",
                guest(g).display()
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
            .args(["simulate", "--config"])
            .arg(&profile)
            .arg("--cluster")
            .arg(dir.join("cluster.yaml"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{g}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{g}: {stderr}");
        assert!(
            stderr.contains("PriorityLabel") && stderr.contains("the plugin refused its configuration: "),
            "{g}: {stderr}"
        );
        assert!(stderr.contains("labelKey"), "{g}: {stderr}");
        assert!(out.stdout.is_empty(), "{g}: nothing ran");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
