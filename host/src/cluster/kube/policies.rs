//! The tenant policy kinds on the API server (deploy/manifests/crds.yaml): typed just enough to watch them (their
//! spec stays JSON until the profile's TenantPolicies plugin admits it), and their status written back.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use serde::{Deserialize, Serialize};

use crate::framework::{PolicyObject, PolicyStatus};

/// The API group of both kinds.
pub const GROUP: &str = "scheduling.kube-wasm-scheduler.io";
/// Their served version.
pub const VERSION: &str = "v1alpha1";

/// A SchedulingPolicy as watched.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SchedulingPolicy {
    /// Its metadata.
    pub metadata: ObjectMeta,
    /// Its spec, undecoded.
    #[serde(default)]
    pub spec: serde_json::Value,
}

/// A ClusterSchedulingPolicy as watched.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ClusterSchedulingPolicy {
    /// Its metadata.
    pub metadata: ObjectMeta,
    /// Its spec, undecoded.
    #[serde(default)]
    pub spec: serde_json::Value,
}

macro_rules! policy_resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

policy_resource!(SchedulingPolicy, "SchedulingPolicy", "schedulingpolicies", NamespaceResourceScope);
policy_resource!(ClusterSchedulingPolicy, "ClusterSchedulingPolicy", "clusterschedulingpolicies", ClusterResourceScope);

/// The object as the framework lists it.
pub fn policy_object(meta: &ObjectMeta, spec: &serde_json::Value) -> PolicyObject {
    PolicyObject {
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        generation: meta.generation.unwrap_or(1),
        spec: spec.clone(),
    }
}

/// The status subresource's body for a state (a merge patch: `conditions` is replaced whole, one Ready condition).
pub fn status_patch(s: &PolicyStatus) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    serde_json::json!({
        "status": {
            "observedGeneration": s.observed_generation,
            "digest": s.digest.as_ref().map(|d| format!("sha256:{d}")),
            "points": s.points,
            "conditions": [{
                "type": "Ready",
                "status": if s.ready { "True" } else { "False" },
                "observedGeneration": s.observed_generation,
                "lastTransitionTime": now,
                "reason": s.reason,
                "message": s.message.chars().take(1024).collect::<String>(),
            }],
        }
    })
}

/// The Event that tells a policy's owner what became of it: Normal `PolicyLoaded`, or Warning `PolicyRefused` with
/// the reason (in the policy's namespace; a cluster policy's go to `default`, as for any cluster-scoped object).
pub fn status_event(s: &PolicyStatus, instance: &str) -> k8s_openapi::api::events::v1::Event {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let now = k8s_openapi::jiff::Timestamp::now();
    let namespace = s.namespace.clone().unwrap_or_else(|| "default".into());
    k8s_openapi::api::events::v1::Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", s.name, now.as_nanosecond() as u128 ^ u128::from(std::process::id()))),
            namespace: Some(namespace),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some("Loading".into()),
        reason: Some(if s.ready { "PolicyLoaded" } else { "PolicyRefused" }.into()),
        note: Some(format!("{} (profile {})", s.message, s.profile).chars().take(1024).collect()),
        type_: Some(if s.ready { "Normal" } else { "Warning" }.into()),
        regarding: Some(ObjectReference {
            api_version: Some(format!("{GROUP}/{VERSION}")),
            kind: Some(s.kind.into()),
            name: Some(s.name.clone()),
            namespace: s.namespace.clone(),
            ..Default::default()
        }),
        reporting_controller: Some(s.profile.clone()),
        reporting_instance: Some(format!("{}-{instance}", s.profile)),
        ..Default::default()
    }
}

/// Writes a policy's status (merge patch of the status subresource).
pub async fn write_status(client: Client, s: &PolicyStatus) -> Result<(), kube::Error> {
    let patch = Patch::Merge(status_patch(s));
    let params = PatchParams::default();
    match &s.namespace {
        Some(ns) => {
            Api::<SchedulingPolicy>::namespaced(client, ns).patch_status(&s.name, &params, &patch).await.map(drop)
        }
        None => Api::<ClusterSchedulingPolicy>::all(client).patch_status(&s.name, &params, &patch).await.map(drop),
    }
}

/// Whether the API server serves both kinds (the CRDs are installed): a list of at most one object of each.
pub async fn served(client: &Client) -> Result<(), String> {
    let lp = kube::api::ListParams::default().limit(1);
    let a = Api::<SchedulingPolicy>::all(client.clone()).list(&lp).await;
    let b = Api::<ClusterSchedulingPolicy>::all(client.clone()).list(&lp).await;
    for (r, plural) in [(a.map(drop), "schedulingpolicies"), (b.map(drop), "clusterschedulingpolicies")] {
        if let Err(e) = r {
            return Err(format!(
                "the TenantPolicies plugin needs {plural}.{GROUP}, which the API server does not serve ({e}): apply deploy/manifests/crds.yaml"
            ));
        }
    }
    Ok(())
}
