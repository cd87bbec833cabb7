//! RandomScore: a Score and PostBind plugin. Each node gets a random score in 0–99, drawn from a generator that
//! the host's seeds every 64 draws (the host's is seeded in the simulator, so runs repeat; a host call per node
//! was most of this plugin's cost); PostBind logs every decision at debug level (as kube-scheduler logs a binding
//! at verbosity 2), which costs one host call when the scheduler's log is not at debug.

use std::cell::Cell;

use kws_plugin_sdk::{host, Config, CyclePod, Declared, NodeInfo, Plugin, PodRef, ScoreBatch, Status};

/// The plugin (no configuration).
pub struct RandomScore;

/// Draws between two seeds from the host.
const DRAWS_PER_SEED: u32 = 64;

thread_local! {
    /// splitmix64's state and the draws left before the next seed.
    static STATE: Cell<(u64, u32)> = const { Cell::new((0, 0)) };
}

/// Fills `out` with random numbers in 0..n: splitmix64, seeded from `host.random` every [`DRAWS_PER_SEED`]
/// draws. The generator's state is read once and written back once, and the host call sits outside the inner
/// loop, so the loop keeps everything in registers.
fn fill_random_below(out: &mut [i64], n: u64) {
    STATE.with(|s| {
        let (mut x, mut left) = s.get();
        let mut rest = out;
        while !rest.is_empty() {
            if left == 0 {
                x = host::random_u64();
                left = DRAWS_PER_SEED;
            }
            let (now, later) = rest.split_at_mut(rest.len().min(left as usize));
            for v in now.iter_mut() {
                x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                *v = high_product(z, n) as i64;
            }
            left -= now.len() as u32;
            rest = later;
        }
        s.set((x, left));
    })
}

/// `(z * n) >> 64`, the draw's range reduction. For `n` below 2³² it is computed in 64-bit halves, exactly: a
/// 128-bit multiply is a library call (`__multi3`) in Wasm, and it was a visible share of every Score batch.
fn high_product(z: u64, n: u64) -> u64 {
    if n >> 32 != 0 {
        return ((u128::from(z) * u128::from(n)) >> 64) as u64;
    }
    let (hi, lo) = (z >> 32, z & 0xFFFF_FFFF);
    // hi·n < 2⁶⁴ and (lo·n) >> 32 < n, so the sum cannot overflow.
    (hi * n + ((lo * n) >> 32)) >> 32
}

impl Plugin for RandomScore {
    type NodeData = ();

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(RandomScore)
    }

    /// Scores are drawn in 0–99 and never read a node, so the host can skip NormalizeScore and every node row.
    fn declare(&self) -> Declared {
        Declared::SCORE_NEEDS_NO_NORMALIZE | Declared::IGNORES_NODE_USAGE | Declared::SCORE_READS_NO_NODE
    }

    fn score(&self, _pod: &CyclePod, _node: &NodeInfo<'_, ()>) -> Result<i64, Status> {
        let mut v = [0];
        fill_random_below(&mut v, 100);
        Ok(v[0])
    }

    /// The whole batch at once, without looking a node up: the draws are the ones `score` would make in turn.
    fn score_batch(&self, _pod: &CyclePod, _nodes: &ScoreBatch<'_, ()>, out: &mut [i64]) -> Result<(), Status> {
        fill_random_below(out, 100);
        Ok(())
    }

    /// Reads the two fields it logs, not the whole pod, and only when the line would be written.
    fn post_bind_ref(&self, pod: &PodRef<'_>, node: &str) {
        kws_plugin_sdk::debug!("Decision: {}/{} => {}", pod.namespace(), pod.name(), node);
    }
}

kws_plugin_sdk::export!(RandomScore: score, post_bind);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::{testing, Level, Node, Pod};

    #[test]
    fn scores_are_random_in_range_and_normalize_keeps_them() {
        let slots = testing::load_nodes((0..50).map(|i| Node::new(&format!("n{i}"))).collect());
        let scores = testing::score::<RandomScore>(Pod::new("default", "p"), slots.clone()).unwrap();
        assert!(scores.iter().all(|s| (0..100).contains(s)));
        assert!(scores.iter().any(|&s| s != scores[0]));
        let pairs: Vec<_> = slots.into_iter().zip(scores.iter().copied()).collect();
        assert_eq!(testing::normalize_score::<RandomScore>(Pod::new("default", "p"), pairs), Ok(scores));
    }

    #[test]
    fn a_batch_draws_what_scoring_node_by_node_would() {
        let slots = testing::load_nodes((0..150).map(|i| Node::new(&format!("n{i}"))).collect());
        testing::seed_random(42);
        let batch = testing::score::<RandomScore>(Pod::new("default", "p"), slots.clone()).unwrap();
        testing::seed_random(42);
        STATE.with(|s| s.set((0, 0)));
        let pod = kws_plugin_sdk::CyclePod::from(Pod::new("default", "p"));
        let node = Node::new("n0");
        let one_by_one: Vec<i64> =
            slots.iter().map(|_| RandomScore.score(&pod, &NodeInfo::new(&node, &())).unwrap()).collect();
        assert_eq!(batch, one_by_one, "150 draws: the host's seed is asked for three times in both");
    }

    #[test]
    fn high_product_is_the_128_bit_one() {
        let mut z: u64 = 0x0123_4567_89AB_CDEF;
        for i in 0..100_000u64 {
            z = z.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i);
            for n in [0, 1, 2, 99, 100, 101, 1 << 31, u64::from(u32::MAX), 1 << 32, u64::MAX, i] {
                assert_eq!(high_product(z, n), ((u128::from(z) * u128::from(n)) >> 64) as u64, "{z} {n}");
            }
        }
        for z in [0, 1, u64::MAX, u64::MAX - 1, 1 << 63] {
            assert_eq!(high_product(z, 100), ((u128::from(z) * 100) >> 64) as u64);
        }
    }

    #[test]
    fn declares_what_lets_the_host_skip_work() {
        assert_eq!(
            testing::declare::<RandomScore>(),
            Declared::SCORE_NEEDS_NO_NORMALIZE
                | Declared::IGNORES_NODE_USAGE
                | Declared::SCORE_READS_NO_NODE
                | Declared::NEEDS_NO_CYCLE_BEGIN
        );
        // It scores without a table: no node was ever loaded into it.
        let scores = testing::score::<RandomScore>(Pod::new("default", "p"), vec![3, 9, 27]).unwrap();
        assert!(scores.iter().all(|s| (0..100).contains(s)));
    }

    #[test]
    fn post_bind_logs_the_decision_at_debug_level() {
        testing::post_bind::<RandomScore>(Pod::new("team-a", "web-1"), "node-3");
        assert_eq!(testing::take_logs(), vec![(Level::Debug, "Decision: team-a/web-1 => node-3".to_string())]);
        // A log at info level: nothing is formatted or written.
        testing::set_log_level(Level::Info);
        testing::post_bind::<RandomScore>(Pod::new("team-a", "web-2"), "node-3");
        assert_eq!(testing::take_logs(), vec![]);
    }
}
