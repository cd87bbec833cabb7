//! The resource-allocation scorer both node-resources plugins score through, as upstream's
//! `noderesources/resource_allocation.go`: the scored resources and their weights, the pod's requests of them, and
//! per node the allocatable and requested quantities of the resources the node offers. Also the per-resource
//! scores of NodeResourcesFit's strategies (upstream's `least_allocated.go`, `most_allocated.go`,
//! `requested_to_capacity_ratio.go`).

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;

use super::is_scalar_resource_name;
use crate::framework::types::{CPU, EPHEMERAL_STORAGE, MEMORY};
use crate::framework::{CycleState, NodeInfo, PodInfo, Status, MAX_NODE_SCORE};

/// Highest utilization of a RequestedToCapacityRatio shape point, in percent.
pub(crate) const MAX_UTILIZATION: i64 = 100;

/// A resource and its weight in scoring.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    /// Resource name (`cpu`, `memory`, `ephemeral-storage`, an extended resource, a hugepage size ...).
    pub name: String,
    /// Weight; 0 or absent means 1 (upstream defaulting).
    #[serde(default)]
    pub weight: i64,
}

impl ResourceSpec {
    /// A resource with a weight.
    pub fn new(name: &str, weight: i64) -> ResourceSpec {
        ResourceSpec { name: name.to_string(), weight }
    }
}

/// The default scored resources: cpu and memory, weight 1 each.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new(CPU, 1), ResourceSpec::new(MEMORY, 1)]
}

/// Where a scored resource is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceKind {
    /// `cpu`.
    Cpu,
    /// `memory`.
    Memory,
    /// `ephemeral-storage`.
    EphemeralStorage,
    /// Anything else: looked up by name in the scalar resources.
    Named,
}

/// A scored resource compiled once at construction.
#[derive(Debug, Clone)]
pub(crate) struct ScoredResource {
    /// Resource name.
    pub name: String,
    /// Weight (1–100).
    pub weight: i64,
    /// Where to read it.
    pub kind: ResourceKind,
    /// A scalar resource is left out of scoring when the pod does not request it.
    pub scalar: bool,
}

impl ScoredResource {
    /// Compiles a (defaulted, validated) resource spec.
    fn new(spec: &ResourceSpec) -> ScoredResource {
        let kind = match spec.name.as_str() {
            CPU => ResourceKind::Cpu,
            MEMORY => ResourceKind::Memory,
            EPHEMERAL_STORAGE => ResourceKind::EphemeralStorage,
            _ => ResourceKind::Named,
        };
        ScoredResource {
            name: spec.name.clone(),
            weight: spec.weight,
            kind,
            scalar: is_scalar_resource_name(&spec.name),
        }
    }
}

/// PreScore data of both plugins: the pod's requests of the scored resources, in order. Cloning shares them (they
/// never change within a cycle).
#[derive(Debug, Clone)]
struct PreScoreState(Arc<Vec<i64>>);

/// Upstream's `resourceAllocationScorer`: which resources are scored, and whether quantities are the plain requests
/// (`USE_REQUESTED`, BalancedAllocation) or count the defaults for containers that request no cpu or memory (Fit).
/// A constant rather than a field: the per-node loop then compiles without the branch, once per plugin.
#[derive(Debug, Clone)]
pub(crate) struct ResourceAllocationScorer<const USE_REQUESTED: bool> {
    /// The scored resources, in the order of the args.
    pub resources: Vec<ScoredResource>,
    /// The CycleState key the plugin's PreScore keeps the pod's requests under.
    pre_score_state_key: &'static str,
}

impl<const USE_REQUESTED: bool> ResourceAllocationScorer<USE_REQUESTED> {
    /// A scorer over the (defaulted, validated) resource specs.
    pub fn new(specs: &[ResourceSpec], pre_score_state_key: &'static str) -> Self {
        ResourceAllocationScorer { resources: specs.iter().map(ScoredResource::new).collect(), pre_score_state_key }
    }

    /// The pod's requests of the scored resources, in order. Without `USE_REQUESTED`, cpu and memory count the
    /// defaults for containers that set none (upstream's `NonMissingContainerRequests`).
    pub fn pod_requests(&self, pod: &PodInfo) -> Vec<i64> {
        self.resources.iter().map(|r| self.pod_request(pod, r)).collect()
    }

    fn pod_request(&self, pod: &PodInfo, r: &ScoredResource) -> i64 {
        let non_zero = !USE_REQUESTED;
        match r.kind {
            // Only NodeResourcesFit scores without USE_REQUESTED, and its scorer leaves pod-level requests out.
            ResourceKind::Cpu if non_zero => pod.fit_score_milli_cpu,
            ResourceKind::Cpu => pod.requests.milli_cpu,
            ResourceKind::Memory if non_zero => pod.fit_score_memory,
            ResourceKind::Memory => pod.requests.memory,
            ResourceKind::EphemeralStorage => pod.requests.ephemeral_storage,
            ResourceKind::Named => pod.requests.scalar.get(r.name.as_str()).copied().unwrap_or(0),
        }
    }

    /// Keeps the pod's requests (from `pod_requests`) for Score.
    pub fn write_pre_score(&self, state: &mut CycleState, requests: Vec<i64>) {
        state.write(self.pre_score_state_key, PreScoreState(Arc::new(requests)));
    }

    /// The pod's requests as PreScore kept them, or computed now when PreScore did not run (as upstream's Score
    /// does then).
    pub fn requests<'a>(&self, state: &'a CycleState, pod: &PodInfo) -> Cow<'a, [i64]> {
        match state.read::<PreScoreState>(self.pre_score_state_key) {
            Some(PreScoreState(reqs)) => Cow::Borrowed(reqs.as_slice()),
            None => Cow::Owned(self.pod_requests(pod)),
        }
    }

    /// The batched Score of a plugin whose node score is `score(node, pod requests)`: the cycle state is read once
    /// per batch, not once per node.
    pub fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
        score: impl Fn(&NodeInfo, &[i64]) -> i64,
    ) -> Status {
        let reqs = self.requests(state, pod);
        for (n, o) in nodes.iter().zip(out.iter_mut()) {
            *o = score(n, &reqs);
        }
        Status::success()
    }

    /// `(resource, allocatable, requested on the node including the pod, the pod's request)` for each scored
    /// resource that takes part on `node`: a scalar resource the pod does not request, or a resource the node does not offer, is left
    /// out, as upstream's `score` leaves out resources whose allocatable is 0.
    ///
    /// A plain loop over a callback rather than an iterator chain: this runs for every node in every cycle, and
    /// the chain's closures were not inlined (a tenth of a whole cycle's instructions went to them).
    #[inline(always)]
    pub fn for_each_allocation(
        &self,
        node: &NodeInfo,
        pod_requests: &[i64],
        mut f: impl FnMut(&ScoredResource, i64, i64, i64),
    ) {
        for (r, &req) in self.resources.iter().zip(pod_requests) {
            let (alloc, requested) = self.allocatable_requested(node, r, req);
            if alloc != 0 {
                f(r, alloc, requested, req);
            }
        }
    }

    /// Upstream's `calculateResourceAllocatableRequest`: `(allocatable, requested including the pod)`, `(0, 0)`
    /// when the resource does not take part. Without `USE_REQUESTED`, the node's cpu and memory are its non-zero
    /// requests.
    #[inline(always)]
    pub fn allocatable_requested(&self, node: &NodeInfo, r: &ScoredResource, pod_request: i64) -> (i64, i64) {
        if pod_request == 0 && r.scalar {
            return (0, 0);
        }
        let used = if USE_REQUESTED { &node.requested } else { &node.non_zero_requested };
        match r.kind {
            ResourceKind::Cpu => (node.allocatable.milli_cpu, used.milli_cpu + pod_request),
            ResourceKind::Memory => (node.allocatable.memory, used.memory + pod_request),
            ResourceKind::EphemeralStorage => {
                (node.allocatable.ephemeral_storage, node.requested.ephemeral_storage + pod_request)
            }
            ResourceKind::Named => match node.allocatable.scalar.get(r.name.as_str()) {
                Some(&a) => (a, node.requested.scalar.get(r.name.as_str()).copied().unwrap_or(0) + pod_request),
                None => (0, 0),
            },
        }
    }
}

/// `(capacity - requested) * 100 / capacity`, 0 when over capacity (upstream `leastRequestedScore`).
pub(crate) fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    mul_div(capacity - requested, MAX_NODE_SCORE, capacity)
}

/// `a * b / c` for non-negative `a`, `b` and positive `c`: in i64 as upstream, and in i128 only where i64 would
/// overflow (upstream would wrap there). 128-bit division is a library call, ~6× an i64 one, in a per-node loop.
fn mul_div(a: i64, b: i64, c: i64) -> i64 {
    match a.checked_mul(b) {
        Some(p) => p / c,
        None => (a as i128 * b as i128 / c as i128) as i64,
    }
}

/// `requested * 100 / capacity`, requested capped at capacity (upstream `mostRequestedScore`).
pub(crate) fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    let requested = requested.min(capacity);
    mul_div(requested, MAX_NODE_SCORE, capacity)
}

/// Upstream's `BuildBrokenLinearFunction` over `(utilization, score)` points with increasing utilization.
pub(crate) fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(u, s)) in shape.iter().enumerate() {
        if p <= u {
            if i == 0 {
                return s;
            }
            let (pu, ps) = shape[i - 1];
            return ps + (s - ps) * (p - pu) / (u - pu);
        }
    }
    shape.last().map(|&(_, s)| s).unwrap_or(0)
}

/// RequestedToCapacityRatio's per-resource score: the shape at the utilization in percent (100 when over capacity).
pub(crate) fn requested_to_capacity_ratio_score(shape: &[(i64, i64)], requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, MAX_UTILIZATION);
    }
    let utilization = mul_div(requested, MAX_UTILIZATION, capacity);
    broken_linear(shape, utilization)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_of_huge_quantities_do_not_wrap() {
        // i64 would overflow in `* 100`; the result is still the exact ratio.
        assert_eq!(least_requested_score(0, i64::MAX), 100);
        assert_eq!(most_requested_score(i64::MAX / 2, i64::MAX), 49);
        assert_eq!(least_requested_score(3, 10), 70, "the common case, in i64");
    }

    #[test]
    fn broken_linear_function() {
        let shape = [(10, 10), (50, 100), (100, 0)];
        for (p, want) in [(0, 10), (10, 10), (30, 55), (50, 100), (75, 50), (100, 0), (120, 0)] {
            assert_eq!(broken_linear(&shape, p), want, "p={p}");
        }
    }
}
