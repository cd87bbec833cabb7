//! Volumes that wait for their first consumer, on a real API server: the scheduler picks the node, writes the
//! choice (a dynamically provisioned claim's `volume.kubernetes.io/selected-node`, a pre-made volume's
//! `claimRef`), waits for the binding to complete, and only then binds the pod. This control plane runs no
//! controller manager and no CSI provisioner, so the test does their part: it provisions a volume for the
//! selected node and binds claims to volumes, as the external-provisioner and the PersistentVolume controller
//! would.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{free_port, https_get, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const NS: &str = "e2e-volumes";
const SCHEDULER: &str = "volumes-scheduler";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

fn create<K>(k: &Kube, api: &Api<K>, v: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o: K = serde_json::from_value(v).unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &o)).unwrap()
}

/// The PersistentVolume controller's part: the claim names the volume and is marked bound.
fn complete_binding(k: &Kube, claims: &Api<PersistentVolumeClaim>, claim: &str, volume: &str) {
    let mut c = k.rt.block_on(claims.get(claim)).unwrap();
    c.spec.get_or_insert_with(Default::default).volume_name = Some(volume.into());
    let a = c.metadata.annotations.get_or_insert_with(Default::default);
    a.insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
    a.insert("pv.kubernetes.io/bound-by-controller".into(), "yes".into());
    k.rt.block_on(claims.replace(claim, &PostParams::default(), &c)).unwrap();
}

/// The node `pod` is bound to; on timeout, a failure that shows the namespace's events and claims.
fn bound(k: &Kube, pod: &str, s: &Scheduler) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if let Some(n) = k.node_of(NS, pod) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let events: Vec<String> = k.events(NS).into_iter().map(|e| format!("{:?} {:?}", e.reason, e.note)).collect();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(k.client.clone(), NS);
    let claims: Vec<String> =
        k.rt.block_on(claims.list(&Default::default()))
            .map(|l| {
                l.items
                    .iter()
                    .map(|c| {
                        format!(
                            "{:?} {:?} {:?}",
                            c.metadata.name,
                            c.metadata.annotations,
                            c.spec.as_ref().and_then(|s| s.volume_name.clone())
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
    panic!("{NS}/{pod} not bound in 60s\nevents: {events:#?}\nclaims: {claims:#?}\nscheduler log:\n{}", s.log());
}

pub(crate) fn claims_that_wait_for_their_first_consumer(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace(NS);
    k.node("vol-a", json!({"e2e": "volumes", "topology.kubernetes.io/zone": "a"}));
    k.node("vol-b", json!({"e2e": "volumes", "topology.kubernetes.io/zone": "b"}));
    let classes: Api<StorageClass> = Api::all(k.client.clone());
    create(
        k,
        &classes,
        json!({"metadata": {"name": "e2e-zonal"}, "provisioner": "disk.csi.e2e.example",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["b"]}]}]}),
    );
    create(
        k,
        &classes,
        json!({"metadata": {"name": "e2e-local"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    let volumes: Api<PersistentVolume> = Api::all(k.client.clone());
    create(
        k,
        &volumes,
        json!({"metadata": {"name": "e2e-local-a"}, "spec": {"capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"], "storageClassName": "e2e-local", "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}}}),
    );
    // A new volume is Pending until the PersistentVolume controller (absent here) marks it Available.
    let mut pv = k.rt.block_on(volumes.get_status("e2e-local-a")).unwrap();
    pv.status = Some(serde_json::from_value(json!({"phase": "Available"})).unwrap());
    k.rt.block_on(volumes.replace_status("e2e-local-a", &PostParams::default(), &pv)).unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(k.client.clone(), NS);
    for (name, class) in [("data", "e2e-zonal"), ("cache", "e2e-local")] {
        create(
            k,
            &claims,
            json!({"metadata": {"name": name}, "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
        );
    }

    let profile = write_profile(work, "volumes.yaml", &format!("profiles:\n- schedulerName: {SCHEDULER}\n"));
    let port = free_port();
    let s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("volumes.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));

    let pods: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    for (pod, claim) in [("db", "data"), ("redis", "cache")] {
        create(
            k,
            &pods,
            json!({"metadata": {"name": pod}, "spec": {"schedulerName": SCHEDULER,
                "nodeSelector": {"e2e": "volumes"},
                "containers": [{"name": "c", "image": "registry.invalid/pause"}],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}}),
        );
    }

    // Dynamic provisioning: the claim names the node the scheduler chose; the pod is not bound before its volume.
    let selected = wait_until("the claim's selected node", Duration::from_secs(60), || {
        let c = k.rt.block_on(claims.get("data")).ok()?;
        c.metadata.annotations?.get(SELECTED_NODE).cloned()
    });
    assert_eq!(selected, "vol-b", "only zone b is in the class's allowedTopologies");
    assert_eq!(k.node_of(NS, "db"), None, "bound before its volume was provisioned:\n{}", s.log());
    let data = k.rt.block_on(claims.get("data")).unwrap();
    create(
        k,
        &volumes,
        json!({"metadata": {"name": "pvc-e2e-data"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "storageClassName": "e2e-zonal",
            "csi": {"driver": "disk.csi.e2e.example", "volumeHandle": "vol-1"},
            "claimRef": {"namespace": NS, "name": "data", "uid": data.metadata.uid},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}}}),
    );
    complete_binding(k, &claims, "data", "pvc-e2e-data");
    assert_eq!(bound(k, "db", &s), "vol-b");

    // A pre-made volume: the scheduler writes the claim into the volume's claimRef.
    let claim_ref = wait_until("the local volume's claimRef", Duration::from_secs(60), || {
        k.rt.block_on(volumes.get("e2e-local-a")).ok()?.spec?.claim_ref
    });
    assert_eq!((claim_ref.namespace.as_deref(), claim_ref.name.as_deref()), (Some(NS), Some("cache")));
    assert_eq!(k.node_of(NS, "redis"), None, "bound before its volume was bound:\n{}", s.log());
    complete_binding(k, &claims, "cache", "e2e-local-a");
    assert_eq!(bound(k, "redis", &s), "vol-a");
}
