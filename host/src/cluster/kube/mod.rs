//! The cluster seam on a real API server (kube-rs): binding through `pods/binding`, preemption evictions,
//! `status.nominatedNodeName`, events.k8s.io events reported by the profile's schedulerName, and the PodScheduled
//! condition. A binding cycle awaits the Binding request (`bind_async`); the other calls come from scheduler
//! threads and block on the tokio runtime that owns the client, except events and status patches, which are
//! written in the background (`events`, `status`). The informers (`informers`) report the
//! cluster's changes to the scheduler's event handlers.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, PodExtendedResourceClaimStatus,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::Client;

use super::{ClusterClient, ClusterError, PodEvent};
use crate::framework::types::PodInfo;

pub mod client;
pub mod events;
pub mod informers;
pub mod pod_groups;
pub mod policies;
pub mod snapshot;
mod status;

use status::StatusPatcher;

use events::EventRecorder;

/// The API server as a cluster.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
    runtime: tokio::runtime::Handle,
    /// `reportingInstance` of events: the scheduler's identity (host name).
    instance: String,
    /// Status patches, sent off the caller's thread.
    status: StatusPatcher,
    /// Events, written in the background.
    events: EventRecorder,
}

impl KubeCluster {
    /// A cluster on a client; events are written with `events` (a client with its own rate limit, so a burst of
    /// events does not hold up bindings); `runtime` runs the requests, the status patches and the event recorder.
    pub fn new(client: Client, events: Client, runtime: tokio::runtime::Handle, instance: String) -> KubeCluster {
        let status = StatusPatcher::start(client.clone(), &runtime);
        let events = EventRecorder::start(events, &runtime);
        KubeCluster { client, runtime, instance, status, events }
    }

    /// The recorder that writes this cluster's events (for `flush` at shutdown).
    pub fn events(&self) -> &EventRecorder {
        &self.events
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }
}

fn classify(object: String, e: kube::Error) -> ClusterError {
    match &e {
        kube::Error::Api(s) if s.code == 409 || s.code == 404 || s.code == 422 => {
            ClusterError::Conflict { object, message: s.message.clone() }
        }
        _ => ClusterError::Other { object, message: e.to_string() },
    }
}

/// The API server refuses an Event whose note is over 1,024 bytes (bytes, not characters); a longer message is cut
/// at a character boundary and ends in " ...", as client-go's recorder does.
fn truncate_note(message: &str) -> String {
    const MAX_NOTE: usize = 1024;
    const MORE: &str = " ...";
    if message.len() <= MAX_NOTE {
        return message.to_string();
    }
    let mut end = MAX_NOTE - MORE.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MORE}", &message[..end])
}

fn pod_ref(pod: &PodInfo) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: pod.pod.metadata.uid.clone(),
        resource_version: pod.pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// The Warning Event about a Wasm plugin version that was refused while the running one keeps serving. It regards
/// the scheduler's own Lease (`leaderElection.resourceNamespace/resourceName`), the object client-go's leader
/// election records the scheduler's own events on: `kubectl get events --field-selector involvedObject.kind=Lease`
/// shows it whether or not leader election is on. The plugin, where the version came from and why it was refused
/// come as the Wasm host's refusal renders them, so the cluster seam needs nothing of the Wasm host.
pub fn refused_version_event(
    lease_namespace: &str,
    lease_name: &str,
    instance: &str,
    plugin: &str,
    source: &dyn std::fmt::Display,
    error: &dyn std::fmt::Display,
) -> Event {
    let now = k8s_openapi::jiff::Timestamp::now();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{lease_name}.{:x}", now.as_nanosecond() as u128 ^ u128::from(std::process::id()))),
            namespace: Some(lease_namespace.to_string()),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some("Reloading".into()),
        reason: Some("WasmPluginVersionRefused".into()),
        note: Some(truncate_note(&format!(
            "wasm plugin {:?}: a new version from {} was refused, the running one keeps serving: {}",
            plugin, source, error
        ))),
        type_: Some("Warning".into()),
        regarding: Some(ObjectReference {
            api_version: Some("coordination.k8s.io/v1".into()),
            kind: Some("Lease".into()),
            name: Some(lease_name.to_string()),
            namespace: Some(lease_namespace.to_string()),
            ..Default::default()
        }),
        reporting_controller: Some("kube-wasm-scheduler".into()),
        reporting_instance: Some(instance.to_string()),
        ..Default::default()
    }
}

impl KubeCluster {
    /// The `pods/binding` request for `pod` on `node`.
    fn binding(&self, pod: &PodInfo, node: &str) -> impl Future<Output = Result<(), ClusterError>> + Send + 'static {
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(pod.name.clone()),
                namespace: Some(pod.namespace.clone()),
                uid: pod.pod.metadata.uid.clone(),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            },
        };
        let (api, name, key) = (self.pods(&pod.namespace), pod.name.clone(), pod.key());
        async move {
            // The answer (the Status the API server returns) is not read: only whether the request succeeded.
            api.create_subresource::<Binding, serde::de::IgnoredAny>("binding", &name, &PostParams::default(), &binding)
                .await
                .map(|_| ())
                .map_err(|e| classify(format!("pod {key}"), e))
        }
    }
}

impl KubeCluster {
    /// Deletes a preemption victim, on the condition that it is still the pod (uid) the preemption chose.
    fn deletion(&self, pod: &PodInfo) -> impl Future<Output = Result<(), ClusterError>> + Send + 'static {
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: pod.pod.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        let (api, name, key) = (self.pods(&pod.namespace), pod.name.clone(), pod.key());
        async move { api.delete(&name, &dp).await.map(|_| ()).map_err(|e| classify(format!("pod {key}"), e)) }
    }
}

impl ClusterClient for KubeCluster {
    fn bind(&self, pod: &PodInfo, node: &str) -> Result<(), ClusterError> {
        self.runtime.block_on(self.binding(pod, node))
    }

    fn bind_async(&self, pod: &PodInfo, node: &str) -> Option<BoxFuture<'static, Result<(), ClusterError>>> {
        Some(Box::pin(self.binding(pod, node)))
    }

    fn delete_pod(&self, pod: &PodInfo, _preemptor: &PodInfo) -> Result<(), ClusterError> {
        self.runtime.block_on(self.deletion(pod))
    }

    fn delete_pods(&self, pods: &[Arc<PodInfo>], _preemptor: &PodInfo) -> Vec<Result<(), ClusterError>> {
        self.runtime.block_on(futures::future::join_all(pods.iter().map(|p| self.deletion(p))))
    }

    fn delete_pods_async(
        &self,
        pods: &[Arc<PodInfo>],
        _preemptor: &PodInfo,
    ) -> Option<BoxFuture<'static, Vec<Result<(), ClusterError>>>> {
        Some(Box::pin(futures::future::join_all(pods.iter().map(|p| self.deletion(p)).collect::<Vec<_>>())))
    }

    /// Queued, not sent: the scheduling loop does not wait for it (a failure is logged).
    fn set_nominated_node(&self, pod: &PodInfo, node: Option<&str>) -> Result<(), ClusterError> {
        let patch = serde_json::json!({"status": {"nominatedNodeName": node}});
        // Not waited for: the answer is dropped.
        drop(self.status.patch(&pod.namespace, &pod.name, &pod.uid, false, patch, "setting nominatedNodeName"));
        Ok(())
    }

    /// Queued behind the pod's earlier status patches, then awaited.
    fn nominate_for_binding(&self, pod: &PodInfo, node: &str) -> BoxFuture<'static, Result<(), ClusterError>> {
        let patch = serde_json::json!({"status": {"nominatedNodeName": node}});
        let done = self.status.patch(&pod.namespace, &pod.name, &pod.uid, false, patch, "setting nominatedNodeName");
        let object = format!("pod {}", pod.key());
        Box::pin(async move {
            match done.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(message)) => Err(ClusterError::Other { object, message }),
                Err(_) => Err(ClusterError::Other { object, message: "the status patcher stopped".into() }),
            }
        })
    }

    fn record(&self, pod: &PodInfo, event: PodEvent) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let failed = event.reason == "FailedScheduling";
        let ev = Event {
            metadata: ObjectMeta {
                // Upstream's naming: `<pod>.<unique hex>` (a generateName must end alphanumeric, so name it here).
                name: Some(format!("{}.{:x}", pod.name, now.as_nanosecond() as u128 ^ u128::from(std::process::id()))),
                namespace: Some(pod.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(
                if event.reason == "Preempted" {
                    "Preempting"
                } else if failed {
                    "Scheduling"
                } else {
                    "Binding"
                }
                .into(),
            ),
            reason: Some(event.reason.into()),
            note: Some(truncate_note(&event.message)),
            type_: Some(event.type_.into()),
            regarding: Some(pod_ref(pod)),
            reporting_controller: Some(event.scheduler_name.clone()),
            reporting_instance: Some(format!("{}-{}", event.scheduler_name, self.instance)),
            ..Default::default()
        };
        // Queued, not written here: this runs on the scheduling thread (failures) and binding threads. A full
        // queue drops the event (the recorder logs and counts it).
        self.events.record(ev);
        if failed {
            let reason = if event.rejected { "Unschedulable" } else { "SchedulerError" };
            // As upstream's updatePod: nothing is sent when the pod already carries this condition (so its
            // resourceVersion, and with it the FailedScheduling event's series, stays put).
            if pod_scheduled_condition_is(pod, reason, &event.message) {
                return;
            }
            let mut condition = serde_json::json!({
                "type": "PodScheduled", "status": "False", "reason": reason, "message": event.message,
                "lastTransitionTime": now.to_string(),
            });
            // PodObservedGenerationTracking (GA in v1.35): the condition names the pod generation it was written
            // for, as upstream's CalculatePodConditionObservedGeneration does.
            if let Some(g) = pod.pod.metadata.generation.filter(|g| *g != 0) {
                condition["observedGeneration"] = g.into();
            }
            let patch = serde_json::json!({"status": {"conditions": [condition]}});
            drop(self.status.patch(&pod.namespace, &pod.name, &pod.uid, true, patch, "setting PodScheduled=False"));
        }
    }

    fn policy_status(&self, status: &crate::framework::PolicyStatus) {
        self.events.record(policies::status_event(status, &self.instance));
        let (client, status) = (self.client.clone(), status.clone());
        // Best effort, off the reconciling thread: the policy serves (or not) whatever the write does.
        self.runtime.spawn(async move {
            if let Err(e) = policies::write_status(client, &status).await {
                tracing::warn!(policy = %status.key(), kind = status.kind, error = %e, "writing the policy's status");
            }
        });
    }

    fn pod_group_condition(
        &self,
        group: &k8s_openapi::api::scheduling::v1beta1::PodGroup,
        c: &crate::framework::PodGroupCondition,
    ) {
        let (client, group, c) = (self.client.clone(), group.clone(), c.clone());
        // Best effort, off the scheduling thread, as upstream's (it logs a failure and goes on).
        self.runtime.spawn(async move {
            if let Err(e) = pod_groups::write_condition(client, &group, &c).await {
                let name = group.metadata.name.as_deref().unwrap_or_default();
                tracing::warn!(pod_group = %name, error = %e, "failed to update PodGroup status");
            }
        });
    }

    fn update_pv(&self, pv: &PersistentVolume) -> Result<PersistentVolume, ClusterError> {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        self.runtime
            .block_on(api.replace(&name, &PostParams::default(), pv))
            .map_err(|e| classify(format!("persistentvolume {name}"), e))
    }

    fn update_pvc(&self, pvc: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ClusterError> {
        let (ns, name) =
            (pvc.metadata.namespace.clone().unwrap_or_default(), pvc.metadata.name.clone().unwrap_or_default());
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        self.runtime
            .block_on(api.replace(&name, &PostParams::default(), pvc))
            .map_err(|e| classify(format!("persistentvolumeclaim {ns}/{name}"), e))
    }

    fn get_resource_claim(&self, namespace: &str, name: &str) -> Result<Option<ResourceClaim>, ClusterError> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
        let got = self.runtime.block_on(api.get_opt(name));
        let object = format!("resourceclaim {namespace}/{name}");
        match got.map_err(|e| classify(object.clone(), e))? {
            Some(c) => Ok(Some(c)),
            None => Err(ClusterError::Other { object, message: "not found".into() }),
        }
    }

    fn update_resource_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        let (ns, name) =
            (claim.metadata.namespace.clone().unwrap_or_default(), claim.metadata.name.clone().unwrap_or_default());
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        self.runtime
            .block_on(api.replace(&name, &PostParams::default(), claim))
            .map_err(|e| classify(format!("resourceclaim {ns}/{name}"), e))
    }

    fn update_resource_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        let (ns, name) =
            (claim.metadata.namespace.clone().unwrap_or_default(), claim.metadata.name.clone().unwrap_or_default());
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        self.runtime
            .block_on(api.replace_status(&name, &PostParams::default(), claim))
            .map_err(|e| classify(format!("resourceclaim {ns}/{name}"), e))
    }

    fn create_resource_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, ClusterError> {
        let ns = claim.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        let name = claim.metadata.name.clone().or_else(|| claim.metadata.generate_name.clone()).unwrap_or_default();
        self.runtime
            .block_on(api.create(&PostParams::default(), claim))
            .map_err(|e| classify(format!("resourceclaim {ns}/{name}"), e))
    }

    fn delete_resource_claim(&self, claim: &ResourceClaim) -> Result<(), ClusterError> {
        let (ns, name) =
            (claim.metadata.namespace.clone().unwrap_or_default(), claim.metadata.name.clone().unwrap_or_default());
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        match self.runtime.block_on(api.delete(&name, &DeleteParams::default())) {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(classify(format!("resourceclaim {ns}/{name}"), e)),
        }
    }

    /// Queued behind the pod's earlier status patches (a strategic merge patch, as upstream's `PatchPodStatus`),
    /// then waited for.
    fn set_extended_resource_claim_status(
        &self,
        pod: &PodInfo,
        status: &PodExtendedResourceClaimStatus,
    ) -> Result<(), ClusterError> {
        let patch = serde_json::json!({"status": {"extendedResourceClaimStatus": status}});
        let what = "setting extendedResourceClaimStatus";
        let done = self.status.patch(&pod.namespace, &pod.name, &pod.uid, true, patch, what);
        let object = format!("pod {}", pod.key());
        match self.runtime.block_on(done) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(ClusterError::Other { object, message }),
            Err(_) => Err(ClusterError::Other { object, message: "the status patcher stopped".into() }),
        }
    }
}

/// Whether the pod's PodScheduled condition is already False with this reason and message.
fn pod_scheduled_condition_is(pod: &PodInfo, reason: &str, message: &str) -> bool {
    let conditions = pod.pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_plugin_version_is_a_warning_on_the_scheduler_s_lease() {
        let (source, error) = ("oci://127.0.0.1:5000/p:v2", "not a WebAssembly component: bad magic");
        let e = refused_version_event("kube-system", "kube-wasm-scheduler", "host_1", "PriorityLabel", &source, &error);
        assert_eq!((e.type_.as_deref(), e.reason.as_deref()), (Some("Warning"), Some("WasmPluginVersionRefused")));
        let r = e.regarding.unwrap();
        assert_eq!((r.kind.as_deref(), r.name.as_deref()), (Some("Lease"), Some("kube-wasm-scheduler")));
        assert_eq!(e.metadata.namespace.as_deref(), Some("kube-system"));
        assert!(e.metadata.name.unwrap().starts_with("kube-wasm-scheduler."));
        assert_eq!(
            e.note.as_deref(),
            Some("wasm plugin \"PriorityLabel\": a new version from oci://127.0.0.1:5000/p:v2 was refused, the running one keeps serving: not a WebAssembly component: bad magic")
        );
    }

    #[test]
    fn event_notes_are_cut_at_1024_bytes() {
        assert_eq!(truncate_note("short"), "short");
        let exact = "x".repeat(1024);
        assert_eq!(truncate_note(&exact), exact);
        // 1,024 characters of two bytes each: 2,048 bytes, which the API server refuses.
        let wide = truncate_note(&"é".repeat(1024));
        assert!(wide.len() <= 1024 && wide.ends_with(" ..."), "{}", wide.len());
        assert!(truncate_note(&"y".repeat(5000)).len() == 1024);
    }
}
