//! DefaultBinder: binds the pod to the chosen node through the cluster seam (`pods/binding` on a live cluster).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::cluster::{ClusterClient, ClusterError};
use crate::framework::PluginContext;
use crate::framework::{BindPlugin, ClusterEvent, CycleState, Plugin, PodInfo, Status};

/// The plugin's name in profiles.
pub const NAME: &str = "DefaultBinder";

/// The DefaultBinder plugin.
pub struct DefaultBinder {
    cluster: Arc<dyn ClusterClient>,
}

impl DefaultBinder {
    /// Builds the plugin on the context's cluster; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, ctx: &PluginContext) -> Result<DefaultBinder, String> {
        Ok(DefaultBinder { cluster: ctx.cluster.clone() })
    }
}

impl Plugin for DefaultBinder {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // Binding rejects no pod: a failure is an error, retried with backoff.
        Vec::new()
    }
    crate::serves!(bind);
}

impl BindPlugin for DefaultBinder {
    fn bind(&self, _state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        answer(self.cluster.bind(pod, node))
    }

    /// On a live cluster the Binding is a request the binding cycle awaits; the simulator binds inline.
    fn bind_async(&self, pod: &PodInfo, node: &str) -> Option<BoxFuture<'static, Status>> {
        let bind = self.cluster.bind_async(pod, node)?;
        Some(Box::pin(async move { answer(bind.await) }))
    }
}

fn answer(r: Result<(), ClusterError>) -> Status {
    match r {
        Ok(()) => Status::success(),
        Err(e) => Status::error(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::memory::{MemoryCluster, Write};
    use crate::framework::Code;
    use crate::plugins::testutil::pod;
    use serde_json::json;

    #[test]
    fn table() {
        let mem = Arc::new(MemoryCluster::default());
        mem.fail_bind.lock().unwrap().push("default/bad".to_string());
        let pl = DefaultBinder::new(None, &PluginContext::new(mem.clone())).unwrap();
        let cases = [
            ("binds", "good", "u1", "n1", None),
            (
                "second bind of the same pod conflicts",
                "good",
                "u1",
                "n2",
                Some("conflict on pod default/good: already bound to n1"),
            ),
            ("injected conflict", "bad", "u2", "n1", Some("conflict on pod default/bad: injected conflict")),
        ];
        for (name, pod_name, uid, node, want) in cases {
            let p = pod(json!({"metadata": {"name": pod_name, "uid": uid}}));
            let st = pl.bind(&mut CycleState::new(), &p, node);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(msg) => {
                    assert_eq!(st.code(), Code::Error, "{name}");
                    assert_eq!(st.message(), msg, "{name}");
                }
            }
        }
        assert_eq!(mem.writes(), [Write::Bind { pod: "default/good".into(), node: "n1".into() }]);
    }
}
