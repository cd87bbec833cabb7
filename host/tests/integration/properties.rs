//! Property tests of the inputs a user hands the simulator: quantities and cluster files. Each property runs a
//! modest number of cases so `make test` stays fast; `PROPTEST_CASES=100000 make fuzz` runs many more.

use std::cmp::Ordering;

use kube_wasm_scheduler::framework::quantity::Quantity;
use kube_wasm_scheduler::sim::load;
use proptest::prelude::*;

use crate::util::{proptest_config, root};

/// Strings close to the quantity grammar, so that most cases get past the first character.
fn quantity_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-+]?[0-9]{0,25}(\\.[0-9]{0,12})?(|n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][-+]?[0-9]{1,20})",
        "[-+ .0-9eEinumkKMGTP]{0,16}",
        any::<String>(),
    ]
}

/// The loader's answer: Ok, or one line naming the file; a panic fails the property.
fn loads_or_one_line(text: &str) -> Result<(), TestCaseError> {
    if let Err(e) = load::parse("c.yaml", text) {
        let e = e.to_string();
        prop_assert!(e.starts_with("c.yaml: "), "{e}");
        prop_assert!(!e.contains('\n'), "{e:?}");
    }
    Ok(())
}

fn example_clusters() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("cluster.yaml")).ok())
        .collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(proptest_config(256))]

    #[test]
    fn quantity_parsing_never_panics(s in quantity_like()) {
        let _ = Quantity::parse(&s).map(|q| (q.to_string(), q.milli_value(), q.value()));
    }

    /// The canonical form parses back to the same amount and is its own canonical form.
    #[test]
    fn canonical_quantities_round_trip(s in quantity_like()) {
        if let Ok(q) = Quantity::parse(&s) {
            let canonical = q.to_string();
            let back = Quantity::parse(&canonical).unwrap_or_else(|e| panic!("{s:?} -> {canonical:?}: {e}"));
            prop_assert_eq!(back.cmp(&q), Ordering::Equal, "{:?} -> {:?}", s, canonical);
            prop_assert_eq!(back.to_string(), canonical);
        }
    }

    /// More written means more read: the order of amounts and of their rounded milli and whole values agree.
    #[test]
    fn quantities_are_monotonic(
        a in 0u64..u64::MAX, b in 0u64..u64::MAX, frac in 0u32..1000,
        suffix in "(|n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[-+]?[0-9]{1,3})",
    ) {
        let (lo, hi) = (a.min(b), a.max(b));
        let lo = Quantity::parse(&format!("{lo}.{frac:03}{suffix}")).unwrap();
        let hi = Quantity::parse(&format!("{hi}.{frac:03}{suffix}")).unwrap();
        prop_assert!(lo <= hi);
        prop_assert!(lo.milli_value() <= hi.milli_value());
        prop_assert!(lo.value() <= hi.value());
    }
}

proptest! {
    #![proptest_config(proptest_config(64))]

    /// Random YAML-ish documents: brackets, indentation, quotes, keys the loader reads.
    #[test]
    fn random_cluster_documents_load_or_give_one_line(
        parts in prop::collection::vec(prop_oneof![
            Just("apiVersion: v1\n".to_string()),
            Just("kind: ".to_string()),
            Just("---\n".to_string()),
            prop::sample::select(vec!["Pod", "Node", "List", "PriorityClass", "PodDisruptionBudget", "Namespace"]).prop_map(|k| format!("{k}\n")),
            Just("metadata: {name: a}\n".to_string()),
            Just("items:\n- ".to_string()),
            Just("spec: {containers: [{name: c}]}\n".to_string()),
            "[ \\[\\]{}:,'\"\\-#|>\n0-9a-z]{0,12}",
            "[ ]{0,6}[a-zA-Z]{1,8}: ",
        ], 0..24),
    ) {
        loads_or_one_line(&parts.concat())?;
    }

    /// Mutations of the examples: a byte range dropped, text inserted, a line repeated.
    #[test]
    fn mutated_examples_load_or_give_one_line(
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        len in 0usize..40,
        insert in "[ \\[\\]{}:,'\"\\-#\n0-9a-zA-Z%&*!.]{0,10}",
        repeat in any::<bool>(),
    ) {
        let examples = example_clusters();
        let text = pick.get(&examples).as_bytes();
        let i = at.index(text.len() + 1);
        let mut out = text[..i].to_vec();
        out.extend_from_slice(insert.as_bytes());
        if repeat {
            let line_start = text[..i].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
            out.extend_from_slice(&text[line_start..i]);
        }
        out.extend_from_slice(&text[(i + len).min(text.len())..]);
        // A cut through a multi-byte character is not text: load() refuses such a file before parsing.
        if let Ok(s) = String::from_utf8(out) {
            loads_or_one_line(&s)?;
        }
    }
}
