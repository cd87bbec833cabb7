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
    let report = dir.path().join("report.html");
    let out = compare(&format!("--report={}", report.display()));
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

    // The page, as a browser draws it.
    let html = std::fs::read_to_string(&report).unwrap();
    for outside in ["http://", "https://", "<script", "src=", "@import"] {
        assert!(!html.contains(outside), "the page reaches outside itself ({outside})");
    }
    let dom = chromium(&["--dump-dom", &format!("file://{}", report.display())]);
    assert_eq!(dom.matches("<section class=\"run\"").count(), 2, "one section per profile");
    assert_eq!(dom.matches("<details>").count(), 600, "every pod of both runs has its explanation");
    assert!(dom.contains("NodeResourcesFit (1)"), "the explanations name each plugin's score");
    let shot = dir.path().join("shot.png");
    chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1400,1600",
        &format!("file://{}", report.display()),
    ]);
    let (width, pixels) = decode(&shot);
    let count = |color: &str, left: bool| {
        let c = rgb(color);
        pixels
            .chunks(3)
            .enumerate()
            .filter(|(i, p)| ((i % width) < width / 2) == left && p.iter().zip(c).all(|(a, b)| a.abs_diff(b) <= 8))
            .count()
    };
    let c = kube_wasm_scheduler::sim::CPU_COLOR;
    let m = kube_wasm_scheduler::sim::MEMORY_COLOR;
    let (cpu_left, cpu_right, mem_left, mem_right) = (count(c, true), count(c, false), count(m, true), count(m, false));
    assert!(cpu_left > 1000 && mem_left > 1000, "the default run's bars are drawn: {cpu_left} {mem_left}");
    assert!(cpu_right > 1000 && mem_right > 1000, "MostAllocated's bars are drawn: {cpu_right} {mem_right}");
}

/// Headless chromium (installed by scripts/setup-browser.sh, which `make test` runs); its stdout.
fn chromium(args: &[&str]) -> String {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .args(args)
        .output()
        .expect("chromium not found: run scripts/setup-browser.sh");
    assert!(out.status.success(), "chromium: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A PNG's width and its pixels as RGB bytes.
fn decode(path: &std::path::Path) -> (usize, Vec<u8>) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let rgb: Vec<u8> = buf[..info.buffer_size()].chunks(channels).flat_map(|p| p[..3].to_vec()).collect();
    (info.width as usize, rgb)
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}
