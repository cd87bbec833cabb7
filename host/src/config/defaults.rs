//! Upstream's default profile (v1.34 `getDefaultPlugins`), narrowed to the plugins this scheduler implements.

use super::types::{PluginRef, PluginSet, Plugins};

/// Upstream default plugins that are not implemented here. They may be named in `disabled` (so configurations
/// written for kube-scheduler keep working) but not enabled.
pub const UPSTREAM_PLUGINS_NOT_IMPLEMENTED: &[&str] = &["EBSLimits", "GCEPDLimits", "AzureDiskLimits"];

/// The default plugins: all through multiPoint, with upstream's score weights.
pub fn default_plugins() -> Plugins {
    let p = |name: &str, weight: Option<i32>| PluginRef { name: name.to_string(), weight };
    Plugins {
        multi_point: Some(PluginSet {
            enabled: vec![
                p("SchedulingGates", None),
                p("PrioritySort", None),
                p("NodeUnschedulable", None),
                p("NodeName", None),
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
                // (GA, on in v1.34): deallocating an idle claim is better than evicting a pod.
                p("DynamicResources", None),
                p("DefaultPreemption", None),
                p("NodeResourcesBalancedAllocation", Some(1)),
                p("ImageLocality", Some(1)),
                p("DefaultBinder", None),
            ],
            disabled: vec![],
        }),
        ..Default::default()
    }
}
