//! Native plugins, one file each (a plugin family with shared code is a folder, as upstream's), and the registry
//! of them all.

use std::sync::Arc;

use crate::framework::{Plugin, Registry};

pub mod default_binder;
pub mod default_preemption;
pub mod dynamic_resources;
pub mod helper;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod priority_sort;
pub mod scheduling_gates;
pub mod storage_helpers;
pub mod taint_toleration;
#[cfg(test)]
pub mod testutil;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

/// The native plugins that take args (upstream has a `<Name>Args` kind for each), each with the check its
/// constructor runs: decode, default, validate.
const ARGS_CHECKS: &[(&str, ArgsCheck)] = &[
    (default_preemption::NAME, |a| default_preemption::DefaultPreemptionArgs::parse(a).map(drop)),
    (dynamic_resources::NAME, |a| dynamic_resources::DynamicResourcesArgs::parse(a).map(drop)),
    (inter_pod_affinity::NAME, |a| inter_pod_affinity::InterPodAffinityArgs::parse(a).map(drop)),
    (node_affinity::NAME, |a| node_affinity::NodeAffinity::from_args(a).map(drop)),
    (node_resources::fit::NAME, |a| node_resources::fit::NodeResourcesFitArgs::parse(a).map(drop)),
    (node_resources::balanced_allocation::NAME, |a| {
        node_resources::balanced_allocation::NodeResourcesBalancedAllocationArgs::parse(a).map(drop)
    }),
    (pod_topology_spread::NAME, |a| pod_topology_spread::PodTopologySpreadArgs::parse(a).map(drop)),
    (volume_binding::NAME, |a| volume_binding::VolumeBindingArgs::parse(a).map(drop)),
];

/// The check of a native plugin's args, run when the configuration is loaded without building the plugin
/// (upstream's `validatePluginConfig`). `None` when the plugin takes no args or is not native: upstream keeps
/// such args undecoded and accepts them.
pub fn args_check(name: &str) -> Option<ArgsCheck> {
    ARGS_CHECKS.iter().find(|(n, _)| *n == name).map(|(_, check)| *check)
}

/// Decodes, defaults and validates a plugin's args, reporting every error at its path inside the args.
pub type ArgsCheck = fn(Option<&serde_json::Value>) -> Result<(), helper::ArgsError>;

/// Registers a plugin type whose constructor takes (args, context).
macro_rules! register {
    ($reg:expr, $name:expr, $ctor:expr) => {
        $reg.register($name, Arc::new(|args, ctx| Ok(Arc::new($ctor(args, ctx)?) as Arc<dyn Plugin>)))
            .expect("in-tree plugin names are unique")
    };
}

/// The registry of every native plugin.
pub fn in_tree_registry() -> Registry {
    let mut r = Registry::new();
    register!(r, inter_pod_affinity::NAME, inter_pod_affinity::InterPodAffinity::new);
    register!(r, node_name::NAME, node_name::NodeName::new);
    register!(r, priority_sort::NAME, priority_sort::PrioritySort::new);
    register!(r, scheduling_gates::NAME, scheduling_gates::SchedulingGates::new);
    register!(r, node_unschedulable::NAME, node_unschedulable::NodeUnschedulable::new);
    register!(r, node_declared_features::NAME, node_declared_features::NodeDeclaredFeatures::new);
    register!(r, taint_toleration::NAME, taint_toleration::TaintToleration::new);
    register!(r, node_affinity::NAME, node_affinity::NodeAffinity::new);
    register!(r, volume_binding::NAME, volume_binding::VolumeBinding::new);
    register!(r, default_binder::NAME, default_binder::DefaultBinder::new);
    register!(r, default_preemption::NAME, default_preemption::DefaultPreemption::new);
    register!(r, dynamic_resources::NAME, dynamic_resources::DynamicResources::new);
    register!(r, pod_topology_spread::NAME, pod_topology_spread::PodTopologySpread::new);
    register!(r, node_resources::fit::NAME, node_resources::fit::NodeResourcesFit::new);
    register!(
        r,
        node_resources::balanced_allocation::NAME,
        node_resources::balanced_allocation::NodeResourcesBalancedAllocation::new
    );
    register!(r, image_locality::NAME, image_locality::ImageLocality::new);
    register!(r, node_ports::NAME, node_ports::NodePorts::new);
    register!(r, volume_restrictions::NAME, volume_restrictions::VolumeRestrictions::new);
    register!(r, volume_zone::NAME, volume_zone::VolumeZone::new);
    register!(r, node_volume_limits::NAME, node_volume_limits::NodeVolumeLimits::new);
    r
}
