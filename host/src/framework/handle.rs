//! What a plugin may use besides its args (upstream's `framework.Handle`): the writes it may make to the cluster
//! (binding, evictions, nominations, events), the run's seed, and whether plugin files are watched. The framework
//! defines these; `cluster/` implements them for a real API server and for the in-memory simulator.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PodExtendedResourceClaimStatus};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;

use thiserror::Error;

use super::pod_view::PodView;
use super::snapshot::ClusterObjects;
use super::types::PodInfo;
use super::waiting_pods::WaitingPods;

/// A cluster call that failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ClusterError {
    /// The object changed or is gone (HTTP 409/404): the pod is not bound, and must not be retried blindly.
    #[error("conflict on {object}: {message}")]
    Conflict {
        /// The object, `kind ns/name`.
        object: String,
        /// What the server said.
        message: String,
    },
    /// Anything else (network, server error).
    #[error("cluster call on {object} failed: {message}")]
    Other {
        /// The object, `kind ns/name`.
        object: String,
        /// What went wrong.
        message: String,
    },
}

/// One scheduling event for a pod (`Scheduled`, `FailedScheduling`, `Preempted`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// The reason, upstream's spelling.
    pub reason: &'static str,
    /// The human message.
    pub message: String,
    /// The profile's schedulerName (the reporting controller).
    pub scheduler_name: String,
    /// For a `FailedScheduling`: the attempt was rejected (PodScheduled's reason `Unschedulable`) rather than
    /// failed with an error (`SchedulerError`), as upstream's `status.IsRejected()` decides.
    pub rejected: bool,
}

/// What the scheduler made of a tenant policy object (its `status`): written by the profile's `TenantPolicies`
/// plugin whenever it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyStatus {
    /// The kind, `SchedulingPolicy` or `ClusterSchedulingPolicy`.
    pub kind: &'static str,
    /// The namespace of a SchedulingPolicy.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The profile whose plugin wrote it.
    pub profile: String,
    /// The generation this status is about.
    pub observed_generation: i64,
    /// True when this generation serves.
    pub ready: bool,
    /// `Loaded`, or why not (`Refused`, `OverLimit`, `Invalid`, `FetchFailed`, `InvalidComponent`).
    pub reason: String,
    /// One line for people.
    pub message: String,
    /// The digest of the component serving now (possibly an older generation's, when this one was refused).
    pub digest: Option<String>,
    /// The points it serves now.
    pub points: Vec<String>,
}

impl PolicyStatus {
    /// `namespace/name`, or the name of a cluster policy.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// The writes a scheduler makes to a cluster.
pub trait ClusterClient: Send + Sync {
    /// Binds the pod to the node (`pods/binding`).
    fn bind(&self, pod: &PodInfo, node: &str) -> Result<(), ClusterError>;
    /// `bind` as a future that holds no thread while the cluster answers; `None` (the default): call `bind`.
    fn bind_async(&self, _pod: &PodInfo, _node: &str) -> Option<BoxFuture<'static, Result<(), ClusterError>>> {
        None
    }
    /// Evicts a preemption victim.
    fn delete_pod(&self, pod: &PodInfo, preemptor: &PodInfo) -> Result<(), ClusterError>;
    /// Evicts a preemption's victims, one result per victim in order. The default deletes them one after
    /// another; a client that talks to an API server sends them all at once, as upstream deletes victims in
    /// parallel: a preemption then costs one round trip, not one per victim.
    fn delete_pods(&self, pods: &[Arc<PodInfo>], preemptor: &PodInfo) -> Vec<Result<(), ClusterError>> {
        pods.iter().map(|p| self.delete_pod(p, preemptor)).collect()
    }
    /// `delete_pods` as a future that holds no thread while the cluster answers (asynchronous preemption);
    /// `None` (the default): the scheduler calls `delete_pods` and waits.
    fn delete_pods_async(
        &self,
        _pods: &[Arc<PodInfo>],
        _preemptor: &PodInfo,
    ) -> Option<BoxFuture<'static, Vec<Result<(), ClusterError>>>> {
        None
    }
    /// Sets or clears `status.nominatedNodeName`.
    fn set_nominated_node(&self, pod: &PodInfo, node: Option<&str>) -> Result<(), ClusterError>;
    /// Sets `status.nominatedNodeName` to the node a binding cycle is about to wait for or prepare
    /// (NominatedNodeNameForExpectation) and answers once the write is done, in order with the pod's other status
    /// writes: the binding that follows must not overtake it. The default writes through `set_nominated_node`.
    fn nominate_for_binding(&self, pod: &PodInfo, node: &str) -> BoxFuture<'static, Result<(), ClusterError>> {
        let written = self.set_nominated_node(pod, Some(node));
        Box::pin(async move { written })
    }
    /// Records an event on the pod and, for failures, the PodScheduled=False condition.
    fn record(&self, pod: &PodInfo, event: PodEvent);
    /// Replaces a PersistentVolume (an update that fails with a conflict when the object changed since its
    /// `resourceVersion`); answers the object as stored.
    fn update_pv(&self, pv: &PersistentVolume) -> Result<PersistentVolume, ClusterError> {
        Err(unsupported(format!("persistentvolume {}", pv.metadata.name.as_deref().unwrap_or(""))))
    }
    /// Replaces a PersistentVolumeClaim, as `update_pv`.
    fn update_pvc(&self, pvc: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ClusterError> {
        let (ns, name) = (pvc.metadata.namespace.as_deref(), pvc.metadata.name.as_deref());
        Err(unsupported(format!("persistentvolumeclaim {}/{}", ns.unwrap_or(""), name.unwrap_or(""))))
    }
    /// Reads a ResourceClaim from the API server (PreBind after a write conflict, as upstream's GET); `Ok(None)`
    /// when this cluster has no reader beyond its informers, which then serve.
    fn get_resource_claim(&self, _namespace: &str, _name: &str) -> Result<Option<ResourceClaim>, ClusterError> {
        Ok(None)
    }
    /// Replaces a ResourceClaim's metadata and spec (DynamicResources adds its finalizer so), as `update_pv`.
    fn update_resource_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        Err(unsupported(resource_claim_object(claim)))
    }
    /// Replaces a ResourceClaim's status (`resourceclaims/status`: allocation and `reservedFor`), as `update_pv`.
    fn update_resource_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        Err(unsupported(resource_claim_object(claim)))
    }
    /// Creates a ResourceClaim (DynamicResources creates a pod's claim for its DRA extended resources so, named
    /// by the claim's `generateName`); answers the object as stored.
    fn create_resource_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        Err(unsupported(resource_claim_object(claim)))
    }
    /// Deletes a ResourceClaim; one already gone is no error.
    fn delete_resource_claim(&self, claim: &ResourceClaim) -> Result<(), ClusterError> {
        Err(unsupported(resource_claim_object(claim)))
    }
    /// Sets the pod's `status.extendedResourceClaimStatus` (a strategic merge patch of the pod's status, as
    /// upstream's `PatchPodStatus`) and answers once it is written.
    fn set_extended_resource_claim_status(
        &self,
        pod: &PodInfo,
        _status: &PodExtendedResourceClaimStatus,
    ) -> Result<(), ClusterError> {
        Err(unsupported(format!("pod {}", pod.key())))
    }
    /// Writes a tenant policy's status (and, for a refusal, a Warning Event in its namespace). Best effort: the
    /// policy serves or not whatever the write does. The default keeps nothing.
    fn policy_status(&self, _status: &PolicyStatus) {}
    /// Sets a condition on a PodGroup's status (the PodGroup cycle's `PodGroupInitiallyScheduled`), as upstream's
    /// `updatePodGroupCondition`: not when the group already carries it, nor to take a True one back. Best effort,
    /// in the background. The default keeps nothing.
    fn pod_group_condition(&self, _group: &PodGroup, _condition: &PodGroupCondition) {}
}

/// A condition of a PodGroup's status, as the scheduler writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupCondition {
    /// `PodGroupInitiallyScheduled`.
    pub type_: &'static str,
    /// True or False.
    pub status: bool,
    /// `Scheduled`, `Unschedulable` or `SchedulerError`.
    pub reason: &'static str,
    /// The cycle's message (empty for a success).
    pub message: String,
}

impl PodGroupCondition {
    /// Upstream's `apimeta.SetStatusCondition` on `conditions` (the group's `status.conditions` as JSON) with the
    /// `observedGeneration` given: the new list, or `None` when nothing would change or when a True condition would
    /// be taken back (upstream keeps a group it once scheduled marked so). `now` is the transition time (RFC 3339).
    pub fn apply(
        &self,
        conditions: &[serde_json::Value],
        observed_generation: i64,
        now: &str,
    ) -> Option<Vec<serde_json::Value>> {
        let status = if self.status { "True" } else { "False" };
        let mut out = conditions.to_vec();
        let existing = out.iter_mut().find(|c| c.get("type").and_then(|t| t.as_str()) == Some(self.type_));
        match existing {
            Some(c) => {
                let old_status = c.get("status").and_then(|s| s.as_str()).unwrap_or("").to_string();
                if old_status == "True" && !self.status {
                    return None;
                }
                let same = old_status == status
                    && c.get("reason").and_then(|r| r.as_str()) == Some(self.reason)
                    && c.get("message").and_then(|m| m.as_str()).unwrap_or("") == self.message
                    && c.get("observedGeneration").and_then(|g| g.as_i64()).unwrap_or(0) == observed_generation;
                if same {
                    return None;
                }
                if old_status != status {
                    c["lastTransitionTime"] = now.into();
                }
                c["status"] = status.into();
                c["reason"] = self.reason.into();
                c["message"] = self.message.clone().into();
                c["observedGeneration"] = observed_generation.into();
            }
            None => out.push(serde_json::json!({
                "type": self.type_, "status": status, "reason": self.reason, "message": self.message,
                "observedGeneration": observed_generation, "lastTransitionTime": now,
            })),
        }
        Some(out)
    }
}

/// `resourceclaim ns/name`, for errors.
pub fn resource_claim_object(claim: &ResourceClaim) -> String {
    let (ns, name) = (claim.metadata.namespace.as_deref(), claim.metadata.name.as_deref());
    format!("resourceclaim {}/{}", ns.unwrap_or(""), name.unwrap_or(""))
}

/// The error of a write a cluster does not offer.
fn unsupported(object: String) -> ClusterError {
    ClusterError::Other { object, message: "this cluster does not take updates of this kind".into() }
}

/// The cluster objects other than pods and nodes as the informers last saw them (upstream's listers), for a
/// plugin that must see changes made after its cycle's snapshot: VolumeBinding waits in PreBind for the
/// PersistentVolume controller to finish a binding.
#[derive(Debug, Default)]
pub struct Listers {
    objects: RwLock<Arc<ClusterObjects>>,
}

impl Listers {
    /// The objects as they stand.
    pub fn objects(&self) -> Arc<ClusterObjects> {
        self.objects.read().expect("listers lock").clone()
    }

    /// Replaces the objects (the scheduler's event handlers call this).
    pub fn set(&self, objects: Arc<ClusterObjects>) {
        *self.objects.write().expect("listers lock") = objects;
    }
}

/// What a plugin may use besides its args: the cluster seam (binder, evictions), the run's seed, whether plugin
/// files are watched for replacement, the profile's waiting pods and the scheduler's pod view.
#[derive(Clone)]
pub struct PluginContext {
    /// The cluster writes (binding, evictions, nominations, events).
    pub cluster: Arc<dyn ClusterClient>,
    /// Seed for plugins' random sources (the simulator's `--seed`).
    pub seed: u64,
    /// When set, Wasm plugins poll their component file this often and swap in a changed one.
    pub reload_period: Option<std::time::Duration>,
    /// The pods of the plugin's profile waiting at Permit (each profile's framework sets its own).
    pub waiting: Arc<WaitingPods>,
    /// The pods the scheduler knows, for plugins that follow them (Wasm guests exporting `pods`).
    pub pods: Arc<PodView>,
    /// The latest cluster objects other than pods and nodes.
    pub listers: Arc<Listers>,
    /// The schedulerName of the plugin's profile (set by the framework that builds it).
    pub profile: String,
    /// The feature gates of the run (upstream hands each plugin's constructor its `feature.Features`).
    pub features: crate::config::Features,
    /// Where DynamicResources reports binding conditions (the live scheduler's `/metrics`).
    pub dra_metrics: Arc<dyn super::metrics::DraMetrics>,
    /// The preemptions under way, shared by every profile and the scheduler (DefaultPreemption's PreEnqueue).
    pub preempting: Arc<super::preempting::Preempting>,
}

impl PluginContext {
    /// A context on a cluster, seed 0, no file watching.
    pub fn new(cluster: Arc<dyn ClusterClient>) -> PluginContext {
        PluginContext {
            cluster,
            seed: 0,
            reload_period: None,
            waiting: Arc::default(),
            pods: Arc::default(),
            listers: Arc::default(),
            profile: String::new(),
            features: crate::config::Features::default(),
            dra_metrics: Arc::new(super::metrics::NoDraMetrics),
            preempting: Arc::default(),
        }
    }
}
