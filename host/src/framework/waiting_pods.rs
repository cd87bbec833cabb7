//! Pods parked at Permit (upstream's `waiting_pods_map.go`): the plugins still to allow each, and the verdict
//! once known. The binding cycle waits on it; Permit plugins (or tests) allow or reject.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::status::Status;
use super::types::PodInfo;

/// A pod whose Permit answered Wait: plugins still to allow it, and the verdict once known.
#[derive(Debug)]
pub struct WaitingPod {
    pod: Arc<PodInfo>,
    pending: Mutex<HashMap<String, Instant>>,
    verdict: Mutex<Option<Status>>,
    signal: Condvar,
}

impl WaitingPod {
    fn new(pod: Arc<PodInfo>, pending: HashMap<String, Instant>) -> WaitingPod {
        WaitingPod { pod, pending: Mutex::new(pending), verdict: Mutex::new(None), signal: Condvar::new() }
    }

    /// The waiting pod.
    pub fn pod(&self) -> &Arc<PodInfo> {
        &self.pod
    }

    /// A plugin allows the pod; when none is left pending the pod goes on to binding.
    pub fn allow(&self, plugin: &str) {
        let mut p = self.pending.lock().expect("waiting pod lock");
        p.remove(plugin);
        if p.is_empty() {
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
        }
    }

    /// Blocks until allowed, rejected, or the earliest plugin timeout passes.
    fn wait(&self) -> Status {
        let mut v = self.verdict.lock().expect("waiting pod lock");
        loop {
            if let Some(s) = v.as_ref() {
                return s.clone();
            }
            let deadline = self.pending.lock().expect("waiting pod lock").iter().map(|(n, d)| (*d, n.clone())).min();
            let Some((deadline, plugin)) = deadline else { return Status::success() };
            let now = Instant::now();
            if now >= deadline {
                return Status::unschedulable("rejected due to timeout after waiting at permit")
                    .with_plugin(&Arc::from(plugin.as_str()));
            }
            v = self.signal.wait_timeout(v, deadline - now).expect("waiting pod lock").0;
        }
    }
}

/// The pods of one profile waiting at Permit, by UID.
#[derive(Debug, Default)]
pub struct WaitingPods(Mutex<HashMap<String, Arc<WaitingPod>>>);

impl WaitingPods {
    /// Parks a pod until every plugin in `pending` allows it (each by its deadline) or one rejects it.
    pub fn park(&self, pod: Arc<PodInfo>, pending: HashMap<String, Instant>) {
        let uid = pod.uid.clone();
        self.0.lock().expect("waiting lock").insert(uid, Arc::new(WaitingPod::new(pod, pending)));
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
}
