//! events.k8s.io/v1 Events written off the caller's thread, the way client-go's events broadcaster
//! (k8s.io/client-go/tools/events, event_broadcaster.go) writes them for kube-scheduler:
//!
//! - `record` only queues: the queue holds 1,000 events and drops the next ones while it is full (upstream's
//!   `maxQueuedEvents` with `DropIfChannelFull`), so a slow or unreachable API server never stalls scheduling.
//! - Isomorphic events (same type, action, reason, reporting controller and instance, regarding and related
//!   object) form a series: the first is created; the first repeat patches it with `series: {count: 2,
//!   lastObservedTime}`; later repeats only count in the cache. Every 30 minutes each ongoing series is written
//!   again, so the stored Event outlives the API server's event TTL; a series not observed for 6 minutes is
//!   finished (its last count written, then forgotten), a single event that old is forgotten.
//! - A write that the API server answers with an error status is not retried (the same request would be refused
//!   again); a transport error is, up to 12 tries about 10 s apart. Writes run concurrently.
//! - `flush`, at shutdown, waits for the queue and writes the counts of series that moved since their last write,
//!   which the 6-minute finishing would have written had the process lived on.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{mpsc, Notify, Semaphore};

/// How the recorder paces itself; `Tuning::UPSTREAM` has client-go's figures (but for `writers`).
#[derive(Debug, Clone)]
struct Tuning {
    /// Events waiting to be written (`maxQueuedEvents`); more are dropped.
    queue: usize,
    /// Writes under way at once. client-go v0.34 starts a goroutine per event (which an unreachable API server
    /// lets pile up); its main branch has 8 `recordWorkers`, which kept up with kube-scheduler but not with us: at
    /// ~750 bindings/s over a 2,000-pod backlog the queue overflowed and a third of the Scheduled events were
    /// dropped. 64 keep pace, stay bounded, and fit beside the bindings in the API server's 100 HTTP/2 streams.
    writers: usize,
    /// Tries per event (`maxTriesPerEvent`).
    max_tries: u32,
    /// Pause between tries, plus up to a quarter more (`defaultSleepDuration`, `wait.Jitter(d, 0.25)`).
    sleep: Duration,
    /// Ongoing series are written again this often (`refreshTime`).
    refresh: Duration,
    /// A series (or single event) not observed for this long is finished (`finishTime`).
    finish: Duration,
}

impl Tuning {
    const UPSTREAM: Tuning = Tuning {
        queue: 1000,
        writers: 64,
        max_tries: 12,
        sleep: Duration::from_secs(10),
        refresh: Duration::from_secs(30 * 60),
        finish: Duration::from_secs(6 * 60),
    };
}

/// Records events.k8s.io/v1 Events without blocking the caller.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Event>,
    shared: Arc<Shared>,
}

/// What the recorder's tasks and handles share.
struct Shared {
    client: kube::Client,
    tuning: Tuning,
    cache: Mutex<SeriesCache>,
    dropped: AtomicU64,
    /// Events accepted by `record` and not yet written, counted into a series or given up on: `flush` waits for 0.
    pending: AtomicUsize,
    /// Woken when `pending` reaches 0.
    idle: Notify,
}

impl EventRecorder {
    /// Starts the recorder's tasks on `runtime`; events are written with `client` (the caller gives it its own rate limit).
    pub fn start(client: kube::Client, runtime: &tokio::runtime::Handle) -> EventRecorder {
        EventRecorder::start_tuned(client, runtime, Tuning::UPSTREAM)
    }

    fn start_tuned(client: kube::Client, runtime: &tokio::runtime::Handle, tuning: Tuning) -> EventRecorder {
        let (tx, rx) = mpsc::channel(tuning.queue);
        let shared = Arc::new(Shared {
            client,
            tuning,
            cache: Mutex::new(SeriesCache::default()),
            dropped: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            idle: Notify::new(),
        });
        runtime.spawn(dispatch(shared.clone(), rx));
        // The timers hold the state weakly: they end once every handle and the dispatcher are gone.
        let (refresh, finish) = (shared.tuning.refresh, shared.tuning.finish);
        runtime.spawn(every(refresh, Arc::downgrade(&shared), |s| async move { s.refresh().await }));
        runtime.spawn(every(finish, Arc::downgrade(&shared), |s| async move { s.finish().await }));
        EventRecorder { queue: tx, shared }
    }

    /// Queues an event; never blocks. Returns false (and counts a drop) when the queue is full.
    pub fn record(&self, event: Event) -> bool {
        // Counted before it is queued: the dispatcher may take it (and count it done) before `try_send` returns.
        self.shared.pending.fetch_add(1, Ordering::SeqCst);
        match self.queue.try_send(event) {
            Ok(()) => true,
            Err(e) => {
                self.shared.done();
                let event = match e {
                    mpsc::error::TrySendError::Full(ev) | mpsc::error::TrySendError::Closed(ev) => ev,
                };
                let n = self.shared.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // Every drop would be a line per event while the API server is away: 1st, 2nd, 4th, 8th… suffice.
                if n.is_power_of_two() {
                    tracing::warn!(
                        dropped = n,
                        reason = event.reason.as_deref().unwrap_or_default(),
                        regarding = %describe(event.regarding.as_ref()),
                        "too many queued events, dropped event"
                    );
                }
                false
            }
        }
    }

    /// Events dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Waits (up to `timeout`) until every queued event has been written or given up on — for shutdown.
    pub async fn flush(&self, timeout: Duration) {
        let shared = &self.shared;
        let all = async {
            shared.wait_idle().await;
            // The later repeats of a series live only in the cache until finishing writes them: write them now,
            // or the process takes them with it.
            let unwritten = shared.cache().unwritten();
            futures::stream::iter(unwritten)
                .for_each_concurrent(shared.tuning.writers, |w| async move {
                    shared.write_with_retries(&w).await;
                })
                .await;
        };
        if tokio::time::timeout(timeout, all).await.is_err() {
            tracing::warn!(
                pending = shared.pending.load(Ordering::SeqCst),
                "events still unwritten at the flush deadline"
            );
        }
    }
}

/// Takes queued events one by one while a writer is free, counts each into its series, and starts the write the
/// series needs (if any). A writer is taken before the event, so while all are busy the queue fills and `record`
/// drops, rather than tasks piling up.
async fn dispatch(shared: Arc<Shared>, mut queue: mpsc::Receiver<Event>) {
    let writers = Arc::new(Semaphore::new(shared.tuning.writers));
    loop {
        let Ok(writer) = writers.clone().acquire_owned().await else { return };
        let Some(event) = queue.recv().await else { return };
        let write = shared.cache().observe(event, Timestamp::now());
        match write {
            None => shared.done(),
            Some(w) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    shared.write_with_retries(&w).await;
                    drop(writer);
                    shared.done();
                });
            }
        }
    }
}

/// Runs `f` every `period` (the first time one period after the start) while the recorder lives.
async fn every<F, Fut>(period: Duration, shared: Weak<Shared>, f: F)
where
    F: Fn(Arc<Shared>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // An interval's first tick is immediate, with an empty cache nothing to do.
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else { return };
        f(shared).await;
    }
}

impl Shared {
    fn cache(&self) -> MutexGuard<'_, SeriesCache> {
        // The cache is only changed by short, non-panicking sections; a poisoned lock still holds a usable map.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn done(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    async fn wait_idle(&self) {
        loop {
            let woken = self.idle.notified();
            tokio::pin!(woken);
            // Registered before the check, so a `done` between the check and the await still wakes us.
            woken.as_mut().enable();
            if self.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            woken.await;
        }
    }

    /// upstream's attemptRecording: tries until written, refused, or out of tries.
    async fn write_with_retries(&self, w: &Write) {
        for attempt in 1..=self.tuning.max_tries {
            match write_once(&self.client, &w.event).await {
                Outcome::Written => {
                    self.cache().mark_written(&w.key, series_count(&w.event));
                    return;
                }
                Outcome::Refused => return,
                Outcome::Retry if attempt == self.tuning.max_tries => {
                    tracing::warn!(
                        event = w.event.metadata.name.as_deref().unwrap_or_default(),
                        tries = attempt,
                        "unable to write event (retry limit exceeded)"
                    );
                }
                Outcome::Retry => tokio::time::sleep(jittered(self.tuning.sleep)).await,
            }
        }
    }

    /// Writes every ongoing series once more (upstream's refreshExistingEventSeries): a patched Event gets a new
    /// TTL on the API server, so a series that goes on for hours keeps its Event.
    async fn refresh(self: Arc<Self>) {
        let series = self.cache().series();
        self.write_each(series, |shared, w| {
            if let Outcome::Written = w.1 {
                shared.cache().mark_written(&w.0.key, series_count(&w.0.event));
            }
        })
        .await;
    }

    /// Finishes what was not observed for `finish` (upstream's finishSeries): a series gets its last count written
    /// and leaves the cache unless observed again meanwhile; single events just leave.
    async fn finish(self: Arc<Self>) {
        let ended = self.cache().finish(Timestamp::now(), self.tuning.finish);
        self.write_each(ended, |shared, w| {
            // Upstream keeps a series whose final write should be retried, for the next round.
            if !matches!(w.1, Outcome::Retry) {
                shared.cache().remove_if_unchanged(&w.0.key, w.0.seen);
            }
        })
        .await;
    }

    /// One try for each write (as upstream's periodic passes make), a few at a time.
    async fn write_each(&self, writes: Vec<Write>, after: impl Fn(&Shared, (&Write, Outcome))) {
        let after = &after;
        futures::stream::iter(writes)
            .for_each_concurrent(self.tuning.writers, |w| async move {
                let outcome = write_once(&self.client, &w.event).await;
                after(self, (&w, outcome));
            })
            .await;
    }
}

/// The result of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Written,
    /// The API server refused it or it cannot be sent: trying again would not help.
    Refused,
    /// The API server was not reached, or answered something unexpected.
    Retry,
}

/// One create or patch (upstream's recordEvent): a series is patched with its `series` (created whole when its
/// Event is gone), anything else is created.
async fn write_once(client: &kube::Client, event: &Event) -> Outcome {
    let name = event.metadata.name.as_deref().unwrap_or_default();
    let Some(ns) = event.metadata.namespace.as_deref().filter(|n| !n.is_empty()) else {
        tracing::warn!(event = name, "can't write an event with an empty namespace");
        return Outcome::Refused;
    };
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let create = || async {
        let mut fresh = event.clone();
        // A create must not carry a resourceVersion.
        fresh.metadata.resource_version = None;
        api.create(&PostParams::default(), &fresh).await.map(drop)
    };
    let result = match &event.series {
        Some(series) => {
            // The two-way merge patch upstream computes between the Event without and with its series.
            let patch = serde_json::json!({ "series": series });
            match api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                // Expired (TTL) or deleted: created again, series included.
                Err(kube::Error::Api(s)) if s.code == 404 => create().await,
                r => r.map(drop),
            }
        }
        None => create().await,
    };
    match result {
        Ok(()) => Outcome::Written,
        Err(e) => {
            let outcome = classify(&e, event.series.is_some());
            match outcome {
                Outcome::Retry => tracing::warn!(event = name, error = %e, "unable to write event (may retry)"),
                // A repeated single event (same name) is expected noise upstream logs at V(5).
                Outcome::Refused if matches!(&e, kube::Error::Api(s) if s.is_already_exists()) => {
                    tracing::debug!(event = name, error = %e, "server rejected event (will not retry)")
                }
                _ => tracing::warn!(event = name, error = %e, "server rejected event (will not retry)"),
            }
            outcome
        }
    }
}

/// Upstream's classification of a failed write.
fn classify(e: &kube::Error, series: bool) -> Outcome {
    match e {
        // A series' patch found no Event and its create found one: the first write of the Event was still on
        // its way; the patch will find it next time.
        kube::Error::Api(s) if s.is_already_exists() && series => Outcome::Retry,
        // Any other answer with a status: the server would refuse the same request again.
        kube::Error::Api(_) => Outcome::Refused,
        // The request could not be built; it would be built the same next time.
        kube::Error::BuildRequest(_) | kube::Error::HttpError(_) => Outcome::Refused,
        // Transport errors, and a response that did not parse.
        _ => Outcome::Retry,
    }
}

/// `d` plus up to a quarter of it at random, so clients do not retry in step after an outage.
fn jittered(d: Duration) -> Duration {
    // RandomState's keys are random per instance: enough randomness for a jitter, without a dependency.
    let r = std::collections::hash_map::RandomState::new().hash_one(0u8);
    d + d.mul_f64((r % 1024) as f64 / 4096.0)
}

fn series_count(event: &Event) -> i32 {
    event.series.as_ref().map_or(1, |s| s.count)
}

fn describe(r: Option<&ObjectReference>) -> String {
    let r = r.cloned().unwrap_or_default();
    format!("{} {}/{}", r.kind.unwrap_or_default(), r.namespace.unwrap_or_default(), r.name.unwrap_or_default())
}

/// What makes two events "the same thing again" (upstream's eventKey): everything but the note, the time and
/// the name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    type_: Option<String>,
    action: Option<String>,
    reason: Option<String>,
    reporting_controller: Option<String>,
    reporting_instance: Option<String>,
    regarding: ObjectKey,
    related: Option<ObjectKey>,
}

/// An object reference without its resourceVersion. Upstream keys on the whole reference: the first failure's
/// Event names the pod before its PodScheduled=False write and every later one after it, so upstream opens a
/// second Event for the same failure, and another whenever anything else touches the pod. Leaving the version out
/// makes one pod's repeated failure one series — a deliberate difference in aggregation only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    field_path: Option<String>,
}

impl From<&ObjectReference> for ObjectKey {
    fn from(r: &ObjectReference) -> ObjectKey {
        ObjectKey {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
            field_path: r.field_path.clone(),
        }
    }
}

impl EventKey {
    fn of(e: &Event) -> EventKey {
        EventKey {
            type_: e.type_.clone(),
            action: e.action.clone(),
            reason: e.reason.clone(),
            reporting_controller: e.reporting_controller.clone(),
            reporting_instance: e.reporting_instance.clone(),
            regarding: ObjectKey::from(&e.regarding.clone().unwrap_or_default()),
            related: e.related.as_ref().map(ObjectKey::from),
        }
    }
}

/// A write to make: the Event as the cache holds it when the write was decided.
#[derive(Debug, Clone)]
struct Write {
    key: EventKey,
    event: Event,
    /// The entry's observations then: a periodic pass changes the entry only if none came since.
    seen: u64,
}

#[derive(Debug)]
struct Entry {
    /// The Event as first recorded (its name, note and time), with the series once repeated: what writes send.
    event: Event,
    /// Observations of the key so far.
    seen: u64,
    /// The count the API server has (0 until the first write lands; 1 for a single event).
    written: i32,
}

/// The isomorphic-event cache (upstream's eventCache), keyed by `EventKey`.
#[derive(Debug, Default)]
struct SeriesCache {
    entries: HashMap<EventKey, Entry>,
}

impl SeriesCache {
    /// Counts `event` in: a new key is remembered and written as it is; the first repeat starts the series
    /// (count 2) and writes it; later repeats only bump the count and the last observed time (upstream's
    /// recordToSink).
    fn observe(&mut self, event: Event, now: Timestamp) -> Option<Write> {
        let key = EventKey::of(&event);
        match self.entries.get_mut(&key) {
            Some(entry) => {
                entry.seen += 1;
                let last_observed_time = MicroTime(now);
                match &mut entry.event.series {
                    Some(series) => {
                        series.count += 1;
                        series.last_observed_time = last_observed_time;
                        None
                    }
                    None => {
                        entry.event.series = Some(EventSeries { count: 2, last_observed_time });
                        Some(Write { key, event: entry.event.clone(), seen: entry.seen })
                    }
                }
            }
            None => {
                let write = Write { key: key.clone(), event: event.clone(), seen: 1 };
                self.entries.insert(key, Entry { event, seen: 1, written: 0 });
                Some(write)
            }
        }
    }

    /// The API server has `count` for the key (a write that finished late never lowers it).
    fn mark_written(&mut self, key: &EventKey, count: i32) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.written = entry.written.max(count);
        }
    }

    /// Every ongoing series, to write again.
    fn series(&self) -> Vec<Write> {
        self.writes(|e| e.event.series.is_some())
    }

    /// The series whose count moved since it was last written.
    fn unwritten(&self) -> Vec<Write> {
        self.writes(|e| e.event.series.as_ref().is_some_and(|s| s.count > e.written))
    }

    /// Forgets single events older than `after` and returns the series not observed for `after`, to write
    /// their last count (they leave with `remove_if_unchanged`).
    fn finish(&mut self, now: Timestamp, after: Duration) -> Vec<Write> {
        let after = SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX);
        let older = |t: Option<&MicroTime>| t.is_none_or(|t| now.duration_since(t.0) > after);
        self.entries.retain(|_, e| e.event.series.is_some() || !older(e.event.event_time.as_ref()));
        self.writes(|e| e.event.series.as_ref().is_some_and(|s| older(Some(&s.last_observed_time))))
    }

    /// Forgets the key unless it was observed after `seen`: a series observed again goes on.
    fn remove_if_unchanged(&mut self, key: &EventKey, seen: u64) {
        if self.entries.get(key).is_some_and(|e| e.seen == seen) {
            self.entries.remove(key);
        }
    }

    fn writes(&self, pick: impl Fn(&Entry) -> bool) -> Vec<Write> {
        self.entries
            .iter()
            .filter(|(_, e)| pick(e))
            .map(|(k, e)| Write { key: k.clone(), event: e.event.clone(), seen: e.seen })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(name: &str, resource_version: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(resource_version.into()),
            ..Default::default()
        }
    }

    fn event(name: &str, regarding: ObjectReference, reason: &str, note: &str, t: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ns".into()), ..Default::default() },
            event_time: Some(MicroTime(t)),
            action: Some("Scheduling".into()),
            reason: Some(reason.into()),
            note: Some(note.into()),
            type_: Some("Warning".into()),
            regarding: Some(regarding),
            reporting_controller: Some("my-scheduler".into()),
            reporting_instance: Some("my-scheduler-host".into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_key_leaves_out_note_time_name_and_resource_version_but_not_the_object_or_reason() {
        let a = event("p.1", pod("p", "10"), "FailedScheduling", "0/3 nodes are available", at(0));
        let again = event("p.2", pod("p", "11"), "FailedScheduling", "0/4 nodes are available", at(5));
        assert_eq!(EventKey::of(&a), EventKey::of(&again));
        let other_pod = event("q.1", pod("q", "10"), "FailedScheduling", "0/3 nodes are available", at(0));
        assert_ne!(EventKey::of(&a), EventKey::of(&other_pod));
        let other_reason = event("p.3", pod("p", "10"), "Scheduled", "0/3 nodes are available", at(0));
        assert_ne!(EventKey::of(&a), EventKey::of(&other_reason));
        let mut other_instance = a.clone();
        other_instance.reporting_instance = Some("my-scheduler-other".into());
        assert_ne!(EventKey::of(&a), EventKey::of(&other_instance));
        let mut related = a.clone();
        related.related = Some(pod("r", "1"));
        assert_ne!(EventKey::of(&a), EventKey::of(&related));
    }

    #[test]
    fn the_first_repeat_writes_a_series_of_two_later_repeats_only_count() {
        let mut cache = SeriesCache::default();
        let first = cache.observe(event("p.1", pod("p", "10"), "FailedScheduling", "m", at(0)), at(0)).unwrap();
        assert_eq!(first.event.metadata.name.as_deref(), Some("p.1"));
        assert!(first.event.series.is_none(), "a new event is created as it is");

        let second = cache.observe(event("p.2", pod("p", "11"), "FailedScheduling", "m", at(3)), at(3)).unwrap();
        assert_eq!(second.event.metadata.name.as_deref(), Some("p.1"), "the stored Event is patched");
        let series = second.event.series.clone().unwrap();
        assert_eq!((series.count, series.last_observed_time), (2, MicroTime(at(3))));

        assert!(cache.observe(event("p.3", pod("p", "12"), "FailedScheduling", "m", at(7)), at(7)).is_none());
        assert!(cache.observe(event("p.4", pod("p", "13"), "FailedScheduling", "m", at(9)), at(9)).is_none());
        let [held] = cache.series().try_into().unwrap();
        let series = held.event.series.unwrap();
        assert_eq!((series.count, series.last_observed_time), (4, MicroTime(at(9))));
        assert_eq!(held.event.note.as_deref(), Some("m"));

        // Another pod is its own event.
        let q = cache.observe(event("q.1", pod("q", "1"), "FailedScheduling", "m", at(9)), at(9)).unwrap();
        assert!(q.event.series.is_none());
    }

    #[test]
    fn unwritten_series_are_those_whose_count_moved_since_the_last_write() {
        let mut cache = SeriesCache::default();
        let first = cache.observe(event("p.1", pod("p", "1"), "FailedScheduling", "m", at(0)), at(0)).unwrap();
        cache.mark_written(&first.key, 1);
        assert!(cache.unwritten().is_empty(), "a single event written is done");
        let second = cache.observe(event("p.2", pod("p", "1"), "FailedScheduling", "m", at(1)), at(1)).unwrap();
        assert_eq!(cache.unwritten().len(), 1, "the series' first write has not landed");
        cache.mark_written(&second.key, 2);
        assert!(cache.unwritten().is_empty());
        cache.observe(event("p.3", pod("p", "1"), "FailedScheduling", "m", at(2)), at(2));
        let [w] = cache.unwritten().try_into().unwrap();
        assert_eq!(w.event.series.unwrap().count, 3);
        // A late answer for an older count never lowers what is written.
        cache.mark_written(&w.key, 3);
        cache.mark_written(&w.key, 2);
        assert!(cache.unwritten().is_empty());
    }

    #[test]
    fn finishing_forgets_old_single_events_and_hands_over_idle_series() {
        let six_minutes = Duration::from_secs(360);
        let mut cache = SeriesCache::default();
        cache.observe(event("old.1", pod("old", "1"), "Scheduled", "m", at(0)), at(0));
        cache.observe(event("new.1", pod("new", "1"), "Scheduled", "m", at(300)), at(300));
        cache.observe(event("s.1", pod("s", "1"), "FailedScheduling", "m", at(0)), at(0));
        cache.observe(event("s.2", pod("s", "1"), "FailedScheduling", "m", at(10)), at(10));
        cache.observe(event("live.1", pod("live", "1"), "FailedScheduling", "m", at(0)), at(0));
        cache.observe(event("live.2", pod("live", "1"), "FailedScheduling", "m", at(200)), at(200));

        let ended = cache.finish(at(400), six_minutes);
        let names: Vec<_> = ended.iter().map(|w| w.event.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["s.1"], "the series idle for over 6 minutes, to write its last count");
        let left = |c: &SeriesCache| {
            let mut v: Vec<_> = c.entries.values().map(|e| e.event.metadata.name.clone().unwrap()).collect();
            v.sort();
            v
        };
        assert_eq!(left(&cache), ["live.1", "new.1", "s.1"], "the old single event is forgotten");

        // Observed again while its last count was being written: the series goes on.
        cache.observe(event("s.3", pod("s", "1"), "FailedScheduling", "m", at(401)), at(401));
        cache.remove_if_unchanged(&ended[0].key, ended[0].seen);
        assert_eq!(left(&cache), ["live.1", "new.1", "s.1"]);
        let mut ended = cache.finish(at(800), six_minutes);
        ended.sort_by_key(|w| w.event.metadata.name.clone());
        let counts: Vec<_> =
            ended.iter().map(|w| (w.event.metadata.name.clone().unwrap(), series_count(&w.event))).collect();
        assert_eq!(counts, [("live.1".to_string(), 2), ("s.1".to_string(), 3)], "both idle now");
        for w in &ended {
            cache.remove_if_unchanged(&w.key, w.seen);
        }
        assert!(left(&cache).is_empty(), "both series end; new.1 aged out too");
    }

    #[test]
    fn only_transport_errors_and_a_racing_create_are_retried() {
        let status = |code: u16, reason: &str| {
            kube::Error::Api(kube::core::Status::failure("m", reason).with_code(code).boxed())
        };
        assert_eq!(classify(&status(422, "Invalid"), false), Outcome::Refused);
        assert_eq!(classify(&status(403, "Forbidden"), true), Outcome::Refused);
        assert_eq!(classify(&status(500, "InternalError"), false), Outcome::Refused);
        assert_eq!(classify(&status(409, "AlreadyExists"), false), Outcome::Refused);
        assert_eq!(classify(&status(409, "AlreadyExists"), true), Outcome::Retry);
        let bad_json = serde_json::from_str::<Event>("{").unwrap_err();
        assert_eq!(classify(&kube::Error::SerdeError(bad_json), false), Outcome::Retry);
    }

    #[test]
    fn jitter_adds_at_most_a_quarter() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(10));
            assert!(d >= Duration::from_secs(10) && d <= Duration::from_millis(12_500), "{d:?}");
        }
    }

    fn client_at(url: &str) -> kube::Client {
        kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap()
    }

    /// The dispatcher of a current-thread runtime runs only when the test awaits: until then `record` fills the
    /// real queue.
    #[tokio::test]
    async fn a_full_queue_drops_and_counts_without_blocking() {
        let recorder = EventRecorder::start(client_at("http://127.0.0.1:9"), &tokio::runtime::Handle::current());
        let e = |i: usize| event(&format!("p{i}.1"), pod(&format!("p{i}"), "1"), "Scheduled", "m", at(0));
        for i in 0..1000 {
            assert!(recorder.record(e(i)), "event {i} fits the queue");
        }
        assert!(!recorder.record(e(1000)));
        assert!(!recorder.clone().record(e(1001)));
        assert_eq!(recorder.dropped(), 2);
        assert_eq!(recorder.shared.pending.load(Ordering::SeqCst), 1000, "a dropped event is not waited for");
    }

    /// A real socket that accepts and hangs up: every try is a transport error, retried until the limit, after
    /// which the event is given up and `flush` returns.
    #[tokio::test]
    async fn transport_errors_are_retried_up_to_the_limit_then_given_up() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                drop(socket);
            }
        });
        let tuning = Tuning { max_tries: 4, sleep: Duration::from_millis(5), ..Tuning::UPSTREAM };
        let recorder = EventRecorder::start_tuned(client_at(&url), &tokio::runtime::Handle::current(), tuning);
        assert!(recorder.record(event("p.1", pod("p", "1"), "Scheduled", "m", at(0))));
        let started = std::time::Instant::now();
        recorder.flush(Duration::from_secs(20)).await;
        assert!(started.elapsed() < Duration::from_secs(10), "given up, not timed out: {:?}", started.elapsed());
        assert_eq!(recorder.shared.pending.load(Ordering::SeqCst), 0);
        assert_eq!(accepted.load(Ordering::SeqCst), 4, "one connection per try");
        assert_eq!(recorder.dropped(), 0);
    }

    #[tokio::test]
    async fn flush_returns_at_its_deadline_while_writes_hang() {
        // Accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let recorder = EventRecorder::start(client_at(&url), &tokio::runtime::Handle::current());
        assert!(recorder.record(event("p.1", pod("p", "1"), "Scheduled", "m", at(0))));
        let started = std::time::Instant::now();
        recorder.flush(Duration::from_millis(300)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(recorder.shared.pending.load(Ordering::SeqCst), 1, "still being written");
    }
}
