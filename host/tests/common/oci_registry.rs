//! The CNCF distribution registry for tests (built from the Go module proxy by scripts/build-registry.sh, cached
//! under ~/.cache/kube-wasm-scheduler/registry), on a free 127.0.0.1 port, and `plugin push` into it. Shared by the
//! integration and end-to-end tests (each includes this file).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A fresh directory for one registry.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kws-registry-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The registry binary, built on first use (`make test` builds it beforehand through the same script).
pub fn registry_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(root().join("scripts/build-registry.sh")).stderr(Stdio::inherit()).output().unwrap();
        assert!(out.status.success(), "scripts/build-registry.sh failed");
        let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().lines().last().unwrap().trim());
        assert!(path.exists(), "{}", path.display());
        path
    })
}

/// The CNCF distribution registry on a free 127.0.0.1 port with its storage in a temporary directory; stopped and
/// removed on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// Its configuration and storage.
    pub dir: PathBuf,
}

impl Registry {
    /// A registry with the default configuration.
    pub fn start(name: &str) -> Registry {
        Registry::start_with(name, "")
    }

    /// A registry with more configuration (YAML lines at the top level; `DIR` stands for its directory).
    pub fn start_with(name: &str, extra: &str) -> Registry {
        let dir = temp_dir(&format!("registry-{name}"));
        let host = format!("127.0.0.1:{}", free_port());
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp: {{addr: {host}}}\n{}",
                dir.join("data").display(),
                extra.replace("DIR", &dir.display().to_string()),
            ),
        )
        .unwrap();
        let child = Command::new(registry_bin())
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("registry.log")).unwrap())
            .spawn()
            .unwrap();
        let r = Registry { child, host, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        // 401 when the registry asks for credentials: it answers.
        while !matches!(http_status(&r.host, "/v2/"), Some(200 | 401)) {
            assert!(Instant::now() < deadline, "the registry did not answer /v2/ on {}", r.host);
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }

    /// `oci://127.0.0.1:PORT/kws-test/NAME-…:TAG`.
    pub fn tag(&self, repo: &str, tag: &str) -> String {
        format!("oci://{}/{repo}:{tag}", self.host)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The status of a plain HTTP GET, or None while nothing answers.
fn http_status(host: &str, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `kube-wasm-scheduler plugin push FILE REFERENCE`; the manifest digest it pushed.
pub fn push(file: &Path, reference: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args(["plugin", "push"])
        .arg(file)
        .arg(reference)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "plugin push: {err}");
    let digest = err.split("(manifest ").nth(1).unwrap().trim_end().trim_end_matches(')').to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{err}");
    digest
}
