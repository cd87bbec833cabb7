//! Builders shared by the plugins' unit tests: pods and nodes from JSON (the framework's), a context with the
//! memory cluster.

use std::sync::Arc;

pub use crate::framework::testutil::{node, node_with_pods, pod};

use crate::cluster::memory::MemoryCluster;
use crate::framework::PluginContext;

/// A plugin context on a fresh in-memory cluster.
pub fn ctx() -> PluginContext {
    PluginContext::new(Arc::new(MemoryCluster::default()))
}
