//! NodeAffinity: a pod fits only nodes matching its `nodeSelector` and required node affinity (and the
//! scheduler-enforced `addedAffinity` of the plugin args); nodes matching preferred terms score higher.
//!
//! As upstream, a pod's own terms are compiled leniently: an invalid or empty term never matches instead of
//! failing the pod, while the plugin's `addedAffinity` is validated when the profile is built.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PreferredSchedulingTerm;
use k8s_openapi::api::core::v1::{NodeAffinity as NodeAffinitySpec, NodeSelector, NodeSelectorTerm, Pod};
use serde::Deserialize;

use crate::framework::labels::{CompiledNodeSelector, CompiledNodeSelectorTerm, Labels};
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, NodeScore, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Status,
};
use crate::plugins::helper;
use crate::plugins::helper::{decode, ArgsError, FieldError};

/// The plugin's name in profiles.
pub const NAME: &str = "NodeAffinity";
/// Filter reason when the pod's nodeSelector or required node affinity does not match, upstream's wording.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Filter reason when the plugin's `addedAffinity` does not match, upstream's wording.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// PreFilter reason when the `metadata.name` requirements of the required terms leave no node.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";
/// CycleState key of the PreFilter data.
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeAffinity";
/// CycleState key of the PreScore data.
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeAffinity";
/// The only field node selector terms may name.
pub const OBJECT_NAME_FIELD: &str = "metadata.name";

const REQUIRED_PATH: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED_PATH: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// The plugin's args (upstream `NodeAffinityArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinityArgs {
    /// Node affinity applied to every pod of the profile, on top of the pod's own.
    #[serde(default)]
    pub added_affinity: Option<NodeAffinitySpec>,
}

/// Checks what upstream's node selector parser rejects beyond what `CompiledNodeSelectorTerm::new` checks:
/// value counts per operator, and that fields use only `In`/`NotIn` with one value.
fn validate_term(term: &NodeSelectorTerm) -> Result<(), String> {
    for (i, e) in term.match_expressions.iter().flatten().enumerate() {
        let n = e.values.as_ref().map_or(0, Vec::len);
        match e.operator.as_str() {
            "In" | "NotIn" if n == 0 => {
                return Err(format!("matchExpressions[{i}].values: operator {} needs at least one value", e.operator))
            }
            "Exists" | "DoesNotExist" if n > 0 => {
                return Err(format!("matchExpressions[{i}].values: operator {} takes no values", e.operator))
            }
            _ => {}
        }
    }
    for (i, f) in term.match_fields.iter().flatten().enumerate() {
        let n = f.values.as_ref().map_or(0, Vec::len);
        match f.operator.as_str() {
            "In" | "NotIn" if n != 1 => return Err(format!("matchFields[{i}].values: must have one element")),
            "In" | "NotIn" => {}
            op => return Err(format!("matchFields[{i}].operator: unsupported value {op:?}, supported: In, NotIn")),
        }
    }
    Ok(())
}

/// True for a term with neither expressions nor fields (it selects nothing and is dropped, as upstream).
fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(Vec::is_empty) && term.match_fields.as_ref().is_none_or(Vec::is_empty)
}

/// Compiles one node selector term with upstream's validation.
pub fn compile_term(term: &NodeSelectorTerm) -> Result<CompiledNodeSelectorTerm, String> {
    validate_term(term)?;
    CompiledNodeSelectorTerm::new(term)
}

/// Compiles a node selector as upstream's `LazyErrorNodeSelector`: empty and invalid terms are dropped, so they
/// never match (a selector left with no term matches no node).
pub fn compile_node_selector_lenient(sel: &NodeSelector) -> CompiledNodeSelector {
    CompiledNodeSelector {
        terms: sel
            .node_selector_terms
            .iter()
            .filter(|t| !is_empty_term(t))
            .filter_map(|t| compile_term(t).ok())
            .collect(),
    }
}

/// Compiles a node selector strictly: empty terms are dropped, an invalid term is an error naming its path.
fn compile_node_selector_strict(sel: &NodeSelector, path: &str) -> Result<CompiledNodeSelector, FieldError> {
    let mut terms = Vec::with_capacity(sel.node_selector_terms.len());
    for (i, t) in sel.node_selector_terms.iter().enumerate() {
        if is_empty_term(t) {
            continue;
        }
        terms.push(compile_term(t).map_err(|e| FieldError::new(format!("{path}.nodeSelectorTerms[{i}]"), e))?);
    }
    Ok(CompiledNodeSelector { terms })
}

/// A compiled preferred term and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedNodeSelectorTerm {
    /// The term.
    pub term: CompiledNodeSelectorTerm,
    /// Its weight.
    pub weight: i64,
}

/// Compiles preferred terms as upstream's `NewPreferredSchedulingTerms`: zero-weight and empty terms are
/// dropped; an invalid term is an error naming its path.
pub fn compile_preferred_terms(
    terms: &[PreferredSchedulingTerm],
    path: &str,
) -> Result<Vec<WeightedNodeSelectorTerm>, FieldError> {
    let mut out = Vec::with_capacity(terms.len());
    for (i, t) in terms.iter().enumerate() {
        if t.weight == 0 || is_empty_term(&t.preference) {
            continue;
        }
        let term = compile_term(&t.preference).map_err(|e| FieldError::new(format!("{path}[{i}].preference"), e))?;
        out.push(WeightedNodeSelectorTerm { term, weight: i64::from(t.weight) });
    }
    Ok(out)
}

/// Sum of the weights of the terms the node matches.
fn preferred_score(terms: &[WeightedNodeSelectorTerm], node_name: &str, labels: &Labels) -> i64 {
    terms.iter().filter(|t| t.term.matches(node_name, labels)).map(|t| t.weight).sum()
}

/// A pod's `nodeSelector` and required node affinity, compiled once (upstream `RequiredNodeAffinity`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequiredNodeAffinity {
    node_selector: Vec<(String, String)>,
    affinity: Option<CompiledNodeSelector>,
}

impl RequiredNodeAffinity {
    /// Compiles the pod's `spec.nodeSelector` and `spec.affinity.nodeAffinity.requiredDuringScheduling...`.
    pub fn from_pod(pod: &Pod) -> RequiredNodeAffinity {
        let spec = pod.spec.as_ref();
        let node_selector = spec
            .and_then(|s| s.node_selector.as_ref())
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let affinity = required_affinity(pod).map(compile_node_selector_lenient);
        RequiredNodeAffinity { node_selector, affinity }
    }

    /// True when a node with this name and labels satisfies both the selector and the required terms.
    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        self.node_selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.affinity.as_ref().is_none_or(|a| a.matches(node_name, labels))
    }
}

fn node_affinity(pod: &Pod) -> Option<&NodeAffinitySpec> {
    pod.spec.as_ref()?.affinity.as_ref()?.node_affinity.as_ref()
}

fn required_affinity(pod: &Pod) -> Option<&NodeSelector> {
    node_affinity(pod)?.required_during_scheduling_ignored_during_execution.as_ref()
}

fn pod_preferred_terms(pod: &Pod) -> Result<Option<Vec<WeightedNodeSelectorTerm>>, String> {
    match node_affinity(pod).and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()) {
        None => Ok(None),
        Some(terms) => compile_preferred_terms(terms, &format!("spec.affinity.nodeAffinity.{PREFERRED_PATH}"))
            .map(Some)
            .map_err(|e| e.to_string()),
    }
}

/// The NodeAffinity plugin.
#[derive(Debug, Default)]
pub struct NodeAffinity {
    added_required: Option<CompiledNodeSelector>,
    added_preferred: Option<Vec<WeightedNodeSelectorTerm>>,
}

impl NodeAffinity {
    /// Builds the plugin from `NodeAffinityArgs`; an invalid `addedAffinity` is an error naming the field.
    pub fn new(args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<NodeAffinity, String> {
        NodeAffinity::from_args(args).map_err(|e| format!("{NAME} args: {e}"))
    }

    /// Decodes and compiles the args; an `addedAffinity` upstream's `ValidateNodeAffinityArgs` refuses is an
    /// error naming the term.
    pub fn from_args(args: Option<&serde_json::Value>) -> Result<NodeAffinity, ArgsError> {
        let args: NodeAffinityArgs = decode(args)?;
        let mut pl = NodeAffinity::default();
        if let Some(a) = &args.added_affinity {
            if let Some(ns) = &a.required_during_scheduling_ignored_during_execution {
                pl.added_required = Some(compile_node_selector_strict(ns, &format!("addedAffinity.{REQUIRED_PATH}"))?);
            }
            if let Some(terms) =
                a.preferred_during_scheduling_ignored_during_execution.as_ref().filter(|t| !t.is_empty())
            {
                pl.added_preferred = Some(compile_preferred_terms(terms, &format!("addedAffinity.{PREFERRED_PATH}"))?);
            }
        }
        Ok(pl)
    }
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE_LABEL)]
    }
    crate::serves!(pre_filter, filter, pre_score, score, sign);
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let required = required_affinity(&pod.pod);
        let has_node_selector = pod.pod.spec.as_ref().is_some_and(|s| s.node_selector.is_some());
        if required.is_none() && self.added_required.is_none() && !has_node_selector {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, Arc::new(RequiredNodeAffinity::from_pod(&pod.pod)));

        let Some(required) = required.filter(|r| !r.node_selector_terms.is_empty()) else {
            return (None, Status::success());
        };
        // Terms are ORed: nodes can be narrowed only when every term pins metadata.name with In.
        let mut names: HashSet<String> = HashSet::new();
        for term in &required.node_selector_terms {
            let mut term_names: Option<HashSet<String>> = None;
            for r in term.match_fields.iter().flatten() {
                if r.key == OBJECT_NAME_FIELD && r.operator == "In" {
                    let values = r.values.iter().flatten();
                    term_names = Some(match term_names {
                        None => values.cloned().collect(),
                        Some(prev) => values.filter(|v| prev.contains(*v)).cloned().collect(),
                    });
                }
            }
            let Some(term_names) = term_names else { return (None, Status::success()) };
            names.extend(term_names);
        }
        if names.is_empty() {
            return (None, Status::unresolvable(ERR_REASON_CONFLICT));
        }
        (Some(names), Status::success())
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let labels = node.labels();
        if self.added_required.as_ref().is_some_and(|s| !s.matches(&node.name, labels)) {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        let fits = match state.read::<Arc<RequiredNodeAffinity>>(PRE_FILTER_STATE_KEY) {
            Some(r) => r.matches(&node.name, labels),
            // PreFilter disabled in the profile: compile here.
            None => RequiredNodeAffinity::from_pod(&pod.pod).matches(&node.name, labels),
        };
        if fits {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

/// The pod's compiled preferred terms (`None` when the pod has none but the plugin adds some).
type PreScoreState = Arc<Option<Vec<WeightedNodeSelectorTerm>>>;

impl PreScorePlugin for NodeAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>], _s: &Snapshot) -> Status {
        let terms = match pod_preferred_terms(&pod.pod) {
            Ok(t) => t,
            Err(e) => return Status::error(e),
        };
        if terms.is_none() && self.added_preferred.is_none() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState::new(terms));
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let labels = node.labels();
        let mut score = self.added_preferred.as_deref().map_or(0, |t| preferred_score(t, &node.name, labels));
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => score += s.as_deref().map_or(0, |t| preferred_score(t, &node.name, labels)),
            // PreScore disabled in the profile: compile here.
            None => {
                let terms = pod_preferred_terms(&pod.pod).map_err(Status::error)?;
                score += terms.as_deref().map_or(0, |t| preferred_score(t, &node.name, labels));
            }
        }
        Ok(score)
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        helper::normalize_to_max(false, scores)
    }

    fn has_normalize(&self) -> bool {
        true
    }
}

impl crate::framework::SignPlugin for NodeAffinity {
    /// As upstream: the node affinity and the node selector.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        let selector = pod.pod.spec.as_ref().and_then(|s| s.node_selector.clone());
        Ok(vec![
            SignFragment { key: signers::NODE_AFFINITY, value: signers::node_affinity(pod) },
            SignFragment { key: signers::NODE_SELECTOR, value: serde_json::json!(selector) },
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, node, pod};
    use serde_json::{json, Value};

    fn plugin(args: Value) -> NodeAffinity {
        NodeAffinity::new(Some(&args), &ctx()).unwrap()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> Value {
        json!({"key": key, "operator": op, "values": values})
    }

    fn required(terms: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    /// Runs PreFilter then (unless skipped or rejected) Filter; returns the status that decided.
    fn run_filter(pl: &NodeAffinity, spec: Value, node_name: &str, labels: Value) -> Status {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": spec}));
        let n = node(json!({"metadata": {"name": node_name, "labels": labels}}));
        let mut state = CycleState::new();
        let (_, st) = pl.pre_filter(&mut state, &p, &Snapshot::default());
        if st.is_skip() {
            return Status::success();
        }
        if !st.is_success() {
            return st;
        }
        pl.filter(&state, &p, &n)
    }

    #[test]
    fn filter_table() {
        let cases: Vec<(&str, Value, Value, Option<&str>)> = vec![
            ("no selector, no affinity", json!({}), json!({}), None),
            ("nodeSelector missing label", json!({"nodeSelector": {"foo": "bar"}}), json!({}), Some(ERR_REASON_POD)),
            ("nodeSelector matches", json!({"nodeSelector": {"foo": "bar"}}), json!({"foo": "bar", "x": "y"}), None),
            (
                "nodeSelector other value",
                json!({"nodeSelector": {"foo": "bar"}}),
                json!({"foo": "baz"}),
                Some(ERR_REASON_POD),
            ),
            (
                "required In matches",
                json!({"affinity": required(json!([{"matchExpressions": [expr("foo", "In", &["bar", "value2"])]}]))}),
                json!({"foo": "bar"}),
                None,
            ),
            (
                "required In does not match",
                json!({"affinity": required(json!([{"matchExpressions": [expr("foo", "In", &["bar"])]}]))}),
                json!({"foo": "other"}),
                Some(ERR_REASON_POD),
            ),
            (
                "required Gt",
                json!({"affinity": required(json!([{"matchExpressions": [expr("kernel", "Gt", &["5"])]}]))}),
                json!({"kernel": "6"}),
                None,
            ),
            (
                "required DoesNotExist",
                json!({"affinity": required(json!([{"matchExpressions": [expr("foo", "DoesNotExist", &[])]}]))}),
                json!({"foo": "bar"}),
                Some(ERR_REASON_POD),
            ),
            (
                "terms are ORed",
                json!({"affinity": required(json!([
                    {"matchExpressions": [expr("foo", "In", &["x"])]},
                    {"matchExpressions": [expr("diffkey", "In", &["wrong", "value2"])]}
                ]))}),
                json!({"diffkey": "value2"}),
                None,
            ),
            (
                "expressions are ANDed",
                json!({"affinity": required(json!([{"matchExpressions": [
                    expr("foo", "In", &["bar"]), expr("gpu", "Exists", &[])
                ]}]))}),
                json!({"foo": "bar"}),
                Some(ERR_REASON_POD),
            ),
            (
                "nodeSelector and affinity both needed",
                json!({"nodeSelector": {"a": "1"}, "affinity": required(json!([{"matchExpressions": [expr("foo", "Exists", &[])]}]))}),
                json!({"foo": "bar"}),
                Some(ERR_REASON_POD),
            ),
            (
                "required with no terms matches nothing",
                json!({"affinity": required(json!([]))}),
                json!({"foo": "bar"}),
                Some(ERR_REASON_POD),
            ),
            (
                "an empty term matches nothing",
                json!({"affinity": required(json!([{}]))}),
                json!({"foo": "bar"}),
                Some(ERR_REASON_POD),
            ),
            (
                "an invalid term is ignored, a valid one still matches",
                json!({"affinity": required(json!([
                    {"matchExpressions": [expr("foo", "Bogus", &["bar"])]},
                    {"matchExpressions": [expr("foo", "Exists", &[])]}
                ]))}),
                json!({"foo": "bar"}),
                None,
            ),
            (
                "an invalid term alone matches nothing",
                json!({"affinity": required(json!([{"matchExpressions": [expr("foo", "NotIn", &[])]}]))}),
                json!({"foo": "bar"}),
                Some(ERR_REASON_POD),
            ),
            (
                "matchFields on the node name",
                json!({"affinity": required(json!([{"matchFields": [expr("metadata.name", "In", &["n1"])]}]))}),
                json!({}),
                None,
            ),
            (
                "matchFields NotIn the node name",
                json!({"affinity": required(json!([{"matchFields": [expr("metadata.name", "NotIn", &["n1"])]}]))}),
                json!({}),
                Some(ERR_REASON_POD),
            ),
            (
                "matchFields and matchExpressions in one term",
                json!({"affinity": required(json!([{
                    "matchFields": [expr("metadata.name", "In", &["n1"])],
                    "matchExpressions": [expr("foo", "In", &["bar"])]
                }]))}),
                json!({"foo": "baz"}),
                Some(ERR_REASON_POD),
            ),
        ];
        let pl = plugin(json!({}));
        for (name, spec, labels, want) in cases {
            let st = run_filter(&pl, spec, "n1", labels);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(r) => {
                    assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(st.reasons(), [r.to_string()], "{name}");
                }
            }
        }
    }

    #[test]
    fn added_affinity_filter() {
        let pl = plugin(json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "In", &["foo"])]}]}}}));
        let cases = [
            ("matches added and pod", json!({"nodeSelector": {"x": "1"}}), json!({"zone": "foo", "x": "1"}), None),
            (
                "fails added first",
                json!({"nodeSelector": {"x": "1"}}),
                json!({"zone": "bar", "x": "2"}),
                Some(ERR_REASON_ENFORCED),
            ),
            (
                "matches added, fails pod",
                json!({"nodeSelector": {"x": "1"}}),
                json!({"zone": "foo"}),
                Some(ERR_REASON_POD),
            ),
            ("pod without constraints still checked", json!({}), json!({"zone": "bar"}), Some(ERR_REASON_ENFORCED)),
        ];
        for (name, spec, labels, want) in cases {
            let st = run_filter(&pl, spec, "n1", labels);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(r) => {
                    assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(st.reasons(), [r.to_string()], "{name}");
                }
            }
        }
    }

    #[test]
    fn pre_filter_table() {
        let names = |v: &[&str]| -> Option<HashSet<String>> { Some(v.iter().map(|s| s.to_string()).collect()) };
        let field_in = |vals: &[&str]| json!({"matchFields": [expr("metadata.name", "In", vals)]});
        let cases: Vec<(&str, Value, Value, PreFilterResult, Code)> = vec![
            ("nothing to check", json!({}), json!({}), None, Code::Skip),
            (
                "added affinity forbids skipping",
                json!({}),
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr("a", "Exists", &[])]}]}}}),
                None,
                Code::Success,
            ),
            (
                "added preferred only still skips",
                json!({}),
                json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [expr("a", "Exists", &[])]}}]}}),
                None,
                Code::Skip,
            ),
            ("nodeSelector only", json!({"nodeSelector": {"a": "b"}}), json!({}), None, Code::Success),
            ("empty nodeSelector is not skipped", json!({"nodeSelector": {}}), json!({}), None, Code::Success),
            (
                "label terms only: all nodes",
                json!({"affinity": required(json!([{"matchExpressions": [expr("a", "Exists", &[])]}]))}),
                json!({}),
                None,
                Code::Success,
            ),
            (
                "one term with node names",
                json!({"affinity": required(json!([field_in(&["n1", "n2"])]))}),
                json!({}),
                names(&["n1", "n2"]),
                Code::Success,
            ),
            (
                "terms are unioned",
                json!({"affinity": required(json!([field_in(&["n1"]), field_in(&["n2", "n3"])]))}),
                json!({}),
                names(&["n1", "n2", "n3"]),
                Code::Success,
            ),
            (
                "requirements in a term are intersected",
                json!({"affinity": required(json!([{"matchFields": [expr("metadata.name", "In", &["n1", "n2"]), expr("metadata.name", "In", &["n2", "n3"])]}]))}),
                json!({}),
                names(&["n2"]),
                Code::Success,
            ),
            (
                "a term without node names allows all nodes",
                json!({"affinity": required(json!([field_in(&["n1"]), {"matchExpressions": [expr("a", "Exists", &[])]}]))}),
                json!({}),
                None,
                Code::Success,
            ),
            (
                "NotIn does not narrow",
                json!({"affinity": required(json!([{"matchFields": [expr("metadata.name", "NotIn", &["n1"])]}]))}),
                json!({}),
                None,
                Code::Success,
            ),
            (
                "conflicting names",
                json!({"affinity": required(json!([{"matchFields": [expr("metadata.name", "In", &["n1"]), expr("metadata.name", "In", &["n2"])]}]))}),
                json!({}),
                None,
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, spec, args, want_result, want_code) in cases {
            let pl = plugin(args);
            let p = pod(json!({"metadata": {"name": "p"}, "spec": spec}));
            let mut state = CycleState::new();
            let (result, st) = pl.pre_filter(&mut state, &p, &Snapshot::default());
            assert_eq!(st.code(), want_code, "{name}: {st}");
            assert_eq!(result, want_result, "{name}");
            if want_code == Code::UnschedulableAndUnresolvable {
                assert_eq!(st.reasons(), [ERR_REASON_CONFLICT.to_string()], "{name}");
            }
            assert_eq!(
                state.read::<Arc<RequiredNodeAffinity>>(PRE_FILTER_STATE_KEY).is_some(),
                want_code != Code::Skip,
                "{name}: state written unless skipped"
            );
        }
    }

    #[test]
    fn filter_without_pre_filter_state_compiles_on_the_fly() {
        let pl = plugin(json!({}));
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"nodeSelector": {"a": "b"}}}));
        let st = pl.filter(&CycleState::new(), &p, &node(json!({"metadata": {"name": "n", "labels": {"a": "c"}}})));
        assert_eq!(st.reasons(), [ERR_REASON_POD.to_string()]);
        assert!(pl
            .filter(&CycleState::new(), &p, &node(json!({"metadata": {"name": "n", "labels": {"a": "b"}}})))
            .is_success());
    }

    fn preferred(terms: Value) -> Value {
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}})
    }

    /// PreScore, Score and NormalizeScore over nodes given by labels; `None` when PreScore skipped.
    fn run_score(pl: &NodeAffinity, spec: Value, nodes: &[Value]) -> Option<(Vec<i64>, Vec<i64>)> {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": spec}));
        let nodes: Vec<NodeInfo> = nodes
            .iter()
            .enumerate()
            .map(|(i, l)| node(json!({"metadata": {"name": format!("n{i}"), "labels": l}})))
            .collect();
        let arcs: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
        let mut state = CycleState::new();
        let st = pl.pre_score(&mut state, &p, &arcs, &Snapshot::default());
        if st.is_skip() {
            return None;
        }
        assert!(st.is_success(), "{st}");
        let raw: Vec<i64> = nodes.iter().map(|n| pl.score(&state, &p, n).unwrap()).collect();
        let mut scores: Vec<NodeScore> =
            nodes.iter().zip(&raw).map(|(n, s)| NodeScore { name: &n.name, id: n.id, score: *s }).collect();
        assert!(pl.normalize_score(&state, &p, &mut scores).is_success());
        Some((raw, scores.into_iter().map(|s| s.score).collect()))
    }

    #[test]
    fn score_table() {
        let pl = plugin(json!({}));
        let terms = json!([
            {"weight": 2, "preference": {"matchExpressions": [expr("foo", "In", &["bar"])]}},
            {"weight": 4, "preference": {"matchExpressions": [expr("key", "In", &["value"])]}},
            {"weight": 5, "preference": {"matchExpressions": [expr("az", "In", &["az1"])]}},
            {"weight": 0, "preference": {"matchExpressions": [expr("zero", "Exists", &[])]}},
            {"weight": 9, "preference": {}}
        ]);
        let got = run_score(
            &pl,
            json!({"affinity": preferred(terms)}),
            &[
                json!({"foo": "bar"}),
                json!({"foo": "bar", "key": "value"}),
                json!({"foo": "bar", "key": "value", "az": "az1", "zero": "1"}),
                json!({}),
            ],
        );
        // Raw scores are the sums of matching weights (zero-weight and empty terms count for nothing);
        // normalized to the best node, not reversed.
        assert_eq!(got, Some((vec![2, 6, 11, 0], vec![18, 54, 100, 0])));

        assert_eq!(run_score(&pl, json!({}), &[json!({})]), None, "no preferred terms: Skip");
        assert_eq!(
            run_score(&pl, json!({"affinity": preferred(json!([]))}), &[json!({"a": "b"})]),
            Some((vec![0], vec![0])),
            "an empty list is not skipped"
        );
    }

    #[test]
    fn score_with_added_affinity() {
        let pl = plugin(json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 3, "preference": {"matchExpressions": [expr("zone", "In", &["a"])]}}
        ]}}));
        // A pod without preferred terms is not skipped when the plugin adds some.
        assert_eq!(
            run_score(&pl, json!({}), &[json!({"zone": "a"}), json!({"zone": "b"})]),
            Some((vec![3, 0], vec![100, 0]))
        );
        let spec = json!({"affinity": preferred(json!([{"weight": 1, "preference": {"matchExpressions": [expr("gpu", "Exists", &[])]}}]))});
        assert_eq!(
            run_score(&pl, spec, &[json!({"zone": "a"}), json!({"zone": "a", "gpu": "1"}), json!({"gpu": "1"})]),
            Some((vec![3, 4, 1], vec![75, 100, 25]))
        );
    }

    #[test]
    fn invalid_pod_preferred_term_is_an_error() {
        let pl = plugin(json!({}));
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"affinity": preferred(json!([
            {"weight": 1, "preference": {"matchExpressions": [expr("foo", "Bogus", &["x"])]}}
        ]))}}));
        let st = pl.pre_score(&mut CycleState::new(), &p, &[], &Snapshot::default());
        assert_eq!(st.code(), Code::Error);
        assert!(
            st.message().starts_with(
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
            ),
            "{st}"
        );
        assert!(pl.has_normalize());
    }

    #[test]
    fn args_validation() {
        let cases = [
            (json!({}), None),
            (json!(null), None),
            (json!({"addedAffinity": {}}), None),
            (
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [expr("a", "In", &["b"])]},
                    {"matchExpressions": [expr("a", "Bogus", &["b"])]}
                ]}}}),
                Some("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]"),
            ),
            (
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [expr("metadata.name", "In", &["a", "b"])]}
                ]}}}),
                Some("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: matchFields[0].values"),
            ),
            (
                json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [expr("a", "Exists", &["x"])]}}
                ]}}),
                Some("addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference: matchExpressions[0].values"),
            ),
            (
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [expr("a", "Gt", &["x"])]}
                ]}}}),
                Some("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"),
            ),
            (json!({"addedAfinity": {}}), Some("unknown field")),
        ];
        for (args, want) in cases {
            match (NodeAffinity::new(Some(&args), &ctx()), want) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{args}: {e}"),
                (Ok(_), Some(w)) => panic!("{args}: accepted, want error {w}"),
                (Err(e), None) => panic!("{args}: {e}"),
            }
        }
    }
}
