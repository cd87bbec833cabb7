//! PodTopologySpread: spreads pods matching a selector evenly across topology domains (zones, hosts ...), as
//! upstream's `podtopologyspread` plugin (`plugin.go`). Hard constraints (`DoNotSchedule`) are enforced by
//! PreFilter/Filter (`filtering`), soft ones (`ScheduleAnyway`) ranked by PreScore/Score/NormalizeScore
//! (`scoring`). Pods without constraints get the plugin's default constraints, with a selector taken from the
//! Services and the controller that own them (`common`).
//!
//! All counting is done once per pod (PreFilter, PreScore); Filter and Score only look the counts up.

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::Deserialize;

use crate::framework::labels::Selector;
use crate::framework::node_memo::NodeMemo;
use crate::framework::PluginContext;
use crate::framework::{action, ClusterEvent, EventResource, Plugin};
use crate::plugins::helper::{aggregate, decode, invalid, ArgsError, FieldError};

use common::{DO_NOT_SCHEDULE, SCHEDULE_ANYWAY};

mod common;
mod filtering;
mod scoring;

/// The plugin's name in profiles.
pub const NAME: &str = "PodTopologySpread";
/// Filter reason when placing the pod on the node would exceed a constraint's maxSkew (upstream's wording).
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Filter reason when the node lacks the topology key of a hard constraint.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// The well-known hostname label.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The well-known zone label.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";

const SYSTEM_DEFAULTING: &str = "System";
const LIST_DEFAULTING: &str = "List";

/// The plugin's args (`PodTopologySpreadArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Constraints applied to pods that set none (only with `defaultingType: List`).
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// `System` (the built-in defaults, the default) or `List` (`defaultConstraints`).
    #[serde(default)]
    pub defaulting_type: Option<String>,
}

/// The PodTopologySpread plugin.
#[derive(Debug)]
pub struct PodTopologySpread {
    default_constraints: Vec<TopologySpreadConstraint>,
    system_defaulted: bool,
    /// PreFilter's per-node counts of pods matching each hard constraint's selector and the node's domain for
    /// each, for the last namespace and constraints seen (a workload's pods share them), kept while the node's
    /// generation holds.
    matched: std::sync::Mutex<Matched>,
    /// PreScore's, for the soft constraints, kept the same way.
    scored: std::sync::Mutex<Matched>,
}

/// The incoming pod's namespace and its constraints' selectors and topology keys: what a node's counts and
/// domains depend on besides the node.
type NamespaceSelectors = (String, Vec<(Selector, String)>);

/// What PreFilter (or PreScore) keeps across cycles: each node's [`NodeCounts`], and the domain values it has
/// seen, numbered.
#[derive(Debug, Default)]
struct Matched {
    nodes: NodeMemo<NamespaceSelectors, NodeCounts>,
    domains: Domains,
}

impl Matched {
    /// Starts a cycle for a pod in `namespace` with `constraints`: what was kept for other ones is dropped, and so
    /// is everything once the numbering grew past [`Domains::MAX`].
    fn key(&mut self, namespace: &str, constraints: &[common::Constraint]) {
        if self.domains.values.len() > Domains::MAX {
            self.domains = Domains::default();
            self.nodes.key(|_| false, || (String::new(), Vec::new()));
        }
        let same = |(ns, cs): &NamespaceSelectors| {
            ns == namespace
                && cs.iter().map(|(s, k)| (s, k)).eq(constraints.iter().map(|c| (&c.selector, &c.topology_key)))
        };
        self.nodes.key(same, || {
            (namespace.to_string(), constraints.iter().map(|c| (c.selector.clone(), c.topology_key.clone())).collect())
        });
    }
}

/// One node's part in the constraints: per constraint, its domain's number and its matching pods. PreFilter keeps
/// it empty when the node lacks one of the topology keys (it is then in no domain); PreScore marks a missing key
/// with [`Domains::MISSING`]. One allocation, read for every node in every cycle.
type NodeCounts = Vec<(u32, i64)>;

/// Domain values numbered in the order first seen, so that a cycle sums counts by number rather than by name.
#[derive(Debug, Default)]
struct Domains {
    ids: rustc_hash::FxHashMap<String, u32>,
    values: Vec<String>,
}

impl Domains {
    /// The most values kept; past it the numbering starts over with the node counts (a cluster relabelled again
    /// and again must not grow it without end).
    const MAX: usize = 1 << 20;
    /// The number standing for a topology key the node lacks.
    const MISSING: u32 = u32::MAX;

    fn id(&mut self, value: &str) -> u32 {
        if let Some(&id) = self.ids.get(value) {
            return id;
        }
        let id = self.values.len() as u32;
        self.ids.insert(value.to_string(), id);
        self.values.push(value.to_string());
        id
    }
}

/// The built-in default constraints (`defaultingType: System`).
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    vec![
        TopologySpreadConstraint {
            max_skew: 3,
            topology_key: LABEL_HOSTNAME.to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        },
        TopologySpreadConstraint {
            max_skew: 5,
            topology_key: LABEL_ZONE.to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        },
    ]
}

impl PodTopologySpread {
    /// Builds the plugin from its args; invalid args are an error naming the field.
    pub fn new(args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<PodTopologySpread, String> {
        let args = PodTopologySpreadArgs::parse(args)?;
        let system = args.defaulting_type.as_deref().unwrap_or(SYSTEM_DEFAULTING) == SYSTEM_DEFAULTING;
        Ok(PodTopologySpread {
            default_constraints: if system { system_default_constraints() } else { args.default_constraints },
            system_defaulted: system,
            matched: Default::default(),
            scored: Default::default(),
        })
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Args validation

impl PodTopologySpreadArgs {
    /// Decodes the args (defaults when absent) and checks them as upstream's `ValidatePodTopologySpreadArgs`.
    pub fn parse(args: Option<&serde_json::Value>) -> Result<PodTopologySpreadArgs, ArgsError> {
        let a: PodTopologySpreadArgs = decode(args)?;
        validate_args(&a).map(|()| a)
    }
}

fn validate_args(args: &PodTopologySpreadArgs) -> Result<(), ArgsError> {
    let mut errs = Vec::new();
    let dt = args.defaulting_type.as_deref().unwrap_or(SYSTEM_DEFAULTING);
    if dt != SYSTEM_DEFAULTING && dt != LIST_DEFAULTING {
        errs.push(FieldError::new(
            "defaultingType",
            format!("Unsupported value: {dt:?}: supported values: \"List\", \"System\""),
        ));
    } else if dt == SYSTEM_DEFAULTING && !args.default_constraints.is_empty() {
        errs.push(invalid("defaultingType", format!("{dt:?}"), "when .defaultConstraints are not empty"));
    }
    for (i, c) in args.default_constraints.iter().enumerate() {
        let p = format!("defaultConstraints[{i}]");
        if c.max_skew <= 0 {
            errs.push(invalid(&format!("{p}.maxSkew"), c.max_skew, "not in valid range (0, inf)"));
        }
        if c.topology_key.is_empty() {
            errs.push(FieldError::new(format!("{p}.topologyKey"), "Required value: can not be empty"));
        } else if let Err(e) = validate_label_name(&c.topology_key) {
            errs.push(invalid(&format!("{p}.topologyKey"), format!("{:?}", c.topology_key), &e));
        }
        match c.when_unsatisfiable.as_str() {
            "" => errs.push(FieldError::new(format!("{p}.whenUnsatisfiable"), "Required value: can not be empty")),
            DO_NOT_SCHEDULE | SCHEDULE_ANYWAY => {}
            v => errs.push(FieldError::new(
                format!("{p}.whenUnsatisfiable"),
                format!("Unsupported value: {v:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\""),
            )),
        }
        if c.label_selector.is_some() {
            errs.push(FieldError::new(
                format!("{p}.labelSelector"),
                "Forbidden: constraint must not define a selector, as they deduced for each pod",
            ));
        }
        let dup = args.default_constraints[..i]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
        if dup {
            errs.push(FieldError::new(
                p,
                format!("Duplicate value: \"{{{}, {}}}\"", c.topology_key, c.when_unsatisfiable),
            ));
        }
    }
    aggregate(errs)
}

/// Checks a qualified label name (`[prefix/]name`), as the API server does.
fn validate_label_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                    with an alphanumeric character (at most 63 characters)"
            .to_string());
    }
    if let Some(p) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.starts_with(alnum)
                && l.ends_with(alnum)
                && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if p.is_empty() || p.len() > 253 || !p.split('.').all(label_ok) {
            return Err("prefix part must be a lowercase RFC 1123 subdomain".to_string());
        }
    }
    Ok(())
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, action::ADD | action::UPDATE_LABEL | action::DELETE),
            ClusterEvent::new(
                EventResource::Node,
                action::ADD | action::DELETE | action::UPDATE_LABEL | action::UPDATE_TAINT,
            ),
            // The pod's own labels (its selectors may match itself) and tolerations (nodeTaintsPolicy: Honor), as
            // upstream's TargetPod UpdatePodLabel | UpdatePodToleration.
            ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE_LABEL | action::UPDATE_TAINT),
        ]
    }
    crate::serves!(pre_filter, filter, pre_score, score, sign);
}

impl crate::framework::SignPlugin for PodTopologySpread {
    /// As upstream: a pod with spread constraints of its own, or any pod when the plugin has default constraints (the system defaults included), cannot be signed; otherwise nothing to add.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        let own =
            pod.pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_ref()).is_some_and(|c| !c.is_empty());
        if own {
            return Err(crate::framework::Status::unschedulable("pods with topology constraints are not signable"));
        }
        if !self.default_constraints.is_empty() {
            return Err(crate::framework::Status::unschedulable(
                "pods with default topology constraints are not signable",
            ));
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    //! The builders the tests of every part of the plugin share, and the tests of the plugin as a whole.

    use std::sync::Arc;

    use super::*;
    use crate::framework::{ClusterObjects, NodeInfo, Snapshot};
    use crate::framework::{Code, CycleState, FilterPlugin, PodInfo, PreFilterPlugin};
    use crate::plugins::testutil::{ctx, node_with_pods, pod};
    use serde_json::{json, Value};

    /// A node in JSON with the hostname label and, when given, a `zone` label.
    pub(super) fn node_json(name: &str, zone: Option<&str>) -> Value {
        let mut labels = json!({ LABEL_HOSTNAME: name });
        if let Some(z) = zone {
            labels["zone"] = json!(z);
        }
        json!({"metadata": {"name": name, "labels": labels}})
    }

    /// An existing pod in `ns` with labels.
    pub(super) fn epod(name: &str, ns: &str, labels: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "namespace": ns, "uid": name, "labels": labels}}))
    }

    /// An existing pod in `default` with the `foo` label the test constraints select.
    pub(super) fn foo(name: &str) -> PodInfo {
        epod(name, "default", json!({"foo": ""}))
    }

    /// A constraint on `key` selecting pods with a `foo` label, plus extra fields.
    pub(super) fn constraint(max_skew: i32, key: &str, when: &str, extra: Value) -> Value {
        let mut c = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    /// The incoming pod: labels, constraints and extra spec fields.
    pub(super) fn incoming(labels: Value, constraints: Vec<Value>, spec: Value) -> PodInfo {
        let mut s = json!({"topologySpreadConstraints": constraints});
        for (k, v) in spec.as_object().unwrap() {
            s[k] = v.clone();
        }
        pod(json!({"metadata": {"name": "in", "namespace": "default", "labels": labels}, "spec": s}))
    }

    /// Nodes a, b (zone z1), x, y (zone z2), each with its pods; `no_zone` names nodes without the zone label and
    /// `tainted` nodes with a NoSchedule taint.
    /// The same four nodes twice, stamped with generations as the cache does: in the second, node y (a new
    /// generation) got two more foo pods. For the tests of counts kept per node.
    pub(super) fn two_generations() -> [Snapshot; 2] {
        let stamped = |snap: Snapshot, gens: [u64; 4]| {
            let nodes = snap.nodes().iter().zip(gens).map(|(n, g)| NodeInfo { generation: g, ..(**n).clone() });
            Snapshot::from_nodes(nodes.collect())
        };
        let before = vec![("a", foo("p1")), ("x", foo("p2")), ("y", epod("p3", "default", json!({"bar": ""})))];
        let mut after = before.clone();
        after.extend([("y", foo("p4")), ("y", foo("p5"))]);
        [stamped(cluster(before, &[], &[]), [1, 2, 3, 4]), stamped(cluster(after, &[], &[]), [1, 2, 3, 5])]
    }

    pub(super) fn cluster(pods: Vec<(&str, PodInfo)>, no_zone: &[&str], tainted: &[&str]) -> Snapshot {
        let nodes = [("a", "z1"), ("b", "z1"), ("x", "z2"), ("y", "z2")]
            .into_iter()
            .map(|(n, z)| {
                let mut j = node_json(n, (!no_zone.contains(&n)).then_some(z));
                if tainted.contains(&n) {
                    j["spec"] = json!({"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]});
                }
                let mine = pods.iter().filter(|(on, _)| *on == n).map(|(_, p)| p.clone()).collect();
                node_with_pods(j, mine)
            })
            .collect();
        Snapshot::from_nodes(nodes)
    }

    /// The plugin built from args.
    pub(super) fn plugin(args: Value) -> PodTopologySpread {
        PodTopologySpread::new(Some(&args), &ctx()).unwrap()
    }

    /// Runs PreFilter then Filter on every node: "ok", "skew", "label", or "skip" for all when PreFilter skipped.
    pub(super) fn filter_all(pl: &PodTopologySpread, p: &PodInfo, snap: &Snapshot) -> Vec<&'static str> {
        let mut state = CycleState::new();
        let (_, st) = pl.pre_filter(&mut state, p, snap);
        if st.is_skip() {
            return vec!["skip"; snap.len()];
        }
        assert!(st.is_success(), "{st}");
        filter_nodes(pl, &state, p, snap)
    }

    /// Runs Filter on every node with the given state: "ok", "skew" or "label".
    pub(super) fn filter_nodes(
        pl: &PodTopologySpread,
        state: &CycleState,
        p: &PodInfo,
        snap: &Snapshot,
    ) -> Vec<&'static str> {
        snap.nodes()
            .iter()
            .map(|n| {
                let st = pl.filter(state, p, n);
                match st.code() {
                    Code::Success => "ok",
                    Code::Unschedulable => {
                        assert_eq!(st.reasons(), [ERR_REASON_CONSTRAINTS_NOT_MATCH]);
                        "skew"
                    }
                    Code::UnschedulableAndUnresolvable => {
                        assert_eq!(st.reasons(), [ERR_REASON_NODE_LABEL_NOT_MATCH]);
                        "label"
                    }
                    c => panic!("unexpected {c:?}"),
                }
            })
            .collect()
    }

    /// A pod in `default` controlled by the ReplicaSet `web`.
    pub(super) fn rs_owned(name: &str, labels: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "namespace": "default", "labels": labels, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": true}]}}))
    }

    /// Cluster objects from JSON lists (`services`, `replicaSets`, `statefulSets`, `rcs`).
    pub(super) fn objects(v: Value) -> Arc<ClusterObjects> {
        let get = |k: &str| v.get(k).cloned().unwrap_or(json!([]));
        Arc::new(ClusterObjects {
            services: serde_json::from_value(get("services")).unwrap(),
            replica_sets: serde_json::from_value(get("replicaSets")).unwrap(),
            stateful_sets: serde_json::from_value(get("statefulSets")).unwrap(),
            replication_controllers: serde_json::from_value(get("rcs")).unwrap(),
            ..Default::default()
        })
    }

    #[test]
    fn args_validation() {
        let ok = [
            json!({}),
            json!({"defaultingType": "System"}),
            json!({"defaultingType": "List"}),
            json!({"defaultingType": "List", "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
        ];
        for a in ok {
            assert!(PodTopologySpread::new(Some(&a), &ctx()).is_ok(), "{a}");
        }
        let c = |extra: Value| {
            let mut c = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"});
            for (k, v) in extra.as_object().unwrap() {
                c[k] = v.clone();
            }
            c
        };
        let bad = [
            (json!({"defaultingType": "Foo"}), "defaultingType: Unsupported value: \"Foo\""),
            (json!({"defaultConstraints": [c(json!({}))]}), "defaultingType: Invalid value: \"System\""),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"maxSkew": 0}))]}),
                "defaultConstraints[0].maxSkew",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"topologyKey": ""}))]}),
                "defaultConstraints[0].topologyKey: Required",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"topologyKey": "-bad-"}))]}),
                "defaultConstraints[0].topologyKey: Invalid",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"whenUnsatisfiable": "Maybe"}))]}),
                "defaultConstraints[0].whenUnsatisfiable",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"labelSelector": {"matchLabels": {"a": "b"}}}))]}),
                "defaultConstraints[0].labelSelector: Forbidden",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({})), c(json!({}))]}),
                "defaultConstraints[1]: Duplicate value: \"{zone, DoNotSchedule}\"",
            ),
            (json!({"bogus": 1}), "bogus"),
        ];
        for (a, want) in bad {
            let err = PodTopologySpread::new(Some(&a), &ctx()).unwrap_err();
            assert!(err.contains(want), "{a}: {err}");
        }
    }

    #[test]
    fn registered_points_and_events() {
        let pl = plugin(json!({}));
        assert!(pl.as_pre_filter().is_some() && pl.as_filter().is_some());
        assert!(pl.as_pre_score().is_some() && pl.as_score().is_some_and(|s| s.has_normalize()));
        let ev = pl.events_to_register();
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::Node, action::UPDATE_TAINT))));
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::AssignedPod, action::DELETE))));
        assert!(crate::plugins::in_tree_registry().get(NAME).is_some());
    }
}
