//! The volume plugins of the default profile in the simulator: NodeVolumeLimits counts CSI volumes against a
//! CSINode's limit, VolumeZone steers a pod to its volume's zone, and VolumeRestrictions keeps a ReadWriteOncePod
//! claim to one pod (preemption may take it over).

use kube_wasm_scheduler::config::SchedulerConfig;
use kube_wasm_scheduler::framework::Registry;

use crate::util::*;

const DRIVER: &str = "ebs.csi.aws.com";

fn default_profile() -> (Registry, SchedulerConfig) {
    let reg = registry_with(vec![]);
    let cfg = config(&reg, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n");
    (reg, cfg)
}

/// A node with zone and hostname labels.
fn node(name: &str, zone: &str) -> String {
    format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}}}\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}\n---\n")
}

/// A CSINode letting `node` attach `count` volumes of the driver.
fn csi_node(node: &str, count: u32) -> String {
    format!("apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {{name: {node}}}\nspec:\n  drivers: [{{name: {DRIVER}, nodeID: {node}, allocatable: {{count: {count}}}}}]\n---\n")
}

/// A CSI volume of the driver with `labels`, and a claim `name` bound to it with `access_mode`.
fn bound_claim(name: &str, labels: &str, access_mode: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv-{name}, labels: {{{labels}}}}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [{access_mode}]\n  csi: {{driver: {DRIVER}, volumeHandle: vol-{name}}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  accessModes: [{access_mode}]\n  resources: {{requests: {{storage: 1Gi}}}}\n  volumeName: pv-{name}\n---\n"
    )
}

/// A pod using claim `claim`, with `extra` lines appended to its spec.
fn pod_with_claim(name: &str, claim: &str, extra: &str) -> String {
    pod_yaml(name, &format!("  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]\n{extra}"))
}

#[test]
fn a_csinode_limit_of_one_volume_keeps_a_second_pod_with_a_volume_off_the_node() {
    let (reg, cfg) = default_profile();
    let cluster = node("n0", "zone-a")
        + &csi_node("n0", 1)
        + &bound_claim("data-1", "", "ReadWriteOnce")
        + &bound_claim("data-2", "", "ReadWriteOnce")
        + &pod_with_claim("first", "data-1", "")
        + &pod_with_claim("second", "data-2", "")
        // A pod without volumes is not limited.
        + &pod_yaml("stateless", "");
    let r = simulate(&reg, &cfg, &cluster, 1, &[]);
    assert_eq!(node_of(&r, "default/first").as_deref(), Some("n0"));
    assert_eq!(node_of(&r, "default/stateless").as_deref(), Some("n0"));
    assert_eq!(node_of(&r, "default/second"), None);
    let msg = message_of(&r, "default/second");
    assert!(msg.starts_with("0/1 nodes are available: 1 node(s) exceed max volume count."), "{msg}");

    // A node without a CSINode has no limit: the second pod goes there.
    let cluster = cluster + &node("n1", "zone-a");
    let r = simulate(&reg, &cfg, &cluster, 1, &[]);
    let placed = [node_of(&r, "default/first"), node_of(&r, "default/second")];
    assert!(placed.contains(&Some("n0".into())) && placed.contains(&Some("n1".into())), "{placed:?}");
}

#[test]
fn a_zoned_volume_steers_its_pod_to_a_node_of_that_zone() {
    let (reg, cfg) = default_profile();
    let zone_label = |z: &str| format!("topology.kubernetes.io/zone: {z}");
    let cluster = node("a", "zone-a")
        + &node("b", "zone-b")
        + &node("c", "zone-c")
        + &bound_claim("in-b", &zone_label("zone-b"), "ReadWriteOnce")
        + &bound_claim("in-b-or-c", &zone_label("zone-b__zone-c"), "ReadWriteOnce")
        + &bound_claim("in-d", &zone_label("zone-d"), "ReadWriteOnce")
        + &pod_with_claim("wants-b", "in-b", "")
        + &pod_with_claim("wants-b-or-c", "in-b-or-c", "")
        + &pod_with_claim("wants-d", "in-d", "");
    for seed in 0..4 {
        let r = simulate(&reg, &cfg, &cluster, seed, &[]);
        assert_eq!(node_of(&r, "default/wants-b").as_deref(), Some("b"), "seed {seed}");
        let b_or_c = node_of(&r, "default/wants-b-or-c");
        assert!(matches!(b_or_c.as_deref(), Some("b" | "c")), "seed {seed}: {b_or_c:?}");
        assert_eq!(node_of(&r, "default/wants-d"), None);
        let msg = message_of(&r, "default/wants-d");
        assert!(msg.starts_with("0/3 nodes are available: 3 node(s) had no available volume zone."), "{msg}");
    }
}

#[test]
fn a_read_write_once_pod_claim_serves_one_pod_and_preemption_can_take_it_over() {
    let (reg, cfg) = default_profile();
    let base = node("n0", "zone-a") + &node("n1", "zone-a") + &bound_claim("solo", "", "ReadWriteOncePod");
    // The claim is in use on n0: a pod of the same priority fits nowhere, on any node.
    let cluster =
        base.clone() + &pod_with_claim("holder", "solo", "  nodeName: n0\n") + &pod_with_claim("another", "solo", "");
    let r = simulate(&reg, &cfg, &cluster, 1, &[]);
    assert_eq!(node_of(&r, "default/another"), None);
    let msg = message_of(&r, "default/another");
    // Upstream's words (volumerestrictions.ErrReasonReadWriteOncePodConflict).
    let want = "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod \
                access mode already in-use by another pod.";
    assert!(msg.starts_with(want), "{msg}");
    assert!(r.evictions.is_empty());

    // A more important pod evicts the holder (only the holder's node frees the claim's count) and takes the claim.
    let cluster = base
        + &pod_with_claim("holder", "solo", "  nodeName: n0\n")
        + &pod_with_claim("urgent", "solo", "  priority: 1000\n");
    let r = simulate(&reg, &cfg, &cluster, 1, &[]);
    let evicted: Vec<&str> = r.evictions.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(evicted, ["default/holder"]);
    assert_eq!(node_of(&r, "default/urgent").as_deref(), Some("n0"));
}

/// A StorageClass of the driver that waits for the first consumer, and a CSINode whose driver reports the zone as
/// its topology.
fn provisioning_class_and_csi_nodes(nodes: &[&str]) -> String {
    let mut out = format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: wffc}}\nprovisioner: {DRIVER}\nvolumeBindingMode: WaitForFirstConsumer\n---\n"
    );
    for n in nodes {
        out += &format!("apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {{name: {n}}}\nspec:\n  drivers: [{{name: {DRIVER}, nodeID: {n}, topologyKeys: [topology.kubernetes.io/zone]}}]\n---\n");
    }
    out
}

/// An unbound claim of the waiting class, with `annotations` (a YAML flow map's contents).
fn unbound_claim(name: &str, annotations: &str) -> String {
    format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default, annotations: {{{annotations}}}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: wffc\n  resources: {{requests: {{storage: 1Gi}}}}\n---\n")
}

#[test]
fn a_claim_whose_provisioning_is_under_way_keeps_its_pod_on_the_selected_node() {
    // `pending` already names n1 (provisioning for n1 is under way when the cluster is read): live, the scheduler
    // places its pod on n1 only. Another pod, scheduled first, selects a node for its own claim, which makes the
    // simulated provisioner run; it must not provision `pending` as if it were done, or the pod could go to n0, the
    // other (emptier) node of n1's zone.
    let (reg, cfg) = default_profile();
    let cluster = node("n0", "zone-a")
        + &node("n1", "zone-a")
        + &provisioning_class_and_csi_nodes(&["n0", "n1"])
        + "apiVersion: v1\nkind: Pod\nmetadata: {name: busy, namespace: default}\nspec:\n  nodeName: n1\n  containers: [{name: c, resources: {requests: {cpu: '3'}}}]\n---\n"
        + &unbound_claim("fresh", "")
        + &unbound_claim("pending", "volume.kubernetes.io/selected-node: n1")
        + &pod_with_claim("first", "fresh", "  priority: 1000\n")
        + &pod_with_claim("second", "pending", "");
    for seed in 0..4 {
        let r = simulate(&reg, &cfg, &cluster, seed, &[]);
        assert!(node_of(&r, "default/first").is_some(), "seed {seed}");
        assert_eq!(node_of(&r, "default/second").as_deref(), Some("n1"), "seed {seed}");
    }
}
