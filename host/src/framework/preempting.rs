//! The preemptions under way and the victims they are deleting (upstream's asynchronous preemption,
//! SchedulerAsyncPreemption, on by default since v1.33): a preemptor's victims are deleted off the scheduling loop,
//! and DefaultPreemption's PreEnqueue keeps the preemptor out of the queue until its preemption is done, so that it
//! is not tried — and does not preempt again — while the victims are still on the node.
//!
//! A preemption is done when its deletions' requests have all answered, or when every victim's deletion has been
//! seen. Upstream checks the last victim in its informer for the second case: the event that requeues the
//! preemptor can arrive before the request that caused it answers. Here the event handlers tell this registry of
//! each deleted pod before the queue hears of it, which covers every victim, not only the last.
//!
//! A victim whose deletion was sent stays listed as terminating until its deletion is seen. Upstream's
//! DefaultPreemption does not let a pod preempt again while pods terminating by preemption remain on its
//! nominated node; victims deleted at once (grace period 0, as the benchmark's pods) are never seen terminating
//! there, but they stay in the scheduler's cache until the watch delivers their deletion, and a preemptor tried
//! in between would otherwise pick the same node and the same victims again.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Preemptions under way, and the victims whose deletion was sent but not yet seen.
#[derive(Debug, Default)]
pub struct Preempting {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Preemptors whose preemption is under way.
    running: HashSet<String>,
    /// Preemptor uid → its victims' uids not yet seen deleted.
    victims: HashMap<String, HashSet<String>>,
    /// Victim uid → the preemptor evicting it.
    preemptor_of: HashMap<String, String>,
}

impl Inner {
    fn forget_victim(&mut self, victim: &str) {
        let Some(preemptor) = self.preemptor_of.remove(victim) else { return };
        let done = self.victims.get_mut(&preemptor).is_some_and(|v| {
            v.remove(victim);
            v.is_empty()
        });
        if done {
            self.victims.remove(&preemptor);
            self.running.remove(&preemptor);
        }
    }
}

impl Preempting {
    /// A preemption starts: `preemptor` is held until `victims` are all seen gone or [`Preempting::finish`] is
    /// called, and each victim counts as terminating until its deletion is seen.
    pub fn start(&self, preemptor: &str, victims: impl IntoIterator<Item = String>) {
        let mut g = self.inner.lock().expect("preempting lock");
        let victims: HashSet<String> = victims.into_iter().collect();
        if victims.is_empty() {
            return;
        }
        for v in &victims {
            g.preemptor_of.insert(v.clone(), preemptor.to_string());
        }
        g.victims.entry(preemptor.to_string()).or_default().extend(victims);
        g.running.insert(preemptor.to_string());
    }

    /// The preemption's requests have all answered: it is over. `not_deleted` are the victims whose deletion
    /// failed or found them gone already: no deletion of theirs is coming, so they are no longer terminating.
    pub fn finish<'a>(&self, preemptor: &str, not_deleted: impl IntoIterator<Item = &'a str>) {
        let mut g = self.inner.lock().expect("preempting lock");
        g.running.remove(preemptor);
        for v in not_deleted {
            g.forget_victim(v);
        }
    }

    /// A pod was deleted (the event handlers call this before the queue hears of it): it no longer terminates,
    /// and when it was the last victim of a preemption not yet seen gone, that preemption is over.
    pub fn pod_deleted(&self, uid: &str) {
        self.inner.lock().expect("preempting lock").forget_victim(uid);
    }

    /// Whether `preemptor`'s preemption is still under way (upstream's `IsPodRunningPreemption`).
    pub fn is_running(&self, preemptor: &str) -> bool {
        self.inner.lock().expect("preempting lock").running.contains(preemptor)
    }

    /// Whether the pod is a victim whose deletion was sent and not yet seen (upstream's terminating pod).
    pub fn is_terminating(&self, uid: &str) -> bool {
        self.inner.lock().expect("preempting lock").preemptor_of.contains_key(uid)
    }

    /// How many preemptions are under way or have victims not yet seen gone.
    pub fn len(&self) -> usize {
        let g = self.inner.lock().expect("preempting lock");
        g.victims.keys().chain(g.running.iter()).collect::<HashSet<_>>().len()
    }

    /// Whether nothing is under way and no victim is terminating.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_preemption_runs_until_every_victim_is_seen_gone() {
        let p = Preempting::default();
        p.start("pre", uids(&["v1", "v2"]));
        assert!(p.is_running("pre") && p.is_terminating("v1") && p.is_terminating("v2"));
        p.pod_deleted("v1");
        assert!(p.is_running("pre"), "one victim is still on its node");
        assert!(!p.is_terminating("v1") && p.is_terminating("v2"));
        p.pod_deleted("other");
        assert!(p.is_running("pre"));
        p.pod_deleted("v2");
        assert!(!p.is_running("pre"));
        assert!(p.is_empty());
    }

    #[test]
    fn a_preemption_ends_when_its_requests_have_answered_and_its_victims_terminate_until_seen_gone() {
        let p = Preempting::default();
        p.start("a", uids(&["v1", "v2", "v3"]));
        p.start("b", uids(&["v4"]));
        // v2 was gone already and v3's deletion failed: only v1's deletion is coming.
        p.finish("a", ["v2", "v3"]);
        assert!(!p.is_running("a"));
        assert!(p.is_running("b"));
        assert!(p.is_terminating("v1") && !p.is_terminating("v2") && !p.is_terminating("v3"));
        p.pod_deleted("v1");
        assert!(!p.is_terminating("v1"));
        assert_eq!(p.len(), 1, "only b is left");
        p.finish("b", []);
        p.pod_deleted("v4");
        assert!(p.is_empty());
    }

    #[test]
    fn no_victims_is_no_preemption_under_way() {
        let p = Preempting::default();
        p.start("pre", Vec::new());
        assert!(!p.is_running("pre"));
        assert!(p.is_empty());
    }
}
