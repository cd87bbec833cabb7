//! An HTTP extender kept from a kube-scheduler setup: examples/extender/extender.py (a real server on a free
//! loopback port) filters and scores the nodes of the pods that request its GPUs. The pod lands where the
//! extender says, and the FailedScheduling event of a pod no node can take carries the extender's reasons; the
//! live `--explain` logs the extender's verdicts.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{free_port, https_get, root, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const NS: &str = "e2e-extenders";

/// The example extender, killed when dropped.
struct ExampleExtender(Child);

impl Drop for ExampleExtender {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_example_extender() -> (ExampleExtender, String) {
    let mut child = Command::new("python3")
        .arg(root().join("examples/extender/extender.py"))
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 examples/extender/extender.py");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").expect("the extender prints its URL").to_string();
    (ExampleExtender(child), url)
}

fn gpu_pod(name: &str, gpus: u32) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"schedulerName": "extender-scheduler",
        "containers": [{"name": "c", "image": "registry.invalid/pause", "resources": {
            "requests": {"cpu": "10m", "example.com/gpu": gpus.to_string()},
            "limits": {"example.com/gpu": gpus.to_string()}}}]}}))
    .unwrap()
}

pub(crate) fn gpu_pods_land_where_the_extender_says(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace(NS);
    k.node("ext-gpu-2", json!({"e2e": "extenders", "example.com/gpu-count": "2"}));
    k.node("ext-gpu-8", json!({"e2e": "extenders", "example.com/gpu-count": "8"}));
    k.node("ext-cpu", json!({"e2e": "extenders"}));
    let (_extender, url) = start_example_extender();
    let profile = std::fs::read_to_string(root().join("examples/extender/profile.yaml")).unwrap();
    let extenders = profile.split_once("extenders:\n").expect("the example configures extenders").1;
    let profile = write_profile(
        work,
        "extenders.yaml",
        &format!(
            "profiles:\n- schedulerName: extender-scheduler\nextenders:\n{}",
            extenders.replace("http://127.0.0.1:8888", &url)
        ),
    );
    let port = free_port();
    let explain = format!("{NS}/trainer");
    let mut s =
        Scheduler::start(&cp.kubeconfig(), &profile, port, &["--explain", &explain], work.join("extenders.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    let api: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    k.rt.block_on(api.create(&PostParams::default(), &gpu_pod("trainer", 4))).unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &gpu_pod("too-big", 16))).unwrap();

    // Only ext-gpu-8 has 4 GPUs: the extender's filter leaves it alone among every node of the cluster.
    assert_eq!(k.wait_bound(NS, "trainer"), "ext-gpu-8", "{}", s.log());
    let failed = wait_until("FailedScheduling of too-big", Duration::from_secs(30), || {
        k.events(NS).into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("too-big")
        })
    });
    let note = failed.note.unwrap_or_default();
    assert!(note.starts_with("0/"), "{note}");
    assert!(note.contains("2 node(s) have fewer than 16 GPUs"), "{note}");
    assert!(note.contains("node(s) have no GPUs"), "{note}");
    assert_eq!(k.node_of(NS, "too-big"), None);
    // --explain logs the trainer's attempt with the extender's verdict on every node and its scores.
    let log = wait_until("the explained attempt in the log", Duration::from_secs(10), || {
        let log = s.log();
        log.contains(&format!("Extender {url} filter:")).then_some(log)
    });
    assert!(log.contains("UnschedulableAndUnresolvable: node(s) have no GPUs"), "{log}");
    assert_eq!(s.term(), Some(0), "SIGTERM exits 0:\n{}", s.log());
}
