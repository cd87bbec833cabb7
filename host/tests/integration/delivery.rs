//! Plugin delivery (issue 14) against real servers on 127.0.0.1, started and stopped by each test: an HTTPS
//! server with a self-signed certificate, and the CNCF distribution registry (built from the Go module proxy by
//! scripts/build-registry.sh, cached under ~/.cache/kube-wasm-scheduler/registry). Components pulled by tag and by
//! digest, `plugin push` then `plugin pull`, a moved tag hot-reloaded, refused versions (digest mismatch, not a
//! component, unreachable registry) leaving the old version serving, `failurePolicy` at start, and the plugin
//! cache surviving a restart with no recompile.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_wasm_scheduler::sim::{self, SimOptions, Simulation};
use kube_wasm_scheduler::wasm::{self, engine::sha256_hex, source::OciRef, ComponentInfo, WasmPlugin};

use crate::oci_registry::{push, Registry};
use crate::util::*;
use crate::wasm::{add_pod, guest, label_profile, node_yaml, registry_for};

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_kube-wasm-scheduler")
}

/// A fresh directory for one test.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kws-delivery-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A repository name no earlier run used (the plugin cache outlives registries, whose ports repeat).
pub(crate) fn unique_repo(name: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("kws-test/{name}-{}-{nanos}", std::process::id())
}

/// An HTTPS server on a free 127.0.0.1 port with a self-signed certificate for 127.0.0.1, serving fixed files and
/// counting the requests; stopped on drop.
struct HttpsServer {
    port: u16,
    ca_file: PathBuf,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl HttpsServer {
    fn start(dir: &Path, files: HashMap<String, Vec<u8>>) -> HttpsServer {
        let (pem, config) = crate::util::self_signed_tls(&["127.0.0.1"]);
        let ca_file = dir.join("server.pem");
        std::fs::write(&ca_file, pem).unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (hits, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (h, st) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok((tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = tcp.set_nonblocking(false);
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
                let Ok(conn) = rustls::ServerConnection::new(config.clone()) else { continue };
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && tls.read(&mut byte).map(|n| n == 1).unwrap_or(false) {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                h.fetch_add(1, Ordering::SeqCst);
                let (status, body) = match files.get(&path) {
                    Some(b) => ("200 OK", b.clone()),
                    None => ("404 Not Found", b"not found".to_vec()),
                };
                let _ = write!(tls, "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = tls.write_all(&body);
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.conn.complete_io(&mut tls.sock);
            }
        });
        HttpsServer { port, ca_file, hits, stop }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Two labelled nodes and one pod: priority-label sends it to `high`, the inverted build to `low`.
pub(crate) fn label_cluster() -> String {
    node_yaml("low", Some("10")) + &node_yaml("high", Some("90")) + &pod_yaml("p1", "")
}

/// Writes a profile whose PriorityLabel plugin comes from `component` and the cluster beside it.
pub(crate) fn write_inputs(dir: &Path, component: &str, extra_args: &str) -> (PathBuf, PathBuf) {
    let (profile, cluster) = (dir.join("profile.yaml"), dir.join("cluster.yaml"));
    std::fs::write(&profile, label_profile(Path::new(component), extra_args)).unwrap();
    std::fs::write(&cluster, label_cluster()).unwrap();
    (profile, cluster)
}

/// `simulate` with a plugin cache of the test's own (and `env`), timed.
pub(crate) fn simulate_bin(profile: &Path, cluster: &Path, cache: &Path, env: &[(&str, &Path)]) -> (Output, Duration) {
    let mut c = Command::new(bin());
    c.args(["simulate", "--output", "json", "--config"]).arg(profile).arg("--cluster").arg(cluster);
    c.env("KWS_PLUGIN_CACHE", cache).env("KWS_LOG", "kube_wasm_scheduler::wasm=info");
    for (k, v) in env {
        c.env(k, v);
    }
    let start = Instant::now();
    let out = c.output().unwrap();
    (out, start.elapsed())
}

/// The node p1 went to in a `simulate --output json` run.
pub(crate) fn placed(out: &Output) -> Option<String> {
    assert!(out.status.success(), "simulate failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = report["placements"].as_array().unwrap().iter().find(|p| p["pod"] == "default/p1").unwrap();
    p["node"].as_str().map(str::to_string)
}

/// A bad-input refusal: exit code 2, one line on stderr, naming `what`.
pub(crate) fn assert_refused(out: &Output, what: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(last.starts_with("error: "), "{err}");
    for w in what {
        assert!(last.contains(w), "{w:?} not in {last:?}");
    }
}

pub(crate) fn sha(file: &Path) -> String {
    sha256_hex(&std::fs::read(file).unwrap())
}

#[test]
fn an_https_component_is_pinned_by_sha256_cached_and_refused_on_mismatch() {
    let dir = temp_dir("https");
    let cache = dir.join("cache");
    let body = std::fs::read(guest("priority-label")).unwrap();
    let server = HttpsServer::start(&dir, HashMap::from([("/p/priority-label.wasm".to_string(), body)]));
    let url = server.url("/p/priority-label.wasm");
    let trust = [("SSL_CERT_FILE", server.ca_file.as_path())];

    let pinned = format!("      sha256: {}\n", sha(&guest("priority-label")));
    let (profile, cluster) = write_inputs(&dir, &url, &pinned);
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &trust);
    assert_eq!(placed(&out).as_deref(), Some("high"));
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);

    // IfNotPresent (the default): a second start takes the cached copy, no request.
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &trust);
    assert_eq!(placed(&out).as_deref(), Some("high"));
    assert_eq!(server.hits.load(Ordering::SeqCst), 1, "served from the plugin cache");
    // Always: downloaded again.
    let (profile, _) = write_inputs(&dir, &url, &format!("{pinned}      pullPolicy: Always\n"));
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &trust);
    assert_eq!(placed(&out).as_deref(), Some("high"));
    assert_eq!(server.hits.load(Ordering::SeqCst), 2);

    // A digest the download does not have: refused before anything runs, naming the plugin and the source.
    let wrong = format!("      sha256: {}\n      pullPolicy: Always\n", "0".repeat(64));
    let (profile, _) = write_inputs(&dir, &url, &wrong);
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &trust);
    assert_refused(&out, &["\"PriorityLabel\"", &url, "the profile pins 0000"]);

    // No sha256: refused at config load, naming the field.
    let (profile, _) = write_inputs(&dir, &url, "");
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &trust);
    assert_refused(&out, &["sha256: required for an https component"]);

    // A server whose certificate is not trusted: refused, naming the source.
    let (profile, _) = write_inputs(&dir, &url, &format!("{pinned}      pullPolicy: Always\n"));
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &url]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn push_then_pull_by_tag_and_by_digest() {
    let reg = Registry::start("push-pull");
    let dir = temp_dir("push-pull");
    let tag = reg.tag(&unique_repo("priority-label"), "v1");
    let manifest = push(&guest("priority-label"), &tag);

    let by_digest = format!("{}@{manifest}", tag.rsplit_once(':').unwrap().0);
    for reference in [&tag, &by_digest] {
        let out_file = dir.join("pulled.wasm");
        let out = Command::new(bin()).args(["plugin", "pull", reference, "-o"]).arg(&out_file).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{reference}: {err}");
        assert!(err.contains(&sha(&guest("priority-label"))), "{err}");
        assert_eq!(std::fs::read(&out_file).unwrap(), std::fs::read(guest("priority-label")).unwrap());
        assert!(String::from_utf8_lossy(&out.stdout).contains("extension points: Filter, Score"));
        std::fs::remove_file(&out_file).unwrap();
    }

    // The scheduler loads it by tag and by digest.
    let cache = dir.join("cache");
    for reference in [&tag, &by_digest] {
        let (profile, cluster) = write_inputs(&dir, reference, "");
        let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
        assert_eq!(placed(&out).as_deref(), Some("high"), "{reference}");
    }

    // Bad input: one line, exit code 2.
    let not_a_component = dir.join("x.wasm");
    std::fs::write(&not_a_component, b"\0asm garbage").unwrap();
    let out = Command::new(bin()).args(["plugin", "push"]).arg(&not_a_component).arg(&tag).output().unwrap();
    assert_refused(&out, &["x.wasm"]);
    let out = Command::new(bin()).args(["plugin", "pull", "https://example.com/x", "-o", "x.wasm"]).output().unwrap();
    assert_refused(&out, &["is not an oci:// reference"]);
    let missing = reg.tag(&unique_repo("missing"), "v1");
    let out = Command::new(bin()).args(["plugin", "pull", &missing, "-o"]).arg(dir.join("m.wasm")).output().unwrap();
    assert_refused(&out, &[&missing]);
    assert!(!dir.join("m.wasm").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The running plugin serving `source`.
fn running(source: &str) -> Arc<WasmPlugin> {
    wasm::loaded_plugins().into_iter().find(|p| p.component().to_string() == source).expect("the running plugin")
}

/// Schedules one more pod and returns its node.
fn place_one(s: &Simulation, name: &str) -> String {
    add_pod(s, name);
    let r = s.run();
    node_of(&r, &format!("default/{name}"))
        .unwrap_or_else(|| panic!("{name}: {}", message_of(&r, &format!("default/{name}"))))
}

/// Waits (up to 30 s) until `done` holds.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A simulation whose PriorityLabel comes from an OCI tag re-checked every second.
fn tag_simulation(tag: &str, extra_args: &str) -> Simulation {
    let args = format!("      pullPolicy: Always\n      recheckInterval: 1s\n{extra_args}");
    let (reg, cfg) = registry_for(&label_profile(Path::new(tag), &args));
    let file = sim::load::parse("c.yaml", &(node_yaml("low", Some("10")) + &node_yaml("high", Some("90")))).unwrap();
    Simulation::new(
        &cfg,
        &reg,
        &file,
        &SimOptions { reload_period: Some(Duration::from_millis(50)), ..Default::default() },
    )
    .unwrap()
}

#[test]
fn a_moved_tag_hot_reloads_the_new_version_and_a_non_component_keeps_it_serving() {
    let reg = Registry::start("moved");
    let tag = reg.tag(&unique_repo("moved"), "stable");
    push(&guest("priority-label"), &tag);
    let s = tag_simulation(&tag, "");
    assert_eq!(place_one(&s, "before"), "high");
    let p = running(&tag);
    assert_eq!(p.digest(), sha(&guest("priority-label")));

    push(&guest("priority-label-inverted"), &tag);
    // Counted once swapped in: waiting for the count, not the digest, leaves nothing racing the assertions.
    wait_for("the moved tag to be swapped in", || p.stats.reloads.load(Ordering::Relaxed) >= 1);
    assert_eq!(p.digest(), sha(&guest("priority-label-inverted")));
    assert_eq!(place_one(&s, "after"), "low", "decisions follow the new version");
    assert_eq!(p.stats.reloads.load(Ordering::Relaxed), 1);

    // The tag moves to an artifact of the Wasm layout whose layer is not a component: refused, counted, and the
    // inverted version keeps serving.
    let r = OciRef::parse(tag.strip_prefix("oci://").unwrap()).unwrap();
    wasm::source::oci::push(b"\0asm\x0d\0\x01\0 not a component".to_vec(), &ComponentInfo::default(), &r, None)
        .unwrap();
    wait_for("the refusal", || p.stats.reload_failures.load(Ordering::Relaxed) >= 1);
    assert_eq!(place_one(&s, "refused"), "low");
    assert_eq!(p.digest(), sha(&guest("priority-label-inverted")));
    // Judged once per move: the next re-checks do not pull it again.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(p.stats.reload_failures.load(Ordering::Relaxed), 1);

    // An unreachable registry: every re-check is refused and reported, and the running version keeps serving.
    drop(reg);
    let failures = p.stats.reload_failures.load(Ordering::Relaxed);
    wait_for("a failed re-check", || p.stats.reload_failures.load(Ordering::Relaxed) > failures);
    assert_eq!(place_one(&s, "unreachable"), "low");
}

#[test]
fn a_moved_tag_that_does_not_match_the_pinned_digest_keeps_the_old_version_serving() {
    let reg = Registry::start("pinned");
    let tag = reg.tag(&unique_repo("pinned"), "stable");
    push(&guest("priority-label"), &tag);
    let s = tag_simulation(&tag, &format!("      sha256: {}\n", sha(&guest("priority-label"))));
    assert_eq!(place_one(&s, "before"), "high");
    let p = running(&tag);
    // What the live scheduler turns into a Warning Event on its Lease.
    let refusals: Arc<Mutex<Vec<String>>> = Arc::default();
    let (seen, source) = (refusals.clone(), tag.clone());
    wasm::observe_refusals(Arc::new(move |r| {
        if r.source.to_string() == source {
            seen.lock().unwrap().push(format!("{}: {}", r.plugin, r.error));
        }
    }));

    push(&guest("priority-label-inverted"), &tag);
    wait_for("the refusal", || p.stats.reload_failures.load(Ordering::Relaxed) >= 1);
    assert_eq!(place_one(&s, "after"), "high", "the pinned version keeps serving");
    assert_eq!(p.digest(), sha(&guest("priority-label")));
    assert_eq!(p.stats.reloads.load(Ordering::Relaxed), 0);
    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    let want = format!("PriorityLabel: {tag}: sha256 is {}, the profile pins", sha(&guest("priority-label-inverted")));
    assert!(refusals[0].starts_with(&want), "{refusals:?}");
}

#[test]
fn failure_policy_decides_whether_the_scheduler_starts_without_an_unreachable_plugin() {
    let dir = temp_dir("unreachable");
    let cache = dir.join("cache");
    // Nothing listens on this port.
    let source = format!("oci://127.0.0.1:{}/{}:v1", free_port(), unique_repo("gone"));
    let (profile, cluster) = write_inputs(&dir, &source, "");
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &source]);

    let (profile, _) = write_inputs(&dir, &source, "      failurePolicy: Ignore\n");
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wasm plugin unavailable") && err.contains(&source), "{err}");
    // Without the plugin both nodes score alike; the pod is scheduled.
    assert!(placed(&out).is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unavailable_plugin_with_failure_policy_ignore_is_left_out_of_the_points_it_is_enabled_at() {
    let source = format!("oci://127.0.0.1:{}/{}:v1", free_port(), unique_repo("gone"));
    let points = format!(
        "    filter:\n      enabled: [{{name: PriorityLabel}}]\n    score:\n      enabled: [{{name: PriorityLabel, weight: 2}}]\n  pluginConfig:\n  - name: PriorityLabel\n    args:\n      component: {source}\n      failurePolicy: Ignore\n"
    );
    let (reg, cfg) = registry_for(&profile(&points));
    let file = sim::load::parse("c.yaml", &label_cluster()).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).expect("the profile runs without it");
    let fwk = s.scheduler().profiles.get("default-scheduler").unwrap().clone();
    use kube_wasm_scheduler::framework::ExtensionPoint;
    assert!(fwk.plugins_at(ExtensionPoint::Filter).is_empty() && fwk.plugins_at(ExtensionPoint::Score).is_empty());
    assert!(node_of(&s.run(), "default/p1").is_some());

    // With failurePolicy Fail the same profile is refused.
    let (reg, cfg) = registry_for(&profile(&points.replace("Ignore", "Fail")));
    let e = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).err().expect("refused");
    assert!(e.to_string().contains(&source), "{e}");
}

#[test]
fn the_plugin_cache_survives_a_restart_with_no_download_and_no_recompile() {
    let reg = Registry::start("restart");
    let dir = temp_dir("restart");
    let cache = dir.join("cache");
    let py = guest("priority-label-py");
    let tag = reg.tag(&unique_repo("priority-label-py"), "v1");
    push(&py, &tag);
    // An interpreter starts in milliseconds, beyond the 100 ms default on a busy machine: what a Python guest's
    // author configures (the README says so), and what this test is not about.
    let (profile, cluster) = write_inputs(&dir, &tag, "      timeout: 2s\n");

    let (cold, cold_time) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_eq!(placed(&cold).as_deref(), Some("high"));
    let err = String::from_utf8_lossy(&cold.stderr);
    assert!(err.contains("component compiled"), "{err}");

    // The registry is gone: the restart needs neither it nor the compiler.
    drop(reg);
    let (warm, warm_time) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_eq!(placed(&warm).as_deref(), Some("high"));
    let err = String::from_utf8_lossy(&warm.stderr);
    assert!(err.contains("component loaded precompiled from the plugin cache (no compile)"), "{err}");
    assert!(!err.contains("component compiled"), "{err}");
    eprintln!(
        "priority-label-py ({} bytes) from {tag}: first start {cold_time:?} (pull + compile), restart {warm_time:?} (plugin cache)",
        std::fs::metadata(&py).unwrap().len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cosign key pair (ECDSA P-256, what `cosign generate-key-pair` makes), its public key written as `cosign.pub`.
pub(crate) struct CosignKey {
    pair: ring::signature::EcdsaKeyPair,
    pub(crate) public_pem: PathBuf,
}

pub(crate) fn cosign_key(dir: &Path, name: &str) -> CosignKey {
    use base64::Engine as _;
    use ring::signature::KeyPair as _;
    let rng = ring::rand::SystemRandom::new();
    let alg = &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING;
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let pair = ring::signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    // SubjectPublicKeyInfo: id-ecPublicKey, prime256v1, then the uncompressed point.
    let mut der: Vec<u8> = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48,
        0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]
    .to_vec();
    der.extend_from_slice(pair.public_key().as_ref());
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let public_pem = dir.join(format!("{name}.pub"));
    std::fs::write(&public_pem, format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n")).unwrap();
    CosignKey { pair, public_pem }
}

/// Signs the manifest `digest` of `tag`'s repository as `cosign sign --key` does (cosign's SIGNATURE_SPEC: a
/// simple-signing payload, its signature in an annotation, under the tag `sha256-HEX.sig`).
pub(crate) fn cosign_sign(tag: &str, digest: &str, key: &CosignKey) {
    use base64::Engine as _;
    use oci_client::client::{Config, ImageLayer};
    let r = oci_client::Reference::try_from(tag.strip_prefix("oci://").unwrap()).unwrap();
    let payload = serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": format!("{}/{}", r.registry(), r.repository())},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": null,
    }))
    .unwrap();
    let sig = key.pair.sign(&ring::rand::SystemRandom::new(), &payload).unwrap();
    let annotations = std::collections::BTreeMap::from([(
        "dev.cosignproject.cosign/signature".to_string(),
        base64::engine::general_purpose::STANDARD.encode(sig.as_ref()),
    )]);
    let layers = vec![ImageLayer::new(
        payload,
        "application/vnd.dev.cosign.simplesigning.v1+json".to_string(),
        Some(annotations),
    )];
    let config = Config {
        data: b"{}".to_vec().into(),
        media_type: "application/vnd.oci.image.config.v1+json".into(),
        annotations: None,
    };
    let sig_ref = oci_client::Reference::with_tag(
        r.registry().to_string(),
        r.repository().to_string(),
        format!("{}.sig", digest.replace(':', "-")),
    );
    // oci-client's reqwest has no crypto provider of its own (as in the scheduler): ring's, before the client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    });
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        client.push(&sig_ref, &layers, config, &oci_client::secrets::RegistryAuth::Anonymous, None).await.unwrap();
    });
}

#[test]
fn a_component_signed_with_the_cosign_key_loads_and_an_unsigned_or_foreign_one_is_refused() {
    let reg = Registry::start("signed");
    let dir = temp_dir("signed");
    let cache = dir.join("cache");
    let (key, other) = (cosign_key(&dir, "cosign"), cosign_key(&dir, "other"));
    let tag = reg.tag(&unique_repo("signed"), "v1");
    let manifest = push(&guest("priority-label"), &tag);
    let args = format!("      signature: {{key: {}}}\n      pullPolicy: Always\n", key.public_pem.display());
    let (profile, cluster) = write_inputs(&dir, &tag, &args);

    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &tag, "signature refused: no cosign signature of"]);

    cosign_sign(&tag, &manifest, &other);
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &tag, "does not verify with the key"]);

    cosign_sign(&tag, &manifest, &key);
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_eq!(placed(&out).as_deref(), Some("high"));

    // A key that is not one: refused at config load, naming the field.
    std::fs::write(&key.public_pem, "not a key").unwrap();
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_refused(&out, &["signature.key: ", "not a PEM public key"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn registry_credentials_come_from_a_docker_config_file() {
    // htpasswd (bcrypt) for kws / s3cret-pw, made once with Python's crypt: no tool is needed at test time.
    const HTPASSWD: &str = "kws:$2b$12$iw3lLR7Ulf7E6L7tGlgCoO1k8raApH3RRb/NDwEZCr4CqoCeQlvLa\n";
    let reg = Registry::start_with("auth", "auth:\n  htpasswd: {realm: kws, path: DIR/htpasswd}\n");
    std::fs::write(reg.dir.join("htpasswd"), HTPASSWD).unwrap();
    let dir = temp_dir("auth");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        format!(r#"{{"auths": {{"{}": {{"username": "kws", "password": "s3cret-pw"}}}}}}"#, reg.host),
    )
    .unwrap();
    let tag = reg.tag(&unique_repo("private"), "v1");

    let out = Command::new(bin()).args(["plugin", "push"]).arg(guest("priority-label")).arg(&tag).output().unwrap();
    assert_refused(&out, &[&tag, "401"]);
    let out = Command::new(bin())
        .args(["plugin", "push", "--docker-config"])
        .arg(&config)
        .arg(guest("priority-label"))
        .arg(&tag)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let cache = dir.join("cache");
    let (profile, cluster) = write_inputs(&dir, &tag, "");
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &tag, "answered 401 Unauthorized"]);
    let auth = format!("      auth: {{dockerConfig: {}}}\n", config.display());
    let (profile, _) = write_inputs(&dir, &tag, &auth);
    let (out, _) = simulate_bin(&profile, &cluster, &cache, &[]);
    assert_eq!(placed(&out).as_deref(), Some("high"));
    let _ = std::fs::remove_dir_all(&dir);
}
