//! The scheduling framework: extension-point traits, `Status`, `CycleState`, pod and node infos, and the
//! profile runner that executes the cycle.

pub mod cycle_state;
pub mod extension_point;
pub mod interface;
pub mod labels;
pub mod quantity;
pub mod status;
pub mod types;

pub use cycle_state::{CycleState, StateData};
pub use extension_point::{ExtensionPoint, NUM_EXTENSION_POINTS};
pub use interface::*;
pub use status::{Code, Status};
pub use types::{NodeInfo, PodInfo, QosClass, QueuedPodInfo, Resource};
pub mod parallelize;
pub mod rng;
pub mod runtime;

pub use runtime::{Diagnosis, Framework, FrameworkError};
pub mod schedule_one;

pub use schedule_one::{AttemptResult, Observer, ProfileMap, Scheduler, SchedulerOptions};
