//! RandomScore: a Score and PostBind plugin. Each node gets a random score in 0–99, drawn from a generator that
//! the host's seeds every 64 draws (the host's is seeded in the simulator, so runs repeat; a host call per node
//! was most of this plugin's cost); PostBind logs every decision at debug level (as kube-scheduler logs a binding
//! at verbosity 2), which costs one host call when the scheduler's log is not at debug.

use std::cell::Cell;

use kws_plugin_sdk::{host, Config, CyclePod, Declared, NodeInfo, Plugin, PodRef, Status};

/// The plugin (no configuration).
pub struct RandomScore;

/// Draws between two seeds from the host.
const DRAWS_PER_SEED: u32 = 64;

thread_local! {
    /// splitmix64's state and the draws left before the next seed.
    static STATE: Cell<(u64, u32)> = const { Cell::new((0, 0)) };
}

/// A random number in 0..n: splitmix64, seeded from `host.random` every [`DRAWS_PER_SEED`] draws.
fn random_below(n: u64) -> u64 {
    STATE.with(|s| {
        let (mut x, left) = s.get();
        let left = if left == 0 {
            x = host::random_u64();
            DRAWS_PER_SEED
        } else {
            left
        };
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set((x, left - 1));
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        high_product(z, n)
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

    /// Scores are drawn in 0–99 and never read a node, so the host can skip NormalizeScore and the node rows that
    /// every binding would otherwise resend.
    fn declare(&self) -> Declared {
        Declared::SCORE_NEEDS_NO_NORMALIZE | Declared::IGNORES_NODE_USAGE
    }

    fn score(&self, _pod: &CyclePod, _node: &NodeInfo<'_, ()>) -> Result<i64, Status> {
        Ok(random_below(100) as i64)
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
            Declared::SCORE_NEEDS_NO_NORMALIZE | Declared::IGNORES_NODE_USAGE
        );
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
