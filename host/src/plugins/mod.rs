//! Native plugins, one file each, and the registry that builds them by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::cluster::ClusterClient;
use crate::framework::Plugin;

pub mod default_binder;
pub mod default_preemption;
pub mod helper;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod priority_sort;
pub mod scheduling_gates;
pub mod taint_toleration;
#[cfg(test)]
pub mod testutil;
pub mod volume_binding;

/// The flat paths of the two node-resources plugins, one file each in `node_resources/` as in upstream's
/// `noderesources` package, kept so that code naming a plugin by its module needs no change.
pub use node_resources::{balanced_allocation as node_resources_balanced_allocation, fit as node_resources_fit};

/// What a plugin may use besides its args: the cluster seam (binder, evictions), the run's seed, and whether
/// plugin files are watched for replacement.
#[derive(Clone)]
pub struct PluginContext {
    /// The cluster writes (binding, evictions, nominations, events).
    pub cluster: Arc<dyn ClusterClient>,
    /// Seed for plugins' random sources (the simulator's `--seed`).
    pub seed: u64,
    /// When set, Wasm plugins poll their component file this often and swap in a changed one.
    pub reload_period: Option<std::time::Duration>,
}

impl PluginContext {
    /// A context on a cluster, seed 0, no file watching.
    pub fn new(cluster: Arc<dyn ClusterClient>) -> PluginContext {
        PluginContext { cluster, seed: 0, reload_period: None }
    }
}

/// Builds a plugin from its `pluginConfig` args (JSON; `None` when the profile gives none).
pub type PluginFactory =
    Arc<dyn Fn(Option<&serde_json::Value>, &PluginContext) -> Result<Arc<dyn Plugin>, String> + Send + Sync>;

/// Plugin name → factory. Refuses a second plugin of the same name.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, PluginFactory>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds a factory; a name that is already registered is an error.
    pub fn register(&mut self, name: &str, factory: PluginFactory) -> Result<(), String> {
        if self.factories.contains_key(name) {
            return Err(format!("plugin {name:?} is registered twice"));
        }
        self.factories.insert(name.to_string(), factory);
        Ok(())
    }

    /// The factory for a name.
    pub fn get(&self, name: &str) -> Option<&PluginFactory> {
        self.factories.get(name)
    }

    /// All registered names, sorted (shown in "unknown plugin" errors).
    pub fn names(&self) -> Vec<&str> {
        self.factories.keys().map(String::as_str).collect()
    }
}

/// Decodes a plugin's args into its typed args struct; absent args give the defaults. Unknown fields are errors.
pub fn decode_args<T: DeserializeOwned + Default>(args: Option<&serde_json::Value>) -> Result<T, String> {
    match args {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| e.to_string()),
    }
}

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
    register!(r, taint_toleration::NAME, taint_toleration::TaintToleration::new);
    register!(r, node_affinity::NAME, node_affinity::NodeAffinity::new);
    register!(r, volume_binding::NAME, volume_binding::VolumeBinding::new);
    register!(r, default_binder::NAME, default_binder::DefaultBinder::new);
    register!(r, default_preemption::NAME, default_preemption::DefaultPreemption::new);
    register!(r, pod_topology_spread::NAME, pod_topology_spread::PodTopologySpread::new);
    register!(r, node_resources_fit::NAME, node_resources_fit::NodeResourcesFit::new);
    register!(
        r,
        node_resources_balanced_allocation::NAME,
        node_resources_balanced_allocation::NodeResourcesBalancedAllocation::new
    );
    register!(r, image_locality::NAME, image_locality::ImageLocality::new);
    register!(r, node_ports::NAME, node_ports::NodePorts::new);
    r
}
