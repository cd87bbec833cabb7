//! What PreFilter and PreScore share, as upstream's `podtopologyspread/common.go`: the compiled constraints, the
//! default constraints and their selector, node inclusion and pod counting.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::PodTopologySpread;
use crate::framework::labels::{Labels, Requirement, Selector};
use crate::framework::ClusterObjects;
use crate::framework::{NodeInfo, PodInfo, Status};
use crate::plugins::taint_toleration::{find_matching_untolerated_taint, is_do_not_schedule_taint};

/// `whenUnsatisfiable` of a hard constraint (enforced by Filter).
pub(super) const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
/// `whenUnsatisfiable` of a soft constraint (ranked by Score).
pub(super) const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

impl PodTopologySpread {
    /// The pod's constraints of one kind (`DoNotSchedule` or `ScheduleAnyway`), or the default ones.
    pub(super) fn constraints(
        &self,
        pod: &PodInfo,
        action: &str,
        objects: &ClusterObjects,
    ) -> Result<Vec<Constraint>, String> {
        let own = pod_constraints(pod);
        if !own.is_empty() {
            return compile_constraints(own, pod.labels(), action);
        }
        let mut cs = compile_constraints(&self.default_constraints, pod.labels(), action)?;
        if cs.is_empty() {
            return Ok(cs);
        }
        let sel = default_selector(pod, objects);
        if sel.is_empty() {
            return Ok(Vec::new());
        }
        for c in &mut cs {
            c.selector = Selector::All(sel.clone());
        }
        Ok(cs)
    }
}

/// The pod's own constraints (empty when it sets none).
pub(super) fn pod_constraints(pod: &PodInfo) -> &[TopologySpreadConstraint] {
    pod.pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_deref()).unwrap_or(&[])
}

/// A compiled spread constraint.
#[derive(Debug, Clone)]
pub(super) struct Constraint {
    /// How far a domain's count may exceed the global minimum.
    pub(super) max_skew: i32,
    /// The node label whose values are the domains.
    pub(super) topology_key: String,
    /// Which pods count (the label selector narrowed by `matchLabelKeys`).
    pub(super) selector: Selector,
    /// With fewer eligible domains than this, the global minimum is taken as 0.
    pub(super) min_domains: i32,
    /// `nodeAffinityPolicy: Honor` (the default): nodes the pod cannot select do not count.
    pub(super) honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor`: nodes with a taint the pod does not tolerate do not count.
    pub(super) honor_taints: bool,
}

/// The constraints of one kind (`action`) compiled, with `matchLabelKeys` resolved against the pod's labels.
fn compile_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels: &Labels,
    action: &str,
) -> Result<Vec<Constraint>, String> {
    let mut out = Vec::new();
    for c in constraints.iter().filter(|c| c.when_unsatisfiable == action) {
        let mut selector = Selector::from_optional(c.label_selector.as_ref())?;
        // matchLabelKeys: the pod's values for those keys narrow the selector.
        let extra: Vec<Requirement> = c
            .match_label_keys
            .iter()
            .flatten()
            .filter_map(|k| pod_labels.get(k).map(|v| Requirement::In(k.clone(), vec![v.clone()])))
            .collect();
        if !extra.is_empty() {
            selector = match selector {
                Selector::All(mut reqs) => {
                    reqs.extend(extra);
                    Selector::All(reqs)
                }
                // A missing selector has no requirements to keep: the merged selector is the key values alone.
                Selector::Nothing => Selector::All(extra),
            };
        }
        out.push(Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        });
    }
    Ok(out)
}

/// The selector requirements for default spreading: the selectors of the Services selecting the pod and of its
/// controlling ReplicationController, ReplicaSet or StatefulSet, all in the pod's namespace. Empty: no default
/// spreading for this pod.
fn default_selector(pod: &PodInfo, objects: &ClusterObjects) -> Vec<Requirement> {
    let labels = pod.labels();
    let mut set: BTreeMap<&str, &str> = BTreeMap::new();
    for svc in &objects.services {
        if svc.metadata.namespace.as_deref().unwrap_or("default") != pod.namespace {
            continue;
        }
        let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else { continue };
        if sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            set.extend(sel.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
    }
    let to_reqs = |set: &BTreeMap<&str, &str>| -> Vec<Requirement> {
        set.iter().map(|(k, v)| Requirement::In(k.to_string(), vec![v.to_string()])).collect()
    };
    let owner = pod.pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    let Some(owner) = owner else { return to_reqs(&set) };
    let same = |ns: &Option<String>, name: &Option<String>| {
        ns.as_deref().unwrap_or("default") == pod.namespace && name.as_deref() == Some(owner.name.as_str())
    };
    // The Services' requirements, then those of the controller's selector when the controller is found.
    let extend_with = |mut reqs: Vec<Requirement>, sel: Option<&LabelSelector>| {
        if let Some(Ok(Selector::All(more))) = sel.map(Selector::from_label_selector) {
            reqs.extend(more);
        }
        reqs
    };
    match (owner.api_version.as_str(), owner.kind.as_str()) {
        ("v1", "ReplicationController") => {
            if let Some(rc) =
                objects.replication_controllers.iter().find(|r| same(&r.metadata.namespace, &r.metadata.name))
            {
                if let Some(sel) = rc.spec.as_ref().and_then(|s| s.selector.as_ref()) {
                    set.extend(sel.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                }
            }
            to_reqs(&set)
        }
        ("apps/v1", "ReplicaSet") => extend_with(
            to_reqs(&set),
            objects
                .replica_sets
                .iter()
                .find(|r| same(&r.metadata.namespace, &r.metadata.name))
                .map(|r| &r.spec.selector),
        ),
        ("apps/v1", "StatefulSet") => extend_with(
            to_reqs(&set),
            objects
                .stateful_sets
                .iter()
                .find(|s| same(&s.metadata.namespace, &s.metadata.name))
                .map(|s| &s.spec.selector),
        ),
        _ => to_reqs(&set),
    }
}

/// True when the node has a NoSchedule or NoExecute taint the pod does not tolerate.
fn has_untolerated_taint(node: &NodeInfo, tolerations: &[Toleration]) -> bool {
    find_matching_untolerated_taint(node.taints(), tolerations, is_do_not_schedule_taint).is_some()
}

/// The per-node inclusion check of a constraint (`nodeAffinityPolicy`, `nodeTaintsPolicy`). `affinity_ok` is the
/// node's answer to the pod's required node affinity, computed once per node.
pub(super) fn included(c: &Constraint, affinity_ok: bool, node: &NodeInfo, tolerations: &[Toleration]) -> bool {
    (!c.honor_node_affinity || affinity_ok) && (!c.honor_taints || !has_untolerated_taint(node, tolerations))
}

/// True when the node has every constraint's topology key: a node lacking one is in no domain.
pub(super) fn has_all_keys(labels: &Labels, constraints: &[Constraint]) -> bool {
    constraints.iter().all(|c| labels.contains_key(&c.topology_key))
}

/// Pods in `ns` matching `selector`, terminating pods excluded.
pub(super) fn count_matching(pods: &[Arc<PodInfo>], selector: &Selector, ns: &str) -> i64 {
    pods.iter()
        .filter(|p| p.namespace == ns && p.pod.metadata.deletion_timestamp.is_none() && selector.matches(p.labels()))
        .count() as i64
}

/// The error of a Filter or Score that finds no state from its PreFilter or PreScore.
pub(super) fn missing(key: &str) -> Status {
    Status::error(format!("reading {key:?} from cycleState: not found"))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cluster, constraint, epod, filter_all, incoming, objects, plugin, rs_owned};
    use super::*;
    use crate::plugins::testutil::pod;
    use serde_json::{json, Value};

    #[test]
    fn default_constraints_from_services_and_controllers() {
        let list = json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]});
        let pl = plugin(list);
        let web = |n: &str| epod(n, "default", json!({"app": "web"}));
        let svc = |ns: &str| json!({"services": [{"metadata": {"name": "s", "namespace": ns}, "spec": {"selector": {"app": "web"}}}]});
        let rs = json!({"replicaSets": [{"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}}]});
        let rc = json!({"rcs": [{"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}]});
        let plain = epod("in", "default", json!({"app": "web"}));
        let rc_owned = pod(json!({"metadata": {"name": "in", "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController", "name": "web", "uid": "rc", "controller": true}]}}));
        let not_controller = pod(json!({"metadata": {"name": "in", "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs"}]}}));
        let cases: Vec<(&str, PodInfo, Value, [&str; 4])> = vec![
            ("service selects pod", plain.clone(), svc("default"), ["skew", "skew", "ok", "ok"]),
            ("service in another namespace", plain.clone(), svc("other"), ["skip"; 4]),
            ("no selecting object", plain.clone(), json!({}), ["skip"; 4]),
            (
                "controlling replica set",
                rs_owned("in", json!({"app": "web"})),
                rs.clone(),
                ["skew", "skew", "ok", "ok"],
            ),
            ("owner not a controller", not_controller, rs, ["skip"; 4]),
            ("controlling replication controller", rc_owned, rc, ["skew", "skew", "ok", "ok"]),
            (
                "own constraints replace defaults",
                incoming(
                    json!({"app": "web", "foo": ""}),
                    vec![constraint(1, "zone", SCHEDULE_ANYWAY, json!({}))],
                    json!({}),
                ),
                svc("default"),
                ["skip"; 4],
            ),
        ];
        for (name, p, objs, want) in cases {
            let mut snap = cluster(vec![("a", web("a1"))], &[], &[]);
            snap.objects = objects(objs);
            assert_eq!(filter_all(&pl, &p, &snap), want, "{name}");
        }
        // System defaults are all soft: PreFilter skips.
        let mut snap = cluster(vec![("a", web("a1"))], &[], &[]);
        snap.objects = objects(svc("default"));
        assert_eq!(filter_all(&plugin(json!({})), &plain, &snap), ["skip"; 4]);
    }
}
