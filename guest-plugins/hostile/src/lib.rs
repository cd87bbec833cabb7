//! Hostile: a test fixture that misbehaves in the way its configuration asks (`{"mode": "..."}`), to prove the
//! host survives it: `loop` (Filter never returns), `grow` (Score allocates without bound), `trap-filter`,
//! `trap-score`, `trap-normalize` (a trap in each export), `score-1000` (a normalized score out of range),
//! `log-flood` (100 `host.log` lines per Filter call), and `ok` (behaves). (A Rust guest built for
//! wasm32-unknown-unknown has no stdout; the chatty-py fixture prints.) Built with the cargo feature `sort` it is a QueueSort plugin instead, whose `less` obeys
//! the same `loop` and `trap-filter` modes (the `hostile-sort` fixture). One more mode is not hostile but checks the host: `name-the-pod` rejects every node with a
//! reason naming the cycle's pod, so a test can see that each cycle's Filter reads its own pod (`host.cycle-pod`).
//! Built with the cargo feature `peek` (the `hostile-peek` fixture) it also follows the pod view and its Filter
//! rejects every node naming every pod it can see (`namespace/name`, or `?/?:UID` for a pod shown without
//! them), and every pod waiting at Permit it can list: a tenant's policy written to learn other namespaces' pods.

use kws_plugin_sdk::{Config, CyclePod, NodeInfo, Plugin, Status};

/// The misbehaviour.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ok,
    Loop,
    Grow,
    TrapFilter,
    TrapScore,
    TrapNormalize,
    Score1000,
    NameThePod,
    LogFlood,
    Peek,
}

/// The plugin.
pub struct Hostile {
    mode: Mode,
}

impl Plugin for Hostile {
    type NodeData = ();

    fn new(config: &Config) -> Result<Self, String> {
        let mode = match config.str("mode")?.unwrap_or("ok") {
            "ok" => Mode::Ok,
            "loop" => Mode::Loop,
            "grow" => Mode::Grow,
            "trap-filter" => Mode::TrapFilter,
            "trap-score" => Mode::TrapScore,
            "trap-normalize" => Mode::TrapNormalize,
            "score-1000" => Mode::Score1000,
            "name-the-pod" => Mode::NameThePod,
            "log-flood" => Mode::LogFlood,
            "peek" => Mode::Peek,
            other => return Err(format!("unknown mode {other:?}")),
        };
        Ok(Hostile { mode })
    }

    fn filter(&self, pod: &CyclePod, _node: &NodeInfo<'_, ()>) -> Status {
        match self.mode {
            Mode::Loop => {
                let mut n: u64 = 0;
                // Observable side effect so the loop is not optimized away.
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            Mode::TrapFilter => panic!("hostile guest: trap in filter"),
            Mode::NameThePod => Status::unschedulable(format!("node(s) not for pod {}/{}", pod.namespace, pod.name)),
            Mode::Peek => {
                let name = |p: &kws_plugin_sdk::Pod| {
                    if p.name.is_empty() {
                        format!("?/?:{}", p.uid)
                    } else {
                        format!("{}/{}", p.namespace, p.name)
                    }
                };
                let mut seen: Vec<String> = kws_plugin_sdk::pods().iter().map(|k| name(&k.pod)).collect();
                seen.extend(kws_plugin_sdk::host::waiting_pods().iter().map(|w| format!("waiting:{}", name(&w.pod))));
                seen.sort();
                Status::unschedulable(format!("sees {}", seen.join(" ")))
            }
            Mode::LogFlood => {
                for i in 0..100 {
                    kws_plugin_sdk::host::log(kws_plugin_sdk::host::Level::Info, &format!("hostile guest: line {i}"));
                }
                Status::success()
            }
            _ => Status::success(),
        }
    }

    fn score(&self, _pod: &CyclePod, _node: &NodeInfo<'_, ()>) -> Result<i64, Status> {
        match self.mode {
            Mode::Grow => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            Mode::TrapScore => panic!("hostile guest: trap in score"),
            _ => Ok(50),
        }
    }

    fn normalize_score(&self, _pod: &CyclePod, scores: &mut [i64]) -> Result<(), Status> {
        match self.mode {
            Mode::TrapNormalize => panic!("hostile guest: trap in normalize-score"),
            Mode::Score1000 => {
                scores.iter_mut().for_each(|s| *s = 1000);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn less(&self, a: &kws_plugin_sdk::QueuedPod, b: &kws_plugin_sdk::QueuedPod) -> bool {
        match self.mode {
            Mode::Loop => loop {
                std::hint::black_box(a);
            },
            Mode::TrapFilter => panic!("hostile guest: trap in less"),
            _ => a.timestamp_ns < b.timestamp_ns,
        }
    }
}

#[cfg(not(any(feature = "sort", feature = "peek")))]
kws_plugin_sdk::export_filter_score!(Hostile);
#[cfg(feature = "peek")]
kws_plugin_sdk::export!(Hostile: filter, score, pods);
#[cfg(feature = "sort")]
kws_plugin_sdk::export_queue_sort!(Hostile);
