//! The profile runner's rules, proved with test plugins through the real cycle (simulator, memory cluster).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube_wasm_scheduler::framework::*;

use crate::util::*;

fn log() -> CallLog {
    Default::default()
}

#[test]
fn pre_filter_result_narrows_nodes_and_skip_skips_the_filter() {
    let l = log();
    let mut narrow = TestPlugin::new("Narrow", &l);
    narrow.pre_filter = Some(Arc::new(|_| (Some(set(&["n2"])), Status::success())));
    let mut skipper = TestPlugin::new("Skipper", &l);
    skipper.pre_filter = Some(Arc::new(|_| (None, Status::skip())));
    skipper.filter = Some(Arc::new(|_, _| Status::unschedulable("never called")));
    let mut counter = TestPlugin::new("Counter", &l);
    counter.filter = Some(Arc::new(|_, _| Status::success()));
    let reg = registry_with(vec![narrow, skipper, counter]);
    let cfg = config(&reg, &profile("    preFilter:\n      enabled: [{name: Narrow}, {name: Skipper}]\n    filter:\n      enabled: [{name: Skipper}, {name: Counter}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(3) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n2"));
    let calls = take(&l);
    assert!(calls.contains(&"Counter.filter(n2)".to_string()), "{calls:?}");
    assert!(!calls.iter().any(|c| c.starts_with("Skipper.filter")), "skipped filter ran: {calls:?}");
    assert!(
        !calls.iter().any(|c| c == "Counter.filter(n0)" || c == "Counter.filter(n1)"),
        "narrowed-out node filtered: {calls:?}"
    );
}

#[test]
fn pre_filter_disjoint_results_reject_the_pod_naming_both_plugins() {
    let l = log();
    let mut a = TestPlugin::new("A", &l);
    a.pre_filter = Some(Arc::new(|_| (Some(set(&["n0"])), Status::success())));
    let mut b = TestPlugin::new("B", &l);
    b.pre_filter = Some(Arc::new(|_| (Some(set(&["n1"])), Status::success())));
    let reg = registry_with(vec![a, b]);
    let cfg = config(&reg, &profile("    preFilter:\n      enabled: [{name: A}, {name: B}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(2) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(
        message_of(&r, "default/p"),
        "0/2 nodes are available: node(s) didn't satisfy plugin(s) [A B] simultaneously."
    );
}

#[test]
fn filter_stops_after_enough_feasible_nodes_and_rotates_the_start() {
    let l = log();
    let mut f = TestPlugin::new("Count", &l);
    f.filter = Some(Arc::new(|_, _| Status::success()));
    let reg = registry_with(vec![f]);
    let cfg = config(&reg, &profile("    filter:\n      enabled: [{name: Count}]\n"));
    // 1,000 nodes: adaptive percentage 50 - 1000/125 = 42%, so 420 nodes are enough.
    let cluster = nodes_yaml(1000) + &pod_yaml("a", "") + &pod_yaml("b", "");
    let r = simulate(&reg, &cfg, &cluster, 0, &["default/a", "default/b"]);
    let ta = &r.explain[0].trace;
    let tb = &r.explain[1].trace;
    assert_eq!(ta.filter.len(), 420);
    assert_eq!(ta.not_evaluated, 580);
    assert_eq!(ta.filter[0].0, "n0");
    let first: std::collections::HashSet<&String> = ta.filter.iter().map(|(n, _)| n).collect();
    assert_eq!(tb.filter.len(), 420);
    assert!(tb.filter.iter().all(|(n, _)| !first.contains(n)), "the next cycle starts where the last one stopped");
    let filtered = take(&l).iter().filter(|c| c.starts_with("Count.filter")).count();
    assert!((840..1000).contains(&filtered), "filter calls {filtered}");
}

#[test]
fn percentage_of_nodes_to_score_100_evaluates_every_node_and_small_clusters_are_always_whole() {
    let mut f = TestPlugin::new("All", &log());
    f.filter = Some(Arc::new(|_, _| Status::success()));
    let reg = registry_with(vec![f]);
    let mut yaml = profile("    filter:\n      enabled: [{name: All}]\n");
    yaml = yaml.replace("profiles:\n", "percentageOfNodesToScore: 100\nprofiles:\n");
    let cfg = config(&reg, &yaml);
    let r = simulate(&reg, &cfg, &(nodes_yaml(300) + &pod_yaml("p", "")), 0, &["default/p"]);
    assert_eq!(r.explain[0].trace.filter.len(), 300);
    let cfg = config(&reg, &profile("    filter:\n      enabled: [{name: All}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(99) + &pod_yaml("p", "")), 0, &["default/p"]);
    assert_eq!(r.explain[0].trace.filter.len(), 99, "below 100 nodes all are evaluated");
}

#[test]
fn post_filter_runs_only_when_nothing_fits_and_its_message_is_appended() {
    let l = log();
    let mut f = TestPlugin::new("OnlyN1", &l);
    f.filter = Some(Arc::new(|p, n| {
        if p.name == "fits" && n.name == "n1" {
            Status::success()
        } else {
            Status::unschedulable("node(s) are not n1")
        }
    }));
    let mut pf = TestPlugin::new("Post", &l);
    pf.post_filter = Some(Arc::new(|_| Status::unschedulable("nothing to preempt")));
    let reg = registry_with(vec![f, pf]);
    let cfg = config(
        &reg,
        &profile("    filter:\n      enabled: [{name: OnlyN1}]\n    postFilter:\n      enabled: [{name: Post}]\n"),
    );
    let r = simulate(&reg, &cfg, &(nodes_yaml(3) + &pod_yaml("fits", "") + &pod_yaml("nope", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/fits").as_deref(), Some("n1"));
    let posts: Vec<String> = take(&l).into_iter().filter(|c| c == "Post.postFilter").collect();
    assert_eq!(posts.len(), 1, "PostFilter ran for the pod that did not fit only");
    // As kube-scheduler v1.34's FitError: the PostFilter message follows the reasons as it is, no period added.
    assert_eq!(message_of(&r, "default/nope"), "0/3 nodes are available: 3 node(s) are not n1. nothing to preempt");
}

#[test]
fn unschedulable_message_counts_and_sorts_reasons() {
    let mut f = TestPlugin::new("Mixed", &log());
    f.filter = Some(Arc::new(|_, n| match n.name.as_str() {
        "n0" => Status::unschedulable("Insufficient cpu"),
        _ => Status::unresolvable("node(s) had untolerated taint {dedicated: gpu}"),
    }));
    let reg = registry_with(vec![f]);
    let cfg = config(&reg, &profile("    filter:\n      enabled: [{name: Mixed}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(3) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(
        message_of(&r, "default/p"),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}."
    );
}

#[test]
fn pre_score_skip_skips_score_and_weights_decide_the_winner() {
    let l = log();
    let mut skipped = TestPlugin::new("Skipped", &l);
    skipped.pre_score = Some(Arc::new(|_| Status::skip()));
    skipped.score = Some(Arc::new(|_, _| Ok(100)));
    let mut likes_n0 = TestPlugin::new("LikesN0", &l);
    likes_n0.score = Some(Arc::new(|_, n| Ok(if n.name == "n0" { 60 } else { 0 })));
    let mut likes_n1 = TestPlugin::new("LikesN1", &l);
    likes_n1.score = Some(Arc::new(|_, n| Ok(if n.name == "n1" { 40 } else { 0 })));
    let reg = registry_with(vec![skipped, likes_n0, likes_n1]);
    // 60×1 < 40×2: weight makes n1 win.
    let cfg = config(&reg, &profile("    preScore:\n      enabled: [{name: Skipped}]\n    score:\n      enabled: [{name: Skipped}, {name: LikesN0, weight: 1}, {name: LikesN1, weight: 2}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(2) + &pod_yaml("p", "")), 0, &["default/p"]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n1"));
    assert!(!take(&l).iter().any(|c| c.starts_with("Skipped.score")));
    let t = &r.explain[0].trace;
    assert_eq!(t.totals.iter().find(|(n, _)| n == "n1").unwrap().1, 80);
    let n1 = t.scores.iter().find(|s| s.plugin == "LikesN1").unwrap();
    assert_eq!(n1.weight, 2);
    assert!(n1.nodes.iter().any(|(n, raw, norm, w)| n == "n1" && *raw == 40 && *norm == 40 && *w == 80));
}

#[test]
fn a_score_outside_0_to_100_is_an_error_naming_the_plugin() {
    let mut bad = TestPlugin::new("TooHigh", &log());
    bad.score = Some(Arc::new(|_, _| Ok(1000)));
    let reg = registry_with(vec![bad]);
    let cfg = config(&reg, &profile("    score:\n      enabled: [{name: TooHigh}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(2) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/p"), None);
    let m = message_of(&r, "default/p");
    assert!(m.contains("plugin \"TooHigh\" returns an invalid score 1000"), "{m}");
}

/// kube-scheduler v1.36 on draws no random tie-breaker unless an extender scored the node: between equal totals the
/// node Go's heap keeps on top wins, so every tie goes the same way whatever the seed (v1.34 drew one at random).
#[test]
fn ties_go_the_same_way_whatever_the_seed() {
    let mut flat = TestPlugin::new("Flat", &log());
    flat.score = Some(Arc::new(|_, _| Ok(50)));
    let reg = registry_with(vec![flat]);
    let cfg = config(&reg, &profile("    score:\n      enabled: [{name: Flat}]\n"));
    let cluster = nodes_yaml(4) + &(0..40).map(|i| pod_yaml(&format!("p{i}"), "")).collect::<String>();
    let a = simulate(&reg, &cfg, &cluster, 1, &[]);
    let b = simulate(&reg, &cfg, &cluster, 2, &[]);
    assert_eq!(a.placements, b.placements, "another seed, the same placements");
    let used: std::collections::HashSet<_> = a.placements.iter().filter_map(|p| p.node.clone()).collect();
    assert_eq!(used.len(), 1, "every tie is won by the node on top of the heap: {used:?}");
}

#[test]
fn reserve_failure_unreserves_every_reserve_plugin_in_reverse_order_and_requeues() {
    let l = log();
    let mut r1 = TestPlugin::new("R1", &l);
    r1.reserve = Some(Arc::new(|_, _| Status::success()));
    let mut r2 = TestPlugin::new("R2", &l);
    r2.reserve = Some(Arc::new(|_, _| Status::unschedulable("no room in the ledger")));
    let reg = registry_with(vec![r1, r2]);
    let cfg = config(&reg, &profile("    reserve:\n      enabled: [{name: R1}, {name: R2}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(1) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/p"), None);
    // Upstream reports a rejection at Reserve as a FitError over the node the pod was assumed on.
    assert_eq!(message_of(&r, "default/p"), "0/1 nodes are available: 1 no room in the ledger.");
    let calls = take(&l);
    assert_eq!(calls[..4], ["R1.reserve", "R2.reserve", "R2.unreserve", "R1.unreserve"]);
}

#[test]
fn permit_wait_is_released_by_allow_and_times_out_otherwise() {
    let l = log();
    // The profile's framework, once built: `slow`'s Permit allows `allowed`, as a gang's last member releases the
    // members waiting for it.
    let fwk: Arc<std::sync::OnceLock<Arc<Framework>>> = Arc::default();
    let released = Arc::new(AtomicUsize::new(0));
    let (f, r) = (fwk.clone(), released.clone());
    let mut p = TestPlugin::new("Gate", &l);
    p.permit = Some(Arc::new(move |pod, _| match pod.name.as_str() {
        "quick" => (Status::success(), Duration::ZERO),
        "allowed" => (Status::code_only(Code::Wait), Duration::from_secs(30)),
        _ => {
            if let Some(wp) = f.get().and_then(|f| f.get_waiting_pod("default/allowed")) {
                wp.allow("Gate");
                r.fetch_add(1, Ordering::SeqCst);
            }
            (Status::code_only(Code::Wait), Duration::from_millis(50))
        }
    }));
    let mut res = TestPlugin::new("Res", &l);
    res.reserve = Some(Arc::new(|_, _| Status::success()));
    let reg = registry_with(vec![p, res]);
    let cfg = config(
        &reg,
        &profile("    permit:\n      enabled: [{name: Gate}]\n    reserve:\n      enabled: [{name: Res}]\n"),
    );
    let cluster = nodes_yaml(1) + &pod_yaml("quick", "") + &pod_yaml("allowed", "") + &pod_yaml("slow", "");
    let file = kube_wasm_scheduler::sim::load::parse("c.yaml", &cluster).unwrap();
    let sim = kube_wasm_scheduler::sim::Simulation::new(&cfg, &reg, &file, &Default::default()).unwrap();
    let _ = fwk.set(sim.scheduler().profiles.get("default-scheduler").unwrap().clone());
    let rep = sim.run();
    assert_eq!(released.load(Ordering::SeqCst), 1, "the pod waited at Permit when slow's Permit ran");
    assert_eq!(node_of(&rep, "default/quick").as_deref(), Some("n0"));
    assert_eq!(node_of(&rep, "default/allowed").as_deref(), Some("n0"), "allowed within its 30s wait");
    assert_eq!(node_of(&rep, "default/slow"), None);
    assert!(message_of(&rep, "default/slow").contains("rejected due to timeout after waiting 50ms at plugin Gate"));
    // Each timeout unreserves once. The allowed pod's bind while `slow` waited earns `slow` one retry; its own
    // failure must not: no retry loop.
    let slow = rep.placements.iter().find(|p| p.pod == "default/slow").unwrap();
    assert!(slow.attempts <= 2, "slow retried {} times", slow.attempts);
    assert_eq!(take(&l).iter().filter(|c| *c == "Res.unreserve").count(), slow.attempts as usize);
}

#[test]
fn a_pre_bind_failure_unwinds_and_the_pod_is_retried() {
    let l = log();
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let mut pb = TestPlugin::new("Volumes", &l);
    pb.pre_bind = Some(Arc::new(move |_, _| {
        if t.fetch_add(1, Ordering::SeqCst) == 0 {
            Status::error("volume not attached yet")
        } else {
            Status::success()
        }
    }));
    let mut res = TestPlugin::new("Res", &l);
    res.reserve = Some(Arc::new(|_, _| Status::success()));
    let reg = registry_with(vec![pb, res]);
    let cfg = config(
        &reg,
        &profile("    preBind:\n      enabled: [{name: Volumes}]\n    reserve:\n      enabled: [{name: Res}]\n"),
    );
    let r = simulate(&reg, &cfg, &(nodes_yaml(1) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n0"));
    assert_eq!(r.placements[0].attempts, 2);
    let calls = take(&l);
    assert_eq!(calls[..3], ["Res.reserve", "Volumes.preBind", "Res.unreserve"]);
    assert_eq!(tries.load(Ordering::SeqCst), 2);
}

#[test]
fn bind_skip_passes_to_the_next_binder_and_post_bind_runs() {
    let l = log();
    let mut skip = TestPlugin::new("SkipBinder", &l);
    skip.bind = Some(Arc::new(|_, _| Status::skip()));
    let mut pb = TestPlugin::new("After", &l);
    pb.post_bind = true;
    let reg = registry_with(vec![skip, pb]);
    let yaml = profile("    postBind:\n      enabled: [{name: After}]\n")
        .replace("enabled: [{name: DefaultBinder}]", "enabled: [{name: SkipBinder}, {name: DefaultBinder}]");
    let cfg = config(&reg, &yaml);
    let r = simulate(&reg, &cfg, &(nodes_yaml(1) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n0"));
    let calls = take(&l);
    assert_eq!(calls, ["SkipBinder.bind(n0)", "After.postBind(n0)"]);
}

#[test]
fn a_bind_error_unwinds_and_the_pod_is_retried_with_backoff() {
    let l = log();
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let mut flaky = TestPlugin::new("Flaky", &l);
    flaky.bind = Some(Arc::new(move |_, _| {
        if t.fetch_add(1, Ordering::SeqCst) == 0 {
            Status::error("apiserver said no")
        } else {
            Status::skip()
        }
    }));
    let mut res = TestPlugin::new("Res", &l);
    res.reserve = Some(Arc::new(|_, _| Status::success()));
    let reg = registry_with(vec![flaky, res]);
    let yaml = profile("    reserve:\n      enabled: [{name: Res}]\n")
        .replace("enabled: [{name: DefaultBinder}]", "enabled: [{name: Flaky}, {name: DefaultBinder}]");
    let cfg = config(&reg, &yaml);
    let r = simulate(&reg, &cfg, &(nodes_yaml(1) + &pod_yaml("p", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n0"));
    assert_eq!(r.placements[0].attempts, 2);
    assert!(take(&l).contains(&"Res.unreserve".to_string()));
}

#[test]
fn pre_enqueue_gates_keep_a_pod_out_of_the_queue() {
    let mut gate = TestPlugin::new("Gate", &log());
    gate.pre_enqueue =
        Some(Arc::new(|p| if p.name == "gated" { Status::unresolvable("waiting") } else { Status::success() }));
    let reg = registry_with(vec![gate]);
    let cfg = config(&reg, &profile("    preEnqueue:\n      enabled: [{name: Gate}]\n"));
    let r = simulate(&reg, &cfg, &(nodes_yaml(1) + &pod_yaml("gated", "") + &pod_yaml("free", "")), 0, &[]);
    assert_eq!(node_of(&r, "default/free").as_deref(), Some("n0"));
    // Never attempted: listed pending at the end with the gate's message, no attempt counted.
    let gated = r.placements.iter().find(|p| p.pod == "default/gated").expect("a gated pod is listed as pending");
    assert_eq!((gated.node.as_deref(), gated.attempts, gated.message.as_str()), (None, 0, "waiting"));
}

/// PreBind as v1.37 runs it: neighbours that allow it run at once, a plugin that does not splits them; a rejection
/// is answered as it is, naming its plugin (an error is wrapped and named).
#[test]
fn pre_bind_runs_neighbours_that_allow_it_at_once() {
    let run = |order: &[&str], reject: Option<&'static str>| {
        let l = log();
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let plugin = |name: &str, parallel: bool| {
            let mut p = TestPlugin::new(name, &l);
            p.pre_bind_in_parallel = parallel;
            let (r, m, me) = (running.clone(), most.clone(), name.to_string());
            p.pre_bind = Some(Arc::new(move |_, _| {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(150));
                r.fetch_sub(1, Ordering::SeqCst);
                if reject == Some(me.as_str()) {
                    Status::unschedulable("claim not ready")
                } else {
                    Status::success()
                }
            }));
            p
        };
        let reg = registry_with(vec![plugin("VolA", true), plugin("VolB", true), plugin("Serial", false)]);
        let list = order.iter().map(|n| format!("{{name: {n}}}")).collect::<Vec<_>>().join(", ");
        let cfg = config(&reg, &profile(&format!("    preBind:\n      enabled: [{list}]\n")));
        let r = simulate(&reg, &cfg, &(nodes_yaml(1) + &pod_yaml("p", "")), 0, &[]);
        (node_of(&r, "default/p"), most.load(Ordering::SeqCst), message_of(&r, "default/p"), take(&l))
    };
    let (node, most, _, _) = run(&["VolA", "VolB", "Serial"], None);
    assert_eq!((node.as_deref(), most), (Some("n0"), 2), "VolA and VolB ran at once");
    let (node, most, _, calls) = run(&["VolA", "Serial", "VolB"], None);
    assert_eq!((node.as_deref(), most), (Some("n0"), 1), "Serial between them keeps them apart");
    let order: Vec<&String> = calls.iter().filter(|c| c.ends_with(".preBind")).collect();
    assert_eq!(order, ["VolA.preBind", "Serial.preBind", "VolB.preBind"]);
    let (node, _, message, calls) = run(&["VolA", "VolB", "Serial"], Some("VolB"));
    assert_eq!(node, None);
    assert!(message.contains("claim not ready") && !message.contains("running PreBind plugin"), "{message}");
    assert!(!calls.iter().any(|c| c == "Serial.preBind"), "the group's failure stops what follows: {calls:?}");
}
