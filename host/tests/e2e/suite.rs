//! kube-scheduler's own integration workloads (scheduler_perf's `integration-test`+`short` selection, read from the
//! k8s.io/kubernetes module at the reference version) run by `bench/suite` against its own throwaway control plane,
//! with our scheduler alone: every runnable workload must complete, and each measured op must end with as many pods
//! scheduled and pending as kube-scheduler v1.37.2 left when the expectation was recorded
//! (`bench/suite/expected-integration.json`, written by the suite's `--record`). The workloads the driver cannot
//! run yet are printed with the reason.

use std::process::Command;

use super::{bin, root};

/// The integration workloads not run here, with the reason above their use.
const SKIP: &str = "^(SchedulingWithResourceClaimTemplateListAttributes/|SharedPodGroupResourceClaim/1podgroup_1000pods$|SharedPodGroupResourceClaimTemplate/)";

/// Every integration workload completes, its measured pods ending as they did for kube-scheduler.
#[test]
fn scheduler_perf_integration_workloads_end_as_kube_scheduler_left_them() {
    let out_dir = std::env::temp_dir().join(format!("kws-suite-{}", std::process::id()));
    let expected = root().join("bench/suite/expected-integration.json");
    let out = Command::new(root().join("bench/suite/run.sh"))
        .env("KWS_BIN", bin())
        .env("SUITE", "integration")
        .env("BENCH_CONTENDERS", "ours")
        .env("BENCH_OUT", &out_dir)
        // The workloads are read from the module the expectations were recorded from, whatever the caller's
        // KUBE_VERSION says (make test-versions sets it for the API server only).
        .env_remove("KUBE_VERSION")
        .arg("--expect")
        .arg(&expected)
        // Where ours is known to differ from kube-scheduler v1.37.2 (docs/performance.md, "Where ours differs"):
        // DRA CEL without list-typed attributes (ListAttributes); DRAWorkloadResourceClaims (claims owned by and
        // reserved for a PodGroup: SharedPodGroupResourceClaimTemplate, and SharedPodGroupResourceClaim/
        // 1podgroup_1000pods, whose 257th per-pod reservation the API server refuses) not implemented. SharedPodGroupResourceClaimTemplate/1podgroup_1000pods completed for
        // kube-scheduler on a fresh control plane only.
        .args(["--skip", SKIP])
        // A pod that is never scheduled fails the run after this long, not after the default five minutes.
        .args(["--timeout", "3m"])
        .output()
        .expect("run bench/suite/run.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines().filter(|l| l.starts_with("suite: ")) {
        eprintln!("e2e: {line}");
    }
    assert!(
        out.status.success(),
        "integration workloads did not end as recorded ({}); results in {}:\n{stderr}",
        out.status,
        out_dir.display()
    );
    assert!(stderr.contains("ended as recorded"), "{stderr}");
    let _ = std::fs::remove_dir_all(&out_dir);
}
