//! The scheduling framework: the plugin API (extension-point traits, `Status`, `CycleState`, pod and node infos, the
//! snapshot plugins read, the registry) and the runner of each extension point. It imports nothing that drives it:
//! the scheduler, queue, cache and cluster sit above it.

pub mod batch;
pub mod cycle_state;
pub mod diagnosis;
pub mod extension_point;
pub mod handle;
pub mod interface;
pub mod labels;
pub mod metrics;
pub mod node_memo;
pub mod parallelize;
pub mod pod_view;
pub mod preempting;
pub mod quantity;
pub mod registry;
pub mod rng;
pub mod runtime;
pub mod signers;
pub mod snapshot;
pub mod status;
pub mod storage;
#[cfg(test)]
pub mod testutil;
pub mod trace;
pub mod types;
pub mod waiting_pods;

pub use cycle_state::{CycleState, StateData};
pub use diagnosis::Diagnosis;
pub use extension_point::{ExtensionPoint, NUM_EXTENSION_POINTS};
pub use handle::{ClusterClient, ClusterError, Listers, PluginContext, PodEvent, PodGroupCondition, PolicyStatus};
pub use interface::*;
pub use registry::Registry;
pub use runtime::{Framework, FrameworkError};
pub use snapshot::{object_changes, ClusterObjects, ObjectMap, PolicyObject, Snapshot};
pub use status::{Code, Status};
pub use trace::{CycleTrace, ExtenderTrace};
pub use types::{NodeInfo, PodInfo, QosClass, QueuedPodInfo, Resource};
