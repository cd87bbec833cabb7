//! CapacityQuota: per-namespace CPU and memory quotas with borrowing, as scheduler-plugins' CapacityScheduling
//! (`pkg/capacityscheduling/capacity_scheduling.go`, ElasticQuota `min`/`max`), at PreFilter.
//!
//! Configuration:
//!
//! ```json
//! {"quotas": {"team-a": {"min": {"cpu": "2", "memory": "4Gi"}, "max": {"cpu": "4", "memory": "8Gi"}}}}
//! ```
//!
//! Quantities are Kubernetes quantities (`500m`, `2`, `4Gi`). A resource missing from `min` counts as 0, one
//! missing from `max` as unlimited; `min` may not exceed `max`.
//!
//! A namespace's usage is the sum of the requests of its pods in the pod view that are assumed or bound (the pod
//! being scheduled is pending, so it is not counted). For a pod of a namespace with a quota, per resource:
//!
//! - usage + request over `max`: Unschedulable, naming the namespace, the resource and the amounts;
//! - usage + request over `min` (borrowing): allowed only while the usage of all quota namespaces plus the request
//!   stays within the sum of their `min`s, i.e. some namespace has unused `min` to lend; otherwise Unschedulable.
//!   Upstream refuses when the total is over on any resource; here only a resource this pod borrows counts, so a
//!   pod within its own `min` for memory is not refused because others borrowed memory;
//! - within `min`: admitted.
//!
//! A pod of a namespace without a quota is skipped.
//!
//! Reserve and Unreserve change nothing: upstream keeps the usage in its own cache and adds the pod at Reserve
//! (removes it at Unreserve), but here the usage is read from the host's pod view, which shows the pod assumed
//! once it is reserved and drops the assumed state when it is unreserved. A plugin-side count would also be wrong
//! in a pool of instances, each of which sees only the calls sent to it.

pub mod quantity;

use kws_plugin_sdk::{
    pods, Actions, ClusterEvent, Config, EventObject, Plugin, Pod, PreFilterResult, QueueingHint, Status, Value,
};

/// The two resources a quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Amounts {
    /// CPU, millicores.
    pub milli_cpu: i64,
    /// Memory, bytes.
    pub memory: i64,
}

impl Amounts {
    fn of(pod: &Pod) -> Self {
        Self { milli_cpu: pod.requests.milli_cpu, memory: pod.requests.memory }
    }

    fn add(&mut self, other: Amounts) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
    }
}

/// One namespace's quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Guaranteed to the namespace; what it does not use, others may borrow.
    pub min: Amounts,
    /// The most the namespace may use, borrowing included.
    pub max: Amounts,
}

/// The plugin: the quotas by namespace, in the configuration's order.
pub struct CapacityQuota {
    quotas: Vec<(String, Quota)>,
}

/// A resource a quota limits: its name, how to read it from [`Amounts`] and how to show an amount of it.
struct Resource {
    name: &'static str,
    get: fn(&Amounts) -> i64,
    show: fn(i64) -> String,
}

/// The resources, in the order they are checked.
const RESOURCES: [Resource; 2] = [
    Resource { name: "cpu", get: |a| a.milli_cpu, show: quantity::show_milli_cpu },
    Resource { name: "memory", get: |a| a.memory, show: quantity::show_bytes },
];

/// Parses `{"cpu": "2", "memory": "4Gi"}` at `what`; a missing resource is `missing`.
fn amounts(v: Option<&Value>, what: &str, missing: i64) -> Result<Amounts, String> {
    let Some(v) = v else { return Ok(Amounts { milli_cpu: missing, memory: missing }) };
    if v.as_object().is_none() {
        return Err(format!("config {what:?}: expected an object such as {{\"cpu\": \"2\", \"memory\": \"4Gi\"}}"));
    }
    v.expect_keys(&format!("config {what:?}"), &["cpu", "memory"])?;
    let read = |key: &str, parse: fn(&str) -> Result<i64, String>| -> Result<i64, String> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(missing),
            Some(Value::String(s)) => parse(s),
            Some(Value::Number(n)) => parse(n),
            Some(_) => Err("expected a quantity such as \"2\" or \"4Gi\"".to_string()),
        }
        .map_err(|e| format!("config \"{what}.{key}\": {e}"))
    };
    Ok(Amounts { milli_cpu: read("cpu", quantity::milli_cpu)?, memory: read("memory", quantity::bytes)? })
}

impl CapacityQuota {
    /// The quota of `namespace`.
    fn quota(&self, namespace: &str) -> Option<&Quota> {
        self.quotas.iter().find(|(ns, _)| ns == namespace).map(|(_, q)| q)
    }

    /// The usage of every quota namespace (in the configuration's order), not counting the pod `except`.
    fn usage(&self, except: &str) -> Vec<Amounts> {
        let view = pods();
        self.quotas
            .iter()
            .map(|(ns, _)| {
                let mut used = Amounts::default();
                view.in_namespace(ns)
                    .placed()
                    .filter(|p| p.pod.uid != except)
                    .for_each(|p| used.add(Amounts::of(&p.pod)));
                used
            })
            .collect()
    }
}

impl Plugin for CapacityQuota {
    type NodeData = ();

    fn new(config: &Config) -> Result<Self, String> {
        config.expect_keys(&["quotas"])?;
        let mut quotas = Vec::new();
        match config.get("quotas") {
            None | Some(Value::Null) => {}
            Some(Value::Object(members)) => {
                for (ns, q) in members {
                    let what = format!("quotas.{ns}");
                    if q.as_object().is_none() {
                        return Err(format!("config {what:?}: expected an object with min and max"));
                    }
                    q.expect_keys(&format!("config {what:?}"), &["min", "max"])?;
                    let min = amounts(q.get("min"), &format!("{what}.min"), 0)?;
                    let max = amounts(q.get("max"), &format!("{what}.max"), i64::MAX)?;
                    for Resource { name, get, show } in RESOURCES {
                        if get(&min) > get(&max) {
                            return Err(format!(
                                "config {what:?}: min {name} {} is more than max {}",
                                show(get(&min)),
                                show(get(&max))
                            ));
                        }
                    }
                    if quotas.iter().any(|(n, _)| n == ns) {
                        return Err(format!("config \"quotas\": namespace {ns:?} given twice"));
                    }
                    quotas.push((ns.clone(), Quota { min, max }));
                }
            }
            Some(_) => return Err("config \"quotas\": expected an object of namespaces".to_string()),
        }
        Ok(Self { quotas })
    }

    fn pre_filter(&self, pod: &Pod) -> PreFilterResult {
        let Some(quota) = self.quota(&pod.namespace) else { return Status::skip().into() };
        let usage = self.usage(&pod.uid);
        let at = self.quotas.iter().position(|(ns, _)| *ns == pod.namespace).unwrap_or_default();
        let (used, request) = (usage[at], Amounts::of(pod));
        let ns = &pod.namespace;
        for Resource { name, get, show } in RESOURCES {
            let (u, r) = (get(&used), get(&request));
            let after = u.saturating_add(r);
            if after > get(&quota.max) {
                return Status::unschedulable(format!(
                    "namespace {ns}: {name} quota exceeded: used {} + request {} > max {}",
                    show(u),
                    show(r),
                    show(get(&quota.max))
                ))
                .into();
            }
            if after > get(&quota.min) {
                let total_used = usage.iter().map(get).fold(0i64, i64::saturating_add);
                let total_min = self.quotas.iter().map(|(_, q)| get(&q.min)).fold(0i64, i64::saturating_add);
                if total_used.saturating_add(r) > total_min {
                    return Status::unschedulable(format!(
                        "namespace {ns}: cannot borrow {name}: used {} + request {} > min {}, and the quota \
                         namespaces use {} of their {} min in all",
                        show(u),
                        show(r),
                        show(get(&quota.min)),
                        show(total_used),
                        show(total_min)
                    ))
                    .into();
                }
            }
        }
        PreFilterResult::success()
    }

    /// Nothing to record: the pod view shows the pod assumed from now on (see the crate documentation).
    fn reserve(&self, _pod: &Pod, _node: &str) -> Status {
        Status::success()
    }

    /// Nothing to undo: the pod view drops the pod's assumed state (see the crate documentation).
    fn unreserve(&self, _pod: &Pod, _node: &str) {}

    /// Usage only falls when a placed pod leaves it: it is deleted, or its assumption is forgotten after a failed
    /// binding cycle (Permit rejection or timeout, failed bind: upstream reports that as an AssignedPod delete
    /// too), or it is resized to request less. A new quota is a new configuration (a reload), not an event.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::assigned_pod(Actions::DELETE | Actions::UPDATE_RESOURCES)]
    }

    /// Queue when the pod that freed usage is in a namespace with a quota: its own namespace's room, or unused
    /// `min` another namespace can lend. For an update, only when it requests less than before.
    fn queueing_hint(
        &self,
        _pod: &Pod,
        _event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        let Some(freed) = old.and_then(EventObject::pod) else { return QueueingHint::QueueSkip };
        let in_quota = self.quota(&freed.namespace).is_some();
        let less = match new.and_then(EventObject::pod) {
            None => true,
            Some(now) => {
                now.requests.milli_cpu < freed.requests.milli_cpu || now.requests.memory < freed.requests.memory
            }
        };
        QueueingHint::queue_if(in_quota && less)
    }
}

kws_plugin_sdk::export!(CapacityQuota: pre_filter, reserve, events, pods);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::testing;
    use kws_plugin_sdk::{Code, KnownPod};

    const GI: i64 = 1 << 30;

    /// team-a: min 2 CPU/4Gi, max 4 CPU/8Gi; team-b: min 2 CPU/4Gi, max 6 CPU.
    const CONFIG: &str = r#"{"quotas": {
        "team-a": {"min": {"cpu": "2", "memory": "4Gi"}, "max": {"cpu": "4", "memory": "8Gi"}},
        "team-b": {"min": {"cpu": "2", "memory": "4Gi"}, "max": {"cpu": 6}}
    }}"#;

    fn pod(ns: &str, name: &str, milli_cpu: i64, memory: i64) -> Pod {
        let mut p = Pod::new(ns, name);
        p.requests.milli_cpu = milli_cpu;
        p.requests.memory = memory;
        p
    }

    fn pre_filter(p: Pod) -> Status {
        testing::set_config(CONFIG);
        testing::pre_filter::<CapacityQuota>(p).status
    }

    #[test]
    fn configuration_is_parsed_and_checked() {
        testing::set_config(CONFIG);
        assert_eq!(testing::validate::<CapacityQuota>(), Ok(()));
        let q = CapacityQuota::new(&Config::parse(CONFIG).unwrap()).unwrap();
        assert_eq!(
            q.quota("team-b").map(|q| (q.min, q.max.milli_cpu, q.max.memory)),
            Some((Amounts { milli_cpu: 2000, memory: 4 * GI }, 6000, i64::MAX))
        );
        for (bad, why) in [
            (r#"{"quota": {}}"#, r#"config: unknown key "quota" (known: quotas)"#),
            (r#"{"quotas": []}"#, r#"config "quotas": expected an object of namespaces"#),
            (r#"{"quotas": {"a": 1}}"#, r#"config "quotas.a": expected an object with min and max"#),
            (r#"{"quotas": {"a": {"mn": {}}}}"#, r#"config "quotas.a": unknown key "mn" (known: min, max)"#),
            (r#"{"quotas": {"a": {"min": {"gpu": "1"}}}}"#, r#"config "quotas.a.min": unknown key "gpu""#),
            (
                r#"{"quotas": {"a": {"max": {"memory": "4GB"}}}}"#,
                r#"config "quotas.a.max.memory": quantity "4GB": unknown suffix"#,
            ),
            (r#"{"quotas": {"a": {"min": {"cpu": true}}}}"#, r#"config "quotas.a.min.cpu": expected a quantity"#),
            (
                r#"{"quotas": {"a": {"min": {"cpu": "3"}, "max": {"cpu": "2"}}}}"#,
                r#"config "quotas.a": min cpu 3 is more than max 2"#,
            ),
            (r#"{"quotas": {"a": {}, "a": {}}}"#, r#"config "quotas": namespace "a" given twice"#),
        ] {
            testing::set_config(bad);
            let e = testing::validate::<CapacityQuota>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_namespace_without_a_quota_is_skipped() {
        assert_eq!(pre_filter(pod("other", "p", 100_000, 100 * GI)).code, Code::Skip);
    }

    #[test]
    fn admits_within_min() {
        testing::upsert_pods(vec![
            KnownPod::bound(pod("team-a", "a1", 1000, GI), "n", 1),
            // Pending pods use nothing yet, the pod being scheduled included.
            KnownPod::pending(pod("team-a", "a2", 3000, 3 * GI), 2),
            KnownPod::pending(pod("team-a", "p", 1000, 3 * GI), 3),
        ]);
        assert!(pre_filter(pod("team-a", "p", 1000, 3 * GI)).is_success());
    }

    #[test]
    fn borrows_when_another_namespace_has_unused_min() {
        // team-a uses its whole min; team-b uses 1 of its 2 CPUs.
        testing::upsert_pods(vec![
            KnownPod::bound(pod("team-a", "a1", 2000, GI), "n", 1),
            KnownPod::assumed(pod("team-b", "b1", 1000, GI), "n", 2),
        ]);
        assert!(pre_filter(pod("team-a", "p", 1000, GI)).is_success());
    }

    #[test]
    fn refuses_beyond_max() {
        testing::upsert_pods(vec![KnownPod::bound(pod("team-a", "a1", 3000, GI), "n", 1)]);
        let st = pre_filter(pod("team-a", "p", 1500, GI));
        assert_eq!(st.code, Code::Unschedulable);
        assert_eq!(st.message(), "namespace team-a: cpu quota exceeded: used 3 + request 1500m > max 4");
        let st = pre_filter(pod("team-a", "p", 0, 7 * GI + 1));
        assert_eq!(st.message(), "namespace team-a: memory quota exceeded: used 1Gi + request 7516192769 > max 8Gi");
    }

    #[test]
    fn refuses_to_borrow_when_nothing_is_free() {
        // team-a is at its min and team-b uses its whole min too: nothing to lend.
        testing::upsert_pods(vec![
            KnownPod::bound(pod("team-a", "a1", 2000, GI), "n", 1),
            KnownPod::bound(pod("team-b", "b1", 2000, GI), "n", 2),
            // Pods of namespaces without a quota are nobody's usage.
            KnownPod::bound(pod("other", "o1", 9000, GI), "n", 3),
        ]);
        let st = pre_filter(pod("team-a", "p", 500, GI));
        assert_eq!(st.code, Code::Unschedulable);
        assert_eq!(
            st.message(),
            "namespace team-a: cannot borrow cpu: used 2 + request 500m > min 2, and the quota namespaces use 4 of \
             their 4 min in all"
        );
        // Within its own min for memory, the pod is not refused for memory.
        assert!(pre_filter(pod("team-a", "p", 0, 3 * GI)).is_success());
    }

    #[test]
    fn usage_is_freed_when_a_pod_leaves_the_view_or_goes_back_to_pending() {
        testing::upsert_pods(vec![
            KnownPod::bound(pod("team-a", "a1", 2000, GI), "n", 1),
            KnownPod::bound(pod("team-a", "a2", 2000, GI), "n", 2),
            KnownPod::bound(pod("team-b", "b1", 2000, GI), "n", 3),
        ]);
        assert_eq!(pre_filter(pod("team-a", "p", 1000, 0)).code, Code::Unschedulable, "over max");
        // a2 is deleted: team-a is back at its min, and nothing is free to borrow.
        testing::remove_pod("team-a/a2");
        assert!(pre_filter(pod("team-a", "p", 1000, 0)).message().contains("cannot borrow cpu"));
        // b1's assumption is forgotten (Unreserve after a failed binding cycle): it is pending again, and team-b's
        // min is free to borrow.
        testing::upsert_pods(vec![KnownPod::pending(pod("team-b", "b1", 2000, GI), 3)]);
        assert!(pre_filter(pod("team-a", "p", 1000, 0)).is_success());
    }

    #[test]
    fn reserve_and_unreserve_change_nothing() {
        testing::set_config(CONFIG);
        assert!(testing::reserve::<CapacityQuota>(pod("team-a", "p", 1000, 0), "n").is_success());
        testing::unreserve::<CapacityQuota>(pod("team-a", "p", 1000, 0), "n");
        assert!(kws_plugin_sdk::pods().is_empty());
    }

    #[test]
    fn a_freed_pod_of_a_quota_namespace_requeues() {
        testing::set_config(CONFIG);
        let events = testing::events_to_register::<CapacityQuota>();
        assert_eq!(events, [ClusterEvent::assigned_pod(Actions::DELETE | Actions::UPDATE_RESOURCES)]);
        let rejected = || pod("team-a", "p", 1000, 0);
        let hint = |old: Pod, new: Option<Pod>| {
            let e = ClusterEvent::assigned_pod(if new.is_some() { Actions::UPDATE_RESOURCES } else { Actions::DELETE });
            testing::queueing_hint::<CapacityQuota>(
                rejected(),
                e,
                Some(EventObject::Pod(old)),
                new.map(EventObject::Pod),
            )
        };
        assert_eq!(hint(pod("team-a", "a1", 1000, 0), None), QueueingHint::Queue);
        assert_eq!(hint(pod("team-b", "b1", 1000, 0), None), QueueingHint::Queue, "team-b's min can be lent");
        assert_eq!(hint(pod("other", "o1", 1000, 0), None), QueueingHint::QueueSkip);
        assert_eq!(hint(pod("team-a", "a1", 1000, 0), Some(pod("team-a", "a1", 500, 0))), QueueingHint::Queue);
        assert_eq!(hint(pod("team-a", "a1", 1000, 0), Some(pod("team-a", "a1", 2000, 0))), QueueingHint::QueueSkip);
    }
}
