//! Preemption for a PodGroup that cannot be placed: upstream's PodGroupPostFilter as DefaultPreemption serves it
//! (`PodGroupEvaluator` in `framework/preemption/podgrouppreemption.go`, v1.37, GenericWorkload on). It runs when
//! DefaultPreemption is in the profile; the domain is the whole cluster:
//!
//! 1. The preemptor is the group: its priority is the PodGroup's `spec.priority` (0 when unset), and it may not
//!    preempt when any of its pods says `preemptionPolicy: Never` (the PodGroupPreemptionPolicy gate is off).
//! 2. Every pod on a node is a possible victim, alone, or with every scheduled pod of its PodGroup when the group's
//!    `disruptionMode` is `all`; a pod in a PodGroup has its group's priority. Victims of a lower priority than
//!    the preemptor's are removed from a copy of the snapshot all at once, and the PodGroup algorithm runs there
//!    (fresh cycle states, GangScheduling's PlacementFeasible): if the group does not fit even so, nothing is
//!    preempted.
//! 3. Otherwise the victims are given back one at a time, most important first (priority, then a group before a
//!    lone pod, the larger group, the earlier start), those whose eviction would violate a PodDisruptionBudget
//!    before the others: a victim is kept when every member still passes Filter on the node the trial gave it,
//!    with the members before it assumed and reserved there.
//! 4. The victims not kept are evicted; every member is nominated to its trial node and the group waits, as
//!    unschedulable, for the next PodGroup cycle, which finds the room.
//!
//! Upstream also reports success without evicting anything while a member's nominated node still holds a
//! lower-priority pod terminating by preemption; our snapshot drops a deleted pod at once, so that check never
//! fires here and is left out. DynamicResources' PodGroupPostFilter (claims to deallocate) is not run.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::scheduling::v1beta1::PodGroup;

use super::schedule_one::Attempt;
use super::schedule_one_podgroup::{forget_in, place_in};
use super::Scheduler;
use crate::framework::{Code, CycleState, Framework, PodInfo, Snapshot, Status};
use crate::plugins::default_preemption::{self, POLICY_NEVER};

/// Prefix of every message the group's preemption adds, as upstream's `PodGroupPostFilter`.
pub const MESSAGE_PREFIX: &str = "pod group preemption: ";
/// Message when no pod in the cluster has a lower priority than the group (upstream's wording).
pub const NO_VICTIMS: &str = "No preemption victims found for incoming preemptor";

/// What the group's preemption decided.
pub(super) struct GroupPreemption {
    /// Success when room was found; the message (with its prefix) joins the group's status either way.
    pub(super) status: Status,
    /// The pods to evict, most important first.
    pub(super) victims: Vec<Arc<PodInfo>>,
    /// Each member's node once the victims are gone, in the members' order (`None`: the trial left it out).
    pub(super) nominations: Vec<Option<String>>,
}

/// An atomic unit of eviction (upstream's `Victim`): one pod, or every scheduled pod of a PodGroup whose
/// disruption mode is `all`.
struct Victim {
    pods: Vec<Arc<PodInfo>>,
    priority: i32,
    /// 2 for a PodGroup or a pod of one, 1 for a lone pod (upstream's `victimRank`).
    rank: u8,
    /// The earliest start among the pods.
    earliest: i64,
}

/// Upstream `MoreImportantVictim` as an ordering, most important first.
fn more_important_first(a: &Victim, b: &Victim) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then(b.rank.cmp(&a.rank))
        .then(b.pods.len().cmp(&a.pods.len()))
        .then(a.earliest.cmp(&b.earliest))
}

/// The PodGroup's priority (upstream `PodGroupPriority`): its `spec.priority`, 0 when unset.
fn group_priority(group: &PodGroup) -> i32 {
    group.spec.priority.unwrap_or(0)
}

/// Every possible victim in the snapshot, each pod once (upstream `getCrossNodesVictims`).
fn all_victims(snapshot: &Snapshot, groups: &HashMap<String, Arc<PodGroup>>) -> Vec<Victim> {
    let mut out: Vec<Victim> = Vec::new();
    // Where a PodGroup with disruption mode `all` has its victim in `out`.
    let mut whole: HashMap<String, usize> = HashMap::new();
    for node in snapshot.nodes() {
        for pod in &node.pods {
            let key = pod.pod_group_key();
            let group = key.as_ref().and_then(|k| groups.get(k));
            let priority = group.map_or(pod.priority, |g| group_priority(g));
            let rank = if key.is_some() { 2 } else { 1 };
            let all = group.and_then(|g| g.spec.disruption_mode.as_ref()).is_some_and(|d| d.all.is_some());
            match key.filter(|_| all) {
                Some(k) => match whole.get(&k) {
                    Some(&i) => {
                        let v = &mut out[i];
                        v.earliest = v.earliest.min(pod.start_time_secs());
                        v.pods.push(pod.clone());
                    }
                    None => {
                        whole.insert(k, out.len());
                        out.push(Victim { pods: vec![pod.clone()], priority, rank, earliest: pod.start_time_secs() });
                    }
                },
                None => out.push(Victim { pods: vec![pod.clone()], priority, rank, earliest: pod.start_time_secs() }),
            }
        }
    }
    out
}

impl Scheduler {
    /// Upstream's PodGroupPostFilter with DefaultPreemption (see the module's doc) for a group whose cycle found
    /// no placement: `attempts` are its members in order, `base` the cycle's snapshot with no trial in it,
    /// `scheduled` how many of its pods were already scheduled. `None` when DefaultPreemption is not in the
    /// profile.
    pub(super) fn pod_group_preemption(
        &self,
        fwk: &Framework,
        group: &PodGroup,
        attempts: &[Attempt],
        base: &Snapshot,
        scheduled: usize,
        feasible: &dyn Fn(usize, usize) -> Status,
    ) -> Option<GroupPreemption> {
        fwk.plugin(default_preemption::NAME)?;
        let failed = |code: Code, msg: &str| GroupPreemption {
            status: Status::new(code, format!("{MESSAGE_PREFIX}{msg}")),
            victims: Vec::new(),
            nominations: Vec::new(),
        };
        let never = |a: &Attempt| {
            a.qpi.pod_info.pod.spec.as_ref().and_then(|s| s.preemption_policy.as_deref()) == Some("Never")
        };
        if attempts.iter().any(never) {
            return Some(failed(Code::Unschedulable, POLICY_NEVER));
        }
        let preemptor = group_priority(group);
        let groups = self.profiles.listers().objects();
        let mut potential: Vec<Victim> =
            all_victims(base, &groups.pod_groups).into_iter().filter(|v| v.priority < preemptor).collect();
        if potential.is_empty() {
            return Some(failed(Code::UnschedulableAndUnresolvable, NO_VICTIMS));
        }

        // The group's trial with every possible victim gone, in fresh cycle states.
        let mut working = base.clone();
        for v in &potential {
            for p in &v.pods {
                forget_in(&mut working, p, p.node_name().unwrap_or_default());
            }
        }
        let mut trial: Vec<Attempt> = attempts
            .iter()
            .map(|a| {
                let mut state = CycleState::new();
                a.fwk.begin_cycle(&mut state, &a.qpi.pod_info);
                Attempt {
                    fwk: a.fwk.clone(),
                    state,
                    qpi: a.qpi.clone(),
                    cycle: a.cycle,
                    start: Instant::now(),
                    trace: None,
                }
            })
            .collect();
        let nominated = working.nominated.clone();
        let mut run = self.pod_group_algorithm(&mut working, &mut trial, scheduled, feasible, false);
        let mut status = run.status.clone();
        if status.code() == Code::Wait {
            status = Status::unschedulable(status.message());
        }
        if status.is_success() && !run.any_fit {
            status = Status::code_only(Code::Unschedulable);
        }
        // Upstream's pod group scheduling function reverts its trials before the victims are given back.
        let assigned: Vec<(usize, Arc<PodInfo>, String)> = run.trials.clone();
        self.revert_trials(&mut working, &mut trial, &mut run.trials);
        working.nominated = nominated;
        if !status.is_success() {
            let msg = if status.message().is_empty() { "pod group is unschedulable".into() } else { status.message() };
            let code = if status.code() == Code::Error { Code::Error } else { Code::Unschedulable };
            return Some(failed(code, &msg));
        }

        potential.sort_by(more_important_first);
        let pods: Vec<&[Arc<PodInfo>]> = potential.iter().map(|v| v.pods.as_slice()).collect();
        let (violating, non_violating) = default_preemption::split_victims_by_pdb_violation(&pods, base);
        let mut evicted: Vec<usize> = Vec::new();
        let mut num_violations = 0;
        let order = violating.iter().map(|&(i, n)| (i, n)).chain(non_violating.iter().map(|&i| (i, 0)));
        for (i, violations) in order {
            match self.reprieve(&mut working, &mut trial, &assigned, &potential[i]) {
                Ok(true) => {}
                Ok(false) => {
                    evicted.push(i);
                    num_violations += violations;
                }
                Err(s) => return Some(failed(Code::Error, &s.message())),
            }
        }
        evicted.sort_by(|&a, &b| more_important_first(&potential[a], &potential[b]));
        let victims: Vec<Arc<PodInfo>> = evicted.iter().flat_map(|&i| potential[i].pods.iter().cloned()).collect();
        tracing::debug!(
            pod_group = group.metadata.name.as_deref().unwrap_or_default(),
            victims = victims.len(),
            pdb_violations = num_violations,
            "pod group preemption found a placement"
        );
        let mut nominations: Vec<Option<String>> = attempts.iter().map(|_| None).collect();
        for (i, _, node) in &assigned {
            nominations[*i] = Some(node.clone());
        }
        let found = format!("found a placement for podgroup, preempting {} victims", victims.len());
        Some(GroupPreemption {
            status: Status::new(Code::Success, format!("{MESSAGE_PREFIX}{found}")),
            victims,
            nominations,
        })
    }

    /// Gives `victim` back to `working` and answers whether every member still fits on its trial node, each
    /// assumed and reserved there in turn for the next (upstream's `reprieveVictim`). A victim that does not fit
    /// is taken out again; the members are taken out either way.
    fn reprieve(
        &self,
        working: &mut Snapshot,
        trial: &mut [Attempt],
        assigned: &[(usize, Arc<PodInfo>, String)],
        victim: &Victim,
    ) -> Result<bool, Status> {
        let snapshot_node = |w: &Snapshot, name: &str| {
            w.get(name).cloned().ok_or_else(|| Status::error(format!("node {name} is not in the snapshot")))
        };
        for p in &victim.pods {
            let node = p.node_name().unwrap_or_default();
            place_in(working, p, node);
            let n = snapshot_node(working, node)?;
            for (i, member, _) in assigned {
                let a = &mut trial[*i];
                let s = a.fwk.run_pre_filter_add_pod(&mut a.state, member, p, &n, working);
                if !s.is_success() {
                    return Err(s);
                }
            }
        }
        let mut placed: Vec<(usize, Arc<PodInfo>, String)> = Vec::new();
        let mut fits = true;
        for (i, member, node) in assigned {
            let n = snapshot_node(working, node)?;
            let a = &mut trial[*i];
            if !a.fwk.run_filter_plugins_with_nominated_pods(&a.state, member, &n, working).is_success() {
                fits = false;
                break;
            }
            place_in(working, member, node);
            a.fwk.run_reserve(&mut a.state, member, node);
            placed.push((*i, member.clone(), node.clone()));
        }
        let mut result = Ok(fits);
        if !fits {
            for p in &victim.pods {
                let node = p.node_name().unwrap_or_default();
                forget_in(working, p, node);
                let n = snapshot_node(working, node)?;
                for (i, member, _) in assigned {
                    let a = &mut trial[*i];
                    let s = a.fwk.run_pre_filter_remove_pod(&mut a.state, member, p, &n, working);
                    if !s.is_success() && result.is_ok() {
                        result = Err(s);
                    }
                }
            }
        }
        for (i, member, node) in placed.into_iter().rev() {
            let a = &mut trial[i];
            a.fwk.clone().run_unreserve(&mut a.state, &member, &node);
            forget_in(working, &member, &node);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn victim(priority: i32, rank: u8, pods: usize, earliest: i64) -> Victim {
        let v = serde_json::json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}});
        let pod = Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap());
        Victim { pods: vec![pod; pods], priority, rank, earliest }
    }

    #[test]
    fn victims_are_ordered_as_upstreams_more_important_victim() {
        let mut v =
            [victim(1, 1, 1, 5), victim(1, 1, 1, 3), victim(1, 2, 1, 9), victim(1, 2, 3, 9), victim(5, 1, 1, 9)];
        v.sort_by(more_important_first);
        let got: Vec<(i32, u8, usize, i64)> =
            v.iter().map(|v| (v.priority, v.rank, v.pods.len(), v.earliest)).collect();
        assert_eq!(got, [(5, 1, 1, 9), (1, 2, 3, 9), (1, 2, 1, 9), (1, 1, 1, 3), (1, 1, 1, 5)]);
    }
}
