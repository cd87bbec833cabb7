//! Pods parked at Permit (upstream's `waiting_pods_map.go`): the plugins still to allow each, and the verdict
//! once known. The binding cycle waits on it — a task awaiting it in the live scheduler (no thread parked per
//! waiting pod), a thread blocking on it in the simulator; Permit plugins (or tests) allow or reject.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::status::Status;
use super::types::PodInfo;

/// A pod whose Permit answered Wait: plugins still to allow it, and the verdict once known.
#[derive(Debug)]
pub struct WaitingPod {
    pod: Arc<PodInfo>,
    node: String,
    pending: Mutex<HashMap<String, Instant>>,
    verdict: Mutex<Option<Status>>,
    signal: Condvar,
    /// Wakes async waiters as `signal` wakes blocking ones.
    notify: tokio::sync::Notify,
}

impl WaitingPod {
    fn new(pod: Arc<PodInfo>, node: String, pending: HashMap<String, Instant>) -> WaitingPod {
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
        let deadline = self.pending.lock().expect("waiting pod lock").iter().map(|(n, d)| (*d, n.clone())).min();
        let Some((deadline, plugin)) = deadline else { return Ok(Status::success()) };
        if Instant::now() >= deadline {
            return Ok(Status::unschedulable("rejected due to timeout after waiting at permit")
                .with_plugin(&Arc::from(plugin.as_str())));
        }
        Err(deadline)
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

/// The pods of one profile waiting at Permit, by UID.
#[derive(Debug, Default)]
pub struct WaitingPods(Mutex<HashMap<String, Arc<WaitingPod>>>);

impl WaitingPods {
    /// Parks a pod until every plugin in `pending` allows it (each by its deadline) or one rejects it.
    pub fn park(&self, pod: Arc<PodInfo>, node: &str, pending: HashMap<String, Instant>) {
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
    use std::time::Duration;

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
        w.park(pod("a"), "n", HashMap::from([("P".to_string(), far), ("Q".to_string(), far)]));
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
    fn an_awaiting_binding_cycle_is_rejected_by_a_plugin_or_by_its_timeout() {
        let w = Arc::new(WaitingPods::default());
        let far = Instant::now() + Duration::from_secs(600);
        w.park(pod("r"), "n", HashMap::from([("P".to_string(), far)]));
        w.get("r").unwrap().reject("P", "no quorum");
        let s = runtime().block_on(w.wait_async("r"));
        assert_eq!((s.code(), s.message()), (Code::Unschedulable, "no quorum".to_string()));
        assert!(w.get("r").is_none(), "forgotten once waited for");

        w.park(pod("t"), "n", HashMap::from([("Slow".to_string(), Instant::now() + Duration::from_millis(30))]));
        let s = runtime().block_on(w.wait_async("t"));
        assert_eq!(s.code(), Code::Unschedulable);
        assert!(s.message().contains("timeout"), "{}", s.message());
        assert_eq!(s.plugin().map(|p| p.to_string()).as_deref(), Some("Slow"));
    }
}
