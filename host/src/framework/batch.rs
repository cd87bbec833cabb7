//! OpportunisticBatching, as upstream's `framework/runtime/batch.go` (v1.37): a profile keeps the scored nodes of
//! its last cycle, the chosen one popped, and when the next pod has the same signature it hands the best of them
//! to the scheduling cycle as a hint, which the cycle checks like a nominated node. Reusing the scores is sound
//! only when consecutive alike pods go one per node, which the hint's check ensures: the previous pod's node is
//! re-filtered first and, if the new pod still fits there, re-scored and put back among the candidates.
//!
//! The age limit is measured on the scheduler's clock (virtual in the simulator, so runs repeat) where upstream
//! reads the wall clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cycle_state::CycleState;
use super::interface::PodSignature;
use super::metrics::BatchMetrics;
use super::snapshot::Snapshot;
use super::status::Status;
use super::types::{NodeInfo, PodInfo};

/// How long a cached list may serve (upstream's `maxBatchAge`): a long run of alike pods, or a long gap
/// between two, rebuilds it from a full cycle.
pub const MAX_BATCH_AGE: Duration = Duration::from_millis(500);

/// `scheduler_batch_attempts_total{result}`: no hint could be given.
pub const ATTEMPT_NO_HINT: &str = "no_hint";
/// The hint was given and the pod went there.
pub const ATTEMPT_HINT_USED: &str = "hint_used";
/// The hint was given and the pod went elsewhere (the hinted node did not fit).
pub const ATTEMPT_HINT_NOT_USED: &str = "hint_not_used";

/// Why the cached list was dropped (`scheduler_batch_cache_flushed_total{reason}`), upstream's names.
pub mod flush {
    /// The previous cycle failed.
    pub const POD_FAILED: &str = "pod_failed";
    /// Another cycle (another profile's pod, a skipped or failed pod) came between.
    pub const POD_SKIPPED: &str = "pod_skipped";
    /// The pod is nominated to a node (preemption): it goes through its nomination instead.
    pub const POD_NOMINATED: &str = "pod_nominated";
    /// A cached node, or the previous pod's, is gone from the snapshot.
    pub const NODE_MISSING: &str = "node_missing";
    /// The cycle left no other node to cache.
    pub const EMPTY_LIST: &str = "empty_list";
    /// The list is older than `MAX_BATCH_AGE`.
    pub const EXPIRED: &str = "expired";
    /// The pod's signature differs from the list's.
    pub const POD_INCOMPATIBLE: &str = "pod_incompatible";
    /// The pod could not be signed.
    pub const POD_NOT_BATCHABLE: &str = "pod_not_batchable";
    /// Filtering the previous pod's node erred.
    pub const FILTER_ERROR: &str = "filter_error";
    /// PreScore erred while rescoring.
    pub const PRE_SCORE_ERROR: &str = "prescore_error";
    /// Score erred while rescoring.
    pub const RESCORE_ERROR: &str = "rescore_error";
    /// NormalizeScore erred while rescoring.
    pub const NORMALIZE_ERROR: &str = "normalize_error";
}

/// A scored node (upstream's `NodePluginScores`): its raw score from each Score plugin that ran, by plugin name, and
/// its total after NormalizeScore and weights. The raw scores let a rescore normalize again with one node added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoredNode {
    /// The node's name.
    pub name: String,
    /// Each Score plugin's raw score, in the plugins' order.
    pub raw: Vec<(Arc<str>, i64)>,
    /// The weighted total.
    pub total: i64,
}

/// What a successful cycle leaves besides its chosen node (upstream passes a sorted list or nil).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OtherNodes {
    /// It scored nothing: one node was feasible, or the nominated or hinted node was taken.
    NotScored,
    /// It scored this many other nodes and kept none: an unsigned pod's list could never serve, so it is not built.
    Unkept(usize),
    /// The other scored nodes, a heap in Go's layout (see [`heap`]) with the chosen node popped.
    Kept(Vec<ScoredNode>),
}

/// Go's `container/heap` over scored nodes, the higher total first (upstream's `nodeScoreHeap`; no extender
/// runs in a batching profile, so the randomizer is always 0 and totals alone order it). The order between equal
/// totals is whatever Go's sift-down leaves, which this replays exactly, so that hints come out in upstream's order.
pub mod heap {
    /// Go's `down(h, i0, n)` with `less(a, b)` meaning `a` goes first; true when the element moved.
    pub fn down<T>(h: &mut [T], i0: usize, n: usize, less: &impl Fn(&T, &T) -> bool) -> bool {
        let mut i = i0;
        loop {
            let j1 = 2 * i + 1;
            if j1 >= n {
                break;
            }
            let j = if j1 + 1 < n && less(&h[j1 + 1], &h[j1]) { j1 + 1 } else { j1 };
            if !less(&h[j], &h[i]) {
                break;
            }
            h.swap(i, j);
            i = j;
        }
        i > i0
    }

    /// Go's `heap.Init`.
    pub fn init<T>(h: &mut [T], less: &impl Fn(&T, &T) -> bool) {
        let n = h.len();
        for i in (0..n / 2).rev() {
            down(h, i, n, less);
        }
    }

    /// Go's `heap.Pop`: the first element out, the rest still a heap in Go's layout.
    pub fn pop<T>(h: &mut Vec<T>, less: &impl Fn(&T, &T) -> bool) -> Option<T> {
        let n = h.len().checked_sub(1)?;
        h.swap(0, n);
        down(h, 0, n, less);
        h.pop()
    }

    /// The order of scored nodes.
    pub fn by_total(a: &super::ScoredNode, b: &super::ScoredNode) -> bool {
        a.total > b.total
    }
}

/// What batching needs of its profile's runner (upstream's `batchHandle`).
pub trait BatchHandle {
    /// The profile's name, for the metrics.
    fn profile_name(&self) -> &str;
    /// Filter on one node, nominated pods not counted (upstream's `RunFilterPlugins`).
    fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
    /// PreScore with these candidates.
    fn run_pre_score_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status;
    /// Every Score plugin PreScore did not skip, on one node: the raw scores, by plugin.
    fn run_raw_score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Result<Vec<(Arc<str>, i64)>, Status>;
    /// NormalizeScore and weights across `scores` from their raw scores, setting each total.
    fn normalize_scores(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        scores: &mut [ScoredNode],
        snapshot: &Snapshot,
    ) -> Status;
}

/// The list kept from the last cycle that could cache one.
#[derive(Debug, Clone)]
struct BatchState {
    signature: PodSignature,
    /// A heap in Go's layout (see [`heap`]).
    sorted: Vec<ScoredNode>,
    /// When it was stored, on the scheduler's clock (ns).
    created: u64,
}

/// The last cycle that stored results.
#[derive(Debug, Clone, Default)]
struct SchedulingCycle {
    count: u64,
    chosen: String,
    succeeded: bool,
}

/// A profile's batching state (upstream's `OpportunisticBatch`).
#[derive(Debug, Default)]
pub struct OpportunisticBatch {
    state: Option<BatchState>,
    last_cycle: SchedulingCycle,
    /// Pods placed on their hint (upstream keeps the count for its tests).
    batched_pods: u64,
    /// GenericWorkload: the members of a PodGroup cycle share one cycle count, and may share the list.
    generic_workload: bool,
}

impl OpportunisticBatch {
    /// An empty state; `generic_workload` as the gate.
    pub fn new(generic_workload: bool) -> OpportunisticBatch {
        OpportunisticBatch { generic_workload, ..Default::default() }
    }

    /// Pods placed on the node they were hinted.
    pub fn batched_pods(&self) -> u64 {
        self.batched_pods
    }

    /// The hint for `pod` in scheduling cycle `cycle` (upstream's `GetNodeHint`): the best cached node once the
    /// previous pod's node has been re-checked, or None (and the reason counted) when the list cannot serve.
    /// `state` is the cycle's after PreFilter; `nominated` says the pod is nominated to a node; `now` is the
    /// scheduler's clock.
    #[allow(clippy::too_many_arguments)]
    pub fn get_node_hint(
        &mut self,
        h: &dyn BatchHandle,
        state: &CycleState,
        pod: &PodInfo,
        signature: Option<&PodSignature>,
        nominated: bool,
        cycle: u64,
        now: u64,
        snapshot: &Snapshot,
        metrics: &dyn BatchMetrics,
    ) -> Option<String> {
        let t0 = Instant::now();
        let hint = self.hint(h, state, pod, signature, nominated, cycle, now, snapshot, metrics);
        if hint.is_none() {
            metrics.batch_attempt(h.profile_name(), ATTEMPT_NO_HINT);
        }
        metrics.get_node_hint(h.profile_name(), hint.is_some(), t0.elapsed());
        hint
    }

    #[allow(clippy::too_many_arguments)]
    fn hint(
        &mut self,
        h: &dyn BatchHandle,
        state: &CycleState,
        pod: &PodInfo,
        signature: Option<&PodSignature>,
        nominated: bool,
        cycle: u64,
        now: u64,
        snapshot: &Snapshot,
        metrics: &dyn BatchMetrics,
    ) -> Option<String> {
        if !self.compatible(h, signature, nominated, cycle, now, metrics) {
            return None;
        }
        if !self.refresh_hint_candidates(h, state, pod, snapshot, metrics) {
            return None;
        }
        let st = self.state.as_mut()?;
        heap::pop(&mut st.sorted, &heap::by_total).map(|n| n.name)
    }

    /// Upstream's `StoreScheduleResults`: the cycle `cycle` placed its pod on `chosen`, `hinted` being the hint it
    /// had; `others` what it scored besides. A used hint keeps the list; otherwise the cycle's list replaces it,
    /// or it is dropped.
    #[allow(clippy::too_many_arguments)]
    pub fn store_schedule_results(
        &mut self,
        profile: &str,
        signature: Option<&PodSignature>,
        hinted: Option<&str>,
        chosen: &str,
        others: OtherNodes,
        cycle: u64,
        now: u64,
        metrics: &dyn BatchMetrics,
    ) {
        let t0 = Instant::now();
        self.last_cycle = SchedulingCycle { count: cycle, chosen: chosen.to_string(), succeeded: true };
        if hinted == Some(chosen) {
            metrics.batch_attempt(profile, ATTEMPT_HINT_USED);
            self.batched_pods += 1;
            metrics.store_schedule_results(profile, t0.elapsed());
            return;
        }
        if hinted.is_some() {
            metrics.batch_attempt(profile, ATTEMPT_HINT_NOT_USED);
        }
        match (signature, others) {
            (Some(sig), OtherNodes::Kept(others)) if !others.is_empty() => {
                self.state = Some(BatchState { signature: sig.clone(), sorted: others, created: now });
            }
            (_, others) => {
                let scored = match others {
                    OtherNodes::NotScored => 0,
                    OtherNodes::Unkept(n) => n,
                    OtherNodes::Kept(v) => v.len(),
                };
                let reason = if scored == 0 { flush::EMPTY_LIST } else { flush::POD_NOT_BATCHABLE };
                metrics.batch_cache_flushed(profile, reason);
                self.state = None;
            }
        }
        metrics.store_schedule_results(profile, t0.elapsed());
    }

    /// Whether the list can serve this pod (upstream's `batchStateCompatible`); counts why not.
    fn compatible(
        &mut self,
        h: &dyn BatchHandle,
        signature: Option<&PodSignature>,
        nominated: bool,
        cycle: u64,
        now: u64,
        metrics: &dyn BatchMetrics,
    ) -> bool {
        let Some(st) = self.state.as_ref().filter(|s| !s.sorted.is_empty()) else { return false };
        let flushed = |reason| {
            metrics.batch_cache_flushed(h.profile_name(), reason);
            false
        };
        // Another cycle came between (another profile's pod, a pod that failed or was skipped): its placement is
        // not reflected in the list. A PodGroup cycle's members share one count.
        if cycle != self.last_cycle.count + 1 && (!self.generic_workload || cycle != self.last_cycle.count) {
            return flushed(flush::POD_SKIPPED);
        }
        if !self.last_cycle.succeeded {
            return flushed(flush::POD_FAILED);
        }
        if nominated {
            return flushed(flush::POD_NOMINATED);
        }
        if signature.is_none_or(|s| **s != *st.signature) {
            return flushed(flush::POD_INCOMPATIBLE);
        }
        if now > st.created.saturating_add(MAX_BATCH_AGE.as_nanos() as u64) {
            return flushed(flush::EXPIRED);
        }
        true
    }

    /// Re-checks the previous pod's node for this pod (upstream's `refreshHintCandidates`): where it still fits,
    /// it is rescored and competes with the cached nodes again; where it does not, the cached nodes stand. False
    /// (counted) when the list cannot serve.
    fn refresh_hint_candidates(
        &mut self,
        h: &dyn BatchHandle,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        metrics: &dyn BatchMetrics,
    ) -> bool {
        let Some(last) = snapshot.get(&self.last_cycle.chosen).cloned() else {
            metrics.batch_cache_flushed(h.profile_name(), flush::NODE_MISSING);
            return false;
        };
        let s = h.run_filter_plugins(state, pod, &last);
        if s.is_success() {
            return self.rescore_hinted_node(h, state, pod, &last, snapshot, metrics);
        }
        if !s.is_rejected() {
            metrics.batch_cache_flushed(h.profile_name(), flush::FILTER_ERROR);
            return false;
        }
        true
    }

    /// Scores the previous pod's node again and normalizes across it and the cached nodes, then rebuilds the
    /// heap (upstream's `rescoreHintedNode`). PreScore sees every candidate, on a copy of the cycle's state so
    /// that nothing it writes reaches the cycle.
    fn rescore_hinted_node(
        &mut self,
        h: &dyn BatchHandle,
        state: &CycleState,
        pod: &PodInfo,
        last: &Arc<NodeInfo>,
        snapshot: &Snapshot,
        metrics: &dyn BatchMetrics,
    ) -> bool {
        let t0 = Instant::now();
        let ok = self.rescore(h, state, pod, last, snapshot, metrics);
        metrics.batch_rescore(h.profile_name(), t0.elapsed());
        ok
    }

    fn rescore(
        &mut self,
        h: &dyn BatchHandle,
        state: &CycleState,
        pod: &PodInfo,
        last: &Arc<NodeInfo>,
        snapshot: &Snapshot,
        metrics: &dyn BatchMetrics,
    ) -> bool {
        let profile = h.profile_name();
        let Some(st) = self.state.as_mut() else { return false };
        // The cached nodes in the heap's own order (upstream's `UnorderedList`), then the rescored one.
        let mut nodes: Vec<Arc<NodeInfo>> = Vec::with_capacity(st.sorted.len() + 1);
        for n in &st.sorted {
            let Some(info) = snapshot.get(&n.name) else {
                metrics.batch_cache_flushed(profile, flush::NODE_MISSING);
                return false;
            };
            nodes.push(info.clone());
        }
        nodes.push(last.clone());
        let mut rescore_state = state.clone();
        if !h.run_pre_score_plugins(&mut rescore_state, pod, &nodes, snapshot).is_success() {
            metrics.batch_cache_flushed(profile, flush::PRE_SCORE_ERROR);
            return false;
        }
        let raw = match h.run_raw_score_plugins(&rescore_state, pod, last) {
            Ok(raw) => raw,
            Err(_) => {
                metrics.batch_cache_flushed(profile, flush::RESCORE_ERROR);
                return false;
            }
        };
        let mut scores = st.sorted.clone();
        scores.push(ScoredNode { name: last.name.clone(), raw, total: 0 });
        if !h.normalize_scores(&rescore_state, pod, &mut scores, snapshot).is_success() {
            metrics.batch_cache_flushed(profile, flush::NORMALIZE_ERROR);
            return false;
        }
        heap::init(&mut scores, &heap::by_total);
        st.sorted = scores;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// Counts what batching reports.
    #[derive(Default)]
    struct Counts(Mutex<HashMap<String, u64>>);

    impl Counts {
        fn get(&self, k: &str) -> u64 {
            self.0.lock().unwrap().get(k).copied().unwrap_or(0)
        }
    }

    impl BatchMetrics for Counts {
        fn batch_attempt(&self, _p: &str, result: &'static str) {
            *self.0.lock().unwrap().entry(result.to_string()).or_default() += 1;
        }
        fn batch_cache_flushed(&self, _p: &str, reason: &'static str) {
            *self.0.lock().unwrap().entry(format!("flush:{reason}")).or_default() += 1;
        }
        fn batch_rescore(&self, _p: &str, _d: Duration) {
            *self.0.lock().unwrap().entry("rescore".into()).or_default() += 1;
        }
    }

    /// A runner whose Filter rejects the nodes listed in `full`, and whose only Score plugin gives each node the
    /// score in `score` (no normalization, weight 1).
    #[derive(Default)]
    struct Fake {
        full: Vec<String>,
        score: HashMap<String, i64>,
        filter_error: bool,
    }

    impl BatchHandle for Fake {
        fn profile_name(&self) -> &str {
            "p"
        }
        fn run_filter_plugins(&self, _s: &CycleState, _p: &PodInfo, node: &NodeInfo) -> Status {
            if self.filter_error {
                return Status::error("boom");
            }
            if self.full.contains(&node.name) {
                Status::unschedulable("full")
            } else {
                Status::success()
            }
        }
        fn run_pre_score_plugins(
            &self,
            _s: &mut CycleState,
            _p: &PodInfo,
            _n: &[Arc<NodeInfo>],
            _x: &Snapshot,
        ) -> Status {
            Status::success()
        }
        fn run_raw_score_plugins(
            &self,
            _s: &CycleState,
            _p: &PodInfo,
            n: &NodeInfo,
        ) -> Result<Vec<(Arc<str>, i64)>, Status> {
            Ok(vec![(Arc::from("S"), self.score[&n.name])])
        }
        fn normalize_scores(&self, _s: &CycleState, _p: &PodInfo, scores: &mut [ScoredNode], _x: &Snapshot) -> Status {
            for s in scores {
                s.total = s.raw.iter().map(|(_, v)| v).sum();
            }
            Status::success()
        }
    }

    fn snapshot(names: &[&str]) -> Snapshot {
        Snapshot::from_nodes(
            names
                .iter()
                .map(|n| crate::framework::testutil::node(serde_json::json!({"metadata": {"name": n}})))
                .collect(),
        )
    }

    fn pod() -> PodInfo {
        crate::framework::testutil::pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
        )
    }

    fn scored(list: &[(&str, i64)]) -> Vec<ScoredNode> {
        list.iter()
            .map(|(n, t)| ScoredNode { name: n.to_string(), raw: vec![(Arc::from("S"), *t)], total: *t })
            .collect()
    }

    fn sig(s: &str) -> PodSignature {
        Arc::from(s.as_bytes())
    }

    /// A batch that stored cycle 1's results: a chosen (score 90), b 80, c 70, d 60 left.
    fn stored(metrics: &Counts) -> OpportunisticBatch {
        let mut b = OpportunisticBatch::new(false);
        let mut all = scored(&[("a", 90), ("b", 80), ("c", 70), ("d", 60)]);
        heap::init(&mut all, &heap::by_total);
        let chosen = heap::pop(&mut all, &heap::by_total).unwrap();
        assert_eq!(chosen.name, "a");
        b.store_schedule_results("p", Some(&sig("x")), None, &chosen.name, OtherNodes::Kept(all), 1, 0, metrics);
        b
    }

    fn fake(full: &[&str]) -> Fake {
        Fake {
            full: full.iter().map(|s| s.to_string()).collect(),
            score: [("a", 90), ("b", 80), ("c", 70), ("d", 60)].into_iter().map(|(n, s)| (n.to_string(), s)).collect(),
            filter_error: false,
        }
    }

    #[test]
    fn a_pod_alike_gets_the_next_best_node_when_the_previous_node_is_full() {
        let m = Counts::default();
        let mut b = stored(&m);
        let snap = snapshot(&["a", "b", "c", "d"]);
        let h = fake(&["a"]);
        let hint = b.get_node_hint(&h, &CycleState::new(), &pod(), Some(&sig("x")), false, 2, 1, &snap, &m);
        assert_eq!(hint.as_deref(), Some("b"));
        b.store_schedule_results("p", Some(&sig("x")), Some("b"), "b", OtherNodes::NotScored, 2, 1, &m);
        assert_eq!((m.get(ATTEMPT_HINT_USED), b.batched_pods()), (1, 1));
        // The list is kept: the next pod alike gets c once b is full too.
        let h = fake(&["a", "b"]);
        let hint = b.get_node_hint(&h, &CycleState::new(), &pod(), Some(&sig("x")), false, 3, 2, &snap, &m);
        assert_eq!(hint.as_deref(), Some("c"));
        assert_eq!(m.get("rescore"), 0, "a full node is not rescored");
    }

    #[test]
    fn the_previous_node_still_fitting_is_rescored_and_wins_again() {
        let m = Counts::default();
        let mut b = stored(&m);
        let snap = snapshot(&["a", "b", "c", "d"]);
        let hint = b.get_node_hint(&fake(&[]), &CycleState::new(), &pod(), Some(&sig("x")), false, 2, 1, &snap, &m);
        assert_eq!(hint.as_deref(), Some("a"));
        assert_eq!(m.get("rescore"), 1);
    }

    #[test]
    fn a_different_signature_misses_and_flushes() {
        let m = Counts::default();
        let mut b = stored(&m);
        let snap = snapshot(&["a", "b", "c", "d"]);
        let hint = b.get_node_hint(&fake(&["a"]), &CycleState::new(), &pod(), Some(&sig("y")), false, 2, 1, &snap, &m);
        assert_eq!(hint, None);
        assert_eq!((m.get(ATTEMPT_NO_HINT), m.get("flush:pod_incompatible")), (1, 1));
    }

    #[test]
    fn an_unsignable_pod_gets_no_hint_and_stores_nothing() {
        let m = Counts::default();
        let mut b = stored(&m);
        let snap = snapshot(&["a", "b", "c", "d"]);
        let hint = b.get_node_hint(&fake(&["a"]), &CycleState::new(), &pod(), None, false, 2, 1, &snap, &m);
        assert_eq!(hint, None);
        assert_eq!(m.get("flush:pod_incompatible"), 1);
        b.store_schedule_results("p", None, None, "b", OtherNodes::Unkept(2), 2, 1, &m);
        assert_eq!(m.get("flush:pod_not_batchable"), 1);
        assert!(b.state.is_none());
    }

    #[test]
    fn an_old_list_expires() {
        let m = Counts::default();
        let mut b = stored(&m);
        let snap = snapshot(&["a", "b", "c", "d"]);
        let late = MAX_BATCH_AGE.as_nanos() as u64 + 1;
        let hint =
            b.get_node_hint(&fake(&["a"]), &CycleState::new(), &pod(), Some(&sig("x")), false, 2, late, &snap, &m);
        assert_eq!(hint, None);
        assert_eq!(m.get("flush:expired"), 1);
    }

    #[test]
    fn a_hint_that_no_longer_fits_is_not_used_and_the_cycle_s_list_replaces_it() {
        let m = Counts::default();
        let mut b = stored(&m);
        let snap = snapshot(&["a", "b", "c", "d"]);
        let hint = b.get_node_hint(&fake(&["a"]), &CycleState::new(), &pod(), Some(&sig("x")), false, 2, 1, &snap, &m);
        assert_eq!(hint.as_deref(), Some("b"));
        // The cycle found b full after all and scored the rest: c chosen, d left.
        b.store_schedule_results(
            "p",
            Some(&sig("x")),
            Some("b"),
            "c",
            OtherNodes::Kept(scored(&[("d", 60)])),
            2,
            1,
            &m,
        );
        assert_eq!(m.get(ATTEMPT_HINT_NOT_USED), 1);
        let hint = b.get_node_hint(
            &fake(&["a", "b", "c"]),
            &CycleState::new(),
            &pod(),
            Some(&sig("x")),
            false,
            3,
            2,
            &snap,
            &m,
        );
        assert_eq!(hint.as_deref(), Some("d"));
    }

    #[test]
    fn a_cycle_between_a_nomination_a_missing_node_or_a_filter_error_flushes() {
        let snap = snapshot(&["a", "b", "c", "d"]);
        let cases: [(&str, u64, bool, &Snapshot, bool); 4] = [
            ("flush:pod_skipped", 3, false, &snap, false),
            ("flush:pod_nominated", 2, true, &snap, false),
            ("flush:node_missing", 2, false, &snapshot(&["b", "c", "d"]), false),
            ("flush:filter_error", 2, false, &snap, true),
        ];
        for (reason, cycle, nominated, snap, filter_error) in cases {
            let m = Counts::default();
            let mut b = stored(&m);
            let h = Fake { filter_error, ..fake(&["a"]) };
            let hint = b.get_node_hint(&h, &CycleState::new(), &pod(), Some(&sig("x")), nominated, cycle, 1, snap, &m);
            assert_eq!(hint, None, "{reason}");
            assert_eq!(m.get(reason), 1, "{reason}");
        }
    }

    #[test]
    fn a_cycle_that_scored_one_node_leaves_nothing_to_cache() {
        let m = Counts::default();
        let mut b = OpportunisticBatch::new(false);
        b.store_schedule_results("p", Some(&sig("x")), None, "a", OtherNodes::NotScored, 1, 0, &m);
        assert_eq!(m.get("flush:empty_list"), 1);
        let snap = snapshot(&["a"]);
        assert_eq!(
            b.get_node_hint(&fake(&[]), &CycleState::new(), &pod(), Some(&sig("x")), false, 2, 1, &snap, &m),
            None
        );
    }

    /// Go's `heap.Pop` order over equal totals, as `container/heap` gives it for the same slice.
    #[test]
    fn pops_follow_go_s_heap_over_ties() {
        let mut h = scored(&[("n0", 5), ("n1", 9), ("n2", 9), ("n3", 5), ("n4", 9)]);
        heap::init(&mut h, &heap::by_total);
        let order: Vec<String> = std::iter::from_fn(|| heap::pop(&mut h, &heap::by_total).map(|n| n.name)).collect();
        // Init: [n1 n4 n2 n3 n0]; pops: n1, then n4 (left child beats an equal right), n2, then n3 before n0.
        assert_eq!(order, ["n1", "n4", "n2", "n3", "n0"]);
    }
}
