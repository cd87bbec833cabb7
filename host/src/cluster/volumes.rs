//! What the in-memory cluster does with volume updates: it stores them as an API server would (a stale
//! `resourceVersion` is a conflict) and then does at once what the PersistentVolume controller and a CSI
//! external-provisioner do a moment later on a real cluster. A claim whose PersistentVolume names it in
//! `claimRef` is bound to it; a claim the scheduler gave a `volume.kubernetes.io/selected-node` gets a new volume
//! from its StorageClass's provisioner, restricted to the selected node's topology segment (the values of the
//! driver's CSINode `topologyKeys` on that node), and is bound to it. A claim that already carried the annotation
//! when the cluster was read is left as it is until the scheduler writes it (its pod's PreBind): its provisioning was
//! under way outside what is simulated, so its pod goes to the selected node only, as the live scheduler decides.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimStatus, PersistentVolumeSpec, PersistentVolumeStatus, VolumeNodeAffinity,
};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::ObjectMeta;

use super::ClusterError;
use crate::framework::storage::claim_class;
use crate::framework::ClusterObjects;

/// The claim annotation the PersistentVolume controller sets once it has bound the claim.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a claim or volume the controller bound (rather than the user).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The node the scheduler chose for a claim of a `WaitForFirstConsumer` class.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The provisioner that made a volume.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// A StorageClass provisioner that provisions nothing (local volumes made by hand).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// A claim the simulated controllers bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimBound {
    /// `ns/name`.
    pub claim: String,
    /// The volume.
    pub volume: String,
    /// The node it was provisioned for, when provisioned.
    pub provisioned_for: Option<String>,
}

/// The stored volumes and claims with the API server's optimistic concurrency: every write gets a new
/// `resourceVersion`.
#[derive(Debug, Default)]
pub struct VolumeStore {
    /// The objects as stored.
    pub objects: ClusterObjects,
    /// The last resourceVersion handed out.
    version: u64,
    /// Node name → labels, for a provisioned volume's topology.
    pub node_labels: HashMap<String, BTreeMap<String, String>>,
    /// Claims (`ns/name`) written with a selected node through an update here: the ones the provisioner acts on.
    selected_here: HashSet<String>,
}

impl VolumeStore {
    fn next_version(&mut self) -> Option<String> {
        self.version += 1;
        Some(self.version.to_string())
    }

    /// Stores a PersistentVolume update.
    pub fn replace_pv(&mut self, pv: &PersistentVolume) -> Result<PersistentVolume, ClusterError> {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let object = format!("persistentvolume {name}");
        let stored = self.objects.pvs.get(&name).ok_or_else(|| not_found(&object))?;
        check_version(&object, pv.metadata.resource_version.as_deref(), stored.metadata.resource_version.as_deref())?;
        let mut new = pv.clone();
        new.metadata.resource_version = self.next_version();
        self.objects.pvs.insert(name, Arc::new(new.clone()));
        Ok(new)
    }

    /// Stores a PersistentVolumeClaim update.
    pub fn replace_pvc(&mut self, pvc: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ClusterError> {
        let key = format!(
            "{}/{}",
            pvc.metadata.namespace.as_deref().unwrap_or("default"),
            pvc.metadata.name.as_deref().unwrap_or("")
        );
        let object = format!("persistentvolumeclaim {key}");
        let stored = self.objects.pvcs.get(&key).ok_or_else(|| not_found(&object))?;
        check_version(&object, pvc.metadata.resource_version.as_deref(), stored.metadata.resource_version.as_deref())?;
        // Written with a selected node (by the scheduler's PreBind, also when the node was already there): the
        // provisioner acts on it now.
        if pvc.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANN_SELECTED_NODE)) {
            self.selected_here.insert(key.clone());
        }
        let mut new = pvc.clone();
        new.metadata.resource_version = self.next_version();
        self.objects.pvcs.insert(key, Arc::new(new.clone()));
        Ok(new)
    }

    /// Stores a ResourceClaim update: its status only (`resourceclaims/status`), or everything else.
    pub fn replace_resource_claim(
        &mut self,
        claim: &ResourceClaim,
        status: bool,
    ) -> Result<ResourceClaim, ClusterError> {
        let key = format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or("default"),
            claim.metadata.name.as_deref().unwrap_or("")
        );
        let object = format!("resourceclaim {key}");
        let stored = self.objects.resource_claims.get(&key).ok_or_else(|| not_found(&object))?;
        check_version(
            &object,
            claim.metadata.resource_version.as_deref(),
            stored.metadata.resource_version.as_deref(),
        )?;
        let mut new = (**stored).clone();
        if status {
            new.status = claim.status.clone();
        } else {
            new.metadata = claim.metadata.clone();
            new.spec = claim.spec.clone();
        }
        new.metadata.resource_version = self.next_version();
        self.objects.resource_claims.insert(key, Arc::new(new.clone()));
        Ok(new)
    }

    /// Stores a new ResourceClaim, naming it from its `generateName` when it has no name (the suffix is drawn
    /// from the API server's alphabet, in order rather than at random, so a run repeats); it gets a UID, a
    /// resourceVersion and a creation time, as the API server gives them.
    pub fn create_resource_claim(&mut self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut new = claim.clone();
        let ns = new.metadata.namespace.get_or_insert_with(|| "default".into()).clone();
        if new.metadata.name.as_deref().unwrap_or("").is_empty() {
            let mut n = self.version as usize + 1;
            let suffix: String = (0..5)
                .map(|_| {
                    let c = ALPHABET[n % ALPHABET.len()] as char;
                    n /= ALPHABET.len();
                    c
                })
                .collect();
            new.metadata.name = Some(format!("{}{suffix}", new.metadata.generate_name.as_deref().unwrap_or("")));
        }
        let key = format!("{ns}/{}", new.metadata.name.as_deref().unwrap_or(""));
        if self.objects.resource_claims.contains_key(&key) {
            return Err(ClusterError::Conflict {
                object: format!("resourceclaim {key}"),
                message: "already exists".into(),
            });
        }
        new.metadata.resource_version = self.next_version();
        new.metadata.uid = Some(format!("simulated-claim-{}", self.version));
        new.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()));
        new.status = None;
        self.objects.resource_claims.insert(key, Arc::new(new.clone()));
        Ok(new)
    }

    /// Deletes a ResourceClaim (one already gone is no error). Its finalizers are not honoured: nothing here
    /// would ever clear them, and only the scheduler deletes claims in a simulation.
    pub fn delete_resource_claim(&mut self, claim: &ResourceClaim) {
        let key = format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or("default"),
            claim.metadata.name.as_deref().unwrap_or("")
        );
        self.objects.resource_claims.remove(&key);
    }

    /// Runs the simulated controllers until nothing is left for them: provisions volumes for claims given a
    /// selected node here, then binds every claim a volume names. Answers what it bound, in claim order.
    pub fn settle(&mut self) -> Vec<ClaimBound> {
        let mut bound = Vec::new();
        let mut keys: Vec<String> = self.objects.pvcs.keys().cloned().collect();
        keys.sort();
        for key in keys {
            let claim = self.objects.pvcs[&key].clone();
            if claim_volume(&claim).is_some() {
                continue;
            }
            let (volume, provisioned_for) = match self.volume_naming(&key) {
                Some(pv) => (pv, None),
                None if !self.selected_here.contains(&key) => continue,
                None => match self.provision(&claim) {
                    Some((pv, node)) => (pv, Some(node)),
                    None => continue,
                },
            };
            self.bind(&key, &volume);
            bound.push(ClaimBound { claim: key, volume, provisioned_for });
        }
        bound
    }

    /// A volume whose claimRef names the claim.
    fn volume_naming(&self, key: &str) -> Option<String> {
        let mut names: Vec<&String> = self
            .objects
            .pvs
            .iter()
            .filter(|(_, pv)| {
                pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_some_and(|r| {
                    format!("{}/{}", r.namespace.as_deref().unwrap_or(""), r.name.as_deref().unwrap_or("")) == key
                })
            })
            .map(|(n, _)| n)
            .collect();
        names.sort();
        names.first().map(|n| n.to_string())
    }

    /// A new volume for a claim with a selected node whose class has a provisioner: answers its name and the node.
    fn provision(&mut self, claim: &PersistentVolumeClaim) -> Option<(String, String)> {
        let node = claim.metadata.annotations.as_ref()?.get(ANN_SELECTED_NODE)?.clone();
        let class_name = claim_class(claim).to_string();
        let class = self.objects.storage_classes.get(&class_name)?.clone();
        if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
            return None;
        }
        let spec = claim.spec.clone().unwrap_or_default();
        let labels = self.node_labels.get(&node).cloned().unwrap_or_default();
        let keys = self
            .objects
            .csi_nodes
            .get(&node)
            .and_then(|c| c.spec.drivers.iter().find(|d| d.name == class.provisioner))
            .and_then(|d| d.topology_keys.clone())
            .unwrap_or_default();
        let expressions: Vec<NodeSelectorRequirement> = keys
            .iter()
            .filter_map(|k| {
                labels.get(k).map(|v| NodeSelectorRequirement {
                    key: k.clone(),
                    operator: "In".into(),
                    values: Some(vec![v.clone()]),
                })
            })
            .collect();
        let uid = claim.metadata.uid.clone().unwrap_or_else(|| {
            format!(
                "{}-{}",
                claim.metadata.namespace.as_deref().unwrap_or("default"),
                claim.metadata.name.as_deref().unwrap_or("")
            )
        });
        let name = format!("pvc-{uid}");
        let pv = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                annotations: Some([(ANN_PROVISIONED_BY.to_string(), class.provisioner.clone())].into()),
                resource_version: self.next_version(),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: spec.resources.as_ref().and_then(|r| r.requests.clone()),
                access_modes: spec.access_modes.clone(),
                volume_mode: spec.volume_mode.clone(),
                storage_class_name: Some(class_name),
                persistent_volume_reclaim_policy: Some(class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into())),
                claim_ref: Some(claim_ref(claim)),
                node_affinity: (!expressions.is_empty()).then(|| VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(expressions),
                            match_fields: None,
                        }],
                    }),
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus { phase: Some("Bound".into()), ..Default::default() }),
        };
        self.objects.pvs.insert(name.clone(), Arc::new(pv));
        Some((name, node))
    }

    /// Binds claim `key` to volume `name`, both ways, as the controller does.
    fn bind(&mut self, key: &str, name: &str) {
        let mut pv = (*self.objects.pvs[name]).clone();
        let mut claim = (*self.objects.pvcs[key]).clone();
        let spec = pv.spec.get_or_insert_with(Default::default);
        if spec.claim_ref.as_ref().is_none_or(|r| r.uid.as_deref().unwrap_or("").is_empty()) {
            spec.claim_ref = Some(claim_ref(&claim));
        }
        let capacity = spec.capacity.clone();
        pv.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
        pv.metadata.resource_version = self.next_version();
        claim.spec.get_or_insert_with(Default::default).volume_name = Some(name.to_string());
        let annotations = claim.metadata.annotations.get_or_insert_with(Default::default);
        annotations.insert(ANN_BIND_COMPLETED.into(), "yes".into());
        annotations.insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        let access_modes = claim.spec.as_ref().and_then(|s| s.access_modes.clone());
        claim.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            capacity,
            access_modes,
            ..claim.status.unwrap_or_default()
        });
        claim.metadata.resource_version = self.next_version();
        self.objects.pvs.insert(name.to_string(), Arc::new(pv));
        self.objects.pvcs.insert(key.to_string(), Arc::new(claim));
    }
}

/// The volume a claim is bound to, if any.
pub fn claim_volume(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty())
}

/// A reference to the claim, as a volume's claimRef.
pub fn claim_ref(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..Default::default()
    }
}

fn not_found(object: &str) -> ClusterError {
    ClusterError::Conflict { object: object.to_string(), message: "not found".into() }
}

/// An update must name the stored version (or none, as a forced update does).
fn check_version(object: &str, given: Option<&str>, stored: Option<&str>) -> Result<(), ClusterError> {
    match given {
        Some(v) if Some(v) != stored => Err(ClusterError::Conflict {
            object: object.to_string(),
            message: "the object has been modified; please apply your changes to the latest version and try again"
                .into(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> VolumeStore {
        let mut s = VolumeStore::default();
        let pvc = |name: &str, extra: serde_json::Value| {
            let mut v = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("u-{name}")},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
            if let (Some(a), Some(b)) = (v.as_object_mut(), extra.as_object()) {
                for (k, val) in b {
                    a.insert(k.clone(), val.clone());
                }
            }
            (format!("default/{name}"), Arc::new(serde_json::from_value::<PersistentVolumeClaim>(v).unwrap()))
        };
        s.objects.pvcs.extend([
            pvc("static", json!({})),
            pvc("wffc", json!({"spec": {"storageClassName": "csi", "resources": {"requests": {"storage": "2Gi"}}}})),
        ]);
        s.objects.pvs.insert(
            "pv-1".into(),
            Arc::new(serde_json::from_value(json!({"metadata": {"name": "pv-1", "resourceVersion": "0"}})).unwrap()),
        );
        s.objects.storage_classes.insert(
            "csi".into(),
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "csi"}, "provisioner": "csi.example.com"})).unwrap(),
            ),
        );
        s.objects.csi_nodes.insert(
            "n1".into(),
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["zone"]}]}}))
                .unwrap(),
            ),
        );
        s.node_labels.insert("n1".into(), [("zone".to_string(), "a".to_string())].into());
        s
    }

    #[test]
    fn a_stale_update_is_a_conflict_and_a_fresh_one_gets_a_new_version() {
        let mut s = store();
        let mut pv = (*s.objects.pvs["pv-1"]).clone();
        pv.metadata.resource_version = Some("7".into());
        assert!(matches!(s.replace_pv(&pv), Err(ClusterError::Conflict { .. })));
        pv.metadata.resource_version = Some("0".into());
        let stored = s.replace_pv(&pv).unwrap();
        assert_eq!(stored.metadata.resource_version.as_deref(), Some("1"));
        let mut missing = pv.clone();
        missing.metadata.name = Some("nope".into());
        assert!(s.replace_pv(&missing).unwrap_err().to_string().contains("persistentvolume nope"));
    }

    #[test]
    fn a_claim_named_by_a_volume_is_bound_and_a_selected_node_provisions() {
        let mut s = store();
        let mut pv = (*s.objects.pvs["pv-1"]).clone();
        pv.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_ref(&s.objects.pvcs["default/static"]));
        s.replace_pv(&pv).unwrap();
        let mut claim = (*s.objects.pvcs["default/wffc"]).clone();
        claim.metadata.annotations = Some([(ANN_SELECTED_NODE.to_string(), "n1".to_string())].into());
        s.replace_pvc(&claim).unwrap();
        let bound = s.settle();
        assert_eq!(
            bound,
            [
                ClaimBound { claim: "default/static".into(), volume: "pv-1".into(), provisioned_for: None },
                ClaimBound {
                    claim: "default/wffc".into(),
                    volume: "pvc-u-wffc".into(),
                    provisioned_for: Some("n1".into())
                },
            ]
        );
        let c = &s.objects.pvcs["default/wffc"];
        assert_eq!(claim_volume(c), Some("pvc-u-wffc"));
        assert_eq!(c.metadata.annotations.as_ref().unwrap()[ANN_BIND_COMPLETED], "yes");
        let pv = &s.objects.pvs["pvc-u-wffc"];
        let term =
            &pv.spec.as_ref().unwrap().node_affinity.as_ref().unwrap().required.as_ref().unwrap().node_selector_terms
                [0];
        let req = &term.match_expressions.as_ref().unwrap()[0];
        assert_eq!((req.key.as_str(), req.values.as_deref()), ("zone", Some(&["a".to_string()][..])));
        assert!(s.settle().is_empty(), "nothing is left to do");
    }
}
