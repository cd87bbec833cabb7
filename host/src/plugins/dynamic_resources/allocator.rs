//! The structured-parameters allocator (upstream `k8s.io/dynamic-resource-allocation/structured`, the
//! "incubating" implementation kube-scheduler v1.37 runs with its default feature gates: prioritized lists, admin
//! access, device taints, partitionable devices, binding conditions and consumable capacity).
//!
//! For one node it gathers the pools of ResourceSlices that reach the node (`nodeName`, `allNodes`,
//! `nodeSelector`; only the newest generation of each pool), then searches, depth first with backtracking as
//! upstream, for devices that satisfy every request of every claim: the DeviceClass's and the request's CEL
//! selectors, `ExactCount` or `All`, `firstAvailable` sub-requests in order, `matchAttribute` constraints, not
//! already allocated (in a claim's status or in flight) unless the request asks for admin access, no NoSchedule or
//! NoExecute taint (the device's own or a DeviceTaintRule's) the request does not tolerate, and enough of the
//! pool's shared counters left for a partitionable device, and enough capacity for what the request asks (a device
//! that allows multiple allocations is shared by claims while its capacity lasts, each share with its own ID).
//! `distinctAttribute` constraints want every device's value different. Pools are searched in (driver, pool) order, those with
//! binding conditions last, slices in name order, as upstream's since v1.36; incomplete and invalid pools serve
//! nothing.

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rustc_hash::{FxHashMap, FxHashSet};

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, CounterSet, Device, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceAttribute,
    DeviceCapacity, DeviceClass, DeviceRequestAllocationResult, DeviceSelector, DeviceTaint, DeviceTaintRule,
    DeviceToleration, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use thiserror::Error;

use super::cel::{CelCache, DeviceView};
use crate::framework::labels::{CompiledNodeSelector, Labels};

/// Upstream `AllocationResultsMaxSize`: the most devices one claim may get.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;
const MODE_EXACT_COUNT: &str = "ExactCount";
const MODE_ALL: &str = "All";
/// The error when nothing fits on the node and some pool there is invalid (upstream `ErrFailedAllocationOnNode`):
/// the node is unschedulable, the pod not in error.
pub const INVALID_POOLS: &str = "invalid resource pools were encountered";

/// A device, named as allocation results name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The driver.
    pub driver: String,
    /// The pool within the driver.
    pub pool: String,
    /// The device within the pool.
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Devices that claims hold, counted per result, so that the claims can be counted in and out one at a time: the
/// plugin keeps the API's claims' devices across cycles and changes them per changed claim, instead of gathering
/// every claim's results per pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeldDevices {
    /// Devices held whole, with how many results hold each (one, unless claims disagree).
    whole: FxHashMap<DeviceId, i64>,
    /// Devices that allow multiple allocations: how many shares hold each, and the capacity they consume together
    /// (milli-units).
    shares: FxHashMap<DeviceId, (i64, ConsumedCapacity)>,
}

impl HeldDevices {
    /// Counts in (`sign` 1) or out (`sign` -1) what the claim's allocation holds (upstream
    /// `ListAllAllocatedDevices`): results with admin access hold nothing, results with a share ID hold the capacity
    /// they consumed rather than the device.
    pub fn count(&mut self, claim: &ResourceClaim, sign: i64) {
        let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
        let results = allocation.and_then(|a| a.devices.as_ref()).and_then(|d| d.results.as_deref());
        for r in results.unwrap_or(&[]) {
            let id = DeviceId { driver: r.driver.clone(), pool: r.pool.clone(), device: r.device.clone() };
            if r.share_id.is_some() {
                let consumed = r
                    .consumed_capacity
                    .iter()
                    .flatten()
                    .map(|(name, q)| (name.as_str(), crate::framework::quantity::parse_milli(&q.0).unwrap_or(0)));
                self.hold_share(id, consumed, sign);
            } else if r.admin_access != Some(true) {
                self.hold(id, sign);
            }
        }
    }

    /// Counts one holder of the whole device in or out.
    pub fn hold(&mut self, id: DeviceId, sign: i64) {
        match self.whole.entry(id) {
            Entry::Occupied(mut e) => {
                *e.get_mut() += sign;
                if *e.get() == 0 {
                    e.remove();
                }
            }
            Entry::Vacant(e) => {
                e.insert(sign);
            }
        }
    }

    /// Counts one share of the device, consuming `consumed`, in or out.
    pub fn hold_share<'c>(&mut self, id: DeviceId, consumed: impl IntoIterator<Item = (&'c str, i64)>, sign: i64) {
        let mut e = match self.shares.entry(id) {
            Entry::Occupied(e) => e,
            Entry::Vacant(e) => e.insert_entry(Default::default()),
        };
        let (shares, capacity) = e.get_mut();
        *shares += sign;
        for (name, v) in consumed {
            *capacity.entry(name.to_string()).or_default() += sign * v;
        }
        if *shares == 0 {
            e.remove();
        }
    }
}

/// Every device claims hold, as the allocator reads it: the API's claims' (kept across cycles) and, on top, what
/// this scheduler changed that the API does not show yet (claims it wrote or created, allocations in flight).
#[derive(Clone, Copy)]
pub struct AllocatedDevices<'a> {
    /// The devices of the claims as the API lists them.
    pub api: &'a HeldDevices,
    /// The scheduler's changes: its newer copies counted in and the API's copies they replace counted out.
    pub ours: &'a HeldDevices,
}

impl AllocatedDevices<'_> {
    /// Whether some claim may hold a whole device (false: none does).
    pub fn holds_any(&self) -> bool {
        !self.api.whole.is_empty() || !self.ours.whole.is_empty()
    }

    /// Whether some claim holds the whole device.
    pub fn contains(&self, id: &DeviceId) -> bool {
        let held = |h: &HeldDevices| h.whole.get(id).copied().unwrap_or(0);
        held(self.api) + held(self.ours) > 0
    }

    /// Whether some share of the device is allocated.
    pub fn is_shared(&self, id: &DeviceId) -> bool {
        let shares = |h: &HeldDevices| h.shares.get(id).map_or(0, |s| s.0);
        shares(self.api) + shares(self.ours) > 0
    }

    /// The capacity the device's allocated shares consume, when it has some.
    pub fn shared(&self, id: &DeviceId) -> Option<std::borrow::Cow<'_, ConsumedCapacity>> {
        use std::borrow::Cow;
        match (self.api.shares.get(id), self.ours.shares.get(id)) {
            (None, None) => None,
            (Some((n, c)), None) | (None, Some((n, c))) => (*n > 0).then_some(Cow::Borrowed(c)),
            (Some((a, api)), Some((o, ours))) => (a + o > 0).then(|| {
                let mut sum = api.clone();
                for (name, v) in ours {
                    *sum.entry(name.clone()).or_default() += v;
                }
                Cow::Owned(sum)
            }),
        }
    }
}

/// Why a claim cannot be allocated at all (a broken claim, class, selector or pool), as opposed to not fitting on
/// this node. The message is upstream's.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct AllocatorError(pub String);

/// `namespace/name` of a claim, as upstream's `klog.KObj` prints it.
pub fn claim_ref(claim: &ResourceClaim) -> String {
    format!("{}/{}", claim.metadata.namespace.as_deref().unwrap_or(""), claim.metadata.name.as_deref().unwrap_or(""))
}

/// A request of a claim, as errors name it: `claim <namespace>/<name>, request <request>[/<sub-request>]`.
struct RequestAt<'a> {
    claim: &'a ResourceClaim,
    parent: Option<&'a str>,
    name: &'a str,
}

impl std::fmt::Display for RequestAt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "claim {}, request ", claim_ref(self.claim))?;
        match self.parent {
            Some(p) => write!(f, "{p}/{}", self.name),
            None => f.write_str(self.name),
        }
    }
}

/// One pool's slices that reach the node (upstream `Pool`).
struct Pool<'a> {
    driver: &'a str,
    name: &'a str,
    /// The slices with devices that reach the node, by name.
    slices: Vec<&'a ResourceSlice>,
    /// The pool's other device slices (they reach other nodes): their allocated devices consume counters too.
    elsewhere: Vec<&'a ResourceSlice>,
    /// The pool's counter sets, by name (partitionable devices).
    counter_sets: BTreeMap<&'a str, &'a CounterSet>,
    incomplete: bool,
    invalid: Option<String>,
}

/// A pool as [`gather_pools`] finds it for a node, by indices into the slices, with its devices' IDs: kept per node
/// in [`SlicesByNode`] while the slices are the same objects, so a cycle does not gather and validate every node's
/// pools again nor name every device again.
#[derive(Debug)]
struct KeptPool {
    /// A slice of the pool, for the driver's and the pool's names.
    named_by: usize,
    slices: Vec<usize>,
    elsewhere: Vec<usize>,
    /// The counter sets: (slice, index in its `sharedCounters`).
    counter_sets: Vec<(usize, usize)>,
    incomplete: bool,
    invalid: Option<String>,
    /// Per slice (as `slices`), per device: its ID.
    ids: Vec<Vec<DeviceId>>,
}

impl KeptPool {
    fn pool<'a>(&self, slices: &'a [Arc<ResourceSlice>]) -> Pool<'a> {
        let spec = &slices[self.named_by].spec;
        let counter_sets = self
            .counter_sets
            .iter()
            .map(|&(sl, i)| {
                let set = &slices[sl].spec.shared_counters.as_ref().expect("indexed counter sets")[i];
                (set.name.as_str(), set)
            })
            .collect();
        Pool {
            driver: &spec.driver,
            name: &spec.pool.name,
            slices: self.slices.iter().map(|&i| &*slices[i]).collect(),
            elsewhere: self.elsewhere.iter().map(|&i| &*slices[i]).collect(),
            counter_sets,
            incomplete: self.incomplete,
            invalid: self.invalid.clone(),
        }
    }
}

/// A node's pools, as kept: valid for the node's labels when the slices' node selection read them.
#[derive(Debug)]
struct KeptPools {
    partitionable: bool,
    labels: Option<Labels>,
    pools: Vec<KeptPool>,
}

/// Nodes whose pools are kept, at most: past it the kept pools start again (nodes gone leave theirs behind until then).
const MAX_NODES_KEPT: usize = 100_000;

fn selector_matches(sel: &NodeSelector, node: &str, labels: &Labels) -> Result<bool, String> {
    Ok(CompiledNodeSelector::new(sel)?.matches(node, labels))
}

/// Upstream `NodeMatches`: a node name, all nodes, or a node selector; none of them matches no node. `read` is set
/// when the answer depended on the node's labels.
fn node_matches(
    name: Option<&str>,
    all: Option<bool>,
    sel: Option<&NodeSelector>,
    node: &str,
    labels: &Labels,
    read: &mut bool,
) -> Result<bool, String> {
    match (name.unwrap_or(""), all == Some(true), sel) {
        (n, _, _) if !n.is_empty() => Ok(n == node),
        (_, true, _) => Ok(true),
        (_, _, Some(s)) => {
            *read = true;
            selector_matches(s, node, labels)
        }
        _ => Ok(false),
    }
}

fn has_counters(slice: &ResourceSlice) -> bool {
    slice.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty())
}

/// Upstream `GatherPools` (DRAPartitionableDevices on): the newest generation of every pool with slices for this
/// node. A pool whose slices do not all reach the node is complete when the rest of its current generation exists
/// (slices with counter sets, or devices for other nodes), and left out when a newer generation exists. Pools come
/// in (driver, pool) order, those with devices that have binding conditions last, as upstream's since v1.36.
fn gather_pools(
    slices: &[Arc<ResourceSlice>],
    by_node: &SlicesByNode,
    node: &str,
    labels: &Labels,
    partitionable: bool,
) -> Result<KeptPools, AllocatorError> {
    let mut read_labels = false;
    let mut pools: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for i in by_node.for_node(node) {
        let slice = &slices[i];
        let spec = &slice.spec;
        // Without DRAPartitionableDevices, upstream's allocator skips the slices that need it.
        if !partitionable && (spec.per_device_node_selection.is_some() || has_counters(slice)) {
            continue;
        }
        let failed = |what: String, e: String| {
            AllocatorError(format!(
                "gather pool information: failed to perform node selection for {what}slice {}: {e}",
                slice.metadata.name.as_deref().unwrap_or("")
            ))
        };
        let relevant = if spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
            || spec.all_nodes == Some(true)
            || spec.node_selector.is_some()
        {
            node_matches(
                spec.node_name.as_deref(),
                spec.all_nodes,
                spec.node_selector.as_ref(),
                node,
                labels,
                &mut read_labels,
            )
            .map_err(|e| failed(String::new(), e))?
        } else if spec.per_device_node_selection == Some(true) {
            let mut any = false;
            for d in spec.devices.iter().flatten() {
                if node_matches(
                    d.node_name.as_deref(),
                    d.all_nodes,
                    d.node_selector.as_ref(),
                    node,
                    labels,
                    &mut read_labels,
                )
                .map_err(|e| failed(format!("device {} in ", d.name), e))?
                {
                    any = true;
                    break;
                }
            }
            any
        } else {
            false
        };
        if !relevant {
            continue;
        }
        let pool = pools.entry((spec.driver.as_str(), spec.pool.name.as_str())).or_default();
        match pool.first().map(|&s| slices[s].spec.pool.generation) {
            Some(g) if spec.pool.generation < g => continue,
            Some(g) if spec.pool.generation > g => pool.clear(),
            _ => {}
        }
        pool.push(i);
    }
    let mut result = Vec::new();
    let mut with_binding_conditions = Vec::new();
    for ((driver, name), mut here) in pools {
        let named_by = here[0];
        let generation = slices[named_by].spec.pool.generation;
        let count = slices[named_by].spec.pool.resource_slice_count;
        let mut elsewhere = Vec::new();
        if here.len() as i64 != count {
            let mut all = Vec::new();
            let mut obsolete = false;
            for (i, s) in slices.iter().enumerate().filter(|(_, s)| s.spec.driver == driver && s.spec.pool.name == name)
            {
                match s.spec.pool.generation.cmp(&generation) {
                    std::cmp::Ordering::Equal => all.push(i),
                    std::cmp::Ordering::Greater => obsolete = true,
                    std::cmp::Ordering::Less => {}
                }
            }
            if obsolete {
                continue;
            }
            if all.len() as i64 != count {
                result.push(KeptPool {
                    named_by,
                    slices: Vec::new(),
                    elsewhere: Vec::new(),
                    counter_sets: Vec::new(),
                    incomplete: true,
                    invalid: None,
                    ids: Vec::new(),
                });
                continue;
            }
            elsewhere = all.into_iter().filter(|i| !here.contains(i)).collect();
        }
        here.sort_by(|&a, &b| slices[a].metadata.name.cmp(&slices[b].metadata.name));
        let (counter_slices, device_slices): (Vec<_>, Vec<_>) =
            here.into_iter().partition(|&i| has_counters(&slices[i]));
        let (counter_elsewhere, elsewhere): (Vec<_>, Vec<_>) =
            elsewhere.into_iter().partition(|&i| has_counters(&slices[i]));
        let mut pool = KeptPool {
            named_by,
            slices: device_slices,
            elsewhere,
            counter_sets: Vec::new(),
            incomplete: false,
            invalid: None,
            ids: Vec::new(),
        };
        pool.invalid = validate_pool(slices, &mut pool, counter_slices.iter().chain(&counter_elsewhere));
        if pool.invalid.is_some() {
            pool.slices.clear();
            pool.elsewhere.clear();
        }
        pool.ids = pool
            .slices
            .iter()
            .map(|&i| {
                let ids = slices[i].spec.devices.iter().flatten();
                ids.map(|d| DeviceId { driver: driver.into(), pool: name.into(), device: d.name.clone() }).collect()
            })
            .collect();
        let binding = pool
            .slices
            .iter()
            .flat_map(|&i| slices[i].spec.devices.iter().flatten())
            .any(|d| d.binding_conditions.is_some());
        if binding {
            with_binding_conditions.push(pool);
        } else {
            result.push(pool);
        }
    }
    result.extend(with_binding_conditions);
    Ok(KeptPools { partitionable, labels: read_labels.then(|| labels.clone()), pools: result })
}

/// Upstream `buildPool`'s checks: device names unique among the slices for the node, counter set names unique, and
/// every counter a device consumes declared by the pool. Fills the pool's counter sets; the reason when invalid.
fn validate_pool<'s>(
    slices: &[Arc<ResourceSlice>],
    pool: &mut KeptPool,
    counter_slices: impl Iterator<Item = &'s usize>,
) -> Option<String> {
    let mut names = FxHashSet::default();
    for d in pool.slices.iter().flat_map(|&i| slices[i].spec.devices.iter().flatten()) {
        if !names.insert(d.name.as_str()) {
            return Some(format!("duplicate device name {}", d.name));
        }
    }
    let mut sets: BTreeMap<&str, &CounterSet> = BTreeMap::new();
    for &sl in counter_slices {
        for (i, set) in slices[sl].spec.shared_counters.iter().flatten().enumerate() {
            if sets.insert(set.name.as_str(), set).is_some() {
                return Some(format!("duplicate counter set name {}", set.name));
            }
            pool.counter_sets.push((sl, i));
        }
    }
    for d in pool.slices.iter().chain(&pool.elsewhere).flat_map(|&i| slices[i].spec.devices.iter().flatten()) {
        for c in d.consumes_counters.iter().flatten() {
            let Some(set) = sets.get(c.counter_set.as_str()) else {
                return Some(format!("counter set {} not found", c.counter_set));
            };
            if let Some(missing) = c.counters.keys().find(|k| !set.counters.contains_key(*k)) {
                return Some(format!("counter {missing} not found in counter set {}", set.name));
            }
        }
    }
    None
}

/// A device of a gathered pool: (pool, slice, device) indices.
type DeviceRef = (usize, usize, usize);

/// One request or sub-request, checked (upstream `requestData`).
struct RequestData<'a> {
    /// The request's name, or the sub-request's.
    name: &'a str,
    /// The enclosing request's name, for a sub-request.
    parent: Option<&'a str>,
    class: Arc<DeviceClass>,
    selectors: &'a [DeviceSelector],
    all: bool,
    admin_access: bool,
    tolerations: &'a [DeviceToleration],
    /// The capacity the request asks of each device (DRAConsumableCapacity).
    capacity: Option<&'a BTreeMap<String, ApiQuantity>>,
    num_devices: usize,
    all_devices: Vec<DeviceRef>,
}

impl RequestData<'_> {
    fn full_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{p}/{}", self.name),
            None => self.name.to_string(),
        }
    }
}

/// A claim's `matchAttribute` or `distinctAttribute` constraint while devices are being picked.
struct MatchAttribute<'a> {
    requests: Vec<&'a str>,
    attribute: &'a str,
    /// `distinctAttribute` (DRAConsumableCapacity): every device's value differs from the others'.
    distinct: bool,
    value: Option<DeviceAttribute>,
    count: usize,
    /// The values taken so far, for `distinctAttribute`.
    seen: Vec<DeviceAttribute>,
}

/// Whether two attributes hold the same value, by the type of the first (false for an unknown type).
fn same_value(a: &DeviceAttribute, b: &DeviceAttribute) -> bool {
    if let Some(s) = &a.string {
        b.string.as_ref() == Some(s)
    } else if let Some(i) = a.int {
        b.int == Some(i)
    } else if let Some(x) = a.bool {
        b.bool == Some(x)
    } else if let Some(v) = &a.version {
        b.version.as_ref() == Some(v)
    } else {
        false
    }
}

impl MatchAttribute<'_> {
    fn applies(&self, request: &str, sub: Option<&str>) -> bool {
        self.requests.is_empty()
            || self.requests.contains(&request)
            || sub.is_some_and(|s| self.requests.iter().any(|r| *r == format!("{request}/{s}")))
    }

    fn add(&mut self, request: &str, sub: Option<&str>, device: &Device, driver: &str) -> bool {
        if !self.applies(request, sub) {
            return true;
        }
        let Some(attr) = lookup_attribute(device, driver, self.attribute) else { return false };
        if self.distinct {
            // Upstream: a value of no known type is never distinct.
            let known = attr.string.is_some() || attr.int.is_some() || attr.bool.is_some() || attr.version.is_some();
            if !known || self.seen.iter().any(|s| same_value(attr, s)) {
                return false;
            }
            self.seen.push(attr.clone());
            return true;
        }
        let Some(first) = &self.value else {
            self.value = Some(attr.clone());
            self.count = 1;
            return true;
        };
        let same = same_value(attr, first);
        if same {
            self.count += 1;
        }
        same
    }

    fn remove(&mut self, request: &str, sub: Option<&str>) {
        if !self.applies(request, sub) {
            return;
        }
        if self.distinct {
            self.seen.pop();
            return;
        }
        self.count -= 1;
        if self.count == 0 {
            self.value = None;
        }
    }
}

/// Upstream `lookupAttribute`: a fully qualified name, or the bare name when its domain is the driver.
fn lookup_attribute<'d>(device: &'d Device, driver: &str, name: &str) -> Option<&'d DeviceAttribute> {
    let attrs = device.attributes.as_ref()?;
    if let Some(a) = attrs.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    attrs.get(id)
}

/// What the allocator picked for one device.
#[derive(Clone)]
struct Picked<'a> {
    /// The request and sub-request it was picked for (named in the result only).
    request: (usize, usize),
    /// Where the device is (its ID is built in the result only: the search takes and gives back many).
    at: DeviceRef,
    slice: &'a ResourceSlice,
    device: &'a Device,
    admin_access: bool,
    /// The request's tolerations (the result records them); empty mostly, so cloning costs nothing then.
    tolerations: Vec<DeviceToleration>,
    /// Whether the device's counters were taken for this pick (a further share of a device does not take them).
    counters_taken: bool,
    /// For a device that allows multiple allocations: the share's ID and the capacity it consumes, as written
    /// and in milli-units.
    share: Option<(String, BTreeMap<String, ApiQuantity>, ConsumedCapacity)>,
}

/// Indices into the slices: by the node a slice names (`spec.nodeName`), and those of every other slice. A node's
/// slices are then found without comparing every slice of the cluster with every node a cycle filters; a slice
/// that names another node could never reach it, so leaving it out changes nothing.
#[derive(Debug, Default)]
pub struct SlicesByNode {
    named: FxHashMap<String, Vec<usize>>,
    other: Vec<usize>,
    /// The nodes' pools as gathered from these slices, by node name.
    kept: Mutex<FxHashMap<String, Arc<KeptPools>>>,
}

impl SlicesByNode {
    /// Indexes `slices`.
    pub fn new(slices: &[Arc<ResourceSlice>]) -> SlicesByNode {
        let mut index = SlicesByNode::default();
        for (i, s) in slices.iter().enumerate() {
            match s.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                Some(n) => index.named.entry(n.to_string()).or_default().push(i),
                None => index.other.push(i),
            }
        }
        index
    }

    /// The indices of the slices that may reach `node`, in the slices' order (pools keep their slices' order).
    fn for_node(&self, node: &str) -> Vec<usize> {
        let mut v: Vec<usize> = self.named.get(node).into_iter().flatten().chain(&self.other).copied().collect();
        v.sort_unstable();
        v
    }

    /// The node's pools among `slices` (those this index was made of), gathered once and kept while the gate and,
    /// when the slices' node selection read them, the node's labels stay the same.
    fn pools(
        &self,
        slices: &[Arc<ResourceSlice>],
        node: &str,
        labels: &Labels,
        partitionable: bool,
    ) -> Result<Arc<KeptPools>, AllocatorError> {
        let holds = |k: &KeptPools| k.partitionable == partitionable && k.labels.as_ref().is_none_or(|l| l == labels);
        if let Some(k) = self.kept.lock().expect("kept pools lock").get(node).filter(|k| holds(k)) {
            return Ok(k.clone());
        }
        let pools = Arc::new(gather_pools(slices, self, node, labels, partitionable)?);
        let mut kept = self.kept.lock().expect("kept pools lock");
        if kept.len() >= MAX_NODES_KEPT && !kept.contains_key(node) {
            kept.clear();
        }
        kept.insert(node.to_string(), pools.clone());
        Ok(pools)
    }
}

/// What the allocator reads: the devices already taken, the classes, the slices and the selectors' programs.
pub struct Allocator<'a> {
    /// Devices allocated by claims (their status, the assume cache, or in flight), whole or shared.
    pub allocated: AllocatedDevices<'a>,
    /// DeviceClasses by name.
    pub classes: &'a HashMap<String, Arc<DeviceClass>>,
    /// Every ResourceSlice.
    pub slices: &'a [Arc<ResourceSlice>],
    /// `slices` by the node they name.
    pub by_node: &'a SlicesByNode,
    /// Every DeviceTaintRule: their taints apply to the devices they select, besides the devices' own.
    pub taint_rules: &'a [Arc<DeviceTaintRule>],
    /// Compiled selectors.
    pub cel: &'a CelCache,
    /// The run's gates: device taints, taint rules and partitionable devices count only where theirs are on
    /// (an emulated v1.35 allocates as v1.35's allocator did).
    pub features: crate::config::Features,
}

impl Allocator<'_> {
    /// The device's taints: its own, then those of the DeviceTaintRules that select it (upstream's slice tracker
    /// adds the rules' taints to the devices' before the allocator sees them).
    fn taints<'t>(&'t self, id: &'t DeviceId, device: &'t Device) -> impl Iterator<Item = &'t DeviceTaint> + 't {
        // Upstream checks taints only with DRADeviceTaints, and adds the rules' only with DRADeviceTaintRules.
        let (taints, rules) = (self.features.dra_device_taints, self.features.dra_device_taint_rules);
        let own = device.taints.iter().flatten().filter(move |_| taints);
        let rules = self.taint_rules.iter().filter(move |_| taints && rules).filter(move |r| {
            // A rule without a selector selects nothing; each field it sets must match.
            r.spec.device_selector.as_ref().is_some_and(|s| {
                s.driver.as_ref().is_none_or(|d| *d == id.driver)
                    && s.pool.as_ref().is_none_or(|p| *p == id.pool)
                    && s.device.as_ref().is_none_or(|d| *d == id.device)
            })
        });
        own.chain(rules.map(|r| &r.spec.taint))
    }
}

/// Upstream `taintPreventsAllocation`: a NoSchedule or NoExecute taint the request does not tolerate (other
/// effects, `None` among them, never prevent allocation).
pub fn taint_prevents<'t>(mut taints: impl Iterator<Item = &'t DeviceTaint>, tolerations: &[DeviceToleration]) -> bool {
    taints.any(|t| {
        matches!(t.effect.as_str(), "NoSchedule" | "NoExecute") && !tolerations.iter().any(|x| tolerates(x, t))
    })
}

/// Upstream `resourceclaim.ToleratesTaint`: the effect (when set) and key (when set) match, and the operator is
/// `Exists`, or `Equal` (the default) with the same value.
pub fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if toleration.effect.as_deref().is_some_and(|e| !e.is_empty() && e != taint.effect) {
        return false;
    }
    if toleration.key.as_deref().is_some_and(|k| !k.is_empty() && k != taint.key) {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// Capacity consumed of a device, per capacity name, in milli-units.
pub type ConsumedCapacity = HashMap<String, i64>;

fn milli(q: &ApiQuantity) -> Result<i64, String> {
    crate::framework::quantity::parse_milli(&q.0).map_err(|e| e.to_string())
}

/// Upstream `calculateConsumedCapacity`: what one request (or its absence) takes of one capacity, in milli-units
/// and as written: without a request, the policy's default or the whole capacity; with one, rounded up to the
/// valid range's minimum or next step, or to the next valid value.
fn consumed_of(requested: Option<&ApiQuantity>, cap: &DeviceCapacity) -> Result<(i64, ApiQuantity), String> {
    let Some(req) = requested else {
        let q = cap.request_policy.as_ref().and_then(|p| p.default.as_ref()).unwrap_or(&cap.value);
        return Ok((milli(q)?, q.clone()));
    };
    let r = milli(req)?;
    let Some(policy) = &cap.request_policy else { return Ok((r, req.clone())) };
    if let Some(range) = &policy.valid_range {
        let min = milli(&range.min)?;
        if r < min {
            return Ok((min, range.min.clone()));
        }
        let step = match &range.step {
            Some(s) => milli(s)?,
            None => return Ok((r, req.clone())),
        };
        if step <= 0 {
            return Ok((r, req.clone()));
        }
        let n = (r - min + step - 1) / step;
        let v = step
            .checked_mul(n)
            .and_then(|x| x.checked_add(min))
            .ok_or("capacity request cannot be represented in the device's range arithmetic")?;
        let written = if v % 1000 == 0 { format!("{}", v / 1000) } else { format!("{v}m") };
        return Ok((v, ApiQuantity(written)));
    }
    for v in policy.valid_values.iter().flatten() {
        if r <= milli(v)? {
            return Ok((milli(v)?, v.clone()));
        }
    }
    Ok((r, req.clone()))
}

/// Upstream `violatesPolicy`: the amount is not the default, and is above the range's maximum, off its steps, or
/// not one of the valid values.
fn violates_policy(v: i64, cap: &DeviceCapacity) -> Result<bool, String> {
    let Some(p) = &cap.request_policy else { return Ok(false) };
    if let Some(d) = &p.default {
        if milli(d)? == v {
            return Ok(false);
        }
    }
    if let Some(range) = &p.valid_range {
        if let Some(max) = &range.max {
            if v > milli(max)? {
                return Ok(true);
            }
        }
        if let Some(step) = &range.step {
            let step = milli(step)?;
            return Ok(step > 0 && (v - milli(&range.min)?) % step != 0);
        }
        return Ok(false);
    }
    match p.valid_values.as_deref() {
        Some(values) if !values.is_empty() => {
            for x in values {
                if milli(x)? == v {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Upstream `CmpRequestOverCapacity`: the request names only capacities the device has, each amount it takes
/// obeys the capacity's policy, and with what allocated and being-allocated shares consume stays within it.
fn fits_capacity(
    current: Option<&ConsumedCapacity>,
    requests: Option<&BTreeMap<String, ApiQuantity>>,
    device: &Device,
    allocating: Option<&ConsumedCapacity>,
) -> Result<bool, String> {
    let empty = BTreeMap::new();
    let caps = device.capacity.as_ref().unwrap_or(&empty);
    if requests.is_some_and(|r| r.keys().any(|k| !caps.contains_key(k))) {
        return Ok(false);
    }
    let mut consumed = Vec::with_capacity(caps.len());
    for (name, cap) in caps {
        let (v, _) =
            consumed_of(requests.and_then(|r| r.get(name)), cap).map_err(|e| format!("capacity {name:?}: {e}"))?;
        if v < 0 {
            return Err(format!("capacity {name:?}: capacity value is negative"));
        }
        consumed.push((name, cap, v));
    }
    for (name, cap, v) in consumed {
        if violates_policy(v, cap)? {
            return Ok(false);
        }
        let used = |c: Option<&ConsumedCapacity>| c.and_then(|c| c.get(name)).copied().unwrap_or(0);
        if v.saturating_add(used(current)).saturating_add(used(allocating)) > milli(&cap.value)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What a share of a device that allows multiple allocations consumes of each of its capacities (upstream
/// `GetConsumedCapacityFromRequest`): as written, and in milli-units.
fn consumed_capacity(
    requests: Option<&BTreeMap<String, ApiQuantity>>,
    device: &Device,
) -> Result<(BTreeMap<String, ApiQuantity>, ConsumedCapacity), String> {
    let mut written = BTreeMap::new();
    let mut amounts = HashMap::new();
    for (name, cap) in device.capacity.iter().flatten() {
        let (v, q) =
            consumed_of(requests.and_then(|r| r.get(name)), cap).map_err(|e| format!("capacity {name:?}: {e}"))?;
        written.insert(name.clone(), q);
        amounts.insert(name.clone(), v);
    }
    Ok((written, amounts))
}

/// A new share ID: a random (version 4) UUID, as the API validates `shareID`.
fn new_share_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let word = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.finish()
    };
    let (a, b) = (word(), word());
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// The search for one node (upstream's internal `allocator`).
struct Search<'a, 'b> {
    alloc: &'b Allocator<'a>,
    node: &'b str,
    labels: &'b Labels,
    claims: &'b [Arc<ResourceClaim>],
    pools: Vec<Pool<'a>>,
    /// The pools as kept, for their devices' IDs.
    kept: &'b [KeptPool],
    /// Per claim, per request: the request itself, or its sub-requests in order.
    requests: Vec<Vec<Vec<RequestData<'b>>>>,
    /// Per claim, per request: the sub-request picked.
    selected: Vec<Vec<usize>>,
    constraints: Vec<Vec<MatchAttribute<'b>>>,
    /// Devices being allocated, with the claims taking them.
    allocating: FxHashMap<DeviceRef, FxHashSet<usize>>,
    results: Vec<Vec<Picked<'a>>>,
    /// Whether a device satisfies a request's selectors, by (device, claim, request, sub-request).
    matches: RefCell<FxHashMap<(DeviceRef, usize, usize, usize), bool>>,
    /// Per pool, what its counters hold less what allocated devices consume (milli-units), computed when first
    /// needed: (counter set, counter) → amount; and whether some counter is overdrawn already (then no device that
    /// consumes counters fits there).
    available: FxHashMap<usize, (Counters<'a>, bool)>,
    /// What each device tried consumes, parsed once per search: ((counter set, counter), milli-units).
    amounts: FxHashMap<DeviceRef, Vec<(CounterName<'a>, i64)>>,
    /// What the devices being allocated consume, per (pool, counter set, counter).
    consumed: FxHashMap<(usize, &'a str, &'a str), i64>,
    /// Devices that allow multiple allocations being allocated: how many shares, and the capacity they consume.
    allocating_capacity: FxHashMap<DeviceRef, (usize, ConsumedCapacity)>,
    /// Calls of `allocate_one` so far.
    steps: usize,
}

/// A counter: (counter set, counter).
type CounterName<'a> = (&'a str, &'a str);

/// A pool's counters and what they hold (milli-units).
type Counters<'a> = FxHashMap<CounterName<'a>, i64>;

/// Where a request's search for devices starts: at the pools' first device.
const FIRST_DEVICE: DeviceRef = (0, 0, 0);

/// A search position (upstream `deviceIndices`).
#[derive(Clone, Copy, Default)]
struct At {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

/// Why a branch of the search stopped: no fit there, a claim over the result size limit, or a broken input.
enum Stop {
    MaxSize,
    Error(AllocatorError),
}

impl From<AllocatorError> for Stop {
    fn from(e: AllocatorError) -> Stop {
        Stop::Error(e)
    }
}

impl<'a> Allocator<'a> {
    /// Allocates devices for every claim on the node (upstream `Allocate`): one result per claim, in order, or
    /// `None` when they do not all fit there; an error when a claim, class, selector or pool is broken.
    pub fn allocate(
        &self,
        node: &str,
        labels: &Labels,
        claims: &[Arc<ResourceClaim>],
    ) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
        self.allocate_counted(node, labels, claims).0
    }

    /// [`Allocator::allocate`], with the number of search steps it took (upstream's `numAllocateOneInvocations`).
    pub fn allocate_counted(
        &self,
        node: &str,
        labels: &Labels,
        claims: &[Arc<ResourceClaim>],
    ) -> (Result<Option<Vec<AllocationResult>>, AllocatorError>, usize) {
        let mut steps = 0;
        let result = self.search(node, labels, claims, &mut steps);
        (result, steps)
    }

    fn search(
        &self,
        node: &str,
        labels: &Labels,
        claims: &[Arc<ResourceClaim>],
        steps: &mut usize,
    ) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
        let kept = self.by_node.pools(self.slices, node, labels, self.features.dra_partitionable_devices)?;
        let mut search = Search {
            alloc: self,
            node,
            labels,
            claims,
            pools: kept.pools.iter().map(|p| p.pool(self.slices)).collect(),
            kept: &kept.pools,
            requests: Vec::with_capacity(claims.len()),
            selected: Vec::with_capacity(claims.len()),
            constraints: Vec::with_capacity(claims.len()),
            allocating: FxHashMap::default(),
            results: vec![Vec::new(); claims.len()],
            matches: RefCell::default(),
            available: FxHashMap::default(),
            amounts: FxHashMap::default(),
            consumed: FxHashMap::default(),
            allocating_capacity: FxHashMap::default(),
            steps: 0,
        };
        for (ci, claim) in claims.iter().enumerate() {
            let devices = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
            let mut per_request = Vec::new();
            let mut min_devices = 0;
            for (ri, request) in devices.and_then(|d| d.requests.as_deref()).unwrap_or(&[]).iter().enumerate() {
                let subs = request.first_available.as_deref().unwrap_or(&[]);
                if !subs.is_empty() {
                    let mut data = Vec::new();
                    let mut min = usize::MAX;
                    for (si, sub) in subs.iter().enumerate() {
                        let d = search.check_request(
                            ci,
                            (ri, si),
                            RequestSpec {
                                name: &sub.name,
                                parent: Some(&request.name),
                                class: &sub.device_class_name,
                                selectors: sub.selectors.as_deref().unwrap_or(&[]),
                                mode: sub.allocation_mode.as_deref(),
                                count: sub.count,
                                admin_access: None,
                                tolerations: sub.tolerations.as_deref().unwrap_or(&[]),
                                capacity: sub.capacity.as_ref().and_then(|c| c.requests.as_ref()),
                            },
                        )?;
                        min = min.min(d.num_devices);
                        data.push(d);
                    }
                    min_devices += min;
                    per_request.push(data);
                } else {
                    let (class, selectors, mode, count, admin, tolerations, capacity) = match &request.exactly {
                        Some(e) => (
                            e.device_class_name.as_str(),
                            e.selectors.as_deref().unwrap_or(&[]),
                            e.allocation_mode.as_deref(),
                            e.count,
                            e.admin_access,
                            e.tolerations.as_deref().unwrap_or(&[]),
                            e.capacity.as_ref().and_then(|c| c.requests.as_ref()),
                        ),
                        None => ("", &[][..], None, None, None, &[][..], None),
                    };
                    let d = search.check_request(
                        ci,
                        (ri, 0),
                        RequestSpec {
                            name: &request.name,
                            parent: None,
                            class,
                            selectors,
                            mode,
                            count,
                            admin_access: admin,
                            tolerations,
                            capacity,
                        },
                    )?;
                    min_devices += d.num_devices;
                    per_request.push(vec![d]);
                }
            }
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE {
                return Err(AllocatorError(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    claim_ref(claim)
                )));
            }
            search.selected.push(vec![0; per_request.len()]);
            search.requests.push(per_request);
            let mut constraints = Vec::new();
            for (i, c) in devices.and_then(|d| d.constraints.as_deref()).unwrap_or(&[]).iter().enumerate() {
                let (attribute, distinct) = match (&c.match_attribute, &c.distinct_attribute) {
                    (Some(a), _) => (Some(a), false),
                    (None, Some(a)) => (Some(a), true),
                    (None, None) => (None, false),
                };
                match attribute {
                    Some(attribute) => constraints.push(MatchAttribute {
                        requests: c.requests.iter().flatten().map(String::as_str).collect(),
                        attribute,
                        distinct,
                        value: None,
                        count: 0,
                        seen: Vec::new(),
                    }),
                    None => {
                        return Err(AllocatorError(format!(
                            "claim {}, constraint #{i}: empty constraint (unsupported constraint type?)",
                            claim_ref(claim)
                        )))
                    }
                }
            }
            search.constraints.push(constraints);
        }
        let found = search.allocate_one(At::default(), false, FIRST_DEVICE);
        *steps = search.steps;
        match found {
            Ok(true) => {}
            // Upstream skips invalid pools while searching, and names them only when nothing else fitted.
            Ok(false) | Err(Stop::MaxSize) if search.pools.iter().any(|p| p.invalid.is_some()) => {
                return Err(AllocatorError(INVALID_POOLS.into()))
            }
            Ok(false) | Err(Stop::MaxSize) => return Ok(None),
            Err(Stop::Error(e)) => return Err(e),
        }
        let mut out = Vec::with_capacity(claims.len());
        for (ci, claim) in claims.iter().enumerate() {
            out.push(search.result(ci, claim)?);
        }
        Ok(Some(out))
    }
}

/// A request or sub-request as written.
struct RequestSpec<'b> {
    name: &'b str,
    parent: Option<&'b str>,
    class: &'b str,
    selectors: &'b [DeviceSelector],
    mode: Option<&'b str>,
    count: Option<i64>,
    admin_access: Option<bool>,
    tolerations: &'b [DeviceToleration],
    capacity: Option<&'b BTreeMap<String, ApiQuantity>>,
}

impl<'a, 'b> Search<'a, 'b> {
    /// Upstream `validateDeviceRequest`.
    fn check_request(
        &mut self,
        ci: usize,
        (ri, si): (usize, usize),
        spec: RequestSpec<'b>,
    ) -> Result<RequestData<'b>, AllocatorError> {
        // Named in errors only: formatted then, not per request per node.
        let at = RequestAt { claim: &self.claims[ci], parent: spec.parent, name: spec.name };
        for (i, s) in spec.selectors.iter().enumerate() {
            if s.cel.is_none() {
                return Err(AllocatorError(format!(
                    "{at}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )));
            }
        }
        if spec.class.is_empty() {
            return Err(AllocatorError(format!("{at}: missing device class name (unsupported request type?)")));
        }
        let Some(class) = self.alloc.classes.get(spec.class).cloned() else {
            return Err(AllocatorError(format!(
                "{at}: could not retrieve device class {}: deviceclass.resource.k8s.io {:?} not found",
                spec.class, spec.class
            )));
        };
        let mut data = RequestData {
            name: spec.name,
            parent: spec.parent,
            class,
            selectors: spec.selectors,
            all: false,
            admin_access: spec.admin_access == Some(true),
            tolerations: spec.tolerations,
            capacity: spec.capacity,
            num_devices: 0,
            all_devices: Vec::new(),
        };
        match spec.mode.unwrap_or(MODE_EXACT_COUNT) {
            MODE_EXACT_COUNT => data.num_devices = spec.count.unwrap_or(1).max(0) as usize,
            MODE_ALL => {
                data.all = true;
                for (pi, pool) in self.pools.iter().enumerate() {
                    let id = format_args!("{}/{}", pool.driver, pool.name);
                    if pool.incomplete {
                        return Err(AllocatorError(format!(
                            "{at}: asks for all devices, but resource pool {id} is currently being updated"
                        )));
                    }
                    if pool.invalid.is_some() {
                        return Err(AllocatorError(format!(
                            "{at}: asks for all devices, but resource pool {id} is currently invalid"
                        )));
                    }
                    for (sl, slice) in pool.slices.iter().enumerate() {
                        for di in 0..slice.spec.devices.as_ref().map_or(0, Vec::len) {
                            // Static capacity only: what others consume is checked when the device is taken, so
                            // that a device short of it fails the request rather than leaving it out.
                            if self.selectable(ci, ri, si, &data, (pi, sl, di))?
                                && fits_capacity(
                                    None,
                                    data.capacity,
                                    &slice.spec.devices.as_ref().expect("indexed")[di],
                                    None,
                                )
                                .map_err(|e| AllocatorError(format!("{at}: checking capacity: {e}")))?
                            {
                                data.all_devices.push((pi, sl, di));
                            }
                        }
                    }
                }
                data.num_devices = data.all_devices.len();
            }
            other => return Err(AllocatorError(format!("{at}: unsupported count mode {other}"))),
        }
        Ok(data)
    }

    fn device(&self, (pi, sl, di): DeviceRef) -> (&'a ResourceSlice, &'a Device) {
        let slice = self.pools[pi].slices[sl];
        (slice, &slice.spec.devices.as_ref().expect("indexed device")[di])
    }

    fn id(&self, (pi, sl, di): DeviceRef) -> &'b DeviceId {
        &self.kept[pi].ids[sl][di]
    }

    /// Upstream `isSelectable`: the class's selectors, then the request's.
    fn selectable(
        &self,
        ci: usize,
        ri: usize,
        si: usize,
        data: &RequestData<'_>,
        at: DeviceRef,
    ) -> Result<bool, AllocatorError> {
        if let Some(m) = self.matches.borrow().get(&(at, ci, ri, si)) {
            return Ok(*m);
        }
        let (slice, device) = self.device(at);
        let view = DeviceView {
            driver: &slice.spec.driver,
            attributes: device.attributes.as_ref(),
            capacity: device.capacity.as_ref(),
            allow_multiple_allocations: device.allow_multiple_allocations == Some(true),
        };
        let class_selectors = data.class.spec.as_ref().and_then(|s| s.selectors.as_deref()).unwrap_or(&[]);
        let class_name = data.class.metadata.name.as_deref().unwrap_or("");
        let owners = [(Some(class_name), class_selectors), (None, data.selectors)];
        for (class, selectors) in owners {
            for (i, s) in selectors.iter().enumerate() {
                let Some(cel) = &s.cel else { continue };
                // Named only for an error: this runs per device, selector and node.
                let whose = || match class {
                    Some(c) => format!("class {c}"),
                    None => format!("claim {}", claim_ref(&self.claims[ci])),
                };
                let program = self
                    .alloc
                    .cel
                    .get_or_compile(&cel.expression)
                    .map_err(|e| AllocatorError(format!("{}: selector #{i}: CEL compile error: {e}", whose())))?;
                let (_, _, di) = at;
                let matches = self
                    .alloc
                    .cel
                    .device_matches(&cel.expression, &program, slice, di, &view)
                    .map_err(|e| AllocatorError(format!("{}: selector #{i}: CEL runtime error: {e}", whose())))?;
                if !matches {
                    self.matches.borrow_mut().insert((at, ci, ri, si), false);
                    return Ok(false);
                }
            }
        }
        // A slice with per-device node selection says per device which nodes reach it.
        let reaches = slice.spec.per_device_node_selection != Some(true)
            || node_matches(
                device.node_name.as_deref(),
                device.all_nodes,
                device.node_selector.as_ref(),
                self.node,
                self.labels,
                &mut false,
            )
            .map_err(|e| AllocatorError(format!("device {}: {e}", device.name)))?;
        self.matches.borrow_mut().insert((at, ci, ri, si), reaches);
        Ok(reaches)
    }

    /// Upstream `checkAvailableCounters`: takes the counters the device consumes from its pool, unless that would
    /// overdraw any counter of the pool (false, nothing taken). A pool's counters start as its counter sets hold
    /// them less what its allocated devices (on any node) consume.
    fn take_counters(&mut self, at: DeviceRef, device: &'a Device) -> Result<bool, AllocatorError> {
        let Some(consumes) = device.consumes_counters.as_deref().filter(|c| !c.is_empty()) else { return Ok(true) };
        let pi = at.0;
        if !self.available.contains_key(&pi) {
            let pool = &self.pools[pi];
            let milli = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity, what: &str| {
                crate::framework::quantity::parse_milli(&q.0).map_err(|e| {
                    AllocatorError(format!("resource pool {}/{}: counter {what}: {e}", pool.driver, pool.name))
                })
            };
            let mut available = FxHashMap::default();
            for (set, cs) in &pool.counter_sets {
                for (name, c) in &cs.counters {
                    available.insert((*set, name.as_str()), milli(&c.value, name)?);
                }
            }
            // Only devices some claim holds consume counters already (none, mostly: no ID to build then).
            if self.alloc.allocated.holds_any() {
                for slice in pool.slices.iter().chain(&pool.elsewhere) {
                    for d in slice.spec.devices.iter().flatten() {
                        let id =
                            DeviceId { driver: pool.driver.into(), pool: pool.name.into(), device: d.name.clone() };
                        if !self.alloc.allocated.contains(&id) {
                            continue;
                        }
                        for c in d.consumes_counters.iter().flatten() {
                            for (name, v) in &c.counters {
                                if let Some(a) = available.get_mut(&(c.counter_set.as_str(), name.as_str())) {
                                    *a -= milli(&v.value, name)?;
                                }
                            }
                        }
                    }
                }
            }
            let overdrawn = available.values().any(|a| *a < 0);
            self.available.insert(pi, (available, overdrawn));
        }
        if let Entry::Vacant(e) = self.amounts.entry(at) {
            let mut amounts = Vec::new();
            for c in consumes {
                for (name, v) in &c.counters {
                    let amount = crate::framework::quantity::parse_milli(&v.value.0)
                        .map_err(|e| AllocatorError(format!("device {}: counter {name}: {e}", device.name)))?;
                    amounts.push(((c.counter_set.as_str(), name.as_str()), amount));
                }
            }
            e.insert(amounts);
        }
        let (available, overdrawn) = &self.available[&pi];
        let amounts = &self.amounts[&at];
        // Every counter fitted before this device (or the pool is overdrawn): only the ones it consumes can stop
        // fitting now.
        let mut fits = !overdrawn;
        for &((set, name), amount) in amounts {
            let used = self.consumed.entry((pi, set, name)).or_default();
            *used += amount;
            fits &= available.get(&(set, name)).is_none_or(|a| *a >= *used);
        }
        if !fits {
            for &((set, name), amount) in amounts {
                *self.consumed.entry((pi, set, name)).or_default() -= amount;
            }
        }
        Ok(fits)
    }

    /// Undoes `take_counters` for a device that was taken.
    fn give_back_counters(&mut self, at: DeviceRef) {
        for &((set, name), amount) in self.amounts.get(&at).into_iter().flatten() {
            if let Some(used) = self.consumed.get_mut(&(at.0, set, name)) {
                *used -= amount;
            }
        }
    }

    /// Upstream `CmpRequestOverCapacity` for the request at `r` and a device: what it asks fits beside what
    /// allocated and being-allocated shares of the device consume.
    fn capacity_fits(&self, r: At, at: DeviceRef) -> Result<bool, AllocatorError> {
        let ((_, device), id) = (self.device(at), self.id(at));
        let data = &self.requests[r.claim][r.request][r.sub];
        // A device without capacities fits a request that asks for none and no other (as `fits_capacity` says),
        // with no shares to look up.
        if device.capacity.as_ref().is_none_or(BTreeMap::is_empty) {
            return Ok(data.capacity.is_none_or(BTreeMap::is_empty));
        }
        fits_capacity(
            self.alloc.allocated.shared(id).as_deref(),
            data.capacity,
            device,
            self.allocating_capacity.get(&at).map(|e| &e.1),
        )
        .map_err(|e| {
            AllocatorError(format!(
                "claim {}, request {}: checking capacity for device {id}: {e}",
                claim_ref(&self.claims[r.claim]),
                data.name
            ))
        })
    }

    fn in_use(&self, at: DeviceRef) -> bool {
        self.allocating.get(&at).is_some_and(|c| !c.is_empty()) || self.alloc.allocated.contains(self.id(at))
    }

    fn allocating_for(&self, at: DeviceRef, ci: usize) -> bool {
        self.allocating.get(&at).is_some_and(|c| c.contains(&ci))
    }

    /// Upstream `allocateOne`: true when every claim from `r` on got its devices. A request's devices are tried
    /// from `start` on, after the one its previous device took, so a search of n devices out of m meets each set
    /// once rather than in each of its orders (upstream's `startLocation`; the first set found is the same, as a
    /// set that fits in some order fits in the pools' order).
    fn allocate_one(&mut self, r: At, allocate_sub: bool, start: DeviceRef) -> Result<bool, Stop> {
        self.steps += 1;
        if r.claim >= self.claims.len() {
            return Ok(true);
        }
        if r.request >= self.requests[r.claim].len() {
            return match self.allocate_one(At { claim: r.claim + 1, ..At::default() }, false, FIRST_DEVICE) {
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        }
        let subs = self.requests[r.claim][r.request].len();
        let has_subs = self.requests[r.claim][r.request][0].parent.is_some();
        if !allocate_sub && has_subs {
            let mut all_exceeded = true;
            for sub in 0..subs {
                match self.allocate_one(At { sub, ..r }, true, FIRST_DEVICE) {
                    Err(Stop::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(success) => {
                        all_exceeded = false;
                        if success {
                            self.selected[r.claim][r.request] = sub;
                            return Ok(true);
                        }
                    }
                }
            }
            return if all_exceeded { Err(Stop::MaxSize) } else { Ok(false) };
        }
        let data = &self.requests[r.claim][r.request][r.sub];
        let (all, num_devices, admin) = (data.all, data.num_devices, data.admin_access);
        if all && data.all_devices.is_empty() {
            return Ok(false);
        }
        if r.device >= num_devices {
            return self.allocate_one(
                At { claim: r.claim, request: r.request + 1, ..At::default() },
                false,
                FIRST_DEVICE,
            );
        }
        if self.results[r.claim].len() + num_devices - r.device > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(Stop::MaxSize);
        }
        let next = At { device: r.device + 1, ..r };
        if all {
            let at = self.requests[r.claim][r.request][r.sub].all_devices[r.device];
            if !self.allocate_device(r, at, true)? {
                return Ok(false);
            }
            // One set of devices only (all of them): nothing to skip.
            let done = self.allocate_one(next, allocate_sub, FIRST_DEVICE);
            if !matches!(done, Ok(true)) {
                self.deallocate(r, at);
            }
            return done;
        }
        let (first_pool, first_slice, first_device) = start;
        for pi in first_pool..self.pools.len() {
            // Invalid and incomplete pools hold no devices (their slices were left out).
            let slices_from = if pi == first_pool { first_slice } else { 0 };
            for sl in slices_from..self.pools[pi].slices.len() {
                let n = self.pools[pi].slices[sl].spec.devices.as_ref().map_or(0, Vec::len);
                let devices_from = if (pi, sl) == (first_pool, first_slice) { first_device } else { 0 };
                for di in devices_from..n {
                    let at = (pi, sl, di);
                    if admin && self.allocating_for(at, r.claim) || !admin && self.in_use(at) {
                        continue;
                    }
                    let data = &self.requests[r.claim][r.request][r.sub];
                    if !self.selectable(r.claim, r.request, r.sub, data, at)? || !self.capacity_fits(r, at)? {
                        continue;
                    }
                    if !self.allocate_device(r, at, false)? {
                        continue;
                    }
                    match self.allocate_one(next, allocate_sub, (pi, sl, di + 1)) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.deallocate(r, at),
                        Err(e) => {
                            self.deallocate(r, at);
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// Upstream `allocateDevice`: takes the device for the request unless it is in use, consumes counters, or
    /// breaks a constraint (which, for an `All` request, is an error).
    fn allocate_device(&mut self, r: At, at: DeviceRef, must: bool) -> Result<bool, AllocatorError> {
        let ((slice, device), id) = (self.device(at), self.id(at));
        let data = &self.requests[r.claim][r.request][r.sub];
        // A device that allows multiple allocations is never in use: its capacity decides.
        let multiple = device.allow_multiple_allocations == Some(true);
        if !multiple && data.admin_access && self.allocating_for(at, r.claim) || !data.admin_access && self.in_use(at) {
            return Ok(false);
        }
        let requested = data.capacity;
        let (base, sub) = match data.parent {
            Some(p) => (p, Some(data.name)),
            None => (data.name, None),
        };
        let (request_name, admin) = (data.name, data.admin_access);
        let tolerations = data.tolerations;
        // Partitionable devices: the counters the device consumes must still be there (a further share of a
        // device already holds them).
        let shared = multiple && (self.allocating_capacity.contains_key(&at) || self.alloc.allocated.is_shared(id));
        // Without their gates, upstream's allocator passes over devices that consume counters or that have binding
        // conditions.
        if !self.alloc.features.dra_partitionable_devices
            && device.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
        {
            return Ok(false);
        }
        if !self.alloc.features.dra_device_binding_conditions
            && device.binding_conditions.as_ref().is_some_and(|c| !c.is_empty())
        {
            return Ok(false);
        }
        let counters_taken = !shared && device.consumes_counters.as_ref().is_some_and(|c| !c.is_empty());
        if counters_taken && !self.take_counters(at, device)? {
            return Ok(false);
        }
        let give_back = |me: &mut Self| {
            if counters_taken {
                me.give_back_counters(at);
            }
        };
        if taint_prevents(self.alloc.taints(id, device), tolerations) || !self.capacity_fits(r, at)? {
            give_back(self);
            return Ok(false);
        }
        let share = if multiple {
            let consumed = consumed_capacity(requested, device).map_err(|e| {
                AllocatorError(format!(
                    "claim {}, request {request_name}: computing consumed capacity for device {id}: {e}",
                    claim_ref(&self.claims[r.claim])
                ))
            })?;
            Some(consumed)
        } else {
            None
        };
        let constraints = &mut self.constraints[r.claim];
        for i in 0..constraints.len() {
            if !constraints[i].add(base, sub, device, &slice.spec.driver) {
                if must {
                    give_back(self);
                    return Err(AllocatorError(format!(
                        "claim {}, request {request_name}: cannot add device {id} because a claim constraint would not be satisfied",
                        claim_ref(&self.claims[r.claim])
                    )));
                }
                for c in &mut constraints[..i] {
                    c.remove(base, sub);
                }
                give_back(self);
                return Ok(false);
            }
        }
        let share = share.map(|(written, milli)| {
            let entry = self.allocating_capacity.entry(at).or_default();
            entry.0 += 1;
            for (name, v) in &milli {
                *entry.1.entry(name.clone()).or_default() += v;
            }
            (new_share_id(), written, milli)
        });
        if !multiple {
            self.allocating.entry(at).or_default().insert(r.claim);
        }
        let tolerations = tolerations.to_vec();
        self.results[r.claim].push(Picked {
            request: (r.request, r.sub),
            at,
            slice,
            device,
            admin_access: admin,
            tolerations,
            counters_taken,
            share,
        });
        Ok(true)
    }

    /// Undoes the last `allocate_device` of the request at `r`.
    fn deallocate(&mut self, r: At, at: DeviceRef) {
        let picked = self.results[r.claim].last().expect("a device to deallocate");
        let (counters_taken, share) = (picked.counters_taken, picked.share.as_ref().map(|s| s.2.clone()));
        if counters_taken {
            self.give_back_counters(at);
        }
        if let Some(milli) = share {
            if let Some(entry) = self.allocating_capacity.get_mut(&at) {
                entry.0 -= 1;
                for (name, v) in &milli {
                    *entry.1.entry(name.clone()).or_default() -= v;
                }
                if entry.0 == 0 {
                    self.allocating_capacity.remove(&at);
                }
            }
        }
        let data = &self.requests[r.claim][r.request][r.sub];
        let (base, sub) = match data.parent {
            Some(p) => (p, Some(data.name)),
            None => (data.name, None),
        };
        for c in &mut self.constraints[r.claim] {
            c.remove(base, sub);
        }
        if let Some(claims) = self.allocating.get_mut(&at) {
            claims.remove(&r.claim);
        }
        self.results[r.claim].pop();
    }

    /// The allocation result of one claim: devices, configuration (the classes', then the claim's) and the
    /// node selector the devices need.
    fn result(&self, ci: usize, claim: &ResourceClaim) -> Result<AllocationResult, AllocatorError> {
        let picked = &self.results[ci];
        let results = picked
            .iter()
            .map(|p| (p, self.id(p.at)))
            .map(|(p, id)| DeviceRequestAllocationResult {
                request: self.requests[ci][p.request.0][p.request.1].full_name(),
                driver: id.driver.clone(),
                pool: id.pool.clone(),
                device: id.device.clone(),
                admin_access: p.admin_access.then_some(true),
                tolerations: (!p.tolerations.is_empty()).then(|| p.tolerations.clone()),
                binding_conditions: p.device.binding_conditions.clone(),
                binding_failure_conditions: p.device.binding_failure_conditions.clone(),
                share_id: p.share.as_ref().map(|s| s.0.clone()),
                consumed_capacity: p.share.as_ref().map(|s| s.1.clone()).filter(|c| !c.is_empty()),
                ..Default::default()
            })
            .collect();
        let mut config: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: HashMap<&str, (usize, usize)> = HashMap::new();
        let requests = super::claim_requests(claim);
        for ri in 0..requests.len() {
            let data = &self.requests[ci][ri][self.selected[ci][ri]];
            let name = data.full_name();
            let class_name = data.class.metadata.name.as_deref().unwrap_or("");
            if let Some(&(start, end)) = class_ranges.get(class_name) {
                for c in &mut config[start..end] {
                    c.requests.get_or_insert_with(Vec::new).push(name.clone());
                }
                continue;
            }
            let start = config.len();
            for c in data.class.spec.iter().flat_map(|s| s.config.iter().flatten()) {
                config.push(DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: Some(vec![name.clone()]),
                    opaque: c.opaque.clone(),
                });
            }
            class_ranges.insert(class_name, (start, config.len()));
        }
        let from_claim = |c: &k8s_openapi::api::resource::v1::DeviceClaimConfiguration| DeviceAllocationConfiguration {
            source: "FromClaim".into(),
            requests: c.requests.clone(),
            opaque: c.opaque.clone(),
        };
        for c in claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.config.as_deref()).unwrap_or(&[]) {
            let names = c.requests.as_deref().unwrap_or(&[]);
            if names.is_empty() {
                config.push(from_claim(c));
                continue;
            }
            // Upstream adds the configuration once per request it names.
            for (ri, request) in requests.iter().enumerate() {
                if names.contains(&request.name) {
                    config.push(from_claim(c));
                    continue;
                }
                let data = &self.requests[ci][ri][self.selected[ci][ri]];
                if data.parent.is_some() && names.contains(&data.full_name()) {
                    config.push(from_claim(c));
                }
            }
        }
        let node_selector = node_selector(picked, self.node).map_err(|e| {
            AllocatorError(format!(
                "create NodeSelector for claim {}: {e}",
                claim.metadata.name.as_deref().unwrap_or("")
            ))
        })?;
        Ok(AllocationResult {
            devices: Some(DeviceAllocationResult {
                results: Some(results),
                config: (!config.is_empty()).then_some(config),
            }),
            node_selector,
            allocation_timestamp: None,
        })
    }
}

/// Upstream `createNodeSelector`: a node-local device (or one that binds to its node) pins the claim to the node it
/// is allocated on; slices with a node selector add their requirements (per device, with per-device node
/// selection); devices for all nodes add nothing.
fn node_selector(picked: &[Picked<'_>], node: &str) -> Result<Option<NodeSelector>, String> {
    let mut term = NodeSelectorTerm::default();
    for p in picked {
        let spec = &p.slice.spec;
        let (name, selector) = if spec.per_device_node_selection == Some(true) {
            (&p.device.node_name, &p.device.node_selector)
        } else {
            (&spec.node_name, &spec.node_selector)
        };
        if name.is_some() || p.device.binds_to_node == Some(true) {
            return Ok(Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node.to_string()]),
                    }]),
                    match_expressions: None,
                }],
            }));
        }
        if let Some(sel) = selector {
            match sel.node_selector_terms.as_slice() {
                [] => {}
                [t] => {
                    add_requirements(t.match_fields.as_deref(), &mut term.match_fields);
                    add_requirements(t.match_expressions.as_deref(), &mut term.match_expressions);
                }
                terms => return Err(format!("unsupported ResourceSlice.NodeSelector with {} terms", terms.len())),
            }
        }
    }
    let empty = term.match_fields.as_ref().is_none_or(Vec::is_empty)
        && term.match_expressions.as_ref().is_none_or(Vec::is_empty);
    Ok((!empty).then(|| NodeSelector { node_selector_terms: vec![term] }))
}

fn add_requirements(from: Option<&[NodeSelectorRequirement]>, to: &mut Option<Vec<NodeSelectorRequirement>>) {
    for r in from.unwrap_or(&[]) {
        let values: HashSet<&String> = r.values.iter().flatten().collect();
        let known = to.iter().flatten().any(|e| {
            e.key == r.key && e.operator == r.operator && e.values.iter().flatten().collect::<HashSet<_>>() == values
        });
        if !known {
            to.get_or_insert_with(Vec::new).push(r.clone());
        }
    }
}
