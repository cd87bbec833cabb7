//! Pods parked at Permit (upstream's `waiting_pods_map.go`): the plugins still to allow each, and the verdict
//! once known. The binding cycle waits on it — a task awaiting it in the live scheduler (no thread parked per
//! waiting pod), a thread blocking on it in the simulator; Permit plugins (or tests) allow or reject.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::status::Status;
use super::types::PodInfo;

/// Why and how long one Permit plugin makes a pod wait.
#[derive(Debug, Clone)]
pub struct PermitWait {
    /// When the plugin's wait runs out.
    pub deadline: Instant,
    /// How long it was granted (for the timeout's message).
    pub timeout: Duration,
    /// The reason the plugin gave with Wait (empty when none), repeated in the timeout's message.
    pub reason: String,
}

/// A pod whose Permit answered Wait: plugins still to allow it, and the verdict once known.
#[derive(Debug)]
pub struct WaitingPod {
    pod: Arc<PodInfo>,
    node: String,
    pending: Mutex<HashMap<String, PermitWait>>,
    verdict: Mutex<Option<Status>>,
    signal: Condvar,
    /// Wakes async waiters as `signal` wakes blocking ones.
    notify: tokio::sync::Notify,
}

impl WaitingPod {
    fn new(pod: Arc<PodInfo>, node: String, pending: HashMap<String, PermitWait>) -> WaitingPod {
        WaitingPod {
            pod,
            node,
            pending: Mutex::new(pending),
            verdict: Mutex::new(None),
            signal: Condvar::new(),
            notify: tokio::sync::Notify::new(),
        }
    }

    /// The waiting pod.
    pub fn pod(&self) -> &Arc<PodInfo> {
        &self.pod
    }

    /// The node the pod is assumed on.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The Permit plugins that have not allowed the pod yet, sorted (none once a verdict is known).
    pub fn pending_plugins(&self) -> Vec<String> {
        if self.verdict.lock().expect("waiting pod lock").is_some() {
            return Vec::new();
        }
        let mut v: Vec<String> = self.pending.lock().expect("waiting pod lock").keys().cloned().collect();
        v.sort();
        v
    }

    /// A plugin allows the pod; when none is left pending the pod goes on to binding.
    pub fn allow(&self, plugin: &str) {
        let none_left = {
            let mut p = self.pending.lock().expect("waiting pod lock");
            p.remove(plugin);
            p.is_empty()
        };
        // Decided without holding `pending`: a waiter holds `verdict` while it reads `pending`.
        if none_left {
            self.decide(Status::success());
        }
    }

    /// A plugin rejects the pod.
    pub fn reject(&self, plugin: &str, msg: &str) {
        self.decide(Status::unschedulable(msg).with_plugin(&Arc::from(plugin)));
    }

    fn decide(&self, s: Status) {
        let mut v = self.verdict.lock().expect("waiting pod lock");
        if v.is_none() {
            *v = Some(s);
            self.signal.notify_all();
            self.notify.notify_waiters();
        }
    }

    /// The verdict if known, else when to give up waiting: the earliest pending plugin's deadline (past it, the
    /// verdict is that plugin's timeout).
    fn verdict_or_deadline(&self, v: &Option<Status>) -> Result<Status, Instant> {
        if let Some(s) = v.as_ref() {
            return Ok(s.clone());
        }
        let pending = self.pending.lock().expect("waiting pod lock");
        let Some((plugin, wait)) = pending.iter().min_by_key(|(n, w)| (w.deadline, *n)) else {
            return Ok(Status::success());
        };
        if Instant::now() >= wait.deadline {
            return Ok(timed_out(plugin, wait));
        }
        Err(wait.deadline)
    }

    /// The verdict if a plugin gave one (no timeout is checked: the simulator keeps time itself).
    fn decided(&self) -> Option<Status> {
        self.verdict.lock().expect("waiting pod lock").clone()
    }

    /// The shortest wait a plugin granted.
    pub fn shortest_timeout(&self) -> Option<Duration> {
        self.pending.lock().expect("waiting pod lock").values().map(|w| w.timeout).min()
    }

    /// Rejects the pod as its earliest plugin's timeout would (the simulator, whose clock reached it).
    pub fn expire(&self) {
        let first = {
            let pending = self.pending.lock().expect("waiting pod lock");
            pending.iter().min_by_key(|(n, w)| (w.timeout, *n)).map(|(p, w)| timed_out(p, w))
        };
        if let Some(s) = first {
            self.decide(s);
        }
    }

    /// Blocks until allowed, rejected, or the earliest plugin timeout passes.
    fn wait(&self) -> Status {
        let mut v = self.verdict.lock().expect("waiting pod lock");
        loop {
            match self.verdict_or_deadline(&v) {
                Ok(s) => return s,
                Err(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    v = self.signal.wait_timeout(v, left).expect("waiting pod lock").0;
                }
            }
        }
    }

    /// Waits, as `wait`, without holding a thread.
    async fn wait_async(&self) -> Status {
        loop {
            // Registered before the verdict is read, so a decision in between is not missed.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = match self.verdict_or_deadline(&self.verdict.lock().expect("waiting pod lock")) {
                Ok(s) => return s,
                Err(deadline) => deadline,
            };
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }
}

/// A plugin's wait ran out: upstream's message, then the plugin's own reason for waiting (a gang names its group).
fn timed_out(plugin: &str, wait: &PermitWait) -> Status {
    // Go's %v of a time.Duration: 5m0s, 30ms.
    let waited = crate::config::format_go_duration(wait.timeout);
    let mut msg = format!("rejected due to timeout after waiting {waited} at plugin {plugin}");
    if !wait.reason.is_empty() {
        msg = format!("{msg}: {}", wait.reason);
    }
    Status::unschedulable(msg).with_plugin(&Arc::from(plugin))
}

/// The pods of one profile waiting at Permit, by UID.
#[derive(Debug, Default)]
pub struct WaitingPods(Mutex<HashMap<String, Arc<WaitingPod>>>);

impl WaitingPods {
    /// Parks a pod until every plugin in `pending` allows it (each by its deadline) or one rejects it.
    pub fn park(&self, pod: Arc<PodInfo>, node: &str, pending: HashMap<String, PermitWait>) {
        let uid = pod.uid.clone();
        self.0.lock().expect("waiting lock").insert(uid, Arc::new(WaitingPod::new(pod, node.to_string(), pending)));
    }

    /// Every waiting pod (upstream's `IterateOverWaitingPods`), in no order.
    pub fn list(&self) -> Vec<Arc<WaitingPod>> {
        self.0.lock().expect("waiting lock").values().cloned().collect()
    }

    /// The waiting pod with this UID.
    pub fn get(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.0.lock().expect("waiting lock").get(uid).cloned()
    }

    /// Blocks until the pod is allowed, rejected or times out, then forgets it; a pod not waiting is allowed.
    pub fn wait(&self, uid: &str) -> Status {
        let Some(wp) = self.get(uid) else { return Status::success() };
        let s = wp.wait();
        self.0.lock().expect("waiting lock").remove(uid);
        s
    }

    /// The verdict a plugin gave the pod, without waiting; the pod is forgotten once it has one (the simulator's
    /// binding cycles, which it runs in order on its own clock). A pod not waiting is allowed.
    pub fn take_decided(&self, uid: &str) -> Option<Status> {
        let Some(wp) = self.get(uid) else { return Some(Status::success()) };
        let s = wp.decided()?;
        self.0.lock().expect("waiting lock").remove(uid);
        Some(s)
    }

    /// As `wait`, on the async runtime.
    pub async fn wait_async(&self, uid: &str) -> Status {
        let Some(wp) = self.get(uid) else { return Status::success() };
        let s = wp.wait_async().await;
        self.0.lock().expect("waiting lock").remove(uid);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;

    fn wait(deadline: Instant) -> PermitWait {
        PermitWait { deadline, timeout: Duration::from_millis(30), reason: String::new() }
    }

    fn pod(uid: &str) -> Arc<PodInfo> {
        let v = serde_json::json!({"metadata": {"name": uid, "namespace": "default", "uid": uid}});
        Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap())
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
    }

    #[test]
    fn an_awaiting_binding_cycle_wakes_when_the_last_plugin_allows() {
        let w = Arc::new(WaitingPods::default());
        let far = Instant::now() + Duration::from_secs(600);
        w.park(pod("a"), "n", HashMap::from([("P".to_string(), wait(far)), ("Q".to_string(), wait(far))]));
        let allower = w.clone();
        let s = runtime().block_on(async move {
            let waiting = tokio::spawn(async move { w.wait_async("a").await });
            tokio::task::yield_now().await;
            allower.get("a").unwrap().allow("P");
            tokio::task::yield_now().await;
            assert!(!waiting.is_finished(), "Q has not allowed yet");
            allower.get("a").unwrap().allow("Q");
            waiting.await.unwrap()
        });
        assert!(s.is_success(), "{s:?}");
    }

    #[test]
    fn a_timeout_names_its_wait_as_go_prints_a_duration() {
        let five_minutes =
            PermitWait { deadline: Instant::now(), timeout: Duration::from_secs(300), reason: String::new() };
        let s = timed_out("GangScheduling", &five_minutes);
        assert_eq!(s.message(), "rejected due to timeout after waiting 5m0s at plugin GangScheduling");
    }

    #[test]
    fn an_awaiting_binding_cycle_is_rejected_by_a_plugin_or_by_its_timeout() {
        let w = Arc::new(WaitingPods::default());
        let far = Instant::now() + Duration::from_secs(600);
        w.park(pod("r"), "n", HashMap::from([("P".to_string(), wait(far))]));
        w.get("r").unwrap().reject("P", "no quorum");
        let s = runtime().block_on(w.wait_async("r"));
        assert_eq!((s.code(), s.message()), (Code::Unschedulable, "no quorum".to_string()));
        assert!(w.get("r").is_none(), "forgotten once waited for");

        let slow = PermitWait {
            reason: "waiting for 2 more pods of PodGroup ns/g".into(),
            ..wait(Instant::now() + Duration::from_millis(30))
        };
        w.park(pod("t"), "n", HashMap::from([("Slow".to_string(), slow)]));
        let s = runtime().block_on(w.wait_async("t"));
        assert_eq!(s.code(), Code::Unschedulable);
        assert_eq!(
            s.message(),
            "rejected due to timeout after waiting 30ms at plugin Slow: waiting for 2 more pods of PodGroup ns/g"
        );
        assert_eq!(s.plugin().map(|p| p.to_string()).as_deref(), Some("Slow"));
    }
}
