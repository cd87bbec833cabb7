//! Policies beyond Filter and Score written as guests, run by the simulator: gang scheduling (the coscheduling
//! guest: QueueSort, PreFilter, PostFilter, Permit that waits and is released by a sibling, Unreserve) and
//! per-namespace quotas with borrowing (the capacity-quota guest: PreFilter over the pod view).

use crate::util::*;
use crate::wasm::{guest, registry_for};

pub(crate) const GROUP: &str = "pod-group.scheduling.sigs.k8s.io/name";
pub(crate) const MIN: &str = "pod-group.scheduling.sigs.k8s.io/min-available";

/// The default profile with the coscheduling guest at every point it serves (PrioritySort replaced), and the
/// capacity-quota guest when `quotas` (its JSON config) is given.
fn profile(quotas: Option<&str>) -> String {
    let mut enabled = "[{name: Coscheduling}".to_string();
    let mut config = format!(
        "  - name: Coscheduling\n    args:\n      component: {}\n      config: {{permitWaitingTimeSeconds: 2}}\n",
        guest("coscheduling").display()
    );
    if let Some(q) = quotas {
        enabled += ", {name: CapacityQuota}";
        config += &format!(
            "  - name: CapacityQuota\n    args:\n      component: {}\n      config: {q}\n",
            guest("capacity-quota").display()
        );
    }
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: {enabled}]\n      disabled: [{{name: PrioritySort}}]\n  pluginConfig:\n{config}"
    )
}

/// `count` nodes with room for `per_node` 1-CPU pods each.
pub(crate) fn nodes(count: usize, per_node: usize) -> String {
    (0..count)
        .map(|i| format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}}}\nstatus:\n  allocatable: {{cpu: '{per_node}', memory: 64Gi, pods: '110'}}\n---\n"))
        .collect()
}

/// A pending pod requesting `cpu`, in `ns`, in gang `group` of `min` when given.
pub(crate) fn pod(ns: &str, name: &str, cpu: &str, gang: Option<(&str, usize)>) -> String {
    let labels = gang.map_or(String::new(), |(g, min)| format!("\n  labels: {{{GROUP}: {g}, {MIN}: '{min}'}}"));
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}{labels}\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]\n---\n")
}

pub(crate) fn gang(group: &str, size: usize, min: usize) -> String {
    (1..=size).map(|i| pod("default", &format!("{group}-{i}"), "1", Some((group, min)))).collect()
}

fn run(profile: &str, cluster: &str) -> kube_wasm_scheduler::sim::Report {
    let (reg, cfg) = registry_for(profile);
    simulate(&reg, &cfg, cluster, 1, &[])
}

pub(crate) fn bound(r: &kube_wasm_scheduler::sim::Report) -> Vec<String> {
    let mut v: Vec<String> = r.placements.iter().filter(|p| p.node.is_some()).map(|p| p.pod.clone()).collect();
    v.sort();
    v
}

#[test]
fn a_gang_of_four_with_room_for_three_stays_pending_and_every_member_says_which_group() {
    let r = run(&profile(None), &(nodes(3, 1) + &gang("g", 4, 4)));
    assert_eq!(bound(&r), Vec::<String>::new(), "no member binds while the group cannot be whole");
    for i in 1..=4 {
        let msg = message_of(&r, &format!("default/g-{i}"));
        assert!(msg.contains("PodGroup default/g"), "g-{i}: {msg}");
    }
}

#[test]
fn a_gang_of_four_with_room_for_four_binds_together() {
    let r = run(&profile(None), &(nodes(2, 2) + &gang("g", 4, 4)));
    assert_eq!(bound(&r), ["default/g-1", "default/g-2", "default/g-3", "default/g-4"]);
}

#[test]
fn a_gang_short_of_members_is_refused_at_pre_filter_naming_the_group() {
    let r = run(&profile(None), &(nodes(2, 2) + &gang("g", 3, 4)));
    assert_eq!(bound(&r), Vec::<String>::new());
    let msg = message_of(&r, "default/g-1");
    assert!(
        msg.contains("cannot find enough sibling pods, current pods number: 3, minMember: 4, podGroup: default/g"),
        "{msg}"
    );
}

#[test]
fn the_queue_keeps_a_gang_together_ahead_of_a_lone_pod_that_arrived_between_its_members() {
    // Room for three: the gang's members arrive first, second and fourth, the lone pod third. In arrival order the
    // lone pod would take a place the gang needs and leave the gang short for good; QueueSort keeps the group
    // together by the time its first member was seen, so the gang binds and the lone pod waits.
    let cluster = nodes(3, 1)
        + &pod("default", "g-1", "1", Some(("g", 3)))
        + &pod("default", "g-2", "1", Some(("g", 3)))
        + &pod("default", "lone", "1", None)
        + &pod("default", "g-3", "1", Some(("g", 3)));
    let r = run(&profile(None), &cluster);
    assert_eq!(bound(&r), ["default/g-1", "default/g-2", "default/g-3"]);
    assert_eq!(node_of(&r, "default/lone"), None);

    // The same pods with the default QueueSort: the lone pod goes third and the gang never completes.
    let fifo = profile(None).replace("      disabled: [{name: PrioritySort}]\n", "").replace(
        "multiPoint:\n",
        "queueSort:\n      enabled: [{name: PrioritySort}]\n      disabled: [{name: '*'}]\n    multiPoint:\n",
    );
    let r = run(&fifo, &cluster);
    assert_eq!(bound(&r), ["default/lone"], "arrival order strands the gang");
}

const QUOTAS: &str = r#"{"quotas": {"team-a": {"min": {"cpu": "1"}, "max": {"cpu": "3"}}, "team-b": {"min": {"cpu": "2"}, "max": {"cpu": "2"}}, "team-c": {"min": {"cpu": "1"}, "max": {"cpu": "1"}}}}"#;

#[test]
fn a_quota_admits_within_min_borrows_unused_min_and_refuses_beyond_max() {
    // team-b and team-c use nothing: team-a may borrow their 3 CPUs of min up to its max of 3.
    let cluster = nodes(4, 4)
        + &pod("team-a", "a-within", "1", None)
        + &pod("team-a", "a-borrow", "2", None)
        + &pod("team-a", "a-beyond", "1", None)
        + &pod("other", "free", "3", None);
    let r = run(&profile(Some(QUOTAS)), &cluster);
    assert!(node_of(&r, "team-a/a-within").is_some());
    assert!(node_of(&r, "team-a/a-borrow").is_some(), "{}", message_of(&r, "team-a/a-borrow"));
    assert_eq!(node_of(&r, "team-a/a-beyond"), None);
    let msg = message_of(&r, "team-a/a-beyond");
    assert!(
        msg.starts_with("0/4 nodes are available: namespace team-a: cpu quota exceeded: used 3 + request 1 > max 3."),
        "{msg}"
    );
    assert!(node_of(&r, "other/free").is_some(), "a namespace without a quota is not limited");
}

#[test]
fn a_quota_refuses_to_borrow_when_no_namespace_has_min_to_lend() {
    // team-b uses its whole min; team-c lends 1 CPU; team-a asks for 2 CPUs over its min of 1.
    let cluster = nodes(4, 4)
        + &pod("team-b", "b", "2", None)
        + &pod("team-a", "a-small", "1", None)
        + &pod("team-a", "a-big", "2", None);
    let r = run(&profile(Some(QUOTAS)), &cluster);
    assert!(node_of(&r, "team-b/b").is_some());
    assert!(node_of(&r, "team-a/a-small").is_some());
    assert_eq!(node_of(&r, "team-a/a-big"), None);
    let msg = message_of(&r, "team-a/a-big");
    assert!(msg.contains("namespace team-a: cannot borrow cpu: used 1 + request 2 > min 1"), "{msg}");
}

#[test]
fn a_quota_frees_what_a_pod_held_once_it_is_unreserved() {
    // team-c may use 1 CPU. Gang g (two pods of team-c, min-available 2) first: g-1 is reserved (its CPU counts),
    // g-2 is over the quota, so coscheduling's PostFilter rejects the waiting g-1 and Unreserve runs. The lone pod
    // `solo` of team-c, which arrived after both, then fits the quota only because g-1's CPU was released.
    let cluster = nodes(2, 4)
        + &pod("team-c", "g-1", "1", Some(("g", 2)))
        + &pod("team-c", "g-2", "1", Some(("g", 2)))
        + &pod("team-c", "solo", "1", None);
    let r = run(&profile(Some(QUOTAS)), &cluster);
    assert_eq!(bound(&r), ["team-c/solo"], "{:#?}", r.placements);
    let msg = message_of(&r, "team-c/g-1");
    assert!(msg.contains("cpu quota exceeded") || msg.contains("PodGroup team-c/g"), "{msg}");
}
