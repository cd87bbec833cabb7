//! Storage helpers shared by the volume plugins (VolumeBinding, VolumeRestrictions, NodeVolumeLimits, VolumeZone) and the
//! simulator's volume controllers, after
//! upstream's `component-helpers/storage/volume` and `component-helpers/storage/ephemeral` and the listers'
//! not-found errors, whose wording users see in rejection reasons.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Volume};

use crate::framework::PodInfo;

/// The legacy annotation naming a claim's StorageClass; it wins over `spec.storageClassName`, as upstream.
pub const ANNOTATION_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// `StorageClass.volumeBindingMode`: bind (or provision) once a pod using the claim is scheduled.
pub const BINDING_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// The claim name a pod volume refers to, and whether the volume is a generic ephemeral one (its claim is
/// `<pod>-<volume>`, upstream `ephemeral.VolumeClaimName`). `None` for volumes that use no claim.
pub fn volume_claim_name(pod: &PodInfo, v: &Volume) -> Option<(String, bool)> {
    if let Some(c) = &v.persistent_volume_claim {
        Some((c.claim_name.clone(), false))
    } else if v.ephemeral.is_some() {
        Some((format!("{}-{}", pod.name, v.name), true))
    } else {
        None
    }
}

/// The pod's volumes (none when the spec has none).
pub fn pod_volumes(pod: &PodInfo) -> &[Volume] {
    pod.pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or(&[])
}

/// The key of a claim in `ClusterObjects::pvcs`.
pub fn claim_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The StorageClass a claim asks for, `""` for none (upstream `GetPersistentVolumeClaimClass`): the beta
/// annotation first, then `spec.storageClassName`.
pub fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    if let Some(c) = pvc.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION_STORAGE_CLASS)) {
        return c;
    }
    pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// The PersistentVolume a claim is bound to, `""` when unbound.
pub fn claim_volume_name(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("")
}

/// Whether a claim lists an access mode (upstream `ContainsAccessMode`).
pub fn claim_has_access_mode(pvc: &PersistentVolumeClaim, mode: &str) -> bool {
    pvc.spec.as_ref().and_then(|s| s.access_modes.as_ref()).is_some_and(|m| m.iter().any(|x| x == mode))
}

/// Checks that a generic ephemeral volume's claim was created for this pod (upstream `ephemeral.VolumeIsForPod`):
/// same namespace and the pod is its controller. `Err` is upstream's message.
pub fn ephemeral_claim_is_for_pod(pod: &PodInfo, pvc: &PersistentVolumeClaim) -> Result<(), String> {
    let pvc_ns = pvc.metadata.namespace.as_deref().unwrap_or("");
    let pvc_name = pvc.metadata.name.as_deref().unwrap_or("");
    // The pod object's own uid, as upstream's `IsControlledBy` (not `PodInfo::uid`, which has a fallback).
    let pod_uid = pod.pod.metadata.uid.as_deref().unwrap_or("");
    let controller = pvc.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true));
    let owned = controller.is_some_and(|r| r.uid == pod_uid);
    if pvc_ns != pod.namespace || !owned {
        return Err(format!(
            "PVC {pvc_ns}/{pvc_name} was not created for pod {}/{} (pod is not owner)",
            pod.namespace, pod.name
        ));
    }
    Ok(())
}

/// The message of a lister's not-found error, `<resource> "<name>" not found`, where the resource is the
/// group-qualified singular (`persistentvolumeclaim`, `storageclass.storage.k8s.io`).
pub fn not_found(resource: &str, name: &str) -> String {
    format!("{resource} {name:?} not found")
}

/// Lister resource name of PersistentVolumeClaims in not-found messages.
pub const RESOURCE_PVC: &str = "persistentvolumeclaim";
/// Lister resource name of PersistentVolumes in not-found messages.
pub const RESOURCE_PV: &str = "persistentvolume";
/// Lister resource name of StorageClasses in not-found messages.
pub const RESOURCE_STORAGE_CLASS: &str = "storageclass.storage.k8s.io";

/// The zones in a PersistentVolume's zone or region label value (upstream `LabelZonesToSet`): several zones are
/// joined by `__`; each is trimmed; `None` when any is empty (upstream's error, on which the label is ignored).
pub fn label_zones_to_set(value: &str) -> Option<BTreeSet<String>> {
    value
        .split("__")
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::testutil::pod;
    use serde_json::json;

    fn pvc(v: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn label_zones_to_set_table() {
        let set = |zs: &[&str]| Some(zs.iter().map(|z| z.to_string()).collect::<BTreeSet<_>>());
        let cases = [
            ("us-east-1a", set(&["us-east-1a"])),
            ("us-east-1a__us-east-1b", set(&["us-east-1a", "us-east-1b"])),
            (" a __ b ", set(&["a", "b"])),
            ("a__a", set(&["a"])),
            ("", None),
            ("a____b", None),
            ("a__", None),
            ("a_b", set(&["a_b"])),
        ];
        for (value, want) in cases {
            assert_eq!(label_zones_to_set(value), want, "{value:?}");
        }
    }

    #[test]
    fn claim_class_prefers_the_beta_annotation() {
        let both = pvc(json!({"metadata": {"name": "c", "annotations": {ANNOTATION_STORAGE_CLASS: "old"}},
            "spec": {"storageClassName": "new"}}));
        assert_eq!(claim_class(&both), "old");
        assert_eq!(claim_class(&pvc(json!({"metadata": {"name": "c"}, "spec": {"storageClassName": "new"}}))), "new");
        assert_eq!(claim_class(&pvc(json!({"metadata": {"name": "c"}, "spec": {}}))), "");
    }

    #[test]
    fn ephemeral_claims_must_be_controlled_by_the_pod() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}));
        let owned = |uid: &str, controller: bool, ns: &str| {
            pvc(json!({"metadata": {"name": "p-v", "namespace": ns, "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid, "controller": controller}]}}))
        };
        assert_eq!(ephemeral_claim_is_for_pod(&p, &owned("u1", true, "ns")), Ok(()));
        let not_owner = Err("PVC ns/p-v was not created for pod ns/p (pod is not owner)".to_string());
        assert_eq!(ephemeral_claim_is_for_pod(&p, &owned("u2", true, "ns")), not_owner);
        assert_eq!(ephemeral_claim_is_for_pod(&p, &owned("u1", false, "ns")), not_owner);
        assert!(ephemeral_claim_is_for_pod(&p, &owned("u1", true, "other")).is_err());
    }

    #[test]
    fn not_found_reads_as_the_listers() {
        assert_eq!(not_found(RESOURCE_PVC, "data"), r#"persistentvolumeclaim "data" not found"#);
        assert_eq!(not_found(RESOURCE_STORAGE_CLASS, "fast"), r#"storageclass.storage.k8s.io "fast" not found"#);
    }
}
