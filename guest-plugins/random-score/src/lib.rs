//! RandomScore: a Score and PostBind plugin. Each node gets a random score in 0–99 from the host's generator
//! (seeded in the simulator, so runs repeat); PostBind logs every decision.

use kws_plugin_sdk::{host, Config, CyclePod, NodeInfo, Plugin, Pod, Status};

/// The plugin (no configuration).
pub struct RandomScore;

impl Plugin for RandomScore {
    type NodeData = ();

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(RandomScore)
    }

    fn score(&self, _pod: &CyclePod, _node: &NodeInfo<'_, ()>) -> Result<i64, Status> {
        Ok(host::random_below(100) as i64)
    }

    fn post_bind(&self, pod: &Pod, node: &str) {
        kws_plugin_sdk::info!("Decision: {}/{} => {}", pod.namespace, pod.name, node);
    }
}

kws_plugin_sdk::export_score_post_bind!(RandomScore);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::{testing, Level, Node};

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
    fn post_bind_logs_the_decision() {
        testing::post_bind::<RandomScore>(Pod::new("team-a", "web-1"), "node-3");
        assert_eq!(testing::take_logs(), vec![(Level::Info, "Decision: team-a/web-1 => node-3".to_string())]);
    }
}
