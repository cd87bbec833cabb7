//! {{Plugin}}: a kube-wasm-scheduler plugin, scaffolded by `kube-wasm-scheduler plugin new` as a starting point.
//!
//! Configuration (`pluginConfig[].args.config` in profile.yaml): `{"labelKey": "..."}`, default
//! `priority.example.com`. The sample policy at each extension point it serves:
//@ filter
//! - Filter: a node without the label is UnschedulableAndUnresolvable.
//@ score
//! - Score: the label's integer value (0 when absent or not an integer), scaled to 0-100 by the highest.
//@ pre-enqueue
//! - PreEnqueue: a pod labelled `<labelKey>/hold` stays out of the active queue until the label goes.
//@ queue-sort
//! - QueueSort: higher priority first, then earlier arrival (kube-scheduler's PrioritySort).
//@ pre-filter
//! - PreFilter: logs the pod it starts a cycle for.
//@ post-filter
//! - PostFilter: logs how many nodes refused the pod; it cannot make room (Unschedulable).
//@ pre-score
//! - PreScore: logs how many nodes are feasible.
//@ reserve
//! - Reserve / Unreserve: log the node the pod was assumed on.
//@ permit
//! - Permit: allows every pod.
//@ pre-bind
//! - PreBind: nothing to prepare (Success).
//@ bind
//! - Bind: Skip, so the default binder binds.
//@ post-bind
//! - PostBind: logs the binding.
//@ end

use kws_plugin_sdk::{{uses}};

/// The label read when the configuration names none.
pub const DEFAULT_LABEL_KEY: &str = "priority.example.com";

/// The plugin, built once per instance from its configuration.
pub struct {{Plugin}} {
    /// The label the policy reads.
    key: String,
}

impl Plugin for {{Plugin}} {
    /// What the plugin derives from a node when the node changes (not for every pod): the label's value.
    type NodeData = Option<i64>;

    fn new(config: &Config) -> Result<Self, String> {
        let key = config.str("labelKey")?.unwrap_or(DEFAULT_LABEL_KEY);
        if key.is_empty() {
            return Err("labelKey must not be empty".to_string());
        }
        Ok(Self { key: key.to_string() })
    }

    /// What the plugin promises the scheduler so it can skip work: this policy reads a label, never a node's usage
    /// (`requested`, `pod_count`), so a node need not be sent again each time a pod lands on it. Promise nothing
    /// (`Declared::empty()`) once the policy reads usage. `Plugin::declare` lists the other promises (a Score that
    /// reads only the node, upstream's NormalizeScore), each of which takes calls away.
    fn declare(&self) -> Declared {
        Declared::IGNORES_NODE_USAGE
    }

    fn prepare(&self, node: &Node) -> Option<i64> {
        node.label(&self.key).map(|v| v.trim().parse().unwrap_or(0))
    }
//@ pre-enqueue

    fn pre_enqueue(&self, pod: &Pod) -> Status {
        match pod.label(&format!("{}/hold", self.key)) {
            Some(_) => Status::unschedulable(format!("pod is held by label {}/hold", self.key)),
            None => Status::success(),
        }
    }
//@ queue-sort

    fn less(&self, a: &QueuedPod, b: &QueuedPod) -> bool {
        kws_plugin_sdk::types::priority_sort_less(a, b)
    }
//@ pre-filter

    fn pre_filter(&self, pod: &Pod) -> PreFilterResult {
        kws_plugin_sdk::debug!("PreFilter {}", pod.key());
        PreFilterResult::success()
    }
//@ filter

    fn filter(&self, _pod: &CyclePod, node: &NodeInfo<'_, Option<i64>>) -> Status {
        // The same reason on every node, so the scheduler can count it: "3 node(s) didn't have label ...".
        match node.data() {
            Some(_) => Status::success(),
            None => Status::unresolvable(format!("node(s) didn't have label {}", self.key)),
        }
    }
//@ post-filter

    fn post_filter(&self, pod: &Pod, rejected: &[(NodeInfo<'_, Option<i64>>, Status)]) -> PostFilterResult {
        kws_plugin_sdk::info!("no node fits {}: {} node(s) refused it", pod.key(), rejected.len());
        PostFilterResult::unschedulable("")
    }
//@ pre-score

    fn pre_score(&self, pod: &Pod, nodes: &[NodeInfo<'_, Option<i64>>]) -> Status {
        kws_plugin_sdk::debug!("PreScore {}: {} feasible node(s)", pod.key(), nodes.len());
        Status::success()
    }
//@ score

    fn score(&self, _pod: &CyclePod, node: &NodeInfo<'_, Option<i64>>) -> Result<i64, Status> {
        Ok(node.data().unwrap_or(0))
    }

    fn normalize_score(&self, _pod: &CyclePod, scores: &mut [i64]) -> Result<(), Status> {
        normalize::scale_to_max(scores, MAX_NODE_SCORE);
        Ok(())
    }
//@ reserve

    fn reserve(&self, pod: &Pod, node: &str) -> Status {
        kws_plugin_sdk::debug!("Reserve {} on {node}", pod.key());
        Status::success()
    }

    fn unreserve(&self, pod: &Pod, node: &str) {
        kws_plugin_sdk::debug!("Unreserve {} on {node}", pod.key());
    }
//@ permit

    fn permit(&self, _pod: &Pod, _node: &str) -> Permit {
        Permit::Allow
    }
//@ pre-bind

    fn pre_bind(&self, _pod: &Pod, _node: &str) -> Status {
        Status::success()
    }
//@ bind

    fn bind(&self, _pod: &Pod, _node: &str) -> Status {
        // Skip: the next binder (in the end kube-scheduler's DefaultBinder) binds.
        Status::skip()
    }
//@ post-bind

    // The pod by reference: only the two fields logged cross into the plugin (`post_bind`, with the whole `Pod`,
    // works too, at the price of copying every field).
    fn post_bind_ref(&self, pod: &PodRef<'_>, node: &str) {
        kws_plugin_sdk::info!("bound {}/{} to {node}", pod.namespace(), pod.name());
    }
//@ end
}

// The extension points this plugin serves; the scheduler registers it at exactly these.
kws_plugin_sdk::export!({{Plugin}}: {{exports}});
