//! The per-instance state behind the exports (the plugin object and the node table) and the generated Guest
//! traits implemented in terms of [`Plugin`].

use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

use crate::bindings::exports::kws::plugin as exports;
use crate::bindings::exports::kws::plugin::filter::FilterResult;
use crate::config::Config;
use crate::host::{self, Level};
use crate::table::{NodeTable, Prepared};
use crate::types::{CyclePod, NodeChange, NodeSlot, Pod, QueuedPod, Status};
use crate::{batch, Plugin};

thread_local! {
    /// The node table (a component instance is single-threaded; "thread-local" is just "global" there).
    static TABLE: RefCell<NodeTable> = const { RefCell::new(NodeTable::new()) };
    /// The plugin, built on first use from the host's configuration, or why it could not be built.
    static PLUGIN: RefCell<Option<Result<Rc<dyn Any>, String>>> = const { RefCell::new(None) };
    /// The plugin's prepared node data (a `Prepared<P::NodeData>`), created with the plugin.
    static PREPARED: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    /// The current cycle's pod (a new, unfetched one at each `cycle.begin`), which Filter, Score and NormalizeScore
    /// refer to.
    static POD: RefCell<Option<Rc<CyclePod>>> = const { RefCell::new(None) };
}

/// The current cycle's pod; an error when the host has not begun a cycle.
fn cycle_pod() -> Result<Rc<CyclePod>, String> {
    POD.with(|p| p.borrow().clone()).ok_or_else(|| "no cycle has begun (the host did not call cycle.begin)".to_string())
}

/// The type the export macros export: it implements the generated Guest traits by calling `P`'s methods.
#[doc(hidden)]
pub struct Component<P>(PhantomData<P>);

/// Builds the plugin from the host's configuration.
fn build<P: Plugin>() -> Result<Rc<dyn Any>, String> {
    let raw = host::config();
    let config = Config::parse(&raw).map_err(|e| format!("plugin configuration {raw:?}: {e}"))?;
    let plugin = P::new(&config).map_err(|e| format!("plugin configuration {raw:?}: {e}"))?;
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

/// Forgets the plugin instance, its prepared node data and the cycle's pod (tests).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn reset_plugin() {
    PLUGIN.with(|p| *p.borrow_mut() = None);
    PREPARED.with(|d| *d.borrow_mut() = None);
    POD.with(|p| *p.borrow_mut() = None);
}

/// Forgets the plugin instance and the node table (tests).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn reset() {
    reset_plugin();
    TABLE.with(|t| t.borrow_mut().clear());
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

impl<P: Plugin> exports::cycle::Guest for Component<P> {
    fn begin() {
        POD.with(|p| *p.borrow_mut() = Some(Rc::new(CyclePod::on_first_read())));
    }
}

impl<P: Plugin> exports::filter::Guest for Component<P> {
    fn filter(nodes: Vec<NodeSlot>) -> FilterResult {
        let run = || -> Result<FilterResult, String> {
            let pod = cycle_pod()?;
            with_plugin::<P, _>(|p| with_nodes(p, |t, d| batch::filter(p, t, d, &pod, &nodes)))?
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
            let pod = cycle_pod()?;
            with_plugin::<P, _>(|p| with_nodes(p, |t, d| batch::score(p, t, d, &pod, &nodes)))?
        };
        run().unwrap_or_else(|e| Err(Status::error(e)))
    }

    fn normalize_score(_nodes: Vec<NodeSlot>, scores: Vec<i64>) -> Result<Vec<i64>, Status> {
        let run = || -> Result<Result<Vec<i64>, Status>, String> {
            let pod = cycle_pod()?;
            with_plugin::<P, _>(|p| batch::normalize_score(p, &pod, scores))
        };
        run().unwrap_or_else(|e| Err(Status::error(e)))
    }
}

impl<P: Plugin> exports::queue_sort::Guest for Component<P> {
    fn less(a: QueuedPod, b: QueuedPod) -> bool {
        // Without a plugin (bad configuration, already logged) the queue still needs an order: PrioritySort's.
        with_plugin::<P, _>(|p| p.less(&a, &b)).unwrap_or_else(|_| crate::types::priority_sort_less(&a, &b))
    }
}

impl<P: Plugin> exports::post_bind::Guest for Component<P> {
    fn post_bind(pod: Pod, node: String) {
        // A configuration error was logged when building the plugin; PostBind has no way to report it.
        let _ = with_plugin::<P, _>(|p| p.post_bind(&pod, &node));
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
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
    fn calls_refer_to_the_pod_of_the_last_begin_and_fail_without_one() {
        use crate::bindings::exports::kws::plugin as ex;
        use crate::runtime::Component;
        testing::load_nodes(vec![Node::new("a")]);
        let r = <Component<Counted> as ex::filter::Guest>::filter(vec![0]);
        assert_eq!(r.statuses[0].message(), "no cycle has begun (the host did not call cycle.begin)");
        let e = <Component<Counted> as ex::score::Guest>::score(vec![0]).unwrap_err();
        assert_eq!(e.message(), "no cycle has begun (the host did not call cycle.begin)");
        testing::begin::<Counted>(Pod::new("ns", "first"));
        testing::begin::<Counted>(Pod::new("ns", "second"));
        let r = <Component<Counted> as ex::filter::Guest>::filter(vec![0]);
        assert_eq!(r.statuses[0].message(), "no a for second");
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
