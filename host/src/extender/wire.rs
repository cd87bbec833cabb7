//! The extender wire format of upstream's `k8s.io/kube-scheduler/extender/v1` (`types.go`): requests written with
//! the Go field names (the types carry no JSON tags), answers read as Go's `encoding/json` reads them — a key
//! matches a field exactly or, failing that, case-insensitively; unknown keys are ignored; `null` leaves the zero
//! value. Real extenders answer with their own struct tags (`nodenames`, `failedNodes`, ...), so this matters.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// The top of an extender's score range (upstream `MaxExtenderPriority`).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// Reads a value as Go's `encoding/json` would into the implementing type.
pub trait GoDecode: Sized + Default {
    /// Decodes `v`; `at` names the place for an error.
    fn decode(v: &Value, at: &str) -> Result<Self, String>;
}

fn mismatch(at: &str, want: &str, v: &Value) -> String {
    let got = match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!("cannot decode {got} into {at} (want {want})")
}

/// The value of a struct field in a JSON object: the exact key first, else a key equal to it ignoring case.
fn field<'a>(o: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    o.get(name).or_else(|| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

impl GoDecode for String {
    fn decode(v: &Value, at: &str) -> Result<Self, String> {
        match v {
            Value::Null => Ok(String::new()),
            Value::String(s) => Ok(s.clone()),
            _ => Err(mismatch(at, "string", v)),
        }
    }
}

impl GoDecode for i64 {
    fn decode(v: &Value, at: &str) -> Result<Self, String> {
        match v {
            Value::Null => Ok(0),
            // Go refuses a fraction or an exponent for an integer field, as `as_i64` does.
            Value::Number(n) => n.as_i64().ok_or_else(|| format!("cannot decode number {n} into {at} (want int64)")),
            _ => Err(mismatch(at, "int64", v)),
        }
    }
}

impl<T: GoDecode> GoDecode for Vec<T> {
    fn decode(v: &Value, at: &str) -> Result<Self, String> {
        match v {
            Value::Null => Ok(Vec::new()),
            Value::Array(a) => a.iter().enumerate().map(|(i, x)| T::decode(x, &format!("{at}[{i}]"))).collect(),
            _ => Err(mismatch(at, "array", v)),
        }
    }
}

impl<T: GoDecode> GoDecode for Option<T> {
    /// A Go pointer or a nil-able slice: `None` for an absent or `null` value.
    fn decode(v: &Value, at: &str) -> Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            _ => T::decode(v, at).map(Some),
        }
    }
}

impl<T: GoDecode> GoDecode for BTreeMap<String, T> {
    fn decode(v: &Value, at: &str) -> Result<Self, String> {
        match v {
            Value::Null => Ok(BTreeMap::new()),
            // Map keys are data, not field names: matched exactly.
            Value::Object(o) => {
                o.iter().map(|(k, x)| Ok((k.clone(), T::decode(x, &format!("{at}[{k:?}]"))?))).collect()
            }
            _ => Err(mismatch(at, "object", v)),
        }
    }
}

/// Implements [`GoDecode`] for a struct from its fields' Go names.
macro_rules! go_struct {
    ($ty:ident { $($field:ident: $go:literal),+ $(,)? }) => {
        impl GoDecode for $ty {
            fn decode(v: &Value, at: &str) -> Result<Self, String> {
                let o = match v {
                    Value::Null => return Ok(Self::default()),
                    Value::Object(o) => o,
                    _ => return Err(mismatch(at, "object", v)),
                };
                let mut out = Self::default();
                $(
                    if let Some(x) = field(o, $go) {
                        out.$field = GoDecode::decode(x, &format!("{at}.{}", $go))?;
                    }
                )+
                Ok(out)
            }
        }
    };
}

/// The answer to a filter call (upstream `ExtenderFilterResult`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FilterResult {
    /// The nodes that passed, as whole Node objects (extenders without a node cache).
    pub nodes: Option<NodeList>,
    /// The nodes that passed, by name (extenders with a node cache).
    pub node_names: Option<Vec<String>>,
    /// Rejected nodes → reason; preemption may help.
    pub failed_nodes: BTreeMap<String, String>,
    /// Rejected nodes → reason; preemption cannot help. Wins over `failed_nodes`.
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// Non-empty: the call failed with this message.
    pub error: String,
}
go_struct!(FilterResult {
    nodes: "Nodes",
    node_names: "NodeNames",
    failed_nodes: "FailedNodes",
    failed_and_unresolvable_nodes: "FailedAndUnresolvableNodes",
    error: "Error",
});

/// A `v1.NodeList`, reduced to what the scheduler reads back: the names of its items.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NodeList {
    /// The nodes.
    pub items: Vec<NodeRef>,
}
go_struct!(NodeList { items: "items" });

/// A `v1.Node` in an answer, reduced to its name.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NodeRef {
    /// Its metadata.
    pub metadata: ObjectMeta,
}
go_struct!(NodeRef { metadata: "metadata" });

/// The part of `metav1.ObjectMeta` the scheduler reads back.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ObjectMeta {
    /// The object's name.
    pub name: String,
}
go_struct!(ObjectMeta { name: "name" });

/// One node's score from an extender (upstream `HostPriority`), 0–[`MAX_EXTENDER_PRIORITY`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostPriority {
    /// The node's name.
    pub host: String,
    /// The score.
    pub score: i64,
}
go_struct!(HostPriority { host: "Host", score: "Score" });

/// The answer to a preempt call (upstream `ExtenderPreemptionResult`): the candidates the extender keeps.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PreemptionResult {
    /// Node name → the victims there, by UID.
    pub node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
}
go_struct!(PreemptionResult { node_name_to_meta_victims: "NodeNameToMetaVictims" });

/// Victims on one node, by UID (upstream `MetaVictims`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MetaVictims {
    /// The pods to evict.
    pub pods: Vec<MetaPod>,
    /// How many PodDisruptionBudgets the eviction violates.
    pub num_pdb_violations: i64,
}
go_struct!(MetaVictims { pods: "Pods", num_pdb_violations: "NumPDBViolations" });

/// A pod named by its UID (upstream `MetaPod`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MetaPod {
    /// The pod's UID.
    pub uid: String,
}
go_struct!(MetaPod { uid: "UID" });

/// The answer to a bind call (upstream `ExtenderBindingResult`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BindingResult {
    /// Non-empty: binding failed with this message.
    pub error: String,
}
go_struct!(BindingResult { error: "Error" });

/// The nodes of a filter or prioritize request: names for an extender with a node cache, else whole objects.
pub enum Candidates<'a> {
    /// `NodeNames`.
    Names(Vec<&'a str>),
    /// `Nodes`, as a `v1.NodeList`.
    Nodes(Vec<Value>),
}

/// `ExtenderArgs`: the pod and the candidate nodes, the unused one of `Nodes`/`NodeNames` null as Go writes it.
pub fn extender_args(pod: &Value, candidates: Candidates<'_>) -> Value {
    match candidates {
        Candidates::Names(names) => json!({"Pod": pod, "Nodes": null, "NodeNames": names}),
        Candidates::Nodes(items) => json!({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": null}),
    }
}

/// `ExtenderBindingArgs`.
pub fn binding_args(name: &str, namespace: &str, uid: &str, node: &str) -> Value {
    json!({"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node})
}

/// Victims on one node as the scheduler sends them: whole pods (`Victims`) or UIDs (`MetaVictims`).
pub enum SentVictims {
    /// Whole pod objects.
    Pods(Vec<Value>),
    /// UIDs only.
    Uids(Vec<String>),
}

/// `ExtenderPreemptionArgs`: whole victims for an extender without a node cache, UIDs for one with it.
pub fn preemption_args(pod: &Value, victims: Vec<(String, SentVictims, i64)>, node_cache_capable: bool) -> Value {
    let mut map = Map::new();
    for (node, v, pdb) in victims {
        let pods = match v {
            SentVictims::Pods(p) => Value::Array(p),
            SentVictims::Uids(u) => Value::Array(u.into_iter().map(|uid| json!({"UID": uid})).collect()),
        };
        map.insert(node, json!({"Pods": pods, "NumPDBViolations": pdb}));
    }
    if node_cache_capable {
        json!({"Pod": pod, "NodeNameToVictims": null, "NodeNameToMetaVictims": map})
    } else {
        json!({"Pod": pod, "NodeNameToVictims": map, "NodeNameToMetaVictims": null})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_decode_as_go_does() {
        // Field names in any case; the exact one wins; unknown keys ignored; null is the zero value.
        let v = json!({
            "nodenames": ["a", "b"],
            "failedNodes": {"c": "no gpu"},
            "FAILEDANDUNRESOLVABLENODES": {"d": "never"},
            "error": null,
            "extra": 1,
        });
        let r = FilterResult::decode(&v, "result").unwrap();
        assert_eq!(r.node_names.as_deref(), Some(&["a".to_string(), "b".to_string()][..]));
        assert_eq!(r.failed_nodes["c"], "no gpu");
        assert_eq!(r.failed_and_unresolvable_nodes["d"], "never");
        assert!(r.nodes.is_none() && r.error.is_empty());
        let both = json!({"error": "lower", "Error": "exact"});
        assert_eq!(BindingResult::decode(&both, "r").unwrap().error, "exact");
        let nodes = json!({"Nodes": {"Items": [{"Metadata": {"Name": "n1"}}]}});
        assert_eq!(FilterResult::decode(&nodes, "r").unwrap().nodes.unwrap().items[0].metadata.name, "n1");
        let list: Vec<HostPriority> = GoDecode::decode(&json!([{"host": "a", "score": 7}]), "list").unwrap();
        assert_eq!(list, vec![HostPriority { host: "a".into(), score: 7 }]);
    }

    #[test]
    fn type_mismatches_are_errors_naming_the_field() {
        let e = Vec::<HostPriority>::decode(&json!([{"Host": "a", "Score": 2.5}]), "list").unwrap_err();
        assert!(e.contains("list[0].Score"), "{e}");
        let e = FilterResult::decode(&json!({"FailedNodes": ["a"]}), "result").unwrap_err();
        assert!(e.contains("result.FailedNodes") && e.contains("array"), "{e}");
    }

    #[test]
    fn requests_use_go_field_names() {
        let pod = json!({"metadata": {"name": "p"}});
        let a = extender_args(&pod, Candidates::Names(vec!["n1"]));
        assert_eq!(a, json!({"Pod": pod, "Nodes": null, "NodeNames": ["n1"]}));
        let a = extender_args(&pod, Candidates::Nodes(vec![json!({"metadata": {"name": "n1"}})]));
        assert_eq!(a["Nodes"]["items"][0]["metadata"]["name"], "n1");
        assert!(a["NodeNames"].is_null());
        let p = preemption_args(&pod, vec![("n1".into(), SentVictims::Uids(vec!["u1".into()]), 0)], true);
        assert_eq!(p["NodeNameToMetaVictims"]["n1"]["Pods"][0]["UID"], "u1");
        assert!(p["NodeNameToVictims"].is_null());
    }
}
