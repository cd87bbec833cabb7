//! The scheduler's profiles (upstream's `profile/`): one framework per `schedulerName`, built from the
//! configuration and the registry.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::{is_shadow, ConfigError, Features, SchedulerConfig};
use crate::framework::parallelize::Parallelizer;
use crate::framework::pod_view::PodView;
use crate::framework::preempting::Preempting;
use crate::framework::{Framework, FrameworkError, Listers, PluginContext, Registry};
use crate::queue::Profiles;

/// Profiles by schedulerName.
pub struct ProfileMap {
    map: HashMap<String, Arc<Framework>>,
    first: Arc<Framework>,
    /// The pod view the profiles' plugins follow; the scheduler feeds it.
    pods: Arc<PodView>,
    /// The objects the profiles' plugins list; the scheduler feeds them.
    listers: Arc<Listers>,
    /// Serving profile name → the profile that decides beside it on every cycle and never acts.
    shadows: HashMap<String, Arc<Framework>>,
    /// The feature gates the configuration was completed with.
    features: Features,
    /// The preemptions under way, as the profiles' DefaultPreemption sees them.
    preempting: Arc<Preempting>,
}

impl ProfileMap {
    /// Builds the map; `frameworks` must not be empty.
    pub fn new(frameworks: Vec<Framework>) -> ProfileMap {
        let frameworks: Vec<Arc<Framework>> = frameworks.into_iter().map(Arc::new).collect();
        let first = frameworks.first().expect("at least one profile").clone();
        ProfileMap {
            map: frameworks.into_iter().map(|f| (f.profile_name().to_string(), f)).collect(),
            first,
            pods: Arc::default(),
            listers: Arc::default(),
            shadows: HashMap::new(),
            features: Features::default(),
            preempting: Arc::default(),
        }
    }

    /// The map run under these feature gates.
    pub fn with_features(mut self, features: Features) -> ProfileMap {
        self.features = features;
        self
    }

    /// The feature gates the profiles run under (GenericWorkload: the PodGroup cycle).
    pub fn features(&self) -> Features {
        self.features
    }

    /// The map in which the profile named by each key has the value as its shadow.
    pub fn with_shadows(mut self, shadows: HashMap<String, Arc<Framework>>) -> ProfileMap {
        self.shadows = shadows;
        self
    }

    /// The shadow of a serving profile, if it has one.
    pub fn shadow_of(&self, name: &str) -> Option<&Arc<Framework>> {
        self.shadows.get(name)
    }

    /// The map whose plugins follow `pods`.
    pub fn with_pod_view(mut self, pods: Arc<PodView>) -> ProfileMap {
        self.pods = pods;
        self
    }

    /// The map whose plugins list `listers`.
    pub fn with_listers(mut self, listers: Arc<Listers>) -> ProfileMap {
        self.listers = listers;
        self
    }

    /// The objects the profiles' plugins list.
    pub fn listers(&self) -> &Arc<Listers> {
        &self.listers
    }

    /// The pod view the profiles' plugins follow.
    pub fn pod_view(&self) -> &Arc<PodView> {
        &self.pods
    }

    /// The map whose DefaultPreemption holds back the preemptors `preempting` lists.
    pub fn with_preempting(mut self, preempting: Arc<Preempting>) -> ProfileMap {
        self.preempting = preempting;
        self
    }

    /// The preemptions under way (asynchronous preemption).
    pub fn preempting(&self) -> &Arc<Preempting> {
        &self.preempting
    }

    /// The framework for a schedulerName.
    pub fn get(&self, name: &str) -> Option<&Arc<Framework>> {
        self.map.get(name)
    }

    /// Tells every profile's plugins (shadows' too) the cluster has synced.
    pub fn cluster_synced(&self) {
        for f in self.map.values().chain(self.shadows.values()) {
            f.cluster_synced();
        }
    }

    /// Whether any profile runs the plugin `name` at some point.
    pub fn uses_plugin(&self, name: &str) -> bool {
        self.map.values().chain(self.shadows.values()).any(|f| f.plugin(name).is_some())
    }

    /// The serving profiles' names (a shadow serves no pods of its own).
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }
}

impl Profiles for ProfileMap {
    fn framework(&self, scheduler_name: &str) -> Option<&Framework> {
        self.map.get(scheduler_name).map(|f| &**f)
    }
    fn first(&self) -> &Framework {
        &self.first
    }
}

/// Reads a configuration file (`config::load`) and has the plugins check their args (`check_plugin_args`).
pub fn load_config(path: &std::path::Path, known: &dyn Fn(&str) -> bool) -> Result<SchedulerConfig, ConfigError> {
    load_config_with(path, known, crate::config::Features::default())
}

/// `load_config` under these feature gates (`--feature-gates`).
pub fn load_config_with(
    path: &std::path::Path,
    known: &dyn Fn(&str) -> bool,
    features: crate::config::Features,
) -> Result<SchedulerConfig, ConfigError> {
    let mut cfg = crate::config::load_with(path, known, features)?;
    check_plugin_args(&mut cfg)?;
    Ok(cfg)
}

/// Parses configuration text (`config::parse`) and has the plugins check their args (`check_plugin_args`).
pub fn parse_config(file: &str, text: &str, known: &dyn Fn(&str) -> bool) -> Result<SchedulerConfig, ConfigError> {
    parse_config_with(file, text, known, crate::config::Features::default())
}

/// `parse_config` under these feature gates (`--feature-gates`).
pub fn parse_config_with(
    file: &str,
    text: &str,
    known: &dyn Fn(&str) -> bool,
    features: crate::config::Features,
) -> Result<SchedulerConfig, ConfigError> {
    let mut cfg = crate::config::parse_with(file, text, known, features)?;
    check_plugin_args(&mut cfg)?;
    Ok(cfg)
}

/// The checks the configuration leaves to what stands on it, each decoding what it owns: the extenders' TLS
/// material makes a client, the Wasm plugins' args are a component's, the native plugins' args are theirs. Run
/// before any profile is built, so a mistake is one line naming the field.
pub fn check_plugin_args(cfg: &mut SchedulerConfig) -> Result<(), ConfigError> {
    crate::extender::check_tls(cfg)?;
    crate::wasm::check_config_args(cfg)?;
    crate::plugins::check_config_args(cfg)
}

/// Builds the frameworks of every profile, sharing one parallelizer. A profile some other one names as its
/// shadow is built like any other but serves no pods: it only decides beside the profile that names it.
pub fn build_profiles(
    config: &SchedulerConfig,
    registry: &Registry,
    ctx: &PluginContext,
) -> Result<ProfileMap, FrameworkError> {
    let par = Parallelizer::new(config.parallelism);
    // The plugins see the gates the configuration was read with.
    let ctx = &PluginContext { features: config.features, ..ctx.clone() };
    let mut serving = Vec::with_capacity(config.profiles.len());
    let mut shadow_fws = HashMap::new();
    for p in &config.profiles {
        let mut fw = Framework::new(p, config.percentage_of_nodes_to_score, registry, ctx, par.clone())?;
        if config.features.opportunistic_batching {
            // Upstream hands every profile all the configuration's extenders, and any extender stops signing.
            fw.enable_batching(config.features.generic_workload, !config.extenders.is_empty());
        }
        if is_shadow(&config.profiles, &p.scheduler_name) {
            shadow_fws.insert(p.scheduler_name.clone(), Arc::new(fw));
        } else {
            serving.push(fw);
        }
    }
    let shadows = config
        .profiles
        .iter()
        .filter_map(|p| Some((p.scheduler_name.clone(), shadow_fws.get(p.shadow.as_deref()?)?.clone())))
        .collect();
    Ok(ProfileMap::new(serving)
        .with_shadows(shadows)
        .with_pod_view(ctx.pods.clone())
        .with_preempting(ctx.preempting.clone())
        .with_listers(ctx.listers.clone())
        .with_features(config.features))
}
