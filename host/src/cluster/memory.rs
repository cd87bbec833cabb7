//! The in-memory cluster: records what the scheduler writes (bindings, evictions, nominations, events) so the
//! simulator, tests and benchmarks run the same code as the live scheduler with no API server. Like an API server
//! with an informer, it reports what changes to the connected event handler, at once: objects the simulator
//! adds, pods bound, pods deleted. Status patches (nominations, conditions) are recorded but not reported, as the
//! queue takes no action on a pod's status-only update.
//!
//! ResourceClaims the scheduler creates (a pod's claim for its DRA extended resources) are stored and reported
//! as a user's would be; a pod's `extendedResourceClaimStatus` is recorded like its other status patches.
//!
//! Volume updates are completed at once, as the PersistentVolume controller and a CSI external-provisioner would
//! complete them a moment later (see `volumes.rs`). Likewise a DRA driver: a device allocated with binding
//! conditions reports them met as soon as the allocation is written, so PreBind does not wait out its timeout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;

use super::{volumes, ClusterClient, ClusterError, EventHandler, PodEvent};
use crate::framework::{ClusterObjects, EventResource, PodInfo, PolicyStatus};

/// A write the scheduler made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// `pod` bound to `node`.
    Bind {
        /// `ns/name`.
        pod: String,
        /// Node name.
        node: String,
    },
    /// `pod` evicted to make room for `preemptor`.
    Delete {
        /// `ns/name` of the victim.
        pod: String,
        /// `ns/name` of the preemptor.
        preemptor: String,
    },
    /// `pod`'s nominated node set (or cleared with `None`).
    Nominate {
        /// `ns/name`.
        pod: String,
        /// Node name.
        node: Option<String>,
    },
    /// An event on `pod`.
    Event {
        /// `ns/name`.
        pod: String,
        /// The event.
        event: PodEvent,
    },
    /// A PersistentVolumeClaim bound to a PersistentVolume (by the simulated PersistentVolume controller).
    BindClaim {
        /// `ns/name` of the claim.
        claim: String,
        /// The volume's name.
        volume: String,
        /// The node the volume was provisioned for, when it was provisioned rather than found.
        provisioned_for: Option<String>,
    },
    /// A condition written on a PodGroup's status (the PodGroup cycle's `PodGroupInitiallyScheduled`).
    PodGroupCondition {
        /// `ns/name` of the PodGroup.
        group: String,
        /// The condition.
        condition: crate::framework::PodGroupCondition,
    },
    /// A ResourceClaim's devices allocated (its status written with an allocation it did not have).
    AllocateClaim {
        /// `ns/name` of the claim.
        claim: String,
        /// The devices, `driver/pool/device`, in result order.
        devices: Vec<String>,
    },
    /// A ResourceClaim created (DynamicResources' claim for a pod's DRA extended resources).
    CreateClaim {
        /// `ns/name` of the claim.
        claim: String,
    },
    /// A ResourceClaim deleted.
    DeleteClaim {
        /// `ns/name` of the claim.
        claim: String,
    },
    /// A pod's `status.extendedResourceClaimStatus` set.
    ExtendedResourceClaimStatus {
        /// `ns/name` of the pod.
        pod: String,
        /// The claim's name.
        claim: String,
        /// `container/resource → request`, in the status's order.
        mappings: Vec<String>,
    },
}

/// An in-memory cluster. Binding a pod twice is a conflict, as on a real API server.
#[derive(Debug, Default)]
pub struct MemoryCluster {
    writes: Mutex<Vec<Write>>,
    bound: Mutex<HashMap<String, String>>,
    /// Pods whose binding fails with a conflict (tests of the unwind path).
    pub fail_bind: Mutex<Vec<String>>,
    changes: AtomicUsize,
    handler: RwLock<Option<Weak<dyn EventHandler>>>,
    /// The objects other than pods and nodes, as stored (volume updates change them).
    volumes: Mutex<volumes::VolumeStore>,
    /// Each tenant policy's last status, by profile and key.
    policy_statuses: Mutex<std::collections::BTreeMap<(String, String), PolicyStatus>>,
}

impl MemoryCluster {
    /// Each tenant policy's last status, in profile and key order.
    pub fn policy_statuses(&self) -> Vec<PolicyStatus> {
        self.policy_statuses.lock().expect("policy status lock").values().cloned().collect()
    }

    /// Reports every later change to `handler` (held weakly: the scheduler owns this cluster, not the reverse).
    pub fn connect(&self, handler: Weak<dyn EventHandler>) {
        *self.handler.write().expect("handler lock") = Some(handler);
    }

    fn notify(&self, f: impl FnOnce(&dyn EventHandler)) {
        let h = self.handler.read().expect("handler lock").as_ref().and_then(Weak::upgrade);
        if let Some(h) = h {
            f(&*h);
        }
    }

    /// Adds or changes a node, as a user would through the API.
    pub fn apply_node(&self, node: Node) {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let name = node.metadata.name.clone().unwrap_or_default();
        self.volumes.lock().expect("volumes lock").node_labels.insert(name, labels);
        self.notify(|h| h.node_applied(node));
    }

    /// Adds or changes a pod (bound or pending), as a user would through the API.
    pub fn apply_pod(&self, pod: Arc<PodInfo>) {
        if let Some(n) = pod.node_name() {
            self.bound.lock().expect("bound lock").insert(pod.uid.clone(), n.to_string());
        }
        self.notify(|h| h.pod_applied(pod));
    }

    /// Adds or changes a PodGroup, as a user (or the Workload controller) would through the API.
    pub fn apply_pod_group(&self, group: PodGroup) {
        let key = format!(
            "{}/{}",
            group.metadata.namespace.as_deref().unwrap_or("default"),
            group.metadata.name.as_deref().unwrap_or_default()
        );
        let objects = {
            let mut store = self.volumes.lock().expect("volumes lock");
            store.objects.pod_groups.insert(key, Arc::new(group));
            store.objects.clone()
        };
        self.notify(|h| h.objects_changed(objects, EventResource::PodGroup));
    }

    /// Deletes a PodGroup (`namespace/name`).
    pub fn delete_pod_group(&self, key: &str) {
        let objects = {
            let mut store = self.volumes.lock().expect("volumes lock");
            store.objects.pod_groups.remove(key);
            store.objects.clone()
        };
        self.notify(|h| h.objects_changed(objects, EventResource::PodGroup));
    }

    /// Replaces the objects other than pods and nodes.
    pub fn set_objects(&self, objects: ClusterObjects) {
        self.volumes.lock().expect("volumes lock").objects = objects.clone();
        self.notify(|h| h.objects_changed(objects, EventResource::Other));
    }

    /// Applies a volume update to the stored objects, lets the simulated controllers finish what it starts, and
    /// reports the result.
    fn update_volumes<T>(
        &self,
        update: impl FnOnce(&mut volumes::VolumeStore) -> Result<T, ClusterError>,
    ) -> Result<T, ClusterError> {
        let (result, objects, bound) = {
            let mut store = self.volumes.lock().expect("volumes lock");
            let result = update(&mut store)?;
            let bound = store.settle();
            (result, store.objects.clone(), bound)
        };
        for b in bound {
            self.push(Write::BindClaim { claim: b.claim, volume: b.volume, provisioned_for: b.provisioned_for });
        }
        self.notify(|h| h.objects_changed(objects, EventResource::Volume));
        Ok(result)
    }

    /// Stores a ResourceClaim update and reports it; nothing completes a claim's allocation later (the scheduler
    /// writes it whole), so no controller runs.
    fn update_claims<T>(
        &self,
        update: impl FnOnce(&mut volumes::VolumeStore) -> Result<T, ClusterError>,
    ) -> Result<T, ClusterError> {
        let (result, objects) = {
            let mut store = self.volumes.lock().expect("volumes lock");
            (update(&mut store)?, store.objects.clone())
        };
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.notify(|h| h.objects_changed(objects, EventResource::ResourceClaim));
        Ok(result)
    }

    /// Everything written so far, in order.
    pub fn writes(&self) -> Vec<Write> {
        self.writes.lock().expect("writes lock").clone()
    }

    /// Takes the writes recorded so far.
    pub fn drain(&self) -> Vec<Write> {
        std::mem::take(&mut *self.writes.lock().expect("writes lock"))
    }

    /// How many writes changed the cluster (events, PodGroup conditions and nominations excluded): the simulator's
    /// measure of progress. A nomination is not progress: a gang that cannot fit whole nominates its members (set
    /// before Permit, cleared when the wait runs out) on every retry, and would keep the run going forever.
    pub fn changes(&self) -> usize {
        self.changes.load(Ordering::SeqCst)
    }

    fn push(&self, w: Write) {
        if !matches!(w, Write::Event { .. } | Write::PodGroupCondition { .. } | Write::Nominate { .. }) {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
        self.writes.lock().expect("writes lock").push(w);
    }
}

impl ClusterClient for MemoryCluster {
    fn pod_group_condition(&self, group: &PodGroup, condition: &crate::framework::PodGroupCondition) {
        let (ns, name) = (group.metadata.namespace.as_deref(), group.metadata.name.as_deref());
        let group = format!("{}/{}", ns.unwrap_or("default"), name.unwrap_or_default());
        self.push(Write::PodGroupCondition { group, condition: condition.clone() });
    }

    fn policy_status(&self, status: &PolicyStatus) {
        let key = (status.profile.clone(), status.key());
        self.policy_statuses.lock().expect("policy status lock").insert(key, status.clone());
    }

    fn bind(&self, pod: &PodInfo, node: &str) -> Result<(), ClusterError> {
        let key = pod.key();
        if self.fail_bind.lock().expect("lock").contains(&key) {
            return Err(ClusterError::Conflict { object: format!("pod {key}"), message: "injected conflict".into() });
        }
        let mut bound = self.bound.lock().expect("bound lock");
        if let Some(n) = bound.get(&pod.uid) {
            return Err(ClusterError::Conflict {
                object: format!("pod {key}"),
                message: format!("already bound to {n}"),
            });
        }
        bound.insert(pod.uid.clone(), node.to_string());
        drop(bound);
        self.push(Write::Bind { pod: key, node: node.to_string() });
        // The binder hands over the assumed copy, which already names the node.
        let bound = if pod.node_name() == Some(node) { pod.clone() } else { pod.with_node_name(node) };
        self.notify(|h| h.pod_applied(Arc::new(bound)));
        Ok(())
    }

    fn delete_pod(&self, pod: &PodInfo, preemptor: &PodInfo) -> Result<(), ClusterError> {
        self.bound.lock().expect("bound lock").remove(&pod.uid);
        self.push(Write::Delete { pod: pod.key(), preemptor: preemptor.key() });
        self.notify(|h| h.pod_deleted(&pod.uid));
        Ok(())
    }

    fn set_nominated_node(&self, pod: &PodInfo, node: Option<&str>) -> Result<(), ClusterError> {
        self.push(Write::Nominate { pod: pod.key(), node: node.map(str::to_string) });
        Ok(())
    }

    fn record(&self, pod: &PodInfo, event: PodEvent) {
        self.push(Write::Event { pod: pod.key(), event });
    }

    fn update_pv(&self, pv: &PersistentVolume) -> Result<PersistentVolume, ClusterError> {
        self.update_volumes(|s| s.replace_pv(pv))
    }

    fn update_pvc(&self, pvc: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ClusterError> {
        self.update_volumes(|s| s.replace_pvc(pvc))
    }

    fn update_resource_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        // (A claim's spec and metadata; its status goes through `update_resource_claim_status`.)
        self.update_claims(|s| s.replace_resource_claim(claim, false))
    }

    fn create_resource_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        let created = self.update_claims(|s| s.create_resource_claim(claim))?;
        let key = format!(
            "{}/{}",
            created.metadata.namespace.as_deref().unwrap_or(""),
            created.metadata.name.as_deref().unwrap_or("")
        );
        self.push(Write::CreateClaim { claim: key });
        Ok(created)
    }

    fn delete_resource_claim(&self, claim: &ResourceClaim) -> Result<(), ClusterError> {
        self.update_claims(|s| {
            s.delete_resource_claim(claim);
            Ok(())
        })?;
        let key = format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or("default"),
            claim.metadata.name.as_deref().unwrap_or("")
        );
        self.push(Write::DeleteClaim { claim: key });
        Ok(())
    }

    fn set_extended_resource_claim_status(
        &self,
        pod: &PodInfo,
        status: &k8s_openapi::api::core::v1::PodExtendedResourceClaimStatus,
    ) -> Result<(), ClusterError> {
        let mappings = status
            .request_mappings
            .iter()
            .map(|m| format!("{}/{} → {}", m.container_name, m.resource_name, m.request_name))
            .collect();
        self.push(Write::ExtendedResourceClaimStatus {
            pod: pod.key(),
            claim: status.resource_claim_name.clone(),
            mappings,
        });
        Ok(())
    }

    fn update_resource_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        let key = format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or("default"),
            claim.metadata.name.as_deref().unwrap_or("")
        );
        let allocated = |c: &ResourceClaim| c.status.as_ref().is_some_and(|s| s.allocation.is_some());
        let was_allocated = {
            let store = self.volumes.lock().expect("volumes lock");
            store.objects.resource_claims.get(&key).is_some_and(|c| allocated(c))
        };
        let claim = &attach_devices(claim);
        let written = self.update_claims(|s| s.replace_resource_claim(claim, true))?;
        if !was_allocated && allocated(&written) {
            let results = written.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref());
            let devices = results
                .and_then(|d| d.results.as_deref())
                .unwrap_or(&[])
                .iter()
                .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
                .collect();
            self.push(Write::AllocateClaim { claim: key, devices });
        }
        Ok(written)
    }
}

/// The simulated DRA driver: every allocated device with binding conditions that the claim's status does not
/// report yet gets them, true (its binding failure conditions are never set).
fn attach_devices(claim: &ResourceClaim) -> ResourceClaim {
    use k8s_openapi::api::resource::v1::AllocatedDeviceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let mut claim = claim.clone();
    let Some(status) = claim.status.as_mut() else { return claim };
    let results = status.allocation.as_ref().and_then(|a| a.devices.as_ref()).and_then(|d| d.results.clone());
    for r in results.unwrap_or_default() {
        let conditions = r.binding_conditions.unwrap_or_default();
        if conditions.is_empty() {
            continue;
        }
        let devices = status.devices.get_or_insert_with(Vec::new);
        let known = devices
            .iter()
            .any(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device && d.share_id == r.share_id);
        if known {
            continue;
        }
        devices.push(AllocatedDeviceStatus {
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
            share_id: r.share_id.clone(),
            conditions: Some(
                conditions
                    .into_iter()
                    .map(|type_| Condition {
                        type_,
                        status: "True".into(),
                        reason: "SimulatedDriver".into(),
                        message: String::new(),
                        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
                        observed_generation: None,
                    })
                    .collect(),
            ),
            ..Default::default()
        });
    }
    claim
}
