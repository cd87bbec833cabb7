//! Compiled label selectors and node selectors, matched without allocating on the hot path.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Labels as Kubernetes objects carry them.
pub type Labels = BTreeMap<String, String>;

/// The empty label set, for objects without labels.
pub fn no_labels() -> &'static Labels {
    static EMPTY: Labels = BTreeMap::new();
    &EMPTY
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// key in values
    In(String, Vec<String>),
    /// key not in values (also true when the key is absent)
    NotIn(String, Vec<String>),
    /// key present
    Exists(String),
    /// key absent
    DoesNotExist(String),
    /// integer value of key greater than (node selectors only)
    Gt(String, i64),
    /// integer value of key less than (node selectors only)
    Lt(String, i64),
}

impl Requirement {
    /// True when the labels satisfy this requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Gt(k, n) => labels.get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => labels.get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
        }
    }

    /// The label key this requirement reads.
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::Gt(k, _)
            | Requirement::Lt(k, _) => k,
        }
    }
}

/// A compiled `metav1.LabelSelector`: all requirements must hold. `Nothing` matches no object (a nil selector
/// in the places where upstream treats nil as "select nothing").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Matches when every requirement matches; an empty list matches everything.
    All(Vec<Requirement>),
    /// Matches nothing.
    Nothing,
}

impl Selector {
    /// A selector matching every object.
    pub fn everything() -> Selector {
        Selector::All(Vec::new())
    }

    /// Compiles a label selector; an invalid operator or a missing value list is an error naming the key.
    pub fn from_label_selector(sel: &LabelSelector) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        if let Some(ml) = &sel.match_labels {
            for (k, v) in ml {
                reqs.push(Requirement::In(k.clone(), vec![v.clone()]));
            }
        }
        for e in sel.match_expressions.iter().flatten() {
            reqs.push(label_requirement(e)?);
        }
        Ok(Selector::All(reqs))
    }

    /// Compiles an optional selector where a missing selector selects nothing (affinity terms, spread constraints).
    pub fn from_optional(sel: Option<&LabelSelector>) -> Result<Selector, String> {
        match sel {
            Some(s) => Selector::from_label_selector(s),
            None => Ok(Selector::Nothing),
        }
    }

    /// True when the labels satisfy the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Selector::All(reqs) => reqs.iter().all(|r| r.matches(labels)),
            Selector::Nothing => false,
        }
    }

    /// True for a selector that selects everything.
    pub fn is_everything(&self) -> bool {
        matches!(self, Selector::All(r) if r.is_empty())
    }
}

fn label_requirement(e: &LabelSelectorRequirement) -> Result<Requirement, String> {
    let values = e.values.clone().unwrap_or_default();
    let need_values = |op: &str| {
        if values.is_empty() {
            Err(format!("matchExpressions key {:?}: operator {op} needs values", e.key))
        } else {
            Ok(())
        }
    };
    Ok(match e.operator.as_str() {
        "In" => {
            need_values("In")?;
            Requirement::In(e.key.clone(), values)
        }
        "NotIn" => {
            need_values("NotIn")?;
            Requirement::NotIn(e.key.clone(), values)
        }
        "Exists" => Requirement::Exists(e.key.clone()),
        "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
        op => return Err(format!("matchExpressions key {:?}: unknown operator {op:?}", e.key)),
    })
}

/// One compiled `NodeSelectorTerm`: expressions on labels and fields, all must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledNodeSelectorTerm {
    /// Requirements on node labels.
    pub labels: Vec<Requirement>,
    /// Requirements on node fields (only `metadata.name` exists upstream).
    pub fields: Vec<Requirement>,
}

impl CompiledNodeSelectorTerm {
    /// Compiles a term.
    pub fn new(term: &NodeSelectorTerm) -> Result<Self, String> {
        let labels = term.match_expressions.iter().flatten().map(node_requirement).collect::<Result<Vec<_>, _>>()?;
        let fields = term.match_fields.iter().flatten().map(node_requirement).collect::<Result<Vec<_>, _>>()?;
        for f in &fields {
            if f.key() != "metadata.name" {
                return Err(format!("matchFields key {:?}: only metadata.name is supported", f.key()));
            }
        }
        Ok(CompiledNodeSelectorTerm { labels, fields })
    }

    /// True when the node satisfies the term. An empty term matches nothing, as upstream.
    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        if self.labels.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.labels.iter().all(|r| r.matches(labels)) && self.fields.iter().all(|r| field_matches(r, node_name))
    }
}

fn field_matches(r: &Requirement, node_name: &str) -> bool {
    match r {
        Requirement::In(_, vs) => vs.iter().any(|v| v == node_name),
        Requirement::NotIn(_, vs) => !vs.iter().any(|v| v == node_name),
        Requirement::Exists(_) => true,
        Requirement::DoesNotExist(_) => false,
        Requirement::Gt(..) | Requirement::Lt(..) => false,
    }
}

fn node_requirement(e: &NodeSelectorRequirement) -> Result<Requirement, String> {
    let values = e.values.clone().unwrap_or_default();
    let one_int = |op: &str| -> Result<i64, String> {
        match values.as_slice() {
            [v] => v
                .parse::<i64>()
                .map_err(|_| format!("key {:?}: operator {op} needs one integer value, got {v:?}", e.key)),
            _ => Err(format!("key {:?}: operator {op} needs exactly one value", e.key)),
        }
    };
    Ok(match e.operator.as_str() {
        "In" => Requirement::In(e.key.clone(), values),
        "NotIn" => Requirement::NotIn(e.key.clone(), values),
        "Exists" => Requirement::Exists(e.key.clone()),
        "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
        "Gt" => Requirement::Gt(e.key.clone(), one_int("Gt")?),
        "Lt" => Requirement::Lt(e.key.clone(), one_int("Lt")?),
        op => return Err(format!("key {:?}: unknown operator {op:?}", e.key)),
    })
}

/// A compiled `NodeSelector`: terms are ORed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompiledNodeSelector {
    /// The terms.
    pub terms: Vec<CompiledNodeSelectorTerm>,
}

impl CompiledNodeSelector {
    /// Compiles a node selector.
    pub fn new(sel: &NodeSelector) -> Result<Self, String> {
        Ok(CompiledNodeSelector {
            terms: sel.node_selector_terms.iter().map(CompiledNodeSelectorTerm::new).collect::<Result<_, _>>()?,
        })
    }

    /// True when any term matches.
    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        self.terms.iter().any(|t| t.matches(node_name, labels))
    }
}

/// The labels of a node (empty if it has none).
pub fn node_labels(node: &Node) -> &Labels {
    node.metadata.labels.as_ref().unwrap_or(no_labels())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> Labels {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn requirements_table() {
        let l = labels(&[("a", "1"), ("b", "x")]);
        let cases = [
            (Requirement::In("a".into(), vec!["1".into()]), true),
            (Requirement::In("a".into(), vec!["2".into()]), false),
            (Requirement::NotIn("a".into(), vec!["2".into()]), true),
            (Requirement::NotIn("zz".into(), vec!["2".into()]), true),
            (Requirement::Exists("b".into()), true),
            (Requirement::DoesNotExist("b".into()), false),
            (Requirement::Gt("a".into(), 0), true),
            (Requirement::Lt("a".into(), 1), false),
            (Requirement::Gt("b".into(), 0), false),
        ];
        for (r, want) in cases {
            assert_eq!(r.matches(&l), want, "{r:?}");
        }
    }

    #[test]
    fn label_selector_compiles_and_matches() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]
        }))
        .unwrap();
        let s = Selector::from_label_selector(&sel).unwrap();
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!Selector::Nothing.matches(&labels(&[])));
        let bad: LabelSelector =
            serde_json::from_value(serde_json::json!({"matchExpressions": [{"key": "k", "operator": "Foo"}]})).unwrap();
        assert!(Selector::from_label_selector(&bad).unwrap_err().contains("Foo"));
    }

    #[test]
    fn node_selector_terms_or_and_empty_term_matches_nothing() {
        let ns: NodeSelector = serde_json::from_value(serde_json::json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]},
            {}
        ]}))
        .unwrap();
        let c = CompiledNodeSelector::new(&ns).unwrap();
        assert!(c.matches("n1", &labels(&[("zone", "a")])));
        assert!(c.matches("n2", &labels(&[])));
        assert!(!c.matches("n3", &labels(&[("zone", "b")])));
    }
}
