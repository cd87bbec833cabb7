//! Upstream's default profile (v1.37 `getDefaultPlugins` with its default feature gates, and GangScheduling with
//! `--feature-gates=GenericWorkload=true`), narrowed to the plugins this scheduler implements.

use super::types::{PluginRef, PluginSet, Plugins};
use super::Features;

/// Upstream default plugins that are not implemented here. They may be named in `disabled` (so configurations
/// written for kube-scheduler keep working) but not enabled.
/// The v1.37 placement plugins of the PodGroup cycle (TopologyAwareWorkloadScheduling, alpha) and in-place resize
/// preemption's plugin sit here: upstream enables them only with feature gates that are off by default.
pub const UPSTREAM_PLUGINS_NOT_IMPLEMENTED: &[&str] = &[
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "TopologyPlacementGenerator",
    "PodGroupPodsCount",
    "DeferredPodScheduling",
];

/// The default plugins with the default feature gates.
pub fn default_plugins() -> Plugins {
    default_plugins_for(Features::default())
}

/// The default plugins: all through multiPoint, with upstream's score weights, in upstream's order for the
/// feature gates given (`applyFeatureGates`: GangScheduling is appended last with GenericWorkload).
pub fn default_plugins_for(features: Features) -> Plugins {
    let p = |name: &str, weight: Option<i32>| PluginRef { name: name.to_string(), weight };
    Plugins {
        multi_point: Some(PluginSet {
            enabled: vec![
                p("SchedulingGates", None),
                p("PrioritySort", None),
                p("NodeName", None),
                p("NodeUnschedulable", None),
                p("TaintToleration", Some(3)),
                p("NodeAffinity", Some(2)),
                p("NodePorts", None),
                p("NodeResourcesFit", Some(1)),
                p("VolumeRestrictions", None),
                p("NodeVolumeLimits", None),
                p("VolumeBinding", None),
                p("VolumeZone", None),
                p("PodTopologySpread", Some(2)),
                p("InterPodAffinity", Some(2)),
                // Upstream inserts it before DefaultPreemption when the DynamicResourceAllocation gate is on
                // (GA): deallocating an idle claim is better than evicting a pod. Weight 2 since v1.35.
                p("DynamicResources", Some(2)),
                p("DefaultPreemption", None),
                p("NodeResourcesBalancedAllocation", Some(1)),
                p("ImageLocality", Some(1)),
                p("DefaultBinder", None),
            ]
            .into_iter()
            // Upstream's applyFeatureGates, in its order: NodeDeclaredFeatures (beta and on in v1.36, GA in v1.37).
            .chain(features.node_declared_features.then(|| p("NodeDeclaredFeatures", None)))
            // Upstream's applyGangScheduling, with the GenericWorkload gate (beta, off by default in v1.37).
            .chain(features.generic_workload.then(|| p(crate::config::GANG_SCHEDULING, None)))
            .collect(),
            disabled: vec![],
        }),
        ..Default::default()
    }
}
