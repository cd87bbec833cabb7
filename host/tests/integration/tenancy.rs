//! Tenant policies (SchedulingPolicy, ClusterSchedulingPolicy) served by a profile's TenantPolicies plugin, in the
//! simulator: real guests pushed to the CNCF distribution registry on 127.0.0.1 and named by the policies as a
//! tenant would, placements asserted pod by pod against the same cluster without the policies; hostile policies
//! fail only their own tenant's pods; a guest written to learn other namespaces' pods learns no name; a tenant's gang
//! (the coscheduling guest at PreFilter, Reserve and Permit) holds and releases only its own namespace's pods.

use kube_wasm_scheduler::framework::Registry;
use kube_wasm_scheduler::sim::Report;

use crate::oci_registry::{push, Registry as OciRegistry};
use crate::util::*;
use crate::wasm::guest;

/// A registry of the test's own (stopped when dropped), with the guests the policies name pushed under `policies/`.
fn registry(test: &str) -> OciRegistry {
    let r = OciRegistry::start(test);
    for g in ["drain-guard", "priority-label", "hostile", "hostile-peek", "coscheduling"] {
        push(&guest(g), &format!("oci://{}/policies/{g}:1", r.host));
    }
    r
}

/// The binary's registry: in-tree plugins and TenantPolicies.
fn plugins() -> Registry {
    let mut r = kube_wasm_scheduler::plugins::in_tree_registry();
    kube_wasm_scheduler::tenancy::register(&mut r);
    r
}

/// A profile `kws` with TenantPolicies at weight 10 and these limits (YAML of its args, indented 6).
fn profile(limits: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: kws\n  plugins:\n    multiPoint:\n      enabled: [{{name: TenantPolicies, weight: 10}}]\n  pluginConfig:\n  - name: TenantPolicies\n    args:\n{limits}"
    )
}

/// Four nodes ranked by label (node-1 highest), three namespaces; `other`'s pods come first in the file, so they are
/// placed before any tenant pod in both runs and a policy could reach them only by being called for them.
fn cluster(policies: &str) -> String {
    let mut y = String::new();
    for ns in ["team-a", "team-b", "other"] {
        y += &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}, labels: {{tier: {ns}}}}}\n---\n");
    }
    for i in 1..=4 {
        y += &format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: node-{i}, labels: {{rank: \"{}\"}}}}\nstatus: {{allocatable: {{cpu: \"8\", memory: 16Gi, pods: \"110\"}}}}\n---\n",
            5 - i
        );
    }
    for ns in ["other", "team-a", "team-b"] {
        for j in 1..=3 {
            y += &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{j}, namespace: {ns}, labels: {{app: {ns}-app}}}}\nspec: {{schedulerName: kws, containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"1\", memory: 1Gi}}}}}}]}}\n---\n"
            );
        }
    }
    y + policies
}

fn policy(kind: &str, ns: Option<&str>, name: &str, spec: &str) -> String {
    let ns = ns.map(|n| format!(", namespace: {n}")).unwrap_or_default();
    format!("apiVersion: scheduling.kube-wasm-scheduler.io/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}{ns}}}\nspec:\n  schedulerName: kws\n{spec}---\n")
}

fn run(limits: &str, policies: &str) -> Report {
    run_explained(limits, policies, &[])
}

fn run_explained(limits: &str, policies: &str, explain: &[&str]) -> Report {
    let registry = plugins();
    let cfg = config(&registry, &profile(limits));
    simulate(&registry, &cfg, &cluster(policies), 1, explain)
}

fn placements(r: &Report, ns: &str) -> Vec<(String, Option<String>)> {
    r.placements
        .iter()
        .filter(|p| p.pod.starts_with(&format!("{ns}/")))
        .map(|p| (p.pod.clone(), p.node.clone()))
        .collect()
}

const LIMITS: &str = "      namespaced: {maxWeight: 10, maxTimeout: 200ms}\n";

/// The two teams' policies and a cluster policy for team-b's namespace, built from the project's guests.
fn team_policies(host: &str) -> String {
    policy(
        "SchedulingPolicy",
        Some("team-a"),
        "avoid-top",
        &format!("  component: oci://{host}/policies/drain-guard:1\n  points: [Filter]\n  config: {{nodes: [node-1, node-2]}}\n"),
    ) + &policy(
        "SchedulingPolicy",
        Some("team-b"),
        "prefer-low-rank",
        &format!("  component: oci://{host}/policies/priority-label:1\n  points: [Score]\n  weight: 10\n  config: {{labelKey: rank}}\n  timeout: 150ms\n"),
    ) + &policy(
        "ClusterSchedulingPolicy",
        None,
        "keep-b-off-node-4",
        &format!("  component: oci://{host}/policies/drain-guard:1\n  points: [Filter]\n  config: {{nodes: [node-1]}}\n  namespaceSelector: {{matchLabels: {{tier: team-b}}}}\n"),
    )
}

#[test]
fn each_tenant_is_placed_by_its_own_policy_and_no_one_else_notices() {
    let reg = registry("tenancy-placed");
    let host = &reg.host;
    let without = run(LIMITS, "");
    let with = run_explained(LIMITS, &team_policies(host), &["team-b/p1"]);
    // --explain shows the policy's own part under TenantPolicies: its raw and normalized score per node.
    let trace = &with.explain.iter().find(|e| e.pod == "team-b/p1").expect("explained").trace;
    let part = trace
        .scores
        .iter()
        .find(|s| s.plugin.contains("SchedulingPolicy team-b/prefer-low-rank"))
        .unwrap_or_else(|| panic!("{:?}", trace.scores.iter().map(|s| &s.plugin).collect::<Vec<_>>()));
    assert_eq!(part.weight, 10);
    assert!(part.nodes.iter().any(|(n, raw, _, _)| n == "node-2" && *raw == 3), "{part:?}");
    for p in &with.policies {
        assert!(p.ready, "{p:?}");
    }
    assert_eq!(with.policies.len(), 3);
    // The namespace no policy selects: pod by pod where it went without them.
    assert_eq!(placements(&with, "other"), placements(&without, "other"));
    // team-a: never on the nodes its Filter refuses; without the policy it did land there.
    for (pod, node) in placements(&with, "team-a") {
        let node = node.unwrap_or_else(|| panic!("{pod} not placed"));
        assert!(node == "node-3" || node == "node-4", "{pod} on {node}");
    }
    assert!(placements(&without, "team-a").iter().any(|(_, n)| matches!(n.as_deref(), Some("node-1" | "node-2"))));
    // team-b: the cluster policy keeps it off node-1 (namespaceSelector tier=team-b), and its own Score (rank
    // label, weight 10 at TenantPolicies' weight 10) then prefers node-2, the highest rank left.
    for (pod, node) in placements(&with, "team-b") {
        assert_eq!(node.as_deref(), Some("node-2"), "{pod}");
    }
    assert_ne!(placements(&without, "team-b"), placements(&with, "team-b"));
}

#[test]
fn hostile_tenants_fail_only_their_own_pods() {
    let reg = registry("tenancy-hostile");
    let host = &reg.host;
    let hostile = |mode: &str, points: &str| {
        format!("  component: oci://{host}/policies/hostile:1\n  points: [{points}]\n  config: {{mode: {mode}}}\n  timeout: 50ms\n  memoryLimit: 16Mi\n")
    };
    // team-b behaves (its policies as above); team-a's policy misbehaves in each way in turn.
    for (what, spec, refused) in [
        ("loops", hostile("loop", "Filter"), None),
        ("traps", hostile("trap-filter", "Filter"), None),
        ("exhausts memory", hostile("grow", "Score") + "  weight: 5\n", None),
        ("returns garbage", hostile("score-1000", "Score") + "  weight: 5\n", None),
        (
            "asks for more weight",
            hostile("ok", "Score") + "  weight: 11\n",
            Some("spec.weight: 11 is over this profile's maxWeight 10"),
        ),
        ("asks for Bind", hostile("ok", "Bind"), Some("spec.points[0]: a namespaced policy never serves Bind")),
        (
            "asks for a longer deadline",
            hostile("ok", "Filter").replace("50ms", "5s"),
            Some("spec.timeout: 5s is over this profile's maxTimeout 200ms"),
        ),
        (
            "names a file",
            "  component: /etc/passwd\n  points: [Filter]\n".to_string(),
            Some("spec.component: must start with oci:// or https://"),
        ),
    ] {
        let team_b =
            team_policies(host).split("---\n").filter(|d| !d.contains("avoid-top")).collect::<Vec<_>>().join("---\n");
        let policies = policy("SchedulingPolicy", Some("team-a"), "rogue", &spec) + &team_b;
        let good = run(LIMITS, &team_b);
        let r = run(LIMITS, &policies);
        assert_eq!(placements(&r, "other"), placements(&good, "other"), "{what}: other tenants noticed");
        assert_eq!(placements(&r, "team-b"), placements(&good, "team-b"), "{what}: team-b noticed");
        let status = r.policies.iter().find(|p| p.policy == "SchedulingPolicy team-a/rogue").expect("rogue's status");
        match refused {
            Some(words) => {
                assert!(!status.ready && status.message.contains(words), "{what}: {status:?}");
                // Refused: team-a's pods are placed as if it had no policy.
                assert_eq!(placements(&r, "team-a"), placements(&good, "team-a"), "{what}");
            }
            None => {
                assert!(status.ready, "{what}: {status:?}");
                // A failing Filter or Score (failurePolicy Fail) fails team-a's pods, and only theirs.
                for (pod, node) in placements(&r, "team-a") {
                    assert_eq!(node, None, "{what}: {pod} placed");
                    assert!(message_of(&r, &pod).contains("team-a/rogue"), "{what}: {}", message_of(&r, &pod));
                }
            }
        }
    }
}

#[test]
fn a_tenant_guest_learns_no_other_namespaces_pod_names() {
    let reg = registry("tenancy-peek");
    let host = &reg.host;
    let bound = "apiVersion: v1\nkind: Pod\nmetadata: {name: payroll-db, namespace: other, labels: {app: payroll}}\nspec: {nodeName: node-4, containers: [{name: c, image: registry.example/payroll:1}]}\n---\n";
    let spec =
        format!("  component: oci://{host}/policies/hostile-peek:1\n  points: [Filter]\n  config: {{mode: peek}}\n");
    let r = run(LIMITS, &(policy("SchedulingPolicy", Some("team-a"), "peek", &spec) + bound));
    let msg = message_of(&r, "team-a/p1");
    // Its own namespace's pods by name; everyone else's only as anonymous usage.
    assert!(msg.contains("team-a/p1") && msg.contains("team-a/p2"), "{msg}");
    assert!(msg.contains("?/?:anonymous-"), "{msg}");
    for secret in ["payroll", "other/", "team-b/", "registry.example"] {
        assert!(!msg.contains(secret), "{secret} leaked: {msg}");
    }
    // The platform's own policy (cluster-wide) sees the cluster whole.
    let spec = format!("{spec}  namespaceSelector: {{matchLabels: {{tier: team-a}}}}\n");
    let r = run(LIMITS, &(policy("ClusterSchedulingPolicy", None, "platform-peek", &spec) + bound));
    assert!(message_of(&r, "team-a/p1").contains("other/payroll-db"), "{}", message_of(&r, "team-a/p1"));
}

#[test]
fn namespaced_policies_wait_for_the_platform_and_their_count_is_capped() {
    let reg = registry("tenancy-limits");
    let host = &reg.host;
    let spec = format!(
        "  component: oci://{host}/policies/drain-guard:1\n  points: [Filter]\n  config: {{nodes: [node-1]}}\n"
    );
    // No `namespaced` in the args: refused, the object as a whole.
    let r = run("      allowedSources: []\n", &policy("SchedulingPolicy", Some("team-a"), "p", &spec));
    assert!(!r.policies[0].ready && r.policies[0].message.contains("does not accept namespaced"), "{:?}", r.policies);
    // Two allowed per namespace: the third (in name order) is refused, the others serve.
    let three: String = ["a", "b", "c"].iter().map(|n| policy("SchedulingPolicy", Some("team-a"), n, &spec)).collect();
    let r = run("      namespaced: {maxPoliciesPerNamespace: 2}\n", &three);
    let ready: Vec<bool> = r.policies.iter().map(|p| p.ready).collect();
    assert_eq!(ready, [true, true, false], "{:?}", r.policies);
    assert!(r.policies[2].message.contains("maxPoliciesPerNamespace 2"), "{:?}", r.policies[2]);
    // A source the platform does not list.
    let r = run(
        "      namespaced: {}\n      allowedSources: [\"oci://registry.example/policies/\"]\n",
        &policy("SchedulingPolicy", Some("team-a"), "p", &spec),
    );
    assert!(r.policies[0].message.contains("is not from a source this profile accepts"), "{:?}", r.policies);
}

/// Pods of a coscheduling gang in `ns` requesting `cpu` each (labels as the coscheduling guest reads them).
fn gang(ns: &str, group: &str, size: usize, min: usize, cpu: &str) -> String {
    (1..=size)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {group}-{i}, namespace: {ns}, labels: {{pod-group.scheduling.sigs.k8s.io/name: {group}, pod-group.scheduling.sigs.k8s.io/min-available: \"{min}\"}}}}\nspec: {{schedulerName: kws, containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]}}\n---\n"
            )
        })
        .collect()
}

#[test]
fn a_tenant_gang_is_held_and_released_only_within_its_namespace() {
    let reg = registry("tenancy-gang");
    let host = &reg.host;
    let spec = format!(
        "  component: oci://{host}/policies/coscheduling:1\n  points: [PreFilter, Reserve, Permit]\n  config: {{permitWaitingTimeSeconds: 1}}\n"
    );
    let gangs = || {
        // team-b's pods carry gang labels (a gang short of a member) but no policy of theirs reads them; they come
        // first, so both runs place them in the same state. team-a: g fits whole (3 of 1 CPU); big cannot (5 pods
        // of 3 CPU, 4 nodes with room for one each); short has fewer members than it needs.
        gang("team-b", "g", 2, 3, "1")
            + &gang("team-a", "g", 3, 3, "1")
            + &gang("team-a", "big", 5, 5, "3")
            + &gang("team-a", "short", 2, 3, "1")
    };
    // No CPU budget here: a gang that cannot fit is retried many times, and its guest time (long in a debug build)
    // is not what this test is about.
    let limits = "      namespaced: {maxWeight: 10, maxTimeout: 200ms, cpuBudget: 0s}\n";
    let without = run(limits, &gangs());
    let with = run(limits, &(gangs() + &policy("SchedulingPolicy", Some("team-a"), "gang", &spec)));
    assert!(with.policies.iter().all(|p| p.ready), "{:?}", with.policies);
    let placed = |r: &Report, pod: &str| r.placements.iter().find(|p| p.pod == pod).and_then(|p| p.node.clone());
    // The whole gang binds: each member waited under the policy's own name and was allowed by its guest.
    for i in 1..=3 {
        assert!(
            placed(&with, &format!("team-a/g-{i}")).is_some(),
            "g-{i}: {}",
            message_of(&with, &format!("team-a/g-{i}"))
        );
    }
    // A gang that cannot fit whole holds its nodes only until its wait ends, then none of it binds; without the
    // policy four of it would.
    for i in 1..=5 {
        assert_eq!(placed(&with, &format!("team-a/big-{i}")), None, "big-{i}");
    }
    assert_eq!((1..=5).filter(|i| placed(&without, &format!("team-a/big-{i}")).is_some()).count(), 4);
    let msg = message_of(&with, "team-a/short-1");
    assert!(msg.contains("cannot find enough sibling pods") && msg.contains("podGroup: team-a/short"), "{msg}");
    // A member of the gang that cannot fit was held at Permit under the policy's own name.
    let msg = message_of(&with, "team-a/big-1");
    assert!(msg.contains("at plugin team-a/gang") || msg.contains("PodGroup team-a/big"), "{msg}");
    // Nobody else is held: team-b's look-alike gang and the other namespaces place as without the policy.
    for ns in ["team-b", "other"] {
        assert_eq!(placements(&with, ns), placements(&without, ns), "{ns}");
    }
    assert!(placements(&with, "team-b").iter().all(|(_, n)| n.is_some()), "{:?}", placements(&with, "team-b"));
}

#[test]
fn a_tenant_over_its_cpu_budget_fails_only_its_own_pods() {
    let reg = registry("tenancy-budget");
    let host = &reg.host;
    // Each call runs to its 100ms deadline; the namespace may spend 80ms a minute, so after the first call team-a's
    // policy is not called again and its pods fail for the budget, not for the guest.
    let limits = "      namespaced: {maxWeight: 10, maxTimeout: 200ms, cpuBudget: 80ms}\n";
    let rogue = format!(
        "  component: oci://{host}/policies/hostile:1\n  points: [Filter]\n  config: {{mode: loop}}\n  timeout: 100ms\n"
    );
    let team_b =
        team_policies(host).split("---\n").filter(|d| !d.contains("avoid-top")).collect::<Vec<_>>().join("---\n");
    let good = run(limits, &team_b);
    let r = run(limits, &(policy("SchedulingPolicy", Some("team-a"), "rogue", &rogue) + &team_b));
    for ns in ["team-b", "other"] {
        assert_eq!(placements(&r, ns), placements(&good, ns), "{ns} noticed");
    }
    let team_a = placements(&r, "team-a");
    assert!(team_a.iter().all(|(_, n)| n.is_none()), "{team_a:?}");
    let over: Vec<String> = team_a
        .iter()
        .map(|(p, _)| message_of(&r, p))
        .filter(|m| m.contains("tenant policy team-a/rogue is over its namespace's CPU budget"))
        .collect();
    assert!(!over.is_empty(), "{:?}", team_a.iter().map(|(p, _)| message_of(&r, p)).collect::<Vec<_>>());
}

#[test]
fn a_tenant_component_signed_by_any_accepted_key_loads_and_others_are_refused() {
    let reg = registry("tenancy-keys");
    let dir = std::env::temp_dir().join(format!("kws-tenancy-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keys: Vec<_> = ["team-a", "team-b", "stranger"].iter().map(|n| crate::delivery::cosign_key(&dir, n)).collect();
    // Each namespace's component in a repository of its own, signed with its own key; the stranger's key is not
    // one the platform lists.
    let mut policies = String::new();
    for (ns, key) in ["team-a", "team-b", "other"].iter().zip(&keys) {
        let tag = format!("oci://{}/policies/{ns}-guard:1", reg.host);
        let digest = push(&guest("drain-guard"), &tag);
        crate::delivery::cosign_sign(&tag, &digest, key);
        let spec = format!("  component: {tag}\n  points: [Filter]\n  config: {{nodes: [node-1]}}\n");
        policies += &policy("SchedulingPolicy", Some(ns), "guard", &spec);
    }
    let limits = format!(
        "      namespaced: {{}}\n      signatureKeys: [{}, {}]\n",
        keys[0].public_pem.display(),
        keys[1].public_pem.display()
    );
    let r = run(&limits, &policies);
    let status = |ns: &str| r.policies.iter().find(|p| p.policy == format!("SchedulingPolicy {ns}/guard")).unwrap();
    assert!(status("team-a").ready && status("team-b").ready, "{:?}", r.policies);
    assert!(!status("other").ready && status("other").message.contains("signature refused"), "{:?}", status("other"));
    let _ = std::fs::remove_dir_all(&dir);
}
