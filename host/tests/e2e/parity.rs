//! Decision parity with kube-scheduler, short: `scripts/parity.sh` (the harness behind `make parity`) with two
//! seeds of 15 probes on 16 nodes, live beside kube-scheduler v1.37.2 on its own throwaway control plane, and the
//! simulator on the same cluster files. Any divergence fails; ties are reported, not failed. The long run is
//! `make parity`.

use std::process::Command;

use super::{bin, root};

/// Every comparable probe is placed alike by kube-scheduler and by us, live and in the simulator.
#[test]
fn decisions_match_kube_scheduler() {
    let out_dir = std::env::temp_dir().join(format!("kws-parity-{}", std::process::id()));
    let out = Command::new(root().join("scripts/parity.sh"))
        .env("KWS_BIN", bin())
        .env("PARITY_SEEDS", "1-2")
        .env("PARITY_PROBES", "15")
        .env("PARITY_NODES", "16")
        .env("PARITY_OUT", &out_dir)
        .output()
        .expect("run scripts/parity.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "parity run failed ({}); results in {}:\n{stdout}\n{stderr}",
        out.status,
        out_dir.display()
    );
    for line in stdout.lines().filter(|l| l.starts_with("parity: ") || l.starts_with("tie ")) {
        eprintln!("e2e: {line}");
    }
    assert!(stdout.contains("2 seeds x 15 probes"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out_dir);
}
