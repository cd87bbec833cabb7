//! The failure policy (`failurePolicy` in a Wasm plugin's args), after upstream's webhook `failurePolicy`: what a
//! guest call that failed answers in the plugin's place. [`fallback`] is the one table, by extension point and
//! policy; every adapter applies a failure through [`Failed`], so no adapter decides its own fallback.
//!
//! A failure here is a call that trapped (memory cap included), overran its deadline, could not get an instance,
//! was not made because the plugin's circuit breaker is open, or answered something the host cannot use (Filter
//! verdicts, scores or normalized scores not one per node, normalized scores outside [0, 100]). A status the guest
//! returns itself, even an Error, is its answer, not a failure.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::args::{CircuitBreakerArgs, FailurePolicy};
use crate::framework::{ExtensionPoint, Status};

/// A guest function the host calls: an extension point's own, or one that upstream hangs off a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// The point's own function (`pre-filter`, `score`, `reserve`, ...).
    Point(ExtensionPoint),
    /// PreFilter's AddPod: a preemption what-if with one more pod on a node.
    AddPod,
    /// PreFilter's RemovePod: a preemption what-if with one pod fewer on a node.
    RemovePod,
    /// Score's NormalizeScore.
    NormalizeScore,
    /// Reserve's Unreserve, whose answer the framework does not read.
    Unreserve,
    /// The queueing hint of the plugin's registered events (`events.queueing-hint`).
    QueueingHint,
    /// The events the plugin registers (`events.events-to-register`), asked when a version loads.
    EventsToRegister,
    /// The plugin's promises (`declarations.declare`), asked when a version loads.
    Declare,
}

impl Call {
    /// Its name in messages and logs: upstream's metric name for it (`PreFilter`, `NormalizeScore`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Call::Point(point) => point.metric_name(),
            Call::AddPod => "PreFilter.AddPod",
            Call::RemovePod => "PreFilter.RemovePod",
            Call::NormalizeScore => "NormalizeScore",
            Call::Unreserve => "Unreserve",
            Call::QueueingHint => "QueueingHint",
            Call::EventsToRegister => "EventsToRegister",
            Call::Declare => "Declare",
        }
    }
}

impl From<ExtensionPoint> for Call {
    fn from(point: ExtensionPoint) -> Call {
        Call::Point(point)
    }
}

/// What a failed call answers in the plugin's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// The Error status naming the plugin and the call, so the pod's attempt fails (upstream's semantics for a
    /// failing plugin). Filter gives it for every node, Permit with no wait, PreFilter and PostFilter with no
    /// result.
    Error,
    /// Success: the plugin is left out of this decision. Filter passes every node, Permit allows at once.
    Success,
    /// Success with every node scored 0, so the plugin does not tip the ranking.
    ZeroScores,
    /// Skip: the plugin also sits out the point this one prepares (its Filter after PreFilter, its Score after
    /// PreScore); at Bind, the next binder binds the pod.
    Skip,
    /// Unschedulable with no message: PostFilter made no node available.
    Unschedulable,
    /// Arrival order, as QueueSort's fallback under either policy: a sort cannot reject a pod, and the queue must
    /// stay ordered.
    ArrivalOrder,
    /// Queue: a queueing hint that failed retries the pod, under either policy (upstream does the same with a
    /// hint's error), so a broken hint can delay a pod but never strand it.
    Queue,
}

/// The failure table: what a failed `call` answers under `policy`.
pub(crate) fn fallback(call: Call, policy: FailurePolicy) -> Fallback {
    use ExtensionPoint as P;
    match (policy, call) {
        (_, Call::Point(P::QueueSort)) => Fallback::ArrivalOrder,
        (_, Call::QueueingHint) => Fallback::Queue,
        // Asked at load: a failure refuses the version, whatever the policy.
        (_, Call::EventsToRegister | Call::Declare) => Fallback::Error,
        (FailurePolicy::Fail, _) => Fallback::Error,
        // Bind's Skip hands the pod to the next binder (DefaultBinder), so an ignored Bind still binds it.
        (FailurePolicy::Ignore, Call::Point(P::PreFilter | P::PreScore | P::Bind)) => Fallback::Skip,
        (FailurePolicy::Ignore, Call::Point(P::PostFilter)) => Fallback::Unschedulable,
        (FailurePolicy::Ignore, Call::Point(P::Score) | Call::NormalizeScore) => Fallback::ZeroScores,
        (
            FailurePolicy::Ignore,
            Call::Point(P::PreEnqueue | P::Filter | P::Reserve | P::Permit | P::PreBind | P::PostBind)
            | Call::AddPod
            | Call::RemovePod
            | Call::Unreserve,
        ) => Fallback::Success,
    }
}

/// A failed call: its Error status (already counted and logged) and what the table makes of it.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    /// The Error status naming the plugin, the call and what went wrong.
    pub(crate) error: Status,
    /// The table's answer for the call under the plugin's policy.
    pub(crate) fallback: Fallback,
}

impl Failed {
    /// The status the plugin answers instead (for QueueSort, which answers no status, Success).
    pub(crate) fn status(self) -> Status {
        match self.fallback {
            Fallback::Error => self.error,
            Fallback::Success | Fallback::ZeroScores | Fallback::ArrivalOrder | Fallback::Queue => Status::success(),
            Fallback::Skip => Status::skip(),
            Fallback::Unschedulable => Status::unschedulable(""),
        }
    }

    /// True when the plugin's scores become 0.
    pub(crate) fn zeroes_scores(&self) -> bool {
        self.fallback == Fallback::ZeroScores
    }

    /// True when a comparison falls back to arrival order.
    pub(crate) fn keeps_arrival_order(&self) -> bool {
        self.fallback == Fallback::ArrivalOrder
    }
}

/// A plugin's circuit breaker: after `consecutive_failures` failed calls in a row it opens, and for the back-off
/// period every call fails at once (answering what the failure table says) instead of reaching the guest, so a
/// stuck guest costs a few deadlines, not one per call (a stuck QueueSort would otherwise cost a deadline per
/// comparison). When the period ends one call (the probe) is let through while the others still answer the
/// fallback; its failure reopens the breaker for twice as long (up to the maximum), its success closes it.
#[derive(Debug)]
pub(crate) struct Breaker {
    args: CircuitBreakerArgs,
    state: Mutex<BreakerState>,
}

#[derive(Debug, Default)]
struct BreakerState {
    /// Failed calls since the last success.
    consecutive: u32,
    /// While open: until when.
    open_until: Option<Instant>,
    /// The back-off is over and one call (the probe) was let through; the others still answer the fallback.
    probing: bool,
    /// The back-off of the next opening.
    next_backoff: Duration,
    /// Why the last call failed (what an open breaker's status repeats).
    last_failure: Option<Arc<str>>,
}

/// What the breaker says before a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Make the call.
    Call,
    /// Don't: the breaker is open for this much longer; why the last call failed.
    Open(Duration, Arc<str>),
}

impl Breaker {
    /// A closed breaker.
    pub(crate) fn new(args: CircuitBreakerArgs) -> Breaker {
        let state = BreakerState { next_backoff: args.backoff, ..Default::default() };
        Breaker { args, state: Mutex::new(state) }
    }

    /// Whether a call may go to the guest now; the clock is read only when the breaker is open (every guest call
    /// asks).
    pub(crate) fn gate_now(&self) -> Gate {
        if self.state.lock().expect("breaker lock").open_until.is_none() {
            return Gate::Call;
        }
        self.gate(Instant::now())
    }

    /// Records a call's outcome as [`Breaker::record`] does at the present moment, which only a failure reads.
    pub(crate) fn record_now(&self, failure: Option<&str>) -> Option<Duration> {
        match failure {
            None => {
                self.succeeded();
                None
            }
            Some(_) => self.record(failure, Instant::now()),
        }
    }

    /// A success closes the breaker and forgets the failures before it.
    fn succeeded(&self) {
        let mut s = self.state.lock().expect("breaker lock");
        *s = BreakerState { next_backoff: self.args.backoff, ..Default::default() };
    }

    /// Whether a call may go to the guest at `now`.
    pub(crate) fn gate(&self, now: Instant) -> Gate {
        let mut s = self.state.lock().expect("breaker lock");
        let Some(until) = s.open_until else { return Gate::Call };
        if now >= until && !s.probing {
            s.probing = true;
            return Gate::Call;
        }
        Gate::Open(until.saturating_duration_since(now), s.last_failure.clone().unwrap_or_else(|| Arc::from("")))
    }

    /// Records a call's outcome (`None`: success; else why it failed); returns the back-off when this failure
    /// opened the breaker.
    pub(crate) fn record(&self, failure: Option<&str>, now: Instant) -> Option<Duration> {
        let Some(why) = failure else {
            self.succeeded();
            return None;
        };
        let mut s = self.state.lock().expect("breaker lock");
        s.last_failure = Some(Arc::from(why));
        s.consecutive = s.consecutive.saturating_add(1);
        if s.probing {
            // The probe failed: open again, for longer.
            s.probing = false;
        } else if s.open_until.is_some() {
            // A call that began before the breaker opened: it is open already.
            return None;
        } else if self.args.consecutive_failures == 0 || s.consecutive < self.args.consecutive_failures {
            return None;
        }
        let backoff = s.next_backoff;
        s.open_until = Some(now + backoff);
        s.next_backoff = (backoff * 2).min(self.args.max_backoff);
        Some(backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use ExtensionPoint as P;

    #[test]
    fn the_table_by_call_and_policy() {
        use Fallback::*;
        let rows = [
            (Call::Point(P::PreEnqueue), Error, Success),
            (Call::Point(P::QueueSort), ArrivalOrder, ArrivalOrder),
            (Call::Point(P::PreFilter), Error, Skip),
            (Call::AddPod, Error, Success),
            (Call::RemovePod, Error, Success),
            (Call::Point(P::Filter), Error, Success),
            (Call::Point(P::PostFilter), Error, Unschedulable),
            (Call::Point(P::PreScore), Error, Skip),
            (Call::Point(P::Score), Error, ZeroScores),
            (Call::NormalizeScore, Error, ZeroScores),
            (Call::Point(P::Reserve), Error, Success),
            (Call::Unreserve, Error, Success),
            (Call::Point(P::Permit), Error, Success),
            (Call::Point(P::PreBind), Error, Success),
            (Call::Point(P::Bind), Error, Skip),
            (Call::Point(P::PostBind), Error, Success),
        ];
        for (call, fail, ignore) in rows {
            assert_eq!(fallback(call, FailurePolicy::Fail), fail, "{call:?} Fail");
            assert_eq!(fallback(call, FailurePolicy::Ignore), ignore, "{call:?} Ignore");
        }
        // Every point's own function has a row.
        for point in ExtensionPoint::ALL {
            assert!(rows.iter().any(|(c, _, _)| *c == Call::Point(point)), "{point}");
        }
    }

    #[test]
    fn statuses_a_failure_answers() {
        let failed = |fallback| Failed { error: Status::error("boom"), fallback };
        for (fallback, code, message) in [
            (Fallback::Error, Code::Error, "boom"),
            (Fallback::Success, Code::Success, ""),
            (Fallback::ZeroScores, Code::Success, ""),
            (Fallback::Skip, Code::Skip, ""),
            (Fallback::Unschedulable, Code::Unschedulable, ""),
            (Fallback::ArrivalOrder, Code::Success, ""),
        ] {
            let s = failed(fallback).status();
            assert_eq!((s.code(), s.message()), (code, message.to_string()), "{fallback:?}");
        }
    }

    #[test]
    fn call_names_are_upstream_s() {
        assert_eq!(Call::from(P::PreFilter).name(), "PreFilter");
        assert_eq!(Call::AddPod.name(), "PreFilter.AddPod");
        assert_eq!(Call::RemovePod.name(), "PreFilter.RemovePod");
        assert_eq!(Call::NormalizeScore.name(), "NormalizeScore");
        assert_eq!(Call::Unreserve.name(), "Unreserve");
    }

    #[test]
    fn the_breaker_opens_after_n_failures_and_backs_off() {
        let args = CircuitBreakerArgs {
            consecutive_failures: 3,
            backoff: Duration::from_secs(10),
            max_backoff: Duration::from_secs(25),
        };
        let b = Breaker::new(args);
        let t0 = Instant::now();
        assert_eq!(b.record(Some("boom"), t0), None);
        assert_eq!(b.record(Some("boom"), t0), None);
        assert_eq!(b.gate(t0), Gate::Call);
        assert_eq!(b.record(Some("boom"), t0), Some(Duration::from_secs(10)), "the third failure in a row opens it");
        assert_eq!(b.gate(t0 + Duration::from_secs(4)), Gate::Open(Duration::from_secs(6), Arc::from("boom")));
        // A call that began before it opened and fails now does not reopen it (nor lengthen the back-off).
        assert_eq!(b.record(Some("boom"), t0 + Duration::from_secs(5)), None);
        // Half open: one call goes through, the others still wait; its failure reopens at once, for twice as long.
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(b.gate(t1), Gate::Call);
        assert_eq!(b.gate(t1), Gate::Open(Duration::ZERO, Arc::from("boom")), "one probe at a time");
        assert_eq!(b.record(Some("boom"), t1), Some(Duration::from_secs(20)));
        let t2 = t1 + Duration::from_secs(20);
        assert_eq!(b.gate(t2), Gate::Call);
        assert_eq!(b.record(Some("boom"), t2), Some(Duration::from_secs(25)), "capped");
        // A successful probe closes it and resets the back-off.
        let t3 = t2 + Duration::from_secs(25);
        assert_eq!(b.gate(t3), Gate::Call);
        assert_eq!(b.record(None, t3), None);
        assert_eq!(b.gate(t3), Gate::Call);
        assert_eq!((b.record(Some("boom"), t3), b.record(Some("boom"), t3)), (None, None));
        assert_eq!(b.record(Some("boom"), t3), Some(Duration::from_secs(10)));
        // A success between failures restarts the count.
        let b = Breaker::new(args);
        for _ in 0..10 {
            assert_eq!(
                (b.record(Some("boom"), t0), b.record(Some("boom"), t0), b.record(None, t0)),
                (None, None, None)
            );
        }
        // 0 disables it.
        let b = Breaker::new(CircuitBreakerArgs { consecutive_failures: 0, ..args });
        assert!((0..100).all(|_| b.record(Some("boom"), t0).is_none()));
    }
}
