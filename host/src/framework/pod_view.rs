//! The pods the scheduler knows, as a log of changes that Wasm guests follow (the contract's `pods` export): pending
//! pods of its profiles, pods assumed by a scheduling cycle, and bound pods. A guest instance keeps a cursor into the
//! log and is sent only what changed since, so pods cross the boundary when they change rather than on every call
//! (as the node table does). The scheduler's event handlers and its assume/forget steps feed it.
//!
//! It also keeps, whether or not a plugin follows it, the members of every pod group it knows (pods naming a
//! PodGroup in `spec.schedulingGroup`), with where each stands: upstream's pod group state in the scheduler's cache,
//! which GangScheduling counts (`PodGroupMembers`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::types::PodInfo;

/// Where a known pod stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Not on a node yet (queued, or in a scheduling cycle).
    Pending,
    /// Assumed on a node by a scheduling cycle (reserved, waiting at Permit, or being bound).
    Assumed,
    /// Bound to a node.
    Bound,
}

/// A pod of the view.
#[derive(Debug, Clone)]
pub struct KnownPod {
    /// The pod (its node name set when assumed or bound).
    pub pod: Arc<PodInfo>,
    /// Where it stands.
    pub state: PodState,
    /// The scheduler's clock when the pod was first seen, nanoseconds.
    pub first_seen: u64,
}

/// One change of the view.
#[derive(Debug, Clone)]
pub enum PodChange {
    /// A pod is new or changed.
    Upsert(Arc<KnownPod>),
    /// The pod is gone (as it was last known).
    Remove(Arc<KnownPod>),
}

/// What a follower is sent: everything since its cursor, or (when the log no longer reaches back that far) the
/// whole view after a reset.
#[derive(Debug)]
pub struct PodDelta {
    /// True when the follower must forget what it holds first.
    pub reset: bool,
    /// The changes, in order.
    pub changes: Vec<PodChange>,
    /// The cursor to ask from next time.
    pub cursor: u64,
}

#[derive(Debug, Default)]
struct Log {
    /// Sequence number of `entries[0]` (sequence numbers start at 1; a cursor of 0 has seen nothing).
    base: u64,
    entries: VecDeque<PodChange>,
    current: HashMap<String, Arc<KnownPod>>,
}

/// The log of pod changes. Entries older than about twice the view's size are dropped; a follower that far behind
/// gets the whole view again.
#[derive(Debug, Default)]
pub struct PodView {
    /// The sequence number of the last entry, read without the lock by followers that are up to date.
    head: AtomicU64,
    log: Mutex<Log>,
    /// Some plugin follows the view; until one does, nothing is recorded (the default profile pays nothing).
    followed: AtomicBool,
    /// The members of each pod group, by `namespace/podGroupName` (upstream's `podGroupState`).
    groups: Mutex<Groups>,
}

#[derive(Debug, Default)]
struct Groups {
    /// Group key → member UID → (the pod, where it stands).
    members: HashMap<String, HashMap<String, (Arc<PodInfo>, PodState)>>,
    /// Member UID → its group key (a removal names the UID only).
    group_of: HashMap<String, String>,
}

/// The members of one pod group the scheduler knows (upstream's `PodGroupState`): pending pods of its profiles,
/// pods it assumed, and bound pods (any scheduler's).
#[derive(Debug, Clone, Default)]
pub struct PodGroupMembers {
    /// Every member (`AllPodsCount`).
    pub all: usize,
    /// Members assumed or bound (`ScheduledPodsCount`).
    pub scheduled: usize,
    /// UIDs of the members assumed on a node and not yet seen bound (`AssumedPods`), sorted.
    pub assumed: Vec<String>,
}

/// Entries kept beyond twice the view's size before the log is compacted.
const SLACK: usize = 1024;

impl PodView {
    /// A plugin will read the view: record changes from now on. Plugins are built before the scheduler sees any
    /// pod, so a plugin that follows from its construction misses nothing.
    pub fn follow(&self) {
        self.followed.store(true, Ordering::Relaxed);
    }

    fn recording(&self) -> bool {
        self.followed.load(Ordering::Relaxed)
    }

    /// A pending pod of one of the scheduler's profiles was added or changed.
    pub fn pending(&self, pod: &Arc<PodInfo>, now: u64) {
        self.upsert(pod, PodState::Pending, now);
    }

    /// The members of the pod group `namespace/name` as they stand (none known: all counts 0).
    pub fn pod_group(&self, key: &str) -> PodGroupMembers {
        let groups = self.groups.lock().expect("pod view lock");
        let Some(members) = groups.members.get(key) else { return PodGroupMembers::default() };
        let mut assumed: Vec<String> =
            members.iter().filter(|(_, (_, s))| *s == PodState::Assumed).map(|(u, _)| u.clone()).collect();
        assumed.sort();
        let bound = members.values().filter(|(_, s)| *s == PodState::Bound).count();
        PodGroupMembers { all: members.len(), scheduled: assumed.len() + bound, assumed }
    }

    /// A known pod that names a pod group, by UID.
    pub fn pod_group_member(&self, uid: &str) -> Option<Arc<PodInfo>> {
        let groups = self.groups.lock().expect("pod view lock");
        let key = groups.group_of.get(uid)?;
        groups.members.get(key)?.get(uid).map(|(p, _)| p.clone())
    }

    /// Keeps the group index in step with a pod's new state (`None`: removed).
    fn group_member(&self, uid: &str, pod: Option<(&Arc<PodInfo>, PodState)>) {
        let key = pod.and_then(|(p, _)| p.pod_group_key());
        let mut groups = self.groups.lock().expect("pod view lock");
        if key.is_none() && !groups.group_of.contains_key(uid) {
            return;
        }
        // The group a pod names cannot change (the field is immutable), but a removal must find it.
        if let Some(old) = groups.group_of.remove(uid) {
            if let Some(m) = groups.members.get_mut(&old) {
                m.remove(uid);
                if m.is_empty() {
                    groups.members.remove(&old);
                }
            }
        }
        if let (Some(key), Some((p, state))) = (key, pod) {
            groups.group_of.insert(uid.to_string(), key.clone());
            groups.members.entry(key).or_default().insert(uid.to_string(), (p.clone(), state));
        }
    }

    /// A scheduling cycle assumed the pod (its node name set) on a node.
    pub fn assumed(&self, pod: &Arc<PodInfo>, now: u64) {
        self.upsert(pod, PodState::Assumed, now);
    }

    /// The pod was seen bound to a node.
    pub fn bound(&self, pod: &Arc<PodInfo>, now: u64) {
        self.upsert(pod, PodState::Bound, now);
    }

    /// The pod is gone (deleted or finished).
    pub fn removed(&self, uid: &str) {
        self.group_member(uid, None);
        if !self.recording() {
            return;
        }
        let mut log = self.log.lock().expect("pod view lock");
        if let Some(k) = log.current.remove(uid) {
            self.push(&mut log, PodChange::Remove(k));
        }
    }

    fn upsert(&self, pod: &Arc<PodInfo>, state: PodState, now: u64) {
        self.group_member(&pod.uid, Some((pod, state)));
        if !self.recording() {
            return;
        }
        let mut log = self.log.lock().expect("pod view lock");
        let first_seen = match log.current.get(&pod.uid) {
            Some(k) if k.state == state && Arc::ptr_eq(&k.pod, pod) => return,
            Some(k) => k.first_seen,
            None => now,
        };
        let known = Arc::new(KnownPod { pod: pod.clone(), state, first_seen });
        log.current.insert(pod.uid.clone(), known.clone());
        self.push(&mut log, PodChange::Upsert(known));
    }

    fn push(&self, log: &mut Log, change: PodChange) {
        if log.entries.is_empty() {
            log.base = self.head.load(Ordering::Relaxed) + 1;
        }
        log.entries.push_back(change);
        if log.entries.len() > 2 * log.current.len() + SLACK {
            let drop = log.entries.len() / 2;
            log.entries.drain(..drop);
            log.base += drop as u64;
        }
        self.head.fetch_add(1, Ordering::Release);
    }

    /// The sequence number of the last change (0 before any).
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// What a follower at `cursor` has not seen.
    pub fn since(&self, cursor: u64) -> PodDelta {
        let log = self.log.lock().expect("pod view lock");
        let head = self.head.load(Ordering::Acquire);
        if cursor >= head {
            return PodDelta { reset: false, changes: Vec::new(), cursor: head };
        }
        // A new follower (cursor 0) gets the view itself rather than its whole history.
        if cursor > 0 && cursor + 1 >= log.base && !log.entries.is_empty() {
            let skip = (cursor + 1 - log.base) as usize;
            return PodDelta { reset: false, changes: log.entries.iter().skip(skip).cloned().collect(), cursor: head };
        }
        let mut all: Vec<&Arc<KnownPod>> = log.current.values().collect();
        // Oldest first, so a follower sees the view in the order pods arrived.
        all.sort_by(|a, b| (a.first_seen, &a.pod.uid).cmp(&(b.first_seen, &b.pod.uid)));
        PodDelta { reset: true, changes: all.into_iter().map(|k| PodChange::Upsert(k.clone())).collect(), cursor: head }
    }

    /// Every known pod, oldest first (tests and tools).
    pub fn snapshot(&self) -> Vec<Arc<KnownPod>> {
        let changes = self.since(0).changes;
        changes.into_iter().filter_map(|c| if let PodChange::Upsert(k) = c { Some(k) } else { None }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> Arc<PodInfo> {
        let v = serde_json::json!({"metadata": {"name": uid, "namespace": "default", "uid": uid}});
        Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap())
    }

    fn uids(d: &PodDelta) -> Vec<String> {
        d.changes
            .iter()
            .map(|c| match c {
                PodChange::Upsert(k) => format!("+{}:{:?}", k.pod.uid, k.state),
                PodChange::Remove(k) => format!("-{}", k.pod.uid),
            })
            .collect()
    }

    #[test]
    fn a_follower_gets_only_what_changed_since_its_cursor() {
        let v = PodView::default();
        v.pending(&pod("unseen"), 0);
        assert_eq!(v.head(), 0, "nothing is recorded until a plugin follows the view");
        v.follow();
        let (a, b) = (pod("a"), pod("b"));
        v.pending(&a, 1);
        v.pending(&b, 2);
        let d = v.since(0);
        assert!(d.reset, "a new follower gets the view");
        assert_eq!(uids(&d), ["+a:Pending", "+b:Pending"]);
        v.assumed(&a, 3);
        v.assumed(&a, 4); // the same object in the same state is no change
        v.removed("b");
        v.removed("b");
        let d2 = v.since(d.cursor);
        assert!(!d2.reset);
        assert_eq!(uids(&d2), ["+a:Assumed", "-b"]);
        assert_eq!(v.since(d2.cursor).changes.len(), 0);
        let first_seen = v.snapshot().iter().map(|k| k.first_seen).collect::<Vec<_>>();
        assert_eq!(first_seen, [1], "assuming keeps the time the pod was first seen");
    }

    #[test]
    fn pod_group_members_are_counted_by_where_they_stand_whether_or_not_the_view_is_followed() {
        let v = PodView::default();
        let member = |uid: &str, group: &str| {
            let p = serde_json::json!({"metadata": {"name": uid, "namespace": "ns", "uid": uid},
                "spec": {"containers": [], "schedulingGroup": {"podGroupName": group}}});
            Arc::new(PodInfo::new(serde_json::from_value(p).unwrap()).unwrap())
        };
        let (a, b, c, other) = (member("a", "g"), member("b", "g"), member("c", "g"), member("x", "h"));
        for p in [&a, &b, &c, &other] {
            v.pending(p, 0);
        }
        v.pending(&pod("lone"), 0);
        v.assumed(&a, 1);
        v.bound(&b, 2);
        let g = v.pod_group("ns/g");
        assert_eq!((g.all, g.scheduled, g.assumed.clone()), (3, 2, vec!["a".to_string()]));
        v.pending(&a, 3); // forgotten after a failed binding
        v.removed("c");
        let g = v.pod_group("ns/g");
        assert_eq!((g.all, g.scheduled, g.assumed.len()), (2, 1, 0));
        assert_eq!(v.pod_group("ns/h").all, 1);
        assert_eq!(v.pod_group("other/g").all, 0, "a group is namespaced");
        v.removed("x");
        assert!(!v.groups.lock().unwrap().members.contains_key("ns/h"), "an empty group is dropped");
        assert_eq!(v.head(), 0, "nothing went to the log: no plugin follows it");
    }

    #[test]
    fn a_follower_too_far_behind_gets_the_whole_view_after_a_reset() {
        let v = PodView::default();
        v.follow();
        let a = pod("a");
        v.pending(&a, 1);
        let early = v.since(0).cursor;
        for i in 0..3000u64 {
            let p = pod("churn");
            v.pending(&p, i);
            v.removed("churn");
        }
        let d = v.since(early);
        assert!(d.reset, "the log was compacted past the cursor");
        assert_eq!(uids(&d), ["+a:Pending"]);
        let fresh = v.since(0);
        assert_eq!(uids(&fresh), ["+a:Pending"]);
    }
}
