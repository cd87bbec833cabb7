//! RequireAnnotation: a PreEnqueue gate (upstream's `SchedulingGates` shape, keyed on an annotation): a pod
//! without the configured annotation stays out of the active queue until it gets one.
//!
//! Configuration: `{"annotation": "scheduling.example.com/approved", "value": "true"}`; `annotation` defaults to
//! [`DEFAULT_ANNOTATION`], and without `value` any value passes.

use kws_plugin_sdk::{Actions, ClusterEvent, Config, EventObject, Plugin, Pod, QueueingHint, Status};

/// The annotation required when the configuration names none.
pub const DEFAULT_ANNOTATION: &str = "scheduling.example.com/approved";

/// The plugin: the annotation and, optionally, the value it must have.
pub struct RequireAnnotation {
    annotation: String,
    value: Option<String>,
}

impl RequireAnnotation {
    fn admits(&self, pod: &Pod) -> bool {
        match (pod.annotation(&self.annotation), &self.value) {
            (Some(v), Some(want)) => v == want,
            (found, None) => found.is_some(),
            (None, Some(_)) => false,
        }
    }
}

impl Plugin for RequireAnnotation {
    type NodeData = ();

    fn new(config: &Config) -> Result<Self, String> {
        config.expect_keys(&["annotation", "value"])?;
        let annotation = config.str("annotation")?.unwrap_or(DEFAULT_ANNOTATION);
        if annotation.is_empty() {
            return Err("annotation must not be empty".to_string());
        }
        Ok(Self { annotation: annotation.to_string(), value: config.str("value")?.map(str::to_string) })
    }

    fn pre_enqueue(&self, pod: &Pod) -> Status {
        if self.admits(pod) {
            return Status::success();
        }
        let want = match &self.value {
            Some(v) => format!("annotation {}={v}", self.annotation),
            None => format!("annotation {}", self.annotation),
        };
        // Unresolvable: nothing the scheduler does admits it; only a change to the pod does.
        Status::unresolvable(format!("pod {} is waiting for {want}", pod.key()))
    }

    /// Annotations are not labels: their changes arrive as "other" updates of the pending pod.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::unscheduled_pod(Actions::UPDATE_OTHER)]
    }

    /// Queue only the pod that now carries the annotation.
    fn queueing_hint(
        &self,
        pod: &Pod,
        _event: &ClusterEvent,
        _old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        QueueingHint::queue_if(new.and_then(EventObject::pod).is_some_and(|p| p.uid == pod.uid && self.admits(p)))
    }
}

kws_plugin_sdk::export!(RequireAnnotation: pre_enqueue, events);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::{testing, Code};

    fn annotated(key: &str, value: &str) -> Pod {
        let mut p = Pod::new("ns", "p");
        p.annotations.push((key.to_string(), value.to_string()));
        p
    }

    #[test]
    fn pods_without_the_annotation_wait() {
        let st = testing::pre_enqueue::<RequireAnnotation>(Pod::new("ns", "p"));
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(st.message(), "pod ns/p is waiting for annotation scheduling.example.com/approved");
        assert!(testing::pre_enqueue::<RequireAnnotation>(annotated(DEFAULT_ANNOTATION, "")).is_success());
    }

    #[test]
    fn a_configured_value_must_match() {
        testing::set_config(r#"{"annotation": "a.example/ok", "value": "yes"}"#);
        assert!(testing::pre_enqueue::<RequireAnnotation>(annotated("a.example/ok", "yes")).is_success());
        let st = testing::pre_enqueue::<RequireAnnotation>(annotated("a.example/ok", "no"));
        assert_eq!(st.message(), "pod ns/p is waiting for annotation a.example/ok=yes");
    }

    #[test]
    fn bad_configuration_is_refused() {
        for (bad, why) in
            [(r#"{"annotation": ""}"#, "annotation must not be empty"), (r#"{"anotation": "x"}"#, "unknown key")]
        {
            testing::set_config(bad);
            assert!(testing::validate::<RequireAnnotation>().unwrap_err().contains(why), "{bad}");
        }
    }

    #[test]
    fn the_pod_is_requeued_when_it_gets_the_annotation() {
        let e = ClusterEvent::unscheduled_pod(Actions::UPDATE_OTHER);
        assert_eq!(testing::events_to_register::<RequireAnnotation>(), [e]);
        let hint = |new: Pod| {
            testing::queueing_hint::<RequireAnnotation>(Pod::new("ns", "p"), e, None, Some(EventObject::Pod(new)))
        };
        assert_eq!(hint(annotated(DEFAULT_ANNOTATION, "x")), QueueingHint::Queue);
        assert_eq!(hint(Pod::new("ns", "p")), QueueingHint::QueueSkip);
        let mut other = annotated(DEFAULT_ANNOTATION, "x");
        other.uid = "ns/other".into();
        assert_eq!(hint(other), QueueingHint::QueueSkip);
    }
}
