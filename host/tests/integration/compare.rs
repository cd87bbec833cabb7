//! `simulate --config A --config B`: two profiles on one 500-node cluster, side by side. MostAllocated packs
//! pods onto fewer nodes than the default LeastAllocated spreads them over, and the table says so.

use std::process::Command;

use crate::util::TempDir;

/// 500 nodes in three zones and 300 pending pods of three sizes.
fn cluster() -> String {
    let mut s = String::new();
    for i in 0..500 {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i:03}\n  labels: {{kubernetes.io/hostname: node-{i:03}, topology.kubernetes.io/zone: zone-{}}}\nstatus:\n  allocatable: {{cpu: \"8\", memory: 32Gi, pods: \"110\"}}\n",
            ["a", "b", "c"][i % 3]
        ));
    }
    for i in 0..300 {
        let (cpu, mem) = [("250m", "512Mi"), ("1", "2Gi"), ("2", "4Gi")][i % 3];
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: app-{i:03}, namespace: default}}\nspec:\n  containers: [{{name: c, image: app, resources: {{requests: {{cpu: \"{cpu}\", memory: {mem}}}}}}}]\n"
        ));
    }
    s
}

const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

/// The `nodes with pods` cells of the table.
fn nodes_with_pods(table: &str) -> Vec<usize> {
    let line = table.lines().find(|l| l.starts_with("nodes with pods")).expect("a nodes-with-pods row");
    line.split_whitespace().skip(3).map(|c| c.parse().unwrap()).collect()
}

#[test]
fn default_against_most_allocated_on_500_nodes() {
    let dir = TempDir::new("compare");
    let c = dir.path().join("cluster.yaml");
    std::fs::write(&c, cluster()).unwrap();
    let default = dir.path().join("default.yaml");
    std::fs::write(&default, HEAD).unwrap();
    let packed = dir.path().join("most-allocated.yaml");
    std::fs::write(
        &packed,
        format!("{HEAD}profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n"),
    )
    .unwrap();
    let compare = |first: &str| {
        Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
            .args(["simulate", first, "--config"])
            .arg(&default)
            .arg("--config")
            .arg(&packed)
            .arg("--cluster")
            .arg(&c)
            .output()
            .unwrap()
    };
    let out = compare("--seed=1");
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for row in ["scheduled", "pending", "cpu requested", "memory requested", "pods per zone", "pods placed differently"]
    {
        assert!(table.contains(row), "no {row:?} row:\n{table}");
    }
    let scheduled = table.lines().find(|l| l.starts_with("scheduled")).unwrap();
    assert_eq!(scheduled.split_whitespace().skip(1).collect::<Vec<_>>(), ["300", "300"], "{table}");
    let used = nodes_with_pods(&table);
    assert_eq!(used.len(), 2);
    assert!(used[1] * 4 < used[0], "MostAllocated packs onto far fewer nodes: {used:?}\n{table}");
    // Each zone's row adds up to the pods placed.
    let zone_total: usize = table
        .lines()
        .filter(|l| l.trim_start().starts_with("zone-"))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(zone_total, 300, "{table}");

    // --watch compares nothing; one line, exit 2.
    let out = compare("--watch");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "error: --watch takes at most one --config\n");
}
