//! Secure serving as kube-scheduler's: HTTPS only, /healthz for anyone, /metrics and /configz only for users a
//! SubjectAccessReview allows, tokens checked with TokenReviews, on the real API server; and every kube-scheduler
//! flag a manifest may carry is accepted, a misspelled one refused.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{bin, free_port, https_get, wait_until, write_profile, ControlPlane, Kube, Scheduler};

fn kubectl(cp: &ControlPlane, args: &[&str]) -> String {
    let out = Command::new("kubectl").arg("--kubeconfig").arg(cp.kubeconfig()).args(args).output().expect("kubectl");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Every flag of kube-scheduler v1.34 a deployment may carry (and `--port=0`, `--logtostderr`, `--log-file` that
/// older manifests still do), with values that make sense; the ones that mean nothing here are listed apart.
fn upstream_flags(cp: &ControlPlane, work: &Path) -> (Vec<String>, Vec<&'static str>) {
    let kc = cp.kubeconfig().display().to_string();
    let server = std::fs::read_to_string(cp.kubeconfig())
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: ").map(str::to_string))
        .unwrap();
    let flags = vec![
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        format!("--cert-dir={}", work.join("serving-certs").display()),
        format!("--master={server}"),
        "--requestheader-allowed-names=front-proxy-client".into(),
        "--requestheader-username-headers=X-Remote-User".into(),
        "--requestheader-group-headers=X-Remote-Group".into(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        "--authentication-skip-lookup=false".into(),
        "--authentication-tolerate-lookup-failure=true".into(),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez".into(),
        "--authentication-token-webhook-cache-ttl=10s".into(),
        "--authorization-webhook-cache-authorized-ttl=10s".into(),
        "--authorization-webhook-cache-unauthorized-ttl".into(),
        "10s".into(),
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256".into(),
        "--tls-min-version=VersionTLS12".into(),
        "--http2-max-streams-per-connection=100".into(),
        "--permit-port-sharing=false".into(),
        "--permit-address-sharing".into(),
        "--port=0".into(),
        "--logtostderr=true".into(),
        format!("--log-file={}", work.join("unused.log").display()),
        "--feature-gates=SchedulerQueueingHints=true".into(),
        "--profiling=false".into(),
        "--contention-profiling=false".into(),
        "-v=2".into(),
        "--vmodule=schedule_one=4".into(),
        "--logging-format=json".into(),
        "--leader-elect=false".into(),
        "--leader-elect-resource-namespace=kube-system".into(),
        "--kube-api-qps=100".into(),
        "--kube-api-burst=200".into(),
        "--kube-api-content-type=application/vnd.kubernetes.protobuf".into(),
        "--pod-max-in-unschedulable-pods-duration=5m".into(),
        "--show-hidden-metrics-for-version=1.33".into(),
        "--disabled-metrics=scheduler_goroutines".into(),
        "--allow-metric-labels=scheduler_schedule_attempts_total,result=scheduled,unschedulable".into(),
        "--write-config-to=".into(),
    ];
    let no_effect = [
        "--tls-cipher-suites",
        "--logtostderr",
        "--log-file",
        "--feature-gates",
        "--profiling",
        "--contention-profiling",
        "--vmodule",
        "--show-hidden-metrics-for-version",
        "--disabled-metrics",
        "--allow-metric-labels",
        // With --config given, upstream ignores the deprecated client flags; so do we, saying so.
        "--kube-api-qps",
        "--kube-api-burst",
        "--kube-api-content-type",
    ];
    (flags, no_effect.to_vec())
}

pub(crate) fn secure_serving_and_flags(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace("e2e-serving");
    kubectl(cp, &["create", "serviceaccount", "metrics-reader", "-n", "e2e-serving"]);
    kubectl(cp, &["create", "serviceaccount", "nobody", "-n", "e2e-serving"]);
    kubectl(cp, &["create", "clusterrole", "e2e-metrics-get", "--verb=get", "--non-resource-url=/metrics"]);
    kubectl(
        cp,
        &[
            "create",
            "clusterrolebinding",
            "e2e-metrics-get",
            "--clusterrole=e2e-metrics-get",
            "--serviceaccount=e2e-serving:metrics-reader",
        ],
    );
    let reader = kubectl(cp, &["create", "token", "metrics-reader", "-n", "e2e-serving"]);
    let nobody = kubectl(cp, &["create", "token", "nobody", "-n", "e2e-serving"]);

    let profile = write_profile(work, "serving.yaml", "profiles:\n- schedulerName: serving-scheduler\n");
    let (flags, no_effect) = upstream_flags(cp, work);
    let flag_refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    let port = free_port();
    let mut s = Scheduler::start(&cp.kubeconfig(), &profile, port, &flag_refs, work.join("serving.log"));

    let (code, body) = wait_until("healthz over HTTPS", Duration::from_secs(60), || {
        https_get(port, "/healthz", None).filter(|(c, _)| *c == 200)
    });
    assert_eq!((code, body.as_str()), (200, "ok"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));

    // Anonymous: authenticated as system:anonymous, then denied by the SubjectAccessReview (upstream: 403).
    let (code, body) = https_get(port, "/metrics", None).unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("system:anonymous"), "{body}");
    // A ServiceAccount bound to get /metrics reads the metrics.
    let (code, body) = https_get(port, "/metrics", Some(&reader)).unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("scheduler_pending_pods{queue=\"active\"}"), "{body}");
    // A valid token without that permission is forbidden; a token the API server does not know is unauthorized.
    let (code, body) = https_get(port, "/metrics", Some(&nobody)).unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("system:serviceaccount:e2e-serving:nobody"), "{body}");
    let (code, _) = https_get(port, "/metrics", Some("not-a-token")).unwrap();
    assert_eq!(code, 401);
    // /configz is behind the same checks; system:masters passes without a review.
    assert_eq!(https_get(port, "/configz", None).unwrap().0, 403);
    let (code, body) = https_get(port, "/configz", Some(&cp.token())).unwrap();
    assert_eq!(code, 200, "{body}");
    let configz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(configz["componentconfig"]["profiles"][0]["schedulerName"], "serving-scheduler", "{body}");

    zpages(cp, port, &reader);

    // Plain HTTP on the port is answered 400, as Go's HTTPS server does.
    let plain = Command::new("curl")
        .args(["-s", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}/healthz"))
        .output()
        .unwrap();
    let plain_code = String::from_utf8_lossy(&plain.stdout).to_string();
    assert_ne!(plain_code, "200");
    assert_eq!(plain_code, "400");

    // The generated pair was kept under --cert-dir with upstream's names.
    for f in ["kube-scheduler.crt", "kube-scheduler.key"] {
        assert!(work.join("serving-certs").join(f).exists(), "{f} under --cert-dir");
    }

    // Each flag without effect: exactly one warning line naming it; every log line is JSON.
    let log = s.log();
    for line in log.lines() {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "--logging-format=json: {line}");
    }
    for flag in no_effect {
        let n = log.lines().filter(|l| l.contains("WARN") && l.contains(&format!("{flag}:"))).count();
        assert_eq!(n, 1, "one warning for {flag}:\n{log}");
    }
    assert_eq!(s.term(), Some(0), "SIGTERM exits 0:\n{}", s.log());

    // A misspelled flag is refused before anything starts: one line naming it, exit 2.
    let out = Command::new(bin()).arg("--secure-prot=1").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim(), "error: unknown flag: --secure-prot");
    // So is a wrong value.
    for bad in ["--port=10251", "--logging-format=xml", "--kube-api-qps=fast", "--leader-elect=maybe"] {
        let out = Command::new(bin()).arg(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        let flag = bad.split('=').next().unwrap();
        assert!(err.trim().lines().count() == 1 && err.contains(flag), "{bad}: {err}");
    }
}

/// A GET with an Accept header: the code, the Content-Type and the body.
fn https_get_accept(port: u16, path: &str, token: &str, accept: &str) -> (u16, String, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "10", "-A", "e2e", "-w", "\n%{http_code} %{content_type}"])
        .arg("-H")
        .arg(format!("Authorization: Bearer {token}"))
        .arg("-H")
        .arg(format!("Accept: {accept}"))
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, tail) = text.rsplit_once('\n').unwrap();
    let (code, content_type) = tail.split_once(' ').unwrap();
    (code.parse().unwrap(), content_type.to_string(), body.to_string())
}

/// `/flagz` and `/statusz` as kube-scheduler v1.37 serves them: behind the same authorization as `/metrics`, text
/// by default, `config.k8s.io/v1beta1` objects when the Accept header names them, 406 for a bare JSON request.
fn zpages(cp: &ControlPlane, port: u16, reader: &str) {
    for path in ["/flagz", "/statusz"] {
        assert_eq!(https_get(port, path, None).unwrap().0, 403, "anonymous {path}");
        // Allowed /metrics only.
        assert_eq!(https_get(port, path, Some(reader)).unwrap().0, 403, "metrics-reader {path}");
    }
    let admin = cp.token();
    let (code, body) = https_get(port, "/flagz", Some(&admin)).unwrap();
    assert_eq!(code, 200, "{body}");
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines[1], "kube-scheduler flagz", "{body}");
    assert!(lines[2].starts_with("Warning: This endpoint is not meant to be machine parseable"), "{body}");
    let port_line = lines.iter().find(|l| l.starts_with("secure-port")).expect("secure-port listed");
    assert!(port_line.ends_with(&port.to_string()), "{port_line}");
    assert!(!body.contains("\nport") && !body.contains("explain"), "only upstream's flags: {body}");

    let beta = "application/json;as=Flagz;v=v1beta1;g=config.k8s.io";
    let (code, content_type, body) = https_get_accept(port, "/flagz", &admin, beta);
    assert_eq!((code, content_type.as_str()), (200, "application/json;g=config.k8s.io;v=v1beta1;as=Flagz"), "{body}");
    let flagz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((flagz["kind"].as_str(), flagz["metadata"]["name"].as_str()), (Some("Flagz"), Some("kube-scheduler")));
    let flags = &flagz["flags"];
    assert_eq!(flags["feature-gates"], ":SchedulerQueueingHints=true", "{body}");
    assert_eq!(flags["authorization-webhook-cache-unauthorized-ttl"], "10s", "{body}");
    assert_eq!(flags["requestheader-allowed-names"], "[front-proxy-client]", "{body}");
    assert_eq!(flags["leader-elect"], "false", "{body}");
    assert_eq!(flags["profiling"], "false", "{body}");
    assert_eq!(flags["pod-max-in-unschedulable-pods-duration"], "5m0s", "{body}");
    assert!(flags["tls-cert-file"].as_str().unwrap().ends_with("serving-certs/kube-scheduler.crt"), "{body}");

    let (code, body) = https_get(port, "/statusz", Some(&admin)).unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("kube-scheduler statusz") && body.contains("Binary version"), "{body}");
    let statusz = "application/json;as=Statusz;v=v1beta1;g=config.k8s.io";
    let (code, _, body) = https_get_accept(port, "/statusz", &admin, statusz);
    assert_eq!(code, 200, "{body}");
    let s: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(s["apiVersion"], "config.k8s.io/v1beta1");
    assert_eq!(s["paths"], serde_json::json!(["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"]));
    assert!(s["uptimeSeconds"].as_u64().is_some() && s["startTime"].as_str().is_some_and(|t| t.ends_with('Z')));
    // The deprecated version is served too; YAML as well; a bare JSON request names what can be had.
    let alpha = "application/yaml;as=Statusz;v=v1alpha1;g=config.k8s.io";
    let (code, content_type, body) = https_get_accept(port, "/statusz", &admin, alpha);
    assert_eq!((code, content_type.as_str()), (200, "application/yaml;g=config.k8s.io;v=v1alpha1;as=Statusz"));
    assert!(body.contains("apiVersion: config.k8s.io/v1alpha1"), "{body}");
    let (code, _, body) = https_get_accept(port, "/flagz", &admin, "application/json");
    assert_eq!(code, 406, "{body}");
    assert!(body.contains("application/json, application/yaml, text/plain"), "{body}");
}

/// Anonymous requests for paths nobody may read are each a SubjectAccessReview; with a low `clientConnection.qps`
/// they must not queue in front of the scheduler's own requests. Counted, not timed: what each client sent
/// (`kws_rest_client_requests_total`) while 16 threads flood random paths and 20 pods are bound.
pub(crate) fn an_anonymous_flood_does_not_spend_the_scheduling_rate_limit(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace("e2e-flood");
    k.node("flood-1", serde_json::json!({"e2e": "flood"}));
    let profile = write_profile(
        work,
        "flood.yaml",
        "clientConnection:\n  qps: 5\n  burst: 5\nprofiles:\n- schedulerName: flood-scheduler\n",
    );
    let port = free_port();
    let s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("flood.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    let token = cp.token();
    let sent = |client: &str| -> u64 {
        let m = wait_until("/metrics", Duration::from_secs(60), || {
            https_get(port, "/metrics", Some(&token)).filter(|(c, _)| *c == 200).map(|(_, m)| m)
        });
        super::counter(&m, "kws_rest_client_requests_total", &[("client", client)])
    };
    let (sched0, authz0) = (sent("scheduler"), sent("authorization"));

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..16)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut answered = 0u64;
                let mut round = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    round += 1;
                    // Ten random paths on one kept-alive connection per curl: no review is answered from the cache.
                    let urls: Vec<String> =
                        (0..10).map(|i| format!("https://127.0.0.1:{port}/flood/{t}-{round}-{i}")).collect();
                    let out = Command::new("curl")
                        // Bodies after the first URL's go to stdout too: the code goes on a line of its own.
                        .args(["-sk", "--max-time", "1", "-o", "/dev/null", "-w", "\n%{http_code}\n"])
                        .args(&urls)
                        .output()
                        .unwrap();
                    answered += String::from_utf8_lossy(&out.stdout).lines().filter(|c| *c == "403").count() as u64;
                }
                answered
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    for i in 0..20 {
        k.pod("e2e-flood", &format!("f{i}"), Some("flood-scheduler"));
    }
    for i in 0..20 {
        k.wait_bound("e2e-flood", &format!("f{i}"));
    }
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let forbidden: u64 = flood.into_iter().map(|t| t.join().unwrap()).sum();
    let (sched, authz) = (sent("scheduler") - sched0, sent("authorization") - authz0);
    eprintln!("e2e: flood: {forbidden} anonymous requests refused; scheduler client {sched}, review client {authz}");
    // 20 bindings and a little slack for the informers: the reviews went elsewhere.
    assert!(sched <= 60, "the scheduling client sent {sched} requests during the flood ({forbidden} refusals)");
    assert!(forbidden >= 100, "the flood was answered: {forbidden} refusals");
    assert!(authz >= forbidden / 2, "the reviews were counted on the review client: {authz} for {forbidden}");
    drop(s);
}
