//! SchedulingGates: a pod with `spec.schedulingGates` stays out of the active queue until every gate is removed.

use crate::framework::PluginContext;
use crate::framework::{action, ClusterEvent, EventResource, Plugin, PodInfo, PreEnqueuePlugin, Status};

/// The plugin's name in profiles.
pub const NAME: &str = "SchedulingGates";

/// The SchedulingGates plugin.
#[derive(Debug, Default)]
pub struct SchedulingGates;

impl SchedulingGates {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<SchedulingGates, String> {
        Ok(SchedulingGates)
    }
}

impl Plugin for SchedulingGates {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // Gates are only removed by updating the pending pod itself.
        vec![ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE)]
    }
    crate::serves!(pre_enqueue);
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let gates = pod.pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_deref()).unwrap_or(&[]);
        if gates.is_empty() {
            return Status::success();
        }
        // Go's %v of a string slice: "[a b]".
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        Status::unresolvable(format!("waiting for scheduling gates: [{}]", names.join(" ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, pod};
    use serde_json::json;

    #[test]
    fn table() {
        let cases = [
            ("no gates field", json!({}), None),
            ("empty gates", json!({"schedulingGates": []}), None),
            ("one gate", json!({"schedulingGates": [{"name": "foo"}]}), Some("waiting for scheduling gates: [foo]")),
            (
                "two gates in order",
                json!({"schedulingGates": [{"name": "foo"}, {"name": "bar"}]}),
                Some("waiting for scheduling gates: [foo bar]"),
            ),
        ];
        let pl = SchedulingGates::new(None, &ctx()).unwrap();
        for (name, spec, want) in cases {
            let p = pod(json!({"metadata": {"name": "p"}, "spec": spec}));
            let st = pl.pre_enqueue(&p);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(r) => {
                    assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(st.reasons(), [r.to_string()], "{name}");
                }
            }
        }
    }
}
