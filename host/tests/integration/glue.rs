//! The 0.2 additions (the pod view, the waiting pods, events with queueing hints) in the C, Python, JavaScript and
//! Go glue: the same tiny gang written in each language (guest-plugins/gang-c, -py, -js, -go; world gang-plugin),
//! run by the simulator and by the scheduling queue. Each scenario holds only if that language's glue keeps the pods
//! from `pods.apply`, lists, allows and rejects the waiting pods, and declares its events and answers its hint.
//! The scenarios are the Rust coscheduling guest's (gang.rs).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kube_wasm_scheduler::cluster::memory::MemoryCluster;
use kube_wasm_scheduler::framework::*;
use kube_wasm_scheduler::queue::{QueueName, SchedulingQueue};
use kube_wasm_scheduler::scheduler::build_profiles;
use kube_wasm_scheduler::wasm::{WasmArgs, WasmPlugin};

use crate::gang::{bound, gang, nodes, pod, GROUP, MIN};
use crate::util::*;
use crate::wasm::{guest, registry_for};

/// The default profile with the gang guest `component` (plugin Gang) at every point it serves: PreFilter, Reserve,
/// Permit.
fn profile(component: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: Gang}}]\n  pluginConfig:\n  - name: Gang\n    args:\n      component: {}\n",
        guest(component).display()
    )
}

fn run(component: &str, cluster: &str) -> kube_wasm_scheduler::sim::Report {
    let (reg, cfg) = registry_for(&profile(component));
    simulate(&reg, &cfg, cluster, 1, &[])
}

/// Room for all four: the first three wait at Permit until the fourth is assumed, and it allows them. Without the
/// pod view the guest would count nobody placed (every member waits until it times out); without allow-waiting-pod
/// the first three would time out and bind only on later attempts.
fn binds_together(component: &str) {
    let cluster = nodes(3, 2) + &gang("g", 4, 4) + &pod("default", "lone", "1", None);
    let r = run(component, &cluster);
    assert_eq!(
        bound(&r),
        ["default/g-1", "default/g-2", "default/g-3", "default/g-4", "default/lone"],
        "{:#?}",
        r.placements
    );
    // Released by the fourth, not by timing out and trying again (which would bind them too, one by one).
    let retried: Vec<_> = r.placements.iter().filter(|p| p.attempts != 1).collect();
    assert!(retried.is_empty(), "every member binds on its first attempt: {retried:#?}");
}

/// Three pods of a group of four: PreFilter counts them in the pod view and refuses each, naming the group.
fn refused_short_of_members(component: &str) {
    let r = run(component, &(nodes(2, 2) + &gang("g", 3, 4)));
    assert_eq!(bound(&r), Vec::<String>::new());
    for i in 1..=3 {
        let msg = message_of(&r, &format!("default/g-{i}"));
        assert!(
            msg.contains("cannot find enough sibling pods, current pods number: 3, minMember: 4, podGroup: default/g"),
            "g-{i}: {msg}"
        );
    }
}

/// Room for three of four: three members wait at Permit, the fourth fits nowhere; when a waiting member times out,
/// its Unreserve rejects the others (reject-waiting-pod) instead of letting each wait out its own timeout, and none
/// binds.
fn stays_pending_without_room(component: &str) {
    let (reg, cfg) = registry_for(&profile(component));
    let members: Vec<String> = (1..=4).map(|i| format!("default/g-{i}")).collect();
    let explain: Vec<&str> = members.iter().map(String::as_str).collect();
    let r = simulate(&reg, &cfg, &(nodes(3, 1) + &gang("g", 4, 4)), 1, &explain);
    assert_eq!(bound(&r), Vec::<String>::new(), "{:#?}", r.placements);
    let attempts: Vec<String> = r.explain.iter().map(|e| format!("{} #{}: {}", e.pod, e.attempt, e.result)).collect();
    let timed_out =
        attempts.iter().filter(|a| a.contains("rejected due to timeout after waiting 2s at plugin Gang")).count();
    let released = attempts
        .iter()
        .filter(|a| a.contains("rejection in Unreserve: pod default/g-") && a.contains("of PodGroup default/g left."))
        .count();
    assert!(timed_out >= 1 && released >= 2, "a timeout, then its siblings rejected by Unreserve: {attempts:#?}");
}

fn member(name: &str, ns: &str, group: &str) -> Arc<PodInfo> {
    Arc::new(
        PodInfo::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": ns, "uid": format!("{ns}-{name}"),
                    "labels": {GROUP: group, MIN: "2"}},
                "spec": {"containers": [{"name": "c"}]}
            }))
            .unwrap(),
        )
        .unwrap(),
    )
}

/// The guest's events and hint, asked by the host as the queue does: a pod it rejected moves only on a registered
/// event (a new pending pod) whose hint answers Queue (the pod joins its group).
fn hint_moves_only_on_a_joining_member(component: &str) {
    let args = serde_json::json!({"component": guest(component)});
    let plugin = WasmPlugin::load("Gang", WasmArgs::parse(&args, Path::new("/")).unwrap(), 0).unwrap();
    assert_eq!(
        plugin.events_to_register(),
        [ClusterEvent::new(EventResource::UnscheduledPod, action::ADD | action::UPDATE_LABEL)],
        "the events the guest declared"
    );
    let add = ClusterEvent::new(EventResource::UnscheduledPod, action::ADD);
    let relabel = ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE_LABEL);
    let rejected = member("g-1", "default", "g");
    let obj = |p: Arc<PodInfo>| EventObject::Pod(p);
    let joining = obj(member("g-2", "default", "g"));
    assert_eq!(plugin.queueing_hint(&rejected, &add, None, Some(&joining)), QueueingHint::Queue);
    let other_group = obj(member("h-1", "default", "h"));
    assert_eq!(plugin.queueing_hint(&rejected, &add, None, Some(&other_group)), QueueingHint::QueueSkip);
    let other_namespace = obj(member("g-2", "elsewhere", "g"));
    assert_eq!(plugin.queueing_hint(&rejected, &add, None, Some(&other_namespace)), QueueingHint::QueueSkip);
    // Relabelled into the group: joins; relabelled while already in it: nothing new.
    assert_eq!(plugin.queueing_hint(&rejected, &relabel, Some(&other_group), Some(&joining)), QueueingHint::Queue);
    assert_eq!(plugin.queueing_hint(&rejected, &relabel, Some(&joining), Some(&joining)), QueueingHint::QueueSkip);

    // The same through the scheduling queue.
    let (reg, cfg) = registry_for(&profile(component));
    let ctx = PluginContext::new(Arc::new(MemoryCluster::default()));
    let profiles = Arc::new(build_profiles(&cfg, &reg, &ctx).unwrap());
    let mut q =
        SchedulingQueue::new(profiles.clone(), &profiles.names(), Duration::from_secs(1), Duration::from_secs(1));
    q.add(member("g-1", "default", "g"), 0);
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins = ["Gang".to_string()].into();
    q.add_unschedulable(info, false, 0);
    let unschedulable = |q: &SchedulingQueue| q.pending().get(&QueueName::Unschedulable).copied().unwrap_or(0);
    const SEC: u64 = 1_000_000_000;
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), 5 * SEC);
    assert_eq!(unschedulable(&q), 1, "NodeAdd is not registered");
    q.add(member("h-1", "default", "h"), 5 * SEC);
    assert_eq!(unschedulable(&q), 1, "a pod of group h does not help group g");
    q.add(member("g-2", "default", "g"), 6 * SEC);
    assert_eq!(unschedulable(&q), 0, "a new member of group g retries g-1");
}

/// componentize-js reads only the project's own directory (a link out of it is refused), so gang-js carries a copy
/// of the JavaScript glue: it must be the one `plugin new --lang js` writes.
#[test]
fn the_gang_js_glue_is_the_samples_glue() {
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    assert!(
        read("guest-plugins/gang-js/glue.js") == read("guest-plugins/priority-label-js/glue.js"),
        "guest-plugins/gang-js/glue.js differs from guest-plugins/priority-label-js/glue.js: copy it again"
    );
}

macro_rules! each_language {
    ($($lang:ident => $component:literal),* $(,)?) => {$(
        mod $lang {
            #[test]
            fn a_gang_binds_together_once_the_pod_view_shows_it_whole_and_permit_allows_the_waiting() {
                super::binds_together($component);
            }

            #[test]
            fn a_gang_short_of_members_is_refused_at_pre_filter_by_counting_the_pod_view() {
                super::refused_short_of_members($component);
            }

            #[test]
            fn a_gang_without_room_for_all_stays_pending() {
                super::stays_pending_without_room($component);
            }

            #[test]
            fn a_rejected_member_is_retried_only_when_a_pod_joins_its_group() {
                super::hint_moves_only_on_a_joining_member($component);
            }
        }
    )*};
}

each_language!(c => "gang-c", python => "gang-py", js => "gang-js", go => "gang-go");
