//! The scheduler's profiles (upstream's `profile/`): one framework per `schedulerName`, built from the
//! configuration and the registry.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::SchedulerConfig;
use crate::framework::parallelize::Parallelizer;
use crate::framework::pod_view::PodView;
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
        }
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

    /// The framework for a schedulerName.
    pub fn get(&self, name: &str) -> Option<&Arc<Framework>> {
        self.map.get(name)
    }

    /// Profile names.
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

/// Builds the frameworks of every profile, sharing one parallelizer.
pub fn build_profiles(
    config: &SchedulerConfig,
    registry: &Registry,
    ctx: &PluginContext,
) -> Result<ProfileMap, FrameworkError> {
    let par = Parallelizer::new(config.parallelism);
    let fws = config
        .profiles
        .iter()
        .map(|p| Framework::new(p, config.percentage_of_nodes_to_score, registry, ctx, par.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProfileMap::new(fws).with_pod_view(ctx.pods.clone()).with_listers(ctx.listers.clone()))
}
