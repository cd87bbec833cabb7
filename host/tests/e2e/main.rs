//! End-to-end tests on a real etcd and kube-apiserver (scripts/control-plane.sh): the scheduler binary runs as a
//! second scheduler and is checked only through the API, as a user would. One test function owns the control
//! plane (started once, always stopped); each scenario runs in its own namespace, and a failing one does not stop
//! the others: the run ends with a summary of every scenario and fails if any did.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

mod backlog;
mod deploy;
mod dra;
mod events;
mod extenders;
mod faults;
mod gang;
mod lease;
#[path = "../common/oci_registry.rs"]
mod oci_registry;
mod parity;
mod serving;
mod shadow;
mod snapshot;
mod suite;
mod tenancy;
mod volumes;
mod workload;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The control plane, stopped when dropped (also when a scenario panics).
struct ControlPlane {
    dir: PathBuf,
}

impl ControlPlane {
    fn up() -> ControlPlane {
        let dir = std::env::temp_dir().join(format!("kws-e2e-{}", std::process::id()));
        let mut cmd = Command::new(root().join("scripts/control-plane.sh"));
        if serves_workload_api() {
            // The Workload API (beta, off by default in v1.37) for the PodGroup scenario; nothing else reads it.
            cmd.env(
                "KWS_APISERVER_FLAGS",
                "--feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1beta1=true",
            );
        }
        let out = cmd.arg("up").arg(&dir).output().expect("control-plane.sh");
        assert!(
            out.status.success(),
            "control plane did not start:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ControlPlane { dir }
    }
    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
    /// The admin's bearer token (group system:masters).
    fn token(&self) -> String {
        let csv = std::fs::read_to_string(self.dir.join("token.csv")).unwrap();
        csv.split(',').next().unwrap().trim().to_string()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // After a failure the logs stay for reading (the servers are stopped either way).
        let purge = !std::thread::panicking();
        let mut cmd = Command::new(root().join("scripts/control-plane.sh"));
        cmd.arg("down").arg(&self.dir);
        if purge {
            cmd.arg("--purge");
        } else {
            eprintln!("e2e: logs kept in {}", self.dir.display());
        }
        let _ = cmd.status();
    }
}

/// Whether the test control plane is v1.37 (`KUBE_VERSION`, default v1.37.2), whose API server serves the Workload
/// API's scheduling.k8s.io/v1beta1 (v1.35 and v1.36 had v1alpha1 only).
fn serves_workload_api() -> bool {
    std::env::var("KUBE_VERSION").map_or(true, |v| v.starts_with("v1.37."))
}

/// A scheduler process, stopped with SIGTERM when dropped; its log goes to a file.
struct Scheduler {
    child: Child,
    log: PathBuf,
}

impl Scheduler {
    fn start(kubeconfig: &Path, config: &Path, port: u16, extra: &[&str], log: PathBuf) -> Scheduler {
        let f = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin())
            .arg("--config")
            .arg(config)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--bind-address", "127.0.0.1", "--secure-port", &port.to_string()])
            .args(extra)
            // Guest plugins' lines at debug level too: RandomScore logs its decisions there.
            .env("KWS_LOG", "info,kube_wasm_scheduler::wasm::output=debug")
            .stdout(Stdio::null())
            .stderr(f)
            .spawn()
            .expect("start the scheduler");
        Scheduler { child, log }
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn term(&mut self) -> Option<i32> {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        None
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.term();
        }
    }
}

/// The scheduler binary: `KWS_E2E_BIN` when set, else the one cargo built. Clones sharing one CARGO_TARGET_DIR
/// overwrite each other's `target/debug/kube-wasm-scheduler`; the copy under `deps/` is this clone's own.
fn bin() -> PathBuf {
    std::env::var_os("KWS_E2E_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_kube-wasm-scheduler").into())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET over HTTPS with curl, the serving certificate not verified (self-signed), with a bearer token if given:
/// the status code and the body.
fn https_get(port: u16, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "--max-time", "10", "-w", "\n%{http_code}"]);
    if let Some(t) = token {
        cmd.arg("-H").arg(format!("Authorization: Bearer {t}"));
    }
    let out = cmd.arg(format!("https://127.0.0.1:{port}{path}")).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n')?;
    let code: u16 = code.trim().parse().ok()?;
    (code != 0).then(|| (code, body.to_string()))
}

/// Sum of a counter's samples whose labels include every `want` pair.
pub(crate) fn counter(metrics: &str, name: &str, want: &[(&str, &str)]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| want.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Kube {
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Kube {
    fn new(kubeconfig: &Path) -> Kube {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = rt.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
            let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
            Client::try_from(cfg).unwrap()
        });
        Kube { rt, client }
    }

    fn namespace(&self, ns: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        self.rt.block_on(api.create(&PostParams::default(), &n)).unwrap();
    }

    fn node(&self, name: &str, labels: serde_json::Value) {
        let api: Api<Node> = Api::all(self.client.clone());
        let n: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        self.rt.block_on(api.create(&PostParams::default(), &n)).unwrap();
        // A Node's status is a subresource: allocatable must be written there, as a kubelet would.
        let status = json!({"status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}, "capacity": {"cpu": "32", "memory": "64Gi", "pods": "110"}}});
        self.rt.block_on(api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))).unwrap();
        // The API server taints new nodes not-ready until a kubelet reports Ready; there is no kubelet here.
        let untaint = json!({"spec": {"taints": []}});
        self.rt.block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(&untaint))).unwrap();
    }

    fn label_node(&self, name: &str, key: &str, value: &str) {
        let api: Api<Node> = Api::all(self.client.clone());
        let p = json!({"metadata": {"labels": {key: value}}});
        self.rt.block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(&p))).unwrap();
    }

    fn pod(&self, ns: &str, name: &str, scheduler: Option<&str>) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let mut spec = json!({"containers": [{"name": "c", "image": "registry.invalid/pause", "resources": {"requests": {"cpu": "10m"}}}]});
        if let Some(s) = scheduler {
            spec["schedulerName"] = json!(s);
        }
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        self.rt.block_on(api.create(&PostParams::default(), &p)).unwrap();
    }

    fn node_of(&self, ns: &str, name: &str) -> Option<String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        self.rt.block_on(api.get(name)).ok()?.spec?.node_name
    }

    fn wait_bound(&self, ns: &str, name: &str) -> String {
        wait_until(&format!("{ns}/{name} bound"), Duration::from_secs(60), || self.node_of(ns, name))
    }

    fn events(&self, ns: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        self.rt.block_on(api.list(&ListParams::default())).map(|l| l.items).unwrap_or_default()
    }

    fn nodes_count(&self) -> usize {
        let api: Api<Node> = Api::all(self.client.clone());
        self.rt.block_on(api.list(&ListParams::default())).map(|l| l.items.len()).unwrap_or(0)
    }

    fn pods(&self, ns: &str) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        self.rt.block_on(api.list(&ListParams::default())).unwrap().items
    }
}

fn write_profile(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\n{body}")).unwrap();
    p
}

fn guest(name: &str) -> PathBuf {
    let p = root().join("guest-plugins/build").join(format!("{name}.wasm"));
    assert!(p.exists(), "{} missing: run `make guests`", p.display());
    p
}

#[test]
fn end_to_end_on_a_real_api_server() {
    let cp = ControlPlane::up();
    let k = Kube::new(&cp.kubeconfig());
    let work = cp.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    type Scenario = fn(&ControlPlane, &Kube, &Path);
    let scenarios: &[(&str, Scenario)] = &[
        ("second_scheduler", second_scheduler),
        ("failed_scheduling_is_one_series", events::failed_scheduling_is_one_series),
        ("secure_serving_and_flags", serving::secure_serving_and_flags),
        (
            "an_anonymous_flood_does_not_spend_the_scheduling_rate_limit",
            serving::an_anonymous_flood_does_not_spend_the_scheduling_rate_limit,
        ),
        (
            "a_renewed_lease_is_not_taken_whatever_its_renew_time",
            lease::a_renewed_lease_is_not_taken_whatever_its_renew_time,
        ),
        ("label_scenario_and_post_bind_log", label_scenario_and_post_bind_log),
        ("gpu_pods_land_where_the_extender_says", extenders::gpu_pods_land_where_the_extender_says),
        ("a_gang_binds_only_when_its_last_member_is_created", gang::a_gang_binds_only_when_its_last_member_is_created),
        ("a_waiting_member_is_nominated_before_it_binds", gang::a_waiting_member_is_nominated_before_it_binds),
        (
            "a_pod_group_is_held_until_min_count_members_exist",
            workload::a_pod_group_is_held_until_min_count_members_exist,
        ),
        ("claims_that_wait_for_their_first_consumer", volumes::claims_that_wait_for_their_first_consumer),
        ("snapshot_then_simulate", snapshot::snapshot_then_simulate),
        ("a_kubectl_dump_is_simulated", snapshot::a_kubectl_dump_is_simulated),
        (
            "an_inverted_shadow_disagrees_on_every_decision_and_never_binds",
            shadow::an_inverted_shadow_disagrees_on_every_decision_and_never_binds,
        ),
        (
            "a_claimed_device_is_allocated_on_the_claim_and_the_pod_bound_to_its_node",
            dra::a_claimed_device_is_allocated_on_the_claim_and_the_pod_bound_to_its_node,
        ),
        (
            "device_taint_rules_tolerations_and_first_available_ranking",
            dra::device_taint_rules_tolerations_and_first_available_ranking,
        ),
        (
            "binding_conditions_hold_the_pod_until_the_device_is_attached",
            dra::binding_conditions_hold_the_pod_until_the_device_is_attached,
        ),
        (
            "an_extended_resource_a_device_class_provides_binds_through_a_claim_the_scheduler_creates",
            dra::an_extended_resource_a_device_class_provides_binds_through_a_claim_the_scheduler_creates,
        ),
        ("leader_election_hands_over", leader_election_hands_over),
        ("tenant_policies_as_kubernetes_objects", tenancy::tenant_policies_as_kubernetes_objects),
        ("thousand_pods_on_a_hundred_nodes", thousand_pods_on_a_hundred_nodes),
        ("backlog_on_few_connections_within_the_rate_limit", backlog::backlog_on_few_connections_within_the_rate_limit),
        ("scheduler_killed_and_restarted_mid_backlog", faults::scheduler_killed_and_restarted_mid_backlog),
        ("leader_killed_mid_backlog", faults::leader_killed_mid_backlog),
        // Last: it restarts the control plane under everything.
        ("apiserver_killed_mid_backlog_and_a_watch_expired", faults::apiserver_killed_mid_backlog_and_a_watch_expired),
    ];
    // KWS_E2E_ONLY=name,name runs only those scenarios (in the list's order), for working on one of them.
    let only = std::env::var("KWS_E2E_ONLY").ok();
    let mut outcomes = Vec::new();
    for &(name, run) in scenarios {
        if only.as_deref().is_none_or(|o| o.split(',').any(|n| n.trim() == name)) {
            eprintln!("e2e: {name}");
            outcomes.push(run_scenario(name, || run(&cp, &k, &work)));
        }
    }
    let failed: Vec<&str> = outcomes.iter().filter(|o| o.failure.is_some()).map(|o| o.name).collect();
    eprintln!("{}", summary(&outcomes));
    // Panicking here, with the control plane still in scope, keeps its logs (see `ControlPlane::drop`).
    assert!(failed.is_empty(), "{} of {} e2e scenarios failed: {}", failed.len(), outcomes.len(), failed.join(", "));
}

/// How one scenario ended.
struct Outcome {
    name: &'static str,
    took: Duration,
    /// The panic message, when it failed.
    failure: Option<String>,
}

/// Runs one scenario, catching its panic so that the scenarios after it still run on the same control plane.
/// Its scheduler processes are dropped (stopped) as the panic unwinds out of it.
fn run_scenario(name: &'static str, run: impl FnOnce()) -> Outcome {
    let start = Instant::now();
    // What a failed scenario leaves behind does not touch the next one: each has its own namespace, nodes and
    // scheduler names.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    let failure = result.err().map(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked with a non-string payload".into())
    });
    if let Some(f) = &failure {
        eprintln!("e2e: {name} FAILED: {f}");
    }
    Outcome { name, took: start.elapsed(), failure }
}

/// One line per scenario: the verdict, the time it took and, for a failure, the first line of its message (the
/// whole message is printed where it failed).
fn summary(outcomes: &[Outcome]) -> String {
    let width = outcomes.iter().map(|o| o.name.len()).max().unwrap_or(0);
    let mut s = String::from("e2e summary:\n");
    for o in outcomes {
        let verdict = if o.failure.is_some() { "FAILED" } else { "ok" };
        let line = o.failure.as_deref().and_then(|f| f.lines().next()).unwrap_or("");
        let line: String = line.chars().take(160).collect();
        s += &format!("  {verdict:<6} {:<width$} {:>6.1}s  {line}\n", o.name, o.took.as_secs_f64());
    }
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    s += &format!("  {} passed, {failed} failed", outcomes.len() - failed);
    s
}

/// Pods for default-scheduler (or none named) are left alone; pods for my-scheduler are bound by us, with a
/// Scheduled event from us; /readyz and /metrics answer.
fn second_scheduler(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace("e2e-second");
    k.node("second-1", json!({"e2e": "second"}));
    k.node("second-2", json!({"e2e": "second"}));
    let profile = write_profile(
        work,
        "second.yaml",
        "profiles:\n- schedulerName: my-scheduler\n  plugins:\n    filter:\n      enabled: [{name: NodeAffinity}]\n",
    );
    let port = free_port();
    let mut s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("second.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    k.pod("e2e-second", "mine", Some("my-scheduler"));
    k.pod("e2e-second", "theirs", None);
    k.pod("e2e-second", "default", Some("default-scheduler"));
    let node = k.wait_bound("e2e-second", "mine");
    assert!(node.starts_with("second-"), "{node}");
    let ev = wait_until("Scheduled event", Duration::from_secs(30), || {
        k.events("e2e-second").into_iter().find(|e| {
            e.reason.as_deref() == Some("Scheduled")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("mine")
        })
    });
    assert_eq!(ev.reporting_controller.as_deref(), Some("my-scheduler"));
    assert_eq!(ev.note.as_deref(), Some(format!("Successfully assigned e2e-second/mine to {node}").as_str()));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(k.node_of("e2e-second", "theirs"), None, "a pod for default-scheduler is left alone");
    assert_eq!(k.node_of("e2e-second", "default"), None);
    // A pod deleted while pending leaves the queue.
    let api: Api<Pod> = Api::namespaced(k.client.clone(), "e2e-second");
    let doomed: Pod =
        serde_json::from_value(json!({"metadata": {"name": "doomed"}, "spec": {"schedulerName": "my-scheduler",
        "nodeSelector": {"no": "such-node"}, "containers": [{"name": "c", "image": "registry.invalid/pause"}]}}))
        .unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &doomed)).unwrap();
    let token = cp.token();
    let pending = |port: u16| -> u64 {
        let (_, m) = https_get(port, "/metrics", Some(&token)).unwrap();
        m.lines()
            .filter(|l| l.starts_with("scheduler_pending_pods{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    wait_until("doomed pending", Duration::from_secs(20), || (pending(port) == 1).then_some(()));
    k.rt.block_on(api.delete("doomed", &Default::default())).unwrap();
    wait_until("doomed gone from the queue", Duration::from_secs(20), || (pending(port) == 0).then_some(()));
    let (code, metrics) = https_get(port, "/metrics", Some(&token)).unwrap();
    assert_eq!(code, 200);
    assert!(
        metrics.contains("scheduler_schedule_attempts_total{profile=\"my-scheduler\",result=\"scheduled\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("scheduler_pending_pods{queue=\"active\"}"));
    assert!(!s.log().contains("e2e-second/mine"), "no line per pod at -v=0:\n{}", s.log());
    assert_eq!(s.term(), Some(0), "SIGTERM exits 0:\n{}", s.log());
}

/// The seed's label scenario with the Wasm priority-label plugin, random-score's PostBind log line, and a hot
/// reload of priority-label in the running scheduler.
fn label_scenario_and_post_bind_log(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace("e2e-label");
    // A copy the test may replace; the built guest stays as it is.
    let plugin = work.join("priority-label.wasm");
    std::fs::copy(guest("priority-label"), &plugin).unwrap();
    k.node("scheduler-1", json!({"e2e": "label"}));
    k.node("scheduler-2", json!({"e2e": "label"}));
    let profile = write_profile(
        work,
        "label.yaml",
        &format!(
            "profiles:\n- schedulerName: label-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: PriorityLabel, weight: 5}}, {{name: RandomScore, weight: 0}}]\n    filter:\n      enabled: [{{name: NodeAffinity}}]\n  pluginConfig:\n  - name: PriorityLabel\n    args:\n      component: {}\n  - name: RandomScore\n    args:\n      component: {}\n",
            plugin.display(),
            guest("random-score").display()
        ),
    );
    let port = free_port();
    let s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("label.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    // Only the two label nodes may be used: pin the pods there with a node selector.
    let pod = |name: &str| {
        let api: Api<Pod> = Api::namespaced(k.client.clone(), "e2e-label");
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"schedulerName": "label-scheduler", "nodeSelector": {"e2e": "label"},
            "containers": [{"name": "c", "image": "registry.invalid/pause"}]}})).unwrap();
        k.rt.block_on(api.create(&PostParams::default(), &p)).unwrap();
    };
    pod("p1");
    let ev = wait_until("FailedScheduling", Duration::from_secs(30), || {
        k.events("e2e-label").into_iter().find(|e| e.reason.as_deref() == Some("FailedScheduling"))
    });
    let note = ev.note.unwrap_or_default();
    assert!(note.contains("2 node(s) didn't have label priority.example.com"), "{note}");
    // The pod says why it waits: PodScheduled=False, reason Unschedulable, upstream's message.
    let cond = wait_until("PodScheduled=False", Duration::from_secs(20), || {
        let api: Api<Pod> = Api::namespaced(k.client.clone(), "e2e-label");
        let p = k.rt.block_on(api.get("p1")).ok()?;
        p.status?.conditions?.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False")
    });
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    // The pod's generation it was written for (PodObservedGenerationTracking, GA since v1.35).
    assert_eq!(cond.observed_generation, Some(1));
    assert!(cond.message.unwrap_or_default().starts_with("0/"));
    // Labelling a node binds the pending pod, without touching the pod.
    k.label_node("scheduler-1", "priority.example.com", "10");
    assert_eq!(k.wait_bound("e2e-label", "p1"), "scheduler-1");
    k.label_node("scheduler-2", "priority.example.com", "20");
    std::thread::sleep(Duration::from_millis(500));
    pod("p2");
    assert_eq!(k.wait_bound("e2e-label", "p2"), "scheduler-2");
    k.label_node("scheduler-1", "priority.example.com", "30");
    std::thread::sleep(Duration::from_millis(500));
    pod("p3");
    assert_eq!(k.wait_bound("e2e-label", "p3"), "scheduler-1");
    // PodScheduled=False was set while p1 waited.
    let log = wait_until("PostBind lines", Duration::from_secs(10), || {
        let l = s.log();
        ["p1", "p2", "p3"].iter().all(|p| l.contains(&format!("Decision: e2e-label/{p} => "))).then_some(l)
    });
    assert!(log.contains("Decision: e2e-label/p1 => scheduler-1"), "{log}");
    // The first cycle is among the sampled 10%: its Filter calls, native and Wasm, are timed per plugin.
    let token = cp.token();
    let (_, metrics) = https_get(port, "/metrics", Some(&token)).unwrap();
    for plugin in ["PriorityLabel", "NodeAffinity"] {
        let series = format!(
            "scheduler_plugin_execution_duration_seconds_count{{extension_point=\"Filter\",plugin=\"{plugin}\",status=\"Success\"}}"
        );
        assert!(metrics.lines().any(|l| l.starts_with(&series)), "{series} in:\n{metrics}");
    }

    // Hot reload: the file is replaced the way a deploy would (written aside, renamed over) by a build that
    // inverts the score; the next decision follows it. Then a corrupt file is refused and the inverted build
    // keeps serving.
    let replace = |bytes: &[u8]| {
        let aside = work.join("priority-label.wasm.new");
        std::fs::write(&aside, bytes).unwrap();
        std::fs::rename(&aside, &plugin).unwrap();
    };
    let counter = |name: &str| -> Option<u64> {
        let (_, m) = https_get(port, "/metrics", Some(&token))?;
        let line = m.lines().find(|l| l.starts_with(&format!("{name}{{plugin=\"PriorityLabel\"}} ")))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    replace(&std::fs::read(guest("priority-label-inverted")).unwrap());
    wait_until("reload", Duration::from_secs(60), || (counter("kws_wasm_plugin_reloads_total")? >= 1).then_some(()));
    pod("p4");
    assert_eq!(k.wait_bound("e2e-label", "p4"), "scheduler-2", "inverted: the lower label (20 < 30) wins");
    replace(b"not a component");
    wait_until("refused reload", Duration::from_secs(60), || {
        (counter("kws_wasm_plugin_reload_failures_total")? >= 1).then_some(())
    });
    pod("p5");
    assert_eq!(k.wait_bound("e2e-label", "p5"), "scheduler-2", "the inverted build keeps serving");
    assert_eq!(counter("kws_wasm_plugin_reloads_total"), Some(1), "the corrupt file was not swapped in");
    let log = s.log();
    assert!(log.contains("wasm plugin reload refused"), "the refusal is in the log:\n{log}");
}

/// Two replicas: only the leader binds; stopping it hands over within the lease duration; no pod bound twice.
fn leader_election_hands_over(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace("e2e-leader");
    k.node("leader-1", json!({"e2e": "leader"}));
    let profile_path = write_profile(work, "leader.yaml", "profiles:\n- schedulerName: ha-scheduler\n");
    std::fs::write(
        &profile_path,
        std::fs::read_to_string(&profile_path).unwrap().replace("leaderElect: false", "leaderElect: true"),
    )
    .unwrap();
    let flags = [
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "500ms",
        "--leader-elect-resource-namespace",
        "default",
    ];
    let (p1, p2) = (free_port(), free_port());
    let mut a = Scheduler::start(&cp.kubeconfig(), &profile_path, p1, &flags, work.join("leader-a.log"));
    std::thread::sleep(Duration::from_secs(2));
    let mut b = Scheduler::start(&cp.kubeconfig(), &profile_path, p2, &flags, work.join("leader-b.log"));
    for i in 0..5 {
        k.pod("e2e-leader", &format!("a{i}"), Some("ha-scheduler"));
    }
    for i in 0..5 {
        k.wait_bound("e2e-leader", &format!("a{i}"));
    }
    let (leader, follower) = if a.log().contains("became leader") { (&mut a, &mut b) } else { (&mut b, &mut a) };
    assert!(!follower.log().contains("became leader"), "only one leader");
    let stopped = Instant::now();
    assert_eq!(leader.term(), Some(0), "the leader exits 0 on SIGTERM");
    for i in 0..5 {
        k.pod("e2e-leader", &format!("b{i}"), Some("ha-scheduler"));
    }
    for i in 0..5 {
        k.wait_bound("e2e-leader", &format!("b{i}"));
    }
    assert!(follower.log().contains("became leader"));
    // Another holder takes the lease: the leader stops promptly, with an error.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(k.client.clone(), "default");
    let mut lease = k.rt.block_on(leases.get("ha-scheduler")).unwrap();
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some("intruder".into());
    spec.lease_duration_seconds = Some(600);
    spec.renew_time =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now()));
    k.rt.block_on(leases.replace("ha-scheduler", &PostParams::default(), &lease)).unwrap();
    let lost = Instant::now();
    let code = wait_until("the leader to stop", Duration::from_secs(10), || follower.child.try_wait().ok().flatten());
    assert_ne!(code.code(), Some(0), "a lost lease is an error exit");
    assert!(lost.elapsed() < Duration::from_secs(3), "stopped promptly: {:?}", lost.elapsed());
    assert!(follower.log().contains("lease taken by another replica"));
    assert!(stopped.elapsed() < Duration::from_secs(4 + 20), "handed over within the lease duration (plus scheduling)");
    let bound =
        k.pods("e2e-leader").iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()).is_some()).count();
    assert_eq!(bound, 10, "every pod bound");
    // Exactly one Scheduled event per pod: no pod was bound twice. Events are written in the background (each
    // leader flushed its own on the way out), so the count is awaited, then checked not to go past 10.
    let scheduled = || k.events("e2e-leader").iter().filter(|e| e.reason.as_deref() == Some("Scheduled")).count();
    wait_until("10 Scheduled events", Duration::from_secs(30), || (scheduled() >= 10).then_some(()));
    assert_eq!(scheduled(), 10);
}

/// 1,000 pods on 100 nodes: all bound, none twice (throughput printed, not asserted).
fn thousand_pods_on_a_hundred_nodes(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace("e2e-load");
    for i in 0..100 {
        k.node(&format!("load-{i}"), json!({"e2e": "load"}));
    }
    let profile = write_profile(work, "load.yaml", "profiles:\n- schedulerName: load-scheduler\n");
    let port = free_port();
    let s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("load.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    let t = Instant::now();
    for i in 0..1000 {
        k.pod("e2e-load", &format!("l{i}"), Some("load-scheduler"));
    }
    let created = t.elapsed();
    let all = wait_until("1000 pods bound", Duration::from_secs(300), || {
        let pods = k.pods("e2e-load");
        (pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()).is_some()).count() == 1000)
            .then_some(pods)
    });
    let took = t.elapsed();
    // Events are written in the background, behind the bindings: awaited, then checked not to go past 1000.
    let scheduled = || k.events("e2e-load").iter().filter(|e| e.reason.as_deref() == Some("Scheduled")).count();
    wait_until("1000 Scheduled events", Duration::from_secs(60), || (scheduled() >= 1000).then_some(()));
    assert_eq!(scheduled(), 1000, "one Scheduled event per pod: none bound twice");
    assert_eq!(all.len(), 1000);
    eprintln!(
        "e2e: 1000 pods on 100 nodes bound in {took:?} (created in {created:?}): {:.0} pods/s end to end",
        1000.0 / took.as_secs_f64()
    );
    let _ = s;
}
