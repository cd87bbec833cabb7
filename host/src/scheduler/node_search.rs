//! The node search (upstream's `findNodesThatPassFilters` and `numFeasibleNodesToFind`): Filter over the nodes in
//! parallel rounds, starting where the last cycle stopped, until enough feasible nodes are found.

use std::sync::Arc;

use super::Scheduler;
use crate::framework::{Code, CycleState, CycleTrace, Diagnosis, Framework, NodeInfo, PodInfo, Snapshot, Status};

/// Upstream's floor for how many feasible nodes to look for before scoring.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Upstream's floor for the adaptive percentage.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// How many feasible nodes to find before scoring (upstream `numFeasibleNodesToFind`): all of a small cluster,
/// else the configured percentage or the adaptive one (50% − nodes/125, at least 5%), at least 100.
pub fn num_feasible_nodes_to_find(percentage_of_nodes_to_score: Option<i32>, num_all_nodes: usize) -> usize {
    let pct = percentage_of_nodes_to_score.unwrap_or(0);
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND || pct >= 100 {
        return num_all_nodes;
    }
    let mut adaptive = pct as i64;
    if adaptive <= 0 {
        adaptive = 50 - (num_all_nodes as i64) / 125;
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND as i64 {
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND as i64;
        }
    }
    let n = num_all_nodes * adaptive as usize / 100;
    n.max(MIN_FEASIBLE_NODES_TO_FIND)
}

impl Scheduler {
    /// Filter across nodes: in parallel, in rounds, starting at `start` (where the last cycle stopped), until
    /// enough feasible nodes are found. Each plugin sees a whole chunk of nodes at once (one boundary crossing for
    /// a Wasm plugin). Deterministic: the feasible set is the first `n` in rotated order. An Error status aborts
    /// the cycle. Returns the feasible nodes and where the next search starts.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn find_nodes_that_pass_filters(
        &self,
        fwk: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
        start: usize,
        diagnosis: &mut Diagnosis,
        mut trace: Option<&mut CycleTrace>,
    ) -> Result<(Vec<Arc<NodeInfo>>, usize), Status> {
        let n = nodes.len();
        if n == 0 {
            return Ok((Vec::new(), start));
        }
        let to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score(), n);
        let start = start % n;
        let parallelizer = fwk.parallelizer();
        let mut feasible: Vec<Arc<NodeInfo>> = Vec::with_capacity(to_find.min(n));
        let mut processed = 0usize;
        let mut evaluated = 0usize;
        while evaluated < n && feasible.len() < to_find {
            let need = to_find - feasible.len();
            let round = if evaluated == 0 { need } else { need.max(parallelizer.threads() * 32) }.min(n - evaluated);
            let batch: Vec<&NodeInfo> = (evaluated..evaluated + round).map(|i| &*nodes[(start + i) % n]).collect();
            let verdicts: Vec<Vec<Status>> = parallelizer
                .map_chunks(&batch, |_, chunk| fwk.run_filter_plugins_on_nodes(state, pod, snapshot, chunk));
            for (i, s) in verdicts.into_iter().flatten().enumerate() {
                let pos = evaluated + i;
                let node = &nodes[(start + pos) % n];
                if feasible.len() >= to_find {
                    break;
                }
                processed = pos + 1;
                if let Some(t) = trace.as_deref_mut() {
                    t.filter.push((node.name.clone(), if s.is_success() { "feasible".into() } else { s.to_string() }));
                }
                if s.is_success() {
                    feasible.push(node.clone());
                } else if s.code() == Code::Error {
                    return Err(s);
                } else {
                    if let Some(p) = s.plugin() {
                        diagnosis.unschedulable_plugins.insert(p.to_string());
                    }
                    diagnosis.node_to_status.insert(node.name.clone(), s);
                }
            }
            evaluated += round;
        }
        if let Some(t) = trace {
            t.not_evaluated = n - processed;
        }
        Ok((feasible, (start + processed) % n))
    }
}
