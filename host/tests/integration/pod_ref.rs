//! Pods lent by reference (`host.pod-ref`) to QueueSort's key and PostBind, with the real guests: QosSort reads two
//! fields of each pod and RandomScore two of each bound pod, so no whole pod is copied into either; a guest whose
//! code wants the whole pod (Coscheduling's key, written against the by-value `sort_key`) gets it through the same
//! reference, and decides as before.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering::Relaxed;

use kube_wasm_scheduler::framework::Plugin as _;
use kube_wasm_scheduler::sim::{self, SimOptions, Simulation};
use kube_wasm_scheduler::wasm;

use crate::wasm::{guest, registry_for};

/// The pods bound when `cluster` is simulated under the profile `yaml`, and for each plugin named in `plugins`
/// (pods lent to it, whole pods it copied from them).
fn run(yaml: &str, cluster: &str, plugins: &[&str]) -> (BTreeSet<String>, Vec<(u64, u64)>) {
    let (reg, cfg) = registry_for(yaml);
    let file = sim::load::parse("c.yaml", cluster).unwrap();
    // Kept alive while its plugins are looked up.
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions { seed: 1, ..Default::default() }).unwrap();
    let bound = s.run().placements.into_iter().filter(|p| p.node.is_some()).map(|p| p.pod).collect();
    let loaded = wasm::loaded_plugins();
    let stats = plugins
        .iter()
        .map(|name| {
            let plugin = loaded.iter().find(|p| p.name() == *name).expect("the plugin is loaded");
            (plugin.stats.pods_lent.load(Relaxed), plugin.stats.pods_fetched.load(Relaxed))
        })
        .collect();
    (bound, stats)
}

/// The set of pods named.
fn pods(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| format!("default/{n}")).collect()
}

/// A pending pod with `priority` whose QoS class is `qos`.
fn pod(name: &str, priority: i32, qos: &str) -> String {
    let resources = match qos {
        "Guaranteed" => "{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}",
        "Burstable" => "{requests: {cpu: 100m}}",
        _ => "{}",
    };
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  priority: {priority}\n  containers: [{{name: c, resources: {resources}}}]\n---\n")
}

#[test]
fn queue_sort_and_post_bind_read_only_the_fields_they_use() {
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 1\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    queueSort:\n      enabled: [{{name: RefQosSort}}]\n      disabled: [{{name: '*'}}]\n    postBind:\n      enabled: [{{name: RefRandomScore}}]\n  pluginConfig:\n  - name: RefQosSort\n    args:\n      component: {}\n  - name: RefRandomScore\n    args:\n      component: {}\n",
        guest("qos-sort").display(),
        guest("random-score").display()
    );
    // Two nodes with room for one pod each: the two pods first in QosSort's order are bound. In file (arrival)
    // order, PrioritySort would take "a" and then "c".
    let nodes: String = (0..2)
        .map(|i| format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}}}\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '1'}}\n---\n"))
        .collect();
    let cluster = pod("c", 5, "Burstable")
        + &pod("d", 5, "BestEffort")
        + &pod("e", 0, "Guaranteed")
        + &pod("b", 5, "Guaranteed")
        + &pod("a", 10, "BestEffort");
    let (bound, stats) = run(&yaml, &(nodes + &cluster), &["RefQosSort", "RefRandomScore"]);
    assert_eq!(bound, pods(&["a", "b"]), "priority first, then Guaranteed");
    let (lent, fetched) = stats[0];
    assert!(lent >= 5, "every pod's key was asked with the pod lent: {lent}");
    assert_eq!(fetched, 0, "QosSort reads priority and QoS class, never the whole pod");
    assert_eq!(stats[1], (2, 0), "one PostBind per bound pod, reading namespace and name");
}

#[test]
fn a_guest_written_against_the_whole_pod_gets_it_through_the_reference() {
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 1\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    queueSort:\n      enabled: [{{name: RefCoscheduling}}]\n      disabled: [{{name: '*'}}]\n  pluginConfig:\n  - name: RefCoscheduling\n    args:\n      component: {}\n",
        guest("coscheduling").display()
    );
    // One node with room for two pods; Coscheduling sorts by priority, then by group: the gang "g" (its first
    // member arrived first) before the lone pod that arrived between its members.
    let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n0\n  labels: {kubernetes.io/hostname: n0}\nstatus:\n  allocatable: {cpu: '4', memory: 8Gi, pods: '2'}\n---\n";
    let member = |name: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{pod-group.scheduling.sigs.k8s.io/name: g}}\nspec:\n  containers: [{{name: c}}]\n---\n")
    };
    let cluster = node.to_string() + &member("g-1") + &pod("lone", 0, "BestEffort") + &member("g-2");
    let (bound, stats) = run(&yaml, &cluster, &["RefCoscheduling"]);
    assert_eq!(bound, pods(&["g-1", "g-2"]), "the gang's members sort together");
    let (lent, fetched) = stats[0];
    assert!(lent >= 3, "every pod's key was asked with the pod lent: {lent}");
    assert_eq!(fetched, lent, "the SDK's by-value fallback copies each lent pod once");
}
