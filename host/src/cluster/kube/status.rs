//! Pod status patches (`status.nominatedNodeName`, the PodScheduled=False condition, DRA's
//! `extendedResourceClaimStatus`) sent off the caller's thread: the scheduling loop queues them and goes on to the
//! next pod. Patches to one pod are sent in the order they were queued (a nomination and its clearing must not
//! cross); patches to different pods go concurrently. A patch queued while the pod's previous one is still waiting
//! to be sent is folded into it (as upstream's API dispatcher merges a pod's queued status updates): a pod refused
//! on every one of a hundred node additions while its first PodScheduled=False write is in flight costs two writes,
//! not a hundred, and the API server's time goes to the bindings.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    /// Told the outcome once the patch is done (an error's text): the callers of the patches folded into it.
    acks: Vec<oneshot::Sender<Result<(), String>>>,
}

impl StatusPatch {
    /// Folds `newer`, queued after this one for the same pod, into this one: the patch then sets what the two would
    /// set one after the other. Patches of the two kinds do not fold: `newer` is handed back.
    fn fold(&mut self, newer: StatusPatch) -> Option<StatusPatch> {
        if newer.strategic != self.strategic {
            return Some(newer);
        }
        merge_patches(&mut self.body, newer.body, self.strategic);
        self.what = newer.what;
        self.acks.extend(newer.acks);
        None
    }
}

/// Composes two patches of one kind into one: objects merge key by key with the newer value winning (a JSON
/// merge patch's null, which removes a field, included); in a strategic merge patch, `conditions` lists merge by
/// `type` (the strategy of a pod's status conditions), any other list is replaced.
fn merge_patches(older: &mut serde_json::Value, newer: serde_json::Value, strategic: bool) {
    use serde_json::Value;
    match (older, newer) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, v) in n {
                match o.get_mut(&k) {
                    Some(Value::Array(old)) if strategic && k == "conditions" => {
                        let Value::Array(new) = v else {
                            o.insert(k, v);
                            continue;
                        };
                        for c in new {
                            match old.iter_mut().find(|x| x.get("type").is_some() && x.get("type") == c.get("type")) {
                                Some(x) => *x = c,
                                None => old.push(c),
                            }
                        }
                    }
                    Some(old @ Value::Object(_)) if v.is_object() => merge_patches(old, v, strategic),
                    _ => {
                        o.insert(k, v);
                    }
                }
            }
        }
        (o, n) => *o = n,
    }
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
            acks: vec![ack],
        };
        // The receiver lives as long as the runtime; after shutdown there is nobody left to tell (the dropped ack
        // tells a waiting caller so).
        let _ = self.tx.send(p);
        done
    }
}

/// A patch while it waits for its turn, taken by its task when it starts.
type Waiting = Arc<Mutex<Option<StatusPatch>>>;

async fn run(client: kube::Client, mut rx: mpsc::UnboundedReceiver<StatusPatch>) {
    // Per pod: the last patch's task, and its patch while it waits to be sent (taken when the task starts). The next
    // patch for the pod folds into a waiting one, or waits for that task.
    let mut last: HashMap<String, (JoinHandle<()>, Waiting)> = HashMap::new();
    // Finished entries are swept when the map doubles past what the last sweep left, so a storm of patches to
    // thousands of pods costs a sweep now and then, not one per patch.
    let mut sweep_at = 1024;
    while let Some(p) = rx.recv().await {
        if last.len() >= sweep_at {
            last.retain(|_, (h, _)| !h.is_finished());
            sweep_at = (2 * last.len()).max(1024);
        }
        let uid = p.uid.clone();
        let before = last.remove(&uid);
        let mut p = Some(p);
        if let Some((_, waiting)) = &before {
            if let Some(w) = waiting.lock().expect("status patch lock").as_mut() {
                p = w.fold(p.take().expect("a patch"));
            }
        }
        let Some(p) = p else {
            last.insert(uid, before.expect("the patch folded into"));
            continue;
        };
        let client = client.clone();
        let slot = Arc::new(Mutex::new(Some(p)));
        let waiting = slot.clone();
        let handle = tokio::spawn(async move {
            if let Some((h, _)) = before {
                let _ = h.await;
            }
            let Some(p) = waiting.lock().expect("status patch lock").take() else { return };
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
            let r = r.map(|_| ()).map_err(|e| e.to_string());
            for ack in p.acks {
                let _ = ack.send(r.clone());
            }
        });
        last.insert(uid, (handle, slot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(strategic: bool, body: serde_json::Value) -> (StatusPatch, oneshot::Receiver<Result<(), String>>) {
        let (ack, done) = oneshot::channel();
        let p = StatusPatch {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            strategic,
            body,
            what: "test",
            acks: vec![ack],
        };
        (p, done)
    }

    fn condition(reason: &str, message: &str) -> serde_json::Value {
        json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": reason, "message": message}]}})
    }

    #[test]
    fn a_pods_waiting_patches_fold_into_what_they_would_set_one_after_the_other() {
        let (mut waiting, mut first) = patch(true, condition("Unschedulable", "0/1 nodes are available"));
        let (newer, mut second) = patch(true, condition("Unschedulable", "0/2 nodes are available"));
        assert!(waiting.fold(newer).is_none());
        let (other_type, _) =
            patch(true, json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}}));
        assert!(waiting.fold(other_type).is_none());
        assert_eq!(
            waiting.body,
            json!({"status": {"conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes are available"},
                {"type": "DisruptionTarget", "status": "True"},
            ]}}),
            "the newer PodScheduled condition replaces the older one; a condition of another type is kept beside it"
        );
        // Every caller is told the outcome of the one write.
        for ack in waiting.acks.drain(..) {
            let _ = ack.send(Ok(()));
        }
        assert_eq!(first.try_recv().unwrap(), Ok(()));
        assert_eq!(second.try_recv().unwrap(), Ok(()));

        // Merge patches: the newer value wins, a null (clearing the nomination) included.
        let (mut nominate, _) = patch(false, json!({"status": {"nominatedNodeName": "n1"}}));
        let (clear, _) = patch(false, json!({"status": {"nominatedNodeName": null}}));
        assert!(nominate.fold(clear).is_none());
        assert_eq!(nominate.body, json!({"status": {"nominatedNodeName": null}}));
        // The two kinds do not fold: the newer one waits for its turn.
        let (strategic, _) = patch(true, condition("Unschedulable", "0/3 nodes are available"));
        let back = nominate.fold(strategic).expect("a strategic patch does not fold into a merge patch");
        assert!(back.strategic);
    }
}
