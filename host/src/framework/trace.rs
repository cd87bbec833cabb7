//! The explain trace: what each plugin said about each node in one cycle, recorded for `simulate --explain`
//! only when asked (the runners skip it otherwise).

/// Per-node verdicts and per-plugin scores of one cycle, recorded for `--explain`.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct CycleTrace {
    /// PreFilter outcome per plugin: "Success", "Skip", or the rejection.
    pub pre_filter: Vec<(String, String)>,
    /// Nodes evaluated by Filter, in evaluation order, with their verdict ("feasible" or the rejecting status).
    pub filter: Vec<(String, String)>,
    /// Nodes not evaluated because enough feasible nodes were found first.
    pub not_evaluated: usize,
    /// Score plugins that ran: name, weight, and per node raw, normalized and weighted scores.
    pub scores: Vec<PluginScoreTrace>,
    /// Total score per node.
    pub totals: Vec<(String, i64)>,
    /// PreScore plugins that answered Skip.
    pub pre_score_skipped: Vec<String>,
    /// Set when the pod's nominated node was tried first and fit (the other nodes were not evaluated).
    pub nominated_node: Option<String>,
    /// Set when OpportunisticBatching's hint was tried first and fit (the other nodes were not evaluated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_hint: Option<String>,
    /// What PostFilter (preemption) decided, when it ran.
    pub post_filter: Option<String>,
    /// What each HTTP extender called in this cycle answered (filter, then prioritize), in call order.
    pub extenders: Vec<ExtenderTrace>,
}

/// One HTTP extender's answer in a cycle.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ExtenderTrace {
    /// The extender (its URL prefix, as upstream names it).
    pub extender: String,
    /// `filter` or `prioritize`.
    pub verb: String,
    /// The call's error, when it failed (and what became of it).
    pub error: Option<String>,
    /// Filter: node → "feasible" or the rejection.
    pub verdicts: Vec<(String, String)>,
    /// Prioritize: node → (the extender's score, what it added to the node's total).
    pub scores: Vec<(String, i64, i64)>,
}

/// One Score plugin's part in a cycle.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct PluginScoreTrace {
    /// Plugin name.
    pub plugin: String,
    /// Weight.
    pub weight: i64,
    /// node → (raw, normalized, weighted).
    pub nodes: Vec<(String, i64, i64, i64)>,
}
