//! A server whose certificate is not trusted is one line on stderr, the binary's own, whatever dependency noticed
//! it first: run against a real TLS server on loopback with a self-signed certificate.

use std::process::Command;
use std::sync::Arc;

use tokio::net::TcpListener;

/// A TLS server on 127.0.0.1 with a fresh self-signed certificate; it completes no handshake the client refuses
/// and answers nothing else. Returns its port; it runs until the runtime stops.
fn untrusted_server(rt: &tokio::runtime::Runtime) -> u16 {
    let (_, config) = crate::util::self_signed_tls(&["127.0.0.1", "localhost"]);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(sock).await;
            });
        }
    });
    port
}

#[test]
fn an_untrusted_api_server_certificate_is_one_line() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let port = untrusted_server(&rt);
    let dir = std::env::temp_dir().join(format!("kws-untrusted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // No certificate-authority: the system's roots, which do not vouch for a self-signed certificate.
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n\
             users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .arg("snapshot")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line about the certificate, got:\n{err}");
    assert!(lines[0].starts_with("error: ") && lines[0].contains("certificate"), "{err}");
}
