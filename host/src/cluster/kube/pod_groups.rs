//! PodGroups (`scheduling.k8s.io/v1beta1`, the Workload API behind the GenericWorkload gate): whether the API
//! server serves them, and the condition the PodGroup cycle writes on a group's status.

use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::Client;

use crate::framework::PodGroupCondition;

/// Whether the API server serves PodGroups: a list of at most one.
pub async fn served(client: &Client) -> Result<(), String> {
    match Api::<PodGroup>::all(client.clone()).list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "--feature-gates=GenericWorkload=true needs podgroups.scheduling.k8s.io/v1beta1, which the API server \
             does not serve ({e}): start kube-apiserver with --feature-gates=GenericWorkload=true \
             --runtime-config=scheduling.k8s.io/v1beta1=true"
        )),
    }
}

/// Sets `condition` on the group's status, as it stands in the group the informer last saw (upstream patches from
/// its cached object too). Nothing is written when nothing would change.
pub async fn write_condition(
    client: Client,
    group: &PodGroup,
    condition: &PodGroupCondition,
) -> Result<(), kube::Error> {
    let (Some(ns), Some(name)) = (group.metadata.namespace.as_deref(), group.metadata.name.as_deref()) else {
        return Ok(());
    };
    let current: Vec<serde_json::Value> = group
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| cs.iter().filter_map(|c| serde_json::to_value(c).ok()).collect())
        .unwrap_or_default();
    // metav1.Time: whole seconds.
    let now =
        k8s_openapi::jiff::Timestamp::from_second(k8s_openapi::jiff::Timestamp::now().as_second()).unwrap_or_default();
    let Some(conditions) = condition.apply(&current, group.metadata.generation.unwrap_or(0), &now.to_string()) else {
        return Ok(());
    };
    let patch = serde_json::json!({"status": {"conditions": conditions}});
    Api::<PodGroup>::namespaced(client, ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}
