//! Property tests of configuration loading: random mutations of the shipped profiles (examples/*/profile.yaml and
//! the deploy/ manifest's) never panic, and either load or fail with one line naming the file. Cases: 64 by
//! default, `PROPTEST_CASES` to change.

use std::sync::Arc;

use proptest::prelude::*;
use serde_yaml::{Mapping, Value};

use kube_wasm_scheduler::cluster::memory::MemoryCluster;
use kube_wasm_scheduler::config;
use kube_wasm_scheduler::framework::parallelize::Parallelizer;
use kube_wasm_scheduler::framework::{Framework, PluginContext};
use kube_wasm_scheduler::plugins::in_tree_registry;

use crate::util::root;

/// The configurations the project ships, as YAML values.
fn seeds() -> Vec<Value> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path().join("profile.yaml"))
        .filter(|p| p.exists())
        .collect();
    files.sort();
    for f in files {
        out.push(serde_yaml::from_str(&std::fs::read_to_string(f).unwrap()).unwrap());
    }
    // The deploy manifest carries its configuration inside a ConfigMap.
    let cm: Value =
        serde_yaml::from_str(&std::fs::read_to_string(root().join("deploy/manifests/config.yaml")).unwrap()).unwrap();
    let text = cm["data"]["config.yaml"].as_str().expect("the ConfigMap holds config.yaml");
    out.push(serde_yaml::from_str(text).unwrap());
    out
}

/// Values that have broken parsers before: huge, negative and special numbers, odd durations, wrong types.
fn odd_value(i: usize) -> Value {
    let yaml = [
        "0",
        "-1",
        "101",
        "2147483648",
        "9223372036854775807",
        "18446744073709551615",
        "1e308",
        "-1e308",
        ".inf",
        "-.inf",
        ".nan",
        "0.5",
        "true",
        "null",
        "''",
        "'x'",
        "[]",
        "{}",
        "[1, 2]",
        "{a: 1}",
        "99999999999999999h",
        "2562047h47m16.854775808s",
        "2562047h47m16.854775807s",
        "-1s",
        "1.5.5s",
        "+.5s",
        "1e3s",
        "0",
        "1ns",
        "9223372036s",
        "kubescheduler.config.k8s.io/v1",
        "NodeResourcesFitArgs",
        "RequestedToCapacityRatio",
        "'*'",
        "[{name: cpu, weight: 0}]",
        "[{utilization: 100, score: 11}, {utilization: 0, score: -1}]",
    ];
    serde_yaml::from_str(yaml[i % yaml.len()]).unwrap()
}

/// Field names worth adding where they do not belong (or do).
const KEYS: &[&str] = &[
    "weight",
    "timeout",
    "qps",
    "burst",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "bindTimeoutSeconds",
    "hardPodAffinityWeight",
    "minCandidateNodesPercentage",
    "shape",
    "scoringStrategy",
    "kind",
    "apiVersion",
    "schedulerName",
    "profiles",
    "pluginConfig",
    "percentageOfNodesToScore",
    "podMaxBackoffSeconds",
    "unknownField",
];

/// One mutation: which node (by index into a walk of the tree), what to do, and a number to choose with.
#[derive(Debug, Clone)]
enum Mutation {
    /// Remove the node from its mapping or sequence.
    Drop(usize),
    /// Repeat a sequence element, or copy a mapping entry under a second key.
    Duplicate(usize),
    /// Replace the node with an odd value.
    Replace(usize, usize),
    /// Add a key to a mapping with an odd value.
    Insert(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Drop),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Replace(a, b)),
        (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(a, b, c)| Mutation::Insert(a, b, c)),
    ]
}

/// Paths to every node below the root: mapping keys and sequence indexes.
fn paths(v: &Value, prefix: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    match v {
        Value::Mapping(m) => {
            for (k, child) in m {
                prefix.push(k.clone());
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Sequence(s) => {
            for (i, child) in s.iter().enumerate() {
                prefix.push(Value::from(i as u64));
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

/// The parent of the node at `path`, and the node's key there.
fn parent<'a>(root: &'a mut Value, path: &[Value]) -> Option<(&'a mut Value, Value)> {
    let (last, up) = path.split_last()?;
    let mut v = root;
    for k in up {
        v = match (v, k) {
            (Value::Mapping(m), k) => m.get_mut(k)?,
            (Value::Sequence(s), Value::Number(n)) => s.get_mut(n.as_u64()? as usize)?,
            _ => return None,
        };
    }
    Some((v, last.clone()))
}

fn apply(v: &mut Value, m: &Mutation) {
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    if all.is_empty() {
        return;
    }
    let pick = |i: usize| all[i % all.len()].clone();
    match m {
        Mutation::Drop(i) => match parent(v, &pick(*i)) {
            Some((Value::Mapping(p), k)) => drop(p.remove(&k)),
            Some((Value::Sequence(s), Value::Number(n))) => drop(s.remove(n.as_u64().unwrap() as usize)),
            _ => {}
        },
        Mutation::Duplicate(i) => match parent(v, &pick(*i)) {
            Some((Value::Mapping(p), k)) => {
                let copy = p[&k].clone();
                let key = Value::from(format!("{}x", k.as_str().unwrap_or("k")));
                p.insert(key, copy);
            }
            Some((Value::Sequence(s), Value::Number(n))) => {
                let at = n.as_u64().unwrap() as usize;
                s.insert(at, s[at].clone());
            }
            _ => {}
        },
        Mutation::Replace(i, j) => match parent(v, &pick(*i)) {
            Some((Value::Mapping(p), k)) => drop(p.insert(k, odd_value(*j))),
            Some((Value::Sequence(s), Value::Number(n))) => s[n.as_u64().unwrap() as usize] = odd_value(*j),
            _ => {}
        },
        Mutation::Insert(i, k, j) => {
            let key = Value::from(KEYS[k % KEYS.len()]);
            let target = match parent(v, &pick(*i)) {
                Some((Value::Mapping(p), key)) => p.get_mut(&key),
                Some((Value::Sequence(s), Value::Number(n))) => s.get_mut(n.as_u64().unwrap() as usize),
                _ => None,
            };
            match target {
                Some(Value::Mapping(m)) => drop(m.insert(key, odd_value(*j))),
                // A scalar or sequence becomes a mapping holding the key: a retype as well.
                Some(other) => *other = Value::Mapping(Mapping::from_iter([(key, odd_value(*j))])),
                None => {}
            }
        }
    }
}

/// Loads the text as the binary does; a configuration that loads must also build its frameworks (native plugins
/// only: a Wasm component is compiled elsewhere) and serialize for `--write-config-to`.
fn check(text: &str) -> Result<(), TestCaseError> {
    let r = in_tree_registry();
    match kube_wasm_scheduler::scheduler::parse_config("sched.yaml", text, &|n| r.get(n).is_some()) {
        Err(e) => {
            let line = config::with_known_names(e, &r.names()).to_string();
            prop_assert!(line.starts_with("sched.yaml: "), "{line}");
            prop_assert!(!line.contains('\n'), "one line: {line:?}");
        }
        Ok(cfg) => {
            serde_yaml::to_string(&cfg).map_err(|e| TestCaseError::fail(format!("serializing: {e}")))?;
            let ctx = PluginContext::new(Arc::new(MemoryCluster::default()));
            for p in &cfg.profiles {
                if p.plugin_args.keys().any(|n| r.get(n).is_none()) {
                    continue;
                }
                if let Err(e) = Framework::new(p, cfg.percentage_of_nodes_to_score, &r, &ctx, Parallelizer::new(1)) {
                    let line = e.to_string();
                    prop_assert!(!line.contains('\n'), "one line: {line:?}");
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::util::proptest_config(64))]

    #[test]
    fn mutated_shipped_configs_load_or_fail_in_one_line(
        seed in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let seeds = seeds();
        let mut v = seeds[seed % seeds.len()].clone();
        for m in &mutations {
            apply(&mut v, m);
        }
        let text = serde_yaml::to_string(&v).unwrap();
        check(&text)?;
    }
}

#[test]
fn every_seed_loads_unmutated() {
    for v in seeds() {
        check(&serde_yaml::to_string(&v).unwrap()).unwrap();
    }
}
