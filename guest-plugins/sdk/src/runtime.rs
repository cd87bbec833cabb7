//! The per-instance state behind the exports (the plugin object, the node table, the pod view) and the generated
//! Guest traits implemented in terms of [`Plugin`].

use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

use crate::bindings::exports::kws::plugin as exports;
use crate::bindings::exports::kws::plugin::filter::FilterResult;
use crate::bindings::kws::plugin::host::PodRef as HostPodRef;
use crate::config::Config;
use crate::host::{self, Level};
use crate::table::{NodeInfo, NodeTable, Prepared};
use crate::types::{
    ClusterEvent, CyclePod, Declared, EventObject, NodeChange, NodeSlot, PermitResult, Pod, PodChange, PodRef,
    PostFilterResult, PreFilterResult, QueuedPod, QueueingHint, Status,
};
use crate::{batch, view, Plugin};

thread_local! {
    /// The node table (a component instance is single-threaded; "thread-local" is just "global" there).
    static TABLE: RefCell<NodeTable> = const { RefCell::new(NodeTable::new()) };
    /// The plugin, built on first use from the host's configuration, or why it could not be built.
    static PLUGIN: RefCell<Option<Result<Rc<dyn Any>, String>>> = const { RefCell::new(None) };
    /// The plugin's prepared node data (a `Prepared<P::NodeData>`), created with the plugin.
    static PREPARED: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    /// The cycle's pod as last fetched, with the cycle (`host.cycle-id`) it belongs to.
    static POD: RefCell<Option<(u64, Rc<crate::Pod>)>> = const { RefCell::new(None) };
}

/// The pod of the cycle in progress: the one fetched earlier in the same cycle, else fetched now. Asking the host
/// which cycle it is, rather than being told at `cycle.begin`, lets the host skip that call: a plugin that never
/// reads the pod makes no crossing for it at all.
pub(crate) fn current_cycle_pod() -> Rc<crate::Pod> {
    let cycle = host::cycle_id();
    let kept = POD.with(|p| p.borrow().as_ref().filter(|(c, _)| *c == cycle && cycle != 0).map(|(_, pod)| pod.clone()));
    if let Some(pod) = kept {
        return pod;
    }
    // The host answers during every call that hands a plugin a CyclePod; `none` would be a host bug, and the panic
    // (a trap) turns it into an Error status naming the plugin instead of a decision on a made-up pod.
    let pod =
        Rc::new(host::cycle_pod().expect("the host did not provide the cycle's pod (host.cycle-pod returned none)"));
    POD.with(|p| *p.borrow_mut() = Some((cycle, pod.clone())));
    pod
}

/// The type the export macros export: it implements the generated Guest traits by calling `P`'s methods.
#[doc(hidden)]
pub struct Component<P>(PhantomData<P>);

/// Builds the plugin from the host's configuration.
fn build<P: Plugin>() -> Result<Rc<dyn Any>, String> {
    let raw = host::config();
    let config = Config::parse(&raw).map_err(|e| format!("plugin configuration {raw:?}: {e}"))?;
    let plugin = P::new(&config).map_err(|e| format!("plugin configuration {raw:?}: {e}"))?;
    index_view::<P>();
    Ok(Rc::new(plugin))
}

/// Runs `f` with the plugin instance, building it first if needed. `Err` carries why it could not be built.
pub(crate) fn with_plugin<P: Plugin, R>(f: impl FnOnce(&P) -> R) -> Result<R, String> {
    let existing = PLUGIN.with(|p| p.borrow().clone());
    let state = match existing {
        Some(s) => s,
        None => {
            let built = build::<P>();
            if let Err(e) = &built {
                host::log(Level::Error, e);
            }
            PLUGIN.with(|p| *p.borrow_mut() = Some(built.clone()));
            built
        }
    };
    let plugin = state?;
    let plugin = plugin.downcast_ref::<P>().ok_or("plugin instance has an unexpected type")?;
    Ok(f(plugin))
}

/// Runs `f` with the node table and the plugin's prepared data, first preparing the nodes that changed.
fn with_nodes<P: Plugin, R>(plugin: &P, f: impl FnOnce(&NodeTable, &Prepared<P::NodeData>) -> R) -> Result<R, String> {
    let busy = |_| "node table is busy".to_string();
    TABLE.with(|t| {
        let mut table = t.try_borrow_mut().map_err(busy)?;
        PREPARED.with(|d| {
            let mut d = d.try_borrow_mut().map_err(busy)?;
            let any = d.get_or_insert_with(|| Box::new(Prepared::<P::NodeData>::default()));
            let prepared =
                any.downcast_mut::<Prepared<P::NodeData>>().ok_or("prepared node data has an unexpected type")?;
            prepared.catch_up(&mut table, |n| plugin.prepare(n));
            Ok(f(&table, prepared))
        })
    })
}

/// Indexes the pod view by `P`'s label keys (a comparison when it already is).
fn index_view<P: Plugin>() {
    if view::with_view_mut(|v| v.index_labels(P::INDEXED_LABELS)).is_none() {
        host::log(Level::Error, "pod view is busy; its label index was not updated");
    }
}

/// Runs `f` with the plugin, or answers `failed(why)` when it could not be built (the reason is logged once, when
/// building fails).
fn serve<P: Plugin, R>(f: impl FnOnce(&P) -> R, failed: impl FnOnce(String) -> R) -> R {
    with_plugin::<P, _>(f).unwrap_or_else(failed)
}

/// Runs `f` with the plugin and the node in `slot`; an Error status when either is missing.
fn with_node<P: Plugin>(slot: NodeSlot, f: impl FnOnce(&P, &NodeInfo<'_, P::NodeData>) -> Status) -> Status {
    let run = || -> Result<Status, String> {
        with_plugin::<P, _>(|p| {
            with_nodes(p, |t, d| match d.get(t, slot) {
                Some(node) => f(p, &node),
                None => batch::missing_slot(slot),
            })
        })?
    };
    run().unwrap_or_else(Status::error)
}

/// Looks every slot up, in order; the first missing one is an Error status naming it.
fn lookup_all<'a, D: Default>(
    t: &'a NodeTable,
    d: &'a Prepared<D>,
    slots: &[NodeSlot],
) -> Result<Vec<NodeInfo<'a, D>>, Status> {
    slots.iter().map(|&s| d.get(t, s).ok_or_else(|| batch::missing_slot(s))).collect()
}

/// Forgets the plugin instance, its prepared node data and the cycle's pod (tests).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn reset_plugin() {
    PLUGIN.with(|p| *p.borrow_mut() = None);
    PREPARED.with(|d| *d.borrow_mut() = None);
    POD.with(|p| *p.borrow_mut() = None);
}

/// Forgets the plugin instance, the node table and the pod view (tests).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn reset() {
    reset_plugin();
    TABLE.with(|t| t.borrow_mut().clear());
    view::with_view_mut(|v| *v = view::PodView::new());
}

/// Applies pod changes to the view (also used by [`crate::testing`]).
pub(crate) fn apply_pods(changes: Vec<PodChange>) {
    let applied = view::with_view_mut(|v| changes.into_iter().for_each(|c| v.apply(c)));
    if applied.is_none() {
        host::log(Level::Error, "pod view is busy; changes ignored");
    }
}

/// Applies node changes to the table (also used by [`crate::testing`]).
pub(crate) fn apply(changes: Vec<NodeChange>) {
    TABLE.with(|t| match t.try_borrow_mut() {
        Ok(mut t) => {
            for change in changes {
                let slot = match &change {
                    NodeChange::Upsert((s, _)) | NodeChange::Remove(s) => *s,
                };
                if !t.apply(change) {
                    host::log(Level::Error, &format!("node slot {slot} is out of range; change ignored"));
                }
            }
        }
        Err(_) => host::log(Level::Error, "node table is busy; changes ignored"),
    })
}

impl<P: Plugin> exports::nodes::Guest for Component<P> {
    fn apply(changes: Vec<NodeChange>) {
        apply(changes)
    }
}

/// `config.validate`: builds the plugin from its configuration (as the first call would), so a configuration
/// [`Plugin::new`] refuses stops the scheduler before it serves.
impl<P: Plugin> exports::config::Guest for Component<P> {
    fn validate() -> Result<(), String> {
        with_plugin::<P, _>(|_| ())
    }
}

impl<P: Plugin> exports::declarations::Guest for Component<P> {
    fn declare() -> Declared {
        // Without a plugin (bad configuration, already refused by `config.validate`) nothing is promised but what
        // the SDK itself keeps: it tells cycles apart by `host.cycle-id`.
        serve::<P, _>(|p| p.declare(), |_| Declared::empty()) | Declared::NEEDS_NO_CYCLE_BEGIN
    }
}

impl<P: Plugin> exports::cycle::Guest for Component<P> {
    fn begin() {
        // Hosts that call it: the next read fetches the pod again, whatever `host.cycle-id` says.
        POD.with(|p| *p.borrow_mut() = None);
    }
}

impl<P: Plugin> exports::filter::Guest for Component<P> {
    fn filter(nodes: Vec<NodeSlot>) -> FilterResult {
        let run = || -> Result<FilterResult, String> {
            let pod = CyclePod::on_first_read();
            host::in_batch(|| with_plugin::<P, _>(|p| with_nodes(p, |t, d| batch::filter(p, t, d, &pod, &nodes))))?
        };
        match run() {
            Ok(result) => result,
            Err(e) => FilterResult {
                statuses: vec![Status::error(e)],
                rejected: (0..nodes.len() as u32).collect(),
                verdicts: vec![0; nodes.len()],
            },
        }
    }
}

impl<P: Plugin> exports::score::Guest for Component<P> {
    fn score(nodes: Vec<NodeSlot>) -> Result<Vec<i64>, Status> {
        let run = || -> Result<Result<Vec<i64>, Status>, String> {
            let pod = CyclePod::on_first_read();
            host::in_batch(|| with_plugin::<P, _>(|p| with_nodes(p, |t, d| batch::score(p, t, d, &pod, &nodes))))?
        };
        run().unwrap_or_else(|e| Err(Status::error(e)))
    }

    fn normalize_score(_nodes: Vec<NodeSlot>, scores: Vec<i64>) -> Result<Vec<i64>, Status> {
        let run = || -> Result<Result<Vec<i64>, Status>, String> {
            let pod = CyclePod::on_first_read();
            host::in_batch(|| with_plugin::<P, _>(|p| batch::normalize_score(p, &pod, scores)))
        };
        run().unwrap_or_else(|e| Err(Status::error(e)))
    }
}

impl<P: Plugin> exports::queue_sort::Guest for Component<P> {
    fn less(a: QueuedPod, b: QueuedPod) -> bool {
        // Without a plugin (bad configuration, already logged) the queue still needs an order: PrioritySort's.
        with_plugin::<P, _>(|p| p.less(&a, &b)).unwrap_or_else(|_| crate::types::priority_sort_less(&a, &b))
    }

    fn sort_key(q: QueuedPod) -> Option<Vec<u8>> {
        // Without a plugin, no key: `less` gives PrioritySort's order.
        with_plugin::<P, _>(|p| p.sort_key_ref(&PodRef::queued(&q), q.timestamp_ns, q.attempts)).ok().flatten()
    }
}

impl<P: Plugin> exports::sort_key_ref::Guest for Component<P> {
    fn sort_key(pod: &HostPodRef, timestamp_ns: u64, attempts: u32) -> Option<Vec<u8>> {
        with_plugin::<P, _>(|p| p.sort_key_ref(&PodRef::host(pod), timestamp_ns, attempts)).ok().flatten()
    }
}

impl<P: Plugin> exports::pods::Guest for Component<P> {
    fn apply(changes: Vec<PodChange>) {
        index_view::<P>();
        apply_pods(changes)
    }
}

impl<P: Plugin> exports::events::Guest for Component<P> {
    fn events_to_register() -> Vec<ClusterEvent> {
        // Without a plugin (bad configuration, already logged, and refused by `config.validate`) there is nothing
        // to register.
        serve::<P, _>(|p| p.events_to_register(), |_| Vec::new())
    }

    fn queueing_hint(
        pod: Pod,
        event: ClusterEvent,
        old: Option<EventObject>,
        new: Option<EventObject>,
    ) -> QueueingHint {
        // Retrying is upstream's answer when a hint cannot be computed.
        serve::<P, _>(|p| p.queueing_hint(&pod, &event, old.as_ref(), new.as_ref()), |_| QueueingHint::Queue)
    }
}

impl<P: Plugin> exports::pre_enqueue::Guest for Component<P> {
    fn pre_enqueue(pod: Pod) -> Status {
        serve::<P, _>(|p| p.pre_enqueue(&pod), Status::error)
    }
}

impl<P: Plugin> exports::pre_filter::Guest for Component<P> {
    fn pre_filter(pod: Pod) -> PreFilterResult {
        serve::<P, _>(|p| p.pre_filter(&pod), |e| Status::error(e).into())
    }

    fn add_pod(pod: Pod, pod_to_add: Pod, node: NodeSlot) -> Status {
        with_node::<P>(node, |p, n| p.add_pod(&pod, &pod_to_add, n))
    }

    fn remove_pod(pod: Pod, pod_to_remove: Pod, node: NodeSlot) -> Status {
        with_node::<P>(node, |p, n| p.remove_pod(&pod, &pod_to_remove, n))
    }
}

impl<P: Plugin> exports::post_filter::Guest for Component<P> {
    fn post_filter(pod: Pod, rejected: Vec<(NodeSlot, Status)>) -> PostFilterResult {
        let run = || -> Result<PostFilterResult, String> {
            with_plugin::<P, _>(|p| {
                with_nodes(p, |t, d| {
                    let mut nodes = Vec::with_capacity(rejected.len());
                    for (slot, status) in rejected {
                        match d.get(t, slot) {
                            Some(node) => nodes.push((node, status)),
                            None => return batch::missing_slot(slot).into(),
                        }
                    }
                    p.post_filter(&pod, &nodes)
                })
            })?
        };
        run().unwrap_or_else(|e| Status::error(e).into())
    }
}

impl<P: Plugin> exports::pre_score::Guest for Component<P> {
    fn pre_score(pod: Pod, nodes: Vec<NodeSlot>) -> Status {
        let run = || -> Result<Status, String> {
            with_plugin::<P, _>(|p| {
                with_nodes(p, |t, d| match lookup_all(t, d, &nodes) {
                    Ok(nodes) => p.pre_score(&pod, &nodes),
                    Err(missing) => missing,
                })
            })?
        };
        run().unwrap_or_else(Status::error)
    }
}

impl<P: Plugin> exports::reserve::Guest for Component<P> {
    fn reserve(pod: Pod, node: String) -> Status {
        serve::<P, _>(|p| p.reserve(&pod, &node), Status::error)
    }

    fn unreserve(pod: Pod, node: String) {
        // Unreserve has no way to report a configuration error (logged when building the plugin).
        serve::<P, _>(|p| p.unreserve(&pod, &node), |_| ())
    }
}

impl<P: Plugin> exports::permit::Guest for Component<P> {
    fn permit(pod: Pod, node: String) -> PermitResult {
        serve::<P, _>(|p| p.permit(&pod, &node).into(), |e| PermitResult { status: Status::error(e), timeout_ms: 0 })
    }
}

impl<P: Plugin> exports::pre_bind::Guest for Component<P> {
    fn pre_bind(pod: Pod, node: String) -> Status {
        serve::<P, _>(|p| p.pre_bind(&pod, &node), Status::error)
    }
}

impl<P: Plugin> exports::bind::Guest for Component<P> {
    fn bind(pod: Pod, node: String) -> Status {
        serve::<P, _>(|p| p.bind(&pod, &node), Status::error)
    }
}

impl<P: Plugin> exports::post_bind::Guest for Component<P> {
    fn post_bind(pod: Pod, node: String) {
        // A configuration error was logged when building the plugin; PostBind has no way to report it.
        let _ = with_plugin::<P, _>(|p| p.post_bind_ref(&PodRef::from(&pod), &node));
    }
}

impl<P: Plugin> exports::post_bind_ref::Guest for Component<P> {
    fn post_bind(pod: &HostPodRef, node: String) {
        let _ = with_plugin::<P, _>(|p| p.post_bind_ref(&PodRef::host(pod), &node));
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::host::imp::HOST;
    use crate::testing;
    use crate::types::{Code, Node, NodeChange, Pod, Status};
    use crate::{host::Level, Plugin};
    use std::cell::Cell;

    thread_local! {
        static BUILT: Cell<u32> = const { Cell::new(0) };
    }

    /// Counts how often it is built; `{"fail": true}` makes `new` fail.
    struct Counted;

    impl Plugin for Counted {
        type NodeData = ();
        fn new(config: &Config) -> Result<Self, String> {
            BUILT.with(|b| b.set(b.get() + 1));
            if config.bool("fail")? == Some(true) {
                Err("asked to fail".into())
            } else {
                Ok(Counted)
            }
        }
        fn filter(&self, pod: &crate::CyclePod, node: &crate::NodeInfo<'_, ()>) -> Status {
            if pod.name == "p" {
                Status::unschedulable(format!("no {}", node.name))
            } else {
                Status::unschedulable(format!("no {} for {}", node.name, pod.name))
            }
        }
    }

    #[test]
    fn plugin_is_built_once_and_table_follows_apply() {
        testing::apply(vec![NodeChange::Upsert((0, Node::new("a"))), NodeChange::Upsert((1, Node::new("b")))]);
        let st = testing::filter::<Counted>(Pod::new("ns", "p"), vec![1, 0]);
        assert_eq!(st.iter().map(Status::message).collect::<Vec<_>>(), ["no b", "no a"]);
        testing::apply(vec![NodeChange::Remove(1), NodeChange::Upsert((u32::MAX, Node::new("x")))]);
        let st = testing::filter::<Counted>(Pod::new("ns", "p"), vec![1]);
        assert_eq!(st[0].code, Code::Error);
        assert_eq!(st[0].message(), "node slot 1 is not in the plugin's node table");
        assert_eq!(BUILT.with(Cell::get), 1);
        assert_eq!(
            testing::take_logs(),
            vec![(Level::Error, "node slot 4294967295 is out of range; change ignored".to_string())]
        );
    }

    #[test]
    fn calls_refer_to_the_pod_of_the_current_cycle_fetched_once_and_trap_outside_one() {
        use crate::bindings::exports::kws::plugin as ex;
        use crate::runtime::Component;
        testing::load_nodes(vec![Node::new("a")]);
        // Outside a cycle (host.cycle-id 0, no pod): reading the pod traps with the reason, natively a panic.
        let outside = std::panic::catch_unwind(|| <Component<Counted> as ex::filter::Guest>::filter(vec![0]));
        let why = outside.expect_err("no cycle, no pod");
        let why = why.downcast_ref::<String>().map(String::as_str).or_else(|| why.downcast_ref::<&str>().copied());
        assert_eq!(why, Some("the host did not provide the cycle's pod (host.cycle-pod returned none)"));
        testing::begin::<Counted>(Pod::new("ns", "first"));
        testing::begin::<Counted>(Pod::new("ns", "second"));
        let fetched = testing::pod_fetches();
        let r = <Component<Counted> as ex::filter::Guest>::filter(vec![0]);
        assert_eq!(r.statuses[0].message(), "no a for second");
        let r = <Component<Counted> as ex::filter::Guest>::filter(vec![0]);
        assert_eq!(r.statuses[0].message(), "no a for second");
        assert_eq!(testing::pod_fetches(), fetched + 1, "fetched once in the cycle, not once per call");
        // A new cycle (its number changes, whether or not cycle.begin is called): fetched again.
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            h.pod = Some(Pod::new("ns", "third"));
            h.cycle_id += 1;
        });
        let r = <Component<Counted> as ex::filter::Guest>::filter(vec![0]);
        assert_eq!(r.statuses[0].message(), "no a for third");
        assert_eq!(testing::pod_fetches(), fetched + 2);
    }

    /// Reads nothing but the node.
    struct NodesOnly;

    impl Plugin for NodesOnly {
        type NodeData = ();
        fn new(_: &Config) -> Result<Self, String> {
            Ok(NodesOnly)
        }
        fn filter(&self, _: &crate::CyclePod, _: &crate::NodeInfo<'_, ()>) -> Status {
            Status::success()
        }
        fn score(&self, _: &crate::CyclePod, _: &crate::NodeInfo<'_, ()>) -> Result<i64, Status> {
            Ok(1)
        }
    }

    #[test]
    fn the_pod_is_fetched_on_first_read_once_per_cycle_and_never_when_unread() {
        testing::load_nodes(vec![Node::new("a"), Node::new("b"), Node::new("c")]);
        testing::filter::<NodesOnly>(Pod::new("ns", "p"), vec![0, 1, 2]);
        testing::score::<NodesOnly>(Pod::new("ns", "p"), vec![0, 1, 2]).unwrap();
        assert_eq!(testing::pod_fetches(), 0, "a policy that reads only nodes never pays for the pod");

        // Counted reads the pod on every node: one fetch for the cycle, whatever the number of nodes and calls.
        use crate::bindings::exports::kws::plugin as ex;
        use crate::runtime::Component;
        testing::reset(); // one plugin type per instance
        testing::load_nodes(vec![Node::new("a"), Node::new("b"), Node::new("c")]);
        testing::begin::<Counted>(Pod::new("ns", "first"));
        for _ in 0..2 {
            let r = <Component<Counted> as ex::filter::Guest>::filter(vec![0, 1, 2]);
            assert_eq!(r.statuses[0].message(), "no a for first");
        }
        assert_eq!(testing::pod_fetches(), 1);
        // A new cycle forgets the old pod: the next read fetches the new one.
        let st = testing::filter::<Counted>(Pod::new("ns", "second"), vec![2]);
        assert_eq!(st[0].message(), "no c for second");
        assert_eq!(testing::pod_fetches(), 2);
    }

    #[test]
    fn failed_configuration_is_logged_once_and_reported_by_every_call() {
        testing::set_config(r#"{"fail": true}"#);
        testing::load_nodes(vec![Node::new("a")]);
        for _ in 0..3 {
            let st = testing::filter::<Counted>(Pod::new("ns", "p"), vec![0]);
            assert_eq!(st[0].code, Code::Error);
            assert!(st[0].message().ends_with("asked to fail"), "{}", st[0].message());
            let err = testing::score::<Counted>(Pod::new("ns", "p"), vec![0]).unwrap_err();
            assert_eq!(err.code, Code::Error);
        }
        assert_eq!(BUILT.with(Cell::get), 1);
        assert_eq!(testing::take_logs().len(), 1);
        // QueueSort still orders by priority without a plugin.
        let mut hi = Pod::new("ns", "hi");
        hi.priority = 10;
        let (a, b) = (crate::QueuedPod::new(hi, 5), crate::QueuedPod::new(Pod::new("ns", "lo"), 1));
        assert!(testing::less::<Counted>(a, b));
    }
}

/// The extension points beyond Filter and Score, driven through [`crate::testing`] as the host calls them.
#[cfg(test)]
mod point_tests {
    use std::time::Duration;

    use crate::config::Config;
    use crate::testing::{self, WaitingPodCall, PLUGIN_NAME};
    use crate::types::{Code, KnownPod, Node, Pod, PodState, Status};
    use crate::{
        host, pods, Actions, ClusterEvent, CyclePod, EventObject, NodeInfo, Permit, Plugin, PostFilterResult,
        PreFilterResult, QueueingHint, WaitingPod,
    };

    /// Answers every point from the pod's labels and says what it was given; its node data is the node's "zone"
    /// label.
    struct Everything;

    impl Plugin for Everything {
        type NodeData = String;
        const INDEXED_LABELS: &'static [&'static str] = &["group"];

        fn new(config: &Config) -> Result<Self, String> {
            config.expect_keys(&[])?;
            Ok(Everything)
        }
        fn prepare(&self, node: &Node) -> String {
            node.label("zone").unwrap_or("-").to_string()
        }
        fn pre_enqueue(&self, pod: &Pod) -> Status {
            match pod.label("ready") {
                Some(_) => Status::success(),
                None => Status::new(Code::Pending, format!("{} is not ready", pod.name)),
            }
        }
        fn pre_filter(&self, pod: &Pod) -> PreFilterResult {
            host::cycle_state_write("prefilter", pod.name.as_bytes());
            match pod.label("only") {
                Some(n) => PreFilterResult::only_nodes(n.split(',')),
                None => PreFilterResult::success(),
            }
        }
        fn add_pod(&self, pod: &Pod, add: &Pod, node: &NodeInfo<'_, String>) -> Status {
            Status::unschedulable(format!("{} + {} on {} in {}", pod.name, add.name, node.name, node.data()))
        }
        fn remove_pod(&self, pod: &Pod, remove: &Pod, node: &NodeInfo<'_, String>) -> Status {
            Status::unschedulable(format!("{} - {} on {}", pod.name, remove.name, node.name))
        }
        fn post_filter(&self, _pod: &Pod, rejected: &[(NodeInfo<'_, String>, Status)]) -> PostFilterResult {
            match rejected.iter().find(|(_, s)| s.code == Code::Unschedulable) {
                Some((node, _)) => PostFilterResult::nominate(format!("{} ({})", node.name, node.data())),
                None => PostFilterResult::unschedulable(format!("{} nodes, none helps", rejected.len())),
            }
        }
        fn pre_score(&self, _pod: &Pod, nodes: &[NodeInfo<'_, String>]) -> Status {
            let zones: Vec<&str> = nodes.iter().map(|n| n.data().as_str()).collect();
            host::cycle_state_write("zones", zones.join(",").as_bytes());
            Status::success()
        }
        fn score(&self, _pod: &CyclePod, node: &NodeInfo<'_, String>) -> Result<i64, Status> {
            let zones = host::cycle_state_read("zones").ok_or_else(|| Status::error("no PreScore"))?;
            let zones = String::from_utf8(zones).unwrap_or_default();
            Ok(zones.split(',').filter(|z| *z == node.data()).count() as i64)
        }
        fn reserve(&self, pod: &Pod, node: &str) -> Status {
            // Reads the view: the pods of its group placed so far.
            let group = pod.label("group").unwrap_or_default();
            let placed = pods().with_label("group", group).placed().count();
            Status::unschedulable(format!("{} on {node}: {placed} placed", pod.name))
        }
        fn unreserve(&self, pod: &Pod, _node: &str) {
            for w in host::waiting_pods() {
                if w.pod.label("group") == pod.label("group") && w.pod.uid != pod.uid {
                    host::reject_waiting_pod(&w.pod.uid, "sibling unreserved");
                }
            }
        }
        fn permit(&self, pod: &Pod, _node: &str) -> Permit {
            match (pod.label("wait"), pod.label("deny")) {
                (Some(_), _) => Permit::Wait(Duration::from_millis(1500)),
                (_, Some(_)) => Permit::reject("denied"),
                _ => {
                    for w in host::waiting_pods() {
                        host::allow_waiting_pod(&w.pod.uid);
                        host::allow_waiting_pod_for(&w.pod.uid, "Other");
                    }
                    Permit::Allow
                }
            }
        }
        fn pre_bind(&self, _pod: &Pod, node: &str) -> Status {
            if node == "drain" {
                Status::unresolvable("draining")
            } else {
                Status::success()
            }
        }
        fn events_to_register(&self) -> Vec<ClusterEvent> {
            vec![ClusterEvent::node(Actions::ADD | Actions::UPDATE_LABEL), ClusterEvent::assigned_pod(Actions::DELETE)]
        }
        fn queueing_hint(
            &self,
            _pod: &Pod,
            event: &ClusterEvent,
            _old: Option<&EventObject>,
            new: Option<&EventObject>,
        ) -> QueueingHint {
            let ready = new.and_then(EventObject::node).and_then(|n| n.label("ready")).is_some();
            QueueingHint::queue_if(event.matches(&ClusterEvent::node(Actions::ADD)) && ready)
        }
    }

    // The macro's arms are checked natively too (its exports exist only in Wasm).
    crate::export!(Everything: pre_enqueue, queue_sort, pre_filter, filter, post_filter, pre_score, score, reserve,
        permit, pre_bind, bind, post_bind, events, pods);

    fn labelled(name: &str, labels: &[(&str, &str)]) -> Pod {
        labels.iter().fold(Pod::new("ns", name), |p, (k, v)| p.with_label(k, v))
    }

    #[test]
    fn pre_enqueue_and_pre_filter() {
        let st = testing::pre_enqueue::<Everything>(Pod::new("ns", "p"));
        assert_eq!((st.code, st.message()), (Code::Pending, "p is not ready".to_string()));
        assert!(testing::pre_enqueue::<Everything>(labelled("p", &[("ready", "")])).is_success());

        assert_eq!(testing::pre_filter::<Everything>(Pod::new("ns", "p")), PreFilterResult::success());
        assert_eq!(host::cycle_state_read("prefilter"), Some(b"p".to_vec()));
        let r = testing::pre_filter::<Everything>(labelled("q", &[("only", "a,b")]));
        assert_eq!(r.node_names, Some(vec!["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn add_and_remove_pod_see_the_node_and_its_data() {
        testing::load_nodes(vec![Node::new("a").with_label("zone", "z1"), Node::new("b")]);
        let st = testing::pre_filter_add_pod::<Everything>(Pod::new("ns", "p"), Pod::new("ns", "v"), 0);
        assert_eq!(st.message(), "p + v on a in z1");
        let st = testing::pre_filter_remove_pod::<Everything>(Pod::new("ns", "p"), Pod::new("ns", "v"), 1);
        assert_eq!(st.message(), "p - v on b");
        let st = testing::pre_filter_add_pod::<Everything>(Pod::new("ns", "p"), Pod::new("ns", "v"), 7);
        assert_eq!((st.code, st.message()), (Code::Error, "node slot 7 is not in the plugin's node table".into()));
    }

    #[test]
    fn post_filter_gets_each_rejected_node_with_its_status() {
        testing::load_nodes(vec![Node::new("a"), Node::new("b").with_label("zone", "z2")]);
        let r = testing::post_filter::<Everything>(
            Pod::new("ns", "p"),
            vec![(0, Status::unresolvable("no")), (1, Status::unschedulable("full"))],
        );
        assert_eq!(r, PostFilterResult::nominate("b (z2)"));
        let r = testing::post_filter::<Everything>(Pod::new("ns", "p"), vec![(0, Status::unresolvable("no"))]);
        assert_eq!((r.status.code, r.status.message()), (Code::Unschedulable, "1 nodes, none helps".into()));
        let r = testing::post_filter::<Everything>(Pod::new("ns", "p"), vec![(3, Status::unresolvable("no"))]);
        assert_eq!(r.status.code, Code::Error);
    }

    #[test]
    fn pre_score_hands_score_the_cycle_state() {
        let slots = testing::load_nodes(vec![
            Node::new("a").with_label("zone", "z1"),
            Node::new("b").with_label("zone", "z1"),
            Node::new("c").with_label("zone", "z2"),
        ]);
        assert!(testing::pre_score::<Everything>(Pod::new("ns", "p"), slots.clone()).is_success());
        let reads = testing::cycle_state_reads();
        assert_eq!(testing::score::<Everything>(Pod::new("ns", "p"), slots), Ok(vec![2, 2, 1]));
        assert_eq!(testing::cycle_state_reads() - reads, 1, "three nodes read the state: one crossing per batch");
        testing::clear_cycle_state();
        assert_eq!(testing::score::<Everything>(Pod::new("ns", "p"), vec![0]).unwrap_err().message(), "no PreScore");
        assert_eq!(testing::pre_score::<Everything>(Pod::new("ns", "p"), vec![0, 9]).code, Code::Error);
    }

    #[test]
    fn reserve_reads_the_pod_view() {
        let g = |name: &str| labelled(name, &[("group", "g")]);
        testing::upsert_pods(vec![
            KnownPod::assumed(g("a"), "n1", 1),
            KnownPod::bound(g("b"), "n2", 2),
            KnownPod::pending(g("c"), 3),
            KnownPod::bound(labelled("d", &[("group", "h")]), "n2", 4),
        ]);
        assert_eq!(testing::reserve::<Everything>(g("c"), "n3").message(), "c on n3: 2 placed");
        testing::remove_pod("ns/b");
        testing::upsert_pods(vec![KnownPod::assumed(g("c"), "n3", 3)]);
        assert_eq!(testing::reserve::<Everything>(g("c"), "n3").message(), "c on n3: 2 placed");
        assert_eq!(pods().get("ns/c").map(|p| p.state), Some(PodState::Assumed));
        testing::apply_pods(vec![crate::types::PodChange::Reset]);
        assert_eq!(testing::reserve::<Everything>(g("c"), "n3").message(), "c on n3: 0 placed");
    }

    #[test]
    fn permit_answers_and_waiting_pods_are_allowed_or_rejected() {
        let wait = testing::permit::<Everything>(labelled("p", &[("wait", "")]), "n");
        assert_eq!((wait.status.code, wait.timeout_ms), (Code::Wait, 1500));
        assert_eq!(wait, Permit::Wait(Duration::from_millis(1500)).into());
        let deny = testing::permit::<Everything>(labelled("p", &[("deny", "")]), "n");
        assert_eq!(deny, Permit::Reject(Status::unschedulable("denied")).into());

        testing::set_waiting_pods(vec![
            WaitingPod::new(Pod::new("ns", "w1"), "n1", &[PLUGIN_NAME]),
            WaitingPod::new(Pod::new("ns", "w2"), "n2", &[PLUGIN_NAME, "Other", "Third"]),
        ]);
        assert!(testing::permit::<Everything>(Pod::new("ns", "p"), "n").status.is_success());
        let calls = testing::take_waiting_pod_calls();
        let allow =
            |uid: &str, plugin: &str, found| WaitingPodCall::Allow { uid: uid.into(), plugin: plugin.into(), found };
        assert_eq!(
            calls,
            [
                allow("ns/w1", PLUGIN_NAME, true),
                allow("ns/w1", "Other", false),
                allow("ns/w2", PLUGIN_NAME, true),
                allow("ns/w2", "Other", true)
            ]
        );
        // w1 had only this plugin to wait for and went on; w2 still waits for Third.
        let left = testing::waiting_pods();
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].pod.name.as_str(), left[0].pending_plugins.clone()), ("w2", vec!["Third".to_string()]));
    }

    #[test]
    fn unreserve_rejects_the_group_once() {
        let g = |name: &str| labelled(name, &[("group", "g")]);
        testing::set_waiting_pods(vec![
            WaitingPod::new(g("w1"), "n1", &[PLUGIN_NAME]),
            WaitingPod::new(labelled("w2", &[("group", "h")]), "n1", &[PLUGIN_NAME]),
        ]);
        testing::unreserve::<Everything>(g("p"), "n");
        testing::unreserve::<Everything>(g("p"), "n");
        let reject = WaitingPodCall::Reject {
            uid: "ns/w1".into(),
            plugin: PLUGIN_NAME.into(),
            reason: "sibling unreserved".into(),
            found: true,
        };
        assert_eq!(testing::take_waiting_pod_calls(), [reject]);
        assert_eq!(testing::waiting_pods().len(), 1);
    }

    #[test]
    fn pre_bind_bind_and_defaults() {
        assert_eq!(
            testing::pre_bind::<Everything>(Pod::new("ns", "p"), "drain").code,
            Code::UnschedulableAndUnresolvable
        );
        assert!(testing::pre_bind::<Everything>(Pod::new("ns", "p"), "n").is_success());
        assert_eq!(testing::bind::<Everything>(Pod::new("ns", "p"), "n").code, Code::Skip, "the default binder binds");
    }

    #[test]
    fn events_and_queueing_hints() {
        assert_eq!(
            testing::events_to_register::<Everything>(),
            [ClusterEvent::node(Actions::ADD | Actions::UPDATE_LABEL), ClusterEvent::assigned_pod(Actions::DELETE)]
        );
        let ready = EventObject::Node(Node::new("n").with_label("ready", ""));
        let hint = |event, new| testing::queueing_hint::<Everything>(Pod::new("ns", "p"), event, None, new);
        assert_eq!(hint(ClusterEvent::node(Actions::ADD), Some(ready.clone())), QueueingHint::Queue);
        assert_eq!(
            hint(ClusterEvent::node(Actions::ADD), Some(EventObject::Node(Node::new("n")))),
            QueueingHint::QueueSkip
        );
        assert_eq!(hint(ClusterEvent::node(Actions::UPDATE_LABEL), Some(ready)), QueueingHint::QueueSkip);
        assert!(Actions::UPDATE.contains(Actions::UPDATE_TAINT) && !Actions::UPDATE.contains(Actions::ADD));
        assert!(!ClusterEvent::node(Actions::ADD).matches(&ClusterEvent::assigned_pod(Actions::ADD)));
    }

    #[test]
    fn a_failed_configuration_fails_every_point_safely() {
        testing::set_config(r#"{"surprise": 1}"#);
        let e = testing::validate::<Everything>().unwrap_err();
        assert!(e.ends_with(r#"config: unknown key "surprise" (known: )"#), "{e}");
        let p = || Pod::new("ns", "p");
        assert_eq!(testing::pre_enqueue::<Everything>(p()).code, Code::Error);
        assert_eq!(testing::pre_filter::<Everything>(p()).status.code, Code::Error);
        assert_eq!(testing::post_filter::<Everything>(p(), vec![]).status.code, Code::Error);
        assert_eq!(testing::pre_score::<Everything>(p(), vec![]).code, Code::Error);
        assert_eq!(testing::reserve::<Everything>(p(), "n").code, Code::Error);
        testing::unreserve::<Everything>(p(), "n");
        assert_eq!(testing::permit::<Everything>(p(), "n").status.code, Code::Error);
        assert_eq!(testing::pre_bind::<Everything>(p(), "n").code, Code::Error);
        assert_eq!(testing::bind::<Everything>(p(), "n").code, Code::Error);
        assert!(testing::events_to_register::<Everything>().is_empty());
        let hint = testing::queueing_hint::<Everything>(p(), ClusterEvent::node(Actions::ADD), None, None);
        assert_eq!(hint, QueueingHint::Queue, "a pod is retried when the hint cannot be computed");
    }
}
