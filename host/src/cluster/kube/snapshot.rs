//! `kube-wasm-scheduler snapshot`: a live cluster written as the simulator's cluster file — every object the
//! scheduler reads (nodes, pods that have not finished, workloads, PodDisruptionBudgets, PriorityClasses, services,
//! namespaces, storage and DRA objects, tenant policies), one YAML document each, so that "what would this profile do to my
//! cluster's pending pods" is `snapshot` then `simulate`. Secrets and ConfigMaps are never read. A kind the API
//! server does not serve or the caller may not list is left out with a note, not a failure.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::policies::{ClusterSchedulingPolicy, SchedulingPolicy};
use serde::Serialize;
use thiserror::Error;

/// A snapshot that could not be taken.
#[derive(Debug, Error)]
pub enum SnapshotError {
    /// Listing a kind the scheduler cannot do without failed.
    #[error("listing {kind}: {source}")]
    List {
        /// The kind.
        kind: &'static str,
        /// What the API server or the connection said.
        #[source]
        source: kube::Error,
    },
    /// An object could not be encoded.
    #[error("encoding {kind}: {source}")]
    Encode {
        /// The kind.
        kind: &'static str,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
}

/// The snapshot: the cluster file's text, and one note per kind left out.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Multi-document YAML the simulator reads.
    pub yaml: String,
    /// Kinds left out and why.
    pub notes: Vec<String>,
    /// Objects written.
    pub objects: usize,
}

impl Snapshot {
    /// Lists every object of kind `K` and appends it; `required` kinds fail the snapshot when they cannot be
    /// listed, others are noted and left out.
    async fn add<K>(
        &mut self,
        api: Api<K>,
        kind: &'static str,
        required: bool,
        lp: &ListParams,
    ) -> Result<(), SnapshotError>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug,
        K::DynamicType: Default,
    {
        let list = match api.list(lp).await {
            Ok(l) => l,
            Err(source) if required => return Err(SnapshotError::List { kind, source }),
            Err(e) => {
                self.notes.push(format!("{kind}: left out ({})", short(&e)));
                return Ok(());
            }
        };
        for mut o in list.items {
            // Nothing reads them, and they are most of an object's size.
            o.meta_mut().managed_fields = None;
            let mut v = serde_json::to_value(&o).map_err(|source| SnapshotError::Encode { kind, source })?;
            // The list's items carry no type; the simulator needs it.
            if let Some(m) = v.as_object_mut() {
                m.insert("apiVersion".into(), K::api_version(&Default::default()).into());
                m.insert("kind".into(), K::kind(&Default::default()).into());
            }
            self.yaml.push_str("---\n");
            // kubectl reads YAML 1.1: a label or taint value `yes` must come out quoted.
            self.yaml.push_str(&crate::yaml::to_portable_yaml(&v));
            self.objects += 1;
        }
        Ok(())
    }
}

fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}", s.code, s.reason),
        e => e.to_string(),
    }
}

/// Takes the snapshot through `client`.
pub async fn take(client: Client) -> Result<Snapshot, SnapshotError> {
    let mut s = Snapshot::default();
    let all = ListParams::default();
    // As the scheduler's informers: finished pods are history, not load.
    let running = ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed");
    macro_rules! add {
        ($t:ty, $kind:literal, $required:expr) => {
            add!($t, $kind, $required, &all)
        };
        ($t:ty, $kind:literal, $required:expr, $lp:expr) => {
            s.add(Api::<$t>::all(client.clone()), $kind, $required, $lp).await?
        };
    }
    add!(Namespace, "Namespace", false);
    add!(PriorityClass, "PriorityClass", false);
    add!(Node, "Node", true);
    add!(StorageClass, "StorageClass", false);
    add!(CSINode, "CSINode", false);
    add!(CSIDriver, "CSIDriver", false);
    add!(CSIStorageCapacity, "CSIStorageCapacity", false);
    add!(PersistentVolume, "PersistentVolume", false);
    add!(PersistentVolumeClaim, "PersistentVolumeClaim", false);
    add!(DeviceClass, "DeviceClass", false);
    add!(ResourceSlice, "ResourceSlice", false);
    add!(DeviceTaintRule, "DeviceTaintRule", false);
    add!(ResourceClaim, "ResourceClaim", false);
    add!(Service, "Service", false);
    add!(PodDisruptionBudget, "PodDisruptionBudget", false);
    add!(Deployment, "Deployment", false);
    add!(ReplicaSet, "ReplicaSet", false);
    add!(StatefulSet, "StatefulSet", false);
    add!(DaemonSet, "DaemonSet", false);
    add!(Job, "Job", false);
    add!(ReplicationController, "ReplicationController", false);
    add!(SchedulingPolicy, "SchedulingPolicy", false);
    add!(ClusterSchedulingPolicy, "ClusterSchedulingPolicy", false);
    // The Workload API (GenericWorkload): served by v1.37 API servers with the gate and runtime-config only.
    add!(k8s_openapi::api::scheduling::v1beta1::PodGroup, "PodGroup", false);
    add!(Pod, "Pod", true, &running);
    Ok(s)
}
