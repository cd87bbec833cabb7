//! DynamicResources, as upstream's (`pkg/scheduler/framework/plugins/dynamicresources`) with structured
//! parameters and v1.37's default feature gates: a pod's ResourceClaims (`spec.resourceClaims`, named directly or
//! made from a template by the resource claim controller and named in `status.resourceClaimStatuses`) must exist;
//! a claim already allocated pins the pod to the nodes its allocation's node selector admits; the others are
//! allocated per node by the structured allocator (`allocator.rs`) from the devices that ResourceSlices publish,
//! less those other claims hold or that pods still in flight were given (device taints, DeviceTaintRules and
//! partitionable devices' counters are the allocator's). Score ranks nodes by the `firstAvailable` sub-requests
//! their allocations took (DRAPrioritizedList). Reserve remembers the allocation so the next pod's cycle sees the
//! devices taken before the API shows it; PreBind writes `status.allocation` (with its timestamp) and
//! `status.reservedFor` on each claim, then waits for the allocated devices' binding conditions
//! (DRADeviceBindingConditions, within `bindingTimeout`); Unreserve forgets the allocation and drops the pod from
//! `reservedFor`. PostFilter deallocates a claim that keeps the pod off every node (off its node selector, or its
//! devices failed or timed out binding) and is reserved for no other pod.
//!
//! Extended resources backed by DRA (DRAExtendedResource, GA in v1.37; `extended.rs`): a pod asking for an
//! extended resource that a DeviceClass provides gets one more claim, in memory until PreBind. Filter gives it, per
//! node, the requests for what the node does not list in its allocatable (a node's device plugin serves what it
//! lists); Reserve and the allocator treat it as any claim; PreBind creates it (`<pod>-extended-resources-…`,
//! owned by the pod, annotated `resource.kubernetes.io/extended-resource-claim`), writes its allocation and
//! reservation, and sets the pod's `status.extendedResourceClaimStatus`. Unreserve deletes a claim PreBind created;
//! a claim an earlier attempt left is refused by Filter and deleted by PostFilter.
//!
//! Differences from upstream, on purpose:
//! - A claim PreBind created counts as written until the informers show it (at most 120s), so PreBind returns at
//!   once; upstream polls its assume cache once a second, up to 120s, before it returns.
//! - The DeviceClass of an extended resource name is looked up in the cycle's objects: a name two classes share
//!   maps to the newest (then the first by name), as upstream's cache settles; upstream's cache also depends on
//!   the order classes arrived in (a losing class that arrives after the winner does not get its implicit
//!   `deviceclass.resource.kubernetes.io/<class>` name, and deleting either class drops the shared name).
//! - Consumable capacity works in milli-units: a capacity rounded to a step is written as a plain or milli
//!   quantity (upstream keeps the step's format, e.g. `1Gi`); amounts finer than a milli-unit round up.
//! - CEL runs on cel-rust (see `cel.rs` for what that environment lacks).
//! - Filter has no timeout (DRASchedulerFilterTimeout's 10s): the search has the same bounds as upstream's, and
//!   the scheduler's cycle is not cancelled from outside.
//! - PostFilter looks at the claims that kept the pod off a node in the pod's order (upstream: Go map order).
//! - Claim events have no queueing hint (any claim change retries the pods this plugin rejected), since cluster
//!   events here carry no claim objects; upstream skips claims that the pod does not use.

pub mod allocator;
pub mod cel;
pub mod extended;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerExtendedResourceRequest, PodExtendedResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClaim, DeviceClass, ResourceClaim, ResourceClaimConsumerReference, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::config::parse_go_duration;
use crate::framework::labels::CompiledNodeSelector;
use crate::framework::{
    action, object_changes, ClusterClient, ClusterError, ClusterEvent, ClusterObjects, Code, CycleState, EventObject,
    EventResource, FilterPlugin, Listers, NodeInfo, NodeScore, NodeToStatus, ObjectMap, Plugin, PluginContext, PodInfo,
    PostFilterHandle, PostFilterPlugin, PostFilterResult, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin,
    PreFilterResult, QueueingHint, ReservePlugin, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};
use crate::plugins::helper::{aggregate, decode, default_normalize_score, invalid, ArgsError, FieldError};
use allocator::{claim_ref, AllocatedDevices, Allocator, HeldDevices};

/// The plugin's name in profiles (also its CycleState key).
pub const NAME: &str = "DynamicResources";
/// The finalizer that keeps an allocated claim from being deleted (upstream `resourceapi.Finalizer`).
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// Filter reason when the claims cannot all be allocated on the node.
pub const ERR_REASON_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// Filter reason when an allocated claim's node selector does not admit the node.
pub const ERR_REASON_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// Upstream `resourceapi.FirstAvailableDeviceRequestMaxSize`: the most sub-requests a request may list.
const FIRST_AVAILABLE_MAX_SIZE: i64 = 8;
/// How often PreBind tries a claim write that conflicts (client-go's `retry.DefaultRetry`).
const WRITE_ATTEMPTS: u32 = 5;
const WRITE_BACKOFF: Duration = Duration::from_millis(10);
/// Upstream `DynamicResourcesBindingTimeoutDefault`.
const DEFAULT_BINDING_TIMEOUT: Duration = Duration::from_secs(600);
/// How often PreBind looks at the binding conditions (upstream polls every 5s, the first time at once).
const BINDING_POLL: Duration = Duration::from_secs(5);
/// How long a claim PreBind created counts as written before the informers show it (upstream
/// `AssumeExtendedResourceTimeoutDefaultSeconds`).
const CREATED_CLAIM_TIMEOUT: Duration = Duration::from_secs(120);
/// Filter reason when the pod's extended resource claim comes from an earlier attempt (PostFilter deletes it).
pub const ERR_REASON_STALE_EXTENDED_CLAIM: &str = "cannot schedule extended resource claim";
/// Filter reason when an extended resource is neither on the node nor provided by a DeviceClass.
pub const ERR_REASON_CANNOT_FIT_RESOURCE: &str = "cannot fit resource";

/// PreFilter data, shared by the cycle state's copies as upstream's `stateData` is.
#[derive(Default)]
struct StateInner {
    /// The pod's claims, in `spec.resourceClaims` order, then its extended resource claim if it needs one.
    claims: Vec<Arc<ResourceClaim>>,
    /// Where the extended resource claim is in `claims` (the last).
    extended: Option<usize>,
    /// With an extended resource claim: the pod's DRA extended resource requests, each with the class that
    /// provides it, if any (upstream `draExtendedResource.podScalarResources`).
    extended_resources: BTreeMap<String, (i64, Option<Arc<DeviceClass>>)>,
    /// Per claim: the node selector of its allocation, when it is allocated and has one.
    available_on: Vec<Option<CompiledNodeSelector>>,
    /// Indices of the claims the scheduler allocates.
    to_allocate: Vec<usize>,
    /// What the allocator reads (only when some claim needs allocating).
    allocation: Option<AllocationInput>,
    /// Filter's allocations per feasible node, in `to_allocate` order.
    by_node: Mutex<HashMap<String, NodeAllocation>>,
    /// Claims whose allocation kept the pod off some node (PostFilter may deallocate them).
    unavailable: Mutex<BTreeSet<usize>>,
    /// Per claim: the allocation Reserve took; and the claim as PreBind wrote it.
    reserved: Mutex<HashMap<usize, AllocationResult>>,
    written: Mutex<HashMap<usize, Arc<ResourceClaim>>>,
}

/// What Filter found for one node (upstream `nodeAllocation`).
#[derive(Clone, Default)]
struct NodeAllocation {
    /// The allocations, in `to_allocate` order.
    results: Vec<AllocationResult>,
    /// The node's variant of the extended resource claim: the requests this node must serve through DRA.
    extended_claim: Option<Arc<ResourceClaim>>,
    /// Which container's extended resource each of its requests serves.
    mappings: Vec<ContainerExtendedResourceRequest>,
}

impl StateInner {
    /// Whether the pod names no claim of its own (upstream `noUserClaim`).
    fn no_user_claims(&self) -> bool {
        self.claims.len() == usize::from(self.extended.is_some())
    }

    /// The extended resource claim, when the pod has one.
    fn extended_claim(&self) -> Option<&Arc<ResourceClaim>> {
        self.extended.map(|i| &self.claims[i])
    }
}

/// The inputs of the allocator, gathered once per pod.
struct AllocationInput {
    objects: Arc<ClusterObjects>,
    /// The devices the API's claims hold (kept across cycles, see [`KeptClaims`]).
    api_devices: Arc<HeldDevices>,
    /// What this scheduler changed on top of the API's claims (its newer copies, in-flight allocations).
    our_devices: HeldDevices,
    /// The slices by the node they name.
    by_node: Arc<allocator::SlicesByNode>,
}

#[derive(Clone, Default)]
struct State(Arc<StateInner>);

/// Claims the scheduler changed before the informers show it (upstream's claim assume cache and in-flight map).
#[derive(Debug, Default)]
struct ClaimTracker {
    /// Claims as PreBind wrote them, by `namespace/name`, until the informers deliver that version or a newer one.
    assumed: HashMap<String, Arc<ResourceClaim>>,
    /// Claims PreBind created (extended resource claims), by `namespace/name`, until the informers show them or
    /// the deadline passes: until then their entry in `assumed` stands although the API's list lacks them (upstream
    /// PreBind waits for its assume cache to see such a claim instead).
    created: HashMap<String, Instant>,
    /// Claims with the allocation Reserve gave them, by UID, until PreBind wrote it or Unreserve dropped it.
    in_flight: HashMap<String, Arc<ResourceClaim>>,
}

fn rv_number(claim: &ResourceClaim) -> Option<u64> {
    claim.metadata.resource_version.as_deref().and_then(|v| v.parse().ok())
}

impl ClaimTracker {
    /// Forgets written claims the informers have caught up with, or that are gone.
    fn prune(&mut self, objects: &ClusterObjects) {
        let now = Instant::now();
        let ClaimTracker { assumed, created, .. } = self;
        created.retain(|key, deadline| {
            *deadline > now && !objects.resource_claims.contains_key(key) && assumed.contains_key(key)
        });
        assumed.retain(|key, a| match objects.resource_claims.get(key) {
            Some(api) => rv_number(a) > rv_number(api),
            None => created.contains_key(key),
        });
    }

    /// The claim as this scheduler knows it: the API's copy, unless PreBind wrote a newer one (or created it).
    fn claim(&self, objects: &ClusterObjects, key: &str) -> Option<Arc<ResourceClaim>> {
        let Some(api) = objects.resource_claims.get(key) else {
            return self.assumed.get(key).filter(|_| self.created.contains_key(key)).cloned();
        };
        Some(self.newer(key, api).clone())
    }

    /// The API's copy of the claim with `key`, unless PreBind wrote a newer one.
    fn newer<'a>(&'a self, key: &str, api: &'a Arc<ResourceClaim>) -> &'a Arc<ResourceClaim> {
        match self.assumed.get(key) {
            Some(a) if rv_number(a) > rv_number(api) => a,
            _ => api,
        }
    }

    /// The extended resource claim an earlier attempt made for the pod, as this scheduler knows it (upstream
    /// `findExtendedResourceClaim` over every claim): among the API's, through the index `kept` has of them, and
    /// those PreBind created that the API does not list yet.
    fn extended_claim(&self, objects: &ClusterObjects, kept: &KeptClaims, pod: &PodInfo) -> Option<Arc<ResourceClaim>> {
        let keys = kept.extended.get(&pod.uid).into_iter().flatten();
        let api = keys.filter_map(|key| objects.resource_claims.get(key).map(|c| self.newer(key, c)));
        let created = self.created.keys().filter(|k| !objects.resource_claims.contains_key(*k));
        let mut found = api.chain(created.filter_map(|k| self.assumed.get(k)));
        found.find(|c| extended::is_pods_extended_resource_claim(pod, c)).cloned()
    }

    /// What this scheduler holds that the API's claims do not show yet (with [`KeptClaims`], upstream
    /// `ListAllAllocatedDevices`): claims PreBind wrote, counted in, the API copies they replace counted out; claims
    /// PreBind created; allocations in flight.
    fn our_devices(&self, objects: &ClusterObjects) -> HeldDevices {
        let mut ours = HeldDevices::default();
        for (key, assumed) in &self.assumed {
            match objects.resource_claims.get(key) {
                Some(api) if Arc::ptr_eq(self.newer(key, api), assumed) => {
                    ours.count(api, -1);
                    ours.count(assumed, 1);
                }
                Some(_) => {}
                None if self.created.contains_key(key) => ours.count(assumed, 1),
                None => {}
            }
        }
        for c in self.in_flight.values() {
            ours.count(c, 1);
        }
        ours
    }
}

/// What the plugin keeps of the API's claims across cycles: the devices they hold and which are extended resource
/// claims, brought up to date by the claims that changed since it last looked (the claims' persistent map compares
/// by shared structure, so a change costs what it touches, not the cluster's claim count).
#[derive(Debug, Default)]
struct KeptClaims {
    /// The claims as last seen.
    seen: ObjectMap<ResourceClaim>,
    /// The devices they hold.
    held: Arc<HeldDevices>,
    /// Extended resource claims, by the UID of their controlling owner (a pod): `namespace/name`s.
    extended: HashMap<String, BTreeSet<String>>,
}

impl KeptClaims {
    /// Brings what is kept up to `claims`; the devices they hold.
    fn update(&mut self, claims: &ObjectMap<ResourceClaim>) -> Arc<HeldDevices> {
        if !self.seen.ptr_eq(claims) {
            let held = Arc::make_mut(&mut self.held);
            let extended = &mut self.extended;
            let mut count = |key: &String, claim: &ResourceClaim, sign: i64| {
                held.count(claim, sign);
                for owner in extended_owners(claim) {
                    let keys = extended.entry(owner.to_string()).or_default();
                    if sign > 0 {
                        keys.insert(key.clone());
                    } else {
                        keys.remove(key);
                        if keys.is_empty() {
                            extended.remove(owner);
                        }
                    }
                }
            };
            for (key, old, new) in object_changes(&self.seen, claims) {
                if let Some(old) = old {
                    count(key, old, -1);
                }
                if let Some(new) = new {
                    count(key, new, 1);
                }
            }
            self.seen = claims.clone();
        }
        self.held.clone()
    }
}

/// The index of the ResourceSlices by node, kept while the cluster's slices are the same objects (a cycle per pod
/// would otherwise index every slice again).
#[derive(Debug, Default)]
struct KeptSlices {
    seen: Vec<Arc<ResourceSlice>>,
    by_node: Arc<allocator::SlicesByNode>,
}

impl KeptSlices {
    /// The index of `slices`.
    fn update(&mut self, slices: &[Arc<ResourceSlice>]) -> Arc<allocator::SlicesByNode> {
        let same = self.seen.len() == slices.len() && self.seen.iter().zip(slices).all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.by_node = Arc::new(allocator::SlicesByNode::new(slices));
            self.seen = slices.to_vec();
        }
        self.by_node.clone()
    }
}

/// The UIDs of the claim's controlling owners, when it is marked as an extended resource claim.
fn extended_owners(claim: &ResourceClaim) -> impl Iterator<Item = &str> {
    let marked = claim.metadata.annotations.as_ref().and_then(|a| a.get(extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION));
    let owners = claim.metadata.owner_references.iter().flatten().filter(|r| r.controller == Some(true));
    owners.filter(move |_| marked.is_some_and(|v| v == "true")).map(|r| r.uid.as_str())
}

/// The claim's UID, the key of in-flight allocations; `namespace/name` for a claim without one (a hand-written
/// cluster file's), so that two such claims never share an entry.
fn uid(claim: &ResourceClaim) -> String {
    match claim.metadata.uid.as_deref() {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or(""),
            claim.metadata.name.as_deref().unwrap_or("")
        ),
    }
}

fn allocation(claim: &ResourceClaim) -> Option<&AllocationResult> {
    claim.status.as_ref().and_then(|s| s.allocation.as_ref())
}

/// Upstream `IsReservedForPod`.
fn reserved_for_pod(pod: &PodInfo, claim: &ResourceClaim) -> bool {
    let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or(&[]);
    reserved.iter().any(|r| r.uid == pod.uid)
}

/// `namespace/name` of a claim.
fn key_of(claim: &ResourceClaim) -> String {
    format!("{}/{}", claim.metadata.namespace.as_deref().unwrap_or(""), claim.metadata.name.as_deref().unwrap_or(""))
}

/// Whether the pod names any ResourceClaim (the fast path of every extension point).
fn has_claims(pod: &PodInfo) -> bool {
    pod.pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).is_some_and(|c| !c.is_empty())
}

/// Upstream `foreachPodResourceClaim`: the pod's claims, each existing, not being deleted, and (when made from a
/// template) owned by the pod; `Err` is the reason the pod cannot be scheduled yet.
fn pod_claims(
    pod: &PodInfo,
    lookup: impl Fn(&str) -> Option<Arc<ResourceClaim>>,
) -> Result<Vec<Arc<ResourceClaim>>, String> {
    let spec_claims = pod.pod.spec.as_ref().and_then(|s| s.resource_claims.as_deref()).unwrap_or(&[]);
    let statuses = pod.pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_deref()).unwrap_or(&[]);
    let mut out = Vec::with_capacity(spec_claims.len());
    for rc in spec_claims {
        let (name, must_check_owner) = if let Some(n) = &rc.resource_claim_name {
            (n.clone(), false)
        } else if rc.resource_claim_template_name.is_some() {
            match statuses.iter().find(|s| s.name == rc.name) {
                // The claim was not made on purpose (the controller skipped it): nothing to do for it.
                Some(s) if s.resource_claim_name.is_none() => continue,
                Some(s) => (s.resource_claim_name.clone().unwrap_or_default(), true),
                None => return Err(format!("pod \"{}/{}\": ResourceClaim not created yet", pod.namespace, pod.name)),
            }
        } else {
            return Err(format!(
                "pod \"{}/{}\", spec.resourceClaim {:?}: none of the supported fields are set",
                pod.namespace, pod.name, rc.name
            ));
        };
        let key = format!("{}/{name}", pod.namespace);
        let Some(claim) = lookup(&key) else {
            return Err(format!("could not find ResourceClaim {key:?}"));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("resourceclaim {name:?} is being deleted"));
        }
        if must_check_owner {
            let owned = claim.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
                && claim
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true) && r.uid == pod.uid);
            if !owned {
                return Err(format!(
                    "ResourceClaim {}/{name} was not created for pod {}/{} (pod is not owner)",
                    pod.namespace, pod.namespace, pod.name
                ));
            }
        }
        out.push(claim);
    }
    Ok(out)
}

/// The device requests of a claim (none when it has no spec: optional since v1.37's API).
pub(crate) fn claim_requests(claim: &ResourceClaim) -> &[k8s_openapi::api::resource::v1::DeviceRequest] {
    claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.as_deref()).unwrap_or(&[])
}

/// The DynamicResources plugin.
pub struct DynamicResources {
    cluster: Arc<dyn ClusterClient>,
    listers: Arc<Listers>,
    cel: cel::CelCache,
    tracker: Mutex<ClaimTracker>,
    /// What the plugin keeps of the API's claims across cycles.
    kept: Mutex<KeptClaims>,
    /// The ResourceSlices by the node they name, kept while the slices stay the same.
    kept_slices: Mutex<KeptSlices>,
    /// How long PreBind waits for the devices' binding conditions (`bindingTimeout`, 600s by default).
    binding_timeout: Duration,
    /// Numbers the temporary UIDs of in-memory extended resource claims (upstream draws a random UUID).
    special_claims: AtomicU64,
    /// The run's feature gates (the allocator's, DRAExtendedResource).
    features: crate::config::Features,
    /// The profile, as the binding-condition metrics label it.
    profile: String,
    /// Where the binding-condition metrics go.
    metrics: Arc<dyn crate::framework::metrics::DraMetrics>,
}

impl std::fmt::Debug for DynamicResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(NAME).finish_non_exhaustive()
    }
}

/// `DynamicResourcesArgs`, as in the scheduler configuration (camelCase), both timeouts as Go durations.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DynamicResourcesArgs {
    /// How long Filter may search for devices per node (DRASchedulerFilterTimeout, on since v1.34; 0 disables).
    pub filter_timeout: Option<String>,
    /// How long PreBind waits for devices' binding conditions (DRADeviceBindingConditions, on since v1.36).
    pub binding_timeout: Option<String>,
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(default)]
    _kind: Option<String>,
}

impl DynamicResourcesArgs {
    /// Decodes the args and checks them as upstream's `ValidateDynamicResourcesArgs` with v1.37's default gates:
    /// `filterTimeout` zero or positive, `bindingTimeout` at least one second.
    pub fn parse(args: Option<&serde_json::Value>) -> Result<DynamicResourcesArgs, ArgsError> {
        let a: DynamicResourcesArgs = decode(args)?;
        let mut errs = Vec::new();
        let duration = |field: &str, v: &str, errs: &mut Vec<FieldError>| match parse_go_duration(v) {
            Ok(d) => Some(d),
            Err(m) => {
                errs.push(invalid(field, format!("{v:?}"), &m));
                None
            }
        };
        // A Go duration can be negative; `parse_go_duration` refuses a sign, which covers "must be zero or positive".
        if let Some(v) = &a.filter_timeout {
            duration("filterTimeout", v, &mut errs);
        }
        if let Some(v) = &a.binding_timeout {
            if duration("bindingTimeout", v, &mut errs).is_some_and(|d| d < Duration::from_secs(1)) {
                errs.push(invalid("bindingTimeout", v, "must be at least 1 second"));
            }
        }
        aggregate(errs).map(|()| a)
    }
}

impl DynamicResources {
    /// Builds the plugin (it takes no args); it writes claims through the context's cluster and reads its listers.
    pub fn new(args: Option<&serde_json::Value>, ctx: &PluginContext) -> Result<DynamicResources, String> {
        // Checked as upstream checks them; the filter timeout has no effect here (see the module doc).
        let a = DynamicResourcesArgs::parse(args).map_err(|e| format!("{NAME} args: {e}"))?;
        let binding_timeout =
            a.binding_timeout.as_deref().and_then(|v| parse_go_duration(v).ok()).unwrap_or(DEFAULT_BINDING_TIMEOUT);
        Ok(DynamicResources {
            cluster: ctx.cluster.clone(),
            listers: ctx.listers.clone(),
            cel: cel::CelCache::default(),
            tracker: Mutex::default(),
            kept: Mutex::default(),
            kept_slices: Mutex::default(),
            binding_timeout,
            special_claims: AtomicU64::new(0),
            features: ctx.features,
            profile: ctx.profile.clone(),
            metrics: ctx.dra_metrics.clone(),
        })
    }

    /// Upstream PreBind's wait (DRADeviceBindingConditions): when an allocated device has binding conditions, looks
    /// at the claims as the informers show them, at once and then every 5s, until all are met (success), one of
    /// a device's binding failure conditions is true, or a claim waited longer than the binding timeout (errors:
    /// the next attempt's Filter finds the claim unavailable and PostFilter deallocates it).
    fn wait_for_binding_conditions(&self, s: &StateInner) -> Status {
        if !self.features.dra_device_binding_conditions {
            return Status::success();
        }
        let written = s.written.lock().expect("dra state lock").clone();
        let claims: Vec<Arc<ResourceClaim>> =
            s.claims.iter().enumerate().map(|(i, c)| written.get(&i).cloned().unwrap_or_else(|| c.clone())).collect();
        let waits = claims.iter().filter_map(|c| allocation(c)).any(|a| {
            a.devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .any(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
        });
        if !waits {
            return Status::success();
        }
        let start = std::time::Instant::now();
        let (status, label) = self.poll_binding_conditions(&claims);
        // As upstream: the wait once per allocated device, the allocation once per device with binding conditions.
        let elapsed = start.elapsed();
        for a in claims.iter().filter_map(|c| allocation(c)) {
            for r in a.devices.iter().flat_map(|d| d.results.iter().flatten()) {
                self.metrics.binding_conditions_wait(&self.profile, &r.driver, label, elapsed);
                if r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()) {
                    self.metrics.binding_conditions_allocation(&self.profile, &r.driver, label);
                }
            }
        }
        status
    }

    /// The claims as the informers show them, at once and then every 5s, until all are ready, one failed, or the
    /// wait ran out: the status, and its label in the binding-condition metrics.
    fn poll_binding_conditions(&self, claims: &[Arc<ResourceClaim>]) -> (Status, &'static str) {
        let deadline = std::time::Instant::now() + self.binding_timeout;
        loop {
            let objects = self.listers.objects();
            let mut ready = true;
            for claim in claims {
                let key = format!(
                    "{}/{}",
                    claim.metadata.namespace.as_deref().unwrap_or(""),
                    claim.metadata.name.as_deref().unwrap_or("")
                );
                // The informers' copy once it caught up with the write, else the write's answer.
                let latest = match self.tracker().claim(&objects, &key) {
                    Some(c) if rv_number(&c) >= rv_number(claim) => c,
                    _ => claim.clone(),
                };
                match claim_ready_for_binding(&latest) {
                    Err(e) => return (Status::error(e), "failure"),
                    Ok(true) => {}
                    Ok(false) if claim_timed_out(&latest, self.binding_timeout) => {
                        let name = claim.metadata.name.as_deref().unwrap_or("");
                        return (Status::error(format!("device binding timeout: claim={name}")), "timeout");
                    }
                    Ok(false) => ready = false,
                }
            }
            if ready {
                return (Status::success(), "success");
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return (Status::error("device binding timeout: context deadline exceeded"), "timeout");
            }
            std::thread::sleep(BINDING_POLL.min(deadline - now));
        }
    }

    fn tracker(&self) -> std::sync::MutexGuard<'_, ClaimTracker> {
        self.tracker.lock().expect("claim tracker lock")
    }

    /// Upstream `bindClaim`: writes the allocation (when the scheduler made it) and the pod's reservation on one
    /// claim, reading it again after a conflict.
    /// `in_flight` is the UID its allocation is in flight under (that of the in-memory claim, for a claim PreBind
    /// just created).
    fn bind_claim(
        &self,
        pod: &PodInfo,
        claim: &Arc<ResourceClaim>,
        allocation: Option<&AllocationResult>,
        in_flight: &str,
    ) -> Result<Arc<ResourceClaim>, String> {
        let key = key_of(claim);
        let result = self.write_claim(pod, claim, &key, allocation);
        if allocation.is_some() {
            let mut tracker = self.tracker();
            tracker.in_flight.remove(in_flight);
            if let Ok(written) = &result {
                tracker.assumed.insert(key, written.clone());
            }
        }
        result
    }

    /// Upstream `bindClaim` for the extended resource claim: creates it from the node's variant Filter made
    /// (`generateName`, owned by the pod; the name, UID and status left to the API server), writes its allocation
    /// and the pod's reservation, then sets the pod's `status.extendedResourceClaimStatus` to name the claim and
    /// which container's resource each request serves.
    fn bind_extended_resource_claim(
        &self,
        s: &StateInner,
        index: usize,
        pod: &PodInfo,
        node: &str,
        allocation: Option<&AllocationResult>,
    ) -> Result<Arc<ResourceClaim>, String> {
        let in_memory = &s.claims[index];
        let node_allocation = s.by_node.lock().expect("dra state lock").get(node).cloned().unwrap_or_default();
        let mut claim = in_memory.clone();
        if extended::is_special(in_memory) {
            let Some(node_claim) = &node_allocation.extended_claim else {
                return Err(format!("extended resource claim not found for node {node}"));
            };
            let mut new = (**node_claim).clone();
            new.metadata.name = None;
            new.metadata.uid = None;
            new.status = None;
            let created = self
                .cluster
                .create_resource_claim(&new)
                .map_err(|e| format!("create claim for extended resources {}: {e}", claim_ref(&new)))?;
            claim = Arc::new(created);
            // From now on the claim is the created one: Unreserve deletes it, and a conflict reads it again.
            s.written.lock().expect("dra state lock").insert(index, claim.clone());
            let mut tracker = self.tracker();
            tracker.assumed.insert(key_of(&claim), claim.clone());
            tracker.created.insert(key_of(&claim), Instant::now() + CREATED_CLAIM_TIMEOUT);
        }
        let written = self.bind_claim(pod, &claim, allocation, &uid(in_memory))?;
        if node_allocation.mappings.is_empty() {
            return Err(format!(
                "nil or empty request mappings, no update of pod {}/{} ExtendedResourceClaimStatus",
                pod.namespace, pod.name
            ));
        }
        let status = PodExtendedResourceClaimStatus {
            request_mappings: node_allocation.mappings.clone(),
            resource_claim_name: written.metadata.name.clone().unwrap_or_default(),
        };
        self.cluster
            .set_extended_resource_claim_status(pod, &status)
            .map_err(|e| format!("update pod {}/{} ExtendedResourceClaimStatus: {e}", pod.namespace, pod.name))?;
        Ok(written)
    }

    /// Upstream `unreserveExtendedResourceClaim`: forgets the in-memory claim's allocation in flight and deletes
    /// the claim from the API when PreBind (or an earlier attempt) created it.
    fn unreserve_extended_resource_claim(&self, in_memory: &Arc<ResourceClaim>, written: Option<&Arc<ResourceClaim>>) {
        self.tracker().in_flight.remove(&uid(in_memory));
        let claim = written.unwrap_or(in_memory);
        if extended::is_special(claim) {
            return;
        }
        if let Err(e) = self.delete_claim(claim) {
            tracing::warn!(claim = %claim_ref(claim), error = %e, "delete extended resource claim");
        }
    }

    /// Upstream `deleteClaim`: drops the scheduler's finalizer (reading the claim again after a conflict), then
    /// deletes the claim; one already gone is no error.
    fn delete_claim(&self, claim: &Arc<ResourceClaim>) -> Result<(), String> {
        let key = key_of(claim);
        let name = claim_ref(claim);
        let mut c = (**claim).clone();
        for attempt in 0..WRITE_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(WRITE_BACKOFF);
                let latest = self.listers.objects();
                let Some(fresh) = self.tracker().claim(&latest, &key) else { break };
                c = (*fresh).clone();
            }
            let Some(at) = c.metadata.finalizers.iter().flatten().position(|f| f == FINALIZER) else { break };
            c.metadata.finalizers.as_mut().expect("finalizers").remove(at);
            match self.cluster.update_resource_claim(&c) {
                Ok(_) => break,
                Err(ClusterError::Conflict { .. }) if attempt + 1 < WRITE_ATTEMPTS => continue,
                Err(e) => return Err(format!("update resourceclaim {name}: {e}")),
            }
        }
        {
            let mut tracker = self.tracker();
            tracker.assumed.remove(&key);
            tracker.created.remove(&key);
        }
        self.cluster.delete_resource_claim(&c).map_err(|e| e.to_string())
    }

    fn write_claim(
        &self,
        pod: &PodInfo,
        original: &Arc<ResourceClaim>,
        key: &str,
        allocation: Option<&AllocationResult>,
    ) -> Result<Arc<ResourceClaim>, String> {
        let name = claim_ref(original);
        let mut claim = (**original).clone();
        for attempt in 0..WRITE_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(WRITE_BACKOFF);
                // Upstream GETs the claim: under many writers (a claim shared by a PodGroup's pods) the informers'
                // copy is often still the one that conflicted.
                let (ns, claim_name) = (
                    claim.metadata.namespace.clone().unwrap_or_default(),
                    claim.metadata.name.clone().unwrap_or_default(),
                );
                match self.cluster.get_resource_claim(&ns, &claim_name) {
                    Ok(Some(c)) => claim = c,
                    Ok(None) => {
                        let latest = self.listers.objects();
                        let Some(c) = self.tracker().claim(&latest, key) else {
                            return Err(format!(
                                "get updated claim {name} after conflict: resourceclaim {key:?} not found"
                            ));
                        };
                        claim = (*c).clone();
                    }
                    Err(e) => return Err(format!("get updated claim {name} after conflict: {e}")),
                }
            }
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(format!("claim {name} got deleted in the meantime"));
            }
            if let Some(a) = allocation {
                if self::allocation(&claim).is_some() {
                    return Err(format!("claim {name} got allocated elsewhere in the meantime"));
                }
                if !claim.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER) {
                    claim.metadata.finalizers.get_or_insert_with(Vec::new).push(FINALIZER.into());
                    match self.cluster.update_resource_claim(&claim) {
                        Ok(updated) => claim = updated,
                        Err(ClusterError::Conflict { .. }) if attempt + 1 < WRITE_ATTEMPTS => continue,
                        Err(e) => return Err(format!("add finalizer to claim {name}: {e}")),
                    }
                }
                claim.status.get_or_insert_with(Default::default).allocation = Some(a.clone());
            }
            // The binding timeout counts from the allocation's timestamp (DRADeviceBindingConditions).
            match claim.status.as_mut().and_then(|st| st.allocation.as_mut()) {
                None => return Err(format!("claim {name} got deallocated elsewhere in the meantime")),
                Some(a) if a.allocation_timestamp.is_none() => {
                    a.allocation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
                }
                Some(_) => {}
            }
            claim.status.get_or_insert_with(Default::default).reserved_for.get_or_insert_with(Vec::new).push(
                ResourceClaimConsumerReference {
                    resource: "pods".into(),
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                    api_group: None,
                },
            );
            match self.cluster.update_resource_claim_status(&claim) {
                Ok(updated) => return Ok(Arc::new(updated)),
                Err(ClusterError::Conflict { .. }) if attempt + 1 < WRITE_ATTEMPTS => continue,
                Err(e) if allocation.is_some() => {
                    return Err(format!("add allocation and reservation to claim {name}: {e}"))
                }
                Err(e) => return Err(format!("add reservation to claim {name}: {e}")),
            }
        }
        Err(format!("add reservation to claim {name}: too many conflicts"))
    }
}

impl Plugin for DynamicResources {
    fn name(&self) -> &str {
        NAME
    }

    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // Node labels may decide which slices and allocations reach a node.
            ClusterEvent::new(
                EventResource::Node,
                action::ADD | action::UPDATE_LABEL | action::UPDATE_TAINT | action::UPDATE_RESOURCES,
            ),
            // Allocations are tracked in claims; a new claim may be the one a pod waits for.
            ClusterEvent::new(EventResource::ResourceClaim, action::ADD | action::UPDATE),
            // The resource claim controller names a generated claim in the pod's status.
            ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE),
            ClusterEvent::new(EventResource::DeviceClass, action::ADD | action::UPDATE),
            ClusterEvent::new(EventResource::ResourceSlice, action::ADD | action::UPDATE),
        ]
    }

    /// Upstream `isSchedulableAfterPodChange`: only an update of the pod itself can name its claims; and
    /// `isSchedulableAfterClaimChange`: a claim's change matters to the pods that use it, and a deallocation to any.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        if event.resource == EventResource::ResourceClaim {
            return self.hint_after_claim_change(pod, old, new);
        }
        if event.resource != EventResource::UnscheduledPod {
            return QueueingHint::Queue;
        }
        match new {
            Some(EventObject::Pod(p)) if p.uid != pod.uid => QueueingHint::QueueSkip,
            Some(EventObject::Pod(p)) => {
                let objects = self.listers.objects();
                let tracker = self.tracker();
                match pod_claims(p, |k| tracker.claim(&objects, k)) {
                    Ok(_) => QueueingHint::Queue,
                    Err(_) => QueueingHint::QueueSkip,
                }
            }
            _ => QueueingHint::Queue,
        }
    }

    crate::serves!(pre_enqueue, pre_filter, filter, post_filter, score, reserve, pre_bind, sign);
}

impl DynamicResources {
    /// Upstream `isSchedulableAfterClaimChange`, for an event that carries the claim (without it, the pod is
    /// queued).
    fn hint_after_claim_change(
        &self,
        pod: &PodInfo,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        let claim = |o: Option<&EventObject>| match o {
            Some(EventObject::ResourceClaim(c)) => Some(c.clone()),
            _ => None,
        };
        let (old, new) = (claim(old), claim(new));
        let Some(modified) = new else {
            // Deleted: it freed nothing unless it was still allocated.
            return match old {
                Some(o) if allocation(&o).is_none() => QueueingHint::QueueSkip,
                _ => QueueingHint::Queue,
            };
        };
        let objects = self.listers.objects();
        let tracker = self.tracker();
        let Ok(claims) = pod_claims(pod, |k| tracker.claim(&objects, k)) else {
            // One of the pod's claims is still missing (or not the pod's): not schedulable yet.
            return QueueingHint::QueueSkip;
        };
        drop(tracker);
        if old.as_ref().is_some_and(|o| allocation(o).is_some()) && allocation(&modified).is_none() {
            // Deallocated: its devices may serve this pod.
            return QueueingHint::Queue;
        }
        if !claims.iter().any(|c| c.metadata.uid.is_some() && c.metadata.uid == modified.metadata.uid) {
            return QueueingHint::QueueSkip;
        }
        match old {
            None => QueueingHint::Queue,
            // Only a change of the status (an allocation, reservation or device status) matters.
            Some(o) if o.status == modified.status => QueueingHint::QueueSkip,
            Some(_) => QueueingHint::Queue,
        }
    }
}

impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if !has_claims(pod) {
            return Status::success();
        }
        let objects = self.listers.objects();
        let tracker = self.tracker();
        match pod_claims(pod, |k| tracker.claim(&objects, k)) {
            Ok(_) => Status::success(),
            Err(reason) => Status::unresolvable(reason),
        }
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        state.write(NAME, State::default());
        let objects = &snapshot.objects;
        // DRAExtendedResource: a pod asking for an extended resource that some DeviceClass provides gets one more
        // claim (upstream `preFilterExtendedResources`).
        let extended_resources = if self.features.dra_extended_resource {
            extended::pod_extended_resources(pod, objects)
        } else {
            Default::default()
        };
        if !has_claims(pod) && extended_resources.is_empty() {
            return (None, Status::skip());
        }
        let mut tracker = self.tracker();
        tracker.prune(objects);
        let mut kept = self.kept.lock().expect("dra kept claims lock");
        let api_devices = kept.update(&objects.resource_claims);
        let mut claims = if has_claims(pod) {
            match pod_claims(pod, |k| tracker.claim(objects, k)) {
                Ok(c) => c,
                Err(reason) => return (None, Status::unresolvable(reason)),
            }
        } else {
            Vec::new()
        };
        let mut inner = StateInner::default();
        if !extended_resources.is_empty() {
            // The claim an earlier attempt created (Filter refuses it, PostFilter deletes it), else a new one in
            // memory.
            let earlier = tracker.extended_claim(objects, &kept, pod);
            let claim = earlier.unwrap_or_else(|| {
                let n = self.special_claims.fetch_add(1, Ordering::Relaxed);
                Arc::new(extended::special_claim(pod, format!("{}-extended-resources-{n}", pod.uid)))
            });
            inner.extended = Some(claims.len());
            inner.extended_resources = extended_resources;
            claims.push(claim);
        }
        if claims.is_empty() {
            return (None, Status::skip());
        }
        inner.available_on = Vec::with_capacity(claims.len());
        for (index, claim) in claims.iter().enumerate() {
            // Upstream's "resourceclaim in use" check cannot fire: any claim may be reserved for another pod.
            if let Some(a) = allocation(claim) {
                let selector = match &a.node_selector {
                    Some(sel) => match CompiledNodeSelector::new(sel) {
                        Ok(s) => Some(s),
                        Err(e) => return (None, Status::error(e)),
                    },
                    None => None,
                };
                inner.available_on.push(selector);
                continue;
            }
            inner.available_on.push(None);
            inner.to_allocate.push(index);
            if tracker.in_flight.contains_key(&uid(claim)) {
                return (
                    None,
                    Status::unresolvable(format!(
                        "resource claim {} is in the process of being allocated",
                        claim_ref(claim)
                    )),
                );
            }
            // The extended resource claim has no requests yet (a new one) or is left to Filter (an earlier one).
            if inner.extended == Some(index) {
                continue;
            }
            // Every class must exist, however the claim is allocated.
            for request in claim_requests(claim) {
                let subs = request.first_available.as_deref().unwrap_or(&[]);
                let checks: Vec<(String, &str)> = match (&request.exactly, subs) {
                    (Some(e), _) => vec![(request.name.clone(), e.device_class_name.as_str())],
                    (None, subs) if !subs.is_empty() => subs
                        .iter()
                        .map(|s| (format!("{}/{}", request.name, s.name), s.device_class_name.as_str()))
                        .collect(),
                    _ => {
                        return (
                            None,
                            Status::unresolvable(format!(
                                "resource claim {}, request {}: unknown request type",
                                claim_ref(claim),
                                request.name
                            )),
                        )
                    }
                };
                for (request_name, class) in checks {
                    if class.is_empty() {
                        return (None, Status::error(format!("request {request_name}: unsupported request type")));
                    }
                    if !objects.device_classes.contains_key(class) {
                        return (
                            None,
                            Status::unresolvable(format!(
                                "request {request_name}: device class {class} does not exist"
                            )),
                        );
                    }
                }
            }
        }
        if !inner.to_allocate.is_empty() {
            let our_devices = tracker.our_devices(objects);
            let by_node = self.kept_slices.lock().expect("dra kept slices lock").update(&objects.resource_slices);
            inner.allocation = Some(AllocationInput { objects: objects.clone(), api_devices, our_devices, by_node });
        }
        inner.claims = claims;
        state.write(NAME, State(Arc::new(inner)));
        (None, Status::success())
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(State(s)) = state.read::<State>(NAME) else {
            return Status::error("not found");
        };
        if s.claims.is_empty() {
            return Status::success();
        }
        let extended = match self.filter_extended_resources(s, pod, node) {
            Ok(e) => e,
            Err(status) => return status,
        };
        // Extended resources all served by the node's device plugin, and no claim of the pod's own: nothing to do.
        if extended.is_none() && s.no_user_claims() {
            return Status::success();
        }
        let labels = node.labels();
        // An allocated claim is unavailable off its nodes, and (DRADeviceBindingConditions) when its devices failed
        // to bind or timed out waiting: PostFilter may then deallocate it so that other devices are tried.
        let unavailable: Vec<usize> = (0..s.claims.len())
            .filter(|&i| {
                s.available_on[i].as_ref().is_some_and(|sel| !sel.matches(&node.name, labels))
                    || allocation(&s.claims[i]).is_some()
                        && match claim_ready_for_binding(&s.claims[i]) {
                            Err(_) => true,
                            Ok(ready) => !ready && claim_timed_out(&s.claims[i], self.binding_timeout),
                        }
            })
            .collect();
        let mut allocations = None;
        if let Some(input) = &s.allocation {
            // The node's variant of the extended resource claim stands in for the pod's.
            let claims: Vec<Arc<ResourceClaim>> = s
                .to_allocate
                .iter()
                .map(|&i| match &extended {
                    Some((c, _)) if s.extended == Some(i) => c.clone(),
                    _ => s.claims[i].clone(),
                })
                .collect();
            let allocator = Allocator {
                allocated: AllocatedDevices { api: &input.api_devices, ours: &input.our_devices },
                classes: &input.objects.device_classes,
                slices: &input.objects.resource_slices,
                by_node: &input.by_node,
                taint_rules: &input.objects.device_taint_rules,
                cel: &self.cel,
                features: self.features,
            };
            match allocator.allocate(&node.name, labels, &claims) {
                // Not the pod's fault: other nodes may still do.
                Err(e) if e.0 == allocator::INVALID_POOLS => return Status::unschedulable(e.0),
                Err(e) => return Status::error(e.to_string()),
                Ok(None) => return Status::unresolvable(ERR_REASON_CANNOT_ALLOCATE),
                Ok(Some(a)) => allocations = Some(a),
            }
        }
        if !unavailable.is_empty() {
            s.unavailable.lock().expect("dra state lock").extend(unavailable);
            return Status::unresolvable(ERR_REASON_NOT_AVAILABLE);
        }
        if let Some(results) = allocations {
            let (extended_claim, mappings) = extended.map_or((None, Vec::new()), |(c, m)| (Some(c), m));
            let a = NodeAllocation { results, extended_claim, mappings };
            s.by_node.lock().expect("dra state lock").insert(node.name.clone(), a);
        }
        Status::success()
    }
}

impl DynamicResources {
    /// Upstream `filterExtendedResources`: the node's variant of the pod's extended resource claim, asking for
    /// what the node must provide through DRA (the extended resources a DeviceClass backs and the node does not
    /// list in its allocatable), with the containers each request serves; `None` when there is no such claim, or
    /// nothing is left for DRA to do on this node. A claim made by an earlier attempt cannot be used again.
    #[allow(clippy::type_complexity)]
    fn filter_extended_resources(
        &self,
        s: &StateInner,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Result<Option<(Arc<ResourceClaim>, Vec<ContainerExtendedResourceRequest>)>, Status> {
        let Some(claim) = s.extended_claim() else { return Ok(None) };
        if extended::has_requests(claim) {
            return Err(Status::unresolvable(ERR_REASON_STALE_EXTENDED_CLAIM));
        }
        let dra = extended::node_dra_resources(&s.extended_resources, &node.allocatable.scalar)
            .map_err(|_| Status::unresolvable(ERR_REASON_CANNOT_FIT_RESOURCE))?;
        if s.no_user_claims() && dra.is_empty() {
            // The device plugin serves them all; NodeResourcesFit checked that it has room.
            return Ok(None);
        }
        if allocation(claim).is_some() {
            return Ok(None);
        }
        let (requests, mappings) = extended::requests_and_mappings(pod, &dra);
        let mut node_claim = (**claim).clone();
        let spec = node_claim.spec.get_or_insert_with(Default::default);
        let devices = spec.devices.get_or_insert_with(DeviceClaim::default);
        devices.requests = (!requests.is_empty()).then_some(requests);
        Ok(Some((Arc::new(node_claim), mappings)))
    }
}

impl ScorePlugin for DynamicResources {
    /// Upstream's (DRAPrioritizedList): for each `firstAvailable` request, the sub-request the allocation took
    /// scores `8 - its index` (8 being the most sub-requests a request may list), summed over the pod's claims,
    /// whether allocated before or by Filter on this node.
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(State(s)) = state.read::<State>(NAME) else { return Err(Status::error("not found")) };
        if s.claims.is_empty() {
            return Ok(0);
        }
        let by_node = s.by_node.lock().expect("dra state lock");
        let Some(allocations) = by_node.get(&node.name).map(|a| &a.results) else { return Ok(0) };
        let mut next = allocations.iter();
        let mut score = 0;
        for claim in &s.claims {
            let a = match allocation(claim) {
                Some(a) => a,
                None => next.next().ok_or_else(|| {
                    Status::error(format!(
                        "number of allocations {} is smaller than number of claims needing allocation",
                        allocations.len()
                    ))
                })?,
            };
            let results = a.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or(&[]);
            for request in claim_requests(claim) {
                if request.exactly.is_some() {
                    continue;
                }
                for (i, sub) in request.first_available.iter().flatten().enumerate() {
                    let name = format!("{}/{}", request.name, sub.name);
                    if results.iter().any(|r| r.request == name) {
                        score += FIRST_AVAILABLE_MAX_SIZE - i as i64;
                    }
                }
            }
        }
        Ok(score)
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores)
    }

    fn has_normalize(&self) -> bool {
        true
    }
}

/// Upstream `isClaimReadyForBinding`: true when every allocated device with binding conditions has them all true
/// in the claim's device status; an error when one of its binding failure conditions is true.
fn claim_ready_for_binding(claim: &ResourceClaim) -> Result<bool, String> {
    let Some(a) = allocation(claim) else { return Ok(false) };
    let statuses = claim.status.as_ref().and_then(|s| s.devices.as_deref()).unwrap_or(&[]);
    for r in a.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or(&[]) {
        let conditions = r.binding_conditions.as_deref().unwrap_or(&[]);
        if conditions.is_empty() {
            continue;
        }
        let Some(status) = statuses
            .iter()
            .find(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device && d.share_id == r.share_id)
        else {
            return Ok(false);
        };
        let found = |t: &str| status.conditions.iter().flatten().find(|c| c.type_ == t);
        for f in r.binding_failure_conditions.iter().flatten() {
            if let Some(c) = found(f).filter(|c| c.status == "True") {
                return Err(format!(
                    "claim {} failed to bind its devices: claim={}, reason={}, message={:?}",
                    claim_ref(claim),
                    claim.metadata.name.as_deref().unwrap_or(""),
                    c.reason,
                    c.message
                ));
            }
        }
        if !conditions.iter().all(|t| found(t).is_some_and(|c| c.status == "True")) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Upstream `isClaimTimeout`: the claim has a device with binding conditions and was allocated longer ago than
/// the binding timeout.
fn claim_timed_out(claim: &ResourceClaim, timeout: Duration) -> bool {
    let Some(a) = allocation(claim) else { return false };
    let Some(Time(at)) = &a.allocation_timestamp else { return false };
    let waits = a.devices.iter().flat_map(|d| d.results.iter().flatten()).any(|r| r.binding_conditions.is_some());
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(*at);
    waits && elapsed.is_positive() && elapsed.unsigned_abs() > timeout
}

impl PostFilterPlugin for DynamicResources {
    /// Upstream's: deallocates one claim that kept the pod off a node and that no other pod uses, so that the
    /// next attempt may allocate it elsewhere.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        _filtered: &NodeToStatus,
        _handle: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        let Some(State(s)) = state.read::<State>(NAME) else {
            return (None, Status::error("not found"));
        };
        if s.claims.is_empty() {
            // Since v1.35 upstream says nothing here (it was "no new claims to deallocate"), so the pod's
            // message goes on with the next PostFilter's words alone.
            return (None, Status::code_only(Code::Unschedulable));
        }
        let unavailable = s.unavailable.lock().expect("dra state lock").clone();
        // An extended resource claim from an earlier attempt is deleted rather than deallocated.
        let stale_extended = s.extended_claim().filter(|c| !extended::is_special(c));
        for index in unavailable {
            if s.extended == Some(index) {
                if stale_extended.is_some() {
                    break;
                }
                continue;
            }
            let claim = &s.claims[index];
            let reserved = claim.status.as_ref().and_then(|st| st.reserved_for.as_deref()).unwrap_or(&[]);
            if reserved.is_empty() || reserved.len() == 1 && reserved[0].uid == pod.uid {
                let mut c = (**claim).clone();
                if let Some(st) = c.status.as_mut() {
                    st.reserved_for = None;
                    st.allocation = None;
                    st.devices = None;
                }
                if let Err(e) = self.cluster.update_resource_claim_status(&c) {
                    return (None, Status::error(e.to_string()));
                }
                return (None, Status::unschedulable("deallocation of ResourceClaim completed"));
            }
        }
        if let Some(claim) = stale_extended {
            if let Err(e) = self.delete_claim(claim) {
                return (None, Status::error(e));
            }
            return (None, Status::unschedulable("deletion of ResourceClaim completed"));
        }
        (None, Status::code_only(Code::Unschedulable))
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, _pod: &PodInfo, node: &str) -> Status {
        // From here on only this node's allocation is read: what Filter found for every other node and the
        // allocator's inputs (every allocated device of the cluster) go now rather than live as long as the
        // binding does — with a backlog, hundreds of bindings wait on the API server at once.
        if let Some(State(inner)) = state.read_mut::<State>(NAME) {
            if let Some(inner) = Arc::get_mut(inner) {
                inner.allocation = None;
                if let Ok(by_node) = inner.by_node.get_mut() {
                    by_node.retain(|n, _| n == node);
                }
            }
        }
        let Some(State(s)) = state.read::<State>(NAME) else { return Status::error("not found") };
        if s.to_allocate.is_empty() {
            // Allocated claims are reserved for real in PreBind; a conflict there means another pod was faster.
            return Status::success();
        }
        let node_allocation = s.by_node.lock().expect("dra state lock").get(node).cloned();
        let Some(NodeAllocation { results: allocations, extended_claim, .. }) =
            node_allocation.filter(|a| !a.results.is_empty())
        else {
            // Only the extended resource claim, and the node's device plugin serves it all: nothing to allocate.
            if s.to_allocate.iter().all(|&i| s.extended == Some(i)) {
                return Status::success();
            }
            return Status::error("claim allocation not found for node");
        };
        if allocations.len() != s.to_allocate.len() {
            return Status::error(format!(
                "internal error, have {} allocations, {} claims to allocate, want {} claims",
                allocations.len(),
                s.to_allocate.len(),
                s.to_allocate.len()
            ));
        }
        let mut tracker = self.tracker();
        let mut reserved = s.reserved.lock().expect("dra state lock");
        for (&index, allocation) in s.to_allocate.iter().zip(allocations) {
            // The node's variant of the extended resource claim replaces the pod's.
            let mut claim = match &extended_claim {
                Some(c) if s.extended == Some(index) => (**c).clone(),
                _ => (*s.claims[index]).clone(),
            };
            if !claim.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER) {
                claim.metadata.finalizers.get_or_insert_with(Vec::new).push(FINALIZER.into());
            }
            claim.status.get_or_insert_with(Default::default).allocation = Some(allocation.clone());
            tracker.in_flight.insert(uid(&claim), Arc::new(claim));
            reserved.insert(index, allocation);
        }
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, _node: &str) {
        let Some(State(s)) = state.read::<State>(NAME) else { return };
        let written = s.written.lock().expect("dra state lock").clone();
        for (index, original) in s.claims.iter().enumerate() {
            if s.extended == Some(index) {
                self.unreserve_extended_resource_claim(original, written.get(&index));
                continue;
            }
            let claim = written.get(&index).unwrap_or(original);
            {
                let mut tracker = self.tracker();
                if tracker.in_flight.remove(&uid(claim)).is_some() {
                    tracker.assumed.remove(&format!(
                        "{}/{}",
                        claim.metadata.namespace.as_deref().unwrap_or(""),
                        claim.metadata.name.as_deref().unwrap_or("")
                    ));
                }
            }
            if allocation(claim).is_some() && reserved_for_pod(pod, claim) {
                // Upstream removes the pod with a patch; this drops it from the copy the write answered.
                let mut c = (**claim).clone();
                if let Some(r) = c.status.as_mut().and_then(|st| st.reserved_for.as_mut()) {
                    r.retain(|r| r.uid != pod.uid);
                }
                if let Err(e) = self.cluster.update_resource_claim_status(&c) {
                    tracing::warn!(claim = %claim_ref(claim), error = %e, "unreserve");
                }
            }
        }
    }
}

impl PreBindPlugin for DynamicResources {
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &PodInfo, _node: &str) -> Status {
        match state.read::<State>(NAME) {
            None => Status::error("not found"),
            Some(State(s)) if s.claims.is_empty() => Status::skip(),
            Some(_) => Status::success(),
        }
    }

    fn pre_bind_in_parallel(&self) -> bool {
        true
    }

    fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let Some(State(s)) = state.read::<State>(NAME) else { return Status::error("not found") };
        let reserved = s.reserved.lock().expect("dra state lock").clone();
        for (index, claim) in s.claims.iter().enumerate() {
            if reserved_for_pod(pod, claim) {
                continue;
            }
            let result = if s.extended == Some(index) {
                // Nothing for DRA when the node's device plugin serves every extended resource.
                if !reserved.contains_key(&index) && !extended::has_requests(claim) {
                    continue;
                }
                self.bind_extended_resource_claim(s, index, pod, node, reserved.get(&index))
            } else {
                self.bind_claim(pod, claim, reserved.get(&index), &uid(claim))
            };
            match result {
                Ok(written) => {
                    s.written.lock().expect("dra state lock").insert(index, written);
                }
                Err(e) => return Status::error(e),
            }
        }
        self.wait_for_binding_conditions(s)
    }
}

impl crate::framework::SignPlugin for DynamicResources {
    /// As upstream: a pod with resource claims cannot be signed; otherwise nothing to add.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        if pod.pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).is_some_and(|c| !c.is_empty()) {
            return Err(crate::framework::Status::unschedulable("pods with dra resource claims are not signable"));
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests;
