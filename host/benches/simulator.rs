//! Scheduling throughput of the whole framework cycle (default profile, in-memory cluster, no API server):
//! pods per second at 500 and 5,000 nodes.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};

use kube_wasm_scheduler::config::SchedulerConfig;
use kube_wasm_scheduler::plugins::in_tree_registry;
use kube_wasm_scheduler::sim::{generate, SimOptions, Simulation};

const PODS: usize = 1000;

fn throughput(c: &mut Criterion) {
    let cfg = SchedulerConfig::default_config();
    let registry = in_tree_registry();
    let mut g = c.benchmark_group("schedule_default_profile");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PODS as u64));
    for nodes in [500usize, 5000] {
        let file = generate::cluster(nodes, PODS);
        g.bench_with_input(BenchmarkId::new("nodes", nodes), &nodes, |b, _| {
            b.iter_batched(
                || Simulation::new(&cfg, &registry, &file, &SimOptions::default()).expect("simulation"),
                |sim| {
                    let r = sim.run();
                    assert_eq!(r.placements.iter().filter(|p| p.node.is_some()).count(), PODS);
                    r
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
