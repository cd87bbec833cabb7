//! Pod status patches (`status.nominatedNodeName`, the PodScheduled=False condition, DRA's
//! `extendedResourceClaimStatus`) sent off the caller's thread: the scheduling loop queues them and goes on to the
//! next pod. Patches to one pod are sent in the order they were queued (a nomination and its clearing must not
//! cross); patches to different pods go concurrently.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// One queued patch of a pod's status.
struct StatusPatch {
    namespace: String,
    name: String,
    uid: String,
    /// Strategic merge (conditions merge by type) or JSON merge.
    strategic: bool,
    body: serde_json::Value,
    /// What the patch does, for the log line when it fails.
    what: &'static str,
    /// Told the outcome once the patch is done (an error's text).
    ack: oneshot::Sender<Result<(), String>>,
}

/// Sends pod status patches in the background, in order per pod.
#[derive(Clone)]
pub struct StatusPatcher {
    tx: mpsc::UnboundedSender<StatusPatch>,
}

impl StatusPatcher {
    /// Starts the patcher's task on `runtime`.
    pub fn start(client: kube::Client, runtime: &tokio::runtime::Handle) -> StatusPatcher {
        let (tx, rx) = mpsc::unbounded_channel();
        runtime.spawn(run(client, rx));
        StatusPatcher { tx }
    }

    /// Queues a patch of `pod`'s status; `strategic` selects a strategic merge patch over a JSON merge patch. The
    /// answer tells the outcome once the patch is done, for a caller that waits for it (most do not).
    pub fn patch(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        strategic: bool,
        body: serde_json::Value,
        what: &'static str,
    ) -> oneshot::Receiver<Result<(), String>> {
        let (ack, done) = oneshot::channel();
        let p = StatusPatch {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
            strategic,
            body,
            what,
            ack,
        };
        // The receiver lives as long as the runtime; after shutdown there is nobody left to tell (the dropped ack
        // tells a waiting caller so).
        let _ = self.tx.send(p);
        done
    }
}

async fn run(client: kube::Client, mut rx: mpsc::UnboundedReceiver<StatusPatch>) {
    // The last patch sent per pod: the next one for that pod waits for it.
    let mut last: HashMap<String, JoinHandle<()>> = HashMap::new();
    // Finished entries are swept when the map doubles past what the last sweep left, so a storm of patches to
    // thousands of pods costs a sweep now and then, not one per patch.
    let mut sweep_at = 1024;
    while let Some(p) = rx.recv().await {
        if last.len() >= sweep_at {
            last.retain(|_, h| !h.is_finished());
            sweep_at = (2 * last.len()).max(1024);
        }
        let before = last.remove(&p.uid);
        let uid = p.uid.clone();
        let client = client.clone();
        let handle = tokio::spawn(async move {
            if let Some(h) = before {
                let _ = h.await;
            }
            let api: Api<Pod> = Api::namespaced(client, &p.namespace);
            let params = PatchParams::default();
            let r = if p.strategic {
                api.patch_status(&p.name, &params, &Patch::Strategic(&p.body)).await
            } else {
                api.patch_status(&p.name, &params, &Patch::Merge(&p.body)).await
            };
            if let Err(e) = &r {
                tracing::warn!(pod = %format!("{}/{}", p.namespace, p.name), error = %e, "{} failed", p.what);
            }
            // Nobody may be waiting: most callers drop the answer.
            let _ = p.ack.send(r.map(|_| ()).map_err(|e| e.to_string()));
        });
        last.insert(uid, handle);
    }
}
