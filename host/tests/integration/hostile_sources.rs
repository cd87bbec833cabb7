//! Plugin delivery against hostile sources (issue 34), each a real server on 127.0.0.1 written here and stopped by
//! its test: a plugin cache others can write to, refs naming paths outside it, registries and https servers that
//! redirect inwards, trickle, send more than they declare or echo what they should not, and an OCI port out of
//! range.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube_wasm_scheduler::wasm::engine::sha256_hex;

use crate::delivery::{
    assert_refused, cosign_key, free_port, placed, simulate_bin, temp_dir, unique_repo, write_inputs,
};
use crate::wasm::guest;

/// A request as a hostile server saw it.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    host: String,
    authorization: Option<String>,
}

/// One answer of a hostile server.
enum Reply {
    /// A status, headers and a body, at once.
    Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// A 200 that declares no length and sends `len` bytes as fast as the client takes them, until it hangs up.
    Flood { len: u64 },
    /// A 200 that declares `declared` bytes and sends one every `every`, for at most `at_most`.
    Trickle { declared: u64, every: Duration, at_most: Duration },
}

impl Reply {
    fn ok(body: Vec<u8>, content_type: &str) -> Reply {
        Reply::Full { status: 200, headers: vec![("Content-Type".into(), content_type.into())], body }
    }

    fn status(status: u16, body: &[u8]) -> Reply {
        Reply::Full { status, headers: vec![], body: body.to_vec() }
    }

    fn redirect(status: u16, location: &str) -> Reply {
        Reply::Full { status, headers: vec![("Location".into(), location.into())], body: vec![] }
    }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// An HTTP/1.1 server on a free 127.0.0.1 port (HTTPS with a self-signed certificate for 127.0.0.1 when asked),
/// answering each connection as its handler says on a thread of its own. It records what it was asked and counts
/// the body bytes it got out; it stops on drop.
struct Hostile {
    port: u16,
    /// For an HTTPS server, its certificate (what `SSL_CERT_FILE` must name).
    ca_file: Option<PathBuf>,
    seen: Arc<Mutex<Vec<Request>>>,
    sent: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

/// One certificate for every hostile HTTPS server, so one `SSL_CERT_FILE` trusts them all.
fn tls_identity() -> &'static (String, Arc<rustls::ServerConfig>) {
    static ID: OnceLock<(String, Arc<rustls::ServerConfig>)> = OnceLock::new();
    ID.get_or_init(|| {
        let (pem, config) = crate::util::self_signed_tls(&["127.0.0.1"]);
        (pem, Arc::new(config))
    })
}

impl Hostile {
    /// A plain HTTP server.
    fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Hostile {
        Hostile::serve(None, Arc::new(handler))
    }

    /// An HTTPS server whose certificate is written to `dir`.
    fn start_tls(dir: &Path, handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Hostile {
        let ca_file = dir.join("hostile-ca.pem");
        std::fs::write(&ca_file, &tls_identity().0).unwrap();
        let mut h = Hostile::serve(Some(tls_identity().1.clone()), Arc::new(handler));
        h.ca_file = Some(ca_file);
        h
    }

    fn serve(tls: Option<Arc<rustls::ServerConfig>>, handler: Handler) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (seen, sent, stop) = (Arc::default(), Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let server = Hostile { port, ca_file: None, seen, sent, stop };
        let (seen, sent, stop) = (server.seen.clone(), server.sent.clone(), server.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let Ok((tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let (tls, handler, seen, sent, stop) =
                    (tls.clone(), handler.clone(), seen.clone(), sent.clone(), stop.clone());
                std::thread::spawn(move || {
                    let _ = tcp.set_nonblocking(false);
                    let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
                    let conn = Conn { handler, seen, sent, stop };
                    match tls {
                        None => conn.answer(&mut { tcp }),
                        Some(config) => {
                            let Ok(server) = rustls::ServerConnection::new(config) else { return };
                            let mut s = rustls::StreamOwned::new(server, tcp);
                            conn.answer(&mut s);
                            s.conn.send_close_notify();
                            let _ = s.conn.complete_io(&mut s.sock);
                        }
                    }
                });
            }
        });
        server
    }

    /// `127.0.0.1:PORT`.
    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One connection of a hostile server.
struct Conn {
    handler: Handler,
    seen: Arc<Mutex<Vec<Request>>>,
    sent: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Conn {
    /// Reads one request and answers it (`Connection: close`: one request a connection).
    fn answer<S: Read + Write>(&self, s: &mut S) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 64 << 10 {
            match s.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let mut lines = head.lines();
        let mut first = lines.next().unwrap_or("").split_whitespace();
        let (method, path) = (first.next().unwrap_or("").to_string(), first.next().unwrap_or("").to_string());
        let header = |name: &str| {
            head.lines().skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let req =
            Request { method, path, host: header("host").unwrap_or_default(), authorization: header("authorization") };
        self.seen.lock().unwrap().push(req.clone());
        match (self.handler)(&req) {
            Reply::Full { status, headers, body } => {
                let mut out = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                if s.write_all(out.as_bytes()).is_err() {
                    return;
                }
                if req.method != "HEAD" {
                    self.body(s, &body);
                }
            }
            Reply::Flood { len } => {
                if s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n").is_err() {
                    return;
                }
                let chunk = vec![b' '; 64 << 10];
                let mut left = len;
                while left > 0 && !self.stop.load(Ordering::SeqCst) {
                    let n = left.min(chunk.len() as u64) as usize;
                    if !self.body(s, &chunk[..n]) {
                        return;
                    }
                    left -= n as u64;
                }
            }
            Reply::Trickle { declared, every, at_most } => {
                let out = format!("HTTP/1.1 200 OK\r\nContent-Length: {declared}\r\nConnection: close\r\n\r\n");
                if s.write_all(out.as_bytes()).is_err() {
                    return;
                }
                let start = Instant::now();
                while start.elapsed() < at_most && !self.stop.load(Ordering::SeqCst) {
                    if !self.body(s, b"x") {
                        return;
                    }
                    std::thread::sleep(every);
                }
            }
        }
    }

    /// Writes body bytes and counts them; false once the client has gone.
    fn body<S: Write>(&self, s: &mut S, bytes: &[u8]) -> bool {
        let ok = s.write_all(bytes).and_then(|()| s.flush()).is_ok();
        if ok {
            self.sent.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        }
        ok
    }
}

const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// A registry's honest answers for one CNCF Wasm artifact in `repo` at the tag `v1`: `/v2/`, its manifest (by tag
/// or digest, GET and HEAD) and its blob; 404 for anything else.
#[derive(Clone)]
struct Artifact {
    repo: String,
    manifest: Vec<u8>,
    manifest_digest: String,
    blob: Vec<u8>,
    layer_digest: String,
}

impl Artifact {
    fn new(repo: &str, blob: Vec<u8>) -> Artifact {
        let (digest, size) = (format!("sha256:{}", sha256_hex(&blob)), blob.len() as u64);
        Artifact::declaring(repo, &digest, size, blob)
    }

    /// An artifact whose manifest declares the layer digest and size it likes.
    fn declaring(repo: &str, layer_digest: &str, layer_size: u64, blob: Vec<u8>) -> Artifact {
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {
                "mediaType": "application/vnd.wasm.config.v0+json",
                "digest": format!("sha256:{}", sha256_hex(b"{}")),
                "size": 2,
            },
            "layers": [{
                "mediaType": "application/vnd.wasm.content.layer.v1+wasm",
                "digest": layer_digest,
                "size": layer_size,
            }],
        }))
        .unwrap();
        Artifact {
            repo: repo.to_string(),
            manifest_digest: format!("sha256:{}", sha256_hex(&manifest)),
            manifest,
            blob,
            layer_digest: layer_digest.to_string(),
        }
    }

    fn is_manifest(&self, req: &Request) -> bool {
        req.path.starts_with(&format!("/v2/{}/manifests/", self.repo))
    }

    fn is_blob(&self, req: &Request) -> bool {
        req.path.starts_with(&format!("/v2/{}/blobs/", self.repo))
    }

    fn answer(&self, req: &Request) -> Reply {
        let manifests = format!("/v2/{}/manifests/", self.repo);
        if req.path == "/v2/" {
            return Reply::ok(b"{}".to_vec(), "application/json");
        }
        if let Some(at) = req.path.strip_prefix(&manifests) {
            if at == "v1" || at == self.manifest_digest {
                return Reply::Full {
                    status: 200,
                    headers: vec![
                        ("Content-Type".into(), MANIFEST_MEDIA_TYPE.into()),
                        ("Docker-Content-Digest".into(), self.manifest_digest.clone()),
                    ],
                    body: self.manifest.clone(),
                };
            }
        }
        if req.path == format!("/v2/{}/blobs/{}", self.repo, self.layer_digest) {
            return Reply::ok(self.blob.clone(), "application/octet-stream");
        }
        Reply::status(404, br#"{"errors":[{"code":"NOT_FOUND","message":"not here"}]}"#)
    }
}

fn component() -> Vec<u8> {
    std::fs::read(guest("priority-label")).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// `simulate` of the label cluster with PriorityLabel from `source`, with the test's own plugin cache.
fn run(dir: &Path, source: &str, extra_args: &str, env: &[(&str, &Path)]) -> (Output, Duration) {
    let (profile, cluster) = write_inputs(dir, source, extra_args);
    simulate_bin(&profile, &cluster, &dir.join("cache"), env)
}

/// Writes into a plugin cache, as someone who can write there would, a blob and a `refs/` file saying that
/// `source` resolved to the layer `layer` (verified with `key_id`).
fn plant(cache: &Path, source: &str, blob: &[u8], layer: &str, key_id: Option<&str>) -> PathBuf {
    let key = oci_client::Reference::try_from(source.strip_prefix("oci://").unwrap()).unwrap().whole();
    for d in ["refs", "blobs/sha256"] {
        std::fs::create_dir_all(cache.join(d)).unwrap();
    }
    std::fs::write(cache.join("blobs/sha256").join(sha256_hex(blob)), blob).unwrap();
    let manifest = format!("sha256:{}", "1".repeat(64));
    let file = cache.join("refs").join(sha256_hex(key.as_bytes()));
    std::fs::write(&file, format!("{key}\n{manifest}\n{layer}\n{}\n", key_id.unwrap_or(""))).unwrap();
    file
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_planted_ref_in_a_foreign_cache_is_not_trusted() {
    let dir = temp_dir("planted");
    let cache = dir.join("cache");
    let key = cosign_key(&dir, "cosign");
    // The key's id is public: whoever plants a ref can claim it was verified with it.
    let key_id = kube_wasm_scheduler::wasm::source::CosignKey::load(&key.public_pem).unwrap().id;
    // Nothing listens there: whatever loads came from the cache.
    let source = format!("oci://127.0.0.1:{}/{}:v1", free_port(), unique_repo("planted"));
    let planted = std::fs::read(guest("priority-label-inverted")).unwrap();
    let ref_file = plant(&cache, &source, &planted, &sha256_hex(&planted), Some(&key_id));
    let blob_file = cache.join("blobs/sha256").join(sha256_hex(&planted));
    let args = format!("      signature: {{key: {}}}\n", key.public_pem.display());
    let dirs = [cache.clone(), cache.join("refs"), cache.join("blobs"), cache.join("blobs/sha256")];
    let private = || {
        dirs.iter().for_each(|d| chmod(d, 0o700));
        [&ref_file, &blob_file].iter().for_each(|f| chmod(f, 0o600));
    };

    // Each place someone else could have written on its own: the cache, refs/, blobs/, the files.
    for (loose, mode) in dirs.iter().map(|d| (d, 0o777)).chain([(&ref_file, 0o666), (&blob_file, 0o666)]) {
        private();
        chmod(loose, mode);
        let (out, _) = run(&dir, &source, &args, &[]);
        assert_refused(&out, &["\"PriorityLabel\"", &source]);
        assert!(stderr(&out).contains("not trusting"), "{}: {}", loose.display(), stderr(&out));
    }

    // The same files in a cache only this user can write: this user's own, so served from it.
    private();
    let (out, _) = run(&dir, &source, &args, &[]);
    assert_eq!(placed(&out).as_deref(), Some("low"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ref_naming_a_path_outside_blobs_is_refused_and_nothing_is_deleted() {
    let dir = temp_dir("traversal");
    let cache = dir.join("cache");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let source = format!("oci://127.0.0.1:{}/{}:v1", free_port(), unique_repo("traversal"));
    // blobs/sha256/../../../victim.txt is the victim.
    plant(&cache, &source, b"whatever", "../../../victim.txt", None);
    for d in ["", "refs", "blobs", "blobs/sha256"] {
        chmod(&cache.join(d), 0o700);
    }
    let (out, _) = run(&dir, &source, "", &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &source]);
    assert_eq!(std::fs::read_to_string(&victim).ok().as_deref(), Some("keep me"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_layer_digest_that_is_not_sha256_hex_never_reaches_a_url() {
    let dir = temp_dir("bad-digest");
    let repo = unique_repo("bad-digest");
    let art = Artifact::declaring(&repo, "sha256:../../../../../../outside", 5, b"hello".to_vec());
    let reg = Hostile::start(move |req| art.answer(req));
    let source = format!("oci://{}/{repo}:v1", reg.host());
    let (out, _) = run(&dir, &source, "", &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &source, "not a sha256 digest"]);
    for r in reg.seen() {
        assert!(r.path == "/v2/" || r.path.starts_with(&format!("/v2/{repo}/")), "{r:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_registry_redirect_to_another_loopback_port_is_refused_and_nothing_there_is_asked() {
    let dir = temp_dir("inner");
    // What sits on another port of the machine: a metadata service, the kubelet, a database's admin page.
    let inner = Hostile::start(|_| Reply::status(404, b"SECRET-inner-credentials"));
    let inner_url = format!("http://127.0.0.1:{}/latest/meta-data/", inner.port);
    for (what, status) in [("manifest", 302), ("blob", 307)] {
        let repo = unique_repo("inner");
        let art = Artifact::new(&repo, component());
        let to = inner_url.clone();
        let reg = Hostile::start(move |req| {
            let redirected = if what == "manifest" { art.is_manifest(req) } else { art.is_blob(req) };
            if redirected {
                Reply::redirect(status, &to)
            } else {
                art.answer(req)
            }
        });
        let source = format!("oci://{}/{repo}:v1", reg.host());
        let (out, _) = run(&dir, &source, "      pullPolicy: Always\n", &[]);
        assert_refused(&out, &["\"PriorityLabel\"", &source, &format!("redirect to {inner_url} refused")]);
        assert!(!stderr(&out).contains("SECRET"), "{what}: {}", stderr(&out));
        assert!(inner.seen().is_empty(), "{what}: {:?}", inner.seen());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_registry_redirect_to_a_link_local_address_is_refused() {
    let dir = temp_dir("metadata");
    let repo = unique_repo("metadata");
    let art = Artifact::new(&repo, component());
    let reg = Hostile::start(move |req| {
        if art.is_blob(req) {
            Reply::redirect(307, "http://169.254.169.254/latest/meta-data/iam/security-credentials/")
        } else {
            art.answer(req)
        }
    });
    let source = format!("oci://{}/{repo}:v1", reg.host());
    let (out, took) = run(&dir, &source, "", &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &source, "169.254.169.254", "refused: a link-local address"]);
    assert!(took < Duration::from_secs(8), "{took:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_registry_redirect_to_its_own_address_is_followed() {
    let dir = temp_dir("redirect-own");
    let repo = unique_repo("redirect-own");
    let art = Artifact::new(&repo, component());
    let blob = art.blob.clone();
    // As a registry whose blobs are served from a storage path of its own.
    let reg = Hostile::start(move |req| {
        if art.is_blob(req) {
            Reply::redirect(307, &format!("http://{}/storage/layer", req.host))
        } else if req.path == "/storage/layer" {
            Reply::ok(blob.clone(), "application/octet-stream")
        } else {
            art.answer(req)
        }
    });
    let source = format!("oci://{}/{repo}:v1", reg.host());
    let (out, _) = run(&dir, &source, "", &[]);
    assert_eq!(placed(&out).as_deref(), Some("high"), "{}", stderr(&out));
    assert!(reg.seen().iter().any(|r| r.path == "/storage/layer"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where a redirecting server sends a request, given its own `host:port`.
type Target = dyn Fn(&str) -> String + Send + Sync;

#[test]
fn an_https_redirect_to_another_loopback_port_or_to_plain_http_is_refused() {
    let dir = temp_dir("https-redirect");
    let body = component();
    let pin = format!("      sha256: {}\n", sha256_hex(&body));
    // Another server of the machine, which even serves the right bytes.
    let other = Hostile::start_tls(&dir, move |_| Reply::ok(body.clone(), "application/wasm"));
    let plain = Hostile::start(|_| Reply::status(404, b"SECRET-plain"));
    // Where each front server sends the request, and why that is refused.
    let (other_host, plain_host) = (other.host(), plain.host());
    let cases: [(Box<Target>, &str); 3] = [
        (Box::new(move |_| format!("https://{other_host}/x.wasm")), "a loopback address other than the source's own"),
        (Box::new(|own| format!("http://{own}/x.wasm")), "a downgrade from https to plain http"),
        (Box::new(move |_| format!("http://{plain_host}/x.wasm")), "a downgrade from https to plain http"),
    ];
    for (target, why) in cases {
        let front = Hostile::start_tls(&dir, move |req| Reply::redirect(302, &target(&req.host)));
        let url = format!("https://{}/priority-label.wasm", front.host());
        let (out, _) = run(&dir, &url, &pin, &[("SSL_CERT_FILE", front.ca_file.as_deref().unwrap())]);
        assert_refused(&out, &["\"PriorityLabel\"", &url, "redirect to", &format!("refused: {why}")]);
        assert!(!stderr(&out).contains("SECRET"), "{why}: {}", stderr(&out));
        assert!(other.seen().is_empty() && plain.seen().is_empty(), "{why}: the target was asked");
        assert_eq!(front.seen().len(), 1, "{why}: {:?}", front.seen());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 2 MiB error body with a terminal escape, carriage returns and newlines in its first line.
fn noisy_body() -> Vec<u8> {
    let mut b = b"{\"errors\":[{\"code\":\"DENIED\"}]}\n\x1b[31mred\r\nFAKE LOG LINE level=error\n".to_vec();
    b.extend(std::iter::repeat_n(b'A', 2 << 20));
    b
}

#[test]
fn an_error_body_is_cut_to_a_short_sanitized_prefix() {
    let dir = temp_dir("error-body");
    let repo = unique_repo("error-body");
    let reg =
        Hostile::start(
            |req| if req.path == "/v2/" { Reply::status(200, b"{}") } else { Reply::status(404, &noisy_body()) },
        );
    let https = Hostile::start_tls(&dir, |_| Reply::status(404, &noisy_body()));
    let pin = format!("      sha256: {}\n", "0".repeat(64));
    let ca = https.ca_file.clone().unwrap();
    let ca = ca.as_path();
    for (source, args) in
        [(format!("oci://{}/{repo}:v1", reg.host()), ""), (format!("https://{}/x.wasm", https.host()), pin.as_str())]
    {
        let (out, _) = run(&dir, &source, args, &[("SSL_CERT_FILE", ca)]);
        assert_refused(&out, &["\"PriorityLabel\"", &source, "answered 404"]);
        let err = stderr(&out);
        assert!(
            err.lines().all(|l| l.len() < 1000),
            "{source}: a line of {} bytes",
            err.lines().map(str::len).max().unwrap()
        );
        assert!(!err.contains('\x1b') && !err.contains('\r'), "{source}: {err:?}");
        assert!(!err.lines().any(|l| l.starts_with("FAKE")), "{source}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_manifest_larger_than_4_mib_is_refused_as_it_streams() {
    let dir = temp_dir("huge-manifest");
    let repo = unique_repo("huge-manifest");
    let art = Artifact::new(&repo, component());
    let reg =
        Hostile::start(move |req| if art.is_manifest(req) { Reply::Flood { len: 256 << 20 } } else { art.answer(req) });
    let source = format!("oci://{}/{repo}:v1", reg.host());
    let (out, _) = run(&dir, &source, "", &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &source, "manifest", "4194304-byte maximum"]);
    // What was read is the bound and what the sockets' buffers hold, not the 256 MiB.
    assert!(reg.sent() < 48 << 20, "{} bytes sent", reg.sent());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_blob_longer_than_its_descriptor_is_cut_off_at_the_declared_size() {
    let dir = temp_dir("long-blob");
    let repo = unique_repo("long-blob");
    let declared = vec![b'x'; 5000];
    let art = Artifact::declaring(&repo, &format!("sha256:{}", sha256_hex(&declared)), 5000, declared);
    let reg =
        Hostile::start(move |req| if art.is_blob(req) { Reply::Flood { len: 256 << 20 } } else { art.answer(req) });
    let source = format!("oci://{}/{repo}:v1", reg.host());
    let (out, _) = run(&dir, &source, "", &[]);
    assert_refused(&out, &["\"PriorityLabel\"", &source, "more than the 5000 bytes"]);
    assert!(reg.sent() < 48 << 20, "{} bytes sent", reg.sent());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_trickling_registry_is_cut_off_at_the_pull_deadline() {
    let dir = temp_dir("trickle");
    let every = Duration::from_millis(200);
    for (what, policy) in [("blob", "Fail"), ("manifest", "Ignore")] {
        let repo = unique_repo("trickle");
        let art = Artifact::new(&repo, component());
        let declared = (if what == "blob" { art.blob.len() } else { art.manifest.len() }) as u64;
        let reg = Hostile::start(move |req| {
            let trickled = if what == "blob" { art.is_blob(req) } else { art.is_manifest(req) };
            if trickled {
                Reply::Trickle { declared, every, at_most: Duration::from_secs(45) }
            } else {
                art.answer(req)
            }
        });
        let source = format!("oci://{}/{repo}:v1", reg.host());
        let args = format!("      pullTimeout: 2s\n      failurePolicy: {policy}\n");
        let (out, took) = run(&dir, &source, &args, &[]);
        assert!(took < Duration::from_secs(15), "{what}: {took:?}: {}", stderr(&out));
        if policy == "Fail" {
            assert_refused(&out, &["\"PriorityLabel\"", &source, "pullTimeout"]);
        } else {
            // Started without the plugin, in time: the pod is placed.
            assert!(placed(&out).is_some());
            assert!(stderr(&out).contains("pullTimeout"), "{}", stderr(&out));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_registry_that_asks_for_a_bearer_token_is_given_one_from_its_realm() {
    use base64::Engine as _;
    let dir = temp_dir("bearer");
    let repo = unique_repo("bearer");
    let art = Artifact::new(&repo, component());
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("kws:pw"));
    let scope = format!("repository:{repo}:pull");
    let reg = Hostile::start(move |req| {
        if req.path.starts_with("/token?") {
            return match req.authorization.as_deref() == Some(basic.as_str()) {
                true => Reply::ok(br#"{"token": "T-123"}"#.to_vec(), "application/json"),
                false => Reply::status(401, b"{}"),
            };
        }
        if req.authorization.as_deref() != Some("Bearer T-123") {
            let challenge = format!(r#"Bearer realm="http://{}/token",service="kws-test",scope="{scope}""#, req.host);
            return Reply::Full { status: 401, headers: vec![("WWW-Authenticate".into(), challenge)], body: vec![] };
        }
        art.answer(req)
    });
    let config = dir.join("config.json");
    std::fs::write(&config, format!(r#"{{"auths": {{"{}": {{"username": "kws", "password": "pw"}}}}}}"#, reg.host()))
        .unwrap();
    let source = format!("oci://{}/{repo}:v1", reg.host());
    let (out, _) = run(&dir, &source, &format!("      auth: {{dockerConfig: {}}}\n", config.display()), &[]);
    assert_eq!(placed(&out).as_deref(), Some("high"), "{}", stderr(&out));
    let seen = reg.seen();
    assert!(seen.iter().any(|r| r.path.starts_with("/token?") && r.path.contains("service=kws-test")), "{seen:?}");
    assert!(seen.iter().any(|r| r.path.contains("/blobs/") && r.authorization.as_deref() == Some("Bearer T-123")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_oci_port_out_of_range_is_refused_at_validation_naming_the_field() {
    let dir = temp_dir("range");
    let source = format!("oci://127.0.0.1:99999/{}:v1", unique_repo("range"));
    let (out, _) = run(&dir, &source, "", &[]);
    assert_refused(&out, &["component: ", "99999", "invalid port number"]);
    assert!(!stderr(&out).contains("clone"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
