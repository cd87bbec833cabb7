//! ImageLocality: favours nodes that already hold the pod's container images, weighting each image by its size
//! and by how widely it has spread across the cluster (to avoid piling pods onto the few nodes that have it), as
//! upstream.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Container;

use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    ClusterEvent, CycleState, NodeInfo, Plugin, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE,
};

/// The plugin's name in profiles.
pub const NAME: &str = "ImageLocality";
/// CycleState key of the PreScore data (normalized image names and the cluster's node count).
pub const PRE_SCORE_STATE_KEY: &str = NAME;

const MB: i64 = 1024 * 1024;
/// Image sizes summed below this score 0 (upstream `minThreshold`).
pub const MIN_THRESHOLD: i64 = 23 * MB;
/// Per-container size at which the score reaches the maximum (upstream `maxContainerThreshold`).
pub const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// The image name as the container runtime reports it: `:latest` is added when the name has no tag or digest
/// (upstream `normalizedImageName`).
pub fn normalized_image_name(name: &str) -> String {
    let last_colon = name.rfind(':').map_or(-1, |i| i as i64);
    let last_slash = name.rfind('/').map_or(-1, |i| i as i64);
    if last_colon <= last_slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

/// Scales the summed image score into [0, 100] between the thresholds (upstream `calculatePriority`).
pub fn calculate_priority(sum_scores: i64, num_containers: usize) -> i64 {
    let max_threshold = MAX_CONTAINER_THRESHOLD * num_containers as i64;
    let sum = if sum_scores < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else if sum_scores > max_threshold {
        max_threshold
    } else {
        sum_scores
    };
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
}

/// An image's size scaled by the fraction of nodes that have it (upstream `scaledImageScore`).
pub fn scaled_image_score(size: i64, num_nodes: usize, total_nodes: usize) -> i64 {
    let spread = num_nodes as f64 / total_nodes as f64;
    (size as f64 * spread) as i64
}

/// PreScore data, computed once per pod.
#[derive(Debug)]
struct PodImages {
    /// Normalized image names of the init containers, the containers and the image volumes (repeats kept, as
    /// upstream).
    images: Vec<String>,
    /// Init containers plus containers plus image volumes: the count the thresholds scale with.
    num_containers: usize,
    /// Nodes in the snapshot.
    total_nodes: usize,
}

/// PreScore data; cloning shares it.
#[derive(Debug, Clone)]
struct PreScoreState(Arc<PodImages>);

/// The ImageLocality plugin.
#[derive(Debug, Default)]
pub struct ImageLocality;

impl ImageLocality {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<ImageLocality, String> {
        Ok(ImageLocality)
    }

    fn pod_images(pod: &PodInfo, total_nodes: usize) -> PodImages {
        let spec = pod.pod.spec.as_ref();
        let init: &[Container] = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or(&[]);
        let containers: &[Container] = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
        let mut images: Vec<String> =
            init.iter().chain(containers).map(|c| normalized_image_name(c.image.as_deref().unwrap_or(""))).collect();
        // Since v1.36 (ImageVolume GA) an image volume counts as one more image, present on the node or not.
        let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
        images.extend(
            volumes
                .iter()
                .filter_map(|v| v.image.as_ref())
                .map(|i| normalized_image_name(i.reference.as_deref().unwrap_or(""))),
        );
        let num_containers = images.len();
        PodImages { images, num_containers, total_nodes }
    }

    fn score_with(s: &PodImages, node: &NodeInfo) -> i64 {
        if s.total_nodes == 0 {
            return 0;
        }
        let sum: i64 = s
            .images
            .iter()
            .filter_map(|img| node.image_states.get(img.as_str()))
            .map(|st| scaled_image_score(st.size, st.num_nodes, s.total_nodes))
            .sum();
        calculate_priority(sum, s.num_containers)
    }
}

impl Plugin for ImageLocality {
    fn name(&self) -> &str {
        NAME
    }
    /// A score plugin rejects no pod, so no event can make one schedulable.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }
    crate::serves!(pre_score, score, sign);
}

impl PreScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(Arc::new(Self::pod_images(pod, snapshot.len()))));
        Status::success()
    }
}

impl ScorePlugin for ImageLocality {
    /// Reads the cycle state once per batch, not once per node.
    fn score_nodes(&self, state: &CycleState, _pod: &PodInfo, nodes: &[&NodeInfo], out: &mut [i64]) -> Status {
        let Some(PreScoreState(s)) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Status::error(format!("error reading {PRE_SCORE_STATE_KEY:?} from cycleState: not found"));
        };
        for (n, o) in nodes.iter().zip(out.iter_mut()) {
            *o = Self::score_with(s, n);
        }
        Status::success()
    }

    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(PreScoreState(s)) => Ok(Self::score_with(s, node)),
            None => Err(Status::error(format!("error reading {PRE_SCORE_STATE_KEY:?} from cycleState: not found"))),
        }
    }
}

impl crate::framework::SignPlugin for ImageLocality {
    /// As upstream: the normalized image names of the containers and init containers, each once, sorted.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        let spec = pod.pod.spec.as_ref();
        let names: std::collections::BTreeSet<String> = spec
            .map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
            .into_iter()
            .flatten()
            .map(|c| normalized_image_name(c.image.as_deref().unwrap_or("")))
            .collect();
        Ok(vec![SignFragment { key: signers::IMAGE_NAMES, value: serde_json::json!(names) }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::types::ImageStateSummary;
    use crate::plugins::testutil::{node, pod};
    use serde_json::{json, Value};

    #[test]
    fn normalized_names() {
        for (input, want) in [
            ("nginx", "nginx:latest"),
            ("nginx:1.25", "nginx:1.25"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("localhost:5000/app:v1", "localhost:5000/app:v1"),
            ("gcr.io/a/b@sha256:abc", "gcr.io/a/b@sha256:abc"),
            ("", ":latest"),
        ] {
            assert_eq!(normalized_image_name(input), want, "{input}");
        }
    }

    /// A node holding `images` as (names, size) with the given spread `num_nodes`.
    fn node_with_images(name: &str, images: &[(&str, i64, usize)]) -> NodeInfo {
        let imgs: Vec<Value> = images.iter().map(|(n, size, _)| json!({"names": [n], "sizeBytes": size})).collect();
        let mut n = node(json!({"metadata": {"name": name}, "status": {"images": imgs}}));
        for (img, _, num) in images {
            n.image_states
                .insert(img.to_string(), ImageStateSummary { size: n.image_states[*img].size, num_nodes: *num });
        }
        n
    }

    fn pod_with(containers: &[&str], init: &[&str]) -> PodInfo {
        let c = |imgs: &[&str]| {
            imgs.iter().enumerate().map(|(i, im)| json!({"name": format!("c{i}"), "image": im})).collect::<Vec<_>>()
        };
        pod(json!({"metadata": {"name": "p"}, "spec": {"containers": c(containers), "initContainers": c(init)}}))
    }

    fn run(p: &PodInfo, n: &NodeInfo, total_nodes: usize) -> i64 {
        let snap = Snapshot::from_nodes(
            (0..total_nodes).map(|i| node(json!({"metadata": {"name": format!("s{i}")}}))).collect(),
        );
        let mut st = CycleState::new();
        assert!(ImageLocality.pre_score(&mut st, p, &[], &snap).is_success());
        ImageLocality.score(&st, p, n).unwrap()
    }

    #[test]
    fn score_table() {
        let cases: Vec<(&str, PodInfo, NodeInfo, usize, i64)> = vec![
            // Upstream's cases: 40 MB image on a node, 1 of 1 node -> 100*(40-23)/(1000-23) = 1.
            (
                "one 40MB image",
                pod_with(&["gcr.io/40"], &[]),
                node_with_images("n", &[("gcr.io/40:latest", 40 * MB, 1)]),
                1,
                1,
            ),
            // 250 MB + 10 MB on a node, pod with two containers: (260-23)*100/(2000-23) = 11.
            (
                "two images two containers",
                pod_with(&["gcr.io/250", "gcr.io/10"], &[]),
                node_with_images("n", &[("gcr.io/250:latest", 250 * MB, 1), ("gcr.io/10:latest", 10 * MB, 1)]),
                1,
                11,
            ),
            // Spread: the 250 MB image is on 1 of 2 nodes -> 125 MB: (125-23)*100/(1000-23) = 10.
            (
                "spread halves the size",
                pod_with(&["gcr.io/250"], &[]),
                node_with_images("n", &[("gcr.io/250:latest", 250 * MB, 1)]),
                2,
                10,
            ),
            // Above the max threshold: clamped -> 100.
            (
                "huge image",
                pod_with(&["gcr.io/2000"], &[]),
                node_with_images("n", &[("gcr.io/2000:latest", 2000 * MB, 1)]),
                1,
                100,
            ),
            // Below the min threshold -> 0.
            (
                "small image",
                pod_with(&["gcr.io/10"], &[]),
                node_with_images("n", &[("gcr.io/10:latest", 10 * MB, 1)]),
                1,
                0,
            ),
            // Tagged names are matched as written.
            (
                "tagged image",
                pod_with(&["gcr.io/300:v1"], &[]),
                node_with_images("n", &[("gcr.io/300:v1", 300 * MB, 1), ("gcr.io/300:latest", 900 * MB, 1)]),
                1,
                28,
            ),
            // Init containers count both in the sum and in the container count: (300-23)*100/(2000-23) = 14.
            (
                "init container image",
                pod_with(&["gcr.io/x"], &["gcr.io/300"]),
                node_with_images("n", &[("gcr.io/300:latest", 300 * MB, 1)]),
                1,
                14,
            ),
            // An image volume is one more image: (300-23)*100/(2000-23) = 14 for a container that is not there.
            (
                "image volume",
                pod(
                    json!({"metadata": {"name": "p", "uid": "p"}, "spec": {"containers": [{"name": "c", "image": "gcr.io/x"}],
                    "volumes": [{"name": "v", "image": {"reference": "gcr.io/300"}}]}}),
                ),
                node_with_images("n", &[("gcr.io/300:latest", 300 * MB, 1)]),
                1,
                14,
            ),
            (
                "image absent",
                pod_with(&["gcr.io/other"], &[]),
                node_with_images("n", &[("gcr.io/300:latest", 300 * MB, 1)]),
                1,
                0,
            ),
        ];
        for (name, p, n, total, want) in cases {
            assert_eq!(run(&p, &n, total), want, "{name}");
        }
    }

    /// Multi-arch: nodes report one image name with different sizes. Upstream scores every node with the
    /// cluster-wide size (the first reporting node's), so the nodes score alike; their own sizes would not.
    #[test]
    fn multi_arch_image_scores_every_node_with_the_first_reported_size() {
        let mut cache = crate::cache::Cache::new();
        for (name, size) in [("arm64-node", 300 * MB), ("amd64-node", 900 * MB)] {
            let n =
                json!({"metadata": {"name": name}, "status": {"images": [{"names": ["app:1"], "sizeBytes": size}]}});
            cache.add_node(serde_json::from_value(n).unwrap()).unwrap();
        }
        let mut snap = Snapshot::default();
        cache.update_snapshot(&mut snap);
        let p = pod_with(&["app:1"], &[]);
        let mut st = CycleState::new();
        assert!(ImageLocality.pre_score(&mut st, &p, &[], &snap).is_success());
        let score = |n: &str| ImageLocality.score(&st, &p, snap.get(n).unwrap()).unwrap();
        // 300 MB on 2 of 2 nodes: 100 * (300 - 23) / (1000 - 23) = 28 on both.
        assert_eq!((score("arm64-node"), score("amd64-node")), (28, 28));
    }

    #[test]
    fn score_without_prescore_is_an_error_and_no_events() {
        let p = pod_with(&["a"], &[]);
        assert!(ImageLocality.score(&CycleState::new(), &p, &node_with_images("n", &[])).is_err());
        assert!(ImageLocality.events_to_register().is_empty());
        assert_eq!(calculate_priority(0, 0), 0, "no containers");
    }
}
