//! `WasmPlugin` behind the framework's traits, one impl per extension point, so the runner cannot tell it from a
//! native plugin. Each adapter converts its arguments, makes its guest calls and converts the answer; a failed
//! call answers what the failure table (`failure`) says, never a fallback of the adapter's own.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::bindings::exports::kws::plugin::declarations::Declared;
use super::bindings::kws::plugin::types as wit;
use super::convert;
use super::failure::{Call, Failed};
use super::instance::{cached_guest, guest, trap, with_pod_ref, CallError, CycleCtx, GuestInstance, Loaded};
use super::WasmPlugin;
use crate::framework::ExtensionPoint as P;
use crate::framework::Snapshot;
use crate::framework::*;
use crate::plugins::helper::normalize_to_max;

impl Plugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.name
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        match self.current().events.get() {
            Some(events) => events.clone(),
            None => ClusterEvent::all(),
        }
    }
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        if self.current().idx.events.is_none() {
            return QueueingHint::Queue;
        }
        let (p, e) = (convert::pod(pod), convert::cluster_event(event));
        let (old, new) = (old.and_then(convert::event_object), new.and_then(convert::event_object));
        let r = self.call(&self.ctx(None), Call::QueueingHint, |_, l, i| {
            let g = guest!(l, i, events);
            g.call_queueing_hint(&mut i.store, &p, e, old.as_ref(), new.as_ref()).map_err(trap)
        });
        match r {
            Ok(wit::QueueingHint::QueueSkip) => QueueingHint::QueueSkip,
            // A failed hint retries the pod (the failure table's only answer for it).
            Ok(wit::QueueingHint::Queue) | Err(_) => QueueingHint::Queue,
        }
    }
    fn begin_cycle(&self, state: &mut CycleState, pod: &Arc<PodInfo>) {
        state.write(self.state_key.clone(), CycleCtx::new(self.current()).for_pod(pod.clone()));
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        self.current().idx.pre_enqueue.as_ref().map(|_| self as _)
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        self.current().idx.queue_sort.as_ref().map(|_| self as _)
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        self.current().idx.pre_filter.as_ref().map(|_| self as _)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        self.current().idx.filter.as_ref().map(|_| self as _)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        self.current().idx.post_filter.as_ref().map(|_| self as _)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        self.current().idx.pre_score.as_ref().map(|_| self as _)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        self.current().idx.score.as_ref().map(|_| self as _)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        self.current().idx.reserve.as_ref().map(|_| self as _)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        self.current().idx.permit.as_ref().map(|_| self as _)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        self.current().idx.pre_bind.as_ref().map(|_| self as _)
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        self.current().idx.bind.as_ref().map(|_| self as _)
    }
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        let idx = &self.current().idx;
        (idx.post_bind.is_some() || idx.post_bind_ref.is_some()).then_some(self as _)
    }
}

impl PreEnqueuePlugin for WasmPlugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let p = convert::pod(pod);
        let r = self.call(&self.ctx(None), P::PreEnqueue.into(), |_, l, i| {
            Ok(convert::status(guest!(l, i, pre_enqueue).call_pre_enqueue(&mut i.store, &p).map_err(trap)?))
        });
        r.unwrap_or_else(Failed::status)
    }
}

impl QueueSortPlugin for WasmPlugin {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (qa, qb) = (self.queued_pods.get(a), self.queued_pods.get(b));
        let r = self.call(&self.ctx(None), P::QueueSort.into(), |_, l, i| {
            cached_guest!(l, i, queue_sort).call_less(&mut i.store, &qa, &qb).map_err(trap)
        });
        r.unwrap_or_else(|failed| {
            // The table's only answer for QueueSort, under either policy.
            debug_assert!(failed.keeps_arrival_order(), "{:?}", failed.fallback);
            a.timestamp < b.timestamp
        })
    }

    fn sort_key(&self, pod: &QueuedPodInfo) -> Option<Arc<[u8]>> {
        let ctx = self.ctx(None);
        if ctx.loaded().gives_sort_keys() == Some(false) {
            return None;
        }
        let r = if ctx.loaded().idx.sort_key_ref.is_some() {
            // By reference: the guest reads the fields its key needs, and no pod record is built or copied.
            let (ts, attempts) = (pod.timestamp, pod.attempts);
            self.call(&ctx, P::QueueSort.into(), |_, l, i| {
                let g = cached_guest!(l, i, sort_key_ref);
                with_pod_ref(&mut i.store, pod.pod_info.clone(), |store, r| g.call_sort_key(store, r, ts, attempts))
            })
        } else {
            let q = self.queued_pods.get(pod);
            self.call(&ctx, P::QueueSort.into(), |_, l, i| {
                cached_guest!(l, i, queue_sort).call_sort_key(&mut i.store, &q).map_err(trap)
            })
        };
        match r {
            Ok(key) => {
                // The first answer tells whether this version gives keys; a less-only sort is not asked again.
                ctx.loaded().saw_sort_key(key.is_some());
                key.map(Arc::from)
            }
            // A failed call gives no key: `less` decides, and its own failure keeps arrival order.
            Err(_) => None,
        }
    }
}

impl PreFilterPlugin for WasmPlugin {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let p = convert::pod(pod);
        let r = self.call(&self.ctx(Some(state)), P::PreFilter.into(), |_, l, i| {
            let r = guest!(l, i, pre_filter).call_pre_filter(&mut i.store, &p).map_err(trap)?;
            Ok((r.node_names.map(|v| v.into_iter().collect()), convert::status(r.status)))
        });
        r.unwrap_or_else(|failed| (None, failed.status()))
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        add: &Arc<PodInfo>,
        node: &NodeInfo,
        _s: &Snapshot,
    ) -> Status {
        self.what_if(state, pod, add, node, true)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        remove: &Arc<PodInfo>,
        node: &NodeInfo,
        _s: &Snapshot,
    ) -> Status {
        self.what_if(state, pod, remove, node, false)
    }
}

impl WasmPlugin {
    /// AddPod (`add`) or RemovePod of `other` on `node`, for a preemption what-if.
    fn what_if(&self, state: &CycleState, pod: &PodInfo, other: &PodInfo, node: &NodeInfo, add: bool) -> Status {
        let (p, o) = (convert::pod(pod), convert::pod(other));
        let r = self.call(&self.ctx(Some(state)), if add { Call::AddPod } else { Call::RemovePod }, |me, l, i| {
            let slot = me.sync(l, i, &[node])?[0];
            let g = guest!(l, i, pre_filter);
            let s = if add {
                g.call_add_pod(&mut i.store, &p, &o, slot)
            } else {
                g.call_remove_pod(&mut i.store, &p, &o, slot)
            };
            Ok(convert::status(s.map_err(trap)?))
        });
        r.unwrap_or_else(Failed::status)
    }
}

impl FilterPlugin for WasmPlugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let mut out = Vec::with_capacity(1);
        self.filter_nodes(state, pod, &[node], &mut out);
        out.pop().unwrap_or_else(Status::success)
    }

    /// One crossing per batch: the nodes that changed, then the slots.
    fn filter_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut Vec<Status>) {
        let ctx = self.ctx(Some(state)).for_nodes(nodes);
        let r = self.call(&ctx, P::Filter.into(), |me, l, i| {
            me.begin(&ctx, pod, l, i)?;
            let slots = me.sync(l, i, nodes)?;
            let answer = cached_guest!(l, i, filter).call_filter(&mut i.store, &slots).map_err(trap)?;
            convert::filter_verdicts(answer, nodes.len(), out).map_err(CallError::Invalid)
        });
        if let Err(failed) = r {
            // The one answer stands for every node of the batch.
            let s = failed.status();
            out.extend(nodes.iter().map(|_| s.clone()));
        }
    }
}

impl PostFilterPlugin for WasmPlugin {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        filtered: &NodeToStatus,
        handle: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        let p = convert::pod(pod);
        let nodes: Vec<&NodeInfo> = filtered.keys().filter_map(|n| handle.snapshot().get(n).map(|a| &**a)).collect();
        let r = self.call(&self.ctx(Some(state)), P::PostFilter.into(), |me, l, i| {
            let slots = me.sync(l, i, &nodes)?;
            let rejected: Vec<(u32, wit::Status)> =
                slots.iter().zip(&nodes).map(|(s, n)| (*s, convert::status_to_wit(&filtered[&n.name]))).collect();
            let r = guest!(l, i, post_filter).call_post_filter(&mut i.store, &p, &rejected).map_err(trap)?;
            Ok((
                r.nominated_node.map(|n| PostFilterResult { nominated_node_name: Some(n), victims: Vec::new() }),
                convert::status(r.status),
            ))
        });
        r.unwrap_or_else(|failed| (None, failed.status()))
    }
}

impl PreScorePlugin for WasmPlugin {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>], _s: &Snapshot) -> Status {
        let p = convert::pod(pod);
        let refs: Vec<&NodeInfo> = nodes.iter().map(|n| &**n).collect();
        let r = self.call(&self.ctx(Some(state)), P::PreScore.into(), |me, l, i| {
            let slots = me.sync(l, i, &refs)?;
            Ok(convert::status(guest!(l, i, pre_score).call_pre_score(&mut i.store, &p, &slots).map_err(trap)?))
        });
        r.unwrap_or_else(Failed::status)
    }
}

impl ScorePlugin for WasmPlugin {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let mut out = [0i64];
        let s = self.score_nodes(state, pod, &[node], &mut out);
        if s.is_success() {
            Ok(out[0])
        } else {
            Err(s)
        }
    }

    /// One crossing per batch: the nodes that changed, then the slots.
    fn score_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut [i64]) -> Status {
        let ctx = self.ctx(Some(state));
        if !ctx.loaded().declares(Declared::SCORE_READS_NODE_ONLY) {
            let r = self.score_guest(&ctx.for_nodes(nodes), pod, nodes);
            return self.score_answer(r, out, |v, out| out.copy_from_slice(&v));
        }
        // The guest promised that a node's score depends on nothing but the node: scores kept from earlier pods
        // stand until the node changes, and the guest scores only the rest.
        let loaded = ctx.loaded().clone();
        let missing = loaded.kept_scores(nodes, out);
        self.stats.scores_reused.fetch_add((nodes.len() - missing.len()) as u64, Ordering::Relaxed);
        if missing.is_empty() {
            return Status::success();
        }
        let fresh: Vec<&NodeInfo> = missing.iter().map(|&k| nodes[k]).collect();
        let r = self.score_guest(&ctx.for_nodes(&fresh), pod, &fresh);
        self.score_answer(r, out, |scores, out| {
            loaded.keep_scores(&fresh, &scores);
            for (&k, score) in missing.iter().zip(scores) {
                out[k] = score;
            }
        })
    }

    fn normalize_score(&self, state: &CycleState, pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        let ctx = self.ctx(Some(state));
        let loaded = ctx.loaded();
        if loaded.declares(Declared::SCORE_NEEDS_NO_NORMALIZE) {
            // Its NormalizeScore would keep the scores as they are (asked only to explain a decision, or by a
            // cycle that began before a reload to a version that normalizes).
            return Status::success();
        }
        // Upstream's helper, which the guest promised its NormalizeScore is: computed here, no call.
        let reversed = loaded.declares(Declared::NORMALIZE_DEFAULT_REVERSED);
        if reversed || loaded.declares(Declared::NORMALIZE_DEFAULT) {
            self.stats.normalized_by_host.fetch_add(1, Ordering::Relaxed);
            return normalize_to_max(reversed, scores);
        }
        let slots: Vec<u32> = scores.iter().map(|s| s.id).collect();
        let raw: Vec<i64> = scores.iter().map(|s| s.score).collect();
        let r = self.call(&ctx, Call::NormalizeScore, |me, l, i| {
            me.begin(&ctx, pod, l, i)?;
            let r = cached_guest!(l, i, score).call_normalize_score(&mut i.store, &slots, &raw).map_err(trap)?;
            match r {
                Ok(v) if v.len() != raw.len() => {
                    Err(CallError::Invalid(format!("returned {} normalized scores for {} nodes", v.len(), raw.len())))
                }
                // Checked here rather than by the runner, so that the failure policy applies (the runner's check
                // after normalizing would fail the pod under either policy).
                Ok(v) => match v.iter().find(|s| !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(*s)) {
                    Some(bad) => Err(CallError::Invalid(format!(
                        "returned an invalid score {bad}, it should be in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
                    ))),
                    None => Ok(Ok(v)),
                },
                Err(s) => Ok(Err(s)),
            }
        });
        match r {
            Ok(Ok(v)) => {
                for (s, n) in scores.iter_mut().zip(v) {
                    s.score = n;
                }
                Status::success()
            }
            Ok(Err(s)) => convert::status(s).with_plugin(&self.name),
            Err(failed) => {
                if failed.zeroes_scores() {
                    scores.iter_mut().for_each(|s| s.score = 0);
                }
                failed.status()
            }
        }
    }

    fn has_normalize(&self) -> bool {
        !self.current().declares(Declared::SCORE_NEEDS_NO_NORMALIZE)
    }
}

impl WasmPlugin {
    /// The adapter's answer to a Score call: `place` puts the guest's scores into `out`; a failed call whose
    /// fallback zeroes scores zeroes every node's (kept scores included, as if none had been kept).
    fn score_answer(
        &self,
        r: Result<Result<Vec<i64>, wit::Status>, Failed>,
        out: &mut [i64],
        place: impl FnOnce(Vec<i64>, &mut [i64]),
    ) -> Status {
        match r {
            Ok(Ok(v)) => {
                place(v, out);
                Status::success()
            }
            // The guest's own Error status (e.g. a bad label value) fails the pod's attempt, as upstream.
            Ok(Err(s)) => convert::status(s).with_plugin(&self.name),
            Err(failed) => {
                if failed.zeroes_scores() {
                    out.fill(0);
                }
                failed.status()
            }
        }
    }

    /// Calls the guest's Score on `nodes` (the cycle begun and the nodes' rows sent first): one raw score per node,
    /// the guest's own status, or the failed call.
    fn score_guest(
        &self,
        ctx: &CycleCtx,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
    ) -> Result<Result<Vec<i64>, wit::Status>, Failed> {
        self.call(ctx, P::Score.into(), |me, l, i| {
            me.begin(ctx, pod, l, i)?;
            let slots = if l.declares(Declared::SCORE_READS_NO_NODE) {
                // Slots only: its table is not brought up to date for a Score that reads no node.
                nodes.iter().map(|n| n.id).collect()
            } else {
                me.sync(l, i, nodes)?
            };
            let scores = cached_guest!(l, i, score).call_score(&mut i.store, &slots).map_err(trap)?;
            match scores {
                Ok(v) if v.len() != nodes.len() => {
                    Err(CallError::Invalid(format!("returned {} scores for {} nodes", v.len(), nodes.len())))
                }
                r => Ok(r),
            }
        })
    }
}

impl WasmPlugin {
    /// A call at a point whose guest function takes the pod and the chosen node and answers a status.
    fn at_node(
        &self,
        state: Option<&CycleState>,
        call: Call,
        pod: &PodInfo,
        f: impl FnOnce(&Loaded, &mut GuestInstance, &wit::Pod) -> Result<Status, CallError>,
    ) -> Status {
        let p = convert::pod(pod);
        self.call(&self.ctx(state), call, |_, l, i| f(l, i, &p)).unwrap_or_else(Failed::status)
    }
}

impl ReservePlugin for WasmPlugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.at_node(Some(state), P::Reserve.into(), pod, |l, i, p| {
            Ok(convert::status(guest!(l, i, reserve).call_reserve(&mut i.store, p, node).map_err(trap)?))
        })
    }
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        self.at_node(Some(state), Call::Unreserve, pod, |l, i, p| {
            guest!(l, i, reserve).call_unreserve(&mut i.store, p, node).map_err(trap)?;
            Ok(Status::success())
        });
    }
}

impl PermitPlugin for WasmPlugin {
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> (Status, Duration) {
        let p = convert::pod(pod);
        let r = self.call(&self.ctx(Some(state)), P::Permit.into(), |_, l, i| {
            let r = guest!(l, i, permit).call_permit(&mut i.store, &p, node).map_err(trap)?;
            Ok((convert::status(r.status), Duration::from_millis(r.timeout_ms)))
        });
        r.unwrap_or_else(|failed| (failed.status(), Duration::ZERO))
    }
}

impl PreBindPlugin for WasmPlugin {
    fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        self.at_node(Some(state), P::PreBind.into(), pod, |l, i, p| {
            Ok(convert::status(guest!(l, i, pre_bind).call_pre_bind(&mut i.store, p, node).map_err(trap)?))
        })
    }
}

impl BindPlugin for WasmPlugin {
    fn bind(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.at_node(Some(state), P::Bind.into(), pod, |l, i, p| {
            Ok(convert::status(guest!(l, i, bind).call_bind(&mut i.store, p, node).map_err(trap)?))
        })
    }
}

impl PostBindPlugin for WasmPlugin {
    fn post_bind(&self, state: &mut CycleState, pod: &Arc<PodInfo>, node: &str) {
        let ctx = self.ctx(Some(state));
        if ctx.loaded().idx.post_bind_ref.is_some() {
            // By reference: the guest reads the fields it uses, and no pod record is built or copied.
            let _ = self.call(&ctx, P::PostBind.into(), |_, l, i| {
                let g = cached_guest!(l, i, post_bind_ref);
                with_pod_ref(&mut i.store, pod.clone(), |store, r| g.call_post_bind(store, r, node))
            });
            return;
        }
        let p = convert::pod(pod);
        let _ = self.call(&ctx, P::PostBind.into(), |_, l, i| {
            cached_guest!(l, i, post_bind).call_post_bind(&mut i.store, &p, node).map_err(trap)
        });
    }
}
