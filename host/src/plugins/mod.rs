//! Native plugins, one file each (a plugin family with shared code is a folder, as upstream's), and the registry
//! of them all.

use std::sync::Arc;

use crate::config::{ConfigError, SchedulerConfig, API_VERSION};
use crate::framework::{Plugin, Registry};

pub mod default_binder;
pub mod default_preemption;
pub mod dynamic_resources;
pub mod gang_scheduling;
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

/// Checks the native plugins' args of every profile as upstream decodes and validates them (a plugin's `kind` and
/// `apiVersion`, when given, must be its own), and drops `kind` and `apiVersion` from every entry's args, since the
/// name already says which plugin they are for. Args that declare a Wasm component are left to the Wasm host.
/// The error is one line naming the field: `profiles[0].pluginConfig[2].args.scoringStrategy.type`.
pub fn check_config_args(cfg: &mut SchedulerConfig) -> Result<(), ConfigError> {
    let file = cfg.source.clone();
    for (i, p) in cfg.profiles.iter_mut().enumerate() {
        for (name, args) in p.plugin_args.iter_mut() {
            // Entries the configuration derived itself (NodeResourcesFit's ignoredResources from the extenders).
            let Some(j) = p.plugin_config_index.get(name) else { continue };
            native_args(name, args).map_err(|(af, m)| ConfigError {
                file: file.clone(),
                field: format!("profiles[{i}].pluginConfig[{j}].args{af}"),
                message: m,
            })?;
        }
    }
    Ok(())
}

/// One entry's args, checked and left ready to store (see `check_config_args`). Errors carry the field below
/// `args`.
fn native_args(name: &str, args: &mut serde_json::Value) -> Result<(), (String, String)> {
    let check = args_check(name).filter(|_| !crate::config::declares_component(Some(args)));
    if let Some(o) = args.as_object_mut() {
        let kind = o.remove("kind");
        let api_version = o.remove("apiVersion");
        if check.is_some() {
            let want = format!("{name}Args");
            match kind {
                Some(serde_json::Value::String(k)) if k == want => {}
                None => {}
                Some(k) => {
                    return Err((".kind".into(), format!("args for plugin {name} must be of kind {want}, got {k}")))
                }
            }
            match api_version {
                Some(serde_json::Value::String(v)) if v == API_VERSION => {}
                None => {}
                Some(v) => return Err((".apiVersion".into(), format!("expected {API_VERSION}, got {v}"))),
            }
        }
    }
    if let Some(check) = check {
        // One line: the first error; upstream's aggregate lists them all, which a user fixes one by one anyway.
        check(Some(args)).map_err(|e| {
            let first = e.0.into_iter().next().expect("an args error holds at least one");
            let field = if first.field.is_empty() { String::new() } else { format!(".{}", first.field) };
            (field, first.detail)
        })?;
    }
    Ok(())
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
    register!(r, gang_scheduling::NAME, gang_scheduling::GangScheduling::new);
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

#[cfg(test)]
mod config_args_tests {
    use super::*;

    const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

    /// The native plugins' args in a configuration, checked as upstream decodes and validates them, each refusal
    /// one line naming the field (None: accepted).
    #[test]
    fn plugin_args_are_checked_by_their_plugins() {
        let cases: &[(&str, Option<&str>)] = &[
            ("profiles: [{pluginConfig: [{name: VolumeBinding, args: {kind: VolumeBindingArgs, apiVersion: kubescheduler.config.k8s.io/v1, bindTimeoutSeconds: 0}}]}]\n", None),
            ("profiles: [{pluginConfig: [{name: VolumeBinding, args: {kind: NodeAffinityArgs}}]}]\n", Some("profiles[0].pluginConfig[0].args.kind: args for plugin VolumeBinding must be of kind VolumeBindingArgs")),
            ("profiles: [{pluginConfig: [{name: VolumeBinding, args: {apiVersion: kubescheduler.config.k8s.io/v1beta3}}]}]\n", Some("profiles[0].pluginConfig[0].args.apiVersion: expected kubescheduler.config.k8s.io/v1")),
            ("profiles: [{pluginConfig: [{name: VolumeBinding, args: {bindTimeoutSeconds: 9223372037}}]}]\n", Some("args.bindTimeoutSeconds: Invalid value: 9223372037: must be at most")),
            ("profiles: [{pluginConfig: [{name: NodeResourcesFit, args: []}]}]\n", Some("profiles[0].pluginConfig[0].args: invalid type: sequence")),
            ("profiles: [{pluginConfig: [{name: InterPodAffinity, args: {hardPodAffinityWeight: 0, ignorePreferredTermsOfExistingPods: true}}]}]\n", None),
            ("profiles: [{pluginConfig: [{name: PodTopologySpread, args: {defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}}]}]\n", Some("args.defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty")),
        ];
        for (body, want) in cases {
            let got = crate::config::parse("f.yaml", &format!("{HEAD}{body}"), &|_| true)
                .and_then(|mut cfg| check_config_args(&mut cfg).map(|()| cfg));
            match (got, want) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => {
                    let e = e.to_string();
                    assert!(e.starts_with("f.yaml: ") && e.contains(w), "{body}: got {e:?}, want {w:?}");
                }
                (Ok(_), Some(w)) => panic!("{body}: accepted, want {w:?}"),
                (Err(e), None) => panic!("{body}: {e}"),
            }
        }
    }
}
